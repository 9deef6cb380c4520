"""An independent check of a configuration: the robot's ORIGINAL collision shapes (URDF meshes and
primitives, not invkin's enclosing capsules) and the obstacles, measured by ``coal`` (the
maintained FCL fork; ``pip install coal``, in invkin's ``dev`` extra). Tests and
benchmarks/collision_ik.py use it to show that results invkin calls collision-free are.

>>> ref = CoalReference(robot, world)   # doctest: +SKIP
>>> ref.min_distance(q)   # [m], over the self pairs checked and every (link, obstacle)  # doctest: +SKIP
"""
from __future__ import annotations

import numpy as np

from .errors import CollisionError
from .pairs import collision_pairs

__all__ = ["CoalReference"]

NEAR = 0.05  # [m] a point cloud is measured exactly within this distance of a link


def _coal():
    try:
        import coal
    except ImportError:
        raise CollisionError('the coal reference needs coal: pip install "invkin[dev]" (or pip install coal)') from None
    return coal


def _tf(coal, T):
    return coal.Transform3s(np.ascontiguousarray(T[:3, :3]), np.ascontiguousarray(T[:3, 3]))


class CoalReference:
    """coal shapes for every ``<collision>`` element of ``robot`` (``robot.collisions``: box, sphere,
    cylinder, capsule, mesh) and every obstacle of ``world``; :meth:`distances` measures them at q."""

    def __init__(self, robot, world=None, self_collision: bool = True):
        coal = _coal()
        self.coal, self.robot = coal, robot
        self.links = {}
        for g in robot.collisions:
            if g.kind == "box":
                s = coal.Box(*g.size)
            elif g.kind == "sphere":
                s = coal.Sphere(g.size[0])
            elif g.kind == "cylinder":
                s = coal.Cylinder(*g.size)
            elif g.kind == "capsule":
                s = coal.Capsule(*g.size)
            elif g.kind == "mesh" and g.path is not None:
                s = coal.MeshLoader().load(g.path, np.asarray(g.size if len(g.size) == 3 else (1.0, 1.0, 1.0)))
            else:
                continue
            self.links.setdefault(g.link, []).append((s, np.asarray(g.T_link_geom)))
        names = robot.collision.link_names
        self.pairs = [(names[a], names[b]) for a, b in collision_pairs(robot)] if self_collision else []
        self.pairs = [p for p in self.pairs if p[0] in self.links and p[1] in self.links]
        self.obstacles = [] if world is None else [self._obstacle(o) for o in world.obstacles]
        q = robot.neutral()
        self.moving = {link for link in self.links if np.any(robot.jacobian(q, link) != 0.0)}

    def _obstacle(self, o):
        from .world import Box, Capsule, HalfSpace, Points, Sphere

        coal = self.coal
        if isinstance(o, Sphere):
            return [(coal.Sphere(o.radius), _tf(coal, np.r_[np.c_[np.eye(3), o.center], [[0, 0, 0, 1]]]))]
        if isinstance(o, Box):
            return [(coal.Box(*o.size_xyz), _tf(coal, o.T_world_box))]
        if isinstance(o, HalfSpace):
            return [(coal.Halfspace(np.asarray(o.normal), float(o.offset)), coal.Transform3s())]
        if isinstance(o, Points):  # measured point by point near the link (see distances)
            return np.asarray(o.xyz), float(o.radius)
        if isinstance(o, Capsule):
            a, b = np.asarray(o.a), np.asarray(o.b)
            L = float(np.linalg.norm(b - a))
            z = (b - a) / L
            x = np.cross(z, [1.0, 0, 0] if abs(z[0]) < 0.9 else [0, 1.0, 0])
            x /= np.linalg.norm(x)
            R = np.c_[x, np.cross(z, x), z]
            return [(coal.Capsule(o.radius, L), _tf(coal, np.r_[np.c_[R, (a + b) / 2], [[0, 0, 0, 1]]]))]
        raise CollisionError(f"CoalReference: no coal shape for {type(o).__name__}")

    def _d(self, s1, t1, s2, t2):
        coal = self.coal
        return coal.distance(s1, t1, s2, t2, coal.DistanceRequest(), coal.DistanceResult())

    def _cloud(self, link, pl, xyz, radius, Ts):
        """A cloud's closest point to the link: coal on the points within NEAR of the link's
        enclosing capsules (a culling only: the capsules enclose the shapes, so a point farther
        from them is farther from the shapes); NEAR + radius when no point is that close."""
        coal = self.coal
        caps = self.robot.collision.shapes(link)
        T = Ts[link]
        a = caps[:, 0:3] @ T[:3, :3].T + T[:3, 3]
        b = caps[:, 3:6] @ T[:3, :3].T + T[:3, 3]
        e = b - a
        t = np.clip(np.einsum("pkj,kj->pk", xyz[:, None, :] - a, e) / np.maximum(np.sum(e * e, axis=1), 1e-300), 0, 1)
        gap = np.min(np.linalg.norm(xyz[:, None, :] - (a + t[..., None] * e), axis=2) - caps[:, 6], axis=1) - radius
        near = np.nonzero(gap < NEAR)[0]
        best = NEAR
        sphere = coal.Sphere(radius)
        for i in near:
            tp = _tf(coal, np.r_[np.c_[np.eye(3), xyz[i]], [[0, 0, 0, 1]]])
            best = min(best, min(self._d(s1, t1, sphere, tp) for s1, t1 in pl))
        return best

    def distances(self, q, skip_static: bool = True) -> dict:
        """{(link, other): signed distance [m]} at q (other: a link or ``"obstacle k"``). Pairs whose
        links no joint moves (a base standing on a table) are left out with ``skip_static``. A point
        cloud's distance is exact below NEAR (0.05 m), else reported as NEAR."""
        Ts = self.robot.fk_all(q)
        moving = self.moving if skip_static else None
        out = {}

        def placed(link):
            return [(s, _tf(self.coal, Ts[link] @ T)) for s, T in self.links[link]]

        for a, b in self.pairs:
            if moving is not None and a not in moving and b not in moving:
                continue
            out[(a, b)] = min(self._d(s1, t1, s2, t2) for s1, t1 in placed(a) for s2, t2 in placed(b))
        for link in self.links:
            if moving is not None and link not in moving:
                continue
            pl = placed(link)
            for k, shapes in enumerate(self.obstacles):
                if isinstance(shapes, tuple):
                    out[(link, f"obstacle {k}")] = self._cloud(link, pl, *shapes, Ts)
                else:
                    out[(link, f"obstacle {k}")] = min(self._d(s1, t1, s2, t2) for s1, t1 in pl for s2, t2 in shapes)
        return out

    def colliding(self, q, pairs=None) -> set:
        """The link pairs of ``pairs`` (default: the self pairs checked) whose original shapes touch
        or overlap at q (``coal.collide``)."""
        coal = self.coal
        Ts = self.robot.fk_all(q)
        out = set()
        for a, b in (self.pairs if pairs is None else pairs):
            if any(coal.collide(s1, _tf(coal, Ts[a] @ T1), s2, _tf(coal, Ts[b] @ T2), coal.CollisionRequest(),
                                coal.CollisionResult())
                   for s1, T1 in self.links.get(a, ()) for s2, T2 in self.links.get(b, ())):
                out.add((a, b))
        return out

    def min_distance(self, q, skip_static: bool = True) -> float:
        """The smallest distance of :meth:`distances` [m] (inf when there is no pair)."""
        d = self.distances(q, skip_static)
        return min(d.values()) if d else float("inf")
