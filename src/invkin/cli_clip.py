"""``invkin clip``: BVH clip commands.

* ``invkin clip info FILE.bvh [--json]``: frames, frame time, fps, duration, joints, channels.
* ``invkin clip fix-feet IN.bvh OUT.bvh [--feet LeftFoot RightFoot] [--up y|z] [--max-step DEG]
  [--pin start|mean] [--floor H] [--height-threshold H] [--speed-threshold V] [--no-toe]
  [--no-progress] [--json]``: whole-foot planting
  (:func:`invkin.correct_clip` with one :class:`invkin.FootPlant` per foot), a progress bar on
  stderr, then one summary line (foot sliding before → after). IN is only read; OUT (a .bvh path)
  is written atomically (a temporary file, then a rename), replaces a file of that name, and may
  not be IN.

Exit codes: 0 done; 1 (fix-feet) the clip was written but some frames missed a goal (a pin out of
the leg's reach or not converged); 2 bad input (unreadable or malformed BVH, unknown foot, OUT
equal to IN, bad option); 3 (fix-feet) no foot contact was found: nothing to correct, OUT is not
written, and stderr says which thresholds to change.
"""
from __future__ import annotations

import json
import math
import os
import sys
import warnings

EXIT_OK, EXIT_NOT_CONVERGED, EXIT_BAD_INPUT, EXIT_NO_CONTACT = 0, 1, 2, 3


def _usage_error(msg):
    from .cli import UsageError

    return UsageError(msg)


def _read_clip(path):
    """read_bvh(path), refusing a glTF or npz file by its name (it read as a BVH without a MOTION section)."""
    from .model.bvh import read_bvh

    suffix = os.path.splitext(str(path))[1].lower()
    if suffix in (".glb", ".gltf", ".npz"):
        raise _usage_error(f"{path!r}: invkin clip reads BVH files, not {suffix} (a glTF clip: invkin view "
                           f"shows it, invkin.read_gltf reads it)")
    return read_bvh(path)


def cmd_info(args) -> int:
    robot, clip = _read_clip(args.file)
    joints = []
    for nm, p, ch, end in zip(clip.names, clip.parents, clip.channels, clip.end_site):
        if not end:
            joints.append({"name": nm, "parent": clip.names[p] if p >= 0 else None, "channels": list(ch)})
    info = {"file": os.fspath(args.file), "frames": clip.n_frames, "frame_time": clip.frame_time,
            "fps": clip.fps if math.isfinite(clip.fps) else None, "duration": clip.duration,
            "joints": len(joints), "end_sites": int(sum(clip.end_site)), "channels": clip.dof,
            "joint_list": joints}
    if args.json:
        print(json.dumps(info, indent=2))
        return EXIT_OK
    fps = f"{clip.fps:.4g}" if math.isfinite(clip.fps) else "inf"
    print(f"{args.file}: {clip.n_frames} frames, frame time {clip.frame_time:g} s ({fps} fps), "
          f"duration {clip.duration:.3f} s")
    print(f"{len(joints)} joints, {info['end_sites']} end sites, {clip.dof} channels")
    w = max((len(j["name"]) for j in joints), default=5)
    print(f"\n{'joint':<{w}}  {'parent':<{w}}  channels")
    for j in joints:
        print(f"{j['name']:<{w}}  {j['parent'] or '-':<{w}}  {' '.join(j['channels'])}")
    return EXIT_OK


def _default_feet(clip) -> list:
    if "LeftFoot" in clip.names and "RightFoot" in clip.names:
        return ["LeftFoot", "RightFoot"]
    for word in ("foot", "ankle"):  # LeftFoot, lFoot, l_foot; LeftAnkle, mixamorig:LeftAnkle
        feet = [n for n in clip.joint_names if word in n.lower()]
        if feet:
            return feet
    raise _usage_error(f"no joint named like a foot or an ankle in the clip; pass --feet (joints: "
                       f"{', '.join(clip.joint_names[:12])}{', ...' if len(clip.joint_names) > 12 else ''})")


def cmd_fix_feet(args) -> int:
    from .animation import FootPlant, NoContactWarning, correct_clip
    from .model.bvh import write_bvh

    src, dst = os.fspath(args.input), os.fspath(args.output)
    if os.path.abspath(src) == os.path.abspath(dst) or (
            os.path.exists(dst) and os.path.exists(src) and os.path.samefile(src, dst)):
        raise _usage_error(f"OUT {dst!r} is the input file; the input is never modified: choose another path")
    if not dst.lower().endswith(".bvh"):
        raise _usage_error(f"OUT {dst!r}: expected a .bvh path (the corrected clip is written as BVH)")
    if args.max_step is not None and not (math.isfinite(args.max_step) and args.max_step > 0):
        raise _usage_error(f"--max-step: expected degrees per frame > 0, got {args.max_step}")
    for opt in ("height_threshold", "speed_threshold"):
        v = getattr(args, opt)
        if v is not None and not (math.isfinite(v) and v > 0):
            raise _usage_error(f"--{opt.replace('_', '-')}: expected a number > 0, got {v}")
    robot, clip = _read_clip(src)
    feet = args.feet or _default_feet(clip)
    goals = [FootPlant(f, pin=args.pin, height_threshold=args.height_threshold,
                       speed_threshold=args.speed_threshold, toe=False if args.no_toe else None) for f in feet]
    max_step = math.radians(args.max_step) if args.max_step is not None else None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NoContactWarning)  # said below, once, with the CLI's options
        new_clip, rep = correct_clip(robot, clip, goals, up=args.up, floor=args.floor, max_step=max_step,
                                     progress=not args.no_progress)
    if not any(rep.contacts.values()):
        print(f"fix-feet: no foot contact found for {', '.join(feet)} (up {rep.up}); nothing was corrected and "
              f"{dst} was not written. Hint: raise --height-threshold / --speed-threshold [file units, units/s], "
              f"check --up, or name the feet with --feet", file=sys.stderr)
        if args.json:
            print(json.dumps({"input": src, "output": None, "frames": rep.n_frames, "up": rep.up, "feet": feet,
                              "contacts": {}, "error": "no contact found"}))
        return EXIT_NO_CONTACT
    for f in feet:
        if not rep.contacts.get(f) and not any(rep.contacts.get(p) for p in rep.contacts if p != f and
                                                p.startswith(f)):
            print(f"fix-feet: warning: no contact found for {f!r}; it is left as it is", file=sys.stderr)
    write_bvh(dst, robot, new_clip)
    missed = rep.count("missed")
    if args.json:
        print(json.dumps({"input": src, "output": dst, "frames": rep.n_frames, "up": rep.up,
                          "feet": feet, "sliding_before": rep.sliding_before, "sliding_after": rep.sliding_after,
                          "pin_error": rep.pin_error, "floor": rep.floor,
                          "contacts": {f: [[c.start, c.stop] for c in cs] for f, cs in rep.contacts.items()},
                          "ok": rep.count("ok"), "clipped": rep.count("clipped"), "missed": missed,
                          "free": rep.count("free"), "max_step_deg": math.degrees(rep.max_step),
                          "max_joint_jump_deg": math.degrees(rep.max_joint_jump),
                          "discontinuities": [[f, math.degrees(s)] for f, s in rep.discontinuities]}))
    else:
        parts = list(rep.sliding_before)
        before = sum(rep.sliding_before.values()) / len(parts)
        after = sum(rep.sliding_after.values()) / len(parts)
        per = ", ".join(f"{f} {rep.sliding_before[f]:.4g} -> {rep.sliding_after[f]:.4g}" for f in parts)
        n_contacts = sum(len(c) for c in rep.contacts.values())
        print(f"fix-feet: sliding {before:.4g} -> {after:.4g} units/s ({per}; {n_contacts} contacts, up "
              f"{rep.up}); frames: {rep.count('ok')} ok, {rep.count('clipped')} clipped, {missed} missed, "
              f"{rep.count('free')} free (no contact) of {rep.n_frames}; wrote {dst}")
    return EXIT_NOT_CONVERGED if missed else EXIT_OK


def register(sub) -> None:
    p = sub.add_parser("clip", help="BVH clips: info, fix-feet (foot planting)",
                       description="Commands on BVH motion clips.")
    csub = p.add_subparsers(dest="clip_command", metavar="CLIP_COMMAND")
    p.set_defaults(func=lambda a: (p.print_help(), EXIT_BAD_INPUT)[1])

    q = csub.add_parser("info", help="frames, fps, joints and channels of a BVH file",
                        description="Print a BVH file's frame count, frame time, fps, duration, joints and "
                                    "channels.")
    q.add_argument("file", help="a .bvh file")
    q.add_argument("--json", action="store_true", help="machine-readable output")
    q.set_defaults(func=cmd_info)

    q = csub.add_parser("fix-feet", help="plant the feet (remove foot sliding) with IK",
                        description="Detect foot contacts, pin each foot while it is in contact (moving the "
                                    "leg only: hip and knee, and the ankle where the toe is planted too; the "
                                    "root and the rest of the pose are unchanged), "
                                    "and write the corrected clip to OUT.bvh (a file of that name is replaced). The input file is "
                                    "never modified. Exit "
                                    "code 1 if some frames missed a pin (out of reach, or held back by "
                                    "--max-step until the contact ended).")
    q.add_argument("input", metavar="IN.bvh", help="the clip to correct (read only)")
    q.add_argument("output", metavar="OUT.bvh", help="where the corrected clip is written (replaced if it exists)")
    q.add_argument("--feet", nargs="+", metavar="FOOT",
                   help="foot joints (default: LeftFoot RightFoot, or the joints named like a foot)")
    q.add_argument("--up", choices=("y", "z"), help="up axis (default: detected)")
    q.add_argument("--max-step", type=float, metavar="DEG",
                   help="largest change of the correction per frame [deg] (default 600 deg/s x frame time, "
                        "at most 20)")
    q.add_argument("--pin", choices=("start", "mean"), default="start",
                   help="pin each contact at its start position (default) or its mean position")
    q.add_argument("--floor", type=float, metavar="H",
                   help="height of the foot joints when standing [file units] (default: estimated per foot)")
    q.add_argument("--height-threshold", type=float, metavar="H",
                   help="contact when the foot is less than H above its floor [file units] (default 0.08 x "
                        "the limb length)")
    q.add_argument("--speed-threshold", type=float, metavar="V",
                   help="... and slower than V [file units/s] (default the larger of 0.2 x the limb length/s "
                        "and 0.15 x the root's median speed)")
    q.add_argument("--no-toe", action="store_true",
                   help="plant the ankles only (default: whole feet, heel and toe, when a toe is found)")
    q.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
    q.add_argument("--json", action="store_true", help="print the report as JSON instead of the summary line")
    q.set_defaults(func=cmd_fix_feet)
