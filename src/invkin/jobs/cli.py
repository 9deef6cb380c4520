"""``invkin batch`` and ``invkin reachability``.

Exit codes: batch: 0 every target converged, 1 the job finished but some targets did not
converge, 2 bad input (targets file, columns, output folder, scheduler), 130 Ctrl-C, 143 SIGTERM
(both rewrite the manifest first; rerunning resumes). reachability: 0 when the map was made, 2 bad
input.
"""
from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
import threading

from ..cli_robot import add_robot_options, robot_from_args

EXIT_OK, EXIT_NOT_CONVERGED, EXIT_BAD_INPUT = 0, 1, 2


class _Terminated(KeyboardInterrupt):
    """SIGTERM, raised in the main thread so that the job's ``finally`` rewrites the manifest."""


@contextlib.contextmanager
def _sigterm_ends_like_ctrl_c():
    """While the block runs, SIGTERM (``timeout``, ``kill``, a batch system) raises
    :class:`_Terminated` instead of ending the process at once, as Ctrl-C does."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum, frame):
        raise _Terminated()

    try:
        old = signal.signal(signal.SIGTERM, handler)
    except (ValueError, OSError):  # pragma: no cover - no signals here
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, old)


def cmd_batch(args) -> int:
    from .dataset import solve_dataset

    robot = robot_from_args(args, keep_name=True)
    try:
        with _sigterm_ends_like_ctrl_c():
            s = solve_dataset(robot, args.targets, args.out, frame=args.frame, chunk_size=args.chunk_size,
                              scheduler=args.scheduler, seed=args.seed, position_tolerance=args.position_tolerance,
                              rotation_tolerance=args.rotation_tolerance, max_restarts=args.max_restarts,
                              overwrite=args.overwrite, progress=not args.no_progress,
                              connect_timeout=args.connect_timeout)
    except _Terminated:
        print(f"invkin: terminated (SIGTERM); the parts written so far are listed in {args.out}'s manifest; "
              f"rerun the same command to resume", file=sys.stderr)
        return 128 + int(signal.SIGTERM)
    if args.json:
        print(json.dumps({"job_id": s.job_id, "out": s.out, "n_targets": s.n_targets, "n_parts": s.n_parts,
                          "parts_computed": s.parts_computed, "parts_skipped": s.parts_skipped,
                          "n_success": s.n_success, "status_counts": s.status_counts, "elapsed": s.elapsed,
                          "poses_per_second": s.poses_per_second, "complete": s.complete}))
    else:
        print(s)
        if s.status_counts:
            print("status: " + ", ".join(f"{k} {v}" for k, v in sorted(s.status_counts.items())))
    return EXIT_OK if s.n_success == s.n_targets else EXIT_NOT_CONVERGED


def cmd_reachability(args) -> int:
    from .errors import JobError
    from .reachability import reachability_map

    bounds = "reach" if args.reach_box else None
    if args.bounds is not None and args.reach_box:
        raise JobError("give either --bounds or --reach-box, not both")
    if args.bounds is not None:
        b = args.bounds
        bounds = ((b[0], b[1]), (b[2], b[3]), (b[4], b[5]))
    out = args.out
    if out is not None and not out.lower().endswith((".npz", ".parquet", ".pq")):
        raise JobError(f"--out {out!r}: expected a .npz (grid arrays) or .parquet (one row per voxel) path")
    if args.through is not None:  # checked before the long run, not after it
        from .._checks import MAX_LENGTH, real_array

        real_array("--through", args.through, JobError, bound=MAX_LENGTH, unit=" [m]")
    plot = args.plot
    if plot is None and out is not None:
        plot = os.path.splitext(out)[0] + ".png"
    seen = {}
    for opt, p in (("--out", out), ("--parquet", args.parquet), ("--plot", plot)):
        if p is None:
            continue
        d = os.path.dirname(os.path.abspath(p))
        if not os.path.isdir(d):
            raise JobError(f"{p}: the folder {d!r} does not exist")
        if os.path.isdir(p):  # checked before the long run, not after it
            raise JobError(f"{opt} {p!r}: is a directory; expected a file path")
        real = os.path.realpath(p)
        if real in seen:  # one file written over the other
            raise JobError(f"{opt} {p!r} and {seen[real][0]} {seen[real][1]!r} name the same file; give "
                           f"each output its own path")
        seen[real] = (opt, p)
    robot = robot_from_args(args, keep_name=True)
    m = reachability_map(robot, args.frame, args.resolution, args.orientations, bounds=bounds,
                         scheduler=args.scheduler, seed=args.seed, max_restarts=args.max_restarts,
                         chunk_size=args.chunk_size, progress=not args.no_progress,
                         connect_timeout=args.connect_timeout)
    written = []
    if out is not None:
        written.append(m.save_parquet(out) if out.lower().endswith((".parquet", ".pq")) else m.save_npz(out))
    if args.parquet is not None:
        written.append(m.save_parquet(args.parquet))
    if plot is not None:
        written.append(m.plot_slices(plot, through=args.through))
    if args.json:
        print(json.dumps({**m.summary(), "files": written}))
    else:
        print(m.format_summary())
        for w in written:
            print(f"  wrote {w}")
    return EXIT_OK


def _common(p, default_chunk):
    p.add_argument("--scheduler", metavar="ADDRESS",
                   help="Dask scheduler (tcp://host:port); default: solve here on all cores")
    p.add_argument("--connect-timeout", type=float, default=5.0, metavar="S",
                   help="seconds to wait for the scheduler (default 5)")
    p.add_argument("--chunk-size", type=int, default=default_chunk, metavar="N",
                   help=f"targets per chunk / part / Dask task (default {default_chunk})")
    p.add_argument("--seed", type=int, default=0, help="job seed: target i is solved with seed + i (default 0)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    add_robot_options(p)


def register(sub) -> None:
    p = sub.add_parser(
        "batch", help="solve a target file (.npz/.parquet) into Parquet parts, locally or on Dask",
        description="Solve every target of a .npz (arrays T (N,4,4) or p (N,3), optional q0) or .parquet "
                    "(columns T00..T33, or x y z [+ qw qx qy qz], optional list column q0) file. Results go "
                    "to DIR as part-NNNNNN.parquet files plus manifest.json; rerunning the same command "
                    "resumes. Exit code 0: every target converged; 1: some did not; 2: bad input.")
    p.add_argument("robot", help="bundled name (panda, ur5, ...) or a .urdf, MJCF .xml or .bvh file")
    p.add_argument("--targets", required=True, metavar="FILE", help=".npz or .parquet targets")
    p.add_argument("--out", required=True, metavar="DIR", help="output folder (created; resumed when rerun)")
    p.add_argument("--frame", help="goal frame (default: the last frame)")
    p.add_argument("--overwrite", action="store_true", help="replace the job that DIR holds, if any")
    p.add_argument("--max-restarts", type=int, default=50, help="random restarts per target (default 50)")
    p.add_argument("--position-tolerance", type=float, default=1e-6, help="[m] (default 1e-6)")
    p.add_argument("--rotation-tolerance", type=float, default=1e-6, help="[rad] (default 1e-6)")
    _common(p, 1000)
    p.set_defaults(func=cmd_batch)

    p = sub.add_parser(
        "reachability", help="voxel reachability map of a frame (fraction of orientations solved, manipulability)",
        description="Voxelise the workspace of FRAME, solve K sampled orientations at every voxel centre and "
                    "report the fraction solved and the mean manipulability. Prints summary numbers; writes "
                    "the grid (--out .npz or .parquet) and XY/XZ/YZ slice plots (--plot PNG; default next to "
                    "--out).")
    p.add_argument("robot", help="bundled name (panda, ur5, ...) or a .urdf, MJCF .xml or .bvh file")
    p.add_argument("--frame", help="frame (default: the last frame)")
    p.add_argument("--resolution", type=float, required=True, metavar="R", help="voxel edge [m]")
    p.add_argument("--orientations", type=int, default=8, metavar="K",
                   help="orientations per voxel (default 8; 0: position-only)")
    p.add_argument("--out", metavar="PATH", help="grid file: .npz (axes and arrays) or .parquet (one row per voxel)")
    p.add_argument("--parquet", metavar="PATH", help="also write one row per voxel to this Parquet file")
    p.add_argument("--plot", metavar="PNG", help="slice plots (default: --out with .png)")
    p.add_argument("--through", type=float, nargs=3, metavar=("X", "Y", "Z"),
                   help="point the slices pass through [m] (default: the base joint)")
    p.add_argument("--bounds", type=float, nargs=6, metavar=("XMIN", "XMAX", "YMIN", "YMAX", "ZMIN", "ZMAX"),
                   help="grid box [m] (default: the box of sampled FK, within the reach sphere)")
    p.add_argument("--reach-box", action="store_true",
                   help="grid box: the reach sphere's box (instead of sampled FK)")
    p.add_argument("--max-restarts", type=int, default=20, help="random restarts per target (default 20)")
    _common(p, 2000)
    p.set_defaults(func=cmd_reachability)
