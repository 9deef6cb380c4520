#!/usr/bin/env python3
"""Calibration of the general core's restart verdict for soft goals only: per-attempt traces.

The general LM core (solvers/lm_core.py, ``_core_attempts``) runs every problem that is not one
frame's goals on its chain program. With soft goals only (several frames, or a Posture) and no
joint step box, nothing ended its restarts before the clock: a planar arm asked for a point off its
plane beside a second goal, or with a Posture, restarted ~2,000-7,000 times to the 50 ms timeout and
said ``time_limit``. This script records, attempt by attempt, what each restart of such problems
ends at, and evaluates rules offline:

* ``run``: the chain kernel's rule (lm.CHAIN_AGREEMENTS): the number of attempts in a row, since the
  best answer last improved by more than lm.AGREE (1 %), that ended unconverged. A reachable problem
  must converge before the run reaches the rule's count; an unreachable one gets the verdict at the
  attempt where it does.
* ``run after near``: the same, counting only the uniform restarts (attempt > lm_core.NEAR_ATTEMPTS:
  the first restarts start near q0 with a growing radius, and may fall back into its basin).

The attempts are the kernel's own: ``core_attempts`` is called with ``max_attempts`` one more each
time (it returns STALLED at the top of its loop once that many ran, with the state and q of the next
attempt already set), so the iterates are those of one long call; a check against ``ik.solve``
(restarts, iterations) runs first.

Problem sets (soft goals only; each from a fixed start, seed = index):

reachable
* ``<robot> posture``: the peers' 6 x 1000 saved pose targets (../shared/peers/results) with a
  Posture(q_seed) (one frame + Posture: the general core), q0 mid-range as the chain's calibration;
* ``<robot> two frames``: the same targets plus a Position goal on the chain's middle link at its
  place in q_goal (reachable by construction, fewer solutions than one frame);
* ``<whole-body robot> soft``: benchmarks/whole_body.py's reach, crouch and random sets (G1, Talos,
  Solo12 on floating bases) with every goal soft (the supports too), from its standing start;
* ``g1 hands``: collision_ik.py's G1 targets (pelvis and both hands Pose goals from random waist
  and arm configurations), every goal soft.

unreachable
* ``planar2 off plane + posture / + lower``: planar2's hand asked for random points off its plane,
  with a Posture or with a Position on its elbow link ('lower') at a reachable point;
* ``planar2 inside + posture``: the hand nearer the base than |l1 - l2| = 0.2 m, with a Posture;
* ``<robot> pushed + posture / + mid``: the saved pose targets moved along the line from the
  frame's reach anchor to 0.97-1.0 x its reach radius (inside the reach bound, so no early
  verdict from it; beyond the arm's true reach), with a Posture or with the middle link's goal;
* ``<whole-body robot> far soft``: whole_body.py's unreachable set (the first hand 2 m away), every
  goal soft (so no reach bound decides it: the floating base could follow).

    PYTHONPATH=$PWD/src ~/.cache/invkin-peers-env/bin/python benchmarks/core_soft_verdict.py [--n 1000] [--wb-n 30]
"""
from __future__ import annotations

import os

os.environ.setdefault("INVKIN_COMPILE", "wait")  # machine code, not first calls on the interpreter

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import invkin as ik  # noqa: E402
from invkin.solve import _seed31, core_args, reach_point  # noqa: E402
from invkin.solvers import lm as _lm  # noqa: E402
from invkin.solvers import lm_core as _core  # noqa: E402
from invkin.solvers._common import compile_problem  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
TARGETS = ROOT.parent / "shared" / "peers" / "results"
ROBOTS = ("panda", "ur5", "iiwa14", "baxter_left", "g1_left_arm", "seed8dof")
TOL = 1e-6  # [m], [rad] the default tolerances of ik.solve
FIRST_CHUNK = 100  # solve._FIRST_CHUNK
TAIL = (10, 20, 40, 80, 120, 160, 200)  # run lengths whose problems the reachable table counts


def trace(robot, goals, q0, seed, cap, tol=TOL):
    """(keys, converged_at, iterations, seconds): the key of every attempt that ended unconverged
    (its largest error over tolerance, ranked below every collision-free one when closer than the
    margin; + 1e12 x the hard key with hard goals missed), in order, up to the converged attempt's
    index (None if none converged within ``cap`` attempts)."""
    problem = compile_problem(robot, goals, tol, tol)
    q_start = np.minimum(np.maximum(np.asarray(q0, dtype=np.float64), robot.lower), robot.upper)
    model, table, lims, lo, hi = core_args(problem, q_start, None, None, prune=True)
    q = q_start.copy()
    best_q = q_start.copy()
    st = _core.new_core_state(0.0)
    rowerr = np.empty(problem.gnode.shape[0])
    seed_i = _seed31(seed)
    keys = []
    t = time.perf_counter()
    for k in range(cap):
        while True:
            # the driver's chunks without a clock: FIRST_CHUNK iterations, then 10,000 at a time (a chunk
            # that ends inside an attempt starts core_iterate afresh, which can change its iterates)
            done = int(st[_lm.S_ITERS])
            budget = FIRST_CHUNK - done if done < FIRST_CHUNK else 10_000 - (done - FIRST_CHUNK) % 10_000
            code = _core.core_attempts(model, table, lims, lo, hi, problem.q_rest, problem.w_posture, problem.tol_p,
                                       problem.tol_r, q_start, q, best_q, st, budget, 3 * _lm.ATTEMPT_ITERATIONS,
                                       k + 1, seed_i, rowerr)
            if code != _lm.RUNNING:
                break
        if code == _lm.CONVERGED:
            return keys, k, int(st[_lm.S_ITERS]), time.perf_counter() - t
        if code == _lm.UNREACHABLE:  # (a kernel that has the verdict: where it came)
            return keys, -1 - k, int(st[_lm.S_ITERS]), time.perf_counter() - t
        hk = st[_core.S_HARD]
        key = max(st[_lm.S_PERR] / problem.tol_p, st[_lm.S_RERR] / problem.tol_r)
        keys.append(key + (1e12 * hk if hk > 1.0 else 0.0))
    return keys, None, int(st[_lm.S_ITERS]), time.perf_counter() - t


def runs(keys, first=0):
    """Per attempt index i >= first: the chain rule's count after attempt i (attempts in a row,
    counted from ``first``, that beat the best by no more than lm.AGREE)."""
    best = np.inf
    run = 0
    out = []
    for i, key in enumerate(keys):
        if key < (1.0 - _lm.AGREE) * best:
            run = 0
        elif i >= first:
            run += 1
        best = min(best, key)
        out.append(run)
    return out


def verdict_at(keys, count, first=0):
    """The attempt index at which the rule with ``count`` ends the solve (None: not within keys)."""
    for i, r in enumerate(runs(keys, first)):
        if r >= count:
            return i
    return None


# --------------------------------------------------------------------------- problem sets


def mid_frame(robot, tip):
    """The chain's middle link: the frame of the joint at half the chain's joints."""
    chain = [i for i in robot.ancestors(robot.frame_index(tip)) if int(robot.qidx[i]) >= 0][::-1]
    return robot.node_names[chain[len(chain) // 2]]


def saved(rname, n):
    z = np.load(TARGETS / f"targets_{rname}.npz")
    rob = ik.load_robot(rname)
    names = [str(s) for s in z["joint_names"]]
    perm = [names.index(nm) for nm in rob.joint_names]
    Q = np.ascontiguousarray(z["q_goal"][:n][:, perm])
    return rob, str(z["tip"]), str(z["kind"]), z["T_goal"][:n], Q, np.asarray(z["q_seed"])[perm]


def tip_goal(kind, tip, T):
    return ik.Pose(tip, T) if kind == "pose" else ik.Position(tip, T[:3, 3])


def reachable_sets(n, wb_n, seed0=0, robots=ROBOTS):
    for rname in robots:
        rob, tip, kind, T_goal, Q, q_seed = saved(rname, n)
        q0 = 0.5 * (rob.lower + rob.upper)
        mid = mid_frame(rob, tip)
        yield (f"{rname} posture", rob,
               [([tip_goal(kind, tip, T), ik.Posture(q_seed)], q0, seed0 + i) for i, T in enumerate(T_goal)])
        yield (f"{rname} two frames ({mid})", rob,
               [([tip_goal(kind, tip, T), ik.Position(mid, rob.fk(q, mid)[:3, 3])], q0, seed0 + i)
                for i, (T, q) in enumerate(zip(T_goal, Q))])
    if wb_n < 0:  # (--wb-n -1: the saved targets only)
        return
    yield from whole_body_sets(wb_n, far=False)
    import collision_ik
    g1 = collision_ik.g1()
    rng = np.random.default_rng(1)
    moving = np.array([any(k in nm for k in ("waist", "shoulder", "elbow", "wrist")) for nm in g1.joint_names])
    probs = []
    for i, q in enumerate(g1.sample(max(n // 5, 1), rng=rng)):
        q = np.where(moving, q, g1.neutral())
        probs.append(([ik.Pose(f, g1.fk(q, f)) for f in ("pelvis", "left_rubber_hand", "right_rubber_hand")],
                      g1.neutral(), i))
    yield "g1 hands (pelvis soft)", g1, probs


def whole_body_sets(wb_n, far):
    import whole_body as wb
    try:
        rd = wb._robots_dir()
    except SystemExit as exc:  # example-robot-data missing: the whole-body sets are left out
        print(f"(whole-body sets left out: {exc})")
        return
    for name, spec in wb.SPECS.items():
        robot = wb.floating(ik.load_robot(os.path.join(rd, spec["path"])))
        q0 = wb.stance(robot, spec)
        sets = wb.make_sets(robot, spec, q0, wb_n, np.random.default_rng(0))
        probs = []
        for i, (scen, sup, eff, pose_eff, trunk) in enumerate(sets):
            if (scen == "unreachable") != far:
                continue
            goals = soft_goals(spec, sup, eff, pose_eff, trunk)
            probs.append((goals, q0, i))
        yield f"{name} {'far ' if far else ''}soft", robot, probs


def soft_goals(spec, sup, eff, pose_eff, trunk):
    """whole_body.invkin_goals with the supports soft too."""
    point_feet = spec["kind"] == "quadruped"
    goals = [ik.Position(f, T[:3, 3]) if point_feet else ik.Pose(f, T) for f, T in sup.items()]
    for f, T in eff.items():
        goals.append(ik.Pose(f, T) if pose_eff else ik.Position(f, T[:3, 3]))
    if trunk is not None:
        goals.append(ik.Pose(trunk[0], trunk[1]))
    return goals


def unreachable_sets(n, wb_n):
    p2 = ik.load_robot("planar2")
    rng = np.random.default_rng(2)
    off = []
    for i in range(n):
        r = rng.uniform(0.25, 1.75)
        a = rng.uniform(-np.pi, np.pi)
        off.append(np.array([r * np.cos(a), r * np.sin(a), rng.choice([-1.0, 1.0]) * rng.uniform(0.05, 0.5)]))
    elbow = [np.array([np.cos(b), np.sin(b), 0.0]) for b in rng.uniform(-np.pi, np.pi, n)]
    inside = [rng.uniform(0.0, 0.19) * np.array([np.cos(a), np.sin(a), 0.0]) for a in rng.uniform(-np.pi, np.pi, n)]
    qr = p2.neutral()
    yield "planar2 off plane + posture", p2, [([ik.Position("hand", p), ik.Posture(qr)], qr, i)
                                               for i, p in enumerate(off)]
    yield "planar2 off plane + lower", p2, [([ik.Position("hand", p), ik.Position("lower", e)], qr, i)
                                             for i, (p, e) in enumerate(zip(off, elbow))]
    yield "planar2 inside + posture", p2, [([ik.Position("hand", p), ik.Posture(qr)], qr, i)
                                            for i, p in enumerate(inside)]
    for rname in ("panda", "ur5", "iiwa14"):
        rob, tip, kind, T_goal, Q, q_seed = saved(rname, n)
        anchor, radius = reach_point(rob, rob.frame_index(tip))
        q0 = 0.5 * (rob.lower + rob.upper)
        mid = mid_frame(rob, tip)
        pushed = []
        for i, T in enumerate(T_goal):
            d = T[:3, 3] - anchor
            Tp = T.copy()
            Tp[:3, 3] = anchor + d / np.linalg.norm(d) * radius * (0.97 + 0.03 * (i % 7) / 7)
            pushed.append(Tp)
        yield (f"{rname} pushed + posture", rob,
               [([tip_goal(kind, tip, T), ik.Posture(q_seed)], q0, i) for i, T in enumerate(pushed)])
        yield (f"{rname} pushed + {mid}", rob,
               [([tip_goal(kind, tip, T), ik.Position(mid, rob.fk(q, mid)[:3, 3])], q0, i)
                for i, (T, q) in enumerate(zip(pushed, Q))])
    yield from whole_body_sets(wb_n, far=True)


# --------------------------------------------------------------------------- report


def check_against_solve():
    """The traces' attempts are the solver's: restarts and iterations as ik.solve's (no timeout)."""
    p2 = ik.load_robot("planar2")
    rob, tip, kind, T_goal, Q, q_seed = saved("panda", 20)
    q0 = 0.5 * (rob.lower + rob.upper)
    bad = 0
    for i in range(20):
        goals = [tip_goal(kind, tip, T_goal[i]), ik.Position("panda_link4", rob.fk(Q[i], "panda_link4")[:3, 3])]
        keys, conv, iters, _ = trace(rob, goals, q0, i, 10_000)
        res = ik.solve(rob, goals, q0=q0, seed=i, timeout=None, max_iterations=10**6)
        bad += (res.restarts, res.iterations) != (conv, iters)
    res = ik.solve(p2, [ik.Position("hand", [0.05, 0.0, 0.0]), ik.Posture(p2.neutral())], seed=1, timeout=None,
                   max_iterations=3000)
    keys, conv, iters, _ = trace(p2, [ik.Position("hand", [0.05, 0.0, 0.0]), ik.Posture(p2.neutral())],
                                 p2.neutral(), 1, res.restarts + 1)
    print(f"check against ik.solve: {20 - bad} of 20 panda two-frame solves with the same restarts and "
          f"iterations; planar2 capped at {res.restarts} restarts ({res.status.value})")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=1000, help="saved targets per robot (default 1000)")
    ap.add_argument("--wb-n", type=int, default=30, help="random whole-body sets per robot (default 30; -1: none, nor G1's hands)")
    ap.add_argument("--cap", type=int, default=3000, help="attempts traced per reachable problem")
    ap.add_argument("--ucap", type=int, default=400, help="attempts traced per unreachable problem")
    ap.add_argument("--counts", default="20,30,40,60,80")
    ap.add_argument("--only", default="", help="reachable or unreachable")
    ap.add_argument("--seed0", type=int, default=0, help="the saved targets' seeds: seed0 + index (default 0)")
    ap.add_argument("--robots", default=",".join(ROBOTS), help="saved-target robots")
    a = ap.parse_args(argv)
    counts = [int(c) for c in a.counts.split(",")]
    print(f"numpy {np.__version__}; load average {os.getloadavg()[0]:.2f}; NEAR_ATTEMPTS {_core.NEAR_ATTEMPTS}")
    check_against_solve()
    if a.only != "unreachable":
        print("\nreachable (soft goals only): attempts in a row without a better best before convergence")
        print("| set | n | converged | attempts to converge (median / max) | longest run: all attempts (max; "
              "problems >= 10) | longest run after the near restarts (max) | ms per attempt (mean) |")
        print("|---|---|---|---|---|---|---|")
        for name, robot, probs in reachable_sets(a.n, a.wb_n, a.seed0, a.robots.split(",")):
            rows = []
            for goals, q0, seed in probs:
                keys, conv, iters, dt = trace(robot, goals, q0, seed, a.cap)
                rows.append((keys, conv, dt))
            done = [r for r in rows if r[1] is not None]
            longest = [max(runs(k), default=0) for k, c, _ in done]
            near = [max(runs(k, _core.NEAR_ATTEMPTS + 1), default=0) for k, c, _ in done]
            conv = [c for _, c, _ in done]
            atts = sum(len(k) + (c is not None) for k, c, _ in rows)
            worst = int(np.argmax(longest)) if longest else -1
            tail = " / ".join(str(sum(x >= t for x in longest)) for t in TAIL)
            print(f"| {name} | {len(rows)} | {len(done)} | {np.median(conv) if conv else '-'} / "
                  f"{max(conv) if conv else '-'} | {max(longest, default=0)} (problem {probs[worst][2] if worst >= 0 else '-'})"
                  f"; {tail} | {max(near, default=0)} | {1e3 * sum(r[2] for r in rows) / max(atts, 1):.3f} |")
            sys.stdout.flush()
    if a.only != "reachable":
        print("\nunreachable (soft goals only): the attempt at which the rule ends the solve (median / max; "
              "'>' = not within the traced attempts; converged = the pushed target was in reach)")
        print("| set | n | converged | " + " | ".join(f"count {c}" for c in counts)
              + f" | count 40 after near | ms per attempt (mean) |")
        print("|---|---|---|" + "---|" * len(counts) + "---|---|")
        for name, robot, probs in unreachable_sets(max(a.n // 10, 1), a.wb_n):
            rows = []
            for goals, q0, seed in probs:
                keys, conv, iters, dt = trace(robot, goals, q0, seed, a.ucap)
                rows.append((keys, conv, dt))
            un = [r for r in rows if r[1] is None]
            cells = []
            for c in counts + [None]:
                at = [verdict_at(k, 40 if c is None else c, 0 if c is not None else _core.NEAR_ATTEMPTS + 1)
                      for k, _, _ in un]
                got = [x for x in at if x is not None]
                miss = len(at) - len(got)
                cells.append(f"{np.median(got) if got else '-'} / {max(got) if got else '-'}"
                             + (f" ({miss} >)" if miss else ""))
            atts = sum(len(k) + (c is not None) for k, c, _ in rows)
            print(f"| {name} | {len(rows)} | {len(rows) - len(un)} | " + " | ".join(cells)
                  + f" | {1e3 * sum(r[2] for r in rows) / max(atts, 1):.3f} |")
            sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
