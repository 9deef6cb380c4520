"""Obstacles: :class:`Sphere`, :class:`Capsule`, :class:`Box`, :class:`HalfSpace`, :class:`Points`,
gathered in a :class:`World`.

Every obstacle is a frozen dataclass whose arrays are copied, validated (finite, sizes > 0) and
read-only; a bad value raises :class:`~invkin.collision.errors.CollisionError` naming it. Units are
metres; poses are 4 × 4 transforms in the robot's base (world) frame.

A :class:`World` flattens its obstacles once into the kernels' tables (``World.tables``):

* ``caps`` (m, 7): segment end points ``a``, ``b`` and radius ``r`` of every sphere (``a = b``),
  capsule and point of a cloud (each point a sphere of the cloud's radius);
* ``boxes`` (k, 15): rotation ``R_world_box`` (row-major 9), centre (3), half extents (3);
* ``halfspaces`` (h, 4): unit outward normal ``n`` and offset ``c`` of the solid ``{x: n·x ≤ c}``;

with ``*_obj`` arrays giving the obstacle (index into ``World.obstacles``) of every row, so a
point cloud reports as one obstacle (its closest point).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .errors import CollisionError

__all__ = ["Sphere", "Capsule", "Box", "HalfSpace", "Points", "World", "Obstacle"]


def _vec(name, v, shape, owner):
    try:
        a = np.array(v, dtype=np.float64)
    except (TypeError, ValueError):
        raise CollisionError(f"{owner}: {name} must be numbers of shape {shape}, got {v!r}") from None
    if a.shape != shape and not (len(shape) == 2 and shape[0] == -1 and a.ndim == 2 and a.shape[1] == shape[1]):
        raise CollisionError(f"{owner}: {name} must have shape {shape}, got {a.shape}")
    if not np.all(np.isfinite(a)):
        raise CollisionError(f"{owner}: {name} holds NaN or inf: {np.array2string(a, threshold=12)}")
    a.setflags(write=False)
    return a


def _positive(name, v, owner, allow_zero=False):
    try:
        x = float(v)
    except (TypeError, ValueError):
        raise CollisionError(f"{owner}: {name} must be a number [m], got {v!r}") from None
    if not np.isfinite(x) or x < 0 or (x == 0 and not allow_zero):
        raise CollisionError(f"{owner}: {name} must be a finite number {'>=' if allow_zero else '>'} 0 [m], "
                             f"got {v!r}")
    return x


class Obstacle:
    """Base class of the obstacle shapes."""


@dataclass(frozen=True, eq=False)
class Sphere(Obstacle):
    """A ball: ``center`` (3,) [m], ``radius`` > 0 [m]."""

    center: np.ndarray
    radius: float

    def __post_init__(self):
        object.__setattr__(self, "center", _vec("center", self.center, (3,), "Sphere"))
        object.__setattr__(self, "radius", _positive("radius", self.radius, "Sphere"))


@dataclass(frozen=True, eq=False)
class Capsule(Obstacle):
    """All points within ``radius`` > 0 [m] of the segment ``a`` – ``b`` ((3,) each [m])."""

    a: np.ndarray
    b: np.ndarray
    radius: float

    def __post_init__(self):
        object.__setattr__(self, "a", _vec("a", self.a, (3,), "Capsule"))
        object.__setattr__(self, "b", _vec("b", self.b, (3,), "Capsule"))
        object.__setattr__(self, "radius", _positive("radius", self.radius, "Capsule"))


@dataclass(frozen=True, eq=False)
class Box(Obstacle):
    """A cuboid centred at ``T_world_box``'s origin, edges ``size_xyz`` (3,) > 0 [m] along its axes."""

    T_world_box: np.ndarray
    size_xyz: np.ndarray

    def __post_init__(self):
        T = _vec("T_world_box", self.T_world_box, (4, 4), "Box")
        R = T[:3, :3]
        if not (np.allclose(R @ R.T, np.eye(3), atol=1e-6) and np.linalg.det(R) > 0
                and np.allclose(T[3], (0, 0, 0, 1))):
            raise CollisionError(f"Box: T_world_box must be a rigid transform (rotation block orthonormal, "
                                 f"det +1, last row 0 0 0 1), got\n{T}")
        s = _vec("size_xyz", self.size_xyz, (3,), "Box")
        if np.any(s <= 0):
            raise CollisionError(f"Box: size_xyz must be > 0 on every axis [m], got {s.tolist()}")
        object.__setattr__(self, "T_world_box", T)
        object.__setattr__(self, "size_xyz", s)


@dataclass(frozen=True, eq=False)
class HalfSpace(Obstacle):
    """The solid ``{x: n·x ≤ offset}`` below a plane (a floor, a table top extended); ``normal``
    (3,) points out of it (into free space) and is normalised; ``offset`` [m]."""

    normal: np.ndarray
    offset: float

    def __post_init__(self):
        n = _vec("normal", self.normal, (3,), "HalfSpace")
        norm = float(np.linalg.norm(n))
        if norm < 1e-12:
            raise CollisionError(f"HalfSpace: normal must be a non-zero vector, got {n.tolist()}")
        n = n / norm
        n.setflags(write=False)
        try:
            c = float(self.offset)
        except (TypeError, ValueError):
            raise CollisionError(f"HalfSpace: offset must be a number [m], got {self.offset!r}") from None
        if not np.isfinite(c):
            raise CollisionError(f"HalfSpace: offset must be finite [m], got {self.offset!r}")
        object.__setattr__(self, "normal", n)
        object.__setattr__(self, "offset", c / norm)


@dataclass(frozen=True, eq=False)
class Points(Obstacle):
    """A point cloud ``xyz`` (n, 3) [m], each point a ball of ``radius`` >= 0 [m] (0: bare points)."""

    xyz: np.ndarray
    radius: float = 0.0

    def __post_init__(self):
        p = _vec("xyz", self.xyz, (-1, 3), "Points")
        if len(p) == 0:
            raise CollisionError("Points: xyz holds no points (shape (0, 3))")
        object.__setattr__(self, "xyz", p)
        object.__setattr__(self, "radius", _positive("radius", self.radius, "Points", allow_zero=True))


@dataclass(frozen=True, eq=False)
class World:
    """Obstacles fixed in the world frame (``ik.World([ik.Box(T, size), ik.Sphere(c, r)])``): a list
    (any iterable) of obstacles, one obstacle, or another World (its obstacles)."""

    obstacles: tuple = ()
    tables: dict = field(init=False, repr=False)

    def __post_init__(self):
        obs = self.obstacles
        if isinstance(obs, World):
            obs = obs.obstacles
        elif isinstance(obs, Obstacle):
            obs = (obs,)
        elif isinstance(obs, (str, bytes, dict)) or not hasattr(obs, "__iter__"):
            raise CollisionError(f"World: obstacles must be a list of obstacles (Sphere, Capsule, Box, HalfSpace, "
                                 f"Points), got {type(obs).__name__} {obs!r:.120}")
        obs = tuple(obs)
        for k, o in enumerate(obs):
            if not isinstance(o, Obstacle):
                raise CollisionError(f"World: obstacle {k} is {type(o).__name__} {o!r}; expected one of "
                                     f"Sphere, Capsule, Box, HalfSpace, Points")
        object.__setattr__(self, "obstacles", obs)
        object.__setattr__(self, "tables", _tables(obs))

    def __len__(self) -> int:
        return len(self.obstacles)

    def __repr__(self) -> str:
        kinds = [type(o).__name__ for o in self.obstacles]
        return f"World({len(kinds)} obstacles: {', '.join(kinds) or 'none'})"


CELL = 0.02   # [m] grid cell of a point cloud's order (Z-order of the cells, _z_order)
CHUNK = 2     # obstacle capsules per broad-phase leaf (points of one cloud; a lone capsule is its own)
FAN = 4       # children per node of the broad-phase tree over a cloud's leaves


def _z_order(xyz) -> np.ndarray:
    """Indices that sort the points along the Z-order (Morton) curve of CELL-sized grid cells: runs
    of consecutive points then lie in compact blocks, so the bounding sphere of a node of the broad
    phase's tree (:func:`_chunks`) is small (Panda over the benchmark's 5,000-point table scan: a
    check cost ~38 µs against ~48 µs with the points in x, y, z order of 10 cm cells, with flat
    chunks; ~6 µs with the tree, where 1 cm or 4 cm cells gave ~8 µs; benchmarks/RESULTS.md,
    session 4)."""
    cell = np.floor((xyz - xyz.min(axis=0)) / CELL).astype(np.uint64)
    cell = np.minimum(cell, np.uint64(2**21 - 1))  # 21 bits per axis (42 km at 2 cm)
    key = np.zeros(len(xyz), dtype=np.uint64)
    for bit in range(21):
        for axis in range(3):
            key |= ((cell[:, axis] >> np.uint64(bit)) & np.uint64(1)) << np.uint64(3 * bit + axis)
    return np.argsort(key, kind="stable")


def _bounds(caps, starts) -> np.ndarray:
    """Spheres (centre, radius) (len(starts), 4) holding the runs of capsules ``caps[starts[k]:
    starts[k + 1]]`` (the last to the end): the middle of each run's box, the farthest end."""
    lo = np.minimum.reduceat(np.minimum(caps[:, 0:3], caps[:, 3:6]), starts)
    hi = np.maximum.reduceat(np.maximum(caps[:, 0:3], caps[:, 3:6]), starts)
    c = 0.5 * (lo + hi)
    each = np.repeat(c, np.diff(np.r_[starts, len(caps)]), axis=0)
    far = np.maximum(np.linalg.norm(caps[:, 0:3] - each, axis=1), np.linalg.norm(caps[:, 3:6] - each, axis=1))
    return np.c_[c, np.maximum.reduceat(far + caps[:, 6], starts)]


def _emit(levels, bounds, n, level, m, i0, ranges, out_bounds):
    """Append node m of ``level`` (levels[level]: its nodes' first capsules, ``n`` capsules in all,
    offset i0) and its subtree in preorder, with its skip link."""
    starts = levels[level]
    k = len(ranges)
    end = starts[m + 1] if m + 1 < len(starts) else n
    ranges.append([i0 + starts[m], i0 + end, k + 1])
    out_bounds.append(bounds[level][m])
    if level > 0:
        for child in range(m * FAN, min((m + 1) * FAN, len(levels[level - 1]))):
            _emit(levels, bounds, n, level - 1, child, i0, ranges, out_bounds)
    ranges[k][2] = len(ranges)


def _chunks(caps, cap_obj) -> dict:
    """The broad phase's tree of each obstacle's capsules, flattened in preorder with skip links:
    ``chunk_range`` (nc, 3) = start, end into ``caps``, next node once this one's subtree is done
    (``i + 1`` for a leaf), and ``chunk_bound`` (nc, 4) a sphere (centre, radius) holding every
    capsule of the node's range. Leaves are runs of up to CHUNK consecutive capsules of one
    obstacle; up to FAN consecutive nodes share a parent, level by level, up to one root per
    obstacle (a cloud's points are in Z-order, so a node is a compact block). The kernel visits a
    node's children only when its sphere is within reach of the link
    (:func:`~invkin.collision.kernels.world_distances`), in the order of the leaves."""
    ranges, bounds = [], []
    i = 0
    while i < len(caps):
        j = i + 1
        while j < len(caps) and cap_obj[j] == cap_obj[i]:
            j += 1
        levels = [np.arange(0, j - i, CHUNK)]  # each level: its nodes' first capsules
        while len(levels[-1]) > 1:
            levels.append(levels[-1][::FAN])
        level_bounds = [_bounds(caps[i:j], starts) for starts in levels]
        _emit(levels, level_bounds, j - i, len(levels) - 1, 0, i, ranges, bounds)
        i = j
    return {"chunk_range": np.array(ranges, dtype=np.int64).reshape(-1, 3),
            "chunk_bound": np.array(bounds, dtype=np.float64).reshape(-1, 4)}


def _tables(obs) -> dict:
    caps, cap_obj, boxes, box_obj, hs, hs_obj = [], [], [], [], [], []
    for k, o in enumerate(obs):
        if isinstance(o, Sphere):
            caps.append(np.r_[o.center, o.center, o.radius])
            cap_obj.append(k)
        elif isinstance(o, Capsule):
            caps.append(np.r_[o.a, o.b, o.radius])
            cap_obj.append(k)
        elif isinstance(o, Points):  # in grid-cell order, so that CHUNK consecutive points lie close
            xyz = o.xyz[_z_order(o.xyz)]
            caps.extend(np.c_[xyz, xyz, np.full(len(xyz), o.radius)])
            cap_obj.extend([k] * len(xyz))
        elif isinstance(o, Box):
            boxes.append(np.r_[o.T_world_box[:3, :3].ravel(), o.T_world_box[:3, 3], o.size_xyz / 2])
            box_obj.append(k)
        else:
            hs.append(np.r_[o.normal, o.offset])
            hs_obj.append(k)
    caps = np.array(caps, dtype=np.float64).reshape(-1, 7)
    cap_obj = np.array(cap_obj, dtype=np.int64)
    out = {"caps": caps,
           "cap_obj": cap_obj,
           **_chunks(caps, cap_obj),
           "boxes": np.array(boxes, dtype=np.float64).reshape(-1, 15),
           "box_obj": np.array(box_obj, dtype=np.int64),
           "halfspaces": np.array(hs, dtype=np.float64).reshape(-1, 4),
           "hs_obj": np.array(hs_obj, dtype=np.int64)}
    for a in out.values():
        a.setflags(write=False)
    return out
