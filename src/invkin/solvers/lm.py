"""Levenberg–Marquardt with adaptive damping and joint limits (the default method).

Each iteration solves the damped normal equations

    (Jᵀ J + w_p² I + (λ E + ε) W) δq = Jᵀ e + w_p² (q_rest ⊖ q),    E = ½ eᵀ e

(Sugihara 2011: the damping scales with the residual, so it vanishes at a solution and the step
becomes Gauss–Newton; W = diag(joint_weights)), applies ``q ← clamp(q ⊕ δq)`` and keeps the step
only if the cost fell (λ shrinks), else rejects it (λ grows). Joint limits are enforced by the
projection; restarts from random configurations, the time budget and the best-result bookkeeping
live in the solve driver.

Stops with CONVERGED when every goal is within tolerance, STALLED when λ explodes or the cost
stops improving (a local minimum or an unreachable target), RUNNING when ``max_iter`` is spent.
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit, prange

from ._common import CONVERGED, RUNNING, STALLED, chol_solve, posture_residual, step_and_clamp, task_eval

NAME = "lm"
JOINT_TYPES = ("revolute", "continuous", "prismatic", "ball")

LAMBDA_INIT = 1.0
LAMBDA_SHRINK = 0.7
LAMBDA_GROW = 2.0
LAMBDA_MIN = 1e-9
RULE = 0  # damping update: 0 = fixed factors (shrink/grow), 1 = Nielsen's gain-ratio rule
LAMBDA_MAX = 1e8
EPS_DAMP = 1e-12
ATTEMPT_ITERATIONS = 30  # iterations before an unconverged attempt restarts (as rtb's ik_LM)
PROGRESS_WINDOW = 4       # an attempt whose cost has not fallen by PROGRESS_FACTOR over this many
PROGRESS_FACTOR = 0.5     # iterations is in a local minimum or creeping along a limit: restart
NEAR = 100.0  # within NEAR x tolerance an attempt is not cut by the progress test


# attempt bookkeeping in the state array of lm_attempts
S_LAMBDA, S_ITERS, S_PERR, S_RERR, S_FREE, S_ATTEMPT, S_BEST, S_ATTEMPT_ITERS, S_BEST_PERR, S_BEST_RERR, \
    S_MINIMIZE = range(11)


@njit(cache=True)
def wrap_into_limits(ni, nf, lower, upper, q):
    """Shift revolute joints by multiples of 2 pi into their limits where that is possible
    (FK is unchanged); return True if q is then inside every limit."""
    dof = q.shape[0]
    n = ni.shape[0]
    for c in range(dof):
        if lower[c] <= q[c] <= upper[c]:
            continue
        ok = False
        for i in range(n):
            if ni[i, 2] == c:
                m = nf[i, 3]
                ok = ni[i, 1] == 1 and m == math.floor(m)
                if not ok:
                    break
        if not ok:
            continue
        k = math.floor((q[c] - lower[c]) / (2.0 * math.pi))
        v = q[c] - 2.0 * math.pi * k
        if v <= upper[c]:
            q[c] = v
    for c in range(dof):
        if q[c] < lower[c] or q[c] > upper[c]:
            return False
    return True


def workspace_size(n_nodes: int, dof: int, m: int) -> int:
    """Length of the flat float64 scratch buffer lm_attempts / lm_iterate_ws use."""
    return 16 * n_nodes + 6 * dof + 3 * m + 2 * m * dof + 40 + dof * dof + 6 * dof


@njit(cache=True)
def lm_workspace(buf, n_nodes, dof, m):
    """Scratch arrays for lm_iterate_ws as views of one flat buffer (no allocation)."""
    o = 0
    Tall = buf[o:o + 16 * n_nodes].reshape((n_nodes, 4, 4))
    o += 16 * n_nodes
    Jf = buf[o:o + 6 * dof].reshape((6, dof))
    o += 6 * dof
    e = buf[o:o + m]
    o += m
    J = buf[o:o + m * dof].reshape((m, dof))
    o += m * dof
    e2 = buf[o:o + m]
    o += m
    J2 = buf[o:o + m * dof].reshape((m, dof))
    o += m * dof
    errs = buf[o:o + 20]
    o += 20
    errs2 = buf[o:o + 20]
    o += 20
    A = buf[o:o + dof * dof].reshape((dof, dof))
    o += dof * dof
    g = buf[o:o + dof]
    o += dof
    dq = buf[o:o + dof]
    o += dof
    qn = buf[o:o + dof]
    o += dof
    pr = buf[o:o + dof]
    o += dof
    inf_lo = buf[o:o + dof]
    o += dof
    inf_hi = buf[o:o + dof]
    inf_lo[:] = -np.inf
    inf_hi[:] = np.inf
    return Tall, Jf, e, J, e2, J2, errs, errs2, A, g, dq, qn, pr, inf_lo, inf_hi


@njit(cache=True)
def lm_iterate(ni, nf, origin, lower, upper, balls, gnode, gkind, gvec, gR, gaxis, gw, q_rest, w_post, jw,
               tol_p, tol_r, q, max_iter, state):
    """Run up to ``max_iter`` LM iterations on q (in place).

    state (8,): [lambda, iterations done, largest position error, largest rotation error,
    free]; lambda <= 0 on entry means "start fresh". With free = 1 the iterations ignore the
    joint limits (as Robotics Toolbox's ik_LM does) and a converged q is wrapped into the limits
    by 2 pi shifts, or reported STALLED (the driver restarts) if it cannot be; with free = 0 every
    step is clamped into the limits (projected LM). The driver alternates the two over restarts:
    free attempts converge in fewer iterations, clamped ones find solutions near tight limits.
    Returns a code: RUNNING, CONVERGED or STALLED.
    """
    n, dof, m = ni.shape[0], q.shape[0], 3 * gnode.shape[0]
    ws = lm_workspace(np.empty(16 * n + 6 * dof + 3 * m + 2 * m * dof + 40 + dof * dof + 6 * dof), n, dof, m)
    return lm_iterate_ws(ni, nf, origin, lower, upper, balls, gnode, gkind, gvec, gR, gaxis, gw, q_rest, w_post,
                         jw, tol_p, tol_r, q, max_iter, state, ws)


@njit(cache=True)
def lm_iterate_ws(ni, nf, origin, lower, upper, balls, gnode, gkind, gvec, gR, gaxis, gw, q_rest, w_post, jw,
                  tol_p, tol_r, q, max_iter, state, ws):
    """lm_iterate with caller-provided scratch ``ws = lm_workspace(...)``."""
    Tall, Jf, e, J, e2, J2, errs, errs2, A, g, dq, qn, pr, inf_lo, inf_hi = ws
    dof = q.shape[0]
    m = 3 * gnode.shape[0]
    lam = state[0] if state[0] > 0.0 else LAMBDA_INIT
    free = state[4] > 0.5
    # state[10] = 1: minimise the residual to the end (unreachable targets), no progress test
    progress_test = not (state.shape[0] > S_MINIMIZE and state[S_MINIMIZE] > 0.5)
    lo = lower
    hi = upper
    if free:
        lo = inf_lo
        hi = inf_hi
    task_eval(ni, nf, origin, q, gnode, gkind, gvec, gR, gaxis, gw, Tall, Jf, e, J, errs, True)
    cost = 0.0
    for i in range(m):
        cost += e[i] * e[i]
    if w_post > 0.0:
        posture_residual(q, q_rest, balls, pr)
        for i in range(dof):
            cost += w_post * w_post * pr[i] * pr[i]
    code = RUNNING
    it = 0
    small = 0
    nu = 2.0
    window_cost = cost
    while it < max_iter:
        if errs[0] <= tol_p and errs[1] <= tol_r:
            if free and not wrap_into_limits(ni, nf, lower, upper, q):
                code = STALLED
            else:
                code = CONVERGED
            break
        it += 1
        # normal equations
        E = 0.5 * cost
        for r in range(dof):
            s = 0.0
            for k in range(m):
                s += J[k, r] * e[k]
            g[r] = s
            for c in range(r, dof):
                s = 0.0
                for k in range(m):
                    s += J[k, r] * J[k, c]
                A[r, c] = s
                A[c, r] = s
        w2 = w_post * w_post
        mu = lam * E + EPS_DAMP
        for r in range(dof):
            A[r, r] += w2 + mu * jw[r]
            if w_post > 0.0:
                g[r] += w2 * pr[r]
        if not chol_solve(A, g, dq):
            lam *= 10.0
            if lam > LAMBDA_MAX:
                code = STALLED
                break
            continue
        step_and_clamp(q, dq, lo, hi, balls, qn)
        task_eval(ni, nf, origin, qn, gnode, gkind, gvec, gR, gaxis, gw, Tall, Jf, e2, J2, errs2, True)
        cost2 = 0.0
        for i in range(m):
            cost2 += e2[i] * e2[i]
        if w_post > 0.0:
            posture_residual(qn, q_rest, balls, pr)
            for i in range(dof):
                cost2 += w2 * pr[i] * pr[i]
        if it % PROGRESS_WINDOW == 0 and progress_test:
            # (not when already close: the last digits may come slowly along a limit)
            if it > 0 and cost > PROGRESS_FACTOR * window_cost and (errs[0] > NEAR * tol_p
                                                                      or errs[1] > NEAR * tol_r):
                code = STALLED
                break
            window_cost = cost
        if RULE == 1:
            pred = 0.0
            for i in range(dof):
                pred += dq[i] * (mu * jw[i] * dq[i] + g[i])
            rho = (cost - cost2) / pred if pred > 0.0 else -1.0
        if cost2 < cost:
            rel = (cost - cost2) / cost
            for i in range(dof):
                q[i] = qn[i]
            e, e2 = e2, e  # the trial becomes the current point: swap buffers, no copies
            J, J2 = J2, J
            errs, errs2 = errs2, errs
            cost = cost2
            if RULE == 1:
                t = 2.0 * rho - 1.0
                lam = max(lam * max(1.0 / 3.0, 1.0 - t * t * t), LAMBDA_MIN)
                nu = 2.0
            else:
                lam = max(lam * LAMBDA_SHRINK, LAMBDA_MIN)
            # progress too small to matter: a local minimum (or the closest reachable pose)
            if rel < 1e-6:
                small += 1
                if small >= 4:
                    code = STALLED
                    break
            else:
                small = 0
        else:
            if w_post > 0.0:
                posture_residual(q, q_rest, balls, pr)
            if RULE == 1:
                lam *= nu
                nu *= 2.0
            else:
                lam *= LAMBDA_GROW
            if lam > LAMBDA_MAX:
                code = STALLED
                break
    if code == RUNNING and errs[0] <= tol_p and errs[1] <= tol_r:
        if free and not wrap_into_limits(ni, nf, lower, upper, q):
            code = STALLED
        else:
            code = CONVERGED
    state[0] = lam
    state[1] += it
    state[2] = errs[0]
    state[3] = errs[1]
    return code


@njit(cache=True)
def _restart_q(lo, span, balls, seed, attempt, q):
    """Uniform restart number ``attempt`` (its own seed: independent of how calls are chunked)."""
    np.random.seed((seed * 1000003 + attempt) & 0x7FFFFFFF)
    for i in range(q.shape[0]):
        q[i] = lo[i] + span[i] * np.random.random()


@njit(cache=True)
def lm_attempts(ni, nf, origin, lower, upper, balls, gnode, gkind, gvec, gR, gaxis, gw, q_rest, w_post, jw,
                tol_p, tol_r, q, best_q, state, budget, attempt_iters, max_attempts, sample_lo, sample_span,
                seed, buf):
    """LM attempts with random restarts, inside one kernel call, for up to ``budget`` iterations.

    Attempt 0 starts from q; attempt k > 0 from uniform sample k (seeded by ``seed`` and k). An
    attempt ends when it converges, stalls or has run ``attempt_iters`` iterations; attempts
    alternate between free and clamped iterations (see lm_iterate). The best configuration inside
    the limits is kept in ``best_q`` (its errors in state[2], state[3]); state also carries the
    attempt in progress across calls, so the driver can call again until its clock runs out.
    ``buf`` is scratch of at least ``workspace_size(n_nodes, dof, 3 * G)`` entries.
    Returns CONVERGED, RUNNING (budget spent) or STALLED (``max_attempts`` attempts done).
    """
    dof = q.shape[0]
    ws = lm_workspace(buf, ni.shape[0], dof, 3 * gnode.shape[0])
    Tall, Jf, e, J = ws[0], ws[1], ws[2], ws[3]
    errs = ws[6]
    used = 0
    while used < budget:
        if state[S_ATTEMPT] >= max_attempts:
            return STALLED
        n = min(attempt_iters - int(state[S_ATTEMPT_ITERS]), budget - used)
        before = state[S_ITERS]
        code = lm_iterate_ws(ni, nf, origin, lower, upper, balls, gnode, gkind, gvec, gR, gaxis, gw, q_rest,
                             w_post, jw, tol_p, tol_r, q, n, state, ws)
        done = int(state[S_ITERS] - before)
        used += done
        state[S_ATTEMPT_ITERS] += done
        if code == CONVERGED:
            for i in range(dof):
                best_q[i] = q[i]
            state[S_BEST] = 0.0
            state[S_BEST_PERR] = state[S_PERR]
            state[S_BEST_RERR] = state[S_RERR]
            return CONVERGED
        if code == STALLED or state[S_ATTEMPT_ITERS] >= attempt_iters or done == 0:
            # judge the attempt by its clamped configuration (a free attempt may be outside)
            for i in range(dof):
                if q[i] < lower[i]:
                    q[i] = lower[i]
                elif q[i] > upper[i]:
                    q[i] = upper[i]
            task_eval(ni, nf, origin, q, gnode, gkind, gvec, gR, gaxis, gw, Tall, Jf, e, J, errs, False)
            pe = errs[0]
            re = errs[1]
            key = max(pe / tol_p, re / tol_r)
            if key < state[S_BEST]:
                state[S_BEST] = key
                state[S_BEST_PERR] = pe
                state[S_BEST_RERR] = re
                for i in range(dof):
                    best_q[i] = q[i]
            attempt = int(state[S_ATTEMPT]) + 1
            state[S_ATTEMPT] = attempt
            state[S_ATTEMPT_ITERS] = 0.0
            state[S_LAMBDA] = 0.0
            state[S_FREE] = 1.0 if attempt % 2 == 0 else 0.0
            _restart_q(sample_lo, sample_span, balls, seed, attempt, q)
    return RUNNING


@njit(cache=True)
def new_attempt_state():
    """State array for lm_attempts: attempt 0, free iterations, no best yet."""
    st = np.zeros(11)
    st[S_FREE] = 1.0
    st[S_BEST] = np.inf
    st[S_BEST_PERR] = np.inf
    st[S_BEST_RERR] = np.inf
    return st


def _iterate(problem, q, max_iter, state, options):
    return lm_iterate(*problem.args, q, max_iter, state)


def _register():
    from . import Method, register

    register(Method(NAME, _iterate, "Levenberg–Marquardt, adaptive damping, limits, random restarts (default)",
                    JOINT_TYPES, attempt_iterations=ATTEMPT_ITERATIONS))


_register()


@njit(cache=True, parallel=True)
def lm_batch(ni, nf, origin, lower, upper, balls, gnode, gkind, gvecs, gRs, gaxis, gw, q_rest, w_post, jw,
             tol_p, tol_r, q0s, sample_lo, sample_span, attempt_iters, max_restarts, seed,
             q_out, errs_out, iters_out, restarts_out, conv_out):
    """B independent solves in parallel (prange): ``lm_attempts`` per item with at most
    ``max_restarts`` restarts; item b is seeded with seed + b (deterministic for any thread count)."""
    B = gvecs.shape[0]
    dof = q0s.shape[1]
    for b in prange(B):
        q = q0s[b].copy()
        best = q.copy()
        state = new_attempt_state()
        n = ni.shape[0]
        m = 3 * gnode.shape[0]
        buf = np.empty(16 * n + 6 * dof + 3 * m + 2 * m * dof + 40 + dof * dof + 6 * dof)
        code = lm_attempts(ni, nf, origin, lower, upper, balls, gnode, gkind, gvecs[b], gRs[b], gaxis, gw,
                           q_rest, w_post, jw, tol_p, tol_r, q, best, state, (max_restarts + 1) * attempt_iters,
                           attempt_iters, max_restarts + 1, sample_lo, sample_span, seed + b, buf)
        q_out[b] = best
        errs_out[b, 0] = state[S_BEST_PERR]
        errs_out[b, 1] = state[S_BEST_RERR]
        iters_out[b] = int(state[S_ITERS])
        restarts_out[b] = int(state[S_ATTEMPT])
        conv_out[b] = code == CONVERGED
