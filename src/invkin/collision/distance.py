r"""Signed distances of a robot to itself and to a :class:`~invkin.collision.world.World`, and their
Jacobian: :func:`distances`, :func:`distance_jacobian`.

One evaluation: FK of every node, the link capsules moved to the world
(:func:`~invkin.collision.kernels.world_capsules`), then

* self-collision: every pair of :func:`~invkin.collision.pairs.collision_pairs` whose link bounding
  spheres are within ``cutoff`` is evaluated capsule by capsule (the closest pair of capsules
  counts);
* obstacles: every (link, obstacle) whose bounds are within ``cutoff`` (a point cloud: each point
  tested against the link's bounding sphere first, so the work grows with the points near the
  robot, not with the cloud).

A solver consumes the rows as inequalities ``dᵢ(q) ≥ margin``, linearised as
``dᵢ + ∂dᵢ/∂q · Δq ≥ margin``; ``cutoff`` (e.g. a few centimetres above the margin) keeps only the
rows that can become active in one step.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import kernels as CK
from ..errors import warn_caller
from .errors import CollisionError, CollisionWarning
from .model import collision_model
from .pairs import collision_pairs
from .world import World

__all__ = ["Distances", "distances", "distance_jacobian", "collision_tables", "max_rows"]


@dataclass(frozen=True, eq=False)
class Distances:
    """Closest pairs, nearest first (arrays read-only).

    Attributes:
        pairs: ((a, b), ...) link name ``a`` and link name or obstacle label ``b``
            (``"obstacle 2 (Box)"``) of each row.
        distance: (k,) signed distance [m], negative in penetration (capsules of ``robot.collision``,
            which enclose the link shapes: never larger than the real distance).
        points_a, points_b: (k, 3) witness points [m] in the world frame.
        normals: (k, 3) unit normal from a towards b; ``distance = normal · (points_b − points_a)``.
        node_a, node_b: (k,) node indices of the links (−1: an obstacle).
    """

    pairs: tuple
    distance: np.ndarray
    points_a: np.ndarray
    points_b: np.ndarray
    normals: np.ndarray
    node_a: np.ndarray
    node_b: np.ndarray

    def __len__(self) -> int:
        return len(self.pairs)

    @property
    def min_distance(self) -> float:
        """The smallest signed distance [m] (inf when no pair was within the cutoff)."""
        return float(self.distance[0]) if len(self.distance) else float("inf")

    @property
    def in_collision(self) -> bool:
        return self.min_distance < 0.0

    def __repr__(self) -> str:
        if not self.pairs:
            return "Distances(no pair within the cutoff)"
        (a, b), d = self.pairs[0], self.distance[0]
        return f"Distances({len(self.pairs)} pairs; closest {a} – {b}: {d * 1000:.1f} mm)"


def _check(robot, q, world, cutoff):
    if world is not None and not isinstance(world, World):
        if isinstance(world, (list, tuple)):
            world = World(world)
        else:
            raise CollisionError(f"world: expected an ik.World (or a list of obstacles), got {type(world).__name__}")
    try:
        cutoff = float(cutoff)
    except (TypeError, ValueError):
        raise CollisionError(f"cutoff: expected a number >= 0 [m] or inf, got {cutoff!r}") from None
    if not cutoff >= 0:
        raise CollisionError(f"cutoff: expected a number >= 0 [m] or inf, got {cutoff!r}")
    q = robot.check_q(q)
    if q.ndim != 1:
        from ..errors import ConfigurationError  # noqa: PLC0415 - only on bad input
        raise ConfigurationError(f"q: expected shape ({robot.dof},), got {q.shape}")
    return q, world, cutoff


def _self_collision(value) -> bool:
    """``self_collision`` as a bool (True, False, a NumPy bool); CollisionError naming anything else,
    as solve() does (a truthy string such as 'no' would otherwise measure the self pairs)."""
    if not isinstance(value, (bool, np.bool_)):
        raise CollisionError(f"self_collision: expected True or False, got {value!r}")
    return bool(value)


def _evaluate(robot, q, world, self_collision, cutoff):
    """(res (k, 10), node_a, node_b, labels, Tall) of the pairs within the cutoff, nearest first."""
    cm = collision_model(robot)
    if not len(cm.links):
        warn_caller(f"robot {robot.name!r} has no collision shapes (no <collision> elements or MJCF geoms "
                      f"were read): there is nothing to measure", CollisionWarning)
    Tall = robot.fk_all_array(q)
    wcaps = np.empty_like(cm.caps)
    wb = np.empty_like(cm.bounds)
    rows, na, nb, labels = [], [], [], []
    if len(cm.links):
        CK.world_capsules(Tall, cm.links, cm.link_caps, cm.caps, cm.bounds, wcaps, wb)
    if self_collision and len(cm.links) > 1:
        pairs = collision_pairs(robot)
        out = np.empty((len(pairs), 10))
        CK.self_distances(wcaps, wb, cm.link_caps, pairs, cutoff, out)
        for p in np.nonzero(out[:, 0] <= cutoff)[0]:
            a, b = pairs[p]
            rows.append(out[p])
            na.append(cm.links[a])
            nb.append(cm.links[b])
            labels.append((cm.link_names[a], cm.link_names[b]))
    if world is not None and len(world) and len(cm.links):
        t = world.tables
        out = np.empty((len(cm.links), len(world), 10))
        CK.world_distances(wcaps, wb, cm.link_caps, t["caps"], t["cap_obj"], t["chunk_range"], t["chunk_bound"],
                           t["boxes"], t["box_obj"],
                           t["halfspaces"], t["hs_obj"], cutoff, out)
        for ell, o in zip(*np.nonzero(out[:, :, 0] <= cutoff)):
            rows.append(out[ell, o])
            na.append(cm.links[ell])
            nb.append(-1)
            labels.append((cm.link_names[ell], f"obstacle {o} ({type(world.obstacles[o]).__name__})"))
    res = np.array(rows, dtype=np.float64).reshape(-1, 10)
    order = np.argsort(res[:, 0], kind="stable")
    return (np.ascontiguousarray(res[order]), np.array(na, dtype=np.int64)[order],
            np.array(nb, dtype=np.int64)[order], tuple(labels[i] for i in order), Tall)


def _ro(a):
    a = np.ascontiguousarray(a)
    a.setflags(write=False)
    return a


def distances(robot, q, world=None, self_collision: bool = True, cutoff: float = np.inf) -> Distances:
    """The signed distances of the robot at ``q`` (dof,) to itself (pairs of
    :func:`~invkin.collision.pairs.collision_pairs`) and to the obstacles of ``world``, nearest
    first; only pairs whose bounds lie within ``cutoff`` [m] are evaluated and listed.

    >>> d = ik.distances(robot, q, ik.World([ik.HalfSpace((0, 0, 1), 0.0)]))   # doctest: +SKIP
    >>> d.min_distance, d.pairs[0]                                              # doctest: +SKIP
    """
    q, world, cutoff = _check(robot, q, world, cutoff)
    self_collision = _self_collision(self_collision)
    res, na, nb, labels, _ = _evaluate(robot, q, world, self_collision, cutoff)
    return Distances(labels, _ro(res[:, 0]), _ro(res[:, 1:4]), _ro(res[:, 4:7]), _ro(res[:, 7:10]), _ro(na), _ro(nb))


def distance_jacobian(robot, q, world=None, self_collision: bool = True, cutoff: float = np.inf):
    """``(d (k,), J (k, dof), Distances)``: the signed distances of :func:`distances` and their
    derivatives ``∂dᵢ/∂q`` (columns as :meth:`Robot.jacobian`: a ball or free joint's rotation
    columns are local increments, what :meth:`Robot.integrate` applies). See
    :mod:`invkin.collision.kernels` for the formula."""
    q, world, cutoff = _check(robot, q, world, cutoff)
    self_collision = _self_collision(self_collision)
    res, na, nb, labels, Tall = _evaluate(robot, q, world, self_collision, cutoff)
    J = np.empty((len(res), robot.dof))
    if len(res):
        CK.distance_rows(robot.node_table, robot.node_params, Tall, na, nb, res, J)
    info = Distances(labels, _ro(res[:, 0]), _ro(res[:, 1:4]), _ro(res[:, 4:7]), _ro(res[:, 7:10]), _ro(na), _ro(nb))
    return res[:, 0].copy(), J, info


def collision_tables(robot, world=None, self_collision: bool = True) -> tuple:
    """The tuple that :func:`invkin.collision.kernels.collision_rows` reads (the robot's capsules and
    pairs, the world's tables, scratch arrays): build it once per solve, pass it to the kernel every
    iteration. Not thread-safe (it holds scratch): one per thread."""
    if world is not None:
        world = _check(robot, robot.neutral(), world, 0.0)[1]  # a list becomes a World; others refused
    cm = collision_model(robot)
    pairs = collision_pairs(robot) if self_collision and len(cm.links) > 1 else np.zeros((0, 2), dtype=np.int64)
    t = (world if world is not None else World(())).tables
    n_obj = len(world) if world is not None else 0
    return (cm.links, cm.link_caps, cm.caps, cm.bounds, np.ascontiguousarray(pairs), t["caps"], t["cap_obj"],
            t["boxes"], t["box_obj"], t["halfspaces"], t["hs_obj"], np.empty_like(cm.caps), np.empty_like(cm.bounds),
            np.empty((len(pairs), 10)), np.empty((len(cm.links), n_obj, 10)), t["chunk_range"], t["chunk_bound"])


def max_rows(tables) -> int:
    """The most rows :func:`~invkin.collision.kernels.collision_rows` can write for ``tables``."""
    return tables[13].shape[0] + tables[14].shape[0] * tables[14].shape[1]
