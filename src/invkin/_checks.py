"""Argument checks shared by the Python-side entry points (solve, motion, nullspace, tracking,
the goals, the analytic solvers).

Each raises :class:`~invkin.errors.GoalError` (or the error class passed in) naming the argument
and what was expected. The bounds :data:`MAX_LENGTH` [m] and :data:`MAX_ANGLE` [rad] are the
documented limits of what the kinematics accept; seeds are integers in [0, 2**63).
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


# ------------------------------------------------------------------ bounds at the public boundary
#: Largest length accepted anywhere at the boundary (points, offsets, bone lengths, prismatic
#: limits) [m]. Beyond it FK and Jacobians lose every significant digit of a metre-sized robot and
#: products of two lengths (squared distances) overflow float64 near 1e154.
MAX_LENGTH = 1e9
#: Largest angle accepted at the boundary (joint values, revolute limits) [rad]; sin and cos of
#: angles this large keep only ~1e-10 of their relative precision.
MAX_ANGLE = 1e6
#: Seeds are integers in [0, SEED_LIMIT).
SEED_LIMIT = 2**63


_F64 = np.dtype(np.float64)
_SMALL = 16  # entries up to which real_array checks a float64 array in Python floats


def real_array(name, x, error=GoalError, bound=None, unit="") -> np.ndarray:
    """``x`` as a float64 array, refusing what NumPy would silently change or choke on: complex
    values (NumPy drops the imaginary part), strings, None, ragged or object arrays, NaN/inf, and,
    with ``bound``, any entry whose magnitude exceeds it (``unit`` goes into the message)."""
    if type(x) is np.ndarray and x.dtype is _F64 and x.size <= _SMALL:
        # a point or a short vector (every goal has one): its entries as Python floats, whose abs and
        # max cost a fifth of np.abs and np.max on a few entries; the same test and messages
        vals = x.ravel().tolist()
        if not all(map(math.isfinite, vals)):
            raise error(f"{name}: expected finite numbers{unit}, got {x!r:.200}")
        m = max(map(abs, vals)) if vals else 0.0
        if bound is not None and m > bound:
            raise error(f"{name}: expected values within ±{bound:g}{unit}, got {m:g} "
                        f"(larger values overflow or lose all precision in kinematics)")
        return x
    if isinstance(x, (str, bytes)) or x is None:
        raise error(f"{name}: expected numbers{unit}, got {x!r:.200}")
    a = np.asarray(x) if not isinstance(x, np.ndarray) else x
    if a.dtype.kind == "c" or (a.dtype == object and any(isinstance(v, complex) for v in a.ravel()[:1000])):
        raise error(f"{name}: expected real numbers{unit}, got complex values {x!r:.200}")
    if a.dtype.kind not in "biuf":
        try:
            a = np.asarray(a, dtype=np.float64)
        except (TypeError, ValueError, OverflowError):
            raise error(f"{name}: expected numbers{unit}, got {x!r:.200}") from None
    a = a.astype(np.float64, copy=False)
    m = float(np.max(np.abs(a))) if a.size else 0.0  # one reduction: NaN and inf propagate into m
    if not math.isfinite(m):
        raise error(f"{name}: expected finite numbers{unit}, got {x!r:.200}")
    if bound is not None and m > bound:
        raise error(f"{name}: expected values within ±{bound:g}{unit}, got {m:g} "
                    f"(larger values overflow or lose all precision in kinematics)")
    return a


def unit_vector(name, v, error=GoalError) -> np.ndarray:
    """``v`` (3,) scaled to unit length; the vector is divided by its largest entry first, so that
    components up to the float maximum neither overflow nor underflow. Zero is refused."""
    a = real_array(name, v, error)
    if a.shape != (3,):
        raise error(f"{name}: expected a vector of shape (3,), got shape {a.shape}")
    m = float(np.max(np.abs(a)))
    if m == 0.0 or not m > 1e-300:
        raise error(f"{name}: expected a non-zero vector, got {a.tolist()}")
    a = a / m
    return a / float(np.linalg.norm(a))


def seed(name, v, allow_generator: bool = True, allow_none: bool = True):
    """A seed: an int in [0, 2**63), a numpy ``Generator`` or None (where allowed), unchanged.
    bool, float (even 2.0), str, negative and too large values are refused."""
    if v is None and allow_none:
        return v
    if allow_generator and isinstance(v, np.random.Generator):
        return v
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or not 0 <= v < SEED_LIMIT:
        what = "an integer in [0, 2**63)" + (", a numpy Generator" if allow_generator else "") + \
            (" or None" if allow_none else "")
        raise GoalError(f"{name}: expected {what}, got {v!r:.100}")
    return int(v)


def no_unknown_kwargs(where: str, kwargs: dict, known=(), error=GoalError) -> None:
    """Refuse keyword arguments that nothing will read (a typo must not be silently ignored)."""
    unknown = sorted(set(kwargs) - set(known))
    if unknown:
        from .errors import closest_names

        hint = f"; accepted: {', '.join(sorted(known))}" if known else ""
        close = [closest_names(u, known, n=1) for u in unknown] if known else []
        dym = f" (did you mean {', '.join(close)}?)" if close else ""
        raise error(f"{where}: unknown keyword argument(s) {', '.join(map(repr, unknown))}{dym}{hint}")
