"""invkin: inverse kinematics for robots (URDF, MJCF) and characters (BVH, glTF).

>>> import invkin as ik
>>> robot = ik.load_robot("panda")
>>> T = robot.fk(robot.neutral(), "panda_hand")

``import invkin`` loads only this file and :mod:`invkin.errors`: every other public name is
imported on first use (PEP 562 ``__getattr__``), so the import costs milliseconds and a command
pays only for the modules it touches (NumPy and Numba come with the first kernel module).
"""
from __future__ import annotations

import sys
import types

from . import cache as _cache
from .lazy import lazy_exports
from .errors import (ConfigurationError, FileError, FrameError, GoalError, InvkinError, InvkinWarning,
                     ModelError, ModelWarning, SolverError)

__version__ = "0.1.0"

_cache.install()  # compiled kernels go to a user cache folder (invkin.cache); numba stays unloaded

# public name -> module that defines it (relative to this package); a name mapped to None is a
# submodule of that name
_LAZY = {
    "spatial": None, "nullspace": None,
    "Robot": ".model", "RobotBuilder": ".model", "Step": ".model", "JOINT_TYPES": ".model",
    "load_robot": ".model", "load_srdf": ".model", "bundled_names": ".model", "chain_from_steps": ".model",
    "chain_from_dh": ".model", "tentacle": ".model",
    "Goal": ".goals", "Position": ".goals", "Orientation": ".goals", "Pose": ".goals",
    "Aim": ".goals", "Posture": ".goals", "CenterOfMass": ".goals", "Relative": ".goals", "Plane": ".goals",
    "read_bvh": ".model.bvh", "write_bvh": ".model.bvh", "Clip": ".model.bvh",
    "read_gltf": ".model.gltf", "write_gltf": ".model.gltf", "GltfClip": ".model.gltf",
    "two_bone_2d": ".solvers.analytic", "two_bone_3d": ".solvers.two_bone_limb",
    "two_bone_lengths": ".solvers.analytic",
    "correct_clip": ".animation", "detect_contacts": ".animation", "detect_up_axis": ".animation",
    "foot_sliding": ".animation", "FootPlant": ".animation", "Reach": ".animation",
    "Contact": ".animation", "ClipReport": ".animation", "foot_toe": ".animation",
    "NoContactWarning": ".animation", "RootMotion": ".animation", "extract_root_motion": ".animation",
    "make_in_place": ".animation",
    "Result": ".result", "BatchResult": ".result", "Status": ".result",
    "solve": ".solve", "solve_many": ".solve", "methods": ".solvers",
    "reach": ".motion", "ReachResult": ".motion", "rest_blend": ".motion",
    "solve_with_rest": ".motion", "RestResult": ".motion", "RestPoseWarning": ".motion",
    "joint_torques": ".motion",
    "Tracker": ".tracking", "TrackStep": ".tracking",
    "refine_in_nullspace": ".nullspace",
    "manipulability": ".diagnostics", "condition_number": ".diagnostics",
    "distance_to_limits": ".diagnostics",
    "Sphere": ".collision.world", "Capsule": ".collision.world", "Box": ".collision.world",
    "HalfSpace": ".collision.world", "Points": ".collision.world", "World": ".collision.world",
    "CollisionError": ".collision.errors", "CollisionWarning": ".collision.errors",
    "collision": None, "collision_model": ".collision.model", "collision_pairs": ".collision.pairs",
    "distances": ".collision.distance", "distance_jacobian": ".collision.distance",
    "retarget": ".retarget", "RobotMotion": ".retarget", "RetargetReport": ".retarget", "read_motion": ".retarget",
    "Mapping": ".retarget", "load_mapping": ".retarget", "propose_mapping": ".retarget",
    "bundled_mapping": ".retarget",
}

__all__ = [
    "__version__",
    "spatial",
    "InvkinError", "ModelError", "ConfigurationError", "FrameError", "GoalError", "SolverError",
    "ModelWarning", "FileError", "InvkinWarning",
    "Robot", "RobotBuilder", "Step", "JOINT_TYPES", "load_robot", "load_srdf", "bundled_names",
    "chain_from_steps", "chain_from_dh", "tentacle",
    "Goal", "Position", "Orientation", "Pose", "Aim", "Posture", "CenterOfMass", "Relative", "Plane",
    "read_bvh", "write_bvh", "Clip", "read_gltf", "write_gltf", "GltfClip", "two_bone_2d", "two_bone_3d",
    "two_bone_lengths",
    "correct_clip", "detect_contacts", "detect_up_axis", "foot_sliding", "foot_toe", "FootPlant", "Reach", "Contact",
    "NoContactWarning", "RootMotion", "extract_root_motion", "make_in_place",
    "ClipReport",
    "Result", "BatchResult", "Status", "solve", "solve_many", "methods",
    "reach", "ReachResult", "rest_blend", "solve_with_rest", "RestResult", "RestPoseWarning",
    "joint_torques", "Tracker", "TrackStep", "nullspace", "refine_in_nullspace",
    "manipulability", "condition_number", "distance_to_limits",
    "Sphere", "Capsule", "Box", "HalfSpace", "Points", "World", "CollisionError", "CollisionWarning",
    "collision", "collision_model", "collision_pairs", "distances", "distance_jacobian",
    "retarget", "RobotMotion", "RetargetReport", "read_motion", "Mapping", "load_mapping", "propose_mapping",
    "bundled_mapping",
]


__getattr__, __dir__ = lazy_exports(__name__, _LAZY)


class _Package(types.ModuleType):
    """This package's module type: keeps ``invkin.solve`` and ``invkin.retarget`` the functions.

    Importing the submodule ``invkin.solve`` (which any solver call does) makes the import
    system set the package attribute ``solve`` to that module; with lazy names nothing would
    set it back to the function, so that one assignment is ignored (the module stays in
    ``sys.modules["invkin.solve"]``).
    """

    def __setattr__(self, name, value):
        if name in ("solve", "retarget") and isinstance(value, types.ModuleType):
            return
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package
