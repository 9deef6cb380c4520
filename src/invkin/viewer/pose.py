"""The pose a viewer opens in: ``--q``, an SRDF group state (``--state``), or zeros inside the limits.

The mid-range "neutral" pose of :meth:`Robot.neutral` folds humanoids into shapes nobody
recognises (G1's legs sideways, Talos' arms up); the zero pose of a URDF is the one its author
drew (arms down, legs straight). :func:`start_pose` takes 0 for every joint whose limits hold 0,
the mid-range for the others (Panda's joint 4, whose range is [-3.07, -0.07] rad).
"""
from __future__ import annotations

import numpy as np

from ..model.robot import Robot
from .errors import ViewerError

__all__ = ["start_pose", "named_pose", "parse_q"]


def start_pose(robot: Robot) -> np.ndarray:
    """(dof,) zeros where ``lower <= 0 <= upper``, else the joint's neutral (mid-range) value."""
    inside = (robot.lower <= 0.0) & (robot.upper >= 0.0)
    return np.where(inside, 0.0, robot.neutral())


def named_pose(robot: Robot, name: str) -> np.ndarray:
    """The SRDF group state ``name`` (``--state half_sitting``), through ``robot.named_configuration``
    (set by ``load_robot(..., srdf=...)``, ``--srdf FILE``; no bundled model carries one); a robot
    without SRDF states raises ViewerError."""
    if not robot.named_configurations:
        raise ViewerError(f"--state {name!r}: robot {robot.name!r} carries no SRDF group states; give its "
                          f"SRDF with --srdf FILE, or the pose with --q")
    try:
        q = robot.named_configuration(name)
    except ViewerError:
        raise
    except Exception as exc:  # the SRDF reader's own error names the states it has
        raise ViewerError(f"--state {name!r}: {exc}") from None
    return robot.clamp(robot.check_q(q, f"state {name!r}"))


def parse_q(robot: Robot, text: str) -> np.ndarray:
    """``--q "0 -0.78 0 -2.36 0 1.57 0.78"`` (spaces or commas, [rad] / [m]) as a (dof,) array."""
    toks = text.replace(",", " ").split()
    try:
        q = np.array([float(t) for t in toks])
    except ValueError:
        raise ViewerError(f"--q: expected {robot.dof} numbers separated by spaces or commas, got {text!r}") from None
    if q.shape != (robot.dof,) or not np.all(np.isfinite(q)):
        raise ViewerError(f"--q: robot {robot.name!r} has {robot.dof} DOF ({', '.join(robot.joint_names[:8])}"
                          f"{', ...' if robot.dof > 8 else ''}); got {len(q)} values: {text!r}")
    return q
