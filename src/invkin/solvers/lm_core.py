"""The general core of Levenberg–Marquardt: every problem that is not one frame's goals on its
chain program (solvers/lm.py) — goals on several frames, CenterOfMass, Relative, hard goals,
Posture, per-solve joint step bounds, mode="distance". Same damping schedule and active set as
the chain kernels; see the comment below and docs/architecture.md, "The general core in one page".
"""
from __future__ import annotations

import numpy as np
from numba import njit

from ..goals import KIND_COM, KIND_REL_POSITION, KINDS
from ..kinematics.kernels import NO_RC, fk_all_into, jacobian_from_all
from ._common import com_row, goal_row_call, posture_residual, relative_frame
from .lm import (ACTIVE_SET_PASSES, CHAIN_LAMBDA_GROW, CHAIN_LAMBDA_INIT, CONVERGED, EPS_DAMP, L_BALL, L_JW, L_LOWER,
                 L_SAMPLE_LO, L_SAMPLE_SPAN, L_UPPER, LAMBDA_MAX, LAMBDA_MIN, LAMBDA_SHRINK, NEAR, PROGRESS_FACTOR,
                 RUNNING, S_ATTEMPT, S_ATTEMPT_ITERS, S_BEST, S_BEST_PERR, S_BEST_RERR, S_ITERS, S_LAMBDA, S_MINIMIZE,
                 NAME, JOINT_TYPES, ATTEMPT_ITERATIONS, S_PERR, S_RERR, STALLED, _mix64, _so3_compose, limits_table)

# Every problem that is not one frame's goals on its chain program runs here: goals on several
# frames, CenterOfMass, Relative, hard goals, Posture, per-solve joint step bounds. One
# iteration (core_iterate), one attempts kernel (core_attempts), the same damping schedule
# (CHAIN_LAMBDA_INIT / LAMBDA_SHRINK / CHAIN_LAMBDA_GROW, mu = lambda E + eps) and the same
# active set on the joint limits as the chain kernel.
#
# The step is a constrained LM step: with the soft rows (J_s, e_s) and the hard rows (A, b),
#
#     min |J_s dq - e_s|^2 + mu |dq|_W^2   subject to   A dq = b   (regularised by mu_h)
#
# solved through the Schur complement of H = J_s^T J_s + mu W:
#     y = H^-1 J_s^T e_s,  X = H^-1 A^T,  (A X + mu_h I) lam = A y - b,  dq = y - X lam.
# mu_h = (lambda E_hard + eps) / mu: hard rows alone get the plain LM step (A A^T + lambda E_hard)
# and once they are met they hold exactly to first order. A trial point is accepted
# lexicographically: while a hard goal is off by more than HARD_HOLD x its tolerance the hard
# cost must fall, afterwards the hard goals must stay within HARD_HOLD x tolerance and the soft
# cost must fall. So hard goals that start met (feet on the floor) never drift by more than
# HARD_HOLD x tolerance, whatever the soft goals ask.
#
# Inequality rows: the joint box (limits, tightened per solve by max_joint_step) is an active
# set: joints a step would push past a bound are held there and the others re-solved (as on the
# chain path). Other inequality rows d_i(q) >= margin (the collision distances of the next
# issue) join the same way: a row that is violated, or that the step would violate, becomes a
# hard row d_i + grad d_i . dq = margin of that step (core_step's hard rows); see
# docs/architecture.md, "Adding a goal kind or an inequality row".
#
# Posture is a regulariser: once every goal is met, settle() moves q toward q_rest inside the
# null space of the goals (all goal rows as constraints, the damping term pulling toward
# q_rest ⊖ q) while they stay within tolerance; converged means goals met and posture settled.

HARD_HOLD = 0.1       # hard goals met stay within HARD_HOLD x tolerance through the soft steps
EPS_HARD = 1e-14
NEAR_ATTEMPTS = 6     # general-core restarts re-seed near q0 first (radius grows per attempt)
NEAR_STEP = 0.08      # radius of near restart k: k x NEAR_STEP x the sampling span
FREE_RADIUS = 0.05    # [m or rad] per near attempt, for DOFs without limits (a floating base)
SETTLE_ITERATIONS = 100
CORE_PROGRESS_WINDOW = 8
SOC_PASSES = 3        # second-order corrections of a trial point that bent the hard goals
SOFT_PROGRESS = 1e-3  # with hard goals, an attempt ends when its soft cost falls less over a window
AGREE = 1e-2          # two attempts agree when their largest errors differ by less than this fraction
UNREACHABLE = 3       # core_attempts: two attempts agree on the same closest, non-converged answer
# core state slots after the chain kernel's (CHAIN_STATE of them)
S_BEST_HARD, S_AGREE, S_DISTANCE, S_BEST_DIST, S_HARD = range(13, 18)
CORE_STATE = 18


@njit(cache=True)
def core_eval(ni, nf, origin, mass, com, q, gnode, gkind, gref, glevel, gvec, gR, gaxis, gw, wvec, wR, Tall, Jf,
              Jr, sub, e, J, errs, want_jac):
    return core_eval_rows(ni, nf, origin, mass, com, q, gnode, gkind, gref, glevel, gvec, gR, gaxis, gw, wvec, wR,
                          Tall, Jf, Jr, sub, e, J, errs, want_jac, errs[:0])


@njit(cache=True)
def core_eval_rows(ni, nf, origin, mass, com, q, gnode, gkind, gref, glevel, gvec, gR, gaxis, gw, wvec, wR, Tall, Jf,
                   Jr, sub, e, J, errs, want_jac, rowerr):
    """Stacked weighted residual e (3G,) and, with want_jac, Jacobian J (3G, dof) of every goal
    row at q (each kind through its own function: goal_row, com_row, relative_frame); each row's
    unweighted error goes to rowerr (G,) when it is not empty.
    errs (4,): largest position [m] and rotation [rad] error over all rows with weight > 0, then
    the same over the hard rows. wvec, wR: the world targets (copies of gvec, gR; relative rows
    are rewritten here)."""
    fk_all_into(ni, nf, origin, q, Tall)
    errs[0] = 0.0
    errs[1] = 0.0
    errs[2] = 0.0
    errs[3] = 0.0
    last = -1
    for g in range(gnode.shape[0]):
        kind = gkind[g]
        node = gnode[g]
        if kind == KIND_COM:
            err = com_row(ni, nf, Tall, mass, com, sub, g, gvec, gaxis, gw, e, J, want_jac)
            cls = 0
        else:
            if want_jac and node != last:
                jacobian_from_all(ni, nf, Tall, node, Jf)
                last = node
            if kind >= KIND_REL_POSITION:
                ref = gref[g]
                if want_jac:
                    jacobian_from_all(ni, nf, Tall, ref, Jr)
                    last = -1  # Jf is changed in place below
                kind = relative_frame(kind, g, Tall[ref], Tall[node], gvec, gR, wvec, wR, Jf, Jr, want_jac)
            cls, err = goal_row_call(Tall[node], Jf, g, kind, wvec, wR, gaxis, gw, e, J, want_jac)
        if rowerr.shape[0] > 0:
            rowerr[g] = err
        if gw[g] > 0.0:
            if err > errs[cls]:
                errs[cls] = err
            if glevel[g] == 0 and err > errs[2 + cls]:
                errs[2 + cls] = err


@njit(cache=True)
def _ldl_factor(A, n):
    """A[:n, :n] = L D L^T in place (unit L below the diagonal, D on it); False if not positive definite."""
    for j in range(n):
        d = A[j, j]
        for k in range(j):
            d -= A[j, k] * A[j, k] * A[k, k]
        if not d > 0.0:
            return False
        A[j, j] = d
        inv = 1.0 / d
        for i in range(j + 1, n):
            t = A[i, j]
            for k in range(j):
                t -= A[i, k] * A[j, k] * A[k, k]
            A[i, j] = t * inv
    return True


@njit(cache=True)
def _ldl_apply(A, n, b, x):
    """x = A^-1 b for the factor of _ldl_factor."""
    for i in range(n):
        t = b[i]
        for k in range(i):
            t -= A[i, k] * x[k]
        x[i] = t
    for i in range(n):
        x[i] /= A[i, i]
    for i in range(n - 1, -1, -1):
        t = x[i]
        for k in range(i + 1, n):
            t -= A[k, i] * x[k]
        x[i] = t


@njit(cache=True)
def core_step(J, e, soft, hard, jw, mu, mu_h, bias, hold, H, g, X, S, r, lam, y, col, dq):
    """dq of the constrained damped step (see above) over the joints not held; a held joint k
    (hold[k] not NaN) moves by hold[k]. ``soft`` / ``hard``: row indices of J; with ``bias``
    (dof,) the damping pulls toward bias (mu W |dq - bias|^2; settle). False if not solvable."""
    m, dof = J.shape
    for r_ in range(m):  # the held joints' motion is taken off every row
        s = e[r_]
        for k in range(dof):
            if hold[k] == hold[k]:
                s -= J[r_, k] * hold[k]
        r[r_] = s
    for a in range(dof):
        held_a = hold[a] == hold[a]
        s = 0.0
        if not held_a:
            for i in range(soft.shape[0]):
                s += J[soft[i], a] * r[soft[i]]
            s += mu * jw[a] * bias[a]
        g[a] = hold[a] if held_a else s
        for c in range(a, dof):
            s = 0.0
            if not held_a and hold[c] != hold[c]:
                for i in range(soft.shape[0]):
                    s += J[soft[i], a] * J[soft[i], c]
            H[a, c] = s
            H[c, a] = s
        H[a, a] = 1.0 if held_a else H[a, a] + mu * jw[a]
    diagonal = soft.shape[0] == 0  # H = mu W (settle, second-order corrections): no factorisation
    if diagonal:
        for k in range(dof):
            y[k] = g[k] / H[k, k]
    else:
        if not _ldl_factor(H, dof):
            return False
        _ldl_apply(H, dof, g, y)
    mh = hard.shape[0]
    if mh == 0:
        for k in range(dof):
            dq[k] = y[k]
        return True
    for i in range(mh):
        for k in range(dof):
            col[k] = 0.0 if hold[k] == hold[k] else J[hard[i], k]
        if diagonal:
            for k in range(dof):
                X[i, k] = col[k] / H[k, k]
        else:
            _ldl_apply(H, dof, col, X[i])
    for i in range(mh):
        t = -r[hard[i]]
        for k in range(dof):
            if hold[k] != hold[k]:
                t += J[hard[i], k] * y[k]
        lam[i] = t
        for j in range(i + 1):
            s = 0.0
            for k in range(dof):
                if hold[k] != hold[k]:
                    s += J[hard[i], k] * X[j, k]
            S[i, j] = s
            S[j, i] = s
        S[i, i] += mu_h
    if not _ldl_factor(S, mh):
        return False
    _ldl_apply(S, mh, lam, col)
    for k in range(dof):
        s = y[k]
        for i in range(mh):
            s -= X[i, k] * col[i]
        dq[k] = s
    return True


@njit(cache=True)
def core_active_step(J, e, soft, hard, lims, lo, hi, q, mu, mu_h, bias, hold, H, g, X, S, r, lam, y, col, dq):
    """core_step with the active set on the bounds lo, hi (dof,): joints the step would push past
    a bound are held at it and the others re-solved (up to ACTIVE_SET_PASSES times)."""
    dof = q.shape[0]
    for k in range(dof):
        hold[k] = np.nan
    jw = lims[L_JW]
    for _ in range(ACTIVE_SET_PASSES):
        if not core_step(J, e, soft, hard, jw, mu, mu_h, bias, hold, H, g, X, S, r, lam, y, col, dq):
            return False
        new = 0
        for k in range(dof):
            if hold[k] != hold[k]:
                v = q[k] + dq[k]
                if v < lo[k]:
                    hold[k] = lo[k] - q[k]
                    new += 1
                elif v > hi[k]:
                    hold[k] = hi[k] - q[k]
                    new += 1
        if new == 0:
            return True
    return True


@njit(cache=True)
def _costs(e, soft, hard):
    cs = 0.0
    for i in range(soft.shape[0]):
        cs += e[soft[i]] * e[soft[i]]
    ch = 0.0
    for i in range(hard.shape[0]):
        ch += e[hard[i]] * e[hard[i]]
    return cs, ch


@njit(cache=True)
def _step_into(q, dq, lims, lo, hi, out):
    """out = clamp(q ⊕ dq) into lo, hi (ball joints composed on SO(3))."""
    n = q.shape[0]
    for i in range(n):
        out[i] = q[i] + dq[i]
    for s in range(n):
        if lims[L_BALL, s] != 0.0:
            _so3_compose(q[s], q[s + 1], q[s + 2], dq[s], dq[s + 1], dq[s + 2], False, out, s)
    for i in range(n):
        if out[i] < lo[i]:
            out[i] = lo[i]
        elif out[i] > hi[i]:
            out[i] = hi[i]


step_into = _step_into  # public name for kernels outside solvers/ (solvers.shared)


@njit(cache=True)
def core_workspace(n, dof, gvec, gR, nhard):
    """Scratch of the general core, in this order: Tall, Jf, Jr, sub, e, J, e2, J2, errs, errs2,
    wvec, wR, H, g, X, S, r, lam, y, col, dq, qn, hold, bias, zero, dqc, qc; room for every row as
    a constraint (settle)."""
    G = gvec.shape[0]
    m = 3 * G
    mh = max(m, nhard, 1)
    return (np.empty((n, 4, 4)), np.empty((6, dof)), np.empty((6, dof)), np.empty((n, 4)), np.empty(m),
            np.zeros((m, dof)), np.empty(m), np.zeros((m, dof)), np.zeros(4), np.zeros(4), gvec.copy(), gR.copy(),
            np.empty((dof, dof)), np.empty(dof), np.empty((mh, dof)), np.empty((mh, mh)), np.empty(m),
            np.empty(mh), np.empty(dof), np.empty(max(dof, mh)), np.empty(dof), np.empty(dof), np.empty(dof),
            np.empty(dof), np.zeros(dof), np.empty(dof), np.empty(dof))


@njit(cache=True)
def _hard_key(errs, tol_p, tol_r):
    return max(errs[2] / tol_p, errs[3] / tol_r)


@njit(cache=True)
def core_iterate(model, table, lims, lo, hi, tol_p, tol_r, q, max_iter, state, ws):
    """Up to max_iter constrained LM iterations on q (in place) for one attempt; the state and
    return codes of lm_chain_iterate_ws (RUNNING, CONVERGED, STALLED)."""
    ni, nf, origin, mass, com = model
    gnode, gkind, gref, glevel, gvec, gR, gaxis, gw, soft, hard = table
    Tall, Jf, Jr, sub, e, J, e2, J2, errs, errs2, wvec, wR, H, g, X, S, r, lam_h, y, col, dq, qn, hold, bias, zero, \
        dqc, qc = ws
    dof = q.shape[0]
    lam = state[S_LAMBDA] if state[S_LAMBDA] > 0.0 else CHAIN_LAMBDA_INIT
    # with hard goals an attempt minimises the soft goals to the end (they may be out of reach)
    progress_test = not (state[S_MINIMIZE] > 0.5) and hard.shape[0] == 0
    none = soft[:0]
    core_eval(ni, nf, origin, mass, com, q, gnode, gkind, gref, glevel, gvec, gR, gaxis, gw, wvec, wR, Tall, Jf, Jr,
              sub, e, J, errs, True)
    cs, ch = _costs(e, soft, hard)
    code = RUNNING
    it = 0
    small = 0
    window = cs + ch if progress_test else cs
    while it < max_iter:
        if errs[0] <= tol_p and errs[1] <= tol_r:
            code = CONVERGED
            break
        it += 1
        mu = lam * 0.5 * (cs + ch) + EPS_DAMP
        mu_h = (lam * 0.5 * ch + EPS_HARD) / mu
        if not core_active_step(J, e, soft, hard, lims, lo, hi, q, mu, mu_h, zero, hold, H, g, X, S, r, lam_h, y,
                                col, dq):
            lam *= 10.0
            if lam > LAMBDA_MAX:
                code = STALLED
                break
            continue
        _step_into(q, dq, lims, lo, hi, qn)
        core_eval(ni, nf, origin, mass, com, qn, gnode, gkind, gref, glevel, gvec, gR, gaxis, gw, wvec, wR, Tall,
                  Jf, Jr, sub, e2, J2, errs2, True)
        hk = _hard_key(errs, tol_p, tol_r)
        for _ in range(SOC_PASSES):
            # second-order correction: a long soft step bends the hard goals off by its square;
            # project the trial back onto them (hard rows only, least norm) before judging it
            if hk > HARD_HOLD or _hard_key(errs2, tol_p, tol_r) <= HARD_HOLD:
                break
            if not core_active_step(J2, e2, none, hard, lims, lo, hi, qn, 1.0, 1e-12, zero, hold, H, g, X, S, r,
                                    lam_h, y, col, dqc):
                break
            for i in range(dof):
                qc[i] = qn[i]
            _step_into(qc, dqc, lims, lo, hi, qn)
            core_eval(ni, nf, origin, mass, com, qn, gnode, gkind, gref, glevel, gvec, gR, gaxis, gw, wvec, wR, Tall,
                      Jf, Jr, sub, e2, J2, errs2, True)
        cs2, ch2 = _costs(e2, soft, hard)
        if it % CORE_PROGRESS_WINDOW == 0:
            # no attempt: cut when it does not halve its cost (restart); with hard goals: end the
            # minimisation when the soft cost no longer falls by SOFT_PROGRESS over the window
            if progress_test and cs + ch > PROGRESS_FACTOR * window and (errs[0] > NEAR * tol_p
                                                                         or errs[1] > NEAR * tol_r):
                code = STALLED
                break
            if not progress_test and hard.shape[0] > 0 and cs > (1.0 - SOFT_PROGRESS) * window:
                code = STALLED
                break
            window = cs + ch if progress_test else cs
        if hk > HARD_HOLD:
            ok = ch2 < ch
            before = ch + cs
            after = ch2 + cs2
        else:
            ok = _hard_key(errs2, tol_p, tol_r) <= HARD_HOLD and cs2 < cs
            before = cs
            after = cs2
        if ok:
            rel = (before - after) / before if before > 0.0 else 1.0
            for i in range(dof):
                q[i] = qn[i]
            e, e2 = e2, e
            J, J2 = J2, J
            errs, errs2 = errs2, errs
            cs = cs2
            ch = ch2
            lam = max(lam * LAMBDA_SHRINK, LAMBDA_MIN)
            if rel < 1e-6:
                small += 1
                if small >= 4:
                    code = STALLED
                    break
            else:
                small = 0
        else:
            lam *= CHAIN_LAMBDA_GROW
            if lam > LAMBDA_MAX:
                code = STALLED
                break
    if code == RUNNING and errs[0] <= tol_p and errs[1] <= tol_r:
        code = CONVERGED
    state[S_LAMBDA] = lam
    state[S_ITERS] += it
    state[S_PERR] = errs[0]
    state[S_RERR] = errs[1]
    state[S_HARD] = _hard_key(errs, tol_p, tol_r)
    return code


@njit(cache=True)
def settle(model, table, lims, lo, hi, q_rest, tol_p, tol_r, q, max_iter, ws):
    """Posture as a regulariser: from q where every goal is met, move toward q_rest inside the
    null space of the goals (every goal row a constraint, the damping pulling toward
    q_rest ⊖ q), accepting a step only while every goal stays within tolerance and the distance
    to q_rest falls; the gain halves after a refused step. Returns the iterations used."""
    ni, nf, origin, mass, com = model
    gnode, gkind, gref, glevel, gvec, gR, gaxis, gw, soft, hard = table
    Tall, Jf, Jr, sub, e, J, e2, J2, errs, errs2, wvec, wR, H, g, X, S, r, lam_h, y, col, dq, qn, hold, bias, zero, \
        dqc, qc = ws
    dof = q.shape[0]
    allrows = np.arange(e.shape[0])
    none = allrows[:0]
    balls = _balls(lims)
    core_eval(ni, nf, origin, mass, com, q, gnode, gkind, gref, glevel, gvec, gR, gaxis, gw, wvec, wR, Tall, Jf, Jr,
              sub, e, J, errs, True)
    posture_residual(q, q_rest, balls, bias)
    cost = 0.0
    for i in range(dof):
        cost += lims[L_JW, i] * bias[i] * bias[i]
    gain = 0.5
    it = 0
    while it < max_iter and gain > 1e-3 and cost > 1e-24:
        it += 1
        for i in range(dof):
            bias[i] *= gain
        if not core_active_step(J, e, none, allrows, lims, lo, hi, q, 1.0, 1e-10, bias, hold, H, g, X, S, r,
                                lam_h, y, col, dq):
            break
        _step_into(q, dq, lims, lo, hi, qn)
        core_eval(ni, nf, origin, mass, com, qn, gnode, gkind, gref, glevel, gvec, gR, gaxis, gw, wvec, wR, Tall,
                  Jf, Jr, sub, e2, J2, errs2, True)
        posture_residual(qn, q_rest, balls, bias)
        cost2 = 0.0
        for i in range(dof):
            cost2 += lims[L_JW, i] * bias[i] * bias[i]
        if errs2[0] <= tol_p and errs2[1] <= tol_r and cost2 < cost:
            rel = (cost - cost2) / cost
            for i in range(dof):
                q[i] = qn[i]
            e, e2 = e2, e
            J, J2 = J2, J
            errs, errs2 = errs2, errs
            cost = cost2
            gain = min(1.0, 2.0 * gain)
            if rel < 1e-6:
                break
        else:
            posture_residual(q, q_rest, balls, bias)
            gain *= 0.5
    return it


@njit(cache=True)
def _balls(lims):
    n = 0
    for s in range(lims.shape[1]):
        if lims[L_BALL, s] != 0.0:
            n += 1
    out = np.empty(n, dtype=np.int64)
    n = 0
    for s in range(lims.shape[1]):
        if lims[L_BALL, s] != 0.0:
            out[n] = s
            n += 1
    return out


@njit(cache=True, **NO_RC)
def _restart_near(lims, lo, hi, q0, seed, attempt, q):
    """Restart number ``attempt`` of the general core: the first NEAR_ATTEMPTS re-seed near q0
    (radius attempt x NEAR_STEP x the sampling span), later ones sample the sampling box
    uniformly; a DOF without limits (a floating base) always stays near q0 (attempt x
    FREE_RADIUS). Counter-based hash, as _restart_sample."""
    base = _mix64(np.uint64(seed) * np.uint64(0x9E3779B97F4A7C15) + np.uint64(attempt))
    for i in range(q.shape[0]):
        x = _mix64(base + np.uint64(i + 1) * np.uint64(0xD1B54A32D192ED03))
        u = float(x >> np.uint64(11)) * (1.0 / 9007199254740992.0)
        unbounded = not (lims[L_LOWER, i] > -np.inf and lims[L_UPPER, i] < np.inf)
        if unbounded:
            v = q0[i] + min(attempt, NEAR_ATTEMPTS) * FREE_RADIUS * (2.0 * u - 1.0)
        elif attempt <= NEAR_ATTEMPTS:
            v = q0[i] + attempt * NEAR_STEP * lims[L_SAMPLE_SPAN, i] * (2.0 * u - 1.0)
        else:
            v = lims[L_SAMPLE_LO, i] + lims[L_SAMPLE_SPAN, i] * u
        q[i] = min(max(v, lo[i]), hi[i])


@njit(cache=True)
def new_core_state(distance):
    """State array for core_attempts: attempt 0, no best yet; distance = 1.0 keeps solving after
    a solution and keeps the one closest to q0 (mode="distance")."""
    st = np.zeros(CORE_STATE)
    st[S_BEST] = np.inf
    st[S_BEST_PERR] = np.inf
    st[S_BEST_RERR] = np.inf
    st[S_BEST_HARD] = np.inf
    st[S_BEST_DIST] = np.inf
    st[S_DISTANCE] = distance
    return st


@njit(cache=True)
def core_attempts(model, table, lims, lo, hi, q_rest, w_post, tol_p, tol_r, q0, q, best_q, state, budget,
                  attempt_iters, max_attempts, seed, rowerr):
    """Attempts of the general core, with restarts, for up to ``budget`` iterations (the driver
    calls again with the state until its clock runs out). Attempt 0 starts from q (q0 clamped
    into lo, hi by the driver), later ones from _restart_near. A converged attempt settles the
    posture (w_post > 0). The best attempt is kept in best_q: lexicographically, hard goals met
    first, then the largest error over tolerance. Returns CONVERGED, RUNNING (budget spent),
    STALLED (max_attempts done) or UNREACHABLE (with hard goals: two attempts stalled, the hard
    goals met, at the same closest answer: the soft goals cannot be met with them). rowerr (G,)
    receives each goal row's error at best_q (Result.goals_met)."""
    code = _core_attempts(model, table, lims, lo, hi, q_rest, w_post, tol_p, tol_r, q0, q, best_q, state, budget,
                          attempt_iters, max_attempts, seed)
    ni, nf, origin, mass, com = model
    gnode, gkind, gref, glevel, gvec, gR, gaxis, gw, soft, hard = table
    ws = core_workspace(ni.shape[0], q.shape[0], gvec, gR, 0)
    core_eval_rows(ni, nf, origin, mass, com, best_q, gnode, gkind, gref, glevel, gvec, gR, gaxis, gw, ws[10], ws[11],
                   ws[0], ws[1], ws[2], ws[3], ws[4], ws[5], ws[8], False, rowerr)
    return code


@njit(cache=True)
def _core_attempts(model, table, lims, lo, hi, q_rest, w_post, tol_p, tol_r, q0, q, best_q, state, budget,
                   attempt_iters, max_attempts, seed):
    """core_attempts without the final row errors."""
    ni, nf, origin, mass, com = model
    gnode, gkind, gref, glevel, gvec, gR, gaxis, gw, soft, hard = table
    dof = q.shape[0]
    ws = core_workspace(ni.shape[0], dof, gvec, gR, hard.shape[0])
    used = 0
    while used < budget:
        if state[S_ATTEMPT] >= max_attempts:
            return CONVERGED if state[S_BEST_DIST] < np.inf else STALLED
        n = min(attempt_iters - int(state[S_ATTEMPT_ITERS]), budget - used)
        before = state[S_ITERS]
        c = core_iterate(model, table, lims, lo, hi, tol_p, tol_r, q, n, state, ws)
        done = int(state[S_ITERS] - before)
        if done == 0:  # an attempt that did nothing (met at its start) still spends one iteration,
            state[S_ITERS] += 1.0  # so a loop of them (mode="distance") ends within the budget
        used += max(done, 1)
        state[S_ATTEMPT_ITERS] += done
        if c == CONVERGED:
            if w_post > 0.0:
                state[S_ITERS] += settle(model, table, lims, lo, hi, q_rest, tol_p, tol_r, q, SETTLE_ITERATIONS, ws)
                errs = ws[8]  # the errors at the settled q
                core_eval(ni, nf, origin, mass, com, q, gnode, gkind, gref, glevel, gvec, gR, gaxis, gw, ws[10],
                          ws[11], ws[0], ws[1], ws[2], ws[3], ws[4], ws[5], errs, False)
                state[S_PERR] = errs[0]
                state[S_RERR] = errs[1]
            if state[S_DISTANCE] == 0.0:
                for i in range(dof):
                    best_q[i] = q[i]
                state[S_BEST] = 0.0
                state[S_BEST_PERR] = state[S_PERR]
                state[S_BEST_RERR] = state[S_RERR]
                state[S_BEST_HARD] = 0.0
                return CONVERGED
            d = 0.0
            for i in range(dof):
                d += lims[L_JW, i] * (q[i] - q0[i]) ** 2
            if d < state[S_BEST_DIST]:
                state[S_BEST_DIST] = d
                state[S_BEST] = 0.0
                state[S_BEST_HARD] = 0.0
                state[S_BEST_PERR] = state[S_PERR]
                state[S_BEST_RERR] = state[S_RERR]
                for i in range(dof):
                    best_q[i] = q[i]
        if c != RUNNING or state[S_ATTEMPT_ITERS] >= attempt_iters or done == 0:
            if c != CONVERGED and state[S_BEST_DIST] == np.inf:
                hk = state[S_HARD]
                key = max(state[S_PERR] / tol_p, state[S_RERR] / tol_r)
                if hard.shape[0] > 0 and hk <= 1.0 and c == STALLED and state[S_BEST] < np.inf \
                        and abs(key - state[S_BEST]) <= AGREE * state[S_BEST]:
                    state[S_AGREE] += 1.0
                rank_new = key + (1e12 * hk if hk > 1.0 else 0.0)
                rank_old = state[S_BEST] + (1e12 * state[S_BEST_HARD] if state[S_BEST_HARD] > 1.0 else 0.0)
                if rank_new < rank_old:
                    state[S_BEST] = key
                    state[S_BEST_HARD] = hk
                    state[S_BEST_PERR] = state[S_PERR]
                    state[S_BEST_RERR] = state[S_RERR]
                    for i in range(dof):
                        best_q[i] = q[i]
                if state[S_AGREE] >= 1.0:
                    return UNREACHABLE
            attempt = int(state[S_ATTEMPT]) + 1
            state[S_ATTEMPT] = attempt
            state[S_ATTEMPT_ITERS] = 0.0
            state[S_LAMBDA] = 0.0
            _restart_near(lims, lo, hi, q0, seed, attempt, q)
    if not (state[S_BEST] < np.inf):  # no attempt finished: report the current q
        errs = ws[8]
        core_eval(ni, nf, origin, mass, com, q, gnode, gkind, gref, glevel, gvec, gR, gaxis, gw, ws[10], ws[11],
                  ws[0], ws[1], ws[2], ws[3], ws[4], ws[5], errs, False)
        for i in range(dof):
            best_q[i] = q[i]
        state[S_BEST_PERR] = errs[0]
        state[S_BEST_RERR] = errs[1]
        state[S_BEST_HARD] = _hard_key(errs, tol_p, tol_r)
    return RUNNING


def row_errors(model, table, q):
    """(G,) unweighted error of every goal row at q [m or rad] (solve's per-goal report)."""
    ni, nf, origin, mass, com = model
    gnode, gkind, gref, glevel, gvec, gR, gaxis, gw, soft, hard = table
    ws = core_workspace(ni.shape[0], q.shape[0], gvec, gR, hard.shape[0])
    out = np.empty(gnode.shape[0])
    core_eval_rows(ni, nf, origin, mass, com, q, gnode, gkind, gref, glevel, gvec, gR, gaxis, gw, ws[10], ws[11],
                   ws[0], ws[1], ws[2], ws[3], ws[4], ws[5], ws[8], False, out)
    return out


def core_tables(problem):
    """(model, table) of core_attempts for a compiled problem: the model arrays with the link
    masses (cached per robot) and the goal table with its soft and hard row indices."""
    robot = problem.robot
    model = robot.__dict__.get("_core_model")
    if model is None:
        model = (robot._ni, robot._nf, robot.origin, robot.link_mass, robot.link_com)
        object.__setattr__(robot, "_core_model", model)
    rows = np.repeat(problem.glevel, 3)
    idx = np.arange(rows.shape[0], dtype=np.int64)
    table = (problem.gnode, problem.gkind, problem.gref, problem.glevel, problem.gvec, problem.gR, problem.gaxis,
             problem.gw, idx[rows != 0], idx[rows == 0])
    return model, table


def _iterate(problem, q, max_iter, state, options):
    """The registry's iterate contract on the general core (one attempt, clamped into the limits);
    solve() itself drives lm through core_attempts / lm_chain_attempts."""
    r = problem.robot
    model, table = core_tables(problem)
    lims = limits_table(r.lower, r.upper, r.lower, np.zeros(r.dof), np.zeros(r.dof), problem.joint_weights,
                        r._ball_starts)
    lo, hi = r.lower, r.upper
    st = new_core_state(0.0)
    st[S_LAMBDA] = state[0]
    ws = core_workspace(model[0].shape[0], q.shape[0], table[4], table[5], table[9].shape[0])
    code = core_iterate(model, table, lims, lo, hi, problem.tol_p, problem.tol_r, q, max_iter, st, ws)
    state[0] = st[S_LAMBDA]
    state[1] += st[S_ITERS]
    state[2] = st[S_PERR]
    state[3] = st[S_RERR]
    return code


def _register():
    from . import Method, register

    register(Method(NAME, _iterate, "Levenberg–Marquardt, adaptive damping, limits, hard goals, restarts (default)",
                    JOINT_TYPES, goal_kinds=tuple(KINDS.values()), attempt_iterations=ATTEMPT_ITERATIONS))


_register()
