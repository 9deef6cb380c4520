"""Seconds this process has spent compiling invkin's kernels (wall clock, outermost Numba
``numba:compile`` events only, fed by the listener that :mod:`invkin.cache` installs) and running
them on the interpreter while they compile in the background (:mod:`invkin._tiers`).

A solve driver keeps both out of its ``timeout`` with a :class:`Budget`: a first call's compile
is not the solve's time, and a first solve that runs interpreted gets the iterations a compiled
one would do in its timeout (its deadline moves by the interpreted time, up to
:data:`INTERPRETED_GRACE_S` per solve, so a target that never converges still returns in
seconds).
"""
from __future__ import annotations

_total = [0.0]
_interpreted = [0.0]

#: Interpreted seconds per solve that do not count against its timeout.
INTERPRETED_GRACE_S = 2.0


def compile_seconds() -> float:
    """Seconds spent compiling invkin kernels in this process so far."""
    return _total[0]


def add_compile_seconds(seconds: float) -> None:
    """Add one outermost compile's duration (called by invkin.cache's listener)."""
    _total[0] += seconds


def interpreted_seconds() -> float:
    """Seconds spent running kernels on the interpreter in this process so far."""
    return _interpreted[0]


def add_interpreted_seconds(seconds: float) -> None:
    """Add one interpreted kernel call's duration (called by invkin._tiers)."""
    _interpreted[0] += seconds


class Budget:
    """A solve's deadline (None without a timeout) that moves by the compile time and the
    interpreted time (up to INTERPRETED_GRACE_S) spent in the kernel calls since the last
    :meth:`update`."""

    __slots__ = ("deadline", "_c", "_i", "_grace")

    def __init__(self, deadline: float | None):
        self.deadline = deadline
        self._c = _total[0]
        self._i = _interpreted[0]
        self._grace = INTERPRETED_GRACE_S

    def update(self) -> float:
        """Move the deadline; returns the compile seconds since the last update (for the caller's
        time per iteration, which should not include them)."""
        c, i = _total[0], _interpreted[0]
        compiled = c - self._c
        extra = min(i - self._i, self._grace)
        self._grace -= extra
        self._c, self._i = c, i
        if self.deadline is not None:
            self.deadline += compiled + extra
        return compiled
