"""SRDF reader: named configurations and disabled collision pairs, on the URDF reader's expat.

What is read
------------
The Semantic Robot Description Format (MoveIt, Pinocchio) that goes with a URDF:

* ``<group_state name group>`` with ``<joint name value>`` children: a named configuration
  (:meth:`Robot.named_configuration`, e.g. Talos' ``half_sitting``). Values are one number per
  revolute/prismatic joint; a ball joint takes a rotation vector (3) or a quaternion ``x y z w``
  (4, Pinocchio's order); a free joint ``x y z`` + rotation vector (6) or ``x y z qx qy qz qw``
  (7, Pinocchio's free flyer); a planar joint ``x y yaw`` (3, MoveIt's) or ``x y cos(yaw)
  sin(yaw)`` (4, Pinocchio's). Joints that are fixed in the model, and mimic followers, are
  accepted and ignored.
  A revolute or prismatic value outside the joint's limits is kept, with one
  :class:`~invkin.errors.ModelWarning` per file listing each such value, its limits and its line
  (published files have them: kinova's ``arm_up``, simple_humanoid's ``half_sitting``).
* ``<disable_collisions link1 link2 reason>``: kept as :attr:`Robot.disabled_collision_pairs`.
* ``<virtual_joint name>``: the floating base (below). Everything else (``<group>``,
  ``<end_effector>``, ``<passive_joint>``, ``<rotor_params>``, ...) is skipped: invkin does not
  use them (and published files often name links of other variants of the robot there).

The floating base
-----------------
Pinocchio names its free flyer ``root_joint``; MoveIt declares a ``<virtual_joint>``. A group
state value for such a joint goes to the robot's free root joint when it has one
(``load_robot(..., floating_base=True)``) and is dropped on a fixed-base model, whose base is
welded to the world.

Errors
------
Hardened like the URDF reader (:mod:`invkin.model.urdf`: no DOCTYPE or entities, a size cap,
the element and line in every message). A group-state joint or a disabled-collision link the
robot lacks is a :class:`~invkin.errors.ModelError` naming the value, its line and the closest
valid names (an SRDF of another variant of the robot); with ``strict=False`` it is dropped with a
:class:`~invkin.errors.ModelWarning` instead (what Pinocchio does).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..errors import ModelError, ModelWarning, closest_names, warn_caller
from .robot import Robot
from .urdf import (
    DEFAULT_MAX_BYTES,
    _desc,
    _Elem,
    _floats,
    _name,
    _Reader,
    _where,
    parse_hardened,
    read_bounded,
)

__all__ = ["Srdf", "load_srdf", "read_srdf", "parse_srdf"]

_PINOCCHIO_FREE_FLYER = "root_joint"


@dataclass(frozen=True)
class Srdf:
    """What an SRDF file says, by name (not yet checked against a robot)."""

    name: str
    group_states: dict = field(default_factory=dict)  # name -> [(joint, values (k,), _Elem)]
    disabled_collisions: tuple = ()  # ((link1, link2, reason, _Elem), ...)
    virtual_joints: tuple = ()  # names of <virtual_joint>s (the floating base)


class _SrdfReader(_Reader):
    kind = "SRDF"

    def __init__(self, source: str):
        super().__init__(source)
        self.elems: list[tuple[int, _Elem]] = []  # (depth, element) in document order

    def _start(self, tag, attrs):
        self.depth += 1
        e = _Elem(tag, attrs, self._line())
        if self.depth == 1:
            if tag != "robot":
                raise self.err(f"root element is <{tag}>; expected <robot>", f"line {e.line}")
            self.robot = e
        elif self.depth <= 3:
            self.elems.append((self.depth, e))

    def _end(self, tag):
        self.depth -= 1


def parse_srdf(text_or_bytes, source: str = "<string>") -> Srdf:
    """An :class:`Srdf` from SRDF text or bytes (``source`` names it in messages)."""
    rd = _SrdfReader(str(source))
    parse_hardened(rd, text_or_bytes, "parse_srdf")
    states: dict = {}
    pairs = []
    virtual = []
    parent = None  # the depth-2 element a depth-3 element belongs to
    for depth, e in rd.elems:
        if depth == 2:
            parent = e
            if e.tag == "group_state":
                nm = _name(rd, e)
                if nm in states:
                    raise rd.err(f"duplicate group_state {nm!r} (first at line {states[nm][1].line})", _where(e))
                states[nm] = ([], e)
            elif e.tag == "disable_collisions":
                pairs.append((_name(rd, e, "link1"), _name(rd, e, "link2"), e.attrs.get("reason", ""), e))
            elif e.tag == "virtual_joint":
                virtual.append(_name(rd, e))
            continue
        if parent is None:
            continue
        if parent.tag == "group_state" and e.tag == "joint":
            jn = _name(rd, e, owner=parent)
            v = e.attrs.get("value")
            if v is None:
                raise rd.err(f"<joint name={jn!r}> (line {e.line}) has no value=\"...\"", _where(parent))
            n = len(v.split())
            states[_name(rd, parent)][0].append((jn, _floats(rd, parent, e, "value", max(n, 1), ()), e))
    name = rd.robot.attrs.get("name", "") if rd.robot is not None else ""
    return Srdf(name=name, group_states={k: v[0] for k, v in states.items()}, disabled_collisions=tuple(pairs),
                virtual_joints=tuple(virtual))


def read_srdf(path, max_bytes: int = DEFAULT_MAX_BYTES) -> Srdf:
    """Read an SRDF file (at most ``max_bytes`` [bytes]) into an :class:`Srdf`."""
    p, data = read_bounded(path, max_bytes, "SRDF", "read_srdf")
    return parse_srdf(data, source=p)


def load_srdf(robot: Robot, path, max_bytes: int = DEFAULT_MAX_BYTES, strict: bool = True,
              check: Robot | None = None) -> Robot:
    """``robot`` with the named configurations and disabled collision pairs of an SRDF file.

    Every group-state joint and disabled-collision link must exist in ``check`` (default
    ``robot``; a model cut by base/tip is checked against its whole robot and keeps what applies
    to it); ``strict=False`` drops unknown names with a warning instead.
    """
    if not isinstance(robot, Robot):
        raise ModelError(f"load_srdf: expected a Robot, got {robot!r:.200}")
    srdf = read_srdf(path, max_bytes)
    source = str(path)
    whole = robot if check is None else check
    srdf = _check_names(srdf, whole, source, strict)
    outside = []
    states = {nm: _state_entries(robot, whole, nm, joints, source, outside)
              for nm, joints in srdf.group_states.items()}
    if outside:
        warn_caller(f"{source}: {len(outside)} group_state value{'s are' if len(outside) > 1 else ' is'} outside "
                    f"{'their' if len(outside) > 1 else 'its'} joint limits (kept as the file says): "
                    f"{', '.join(outside)}", ModelWarning)
    pairs = tuple((a, b) for a, b, _, _ in srdf.disabled_collisions)
    old = dict(robot.extras.get("named_configurations", {}))
    old.update(states)
    return robot.with_extras(named_configurations=old,
                             disabled_collision_pairs=tuple(robot.extras.get("disabled_collision_pairs", ())) + pairs)


def _err(source, e: _Elem, msg: str) -> ModelError:
    return ModelError(f"{source}: {_desc(e)} line {e.line}: {msg}")


def _joint_names(robot: Robot) -> set:
    return {j for j in robot.node_joint_names if j}


def _check_names(srdf: Srdf, robot: Robot, source, strict: bool) -> Srdf:
    """``srdf`` with every name checked against ``robot`` (unknown ones dropped if not strict)."""
    links = set(robot.node_names)
    joints = _joint_names(robot) | set(srdf.virtual_joints) | {_PINOCCHIO_FREE_FLYER}
    frames = robot.node_names

    def unknown(e, msg):
        if strict:
            raise _err(source, e, msg + "; pass strict=False to drop unknown names")
        warn_caller(f"{source}: {_desc(e)} line {e.line}: {msg}; dropped", ModelWarning)

    pairs = []
    for a, b, reason, e in srdf.disabled_collisions:
        bad = [nm for nm in (a, b) if nm not in links]
        for nm in bad:
            unknown(e, f"no link {nm!r} in robot {robot.name!r}; closest: {closest_names(nm, frames)}")
        if not bad:
            pairs.append((a, b, reason, e))
    states = {}
    for state, entries in srdf.group_states.items():
        kept = []
        for jn, v, e in entries:
            if jn in joints:
                kept.append((jn, v, e))
            else:
                unknown(e, f"group_state {state!r}: no joint {jn!r} in robot {robot.name!r}; closest: "
                           f"{closest_names(jn, sorted(joints))}")
        states[state] = kept
    return Srdf(srdf.name, states, tuple(pairs), srdf.virtual_joints)


def _free_root(robot: Robot):
    """Name of the robot's free joint whose q entries are ``j.x j.y j.z j.rx j.ry j.rz``, or None."""
    names = robot.joint_names
    for i, nm in enumerate(names):
        if nm.endswith(".x") and names[i:i + 6] == tuple(nm[:-2] + s for s in (".x", ".y", ".z", ".rx", ".ry", ".rz")):
            return nm[:-2]
    return None


def _rotvec_of_xyzw(source, e, v) -> np.ndarray:
    from ..errors import GoalError
    from ..spatial import quat_to_matrix, so3_log

    try:
        return so3_log(quat_to_matrix(quat_xyzw=v))
    except GoalError as exc:
        raise _err(source, e, f"value: {exc}") from None


def _state_entries(robot: Robot, whole: Robot, state: str, joints, source, outside=None) -> dict:
    """{q entry name of ``robot``: value} of one group state (entries ``robot`` lacks dropped);
    values outside their joint's limits are described in the list ``outside``, if given."""
    out = {}
    entries = set(robot.joint_names)
    free = _free_root(robot)
    for jn, v, e in joints:
        if jn not in _joint_names(whole):  # the floating base (root_joint or a virtual joint)
            if free is None:
                continue  # a fixed-base model: the base is welded to the world
            jn = free
        if jn in entries:  # revolute, continuous, prismatic
            if v.size != 1:
                raise _err(source, e, f"group_state {state!r}: joint {jn!r} takes 1 value, got {v.size}")
            out[jn] = float(v[0])
            k = robot.joint_names.index(jn)
            lo, hi = float(robot.lower[k]), float(robot.upper[k])
            tol = 1e-9 * max(1.0, abs(lo), abs(hi))
            if outside is not None and not lo - tol <= out[jn] <= hi + tol:
                outside.append(f"{state!r} {jn} = {out[jn]:g} not in [{lo:g}, {hi:g}] (line {e.line})")
        elif jn + ".x" in entries and jn + ".rx" in entries:  # free: x y z + rotation vector
            if v.size == 7:
                v = np.concatenate([v[:3], _rotvec_of_xyzw(source, e, v[3:])])
            if v.size != 6:
                raise _err(source, e, f"group_state {state!r}: free joint {jn!r} takes 6 values (x y z "
                                      f"rotation vector) or 7 (x y z qx qy qz qw), got {v.size}")
            for s, x in zip((".x", ".y", ".z", ".rx", ".ry", ".rz"), v):
                out[jn + s] = float(x)
        elif jn + ".yaw" in entries:  # planar: x y yaw
            if v.size == 4:  # Pinocchio's planar joint: x y cos(yaw) sin(yaw)
                if not abs(np.hypot(v[2], v[3]) - 1.0) <= 1e-6:
                    raise _err(source, e, f"group_state {state!r}: planar joint {jn!r}: (cos, sin) = "
                                          f"({v[2]:g}, {v[3]:g}) has norm {np.hypot(v[2], v[3]):g}; expected 1")
                v = np.array([v[0], v[1], np.arctan2(v[3], v[2])])
            if v.size != 3:
                raise _err(source, e, f"group_state {state!r}: planar joint {jn!r} takes 3 values (x y yaw) "
                                      f"or 4 (x y cos(yaw) sin(yaw)), got {v.size}")
            for s, x in zip((".x", ".y", ".yaw"), v):
                out[jn + s] = float(x)
        elif jn + ".x" in entries:  # ball: rotation vector
            if v.size == 4:
                v = _rotvec_of_xyzw(source, e, v)
            if v.size != 3:
                raise _err(source, e, f"group_state {state!r}: ball joint {jn!r} takes 3 values (rotation "
                                      f"vector) or 4 (qx qy qz qw), got {v.size}")
            for s, x in zip((".x", ".y", ".z"), v):
                out[jn + s] = float(x)
        # else: fixed in this model, a mimic follower, or cut off by base/tip: nothing to set
    return out
