"""``invkin view ROBOT|CLIP|MOTION.npz``, and the server loop that ``invkin demo`` shares.

Nothing here imports viser: ``invkin --help`` works without the ``[viewer]`` extra, and starting a
viewer without it is a one-line error (exit 2).
"""
from __future__ import annotations

import signal
import sys

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8080
LONG_CLIP = 2000  # frames; correcting a clip before serving takes ~0.6 ms a frame (100 000: 62 s, silent)


def _port(text: str) -> int:
    import argparse

    try:
        p = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a port number, got {text!r}") from None
    if not 0 <= p <= 65535:
        raise argparse.ArgumentTypeError(f"expected a port in [0, 65535], got {p}")
    return p


def add_server_arguments(p) -> None:
    """--host and --port, shared by ``view`` and ``demo``."""
    p.add_argument("--port", type=_port, default=DEFAULT_PORT,
                   help=f"TCP port (default {DEFAULT_PORT}; 0 picks a free one)")
    p.add_argument("--host", default=DEFAULT_HOST,
                   help=f"address to listen on (default {DEFAULT_HOST}: this machine only; another "
                        f"address needs --allow-remote)")
    p.add_argument("--allow-remote", action="store_true",
                   help="allow a host other than loopback (0.0.0.0, ::, a LAN address): the viewer has "
                        "no authentication, so anyone who reaches the port can watch and drive it")


def check_server_arguments(args, out=None) -> None:
    """Refuse a non-loopback --host without --allow-remote; with it, print the exposure warning."""
    from .errors import check_host

    warning = check_host(args.host, getattr(args, "allow_remote", False))
    if warning:
        print(f"invkin viewer: {warning}", file=out or sys.stderr, flush=True)


def bound_url(app) -> str:
    """The URL of the address the server is bound to (0.0.0.0 stays 0.0.0.0: it is what was bound)."""
    host = app.host
    if ":" in host:
        host = f"[{host}]"
    return f"http://{host}:{app.port}"


def serve(app, out=None) -> int:
    """Start ``app``, print its URL, serve until Ctrl-C (or SIGTERM), stop cleanly; exit code 0."""
    out = out or sys.stdout
    stop_signal = {}

    def on_term(signum, _frame):
        stop_signal["sig"] = signum
        raise KeyboardInterrupt

    previous = None
    try:
        previous = signal.signal(signal.SIGTERM, on_term)
    except ValueError:  # not the main thread: Ctrl-C handling is the caller's
        previous = None
    try:
        clip = getattr(app, "clip", None)
        if clip is not None and clip.n_frames >= LONG_CLIP:  # say why the URL takes a while
            print(f"invkin viewer: correcting the clip ({clip.n_frames} frames) before serving, about "
                  f"{max(1, round(6e-4 * clip.n_frames))} s; Ctrl-C to stop", file=out, flush=True)
        app.start()
        print(f"invkin viewer: {bound_url(app)}  ({app.robot.name}; Ctrl-C to stop)", file=out, flush=True)
        while not app.wait(0.5):
            pass
    except KeyboardInterrupt:
        pass
    finally:
        app.stop()
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
    print("invkin viewer: stopped", file=out, flush=True)
    return 0


def cmd_view(args) -> int:
    from ..cli_robot import robot_from_args, robot_options_given
    from .app import ViewerApp
    from .errors import ViewerError
    from .pose import named_pose, parse_q

    check_server_arguments(args)
    robot = args.robot
    if robot.lower().endswith(".npz"):  # a retargeted motion: its robot, its source clip beside it
        if args.q is not None or args.state is not None or args.frame:
            raise ViewerError("--q, --state and --frame do not apply to a motion file (it gives every pose)")
        app = ViewerApp(motion=robot, robot=args.motion_robot, source=args.clip, host=args.host, port=args.port,
                        method=args.method, sticks=args.sticks)
        return serve(app)
    if args.clip is not None or args.motion_robot is not None:
        raise ViewerError("--clip and --robot go with a motion file (invkin view MOTION.npz --clip CLIP.bvh)")
    if not robot.lower().endswith((".bvh", ".gltf", ".glb")) or robot_options_given(args):
        robot = robot_from_args(args)
    q0 = None
    if args.q is not None:
        q0 = parse_q(robot, args.q)
    elif args.state is not None:
        q0 = named_pose(robot, args.state)
    app = ViewerApp(robot, host=args.host, port=args.port, method=args.method,
                    targets=args.frame or None, q0=q0, sticks=args.sticks, up=args.up)
    return serve(app)


def run_demo(name: str, host: str = DEFAULT_HOST, port: int = DEFAULT_PORT, *, article_ccd: bool = False) -> int:
    """``invkin demo NAME``: the viewer with one of the demos (``article_ccd``: see :func:`demo_app`)."""
    from .app import demo_app

    return serve(demo_app(name, host, port, article_ccd=article_ccd))


def register(sub) -> None:
    p = sub.add_parser(
        "view", help="browser viewer: drag targets, pick a method, watch it solve",
        description="Serve a browser viewer for a robot (bundled name, .urdf or MJCF .xml: drawn with its "
                    "visual meshes and primitives, --sticks for the stick figure) or a BVH/glTF clip "
                    "(turned upright from its own up axis; its IK-corrected version over the ghost of the "
                    "clip as read) or a retargeted motion .npz (the robot plays it; its source clip, --clip "
                    "or the one the file records, plays beside it on the same time slider). Drag the "
                    "targets; the server solves with the chosen method and redraws. Needs the [viewer] extra (viser, trimesh). Ctrl-C stops.")
    p.add_argument("robot", metavar="ROBOT|CLIP.bvh|CLIP.glb|MOTION.npz",
                   help="bundled name (panda, g1, ...), a .urdf, an MJCF .xml, a .bvh or a .gltf/.glb clip, or a "
                        "motion .npz from `invkin retarget`")
    add_server_arguments(p)
    p.add_argument("--method", default=None, help="solver to start with (default lm; see `invkin methods`)")
    p.add_argument("--frame", action="append", metavar="FRAME",
                   help="put a target on this frame (repeatable; default: the last frame, none for a clip or a motion)")
    p.add_argument("--sticks", action="store_true",
                   help="draw the kinematic stick figure, not the robot's visual meshes")
    p.add_argument("--q", default=None, metavar="'Q1 Q2 ...'",
                   help="start configuration, one value per DOF [rad or m] (default: 0 where the limits "
                        "allow it, else mid-range)")
    p.add_argument("--state", default=None, metavar="NAME",
                   help="start in this SRDF group state (e.g. half_sitting; needs --srdf: no bundled model "
                        "carries an SRDF)")
    p.add_argument("--up", default=None, choices=("x", "y", "z", "-x", "-y", "-z"),
                   help="up axis of a BVH or glTF clip (default: found from the clip: head above the feet)")
    p.add_argument("--clip", default=None, metavar="CLIP.bvh",
                   help="with a motion .npz: its source clip, played beside the robot (default: the clip the "
                        "file records, when it exists)")
    p.add_argument("--robot", dest="motion_robot", default=None, metavar="ROBOT",
                   help="with a motion .npz: the robot (bundled name or .urdf; default: the one the file records)")
    from ..cli_robot import add_robot_options

    add_robot_options(p)  # --base, --tip, --floating-base, --srdf (the group states of --state)
    p.set_defaults(func=cmd_view)
