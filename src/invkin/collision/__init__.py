"""Collision shapes, obstacles and signed distances (see docs/architecture.md, "Collision").

>>> import invkin as ik
>>> world = ik.World([ik.Sphere((0.5, 0, 0.4), 0.1), ik.HalfSpace((0, 0, 1), 0.0)])
>>> report = ik.distances(robot, q, world)                     # doctest: +SKIP
"""
from __future__ import annotations

from ..lazy import lazy_exports

__getattr__, __dir__ = lazy_exports(__name__, {
    "CollisionError": ".errors", "CollisionWarning": ".errors",
    "Sphere": ".world", "Capsule": ".world", "Box": ".world", "HalfSpace": ".world", "Points": ".world",
    "World": ".world", "Obstacle": ".world",
    "CollisionModel": ".model", "collision_model": ".model", "fit_capsules": ".model",
    "collision_pairs": ".pairs", "pair_names": ".pairs",
    "Distances": ".distance", "distances": ".distance", "distance_jacobian": ".distance",
})

__all__ = ["CollisionError", "CollisionWarning", "Sphere", "Capsule", "Box", "HalfSpace", "Points", "World",
           "Obstacle", "CollisionModel", "collision_model", "fit_capsules", "collision_pairs", "pair_names",
           "Distances", "distances", "distance_jacobian"]
