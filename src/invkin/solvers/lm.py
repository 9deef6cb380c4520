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

import numpy as np
from numba import njit

from ._common import CONVERGED, RUNNING, STALLED, chol_solve, posture_residual, step_and_clamp, task_eval

NAME = "lm"
JOINT_TYPES = ("revolute", "continuous", "prismatic", "ball")

LAMBDA_INIT = 1e-3
LAMBDA_MIN = 1e-9
LAMBDA_MAX = 1e8
EPS_DAMP = 1e-12
ATTEMPT_ITERATIONS = 40  # iterations before an unconverged attempt restarts (rtb's ik_LM uses 30)


@njit(cache=True)
def lm_iterate(ni, nf, origin, lower, upper, balls, gnode, gkind, gvec, gR, gaxis, gw, q_rest, w_post, jw,
               tol_p, tol_r, q, max_iter, state):
    """Run up to ``max_iter`` LM iterations on q (in place).

    state (4,): [lambda, iterations done, largest position error, largest rotation error];
    lambda <= 0 on entry means "start fresh". Returns a code: RUNNING, CONVERGED or STALLED.
    """
    dof = q.shape[0]
    G = gnode.shape[0]
    m = 3 * G
    n = ni.shape[0]
    Tall = np.empty((n, 4, 4))
    Jf = np.empty((6, dof))
    e = np.empty(m)
    J = np.empty((m, dof))
    e2 = np.empty(m)
    J2 = np.empty((m, dof))
    errs = np.empty(20)
    errs2 = np.empty(20)
    A = np.empty((dof, dof))
    g = np.empty(dof)
    dq = np.empty(dof)
    qn = np.empty(dof)
    pr = np.empty(dof)
    lam = state[0] if state[0] > 0.0 else LAMBDA_INIT
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
    while it < max_iter:
        if errs[0] <= tol_p and errs[1] <= tol_r:
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
        for r in range(dof):
            A[r, r] += w2 + (lam * E + EPS_DAMP) * jw[r]
            if w_post > 0.0:
                g[r] += w2 * pr[r]
        if not chol_solve(A, g, dq):
            lam *= 10.0
            if lam > LAMBDA_MAX:
                code = STALLED
                break
            continue
        step_and_clamp(q, dq, lower, upper, balls, qn)
        task_eval(ni, nf, origin, qn, gnode, gkind, gvec, gR, gaxis, gw, Tall, Jf, e2, J2, errs2, True)
        cost2 = 0.0
        for i in range(m):
            cost2 += e2[i] * e2[i]
        if w_post > 0.0:
            posture_residual(qn, q_rest, balls, pr)
            for i in range(dof):
                cost2 += w2 * pr[i] * pr[i]
        if cost2 < cost:
            rel = (cost - cost2) / cost
            for i in range(dof):
                q[i] = qn[i]
            for i in range(m):
                e[i] = e2[i]
                for c in range(dof):
                    J[i, c] = J2[i, c]
            errs[0] = errs2[0]
            errs[1] = errs2[1]
            cost = cost2
            lam = max(lam * 0.3, LAMBDA_MIN)
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
            lam *= 8.0
            if lam > LAMBDA_MAX:
                code = STALLED
                break
    if code == RUNNING and errs[0] <= tol_p and errs[1] <= tol_r:
        code = CONVERGED
    state[0] = lam
    state[1] += it
    state[2] = errs[0]
    state[3] = errs[1]
    return code


def _iterate(problem, q, max_iter, state, options):
    return lm_iterate(*problem.args, q, max_iter, state)


def _register():
    from . import Method, register

    register(Method(NAME, _iterate, "Levenberg–Marquardt, adaptive damping, limits, random restarts (default)",
                    JOINT_TYPES, attempt_iterations=ATTEMPT_ITERATIONS))


_register()
