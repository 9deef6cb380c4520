"""``invkin bench accuracy``, ``invkin bench suite`` and ``invkin bench page`` (registered through
cli._COMMAND_MODULES).

Tables go to stdout, progress bars (tqdm) and the peers' output to stderr; the last line of
stdout is a one-line summary. Exit codes: 0 done, 2 bad input (one-line message).
"""
from __future__ import annotations

import json
import math
import os
import sys
import time

from ..errors import InvkinError

EXIT_OK = 0


class BenchUsageError(InvkinError):
    """Bad command-line input for ``invkin bench`` (exit code 2)."""


def _list(text, what, choices):
    names = [x.strip() for x in str(text).split(",") if x.strip()]
    if text.strip() == "all":
        return list(choices)
    if not names:
        raise BenchUsageError(f"{what}: expected a comma-separated list, got {text!r}")
    bad = [x for x in names if x not in choices]
    if bad:
        raise BenchUsageError(f"{what}: unknown {bad[0]!r}; choose from: {', '.join(choices)} (or 'all')")
    if len(set(names)) != len(names):
        raise BenchUsageError(f"{what}: {text!r} names one twice")
    return names


def _positive_int(name, v, allow_zero=False):
    if v is None:
        return None
    if v < 0 or (v == 0 and not allow_zero):
        raise BenchUsageError(f"{name}: expected an integer {'>= 0' if allow_zero else '> 0'}, got {v}")
    return v


def _jsonable(x):
    if isinstance(x, dict):
        return {str(k): _jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_jsonable(v) for v in x]
    try:
        import numpy as np

        if isinstance(x, np.generic):
            x = x.item()
    except ImportError:  # pragma: no cover
        pass
    if isinstance(x, float) and not math.isfinite(x):
        return None
    return x


def _write_json(path, res):
    from .._io import atomic_write

    d = os.path.dirname(os.path.abspath(path))
    os.makedirs(d, exist_ok=True)
    atomic_write(path, json.dumps(_jsonable(res), indent=1, allow_nan=False))  # refuses a folder, keeps links
    print(f"wrote {path}", file=sys.stderr)


def _meta() -> dict:
    """Where and when: date, machine, versions, load average (timings are only comparable within a run)."""
    import importlib.metadata as md
    import platform
    import subprocess

    vers = {}
    for p in ("invkin", "numpy", "numba", "matplotlib"):
        try:
            vers[p] = md.version(p)
        except md.PackageNotFoundError:
            vers[p] = None
    try:
        here = os.path.dirname(os.path.abspath(__file__))
        head = subprocess.run(["git", "-C", here, "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                              timeout=10).stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        head = None
    return {"date_utc": time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime()), "python": sys.version.split()[0],
            "platform": platform.platform(), "cpu_count": os.cpu_count(), "versions": vers, "git_commit": head,
            "loadavg_start": list(os.getloadavg()) if hasattr(os, "getloadavg") else None}


def _finish_meta(meta):
    if hasattr(os, "getloadavg"):
        meta["loadavg_end"] = list(os.getloadavg())
    return meta


def _progress_enabled(args):
    return not args.no_progress


def _report(args, res, meta, table, plot_fns, summary) -> int:
    """The common tail of a bench command: run metadata and the command line into ``res``, the
    table on stdout, the plots (``--out``) and the JSON (``--json``), the summary line last."""
    res["meta"] = _finish_meta(meta)
    res["command"] = "invkin bench " + " ".join(sys.argv[2:]) if sys.argv[1:2] == ["bench"] else None
    print(table(res))
    if args.out:
        paths = [p for plot in plot_fns for p in plot(res, args.out)]
        res["plots"] = paths
        print("plots: " + ", ".join(paths), file=sys.stderr)
    if args.json:
        _write_json(args.json, res)
    print(summary(res))
    return EXIT_OK


def cmd_accuracy(args) -> int:
    from ..solvers import methods as all_methods
    from . import accuracy as A
    from . import plots as P  # matplotlib itself loads only when a plot is drawn

    methods = _list(args.methods, "--methods", all_methods())
    sets = _list(args.sets, "--sets", list(A.GOAL_SETS))
    if args.accuracies:
        try:
            accs = [float(x) for x in args.accuracies.split(",") if x.strip()]
        except ValueError:
            raise BenchUsageError(f"--accuracies: expected numbers like 1e-3,1e-6, got {args.accuracies!r}") from None
        if not accs or any(not (a > 0 and math.isfinite(a)) for a in accs):
            raise BenchUsageError(f"--accuracies: expected numbers > 0, got {args.accuracies!r}")
        if len(set(accs)) != len(accs):
            raise BenchUsageError(f"--accuracies: {args.accuracies!r} repeats a value")
    else:
        accs = A.QUICK_ACCURACIES if args.quick else A.DEFAULT_ACCURACIES
    goals = _positive_int("--goals", args.goals) or (3 if args.quick else 20)
    max_it = _positive_int("--max-iterations", args.max_iterations) or (2000 if args.quick else 20000)
    repeats = _positive_int("--repeats", args.repeats) or (1 if args.quick else 3)
    meta = _meta()
    res = A.run_accuracy(methods, sets, accs, goals, max_it, repeats, args.seed, _progress_enabled(args))
    return _report(args, res, meta, A.format_accuracy, (P.plot_accuracy, P.plot_distal), A.accuracy_summary_line)


def cmd_suite(args) -> int:
    from ..solvers import methods as all_methods
    from . import plots as P  # matplotlib itself loads only when a plot is drawn
    from . import suite as S

    methods = _list(args.methods, "--methods", all_methods())
    robots = _list(args.robots, "--robots", list(S.SUITE_ROBOTS))
    n = _positive_int("--n", args.n) or (20 if args.quick else 1000)
    if not (args.budget_ms > 0 and math.isfinite(args.budget_ms)):
        raise BenchUsageError(f"--budget-ms: expected a number > 0, got {args.budget_ms}")
    peer_solvers = [x for x in (args.peer_solvers or "").split(",") if x.strip()] or None
    peers_dir = args.peers_dir or S.default_peers_dir()
    if args.peers_dir and not os.path.isdir(args.peers_dir):
        raise BenchUsageError(f"--peers-dir {args.peers_dir}: not a directory")
    meta = _meta()
    t0 = time.perf_counter()
    res = S.run_suite(methods, robots, n, args.budget_ms, args.seed, _progress_enabled(args))
    if args.peers_python:
        peers = S.run_peers(os.path.expanduser(args.peers_python), peers_dir, robots, n, args.seed, args.budget_ms,
                            peer_solvers)
    else:
        peers = {"available": False, "reason": "no --peers-python given (e.g. --peers-python "
                                                 "~/.cache/invkin-peers-env/bin/python)"}
    if not peers.get("available"):
        print(f"peers: not run — {peers['reason']}", file=sys.stderr)
    S.merge_peers(res, peers)
    res["total_wall_s"] = time.perf_counter() - t0
    return _report(args, res, meta, S.format_suite, (P.plot_suite,), S.suite_summary_line)


def _read_json(path, what):
    try:
        with open(path) as f:
            return json.load(f)
    except OSError as exc:
        raise BenchUsageError(f"{what} {path}: {exc.strerror or exc}") from None
    except json.JSONDecodeError as exc:
        raise BenchUsageError(f"{what} {path}: not JSON ({exc})") from None


def cmd_page(args) -> int:
    """``invkin bench page ACC.json [SUITE.json]``: docs/benchmarks.md from the benchmarks' JSON."""
    from . import page as G

    acc = _read_json(args.accuracy, "accuracy JSON")
    suite = _read_json(args.suite, "suite JSON") if args.suite else None
    if acc.get("benchmark") != "accuracy" or "sets" not in acc:
        raise BenchUsageError(f"{args.accuracy}: not the JSON of `invkin bench accuracy`")
    if suite is not None and "robots" not in suite:
        raise BenchUsageError(f"{args.suite}: not the JSON of `invkin bench suite`")
    text = G.render_page(acc, suite)
    if args.check:
        try:
            with open(args.output) as f:
                same = f.read() == text
        except OSError as exc:
            raise BenchUsageError(f"--check {args.output}: {exc.strerror or exc}") from None
        print(f"{args.output}: {'matches' if same else 'DIFFERS from'} the page of {args.accuracy}"
              + (f" and {args.suite}" if args.suite else ""))
        return EXIT_OK if same else 1
    if args.keep:
        os.makedirs(args.keep, exist_ok=True)
        _write_json(os.path.join(args.keep, "bench_accuracy.json"), G.trim(acc))
        if suite is not None:
            _write_json(os.path.join(args.keep, "bench_suite.json"), G.trim(suite))
    if args.img:
        from . import plots as P

        paths = P.plot_accuracy(acc, args.img) + P.plot_distal(acc, args.img)
        if suite is not None:
            paths += P.plot_suite(suite, args.img)
        print("plots: " + ", ".join(paths), file=sys.stderr)
    if args.output == "-":
        sys.stdout.write(text)
    else:
        from .._io import atomic_write

        atomic_write(args.output, text)
        print(f"wrote {args.output}", file=sys.stderr)
    return EXIT_OK


def _timed(cmd):
    """A benchmark command: it times machine code, so kernels compile in this process before the
    clocks start, not on the interpreter beside a background compile (invkin._tiers)."""
    def run(args):
        os.environ.setdefault("INVKIN_COMPILE", "wait")
        return cmd(args)
    return run


def register(sub) -> None:
    p = sub.add_parser("bench", help="compare the methods: accuracy (Welman figs 4.4/4.5), suite (TRAC-IK protocol)",
                       description="Benchmarks of every IK method. See docs/benchmarks.md.")
    bsub = p.add_subparsers(dest="bench_command", metavar="BENCH")
    p.set_defaults(func=lambda a: (p.print_help(), 2)[1])

    def common(q, default_seed):
        q.add_argument("--methods", default="all", help="comma list of methods (default: all, see `invkin methods`)")
        q.add_argument("--quick", action="store_true", help="a smoke test: tiny sizes")
        q.add_argument("--seed", type=int, default=default_seed, help=f"seed of the targets (default {default_seed})")
        q.add_argument("--json", metavar="PATH", help="write every number (settings, summaries, per goal) here")
        q.add_argument("--out", metavar="DIR", help="write the plots (PNG and SVG) into this folder")
        q.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")

    q = bsub.add_parser("accuracy", help="time and iterations against the requested accuracy, per method",
                        description="Welman's comparison (figures 4.4/4.5): time and iterations to reach the goal "
                                    "against the requested accuracy for every method, on a 7-DOF chain without "
                                    "limits (goals well inside the reach and at 98-99 % of it) and on seed8dof; "
                                    "and how the joint motion is spread along the chain.")
    common(q, 0)
    q.add_argument("--sets", default="all", help="goal sets: inside, boundary, seed8dof (default: all)")
    q.add_argument("--accuracies", help="comma list [m] (default 1e-1,...,1e-8; --quick: 1e-2,1e-4,1e-6)")
    q.add_argument("--goals", type=int, help="goals per set (default 20; --quick: 3)")
    q.add_argument("--max-iterations", type=int, help="per solve (default 20000; --quick: 2000)")
    q.add_argument("--repeats", type=int, help="time each solve this many times, keep the best (default 3; "
                                               "--quick: 1)")
    q.set_defaults(func=_timed(cmd_accuracy))

    q = bsub.add_parser("suite", help="TRAC-IK protocol: every method x the six bundled chains (+ peers)",
                        description="TRAC-IK protocol (random reachable targets, mid-range seed, 5 ms, success at "
                                    "1e-5 m / 1e-5 rad inside the limits, checked with FK) for every method on "
                                    "panda, ur5, iiwa14, baxter_left, g1_left_arm (pose) and seed8dof (position); "
                                    "with the peers' bench_peers.py in the same run when --peers-python is given.")
    common(q, 2015)
    q.add_argument("--robots", default="all", help="comma list (default: all six)")
    q.add_argument("--n", type=int, help="targets per robot (default 1000; --quick: 20)")
    q.add_argument("--budget-ms", type=float, default=5.0, help="time budget per solve (default 5)")
    q.add_argument("--peers-python", metavar="PATH", help="the peers' venv python, e.g. "
                                                          "~/.cache/invkin-peers-env/bin/python")
    q.add_argument("--peers-dir", metavar="DIR", help="folder of bench_peers.py (default ../shared/peers if it exists)")
    q.add_argument("--peer-solvers", metavar="LIST", help="comma list passed to bench_peers.py --solvers "
                                                          "(default: all of its solvers)")
    q.set_defaults(func=_timed(cmd_suite))

    q = bsub.add_parser("page", help="write docs/benchmarks.md from the JSON of `bench accuracy` (and `bench suite`)",
                        description="The benchmark page, generated: its tables and every sentence comparing methods "
                                    "are computed from the numbers of the given runs, so the page cannot drift from "
                                    "them.")
    q.add_argument("accuracy", metavar="ACCURACY.json", help="the --json of `invkin bench accuracy`")
    q.add_argument("suite", metavar="SUITE.json", nargs="?", help="the --json of `invkin bench suite` (optional)")
    q.add_argument("-o", "--output", default="docs/benchmarks.md", help="the page (default docs/benchmarks.md; - for "
                                                                        "stdout)")
    q.add_argument("--check", action="store_true", help="write nothing; exit 1 when --output differs from the page "
                                                        "these JSON files give")
    q.add_argument("--keep", metavar="DIR", help="also write the JSON without its per-goal lists into DIR (as "
                                                 "bench_accuracy.json, bench_suite.json), to commit beside the page")
    q.add_argument("--img", metavar="DIR", help="also redraw the plots (PNG and SVG) into DIR")
    q.set_defaults(func=cmd_page)
