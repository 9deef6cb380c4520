"""Seconds this process has spent compiling invkin's kernels (wall clock, outermost Numba
``numba:compile`` events only), fed by the listener that :mod:`invkin.cache` installs.

The solve driver reads :func:`compile_seconds` around each kernel call and moves its deadline by
the compile time spent inside it, so that a first call's compile is not charged to ``timeout``
(a first ``nullspace="manipulability"`` solve compiles its gradient kernels then).
"""
from __future__ import annotations

_total = [0.0]


def compile_seconds() -> float:
    """Seconds spent compiling invkin kernels in this process so far."""
    return _total[0]


def add_compile_seconds(seconds: float) -> None:
    """Add one outermost compile's duration (called by invkin.cache's listener)."""
    _total[0] += seconds
