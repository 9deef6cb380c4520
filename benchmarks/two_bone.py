#!/usr/bin/env python3
"""Analytic two-bone IK, batched vs a Python loop, and BVH reading time.

    .venv/bin/python benchmarks/two_bone.py [--n 1000000] [--loop 20000] [--repeats 7]

What is timed (``time.perf_counter``; median of ``--repeats`` runs, best in brackets):

* ``ik.two_bone_2d(l1, l2, targets)`` on ``--n`` arms in one call (random lengths in [0.5, 1.5],
  targets in a disc of radius 3.5, so reachable, too-close and unreachable cases mix), Numba kernel
  with the default thread count and with one thread;
* the same arms through a Python loop of ``two_bone_2d_scalar`` (plain ``math``): the loop runs on the
  first ``--loop`` arms and its time is scaled by ``n / loop`` (stated in the table);
* ``ik.two_bone_3d`` on ``--n`` arms (no baseline; for scale);
* ``ik.read_bvh`` on the largest bundled clip, and ``ik.write_bvh`` of it.

Before timing, the batched results are checked against the scalar loop (hand positions by FK,
max abs difference). No peer in ``../shared/peers`` has a two-bone solver or a BVH reader, so there is
nothing to run beside these in the same process.
"""
from __future__ import annotations

import argparse
import math
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numba
import numpy as np

import invkin as ik
from invkin.solvers.analytic import two_bone_2d_scalar

os.environ.setdefault("INVKIN_COMPILE", "wait")  # time machine code, not first calls on the interpreter (invkin._tiers)

MOCAP = Path(ik.__file__).parent / "data" / "mocap"


def timed(fn, repeats: int):
    ts = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts), min(ts)


def hands(l1, l2, th1, th2):
    return np.stack([l1 * np.cos(th1) + l2 * np.cos(th1 + th2), l1 * np.sin(th1) + l2 * np.sin(th1 + th2)], -1)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=1_000_000, help="arms per batched call")
    ap.add_argument("--loop", type=int, default=20_000, help="arms in the timed Python loop (then scaled)")
    ap.add_argument("--repeats", type=int, default=7)
    args = ap.parse_args(argv)
    n, m, r = args.n, min(args.loop, args.n), args.repeats

    rng = np.random.default_rng(0)
    l1 = rng.uniform(0.5, 1.5, n)
    l2 = rng.uniform(0.5, 1.5, n)
    rad = 3.5 * np.sqrt(rng.uniform(0, 1, n))
    phi = rng.uniform(-math.pi, math.pi, n)
    t = np.stack([rad * np.cos(phi), rad * np.sin(phi)], axis=-1)

    # warm up (Numba compiles or loads its cache) and check against the scalar form
    th1, th2 = ik.two_bone_2d(l1, l2, t)
    ik.two_bone_2d(l1[:100], l2[:100], t[:100])
    ref = np.array([two_bone_2d_scalar(l1[i], l2[i], t[i, 0], t[i, 1], True) for i in range(m)])
    diff = np.abs(hands(l1[:m], l2[:m], th1[:m], th2[:m]) - hands(l1[:m], l2[:m], ref[:, 0], ref[:, 1])).max()

    threads = numba.get_num_threads()
    vec_med, vec_best = timed(lambda: ik.two_bone_2d(l1, l2, t), r)
    numba.set_num_threads(1)
    one_med, one_best = timed(lambda: ik.two_bone_2d(l1, l2, t), r)
    numba.set_num_threads(threads)

    def loop():
        f = two_bone_2d_scalar
        for i in range(m):
            f(l1[i], l2[i], t[i, 0], t[i, 1], True)

    l1_list, l2_list, x_list, y_list = l1[:m].tolist(), l2[:m].tolist(), t[:m, 0].tolist(), t[:m, 1].tolist()

    def loop_floats():  # Python floats, not NumPy scalars: the fairest loop
        f = two_bone_2d_scalar
        for a, b, x, y in zip(l1_list, l2_list, x_list, y_list):
            f(a, b, x, y, True)

    loop_med, loop_best = timed(loop_floats, max(3, r // 2))
    loopnp_med, _ = timed(loop, 3)
    scale = n / m
    py_med, py_best = loop_med * scale, loop_best * scale

    S = np.zeros(3)
    T3 = np.concatenate([t, rng.normal(size=(n, 1))], axis=1)
    P3 = rng.normal(size=(n, 3))
    ik.two_bone_3d(S, l1, l2, T3, P3)
    v3_med, v3_best = timed(lambda: ik.two_bone_3d(S, l1, l2, T3, P3), r)

    clip_path = max(MOCAP.glob("*.bvh"), key=lambda p: p.stat().st_size)
    ik.read_bvh(clip_path)
    rb_med, rb_best = timed(lambda: ik.read_bvh(clip_path), r)
    robot, clip = ik.read_bvh(clip_path)
    with tempfile.TemporaryDirectory() as d:
        out = Path(d) / "out.bvh"
        wb_med, wb_best = timed(lambda: ik.write_bvh(out, robot, clip), r)

    def ms(a, b):
        return f"{a * 1e3:10.2f} [{b * 1e3:.2f}]"

    print(f"# two-bone IK and BVH reading — {platform.processor() or platform.machine()}, "
          f"{os.cpu_count()} CPUs, Numba {numba.__version__} ({threads} threads), NumPy {np.__version__}, "
          f"Python {sys.version.split()[0]}, load average {os.getloadavg()[0]:.1f} at the end")
    print(f"check: batched vs scalar hand positions on {m:,} arms, max |diff| = {diff:.1e}")
    print()
    print("| what | arms | time ms, median [best] | per arm ns | vs Python loop |")
    print("|---|---:|---:|---:|---:|")
    print(f"| two_bone_2d, one call, {threads} threads | {n:,} | {ms(vec_med, vec_best)} | "
          f"{vec_med / n * 1e9:.1f} | {py_med / vec_med:.0f}x |")
    print(f"| two_bone_2d, one call, 1 thread | {n:,} | {ms(one_med, one_best)} | "
          f"{one_med / n * 1e9:.1f} | {py_med / one_med:.0f}x |")
    print(f"| Python loop of two_bone_2d_scalar (timed on {m:,} arms, x{scale:g}) | {n:,} | "
          f"{ms(py_med, py_best)} | {py_med / n * 1e9:.0f} | 1x |")
    print(f"| same loop indexing NumPy arrays (timed on {m:,}, x{scale:g}) | {n:,} | "
          f"{ms(loopnp_med * scale, loopnp_med * scale)} | {loopnp_med * scale / n * 1e9:.0f} | "
          f"{py_med / (loopnp_med * scale):.2f}x |")
    print(f"| two_bone_3d (elbow + hand), one call, {threads} threads | {n:,} | {ms(v3_med, v3_best)} | "
          f"{v3_med / n * 1e9:.1f} | - |")
    print()
    size_kb = clip_path.stat().st_size / 1024
    print(f"| BVH ({clip_path.name}, {size_kb:.0f} KiB, {clip.n_frames} frames x {clip.dof} channels) "
          f"| time ms, median [best] |")
    print("|---|---:|")
    print(f"| read_bvh | {ms(rb_med, rb_best)} |")
    print(f"| write_bvh | {ms(wb_med, wb_best)} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
