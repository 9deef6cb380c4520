"""``invkin bench accuracy``: time and iterations to reach the goal against the requested
accuracy, for every method (Welman 1993, figures 4.4 and 4.5; SEEDS.md §5).

Goal sets (all position goals on one frame, no joint limits involved except on seed8dof):

``inside``
    :func:`welman_chain` (7 continuous joints, reach 1 m); targets at 40–60 % of the reach in
    random directions — well inside the workspace.
``boundary``
    the same chain; targets at 98–99 % of the reach — the chain must come close to its stretched,
    singular configuration (Welman's figure 4.5).
``seed8dof``
    the bundled seed8dof model (SEEDS.md §1, limits [−π, π], reach 3 m); targets are the
    effector positions of uniformly random configurations inside the limits.

Every solve starts from the same bent configuration (:func:`q_start`: 0.3 rad on every joint
but the first, alternating in sign; not the stretched, singular zero pose) and runs with
``timeout=None`` and ``max_iterations``, so that the iterations are deterministic; only the
times vary between runs. Each solve is timed ``repeats`` times (the minimum is kept) and the
table gives the median over the goals of a set.

Joint motion along the chain: for each converged solve, ``|Δq|`` per joint (continuous joints
wrapped into (−π, π]); the *distal share* is the fraction of ``Σ|Δq|`` on the last
``ceil(dof / 3)`` joints (the distal third: 3 of 7, 3 of 8). A method spreading the motion evenly
scores ``ceil(dof/3)/dof`` (0.43 for 7 joints). The *motion centroid* is the |Δq|-weighted mean
joint position along the chain, 0 = first joint, 1 = last joint (0.5 = even spread).
"""
from __future__ import annotations

import math
import sys
import time

import numpy as np

from ..errors import InvkinError
from ..goals import Position
from ..solve import solve
from ..solvers import methods as all_methods
from . import seconds

__all__ = ["welman_chain", "GOAL_SETS", "DEFAULT_ACCURACIES", "QUICK_ACCURACIES", "make_goal_sets",
           "run_accuracy", "motion_spread", "format_accuracy", "accuracy_summary_line"]

#: Link lengths of :func:`welman_chain` [m] (sum 1.0, decreasing from the base like a limb).
WELMAN_LINKS = (0.25, 0.20, 0.17, 0.14, 0.12, 0.12)
#: Requested accuracies of a full run [m].
DEFAULT_ACCURACIES = (1e-1, 1e-2, 1e-3, 1e-4, 1e-5, 1e-6, 1e-7, 1e-8)
QUICK_ACCURACIES = (1e-2, 1e-4, 1e-6)
#: Goal sets: name -> description.
GOAL_SETS = {
    "inside": "welman7, targets at 40-60 % of the reach (well inside)",
    "boundary": "welman7, targets at 98-99 % of the reach (near the boundary, near-singular)",
    "seed8dof": "seed8dof, effector positions of random configurations inside the limits",
}
GOAL_SETS_SHORT = {"inside": "welman7, targets at 40-60 % of the reach",
                   "boundary": "welman7, targets at 98-99 % of the reach",
                   "seed8dof": "random reachable targets"}
INSIDE_RADIUS = (0.40, 0.60)
BOUNDARY_RADIUS = (0.98, 0.99)
REFERENCE_ACCURACY = 1e-6  # the distal share and the "fastest" line are reported here (or nearest)


def welman_chain():
    """A 7-DOF chain without limits, like the manipulator of Welman's figures 4.4/4.5.

    Seven continuous joints; the first two sit together at the base (yaw about Z, then pitch
    about Y, so that the first link can point anywhere), then one joint at the end of each link,
    alternating about X and Y. Six links along +Z of 0.25, 0.20, 0.17, 0.14, 0.12 and 0.12 m
    (sum 1 m, the reach); frames ``base``, ``link1`` … ``link7``, ``tip``.
    """
    from ..model import Step, chain_from_steps

    X, Y, Z = (1.0, 0.0, 0.0), (0.0, 1.0, 0.0), (0.0, 0.0, 1.0)
    axes = (Z, Y, X, Y, X, Y, X)
    offsets = [(0.0, 0.0, 0.0), (0.0, 0.0, 0.0)] + [(0.0, 0.0, L) for L in WELMAN_LINKS[:-1]]
    steps = [Step(o, "continuous", a, -math.inf, math.inf, f"j{k}") for k, (o, a) in enumerate(zip(offsets, axes))]
    return chain_from_steps(steps, name="welman7", tip_offset=(0.0, 0.0, WELMAN_LINKS[-1]), base="base", tip="tip")


def q_start(dof: int) -> np.ndarray:
    """The bent start configuration: 0, then +0.3, −0.3, +0.3, … rad."""
    q = np.array([0.3 * (1 if k % 2 else -1) for k in range(dof)])
    q[0] = 0.0
    return q


def _directions(rng, n):
    d = rng.normal(size=(n, 3))
    return d / np.linalg.norm(d, axis=1, keepdims=True)


def make_goal_sets(names, n_goals: int, seed: int) -> dict:
    """name -> dict(robot, frame, q0, targets (n, 3), reach, description); seeded per set."""
    from ..model import load_robot

    out = {}
    for k, name in enumerate(names):
        rng = np.random.default_rng([seed, k])
        if name in ("inside", "boundary"):
            robot = welman_chain()
            lo, hi = INSIDE_RADIUS if name == "inside" else BOUNDARY_RADIUS
            r = rng.uniform(lo, hi, size=n_goals)
            targets = _directions(rng, n_goals) * r[:, None]  # the base joints sit at the origin
            frame, reach = "tip", float(sum(WELMAN_LINKS))
        elif name == "seed8dof":
            robot = load_robot("seed8dof")
            Q = rng.uniform(robot.lower, robot.upper, size=(n_goals, robot.dof))
            targets = robot.fk(Q, "effector")[:, :3, 3]
            frame, reach = "effector", 3.0
        else:
            raise InvkinError(f"unknown goal set {name!r}; choose from: {', '.join(GOAL_SETS)}")
        out[name] = dict(robot=robot, frame=frame, q0=q_start(robot.dof), targets=targets, reach=reach,
                         description=GOAL_SETS[name], short=GOAL_SETS_SHORT[name],
                         radius_fraction=(np.linalg.norm(targets, axis=1) / reach).tolist())
    return out


def motion_spread(robot, q0, q) -> tuple:
    """(distal share, motion centroid, |Δq| per joint) of the move q0 → q (see the module doc)."""
    dq = np.asarray(robot.difference(q0, q), dtype=float)
    cont = np.array([t == "continuous" for t in robot.joint_types_per_dof])
    dq = np.where(cont, (dq + math.pi) % (2 * math.pi) - math.pi, dq)
    a = np.abs(dq)
    total = float(a.sum())
    n = a.size
    k = math.ceil(n / 3)
    if total <= 0.0:
        return math.nan, math.nan, a
    pos = np.arange(n) / max(n - 1, 1)
    return float(a[n - k:].sum() / total), float((a * pos).sum() / total), a


def _progress(total, desc, enabled):
    if not enabled:
        return None
    try:
        from tqdm import tqdm
    except ImportError:  # progress is optional
        return None
    tqdm.monitor_interval = 0  # no monitor thread waking up during timed calls
    return tqdm(total=total, desc=desc, file=sys.stderr, leave=False, mininterval=0.5, unit="solve")


def _median(xs):
    xs = [x for x in xs if x is not None and math.isfinite(x)]
    return float(np.median(xs)) if xs else None


def run_accuracy(methods=None, sets=("inside", "boundary", "seed8dof"), accuracies=DEFAULT_ACCURACIES,
                 n_goals: int = 20, max_iterations: int = 20000, repeats: int = 3, seed: int = 0,
                 progress: bool = True) -> dict:
    """Run the comparison; returns a JSON-able dict (see ``docs/benchmarks.md``)."""
    methods = list(all_methods() if methods is None else methods)
    accuracies = sorted((float(a) for a in accuracies), reverse=True)  # loosest first
    goal_sets = make_goal_sets(sets, n_goals, seed)
    t_all = time.perf_counter()
    res = {
        "benchmark": "accuracy",
        "settings": dict(methods=methods, sets=list(sets), accuracies=accuracies, goals_per_set=n_goals,
                         max_iterations=max_iterations, repeats=repeats, seed=seed, timeout=None,
                         reference_accuracy=_reference(accuracies)),
        "sets": {},
    }
    total = len(methods) * len(goal_sets) * len(accuracies) * n_goals
    bar = _progress(total, "bench accuracy", progress)
    for sname, gs in goal_sets.items():
        robot, frame, q0 = gs["robot"], gs["frame"], gs["q0"]
        k = math.ceil(robot.dof / 3)
        sres = {"robot": robot.name, "dof": robot.dof, "frame": frame, "q0": q0.tolist(),
                "description": gs["description"], "short": gs["short"], "reach_m": gs["reach"], "targets": gs["targets"].tolist(),
                "radius_fraction": gs["radius_fraction"], "distal_joints": list(robot.joint_names[-k:]),
                "uniform_distal_share": k / robot.dof, "methods": {}, "unsupported": {}}
        for m in methods:
            # warm-up: Numba compilation and first-call caches, on another target
            try:
                solve(robot, [Position(frame, gs["targets"][0] * 0.9)], q0=q0, method=m, timeout=None,
                      max_iterations=50, position_tolerance=1e-3)
            except InvkinError as exc:  # e.g. 'analytic' takes two-bone arms only
                sres["unsupported"][m] = f"{type(exc).__name__}: {exc}"
                if bar is not None:
                    bar.update(len(accuracies) * len(gs["targets"]))
                continue
            rows = []
            for acc in accuracies:
                per = dict(iterations=[], time_s=[], success=[], position_error=[], restarts=[], status=[],
                           distal_share=[], motion_centroid=[], abs_dq=[])
                for g in gs["targets"]:
                    goal = [Position(frame, g)]
                    best = math.inf
                    for _ in range(max(1, repeats)):
                        t0 = time.perf_counter()
                        r = solve(robot, goal, q0=q0, method=m, timeout=None, max_iterations=max_iterations,
                                  position_tolerance=acc, seed=seed)
                        best = min(best, time.perf_counter() - t0)
                    pe = float(np.linalg.norm(robot.fk(r.q, frame)[:3, 3] - g))  # recomputed, not the flag
                    ok = bool(pe <= acc)
                    share, centroid, a = motion_spread(robot, q0, r.q)
                    per["iterations"].append(int(r.iterations))
                    per["time_s"].append(best)
                    per["success"].append(ok)
                    per["position_error"].append(pe)
                    per["restarts"].append(int(r.restarts))
                    per["status"].append(r.status.value)
                    per["distal_share"].append(share if ok else None)
                    per["motion_centroid"].append(centroid if ok else None)
                    per["abs_dq"].append(a.tolist())
                    if bar is not None:
                        bar.update(1)
                its = np.array(per["iterations"], dtype=float)
                rows.append({
                    "accuracy": acc,
                    "success": float(np.mean(per["success"])),
                    "time_ms_median": 1e3 * float(np.median(per["time_s"])),
                    "time_ms_mean": 1e3 * float(np.mean(per["time_s"])),
                    "iterations_median": float(np.median(its)),
                    "iterations_mean": float(np.mean(its)),
                    "restarts_median": float(np.median(per["restarts"])),
                    "position_error_median": float(np.median(per["position_error"])),
                    "distal_share_median": _median(per["distal_share"]),
                    "motion_centroid_median": _median(per["motion_centroid"]),
                    "per_goal": per,
                })
            sres["methods"][m] = rows
        res["sets"][sname] = sres
    if bar is not None:
        bar.close()
    res["wall_s"] = time.perf_counter() - t_all
    res["findings"] = findings(res)
    return res


def _reference(accuracies):
    return min(accuracies, key=lambda a: abs(math.log10(a) - math.log10(REFERENCE_ACCURACY)))


def _row(res, sname, m, acc):
    for r in res["sets"][sname]["methods"].get(m, ()):
        if r["accuracy"] == acc:
            return r
    return None


def findings(res) -> dict:
    """The sources' three claims, measured (numbers only; docs/benchmarks.md says what they mean)."""
    accs = res["settings"]["accuracies"]
    ref = res["settings"]["reference_accuracy"]
    lo, hi = accs[0], accs[-1]
    out = {"reference_accuracy": ref, "loosest": lo, "tightest": hi, "per_set": {}}
    for sname, s in res["sets"].items():
        per = {}
        for m, rows in s["methods"].items():
            r0, r1 = rows[0], rows[-1]
            digits = math.log10(lo / hi) if hi < lo else 1.0
            per[m] = {
                "time_ratio_tightest_vs_loosest": r1["time_ms_median"] / r0["time_ms_median"],
                "iterations_per_digit": (r1["iterations_median"] - r0["iterations_median"]) / digits,
                "iterations_loosest": r0["iterations_median"], "iterations_tightest": r1["iterations_median"],
                "success_tightest": r1["success"],
            }
        rows_ref = {m: _row(res, sname, m, ref) for m in s["methods"]}
        solved = {m: r for m, r in rows_ref.items() if r and r["success"] == 1.0}
        fastest = min(solved, key=lambda m: solved[m]["time_ms_median"]) if solved else None
        f = {"methods": per, "fastest_at_reference": fastest,
             "fastest_at_reference_ms": solved[fastest]["time_ms_median"] if fastest else None,
             "ranking_at_reference": sorted(solved, key=lambda m: solved[m]["time_ms_median"])}
        a, b = "ccd", "transpose"
        if rows_ref.get(a) and rows_ref.get(b):
            f["ccd_vs_transpose_time_ratio_at_reference"] = (rows_ref[a]["time_ms_median"]
                                                             / rows_ref[b]["time_ms_median"])
            f["ccd_vs_transpose_iterations_ratio_at_reference"] = (rows_ref[a]["iterations_median"]
                                                                   / max(rows_ref[b]["iterations_median"], 1.0))
        out["per_set"][sname] = f
    return out


# ------------------------------------------------------------------ text output


def _fmt_ms(x):
    if x is None:
        return "-"
    return f"{x:.3g}" if x < 100 else f"{x:.0f}"


def format_accuracy(res) -> str:
    """Terminal tables: per set, median time [ms] / median iterations per method and accuracy,
    with the success fraction where it is below 1; then the motion spread at the reference."""
    accs = res["settings"]["accuracies"]
    ref = res["settings"]["reference_accuracy"]
    L = []
    for sname, s in res["sets"].items():
        L.append(f"\n{sname}: {s['description']} — {len(s['targets'])} goals, start q0 = "
                 f"{np.round(s['q0'], 2).tolist()}")
        L.append("median time ms / median iterations (success fraction when < 1)")
        head = f"{'method':<13}" + "".join(f"{a:>17.0e}" for a in accs)
        L.append(head)
        L.append("-" * len(head))
        for m, rows in s["methods"].items():
            cells = []
            for r in rows:
                c = f"{_fmt_ms(r['time_ms_median'])}/{r['iterations_median']:.0f}"
                if r["success"] < 1.0:
                    c += f" ({r['success']:.1f})"
                cells.append(f"{c:>17}")
            L.append(f"{m:<13}" + "".join(cells))
        for m, why in s["unsupported"].items():
            L.append(f"{m:<13}  unsupported: {why[:100]}")
    L.append(f"\njoint motion at accuracy {ref:.0e} (converged solves; distal = last third of the joints; "
             "centroid 0 = base, 1 = tip)")
    names = list(res["sets"])
    head = f"{'method':<13}" + "".join(f"{n + ' distal':>18}{n + ' ctr':>16}" for n in names)
    L.append(head)
    L.append("-" * len(head))
    methods = res["settings"]["methods"]
    for m in methods:
        cells = []
        for n in names:
            r = _row(res, n, m, ref)
            if m in res["sets"][n]["unsupported"]:
                cells.append(f"{'unsupported':>18}{'':>16}")
                continue
            ds, ce = (r or {}).get("distal_share_median"), (r or {}).get("motion_centroid_median")
            cells.append(f"{'-' if ds is None else f'{ds:.2f}':>18}{'-' if ce is None else f'{ce:.2f}':>16}")
        L.append(f"{m:<13}" + "".join(cells))
    L.append(f"{'(uniform)':<13}" + "".join(f"{res['sets'][n]['uniform_distal_share']:>18.2f}{0.5:>16.2f}"
                                            for n in names))
    return "\n".join(L)


def accuracy_summary_line(res) -> str:
    st = res["settings"]
    f = res["findings"]
    where = "boundary" if "boundary" in f["per_set"] else next(iter(f["per_set"]), None)
    fastest = ""
    if where is not None:
        m = f["per_set"][where]["fastest_at_reference"]
        fastest = (f"; fastest at {f['reference_accuracy']:.0e} on '{where}': "
                   + (f"{m} ({f['per_set'][where]['fastest_at_reference_ms']:.3g} ms)" if m else "none solved all goals"))
    never = [m for m in st["methods"] if all(m in s["unsupported"] for s in res["sets"].values())]
    skip = f" ({', '.join(never)} unsupported on every set)" if never else ""
    return (f"accuracy: {len(st['methods'])} methods{skip} × {len(st['sets'])} goal sets × {len(st['accuracies'])} "
            f"accuracies × {st['goals_per_set']} goals in {seconds(res['wall_s'])}{fastest}")
