"""Diagnostics of a configuration: manipulability, condition number, distance to the limits.

For the geometric Jacobian ``J`` (rows ``vx vy vz wx wy wz`` of ``frame``, or a subset of them,
see ``rows``) with singular values ``σ_1 ≥ … ≥ σ_k`` (k = min(rows, dof)):

* manipulability ``w = sqrt(det(J Jᵀ)) = σ_1 ⋯ σ_k`` (Yoshikawa 1985); 0 at a singularity, and for
  more rows than joints (``det(J Jᵀ)`` is then 0 for any q);
* condition number ``κ = σ_1 / σ_k`` (∞ at a singularity);
* near-singular: ``σ_k < threshold``. The default :data:`NEAR_SINGULAR_THRESHOLD` = 0.01 is in the
  units of J: [m/rad] for position rows (a 1 rad motion moves the frame less than 1 cm in its
  weakest direction), [rad/rad] for rotation rows; ``reach`` and ``Tracker`` use the same rule on
  their task Jacobian.

Position rows are in metres and rotation rows in radians, so with ``rows="all"`` the numbers mix
units and depend on the robot's size; ``rows="position"`` or ``"orientation"`` keeps them pure.
"""
from __future__ import annotations

import numpy as np

from .errors import ConfigurationError
from .solvers.shared import smallest_singular_value  # noqa: F401 - σ_min, re-exported (tests, Tracker)

__all__ = ["manipulability", "condition_number", "singular_values", "distance_to_limits",
           "is_near_singular", "NEAR_SINGULAR_THRESHOLD"]

#: σ_min below this marks a configuration as near-singular [m/rad for position rows].
NEAR_SINGULAR_THRESHOLD = 1e-2

_ROWS = {"all": slice(0, 6), "position": slice(0, 3), "orientation": slice(3, 6)}


def _rows(rows):
    try:
        return _ROWS[rows]
    except (KeyError, TypeError):
        raise ConfigurationError(f"rows: expected 'all', 'position' or 'orientation', got {rows!r}") from None


def _jacobian(robot, q, frame, rows):
    sl = _rows(rows)
    q = robot.check_q(q)
    return robot.jacobian(q, frame)[..., sl, :]


def singular_values(robot, q, frame=None, rows: str = "all") -> np.ndarray:
    """Singular values of the Jacobian of ``frame`` at q, largest first: (k,) or (B, k)."""
    return np.linalg.svd(_jacobian(robot, q, frame, rows), compute_uv=False)


def manipulability(robot, q, frame=None, rows: str = "all"):
    """Yoshikawa's ``w = sqrt(det(J Jᵀ))`` of ``frame`` at q (dof,) → float, or (B, dof) → (B,).

    ``frame`` defaults to the last frame; ``rows`` picks the Jacobian rows ('all', 'position',
    'orientation'). Units: the product of the singular values ([m/rad]^3 for position rows).
    """
    J = _jacobian(robot, q, frame, rows)
    if J.shape[-2] > J.shape[-1]:
        w = np.zeros(J.shape[:-2])
    else:
        w = np.prod(np.linalg.svd(J, compute_uv=False), axis=-1)
    return float(w) if np.ndim(w) == 0 else w


def condition_number(robot, q, frame=None, rows: str = "all"):
    """``σ_max / σ_min`` of the Jacobian of ``frame`` at q; ∞ at a singularity. float or (B,)."""
    s = singular_values(robot, q, frame, rows)
    with np.errstate(divide="ignore", invalid="ignore"):
        k = np.where(s[..., -1] > 1e-15 * np.maximum(s[..., 0], 1e-300), s[..., 0] / s[..., -1], np.inf)
    return float(k) if np.ndim(k) == 0 else k


def is_near_singular(robot, q, frame=None, rows: str = "all", threshold: float = NEAR_SINGULAR_THRESHOLD):
    """True where the smallest singular value of the Jacobian is below ``threshold``."""
    s = singular_values(robot, q, frame, rows)[..., -1] < threshold
    return bool(s) if np.ndim(s) == 0 else s


def distance_to_limits(robot, q) -> np.ndarray:
    """Per entry of q, the distance to the nearer joint limit [rad or m]: ``min(q − lower, upper − q)``.

    +inf for unbounded entries (continuous and ball joints), negative outside the limits.
    (dof,) for q (dof,), (B, dof) for a batch.
    """
    q = robot.check_q(q)
    return np.minimum(q - robot.lower, robot.upper - q)
