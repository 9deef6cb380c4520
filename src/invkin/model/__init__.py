"""Robot models: the Robot struct of arrays, builders, URDF/BVH readers and bundled models."""
from __future__ import annotations

import os
from pathlib import Path

from ..errors import FrameError, ModelError
from .build import RobotBuilder, Step, chain_from_dh, chain_from_steps
from .catalog import bundled_names, load_bundled, planar2, seed8dof, tentacle
from .robot import JOINT_TYPES, Robot
from .srdf import load_srdf

__all__ = ["Robot", "RobotBuilder", "Step", "chain_from_steps", "chain_from_dh", "load_robot", "load_srdf",
           "bundled_names", "seed8dof", "planar2", "tentacle", "JOINT_TYPES"]


def load_robot(name_or_path, base: str | None = None, tip: str | None = None, srdf=None,
               srdf_strict: bool = True, *, floating_base: bool = False, locked: dict | None = None,
               max_bytes: int | None = None, **kwargs) -> Robot:
    """Load a bundled model by name, or a ``.urdf`` / ``.bvh`` file, or MJCF (``.xml`` with a
    ``<mujoco>`` root, through the optional ``mujoco`` package).

    floating_base: hang the root from a new ``world`` frame by a free joint ``root_joint``
    (:meth:`Robot.with_floating_base`; a model that already floats is a ModelError).
    locked: {joint: value} joints fixed at a value and removed from q (:meth:`Robot.lock`).
    base/tip cut the chain from ``base`` to ``tip`` out of the tree (after the two above). With
    ``floating_base`` the free joint is always at the chain's base: ``tip`` alone keeps the root
    and its free joint; a ``base`` of the model (``base="torso_2_link"``), which would cut that
    joint off, is cut first and hung from the free joint itself (q: ``root_joint``'s 6 entries,
    the pose of ``base`` in the world, then the chain's joints).
    ``srdf``: an SRDF file whose
    named configurations and disabled collision pairs the robot keeps (:func:`load_srdf`; checked
    against the whole model, before base/tip; ``srdf_strict=False`` drops names the model lacks
    with a warning). ``max_bytes``: the size cap [bytes] of the URDF, MJCF and SRDF files read
    (default 16 MiB; a larger file is refused, naming this option). Extra keyword arguments go to parameterised
    bundled models (``tentacle(n=12, joint="ball")``); one that nothing reads (a file, a model
    without that parameter, a typo) is a :class:`ModelError`.
    """
    for flag, v in (("base", base), ("tip", tip)):
        if v is not None and not isinstance(v, str):  # an int was taken as a node index (bundled models only)
            raise FrameError(f"load_robot: {flag} must be a link name (str), got {v!r:.200}")
    caps = {}
    if max_bytes is not None:
        if isinstance(max_bytes, bool) or not isinstance(max_bytes, int) or max_bytes < 1:
            raise ModelError(f"load_robot: max_bytes: expected a positive integer [bytes], got {max_bytes!r:.200}")
        caps["max_bytes"] = int(max_bytes)
        if srdf is None and not _reads_xml(name_or_path):
            raise ModelError(f"load_robot: max_bytes applies to URDF, MJCF and SRDF files; {name_or_path!r:.200} "
                             f"reads none")
    if srdf is not None:
        from .srdf import load_srdf

        robot = _load_robot(name_or_path, base, tip, floating_base, locked, caps, **kwargs)
        whole = (_load_robot(name_or_path, None, None, floating_base, locked, caps, **kwargs)
                 if base is not None or tip is not None else None)
        robot = load_srdf(robot, srdf, strict=srdf_strict, check=whole, **caps)
        if floating_base and whole is not None and _floated(robot) not in (None, _floated(whole)):
            robot = _float_named_configurations(robot, whole, srdf, srdf_strict, _floated(robot), caps)
        return robot
    return _load_robot(name_or_path, base, tip, floating_base, locked, caps, **kwargs)


def _reads_xml(name_or_path) -> bool:
    """Whether load_robot reads ``name_or_path`` as a URDF or MJCF file."""
    s = os.fspath(name_or_path) if isinstance(name_or_path, os.PathLike) else name_or_path
    return isinstance(s, str) and Path(s).suffix.lower() in (".urdf", ".xml")


def _floated(robot: Robot):
    """The frame a robot's first free joint moves (its floating body), or None."""
    for i, kind in enumerate(robot.composite):
        if kind == "free" and robot.is_frame[i]:
            return robot.node_names[i]
    return None


def _float_named_configurations(robot: Robot, whole: Robot, srdf, strict: bool, base: str, caps: dict) -> Robot:
    """``robot`` (a chain hung from a free joint at ``base``) whose named configurations put that
    free joint at the pose of ``base`` in ``whole`` (the whole floating model) at the same
    configuration: the SRDF's own base value (``root_joint``) is the pose of the model's root, and
    the joints between the root and ``base`` move ``base`` too."""
    import warnings

    import numpy as np

    from ..spatial import so3_log
    from .srdf import _free_root

    free = _free_root(robot)
    if free is None or not robot.named_configurations:
        return robot
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # said once already, by the chain's own load_srdf
        full = load_srdf(whole, srdf, strict=strict, **caps)
    states = {}
    for nm, entries in robot.extras["named_configurations"].items():
        T = full.fk(full.named_configuration(nm), base)
        pose = np.concatenate([T[:3, 3], so3_log(T[:3, :3])])
        states[nm] = {**entries, **{free + c: float(v) for c, v in zip((".x", ".y", ".z", ".rx", ".ry", ".rz"), pose)}}
    return robot.with_extras(named_configurations=states)


def _load_robot(name_or_path, base: str | None = None, tip: str | None = None, floating_base: bool = False,
                locked: dict | None = None, caps: dict | None = None, **kwargs) -> Robot:
    caps = caps or {}  # {"max_bytes": n} for the URDF / MJCF readers
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
        if suffix == ".xml" and _is_mjcf(s):
            from .mjcf import load_mjcf

            robot = load_mjcf(s, **caps)
        elif suffix in (".urdf", ".xml"):
            from .urdf import load_urdf

            if not floating_base and locked is None:
                return load_urdf(s, base=base, tip=tip, **caps)
            robot = load_urdf(s, **caps)
        elif suffix == ".bvh":
            from .bvh import read_bvh

            robot = read_bvh(s)[0]
        elif os.sep in s or "/" in s:
            if not os.path.exists(s):
                raise ModelError(f"load_robot: no such file {s!r}")
            if os.path.isdir(s):
                raise ModelError(f"load_robot: {s!r} is a directory; expected a .urdf, .xml (URDF or MJCF) or "
                                 f".bvh file")
            raise ModelError(f"load_robot: unsupported file type {suffix!r} for {s!r}; expected .urdf, .xml "
                             f"(URDF or MJCF) or .bvh")
        else:
            robot = load_bundled(s, **kwargs)
    # a base of the fixed model: the chain floats from it (the free joint above the root would be cut off)
    float_last = floating_base and base is not None and robot.has_frame(base)
    if floating_base and not float_last:
        robot = robot.with_floating_base()
    if locked is not None:
        robot = robot.lock(locked)
    if base is not None or tip is not None:
        base = base if base is not None else robot.root
        robot = robot.subchain(base, tip if tip is not None else _only_leaf(robot, base, name_or_path))
    return robot.with_floating_base() if float_last else robot


def _only_leaf(robot: Robot, base: str, source) -> str:
    """The tip of ``base`` without a ``tip``: the one leaf of the tree below it (as the URDF reader
    infers it), else a ModelError listing the leaves."""
    b = robot.frame_index(base)
    below = {b}
    for i in range(b + 1, robot.n_nodes):  # topological order: descendants follow their ancestors
        if int(robot.parent[i]) in below:
            below.add(i)
    parents = {int(robot.parent[i]) for i in below}
    leaves = [robot.node_names[i] for i in sorted(below) if i not in parents]
    if len(leaves) != 1:
        where = os.fspath(source) if isinstance(source, (str, os.PathLike)) else robot.name
        raise ModelError(f"{where}: tip is required: the tree below base {base!r} branches into {len(leaves)} "
                         f"leaf links ({', '.join(repr(x) for x in leaves[:8])})")
    return leaves[0]


def _is_mjcf(path: str) -> bool:
    """True when the file's first element is <mujoco> (read from its first 64 kB)."""
    import re

    from .._io import open_regular

    try:
        with open_regular(path, "model file", ModelError) as f:  # a FIFO named x.xml must not block
            head = f.read(65536)
    except (OSError, ModelError):
        return False  # the URDF reader reports the missing, unreadable or irregular file
    head = re.sub(rb"<!--.*?-->|<\?.*?\?>", b"", head, flags=re.S)
    m = re.search(rb"<\s*([A-Za-z_][\w:.-]*)", head)
    return bool(m) and m.group(1) == b"mujoco"
