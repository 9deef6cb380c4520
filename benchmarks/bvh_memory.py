"""Peak memory and time of read_bvh on a large generated BVH file, this tree against another
git revision's reader (default ``main``) in the same run.

Each reader runs in a fresh subprocess; peak RSS is ``ru_maxrss`` of that process, and the table
also gives it less the process's RSS just before the read (interpreter, NumPy, Numba: the
"baseline"), divided by the file size.

    PYTHONPATH=src python benchmarks/bvh_memory.py --mb 200 --ref main --ref-mb 20

The reference reader can need ~20x the file in memory: ``--ref-mb`` sets a smaller file for it
(the ratio to the file size is what compares).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

os.environ.setdefault("INVKIN_COMPILE", "wait")  # time machine code, not first calls on the interpreter (invkin._tiers)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

CHILD = r"""
import json, os, resource, sys, time
import invkin
from invkin.model.bvh import read_bvh
def rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
base = rss()
t0 = time.perf_counter()
robot, clip = read_bvh(sys.argv[1])
dt = time.perf_counter() - t0
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
print(json.dumps({"time": dt, "peak": peak, "base": base, "frames": clip.n_frames, "dof": clip.dof,
                  "where": invkin.__file__}))
"""


def make_file(path: str, mb: float, joints: int = 31, seed: int = 0) -> int:
    """A CMU-like skeleton (6 + 3 per joint channels) with random motion, ~``mb`` MB of text."""
    rng = np.random.default_rng(seed)
    head = ["HIERARCHY", "ROOT J0", "{", "\tOFFSET 0 0 0",
            "\tCHANNELS 6 Xposition Yposition Zposition Zrotation Xrotation Yrotation"]
    for k in range(1, joints):
        head += [f"JOINT J{k}", "{", "\tOFFSET 0 1.5 0", "\tCHANNELS 3 Zrotation Xrotation Yrotation"]
    head += ["End Site", "{", "\tOFFSET 0 1 0", "}"] + ["}"] * joints
    dof = 6 + 3 * (joints - 1)
    line_bytes = dof * 11  # "%.6f" of values in [-180, 180] plus a space
    frames = max(1, int(mb * 1e6 / line_bytes))
    with open(path, "w") as f:
        f.write("\n".join(head + ["MOTION", f"Frames: {frames}", "Frame Time: 0.008333"]) + "\n")
        for a in range(0, frames, 20000):
            n = min(20000, frames - a)
            np.savetxt(f, rng.uniform(-180, 180, size=(n, dof)), fmt="%.6f")
    return os.path.getsize(path)


def measure(src_dir: str, path: str) -> dict:
    env = {**os.environ, "PYTHONPATH": src_dir}
    out = subprocess.run([sys.executable, "-c", CHILD, path], capture_output=True, text=True, env=env, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def ref_tree(rev: str, tmp: str) -> str:
    """src/ of git revision ``rev``, extracted into tmp."""
    arch = subprocess.run(["git", "-C", ROOT, "archive", rev, "src/invkin"], capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", tmp], input=arch, check=True)
    return os.path.join(tmp, "src")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=float, default=200.0, help="size of the file for this tree's reader [MB]")
    ap.add_argument("--ref", default="main", help="git revision of the reference reader ('' to skip)")
    ap.add_argument("--ref-mb", type=float, default=20.0, help="size of the file for the reference [MB]")
    args = ap.parse_args(argv)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        runs = [("this tree", os.path.join(ROOT, "src"), args.mb)]
        if args.ref:
            runs.append((f"{args.ref}", ref_tree(args.ref, tmp), args.ref_mb))
        for label, src, mb in runs:
            path = os.path.join(tmp, f"clip_{mb:g}.bvh")
            if not os.path.exists(path):
                make_file(path, mb)
            size = os.path.getsize(path)
            t0 = time.perf_counter()
            r = measure(src, path)
            rows.append((label, size, r, time.perf_counter() - t0))
            os.unlink(path)
    print(f"{'reader':<12} {'file MB':>8} {'frames':>8} {'read s':>7} {'MB/s':>6} {'peak RSS MB':>12} "
          f"{'peak-base MB':>13} {'(peak-base)/file':>17} {'peak/file':>10}")
    for label, size, r, _ in rows:
        extra = r["peak"] - r["base"]
        print(f"{label:<12} {size / 1e6:>8.1f} {r['frames']:>8} {r['time']:>7.2f} {size / 1e6 / r['time']:>6.1f} "
              f"{r['peak'] / 1e6:>12.0f} {extra / 1e6:>13.0f} {extra / size:>17.2f} {r['peak'] / size:>10.2f}")
    if len(rows) == 2:
        a, b = rows
        ra = (a[2]["peak"] - a[2]["base"]) / a[1]
        rb = (b[2]["peak"] - b[2]["base"]) / b[1]
        print(f"memory per file byte, this tree / {b[0]}: {ra / rb:.3f}x; "
              f"read speed (MB/s) ratio: {(a[1] / a[2]['time']) / (b[1] / b[2]['time']):.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
