"""Levenberg–Marquardt with adaptive damping, joint limits as an active set, hard goals (the
default method).

Each iteration solves the damped normal equations

    (Jᵀ J + μ W) δq = Jᵀ e,    μ = λ E + ε,    E = ½ eᵀ e

(Sugihara 2011: the damping scales with the residual, so it vanishes at a solution and the step
becomes Gauss–Newton; W = diag(joint_weights)), with hard goals as constraints of the step (the
general core below), applies ``q ← clamp(q ⊕ δq)`` and keeps the step only if the cost fell
(λ shrinks by LAMBDA_SHRINK), else rejects it (λ grows by CHAIN_LAMBDA_GROW). Joints a step would
push past a limit are held there and the others re-solved (active set). Restarts, the best
attempt and the iteration budget live in the attempts kernels; the clock in the solve driver.

Two kernels run it: lm_chain_attempts for goals on one frame (its chain program: the common
single-arm case, and solve_many), core_attempts (solvers/lm_core.py) for everything else
(several frames, centre of mass, relative goals, hard goals, posture). Both use the same damping
schedule and active set.

Stops with CONVERGED when every goal is within tolerance, STALLED when λ explodes or the cost
stops improving (a local minimum or an unreachable target), RUNNING when ``max_iter`` is spent.
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit, prange

from .._checks import MAX_LENGTH
from ..kinematics.kernels import FAST, NO_RC, chain_frames_into, chain_jacobian_from_frames
from ..spatial import rotvec_product
from ._common import CONVERGED, RUNNING, STALLED, _jr_inv_beta, _log_relative, goal_row_call, \
    ldl_solve, rotation_rows

NAME = "lm"
JOINT_TYPES = ("revolute", "continuous", "prismatic", "ball")

LAMBDA_SHRINK = 0.7
LAMBDA_GROW = 2.0
LAMBDA_MIN = 1e-9
LAMBDA_MAX = 1e8
EPS_DAMP = 1e-12
ATTEMPT_ITERATIONS = 30  # iterations before an unconverged attempt restarts (as rtb's ik_LM)
PROGRESS_WINDOW = 4       # an attempt whose cost has not fallen by PROGRESS_FACTOR over this many
PROGRESS_FACTOR = 0.5     # iterations is in a local minimum or creeping along a limit: restart
NEAR = 100.0  # within NEAR x tolerance an attempt is not cut by the progress test


# attempt bookkeeping in the state array of lm_attempts
S_LAMBDA, S_ITERS, S_PERR, S_RERR, S_FREE, S_ATTEMPT, S_BEST, S_ATTEMPT_ITERS, S_BEST_PERR, S_BEST_RERR, \
    S_MINIMIZE = range(11)


# --------------------------------------------------------------------------- one-frame goals on a chain
#
# The common case — every goal row on one frame (a Pose, a Position, an Orientation, an Aim, ...)
# — runs on the frame's chain program (kinematics/kernels.py): FK walks only the moving joints
# on the path, the Jacobian comes from the joint frames of that walk, the trial point of an
# iteration is evaluated without its Jacobian (a rejected step costs FK and the residual only),
# and when there are no more residual rows than joints (m <= dof; no posture term) the step solves
# the m x m system of the push-through form
#
#     dq = W^-1 J^T (J W^-1 J^T + mu I)^-1 e    (= (J^T J + mu W)^-1 J^T e)
#
# instead of the dof x dof normal equations. The model's per-DOF arrays travel in one table
# ``lims`` (rows L_*, built once per robot by solve.py) and q lives in the scratch buffer, so the
# kernel called per solve takes 11 arrays instead of 20.

L_LOWER, L_UPPER, L_SAMPLE_LO, L_SAMPLE_SPAN, L_WRAP, L_JW, L_IJW, L_NEG_INF, L_POS_INF, L_BALL = range(10)
N_LIMS = 10
S_STARTED = 11      # chain attempt state: q has been initialised from q0
S_FREE_ATTEMPTS = 12  # 1: attempts run free of the limits (every joint wraps a full turn), 0: clamped
S_AGREE = 13        # attempts counted toward the unreachable verdict (CHAIN_AGREEMENTS; lm_core.AGREEMENTS)
CHAIN_STATE = 14    # (the general core's state, lm_core.CORE_STATE, extends this one; S_AGREE is shared)
UNREACHABLE = 3     # attempts kernels' code: the restarts keep ending at the same closest, unconverged answer
AGREE = 1e-2        # two attempts agree when their largest errors (over tolerance) differ by less than this fraction
# lm_chain_attempts ends UNREACHABLE once CHAIN_AGREEMENTS attempts in a row, each from a uniform random
# start, ended unconverged without beating the best answer by more than AGREE: the restarts keep finding
# the same closest answer (a planar arm asked for a point off its plane ran ~36,000 such restarts to the
# 50 ms timeout and said time_limit). Counted per attempt in the kernel's state, so the verdict does not
# depend on how the driver chunks its calls. Measured on the 6 x 1000 benchmark targets
# (../shared/peers/results, all reachable): the longest such run before an attempt converged was 19
# (panda; 12 or more on 4 of 6000 targets, a tail falling ~0.76x per attempt); on 399 unreachable
# targets (planar2 too close or off its plane, panda/ur5/iiwa14 poses pushed out to 0.97-1.0 x the reach
# radius) the verdict came at attempt 40-42 (median per set; at most 90). Counting only the attempts that
# stalled within AGREE of the best instead (the general core's rule, lm_core.AGREEMENTS) took up to 386
# attempts there for 3 of them, 752 for 8 (7 targets: none within 3,000): a chain attempt is cut by its
# progress test before it reaches the closest answer, so unconverged attempts end at scattered errors.
CHAIN_AGREEMENTS = 40
# Damping schedule of the chain kernel (tuned on the 6 x 1000 saved targets of the peers'
# benchmark: 0.3 / 0.7 / 3 took 6-20 % fewer iterations than 1 / 0.7 / 2; see RESULTS.md)
CHAIN_LAMBDA_INIT = 0.3
CHAIN_LAMBDA_GROW = 3.0
ACTIVE_SET_PASSES = 4  # clamped steps: joints the step would push past a limit are held there, re-solve


def limits_table(lower, upper, sample_lo, sample_span, wrap_ok, joint_weights, ball_starts) -> np.ndarray:
    """The per-DOF table ``lims`` (N_LIMS, dof) of the chain kernels (read-only)."""
    dof = lower.shape[0]
    t = np.zeros((N_LIMS, dof))
    t[L_LOWER] = lower
    t[L_UPPER] = upper
    t[L_SAMPLE_LO] = sample_lo
    t[L_SAMPLE_SPAN] = sample_span
    t[L_WRAP] = wrap_ok
    t[L_JW] = joint_weights
    t[L_IJW] = 1.0 / np.asarray(joint_weights, dtype=np.float64)
    t[L_NEG_INF] = -np.inf
    t[L_POS_INF] = np.inf
    t[L_BALL, np.asarray(ball_starts, dtype=np.int64)] = 1.0
    t.setflags(write=False)
    return t


def wrappable_dofs(ni, nf, dof) -> np.ndarray:
    """1.0 for every DOF that wrap_into_limits may shift by 2 pi (revolute, integer multipliers)."""
    out = np.zeros(dof)
    for c in range(dof):
        ok = False
        for i in range(ni.shape[0]):
            if ni[i, 2] == c:
                m = nf[i, 3]
                ok = ni[i, 1] == 1 and m == math.floor(m)
                if not ok:
                    break
        out[c] = 1.0 if ok else 0.0
    return out


def chain_workspace_size(n_rows: int, dof: int, m: int) -> int:
    """Length of the flat float64 scratch buffer of lm_chain_attempts (n_rows = chain rows)."""
    ns = max(m, dof)
    return 24 * n_rows + 32 + 6 * dof + 3 * m + m * dof + ns * ns + 2 * ns + 4 * dof + 8 * (m // 3)


@njit(cache=True, **NO_RC)
def chain_workspace(buf, n_rows, dof, m):
    """Scratch of the chain kernels as views of one flat buffer (no allocation; only for
    NO_RC callers, since the views carry no reference of their own)."""
    ns = max(m, dof)
    o = 0
    F = buf[o:o + 12 * n_rows].reshape((n_rows, 12))
    o += 12 * n_rows
    F2 = buf[o:o + 12 * n_rows].reshape((n_rows, 12))
    o += 12 * n_rows
    T = buf[o:o + 16].reshape((4, 4))
    o += 16
    T2 = buf[o:o + 16].reshape((4, 4))
    o += 16
    Jf = buf[o:o + 6 * dof].reshape((6, dof))
    o += 6 * dof
    e = buf[o:o + m]
    o += m
    e2 = buf[o:o + m]
    o += m
    ea = buf[o:o + m]
    o += m
    J = buf[o:o + m * dof].reshape((m, dof))
    o += m * dof
    A = buf[o:o + ns * ns]
    o += ns * ns
    b = buf[o:o + ns]
    o += ns
    y = buf[o:o + ns]
    o += ns
    dq = buf[o:o + dof]
    o += dof
    qn = buf[o:o + dof]
    o += dof
    hold = buf[o:o + dof]
    o += dof
    q = buf[o:o + dof]
    o += dof
    G = m // 3
    aux = buf[o:o + 4 * G].reshape((G, 4))
    o += 4 * G
    aux2 = buf[o:o + 4 * G].reshape((G, 4))
    return F, F2, T, T2, Jf, e, e2, ea, J, A, b, y, dq, qn, hold, q, aux, aux2


@njit(cache=True, fastmath=FAST, inline="always", **NO_RC)
def _chain_residual(ch, q, gkind, gvec, gR, gaxis, gw, F, T, e, aux, Jf, J):
    """Frames and residual at q (no Jacobian); returns (largest position, rotation error). For
    rotation rows aux[g] keeps (phi, beta) for _chain_jacobian (goal_row's Jr^-1 term)."""
    chain_frames_into(ch, q, F, T)
    perr = 0.0
    rerr = 0.0
    for g in range(gkind.shape[0]):
        kind = gkind[g]
        w = gw[g]
        if kind == 0:
            ex = gvec[g, 0] - T[0, 3]
            ey = gvec[g, 1] - T[1, 3]
            ez = gvec[g, 2] - T[2, 3]
            e[3 * g] = w * ex
            e[3 * g + 1] = w * ey
            e[3 * g + 2] = w * ez
            cls = 0
            err = math.sqrt(ex * ex + ey * ey + ez * ez)
        elif kind == 1:
            p0, p1, p2, err, sn, cs = _log_relative(gR, g, T)
            e[3 * g] = w * p0
            e[3 * g + 1] = w * p1
            e[3 * g + 2] = w * p2
            aux[g, 0] = p0
            aux[g, 1] = p1
            aux[g, 2] = p2
            aux[g, 3] = _jr_inv_beta(err, sn, cs)
            cls = 1
        else:
            cls, err = goal_row_call(T, Jf, g, kind, gvec, gR, gaxis, gw, e, J, False)
        if gw[g] > 0.0:
            if cls == 0:
                if err > perr:
                    perr = err
            elif err > rerr:
                rerr = err
    return perr, rerr


@njit(cache=True, fastmath=FAST, inline="always", **NO_RC)
def _chain_jacobian(ch, gkind, gvec, gR, gaxis, gw, F, T, e, aux, Jf, J):
    """Task Jacobian J (m, dof) from the frames and aux of _chain_residual (position and
    rotation rows directly, the others through goal_row, which rewrites their e unchanged)."""
    chain_jacobian_from_frames(ch, F, T[0, 3], T[1, 3], T[2, 3], Jf)
    dof = J.shape[1]
    for g in range(gkind.shape[0]):
        kind = gkind[g]
        w = gw[g]
        r0 = 3 * g
        if kind == 0:
            for c in range(dof):
                J[r0, c] = w * Jf[0, c]
                J[r0 + 1, c] = w * Jf[1, c]
                J[r0 + 2, c] = w * Jf[2, c]
        elif kind == 1:
            rotation_rows(J, r0, w, aux[g, 0], aux[g, 1], aux[g, 2], aux[g, 3], Jf)
        else:
            goal_row_call(T, Jf, g, kind, gvec, gR, gaxis, gw, e, J, True)


@njit(cache=True, fastmath=FAST, **NO_RC)
def _chain_eval(ch, q, gkind, gvec, gR, gaxis, gw, F, T, e, aux, Jf, J):
    """_chain_residual as a call, for the evaluations outside the iteration loop (each inlined
    copy of a kernel costs compile time; the loop's own evaluations are inlined)."""
    return _chain_residual(ch, q, gkind, gvec, gR, gaxis, gw, F, T, e, aux, Jf, J)


@njit(cache=True, fastmath=FAST, **NO_RC)
def _chain_eval_jacobian(ch, gkind, gvec, gR, gaxis, gw, F, T, e, aux, Jf, J):
    """_chain_jacobian as a call (see _chain_eval)."""
    _chain_jacobian(ch, gkind, gvec, gR, gaxis, gw, F, T, e, aux, Jf, J)


@njit(cache=True, inline="always", **NO_RC)
def _chain_step_clamp(q, dq, lims, lo_row, hi_row, out):
    """out = clamp(q ⊕ dq) with the bounds of rows lo_row / hi_row of lims (step_and_clamp)."""
    n = q.shape[0]
    for i in range(n):
        out[i] = q[i] + dq[i]
    for s in range(n):
        if lims[L_BALL, s] != 0.0:
            out[s], out[s + 1], out[s + 2] = rotvec_product(q[s], q[s + 1], q[s + 2], dq[s], dq[s + 1], dq[s + 2],
                                                            bool(0))
    for i in range(n):
        if out[i] < lims[lo_row, i]:
            out[i] = lims[lo_row, i]
        elif out[i] > lims[hi_row, i]:
            out[i] = lims[hi_row, i]


@njit(cache=True, **NO_RC)
def wrap_near_into(q, q0, idx, lo, hi):
    """q[idx[t]] (in place) shifted by the multiple of 2 pi that brings it nearest q0[idx[t]] while
    inside [lo[t], hi[t]] (a joint a turn changes nothing of: solve._wrap_near, Robot.wrap_dofs);
    unshifted where it is within pi already or no shift stays inside. A kernel for one q: the same
    arithmetic in a Python loop cost ~4 us a UR5 solve (six such joints), a call ~1 us."""
    turn = 2.0 * math.pi
    for t in range(idx.shape[0]):
        j = idx[t]
        v = q[j]
        d = v - q0[j]
        if -math.pi <= d <= math.pi:
            continue
        k = -np.round(d / turn)
        if lo[t] > -math.inf:
            k = max(k, math.ceil((lo[t] - v) / turn))
        if hi[t] < math.inf:
            k = min(k, math.floor((hi[t] - v) / turn))
        w = v + turn * k
        if k != 0.0 and lo[t] <= w <= hi[t]:
            q[j] = w


@njit(cache=True, **NO_RC)
def _chain_wrap(lims, q):
    """wrap_into_limits with the wrap flags of lims."""
    for c in range(q.shape[0]):
        lo = lims[L_LOWER, c]
        hi = lims[L_UPPER, c]
        if lo <= q[c] <= hi or lims[L_WRAP, c] == 0.0:
            continue
        k = math.floor((q[c] - lo) / (2.0 * math.pi))
        v = q[c] - 2.0 * math.pi * k
        if v <= hi:
            q[c] = v
    for c in range(q.shape[0]):
        if q[c] < lims[L_LOWER, c] or q[c] > lims[L_UPPER, c]:
            return False
    return True


@njit(cache=True, fastmath=FAST, inline="always", **NO_RC)
def _damped_step(J, e, lims, unit, mu, A, b, y, dq, hold, ea, nheld):
    """dq of the damped normal equations (J^T J + mu W) dq = J^T e over the joints not held; a
    held joint k (hold[k] not NaN; nheld of them) moves by hold[k] and its effect J[:, k] hold[k]
    is taken off e first. Solved in the push-through form (m x m) when m <= dof; ``unit``: every
    joint weight is 1. False if the system is not positive definite."""
    m, dof = J.shape
    if nheld > 0:
        for r in range(m):
            s = e[r]
            for k in range(dof):
                if hold[k] == hold[k]:
                    s -= J[r, k] * hold[k]
            ea[r] = s
    else:
        for r in range(m):
            ea[r] = e[r]
    if m <= dof:
        B = A[:m * m].reshape((m, m))
        if nheld == 0 and unit:
            for r in range(m):
                for c in range(r + 1):
                    s = 0.0
                    for k in range(dof):
                        s += J[r, k] * J[c, k]
                    B[r, c] = s
                    B[c, r] = s
        else:
            for r in range(m):
                for c in range(r + 1):
                    s = 0.0
                    for k in range(dof):
                        if hold[k] != hold[k]:
                            s += J[r, k] * J[c, k] * lims[L_IJW, k]
                    B[r, c] = s
                    B[c, r] = s
        for r in range(m):
            B[r, r] += mu
        if not ldl_solve(B, ea, y):
            return False
        for k in range(dof):
            if nheld > 0 and hold[k] == hold[k]:
                dq[k] = hold[k]
                continue
            s = 0.0
            for r in range(m):
                s += J[r, k] * y[r]
            dq[k] = s if unit else lims[L_IJW, k] * s
        return True
    N = A[:dof * dof].reshape((dof, dof))
    for r in range(dof):
        held_r = nheld > 0 and hold[r] == hold[r]
        s = 0.0
        for k in range(m):
            s += J[k, r] * ea[k]
        b[r] = hold[r] if held_r else s
        for c in range(r, dof):
            s = 0.0
            if not held_r and (nheld == 0 or hold[c] != hold[c]):
                for k in range(m):
                    s += J[k, r] * J[k, c]
            N[r, c] = s
            N[c, r] = s
        if held_r:
            N[r, r] = 1.0
        else:
            N[r, r] += mu * lims[L_JW, r]
    return ldl_solve(N, b, dq)


@njit(cache=True, fastmath=FAST, inline="always", **NO_RC)
def _active_set_step(J, e, lims, unit, mu, A, b, y, dq, hold, ea, q, clamped):
    """The damped step; clamped: joints that it would push past a limit are held at that limit
    and the others re-solved (up to ACTIVE_SET_PASSES times), so the step does not waste itself
    against the limits (plain clamping leaves the other joints' share of the motion undone)."""
    dof = q.shape[0]
    nheld = 0
    for k in range(dof):
        hold[k] = np.nan
    for _ in range(ACTIVE_SET_PASSES if clamped else 1):
        if not _damped_step(J, e, lims, unit, mu, A, b, y, dq, hold, ea, nheld):
            return False
        if not clamped:
            return True
        new = 0
        for k in range(dof):
            if hold[k] != hold[k]:
                v = q[k] + dq[k]
                if v < lims[L_LOWER, k]:
                    hold[k] = lims[L_LOWER, k] - q[k]
                    new += 1
                elif v > lims[L_UPPER, k]:
                    hold[k] = lims[L_UPPER, k] - q[k]
                    new += 1
        if new == 0:
            return True
        nheld += new
    return True


@njit(cache=True, fastmath=FAST, **NO_RC)
def lm_chain_iterate_ws(ch, lims, gkind, gvec, gR, gaxis, gw, tol_p, tol_r, q, max_iter, state, ws):
    """lm_iterate_ws for goal rows on one frame, on its chain program (same state and codes),
    without a posture term (solve() runs posture goals on lm_attempts).

    Differences: clamped iterations hold the joints a step would push past a limit and re-solve
    the others (_active_set_step); a free attempt that converges outside the limits where 2 pi
    shifts cannot bring it back continues as a clamped one from its clamped configuration
    instead of giving up; the damping starts at CHAIN_LAMBDA_INIT and grows by CHAIN_LAMBDA_GROW."""
    F, F2, T, T2, Jf, e, e2, ea, J, A, b, y, dq, qn, hold, _q, aux, aux2 = ws
    dof = q.shape[0]
    m = e.shape[0]
    lam = state[0] if state[0] > 0.0 else CHAIN_LAMBDA_INIT
    free = state[4] > 0.5
    unit = True
    for k in range(dof):
        if lims[L_JW, k] != 1.0:
            unit = False
    progress_test = not (state.shape[0] > S_MINIMIZE and state[S_MINIMIZE] > 0.5)
    perr, rerr = _chain_eval(ch, q, gkind, gvec, gR, gaxis, gw, F, T, e, aux, Jf, J)
    _chain_eval_jacobian(ch, gkind, gvec, gR, gaxis, gw, F, T, e, aux, Jf, J)
    cost = 0.0
    for i in range(m):
        cost += e[i] * e[i]
    code = RUNNING
    it = 0
    small = 0
    window_cost = cost
    while it < max_iter:
        if perr <= tol_p and rerr <= tol_r:
            if not free or _chain_wrap(lims, q):
                code = CONVERGED
                break
            # converged outside the limits: go on clamped from the clamped configuration
            free = False
            state[4] = 0.0
            for i in range(dof):
                if q[i] < lims[L_LOWER, i]:
                    q[i] = lims[L_LOWER, i]
                elif q[i] > lims[L_UPPER, i]:
                    q[i] = lims[L_UPPER, i]
            perr, rerr = _chain_eval(ch, q, gkind, gvec, gR, gaxis, gw, F, T, e, aux, Jf, J)
            _chain_eval_jacobian(ch, gkind, gvec, gR, gaxis, gw, F, T, e, aux, Jf, J)
            cost = 0.0
            for i in range(m):
                cost += e[i] * e[i]
            lam = CHAIN_LAMBDA_INIT
            window_cost = cost
            small = 0
            continue
        it += 1
        mu = lam * 0.5 * cost + EPS_DAMP
        if not _active_set_step(J, e, lims, unit, mu, A, b, y, dq, hold, ea, q, not free):
            lam *= 10.0
            if lam > LAMBDA_MAX:
                code = STALLED
                break
            continue
        _chain_step_clamp(q, dq, lims, L_NEG_INF if free else L_LOWER, L_POS_INF if free else L_UPPER, qn)
        perr2, rerr2 = _chain_residual(ch, qn, gkind, gvec, gR, gaxis, gw, F2, T2, e2, aux2, Jf, J)
        cost2 = 0.0
        for i in range(m):
            cost2 += e2[i] * e2[i]
        if it % PROGRESS_WINDOW == 0 and progress_test:
            if cost > PROGRESS_FACTOR * window_cost and (perr > NEAR * tol_p or rerr > NEAR * tol_r):
                code = STALLED
                break
            window_cost = cost
        ok = cost2 < cost
        before = cost
        if ok:
            for i in range(dof):
                q[i] = qn[i]
            F, F2 = F2, F
            T, T2 = T2, T
            e, e2 = e2, e
            aux, aux2 = aux2, aux
            perr = perr2
            rerr = rerr2
            cost = cost2
            _chain_jacobian(ch, gkind, gvec, gR, gaxis, gw, F, T, e, aux, Jf, J)
        lam, small, stop = lm_accept(ok, before, cost2, lam, small)
        if stop:
            code = STALLED
            break
    if code == RUNNING and perr <= tol_p and rerr <= tol_r and (not free or _chain_wrap(lims, q)):
        code = CONVERGED
    state[0] = lam
    state[1] += it
    state[2] = perr
    state[3] = rerr
    return code


@njit(cache=True, inline="always", **NO_RC)
def lm_accept(ok, before, after, lam, small):
    """The damping rule after a trial step, shared by the chain kernel and the general core
    (lm_core.core_iterate), which decide ``ok`` (accept) and the costs before / after each their
    way: accepted, lam shrinks by LAMBDA_SHRINK (floor LAMBDA_MIN) and ``small`` counts the steps in
    a row whose relative decrease is below 1e-6; refused, lam grows by CHAIN_LAMBDA_GROW.
    Returns (lam, small, stop): stop (STALLED) after 4 such small steps or lam past LAMBDA_MAX."""
    if ok:
        rel = (before - after) / before if before > 0.0 else 1.0
        lam = max(lam * LAMBDA_SHRINK, LAMBDA_MIN)
        small = small + 1 if rel < 1e-6 else 0
        return lam, small, small >= 4
    lam *= CHAIN_LAMBDA_GROW
    return lam, small, lam > LAMBDA_MAX


@njit(cache=True, **NO_RC)
def _mix64(x):
    """splitmix64's finaliser (a bijection of uint64 with good avalanche)."""
    x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


@njit(cache=True, **NO_RC)
def _restart_sample(lims, seed, attempt, q):
    """Uniform restart number ``attempt`` in the sampling box of lims; a counter-based hash of
    (seed, attempt, joint), so it does not depend on how calls are chunked or on threads."""
    base = _mix64(np.uint64(seed) * np.uint64(0x9E3779B97F4A7C15) + np.uint64(attempt))
    for i in range(q.shape[0]):
        x = _mix64(base + np.uint64(i + 1) * np.uint64(0xD1B54A32D192ED03))
        u = float(x >> np.uint64(11)) * (1.0 / 9007199254740992.0)
        q[i] = lims[L_SAMPLE_LO, i] + lims[L_SAMPLE_SPAN, i] * u


@njit(cache=True, **NO_RC)
def lm_chain_attempts(ch, lims, gkind, gvec, gR, gaxis, gw, tol_p, tol_r, q0, best_q, state, budget,
                      attempt_iters, max_attempts, seed, buf):
    """lm_attempts for goal rows on one frame (its chain program ``ch``), with the per-DOF
    table ``lims`` (limits_table) and q kept in ``buf`` (chain_workspace_size entries) between
    calls. On the first call (state[S_STARTED] == 0) q starts from q0 clamped into the limits;
    a q0 with an entry that is not a number within ±MAX_LENGTH returns -1. When the budget ends
    before any attempt finished, best_q holds the clamped current q and state its errors. ``state`` has CHAIN_STATE entries
    (new_chain_state). Returns CONVERGED, RUNNING, STALLED (max_attempts ran), UNREACHABLE (CHAIN_AGREEMENTS
    attempts in a row found nothing better than best_q, which holds the closest answer) or -1."""
    ws = chain_workspace(buf, ch.shape[0], q0.shape[0], 3 * gkind.shape[0])
    code = lm_chain_attempts_ws(ch, lims, gkind, gvec, gR, gaxis, gw, tol_p, tol_r, q0, best_q, state, budget,
                                attempt_iters, max_attempts, seed, ws)
    if code >= 0:  # the wrappable joints at the turn nearest q0 inside the limits (solve._wrap_near's rule)
        _chain_wrap_near(lims, q0, best_q)
    return code


@njit(cache=True, **NO_RC)
def _chain_wrap_near(lims, q0, q):
    """Every joint of lims' wrap flags (a turn changes no frame) in q shifted by the multiple of
    2 pi that brings it nearest q0 while inside its limits (wrap_near_into's rule for those joints:
    a joint whose range spans less than a turn has no other value inside and stays)."""
    turn = 2.0 * math.pi
    for c in range(q.shape[0]):
        if lims[L_WRAP, c] == 0.0:
            continue
        v = q[c]
        d = v - q0[c]
        if -math.pi <= d <= math.pi:
            continue
        lo = lims[L_LOWER, c]
        hi = lims[L_UPPER, c]
        k = -np.round(d / turn)
        if lo > -math.inf:
            k = max(k, math.ceil((lo - v) / turn))
        if hi < math.inf:
            k = min(k, math.floor((hi - v) / turn))
        w = v + turn * k
        if k != 0.0 and lo <= w <= hi:
            q[c] = w


@njit(cache=True, **NO_RC)
def lm_chain_attempts_ws(ch, lims, gkind, gvec, gR, gaxis, gw, tol_p, tol_r, q0, best_q, state, budget,
                         attempt_iters, max_attempts, seed, ws):
    """lm_chain_attempts on the views ``ws = chain_workspace(buf, ...)`` (made once per batch chunk)."""
    dof = q0.shape[0]
    F, T, Jf, e, J, q, aux = ws[0], ws[2], ws[4], ws[5], ws[8], ws[15], ws[16]
    if state[S_STARTED] == 0.0:
        for i in range(dof):
            v = q0[i]
            if not (-MAX_LENGTH <= v <= MAX_LENGTH):  # NaN, inf or beyond: the caller names it
                return -1
            if v < lims[L_LOWER, i]:
                v = lims[L_LOWER, i]
            elif v > lims[L_UPPER, i]:
                v = lims[L_UPPER, i]
            q[i] = v
        state[S_STARTED] = 1.0
    used = 0
    code = RUNNING
    while used < budget:
        if state[S_ATTEMPT] >= max_attempts:
            code = STALLED
            break
        n = min(attempt_iters - int(state[S_ATTEMPT_ITERS]), budget - used)
        before = state[S_ITERS]
        c = lm_chain_iterate_ws(ch, lims, gkind, gvec, gR, gaxis, gw, tol_p, tol_r, q, n, state, ws)
        done = int(state[S_ITERS] - before)
        used += done
        state[S_ATTEMPT_ITERS] += done
        if c == CONVERGED:
            for i in range(dof):
                best_q[i] = q[i]
            state[S_BEST] = 0.0
            state[S_BEST_PERR] = state[S_PERR]
            state[S_BEST_RERR] = state[S_RERR]
            return CONVERGED
        if c == STALLED or state[S_ATTEMPT_ITERS] >= attempt_iters or done == 0:
            clamped = False
            for i in range(dof):  # judge the attempt by its clamped configuration
                if q[i] < lims[L_LOWER, i]:
                    q[i] = lims[L_LOWER, i]
                    clamped = True
                elif q[i] > lims[L_UPPER, i]:
                    q[i] = lims[L_UPPER, i]
                    clamped = True
            pe = state[S_PERR]  # the errors at q (lm_chain_iterate_ws leaves q at its last point)
            re = state[S_RERR]
            if clamped:
                pe, re = _chain_eval(ch, q, gkind, gvec, gR, gaxis, gw, F, T, e, aux, Jf, J)
            key = max(pe / tol_p, re / tol_r)
            best = state[S_BEST]
            if key < (1.0 - AGREE) * best:  # a better answer than the best: the count starts again
                state[S_AGREE] = 0.0
            else:
                state[S_AGREE] += 1.0  # another random start found nothing better (CHAIN_AGREEMENTS)
            if key < best:
                state[S_BEST] = key
                state[S_BEST_PERR] = pe
                state[S_BEST_RERR] = re
                for i in range(dof):
                    best_q[i] = q[i]
            if state[S_AGREE] >= CHAIN_AGREEMENTS:
                code = UNREACHABLE
                break
            attempt = int(state[S_ATTEMPT]) + 1
            state[S_ATTEMPT] = attempt
            state[S_ATTEMPT_ITERS] = 0.0
            state[S_LAMBDA] = 0.0
            state[S_FREE] = state[S_FREE_ATTEMPTS]
            _restart_sample(lims, seed, attempt, q)
    if not (state[S_BEST] < np.inf):  # no attempt finished: report the clamped current q
        for i in range(dof):
            v = q[i]
            if v < lims[L_LOWER, i]:
                v = lims[L_LOWER, i]
            elif v > lims[L_UPPER, i]:
                v = lims[L_UPPER, i]
            best_q[i] = v
        pe, re = _chain_eval(ch, best_q, gkind, gvec, gR, gaxis, gw, F, T, e, aux, Jf, J)
        state[S_BEST_PERR] = pe
        state[S_BEST_RERR] = re
    return code


@njit(cache=True)
def new_chain_state(free):
    """State array for lm_chain_attempts: attempt 0, no best yet, q not started; every attempt
    free of the limits (free = 1.0, see free_attempts) or clamped (0.0)."""
    st = np.zeros(CHAIN_STATE)
    st[S_FREE] = free
    st[S_FREE_ATTEMPTS] = free
    st[S_BEST] = np.inf
    st[S_BEST_PERR] = np.inf
    st[S_BEST_RERR] = np.inf
    return st


@njit(cache=True, parallel=True)
def lm_chain_batch(ch, lims, gkind, gvecs, gRs, gaxis, gw, tol_p, tol_r, q0s, free, attempt_iters,
                   max_restarts, seed, q_out, errs_out, iters_out, restarts_out, code_out):
    """B independent solves in parallel (prange), item b seeded with
    seed + b (deterministic for any thread count); one scratch buffer per chunk of items.
    code_out (B,) int64: each item's lm_chain_attempts code (CONVERGED, STALLED or UNREACHABLE)."""
    B = gvecs.shape[0]
    dof = q0s.shape[1]
    m = 3 * gkind.shape[0]
    ns = max(m, dof)
    size = 24 * ch.shape[0] + 32 + 6 * dof + 3 * m + m * dof + ns * ns + 2 * ns + 4 * dof + 8 * (m // 3)
    nchunk = min(B, 256)
    for t in prange(nchunk):
        buf = np.empty(size)
        state = np.empty(CHAIN_STATE)
        best = np.empty(dof)
        _batch_chunk(ch, lims, gkind, gvecs, gRs, gaxis, gw, tol_p, tol_r, q0s, free, attempt_iters, max_restarts,
                     seed, q_out, errs_out, iters_out, restarts_out, code_out, t * B // nchunk, (t + 1) * B // nchunk,
                     buf, state, best)


@njit(cache=True, **NO_RC)
def _batch_chunk(ch, lims, gkind, gvecs, gRs, gaxis, gw, tol_p, tol_r, q0s, free, attempt_iters, max_restarts, seed,
                 q_out, errs_out, iters_out, restarts_out, code_out, b0, b1, buf, state, best):
    """Items b0..b1-1 of lm_chain_batch on one scratch buffer (its views made once)."""
    dof = q0s.shape[1]
    ws = chain_workspace(buf, ch.shape[0], dof, 3 * gkind.shape[0])
    for b in range(b0, b1):
        state[:] = 0.0
        state[S_FREE] = free
        state[S_FREE_ATTEMPTS] = free
        state[S_BEST] = np.inf
        state[S_BEST_PERR] = np.inf
        state[S_BEST_RERR] = np.inf
        code = lm_chain_attempts_ws(ch, lims, gkind, gvecs[b], gRs[b], gaxis, gw, tol_p, tol_r, q0s[b], best,
                                    state, (max_restarts + 1) * attempt_iters, attempt_iters, max_restarts + 1,
                                    seed + b, ws)
        for i in range(dof):
            q_out[b, i] = best[i]
        errs_out[b, 0] = state[S_BEST_PERR]
        errs_out[b, 1] = state[S_BEST_RERR]
        iters_out[b] = int(state[S_ITERS])
        restarts_out[b] = int(state[S_ATTEMPT])
        code_out[b] = code


@njit(cache=True)
def batch_pose_rows(Ts, gkind, gR, gaxis, gvecs, gRs):
    """solve_many's per-target goal rows from poses Ts (B, 4, 4) for the template rows (gkind,
    gR, gaxis) of one Pose: position rows take the translation, rotation rows the rotation,
    axis rows the rotation's column of the template axis. Returns (b, reason) of the first bad
    target — reason 1: a non-finite entry, 2: not a rigid transform (|R^T R - I| > 1e-3,
    det R <= 0 or last row not 0 0 0 1 within 1e-9) — or (-1, 0)."""
    B = Ts.shape[0]
    G = gkind.shape[0]
    for b in range(B):
        T = Ts[b]
        for i in range(4):
            for j in range(4):
                v = T[i, j]
                if not (v - v == 0.0):
                    return b, 1
        drift = 0.0
        for i in range(3):
            for j in range(3):
                d = T[0, i] * T[0, j] + T[1, i] * T[1, j] + T[2, i] * T[2, j] - (1.0 if i == j else 0.0)
                drift = max(drift, abs(d))
        det = (T[0, 0] * (T[1, 1] * T[2, 2] - T[1, 2] * T[2, 1]) - T[0, 1] * (T[1, 0] * T[2, 2] - T[1, 2] * T[2, 0])
               + T[0, 2] * (T[1, 0] * T[2, 1] - T[1, 1] * T[2, 0]))
        last = max(abs(T[3, 0]), abs(T[3, 1]), abs(T[3, 2]), abs(T[3, 3] - 1.0))
        if drift > 1e-3 or det <= 0.0 or last > 1e-9:
            return b, 2
        for g in range(G):
            kind = gkind[g]
            for i in range(3):
                for j in range(3):
                    gRs[b, g, i, j] = T[i, j] if kind == 1 else gR[g, i, j]
            if kind == 0:
                for i in range(3):
                    gvecs[b, g, i] = T[i, 3]
            elif kind == 1:
                for i in range(3):
                    gvecs[b, g, i] = 0.0
            else:
                k = 0
                for i in range(1, 3):
                    if gaxis[g, i] > gaxis[g, k]:
                        k = i
                for i in range(3):
                    gvecs[b, g, i] = T[i, k]
    return -1, 0
