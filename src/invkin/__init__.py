"""invkin: inverse kinematics for robots (URDF) and characters (BVH).

>>> import invkin as ik
>>> robot = ik.load_robot("panda")
>>> T = robot.fk(robot.neutral(), "panda_hand")
"""
from __future__ import annotations

from . import spatial
from .errors import (ConfigurationError, FrameError, GoalError, InvkinError, ModelError,
                     SolverError)
from .goals import Aim, CenterOfMass, Goal, Orientation, Pose, Position, Posture, Relative
from .result import BatchResult, Result, Status
from .solve import solve, solve_many
from .solvers import methods
from .model import (JOINT_TYPES, Robot, RobotBuilder, Step, bundled_names, chain_from_dh,
                    chain_from_steps, load_robot)
from .model.bvh import Clip, read_bvh, write_bvh
from .solvers.analytic import two_bone_2d, two_bone_3d
from .animation import (ClipReport, Contact, FootPlant, Reach, correct_clip, detect_contacts,
                        detect_up_axis, foot_sliding)
from . import nullspace
from .diagnostics import condition_number, distance_to_limits, manipulability
from .motion import (ReachResult, RestPoseWarning, RestResult, joint_torques, reach, rest_blend,
                     solve_with_rest)
from .nullspace import refine_in_nullspace
from .tracking import Tracker, TrackStep

__version__ = "0.1.0"

__all__ = [
    "__version__",
    "spatial",
    "InvkinError", "ModelError", "ConfigurationError", "FrameError", "GoalError", "SolverError",
    "Robot", "RobotBuilder", "Step", "JOINT_TYPES", "load_robot", "bundled_names",
    "chain_from_steps", "chain_from_dh",
    "Goal", "Position", "Orientation", "Pose", "Aim", "Posture", "CenterOfMass", "Relative",
    "read_bvh", "write_bvh", "Clip", "two_bone_2d", "two_bone_3d",
    "correct_clip", "detect_contacts", "detect_up_axis", "foot_sliding", "FootPlant", "Reach", "Contact",
    "ClipReport",
    "Result", "BatchResult", "Status", "solve", "solve_many", "methods",
    "reach", "ReachResult", "rest_blend", "solve_with_rest", "RestResult", "RestPoseWarning",
    "joint_torques", "Tracker", "TrackStep", "nullspace", "refine_in_nullspace",
    "manipulability", "condition_number", "distance_to_limits",
]
