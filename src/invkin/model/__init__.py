"""Robot models: the Robot struct of arrays, builders, URDF/BVH readers and bundled models."""
from __future__ import annotations

import os
from pathlib import Path

from ..errors import ModelError
from .build import RobotBuilder, Step, chain_from_dh, chain_from_steps
from .catalog import bundled_names, load_bundled, planar2, seed8dof, tentacle
from .robot import JOINT_TYPES, Robot

__all__ = ["Robot", "RobotBuilder", "Step", "chain_from_steps", "chain_from_dh", "load_robot",
           "bundled_names", "seed8dof", "planar2", "tentacle", "JOINT_TYPES"]


def load_robot(name_or_path, base: str | None = None, tip: str | None = None, **kwargs) -> Robot:
    """Load a bundled model by name, or a ``.urdf`` / ``.bvh`` file.

    base/tip cut the chain from ``base`` to ``tip`` out of the tree. Extra keyword arguments go
    to parameterised bundled models (``tentacle(n=12, joint="ball")``); one that nothing reads
    (a file, a model without that parameter, a typo) is a :class:`ModelError`.
    """
    if isinstance(name_or_path, Robot):
        from .._checks import no_unknown_kwargs

        no_unknown_kwargs("load_robot(<Robot>)", kwargs, (), ModelError)
        robot = name_or_path
    else:
        s = os.fspath(name_or_path) if isinstance(name_or_path, os.PathLike) else name_or_path
        if not isinstance(s, str):
            raise ModelError(f"load_robot: expected a model name or a file path, got {name_or_path!r}")
        suffix = Path(s).suffix.lower()
        if kwargs and (suffix in (".urdf", ".xml", ".bvh") or os.sep in s or "/" in s):
            from .._checks import no_unknown_kwargs

            no_unknown_kwargs(f"load_robot({s!r})", kwargs, (), ModelError)  # a file takes none of them
        if suffix in (".urdf", ".xml"):
            from .urdf import load_urdf

            return load_urdf(s, base=base, tip=tip)
        if suffix == ".bvh":
            from .bvh import read_bvh

            robot = read_bvh(s)[0]
        elif os.sep in s or "/" in s:
            if not os.path.exists(s):
                raise ModelError(f"load_robot: no such file {s!r}")
            raise ModelError(f"load_robot: unsupported file type {suffix!r} for {s!r}; expected .urdf or .bvh")
        else:
            robot = load_bundled(s, **kwargs)
    if base is not None or tip is not None:
        robot = robot.subchain(base if base is not None else robot.root,
                               tip if tip is not None else robot.node_names[-1])
    return robot
