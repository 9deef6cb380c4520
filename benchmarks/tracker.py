#!/usr/bin/env python3
"""Tracker update rate on panda (updates per second, Python overhead included) beside a Pinocchio
damped-least-squares step loop, in the same run.

    ~/.cache/invkin-peers-env/bin/python benchmarks/tracker.py [--updates 20000] [--repeats 5]
    .venv/bin/python benchmarks/tracker.py --no-peer          # invkin only

Scenario: ``panda_link8`` (the peers' panda tip) follows a stream of pose targets on a horizontal
circle of radius 0.1 m through its start pose, orientation fixed (``--per-turn`` targets per turn:
1,000 gives 0.63 mm per update, 100 gives 6.3 mm; ``--updates`` targets in all), starting from
``q0 = [0, -0.3, 0, -2.2, 0, 2.0, 0.785]``.

* invkin: ``ik.Tracker(robot, ik.Pose("panda_link8", T0), max_joint_step=0.05, method=...,
  iterations=20, position_tolerance=1e-5, rotation_tolerance=1e-5)``; the timed loop is
  ``for T in targets: tr.update(T)`` with the targets as (4, 4) NumPy arrays, so each update pays
  for writing the target, the kernel call and building the TrackStep.
* Pinocchio (``pin_dls_track``): the same warm-started loop in Python on Pinocchio's kinematics,
  the damped-least-squares step of the peers' ``PinDLSRestart`` adapter without its restarts:
  per iteration ``forwardKinematics``, ``updateFramePlacement``, the local error
  ``log6(oMf⁻¹ oMdes)``, ``J = −Jlog6 · computeFrameJacobian`` (LOCAL), ``v = −Jᵀ(JJᵀ + λ² I)⁻¹ err``
  (λ = 0.01, as the tracker's damping), ``q ← clip(q + v)`` into the joint limits and the same
  ±0.05 rad per-update box; it stops at the same tolerances (|translation| ≤ 1e-5 m, |rotation|
  ≤ 1e-5 rad) or after 20 iterations. Its targets are built as ``pin.SE3`` before the clock starts
  (in its favour).

Both runs are checked afterwards: the largest position and rotation error over the stream (by
invkin's FK for both; the model files are the same panda) and the largest joint jump. Every timing
is the median of ``--repeats`` runs of the whole stream (best in brackets); one warm-up stream first
(Numba loads its cache or compiles).
"""
from __future__ import annotations

import os

os.environ.setdefault("INVKIN_COMPILE", "wait")  # time machine code, not first calls on the interpreter (invkin._tiers)

for _v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_v, "1")  # single-threaded BLAS: stable timings on a 2-core box

import argparse
import math
import platform
import statistics
import sys
import time
from pathlib import Path

import numba
import numpy as np

import invkin as ik

REPO = Path(__file__).resolve().parent.parent
PEERS = REPO.parent / "shared" / "peers"
Q0 = np.array([0.0, -0.3, 0.0, -2.2, 0.0, 2.0, 0.785])
FRAME = "panda_link8"
BOUND = 0.05
ITERS = 20
TOL = 1e-5
DAMP = 0.01
GOAL = 5000.0


def circle_targets(T0, n, radius=0.1, per_turn=1000):
    Ts = np.repeat(T0[None], n, axis=0)
    a = 2 * math.pi * np.arange(n) / per_turn
    Ts[:, 0, 3] += radius * (np.cos(a) - 1.0)
    Ts[:, 1, 3] += radius * np.sin(a)
    return Ts


def run_invkin(robot, Ts, method):
    tr = ik.Tracker(robot, ik.Pose(FRAME, Ts[0]), max_joint_step=BOUND, method=method, q0=Q0, iterations=ITERS,
                    position_tolerance=TOL, rotation_tolerance=TOL, damping=DAMP)
    qs = np.empty((len(Ts), robot.dof))
    iters = 0
    update = tr.update
    t0 = time.perf_counter()
    for k, T in enumerate(Ts):
        s = update(T)
        iters += s.iterations
    dt = time.perf_counter() - t0
    # the q's (outside the clock): rerun identically, collecting them
    tr.reset(Q0)
    for k, T in enumerate(Ts):
        qs[k] = update(T).q
    return dt, qs, iters / len(Ts)


def make_pin(urdf):
    import pinocchio as pin

    model = pin.buildModelFromUrdf(urdf)
    data = model.createData()
    fid = model.getFrameId(FRAME)
    lo, hi = model.lowerPositionLimit.copy(), model.upperPositionLimit.copy()
    I6 = np.eye(6) * DAMP * DAMP

    def run(oMdes_list):
        q = Q0.copy()
        qs = np.empty((len(oMdes_list), model.nq))
        iters = 0
        t0 = time.perf_counter()
        for k, oMdes in enumerate(oMdes_list):
            q_lo = np.maximum(lo, q - BOUND)
            q_hi = np.minimum(hi, q + BOUND)
            for _ in range(ITERS):
                pin.forwardKinematics(model, data, q)
                oMf = pin.updateFramePlacement(model, data, fid)
                iMd = oMf.actInv(oMdes)
                err = pin.log(iMd).vector
                if np.linalg.norm(iMd.translation) <= TOL and np.linalg.norm(err[3:]) <= TOL:
                    break
                J = -pin.Jlog6(iMd.inverse()) @ pin.computeFrameJacobian(model, data, q, fid)
                v = -J.T @ np.linalg.solve(J @ J.T + I6, err)
                q = np.clip(q + v, q_lo, q_hi)
                iters += 1
            qs[k] = q
        return time.perf_counter() - t0, qs, iters / len(oMdes_list)

    return run, pin


def check(robot, Ts, qs):
    Tq = robot.fk(qs, FRAME)
    pe = np.linalg.norm(Tq[:, :3, 3] - Ts[:, :3, 3], axis=1).max()
    re_ = max(np.linalg.norm(ik.spatial.so3_log(Ts[k, :3, :3] @ Tq[k, :3, :3].T)) for k in range(0, len(Ts), 7))
    jump = np.abs(np.diff(np.vstack([Q0, qs]), axis=0)).max()
    return pe, re_, jump


def timed(fn, repeats):
    res = [fn() for _ in range(repeats)]
    ts = [r[0] for r in res]
    return statistics.median(ts), min(ts), res[-1]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--updates", type=int, default=20_000, help="targets in the stream")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--per-turn", type=int, nargs="+", default=[1000, 100],
                    help="targets per turn of the circle (one table block each)")
    ap.add_argument("--no-peer", action="store_true", help="skip Pinocchio")
    args = ap.parse_args(argv)
    n = args.updates
    robot = ik.load_robot("panda")
    T0 = robot.fk(Q0, FRAME)
    run_pin = pin = None
    if not args.no_peer:
        try:
            sys.path.insert(0, str(PEERS))
            import robots as peer_robots

            run_pin, pin = make_pin(peer_robots.load_robot("panda").urdf)
        except ImportError as exc:
            print(f"(Pinocchio not available: {exc}; run with the peers' venv)", file=sys.stderr)
    blocks = []
    for per_turn in args.per_turn:
        Ts = circle_targets(T0, n, per_turn=per_turn)
        rows = []
        for method in ("dls", "lm"):
            run_invkin(robot, Ts[:2000], method)  # warm-up
            med, best, (_, qs, it) = timed(lambda: run_invkin(robot, Ts, method), args.repeats)  # noqa: B023 - runs now
            rows.append((f"invkin Tracker, method={method}", med, best, it, *check(robot, Ts, qs)))
        peer = None
        if run_pin is not None:
            oM = [pin.SE3(T[:3, :3].copy(), T[:3, 3].copy()) for T in Ts]
            run_pin(oM[:2000])
            med, best, (_, qs, it) = timed(lambda: run_pin(oM), args.repeats)  # noqa: B023 - runs now
            peer = (f"Pinocchio {pin.__version__} DLS step loop (pin_dls_track)", med, best, it, *check(robot, Ts, qs))
            rows.append(peer)
        blocks.append((per_turn, rows, peer))
    print(f"# Tracker update rate — panda ({FRAME}), {n:,} pose targets on a 0.1 m circle; "
          f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, Numba {numba.__version__}, "
          f"NumPy {np.__version__}, Python {sys.version.split()[0]}, load average {os.getloadavg()[0]:.1f} at the end")
    print(f"settings: max_joint_step {BOUND} rad/update, <= {ITERS} iterations/update, tolerances {TOL:g} m / "
          f"{TOL:g} rad, damping {DAMP}")
    for per_turn, rows, peer in blocks:
        print()
        print(f"{per_turn} targets per turn ({2 * math.pi * 0.1 / per_turn * 1e3:.2f} mm per update):")
        print()
        print("| what | updates/s, median [best] | µs/update | iterations/update | max pos err m | max rot err rad "
              "| max joint jump rad | speed vs Pinocchio |")
        print("|---|---:|---:|---:|---:|---:|---:|---:|")
        for name, med, best, it, pe, re_, jump in rows:
            ratio = "-" if peer is None else f"{peer[1] / med:.1f}x"
            print(f"| {name} | {n / med:,.0f} [{n / best:,.0f}] | {med / n * 1e6:.1f} | {it:.2f} | {pe:.1e} | "
                  f"{re_:.1e} | {jump:.3f} | {ratio} |")
    print()
    worst = min(n / rows[0][1] for _, rows, _ in blocks)
    print(f"goal >= {GOAL:,.0f} updates/s (dls, slowest stream): {'met' if worst >= GOAL else 'NOT met'} ({worst:,.0f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
