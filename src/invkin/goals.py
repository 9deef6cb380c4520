"""Goals: what a solve should achieve, as frozen dataclasses compiled into a flat goal table.

Every goal has a ``weight`` (dimensionless; a position residual in metres and a rotation residual
in radians are weighted as given). The weight of a task goal (Position, Orientation, Pose and its
``rotation_weight``, Aim) must be > 0: every task goal decides success, so a goal that should not
count is left out rather than given weight 0. Posture weights may be 0. Points and positions are
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
* ``Posture(q_rest)``: a soft bias ``e = q_rest ⊖ q`` with ``J = I``; it never decides success.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ._checks import MAX_LENGTH, real_array, unit_vector
from .errors import GoalError
from .spatial import as_rotation, as_transform, quat_to_matrix

__all__ = ["Goal", "Position", "Orientation", "Pose", "Aim", "Posture", "KIND_POSITION",
           "KIND_ROTATION", "KIND_AXIS", "KIND_AIM"]

KIND_POSITION = 0
KIND_ROTATION = 1
KIND_AXIS = 2
KIND_AIM = 3

_AXES = {"xyz": None, "x": 0, "y": 1, "z": 2}
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
    if not np.isfinite(w) or w < 0 or (w == 0 and not allow_zero):
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


def _axes(axes, what):
    if axes not in _AXES:
        raise GoalError(f"{what}: axes must be one of 'xyz', 'x', 'y', 'z', got {axes!r}")
    return axes


class Goal:
    """Base class of every goal."""

    weight: float

    def rows(self) -> list:
        """Entries of the goal table: (kind, frame, vec (3,), R (3, 3), axis (3,), weight)."""
        r = self.__dict__.get("_rows")
        if r is None:
            r = self._make_rows()
            object.__setattr__(self, "_rows", r)
        return r

    def _make_rows(self):  # pragma: no cover - overridden
        raise NotImplementedError

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


@dataclass(frozen=True)
class Position(Goal):
    """The origin of ``frame`` at the world point ``p`` (3,) [m]."""

    frame: str
    p: np.ndarray
    weight: float = 1.0

    def __post_init__(self):
        object.__setattr__(self, "frame", _frame(self.frame, "Position"))
        object.__setattr__(self, "p", _point(self.p, f"Position({self.frame!r}).p"))
        object.__setattr__(self, "weight", _weight(self.weight, "Position"))
        # the goal-table row, built once here (goals are immutable): a solve only reads it
        object.__setattr__(self, "_table", (_KIND_P.copy(), self.p.reshape(1, 3).copy(), _EYE1.copy(),
                                            np.zeros((1, 3)), np.array([self.weight])))

    def _make_rows(self):
        return [(KIND_POSITION, self.frame, self.p, np.eye(3), np.zeros(3), self.weight)]


@dataclass(frozen=True)
class Orientation(Goal):
    """The orientation of ``frame`` equal to ``R`` (3, 3); ``axes='z'``: only the tool z axis matters."""

    frame: str
    R: np.ndarray
    weight: float = 1.0
    axes: str = "xyz"

    def __post_init__(self):
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


@dataclass(frozen=True)
class Pose(Goal):
    """``frame`` at the pose ``T`` (4, 4) (position and orientation; ``axes`` as in Orientation).

    ``rotation_weight`` defaults to ``weight``.
    """

    frame: str
    T: np.ndarray
    weight: float = 1.0
    axes: str = "xyz"
    rotation_weight: float | None = None

    def __post_init__(self):
        object.__setattr__(self, "frame", _frame(self.frame, "Pose"))
        T = as_transform(self.T, f"Pose({self.frame!r}).T")
        _point(T[:3, 3], f"Pose({self.frame!r}).T translation")
        T.setflags(write=False)
        object.__setattr__(self, "T", T)
        object.__setattr__(self, "weight", _weight(self.weight, "Pose"))
        object.__setattr__(self, "axes", _axes(self.axes, "Pose"))
        rw = self.weight if self.rotation_weight is None else _weight(self.rotation_weight, "Pose")
        object.__setattr__(self, "rotation_weight", rw)
        if self.axes == "xyz":  # the goal-table rows, built once here: a solve only reads them
            vec = np.zeros((2, 3))
            vec[0] = T[:3, 3]
            R = np.empty((2, 3, 3))
            R[0] = _EYE
            R[1] = T[:3, :3]
            object.__setattr__(self, "_table", (_KIND_PR.copy(), vec, R, np.zeros((2, 3)),
                                                np.array([self.weight, rw])))

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


@dataclass(frozen=True)
class Aim(Goal):
    """The local ``axis`` (3,) of ``frame`` points at the world ``point`` (3,) [m]."""

    frame: str
    axis: np.ndarray
    point: np.ndarray
    weight: float = 1.0

    def __post_init__(self):
        object.__setattr__(self, "frame", _frame(self.frame, "Aim"))
        ax = unit_vector(f"Aim({self.frame!r}).axis", self.axis)  # scaled first: no overflow to 0
        ax.setflags(write=False)
        object.__setattr__(self, "axis", ax)
        object.__setattr__(self, "point", _point(self.point, f"Aim({self.frame!r}).point"))
        object.__setattr__(self, "weight", _weight(self.weight, "Aim"))

    def _make_rows(self):
        return [(KIND_AIM, self.frame, self.point, np.eye(3), self.axis, self.weight)]


@dataclass(frozen=True)
class Posture(Goal):
    """A soft bias toward the rest configuration ``q_rest`` (dof,); never decides success."""

    q_rest: np.ndarray
    weight: float = 1e-3
    frame: str = field(default="", repr=False)

    def __post_init__(self):
        a = np.array(real_array("Posture.q_rest", self.q_rest, bound=MAX_LENGTH))
        if a.ndim != 1:
            raise GoalError(f"Posture.q_rest: expected a finite vector (dof,), got {self.q_rest!r}")
        a.setflags(write=False)
        object.__setattr__(self, "q_rest", a)
        object.__setattr__(self, "weight", _weight(self.weight, "Posture", allow_zero=True))

    def _make_rows(self):
        return []
