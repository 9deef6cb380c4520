"""Signed distances of a Panda (its real collision meshes) to itself and to obstacles: invkin's
enclosing capsules against coal on the original meshes, in the same run.

    PYTHONPATH=src python benchmarks/collision_distance.py [--configs 200]

Scenes: a shelf (three boards and a table top), a clutter of 20 boxes, a 5,000-point cloud. For
each scene and random configuration (seeded, inside the limits) it times

* ``ik.distances`` with every pair (``cutoff=inf``) and with ``cutoff=0.05`` m (the rows a solver
  needs), and ``ik.distance_jacobian`` with ``cutoff=0.05``;
* coal 3 on the original shapes (STL meshes as BVH OBBRSS, the fingers' boxes as boxes): one ``coal.distance`` per checked self pair
  and per (link, obstacle) in a Python loop, the way a Python user calls it (its per-call
  overhead included; coal's own broad phase is not used). The cloud is left to invkin only.

and checks the capsules are conservative: for every pair, invkin's distance ≤ coal's mesh distance
when the meshes are apart, and < 0 when they touch (violations are counted; in penetration the two
measure depth differently), with the mean gap of the separated pairs (the clearance the enclosing
capsules cost).
Results go to benchmarks/RESULTS.md.
"""
from __future__ import annotations

import argparse
import os
import platform
import time
from pathlib import Path

import numpy as np

import invkin as ik

os.environ.setdefault("INVKIN_COMPILE", "wait")  # time machine code, not first calls on the interpreter (invkin._tiers)

ROOT = Path(__file__).resolve().parent.parent
PANDA = ROOT / "tests" / "data" / "erd" / "panda_fingers.urdf"
SRDF = ROOT / "tests" / "data" / "erd" / "panda.srdf"


def _T(p, yaw=0.0):
    T = np.eye(4)
    c, s = np.cos(yaw), np.sin(yaw)
    T[:2, :2] = [[c, -s], [s, c]]
    T[:3, 3] = p
    return T


def scenes(rng):
    shelf = [ik.Box(_T((0.6, 0, z)), (0.3, 0.8, 0.02)) for z in (0.3, 0.6, 0.9)] + \
            [ik.Box(_T((0.6, 0, 0.0)), (0.8, 1.2, 0.04))]
    clutter = [ik.Box(_T(rng.uniform((0.3, -0.6, 0.05), (0.8, 0.6, 0.9)), rng.uniform(0, np.pi)),
                      rng.uniform(0.03, 0.12, 3)) for _ in range(20)]
    cloud = [ik.Points(rng.uniform((0.3, -0.6, 0.0), (0.9, 0.6, 1.0), (5000, 3)), 0.005)]
    return {"shelf (4 boxes)": ik.World(shelf), "clutter (20 boxes)": ik.World(clutter),
            "cloud (5,000 points)": ik.World(cloud)}


def coal_setup(robot):
    import coal
    meshes = {}
    for g in robot.collisions:
        shape = coal.Box(*g.size) if g.kind == "box" else coal.MeshLoader().load(g.path, np.asarray(g.size))
        meshes.setdefault(g.link, []).append((shape, g.T_link_geom))
    return coal, meshes


def coal_distances(coal, meshes, robot, q, pairs, world):
    Ts = robot.fk_all(q)

    def tf(T):
        return coal.Transform3s(T[:3, :3].copy(), T[:3, 3].copy())

    def dist(la, gb, Tb):
        best = np.inf
        for ga, Tg in meshes[la]:
            best = min(best, coal.distance(ga, tf(Ts[la] @ Tg), gb, Tb, coal.DistanceRequest(), coal.DistanceResult()))
        return best
    out = {}
    for a, b in pairs:
        out[(a, b)] = min(dist(a, gb, tf(Ts[b] @ Tg)) for gb, Tg in meshes[b])
    for k, o in enumerate(world.obstacles):
        if isinstance(o, ik.Box):
            gb = coal.Box(*o.size_xyz)
            for link in meshes:
                out[(link, f"obstacle {k} (Box)")] = dist(link, gb, tf(o.T_world_box))
    return out


def timed(f, n):
    t = time.perf_counter()
    for _ in range(n):
        f()
    return (time.perf_counter() - t) / n * 1e6


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--configs", type=int, default=200)
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    robot = ik.load_robot(str(PANDA), srdf=str(SRDF))
    pairs = ik.collision.pair_names(robot)
    coal, meshes = coal_setup(robot)
    qs = robot.sample(args.configs, rng=np.random.default_rng(1))
    ik.distance_jacobian(robot, qs[0], scenes(rng)["shelf (4 boxes)"])  # compile
    print(f"# collision distances — {platform.machine()}, {os.cpu_count()} CPUs, Panda "
          f"({len(robot.collision.link_names)} links, {len(robot.collision.caps)} capsules, "
          f"{len(pairs)} self pairs from the SRDF), {args.configs} configurations")
    print()
    print("| scene | invkin all pairs µs | invkin cutoff 5 cm µs | + Jacobian µs | coal meshes µs | ratio coal/invkin (all) "
          "| violations (capsule d > mesh d) | mean gap mm | pairs compared |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for name, world in scenes(np.random.default_rng(2)).items():
        t_all = np.median([timed(lambda q=q, w=world: ik.distances(robot, q, w), 3) for q in qs])
        t_cut = np.median([timed(lambda q=q, w=world: ik.distances(robot, q, w, cutoff=0.05), 3) for q in qs])
        t_jac = np.median([timed(lambda q=q, w=world: ik.distance_jacobian(robot, q, w, cutoff=0.05), 3) for q in qs])
        has_coal = not any(isinstance(o, ik.Points) for o in world.obstacles)
        t_coal, viol, gaps, n = [], 0, [], 0
        if has_coal:
            for q in qs[: max(20, args.configs // 5)]:
                t = time.perf_counter()
                ref = coal_distances(coal, meshes, robot, q, pairs, world)
                t_coal.append((time.perf_counter() - t) * 1e6)
                d = ik.distances(robot, q, world)
                for p, v in zip(d.pairs, d.distance):
                    if p in ref:
                        n += 1
                        # conservative: never farther apart than the meshes, never apart when they touch
                        bad = v > ref[p] + 1e-9 if ref[p] > 0 else v >= 0
                        viol += bad
                        if bad:
                            print(f"violation at q={np.round(q, 4).tolist()} {p}: capsules {v:.6f}, meshes {ref[p]:.6f}")
                        if ref[p] > 0:
                            gaps.append(ref[p] - v)
        tc = np.median(t_coal) if t_coal else np.nan
        print(f"| {name} | {t_all:.0f} | {t_cut:.0f} | {t_jac:.0f} | "
              + (f"{tc:.0f} | {tc / t_all:.0f}x | {viol} | {np.mean(gaps) * 1000:.1f} | {n} |" if has_coal else
                 "- | - | - | - | - |"))


if __name__ == "__main__":
    main()
