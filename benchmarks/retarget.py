"""Motion retargeting: every bundled mocap clip onto the bundled G1 (and Talos), frames per second on
one core and the quality figures of the report; GMR beside it in the same run when it can run.

    PYTHONPATH=src .venv/bin/python benchmarks/retarget.py [--gmr GMR_DIR] [--peers-python PY]
                                                           [--mesh-every N] [--repeats R]

* invkin: ``ik.retarget`` with its defaults (2 iterations per frame, self-collision and floor kept
  out, velocity bounds), pinned to one core with one Numba thread; frames/s = frames / the
  kernel's wall time (``report.seconds``, best of ``--repeats``); "total" adds the targets, the
  contact detection and the report.
* GMR (github.com/YanjieZe/GMR, MIT; mink + MuJoCo + daqp, its own G1 MJCF and BVH config) through
  ``benchmarks/gmr_adapter.py`` in the peers environment (``--peers-python``, default
  ``~/.cache/invkin-peers-env/bin/python``), one process, G1 only. Its output is measured with the
  same functions as invkin's (contacts detected on the source, the G1 URDF's foot spheres, capsule
  self-collision beyond the rest pose, joint limits of the URDF).
* Mesh self-collision: coal on the collision meshes every ``--mesh-every`` frames (frames with a
  colliding pair, pairs that already collide in the robot's rest pose left out: Talos has some),
  for both.

Figures: max foot slide per contact [mm], max penetration of the soles [mm], frames in
self-collision (capsules / meshes), joint-limit violations (entries), velocity-limit violations,
largest per-frame joint jump [rad], mean distance to the position targets [cm] (invkin only: GMR
tracks its own scaled targets).
"""
from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("INVKIN_COMPILE", "wait")  # time machine code, not first calls on the interpreter (invkin._tiers)

os.environ.setdefault("NUMBA_NUM_THREADS", "1")
os.environ.setdefault("INVKIN_QUIET", "1")

import numpy as np  # noqa: E402

import invkin as ik  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
MOCAP = ROOT / "src" / "invkin" / "data" / "mocap"
# G1 link -> Talos link: the bundled G1 maps reused for Talos (example-robot-data's talos_reduced)
TALOS = {"pelvis": "base_link", "torso_link": "torso_2_link", "left_hip_roll_link": "leg_left_2_link",
         "left_knee_link": "leg_left_4_link", "left_ankle_roll_link": "leg_left_6_link",
         "right_hip_roll_link": "leg_right_2_link", "right_knee_link": "leg_right_4_link",
         "right_ankle_roll_link": "leg_right_6_link", "left_shoulder_roll_link": "arm_left_2_link",
         "left_elbow_link": "arm_left_4_link", "left_wrist_yaw_link": "arm_left_7_link",
         "right_shoulder_roll_link": "arm_right_2_link", "right_elbow_link": "arm_right_4_link",
         "right_wrist_yaw_link": "arm_right_7_link"}


def talos():
    import sysconfig

    p = Path(sysconfig.get_paths()["purelib"]) / "cmeel.prefix/share/example-robot-data/robots/talos_data/robots"
    f = p / "talos_reduced.urdf"
    if not f.exists():
        return None
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return ik.load_robot(str(f), floating_base=True)


def talos_mapping(m):
    from dataclasses import replace

    from invkin.retarget import Mapping

    return Mapping(tuple(replace(b, link=TALOS[b.link]) for b in m.bodies), name=m.name.replace("g1", "talos"),
                   robot="talos")


def mesh_checker(robot):
    """frames -> number of frames with a colliding pair of collision meshes (coal)."""
    try:
        from invkin.collision.reference import CoalReference

        ref = CoalReference(robot, self_collision=False)
    except (ImportError, ik.InvkinError):
        return None

    def colliding(qf):  # the pairs whose enclosing capsules touch, checked on the real shapes
        return ref.colliding(qf, ik.distances(robot, qf, cutoff=0.0).pairs)

    from invkin.retarget.scale import robot_rest

    at_rest = colliding(robot_rest(robot))  # Talos' meshes touch in its own rest pose: not counted

    def count(q, every):
        return sum(bool(colliding(q[f]) - at_rest) for f in range(0, q.shape[0], every))
    return count


def gmr_run(peers, gmr_dir, clip):
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "gmr.npz")
        env = dict(os.environ, PYTHONPATH=str(ROOT / "src"), NUMBA_NUM_THREADS="1", OMP_NUM_THREADS="1",
                   OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1")
        cmd = [peers, str(ROOT / "benchmarks" / "gmr_adapter.py"), gmr_dir, str(clip), out]
        if hasattr(os, "sched_getaffinity"):
            cmd = ["taskset", "-c", str(min(os.sched_getaffinity(0))), *cmd]
        r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=3600)
        if r.returncode != 0:
            return None, r.stderr.strip().splitlines()[-1] if r.stderr.strip() else f"exit {r.returncode}"
        z = np.load(out)
        return {k: z[k] for k in z.files}, None


def gmr_q(robot, z):
    from invkin.spatial import quat_wxyz_to_matrix, so3_log

    qp = z["qpos"]
    names = [str(n) for n in z["joint_names"]][1:]  # the first is the free joint
    q = np.zeros((qp.shape[0], robot.dof))
    q[:, :3] = qp[:, :3]
    q[:, 3:6] = [so3_log(quat_wxyz_to_matrix(x / np.linalg.norm(x))) for x in qp[:, 3:7]]
    for k, n in enumerate(names):
        q[:, robot.joint_names.index(n)] = qp[:, 7 + k]
    return q


def quality(robot, skeleton, clip, mapping, q, fps, seconds):
    """The report of configurations q measured as invkin measures its own (contacts on the source)."""
    from invkin.retarget.core import _goals
    from invkin.retarget.report import measure
    from invkin.retarget.scale import make_targets

    t = make_targets(skeleton, clip, robot, mapping)
    _, row_body, row_rot = _goals(robot, mapping.bodies, t)
    has_pos = np.zeros(len(mapping.bodies), bool)
    has_rot = np.zeros(len(mapping.bodies), bool)
    has_pos[row_body[~row_rot]] = True
    has_rot[row_body[row_rot]] = True
    return measure(robot, q, fps, mapping.bodies, t, has_pos, has_rot, None, seconds)


def row(who, robot_name, clip, rep, total, mesh):
    s = rep.summary()
    err = f"{s['mean_position_error_m'] * 100:.1f}" if who == "invkin" else "-"
    return (f"| {who} | {robot_name} | {clip} | {s['frames']} | {s['fps_solve']:,.0f} | {total:,.0f} | "
            f"{s['max_foot_slide_m'] * 1000:.1f} ({s['contacts']}) | {s['max_penetration_m'] * 1000:.1f} | "
            f"{s['self_collision_frames']} / {mesh} | {s['limit_violations']} | {s['velocity_violations']} | "
            f"{s['max_joint_jump']:.2f} | {err} | {len(rep.missed_frames)} |")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--gmr", metavar="DIR", help="a checkout of github.com/YanjieZe/GMR (run beside invkin)")
    ap.add_argument("--peers-python", default=os.path.expanduser("~/.cache/invkin-peers-env/bin/python"))
    ap.add_argument("--mesh-every", type=int, default=4, help="coal mesh check every N frames (0: off)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--clips", nargs="*", help="clip file names (default: every bundled clip)")
    ap.add_argument("--iterations", type=int, default=None, help="iterations per frame (default: retarget's)")
    args = ap.parse_args()
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
    import numba

    robots = [("g1", ik.load_robot("g1"))]
    t = talos()
    if t is not None:
        robots.append(("talos", t))
    clips = sorted(MOCAP.glob("*.bvh")) if not args.clips else [MOCAP / c for c in args.clips]
    print(f"# retargeting — {platform.machine()}, pinned to 1 of {os.cpu_count()} CPUs, Numba {numba.__version__} "
          f"({numba.config.NUMBA_NUM_THREADS} thread), NumPy {np.__version__}, Python {platform.python_version()}")
    # compile once (not timed)
    sk, clip = ik.read_bvh(MOCAP / "cmu_49_04_run_leap.bvh")
    for _, r in robots:
        ik.retarget(sk, clip, r, mapping=None if r is robots[0][1] else talos_mapping(ik.bundled_mapping(clip, robots[0][1])))
    head = ("| method | robot | clip | frames | frames/s (solve) | frames/s (total) | max slide mm (contacts) | "
            "max penetration mm | self-collision frames capsules / meshes | limit violations | velocity violations "
            "| max jump rad | mean target error cm | frames missing a hard goal |")
    print(head)
    print("|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    g1 = robots[0][1]
    opts = {} if args.iterations is None else {"iterations": args.iterations}
    checkers = {name: (mesh_checker(r) if args.mesh_every > 0 else None) for name, r in robots}
    totals = {}
    for path in clips:
        sk, clip = ik.read_bvh(path)
        m_g1 = ik.bundled_mapping(clip, g1)
        for name, r in robots:
            m = m_g1 if name == "g1" else talos_mapping(m_g1)
            best, best_total = None, np.inf
            for _ in range(args.repeats):
                t0 = time.perf_counter()
                motion = ik.retarget(sk, clip, r, mapping=m, **opts)
                wall = time.perf_counter() - t0
                if best is None or motion.report.seconds < best.report.seconds:
                    best = motion
                best_total = min(best_total, wall)
            rep = best.report
            chk = checkers[name]
            mesh = chk(best.q, args.mesh_every) if chk is not None else "-"
            print(row("invkin", name, path.stem, rep, clip.n_frames / best_total, mesh), flush=True)
            tt = totals.setdefault(("invkin", name), [0, 0.0])
            tt[0] += clip.n_frames
            tt[1] += rep.seconds
        if args.gmr:
            z, err = gmr_run(args.peers_python, args.gmr, path)
            if z is None:
                print(f"| GMR | g1 | {path.stem} | failed: {err} |")
                continue
            q = gmr_q(g1, z)
            rep = quality(g1, sk, clip, m_g1, q, clip.fps, float(z["seconds"]))
            chk = checkers["g1"]
            mesh = chk(q, args.mesh_every) if chk is not None else "-"
            print(row("GMR", "g1", path.stem, rep, clip.n_frames / float(z["seconds"]), mesh), flush=True)
            tt = totals.setdefault(("GMR", "g1"), [0, 0.0])
            tt[0] += clip.n_frames
            tt[1] += float(z["seconds"])
    print()
    for (who, name), (n, s) in totals.items():
        print(f"{who} on {name}: {n} frames in {s:.2f} s = {n / s:,.0f} frames/s (solve, one core)")
    if ("GMR", "g1") in totals:
        a, b = totals[("invkin", "g1")], totals[("GMR", "g1")]
        print(f"invkin / GMR on G1: {(a[0] / a[1]) / (b[0] / b[1]):.1f}x frames/s")


if __name__ == "__main__":
    sys.exit(main())
