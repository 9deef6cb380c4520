"""False "unreachable" verdicts of the general core.

60 reachable G1 problems (pelvis a hard Pose, both hands Pose goals taken from random waist and arm
configurations, the rest of the robot neutral: the targets of collision_ik.py's G1 scene without
obstacles), each solved from the neutral start with tolerance 1e-5 and a 50 ms timeout. Every target
is reachable by construction, so every result that is not converged is a false verdict (or a time
limit). One solve before the loop loads the kernels, so the first target's clock does not include it.

    PYTHONPATH=src .venv/bin/python benchmarks/unreachable_verdicts.py [--verbose]
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from collections import Counter

import numpy as np

os.environ.setdefault("INVKIN_COMPILE", "wait")  # time machine code, not first calls on the interpreter (invkin._tiers)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import collision_ik  # noqa: E402 - the G1 robot and goals of the collision benchmark

import invkin as ik  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=60)
    ap.add_argument("--verbose", action="store_true", help="print each result that is not converged")
    a = ap.parse_args(argv)
    robot = collision_ik.g1()
    rng = np.random.default_rng(1)
    moving = np.array([any(k in n for k in ("waist", "shoulder", "elbow", "wrist")) for n in robot.joint_names])
    qs = [np.where(moving, q, robot.neutral()) for q in robot.sample(a.n, rng=rng)]
    ik.solve(robot, collision_ik.g1_goals(robot, qs[0]), seed=0)  # load (or compile) the kernels
    counts, times = Counter(), []
    for i, q in enumerate(qs):
        t = time.perf_counter()
        res = ik.solve(robot, collision_ik.g1_goals(robot, q), seed=i, position_tolerance=1e-5,
                       rotation_tolerance=1e-5, timeout=0.05)
        times.append(time.perf_counter() - t)
        counts[res.status.name.lower()] += 1
        if a.verbose and not res.success:
            print(f"target {i}: {res.status.name.lower()}, {res.iterations} iterations, {res.restarts} restarts, "
                  f"errors {res.position_error:.3g} m {res.rotation_error:.3g} rad")
    print(f"G1 two hands, pelvis hard, {a.n} reachable targets: "
          + ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))
          + f"; mean {1e3 * np.mean(times):.2f} ms, p95 {1e3 * np.percentile(times, 95):.2f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
