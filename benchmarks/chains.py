"""CCD and FABRIK on 10- and 20-bone ball-joint tails tracking a smooth target: per-frame cost and
twist continuity (the largest change of any bone's twist about its own axis between frames).

    PYTHONPATH=src python benchmarks/chains.py [--frames 300] [--repeats 3]

Each frame is one ``ik.solve(..., q0=previous q, restarts=False)`` toward the next point of a slow
Lissajous curve inside the reach (a tail following a moving target); where the checkout has it, the
same frames also through ``ik.Tracker(..., method=m, max_joint_step=None, iterations=200)`` (the
per-frame API: goal table and kernel arguments kept between frames; same tolerance 1e-6 m).
Reported per chain, method and API: median wall time per frame [ms] (driver included), median
iterations, success rate, and the max twist change per frame [deg] (swing-twist decomposition of
each bone's frame-to-frame rotation about the bone axis, z). Run it on two checkouts (before/after)
to compare; the numbers go to benchmarks/RESULTS.md.
"""
from __future__ import annotations

import argparse
import math
import time

import numpy as np

import invkin as ik
try:
    from invkin.model.limits import twist_changes
except ImportError:  # an older checkout (the "before" column): the same measure, inline
    def twist_changes(robot, qs, frames, axis=(0.0, 0.0, 1.0)):
        from invkin.spatial import matrix_to_quat_wxyz
        Ts = [robot.fk_all(q) for q in qs]
        out = []
        for a, b in zip(Ts, Ts[1:]):
            row = []
            for f in frames:
                q = np.asarray(matrix_to_quat_wxyz(a[f][:3, :3].T @ b[f][:3, :3]))
                row.append(math.remainder(2.0 * math.atan2(float(q[1:] @ np.asarray(axis)), q[0]), 2 * math.pi))
            out.append(row)
        return np.array(out)
import os

os.environ.setdefault("INVKIN_COMPILE", "wait")  # time machine code, not first calls on the interpreter (invkin._tiers)


def path(n_frames: int, reach: float) -> np.ndarray:
    t = np.linspace(0, 2 * np.pi, n_frames)
    r = 0.55 * reach
    return np.stack([r * np.sin(t), r * np.sin(2 * t) * 0.6, 0.5 * reach + 0.3 * r * np.cos(t)], axis=1)


def run(n: int, method: str, n_frames: int, repeats: int, api: str = "solve"):
    robot = ik.load_robot("tentacle", n=n, joint="ball")
    tip = robot.frame_names[-1]
    reach = 0.1 * n
    P = path(n_frames, reach)
    best = None
    for _ in range(repeats):
        q = robot.neutral()
        q[0] = 1e-3  # off the straight singular pose
        qs, times, its, ok = [], [], [], 0
        if api == "Tracker":  # the same frames through the per-frame API: goal table and kernel kept
            tr = ik.Tracker(robot, [ik.Position(tip, P[0])], max_joint_step=None, method=method, q0=q,
                            iterations=200, position_tolerance=1e-6, rotation_tolerance=1e-6)
            for p in P:
                t0 = time.perf_counter()
                step = tr.update(p)
                times.append(time.perf_counter() - t0)
                qs.append(step.q)
                its.append(step.iterations)
                ok += step.status == ik.Status.CONVERGED
        else:
            for p in P:
                t0 = time.perf_counter()
                res = ik.solve(robot, [ik.Position(tip, p)], q0=q, method=method, restarts=False,
                               max_iterations=200, timeout=None)
                times.append(time.perf_counter() - t0)
                q = res.q
                qs.append(q.copy())
                its.append(res.iterations)
                ok += res.success
        med = float(np.median(times[5:]))
        if best is None or med < best[0]:
            best = (med, qs, its, ok)
    med, qs, its, ok = best
    # each bone's twist between frames: its world frame's frame-to-frame rotation about the bone (z)
    segs = [f for f in robot.frame_names if f.startswith("seg")]
    worst = math.degrees(float(np.max(np.abs(twist_changes(robot, qs, segs)))))
    return med * 1e3, float(np.median(its)), ok / len(qs), worst


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--frames", type=int, default=300)
    ap.add_argument("--repeats", type=int, default=3)
    a = ap.parse_args(argv)
    apis = ["solve"]
    import invkin.tracking
    if "ccd" in invkin.tracking.TRACK_METHODS:
        apis.append("Tracker")
    for n in (10, 20):  # warm up (compile) every method once
        for m in ("ccd", "fabrik"):
            for api in apis:
                run(n, m, 8, 1, api)
    print(f"{'chain':>9} {'method':>7} {'api':>8} {'ms/frame':>9} {'iters':>6} {'success':>8} {'max twist/frame':>16}")
    for n in (10, 20):
        for m in ("ccd", "fabrik"):
            for api in apis:
                ms, it, sr, tw = run(n, m, a.frames, a.repeats, api)
                print(f"{n:>3} bones {m:>7} {api:>8} {ms:>9.3f} {it:>6.0f} {sr:>8.0%} {tw:>14.2f} deg")

if __name__ == "__main__":
    main()
