"""``invkin bench suite``: the TRAC-IK protocol for every method on the bundled fixed-base chains
(:data:`SUITE_ROBOTS`: panda, ur5, iiwa14, baxter_left, g1_left_arm, seed8dof), with the peer
libraries of ``../shared/peers`` in the same run when their venv is available.

Protocol (Beeson & Ames 2015; ``../shared/peers/REPORT.md`` §2):

* targets: N joint vectors drawn uniformly inside the limits (continuous joints in [−π, π]) with
  ``numpy.random.default_rng(robot_seed(seed, name))`` — the very formula of the peers'
  ``bench_peers.py``, so with the default ``seed = 2015`` the targets are identical to theirs
  (checked when the peers run: ``same_targets``); goal = FK of the catalog tip
  (``URDF_MODELS[name][2]``; seed8dof: ``effector``, position only);
* seed configuration ``robot.neutral()`` (mid-range of the limits), budget 5 ms (``timeout``),
  inner tolerances 1e-6 m / 1e-6 rad (as every peer's: 10× tighter than the success test);
  ``seed=<target index>`` for the restarts;
* success: the returned q, re-evaluated with FK (never the solver's flag), has position error
  < 1e-5 m, rotation angle < 1e-5 rad (pose targets) and lies inside the limits (tolerance 1e-6);
* timing: ``time.perf_counter()`` around ``solve`` (goal objects built before the clock starts,
  as the peers' harness converts goals before it); five warm-up solves on other targets first.
"""
from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import tempfile
import time
import zlib

import numpy as np

from ..errors import InvkinError
from ..goals import Pose, Position
from ..solve import solve
from ..solvers import methods as all_methods
from . import seconds

__all__ = ["SUITE_ROBOTS", "suite_tip", "robot_seed", "make_targets", "run_suite", "run_peers", "format_suite",
           "suite_summary_line", "STRICT", "LOOSE"]

SUITE_ROBOTS = ("panda", "ur5", "iiwa14", "baxter_left", "g1_left_arm", "seed8dof")
STRICT, LOOSE = 1e-5, 1e-3
INNER_TOL = 1e-6
LIMIT_TOL = 1e-6
N_WARMUP = 5
DEFAULT_SEED = 2015


def suite_tip(name: str) -> tuple:
    """(tip frame, kind) of a suite robot: the catalog tip and 'pose'; seed8dof: effector, position."""
    from ..model.catalog import URDF_MODELS

    if name == "seed8dof":
        return "effector", "position"
    return URDF_MODELS[name][2], "pose"


def robot_seed(base_seed: int, name: str) -> int:
    """bench_peers.robot_seed: the per-robot sampling seed."""
    return (int(base_seed) * 1000003 + zlib.crc32(name.encode())) % (2**32)


def make_targets(robot, n: int, seed: int, tip: str):
    """(Q (n, dof), T (n, 4, 4)): uniform configurations inside the limits and their tip poses."""
    cont = np.array([t == "continuous" for t in robot.joint_types_per_dof])
    lo = np.where(cont | ~np.isfinite(robot.lower), -math.pi, robot.lower)
    hi = np.where(cont | ~np.isfinite(robot.upper), math.pi, robot.upper)
    Q = np.random.default_rng(seed).uniform(lo, hi, size=(n, robot.dof))
    T = robot.fk(np.ascontiguousarray(Q), tip) if n else np.zeros((0, 4, 4))
    return Q, T


def rot_angle(R) -> float:
    """Angle of a rotation matrix, accurate near 0 (atan2 form, as the peers' robots.rot_angle)."""
    s = 0.5 * math.sqrt((R[2, 1] - R[1, 2]) ** 2 + (R[0, 2] - R[2, 0]) ** 2 + (R[1, 0] - R[0, 1]) ** 2)
    c = 0.5 * (R[0, 0] + R[1, 1] + R[2, 2] - 1.0)
    return math.atan2(s, c)


def _goal(tip, kind, T):
    return [Pose(tip, T)] if kind == "pose" else [Position(tip, T[:3, 3])]


def _summarize(t_ms, pe, re, inlim, claimed, kind, budget_ms) -> dict:
    rot_ok = (lambda tol: re < tol) if kind == "pose" else (lambda tol: np.ones_like(pe, bool))
    acc_s = (pe < STRICT) & rot_ok(STRICT)
    acc_l = (pe < LOOSE) & rot_ok(LOOSE)
    ok = acc_s & inlim
    return {
        "n": int(t_ms.size),
        "success_strict": float(np.mean(ok)),
        "success_loose": float(np.mean(acc_l & inlim)),
        "success_strict_within_budget": float(np.mean(ok & (t_ms <= budget_ms))),
        "n_out_of_limits": int((~inlim).sum()),
        "n_claimed_but_failed_strict": int((claimed & ~ok).sum()),
        "time_ms_median": float(np.median(t_ms)),
        "time_ms_mean": float(np.mean(t_ms)),
        "time_ms_p95": float(np.percentile(t_ms, 95)),
        "pos_err_median": float(np.median(pe)),
        "rot_err_median": float(np.median(re)) if kind == "pose" else None,
    }


def _progress(total, desc, enabled):
    from .accuracy import _progress as p

    return p(total, desc, enabled)


def run_suite(methods=None, robots=SUITE_ROBOTS, n: int = 1000, budget_ms: float = 5.0, seed: int = DEFAULT_SEED,
              progress: bool = True) -> dict:
    """Every method on every robot; returns a JSON-able dict (per-target arrays included)."""
    from ..model import load_robot

    methods = list(all_methods() if methods is None else methods)
    budget_s = budget_ms / 1e3
    res = {"benchmark": "suite",
           "settings": dict(methods=methods, robots=list(robots), n=n, budget_ms=budget_ms, seed=seed,
                            inner_tolerance=INNER_TOL, strict=STRICT, loose=LOOSE, limit_tol=LIMIT_TOL,
                            start="robot.neutral()", restart_seed="target index"),
           "robots": {}}
    t_all = time.perf_counter()
    bar = _progress(len(methods) * len(robots) * n, "bench suite", progress)
    for rname in robots:
        robot = load_robot(rname)
        tip, kind = suite_tip(rname)
        rs = robot_seed(seed, rname)
        Q, T = make_targets(robot, n, rs, tip)
        _, T_warm = make_targets(robot, N_WARMUP, rs + 1, tip)
        q_seed = robot.neutral()
        info = {"dof": robot.dof, "tip": tip, "kind": kind, "n_targets": n, "sampling_seed": rs,
                "q_seed": q_seed.tolist(), "joint_names": list(robot.joint_names), "q_goal": Q.tolist(),
                "solvers": {}}
        for m in methods:
            entry = {"solver": m, "source": "invkin"}
            try:
                for k, Tw in enumerate(T_warm):  # Numba compilation, first-call caches
                    solve(robot, _goal(tip, kind, Tw), q0=q_seed, method=m, timeout=budget_s,
                          position_tolerance=INNER_TOL, rotation_tolerance=INNER_TOL, seed=100_000 + k)
            except InvkinError as exc:
                entry["unsupported"] = f"{type(exc).__name__}: {exc}"
                info["solvers"][m] = entry
                if bar is not None:
                    bar.update(n)
                continue
            t_ms = np.zeros(n)
            pe = np.zeros(n)
            re = np.zeros(n)
            inlim = np.zeros(n, bool)
            claimed = np.zeros(n, bool)
            its = np.zeros(n, np.int64)
            restarts = np.zeros(n, np.int64)
            status = {}
            perf = time.perf_counter
            for i in range(n):
                goal = _goal(tip, kind, T[i])
                t1 = perf()
                r = solve(robot, goal, q0=q_seed, method=m, timeout=budget_s, position_tolerance=INNER_TOL,
                          rotation_tolerance=INNER_TOL, seed=i)
                t_ms[i] = 1e3 * (perf() - t1)
                Ts = robot.fk(r.q, tip)
                pe[i] = float(np.linalg.norm(Ts[:3, 3] - T[i, :3, 3]))
                re[i] = rot_angle(T[i, :3, :3].T @ Ts[:3, :3]) if kind == "pose" else 0.0
                inlim[i] = bool(robot.within_limits(r.q, LIMIT_TOL))
                claimed[i] = bool(r.success)
                its[i] = r.iterations
                restarts[i] = r.restarts
                status[r.status.value] = status.get(r.status.value, 0) + 1
                if bar is not None:
                    bar.update(1)
            entry.update(_summarize(t_ms, pe, re, inlim, claimed, kind, budget_ms))
            entry.update(iterations_median=float(np.median(its)) if n else None,
                         restarts_median=float(np.median(restarts)) if n else None, status_counts=status,
                         per_target={"time_ms": t_ms.tolist(), "pos_err": pe.tolist(),
                                     "rot_err": re.tolist() if kind == "pose" else None,
                                     "within_limits": inlim.tolist(), "claimed": claimed.tolist(),
                                     "iterations": its.tolist()})
            info["solvers"][m] = entry
        res["robots"][rname] = info
    if bar is not None:
        bar.close()
    res["wall_s"] = time.perf_counter() - t_all
    return res


# ------------------------------------------------------------------ peers


def default_peers_dir():
    """../shared/peers relative to the current directory, if it exists."""
    p = os.path.abspath(os.path.join(os.getcwd(), "..", "shared", "peers"))
    return p if os.path.isdir(p) else None


def run_peers(python, peers_dir, robots, n: int, seed: int, budget_ms: float, solvers=None, log=None) -> dict:
    """Run the peers' ``bench_peers.py`` with ``python`` on the same robots, N, seed and budget.

    Returns ``{"available": True, "summary": <its summary.json>, "same_targets": {robot: bool},
    "command": [...]}`` or ``{"available": False, "reason": "..."}``; never raises for a missing
    or failing peer setup.
    """
    log = log or (lambda s: print(s, file=sys.stderr, flush=True))
    if not python:
        return {"available": False, "reason": "no --peers-python given"}
    if not (os.path.isfile(python) and os.access(python, os.X_OK)):
        return {"available": False, "reason": f"--peers-python {python}: not an executable file"}
    if not peers_dir:
        return {"available": False, "reason": "no --peers-dir given and ../shared/peers does not exist here"}
    script = os.path.join(peers_dir, "bench_peers.py")
    if not os.path.isfile(script):
        return {"available": False, "reason": f"{script} does not exist"}
    with tempfile.TemporaryDirectory(prefix="invkin-bench-peers-") as out:
        cmd = [python, script, "--robots", ",".join(robots), "--n", str(n), "--seed", str(seed),
               "--budget-ms", f"{budget_ms:g}", "--out", out]
        if solvers:
            cmd += ["--solvers", ",".join(solvers)]
        log("peers: " + " ".join(cmd))
        t0 = time.perf_counter()
        try:
            proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=peers_dir)
        except OSError as exc:
            return {"available": False, "reason": f"cannot start {python}: {exc}"}
        tail = []
        for line in proc.stdout:  # its progress lines, passed on to stderr
            line = line.rstrip("\n")
            if line.strip():
                log(f"  peers| {line}")
                tail = (tail + [line])[-5:]
        rc = proc.wait()
        wall = time.perf_counter() - t0
        path = os.path.join(out, "summary.json")
        if rc != 0 or not os.path.isfile(path):
            return {"available": False, "reason": f"bench_peers.py exited with {rc}: " + " / ".join(tail[-2:])}
        with open(path) as f:
            summary = json.load(f)
        same = {}
        for rname in robots:
            tp = os.path.join(out, f"targets_{rname}.npz")
            if os.path.isfile(tp):
                with np.load(tp) as z:
                    same[rname] = {"q_goal": np.array(z["q_goal"]), "joint_names": [str(x) for x in z["joint_names"]]}
    return {"available": True, "command": cmd, "wall_s": wall, "summary": summary, "_targets": same}


def merge_peers(res, peers) -> None:
    """Put the peers' rows (labelled ``peer:<name>``) beside invkin's, and check the targets."""
    res["peers"] = {k: v for k, v in peers.items() if k not in ("summary", "_targets")}
    if not peers.get("available"):
        return
    res["peers"]["meta"] = peers["summary"].get("meta", {})
    res["peers"]["same_targets"] = {}
    for rname, info in res["robots"].items():
        pr = peers["summary"].get("robots", {}).get(rname)
        if pr is None:
            continue
        tg = peers.get("_targets", {}).get(rname)
        if tg is not None:
            mine = np.array(info["q_goal"])
            same = (tg["joint_names"] == info["joint_names"] and tg["q_goal"].shape == mine.shape
                    and float(np.abs(tg["q_goal"] - mine).max(initial=0.0)) <= 1e-12)
            res["peers"]["same_targets"][rname] = bool(same)
        for sname, s in pr.get("solvers", {}).items():
            row = {"solver": sname, "source": "peer"}
            if "skipped" in s or "error" in s:
                row["unsupported"] = s.get("skipped") or s.get("error")
            else:
                for k in ("n", "success_strict", "success_loose", "success_strict_within_budget", "n_out_of_limits",
                          "n_claimed_but_failed_strict", "time_ms_median", "time_ms_mean", "time_ms_p95",
                          "pos_err_median", "rot_err_median", "budget_note"):
                    row[k] = s.get(k)
            info["solvers"][f"peer:{sname}"] = row


# ------------------------------------------------------------------ text output


def _e(x):
    if x is None:
        return "-"
    return f"{x:.1e}" if math.isfinite(x) else "inf"


def _pct(x):
    return "-" if x is None else f"{100 * x:.1f}%"


def format_suite(res) -> str:
    st = res["settings"]
    L = []
    robots = list(res["robots"])
    L.append(f"success at 1e-5 m / 1e-5 rad inside the limits / median ms per solve "
             f"(N = {st['n']}, budget {st['budget_ms']:g} ms, seed {st['seed']}; peer rows from bench_peers.py, "
             "a separate process run right after)")
    names = []
    for info in res["robots"].values():
        for s in info["solvers"]:
            if s not in names:
                names.append(s)
    w = max([len(x) for x in names] + [10]) + 1
    head = f"{'solver':<{w}}" + "".join(f"{r:>20}" for r in robots)
    L.append(head)
    L.append("-" * len(head))
    for s in names:
        cells = []
        for r in robots:
            e = res["robots"][r]["solvers"].get(s)
            if e is None:
                cells.append(f"{'-':>20}")
            elif "unsupported" in e:
                cells.append(f"{'unsupported':>20}")
            else:
                cells.append(f"{_pct(e['success_strict']) + ' / ' + format(e['time_ms_median'], '.3f'):>20}")
        L.append(f"{s:<{w}}" + "".join(cells))
    for rname, info in res["robots"].items():
        L.append(f"\n{rname}: {info['dof']} DOF, tip {info['tip']!r}, {info['kind']} targets, N = {info['n_targets']}")
        head = (f"{'solver':<{w}}{'success':>9}{'loose':>8}{'<=budget':>9}{'med ms':>9}{'mean ms':>9}{'p95 ms':>9}"
                f"{'pos err':>9}{'rot err':>9}{'oob':>5}{'claimed-fail':>13}")
        L.append(head)
        L.append("-" * len(head))
        for s, e in info["solvers"].items():
            if "unsupported" in e:
                L.append(f"{s:<{w}}  unsupported: {e['unsupported'][:110]}")
                continue
            cf = e.get("n_claimed_but_failed_strict")
            L.append(f"{s:<{w}}{_pct(e['success_strict']):>9}{_pct(e['success_loose']):>8}"
                     f"{_pct(e['success_strict_within_budget']):>9}{e['time_ms_median']:>9.3f}{e['time_ms_mean']:>9.3f}"
                     f"{e['time_ms_p95']:>9.3f}{_e(e['pos_err_median']):>9}{_e(e['rot_err_median']):>9}"
                     f"{e['n_out_of_limits']:>5}{'-' if cf is None else cf:>13}")
    return "\n".join(L)


def suite_summary_line(res) -> str:
    st = res["settings"]
    best = None
    for m in st["methods"]:
        rates = [info["solvers"][m]["success_strict"] for info in res["robots"].values()
                 if m in info["solvers"] and "success_strict" in info["solvers"][m]]
        if len(rates) == len(res["robots"]) and rates:
            worst = min(rates)
            if best is None or worst > best[1]:
                best = (m, worst)
    peers = res.get("peers", {})
    if peers.get("available"):
        same = peers.get("same_targets", {})
        n_solvers = len({s for info in res["robots"].values() for s in info["solvers"] if s.startswith("peer:")})
        ptxt = (f"peers: {n_solvers} solvers merged"
                + (" (same targets)" if same and all(same.values()) else " (targets differ!)" if same else ""))
    else:
        ptxt = f"peers: not run — {peers.get('reason', 'not requested')}"
    btxt = f"; most robust: {best[0]} (≥ {100 * best[1]:.1f}% on every robot)" if best else ""
    wall = res.get("total_wall_s", res["wall_s"])
    return (f"suite: {len(st['methods'])} methods × {len(st['robots'])} robots × N = {st['n']} in "
            f"{seconds(wall)}{btxt}; {ptxt}")
