"""Programmatic construction of robots: trees joint by joint, chains from steps, DH parameters.

Example::

    from invkin.model.build import RobotBuilder
    from invkin.spatial import make_transform

    b = RobotBuilder("arm")
    b.add_root("base")
    b.add_joint("shoulder", parent="base", child="upper", type="revolute", axis=(0, 0, 1),
                origin=make_transform(p=(0, 0, 0.3)), lower=-2.0, upper=2.0)
    robot = b.build()
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..errors import ModelError
from ..kinematics import kernels as K
from .robot import Robot

__all__ = ["RobotBuilder", "Step", "chain_from_steps", "chain_from_dh"]

_TYPES = {"fixed": K.FIXED, "revolute": K.REVOLUTE, "continuous": K.REVOLUTE,
          "prismatic": K.PRISMATIC, "ball": K.BALL, "free": K.FREE, "planar": K.PLANAR}


@dataclass
class _Node:
    name: str
    parent: str | None
    joint: str
    jtype: str
    origin: np.ndarray
    axis: np.ndarray
    lower: float
    upper: float
    mimic: tuple | None  # (leader joint name, multiplier, offset)
    frame: bool
    composite: str = ""  # "free" / "planar" for the nodes a composite joint expands into
    qnames: tuple = ()  # names of this node's q entries when they are not the joint's name


class RobotBuilder:
    """Collects frames and joints in any order and builds a :class:`Robot` in topological order.

    ``where`` (e.g. ``"panda.urdf: <joint name='j1'> line 12"``) is quoted in every error.
    """

    def __init__(self, name: str = "robot", source: str = "<builder>"):
        self.name = name
        self.source = source
        self._nodes: dict[str, _Node] = {}
        self._joints: dict[str, str] = {}  # joint name -> child node
        self._where: dict[str, str] = {}

    def _err(self, msg: str, where: str | None = None) -> ModelError:
        if where and msg.startswith(f"{where}: "):  # the default where (joint 'j') that msg names already
            where = None
        loc = f"{self.source}: {where}: " if where else f"{self.source}: "
        return ModelError(loc + msg)

    def add_root(self, name: str, where: str | None = None) -> "RobotBuilder":
        return self.add_frame(name, where=where)

    def add_frame(self, name: str, where: str | None = None, frame: bool = True) -> "RobotBuilder":
        """Declare a frame (a link) that a joint may later attach to a parent."""
        if name in self._nodes:
            raise self._err(f"duplicate frame name {name!r}", where)
        self._nodes[name] = _Node(name, None, "", "fixed", np.eye(4), np.zeros(3), 0.0, 0.0, None, frame)
        self._where[name] = where or f"frame {name!r}"
        return self

    def add_joint(self, name: str, parent: str, child: str, type: str = "revolute", origin=None,
                  axis=(0.0, 0.0, 1.0), lower: float = -math.inf, upper: float = math.inf,
                  mimic: tuple | None = None, where: str | None = None, frame: bool = True) -> "RobotBuilder":
        """Attach frame ``child`` (created if new) to ``parent`` by a joint.

        type: fixed, revolute, continuous, prismatic, ball, free or planar. origin:
        T_parent_joint (4, 4) [m]. axis: normalised here; a zero axis on a moving joint is an
        error (planar: the plane's normal). lower/upper [rad or m] (continuous, ball, free and
        planar are unbounded). mimic: (leader joint name, multiplier, offset).

        A free joint ``j`` has 6 q entries ``j.x j.y j.z`` (the child's origin in the joint
        frame [m]) and ``j.rx j.ry j.rz`` (its rotation vector [rad]); a planar joint 3 entries
        ``j.x j.y`` (in the plane normal to ``axis``, along :func:`plane_axes`) and ``j.yaw``
        (about ``axis``). Both are expanded into internal nodes named ``j.x``, ``j.y`` (, ``j.z``)
        — prismatic joints along fixed axes of the joint frame — and the child, attached by a ball
        (free) or continuous revolute (planar) joint; see :meth:`Robot.integrate` for the
        increment convention this gives.
        """
        w = where or f"joint {name!r}"
        if type not in _TYPES:
            raise self._err(f"joint {name!r}: unsupported type {type!r}; expected one of "
                            f"{', '.join(_TYPES)}", w)
        if name in self._joints:
            raise self._err(f"duplicate joint name {name!r}", w)
        if child not in self._nodes:
            self.add_frame(child, where=w, frame=frame)
        node = self._nodes[child]
        if node.parent is not None:
            raise self._err(f"frame {child!r} has two parent joints ({node.joint!r} and {name!r})", w)
        T = np.eye(4) if origin is None else np.asarray(origin, dtype=np.float64)
        if T.shape != (4, 4) or not np.all(np.isfinite(T)):
            raise self._err(f"joint {name!r}: origin must be a finite (4, 4) transform", w)
        ax = np.asarray(axis, dtype=np.float64).reshape(-1)
        if ax.shape != (3,) or not np.all(np.isfinite(ax)):
            raise self._err(f"joint {name!r}: axis must be 3 finite numbers, got {axis!r}", w)
        if np.any(ax):  # scaled by its largest entry first: components near 1e154 would overflow the norm
            ax = ax / float(np.max(np.abs(ax)))
        nrm = float(np.linalg.norm(ax))
        if type in ("revolute", "continuous", "prismatic", "planar"):
            if nrm < 1e-12:
                raise self._err(f"joint {name!r}: zero axis {ax.tolist()}; expected a non-zero vector", w)
            ax = ax / nrm
        else:
            ax = np.zeros(3)
        if type in ("continuous", "ball", "free", "planar"):
            lower, upper = -math.inf, math.inf
        if type == "fixed":
            lower = upper = 0.0
        lower = float(lower)
        upper = float(upper)
        if math.isnan(lower) or math.isnan(upper):
            raise self._err(f"joint {name!r}: limits must be numbers, got lower={lower}, upper={upper}", w)
        if lower > upper:
            raise self._err(f"joint {name!r}: lower limit {lower} > upper limit {upper}", w)
        if mimic is not None:
            if type not in ("revolute", "continuous", "prismatic"):
                raise self._err(f"joint {name!r}: only revolute/prismatic joints can mimic", w)
            leader, mult, off = mimic
            if not (math.isfinite(mult) and math.isfinite(off)):
                raise self._err(f"joint {name!r}: mimic multiplier/offset must be finite", w)
            mimic = (str(leader), float(mult), float(off))
        if type in ("free", "planar"):
            return self._add_composite(name, parent, child, type, T, ax, w)
        node.parent = parent
        node.joint = name
        node.jtype = type
        node.origin = T
        node.axis = ax
        node.lower = lower
        node.upper = upper
        node.mimic = mimic
        self._joints[name] = child
        self._where[child] = w
        return self

    def _add_composite(self, name, parent, child, type, T, normal, w) -> "RobotBuilder":
        """A free or planar joint as a chain of internal prismatic nodes ending in ``child``."""
        if type == "free":
            axes = np.eye(3)
            last = ("ball", np.zeros(3), (f"{name}.rx", f"{name}.ry", f"{name}.rz"))
        else:
            axes = plane_axes(normal)
            last = ("continuous", normal, (f"{name}.yaw",))
        prev = parent
        origin = T
        for k, a in enumerate(axes):
            inner = f"{name}.{'xyz'[k]}"
            if inner in self._nodes:
                raise self._err(f"joint {name!r}: its internal frame name {inner!r} is taken", w)
            self._nodes[inner] = _Node(inner, prev, name, "prismatic", origin, a, -math.inf, math.inf, None,
                                       False, type, (inner,))
            self._where[inner] = w
            prev = inner
            origin = np.eye(4)
        node = self._nodes[child]
        node.parent = prev
        node.joint = name
        node.jtype, node.axis, node.qnames = last
        node.origin = origin
        node.lower, node.upper = -math.inf, math.inf
        node.mimic = None
        node.composite = type
        self._joints[name] = child
        self._where[child] = w
        return self

    def build(self) -> Robot:
        """Check the tree (one root, no cycle, parents exist, mimic leaders exist) and build it."""
        nodes = self._nodes
        if not nodes:
            raise self._err("the model has no frames")
        for nd in nodes.values():
            if nd.parent is not None and nd.parent not in nodes:
                raise self._err(f"joint {nd.joint!r}: parent frame {nd.parent!r} does not exist",
                                self._where[nd.name])
        roots = [n for n, nd in nodes.items() if nd.parent is None]
        if not roots:
            raise self._err("the joints form a cycle: no frame is without a parent")
        # depth-first order from the roots; any node not reached is on a cycle
        kids: dict[str, list] = {n: [] for n in nodes}
        for n, nd in nodes.items():
            if nd.parent is not None:
                kids[nd.parent].append(n)
        order: list[str] = []
        for r in roots:
            stack = [r]
            while stack:
                n = stack.pop()
                order.append(n)
                stack.extend(reversed(kids[n]))
        if len(order) != len(nodes):
            cyc = sorted(set(nodes) - set(order))
            raise self._err(f"the joints form a cycle through frames {cyc[:5]}", self._where[cyc[0]])
        if len(roots) > 1:
            raise self._err(f"the model has {len(roots)} root frames {roots[:5]}; expected one tree")
        # q layout: moving, non-mimic joints in topological order
        qidx: dict[str, int] = {}  # joint name -> its first q entry (mimic leaders)
        qnode: dict[str, int] = {}  # node name -> its q entry
        joint_names, lower, upper = [], [], []
        owner: dict[str, str] = {}  # q entry name -> its joint
        for n in order:
            nd = nodes[n]
            if nd.parent is None or nd.jtype == "fixed" or nd.mimic is not None:
                continue
            qidx.setdefault(nd.joint, len(joint_names))
            qnode[n] = len(joint_names)
            if nd.qnames:
                names = list(nd.qnames)
            elif nd.jtype == "ball":
                names = [f"{nd.joint}.x", f"{nd.joint}.y", f"{nd.joint}.z"]
            else:
                names = [nd.joint]
            for e in names:
                if e in owner:
                    raise self._err(f"joint {nd.joint!r}: its q entry {e!r} is also an entry of joint {owner[e]!r} "
                                    f"(a joint named like an entry of a ball, free or planar joint); expected "
                                    f"unique joint names: rename one", self._where[n])
                owner[e] = nd.joint
            joint_names += names
            lower += [nd.lower] * len(names)
            upper += [nd.upper] * len(names)
        index = {n: i for i, n in enumerate(order)}
        N = len(order)
        parent = np.full(N, -1, dtype=np.int64)
        jtype = np.zeros(N, dtype=np.int64)
        axis = np.zeros((N, 3))
        origin = np.zeros((N, 4, 4))
        qi = np.full(N, -1, dtype=np.int64)
        mult = np.ones(N)
        off = np.zeros(N)
        leaders = [""] * N
        for i, n in enumerate(order):
            nd = nodes[n]
            origin[i] = nd.origin
            axis[i] = nd.axis
            if nd.parent is None:
                origin[i] = np.eye(4)
                continue
            parent[i] = index[nd.parent]
            jtype[i] = _TYPES[nd.jtype]
            if nd.mimic is not None:
                leader, m, o = nd.mimic
                if leader in qidx and nodes[self._joints[leader]].composite:
                    raise self._err(f"joint {nd.joint!r} mimics {leader!r}, a "
                                    f"{nodes[self._joints[leader]].composite} joint; expected a revolute "
                                    f"or prismatic leader", self._where[n])
                if leader not in qidx:
                    if leader in self._joints and nodes[self._joints[leader]].mimic is not None:
                        raise self._err(f"joint {nd.joint!r} mimics {leader!r}, itself a mimic joint",
                                        self._where[n])
                    raise self._err(f"joint {nd.joint!r} mimics {leader!r}, which is not a moving joint",
                                    self._where[n])
                qi[i] = qidx[leader]
                mult[i] = m
                off[i] = o
                leaders[i] = leader
            elif nd.jtype != "fixed":
                qi[i] = qnode[n]
        return Robot(
            name=self.name, parent=parent, joint_type=jtype, axis=axis, origin=origin, qidx=qi,
            multiplier=mult, offset=off, node_names=tuple(order),
            node_joint_names=tuple(nodes[n].joint for n in order),
            is_frame=np.array([nodes[n].frame for n in order]), joint_names=tuple(joint_names),
            lower=np.array(lower), upper=np.array(upper), mimic_leader=tuple(leaders),
            composite=tuple(nodes[n].composite for n in order),
        )


def plane_axes(normal) -> np.ndarray:
    """(2, 3): the in-plane axes (u, v) of a planar joint with unit ``normal``: u is the first of
    the x, y axes that is not along the normal, projected into the plane, and v = normal x u (so
    a normal along +z gives the x and y axes)."""
    n = np.asarray(normal, dtype=np.float64)
    e = np.array([1.0, 0.0, 0.0]) if abs(n[0]) < 0.9 else np.array([0.0, 1.0, 0.0])
    u = e - np.dot(e, n) * n
    u /= np.linalg.norm(u)
    return np.stack([u, np.cross(n, u)])


@dataclass(frozen=True)
class Step:
    """One step of a chain: a fixed offset, then a joint.

    offset: (3,) translation [m] or (4, 4) transform from the previous frame; type: revolute,
    continuous, prismatic, ball or fixed; axis in the joint frame.
    """

    offset: object = (0.0, 0.0, 0.0)
    type: str = "revolute"
    axis: tuple = (0.0, 0.0, 1.0)
    lower: float = -math.pi
    upper: float = math.pi
    name: str | None = None


def _offset_transform(offset) -> np.ndarray:
    a = np.asarray(offset, dtype=np.float64)
    if a.shape == (4, 4):
        return a
    if a.shape == (3,):
        T = np.eye(4)
        T[:3, 3] = a
        return T
    raise ModelError(f"chain step offset: expected (3,) or (4, 4), got shape {a.shape}")


def chain_from_steps(steps, name: str = "chain", tip_offset=None, base: str = "base",
                     tip: str = "tip") -> Robot:
    """A serial chain: frame ``base``, then for each step its offset and joint, then ``tip``.

    Frame k (``link{k}``) is the child of step k's joint; ``tip_offset`` places the tip frame.
    """
    b = RobotBuilder(name)
    b.add_root(base)
    prev = base
    for k, st in enumerate(steps):
        if not isinstance(st, Step):
            st = Step(*st) if isinstance(st, (tuple, list)) else Step(**st)
        child = f"link{k + 1}"
        b.add_joint(st.name or f"joint{k}", prev, child, st.type, _offset_transform(st.offset), st.axis,
                    st.lower, st.upper)
        prev = child
    b.add_joint(f"{tip}_joint", prev, tip, "fixed",
                _offset_transform(tip_offset if tip_offset is not None else (0.0, 0.0, 0.0)))
    return b.build()


def dh_transform(a: float, alpha: float, d: float, theta: float) -> np.ndarray:
    """Standard (distal) Denavit–Hartenberg transform Rz(theta) Tz(d) Tx(a) Rx(alpha)."""
    ct, st = math.cos(theta), math.sin(theta)
    ca, sa = math.cos(alpha), math.sin(alpha)
    return np.array([[ct, -st * ca, st * sa, a * ct],
                     [st, ct * ca, -ct * sa, a * st],
                     [0.0, sa, ca, d],
                     [0.0, 0.0, 0.0, 1.0]])


def chain_from_dh(params, name: str = "dh_chain", modified: bool = False, types=None,
                  lower=None, upper=None) -> Robot:
    """A chain from Denavit–Hartenberg rows (a, alpha, d, theta_offset) [m, rad].

    Standard DH (``modified=False``): link i = Rz(theta_i + q_i) Tz(d_i) Tx(a_i) Rx(alpha_i).
    Modified (Craig) DH: Rx(alpha_{i-1}) Tx(a_{i-1}) Rz(theta_i + q_i) Tz(d_i).
    ``types[i]`` = 'revolute' (q adds to theta) or 'prismatic' (q adds to d).
    """
    rows = np.asarray(params, dtype=np.float64)
    if rows.ndim != 2 or rows.shape[1] != 4 or not np.all(np.isfinite(rows)):
        raise ModelError(f"DH parameters: expected finite rows (a, alpha, d, theta), got shape {rows.shape}")
    n = rows.shape[0]
    types = list(types) if types is not None else ["revolute"] * n
    lo = np.full(n, -math.pi) if lower is None else np.asarray(lower, dtype=np.float64)
    hi = np.full(n, math.pi) if upper is None else np.asarray(upper, dtype=np.float64)
    b = RobotBuilder(name)
    b.add_root("base")
    prev = "base"
    pending = np.eye(4)  # standard DH: the part of link i-1 after its joint
    for i, (a, alpha, d, th) in enumerate(rows):
        t = types[i]
        if t not in ("revolute", "prismatic"):
            raise ModelError(f"DH joint {i}: type must be revolute or prismatic, got {t!r}")
        if modified:
            pre = dh_transform(a, alpha, 0.0, 0.0)  # Tx(a) Rx(alpha) == Rx(alpha) Tx(a)
            pre = pre @ (dh_transform(0.0, 0.0, d, th) if t == "revolute" else dh_transform(0.0, 0.0, 0.0, th))
            if t == "prismatic":
                pre = pre @ dh_transform(0.0, 0.0, d, 0.0)
            origin = pre
        else:
            # Rz(theta + q) Tz(d + q): put the fixed theta/d offset before the joint when it commutes
            if t == "revolute":
                origin = pending @ dh_transform(0.0, 0.0, d, th)  # Rz(th) Tz(d) = Tz(d) Rz(th)
            else:
                origin = pending @ dh_transform(0.0, 0.0, d, th)
            pending = dh_transform(a, alpha, 0.0, 0.0)
        child = f"link{i + 1}"
        b.add_joint(f"joint{i + 1}", prev, child, t, origin, (0.0, 0.0, 1.0), lo[i], hi[i])
        prev = child
    b.add_joint("tip_joint", prev, "tip", "fixed", pending if not modified else np.eye(4))
    return b.build()
