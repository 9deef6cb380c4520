"""``invkin bench page``: docs/benchmarks.md written from the benchmarks' JSON, so it cannot drift.

:func:`render_page` takes the JSON of ``invkin bench accuracy`` and (optionally) of ``invkin bench
suite`` and returns the whole page: the protocol text (fixed), every table, and every sentence that
compares methods (computed here from the numbers: which method is faster and by how much, whether
a finding of the sources reproduces). :func:`trim` drops the per-goal lists, which the page does not
use, so that the JSON the page was made from can be committed beside it
(``benchmarks/results/``); ``tests/test_bench_page.py`` checks that the committed page is exactly
what the committed JSON gives.
"""
from __future__ import annotations

import math
import os

from . import seconds

__all__ = ["render_page", "trim", "PAGE_METHOD_ORDER"]

#: Row order of the method tables (methods of a run not listed here follow, sorted).
PAGE_METHOD_ORDER = ("lm", "pinv", "dls", "gauss-seidel", "ccd", "transpose", "fabrik", "analytic")
NEWTON = ("lm", "pinv", "dls")
# a finding's verdict thresholds (dimensionless ratios; see the sentences that use them)
SHARP_SLOWDOWN = 10.0   # tightest/loosest time ratio of the transpose that counts as "sharply"
MILD_SLOWDOWN = 1.5     # ... and as "mildly"
DISTAL_MARGIN = 0.05    # distal-share difference that counts as "moves the distal links more"
SAME_TIME = 1.2         # two median times closer than this ratio are "about the same"


# ------------------------------------------------------------------ data


def trim(res: dict) -> dict:
    """A copy of a bench JSON without the per-goal / per-target lists and target arrays, with
    absolute paths made relative to the working directory (the home folder written ``~``), so
    that it can be committed."""
    drop = {"per_goal", "per_target", "q_goal", "targets"}
    home = os.path.expanduser("~")

    def path(tok):
        if not tok.startswith("/"):
            return tok
        if tok == home or tok.startswith(home + "/"):
            return "~" + tok[len(home):]
        return os.path.relpath(tok)

    def walk(x):
        if isinstance(x, dict):
            return {k: walk(v) for k, v in x.items() if k not in drop}
        if isinstance(x, list):
            return [walk(v) for v in x]
        if isinstance(x, str) and "/" in x:
            return " ".join(path(t) for t in x.split(" "))
        return x

    return walk(res)


def _order(names):
    known = [m for m in PAGE_METHOD_ORDER if m in names]
    return known + sorted(m for m in names if m not in known)


def _row(s, m, acc):
    for r in s["methods"].get(m, ()):
        if r["accuracy"] == acc:
            return r
    return None


# ------------------------------------------------------------------ number formats


def _ms(x):
    return "-" if x is None else (f"{x:.3g}" if x < 100 else f"{x:.0f}")


def _num(r):
    """A positive ratio with 2 significant digits, no exponent."""
    return f"{r:.2g}" if r < 10 else f"{r:.0f}"


def _x(a, b):
    """'N×' for the ratio a/b of two positive numbers."""
    return _num(a / b) + "×"


def _acc(a):
    return f"{a:.0e}".replace("e-0", "e-").replace("e+0", "e")


def _share(x):
    return "-" if x is None else f"{x:.2f}"


def _pct(x):
    return "-" if x is None else f"{100 * x:.1f}%"


def _range(xs, fmt):
    xs = [x for x in xs if x is not None]
    lo, hi = min(xs), max(xs)
    return fmt(lo) if fmt(lo) == fmt(hi) else f"{fmt(lo)}–{fmt(hi)}"


# ------------------------------------------------------------------ section 1: accuracy

ACCURACY_INTRO = """\
## 1. `invkin bench accuracy`: time against the requested accuracy (Welman 1993, figs 4.4/4.5)

Welman (SEEDS.md §5) compares the Jacobian transpose with CCD on "a 7-DOF manipulator without
limits", one position goal well inside the reach and one near its boundary, and plots the time
to reach the goal against the requested accuracy. `invkin bench accuracy` repeats this for every
method.

**The chain** (`invkin.bench.accuracy.welman_chain()`, "welman7"): 7 continuous joints (no limits).
The first two share the base (yaw about Z, pitch about Y, so that the first link can point
anywhere); then one joint at the end of each link, alternating about X and Y. Six links along
+Z of 0.25, 0.20, 0.17, 0.14, 0.12, 0.12 m: reach 1 m, link lengths decreasing from the base like a
limb. Welman gives neither his link lengths nor his axes; this chain only matches what he does
say (7 DOF, no limits, position goal).

**Goal sets** ({goals} goals each, seeded, `--seed {seed}`):

| set | chain | targets |
|---|---|---|
| `inside` | welman7 | random directions, 40–60 % of the reach |
| `boundary` | welman7 | random directions, 98–99 % of the reach: the chain has to come close to the stretched, singular pose |
| `seed8dof` | seed8dof (SEEDS §1, limits ±π, reach 3 m) | effector positions of uniform random configurations inside the limits |

**Runs.** Every solve starts from the same bent configuration (0, +0.3, −0.3, +0.3, … rad; not
the singular all-zero pose) and runs with `timeout=None, max_iterations={max_it}`, so the iterations
are deterministic. Success is recomputed from FK (position error ≤ the requested accuracy). Each
solve is timed {repeats} times and the fastest is kept; tables give the median over the {goals} goals.
Accuracies {acc_lo} … {acc_hi} m. Methods run with their default options (`transpose`: the
Buss–Kim step; `ccd`: Welman's variant).{unsupported}

**Joint motion.** For each converged solve, |Δq| per joint (continuous joints taken modulo 2π).
*Distal share* = the fraction of Σ|Δq| on the last third of the joints (`ceil(dof/3)`: 3 of 7,
3 of 8). An even spread scores 3/7 = 0.43 (welman7) or 3/8 = 0.38 (seed8dof). *Centroid* = the
|Δq|-weighted mean position along the chain, 0 = first joint, 1 = last joint, 0.5 = even spread.

![time and iterations against accuracy](img/bench_accuracy.png)

Top: median time per solve; bottom: median iterations; hollow markers: not every goal was solved
within {max_it} iterations. Median time per solve in ms (median iterations), [success fraction] when
below 1:
"""

SET_TITLES = {"inside": "inside** (40–60 % of the reach)", "boundary": "boundary** (98–99 % of the reach)",
              "seed8dof": "seed8dof** (random reachable targets)"}


def _accuracy_tables(acc) -> list:
    accs = acc["settings"]["accuracies"]
    L = []
    for sname, s in acc["sets"].items():
        L.append(f"**{SET_TITLES.get(sname, sname + '**')}")
        L.append("")
        L.append("| method | " + " | ".join(_acc(a) for a in accs) + " |")
        L.append("|---|" + "---:|" * len(accs))
        for m in _order(list(s["methods"])):
            cells = []
            for r in s["methods"][m]:
                c = f"{_ms(r['time_ms_median'])} ({r['iterations_median']:.0f})"
                if r["success"] < 1.0:
                    c += f" [{r['success']:.2f}]"
                cells.append(c)
            L.append(f"| {m} | " + " | ".join(cells) + " |")
        L.append("")
    return L


def _distal_table(acc) -> list:
    ref = acc["settings"]["reference_accuracy"]
    sets = list(acc["sets"])
    L = [f"Distal share / centroid at {_acc(ref)} m (median over converged solves):", "",
         "| method | " + " | ".join(sets) + " |", "|---|" + "---:|" * len(sets)]
    methods = _order([m for s in acc["sets"].values() for m in s["methods"]])
    for m in dict.fromkeys(methods):
        cells = []
        for sname in sets:
            r = _row(acc["sets"][sname], m, ref)
            if r is None:
                cells.append("n/a")
            elif r["distal_share_median"] is None:
                cells.append("(none converged)")
            else:
                cells.append(f"{_share(r['distal_share_median'])} / {_share(r['motion_centroid_median'])}")
        L.append(f"| {m} | " + " | ".join(cells) + " |")
    L.append("| even spread | " + " | ".join(f"{acc['sets'][n]['uniform_distal_share']:.2f} / 0.50" for n in sets)
             + " |")
    L.append("")
    return L


def _per_digit(rows):
    r0, r1 = rows[0], rows[-1]
    digits = math.log10(r0["accuracy"] / r1["accuracy"])
    return (r1["iterations_median"] - r0["iterations_median"]) / digits if digits > 0 else 0.0


def _slowdown(s, m):
    rows = s["methods"][m]
    return rows[-1]["time_ms_median"] / rows[0]["time_ms_median"]


def _finding_transpose(acc) -> tuple:
    """Welman: the Jacobian transpose slows sharply with each extra digit."""
    accs = acc["settings"]["accuracies"]
    words, parts = {}, []
    for sname, s in acc["sets"].items():
        if "transpose" not in s["methods"]:
            continue
        rows = s["methods"]["transpose"]
        k = _slowdown(s, "transpose")
        words[sname] = "sharply" if k >= SHARP_SLOWDOWN else "mildly" if k >= MILD_SLOWDOWN else "not"
        parts.append(f"{sname} {_signed(_per_digit(rows))} per digit ({rows[0]['iterations_median']:.0f} → "
                     f"{rows[-1]['iterations_median']:.0f} iterations, time {_ms(rows[0]['time_ms_median'])} → "
                     f"{_ms(rows[-1]['time_ms_median'])} ms, ×{_num(k)})")
    if not words:
        return None
    sharp = [n for n, w in words.items() if w == "sharply"]
    mild = [n for n, w in words.items() if w == "mildly"]
    if sharp or mild:
        verdict = "**Yes" + (f", sharply on {', '.join(sharp)}" if sharp else "") \
            + (f"{';' if sharp else ','} mildly on {', '.join(mild)}" if mild else "") + "**"
    else:
        verdict = "**No**"
    text = (f"Transpose iterations from {_acc(accs[0])} to {_acc(accs[-1])} m: " + "; ".join(parts)
            + " (linear convergence: about the same number of iterations per digit).")
    newton = []
    for sname, s in acc["sets"].items():
        ms = [m for m in NEWTON if m in s["methods"]]
        if ms:
            newton.append(f"{sname} {_range([_per_digit(s['methods'][m]) for m in ms], _signed)} per digit, "
                          f"time ×{_range([_slowdown(s, m) for m in ms], _num)}")
    if newton:
        text += f" The Newton-type methods ({', '.join(NEWTON)}) stay nearly flat: " + "; ".join(newton) + "."
    return ("The Jacobian transpose slows sharply with each extra digit of accuracy", verdict, text)


def _signed(v):
    return f"{v:+.1f}" if abs(v) < 10 else f"{v:+.0f}"


def _vs(a_name, a, b_name, b, key, unit):
    """'x vs y unit: <the smaller> N× faster (fewer)' from two rows; a time ratio below SAME_TIME is
    called about the same (times move by more than that between runs on a shared machine)."""
    x, y = a[key], b[key]
    fmt = _ms if unit == "ms" else (lambda v: f"{v:.0f}")
    head = f"{a_name} {fmt(x)} vs {b_name} {fmt(y)} {unit}: "
    if unit == "ms" and max(x, y) < SAME_TIME * min(x, y):
        return head + f"about the same (within {SAME_TIME:g}×)"
    word = "faster" if unit == "ms" else "fewer"
    return head + (f"{a_name} {_x(y, x)} {word}" if x <= y else f"{b_name} {_x(x, y)} {word}")


def _finding_ccd_boundary(acc) -> tuple:
    """Welman: CCD wins near the boundary (against the transpose)."""
    sets = acc["sets"]
    if "boundary" not in sets or not {"ccd", "transpose"} <= set(sets["boundary"]["methods"]):
        return None
    s = sets["boundary"]
    ref = acc["settings"]["reference_accuracy"]
    tight = acc["settings"]["accuracies"][-1]
    rc, rt = _row(s, "ccd", ref), _row(s, "transpose", ref)
    tc, tt = _row(s, "ccd", tight), _row(s, "transpose", tight)
    ccd_wins = rc["time_ms_median"] < rt["time_ms_median"] and rc["success"] >= rt["success"]
    ranking = acc["findings"]["per_set"]["boundary"]["ranking_at_reference"]
    best = ranking[0] if ranking else None
    verdict = ("**Against the transpose: " + ("yes" if ccd_wins else "no") + ". Against every method: "
               + ("yes" if best == "ccd" else "no") + "**")
    text = (f"At 98–99 % of the reach, at {_acc(ref)} m: time {_vs('CCD', rc, 'transpose', rt, 'time_ms_median', 'ms')}; "
            f"iterations {_vs('CCD', rc, 'transpose', rt, 'iterations_median', 'iterations')}. At {_acc(tight)} m: "
            f"time {_vs('CCD', tc, 'transpose', tt, 'time_ms_median', 'ms')}; iterations "
            f"{_vs('CCD', tc, 'transpose', tt, 'iterations_median', 'iterations')}. Iterations per digit: CCD "
            f"{_signed(_per_digit(s['methods']['ccd']))}, transpose {_signed(_per_digit(s['methods']['transpose']))}.")
    if ranking:
        text += (f" Ranking by median time at {_acc(ref)} m (methods that solved every goal): "
                 + ", ".join(ranking) + f"; the fastest, {best}, takes "
                 + f"{_ms(_row(s, best, ref)['time_ms_median'])} ms in {_row(s, best, ref)['iterations_median']:.0f} "
                 + "iterations.")
        if best != "ccd" and rc["success"] == 1.0:
            text += f" CCD is {_x(rc['time_ms_median'], _row(s, best, ref)['time_ms_median'])} slower than {best}."
    text += " Welman compared only CCD and the transpose."
    if "inside" in sets and {"ccd", "transpose"} <= set(sets["inside"]["methods"]):
        si = sets["inside"]
        ic, it_ = _row(si, "ccd", ref), _row(si, "transpose", ref)
        jc, jt = _row(si, "ccd", tight), _row(si, "transpose", tight)
        text += (f" Inside the workspace, at {_acc(ref)} m: time {_vs('CCD', ic, 'transpose', it_, 'time_ms_median', 'ms')}"
                 f" ({ic['iterations_median']:.0f} vs {it_['iterations_median']:.0f} iterations); at {_acc(tight)} m: "
                 f"time {_vs('CCD', jc, 'transpose', jt, 'time_ms_median', 'ms')} ({jc['iterations_median']:.0f} vs "
                 f"{jt['iterations_median']:.0f} iterations).")
        per_it = [r["time_ms_median"] / max(r["iterations_median"], 1.0) for r in (jc, jt)]
        if per_it[0] > per_it[1]:
            text += (f" A CCD sweep costs {_x(per_it[0], per_it[1])} a transpose iteration here, so fewer iterations "
                     f"need not mean less time.")
    return ("CCD wins near the boundary", verdict, text)


def _finding_distal(acc) -> tuple:
    """Welman: CCD moves the distal links most, the transpose spreads the motion."""
    ref = acc["settings"]["reference_accuracy"]
    yes, no, parts = [], [], []
    for sname, s in acc["sets"].items():
        rc, rt = _row(s, "ccd", ref), _row(s, "transpose", ref)
        if not rc or not rt or rc["distal_share_median"] is None or rt["distal_share_median"] is None:
            continue
        c, t = rc["distal_share_median"], rt["distal_share_median"]
        (yes if c > t + DISTAL_MARGIN else no).append(sname)
        parts.append(f"{sname} CCD {c:.2f} vs transpose {t:.2f} (even spread {s['uniform_distal_share']:.2f}; "
                     f"centroid {rc['motion_centroid_median']:.2f} vs {rt['motion_centroid_median']:.2f})")
    if not parts:
        return None
    verdict = "**" + (f"Yes on {', '.join(yes)}" if yes else "No") + (f"; no on {', '.join(no)}" if yes and no else "") \
        + "**"
    text = f"Distal share at {_acc(ref)} m: " + "; ".join(parts) + "."
    if "boundary" in acc["sets"]:
        shares = [r["distal_share_median"] for m in acc["sets"]["boundary"]["methods"]
                  for r in [_row(acc["sets"]["boundary"], m, ref)] if r and r["distal_share_median"] is not None]
        if shares:
            text += (f" Near the boundary every method ends in nearly the same stretched pose, so the geometry fixes "
                     f"the motion: all methods {min(shares):.2f}–{max(shares):.2f}.")
    t_in = _row(acc["sets"].get("inside", {"methods": {}}), "transpose", ref) if "inside" in acc["sets"] else None
    if t_in and t_in["distal_share_median"] is not None:
        even = acc["sets"]["inside"]["uniform_distal_share"]
        lean = "towards the base" if t_in["distal_share_median"] < even else "towards the tip"
        text += (f" The transpose does not spread the motion evenly either: inside it leans {lean} "
                 f"({t_in['distal_share_median']:.2f} vs {even:.2f}), as it weights each joint by its lever arm.")
    return ("CCD moves the distal links, the transpose spreads the motion", verdict, text)


def _other_observations(acc) -> list:
    ref = acc["settings"]["reference_accuracy"]
    tight = acc["settings"]["accuracies"][-1]
    L = []
    for sname, s in acc["sets"].items():
        if "fabrik" not in s["methods"]:
            continue
        r = _row(s, "fabrik", tight)
        if r["success"] < 1.0:
            L.append(f"- **FABRIK** on {sname}: {r['success']:.0%} of the goals at {_acc(tight)} m within the "
                     f"iteration cap (median {r['iterations_median']:.0f} iterations).")
    for sname, s in acc["sets"].items():
        if {"gauss-seidel", "lm"} <= set(s["methods"]):
            g, m = _row(s, "gauss-seidel", ref), _row(s, "lm", ref)
            L.append(f"- **Gauss–Seidel** on {sname} at {_acc(ref)} m: {g['iterations_median']:.0f} iterations "
                     f"vs lm {m['iterations_median']:.0f}, {_ms(g['time_ms_median'])} vs {_ms(m['time_ms_median'])} ms; "
                     f"{_signed(_per_digit(s['methods']['gauss-seidel']))} iterations per digit.")
    return L


def _findings_section(acc) -> list:
    rows = [f for f in (_finding_transpose(acc), _finding_ccd_boundary(acc), _finding_distal(acc)) if f]
    L = ["### The sources' findings: what reproduces", "",
         "Every verdict and comparison below is computed from the numbers of this run "
         "(`invkin.bench.page`).", "",
         "| finding (Welman 1993, SEEDS §5) | reproduced? | numbers (this run) |", "|---|---|---|"]
    L += [f"| {a} | {b} | {c} |" for a, b, c in rows]
    L.append("")
    other = _other_observations(acc)
    if other:
        L += ["Other observations (not claims of the sources):", ""] + other + [""]
    return L


# ------------------------------------------------------------------ section 2: suite

SUITE_INTRO = """\
## 2. `invkin bench suite`: the TRAC-IK protocol, every method and the peers

The protocol of `../shared/peers/REPORT.md` §2 (Beeson & Ames 2015):

- **Targets**: N = {n} joint vectors per robot, uniform inside the limits, drawn with
  `default_rng(robot_seed(seed, name))`, the formula of the peers' `bench_peers.py`. With the
  default `--seed 2015` these are exactly the peers' targets: the command compares them with the
  peers' saved `targets_<robot>.npz` and records `same_targets`{same}. Goal = FK of the catalog tip
  (`URDF_MODELS[name][2]`; seed8dof: `effector`). Pose targets for panda, ur5, iiwa14,
  baxter_left, g1_left_arm; position-only for seed8dof.
- **Start** `robot.neutral()` (mid-range of the limits; all-zero, stretched and singular for ur5,
  iiwa14 and seed8dof). **Budget** {budget:g} ms (`timeout={timeout:g}`). Inner tolerances 1e-6 m / 1e-6 rad.
  Restart seed = target index.
- **Success**: the returned q is checked with FK, never by the solver's flag: position error < 1e-5 m,
  rotation angle < 1e-5 rad (pose targets), and inside the limits (tolerance 1e-6).
- **Timing**: `perf_counter` around `solve`, with the goal objects built before the clock starts,
  after 5 warm-up solves (Numba compilation).
- **Peers**: with `--peers-python` (the peers' venv, `bash ../shared/peers/install.sh`) and
  `--peers-dir` (default `../shared/peers` if it exists), the command runs `bench_peers.py` as a
  subprocess with the same robots, N, seed and budget, passes its progress on to stderr and merges
  the rows of its `summary.json` as `peer:<name>`. `--peer-solvers` picks some of its solvers.
  Without a peers venv it prints one line (`peers: not run — …`) and continues. The peers run
  *after* invkin, in another process, so their times see a different machine load.

![TRAC-IK protocol: success and median time](img/bench_suite.png)

Success (1e-5 m, 1e-5 rad, inside the limits) / median ms per solve, N = {n} per robot:
"""


def _suite_solvers(suite):
    names = []
    for info in suite["robots"].values():
        for s in info["solvers"]:
            if s not in names:
                names.append(s)
    mine = _order([s for s in names if not s.startswith("peer:")])
    return mine, [s for s in names if s.startswith("peer:")]


def _label(s):
    return s if s.startswith("peer:") else f"invkin `{s}`"


def _ok(e):
    return e is not None and "unsupported" not in e and e.get("success_strict") is not None


def _suite_tables(suite) -> list:
    robots = list(suite["robots"])
    mine, peers = _suite_solvers(suite)
    head = ["| solver | " + " | ".join(robots) + " |", "|---|" + "---:|" * len(robots)]
    L = list(head)
    for s in mine + peers:
        cells = []
        for r in robots:
            e = suite["robots"][r]["solvers"].get(s)
            cells.append(f"{_pct(e['success_strict'])} / {e['time_ms_median']:.3f}" if _ok(e) else "n/a")
        L.append(f"| {_label(s)} | " + " | ".join(cells) + " |")
    strong = _strongest_peers(suite, 2)
    L += ["", "Mean / p95 ms of the invkin methods" + (" and the two strongest peers:" if strong else ":"), ""]
    L += head
    for s in mine + strong:
        cells = []
        for r in robots:
            e = suite["robots"][r]["solvers"].get(s)
            cells.append(f"{e['time_ms_mean']:.2f} / {e['time_ms_p95']:.2f}" if _ok(e) else "n/a")
        L.append(f"| {_label(s)} | " + " | ".join(cells) + " |")
    L.append("")
    return L


def _mean_success(suite, s):
    """(mean success over the robots it supports, robots supported)."""
    xs = [info["solvers"][s]["success_strict"] for info in suite["robots"].values() if _ok(info["solvers"].get(s))]
    return (sum(xs) / len(xs), len(xs)) if xs else (0.0, 0)


def _strongest_peers(suite, k):
    _, peers = _suite_solvers(suite)
    n = len(suite["robots"])

    def key(s):
        mean, count = _mean_success(suite, s)
        return (-(mean * count / n), s)

    return sorted(peers, key=key)[:k]


def _stats(suite, s, key):
    return [info["solvers"][s][key] for info in suite["robots"].values() if _ok(info["solvers"].get(s))]


def _suite_findings(suite) -> list:
    mine, _ = _suite_solvers(suite)
    full = [s for s in mine if _mean_success(suite, s)[1] == len(suite["robots"])]
    if not full:
        return []
    by_worst = sorted(full, key=lambda s: (-min(_stats(suite, s, "success_strict")),
                                           sorted(_stats(suite, s, "time_ms_median"))[len(suite["robots"]) // 2]))
    pct = lambda v: f"{100 * v:.1f}"  # noqa: E731 - local formatter
    L = ["What this shows (computed from the tables):", ""]
    best = by_worst[0]
    L.append(f"- **{best}** is the most robust invkin method: ≥ {pct(min(_stats(suite, best, 'success_strict')))} % "
             f"on every robot, median {_range(_stats(suite, best, 'time_ms_median'), lambda v: f'{v:.2f}')} ms, mean "
             f"{_range(_stats(suite, best, 'time_ms_mean'), lambda v: f'{v:.2f}')} ms, p95 ≤ "
             f"{max(_stats(suite, best, 'time_ms_p95')):.2f} ms.")
    strong = _strongest_peers(suite, 2)
    if strong:
        p = strong[0]
        L.append(f"- The strongest peer, {p}, scored {_range(_stats(suite, p, 'success_strict'), pct)} % with a median "
                 f"of {_range(_stats(suite, p, 'time_ms_median'), lambda v: f'{v:.2f}')} ms and a mean of "
                 f"{_range(_stats(suite, p, 'time_ms_mean'), lambda v: f'{v:.2f}')} ms (its process ran after "
                 f"invkin's, under another machine load).")
    for s in by_worst[1:]:
        L.append(f"- **{s}**: {_range(_stats(suite, s, 'success_strict'), pct)} %, median "
                 f"{_range(_stats(suite, s, 'time_ms_median'), lambda v: f'{v:.2f}')} ms.")
    partial = [s for s in mine if s not in full]
    if partial:
        L.append(f"- {', '.join(f'**{s}**' for s in partial)}: only some robots (fabrik takes position goals, "
                 f"analytic two-bone arms); \"n/a\" elsewhere.")
    oob = sum(info["solvers"][s].get("n_out_of_limits", 0) or 0 for info in suite["robots"].values()
              for s in mine if _ok(info["solvers"].get(s)))
    claimed = sum(info["solvers"][s].get("n_claimed_but_failed_strict", 0) or 0 for info in suite["robots"].values()
                  for s in mine if _ok(info["solvers"].get(s)))
    L.append(f"- invkin answers outside the joint limits: {oob}; answers claimed as success that fail the FK check: "
             f"{claimed}.")
    L.append("")
    return L


# ------------------------------------------------------------------ the page


def _run_line(meta, res, what):
    v = meta.get("versions", {})
    load = meta.get("loadavg_start"), meta.get("loadavg_end")
    ltxt = (f", load average {load[0][0]:.1f} at the start and {load[1][0]:.1f} at the end"
            if load[0] and load[1] else "")
    return (f"- `{res.get('command') or 'invkin bench ' + what}`: {meta.get('date_utc', '?')} UTC, invkin "
            f"`{meta.get('git_commit') or '?'}`, Python {meta.get('python', '?')}, NumPy {v.get('numpy', '?')}, "
            f"Numba {v.get('numba', '?')}, {meta.get('cpu_count', '?')} CPUs{ltxt}, "
            f"{seconds(res.get('total_wall_s', res.get('wall_s', 0)))}.")


def render_page(acc: dict, suite: dict | None = None) -> str:
    """docs/benchmarks.md from the JSON of ``invkin bench accuracy`` (and ``suite``); the full JSON and
    its :func:`trim` copy give the same page."""
    acc = trim(acc)
    suite = None if suite is None else trim(suite)
    st = acc["settings"]
    L = ["# Benchmarks: `invkin bench`", "",
         "<!-- Generated by `invkin bench page` from benchmarks/results/*.json: do not edit by hand. -->", "",
         "Two commands compare the IK methods. Both print tables and a one-line summary on stdout, show a",
         "progress bar (tqdm) on stderr, write every number with `--json PATH` and PNG + SVG plots with",
         "`--out DIR`, use fixed seeds (`--seed`), and have a `--quick` smoke-test mode. A third writes",
         "this page from their JSON.", "",
         "```bash",
         "invkin bench accuracy --json acc.json --out docs/img/       # Welman's comparison",
         "invkin bench suite --json suite.json --out docs/img/ \\",
         "    --peers-python ~/.cache/invkin-peers-env/bin/python      # TRAC-IK protocol with the peers",
         "invkin bench page acc.json suite.json --keep benchmarks/results -o docs/benchmarks.md",
         "invkin bench suite --quick --robots panda,ur5 --methods lm,pinv   # a smoke test",
         "```", "",
         "The numbers below come from these runs (their JSON, without the per-goal lists, is in",
         "`benchmarks/results/`):", "",
         _run_line(acc.get("meta", {}), acc, "accuracy")]
    if suite is not None:
        L.append(_run_line(suite.get("meta", {}), suite, "suite"))
    L += ["",
          "Absolute times move by 1.5–2× between runs on a shared machine; compare within one run only.",
          "Iteration counts and success rates of the accuracy benchmark are deterministic (`timeout=None`).", ""]
    uns = sorted({m for s in acc["sets"].values() for m in s["unsupported"]})
    utxt = (" " + ", ".join(f"`{m}`" for m in uns) + " declines these chains (two-bone arms only) and is left out."
            if uns else "")
    L.append(ACCURACY_INTRO.format(goals=st["goals_per_set"], seed=st["seed"], max_it=st["max_iterations"],
                                   repeats=st["repeats"], acc_lo=_acc(st["accuracies"][0]),
                                   acc_hi=_acc(st["accuracies"][-1]), unsupported=utxt))
    L += _accuracy_tables(acc)
    L += ["Times of a few hundredths of a ms are mostly the fixed cost of one `solve` call (goal compilation,",
          "checks); the iterations show the convergence itself.", "",
          "![share of the joint motion on the distal third](img/bench_distal.png)", ""]
    L += _distal_table(acc)
    L += _findings_section(acc)
    if suite is not None:
        sst = suite["settings"]
        same = suite.get("peers", {}).get("same_targets") or {}
        stxt = (" (true for every robot in the run below)" if same and all(same.values())
                else " (false for some robots in the run below!)" if same else "")
        L.append(SUITE_INTRO.format(n=sst["n"], same=stxt, budget=sst["budget_ms"], timeout=sst["budget_ms"] / 1e3))
        L += _suite_tables(suite)
        L += _suite_findings(suite)
    L += ["## 3. Reproducing, and what the JSON holds", "",
          "Run the commands at the top; `invkin bench page` rewrites this page (and `--check` says whether",
          "the page matches its JSON; `tests/test_bench_page.py` checks the committed pair). Every number",
          "here is in the `--json` output:", "",
          "- accuracy: `settings`, `meta` (date, versions, load average), and per goal set `sets.<set>`:",
          "  the robot, start q0, targets, `uniform_distal_share`, `unsupported` methods and, per method, one",
          "  row per accuracy (success, median/mean time, median/mean iterations, median error, distal share,",
          "  centroid, and `per_goal` lists: iterations, time, error, restarts, status, |Δq| per joint);",
          "  `findings`: iterations per digit, time ratio tightest/loosest, the fastest method at 1e-6 and",
          "  the CCD/transpose ratios per set.",
          "- suite: `settings`, `meta`, per robot the targets (`q_goal`), per solver the summary (success",
          "  strict/loose/within budget, time median/mean/p95, median errors, out-of-limits and",
          "  claimed-but-failed counts, status counts) and `per_target` lists; `peers` (command, wall time,",
          "  `same_targets`, the peers' metadata). Peer rows carry `\"source\": \"peer\"`.", "",
          "`--quick` runs in a few seconds (accuracy: 3 goals, 1e-2/1e-4/1e-6, 2000 iterations; suite:",
          "N = 20); `tests/test_bench.py` runs both through the console script and checks the JSON and the",
          "plots.", ""]
    return "\n".join(L)
