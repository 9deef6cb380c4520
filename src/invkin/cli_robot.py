"""The options every command that loads one robot shares: --base, --tip, --floating-base, --srdf,
--max-bytes.

``add_robot_options(parser)`` adds them next to the command's ROBOT argument;
``robot_from_args(args)`` loads the robot with them (:func:`invkin.load_robot`). With
``keep_name=True`` it hands back the ROBOT text itself when no option is given, for commands that
pass names on (a job's workers load a bundled name or a URDF by themselves).
"""
from __future__ import annotations


def add_robot_options(p) -> None:
    """--base LINK, --tip LINK, --floating-base, --srdf FILE on an argparse parser."""
    g = p.add_argument_group("robot model")
    g.add_argument("--base", metavar="LINK", help="cut the chain from this link (becomes the world frame)")
    g.add_argument("--tip", metavar="LINK", help="cut the chain up to this link")
    g.add_argument("--floating-base", action="store_true",
                   help="put a free joint (x y z + rotation vector) at the root (with --base: at that link)")
    g.add_argument("--srdf", metavar="FILE", help="SRDF file: named configurations, disabled collision pairs")
    g.add_argument("--max-bytes", type=int, metavar="N",
                   help="size cap of the URDF/MJCF/SRDF files read (default 16 MiB; for a larger trusted file)")


def robot_options_given(args) -> bool:
    return bool(args.base or args.tip or args.floating_base or args.srdf or getattr(args, "max_bytes", None))


def robot_from_args(args, keep_name: bool = False):
    """The robot of ``args.robot`` loaded with the options (or the name itself, see the module)."""
    from .model import load_robot

    if keep_name and not robot_options_given(args):
        return args.robot
    kw = {}
    if args.floating_base:
        kw["floating_base"] = True
    if args.srdf:
        kw["srdf"] = args.srdf
    if getattr(args, "max_bytes", None) is not None:
        kw["max_bytes"] = args.max_bytes
    return load_robot(args.robot, base=args.base, tip=args.tip, **kw)
