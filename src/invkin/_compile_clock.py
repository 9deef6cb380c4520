"""Seconds this process has spent compiling invkin's kernels (wall clock, outermost Numba
``numba:compile`` events only, fed by the listener that :mod:`invkin.cache` installs), running
them on the interpreter while they compile in the background (:mod:`invkin._tiers`), and on the
other one-time work of a first call (:func:`setup`): loading machine code from the on-disk cache
(outside Numba's compile event; the general core with collision rows takes ~60 ms, more than a
50 ms solve's budget) and building a collision Check (the robot's collision model and pairs, the
tables: ~0.2 s for G1 with every cache warm).

A solve driver keeps all three out of its ``timeout`` with a :class:`Budget`: a first call's
compile and setup are not the solve's time, and a first solve that runs interpreted gets the
iterations a compiled one would do in its timeout (its deadline moves by the interpreted time, up
to :data:`INTERPRETED_GRACE_S` per solve, shared by its phases inside :class:`one_solve`, so a
target that never converges still returns in seconds).
"""
from __future__ import annotations

import threading
import time

_total = [0.0]
_interpreted = [0.0]
_setup = [0.0]


class _Scope(threading.local):
    """Per thread (class defaults: a missing attribute of a thread-local costs ~0.4 µs, an
    AttributeError, per Budget)."""

    grace = None  # the interpreted grace left to the Budgets of one_solve() (a list)
    depth = 0  # nesting depth of setup(): only the outermost counts


_scope = _Scope()

#: Interpreted seconds per solve that do not count against its timeout.
INTERPRETED_GRACE_S = 2.0


def compile_seconds() -> float:
    """Seconds spent compiling invkin kernels in this process so far."""
    return _total[0]


def add_compile_seconds(seconds: float) -> None:
    """Add one outermost compile's duration (called by invkin.cache's listener)."""
    _total[0] += seconds


def moved_seconds() -> float:
    """Compile and setup seconds in this process so far: what a :class:`Budget` moves its deadline
    by (a caller that starts its clock before the Budget exists passes this, read at its start, as
    ``since``)."""
    return _total[0] + _setup[0]


def setup_seconds() -> float:
    """Seconds of first-call setup (:func:`setup`) in this process so far."""
    return _setup[0]


class setup:  # noqa: N801 (a context manager used as ``with setup():``)
    """``with setup():`` around one-time work of a first call: its wall time, less the compile and
    interpreted seconds counted inside it (those have their own counters), is added to
    :func:`setup_seconds`; nested blocks count once, in the outermost."""

    __slots__ = ("_t", "_c", "_i")

    def __enter__(self):
        _scope.depth += 1
        self._t = time.perf_counter()
        self._c, self._i = _total[0], _interpreted[0]
        return self

    def __exit__(self, *exc):
        _scope.depth -= 1
        if _scope.depth == 0:
            wall = time.perf_counter() - self._t
            _setup[0] += max(wall - (_total[0] - self._c) - (_interpreted[0] - self._i), 0.0)
        return False


def interpreted_seconds() -> float:
    """Seconds spent running kernels on the interpreter in this process so far."""
    return _interpreted[0]


def add_interpreted_seconds(seconds: float) -> None:
    """Add one interpreted kernel call's duration (called by invkin._tiers)."""
    _interpreted[0] += seconds


class one_solve:  # noqa: N801 (a context manager used as ``with one_solve():``)
    """``with one_solve():`` around a solve made of several phases (a collision solve's first
    solve, its rows, its retries, each with its own Budget): the Budgets made inside share one
    INTERPRETED_GRACE_S, so the solve returns within about its timeout plus that (each phase had
    its own before: a first G1 collision solve ran 8-13 s). Nested scopes join the outermost."""

    __slots__ = ("_own",)

    def __enter__(self):
        self._own = _scope.grace is None
        if self._own:
            _scope.grace = [INTERPRETED_GRACE_S]
        return self

    def __exit__(self, *exc):
        if self._own:
            _scope.grace = None
        return False


class Budget:
    """A solve's deadline (None without a timeout) that moves by the compile and setup time and
    the interpreted time (up to INTERPRETED_GRACE_S) spent since the last :meth:`update`."""

    __slots__ = ("deadline", "_c", "_i", "_grace", "_pool")

    def __init__(self, deadline: float | None, since: float | None = None):
        self.deadline = deadline
        self._c = _total[0] + _setup[0] if since is None else since  # (moved_seconds() at the solve's start)
        self._i = _interpreted[0]
        self._grace = INTERPRETED_GRACE_S
        self._pool = _scope.grace  # None, or the grace shared inside one_solve (a list)

    def update(self, started: float | None = None) -> float:
        """Move the deadline; returns the compile and setup seconds since the last update (for the
        caller's time per iteration, which should not include them). ``started``: the
        time.perf_counter() at which the kernel call just made began; when that call compiled, the
        rest of its wall time is not the solve's either (a first call's other one-time work, outside
        Numba's compile event: ~60 ms of G1's general core after its 5 s compile, more than a 50 ms
        budget had left, so a cold first solve ended time_limit after 166 of the 704 iterations it
        needs)."""
        c, i = _total[0] + _setup[0], _interpreted[0]
        compiled = c - self._c
        if started is not None and compiled > 0.0 and self.deadline is not None:
            self.deadline += max(time.perf_counter() - started - compiled - (i - self._i), 0.0)
        pool = self._pool
        left = self._grace if pool is None else pool[0]
        extra = min(i - self._i, left)
        if pool is None:
            self._grace = left - extra
        else:
            pool[0] = left - extra
        self._c, self._i = c, i
        if self.deadline is not None:
            self.deadline += compiled + extra
        return compiled
