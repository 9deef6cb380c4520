"""URDF reader: standard-library expat, hardened against hostile input.

What is read
------------
The kinematics: every top-level ``<link name>`` and every top-level ``<joint>`` with its
``<parent link>``, ``<child link>``, ``<origin xyz rpy>``, ``<axis xyz>``, ``<limit lower upper
velocity>`` and ``<mimic joint multiplier offset>``. The mass of each link: its ``<inertial>``'s
``<mass value>`` and ``<origin xyz>`` (the centre of mass in the link frame; the inertia tensor is
not read), kept in ``robot.extras["inertials"]`` (:attr:`Robot.link_mass`, :attr:`Robot.link_com`:
``Robot.center_of_mass`` and :class:`~invkin.CenterOfMass` goals). And the shapes of each link:
its ``<visual>`` and ``<collision>`` elements (``<origin>``, ``<geometry>`` with one ``<box size>``, ``<cylinder radius
length>``, ``<sphere radius>``, ``<capsule radius length>`` or ``<mesh filename scale>``, and for
visuals ``<material name>`` with ``<color rgba>``, inline or named at the top level), stored as
:class:`~invkin.model.geometry.Geometry` tuples in ``robot.visuals`` and ``robot.collisions``
(mesh files are located, not read; see that module for ``package://``). A shape whose
``<geometry>`` is missing or holds no known shape is skipped (a ``<collision>`` one with a
:class:`~invkin.errors.ModelWarning`: a ``<plane>`` or ``<cdf>`` that no collision check sees).
Everything else (``<gazebo>``, ``<transmission>``, ...) is skipped; so is anything nested inside
those, such as the ``<joint>`` of a ``<transmission>``.

Conventions (as in the URDF specification)
------------------------------------------
* ``<origin xyz="x y z" rpy="roll pitch yaw">`` [m, rad] is ``T_parent_joint`` with
  ``R = Rz(yaw) @ Ry(pitch) @ Rx(roll)``. A missing ``<origin>`` is the identity, a missing
  ``xyz`` or ``rpy`` attribute is zeros.
* ``<axis xyz>`` defaults to ``1 0 0`` and is normalised; a zero axis on a moving joint is an error.
* ``revolute`` and ``prismatic`` joints need a ``<limit>``; its missing ``lower`` / ``upper``
  attributes are 0. ``continuous`` joints are unbounded (their ``<limit>`` position bounds are
  ignored). ``fixed`` joints have no degree of freedom.
* ``<mimic joint="leader" multiplier="1" offset="0">``: the follower's value is
  ``multiplier * q[leader] + offset`` and it has no entry in ``q``. A mimic of a mimic resolves to
  the first leader. Files that Pinocchio loads load here too, with a
  :class:`~invkin.errors.ModelWarning` naming the repair: a ``<mimic>`` on a ``fixed`` joint is
  ignored (Talos' grippers); a follower whose leader is missing ("no joint 'index_q1'; closest:
  'Left_index_q1'") or does not move is loaded as an independent joint.
* ``floating`` joints become free joints (6 q entries: x, y, z [m], rotation vector [rad]) and
  ``planar`` joints planar joints (x, y in the plane normal to ``<axis>``, yaw about it); see
  :meth:`RobotBuilder.add_joint <invkin.model.build.RobotBuilder.add_joint>`.

base / tip
----------
With neither, the whole tree is returned. With ``tip`` only, the chain runs from the root link to
``tip``. With ``base`` only, the tip is inferred when the subtree below ``base`` is a single chain
(exactly one leaf link); when it branches, ``tip`` is required and the error lists the leaves.

Hardening
---------
Any ``<!DOCTYPE>`` (hence any ``<!ENTITY>``, internal or external) is refused as soon as expat
reports it, before anything is expanded; parameter entities are never parsed; files larger than
``max_bytes`` are refused from their size, without reading them whole. Every error is a
:class:`~invkin.errors.ModelError` whose message names the file, the element (e.g.
``<joint name='j3'>``) and its line.
"""
from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from xml.parsers import expat

import numpy as np

from .._checks import MAX_LENGTH
from .._io import open_regular, path_str
from ..errors import FrameError, ModelError, ModelWarning, closest_names, warn_caller
from ..spatial import rpy_to_matrix
from .build import RobotBuilder
from .geometry import Geometry, resolve_mesh_path
from .robot import Robot

__all__ = ["load_urdf", "parse_urdf", "DEFAULT_MAX_BYTES"]

#: Largest URDF file :func:`load_urdf` reads by default [bytes] (16 MiB).
DEFAULT_MAX_BYTES = 16 * 2**20

_MOVING = ("revolute", "continuous", "prismatic")
_SUPPORTED = _MOVING + ("fixed", "floating", "planar")
_UNSUPPORTED = ()
_JOINT_CHILDREN = ("parent", "child", "origin", "axis", "limit", "mimic")
_NUMBER = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?")


@dataclass
class _Elem:
    """One element as read: tag, attributes and line number."""

    tag: str
    attrs: dict
    line: int


@dataclass
class _Joint:
    elem: _Elem
    parts: dict = field(default_factory=dict)  # child tag -> _Elem (first and only)


_SHAPE_PARTS = ("origin", "geometry", "material")
_SHAPE_KINDS = ("box", "cylinder", "sphere", "capsule", "mesh")


@dataclass
class _Shape:
    """A link's <visual> or <collision> as read: its parts, its shape element, its inline colour."""

    link: _Elem
    elem: _Elem
    parts: dict = field(default_factory=dict)  # origin / geometry / material -> _Elem (first)
    shape: _Elem | None = None                  # <box>, <mesh>, ... inside <geometry> (first)
    color: _Elem | None = None                  # <color> inside the inline <material>
    other: str | None = None                    # the first element of another kind inside <geometry>


def _q(s: str) -> str:
    """A name quoted for messages, as it would be written in the XML."""
    return repr(str(s))


def _desc(e: _Elem) -> str:
    """``<joint name='j3'>`` or ``<origin xyz='...' rpy='...'>``."""
    if "name" in e.attrs:
        return f"<{e.tag} name={_q(e.attrs['name'])}>"
    if e.attrs:
        inner = " ".join(f"{k}={_q(v)}" for k, v in list(e.attrs.items())[:3])
        return f"<{e.tag} {inner}>"
    return f"<{e.tag}>"


def _where(e: _Elem) -> str:
    return f"{_desc(e)} line {e.line}"


class _Reader:
    """Collects the robot's links and joints from expat events; raises ModelError on bad input."""

    kind = "URDF"

    def __init__(self, source: str):
        self.source = source
        self.depth = 0
        self.robot: _Elem | None = None
        self.links: list[_Elem] = []
        self.joints: list[_Joint] = []
        self._joint: _Joint | None = None  # the top-level <joint> being read
        self._link: _Elem | None = None    # the top-level <link> being read
        self._inertial = False             # inside its <inertial>
        self.inertials: dict = {}          # link name -> {"mass": _Elem, "origin": _Elem}
        self._shape: _Shape | None = None  # its <visual> / <collision> being read
        self._part: str | None = None      # the tag of the shape's part being read
        self._material: str | None = None  # the top-level <material name> being read
        self.shapes: list[_Shape] = []
        self.materials: dict[str, _Elem] = {}  # top-level material name -> its <color>
        self.ignored_mimics: list[str] = []    # <mimic> on joints that do not move (one warning for all)

    def err(self, msg: str, where: str | None = None) -> ModelError:
        return ModelError(f"{self.source}: {where}: {msg}" if where else f"{self.source}: {msg}")

    # ------------------------------------------------------------------ expat handlers
    def make_parser(self):
        p = expat.ParserCreate()
        p.SetParamEntityParsing(expat.XML_PARAM_ENTITY_PARSING_NEVER)
        p.StartDoctypeDeclHandler = self._doctype
        p.EntityDeclHandler = self._entity
        p.UnparsedEntityDeclHandler = self._unparsed_entity
        p.ExternalEntityRefHandler = self._external_ref
        p.StartElementHandler = self._start
        p.EndElementHandler = self._end
        self.parser = p
        return p

    def _line(self) -> int:
        return self.parser.CurrentLineNumber

    def _doctype(self, name, system_id, public_id, has_internal_subset):
        ext = f" SYSTEM {system_id!r}" if system_id else ""
        sub = " with an internal subset [...]" if has_internal_subset else ""
        raise self.err(
            f"<!DOCTYPE {name}{ext}>{sub} refused: a {self.kind} needs no DTD, and DOCTYPE/ENTITY "
            f"declarations are refused so that entity expansion (billion laughs) and external "
            f"entities cannot be used; remove the DOCTYPE", f"line {self._line()}")

    def _entity(self, name, is_parameter_entity, value, base, system_id, public_id, notation):
        ext = f" SYSTEM {system_id!r}" if system_id else ""
        raise self.err(f"<!ENTITY {name}{ext}> refused: entity declarations are not allowed in {self.kind}",
                       f"line {self._line()}")

    def _unparsed_entity(self, name, base, system_id, public_id, notation):
        self._entity(name, False, None, base, system_id, public_id, notation)

    def _external_ref(self, context, base, system_id, public_id):
        raise self.err(f"external entity {system_id!r} refused", f"line {self._line()}")

    def _start(self, tag, attrs):
        self.depth += 1
        d = self.depth
        if d == 1:
            if tag != "robot":
                raise self.err(f"root element is <{tag}>; expected <robot>", f"line {self._line()}")
            self.robot = _Elem(tag, attrs, self._line())
            return
        if d == 2:
            e = _Elem(tag, attrs, self._line())
            if tag == "link":
                self.links.append(e)
                self._link = e
            elif tag == "material":
                self._material = attrs.get("name")
            elif tag == "joint":
                self._joint = _Joint(e)
                self.joints.append(self._joint)
            elif tag.startswith("xacro:"):
                raise self.err(f"<{tag}> is a xacro macro: this file has not been expanded; run "
                               f"`xacro file.urdf.xacro > file.urdf` first", _where(e))
            return
        if d == 3 and self._joint is not None and tag in _JOINT_CHILDREN:
            e = _Elem(tag, attrs, self._line())
            j = self._joint
            if tag in j.parts:
                raise self.err(f"<{tag}> appears twice in {_desc(j.elem)} (lines {j.parts[tag].line} "
                               f"and {e.line}); expected at most one", _where(j.elem))
            j.parts[tag] = e
        if d == 3 and self._link is not None and tag == "inertial":
            self._inertial = True
        elif d == 4 and self._inertial and tag in ("mass", "origin"):
            self.inertials.setdefault(self._link.attrs.get("name"), {})[tag] = _Elem(tag, attrs, self._line())
        self._start_shape(d, tag, attrs)

    def _start_shape(self, d, tag, attrs):
        """<visual>/<collision> of a top-level link, and top-level <material><color>."""
        if d == 3 and self._material and tag == "color":
            self.materials.setdefault(self._material, _Elem(tag, attrs, self._line()))
        elif d == 3 and self._link is not None and tag in ("visual", "collision"):
            self._shape = _Shape(self._link, _Elem(tag, attrs, self._line()))
            self.shapes.append(self._shape)
        elif d == 4 and self._shape is not None and tag in _SHAPE_PARTS:
            self._part = tag
            self._shape.parts.setdefault(tag, _Elem(tag, attrs, self._line()))
        elif d == 5 and self._shape is not None:
            if self._part == "geometry" and tag in _SHAPE_KINDS and self._shape.shape is None:
                self._shape.shape = _Elem(tag, attrs, self._line())
            elif self._part == "geometry" and self._shape.other is None:
                self._shape.other = tag  # <plane>, <cdf>, ...: said when the shape is left out
            elif self._part == "material" and tag == "color" and self._shape.color is None:
                self._shape.color = _Elem(tag, attrs, self._line())

    def _end(self, tag):
        if self.depth == 2 and tag == "joint":
            self._joint = None
        if self.depth == 2:
            self._link = self._material = None
        elif self.depth == 3:
            self._shape = None
            self._inertial = False
        elif self.depth == 4:
            self._part = None
        self.depth -= 1


# ---------------------------------------------------------------------- attribute parsing
def _floats(rd: _Reader, owner: _Elem, e: _Elem, attr: str, n: int, default) -> np.ndarray:
    """``n`` finite numbers from a space-separated attribute; ``default`` when it is absent."""
    s = e.attrs.get(attr)
    if s is None:
        return np.array(default, dtype=np.float64)
    toks = s.split()
    what = f"<{e.tag} {attr}={_q(s)}> (line {e.line})"
    if len(toks) != n:
        raise rd.err(f"{what}: expected {n} numbers separated by spaces, got {len(toks)}", _where(owner))
    out = np.empty(n)
    for k, t in enumerate(toks):
        out[k] = _number(rd, owner, what, t)
    return out


def _number(rd: _Reader, owner: _Elem, what: str, t: str) -> float:
    if _NUMBER.fullmatch(t) is None:
        low = t.lower().lstrip("+-")
        if low in ("nan", "inf", "infinity"):
            raise rd.err(f"{what}: {t!r} is not finite; expected finite numbers", _where(owner))
        raise rd.err(f"{what}: {t!r} is not a number", _where(owner))
    v = float(t)
    if not math.isfinite(v):
        raise rd.err(f"{what}: {t!r} overflows to {v}; expected finite numbers", _where(owner))
    return v


def _scalar(rd: _Reader, owner: _Elem, e: _Elem, attr: str, default: float) -> float:
    s = e.attrs.get(attr)
    if s is None:
        return default
    return _number(rd, owner, f"<{e.tag} {attr}={_q(s)}> (line {e.line})", s.strip())


def _name(rd: _Reader, e: _Elem, attr: str = "name", owner: _Elem | None = None) -> str:
    """The non-empty name attribute ``attr`` of ``e`` (a part of element ``owner`` if given)."""
    v = e.attrs.get(attr)
    if v is None or not v.strip():
        got = "missing" if v is None else f"empty ({v!r})"
        if owner is None:
            raise rd.err(f"the {attr}=\"...\" attribute is {got}; expected a non-empty name", _where(e))
        raise rd.err(f"<{e.tag}> (line {e.line}): the {attr}=\"...\" attribute is {got}; expected "
                     f"a non-empty name", _where(owner))
    return v


# ---------------------------------------------------------------------- reading
def parse_urdf(text_or_bytes, source: str = "<string>", base: str | None = None,
               tip: str | None = None) -> Robot:
    """A :class:`Robot` from URDF text (``str``) or a document (``bytes``, any XML encoding).

    ``source`` names the document in error messages. See the module docstring for the
    conventions, the meaning of ``base`` / ``tip`` and what is refused.
    """
    rd = _Reader(str(source))
    parse_hardened(rd, text_or_bytes, "parse_urdf")
    if rd.robot is None:  # pragma: no cover - expat reports an empty document itself
        raise rd.err("no <robot> element")
    cut = base is not None or tip is not None
    robot, unsupported = _build(rd, defer_unsupported=cut)
    robot = _with_inertials(rd, robot)
    if cut:
        robot = _cut(rd, robot, base, tip)
        for nm in robot.node_names[1:]:  # the root's own joint is above the chain and dropped
            if nm in unsupported:
                raise unsupported[nm]
    _attach_shapes(rd, robot)
    return robot


def _with_inertials(rd: _Reader, robot: Robot) -> Robot:
    """robot with extras "inertials" {link: (mass [kg], com (3,) [m] in the link frame)} from each
    link's ``<inertial>`` (``<mass value>``, ``<origin xyz>``; kinematics needs no inertia tensor)
    and "velocity_limits" {joint: [rad/s or m/s]} from each joint's ``<limit velocity>``."""
    inertials = {}
    for link, parts in rd.inertials.items():
        e = parts.get("mass") or parts.get("origin")
        m = _scalar(rd, e, parts["mass"], "value", 0.0) if "mass" in parts else 0.0
        if m < 0:
            raise rd.err(f"link {link!r}: <mass value={m}> is negative; expected >= 0 [kg]", _where(e))
        c = _floats(rd, e, parts["origin"], "xyz", 3, (0.0, 0.0, 0.0)) if "origin" in parts else np.zeros(3)
        inertials[link] = (m, c)
    vel = {}
    negative = []
    for j in rd.joints:
        lim = j.parts.get("limit")
        if lim is not None and "velocity" in lim.attrs:
            v = _scalar(rd, j.elem, lim, "velocity", math.inf)
            if v > 0:
                vel[j.elem.attrs.get("name")] = v
            elif v < 0:  # (0 is the usual "not given": no limit, in silence)
                negative.append(f"{j.elem.attrs.get('name')!r} ({v:g}, line {lim.line})")
    if negative:
        warn_caller(f"{rd.source}: <limit velocity> is negative for joint(s) {', '.join(negative)}; expected a "
                    f"speed >= 0 [rad/s or m/s]: read as no velocity limit", ModelWarning)
    if not inertials and not vel:
        return robot
    return robot.with_extras(inertials=inertials, velocity_limits=vel)


def _attach_shapes(rd: _Reader, robot: Robot) -> None:
    """Set ``robot.visuals`` and ``robot.collisions`` (the links' shapes that ``robot`` keeps)."""
    base_dir = None if rd.source.startswith("<") else os.path.dirname(os.path.abspath(rd.source))
    kept = set(robot.node_names)
    out = {"visual": [], "collision": []}
    left_out = []
    for sh in rd.shapes:
        link = sh.link.attrs.get("name")
        if link in kept:
            g = _geometry(rd, sh, link, base_dir)
            if g is not None:
                out[sh.elem.tag].append(g)
            elif sh.elem.tag == "collision":
                what = f"<{sh.other}>" if sh.other else ("no shape" if "geometry" in sh.parts else "no <geometry>")
                left_out.append(f"link {link!r} (line {sh.elem.line}): {what}")
    if left_out:  # a collision check without them would pass through them: say so
        warn_caller(f"{rd.source}: {len(left_out)} <collision> element(s) left out, with no "
                    f"{', '.join(_SHAPE_KINDS[:-1])} or {_SHAPE_KINDS[-1]} inside <geometry>: {'; '.join(left_out[:8])}", ModelWarning)
    # Robot is frozen; these two read-only tuples ride along as plain attributes
    object.__setattr__(robot, "visuals", tuple(out["visual"]))
    object.__setattr__(robot, "collisions", tuple(out["collision"]))


def _geometry(rd: _Reader, sh: _Shape, link: str, base_dir: str | None) -> Geometry | None:
    """One <visual>/<collision> as a Geometry; None when it has no known shape."""
    e, owner = sh.shape, sh.link
    if e is None:
        return None
    T = np.eye(4)
    o = sh.parts.get("origin")
    if o is not None:
        T[:3, 3] = _floats(rd, owner, o, "xyz", 3, (0.0, 0.0, 0.0))
        T[:3, :3] = rpy_to_matrix(_floats(rd, owner, o, "rpy", 3, (0.0, 0.0, 0.0)))
    filename = path = None
    if e.tag == "box":
        size = _floats(rd, owner, e, "size", 3, (0.0, 0.0, 0.0))
    elif e.tag in ("cylinder", "capsule"):
        size = (_scalar(rd, owner, e, "radius", 0.0), _scalar(rd, owner, e, "length", 0.0))
    elif e.tag == "sphere":
        size = (_scalar(rd, owner, e, "radius", 0.0),)
    else:
        filename = e.attrs.get("filename")
        if not filename or not filename.strip():
            raise rd.err(f"<mesh> (line {e.line}) has no filename=\"...\"; expected the mesh file's "
                         f"name", _where(owner))
        size = _floats(rd, owner, e, "scale", 3, (1.0, 1.0, 1.0))
        path = resolve_mesh_path(filename, base_dir)
    if any(x < 0 for x in size) and e.tag != "mesh":
        raise rd.err(f"<{e.tag}> (line {e.line}): negative size {tuple(float(x) for x in size)}; expected "
                     f"sizes >= 0 [m]", _where(owner))
    if any(abs(x) > MAX_LENGTH for x in size):
        raise rd.err(f"<{e.tag}> (line {e.line}): {'scale' if e.tag == 'mesh' else 'size'} "
                     f"{tuple(float(x) for x in size)} exceeds {MAX_LENGTH:g}; expected a shape within "
                     f"±{MAX_LENGTH:g} m", _where(owner))
    mat = sh.parts.get("material")
    mname = mat.attrs.get("name") if mat is not None else None
    color = sh.color if sh.color is not None else rd.materials.get(mname) if mname else None
    rgba = None
    if color is not None and "rgba" in color.attrs:
        rgba = tuple(float(x) for x in np.clip(_floats(rd, owner, color, "rgba", 4, (1, 1, 1, 1)), 0.0, 1.0))
    return Geometry(link, e.tag, tuple(size), T, filename, path, rgba, mname or None,
                    sh.elem.attrs.get("name"))


def load_urdf(path, base: str | None = None, tip: str | None = None,
              max_bytes: int = DEFAULT_MAX_BYTES) -> Robot:
    """Read a URDF file into a :class:`Robot` (see :func:`parse_urdf`).

    Files larger than ``max_bytes`` [bytes] are refused without being read whole. A missing or
    unreadable file is a :class:`ModelError`.
    """
    p, data = read_bounded(path, max_bytes, "URDF", "load_urdf")
    return parse_urdf(data, source=p, base=base, tip=tip)


def read_bounded(path, max_bytes: int, kind: str, caller: str) -> tuple:
    """(path as str, bytes) of a model file of at most ``max_bytes`` [bytes], refused from its size
    without being read whole; a missing or unreadable file is a ModelError naming ``kind``."""
    p = path_str(path, ModelError, f"a file path ({caller})")
    try:
        size = os.path.getsize(p)
        if size > max_bytes:
            raise ModelError(f"{p}: file is {size} bytes, larger than max_bytes={max_bytes}; refused (pass a "
                             f"larger max_bytes if it is trusted: load_robot(..., max_bytes=n), invkin --max-bytes N)")
        # a FIFO or device named x.urdf is refused before a read could block on it
        with open_regular(p, f"{kind} file", ModelError) as f:
            data = f.read(max_bytes + 1)  # bounded even if the size lied (special files)
    except FileNotFoundError:
        raise ModelError(f"{p}: no such {kind} file") from None
    except IsADirectoryError:
        raise ModelError(f"{p}: is a directory; expected a {kind} file") from None
    except OSError as e:
        raise ModelError(f"{p}: cannot read the {kind} file: {e.strerror or e}") from None
    if len(data) > max_bytes:
        raise ModelError(f"{p}: file holds more than max_bytes={max_bytes} bytes; refused")
    return p, data


def _declaration_first(doc):
    """``doc`` with the blank lines before its ``<?xml ...?>`` declaration moved after it (files
    written by tools that print a newline first; expat refuses a declaration that is not at the
    start, Pinocchio's tinyxml reads them); the line numbers of everything after it are unchanged."""
    ws, decl = (b" \t\r\n", b"<?xml") if isinstance(doc, bytes) else (" \t\r\n", "<?xml")
    body = doc.lstrip(ws)
    if len(body) == len(doc) or not body.startswith(decl):
        return doc
    end = body.find(b"?>" if isinstance(doc, bytes) else "?>")
    if end < 0:
        return doc
    return body[:end + 2] + doc[:len(doc) - len(body)] + body[end + 2:]


def parse_hardened(rd: "_Reader", text_or_bytes, caller: str) -> None:
    """Feed a document to ``rd``'s hardened expat parser (no DOCTYPE/entities); ModelError with the
    line and column of malformed XML."""
    if isinstance(text_or_bytes, (bytearray, memoryview)):
        text_or_bytes = bytes(text_or_bytes)
    if not isinstance(text_or_bytes, (str, bytes)):
        raise ModelError(f"{rd.source}: {caller} expects str or bytes, got {type(text_or_bytes).__name__}")
    text_or_bytes = _declaration_first(text_or_bytes)
    p = rd.make_parser()
    try:
        p.Parse(text_or_bytes, True)
    except expat.ExpatError as e:
        raise rd.err(f"malformed XML: {expat.ErrorString(e.code)}",
                     f"line {e.lineno}, column {e.offset + 1}") from None
    except (LookupError, UnicodeError) as e:  # <?xml encoding="bogus"?>: expat asks the codec registry
        raise rd.err(f"unsupported XML encoding ({e}); expected UTF-8, UTF-16 or another known codec") from None


def _joint_fields(rd: _Reader, j: _Joint, defer_unsupported: bool = False):
    """Validated keyword arguments of RobotBuilder.add_joint for one <joint>, and an error.

    The error is None, or (with ``defer_unsupported``) the ModelError of a floating/planar
    joint, which then stands in the tree as a fixed joint: it is raised only if the chain that
    base/tip select moves through it.
    """
    e = j.elem
    w = _where(e)
    name = _name(rd, e)
    jtype = e.attrs.get("type")
    if jtype is None:
        raise rd.err(f"joint {name!r} has no type=\"...\" attribute; expected one of "
                     f"{', '.join(_SUPPORTED)}", w)
    deferred = None
    if jtype in _UNSUPPORTED:
        deferred = rd.err(f"joint {name!r} is {jtype!r}, which invkin does not support (supported: "
                          f"{', '.join(_SUPPORTED)}); load a chain that does not move through it "
                          f"with base=... / tip=... (e.g. base=its child link)", w)
        if not defer_unsupported:
            raise deferred
        jtype = "fixed"
    if jtype not in _SUPPORTED:
        raise rd.err(f"joint {name!r} has unknown type {jtype!r}; expected one of "
                     f"{', '.join(_SUPPORTED + _UNSUPPORTED)}", w)
    ends = {}
    for tag in ("parent", "child"):
        el = j.parts.get(tag)
        if el is None:
            raise rd.err(f"joint {name!r} has no <{tag} link=\"...\"/> element", w)
        ends[tag] = _name(rd, el, "link", owner=e)
    T = np.eye(4)
    o = j.parts.get("origin")
    if o is not None:
        T[:3, 3] = _floats(rd, e, o, "xyz", 3, (0.0, 0.0, 0.0))
        T[:3, :3] = rpy_to_matrix(_floats(rd, e, o, "rpy", 3, (0.0, 0.0, 0.0)))
    axis = np.array([1.0, 0.0, 0.0])
    a = j.parts.get("axis")
    if a is not None:
        axis = _floats(rd, e, a, "xyz", 3, (1.0, 0.0, 0.0))
        if (jtype in _MOVING or jtype == "planar") and not np.any(axis):
            raise rd.err(f"joint {name!r}: <axis xyz={_q(a.attrs['xyz'])}> (line {a.line}) is zero; "
                         f"expected a non-zero vector", w)
    lower, upper = -math.inf, math.inf
    lim = j.parts.get("limit")
    if jtype in ("revolute", "prismatic"):
        if lim is None:
            raise rd.err(f"{jtype} joint {name!r} has no <limit lower=... upper=.../>; the URDF "
                         f"specification requires one (use type=\"continuous\" for an unbounded "
                         f"revolute joint)", w)
        lower = _scalar(rd, e, lim, "lower", 0.0)
        upper = _scalar(rd, e, lim, "upper", 0.0)
        if lower > upper:
            raise rd.err(f"joint {name!r}: <limit> (line {lim.line}) has lower={lower} > upper={upper}; "
                         f"expected lower <= upper", w)
    mimic = None
    m = j.parts.get("mimic")
    if m is not None:
        leader = _name(rd, m, "joint", owner=e)
        mimic = (leader, _scalar(rd, e, m, "multiplier", 1.0), _scalar(rd, e, m, "offset", 0.0))
        if jtype not in _MOVING:  # Talos' grippers: Pinocchio and urdfdom ignore it too
            rd.ignored_mimics.append(f"{w}: <mimic joint={_q(leader)}> (line {m.line}) on a {jtype} joint")
            mimic = None
    return dict(name=name, parent=ends["parent"], child=ends["child"], type="free" if jtype == "floating" else jtype,
                origin=T,
                axis=axis, lower=lower, upper=upper, mimic=mimic, where=w), deferred


def _build(rd: _Reader, defer_unsupported: bool = False):
    """(Robot of the whole tree, {child link of a deferred floating/planar joint: its error})."""
    robot_el = rd.robot
    name = robot_el.attrs.get("name") or (Path(rd.source).stem if not rd.source.startswith("<")
                                          else "robot")
    if not rd.links:
        raise rd.err("the robot has no <link> elements", _where(robot_el))
    links: dict[str, _Elem] = {}
    for e in rd.links:
        nm = _name(rd, e)
        if nm in links:
            raise rd.err(f"duplicate link name {nm!r} (first defined at line {links[nm].line})", _where(e))
        links[nm] = e
    joints: dict[str, dict] = {}
    lines: dict[str, int] = {}
    child_of: dict[str, str] = {}  # child link -> joint name
    unsupported: dict[str, ModelError] = {}
    for j in rd.joints:
        f, deferred = _joint_fields(rd, j, defer_unsupported)
        if deferred is not None:
            unsupported[f["child"]] = deferred
        jn = f["name"]
        if jn in joints:
            raise rd.err(f"duplicate joint name {jn!r} (first defined at line {lines[jn]})", f["where"])
        for end in ("parent", "child"):
            if f[end] not in links:
                raise rd.err(f"joint {jn!r}: {end} link {f[end]!r} is not a <link> of this robot; "
                             f"closest: {closest_names(f[end], links)}", f["where"])
        if f["parent"] == f["child"]:
            raise rd.err(f"joint {jn!r} attaches link {f['child']!r} to itself", f["where"])
        if f["child"] in child_of:
            other = child_of[f["child"]]
            raise rd.err(f"link {f['child']!r} is the child of two joints, {other!r} (line "
                         f"{lines[other]}) and {jn!r}; a URDF must be a tree", f["where"])
        joints[jn] = f
        lines[jn] = j.elem.line
        child_of[f["child"]] = jn
    if rd.ignored_mimics:  # Talos' grippers: 12 of them, one warning (Pinocchio and urdfdom ignore them too)
        warn_caller(f"{rd.source}: {len(rd.ignored_mimics)} <mimic> element(s) ignored, only revolute, continuous "
                    f"and prismatic joints move: {'; '.join(rd.ignored_mimics)}", ModelWarning)
    _check_tree(rd, links, joints, lines, child_of)
    _check_mimic_leaders(rd, joints)
    b = RobotBuilder(name=name, source=rd.source)
    for nm, e in links.items():
        b.add_frame(nm, where=_where(e))
    for f in joints.values():
        b.add_joint(**f)
    return b.build(), unsupported


def _check_mimic_leaders(rd: _Reader, joints: dict) -> None:
    """A follower whose leader is missing or does not move becomes an independent joint, with a
    warning naming the closest joints (what Pinocchio and urdfdom load); chains of mimics resolve
    to the first leader (multipliers and offsets composed)."""
    for jn, f in joints.items():
        if f["mimic"] is None:
            continue
        leader, mult, off = f["mimic"]
        seen = {jn}
        lf = joints.get(leader)
        while lf is not None and lf["mimic"] is not None and leader not in seen:
            seen.add(leader)
            nxt, m2, o2 = lf["mimic"]
            leader, mult, off = nxt, mult * m2, mult * o2 + off
            lf = joints.get(leader)
        if lf is not None and lf["type"] in _MOVING and lf["mimic"] is None:
            f["mimic"] = (leader, mult, off)
            continue
        if lf is None:
            why = f"no joint {leader!r}; closest: {closest_names(leader, joints)}"
        elif leader in seen:
            why = f"the mimic joints {sorted(seen)} follow each other in a cycle"
        else:
            why = f"joint {leader!r} is {lf['type']!r}, not a moving joint"
        warn_caller(f"{rd.source}: {f['where']}: joint {jn!r} mimics {f['mimic'][0]!r}: {why}; {jn!r} "
                    f"is loaded as an independent joint", ModelWarning)
        f["mimic"] = None


def _check_tree(rd, links, joints, lines, child_of) -> None:
    """Cycles and several roots, reported with the lines of the elements involved."""
    state: dict[str, int] = {}  # 1: being walked, 2: reaches a root
    for start in links:
        path = []
        n = start
        while n not in state:
            state[n] = 1
            path.append(n)
            jn = child_of.get(n)
            if jn is None:
                break
            n = joints[jn]["parent"]
        else:
            if state[n] == 1:  # came back to a link of this walk: a cycle
                cyc = path[path.index(n):]
                js = [child_of[x] for x in cyc]
                first = min(js, key=lambda x: lines[x])
                ring = " -> ".join(reversed(cyc + [cyc[0]]))
                raise rd.err(f"the joints form a cycle through links {ring} (joints "
                             f"{', '.join(repr(x) for x in sorted(js, key=lambda x: lines[x]))}); "
                             f"a URDF must be a tree", _where(_Elem("joint", {"name": first}, lines[first])))
        for x in path:
            state[x] = 2
    roots = [nm for nm in links if nm not in child_of]
    if len(roots) > 1:
        shown = ", ".join(f"{r!r} (line {links[r].line})" for r in roots[:6])
        raise rd.err(f"found {len(roots)} root links (links that are no joint's child): {shown}; a "
                     f"URDF must be one tree; connect them with joints or remove the extra links",
                     _where(rd.robot))


def _cut(rd: _Reader, robot: Robot, base: str | None, tip: str | None) -> Robot:
    """robot.subchain with base/tip defaults (see the module docstring) and located errors."""
    for nm, v in (("base", base), ("tip", tip)):
        if v is not None and v not in robot.node_names:
            raise FrameError(f"{rd.source}: {nm}={v!r} is not a link of robot {robot.name!r}; "
                             f"closest: {closest_names(str(v), robot.node_names)}")
    if base is None:
        base = robot.root
    if tip is None:
        b = robot.node_names.index(base)
        below = {b}
        leaves = []
        for i in range(b + 1, robot.n_nodes):  # topological order: descendants follow base
            if int(robot.parent[i]) in below:
                below.add(i)
        for i in sorted(below):
            if not any(int(robot.parent[k]) == i for k in below):
                leaves.append(robot.node_names[i])
        if len(leaves) != 1:
            raise ModelError(f"{rd.source}: tip is required: the tree below base {base!r} branches "
                             f"into {len(leaves)} leaf links ({', '.join(repr(x) for x in leaves[:8])})")
        tip = leaves[0]
    try:
        return robot.subchain(base, tip)
    except ModelError as e:
        raise ModelError(f"{rd.source}: {e}") from None
