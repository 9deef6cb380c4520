"""The Robot: an immutable struct of arrays in topological order.

Every node is a frame (a URDF link, a BVH joint or End Site, a tool frame). A node is attached to
its parent by one joint: fixed, revolute (limited or continuous), prismatic or ball. Its world
transform is ``T_world_parent @ origin @ M(theta)`` (see :mod:`invkin.kinematics.kernels`).
Free and planar joints are chains of internal nodes of those kinds (``composite`` marks them; see
:meth:`RobotBuilder.add_joint <invkin.model.build.RobotBuilder.add_joint>`).

The configuration ``q`` has one entry per degree of freedom: one per revolute or prismatic joint,
three per ball joint (a rotation vector), six per free joint (x, y, z [m], rotation vector
[rad]), three per planar joint (x, y [m], yaw [rad]), none for fixed joints and URDF mimic
followers (whose value is ``multiplier * q[leader] + offset``). ``joint_names`` names each entry
of ``q``; a ball joint ``j`` contributes ``j.x``, ``j.y``, ``j.z``; a free joint ``j.x j.y j.z
j.rx j.ry j.rz``; a planar joint ``j.x j.y j.yaw``.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from types import MappingProxyType

import numpy as np
from numba import njit

from .._tiers import call_interpreted, entry_point
from .._parallel import call as parallel_call
from .._checks import MAX_LENGTH
from ..errors import ConfigurationError, FrameError, ModelError, closest_names
from ..kinematics import kernels as K

__all__ = ["Robot", "JOINT_TYPES"]

_F64 = np.dtype(np.float64)


def _entry(slot, dispatcher, *args):
    """The entry point of ``dispatcher`` for these argument types, kept in ``slot[0]`` — compiled
    (or loaded from Numba's cache) with q (args[1]) typed as any-layout float64 vector, so that
    the fast paths of Robot.fk / Robot.jacobian may hand it any 1-D float64 array without
    Numba's per-call type dispatch (the kernels check q's length and finiteness). Only for call
    sites whose other argument types are fixed by construction (read-only chain programs,
    fresh C-contiguous outputs, a Python int)."""
    if slot[0] is _not_compiled:
        import numba
        from numba import types

        sig = [numba.typeof(a) for a in args]
        sig[1] = types.Array(types.float64, 1, "A")
        ep = entry_point(dispatcher, sig)
        if ep is None:  # compiling in the background (invkin._tiers): interpreted this time
            return lambda *a: call_interpreted(dispatcher, *a)
        slot[0] = ep
    return slot[0]


def _not_compiled(*args):  # the slots' value until the first slow-path call compiles the kernel
    return False


_FK_ENTRY = [_not_compiled]
_JAC_ENTRY = [_not_compiled]
_T_SCRATCH = np.empty((4, 4))  # chain_jacobian_checked's transform output (never read)

#: Names of the joint types, indexed by the integer codes of kinematics.kernels (the model arrays
#: hold only the first four: free and planar joints are expanded into nodes of those).
JOINT_TYPES = ("fixed", "revolute", "prismatic", "ball", "free", "planar")
_TREE_DEPTH = 48  # Robot.tree(): levels drawn indented

#: Restarts and :meth:`Robot.sample` draw the q entries of free and planar joints (the floating
#: base) within this distance of the given configuration, not over their infinite range:
#: translation [m], rotation-vector components and yaw [rad].
BASE_SAMPLE_SPREAD = (0.1, 0.3)


def _readonly(a: np.ndarray) -> np.ndarray:
    a = np.ascontiguousarray(a)
    a.setflags(write=False)
    return a


@njit(cache=True)
def _integrate_rows(q, dq, balls, out):
    """out[b] = q[b] ⊕ dq[b] for every row of (B, dof) arrays (kinematics.kernels.integrate_into)."""
    for b in range(q.shape[0]):
        K.integrate_into(q[b], dq[b], balls, out[b])


@njit(cache=True)
def _difference_rows(q0, q1, balls, out):
    """out[b] = q1[b] ⊖ q0[b] for every row (kinematics.kernels.difference_into)."""
    for b in range(q0.shape[0]):
        K.difference_into(q0[b], q1[b], balls, out[b])


def _bounded_limits(name, joint_names, jtype, qidx, lower, upper, origin):
    """Limits beyond the documented bounds (:data:`invkin._checks.MAX_ANGLE` = 1e6 rad,
    :data:`invkin._checks.MAX_LENGTH` = 1e9 m for prismatic joints) read as unlimited, with an
    :class:`InvkinWarning`: ``lower="-1e308"`` would otherwise make a midpoint or a sampled q
    overflow to inf. A range entirely beyond the bound, or a link offset beyond MAX_LENGTH, is a
    ModelError."""
    from .._checks import MAX_ANGLE, MAX_LENGTH

    if origin.size and float(np.max(np.abs(origin[:, :3, 3]))) > MAX_LENGTH:
        raise ModelError(f"Robot {name!r}: a link offset exceeds {MAX_LENGTH:g} m "
                         f"({float(np.max(np.abs(origin[:, :3, 3]))):g})")
    lim = np.full(lower.shape[0], MAX_ANGLE)
    pm = (jtype == K.PRISMATIC) & (qidx >= 0)
    lim[qidx[pm]] = MAX_LENGTH
    if np.any((lower > lim) | (upper < -lim)):
        bad = int(np.nonzero((lower > lim) | (upper < -lim))[0][0])
        raise ModelError(f"Robot {name!r}: joint {joint_names[bad]!r} has the range [{lower[bad]:g}, {upper[bad]:g}] "
                         f"beyond the bound ±{lim[bad]:g}")
    lo_big = np.isfinite(lower) & (lower < -lim)
    hi_big = np.isfinite(upper) & (upper > lim)
    if lo_big.any() or hi_big.any():
        from ..errors import InvkinWarning, warn_caller

        bad = [joint_names[i] for i in np.nonzero(lo_big | hi_big)[0]]
        warn_caller(f"Robot {name!r}: limits of {', '.join(map(repr, bad[:5]))}{' ...' if len(bad) > 5 else ''} "
                    f"exceed ±{MAX_ANGLE:g} rad / ±{MAX_LENGTH:g} m and are read as unlimited", InvkinWarning)
        lower = np.where(lo_big, -math.inf, lower)
        upper = np.where(hi_big, math.inf, upper)
    return lower, upper


@dataclass(frozen=True, eq=False, repr=False)
class Robot:
    """A kinematic tree as arrays in topological order (parents before children).

    Build one with :func:`invkin.load_robot`, :class:`invkin.RobotBuilder` or the URDF/BVH
    readers; the constructor itself validates the arrays but is not meant for daily use.

    Node arrays (``n = n_nodes``):
        parent (n,) int: parent node index, -1 for a root.
        joint_type (n,) int: index into :data:`JOINT_TYPES`.
        axis (n, 3): unit joint axis in the node's joint frame (zero for fixed and ball).
        origin (n, 4, 4): fixed transform parent -> joint frame [m].
        qidx (n,) int: first index into q of the joint's value, -1 for fixed joints.
        multiplier, offset (n,): ``theta = multiplier * q[qidx] + offset`` (1, 0 unless mimic).
        node_names (n,): frame names. ``is_frame`` marks nodes listed in ``frame_names``
        (BVH channel nodes are internal).
        node_joint_names (n,): the name of the joint that attaches each node ('' for roots).
    DOF arrays:
        joint_names (dof,), lower, upper (dof,) [rad or m], ±inf where unbounded.
    """

    name: str
    parent: np.ndarray
    joint_type: np.ndarray
    axis: np.ndarray
    origin: np.ndarray
    qidx: np.ndarray
    multiplier: np.ndarray
    offset: np.ndarray
    node_names: tuple
    node_joint_names: tuple
    is_frame: np.ndarray
    joint_names: tuple
    lower: np.ndarray
    upper: np.ndarray
    mimic_leader: tuple = ()  # per node: name of the mimic leader joint ('' if none)
    composite: tuple = ()  # per node: 'free' / 'planar' for the nodes of such a joint, else ''
    #: Name-keyed data read from model files, carried through subchain/add_frame (see
    #: :meth:`with_extras`): "named_configurations" {name: {q entry name: value}} (SRDF group
    #: states), "disabled_collision_pairs" ((link, link), ...) (SRDF), "geoms" {link: (Geom, ...)}
    #: and "inertials" {link: (mass [kg], com (3,) [m] in the link frame)} (MJCF), "locked_values"
    #: {joint: its q entries} (:meth:`lock`; MJCF's :func:`~invkin.model.mjcf.qpos_from_q` reads them).
    extras: dict = field(default_factory=dict, repr=False)
    _frame_index: dict = field(init=False, repr=False)
    _ni: np.ndarray = field(init=False, repr=False)
    _nf: np.ndarray = field(init=False, repr=False)

    def __post_init__(self):
        n = len(self.node_names)
        parent = np.asarray(self.parent, dtype=np.int64)
        jtype = np.asarray(self.joint_type, dtype=np.int64)
        axis = np.asarray(self.axis, dtype=np.float64).reshape(n, 3)
        origin = np.asarray(self.origin, dtype=np.float64).reshape(n, 4, 4)
        qidx = np.asarray(self.qidx, dtype=np.int64)
        mult = np.asarray(self.multiplier, dtype=np.float64)
        off = np.asarray(self.offset, dtype=np.float64)
        lower = np.asarray(self.lower, dtype=np.float64)
        upper = np.asarray(self.upper, dtype=np.float64)
        is_frame = np.asarray(self.is_frame, dtype=bool)
        dof = len(self.joint_names)
        for arr, nm in ((parent, "parent"), (jtype, "joint_type"), (qidx, "qidx"), (mult, "multiplier"),
                        (off, "offset"), (is_frame, "is_frame")):
            if arr.shape != (n,):
                raise ModelError(f"Robot {self.name!r}: {nm} must have shape ({n},), got {arr.shape}")
        if lower.shape != (dof,) or upper.shape != (dof,):
            raise ModelError(f"Robot {self.name!r}: lower/upper must have shape ({dof},)")
        if len(self.node_joint_names) != n:
            raise ModelError(f"Robot {self.name!r}: node_joint_names must have {n} entries")
        if np.any(parent >= np.arange(n)):
            bad = int(np.nonzero(parent >= np.arange(n))[0][0])
            raise ModelError(f"Robot {self.name!r}: node {self.node_names[bad]!r} comes before its parent")
        if not (np.all(np.isfinite(axis)) and np.all(np.isfinite(origin)) and np.all(np.isfinite(mult))
                and np.all(np.isfinite(off))):
            raise ModelError(f"Robot {self.name!r}: non-finite numbers in the model")
        if np.any(np.isnan(lower)) or np.any(np.isnan(upper)) or np.any(lower > upper):
            bad = int(np.nonzero(~(lower <= upper))[0][0])
            raise ModelError(f"Robot {self.name!r}: joint {self.joint_names[bad]!r} has lower "
                             f"{lower[bad]} > upper {upper[bad]}")
        lower, upper = _bounded_limits(self.name, self.joint_names, jtype, qidx, lower, upper, origin)
        if len(set(self.node_names)) != n:
            dup = next(x for x in self.node_names if self.node_names.count(x) > 1)
            raise ModelError(f"Robot {self.name!r}: duplicate frame name {dup!r}")
        if len(set(self.joint_names)) != dof:
            dup = next(x for x in self.joint_names if self.joint_names.count(x) > 1)
            raise ModelError(f"Robot {self.name!r}: two q entries are named {dup!r} (a joint named like an entry "
                             f"of a ball, free or planar joint, e.g. 'j.x' beside a ball joint 'j'); expected "
                             f"unique joint names: rename one")
        if np.any((qidx >= dof) | ((jtype == K.BALL) & (qidx + 2 >= dof))):
            raise ModelError(f"Robot {self.name!r}: a q index is out of range for dof {dof}")
        if not self.mimic_leader:
            object.__setattr__(self, "mimic_leader", ("",) * n)
        if not self.composite:
            object.__setattr__(self, "composite", ("",) * n)
        if len(self.composite) != n:
            raise ModelError(f"Robot {self.name!r}: composite must have {n} entries")
        object.__setattr__(self, "composite", tuple(self.composite))
        base = np.zeros(dof, dtype=bool)  # q entries of free and planar joints
        for i in range(n):
            if self.composite[i] and qidx[i] >= 0:
                base[qidx[i]:qidx[i] + (3 if jtype[i] == K.BALL else 1)] = True
        object.__setattr__(self, "_base_dofs", _readonly(np.nonzero(base)[0].astype(np.int64)))
        # revolute joints whose range spans more than a turn (continuous joints, a UR arm's ±2 pi)
        # and that a turn of 2 pi leaves in place (every node on the entry is a revolute joint with
        # an integer multiplier): solve() shifts them by whole turns to nearest q0 within the limits
        wrap = (upper - lower) > 2.0 * math.pi
        for i in range(n):
            c = qidx[i]
            if c >= 0 and not (jtype[i] == K.REVOLUTE and mult[i] == math.floor(mult[i])):
                wrap[c:c + (3 if jtype[i] == K.BALL else 1)] = False
        object.__setattr__(self, "_wrap_dofs", _readonly(np.nonzero(wrap)[0].astype(np.int64)))
        object.__setattr__(self, "extras", MappingProxyType(dict(self.extras)))
        ni = np.stack([parent, jtype, qidx], axis=1)
        nf = np.concatenate([axis, mult[:, None], off[:, None]], axis=1)
        for nm, arr in (("parent", parent), ("joint_type", jtype), ("axis", axis), ("origin", origin),
                        ("qidx", qidx), ("multiplier", mult), ("offset", off), ("lower", lower),
                        ("upper", upper), ("is_frame", is_frame)):
            object.__setattr__(self, nm, _readonly(arr))
        object.__setattr__(self, "_ni", _readonly(ni))
        object.__setattr__(self, "_nf", _readonly(nf))
        object.__setattr__(self, "node_names", tuple(self.node_names))
        object.__setattr__(self, "joint_names", tuple(self.joint_names))
        object.__setattr__(self, "_frame_index", {nm: i for i, nm in enumerate(self.node_names)})
        object.__setattr__(self, "_neutral", _readonly(self._compute_neutral()))
        object.__setattr__(self, "_ones", _readonly(np.ones(dof)))
        object.__setattr__(self, "_qshape", (dof,))
        object.__setattr__(self, "_dof", dof)
        object.__setattr__(self, "_jshape", (6, dof))
        object.__setattr__(self, "_ball_starts", _readonly(np.array(
            [qidx[i] for i in range(n) if jtype[i] == K.BALL], dtype=np.int64)))
        object.__setattr__(self, "_chains", {})  # frame name or None -> chain program
        object.__setattr__(self, "_node_chains", {})  # node index -> chain program

    #: Per-instance caches (derived from the arrays, rebuilt on demand): left out of pickles, so a
    #: pickled Robot does not depend on which calls were made before. Code outside the Robot keeps
    #: its derived tables in :attr:`cache` / :meth:`memo`, never in attributes of its own.
    _CACHES = ("_inertial_cache", "_frame_parent", "_velocity_limit", "_base_spread_cache", "_chains", "_node_chains",
               "_memo")

    def __getstate__(self):
        state = dict(self.__dict__)
        state["extras"] = dict(self.extras)  # a mappingproxy does not pickle
        for k in self._CACHES:
            state.pop(k, None)
        state["_chains"] = {}
        state["_node_chains"] = {}
        return state

    def __setstate__(self, state):
        state["extras"] = MappingProxyType(state.get("extras", {}))
        self.__dict__.update(state)

    # ------------------------------------------------------------------ data from model files
    @property
    def link_mass(self) -> np.ndarray:
        """(n,) [kg] mass of each node (URDF/MJCF ``<inertial>``; 0 where the model has none)."""
        return self._inertial_arrays()[0]

    @property
    def link_com(self) -> np.ndarray:
        """(n, 3) [m] centre of mass of each node, in the node's own frame."""
        return self._inertial_arrays()[1]

    @property
    def velocity_limit(self) -> np.ndarray:
        """(dof,) [rad/s or m/s] joint velocity limits (URDF ``<limit velocity>``; inf where none)."""
        v = self.__dict__.get("_velocity_limit")
        if v is None:
            lim = self.extras.get("velocity_limits", {})
            v = _readonly(np.array([lim.get(nm, math.inf) for nm in self.joint_names], dtype=np.float64))
            object.__setattr__(self, "_velocity_limit", v)
        return v

    def _inertial_arrays(self):
        t = self.__dict__.get("_inertial_cache")
        if t is None:
            inertials = self.extras.get("inertials", {})
            mass = np.zeros(self.n_nodes)
            com = np.zeros((self.n_nodes, 3))
            for i, nm in enumerate(self.node_names):
                if nm in inertials:
                    mass[i] = float(inertials[nm][0])
                    com[i] = np.asarray(inertials[nm][1], dtype=np.float64).reshape(3)
            t = (_readonly(mass), _readonly(com))
            object.__setattr__(self, "_inertial_cache", t)
        return t

    def with_limits(self, spec) -> "Robot":
        """A copy with joint limits set: box limits per q entry (``{"LeftLeg.Xrotation": [0, 150]}``) and
        swing-cone/twist limits per ball or three-channel joint (``{"LeftUpLeg": {"swing": 80,
        "twist": [-30, 30]}}``), degrees unless ``"units": "rad"``; ``spec`` may be a JSON/TOML rig
        file. Every solve method returns configurations within them. See :mod:`invkin.model.limits`."""
        from .limits import apply_limits
        return apply_limits(self, spec)

    def with_extras(self, **kw) -> "Robot":
        """A copy of this Robot with entries of :attr:`extras` replaced (same arrays)."""
        return self.replace(extras={**self.extras, **kw})

    @property
    def named_configurations(self) -> tuple:
        """Names of the configurations that :meth:`named_configuration` returns (SRDF group states)."""
        return tuple(self.extras.get("named_configurations", {}))

    def named_configuration(self, name: str) -> np.ndarray:
        """A full q (dof,) of a named configuration (e.g. Talos' SRDF ``half_sitting``): the
        joints it names, :meth:`neutral` for the others (and for those this model lacks or holds
        fixed, such as joints cut off by ``base``/``tip``)."""
        states = self.extras.get("named_configurations", {})
        if name not in states:
            have = ", ".join(map(repr, states)) or "none (load an SRDF: ik.load_srdf(robot, path))"
            raise FrameError(f"unknown named configuration {name!r} on robot {self.name!r}; "
                             f"closest: {closest_names(str(name), states) if states else '-'}; "
                             f"named configurations: {have}")
        q = self.neutral()
        index = {nm: i for i, nm in enumerate(self.joint_names)}
        for entry, v in states[name].items():
            i = index.get(entry)
            if i is not None:
                q[i] = v
        return q

    @property
    def disabled_collision_pairs(self) -> tuple:
        """Link pairs ((link1, link2), ...) never checked for self-collision (SRDF
        ``<disable_collisions>``), restricted to links of this model."""
        pairs = self.extras.get("disabled_collision_pairs", ())
        return tuple(pr for pr in pairs if pr[0] in self._frame_index and pr[1] in self._frame_index)

    @property
    def geoms(self) -> dict:
        """Collision shapes per link: {link: (Geom, ...)} (MJCF geoms; see :mod:`invkin.model.mjcf`)."""
        return {k: v for k, v in self.extras.get("geoms", {}).items() if k in self._frame_index}

    @property
    def collision(self):
        """The collision shapes per link as capsules that enclose them (URDF ``<collision>``, MJCF
        geoms; meshes fitted once and cached): an :class:`invkin.collision.CollisionModel`, built on
        first use (see :mod:`invkin.collision.model`)."""
        from ..collision.model import collision_model
        return collision_model(self)

    def _chain(self, frame) -> np.ndarray:
        """The chain program of ``frame`` (kinematics.kernels.chain_program), cached; ``frame`` is
        a name, a node index or None (the last node); FrameError for anything else."""
        named = type(frame) is str or frame is None
        ch = self._chains.get(frame) if named else None
        if ch is None:
            node = self._node_of(frame)
            ch = self._node_chains.get(node)
            if ch is None:
                ch = K.chain_program(self.parent, self.joint_type, self.axis, self.origin, self.qidx,
                                     self.multiplier, self.offset, node)
                self._node_chains[node] = ch
            if named:
                self._chains[frame] = ch
        return ch

    # ------------------------------------------------------------------ sizes and names
    @property
    def dof(self) -> int:
        """Number of entries of q."""
        return len(self.joint_names)

    @property
    def n_nodes(self) -> int:
        return len(self.node_names)

    @property
    def frame_names(self) -> tuple:
        """Names of every frame (every link, including links attached by fixed joints)."""
        return tuple(nm for nm, f in zip(self.node_names, self.is_frame) if f)

    @property
    def frame_parent(self) -> np.ndarray:
        """(n,) int64, read-only: each node's nearest ancestor that is a frame (-1: none; the inner
        nodes of a joint are not frames). A stick figure's bones are ``(i, frame_parent[i])`` over
        the frames i that have one."""
        fp = self.__dict__.get("_frame_parent")
        if fp is None:
            fp = np.full(self.n_nodes, -1, dtype=np.int64)
            for i in range(self.n_nodes):  # parents precede children: a parent's answer is known
                p = int(self.parent[i])
                fp[i] = p if p < 0 or self.is_frame[p] else fp[p]
            fp = _readonly(fp)
            object.__setattr__(self, "_frame_parent", fp)
        return fp

    @property
    def root(self) -> str:
        return self.node_names[0]

    @property
    def has_ball_joints(self) -> bool:
        return self._ball_starts.size > 0

    # ------------------------------------------------------------------ model queries for the kernels
    # Solvers, jobs and tools outside model/ read the model through these, never the private fields.

    @property
    def node_table(self) -> np.ndarray:
        """(n, 3) int64, read-only: parent, joint type, qidx per node (the kernels' ``ni``)."""
        return self._ni

    @property
    def node_params(self) -> np.ndarray:
        """(n, 5) float64, read-only: axis (3), multiplier, offset per node (the kernels' ``nf``)."""
        return self._nf

    @property
    def ball_starts(self) -> np.ndarray:
        """int64, read-only: the q index of the first of the 3 entries of every ball joint."""
        return self._ball_starts

    @property
    def unit_weights(self) -> np.ndarray:
        """(dof,) ones, read-only: the default joint weights (compare with ``is`` to detect the default)."""
        return self._ones

    @property
    def q_neutral(self) -> np.ndarray:
        """(dof,) read-only: :meth:`neutral` without the copy (for callers that only read it)."""
        return self._neutral

    @property
    def base_dofs(self) -> np.ndarray:
        """int64, read-only: the q indices of the free and planar joints (a floating base), sorted."""
        return self._base_dofs

    @property
    def base_spread(self) -> np.ndarray:
        """Read-only, one entry per :attr:`base_dofs`: the half-width within which restarts and
        :meth:`sample` draw the base around a configuration (:data:`BASE_SAMPLE_SPREAD`: metres
        for the translations, radians for the rotations)."""
        out = self.__dict__.get("_base_spread_cache")
        if out is None:
            spread = np.zeros(self.dof)
            for i in range(self.n_nodes):
                c = int(self.qidx[i])
                if self.composite[i] and c >= 0:
                    jt = self.joint_type[i]
                    spread[c:c + (3 if jt == K.BALL else 1)] = BASE_SAMPLE_SPREAD[0 if jt == K.PRISMATIC else 1]
            out = _readonly(spread[self._base_dofs])
            object.__setattr__(self, "_base_spread_cache", out)
        return out

    @property
    def wrap_dofs(self) -> np.ndarray:
        """int64, read-only: the q indices of revolute joints whose range spans more than a turn
        (continuous joints, a UR arm's ±2 pi) and that a turn of 2 pi leaves in place (every node on
        the entry is a revolute joint with an integer multiplier); solve() shifts them by whole
        turns to the value nearest q0 within the limits."""
        return self._wrap_dofs

    def has_frame(self, name) -> bool:
        """True when ``name`` is the name of a node of this robot (no error, no suggestions)."""
        return name in self._frame_index

    def chain_program(self, frame) -> np.ndarray:
        """The chain program from the root to ``frame`` (kinematics.kernels.chain_program), cached;
        ``frame`` is a name, a node index or None (the last node); FrameError for anything else."""
        return self._chain(frame)

    @property
    def cache(self) -> dict:
        """This robot's cache of derived data ({key: value}): tables that the solvers precompute
        from the arrays, valid as long as the Robot lives (it is immutable). Left out of pickles
        and of the Robots that :meth:`replace` and the other derivations return."""
        memo = self.__dict__.get("_memo")
        if memo is None:
            memo = {}
            object.__setattr__(self, "_memo", memo)
        return memo

    def memo(self, key, build):
        """A :attr:`cache` entry: ``build()`` on the first call for ``key``, the same object after."""
        memo = self.cache
        if key not in memo:
            memo[key] = build()
        return memo[key]

    def reach_bound(self, frame):
        """``(anchor node, radius [m])``: ``frame``'s origin always lies within radius of the anchor.

        The anchor is the first moving joint on the path from the root (its origin never moves);
        the radius sums the link offsets after it and the prismatic travel. ``(None, 0.0)`` when
        nothing moves the frame. Cached per node.
        """
        node = self.frame_index(frame)
        return self.memo(("reach_bound", node), lambda: self._compute_reach_bound(node))

    def _compute_reach_bound(self, node: int):
        path = self.ancestors(node)[::-1]  # root first
        first = next((k for k, i in enumerate(path) if self.qidx[i] >= 0), None)
        if first is None:
            return None, 0.0
        return path[first], self._path_radius(path[first + 1:], path[first])

    def _path_radius(self, below, top=None) -> float:
        """Bound [m] on how far the origin of the last node of ``below`` (a path down the tree) lies
        from the origin of the node above its first: each node's offset from its parent, plus the
        travel of the prismatic joints on it (``top``'s too, when given: a moving anchor)."""
        radius = sum(float(np.linalg.norm(self.origin[i][:3, 3])) for i in below)
        for i in ([top] if top is not None else []) + list(below):
            if self.joint_type[i] == K.PRISMATIC and self.qidx[i] >= 0:
                c = int(self.qidx[i])
                radius += abs(self.multiplier[i]) * max(abs(self.lower[c]), abs(self.upper[c])) + abs(self.offset[i])
        return radius

    def pair_reach(self, frame_a, frame_b) -> float:
        """Bound [m] on the distance between the origins of two frames at any configuration: the
        offsets and prismatic travel on the tree path between them, through their last common
        ancestor (whose own motion moves both alike). ``inf`` when a joint on the path slides
        without limit (a floating base between two feet, say, never: it lies above them)."""
        a, b = self.frame_index(frame_a), self.frame_index(frame_b)
        key = ("pair_reach", min(a, b), max(a, b))
        return self.memo(key, lambda: self._compute_pair_reach(a, b))

    def _compute_pair_reach(self, a: int, b: int) -> float:
        pa, pb = self.ancestors(a)[::-1], self.ancestors(b)[::-1]  # root first
        k = 0
        while k < min(len(pa), len(pb)) and pa[k] == pb[k]:
            k += 1
        if k == 0:  # two roots: nothing bounds them
            return float("inf")
        return self._path_radius(pa[k:]) + self._path_radius(pb[k:])

    @property
    def floating(self) -> bool:
        """True if the robot has a free or planar joint (a floating or mobile base)."""
        return self._base_dofs.size > 0

    @property
    def free_joints(self) -> tuple:
        """Names of the free and planar joints, in q order."""
        out = []
        for i in range(self.n_nodes):
            if self.composite[i] and self.node_joint_names[i] not in out:
                out.append(self.node_joint_names[i])
        return tuple(out)

    @property
    def joint_types_per_dof(self) -> tuple:
        """Joint type name for every entry of q ('revolute', 'continuous', 'prismatic', 'ball',
        'free', 'planar')."""
        out = [""] * self.dof
        for i in range(self.n_nodes):
            c = int(self.qidx[i])
            if c < 0 or out[c]:
                continue
            t = JOINT_TYPES[int(self.joint_type[i])]
            if self.composite[i]:
                out[c:c + (3 if t == "ball" else 1)] = [self.composite[i]] * (3 if t == "ball" else 1)
            elif t == "ball":
                out[c:c + 3] = ["ball"] * 3
            elif t == "revolute" and np.isinf(self.lower[c]) and np.isinf(self.upper[c]):
                out[c] = "continuous"
            else:
                out[c] = t
        return tuple(out)

    def _node_of(self, frame) -> int:
        if frame is None:
            return len(self.node_names) - 1
        node = self._frame_index.get(frame) if type(frame) is str else None
        return self.frame_index(frame) if node is None else node

    def frame_index(self, frame: str | int) -> int:
        """Node index of a frame name (or an index, checked); FrameError lists close names."""
        if isinstance(frame, (int, np.integer)) and not isinstance(frame, bool):
            if 0 <= frame < self.n_nodes:
                return int(frame)
            raise FrameError(f"frame index {frame} out of range: robot {self.name!r} has "
                             f"{self.n_nodes} frames")
        try:
            return self._frame_index[frame]
        except (KeyError, TypeError):
            raise FrameError(
                f"unknown frame {frame!r} on robot {self.name!r}; closest: "
                f"{closest_names(str(frame), self.frame_names)}"
            ) from None

    def joint_index(self, name: str) -> int:
        """Index into q of a joint (for a ball or free joint, of its first entry)."""
        if name in self.joint_names:
            return self.joint_names.index(name)
        if name + ".x" in self.joint_names:
            return self.joint_names.index(name + ".x")
        raise FrameError(f"unknown joint {name!r} on robot {self.name!r}; closest: "
                         f"{closest_names(name, self.joint_names)}")

    def children(self, frame) -> list:
        i = self.frame_index(frame)
        return [self.node_names[j] for j in range(self.n_nodes) if self.parent[j] == i]

    def ancestors(self, frame) -> list:
        """Node indices from ``frame`` up to its root (frame first)."""
        i = self.frame_index(frame)
        out = []
        while i >= 0:
            out.append(i)
            i = int(self.parent[i])
        return out

    def dofs_of(self, frame) -> np.ndarray:
        """Sorted q indices that move ``frame`` (mimic followers count for their leader)."""
        cols = set()
        for i in self.ancestors(frame):
            c = int(self.qidx[i])
            if c >= 0:
                cols.update(range(c, c + (3 if self.joint_type[i] == K.BALL else 1)))
        return np.array(sorted(cols), dtype=np.int64)

    def __repr__(self) -> str:
        kinds = {}
        for t in self.joint_types_per_dof:
            kinds[t] = kinds.get(t, 0) + 1
        ks = ", ".join(f"{v} {k}" for k, v in sorted(kinds.items()))
        return f"Robot({self.name!r}, dof={self.dof} [{ks}], frames={len(self.frame_names)})"

    def tree(self) -> str:
        """A text drawing of the kinematic tree: frames, joints, types and limits."""
        lines = []
        kids = [[] for _ in range(self.n_nodes)]
        for i in range(self.n_nodes):
            p = int(self.parent[i])
            while p >= 0 and self.composite[p] and not self.is_frame[p]:
                p = int(self.parent[p])  # the inner nodes of a free/planar joint are not drawn
            if p >= 0 and not (self.composite[i] and not self.is_frame[i]):
                kids[p].append(i)

        def label(i):
            t = JOINT_TYPES[int(self.joint_type[i])]
            nm = self.node_names[i]
            if self.parent[i] < 0:
                return nm
            jn = self.node_joint_names[i]
            c = int(self.qidx[i])
            extra = ""
            if self.composite[i]:
                t = self.composite[i]
            elif self.mimic_leader[i]:
                extra = f" mimic {self.mimic_leader[i]} x{self.multiplier[i]:g}{self.offset[i]:+g}"
            elif c >= 0 and t in ("revolute", "prismatic"):
                lo, hi = self.lower[c], self.upper[c]
                if np.isinf(lo) and np.isinf(hi) and t == "revolute":
                    t = "continuous"
                else:
                    extra = f" [{lo:.3g}, {hi:.3g}]"
            return f"{nm}  <- {jn} ({t}{extra})"

        # depth-first with an explicit stack (a chain of thousands of links is deeper than Python's
        # recursion limit); below _TREE_DEPTH levels the indentation stops growing ("… " marks it),
        # so the drawing stays proportional to the number of frames
        for r in range(self.n_nodes):
            if self.parent[r] >= 0:
                continue
            stack = [(r, 0, (), True)]  # (node, depth, its last _TREE_DEPTH prefix segments, last child)
            while stack:
                i, depth, segs, last = stack.pop()
                if depth == 0:
                    lines.append(label(i))
                    child = ()
                else:
                    lines.append(("… " if depth - 1 > _TREE_DEPTH else "") + "".join(segs)
                                 + ("└─ " if last else "├─ ") + label(i))
                    child = (segs + ("   " if last else "│  ",))[-_TREE_DEPTH:]
                n = len(kids[i])
                stack.extend((j, depth + 1, child, k == n - 1) for k, j in reversed(list(enumerate(kids[i]))))
        return "\n".join(lines)

    # ------------------------------------------------------------------ configurations
    def check_q(self, q, what: str = "q") -> np.ndarray:
        """Validate a configuration (dof,) or batch (B, dof): float64, contiguous, every entry a number
        within ±:data:`invkin._checks.MAX_LENGTH` (1e9 rad or m)."""
        try:
            if type(q) is not np.ndarray or q.dtype.kind not in "fiub":
                if isinstance(q, (str, bytes)) or np.asarray(q).dtype.kind not in "fiub":
                    raise TypeError  # complex (NumPy would drop the imaginary part), strings, objects
            a = np.ascontiguousarray(q, dtype=np.float64)
        except (TypeError, ValueError, OverflowError):
            raise ConfigurationError(
                f"{what}: expected real numbers of shape ({self.dof},) or (B, {self.dof}), got {q!r:.200}"
            ) from None
        if a.ndim not in (1, 2) or a.shape[-1] != self.dof:
            raise ConfigurationError(
                f"{what}: expected shape ({self.dof},) or (B, {self.dof}) for robot {self.name!r}, "
                f"got {a.shape}"
            )
        if not K.all_within(a, MAX_LENGTH):  # (one pass: NaN and inf fail it too)
            if not K.all_finite(a):
                bad = np.argwhere(~np.isfinite(a))[0]
                raise ConfigurationError(f"{what}: expected finite values, got {a[tuple(bad)]} at index "
                                         f"{tuple(int(x) for x in bad)}")
            bad = np.argwhere(np.abs(a) > MAX_LENGTH)[0]
            raise ConfigurationError(f"{what}: expected values within ±{MAX_LENGTH:g} (rad or m; beyond it FK loses "
                                     f"every digit), got {a[tuple(bad)]:g} at index {tuple(int(x) for x in bad)}")
        return a

    def neutral(self) -> np.ndarray:
        """Mid-range of each joint's limits; 0 where a limit is infinite (continuous, ball, and
        free and planar joints: a floating base at the origin with the identity rotation)."""
        return self._neutral.copy()

    def _compute_neutral(self) -> np.ndarray:
        lo, hi = self.lower, self.upper
        q = np.zeros(self.dof)
        both = np.isfinite(lo) & np.isfinite(hi)
        q[both] = 0.5 * (lo[both] + hi[both])
        only_lo = np.isfinite(lo) & ~np.isfinite(hi)
        only_hi = ~np.isfinite(lo) & np.isfinite(hi)
        q[only_lo] = np.maximum(lo[only_lo], 0.0)
        q[only_hi] = np.minimum(hi[only_hi], 0.0)
        return q

    def sample(self, n: int | None = None, rng=None, around=None) -> np.ndarray:
        """Uniform random configurations inside the limits: (dof,) or (n, dof).

        Continuous joints are drawn in [-pi, pi], unbounded prismatic joints in [-1, 1] m, ball
        joints uniformly over SO(3). Free and planar joints (a floating base) stay near
        ``around`` (dof,) (default :meth:`neutral`, the origin): ``around ⊕ d`` with every entry
        of ``d`` uniform within ``BASE_SAMPLE_SPREAD`` (0.1 m, 0.3 rad). ``around`` is checked on
        every robot (a wrong shape was taken without a word where there is no floating base) and
        moves nothing without one.
        """
        from .._checks import count, seed

        rng = np.random.default_rng(seed("rng", rng))
        c = self._neutral if around is None else self.check_q(around, "around")
        if c.ndim != 1:
            raise ConfigurationError(f"around: expected shape ({self.dof},), got {c.shape}")
        q = self._sample_uniform(None if n is None else count("n", n), rng)
        if self._base_dofs.size:
            q2 = np.atleast_2d(q)
            d = np.zeros_like(q2)
            spread = self.base_spread
            d[:, self._base_dofs] = rng.uniform(-1.0, 1.0, size=(q2.shape[0], self._base_dofs.size)) * spread
            moved = self.integrate(np.broadcast_to(c, q2.shape), d)
            q2[:, self._base_dofs] = np.atleast_2d(moved)[:, self._base_dofs]
            q = q2 if n is not None else q2[0]
        return q

    def _sample_uniform(self, n, rng) -> np.ndarray:
        shape = (1 if n is None else int(n), self.dof)
        types = self.joint_types_per_dof
        span = np.array([1.0 if t == "prismatic" else math.pi for t in types])
        lo_f, hi_f = np.isfinite(self.lower), np.isfinite(self.upper)
        # a missing bound lies one full span (2 pi, or 2 m) beyond the other, or at -+span
        lo = np.where(lo_f, self.lower, np.where(hi_f, self.upper - 2 * span, -span))
        hi = np.where(hi_f, self.upper, np.where(lo_f, self.lower + 2 * span, span))
        q = rng.uniform(lo, hi, size=shape)
        for s in self._ball_starts:
            quat = rng.normal(size=(shape[0], 4))
            quat /= np.linalg.norm(quat, axis=1, keepdims=True)
            quat[quat[:, 0] < 0] *= -1
            w = np.clip(quat[:, 0], -1.0, 1.0)
            ang = 2.0 * np.arccos(w)
            sn = np.sqrt(np.maximum(1.0 - w * w, 0.0))
            axis = np.where(sn[:, None] > 1e-12, quat[:, 1:] / np.maximum(sn, 1e-300)[:, None], 0.0)
            q[:, s:s + 3] = axis * ang[:, None]
        return q[0] if n is None else q

    def within_limits(self, q, tol: float = 0.0) -> np.ndarray | bool:
        q = self.check_q(q)
        ok = np.all((q >= self.lower - tol) & (q <= self.upper + tol), axis=-1)
        return bool(ok) if q.ndim == 1 else ok

    def clamp(self, q) -> np.ndarray:
        """q clipped into [lower, upper] (ball entries are unbounded)."""
        return np.clip(self.check_q(q), self.lower, self.upper)

    def integrate(self, q, dq) -> np.ndarray:
        """q ⊕ dq: addition for revolute/prismatic entries, R exp(d) for ball joints (local d).

        A free joint is integrated on SE(3) as R³ × SO(3): its pose (p, R) becomes
        (p + dp, R exp(dr)) — the translation increment ``dp`` [m] in the joint frame (the world
        for a floating base: world-aligned), the rotation increment ``dr`` [rad] local, as for a
        ball joint. A planar joint adds (dx, dy, dyaw). Every Jacobian column is the derivative
        along this increment: the translation columns are the joint frame's fixed axes, the
        rotation columns turn about the child's own axes (see kinematics/kernels.py). The
        coupled SE(3) exponential (Pinocchio's ``integrate``) differs only at second order;
        decoupled, the translation entries stay metres in the world frame and a rotation step
        never moves the base origin.
        """
        q = self.check_q(q)
        dq = self.check_q(dq, "dq")
        out = q + dq
        if self._ball_starts.size:
            q2, dq2 = np.broadcast_arrays(np.atleast_2d(q), np.atleast_2d(dq))
            o2 = np.array(np.broadcast_to(np.atleast_2d(out), q2.shape))
            _integrate_rows(np.ascontiguousarray(q2), np.ascontiguousarray(dq2), self._ball_starts, o2)
            out = o2 if out.ndim == 2 or q2.shape[0] > 1 else o2[0]
        return out

    def difference(self, q0, q1) -> np.ndarray:
        """dq such that ``integrate(q0, dq)`` equals q1 (ball joints: log(R0^T R1))."""
        q0 = self.check_q(q0, "q0")
        q1 = self.check_q(q1, "q1")
        out = q1 - q0
        if self._ball_starts.size:
            a, b = np.broadcast_arrays(np.atleast_2d(q0), np.atleast_2d(q1))
            o2 = np.array(np.broadcast_to(np.atleast_2d(out), a.shape))
            _difference_rows(np.ascontiguousarray(a), np.ascontiguousarray(b), self._ball_starts, o2)
            out = o2 if out.ndim == 2 or a.shape[0] > 1 else o2[0]
        return out

    # ------------------------------------------------------------------ kinematics
    def fk(self, q, frame=None) -> np.ndarray:
        """Pose of ``frame`` in the base frame: (4, 4), or (B, 4, 4) for q of shape (B, dof).

        ``frame`` defaults to the last node (the tip of a chain).
        """
        ch = self._chains.get(frame) if type(frame) is str or frame is None else None
        if ch is not None and type(q) is np.ndarray and q.ndim == 1 and q.dtype is _F64:
            out = np.empty((4, 4))
            if _FK_ENTRY[0](ch, q, self._dof, out):
                return out
        ch = self._chain(frame)
        q = self.check_q(q)
        if q.ndim == 1:
            out = np.empty((4, 4))
            _entry(_FK_ENTRY, K.chain_fk_checked, ch, q, self._dof, out)(ch, q, self._dof, out)
            return out
        return parallel_call(K.chain_fk_batch, ch, q)

    def fk_all(self, q) -> dict:
        """World pose of every frame: {name: (4, 4) or (B, 4, 4)}."""
        Ts = self.fk_all_array(q)
        return {nm: Ts[..., i, :, :] for i, nm in enumerate(self.node_names) if self.is_frame[i]}

    def fk_all_array(self, q) -> np.ndarray:
        """World pose of every node as an array (n_nodes, 4, 4) or (B, n_nodes, 4, 4)."""
        q = self.check_q(q)
        if q.ndim == 1:
            out = np.empty((self.n_nodes, 4, 4))
            K.fk_all_into(self._ni, self._nf, self.origin, q, out)
            return out
        return parallel_call(K.fk_all_batch, self._ni, self._nf, self.origin, q)

    def jacobian(self, q, frame=None) -> np.ndarray:
        """Geometric Jacobian (6, dof) of ``frame``'s origin; (B, 6, dof) for a batch of q.

        Rows vx vy vz wx wy wz in the base frame. Every column is the derivative along what
        :meth:`integrate` applies, so ``J @ dq`` is the first-order change of
        ``fk(integrate(q, dq))``, not of ``fk(q + dq)``: the two agree on revolute and prismatic
        entries (and a free joint's translation entries), but the columns of a ball joint and the
        three rotation columns of a free joint (``j.rx j.ry j.rz``, a floating base's too) are
        derivatives with respect to a local increment ``R exp(d)``, not to adding ``d`` to the
        rotation vector stored in q (away from the identity, finite differences of ``fk(q + dq)``
        do not match them). Mimic followers fold into their leader's column.
        """
        ch = self._chains.get(frame) if type(frame) is str or frame is None else None
        if ch is not None and type(q) is np.ndarray and q.ndim == 1 and q.dtype is _F64:
            J = np.empty(self._jshape)
            if _JAC_ENTRY[0](ch, q, J, _T_SCRATCH):
                return J
        ch = self._chain(frame)
        q = self.check_q(q)
        if q.ndim == 1:
            J = np.empty(self._jshape)
            T = np.empty((4, 4))
            if not _entry(_JAC_ENTRY, K.chain_jacobian_checked, ch, q, J, T)(ch, q, J, T):
                K.chain_fk_jacobian_into(ch, q, T, J)  # a chain with mimic joints (shared q entries)
            return J
        return parallel_call(K.chain_jacobian_batch, ch, q, self.dof)

    def fk_jacobian(self, q, frame=None):
        """(T (4, 4), J (6, dof)) of one frame in one kernel call."""
        ch = self._chains.get(frame) if type(frame) is str or frame is None else None
        if ch is not None and type(q) is np.ndarray and q.ndim == 1 and q.dtype is _F64:
            J = np.empty(self._jshape)
            T = np.empty((4, 4))
            if _JAC_ENTRY[0](ch, q, J, T):
                return T, J
        ch = self._chain(frame)
        q = self.check_q(q)
        if q.ndim != 1:
            raise ConfigurationError(f"q: expected shape ({self.dof},), got {q.shape}")
        J = np.empty(self._jshape)
        T = np.empty((4, 4))
        if not _entry(_JAC_ENTRY, K.chain_jacobian_checked, ch, q, J, T)(ch, q, J, T):
            K.chain_fk_jacobian_into(ch, q, T, J)  # a chain with mimic joints (shared q entries)
        return T, J

    def center_of_mass(self, q) -> np.ndarray:
        """The robot's centre of mass [m] in the base frame: (3,), or (B, 3) for a batch of q.

        ``c = Σ m_i (p_i + R_i c_i) / M`` over the nodes' inertials (:attr:`link_mass`,
        :attr:`link_com`: URDF/MJCF ``<inertial>``), the point an :class:`invkin.CenterOfMass`
        goal places. Every node counts, the root link too (as MuJoCo's ``subtree_com`` of the world
        body); Pinocchio's ``centerOfMass`` leaves out the inertia fixed to its universe, the base
        link of a fixed-base URDF (the Panda's 0.63 kg ``panda_link0``: its CoM lies ~2 cm farther
        from the base). A model without masses is a ModelError.
        """
        return self._com(q, "center_of_mass", False)[0]

    def com_jacobian(self, q) -> np.ndarray:
        """(3, dof): the derivative of :meth:`center_of_mass` [m per rad or m], (B, 3, dof) for a
        batch; the columns are :meth:`jacobian`'s (ball and free joints: local increments,
        :meth:`integrate`)."""
        return self._com(q, "com_jacobian", True)[1]

    def _com(self, q, what, want_jac):
        """(c, J) through the CenterOfMass goal's own kernel (solvers/_common.com_row: its residual
        ``p* - c`` at p* = 0 and its rows, one backward pass over the subtrees' masses)."""
        from ..solvers._common import com_row

        m = self.link_mass
        if not m.sum() > 0:
            raise ModelError(f"{what}: robot {self.name!r} has no link masses (its model has no <inertial> "
                             f"mass); expected a model with inertials")
        q = self.check_q(q)
        qs = q.reshape(-1, self.dof)
        n = self.n_nodes
        c = np.empty((qs.shape[0], 3))
        J = np.zeros((qs.shape[0], 3, self.dof if want_jac else 0))
        Tall, sub = np.empty((n, 4, 4)), np.empty((n, 4))
        target, axes, w = np.zeros((1, 3)), np.ones((1, 3)), np.ones(1)
        for b in range(qs.shape[0]):
            K.fk_all_into(self._ni, self._nf, self.origin, qs[b], Tall)
            com_row(self._ni, self._nf, Tall, m, self.link_com, sub, 0, target, axes, w, c[b], J[b], want_jac)
        c *= -1.0
        return (c[0], J[0]) if q.ndim == 1 else (c, J)

    # ------------------------------------------------------------------ derived models
    def add_frame(self, name: str, parent, T=None) -> "Robot":
        """A new Robot with a fixed frame ``name`` attached to ``parent`` at ``T_parent_frame``."""
        from ..spatial import as_transform

        p = self.frame_index(parent)
        if name in self._frame_index:
            raise ModelError(f"frame {name!r} already exists on robot {self.name!r}")
        T = np.eye(4) if T is None else as_transform(T, f"add_frame({name!r}) transform")
        return self.replace(
            parent=np.append(self.parent, p),
            joint_type=np.append(self.joint_type, K.FIXED),
            axis=np.vstack([self.axis, np.zeros((1, 3))]),
            origin=np.concatenate([self.origin, T[None]], axis=0),
            qidx=np.append(self.qidx, -1),
            multiplier=np.append(self.multiplier, 1.0),
            offset=np.append(self.offset, 0.0),
            node_names=self.node_names + (name,),
            node_joint_names=self.node_joint_names + (f"{name}_joint",),
            is_frame=np.append(self.is_frame, True),
            mimic_leader=self.mimic_leader + ("",),
            composite=self.composite + ("",),
        )

    def with_floating_base(self, joint: str = "root_joint", world: str | None = None) -> "Robot":
        """A new Robot whose root hangs from a new world frame by a free joint ``joint`` (6 q
        entries first: x, y, z [m] of the old root in the world, then its rotation vector
        [rad]); the other joints keep their order after it. ``world`` defaults to "world" (or
        "universe" if the model has a frame named "world"). A robot that already has a free or
        planar joint is refused (ModelError)."""
        if self.floating:
            raise ModelError(f"floating_base: robot {self.name!r} already has a floating joint "
                             f"{self.free_joints[0]!r}; expected a fixed-base model")
        if world is None:
            world = "universe" if "world" in self._frame_index else "world"
        inner = [f"{joint}.x", f"{joint}.y", f"{joint}.z"]
        for nm in [world] + inner:
            if nm in self._frame_index:
                raise ModelError(f"floating_base: robot {self.name!r} already has a frame {nm!r}; "
                                 f"choose another joint= / world= name")
        if joint in self.node_joint_names:
            raise ModelError(f"floating_base: robot {self.name!r} already has a joint {joint!r}; choose another name")
        for entry in inner + [f"{joint}.rx", f"{joint}.ry", f"{joint}.rz"]:
            if entry in self.joint_names:
                raise ModelError(f"floating_base: robot {self.name!r} already has a joint {entry!r}, which the "
                                 f"free joint's q entries would repeat; choose another joint= name")
        parent = np.concatenate([[-1, 0, 1, 2, 3], np.where(self.parent[1:] >= 0, self.parent[1:] + 4, -1)])
        jtype = np.concatenate([[K.FIXED, K.PRISMATIC, K.PRISMATIC, K.PRISMATIC, K.BALL], self.joint_type[1:]])
        axis = np.concatenate([np.zeros((1, 3)), np.eye(3), np.zeros((1, 3)), self.axis[1:]])
        origin = np.concatenate([np.broadcast_to(np.eye(4), (5, 4, 4)), self.origin[1:]])
        qidx = np.concatenate([[-1, 0, 1, 2, 3], np.where(self.qidx[1:] >= 0, self.qidx[1:] + 6, -1)])
        inf = np.full(6, np.inf)
        return self._with_shapes(Robot(
            name=self.name, parent=parent, joint_type=jtype, axis=axis, origin=origin, qidx=qidx,
            multiplier=np.concatenate([np.ones(5), self.multiplier[1:]]),
            offset=np.concatenate([np.zeros(5), self.offset[1:]]),
            node_names=(world, *inner, self.node_names[0]) + self.node_names[1:],
            node_joint_names=("", joint, joint, joint, joint) + self.node_joint_names[1:],
            is_frame=np.concatenate([[True, False, False, False], self.is_frame]),
            joint_names=(*inner, f"{joint}.rx", f"{joint}.ry", f"{joint}.rz") + self.joint_names,
            lower=np.concatenate([-inf, self.lower]), upper=np.concatenate([inf, self.upper]),
            mimic_leader=("",) * 5 + self.mimic_leader[1:],
            composite=("", "free", "free", "free", "free") + self.composite[1:], extras=self.extras,
        ))

    def lock(self, values: dict) -> "Robot":
        """A reduced Robot without the joints named in ``values`` ({joint name: value}): each is
        fixed at its value (a number [rad or m]; a ball joint's 3 or a free joint's 6 q entries;
        a planar joint's 3), mimic followers of a locked leader with it. Frames are unchanged,
        the other joints keep their order. Unknown names raise FrameError with the closest ones."""
        if not isinstance(values, dict):
            raise ModelError(f"lock: expected a dict {{joint name: value}}, got {values!r:.200}")
        moving = {}  # joint name -> (first q index, q entries)
        for i in range(1, self.n_nodes):
            c = int(self.qidx[i])
            jn = self.node_joint_names[i]
            if c >= 0 and not self.mimic_leader[i]:
                k = 3 if self.joint_type[i] == K.BALL else 1
                first, count = moving.get(jn, (c, 0))
                moving[jn] = (min(first, c), count + k)
        q = self._neutral.copy()
        locked_dofs = set()
        locked_values = dict(self.extras.get("locked_values", {}))  # {joint: its q entries}, read by mjcf.qpos_from_q
        followers = {self.node_joint_names[i]: self.mimic_leader[i] for i in range(self.n_nodes) if self.mimic_leader[i]}
        for name, v in values.items():
            if name in followers:
                raise ModelError(f"lock: joint {name!r} mimics {followers[name]!r}; lock its leader "
                                 f"{followers[name]!r} (its followers are fixed with it)")
            if name not in moving and name in locked_values:
                raise ModelError(f"lock: joint {name!r} of robot {self.name!r} is already locked (at "
                                 f"{list(locked_values[name])}); lock the original robot to choose another value")
            if name not in moving:
                raise FrameError(f"lock: unknown joint {name!r} on robot {self.name!r}; closest: "
                                 f"{closest_names(str(name), list(moving))}")
            first, count = moving[name]
            try:
                a = np.asarray(v, dtype=np.float64).reshape(-1)
            except (TypeError, ValueError):
                a = np.array([np.nan])
            if a.shape != (count,) or not np.all(np.isfinite(a)):
                raise ConfigurationError(f"lock: joint {name!r} takes {count} finite number(s), got {v!r:.200}")
            if count == 1 and not (self.lower[first] - 1e-12 <= a[0] <= self.upper[first] + 1e-12):
                raise ConfigurationError(f"lock: joint {name!r} value {a[0]} is outside its limits "
                                         f"[{self.lower[first]}, {self.upper[first]}]")
            q[first:first + count] = a
            locked_dofs.update(range(first, first + count))
            locked_values[name] = tuple(float(x) for x in a)
        if not locked_dofs:
            return self
        Ts = self.fk_all_array(q)
        keep = [c for c in range(self.dof) if c not in locked_dofs]
        remap = {old: new for new, old in enumerate(keep)}
        origin = self.origin.copy()
        jtype = self.joint_type.copy()
        qidx = self.qidx.copy()
        leaders = list(self.mimic_leader)
        composite = list(self.composite)
        axis = self.axis.copy()
        for i in range(1, self.n_nodes):
            c = int(qidx[i])
            if c < 0:
                continue
            if c in locked_dofs:  # the joint's motion at the locked value joins the fixed origin
                origin[i] = np.linalg.solve(Ts[int(self.parent[i])], Ts[i])
                origin[i][3] = (0.0, 0.0, 0.0, 1.0)
                jtype[i] = K.FIXED
                qidx[i] = -1
                leaders[i] = ""
                composite[i] = ""
                axis[i] = 0.0
            else:
                qidx[i] = remap[c]
        return self.replace(origin=origin, joint_type=jtype, qidx=qidx, axis=axis,
                                   mimic_leader=tuple(leaders), composite=tuple(composite),
                                   joint_names=tuple(self.joint_names[c] for c in keep),
                                   lower=self.lower[keep], upper=self.upper[keep],
                                   extras={**self.extras, "locked_values": locked_values})

    def replace(self, **kw) -> "Robot":
        """A new Robot with the constructor fields in ``kw`` replaced (``origin=``, ``lower=``,
        ``extras=``, ...), validated again like any new Robot; the URDF shapes of the links it keeps
        come along. The caches start empty."""
        args = dict(
            name=self.name, parent=self.parent, joint_type=self.joint_type, axis=self.axis, origin=self.origin,
            qidx=self.qidx, multiplier=self.multiplier, offset=self.offset, node_names=self.node_names,
            node_joint_names=self.node_joint_names, is_frame=self.is_frame, joint_names=self.joint_names,
            lower=self.lower, upper=self.upper, mimic_leader=self.mimic_leader, composite=self.composite,
            extras=self.extras,
        )
        args.update(kw)
        return self._with_shapes(Robot(**args))

    def _with_shapes(self, robot: "Robot") -> "Robot":
        """``robot`` (derived from this one) with the ``visuals`` / ``collisions`` shapes of the
        URDF reader (model/geometry.py) of the links it keeps."""
        for attr in ("visuals", "collisions"):
            shapes = getattr(self, attr, None)
            if shapes is not None:
                object.__setattr__(robot, attr, tuple(g for g in shapes if g.link in robot._frame_index))
        return robot

    def subchain(self, base, tip, reference=None) -> "Robot":
        """The chain from ``base`` to ``tip`` as a new Robot rooted at ``base`` (other branches dropped).

        The base frame becomes the world frame. A mimic follower whose leader is not on the chain
        (``tip="panda_rightfinger"``: its leader moves the other finger) becomes a fixed joint at
        its mimic value of the leader's value in ``reference`` (dof,) (default :meth:`neutral`),
        with a :class:`~invkin.errors.ModelWarning`. A BVH/glTF joint keeps its rotation channels
        in internal nodes just above its frame: for such a base the chain starts above them (at the
        parent joint's frame), so the base joint turns (``subchain("LeftUpLeg", "LeftFoot")`` moves
        hip and knee).
        """
        b = self.frame_index(base)
        if (self.qidx[b] >= 0 and not self.composite[b] and self.parent[b] >= 0
                and not self.is_frame[self.parent[b]]):
            while self.parent[b] >= 0 and not self.is_frame[self.parent[b]]:
                b = int(self.parent[b])
            if self.parent[b] >= 0:
                b = int(self.parent[b])
        t = self.frame_index(tip)
        path = self.ancestors(t)
        if b not in path:
            raise ModelError(f"subchain: {self.node_names[b]!r} is not an ancestor of "
                             f"{self.node_names[t]!r} on robot {self.name!r}")
        nodes = list(reversed(path[: path.index(b) + 1]))
        return self._select(nodes, reference)

    def _select(self, nodes: list, reference=None) -> "Robot":
        """A new Robot of the given nodes (parents first); the first one becomes a fixed root."""
        used = set()
        for i in nodes[1:]:  # the root's own joint is above the selection: it moves nothing
            c = int(self.qidx[i])
            if c >= 0 and not self.mimic_leader[i]:  # a follower's entry is its leader's
                used.update(range(c, c + (3 if self.joint_type[i] == K.BALL else 1)))
        used_dofs = sorted(used)
        remap = {old: new for new, old in enumerate(used_dofs)}
        nidx = {old: new for new, old in enumerate(nodes)}
        parent = np.array([-1] + [nidx[int(self.parent[i])] for i in nodes[1:]], dtype=np.int64)
        origin = self.origin[nodes].copy()
        origin[0] = np.eye(4)
        jtype = self.joint_type[nodes].copy()
        jtype[0] = K.FIXED
        qidx = np.array([-1] + [remap.get(int(self.qidx[i]), -1) for i in nodes[1:]], dtype=np.int64)
        jn = [""] + [self.node_joint_names[i] for i in nodes[1:]]
        mult, off = self.multiplier[nodes].copy(), self.offset[nodes].copy()
        leaders = ("",) + tuple(self.mimic_leader[i] for i in nodes[1:])
        for k, i in enumerate(nodes[1:], 1):
            if leaders[k] and qidx[k] < 0:  # a follower whose leader is cut off: fixed at its value
                origin[k] = self._fixed_follower(i, reference)
                jtype[k], mult[k], off[k] = K.FIXED, 1.0, 0.0
                leaders = leaders[:k] + ("",) + leaders[k + 1:]
        return self._with_shapes(Robot(
            name=self.name, parent=parent, joint_type=jtype, axis=self.axis[nodes], origin=origin,
            qidx=qidx, multiplier=mult, offset=off,
            node_names=tuple(self.node_names[i] for i in nodes), node_joint_names=tuple(jn),
            is_frame=self.is_frame[nodes], joint_names=tuple(self.joint_names[d] for d in used_dofs),
            lower=self.lower[used_dofs], upper=self.upper[used_dofs],
            mimic_leader=leaders, extras=self.extras,
            composite=("",) + tuple(self.composite[i] for i in nodes[1:]),
        ))

    def _fixed_follower(self, i: int, reference) -> np.ndarray:
        """origin @ M(theta) of mimic follower node ``i`` at its leader's value in ``reference``."""
        from ..errors import ModelWarning, warn_caller
        from ..spatial import so3_exp

        q = self.neutral() if reference is None else self.check_q(reference, "reference")
        theta = float(self.multiplier[i] * q[int(self.qidx[i])] + self.offset[i])
        M = np.eye(4)
        if self.joint_type[i] == K.PRISMATIC:
            M[:3, 3] = self.axis[i] * theta
        else:
            M[:3, :3] = so3_exp(self.axis[i] * theta)
        warn_caller(f"robot {self.name!r}: mimic joint {self.node_joint_names[i]!r} follows "
                    f"{self.mimic_leader[i]!r}, which is not on the chain; it is kept fixed at "
                    f"{theta:g} (its mimic value at {self.mimic_leader[i]} = "
                    f"{q[int(self.qidx[i])]:g})", ModelWarning)
        return self.origin[i] @ M


def robot_arg(v) -> Robot:
    """``v`` unchanged if it is a :class:`Robot`; a model name or anything else is a ModelError
    saying how to load one (the entry points that take a robot: solve, solve_many, Tracker)."""
    if not isinstance(v, Robot):
        raise ModelError(f"robot: expected an invkin Robot (e.g. ik.load_robot('panda')), got {v!r:.200}")
    return v
