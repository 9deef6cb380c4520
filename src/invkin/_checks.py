"""Argument checks shared by the Python-side entry points (motion, nullspace, tracking).

Each raises :class:`~invkin.errors.GoalError` naming the argument and what was expected.
"""
from __future__ import annotations

import math

import numpy as np

from .errors import GoalError


def positive(name, v, unit=""):
    """v as a float, if it is a finite number > 0 (``unit``, e.g. " [m]", goes into the message)."""
    if isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating)) or not v > 0 \
            or not math.isfinite(v):
        raise GoalError(f"{name}: expected a finite number > 0{unit}, got {v!r}")
    return float(v)


def count(name, v, lo=0):
    """v as an int, if it is an integer >= lo (bool is not)."""
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < lo:
        raise GoalError(f"{name}: expected an integer >= {lo}, got {v!r}")
    return int(v)
