"""``invkin retarget``: BVH motion capture onto a robot on a floating base.

* ``invkin retarget CLIP.bvh ROBOT --out MOTION.npz [--mapping MAP.toml] [--csv FILE.csv]``: one clip,
  a progress bar on stderr (frames), then one summary line (or ``--json``: the report's figures).
* ``invkin retarget FOLDER ROBOT --out OUT/ [--scheduler tcp://host:8786] [--overwrite]``: every
  ``*.bvh`` below FOLDER through :func:`invkin.retarget.dataset.retarget_dataset` (resumable: a rerun
  skips the clips done; on a Dask cluster with --scheduler).
* ``invkin retarget CLIP.bvh ROBOT --draft-map MAP.toml [--overwrite]``: no retargeting; a map drafted
  from the clip's joint and the robot's link names (:func:`invkin.retarget.propose_mapping`) written as
  TOML (or JSON: ``MAP.json``) to check, edit and give back with ``--mapping MAP.toml``. An existing
  file is kept (it may hold your edits) unless ``--overwrite``.

ROBOT: a bundled name (``g1``) or a URDF path (its root gets a free joint when it has none).
Exit codes: 0 done; 1 written, but some frames missed a hard goal or an inequality (single clip),
or some clips failed (folder), or the drafted map holds no feet (a warning says what it lacks);
2 bad input.
"""
from __future__ import annotations

import json
import os
import sys

EXIT_OK, EXIT_PARTIAL, EXIT_BAD_INPUT = 0, 1, 2


def _robot(args):
    """(Robot, spec for workers): the robot as named (with --base/--tip/--floating-base/--srdf), given a
    free root joint when it has none; a bundled or URDF name travels to the workers as it is, a
    changed model as itself."""
    from .cli_robot import robot_from_args, robot_options_given

    r = robot_from_args(args)
    if r.floating:
        return r, (args.robot if not robot_options_given(args) else r)
    r = r.with_floating_base()
    return r, r


def _options(args) -> dict:
    from .cli import UsageError

    if args.iterations is not None and args.iterations < 1:
        raise UsageError(f"--iterations: expected an integer >= 1, got {args.iterations}")
    if args.margin is not None and args.no_self_collision:
        raise UsageError(f"--margin {args.margin:g}: the distance kept between the robot's links; with "
                         f"--no-self-collision no pair is kept apart (the floor has no margin)")
    opts = {"self_collision": not args.no_self_collision}
    for k in ("iterations", "margin", "up"):
        v = getattr(args, k)
        if v is not None:
            opts[k] = v
    return opts


def _writable(option: str, path: str) -> None:
    """Refuse an output the clip's motion could not be written to, before the retargeting runs (a
    long clip must not be computed only to fail at the end): a missing folder, a folder that is
    not writable, a destination that is not a regular file."""
    from ._io import _target
    from .errors import FileError

    real = _target(path)[0]  # refuses a folder or a device at the destination
    folder = os.path.dirname(real) or "."
    if not os.path.isdir(folder):
        raise FileError(f"{option} {path}: cannot write in {folder}: No such folder")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise FileError(f"{option} {path}: cannot write in {folder}: Permission denied")


def cmd_retarget(args) -> int:
    from .cli import UsageError

    src = os.fspath(args.input)
    if args.draft_map is not None:
        return _draft_map(args, src)
    if args.out is None:
        raise UsageError("--out: required (MOTION.npz / .csv for a clip, a folder for a folder), or --draft-map "
                         "MAP.toml to draft a map")
    if os.path.isdir(src):
        if args.csv:
            raise UsageError(f"--csv {args.csv}: writes one clip's motion; a folder's motions are the .npz files "
                             f"in --out")
        if os.fspath(args.out).lower().endswith((".npz", ".csv")) and not os.path.isdir(args.out):
            raise UsageError(f"--out {args.out}: {src} is a folder; its motions go to an output folder, not a "
                             f"{os.path.splitext(args.out)[1]} file")
        return _folder(args, src)
    if not src.lower().endswith(".bvh"):
        raise UsageError(f"{src}: expected a .bvh clip or a folder of them")
    for opt, given in (("--scheduler", args.scheduler), ("--overwrite", args.overwrite)):
        if given:
            raise UsageError(f"{opt}: applies to a folder of clips; {src} is one clip (its --out file is "
                             f"written here and replaced if it exists)")
    out = os.fspath(args.out)
    if not out.lower().endswith((".npz", ".csv")):
        raise UsageError(f"--out {out}: expected a .npz (or .csv) file for one clip")
    if args.csv and not os.fspath(args.csv).lower().endswith(".csv"):
        raise UsageError(f"--csv {args.csv}: expected a .csv file")
    _writable("--out", out)
    if args.csv:
        _writable("--csv", os.fspath(args.csv))
    from .model.bvh import read_bvh
    from .retarget import retarget

    robot = _robot(args)[0]
    sk, clip = read_bvh(src)
    bar = None
    if not args.no_progress:
        try:
            from tqdm import tqdm

            bar = tqdm(total=clip.n_frames, unit="frame", desc="invkin retarget", file=sys.stderr, dynamic_ncols=True)
        except ImportError:
            bar = None

    def progress(done, total):
        if bar is not None:
            bar.update(done - bar.n)

    try:
        motion = retarget(sk, clip, robot, mapping=args.mapping, progress=progress, **_options(args))
    finally:
        if bar is not None:
            bar.close()
    from dataclasses import replace

    from .cli_robot import robot_options_given

    spec = ""  # what loads this robot back (invkin view MOTION.npz): a bundled name or the URDF's path
    if not robot_options_given(args):
        spec = os.path.abspath(args.robot) if os.path.exists(args.robot) else args.robot
    motion = replace(motion, robot_spec=spec, clip_path=os.path.abspath(src))
    motion.save(out)
    if args.csv:
        motion.save(args.csv)
    rep = motion.report
    s = rep.summary()
    missed = len(rep.missed_frames)
    if args.json:
        print(json.dumps({"input": src, "output": out, "robot": robot.name, **s}))
    else:
        print(f"retarget: {s['frames']} frames onto {robot.name} at {s['fps_solve']:.0f} frames/s; foot slide "
              f"<= {s['max_foot_slide_m'] * 1000:.1f} mm over {s['contacts']} contacts, penetration <= "
              f"{s['max_penetration_m'] * 1000:.1f} mm, {s['self_collision_frames']} frames in self-collision, "
              f"{s['limit_violations']} limit violations, {missed} frames missed a hard goal; wrote {out}")
    return EXIT_PARTIAL if missed else EXIT_OK


_RETARGET_ONLY = ("out", "mapping", "csv", "up", "iterations", "margin", "no_self_collision", "scheduler")


def _draft_map(args, src) -> int:
    """``--draft-map``: the map propose_mapping drafts for the clip and the robot, written for the user
    to edit; nothing is retargeted, so an option of the retargeting is refused, not ignored."""
    import warnings

    from .cli import UsageError
    from .errors import InvkinWarning

    path = os.fspath(args.draft_map)
    for k in _RETARGET_ONLY:
        v = getattr(args, k)
        if v not in (None, False):
            opt = "--" + k.replace("_", "-")
            raise UsageError(f"{opt}: applies to a retargeting; --draft-map {path} only drafts a map (edit it, then "
                             f"invkin retarget {src} {args.robot} --mapping {path} --out MOTION.npz)")
    if os.path.isdir(src) or not src.lower().endswith(".bvh"):
        raise UsageError(f"--draft-map {path}: drafts a map from one clip's joint names; expected a .bvh clip, "
                         f"got {src}")
    if not path.lower().endswith((".toml", ".json")):
        raise UsageError(f"--draft-map {path}: expected a .toml (or .json) file")
    if os.path.lexists(path) and not args.overwrite:
        raise UsageError(f"--draft-map {path}: the file exists (it may hold your edits); give --overwrite to "
                         f"replace it")
    _writable("--draft-map", path)
    from ._io import atomic_write
    from .model.bvh import read_bvh
    from .retarget import propose_mapping

    robot = _robot(args)[0]
    sk, clip = read_bvh(src)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", InvkinWarning)
        m = propose_mapping(sk, clip, robot)
    footless = any(issubclass(w.category, InvkinWarning) for w in caught)
    for w in caught:  # shown as the command shows every warning (one line on stderr)
        warnings.showwarning(w.message, w.category, w.filename, w.lineno)
    text = m.to_toml()
    if path.lower().endswith(".json"):
        import tomllib

        text = json.dumps(tomllib.loads(text), indent=2) + "\n"
    atomic_write(path, text)
    roles = {}
    for b in m.bodies:
        roles[b.role] = roles.get(b.role, 0) + 1
    if args.json:
        print(json.dumps({"input": src, "robot": robot.name, "draft_map": path, "bodies": len(m.bodies),
                          "roles": roles, "feet": len(m.feet)}))
    else:
        parts = ", ".join(f"{n} {r}" for r, n in roles.items())
        print(f"retarget: drafted a map of {len(m.bodies)} bodies ({parts}) from {src} onto {robot.name}; wrote "
              f"{path}: check the pairs, then invkin retarget {src} {args.robot} --mapping {path} --out MOTION.npz")
    return EXIT_PARTIAL if footless else EXIT_OK


def _folder(args, src) -> int:
    from .retarget.dataset import retarget_dataset

    spec = _robot(args)[1]
    m = retarget_dataset(src, spec, args.out, mapping=args.mapping, scheduler=args.scheduler,
                         overwrite=args.overwrite, progress=not args.no_progress, **_options(args))
    if args.json:
        print(json.dumps({k: m[k] for k in ("job_id", "done", "failed", "gone", "skipped", "computed", "seconds",
                                            "complete")}))
    else:
        print(f"retarget: {m['done']} clips done ({m['computed']} processed now, {m['skipped']} skipped as done), "
              f"{len(m['failed'])} failed{': ' + ', '.join(m['failed']) if m['failed'] else ''}; "
              f"wrote {os.path.abspath(args.out)}"
              + (f" ({len(m['gone'])} clips of an earlier run are no longer in {src}: not counted)" if m["gone"] else ""))
    for k in m["failed"]:
        err = m["clips"][k]["error"]  # (an error that names the clip already is not prefixed twice)
        print(f"retarget: {err}" if err.startswith(f"{k}:") else f"retarget: {k}: {err}", file=sys.stderr)
    return EXIT_PARTIAL if m["failed"] else EXIT_OK


def register(sub) -> None:
    p = sub.add_parser("retarget", help="motion capture (BVH) onto a humanoid robot",
                       description="Retarget a BVH clip (or every clip in a folder) onto a robot on a floating "
                                   "base: feet held where the source stands, joint limits and velocity bounds "
                                   "hard, self-collision and the floor kept out. Writes .npz (root position, "
                                   "root_quat_wxyz, joint positions, joint names, fps) or .csv.")
    p.add_argument("input", metavar="CLIP.bvh|FOLDER", help="a BVH clip, or a folder of them (a dataset, resumable)")
    p.add_argument("robot", metavar="ROBOT", help="bundled name (g1) or URDF path")
    from .cli_robot import add_robot_options

    add_robot_options(p)
    p.add_argument("--out", metavar="OUT", help="MOTION.npz / .csv for a clip, a folder for a folder (required "
                                                "unless --draft-map)")
    p.add_argument("--mapping", metavar="MAP", help="a .toml/.json map (default: the bundled map that fits)")
    p.add_argument("--draft-map", metavar="MAP.toml", help="only draft a map from the clip's joint and the robot's "
                   "link names and write it (.toml or .json) to edit and give back with --mapping; exit 1 if it "
                   "holds no feet")
    p.add_argument("--csv", metavar="FILE.csv", help="also write the motion as CSV (one clip)")
    p.add_argument("--up", choices=("y", "z"), help="the clip's up axis (default: the map's, else detected)")
    p.add_argument("--iterations", type=int, metavar="N", help="iterations per frame (default 2)")
    p.add_argument("--margin", type=float, metavar="M", help="self-collision margin [m] (default 0.005)")
    p.add_argument("--no-self-collision", action="store_true", help="do not keep the links apart")
    p.add_argument("--scheduler", metavar="ADDR", help="a Dask scheduler (tcp://host:8786) for a folder")
    p.add_argument("--overwrite", action="store_true", help="replace another job's output folder, or an existing "
                                                                "--draft-map file")
    p.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
    p.add_argument("--json", action="store_true", help="print the figures as JSON")
    p.set_defaults(func=cmd_retarget)
