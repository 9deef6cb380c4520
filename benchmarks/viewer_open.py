"""How long the viewer takes to open a meshed robot: cold (empty mesh cache) and warm (cached).

    .venv/bin/python benchmarks/viewer_open.py [--repeats 3]

For each robot, ``ViewerApp(robot).start()`` (read the meshes, decimate or read the cache, build
the scene; no target, so no solver compiles) is timed with an empty cache folder, then again with
the cache it left. The baseline in the same run is what a viewer without a cache pays at every
start: ``trimesh.load`` of every visual mesh file at full size (no scene, no decimation). Robots:
the bundled Panda, and G1 (29 DOF) and Talos from example-robot-data when it is installed (a
benchmark may read outside the repository; the tests never do). Prints a Markdown table.
"""
from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("INVKIN_COMPILE", "wait")  # time machine code, not first calls on the interpreter (invkin._tiers)


def _robots():
    import invkin as ik
    from invkin.model.urdf import load_urdf

    out = [("panda (bundled, 9 GLB)", ik.load_robot("panda"))]
    site = Path(sys.prefix) / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}" / "site-packages"
    roots = [site / "cmeel.prefix" / "share" / "example-robot-data" / "robots"]  # example-robot-data's wheel
    for root in roots:
        g1 = root / "g1_description" / "urdf" / "g1_29dof_rev_1_0.urdf"
        talos = root / "talos_data" / "robots" / "talos_full_v2.urdf"
        if g1.is_file():
            out.append(("G1 29 DOF (35 STL)", load_urdf(g1)))
            try:
                out.append(("Talos full v2 (STL)", load_urdf(talos)))
            except Exception as exc:  # a joint kind invkin refuses: skip the robot, say why
                print(f"# Talos skipped: {exc}", file=sys.stderr)
            break
    return out


def _time_start(robot) -> float:
    from invkin.viewer import ViewerApp

    app = ViewerApp(robot, port=0, targets=[])
    t = time.perf_counter()
    app.start()
    dt = time.perf_counter() - t
    app.stop()
    return dt


def _time_raw_load(robot) -> float:
    import trimesh

    t = time.perf_counter()
    for g in robot.visuals:
        if g.path:
            trimesh.load(g.path, force="scene")
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    import numba
    import numpy as np
    import viser

    print(f"# viewer open — {platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}, "
          f"NumPy {np.__version__}, Numba {numba.__version__}, viser {viser.__version__}")
    print("\n| robot | shapes | triangles drawn | cold start s (median) | warm start s (median [best]) "
          "| trimesh.load of the files s | warm vs load |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    from invkin.viewer import ViewerApp

    for name, robot in _robots():
        colds, warms, loads = [], [], []
        for _ in range(args.repeats):
            with tempfile.TemporaryDirectory() as d:
                os.environ["INVKIN_MESH_CACHE_DIR"] = d
                colds.append(_time_start(robot))
                for _ in range(2):
                    warms.append(_time_start(robot))
            loads.append(_time_raw_load(robot))
        app = ViewerApp(robot, port=0, targets=[])
        app.start()
        faces = app._shapes.n_faces if app._shapes is not None else 0
        app.stop()
        w = statistics.median(warms)
        print(f"| {name} | {len(robot.visuals)} | {faces:,} | {statistics.median(colds):.2f} | "
              f"{w:.2f} [{min(warms):.2f}] | {statistics.median(loads):.2f} | {statistics.median(loads) / w:.1f}x |")
    print(f"\nload average at the end: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
