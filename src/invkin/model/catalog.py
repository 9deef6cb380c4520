"""Bundled models by name: seed8dof, planar2, tentacle, the URDF arms of ``data/robots``, and
whole robots on a floating base (g1, go2)."""
from __future__ import annotations

import math
from importlib import resources

import numpy as np

from ..errors import ModelError, closest_names
from .build import RobotBuilder, Step, chain_from_steps
from .robot import Robot

__all__ = ["seed8dof", "planar2", "tentacle", "bundled_names", "bundled_urdf_path", "URDF_MODELS",
           "FLOATING_MODELS"]

#: Bundled URDF chains: name -> (file, base link, tip link).
URDF_MODELS = {
    "panda": ("panda.urdf", "panda_link0", "panda_link8"),
    "ur5": ("ur5.urdf", "base_link", "tool0"),
    "iiwa14": ("iiwa14.urdf", "base_link", "tool0"),
    "baxter_left": ("baxter_left.urdf", "base", "left_gripper"),
    "g1_left_arm": ("g1_left_arm.urdf", "pelvis", "left_rubber_hand"),
}

#: Bundled whole robots, loaded with a free joint ``root_joint`` above their root link (q starts
#: with x, y, z, rx, ry, rz of the root link in the world): name -> (file, root link). The files
#: are example-robot-data's (``<visual>``, ``<collision>``, ``<inertial>`` kept), with their mesh
#: URIs shortened to ``package://<name>_description/...``, which resolve to the bundled files
#: (model/geometry.py: the package is the folder that holds the URDF's folder).
FLOATING_MODELS = {
    "g1": ("g1_description/urdf/g1_29dof_rev_1_0.urdf", "pelvis"),  # Unitree G1, 29 joints
    "go2": ("go2_description/urdf/go2.urdf", "base"),  # Unitree Go2 quadruped, 12 joints
}


def seed8dof() -> Robot:
    """The test model of SEEDS.md §1 (DirectX JacIK sample), reproduced exactly.

    From the base: joint0 about X, joint1 Y, joint2 Z, link 1 (+Z 1), joints 3 X, 4 Y, 5 Z,
    link 2 (+Z 1), joints 6 X, 7 Y, link 3 (+Z 1), effector. Reach radius 3. Limits [-pi, pi].
    """
    X, Y, Z = (1.0, 0.0, 0.0), (0.0, 1.0, 0.0), (0.0, 0.0, 1.0)
    up = (0.0, 0.0, 1.0)
    zero = (0.0, 0.0, 0.0)
    axes = [(zero, X), (zero, Y), (zero, Z), (up, X), (zero, Y), (zero, Z), (up, X), (zero, Y)]
    steps = [Step(off, "revolute", ax, -math.pi, math.pi, f"joint{k}") for k, (off, ax) in enumerate(axes)]
    return chain_from_steps(steps, name="seed8dof", tip_offset=up, base="base", tip="effector")


def planar2(l1: float = 1.0, l2: float = 0.8) -> Robot:
    """A 2-D two-bone arm in the XY plane: shoulder and elbow about +Z, bones along +X [m].

    Frames: base, upper (after the shoulder), lower (after the elbow, at l1), hand (at l1 + l2).
    """
    b = RobotBuilder("planar2")
    b.add_root("base")
    b.add_joint("shoulder", "base", "upper", "revolute", None, (0, 0, 1), -math.pi, math.pi)
    T = np.eye(4)
    T[0, 3] = l1
    b.add_joint("elbow", "upper", "lower", "revolute", T, (0, 0, 1), -math.pi, math.pi)
    T2 = np.eye(4)
    T2[0, 3] = l2
    b.add_joint("hand_joint", "lower", "hand", "fixed", T2)
    return b.build()


def tentacle(n: int = 10, joint: str = "revolute", segment_length: float = 0.1) -> Robot:
    """A tentacle of ``n`` segments rising along +Z [m].

    joint='revolute': one continuous joint about +Y per segment (bends in the XZ plane, the
    2-D tentacle of SEEDS.md §4); joint='ball': one ball joint per segment (bends in 3-D).
    Frames: base, seg1 … seg{n}, tip.
    """
    n = int(n)
    if n < 1 or n > 400:
        raise ModelError(f"tentacle: n must be in [1, 400], got {n}")
    if joint not in ("revolute", "ball"):
        raise ModelError(f"tentacle: joint must be 'revolute' or 'ball', got {joint!r}")
    if not (segment_length > 0 and math.isfinite(segment_length)):
        raise ModelError(f"tentacle: segment_length must be > 0, got {segment_length}")
    b = RobotBuilder(f"tentacle{n}_{joint}")
    b.add_root("base")
    prev = "base"
    for k in range(n):
        T = np.eye(4)
        if k > 0:
            T[2, 3] = segment_length
        jt = "continuous" if joint == "revolute" else "ball"
        b.add_joint(f"j{k + 1}", prev, f"seg{k + 1}", jt, T, (0.0, 1.0, 0.0))
        prev = f"seg{k + 1}"
    T = np.eye(4)
    T[2, 3] = segment_length
    b.add_joint("tip_joint", prev, "tip", "fixed", T)
    return b.build()


_BUILTIN = {"seed8dof": seed8dof, "planar2": planar2, "tentacle": tentacle}


def bundled_names() -> list:
    """The names :func:`invkin.load_robot` loads without a file, sorted (``tentacle`` takes ``n`` and
    ``joint``; ``g1`` and ``go2`` stand on a floating base)."""
    return sorted(list(_BUILTIN) + list(URDF_MODELS) + list(FLOATING_MODELS))


def bundled_urdf_path(name: str):
    fname = URDF_MODELS[name][0] if name in URDF_MODELS else FLOATING_MODELS[name][0]
    return resources.files("invkin") / "data" / "robots" / fname


def load_bundled(name: str, **kwargs) -> Robot:
    from .._checks import no_unknown_kwargs

    if name in _BUILTIN:
        import inspect

        fn = _BUILTIN[name]
        no_unknown_kwargs(f"load_robot({name!r})", kwargs, inspect.signature(fn).parameters, ModelError)
        try:
            return fn(**kwargs)
        except (TypeError, ValueError, OverflowError) as e:
            raise ModelError(f"load_robot({name!r}): bad parameters {kwargs}: {e}") from None
    if name in URDF_MODELS:
        no_unknown_kwargs(f"load_robot({name!r})", kwargs, (), ModelError)
        from .urdf import load_urdf

        _, base, tip = URDF_MODELS[name]
        with resources.as_file(bundled_urdf_path(name)) as p:
            robot = load_urdf(p)  # the bundled files are already base -> tip chains
        return robot
    if name in FLOATING_MODELS:
        from .urdf import load_urdf

        with resources.as_file(bundled_urdf_path(name)) as p:
            robot = load_urdf(p)
        return robot.with_floating_base()
    raise ModelError(f"unknown robot {name!r}; bundled models: {', '.join(bundled_names())} "
                     f"(closest: {closest_names(name, bundled_names())}), or give a .urdf, MJCF .xml or .bvh path")
