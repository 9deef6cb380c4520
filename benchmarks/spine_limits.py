"""Methods on a real spine with joint limits: success rate, iterations and limit violations.

    PYTHONPATH=src python benchmarks/spine_limits.py [--targets 200]

The CMU walk skeleton's spine (LowerBack … Head, six joints of three Euler channels, 18 DOF,
hips fixed) reaching for points its Head_End reaches inside the limits (FK of uniform samples
inside them), from the zero pose, ``ik.solve(..., timeout=0.05)`` with restarts. Two limit sets:
"box" — every channel in [-30°, 30°]; "cone" — the same boxes plus a swing cone of 30° and a
twist range of ±15° per joint (``robot.with_limits``). Reported per method: success rate, median
iterations, median time [ms] and the largest limit violation of any returned pose [rad] (box:
distance outside [lower, upper]; cone: :func:`invkin.model.limits.limit_violation`).
"""
from __future__ import annotations

import argparse
import time

import numpy as np

import invkin as ik
from invkin.model.limits import limit_violation
import os

os.environ.setdefault("INVKIN_COMPILE", "wait")  # time machine code, not first calls on the interpreter (invkin._tiers)

CLIP = "src/invkin/data/mocap/cmu_02_01_walk.bvh"
JOINTS = ["LowerBack", "Spine", "Spine1", "Neck", "Neck1", "Head"]


def spine(kind: str):
    robot, _ = ik.read_bvh(CLIP)
    s = robot.subchain("LowerBack", "Head_End")
    spec = {n: [-30, 30] for n in s.joint_names}
    if kind == "cone":
        spec.update({j: {"swing": 30, "twist": [-15, 15]} for j in JOINTS})
    return s.with_limits(spec)


def run(kind: str, method: str, n: int, seed: int = 0):
    robot = spine(kind)
    rng = np.random.default_rng(seed)
    qs = robot.lower + (robot.upper - robot.lower) * rng.random((n, robot.dof))
    if kind == "cone":
        from invkin.model.limits import project_limits
        qs = project_limits(robot, qs)
    targets = robot.fk(qs, "Head_End")[:, :3, 3]
    ok, its, times, worst = 0, [], [], 0.0
    for t in targets:
        t0 = time.perf_counter()
        res = ik.solve(robot, [ik.Position("Head_End", t)], q0=np.zeros(robot.dof), method=method,
                       position_tolerance=1e-5, timeout=0.05)
        times.append(time.perf_counter() - t0)
        ok += res.success
        its.append(res.iterations)
        box = float(np.max(np.maximum(robot.lower - res.q, res.q - robot.upper)))
        worst = max(worst, box, limit_violation(robot, res.q))
    return ok / n, float(np.median(its)), 1e3 * float(np.median(times)), worst


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--targets", type=int, default=200)
    ap.add_argument("--methods", default="fabrik,ccd,lm,dls")
    a = ap.parse_args(argv)
    methods = a.methods.split(",")
    for kind in ("box", "cone"):
        for m in methods:
            run(kind, m, 2)  # compile
    print(f"{'limits':>6} {'method':>7} {'success':>8} {'iters':>6} {'ms':>7} {'max violation':>14}")
    for kind in ("box", "cone"):
        for m in methods:
            sr, it, ms, worst = run(kind, m, a.targets)
            print(f"{kind:>6} {m:>7} {sr:>8.1%} {it:>6.0f} {ms:>7.2f} {worst:>14.1e}")


if __name__ == "__main__":
    main()
