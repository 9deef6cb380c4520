#!/usr/bin/env python3
"""IK suite, TRAC-IK protocol: every invkin method beside TRAC-IK and roboticstoolbox ik_LM.

Run it with the peers' venv (``bash ../shared/peers/install.sh``; invkin installed there with
``pip install --no-deps -e .``), from anywhere:

    ~/.cache/invkin-peers-env/bin/python benchmarks/ik_suite.py                 # N = 1000, all methods
    ~/.cache/invkin-peers-env/bin/python benchmarks/ik_suite.py --quick --robots panda
    ~/.cache/invkin-peers-env/bin/python benchmarks/ik_suite.py --methods lm --json out.json

Protocol (``../shared/peers/REPORT.md`` §2), on the exact saved targets
``../shared/peers/results/targets_<robot>.npz``: the first N goals ``T_goal`` (pose targets; seed8dof:
position-only), every solver starts from the same seed ``q_seed`` (mid-range of the limits), 5 ms
budget per target where the API has one (invkin ``timeout``, TRAC-IK's own; roboticstoolbox has
none: default 30 iterations x 100 restarts). invkin runs with ``position_tolerance =
rotation_tolerance = 1e-6`` and ``seed=<target index>``. Five warm-up solves on other targets
precede every solver's timed run (Numba compiles on the first call).

Timing: ``time.perf_counter()`` around the single solve call. Goal construction (``ik.Pose``,
TRAC-IK's quaternion) is done before the clock starts, as the peers' harness does for every
library; everything ``ik.solve`` does (goal compilation included) is timed.

Success is verified independently with the peers' reference FK (Pinocchio, or the numpy
``robots.ChainFK`` if Pinocchio is missing) and ``robots.pose_errors``: position error < 1e-5 m,
rotation angle < 1e-5 rad (dropped for position-only targets) and every joint inside its limits
(tolerance 1e-6). The peers run through their adapters in ``../shared/peers/adapters.py``,
unchanged, in the same process and run; the metrics are ``bench_peers.summarize``'s.

Also: if ``ik.solve_many`` exists, poses per second of a ``solve_many`` call on the same N
targets (2 threads; median and best of ``--sm-repeats`` calls) against a Python loop of
rtb_ik_LM calls (1 / its mean per-call time).
"""
from __future__ import annotations

import os

os.environ.setdefault("INVKIN_COMPILE", "wait")  # time machine code, not first calls on the interpreter (invkin._tiers)

for _v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_v, "1")  # single-threaded BLAS: stable timings on a 2-core box

import argparse
import gc
import importlib.metadata as md
import inspect
import json
import math
import platform
import sys
import time
import warnings
from pathlib import Path

import numpy as np

import invkin as ik
from _repo import git_state  # noqa: E402 - benchmarks/_repo.py, beside this script

REPO = Path(__file__).resolve().parent.parent
PEERS = REPO.parent / "shared" / "peers"  # the repository root's parent holds shared/
TARGETS = PEERS / "results"
sys.path.insert(0, str(PEERS))

import adapters  # noqa: E402  (the peers' adapters, used unchanged)
import robots as peer_robots  # noqa: E402
from bench_peers import N_WARMUP, robot_seed, summarize  # noqa: E402
from robots import pose_errors  # noqa: E402

ROBOTS = ("ur5", "panda", "iiwa14", "baxter_left", "g1_left_arm", "seed8dof")
DEFAULT_PEERS = "trac_ik,rtb_ik_LM"
INNER_TOL = 1e-6          # invkin's position/rotation tolerance, as every peer's inner tolerance
STRICT = 1e-5             # success threshold (m, rad)
GOAL_SUCCESS = 0.999      # lm: >= 99.9 % on every robot
GOAL_MEAN_RATIO = 0.5     # lm mean <= 0.5x rtb_ik_LM's mean
GOAL_P95_RATIO = 1.0      # lm p95 <= rtb_ik_LM's p95
GOAL_SM_RATIO = 10.0      # solve_many (2 threads) >= 10x the poses/s of a Python loop of rtb_ik_LM


def log(*a):
    print(*a, file=sys.stderr, flush=True)


# --------------------------------------------------------------------------- progress


class Progress:
    """tqdm on stderr if installed and stderr is a terminal, else a line every 25 %."""

    def __init__(self, total: int, desc: str):
        self.total, self.desc, self.n = total, desc, 0
        self.next = max(1, total // 4)
        self.bar = None
        if sys.stderr.isatty():
            try:
                from tqdm import tqdm

                tqdm.monitor_interval = 0  # no monitor thread waking up during timed calls
                self.bar = tqdm(total=total, desc=desc, file=sys.stderr, leave=False, mininterval=0.5)
            except ImportError:
                pass

    def update(self):
        self.n += 1
        if self.bar is not None:
            self.bar.update(1)
        elif self.n % self.next == 0 or self.n == self.total:
            log(f"  {self.desc}: {self.n}/{self.total}")

    def close(self):
        if self.bar is not None:
            self.bar.close()


# --------------------------------------------------------------------------- reference FK


class RefFK:
    """The peers' reference FK: Pinocchio frame placement of the tip (numpy ChainFK without it)."""

    def __init__(self, spec):
        try:
            import pinocchio as pin

            self.pin = pin
            self.model = pin.buildModelFromUrdf(spec.urdf)
            self.data = self.model.createData()
            self.fid = self.model.getFrameId(spec.tip)
            self.name = f"pinocchio {pin.__version__} framesForwardKinematics"
        except ImportError:
            self.pin = None
            self.chain = peer_robots.ChainFK(spec.urdf, spec.base, spec.tip)
            self.name = "robots.ChainFK (numpy; pinocchio not installed)"

    def __call__(self, q) -> np.ndarray:
        q = np.asarray(q, dtype=float)
        if self.pin is None:
            return self.chain.fk(q)
        self.pin.framesForwardKinematics(self.model, self.data, q)
        return self.data.oMf[self.fid].homogeneous.copy()


# --------------------------------------------------------------------------- invkin adapter


class InvkinIK(adapters.Adapter):
    """invkin.solve with one Pose (or Position) goal on the tip; q in the peers' joint order."""

    kinds = ("pose", "position")

    def __init__(self, spec, kind, budget_s, method: str):
        super().__init__(spec, kind, budget_s)
        self.method = method
        self.name = f"invkin-{method}"
        self.ik_robot = ik.load_robot(spec.name)
        self.tip = spec.tip
        self.ik_robot.frame_index(self.tip)  # FrameError early if the tip is missing
        names = list(self.ik_robot.joint_names)
        if sorted(names) != sorted(spec.joint_names):
            raise RuntimeError(f"joint names differ: invkin {names} vs peers {spec.joint_names}")
        # q_invkin = q_peer[to_ik]; q_peer = q_invkin[to_peer]
        self.to_ik = np.array([spec.joint_names.index(n) for n in names])
        self.to_peer = np.array([names.index(n) for n in spec.joint_names])
        self.same_order = names == list(spec.joint_names)  # then no re-indexing inside the timed call
        self.seed_index = 0
        self.last = None
        self.budget_note = f"timeout {budget_s * 1e3:g} ms, tolerances {INNER_TOL:g} m / {INNER_TOL:g} rad, seed=index"

    def settings(self):
        return {"method": self.method, "timeout_s": self.budget, "position_tolerance": INNER_TOL,
                "rotation_tolerance": INNER_TOL, "seed": "target index"}

    def prepare(self, T):
        if self.kind == "pose":
            return [ik.Pose(self.tip, T)]
        return [ik.Position(self.tip, T[:3, 3])]

    def solve(self, goals, q0):
        r = ik.solve(self.ik_robot, goals, q0=q0 if self.same_order else q0[self.to_ik], method=self.method,
                     position_tolerance=INNER_TOL, rotation_tolerance=INNER_TOL, timeout=self.budget,
                     seed=self.seed_index)
        self.last = r
        return (r.q if self.same_order else r.q[self.to_peer]), bool(r.success)


# --------------------------------------------------------------------------- one solver on one robot


def run_one(a, T_goal, q_seed, ref, spec, warm_T, max_wall_s, desc):
    """The peers' run_solver loop (bench_peers.py), plus a wall-clock cap and invkin's own stats."""
    for k, T in enumerate(warm_T):  # warm-up: Numba compilation, first-call allocations
        if isinstance(a, InvkinIK):
            a.seed_index = 100_000 + k
        a.solve(a.prepare(T), q_seed.copy())
    n = len(T_goal)
    rec = {
        "time_s": np.zeros(n), "pos_err": np.full(n, np.nan), "rot_err": np.full(n, np.nan),
        "returned": np.zeros(n, bool), "claimed": np.zeros(n, bool), "within_limits": np.zeros(n, bool),
        "q": np.full((n, spec.dof), np.nan), "wrappable": np.zeros(n, bool), "exceptions": [],
    }
    extra = {"status": [], "iterations": [], "restarts": [], "internal_time_s": [], "prepare_s": None}
    prog = Progress(n, desc)
    gc.collect()
    perf = time.perf_counter
    t_run = perf()
    done = n
    prep = np.zeros(n)
    for i in range(n):
        tp = perf()
        x = a.prepare(T_goal[i])  # goal conversion: not timed (as in bench_peers.py), reported apart
        prep[i] = perf() - tp
        q0 = q_seed.copy()
        if isinstance(a, InvkinIK):
            a.seed_index = i
            a.last = None
        t1 = perf()
        try:
            q, claimed = a.solve(x, q0)
        except Exception as e:  # noqa: BLE001  (a failure for this target only)
            q, claimed = None, False
            rec["exceptions"].append((i, f"{type(e).__name__}: {e}"))
        t2 = perf()
        rec["time_s"][i] = t2 - t1
        rec["claimed"][i] = claimed
        if q is not None and np.all(np.isfinite(q)):
            q = np.asarray(q, dtype=float)
            rec["returned"][i] = True
            rec["q"][i] = q
            pe, re = pose_errors(ref(q), T_goal[i])
            rec["pos_err"][i], rec["rot_err"][i] = pe, re
            rec["within_limits"][i] = spec.within_limits(q)
            rec["wrappable"][i] = (not rec["within_limits"][i]) and spec.wrappable(q)
        if isinstance(a, InvkinIK):
            r = a.last
            extra["status"].append(None if r is None else str(r.status))
            extra["iterations"].append(None if r is None else int(r.iterations))
            extra["restarts"].append(None if r is None else int(r.restarts))
            extra["internal_time_s"].append(None if r is None else float(r.time))
        prog.update()
        if perf() - t_run > max_wall_s and i + 1 < n:
            done = i + 1
            break
    prog.close()
    extra["prepare_s"] = prep[:done]
    if done < n:
        for k in ("time_s", "pos_err", "rot_err", "returned", "claimed", "within_limits", "q", "wrappable"):
            rec[k] = rec[k][:done]
    return rec, extra, done


def run_solver(sname, make, spec, kind, args, T_goal, q_seed, ref, warm_T):
    """Build, warm up and run one solver; never raises (errors become the entry's note)."""
    budget_s = args.budget_ms / 1e3
    entry = {"solver": sname}
    t0 = time.perf_counter()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with adapters.quiet_fd(1):
                a = make(spec, kind, budget_s)
        entry["load_s"] = time.perf_counter() - t0
        if kind not in a.kinds:
            entry["skipped"] = f"takes no {kind}-only targets"
            return entry, None
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            rec, extra, done = run_one(a, T_goal, q_seed, ref, spec, warm_T, args.max_wall_s,
                                       f"{spec.name} {sname}")
    except ik.InvkinError as e:
        entry["unsupported"] = f"cannot solve {kind} goals: {type(e).__name__}: {e}"
        log(f"  {sname:22s} UNSUPPORTED {entry['unsupported']}")
        return entry, None
    except Exception as e:  # noqa: BLE001  (one broken solver must not stop the suite)
        entry["error"] = f"{type(e).__name__}: {e}"
        log(f"  {sname:22s} ERROR {entry['error']}")
        return entry, None
    s = summarize(rec, kind, args.budget_ms, a.reports_success)
    entry.update(s)
    entry.update(budget_note=a.budget_note, settings=a.settings(), wall_s=time.perf_counter() - t0, n_done=done)
    if done < len(T_goal):
        entry["too_slow"] = (f"stopped after {done} of {len(T_goal)} targets: over --max-wall-s "
                             f"{args.max_wall_s:g} s")
    prep = extra.pop("prepare_s")
    entry["prepare_us_median"] = 1e6 * float(np.median(prep))
    if extra["status"]:
        st = {}
        for x in extra["status"]:
            st[str(x)] = st.get(str(x), 0) + 1
        entry["status_counts"] = st
        its = [x for x in extra["iterations"] if x is not None]
        rs = [x for x in extra["restarts"] if x is not None]
        entry["iterations_median"] = float(np.median(its)) if its else None
        entry["restarts_median"] = float(np.median(rs)) if rs else None
        entry["restarts_p95"] = float(np.percentile(rs, 95)) if rs else None
        it_t = [x for x in extra["internal_time_s"] if x is not None]
        entry["internal_time_ms_mean"] = 1e3 * float(np.mean(it_t)) if it_t else None
    ok = rec["returned"] & (rec["pos_err"] < STRICT) & rec["within_limits"]
    if kind == "pose":
        ok &= rec["rot_err"] < STRICT
    entry["per_target"] = {
        "time_ms": (rec["time_s"] * 1e3).tolist(), "pos_err": rec["pos_err"].tolist(),
        "rot_err": rec["rot_err"].tolist(), "success": ok.tolist(), "claimed": rec["claimed"].tolist(),
        "within_limits": rec["within_limits"].tolist(), "q": rec["q"].tolist(), **extra,
    }
    log(f"  {sname:22s} N={done:4d} success {100 * s['success_strict']:5.1f}%  "
        f"t_med {s['time_ms_median']:7.3f} ms  mean {s['time_ms_mean']:7.3f}  p95 {s['time_ms_p95']:7.3f}  "
        f"oob {s['n_out_of_limits']}" + (f"  exc {s['n_exceptions']}" if s["n_exceptions"] else "")
        + (f"  [{entry['too_slow']}]" if "too_slow" in entry else "") + f"  [{entry['wall_s']:.1f} s]")
    return entry, rec


# --------------------------------------------------------------------------- solve_many


def run_solve_many(spec, kind, args, T_goal, q_seed, ref, warm_T, rtb_entry):
    if not hasattr(ik, "solve_many"):
        return {"skipped": "ik.solve_many does not exist in this invkin"}
    out = {"threads": args.threads}
    try:
        robot = ik.load_robot(spec.name)
        names = list(robot.joint_names)
        to_ik = np.array([spec.joint_names.index(n) for n in names])
        to_peer = np.array([names.index(n) for n in spec.joint_names])
        sig = inspect.signature(ik.solve_many)
        params = sig.parameters
        # only named parameters: anything else would land in the method's **options
        kw = {"q0": q_seed[to_ik], "position_tolerance": INNER_TOL, "rotation_tolerance": INNER_TOL,
              "timeout": args.budget_ms / 1e3}
        kw = {k: v for k, v in kw.items() if k in params}
        out["budget"] = (f"timeout {args.budget_ms:g} ms per target" if "timeout" in kw else
                         "no timeout: iteration budget ("
                         + ", ".join(f"{k}={p.default!r}" for k, p in params.items()
                                     if k in ("max_restarts", "max_iterations") and p.default is not p.empty) + ")")
        thread_kw = next((k for k in ("threads", "n_threads", "num_threads", "workers", "n_jobs") if k in params), None)
        import numba

        prev_threads = numba.get_num_threads()
        if thread_kw:
            kw[thread_kw] = args.threads
            out["threads_via"] = f"{thread_kw}={args.threads}"
        else:
            out["threads_via"] = f"numba.set_num_threads({args.threads})"
        out["signature"] = str(sig)

        def targets(T):
            return T if kind == "pose" else T[:, :3, 3]

        numba.set_num_threads(min(args.threads, numba.config.NUMBA_NUM_THREADS))
        walls = []
        try:
            ik.solve_many(robot, spec.tip, targets(warm_T), **kw)  # warm-up (compilation)
            for _ in range(args.sm_repeats):  # a shared 2-core machine: one call can lose a time slice
                gc.collect()
                t0 = time.perf_counter()
                br = ik.solve_many(robot, spec.tip, targets(T_goal), **kw)
                walls.append(time.perf_counter() - t0)
        finally:
            numba.set_num_threads(prev_threads)
        wall = float(np.median(walls))
        Q = np.asarray(br.q)[:, to_peer]
        ok = np.zeros(len(T_goal), bool)
        for i, q in enumerate(Q):
            if np.all(np.isfinite(q)):
                pe, re = pose_errors(ref(q), T_goal[i])
                ok[i] = pe < STRICT and (kind == "position" or re < STRICT) and spec.within_limits(q)
        out.update(n=len(T_goal), wall_s=wall, walls_s=walls, poses_per_s=len(T_goal) / wall,
                   poses_per_s_best=len(T_goal) / min(walls), success=float(ok.mean()),
                   claimed=float(np.mean(br.success)))
        if rtb_entry is not None and "time_ms_mean" in rtb_entry and rtb_entry.get("n_done") == len(T_goal):
            rtb_pps = 1e3 / rtb_entry["time_ms_mean"]
            out.update(rtb_loop_poses_per_s=rtb_pps, ratio_vs_rtb_loop=out["poses_per_s"] / rtb_pps,
                       ratio_vs_rtb_loop_best=out["poses_per_s_best"] / rtb_pps)
        log(f"  solve_many             N={len(T_goal)} {out['poses_per_s']:.0f} poses/s (median of "
            f"{len(walls)}, best {out['poses_per_s_best']:.0f}), success {100 * out['success']:.1f}%  [{wall:.3f} s]")
    except Exception as e:  # noqa: BLE001
        out["error"] = f"{type(e).__name__}: {e}"
        log(f"  solve_many ERROR {out['error']}")
    return out


# --------------------------------------------------------------------------- tables


def pct(x):
    return "-" if x is None else f"{100 * x:.1f}%"


def ms(x):
    return "-" if x is None else f"{x:.3f}"


def e1(x):
    return "-" if x is None or not math.isfinite(x) else f"{x:.1e}"


def robot_table(rname, info) -> str:
    kind = info["kind"]
    L = [f"#### {rname} ({info['dof']} DOF, `{info['base']}` → `{info['tip']}`, {kind} targets, "
         f"N = {info['n_targets']})\n",
         "| solver | success 1e-5 | success 1e-5 & ≤ 5 ms | median (ms) | mean (ms) | p95 (ms) | median pos err (m) | "
         + ("median rot err (rad) | " if kind == "pose" else "")
         + "out of limits (accurate) | claimed but failed | notes |",
         "|---|---|---|---|---|---|---|" + ("---|" if kind == "pose" else "") + "---|---|---|"]
    for sname, s in info["solvers"].items():
        note = s.get("skipped") or s.get("unsupported") or s.get("error")
        if note:
            note = note if len(note) <= 200 else note[:199] + "…"  # the full message is in --json
            L.append(f"| {sname} | - | - | - | - | - | - |" + (" - |" if kind == "pose" else "") + f" - | - | {note} |")
            continue
        notes = []
        if s.get("too_slow"):
            notes.append(s["too_slow"])
        if s.get("status_counts"):
            notes.append(", ".join(f"{k} {v}" for k, v in sorted(s["status_counts"].items(), key=lambda kv: -kv[1])))
            notes.append(f"median iterations {s['iterations_median']:g}, restarts median {s['restarts_median']:g} / "
                         f"p95 {s['restarts_p95']:g}")
        if s.get("n_exceptions"):
            notes.append(f"{s['n_exceptions']} calls raised, first: {s['first_exception']}")
        if s.get("prepare_us_median", 0.0) >= 0.5:
            notes.append(f"goal conversion {s['prepare_us_median']:.1f} µs/target (not timed)")
        cbf = s["n_claimed_but_failed_strict"]
        L.append(
            f"| {sname} | {pct(s['success_strict'])} | {pct(s['success_strict_within_budget'])} | "
            f"{ms(s['time_ms_median'])} | {ms(s['time_ms_mean'])} | {ms(s['time_ms_p95'])} | {e1(s['pos_err_median'])} |"
            + (f" {e1(s['rot_err_median'])} |" if kind == "pose" else "")
            + f" {s['n_out_of_limits']} ({s['n_accurate_strict_but_out_of_limits']}) | {'-' if cbf is None else cbf} | "
            f"{'; '.join(notes)} |")
    return "\n".join(L)


def verdicts(summary) -> tuple[str, list]:
    """The lm vs rtb_ik_LM table and the goal verdict lines."""
    L = ["| robot | invkin-lm success | rtb_ik_LM success | trac_ik success | lm mean (ms) | rtb mean (ms) | "
         "mean ratio lm/rtb | lm p95 (ms) | rtb p95 (ms) | p95 ratio lm/rtb |",
         "|---|---|---|---|---|---|---|---|---|---|"]
    lines = []
    for rname, info in summary["robots"].items():
        S = info["solvers"]
        lm, rtb, tr = S.get("invkin-lm", {}), S.get("rtb_ik_LM", {}), S.get("trac_ik", {})
        have = "time_ms_mean" in lm and "time_ms_mean" in rtb
        mr = lm["time_ms_mean"] / rtb["time_ms_mean"] if have else None
        pr = lm["time_ms_p95"] / rtb["time_ms_p95"] if have else None
        L.append(f"| {rname} | {pct(lm.get('success_strict'))} | {pct(rtb.get('success_strict'))} | "
                 f"{pct(tr.get('success_strict')) if 'success_strict' in tr else '-'} | {ms(lm.get('time_ms_mean'))} | "
                 f"{ms(rtb.get('time_ms_mean'))} | {'-' if mr is None else f'{mr:.2f}×'} | {ms(lm.get('time_ms_p95'))} | "
                 f"{ms(rtb.get('time_ms_p95'))} | {'-' if pr is None else f'{pr:.2f}×'} |")
        info["lm_vs_rtb"] = {"mean_ratio": mr, "p95_ratio": pr}
        if "success_strict" in lm:
            v = lm["success_strict"]
            lines.append(f"- {rname}: lm success {pct(v)} — {'meets' if v >= GOAL_SUCCESS else 'MISSES'} ≥ 99.9 %")
        if mr is not None:
            lines.append(f"- {rname}: lm mean {mr:.2f}× rtb_ik_LM's — "
                         f"{'meets' if mr <= GOAL_MEAN_RATIO else 'MISSES'} ≤ 0.5×; p95 {pr:.2f}× — "
                         f"{'meets' if pr <= GOAL_P95_RATIO else 'MISSES'} ≤ 1×")
    return "\n".join(L), lines


def methods_table(summary) -> str:
    """Every invkin method: success / median ms per robot."""
    names = []
    for info in summary["robots"].values():
        for s in info["solvers"]:
            if s.startswith("invkin-") and s not in names:
                names.append(s)
    rn = list(summary["robots"])
    L = ["| method | " + " | ".join(rn) + " |", "|---|" + "---|" * len(rn)]
    for m in names:
        cells = []
        for r in rn:
            s = summary["robots"][r]["solvers"].get(m)
            if s is None:
                cells.append("-")
            elif "success_strict" in s:
                cells.append(f"{pct(s['success_strict'])} / {s['time_ms_median']:.2f}"
                             + (" (stopped)" if s.get("too_slow") else ""))
            else:
                cells.append("unsupported" if "unsupported" in s else "error" if "error" in s else "skipped")
        L.append(f"| {m} | " + " | ".join(cells) + " |")
    return "\n".join(L)


def solve_many_table(summary) -> str:
    L = ["| robot | N | solve_many poses/s, median (best) | success (verified) | rtb_ik_LM loop poses/s | ratio, median "
         "(best) | threads; budget; claimed |",
         "|---|---|---|---|---|---|---|"]
    for rname, info in summary["robots"].items():
        sm = info.get("solve_many")
        if not sm:
            continue
        if "poses_per_s" not in sm:
            L.append(f"| {rname} | - | - | - | - | - | {sm.get('skipped') or sm.get('error')} |")
            continue
        rp = sm.get("rtb_loop_poses_per_s")
        ratio = "-" if rp is None else f"{sm['ratio_vs_rtb_loop']:.2f}× ({sm['ratio_vs_rtb_loop_best']:.2f}×)"
        L.append(f"| {rname} | {sm['n']} | {sm['poses_per_s']:.0f} ({sm['poses_per_s_best']:.0f}) | "
                 f"{pct(sm['success'])} | {'-' if rp is None else f'{rp:.0f}'} | {ratio} | "
                 f"{sm['threads_via']}; {sm['budget']}; claimed {pct(sm['claimed'])} |")
    L.append("")
    for rname, info in summary["robots"].items():
        sm = info.get("solve_many") or {}
        if "ratio_vs_rtb_loop" in sm:
            r = sm["ratio_vs_rtb_loop"]
            L.append(f"- {rname}: solve_many {r:.2f}× a rtb_ik_LM loop (median of {len(sm['walls_s'])} calls; best "
                     f"{sm['ratio_vs_rtb_loop_best']:.2f}×) — {'meets' if r >= GOAL_SM_RATIO else 'MISSES'} ≥ 10×")
    return "\n".join(L)


def versions() -> dict:
    out = {}
    for p in ("invkin", "numpy", "numba", "pin", "roboticstoolbox-python", "pytracik", "tqdm"):
        try:
            out[p] = md.version(p)
        except md.PackageNotFoundError:
            out[p] = None
    return out


def jsonable(x):
    if isinstance(x, dict):
        return {str(k): jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [jsonable(v) for v in x]
    if isinstance(x, (np.floating, float)):
        return float(x) if math.isfinite(x) else None
    if isinstance(x, (np.integer,)):
        return int(x)
    if isinstance(x, np.bool_):
        return bool(x)
    if isinstance(x, np.ndarray):
        return jsonable(x.tolist())
    return x


# --------------------------------------------------------------------------- main


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--robots", default=",".join(ROBOTS), help="comma list (default: all six)")
    ap.add_argument("--n", type=int, default=1000, help="targets per robot (the first N saved ones; default 1000)")
    ap.add_argument("--quick", action="store_true", help="N = 50")
    ap.add_argument("--methods", default="all", help="comma list of invkin methods (default: all in ik.methods())")
    ap.add_argument("--peers", default=DEFAULT_PEERS, help=f"comma list of peer adapters (default {DEFAULT_PEERS}; "
                                                             "'none' for invkin only)")
    ap.add_argument("--budget-ms", type=float, default=5.0, help="time budget per target (default 5 ms)")
    ap.add_argument("--max-wall-s", type=float, default=300.0,
                    help="stop a solver on a robot after this much wall time and report it as too slow")
    ap.add_argument("--threads", type=int, default=2, help="threads for solve_many (default 2)")
    ap.add_argument("--no-solve-many", action="store_true", help="skip the solve_many throughput test")
    ap.add_argument("--sm-repeats", type=int, default=5,
                    help="timed solve_many calls per robot; the table gives the median and the best (default 5)")
    ap.add_argument("--json", default=None, help="dump everything (settings, summaries, per-target data) here")
    args = ap.parse_args(argv)
    if args.quick:
        args.n = 50

    available = ik.methods()
    methods = available if args.methods == "all" else [m for m in args.methods.split(",") if m]
    peers = [] if args.peers in ("", "none") else [p for p in args.peers.split(",") if p]
    # rtb_ik_LM first, then invkin-lm right after it, so the pair sees the same machine load
    order = []
    if "rtb_ik_LM" in peers:
        order.append(("rtb_ik_LM", "peer"))
    if "lm" in methods:
        order.append(("lm", "invkin"))
    order += [(p, "peer") for p in peers if p != "rtb_ik_LM"]
    order += [(m, "invkin") for m in methods if m != "lm"]

    meta = {
        "date_utc": time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime()), "invkin_commit": git_state(),
        "python": sys.version.split()[0], "platform": platform.platform(), "cpu_count": os.cpu_count(),
        "versions": versions(), "args": vars(args), "methods_available": available,
        "thresholds": {"strict": STRICT, "limit_tol": peer_robots.LIMIT_TOL, "invkin_tolerance": INNER_TOL},
        "loadavg_start": os.getloadavg(), "notes": [],
    }
    summary = {"meta": meta, "robots": {}}
    t_all = time.perf_counter()
    for rname in [r for r in args.robots.split(",") if r]:
        path = TARGETS / f"targets_{rname}.npz"
        z = np.load(path)
        spec = peer_robots.load_robot(rname)
        kind = str(z["kind"])
        if list(z["joint_names"]) != spec.joint_names or str(z["tip"]) != spec.tip:
            raise RuntimeError(f"{path.name} does not match the peers' robot table")
        n = min(args.n, len(z["T_goal"]))
        T_goal, Q_goal, q_seed = z["T_goal"][:n], z["q_goal"][:n], np.array(z["q_seed"])
        ref = RefFK(spec)
        rs = robot_seed(2015, rname)  # bench_peers' warm-up targets: sample_configs(robot, 5, seed + 1)
        warm_T = np.array([ref(q) for q in peer_robots.sample_configs(spec, N_WARMUP, rs + 1)])
        # sanity: invkin's bundled model reproduces the saved goals
        rob = ik.load_robot(rname)
        perm = [spec.joint_names.index(nm) for nm in rob.joint_names]
        fk_dev = float(np.abs(rob.fk(np.ascontiguousarray(Q_goal[:, perm]), spec.tip) - T_goal).max())
        ref_dev = max(float(np.abs(ref(q) - T).max()) for q, T in zip(Q_goal[:50], T_goal[:50]))
        info = {"dof": spec.dof, "base": spec.base, "tip": spec.tip, "kind": kind, "n_targets": n,
                "targets_file": f"../shared/peers/results/{path.name}", "reference_fk": ref.name,
                "invkin_fk_vs_T_goal_maxabs": fk_dev, "ref_fk_vs_T_goal_maxabs": ref_dev, "solvers": {}}
        log(f"\n=== {rname}: {spec.dof} DOF, {kind} targets, N={n}; |FK_invkin(q_goal) - T_goal| {fk_dev:.1e}, "
            f"reference FK {ref.name} ({ref_dev:.1e})")
        if fk_dev > 1e-9:
            meta["notes"].append(f"{rname}: invkin FK differs from the saved goals by {fk_dev:.1e}")
        for sname, src in order:
            if src == "peer":
                cls = adapters.REGISTRY.get(sname)
                if cls is None:
                    info["solvers"][sname] = {"error": f"unknown peer adapter; known: {', '.join(adapters.REGISTRY)}"}
                    continue
                entry, rec = run_solver(sname, cls, spec, kind, args, T_goal, q_seed, ref, warm_T)
            else:
                key = f"invkin-{sname}"
                if sname not in available:
                    info["solvers"][key] = {"error": f"not in ik.methods() ({', '.join(available)})"}
                    continue
                make = (lambda m: (lambda sp, k, b: InvkinIK(sp, k, b, m)))(sname)
                entry, rec = run_solver(key, make, spec, kind, args, T_goal, q_seed, ref, warm_T)
                sname = key
            if "skipped" in entry:
                log(f"  {sname:22s} skipped ({entry['skipped']})")
            info["solvers"][sname] = entry
            gc.collect()
        if not args.no_solve_many:
            info["solve_many"] = run_solve_many(spec, kind, args, T_goal, q_seed, ref, warm_T,
                                                info["solvers"].get("rtb_ik_LM"))
        summary["robots"][rname] = info
    meta["total_wall_s"] = time.perf_counter() - t_all
    meta["loadavg_end"] = os.getloadavg()

    # ---------------------------------------------------------------- report (stdout, markdown)
    vt, vlines = verdicts(summary)
    print(f"<!-- ik_suite.py {meta['date_utc']} UTC; invkin {meta['invkin_commit']}; {meta['cpu_count']} cores; Python {meta['python']}; "
          + ", ".join(f"{k} {v}" for k, v in meta["versions"].items() if v)
          + f"; budget {args.budget_ms:g} ms; load average {meta['loadavg_start'][0]:.2f} -> "
          f"{meta['loadavg_end'][0]:.2f}; wall {meta['total_wall_s']:.0f} s -->\n")
    print("invkin-lm vs the peers (mean / p95 ratio: invkin-lm / rtb_ik_LM, same run):\n")
    print(vt + "\n")
    print("Goals:\n")
    print("\n".join(vlines or ["- (no invkin-lm / rtb_ik_LM results in this run)"]) + "\n")
    print("Every invkin method (success 1e-5 / median ms; 'unsupported': the method rejects these goals, "
          "see the per-robot tables):\n")
    print(methods_table(summary) + "\n")
    if not args.no_solve_many:
        sm = solve_many_table(summary)
        if any("poses_per_s" in (i.get("solve_many") or {}) for i in summary["robots"].values()):
            print(f"solve_many ({args.threads} threads) vs a Python loop of rtb_ik_LM (1 / its mean call time):\n")
            print(sm + "\n")
        else:
            print("solve_many: skipped — " + next(iter(
                (i.get("solve_many") or {}).get("skipped") or (i.get("solve_many") or {}).get("error", "")
                for i in summary["robots"].values()), "") + "\n")
    print("Per robot:\n")
    for rname, info in summary["robots"].items():
        print(robot_table(rname, info) + "\n")
    for n_ in meta["notes"]:
        print(f"Note: {n_}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(jsonable(summary), f)
        log(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
