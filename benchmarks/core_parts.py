#!/usr/bin/env python3
"""Where a whole-body solve's time goes: the general LM core taken apart on whole_body.py's problems.

A diagnostic beside ``whole_body.py`` (which compares with placo): for each robot, on its first
reachable set (supports hard, effectors soft, from the standing q0), the mean time per solve of
``ik.solve`` from q0 and from its own answer (the fixed cost: one evaluation, no step), then the
core's parts, each in a compiled loop on the solve's own prepared arrays (the fast path's
``core_attempts_packed`` inputs): one evaluation (``core_eval_rows``: FK, Jacobians, rows), its forward
kinematics alone, one step (``_reduced_factor``, the legs eliminated) and that step cut after each of
its sections (cumulative), and ``core_iterate`` for k = 0..3 iterations (one iteration = the
difference). Fastest of 7 loops; µs. Last, the active-set step (``_active_step``, the general
step when joints are at their bounds) at q0 with the joints' bounds a box of ±0.05 around it (the
case of ``max_joint_step=0.05``) and 0, 10 or 20 actuated joints (drawn with a fixed seed) at a face
of the box, warm-started as core_iterate does; the step holds most joints at the box (the row says
how many), the regime of a box-bounded solve whose targets lie beyond the box.

    PYTHONPATH=$PWD/src ~/.cache/invkin-peers-env/bin/python benchmarks/core_parts.py
    PYTHONPATH=$PWD/src ~/.cache/invkin-peers-env/bin/python benchmarks/core_parts.py --robots g1

(The robots come from example-robot-data, as in whole_body.py.) The section cuts are copies of
``_reduced_factor``'s source with ``return True`` inserted before a marker line: a marker that is
no longer in the source is reported, not timed.
"""
from __future__ import annotations

import os

os.environ.setdefault("INVKIN_COMPILE", "wait")

import argparse
import inspect
import sys
import time
import warnings

import numpy as np
from numba import njit

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import whole_body as wb  # noqa: E402 - the benchmark's robots, stances and sets

import invkin as ik  # noqa: E402
from invkin.kinematics.kernels import FAST, fk_all_into  # noqa: E402
from invkin.solvers import lm_core as C  # noqa: E402

REPEAT = 7
SECTIONS = (("bounds, J_s,R gathered", "    i0 = 0\n    while i0 < mh:  # each block"),
            ("+ the blocks (G_f, Y, c)", "    for a in range(nr):  # H' ="),
            ("+ H' built", "    for a in range(nr):\n        H[a, a] += pw[a]"),
            ("+ H' factored", "    for p in range(nr - 1, 0, -1):"),
            ("+ dq over R", "    for k in range(dof - 1, -1, -1):"),
            ("+ the legs' dq (whole step)", None))


@njit(_nrt=False)
def _unpack(prepared, gtab, buf, ibuf, gvec, gR, gaxis, gw, dof):
    """core_attempts_packed's unpacking of the goal columns and its workspace carve."""
    model, layout = prepared[0], prepared[1]
    gnode, gkind, gref, glevel, soft, hard, gsrc = layout
    C.unpack_goal_columns(gtab, gsrc, gvec, gR, gaxis, gw)
    ws = C._carve_workspace(buf, ibuf, model[0].shape[0], dof, gvec, gR, hard.shape[0])
    return model, (gnode, gkind, gref, glevel, gvec, gR, gaxis, gw, soft, hard), ws


@njit(_nrt=False)
def _evals(a, q0, rw, N, fk_only):
    model, table, ws = _unpack(a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], q0.shape[0])
    ni, nf, origin, mass, com, coll = model
    gnode, gkind, gref, glevel, gvec, gR, gaxis, gw, soft, hard = table
    for _ in range(N):
        if fk_only:
            fk_all_into(ni, nf, origin, q0, ws[0])
        else:
            C.core_eval_rows(ni, nf, origin, mass, com, q0, gnode, gkind, gref, glevel, gvec, gR, gaxis, gw, ws[10],
                             ws[11], ws[0], ws[1], ws[2], ws[3], ws[4], ws[5], ws[8], True, rw)
    return ws[4][0]


@njit(_nrt=False)
def _iterations(a, q0, rw, q, st, N, k):
    model, table, ws = _unpack(a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], q0.shape[0])
    prepared = a[0]
    done = 0.0
    for _ in range(N):
        for i in range(q.shape[0]):
            q[i] = q0[i]
        for i in range(st.shape[0]):
            st[i] = prepared[5][i]
        C.core_iterate(model, table, prepared[2], prepared[3], prepared[4], 1e-6, 1e-6, q, k, st, ws, rw)
        done += st[C.S_ITERS]
    return done


_STEP_LOOP = '''
def {name}(a, q0, rw, N):
    model, table, ws = _unpack(a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], q0.shape[0])
    prepared = a[0]
    ni, nf, origin, mass, com, coll = model
    gnode, gkind, gref, glevel, gvec, gR, gaxis, gw, soft, hard = table
    Tall, Jf, Jr, sub, e, J, e2, J2, errs, errs2, wvec, wR, H, Jm, Z, S, r, lam_h, col, dq, qn, hold, bias, zero, \\
        dqc, qc, hardx, rw2, rowsx, ballx = ws
    C.core_eval_rows(ni, nf, origin, mass, com, q0, gnode, gkind, gref, glevel, gvec, gR, gaxis, gw, wvec, wR, Tall,
                     Jf, Jr, sub, e, J, errs, True, rw)
    nelim, part = C.limb_partition(ni, gnode, gkind, gref, hard, soft, rowsx, ballx)
    cs, ch = C._costs(e, soft, hard)
    mu = 1e-3 * 0.5 * (cs + ch) + C.EPS_DAMP
    mu_h = (1e-3 * 0.5 * ch + C.EPS_HARD) / mu
    ok = 0
    for _ in range(N):
        ok += {step}(J, e, soft, hard, rowsx[:nelim], ballx, part, hardx, prepared[2][C.L_JW], mu, mu_h, H, Jm, S,
                     lam_h, col, dq)
    return ok
'''


def _step_loops():
    """(label, compiled loop or None) per section: _reduced_factor cut before each marker."""
    src = inspect.getsource(C._reduced_factor.py_func).split("\n", 1)[1]  # without the decorator
    ns = dict(C.__dict__, C=C, np=np, _unpack=_unpack)
    out = []
    for i, (label, marker) in enumerate(SECTIONS):
        if marker is not None and marker not in src:
            out.append((label, None))
            continue
        cut = src if marker is None else src.replace(marker, "    return True\n" + marker, 1)
        exec(cut.replace("def _reduced_factor(", f"def _cut{i}("), ns)
        ns[f"_cut{i}"] = njit(fastmath=FAST, _nrt=False)(ns[f"_cut{i}"])
        exec(_STEP_LOOP.format(name=f"_loop{i}", step=f"_cut{i}"), ns)
        out.append((label, njit(_nrt=False)(ns[f"_loop{i}"])))
    return out


@njit(_nrt=False)
def _held_steps(a, q0, rw, lo, hi, N):
    """N active-set steps at q0 within lo, hi (core_iterate's damping for lam = 0.1); returns how
    many joints the last one held."""
    model, table, ws = _unpack(a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], q0.shape[0])
    ni, nf, origin, mass, com, coll = model
    gnode, gkind, gref, glevel, gvec, gR, gaxis, gw, soft, hard = table
    Tall, Jf, Jr, sub, e, J, e2, J2, errs, errs2, wvec, wR, H, Jm, Z, S, r, lam_h, col, dq, qn, hold, bias, zero, \
        dqc, qc, hardx, rw2, rowsx, ballx = ws
    C.core_eval_rows(ni, nf, origin, mass, com, q0, gnode, gkind, gref, glevel, gvec, gR, gaxis, gw, wvec, wR, Tall,
                     Jf, Jr, sub, e, J, errs, True, rw)
    cs, ch = C._costs(e, soft, hard)
    mu = 0.1 * 0.5 * (cs + ch) + C.EPS_DAMP
    mu_h = (0.1 * 0.5 * ch + C.EPS_HARD) / mu
    for _ in range(N):
        C._active_step(J, e, soft, hard, a[0][2], lo, hi, q0, mu, mu_h, zero, hold, H, Jm, Z, S, r, lam_h, col, dq,
                       True)
    held = 0
    for k in range(hold.shape[0]):
        if hold[k] == hold[k]:
            held += 1
    return held


def _best(f, *args, n):
    best = np.inf
    for _ in range(REPEAT):
        t = time.perf_counter()
        f(*args)
        best = min(best, time.perf_counter() - t)
    return best / n * 1e6


def run(name, loops, N=20000):
    spec = wb.SPECS[name]
    robot = wb.floating(ik.load_robot(os.path.join(wb._robots_dir(), spec["path"])))
    q0 = wb.stance(robot, spec)
    sets = [s for s in wb.make_sets(robot, spec, q0, 30, np.random.default_rng(0)) if s[0] in ("reach", "random")]
    goals = [wb.invkin_goals(robot, spec, *s[1:]) for s in sets]
    for g in goals[:2]:
        ik.solve(robot, g, q0=q0)
    rows = []
    t_solve, iters, answers = [], [], []
    for g in goals:
        best = np.inf
        for _ in range(5):
            t = time.perf_counter()
            r = ik.solve(robot, g, q0=q0)
            best = min(best, time.perf_counter() - t)
        t_solve.append(best)
        iters.append(r.iterations)
        answers.append(r.q)
    rows.append((f"ik.solve from q0 (mean of the {len(goals)} reach and random sets)", 1e6 * np.mean(t_solve)))
    rows.append(("  its iterations (mean; a count, not µs)", float(np.mean(iters))))
    t_fix = []
    for g, qa in zip(goals, answers):
        best = np.inf
        for _ in range(20):
            t = time.perf_counter()
            ik.solve(robot, g, q0=qa)
            best = min(best, time.perf_counter() - t)
        t_fix.append(best)
    rows.append(("ik.solve from its answer (the fixed cost)", 1e6 * np.mean(t_fix)))
    g = goals[0]
    recs = [x._lean for x in g]
    prep = robot.cache["core_fast"][tuple(r[0] for r in recs)]
    prepared = prep[1]
    G = prepared[1][0].shape[0]
    a = (prepared, np.frombuffer(b"".join(r[1] for r in recs)), np.zeros(2 * prep[5]),
         np.zeros(2 * prep[6], dtype=np.int64), np.empty((G, 3)), np.empty((G, 3, 3)), np.empty((G, 3)), np.empty(G))
    rw, q, st = np.empty(G), q0.copy(), prepared[5].copy()
    for fk_only, label in ((False, "one evaluation (core_eval_rows)"), (True, "  of which the forward kinematics")):
        _evals(a, q0, rw, 1, fk_only)
        rows.append((label, _best(_evals, a, q0, rw, N, fk_only, n=N)))
    for label, f in loops:
        if f is None:
            rows.append((f"step: {label}", float("nan")))
            continue
        f(a, q0, rw, 1)
        rows.append((f"step (_reduced_factor): {label}", _best(f, a, q0, rw, N, n=N)))
    its = []
    for k in range(4):
        _iterations(a, q0, rw, q, st, 1, k)
        its.append(_best(_iterations, a, q0, rw, q, st, N // 10, k, n=N // 10))
    rows.append(("core_iterate, set-up and first evaluation (k = 0)", its[0]))
    rows.append(("one iteration ((k = 3) - (k = 0)) / 3", (its[3] - its[0]) / 3))
    rng = np.random.default_rng(1)
    actuated = np.arange(6, robot.dof)  # (the floating base: the first six entries of q)
    for at in (0, 10, 20):
        lo, hi = np.maximum(q0 - 0.05, prepared[3]), np.minimum(q0 + 0.05, prepared[4])
        for k in rng.permutation(actuated)[:at]:
            (lo if rng.random() < 0.5 else hi)[k] = q0[k]
        held = _held_steps(a, q0, rw, lo, hi, 1)
        rows.append((f"active-set step, ±0.05 box, {at} joints at its faces (holds {held})",
                     _best(_held_steps, a, q0, rw, lo, hi, N // 10, n=N // 10)))
    return robot.dof, rows


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--robots", default="g1,talos,solo12")
    args = ap.parse_args(argv)
    warnings.simplefilter("ignore")
    loops = _step_loops()
    names = args.robots.split(",")
    results = {n: run(n, loops) for n in names}
    print(f"invkin core parts, µs (fastest of {REPEAT}); load average {os.getloadavg()[0]:.2f}")
    print("| part | " + " | ".join(f"{n} ({results[n][0]} dof)" for n in names) + " |")
    print("|---|" + "---|" * len(names))
    for i, (label, _) in enumerate(results[names[0]][1]):
        print(f"| {label} | " + " | ".join(f"{results[n][1][i][1]:.2f}" for n in names) + " |")


if __name__ == "__main__":
    main()
