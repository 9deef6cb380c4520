#!/usr/bin/env python3
"""Calibration of the general core's restart verdict for soft goals only: per-attempt traces.

The general LM core (solvers/lm_core.py, ``_core_attempts``) runs every problem that is not one
frame's goals on its chain program. With soft goals only (several frames, or a Posture) and no
joint step box, nothing ended its restarts before the clock: a planar arm asked for a point off its
plane beside a second goal, or with a Posture, restarted ~2,000-7,000 times to the 50 ms timeout and
said ``time_limit``. This script records, attempt by attempt, what each restart of such problems
ends at (its largest error over tolerance, the attempt's *key*), and evaluates the rules on them:

* the chain kernel's rule (lm.CHAIN_AGREEMENTS = 40): the attempts in a row, since the best key last
  improved by more than lm.AGREE (1 %), that ended unconverged;
* the general core's soft rule (lm_core.SOFT_AGREEMENTS, SOFT_SPREAD, lm.NEAR): of those, only the
  attempts that ended within SOFT_SPREAD x the best key count (the others neither count nor reset),
  and the verdict needs the best key beyond NEAR. The counts include the first restarts, which start
  near q0 (lm_core.NEAR_ATTEMPTS).

A reachable problem must converge before a rule's count is reached: the table gives the largest
count each rule reached before the converging attempt. For unreachable problems the kernel's own
verdict ends the trace (the attempt it came at); each is then solved once more by ``ik.solve`` as a
caller would (the default 50 ms timeout, the same seed; the second of two solves): its status and
time.

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
* ``<whole-body robot> far soft``: whole_body.py's unreachable set (the first hand 2 m away) and its
  random sets with the first effector moved 2 m in a random horizontal direction, every goal soft
  (so no reach bound decides them: the floating base could follow).

    PYTHONPATH=$PWD/src ~/.cache/invkin-peers-env/bin/python benchmarks/core_soft_verdict.py [--n 1000] [--wb-n 30]
    PYTHONPATH=$PWD/src ~/.cache/invkin-peers-env/bin/python benchmarks/core_soft_verdict.py --hash 200
"""
from __future__ import annotations

import os

os.environ.setdefault("INVKIN_COMPILE", "wait")  # machine code, not first calls on the interpreter

import argparse
import sys
import time
from collections import Counter
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
TAIL = (20, 30, 40, 50)  # counts whose problems the reachable table counts


def trace(robot, goals, q0, seed, cap, tol=TOL):
    """(keys, end, iterations, seconds): the key of every attempt that ended unconverged (its largest
    error over tolerance; + 1e12 x the hard key with hard goals missed or closer than a margin), in
    order; end: the converged attempt's index, -1 - the attempt of an unreachable verdict, or None
    (neither within ``cap`` attempts)."""
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
        if code == _lm.UNREACHABLE:  # the kernel's verdict: where it came
            return keys, -1 - k, int(st[_lm.S_ITERS]), time.perf_counter() - t
        hk = st[_core.S_HARD]
        key = max(st[_lm.S_PERR] / problem.tol_p, st[_lm.S_RERR] / problem.tol_r)
        keys.append(key + (1e12 * hk if hk > 1.0 else 0.0))
    return keys, None, int(st[_lm.S_ITERS]), time.perf_counter() - t


def counts(keys, spread=np.inf, floor=0.0):
    """The rule's count after each attempt, over the unconverged attempts' keys: attempts since the
    best last improved by more than lm.AGREE that ended within ``spread`` x the best (inf: the chain's
    rule), reported as 0 while the best is not beyond ``floor``."""
    best = np.inf
    n = 0
    out = []
    for key in keys:
        if key < (1.0 - _lm.AGREE) * best:
            n = 0
        elif key <= spread * best:
            n += 1
        best = min(best, key)
        out.append(n if best > floor else 0)
    return out


def soft_counts(keys):
    return counts(keys, _core.SOFT_SPREAD, _lm.NEAR)


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
        rng = np.random.default_rng(3)
        for i, (scen, sup, eff, pose_eff, trunk) in enumerate(sets):
            if far and scen == "random":  # the first effector moved 2 m in a random horizontal direction
                f0 = next(iter(eff))
                eff = dict(eff)
                eff[f0] = eff[f0].copy()
                a = rng.uniform(-np.pi, np.pi)
                eff[f0][:3, 3] += [2.0 * np.cos(a), 2.0 * np.sin(a), 0.0]
            elif (scen == "unreachable") != far:
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
    """The traces' attempts are the solver's: restarts and iterations as ik.solve's (no clock)."""
    rob, tip, kind, T_goal, Q, q_seed = saved("panda", 20)
    q0 = 0.5 * (rob.lower + rob.upper)
    same = 0
    for i in range(20):
        goals = [tip_goal(kind, tip, T_goal[i]), ik.Position("panda_link4", rob.fk(Q[i], "panda_link4")[:3, 3])]
        keys, end, iters, _ = trace(rob, goals, q0, i, 10_000)
        res = ik.solve(rob, goals, q0=q0, seed=i, timeout=None, max_iterations=10**6)
        same += (res.restarts, res.iterations) == (end, iters)
    p2 = ik.load_robot("planar2")
    goals = [ik.Position("hand", [0.3, 0.2, 0.25]), ik.Posture(p2.neutral())]
    keys, end, iters, _ = trace(p2, goals, p2.neutral(), 1, 2_000)
    res = ik.solve(p2, goals, seed=1, timeout=None, max_iterations=iters if end is None else 10**6)
    at = "no verdict within 2,000 attempts" if end is None else f"the verdict at attempt {-1 - end}"
    print(f"check against ik.solve (no clock): {same} of 20 panda two-frame solves with the same restarts and "
          f"iterations; planar2 off its plane + Posture: {at} ({iters} iterations), "
          f"ik.solve {res.status.value} after {res.restarts} restarts ({res.iterations} iterations)")


def answers_hash(n):
    """sha256 (16 hex digits) of ik.solve's answers (q bytes, status, iterations, restarts) per set:
    whole_body.py's sets as it benchmarks them (hard supports; the unreachable one without a clock,
    20,000 iterations) and with every goal soft, and the first ``n`` problems of each saved-target
    reachable set (no clock: deterministic). Two trees that print the same lines give the same answers."""
    import hashlib

    import whole_body as wb

    def digest(results):
        h = hashlib.sha256()
        for r in results:
            h.update(np.ascontiguousarray(r.q).tobytes())
            h.update(f"{r.status.value} {r.iterations} {r.restarts}".encode())
        return f"{h.hexdigest()[:16]} ({', '.join(sorted(set(r.status.value for r in results)))})"

    rd = wb._robots_dir()
    for name, spec in wb.SPECS.items():
        robot = wb.floating(ik.load_robot(os.path.join(rd, spec["path"])))
        q0 = wb.stance(robot, spec)
        sets = wb.make_sets(robot, spec, q0, 30, np.random.default_rng(0))
        hard = [ik.solve(robot, wb.invkin_goals(robot, spec, *st[1:]), q0=q0) for st in sets if st[0] != "unreachable"]
        far = [ik.solve(robot, wb.invkin_goals(robot, spec, *st[1:]), q0=q0, seed=0, timeout=None,
                        max_iterations=20_000) for st in sets if st[0] == "unreachable"]
        soft = [ik.solve(robot, soft_goals(spec, *st[1:]), q0=q0) for st in sets if st[0] != "unreachable"]
        print(f"{name} whole_body.py sets: {digest(hard)}; unreachable {digest(far)}; all soft {digest(soft)}")
    for name, robot, probs in reachable_sets(n, -1):
        res = [ik.solve(robot, g, q0=q0, seed=seed, timeout=None, max_iterations=10**6) for g, q0, seed in probs]
        print(f"{name}, {len(res)}: {digest(res)}, restarts at most {max(r.restarts for r in res)}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=1000, help="saved targets per robot (default 1000)")
    ap.add_argument("--wb-n", type=int, default=30, help="random whole-body sets per robot (default 30; -1: none, nor G1's hands)")
    ap.add_argument("--cap", type=int, default=3000, help="attempts traced per reachable problem")
    ap.add_argument("--ucap", type=int, default=1000, help="attempts traced per unreachable problem")
    ap.add_argument("--only", default="", help="reachable or unreachable")
    ap.add_argument("--seed0", default="0", help="the saved targets' seeds: seed0 + index, for each seed0 of this "
                    "list (default 0; the whole-body sets with the first only)")
    ap.add_argument("--robots", default=",".join(ROBOTS), help="saved-target robots")
    ap.add_argument("--hash", type=int, default=0, metavar="N",
                    help="only print answers_hash(N): the answers' hashes, to compare two trees")
    a = ap.parse_args(argv)
    if a.hash:
        answers_hash(a.hash)
        return 0
    print(f"numpy {np.__version__}; load average {os.getloadavg()[0]:.2f}; NEAR_ATTEMPTS {_core.NEAR_ATTEMPTS}")
    check_against_solve()
    if a.only != "unreachable":
        print("\nreachable (soft goals only): the largest count of each rule before the converging attempt")
        print("| set | n | converged | attempts to converge (median / max) | chain's rule (max) | soft rule (max) | "
              f"problems whose soft count reached {' / '.join(map(str, TAIL))} | ms per attempt (mean) |")
        print("|---|---|---|---|---|---|---|---|")
        sets = [st for k, seed0 in enumerate(int(x) for x in a.seed0.split(","))
                for st in reachable_sets(a.n, a.wb_n if k == 0 else -1, seed0, a.robots.split(","))]
        for name, robot, probs in sets:
            name += f" (seeds {probs[0][2]}..)" if a.seed0 != "0" else ""
            rows = [trace(robot, goals, q0, seed, a.cap) for goals, q0, seed in probs]
            done = [(k, c, p[2]) for (k, c, _, _), p in zip(rows, probs) if c is not None and c >= 0]
            false = sum(c is not None and c < 0 for _, c, _, _ in rows)  # the kernel's verdict on a reachable one
            chain = [max(counts(k), default=0) for k, _, _ in done]
            soft = [max(soft_counts(k), default=0) for k, _, _ in done]
            conv = [c for _, c, _ in done]
            atts = sum(len(k) + 1 for k, _, _, _ in rows)
            worst = done[int(np.argmax(soft))][2]
            print(f"| {name} | {len(rows)} | {len(done)}{f' ({false} unreachable)' if false else ''} | "
                  f"{np.median(conv):.0f} / {max(conv)} | {max(chain)} | {max(soft)} (seed {worst}) | "
                  f"{' / '.join(str(sum(x >= t for x in soft)) for t in TAIL)} | "
                  f"{1e3 * sum(r[3] for r in rows) / max(atts, 1):.3f} |")
            sys.stdout.flush()
    if a.only != "reachable":
        print(f"\nunreachable (soft goals only): the attempt of the kernel's verdict (SOFT_AGREEMENTS = "
              f"{getattr(_core, 'SOFT_AGREEMENTS', 'none in this tree')}) and of the chain's rule (40) on the same attempts; '>' = not within "
              f"{a.ucap} attempts; converged = the pushed target was in reach after all")
        print("| set | n | converged | verdict attempt (median / max) | ik.solve (50 ms timeout): unreachable | "
              "its ms (median / max) | chain's rule at (median / max) |")
        print("|---|---|---|---|---|---|---|")
        for name, robot, probs in unreachable_sets(max(a.n // 5, 1), a.wb_n):
            rows = [trace(robot, goals, q0, seed, a.ucap) for goals, q0, seed in probs]
            conv = sum(c is not None and c >= 0 for _, c, _, _ in rows)
            at = [-1 - c for _, c, _, _ in rows if c is not None and c < 0]
            solved = []  # ik.solve as a caller runs it (default 50 ms timeout): status, ms
            for goals, q0, seed in probs:
                ik.solve(robot, goals, q0=q0, seed=seed)  # (the first solve of a goal structure prepares it)
                t = time.perf_counter()
                res = ik.solve(robot, goals, q0=q0, seed=seed)
                solved.append((res.status.value, 1e3 * (time.perf_counter() - t), res.restarts))
            ms = [t for st, t, _ in solved if st == "unreachable"]
            others = Counter(st for st, _, _ in solved if st != "unreachable")
            restarts = np.median([r for _, _, r in solved])
            miss = sum(c is None for _, c, _, _ in rows)
            chain = [next((i for i, x in enumerate(counts(k)) if x >= _lm.CHAIN_AGREEMENTS), None)
                     for k, c, _, _ in rows if not (c is not None and c >= 0)]
            chain = [x for x in chain if x is not None]
            print(f"| {name} | {len(rows)} | {conv} | "
                  + (f"{np.median(at):.0f} / {max(at)}" if at else "-") + (f" ({miss} >)" if miss else "")
                  + f" | {len(ms)}" + "".join(f", {k} {v}" for k, v in sorted(others.items()))
                  + f"; restarts (median) {restarts:.0f}"
                  + (f" | {np.median(ms):.2f} / {max(ms):.2f}" if ms else " | -")
                  + (f" | {np.median(chain):.0f} / {max(chain)} |" if chain else " | - |"))
            sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
