"""Retargeting maps: which source joint drives which robot link, with what weights.

A map is a small declarative file (TOML, or JSON with the same keys)::

    name = "cmu onto g1"
    robot = "g1"                 # informational: the robot the links belong to
    up = "y"                     # optional: the clip's up axis (default: detected from the feet)

    [[body]]
    source = "Hips"              # a joint of the BVH skeleton
    link = "pelvis"              # a frame of the robot
    role = "root"                # root (exactly one) | foot (contacts held hard) | hand | head | body
    position_weight = 1.0        # [1/m] soft weight of the position row (0: no position row)
    rotation_weight = 0.5        # [1/rad] soft weight of the rotation row (0: no rotation row)
    position_offset = [0, 0, 0]  # [m] added to the target, in the source joint's frame (scaled)
    rotation_offset_rpy = [0, 0, 0]  # [rad] extra rotation of the link target, in the link frame

Every ``source`` must be a joint of the clip and every ``link`` a frame of the robot; an unknown
name raises :class:`~invkin.errors.FrameError` naming the closest ones. The targets of each body
come from the clip through :mod:`invkin.retarget.scale` (limb-length scaling, rest-pose alignment).
Bundled maps (``src/invkin/data/retarget``) cover the bundled mocap skeletons onto the bundled G1;
:func:`bundled_mapping` picks the one whose source joints the clip has, :func:`propose_mapping`
drafts one for a new skeleton or robot from the joint and link names (check it: names are all it reads).
"""
from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path

from .._io import open_regular
from ..errors import FrameError, InvkinError, closest_names

__all__ = ["Body", "Mapping", "MappingError", "load_mapping", "bundled_mapping", "bundled_mappings",
           "propose_mapping", "ROLES"]

ROLES = ("root", "foot", "hand", "head", "body")
DATA = Path(__file__).resolve().parent.parent / "data" / "retarget"


class MappingError(InvkinError, ValueError):
    """A retargeting map is malformed or does not fit the skeleton or robot it is used with."""


@dataclass(frozen=True)
class Body:
    """One source joint → robot link pair (see the module docstring for the fields and units)."""

    source: str
    link: str
    role: str = "body"
    position_weight: float = 1.0
    rotation_weight: float = 0.0
    position_offset: tuple = (0.0, 0.0, 0.0)
    rotation_offset_rpy: tuple = (0.0, 0.0, 0.0)

    def __post_init__(self):
        for k in ("source", "link"):
            v = getattr(self, k)
            if not isinstance(v, str) or not v:
                raise MappingError(f"body {k}: expected a non-empty name, got {v!r}")
        if self.role not in ROLES:
            raise MappingError(f"body {self.source!r}: unknown role {self.role!r}; choose one of: {', '.join(ROLES)}")
        for k in ("position_weight", "rotation_weight"):
            v = getattr(self, k)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not (math.isfinite(v) and v >= 0):
                raise MappingError(f"body {self.source!r}: {k} must be a finite number >= 0, got {v!r}")
            object.__setattr__(self, k, float(v))
        if self.position_weight == 0 and self.rotation_weight == 0:
            raise MappingError(f"body {self.source!r}: position_weight and rotation_weight are both 0 (nothing to track)")
        for k in ("position_offset", "rotation_offset_rpy"):
            v = getattr(self, k)
            try:  # (a string is not 3 numbers, even "123"; nor are booleans)
                t = () if isinstance(v, (str, bytes)) or any(isinstance(x, bool) for x in v) else \
                    tuple(float(x) for x in v)
            except (TypeError, ValueError):
                t = ()
            if len(t) != 3 or not all(math.isfinite(x) and abs(x) < 1e3 for x in t):
                raise MappingError(f"body {self.source!r}: {k} must be 3 finite numbers, got {v!r}")
            object.__setattr__(self, k, t)


@dataclass(frozen=True)
class Mapping:
    """A retargeting map: its bodies, the root among them, the optional up axis of the clip."""

    bodies: tuple
    name: str = ""
    robot: str = ""
    up: str | None = None
    path: str | None = field(default=None, compare=False)

    def __post_init__(self):
        bodies = tuple(self.bodies)
        if not bodies or not all(isinstance(b, Body) for b in bodies):
            raise MappingError(f"mapping {self.name!r}: expected at least one [[body]] entry")
        roots = [b for b in bodies if b.role == "root"]
        if len(roots) != 1:
            raise MappingError(f"mapping {self.name!r}: expected exactly one body with role = \"root\", "
                               f"got {len(roots)} ({[b.source for b in roots]})")
        for attr in ("source", "link"):
            seen = set()
            for b in bodies:
                v = getattr(b, attr)
                if v in seen:
                    raise MappingError(f"mapping {self.name!r}: {attr} {v!r} appears twice")
                seen.add(v)
        if self.up is not None and self.up not in ("y", "z"):
            raise MappingError(f"mapping {self.name!r}: up must be \"y\" or \"z\", got {self.up!r}")
        object.__setattr__(self, "bodies", bodies)

    @property
    def root(self) -> Body:
        return next(b for b in self.bodies if b.role == "root")

    @property
    def feet(self) -> tuple:
        return tuple(b for b in self.bodies if b.role == "foot")

    def check(self, clip, robot) -> None:
        """Refuse a source joint the clip lacks or a link the robot lacks (closest names named)."""
        joints = [n for n, e in zip(clip.names, clip.end_site) if not e]
        for b in self.bodies:
            if b.source not in clip.names:
                raise FrameError(f"mapping {self.name or self.path!r}: source joint {b.source!r} is not in the clip; "
                                 f"closest: {closest_names(b.source, joints)}")
            if b.link not in robot.frame_names:
                raise FrameError(f"mapping {self.name or self.path!r}: link {b.link!r} is not a frame of robot "
                                 f"{robot.name!r}; closest: {closest_names(b.link, robot.frame_names)}")

    def to_toml(self) -> str:
        """The map as TOML text (what :func:`load_mapping` reads back)."""
        def num(x):
            return repr(float(x))

        out = [f"name = {json.dumps(self.name)}", f"robot = {json.dumps(self.robot)}"]
        if self.up is not None:
            out.append(f"up = {json.dumps(self.up)}")
        for b in self.bodies:
            out += ["", "[[body]]", f"source = {json.dumps(b.source)}", f"link = {json.dumps(b.link)}",
                    f"role = {json.dumps(b.role)}", f"position_weight = {num(b.position_weight)}",
                    f"rotation_weight = {num(b.rotation_weight)}"]
            if any(b.position_offset):
                out.append(f"position_offset = [{', '.join(num(x) for x in b.position_offset)}]")
            if any(b.rotation_offset_rpy):
                out.append(f"rotation_offset_rpy = [{', '.join(num(x) for x in b.rotation_offset_rpy)}]")
        return "\n".join(out) + "\n"


_BODY_KEYS = ("source", "link", "role", "position_weight", "rotation_weight", "position_offset", "rotation_offset_rpy")
_TOP_KEYS = ("name", "robot", "up", "body")


def mapping_from_dict(d: dict, where: str = "mapping") -> Mapping:
    """A Mapping from the parsed file's dictionary (unknown keys refused with the closest)."""
    if not isinstance(d, dict):
        raise MappingError(f"{where}: expected a table of keys, got {type(d).__name__}")
    for k in d:
        if k not in _TOP_KEYS:
            raise MappingError(f"{where}: unknown key {k!r}; closest: {closest_names(k, _TOP_KEYS)}")
    raw = d.get("body")
    if not isinstance(raw, list) or not raw:
        raise MappingError(f"{where}: expected a list of [[body]] tables, got {raw!r:.80}")
    bodies = []
    for i, b in enumerate(raw):
        if not isinstance(b, dict):
            raise MappingError(f"{where}: body {i}: expected a table, got {b!r:.80}")
        for k in b:
            if k not in _BODY_KEYS:
                raise MappingError(f"{where}: body {i}: unknown key {k!r}; closest: {closest_names(k, _BODY_KEYS)}")
        for k in ("source", "link"):
            if k not in b:
                raise MappingError(f"{where}: body {i}: missing key {k!r}")
        try:
            bodies.append(Body(**b))
        except MappingError as e:
            raise MappingError(f"{where}: {e}") from None
    return Mapping(tuple(bodies), name=str(d.get("name", "")), robot=str(d.get("robot", "")), up=d.get("up"),
                   path=None if where == "mapping" else where)


def load_mapping(path) -> Mapping:
    """Read a map from a ``.toml`` or ``.json`` file, or return a :class:`Mapping` unchanged."""
    if isinstance(path, Mapping):
        return path
    if isinstance(path, dict):
        return mapping_from_dict(path)
    p = str(path)
    with open_regular(p, "mapping file", max_bytes=1 << 20) as f:
        data = f.read()
    if p.lower().endswith(".json"):
        try:
            d = json.loads(data.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as e:
            raise MappingError(f"{p}: not valid JSON: {e}") from None
    elif p.lower().endswith(".toml"):
        import tomllib
        try:
            d = tomllib.loads(data.decode("utf-8"))
        except (UnicodeDecodeError, tomllib.TOMLDecodeError) as e:
            raise MappingError(f"{p}: not valid TOML: {e}") from None
    else:
        raise MappingError(f"{p}: expected a .toml or .json mapping file")
    return mapping_from_dict(d, p)


def bundled_mappings() -> dict:
    """{name: path} of the bundled maps (``<skeleton>_<robot>.toml``)."""
    return {p.stem: p for p in sorted(DATA.glob("*.toml"))}


def bundled_mapping(clip, robot) -> Mapping:
    """The first bundled map whose source joints all exist in the clip and whose links all exist in
    the robot."""
    tried = []
    for name, p in bundled_mappings().items():
        m = load_mapping(p)
        src = [b.source for b in m.bodies if b.source not in clip.names]
        links = [b.link for b in m.bodies if b.link not in robot.frame_names]
        if not src and not links:
            return m
        tried.append((len(src) + len(links), name, src, links))
    why = ""
    if tried:  # the nearest miss, so that a clip or robot that almost fits says what it lacks
        _, name, src, links = min(tried)
        lack = ([f"the clip lacks {', '.join(map(repr, src[:4]))}{' ...' if len(src) > 4 else ''}"] if src else []) + \
            ([f"the robot lacks {', '.join(map(repr, links[:4]))}{' ...' if len(links) > 4 else ''}"] if links else [])
        why = f"; nearest: {name} ({'; '.join(lack)})"
    raise MappingError(f"no bundled mapping fits this clip on robot {robot.name!r} (tried: "
                       f"{[t[1] for t in sorted(tried, key=lambda t: t[1])] or 'none'}{why}); draft one with "
                       f"invkin.propose_mapping(skeleton, clip, robot) and pass mapping=... (--mapping MAP.toml)")


# --------------------------------------------------------------------------- proposing a map

# body part -> name fragments (lower case, side prefixes removed); first match wins per part
_PARTS = (
    ("root", ("pelvis", "hips", "hip", "root", "base_link", "base")),
    ("torso", ("torso", "chest", "spine2", "spine1", "upper_body", "chest2", "spine")),
    ("head", ("head",)),
    ("upper_arm", ("shoulder_roll", "upperarm", "upper_arm", "shldr", "arm_pitch", "arm", "shoulder")),
    ("forearm", ("elbow", "forearm", "lowerarm", "fore_arm")),
    ("hand", ("hand", "wrist_yaw", "wrist", "palm")),
    ("thigh", ("hip_roll", "upleg", "thigh", "upperleg", "hip")),
    ("shin", ("knee", "shin", "leg", "lowerleg", "calf")),
    ("foot", ("ankle_roll", "foot", "ankle")),
)
_WEIGHTS = {"root": ("root", 1.0, 1.0), "torso": ("body", 0.5, 0.5), "head": ("head", 0.2, 0.2),
            "upper_arm": ("body", 0.3, 0.0), "forearm": ("body", 0.5, 0.0), "hand": ("hand", 0.5, 0.1),
            "thigh": ("body", 0.3, 0.0), "shin": ("body", 0.8, 0.0), "foot": ("foot", 1.0, 0.5)}


def _side(name: str, words: bool = False):
    """("left" | "right" | None, the rest of the name in lower case). A namespace before the last
    ":" (``mixamorig:LeftUpLeg``) is left out; with ``words`` (source joint names) the side may also
    be a word anywhere: ``Bip01 L Thigh``, ``Character1_Left_Foot``."""
    name = name.rsplit(":", 1)[-1]
    n = name.lower()
    for side in ("left", "right"):
        if n.startswith(side):
            return side, n[len(side):].lstrip("_")
        if n.startswith(side[0] + "_"):
            return side, n[2:]
    if len(name) > 1 and name[0] in "lLrR" and name[1].isupper():
        return ("left" if name[0] in "lL" else "right"), n[1:]
    if words:
        toks = [t for t in re.split(r"[\s_.\-]+", n) if t]
        for side in ("left", "right"):
            hits = [i for i, t in enumerate(toks) if t in (side, side[0])]
            if len(hits) == 1:
                return side, "_".join(t for i, t in enumerate(toks) if i != hits[0])
    return None, n


def _squash(text: str) -> str:
    """Lower case without separators: "upper_leg", "UpperLeg", "upper-leg" and "upperleg" alike."""
    return "".join(c for c in text.lower() if c.isalnum())


def _pick(names, part, side, words=False):
    frags = dict(_PARTS)[part]
    for frag in frags:
        f = _squash(frag)
        for n in names:
            s, rest = _side(n, words)
            if s != side:
                continue
            if f in _squash(rest):
                return n
    return None


def propose_mapping(skeleton, clip, robot) -> Mapping:
    """Draft a map of ``clip`` (and its ``skeleton`` from read_bvh) onto ``robot`` from the joint
    and link names (left/right and body-part words: hips, thigh/upleg, knee/shin, foot/ankle,
    shoulder/arm, elbow/forearm, hand/wrist, chest/torso, head; compared in lower case without
    separators, so ``l_upper_leg`` is a thigh as ``LeftUpLeg`` is), for the user to check and edit
    (write it with :meth:`Mapping.to_toml`). The side is a name's first word (``left_``, ``l_``,
    ``L`` before a capital), after a namespace (``mixamorig:``); in the clip's joint names also a
    word L/R/Left/Right anywhere (``Bip01 L Thigh``; not in link names, where ``leg_left_4_link``
    says nothing of which leg link is the shin). A foot is a link with collision shapes where one fits (its sole is
    put on the floor). Parts found on only one side are left out (a draft without feet warns:
    :class:`~invkin.errors.InvkinWarning`); the root is the skeleton's root joint and the robot's
    first link below a floating base."""
    src = [n for n, e in zip(clip.names, clip.end_site) if not e]
    links = [f for f in robot.frame_names if f != "world"]
    bodies = []
    src_root = next(n for n, p in zip(clip.names, clip.parents) if p < 0)
    rob_root = links[0]
    role, wp, wr = _WEIGHTS["root"]
    bodies.append(Body(src_root, rob_root, role, wp, wr))
    used_s, used_l = {src_root}, {rob_root}
    shaped = set(robot.collision.link_names)
    for part, _ in _PARTS[1:]:
        sides = (None,) if part in ("torso", "head") else ("left", "right")
        pairs = []
        for side in sides:
            s = _pick([n for n in src if n not in used_s], part, side, words=True)
            cands = [n for n in links if n not in used_l]
            if part == "foot":  # the foot is the link its sole belongs to: one with collision shapes first
                cands = [n for n in cands if n in shaped] + [n for n in cands if n not in shaped]
            ln = _pick(cands, part, side)
            pairs.append((s, ln))
        if any(s is None or ln is None for s, ln in pairs):
            continue
        role, wp, wr = _WEIGHTS[part]
        for s, ln in pairs:
            bodies.append(Body(s, ln, role, wp, wr))
            used_s.add(s)
            used_l.add(ln)
    m = Mapping(tuple(bodies), name=f"proposed: {skeleton.name if skeleton is not None else 'bvh'} onto {robot.name}",
                robot=robot.name)
    m.check(clip, robot)
    if not m.feet:  # a draft that holds nothing on the floor is not one to use as it is: say so
        import warnings

        from ..errors import InvkinWarning

        missing = [p for p, _ in _PARTS[1:] if p not in {_part_of(b) for b in bodies[1:]}]
        warnings.warn(f"propose_mapping: the link names of robot {robot.name!r} and the clip's joint names gave no "
                      f"pair of feet (nor {', '.join(p for p in missing if p != 'foot')}): the draft maps "
                      f"{len(bodies)} bodies and holds nothing on the floor; add [[body]] entries with "
                      f"role = \"foot\" (and the limbs) before using it", InvkinWarning, stacklevel=2)
    return m


def _part_of(body) -> str:
    """The body part a drafted body was picked as (by its weights and role)."""
    for part, w in _WEIGHTS.items():
        if w == (body.role, body.position_weight, body.rotation_weight):
            return part
    return ""
