"""The ``invkin`` command.

Exit codes: 0 success (solved), 1 ran but did not converge, 2 bad input, 130 interrupted (Ctrl-C),
141 the reader closed the pipe (quietly); some commands add their own (``invkin clip fix-feet`` 3,
``invkin batch`` 143 on SIGTERM). Errors print one line
(``invkin: error: ...``) without a traceback unless ``--debug`` is given; so does any other
exception (named by its type, exit code 2), so that no input ever ends in a traceback.

Subcommands live in modules that expose ``register(subparsers)``; each parser sets
``func(args) -> int``. Add a module to ``_COMMAND_MODULES`` to add commands.
"""
from __future__ import annotations

import argparse
import importlib
import io
import json
import math
import os
import sys
import warnings
from typing import TYPE_CHECKING

from .errors import InvkinError

if TYPE_CHECKING:
    import numpy as np

_COMMAND_MODULES = (
    "invkin.cli",            # info, fk, solve, methods, demo
    "invkin.cli_clip",       # clip ...   (animation)
    "invkin.cli_retarget",   # retarget   (motion capture onto robots)
    "invkin.bench.cli",      # bench ...  (method comparisons)
    "invkin.jobs.cli",       # batch, reachability
    "invkin.viewer.cli",     # view
    "invkin.cache",          # warmup
)

EXIT_OK = 0
EXIT_NOT_CONVERGED = 1
EXIT_BAD_INPUT = 2
EXIT_BROKEN_PIPE = 141  # 128 + SIGPIPE, as a C program killed by it: the reader closed the pipe


class UsageError(InvkinError):
    """Bad command-line input (exit code 2)."""


def _fmt(a, digits=6) -> str:
    import numpy as np  # here, not at the top: `invkin --help` stays light (docs/architecture.md)

    return np.array2string(np.asarray(a), precision=digits, suppress_small=True, max_line_width=120)


def _load(args):
    from .cli_robot import robot_from_args

    return robot_from_args(args)


def _q_arg(robot, values, flag="--q", state=None) -> np.ndarray:
    import numpy as np

    if state is not None:
        if values is not None:
            raise UsageError(f"give {flag} or --state, not both")
        if not robot.named_configurations:
            raise UsageError(f"--state {state!r}: robot {robot.name!r} has no named configurations; "
                             f"give the SRDF that defines them with --srdf FILE")
        return robot.named_configuration(state)  # an unknown name: FrameError listing the names
    if values is None:
        return robot.neutral()
    if len(values) != robot.dof:
        raise UsageError(f"{flag}: expected {robot.dof} values for {robot.name!r} "
                         f"({', '.join(robot.joint_names)}), got {len(values)}")
    return robot.check_q(np.array(values, dtype=float), flag)


# ------------------------------------------------------------------ commands


def cmd_info(args) -> int:
    robot = _load(args)
    mass = float(robot.link_mass.sum())
    com = robot.center_of_mass(robot.neutral()) if mass > 0 else None
    if args.json:
        print(json.dumps({
            "name": robot.name, "dof": robot.dof, "joint_names": list(robot.joint_names),
            "joint_types": list(robot.joint_types_per_dof),
            "lower": [None if math.isinf(v) else v for v in robot.lower],
            "upper": [None if math.isinf(v) else v for v in robot.upper],
            "frames": list(robot.frame_names),
            "named_configurations": {nm: robot.named_configuration(nm).tolist() for nm in robot.named_configurations},
            "disabled_collision_pairs": [list(pr) for pr in robot.disabled_collision_pairs],
            "mass": mass, "center_of_mass_at_neutral": None if com is None else com.tolist(),
        }, indent=2))
        return EXIT_OK
    print(f"{robot!r}")
    print(robot.tree())
    print(f"\n{'joint':<28} {'type':<11} {'lower':>10} {'upper':>10}")
    for nm, t, lo, hi in zip(robot.joint_names, robot.joint_types_per_dof, robot.lower, robot.upper):
        print(f"{nm:<28} {t:<11} {lo:>10.4g} {hi:>10.4g}")
    print(f"\nframes ({len(robot.frame_names)}): {', '.join(robot.frame_names)}")
    if com is None:
        print("mass: none (no <inertial> masses: CenterOfMass goals and center_of_mass need them)")
    else:
        print(f"mass: {mass:.4g} kg over {sum(m > 0 for m in robot.link_mass.tolist())} links; centre of mass at the "
              f"neutral q: ({com[0]:.4f}, {com[1]:.4f}, {com[2]:.4f}) m")
    if robot.named_configurations:
        print(f"named configurations (SRDF): {', '.join(robot.named_configurations)}")
    if robot.disabled_collision_pairs:
        print(f"disabled collision pairs (SRDF): {len(robot.disabled_collision_pairs)}")
    return EXIT_OK


def cmd_fk(args) -> int:
    robot = _load(args)
    q = _q_arg(robot, args.q, state=args.state)
    frame = args.frame or robot.node_names[-1]
    T = robot.fk(q, frame)
    if args.json:
        print(json.dumps({"frame": frame, "q": q.tolist(), "T": T.tolist()}))
    else:
        from .spatial import matrix_to_quat, matrix_to_rpy

        print(f"frame {frame!r} at q = {_fmt(q, 4)}")
        print(_fmt(T))
        print(f"xyz  = {_fmt(T[:3, 3])} m")
        print(f"rpy  = {_fmt(matrix_to_rpy(T[:3, :3]))} rad")
        print(f"quat_wxyz = {_fmt(matrix_to_quat(T[:3, :3], 'wxyz'))}")
        print(f"quat_xyzw = {_fmt(matrix_to_quat(T[:3, :3], 'xyzw'))}")
    return EXIT_OK


def target_goal(args):
    """The goal of ``invkin solve``'s arguments: a Pose with --rpy / --quat-wxyz / --quat-xyzw
    (at most one; a quaternion as Pose.from_position_quaternion reads it), else a Position."""
    import numpy as np

    from . import goals as G
    from .spatial import make_transform, rpy_to_matrix

    xyz = np.array(args.xyz, dtype=float)
    given = [f for f, v in (("--rpy", args.rpy), ("--quat-wxyz", args.quat_wxyz), ("--quat-xyzw", args.quat_xyzw))
             if v is not None]
    if len(given) > 1:
        raise UsageError(f"give one orientation, not {' and '.join(given)}")
    if args.rpy is not None:
        return G.Pose(args.frame, make_transform(rpy_to_matrix(args.rpy), xyz))
    if args.quat_wxyz is not None or args.quat_xyzw is not None:
        return G.Pose.from_position_quaternion(args.frame, xyz, quat_wxyz=args.quat_wxyz, quat_xyzw=args.quat_xyzw)
    return G.Position(args.frame, xyz)


def cmd_solve(args) -> int:
    from .solve import solve

    robot = _load(args)
    goal = target_goal(args)
    q0 = _q_arg(robot, args.q0, "--q0", args.state) if args.q0 is not None or args.state is not None else None
    res = solve(robot, [goal], q0=q0, method=args.method, position_tolerance=args.position_tolerance,
                rotation_tolerance=args.rotation_tolerance, timeout=args.timeout, seed=args.seed)
    if args.json:
        print(json.dumps({
            "q": res.q.tolist(), "joint_names": list(robot.joint_names), "success": res.success,
            "status": res.status.value, "position_error": res.position_error,
            "rotation_error": res.rotation_error, "iterations": res.iterations, "restarts": res.restarts,
            "time": res.time, "method": res.method, "frame": args.frame,
        }))
    else:
        print(repr(res))
        for nm, v in zip(robot.joint_names, res.q):
            print(f"  {nm:<28} {v: .6f}")
    return EXIT_OK if res.success else EXIT_NOT_CONVERGED


def cmd_demo(args) -> int:
    """The browser viewer with a demo (panda by default); ``--tour``: the terminal tour."""
    if not args.tour:
        from .viewer.cli import check_server_arguments, run_demo

        check_server_arguments(args)
        if args.article_ccd and args.name != "tentacle":
            raise UsageError(f"--article-ccd: the article's CCD drives the tentacle demo only, not {args.name!r}")
        return run_demo(args.name, args.host, args.port, article_ccd=args.article_ccd)
    if args.name != "panda":
        raise UsageError(f"--tour: the terminal tour shows the panda only, not {args.name!r}")
    return _tour()


def _tour() -> int:
    """A short terminal tour: load the panda, print its tree, FK and Jacobian, solve a pose."""
    from . import goals as G
    from .model import load_robot
    from .solve import solve

    robot = load_robot("panda")
    print("invkin demo: the Franka Panda (bundled URDF)\n")
    print(robot.tree())
    q = robot.neutral()
    print(f"\nneutral q (mid-range) = {_fmt(q, 4)}")
    T = robot.fk(q, "panda_hand")
    print("\nFK of panda_hand at the neutral pose (4x4, metres):")
    print(_fmt(T))
    J = robot.jacobian(q, "panda_hand")
    print("\nGeometric Jacobian of panda_hand (rows vx vy vz wx wy wz, world-aligned):")
    print(_fmt(J, 4))
    target = robot.fk(robot.sample(rng=1), "panda_hand")
    res = solve(robot, [G.Pose("panda_hand", target)], q0=q, seed=0)
    print("\nsolve a random reachable pose with Levenberg–Marquardt:")
    print(f"  {res!r}")
    print(f"  methods available: {', '.join(__import__('invkin').methods())}")
    return EXIT_OK


def register(sub) -> None:
    from .cli_robot import add_robot_options

    p = sub.add_parser("info", help="tree, DOF, joint limits and frames of a robot",
                       description="Print a robot's kinematic tree, joints, limits and frames.")
    p.add_argument("robot", help="bundled name (panda, ur5, ...) or a .urdf/.xml (MJCF)/.bvh file")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    add_robot_options(p)
    p.set_defaults(func=cmd_info)

    p = sub.add_parser("fk", help="forward kinematics of a frame",
                       description="Pose of a frame for a joint configuration (default: neutral; --state: "
                                   "an SRDF named configuration).")
    p.add_argument("robot", help="bundled name (panda, ur5, ...) or a .urdf/.xml (MJCF)/.bvh file")
    p.add_argument("--q", type=float, nargs="+", metavar="Q", help="joint values [rad or m], one per DOF")
    p.add_argument("--state", metavar="NAME", help="the SRDF named configuration NAME (with --srdf) instead of --q")
    p.add_argument("--frame", help="frame name (default: the last frame)")
    p.add_argument("--json", action="store_true", help="print frame, q and T (4x4) as JSON")
    add_robot_options(p)
    p.set_defaults(func=cmd_fk)

    p = sub.add_parser("solve", help="inverse kinematics for a position or pose target",
                       description="Solve IK for one frame. Exit code 0 when solved, 1 when not converged.")
    p.add_argument("robot", help="bundled name (panda, ur5, ...) or a .urdf/.xml (MJCF)/.bvh file")
    p.add_argument("--frame", required=True, help="goal frame")
    p.add_argument("--xyz", type=float, nargs=3, required=True, metavar=("X", "Y", "Z"), help="target [m]")
    p.add_argument("--rpy", type=float, nargs=3, metavar=("R", "P", "Y"), help="target roll pitch yaw [rad]")
    p.add_argument("--quat-wxyz", type=float, nargs=4, metavar=("W", "X", "Y", "Z"),
                   help="target orientation, unit quaternion scalar first (MuJoCo, Eigen)")
    p.add_argument("--quat-xyzw", type=float, nargs=4, metavar=("X", "Y", "Z", "W"),
                   help="target orientation, unit quaternion scalar last (ROS, SciPy)")
    p.add_argument("--method", default="lm", help="solver name (see `invkin methods`)")
    p.add_argument("--q0", type=float, nargs="+", metavar="Q",
                   help="start configuration [rad or m], one per DOF (default: neutral; clamped into the limits)")
    p.add_argument("--state", metavar="NAME", help="start from the SRDF named configuration NAME (with --srdf)")
    p.add_argument("--position-tolerance", type=float, default=1e-6, help="[m] (default 1e-6)")
    p.add_argument("--rotation-tolerance", type=float, default=1e-6, help="[rad] (default 1e-6)")
    p.add_argument("--timeout", type=float, default=0.05, help="[s] (default 0.05)")
    p.add_argument("--seed", type=int, default=0, help="seed of the random restarts (default 0)")
    p.add_argument("--json", action="store_true", help="print q, joint_names, success, status, errors as JSON")
    add_robot_options(p)
    p.set_defaults(func=cmd_solve)

    p = sub.add_parser("methods", help="list the registered IK methods",
                       description="Print the name of every registered IK method, one per line (the values of "
                                   "`invkin solve --method`).")
    p.set_defaults(func=lambda a: (print("\n".join(__import__("invkin").methods())), EXIT_OK)[1])

    from .viewer import DEMOS
    from .viewer.cli import add_server_arguments

    p = sub.add_parser("demo", help="the main demo: the browser viewer (or --tour in the terminal)",
                       description="Start the browser viewer with a demo and print its URL "
                                   "(http://127.0.0.1:8080 by default; Ctrl-C stops): panda (drag the "
                                   "hand's target, pick a method), tentacle (arrow keys move the target; "
                                   "a second tentacle sways by FK), two-bone (closed form, elbow up/down), "
                                   "reach (straight-line reach of seed8dof). --tour prints the terminal "
                                   "tour of the panda instead.")
    p.add_argument("name", nargs="?", default="panda", choices=DEMOS, help="which demo (default panda)")
    p.add_argument("--tour", action="store_true", help="the terminal tour (tree, FK, Jacobian, a solve)")
    p.add_argument("--article-ccd", action="store_true",
                   help="tentacle: follow the target with the article's CCD (simple variant, 0.001 rad "
                        "skip threshold, SEEDS.md section 4) instead of Welman's")
    add_server_arguments(p)
    p.set_defaults(func=cmd_demo)


# ------------------------------------------------------------------ entry point


def build_parser() -> argparse.ArgumentParser:
    from . import __version__

    parser = argparse.ArgumentParser(prog="invkin", description="Inverse kinematics for robots (URDF, MJCF) and "
                                     "characters (BVH, glTF).")
    parser.add_argument("--version", action="version", version=f"invkin {__version__}")
    parser.add_argument("--debug", action="store_true", help="show tracebacks on errors")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for mod in _COMMAND_MODULES:
        try:
            m = importlib.import_module(mod)
        except ModuleNotFoundError as exc:  # a command module not written yet
            if not exc.name or not (mod == exc.name or mod.startswith(exc.name + ".")):
                raise
            continue
        m.register(sub)
    return parser


def _show_warning(message, category, filename, lineno, file=None, line=None) -> None:
    """Warnings as one line each on stderr (``invkin: warning: ...``), without the source line."""
    msg = str(message).strip().replace("\n", " ")
    print(f"invkin: warning: {msg}", file=sys.stderr)


def main(argv=None) -> int:
    parser = build_parser()
    argv = sys.argv[1:] if argv is None else list(argv)
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse: --help (0) or a usage error (2)
        return int(exc.code or 0)
    if not getattr(args, "func", None):
        parser.print_help()
        return EXIT_BAD_INPUT
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("default")  # each distinct warning once per command
            warnings.showwarning = _show_warning
            code = int(args.func(args))
            sys.stdout.flush()  # a closed pipe shows here, not at the interpreter's exit
            return code
    except KeyboardInterrupt:
        print("invkin: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # `invkin info g1 | head`: the reader has what it wanted, not an error
        _silence_stdout()
        return EXIT_BROKEN_PIPE
    except Exception as exc:  # noqa: BLE001 - the CLI's contract: one line and exit 2, never a traceback
        if args.debug:
            raise
        print(f"invkin: error: {_one_line(exc)}", file=sys.stderr)
        return EXIT_BAD_INPUT


def _silence_stdout() -> None:
    """Point stdout at /dev/null so that the interpreter's final flush of a closed pipe is quiet."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError, io.UnsupportedOperation):  # stdout is not a file
        pass


def _one_line(exc: BaseException) -> str:
    """The error as one line: an InvkinError or OSError by its message; anything else (an input that
    slipped past validation, an internal error) also by its type, with a pointer to --debug."""
    msg = " ".join(str(exc).split())
    if len(msg) > 500:
        msg = msg[:497] + "..."
    if isinstance(exc, (InvkinError, OSError)):
        return msg or type(exc).__name__
    return f"{type(exc).__name__}: {msg} (unexpected; rerun with --debug for the traceback)"


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
