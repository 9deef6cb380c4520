#!/usr/bin/env python3
"""Throughput of large IK jobs: poses per second of invkin's batch paths beside a Python loop
of Robotics Toolbox ``ik_LM`` calls, in one run.

Run it with the peers' venv (``bash ../shared/peers/install.sh``, then
``~/.cache/invkin-peers-env/bin/pip install numba "dask[distributed]" pyarrow tqdm`` and
``~/.cache/invkin-peers-env/bin/pip install --no-deps -e .``), from the repository root:

    ~/.cache/invkin-peers-env/bin/python benchmarks/throughput.py
    ~/.cache/invkin-peers-env/bin/python benchmarks/throughput.py --tile 4 --n-rtb 100   # quicker

Targets: ``../shared/peers/results/targets_panda.npz`` (1000 random reachable poses of the panda's
``panda_link8``, the peers' protocol), repeated ``--tile`` times (10,000 poses by default; target
i is solved with seed i, so the copies run different restarts). Every solver starts from the
file's ``q_seed`` (mid-range). invkin: ``position_tolerance = rotation_tolerance = 1e-6``,
``max_restarts = 50``, model read from the peers' URDF (``robots/panda.urdf``). rtb: the peers'
adapter unchanged (``adapters.RTB_LM``: ``ets.ik_LM(T, q0, tol=1e-12, joint_limits=True)``, 30
iterations x 100 searches), one call per target on the first ``--n-rtb`` targets.

Rows:
  * ``solve_many``, 1 and 2 Numba threads (``numba.set_num_threads``): one call on all poses.
  * ``solve_dataset`` locally (all cores, chunks of ``--chunk``): the same plus Parquet parts and
    the manifest, end to end (targets file read and hashed, parts written; reading them back is
    not timed).
  * ``solve_dataset`` on a ``LocalCluster`` of 1 and 2 worker processes (1 thread each,
    ``NUMBA_NUM_THREADS=1``), driver in this process, over loopback.
  * rtb ``ik_LM`` Python loop (timed per call, summed).

Every row runs once as a warm-up (Numba compiles or loads its cache; Dask workers import invkin),
then ``--repeats`` timed rounds go over all rows in turn, so that a change of load on a shared
machine hits every row alike; the table gives the best (the least disturbed run) and the median.
Success is re-checked with invkin's FK for every row: position error < 1e-5 m, rotation angle
< 1e-5 rad, inside the limits.
All invkin rows must return the same q bit for bit (checked and printed).
"""
from __future__ import annotations

import os

os.environ.setdefault("INVKIN_COMPILE", "wait")  # time machine code, not first calls on the interpreter (invkin._tiers)

for _v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_v, "1")

import argparse
import importlib.metadata as md
import platform
import shutil
import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
PEERS = REPO.parent / "shared" / "peers"
FRAME = "panda_link8"
STRICT = 1e-5


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def verify(robot, T, q) -> np.ndarray:
    """Independent success: FK of q against the goal (1e-5 m, 1e-5 rad) and inside the limits."""
    from invkin.kinematics.kernels import fk_frame_batch

    Ts = fk_frame_batch(robot.node_table, robot.node_params, robot.origin, np.ascontiguousarray(q), robot.frame_index(FRAME))
    pe = np.linalg.norm(Ts[:, :3, 3] - T[:, :3, 3], axis=1)
    Rrel = np.einsum("bji,bjk->bik", T[:, :3, :3], Ts[:, :3, :3])
    ang = np.arccos(np.clip((np.trace(Rrel, axis1=1, axis2=2) - 1) / 2, -1, 1))
    inside = np.all((q >= robot.lower - 1e-9) & (q <= robot.upper + 1e-9), axis=1)
    return (pe < STRICT) & (ang < STRICT) & inside


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tile", type=int, default=10, help="copies of the 1000 targets (default 10)")
    ap.add_argument("--chunk", type=int, default=500, help="chunk size of the dataset rows (default 500)")
    ap.add_argument("--n-rtb", type=int, default=200, help="targets for the rtb ik_LM loop (default 200)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--max-restarts", type=int, default=50)
    args = ap.parse_args(argv)

    import numba

    import invkin as ik
    from invkin.jobs import read_results, solve_dataset

    sys.path.insert(0, str(PEERS))
    data = np.load(PEERS / "results" / "targets_panda.npz")
    T = np.ascontiguousarray(np.tile(data["T_goal"], (args.tile, 1, 1)))
    q_seed = data["q_seed"]
    N = T.shape[0]
    urdf = str(PEERS / "robots" / "panda.urdf")
    robot = ik.load_robot(urdf)
    fk_err = max(float(np.abs(robot.fk(q, FRAME) - Tg).max()) for q, Tg in zip(data["q_goal"][:50], data["T_goal"]))
    log(f"FK check against the peers' targets: max |diff| = {fk_err:.1e}")
    kw = dict(position_tolerance=1e-6, rotation_tolerance=1e-6, max_restarts=args.max_restarts)
    tmp = Path(tempfile.mkdtemp(prefix="invkin-throughput-"))
    targets_file = tmp / "targets.npz"
    np.savez(targets_file, T=T, q0=q_seed)
    n_threads = numba.config.NUMBA_NUM_THREADS
    from contextlib import ExitStack

    from dask.distributed import Client, LocalCluster

    import adapters
    import robots as peer_robots

    setups = []  # (name, Dask workers, n poses, fn -> q)

    def many(th):
        def fn():
            numba.set_num_threads(th)
            try:
                return ik.solve_many(robot, FRAME, T, q0=q_seed, seed=0, **kw).q
            finally:
                numba.set_num_threads(n_threads)
        return fn

    for th in sorted({1, min(2, n_threads)}):
        setups.append((f"solve_many, {th} Numba thread{'s' if th > 1 else ''}", "-", N, many(th)))

    def dataset(out, client=None):
        def fn():  # the job alone; its rows are read back (and checked) after the timed rounds
            solve_dataset(urdf, str(targets_file), out, frame=FRAME, chunk_size=args.chunk, overwrite=True,
                          progress=False, client=client, **kw)
            return out
        return fn

    setups.append((f"solve_dataset local ({n_threads} threads, chunks of {args.chunk})", "-", N,
                   dataset(tmp / "local")))
    stack = ExitStack()
    for nw in (1, 2):
        cl = stack.enter_context(LocalCluster(n_workers=nw, threads_per_worker=1, processes=True,
                                              dashboard_address=None, host="127.0.0.1",
                                              env={"NUMBA_NUM_THREADS": "1"}))
        client = stack.enter_context(Client(cl, set_as_default=False))
        setups.append((f"solve_dataset on LocalCluster (chunks of {args.chunk})", str(nw), N,
                       dataset(tmp / f"dask{nw}", client)))

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rtb = adapters.RTB_LM(peer_robots.load_robot("panda"), "pose", 0.005)
    n_rtb = min(args.n_rtb, N)
    rtb_time = [0.0]

    def rtb_loop():
        qs = np.empty((n_rtb, robot.dof))
        total = 0.0
        for i in range(n_rtb):
            t0 = time.perf_counter()
            q, _ = rtb.solve(T[i], q_seed)
            total += time.perf_counter() - t0
            qs[i] = q
        rtb_time[0] = total  # the sum of the per-call times (the loop's own overhead excluded)
        return qs

    setups.append(("roboticstoolbox ik_LM, Python loop", "-", n_rtb, rtb_loop))

    # warm-up, then the timed rounds interleaved (a load change on this shared box hits every row)
    times = {i: [] for i in range(len(setups))}
    outs = {}
    try:
        for i, (name, _, _, fn) in enumerate(setups):
            log(f"warm-up: {name} {_}")
            fn()
        for r in range(args.repeats):
            for i, (name, w, n, fn) in enumerate(setups):
                t0 = time.perf_counter()
                outs[i] = fn()
                dt = time.perf_counter() - t0
                times[i].append(rtb_time[0] if fn is rtb_loop else dt)
            log(f"round {r + 1}/{args.repeats} done")
    finally:
        stack.close()
    rows = []
    q_ref = outs[0]
    for i, (name, w, n, fn) in enumerate(setups):
        q = read_results(outs[i])["q"] if isinstance(outs[i], Path) else outs[i]
        ok = verify(robot, T[:n], q)
        same = ("yes" if np.array_equal(q, q_ref) else "NO") if n == N else ""
        med, best = statistics.median(times[i]), min(times[i])
        rows.append((name, w, n, med, best, n / best, n / med, ok.mean(), same))

    shutil.rmtree(tmp, ignore_errors=True)
    rtb_rate = rows[-1][5]
    cpu = os.cpu_count()
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"# IK throughput — {platform.machine()}, {cpu} CPUs, Python {platform.python_version()}, NumPy "
          f"{np.__version__}, Numba {numba.__version__}, dask {md.version('distributed')}, pyarrow "
          f"{md.version('pyarrow')}, roboticstoolbox {md.version('roboticstoolbox-python')}; load average "
          f"{load:.1f} at the end")
    print(f"panda / {FRAME}, {N:,} poses ({args.tile} x the 1000 peers targets), q0 = mid-range, "
          f"tolerances 1e-6, max_restarts {args.max_restarts}; {args.repeats} timed rounds over all rows "
          f"(interleaved) after a warm-up\n")
    print("| setup | Dask workers | poses | time s, median [best] | poses/s, best (median) | success (FK, 1e-5) "
          "| same q as row 1 | vs rtb loop (best) |")
    print("|---|---:|---:|---:|---:|---:|:---:|---:|")
    for name, w, n, med, best, rate, rate_med, succ, same in rows:
        print(f"| {name} | {w} | {n:,} | {med:.3f} [{best:.3f}] | {rate:,.0f} ({rate_med:,.0f}) | {succ * 100:.1f}% "
              f"| {same or '-'} | {rate / rtb_rate:.1f}x |")
    return 0 if all(r[8] in ("yes", "") for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
