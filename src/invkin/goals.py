"""Goals: what a solve should achieve, as frozen dataclasses compiled into a flat goal table.

Every goal has a ``weight`` (dimensionless; a position residual in metres and a rotation residual
in radians are weighted as given). The weight of a task goal (Position, Orientation, Pose and its
``rotation_weight``, Aim) must be > 0: every task goal decides success, so a goal that should not
count is left out rather than given weight 0. Posture weights may be 0. Only the ratios of the soft
goals' weights count: a solve divides them by the largest (:func:`relative_weights`; a lone soft
goal solves alike at weight 1e-8, 1 or 1e160). Points and positions are
bounded by :data:`invkin._checks.MAX_LENGTH` (1e9 m); complex values are refused, not truncated. The task residual ``e`` (the change wanted) and its Jacobian
rows ``J`` (from the world-aligned geometric Jacobian ``[Jv; Jw]`` of the goal's frame) are:

* ``Position(frame, p)``: ``e = p - p_frame``, ``J = Jv``.
* ``Orientation(frame, R)``: ``e = log(R R_frame^T)`` (world), ``J = Jw``.
  With ``axes="z"`` (or "x", "y") only that tool axis must match ``R``'s: with ``a`` the current
  world axis and ``g`` the goal's, ``e = angle(a, g) * unit(a x g)``, ``J = (I - a a^T) Jw``.
* ``Pose(frame, T)``: Position and Orientation at once (``axes`` as above).
* ``Aim(frame, axis, point)``: the frame's local ``axis`` points at the world ``point``: with ``d`` the
  unit direction to the point at distance ``L``, ``e = angle(a, d) * unit(a x d)`` and
  ``J = (I - a a^T)(Jw + [d]x Jv / L)``.
* ``CenterOfMass(p, axes="xy")``: the robot's centre of mass ``c = Σ m_i (p_i + R_i c_i) / M``
  (link masses and centres from the model's inertials) at ``p`` along the chosen world axes:
  ``e = S (p - c)`` (S selects the axes), ``J = S Σ_i (m_i / M) (Jv_i - [R_i c_i]x Jw_i)``,
  computed per joint from subtree masses (one backward pass).
* ``Relative(frame, reference_frame, T)``: ``frame`` at ``T`` in ``reference_frame``: the world
  target ``T_ref T`` moves with q. Position ``e = p_ref + R_ref t - p``, ``J = Jv - Jv_ref +
  [R_ref t]x Jw_ref``; rotation ``e = log(R* R^T)`` with ``R* = R_ref R_t``, ``J = Jr^-1(phi) (Jw -
  R R*^T Jw_ref)``.
* ``Plane(frame, point, normal)``: the origin of ``frame`` on the world plane through ``point``
  with unit normal ``n``: one entry ``e = n·(point - p)``, ``J = nᵀ Jv`` (the row's other two
  entries are 0); the frame slides in the plane and turns freely.
* ``Posture(q_rest)``: the lowest priority, a regulariser: once the goals are met, q moves toward
  ``q_rest`` inside their null space (``e = q_rest ⊖ q``); it never decides success.

Every goal but Posture takes ``hard=True`` (or ``priority=0``; the default is 1): hard goals are
met first and kept (a constraint of every LM step); the other goals are then minimised without
disturbing them (solvers/lm.py). A hard goal's ``weight`` and ``rotation_weight`` do not enter the
solve (its rows weigh :data:`HARD_ROW_WEIGHT`): constraints are met, not traded.

A goal compiles to rows of 3 residual entries; the kinds are listed once in :data:`KINDS`
(code → name); solvers/_common.py holds each kind's residual and Jacobian (``goal_row``,
``com_row``, ``relative_frame``, ``plane_row``), solvers/lm_core.py's ``core_eval_rows`` calls
them (docs/architecture.md, "Adding a goal kind or an inequality row").
"""
from __future__ import annotations

import math
import threading
from dataclasses import dataclass, field, fields

import numpy as np

from ._checks import MAX_LENGTH, real_array, unit_vector
from .errors import GoalError
from .spatial import as_rotation, as_transform, quat_to_matrix

__all__ = ["Goal", "Position", "Orientation", "Pose", "Aim", "Posture", "CenterOfMass", "Relative", "Plane", "KINDS",
           "KIND_POSITION", "KIND_ROTATION", "KIND_AXIS", "KIND_AIM", "KIND_COM", "KIND_REL_POSITION",
           "KIND_REL_ROTATION", "KIND_PLANE"]

KIND_POSITION = 0      # frame origin at a world point
KIND_ROTATION = 1      # frame orientation equal to a world rotation
KIND_AXIS = 2          # one tool axis along a world direction
KIND_AIM = 3           # one tool axis pointing at a world point
KIND_COM = 4           # centre of mass at a world point (selected axes)
KIND_REL_POSITION = 5  # frame origin at a point of a reference frame
KIND_REL_ROTATION = 6  # frame orientation relative to a reference frame
KIND_PLANE = 7         # frame origin on a world plane (one residual entry of the row's three)
#: Every goal-row kind (code -> name). Kernels dispatch on these codes only, each by its own
#: equality test (lm_core.core_eval_rows); compile_problem refuses any other code, so a kind the
#: kernels do not know cannot reach them. A new kind takes the next free code.
KINDS = {KIND_POSITION: "position", KIND_ROTATION: "rotation", KIND_AXIS: "axis", KIND_AIM: "aim",
         KIND_COM: "com", KIND_REL_POSITION: "relative position", KIND_REL_ROTATION: "relative rotation",
         KIND_PLANE: "plane"}
#: Kinds the older methods' task_eval knows (codes 0-3, a range the chain kernels rely on: their
#: rows run only where every code is below KIND_COM); LM's core knows every kind of KINDS.
BASIC_KINDS = (KIND_POSITION, KIND_ROTATION, KIND_AXIS, KIND_AIM)
#: Kinds whose error is a distance [m], held to position_tolerance (the others: rotation_tolerance
#: [rad]); Result.goals_met reads it (solvers/_common.Layout.metres) and the kind's kernel function
#: returns the same class.
METRE_KINDS = (KIND_POSITION, KIND_COM, KIND_REL_POSITION, KIND_PLANE)
#: Numbers per goal row in a goal's target bytes (Goal.lean): vec (3), R (9, row-major), axis (3), weight.
PACKED = 16

#: The weight of every row of a hard goal (its ``weight`` and ``rotation_weight`` do not enter the
#: solve): the core holds hard rows as constraints, and a scaled one was not held (weight 1e-6 left a
#: reachable hard hand 0.1 m off, 1e6 broke the hard feet beside it).
HARD_ROW_WEIGHT = 1.0
_AXES = {"xyz": None, "x": 0, "y": 1, "z": 2}
_STRUCTURE_IDS: dict = {}  # Goal.structure() -> a small int, the same for equal structures (Goal.lean)
_IDS_LOCK = threading.Lock()
_EYE = np.eye(3)
_EYE1 = np.eye(3).reshape(1, 3, 3)
_KIND_P = np.array([KIND_POSITION], dtype=np.int64)
_KIND_PR = np.array([KIND_POSITION, KIND_ROTATION], dtype=np.int64)


def _weight(w, what, allow_zero=False):
    if isinstance(w, (bool, complex, np.complexfloating, str)):
        raise GoalError(f"{what}: weight must be a real number, got {w!r}")
    try:
        w = float(w)
    except (TypeError, ValueError, OverflowError):
        raise GoalError(f"{what}: weight must be a number, got {w!r}") from None
    if not math.isfinite(w) or w < 0 or (w == 0 and not allow_zero):  # (w is a float: math, not numpy)
        raise GoalError(f"{what}: weight must be finite and {'>= 0' if allow_zero else '> 0'}, got {w} "
                        f"(every task goal decides success; leave out a goal that should not count)")
    return w


def _point(p, what):
    if isinstance(p, str) or p is None:
        raise GoalError(f"{what}: expected a point of shape (3,) [m], got {p!r}")
    a = np.array(real_array(what, p, bound=MAX_LENGTH, unit=" [m]"))
    if a.shape != (3,):
        raise GoalError(f"{what}: expected a point of shape (3,) [m], got {p!r}")
    a.setflags(write=False)
    return a


def _frame(frame, what):
    if not isinstance(frame, (str, int, np.integer)) or isinstance(frame, bool):
        raise GoalError(f"{what}: frame must be a frame name, got {frame!r}")
    return frame


def _level(hard, priority, what):
    """0 for a hard goal (hard=True or priority=0), 1 for the default soft one."""
    if not isinstance(hard, (bool, np.bool_)):
        raise GoalError(f"{what}: hard must be True or False, got {hard!r}")
    if priority is None:
        return 0 if hard else 1
    if isinstance(priority, bool) or not isinstance(priority, (int, np.integer)) or priority not in (0, 1):
        raise GoalError(f"{what}: priority must be 0 (hard) or 1 (soft, the default), got {priority!r}")
    if hard and priority != 0:
        raise GoalError(f"{what}: hard=True contradicts priority={priority}")
    return int(priority)


def _axes(axes, what):
    if axes not in _AXES:
        raise GoalError(f"{what}: axes must be one of 'xyz', 'x', 'y', 'z', got {axes!r}")
    return axes


class Goal:
    """Base class of every goal."""

    weight: float
    #: (structure id, target bytes, largest soft weight) once :meth:`lean` has built it, read as a
    #: plain attribute by the whole-body fast path; None before (this class default).
    _lean = None

    @property
    def level(self) -> int:
        """0: hard (met first and kept), 1: soft (minimised without disturbing the hard goals)."""
        return _level(getattr(self, "hard", False), getattr(self, "priority", None), type(self).__name__)

    def rows(self) -> list:
        """Entries of the goal table: (kind, frame, vec (3,), R (3, 3), axis (3,), weight); a row
        may carry a 7th entry, its reference frame (Relative)."""
        r = self.__dict__.get("_rows")
        if r is None:
            r = self._make_rows()
            if self.level == 0:  # a hard goal's rows are constraints: weight 1 whatever was given
                r = [row[:5] + (HARD_ROW_WEIGHT,) + row[6:] for row in r]
            object.__setattr__(self, "_rows", r)
        return r

    def _make_rows(self):  # pragma: no cover - overridden
        raise NotImplementedError

    def structure(self) -> tuple:
        """What of this goal the compiled problem's layout depends on, not its targets or weights:
        (level, ((kind, frame, reference frame or None) per row)), built once. Goals with equal
        structures give goal tables that differ only in their target and weight columns, so the
        solve caches everything else per robot and structure (solvers/_common.compile_problem)."""
        k = self.__dict__.get("_structure")
        if k is None:
            k = (self.level, tuple((r[0], r[1], r[6] if len(r) > 6 else None) for r in self.rows()))
            object.__setattr__(self, "_structure", k)
        return k

    def table(self) -> tuple:
        """This goal's rows as arrays (kind (G,), vec (G, 3), R (G, 3, 3), axis (G, 3), weight (G,)),
        built once (goals are immutable); the solve fast path reads them without copying."""
        t = self.__dict__.get("_table")
        if t is None:
            rows = self.rows()
            t = (np.array([r[0] for r in rows], dtype=np.int64),
                 np.array([r[2] for r in rows], dtype=np.float64).reshape(len(rows), 3),
                 np.array([r[3] for r in rows], dtype=np.float64).reshape(len(rows), 3, 3),
                 np.array([r[4] for r in rows], dtype=np.float64).reshape(len(rows), 3),
                 np.array([r[5] for r in rows], dtype=np.float64))
            object.__setattr__(self, "_table", t)
        return t

    def lean(self) -> tuple:
        """(structure id, target bytes, largest soft weight), built once: an int that is equal for
        goals of equal :meth:`structure` (whatever robot they are solved on), the target and weight
        columns of :meth:`table` as float64 bytes, block after block: vec (G x 3), R (G x 9,
        row-major), axis (G x 3), weight (G) — four ``tobytes``, no array built (:func:`lean_index`
        says where row g's numbers are) — and the largest weight of its rows if the goal is soft
        (0.0 for a hard goal or a Posture; :func:`relative_weights`). The whole-body fast path
        (solve._solve_core_fast) keys its prepared problems by the ids (a tuple of small ints
        hashes in a fraction of the nested structures' time) and gathers a problem's targets with
        one join of the bytes."""
        d = self.__dict__
        r = d.get("_lean")
        if r is None:
            s = d.get("_structure") or self.structure()
            sid = _STRUCTURE_IDS.get(s)
            if sid is None:
                with _IDS_LOCK:  # (two threads must not give two structures one id)
                    sid = _STRUCTURE_IDS.setdefault(s, len(_STRUCTURE_IDS))
            _, vec, R, axis, w = d.get("_table") or self.table()
            wmax = float(w.max()) if w.shape[0] and s[0] == 1 else 0.0  # (s[0]: the level)
            r = (sid, b"".join((vec.tobytes(), R.tobytes(), axis.tobytes(), w.tobytes())), wmax)
            object.__setattr__(self, "_lean", r)
        return r

    def __eq__(self, other):
        """Goals of one class with equal fields, arrays compared by value (the dataclass's
        generated ``==`` compared the arrays' element-wise results as a truth value: ``goal in
        goals`` raised "The truth value of an array ... is ambiguous")."""
        if other.__class__ is not self.__class__:
            return NotImplemented
        return all(_same(getattr(self, f.name), getattr(other, f.name)) for f in fields(self))

    def __hash__(self):
        """Consistent with ``==``: the class and every field, arrays by shape and bytes (a goal can
        be a dict key or a set member; the generated hash raised "unhashable type: 'numpy.ndarray'")."""
        return hash((self.__class__.__name__,) + tuple(_hash_key(getattr(self, f.name)) for f in fields(self)))

    def __getstate__(self):
        """Pickles leave out the structure id (Goal.lean): it is this process's number."""
        state = dict(self.__dict__)
        state.pop("_lean", None)
        return state


def _same(a, b) -> bool:
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return np.shape(a) == np.shape(b) and bool(np.array_equal(a, b))
    return bool(a == b)


def _hash_key(v):
    if isinstance(v, np.ndarray):
        return (v.shape, (v + 0.0).tobytes())  # (+ 0.0: -0.0 and 0.0 are equal, so hash alike)
    return v


#: The least soft weight :func:`relative_weights` leaves (the smallest normal float64): a ratio that
#: underflows to 0 would turn the goal into a row that no longer decides success (weight 0).
_TINY_WEIGHT = float(np.finfo(np.float64).tiny)


def relative_weights(gw, glevel, wmax) -> np.ndarray:
    """The soft rows' weights (``glevel`` (G,) not 0) divided by ``wmax``, the largest of them
    (floored at the smallest normal number), in place; hard rows (weight :data:`HARD_ROW_WEIGHT`)
    unchanged.

    Only the ratios of the soft weights mean something (which goal gives way when they conflict),
    yet the solvers' damping and their absolute floors do not scale with them: LM's damping
    ``μ = λ E + 1e-12`` (E the weighted cost) and the hard rows' weight 1 beside the soft ones.
    Measured before this rescaling (lm, default 50 ms budget): a reachable Panda Pose alone ended
    ``unreachable`` 4 mm off at weight 1e-6 and 0.59 m off at 1e-8 or 1e160 (converged in 15
    iterations at weight 1); G1 with hard feet and one soft hand at weight <= 1e-8, or both hands
    soft at 1e-8 each, ended ``time_limit``; weights >= ~1e154 overflow the cost. With the largest
    soft weight 1 these are the weight-1 solves. Ratios far from 1 still slow LM on nonlinear
    goals that can all be met (G1, feet and hands soft: hands at 1e4 x the feet's weight took
    time_limit): a goal that must hold is ``hard=True``."""
    if wmax > 0.0 and wmax != 1.0:
        soft = glevel != 0
        gw[soft] = np.maximum(gw[soft] / wmax, _TINY_WEIGHT)
    return gw


def lean_index(goal_rows) -> np.ndarray:
    """Where row g's PACKED numbers (vec, R row-major, axis, weight) are in the joined target bytes
    of goals with ``goal_rows`` rows each (Goal.lean, read as float64): an int64 array (G x PACKED,)
    whose entry PACKED g + c is the position of row g's number c."""
    src = []
    base = 0
    for n in goal_rows:
        for j in range(n):
            src += [base + 3 * j + k for k in range(3)]
            src += [base + 3 * n + 9 * j + k for k in range(9)]
            src += [base + 12 * n + 3 * j + k for k in range(3)]
            src.append(base + 15 * n + j)
        base += PACKED * n
    return np.array(src, dtype=np.int64)


@dataclass(frozen=True, eq=False)  # (Goal.__eq__ / __hash__: array fields by value)
class Position(Goal):
    """The origin of ``frame`` at the world point ``p`` (3,) [m]."""

    frame: str
    p: np.ndarray
    weight: float = 1.0
    hard: bool = False
    priority: int | None = None

    def __post_init__(self):
        level = _level(self.hard, self.priority, "Position")
        object.__setattr__(self, "frame", _frame(self.frame, "Position"))
        object.__setattr__(self, "p", _point(self.p, f"Position({self.frame!r}).p"))
        object.__setattr__(self, "weight", _weight(self.weight, "Position"))
        # the goal-table row and its structure, built once here (goals are immutable): a solve only
        # reads them. Not for a subclass: it may make other rows, and its table and structure must
        # come from them (Goal.table, Goal.structure), or its rows would run as a Position's
        if type(self) is Position:
            object.__setattr__(self, "_table", (_KIND_P.copy(), self.p.reshape(1, 3).copy(), _EYE1.copy(),
                                                np.zeros((1, 3)),
                                                np.array([HARD_ROW_WEIGHT if level == 0 else self.weight])))
            object.__setattr__(self, "_structure", (level, ((KIND_POSITION, self.frame, None),)))

    def _make_rows(self):
        return [(KIND_POSITION, self.frame, self.p, np.eye(3), np.zeros(3), self.weight)]


@dataclass(frozen=True, eq=False)  # (Goal.__eq__ / __hash__: array fields by value)
class Orientation(Goal):
    """The orientation of ``frame`` equal to ``R`` (3, 3); ``axes='z'``: only the tool z axis matters."""

    frame: str
    R: np.ndarray
    weight: float = 1.0
    axes: str = "xyz"
    hard: bool = False
    priority: int | None = None

    def __post_init__(self):
        _level(self.hard, self.priority, "Orientation")
        object.__setattr__(self, "frame", _frame(self.frame, "Orientation"))
        R = as_rotation(self.R, f"Orientation({self.frame!r}).R")
        R.setflags(write=False)
        object.__setattr__(self, "R", R)
        object.__setattr__(self, "weight", _weight(self.weight, "Orientation"))
        object.__setattr__(self, "axes", _axes(self.axes, "Orientation"))

    def _make_rows(self):
        return [_rotation_row(self.frame, self.R, self.axes, self.weight)]


def _rotation_row(frame, R, axes, weight):
    k = _AXES[axes]
    if k is None:
        return (KIND_ROTATION, frame, np.zeros(3), R, np.zeros(3), weight)
    local = np.zeros(3)
    local[k] = 1.0
    return (KIND_AXIS, frame, R[:, k].copy(), np.eye(3), local, weight)


@dataclass(frozen=True, eq=False)  # (Goal.__eq__ / __hash__: array fields by value)
class Pose(Goal):
    """``frame`` at the pose ``T`` (4, 4) (position and orientation; ``axes`` as in Orientation).

    ``rotation_weight`` defaults to ``weight``.
    """

    frame: str
    T: np.ndarray
    weight: float = 1.0
    axes: str = "xyz"
    rotation_weight: float | None = None
    hard: bool = False
    priority: int | None = None

    def __post_init__(self):
        level = _level(self.hard, self.priority, "Pose")
        object.__setattr__(self, "frame", _frame(self.frame, "Pose"))
        T = as_transform(self.T, f"Pose({self.frame!r}).T")
        if max(abs(T[0, 3]), abs(T[1, 3]), abs(T[2, 3])) > MAX_LENGTH:  # as_transform checked finiteness
            _point(T[:3, 3], f"Pose({self.frame!r}).T translation")  # raises, naming the value
        T.setflags(write=False)
        object.__setattr__(self, "T", T)
        object.__setattr__(self, "weight", _weight(self.weight, "Pose"))
        object.__setattr__(self, "axes", _axes(self.axes, "Pose"))
        rw = self.weight if self.rotation_weight is None else _weight(self.rotation_weight, "Pose")
        object.__setattr__(self, "rotation_weight", rw)
        if self.axes == "xyz" and type(self) is Pose:  # the goal-table rows, built once here (as Position's)
            vec = np.zeros((2, 3))
            vec[0] = T[:3, 3]
            R = np.empty((2, 3, 3))
            R[0] = _EYE
            R[1] = T[:3, :3]
            object.__setattr__(self, "_table", (_KIND_PR.copy(), vec, R, np.zeros((2, 3)),
                                                np.array([HARD_ROW_WEIGHT, HARD_ROW_WEIGHT] if level == 0
                                                         else [self.weight, rw])))
            object.__setattr__(self, "_structure", (level, ((KIND_POSITION, self.frame, None),
                                                            (KIND_ROTATION, self.frame, None))))

    @classmethod
    def from_position_quaternion(cls, frame, p, *, quat_wxyz=None, quat_xyzw=None, **kwargs) -> "Pose":
        """A Pose from a position ``p`` (3,) [m] and a unit quaternion in a named order: exactly one
        of ``quat_wxyz`` (w, x, y, z) or ``quat_xyzw`` (x, y, z, w, as ROS and SciPy write it).
        Other keyword arguments (weight, axes, ...) go to :class:`Pose`."""
        R = quat_to_matrix(quat_wxyz=quat_wxyz, quat_xyzw=quat_xyzw)
        if R.shape != (3, 3):
            raise GoalError(f"Pose.from_position_quaternion({frame!r}): expected one quaternion (4,), "
                            f"got shape {R.shape[:-2] + (4,)}")
        T = np.eye(4)
        T[:3, :3] = R
        T[:3, 3] = _point(p, f"Pose.from_position_quaternion({frame!r}).p")
        return cls(frame, T, **kwargs)

    def _make_rows(self):
        return [(KIND_POSITION, self.frame, self.T[:3, 3], np.eye(3), np.zeros(3), self.weight),
                _rotation_row(self.frame, self.T[:3, :3], self.axes, self.rotation_weight)]


@dataclass(frozen=True, eq=False)  # (Goal.__eq__ / __hash__: array fields by value)
class Aim(Goal):
    """The local ``axis`` (3,) of ``frame`` points at the world ``point`` (3,) [m]."""

    frame: str
    axis: np.ndarray
    point: np.ndarray
    weight: float = 1.0
    hard: bool = False
    priority: int | None = None

    def __post_init__(self):
        _level(self.hard, self.priority, "Aim")
        object.__setattr__(self, "frame", _frame(self.frame, "Aim"))
        ax = unit_vector(f"Aim({self.frame!r}).axis", self.axis)  # scaled first: no overflow to 0
        ax.setflags(write=False)
        object.__setattr__(self, "axis", ax)
        object.__setattr__(self, "point", _point(self.point, f"Aim({self.frame!r}).point"))
        object.__setattr__(self, "weight", _weight(self.weight, "Aim"))

    def _make_rows(self):
        return [(KIND_AIM, self.frame, self.point, np.eye(3), self.axis, self.weight)]


_AXES_MASK = {"x": (1, 0, 0), "y": (0, 1, 0), "z": (0, 0, 1), "xy": (1, 1, 0), "xz": (1, 0, 1), "yz": (0, 1, 1),
              "xyz": (1, 1, 1)}


@dataclass(frozen=True, eq=False)  # (Goal.__eq__ / __hash__: array fields by value)
class CenterOfMass(Goal):
    """The robot's centre of mass at the world point ``p`` (3,) [m] along ``axes`` ("xy": over
    the point on the floor, the usual balance goal; any of x, y, z, xy, xz, yz, xyz). Needs link
    masses (URDF/MJCF ``<inertial>``: ``Robot.link_mass``, ``Robot.link_com``)."""

    p: np.ndarray
    axes: str = "xy"
    weight: float = 1.0
    hard: bool = False
    priority: int | None = None
    frame: str = field(default="", repr=False)

    def __post_init__(self):
        _level(self.hard, self.priority, "CenterOfMass")
        object.__setattr__(self, "p", _point(self.p, "CenterOfMass.p"))
        if self.axes not in _AXES_MASK:
            raise GoalError(f"CenterOfMass: axes must be one of {', '.join(map(repr, _AXES_MASK))}, "
                            f"got {self.axes!r}")
        object.__setattr__(self, "weight", _weight(self.weight, "CenterOfMass"))

    def _make_rows(self):
        return [(KIND_COM, None, self.p, np.eye(3), np.array(_AXES_MASK[self.axes], dtype=float), self.weight)]


def _same_frame(frame) -> str:
    return (f"Relative: frame and reference_frame are both {frame!r}; a frame relative to itself is "
            f"always at the identity (met or never met whatever q): expected two different frames")


@dataclass(frozen=True, eq=False)  # (Goal.__eq__ / __hash__: array fields by value)
class Relative(Goal):
    """``frame`` at the pose ``T`` (4, 4) expressed in ``reference_frame`` (a hand relative to the
    other hand or to the head); ``T`` of shape (3,) is a position only [m]. ``rotation_weight``
    defaults to ``weight``. The two frames must differ (GoalError)."""

    frame: str
    reference_frame: str
    T: np.ndarray
    weight: float = 1.0
    rotation_weight: float | None = None
    hard: bool = False
    priority: int | None = None

    def __post_init__(self):
        _level(self.hard, self.priority, "Relative")
        object.__setattr__(self, "frame", _frame(self.frame, "Relative"))
        object.__setattr__(self, "reference_frame", _frame(self.reference_frame, "Relative"))
        if self.frame == self.reference_frame:
            raise GoalError(_same_frame(self.frame))
        if np.shape(self.T) == (3,):
            T = _point(self.T, f"Relative({self.frame!r}).T")
        else:
            T = as_transform(self.T, f"Relative({self.frame!r}).T")
            T.setflags(write=False)
        object.__setattr__(self, "T", T)
        object.__setattr__(self, "weight", _weight(self.weight, "Relative"))
        rw = self.weight if self.rotation_weight is None else _weight(self.rotation_weight, "Relative")
        object.__setattr__(self, "rotation_weight", rw)

    def _make_rows(self):
        ref = self.reference_frame
        if self.T.shape == (3,):
            return [(KIND_REL_POSITION, self.frame, self.T, np.eye(3), np.zeros(3), self.weight, ref)]
        return [(KIND_REL_POSITION, self.frame, self.T[:3, 3], np.eye(3), np.zeros(3), self.weight, ref),
                (KIND_REL_ROTATION, self.frame, np.zeros(3), self.T[:3, :3], np.zeros(3), self.rotation_weight, ref)]


@dataclass(frozen=True, eq=False)  # (Goal.__eq__ / __hash__: array fields by value)
class Plane(Goal):
    """The origin of ``frame`` on the world plane through ``point`` (3,) [m] with normal
    ``normal`` (3,) (any length > 0; normalised): one residual entry, the signed distance
    ``n·(point - p_frame)``, so the frame may slide in the plane and turn freely — a foot sole on
    the floor, a pen tip on a table, a tool on a wall. Its error is a distance, held to
    ``position_tolerance``. lm only (the general core); not a Tracker goal."""

    frame: str
    point: np.ndarray
    normal: np.ndarray
    weight: float = 1.0
    hard: bool = False
    priority: int | None = None

    def __post_init__(self):
        _level(self.hard, self.priority, "Plane")
        object.__setattr__(self, "frame", _frame(self.frame, "Plane"))
        object.__setattr__(self, "point", _point(self.point, f"Plane({self.frame!r}).point"))
        n = unit_vector(f"Plane({self.frame!r}).normal", self.normal)  # scaled first: no overflow to 0
        n.setflags(write=False)
        object.__setattr__(self, "normal", n)
        object.__setattr__(self, "weight", _weight(self.weight, "Plane"))

    def _make_rows(self):  # the normal rides in the row's axis slot
        return [(KIND_PLANE, self.frame, self.point, np.eye(3), self.normal, self.weight)]


@dataclass(frozen=True, eq=False)  # (Goal.__eq__ / __hash__: array fields by value)
class Posture(Goal):
    """The rest configuration ``q_rest`` (dof,) as a regulariser: the lowest priority (LM moves
    toward it inside the null space of the goals once they are met); never decides success.
    ``weight`` > 0 turns it on (lm: its size does not matter, the goals come first; pinv, dls: the
    secondary task of their null-space term, scaled by ``nullspace_gain``; transpose, gauss-seidel:
    the weight of the soft bias ``w² I`` until it settles short of the goals, then the goals go on
    without it; ccd, fabrik and analytic refuse it, SolverError). Being a regulariser, it cannot be hard: ``hard=True``
    or any ``priority`` is a GoalError, and so is a second Posture in one solve."""

    q_rest: np.ndarray
    weight: float = 1e-3
    frame: str = field(default="", repr=False)
    hard: bool = field(default=False, repr=False, compare=False)  # accepted only as False (see above)
    priority: int | None = field(default=None, repr=False, compare=False)  # accepted only as None

    def __post_init__(self):
        if self.hard is not False or self.priority is not None:
            given = "hard=True" if self.hard is True else (f"hard={self.hard!r}" if self.hard is not False
                                                            else f"priority={self.priority!r}")
            raise GoalError(f"Posture: got {given}; a Posture is a regulariser, below every goal (it never "
                            f"decides success) and cannot be hard or take a priority: leave both out (joints "
                            f"that must stay at their values: lock them, load_robot(..., locked={{...}}))")
        a = np.array(real_array("Posture.q_rest", self.q_rest, bound=MAX_LENGTH))
        if a.ndim != 1:
            raise GoalError(f"Posture.q_rest: expected a finite vector (dof,), got {self.q_rest!r}")
        a.setflags(write=False)
        object.__setattr__(self, "q_rest", a)
        object.__setattr__(self, "weight", _weight(self.weight, "Posture", allow_zero=True))

    def _make_rows(self):
        return []
