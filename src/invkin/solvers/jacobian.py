"""Jacobian-based methods: transpose, (weighted) pseudo-inverse with a null-space term, and damped
least squares.

All three linearise the stacked task ``e ≈ J δq`` (``e``, ``J`` from ``task_eval``: 3 rows per goal,
weighted, see :mod:`invkin.goals`), apply ``q ← clamp(q ⊕ δq)`` (ball joints composed on SO(3),
joint limits by projection, :func:`step_and_clamp`) and repeat. They differ only in δq:

* ``transpose`` (Welman 1993 §4.1.1, SEEDS.md §5): ``δq = α W⁻¹ Jᵀ e`` with Buss & Kim's step
  ``α = ⟨e, J d⟩ / ⟨J d, J d⟩``, ``d = W⁻¹Jᵀe`` (for W = I: ``⟨e, JJᵀe⟩ / ⟨JJᵀe, JJᵀe⟩``), or
  Welman's fixed α (option ``alpha``; every step taken, as in the document).
* ``pinv`` (SEEDS.md §1): ``δq = J⁺_W e + (I − J⁺_W J) η`` with
  ``J⁺_W = W⁻¹Jᵀ(J W⁻¹ Jᵀ + εI)⁻¹`` (ε a tiny regularisation: near a singularity the plain
  method takes huge steps, only the step cap limits them — that behaviour is what is compared).
* ``dls`` (Wampler 1986; Nakamura & Hanafusa 1986; Chiaverini 1997): the same formula with
  ``ε = λ²``, where the damping switches on only near a singularity,
  ``λ² = λ_max² (1 − (σ_min / σ_0)²)`` when ``σ_min < σ_0``, else 0 (Chiaverini's rule on the
  smallest singular value σ_min of ``J W^-1/2``, computed exactly by Jacobi's eigenvalue method).

W = diag(joint_weights), or for pinv/dls a full symmetric positive definite W (option
``weight_matrix``, SEEDS.md §1: ``J⁺_W`` minimises ``δqᵀ W δq``), applied through its Cholesky
factor W = L Lᵀ: ``J⁺_W = L⁻ᵀ (J L⁻ᵀ)⁺`` (:func:`weighted_solve`). Since ``W⁻¹Jᵀ(JW⁻¹Jᵀ + λ²I)⁻¹ = (JᵀJ + λ²W)⁻¹Jᵀ``, the kernels solve
whichever of the two systems is smaller (m×m or dof×dof). With the null-space term the step is
evaluated as ``δq = η + J⁺(e − J η)``, algebraically equal to ``J⁺e + (I − J⁺J)η``.

Null-space objectives (``pinv``, ``dls``; ``η = nullspace_gain ·`` the objective's direction):

* ``"joint_limits"``: the joint-limit barrier of Chan & Dubey (1995),
  ``H = Σ_i (u_i − l_i)² / (4 (u_i − q_i)(q_i − l_i))`` (1 per joint at mid-range, ∞ at a limit),
  descended with a per-joint scaling by ``h_i² / 2`` (``h_i`` = half range):
  ``η_i = −gain · h_i² / 2 · ∂H/∂q_i = −gain · x_i h_i⁴ / (h_i² − x_i²)²``, ``x_i = q_i − mid_i``,
  clipped to ``|η_i| ≤ |x_i|`` (never past mid-range). Near mid-range ``η ≈ gain (mid − q)``;
  near a limit the push grows. Joints without two finite limits get no push.
* ``"posture"``: ``η = gain · (q_rest ⊖ q)`` (``q_rest`` from a Posture goal, else neutral).
* ``"manipulability"``: ``η = gain · ∇w / w``, ``w = sqrt(det(J W⁻¹ Jᵀ))`` (Yoshikawa): the
  ascent direction of w, divided by w so that the gain does not depend on the robot's size
  (w scales with length^m); gradient by central differences (h = 1e-6; ball joints perturbed by
  local increments).
* a callable ``eta(q) -> (dof,)``: ``η = gain · eta(q)``; the loop then runs in Python, one
  kernel call per iteration.

A Posture goal (weight > 0) is handled the way each method can: ``transpose`` descends the full
cost ``½|e|² + ½ w_p² |q_rest ⊖ q|²`` (its residual stacked under the task rows) until it settles on
that compromise, short of the goals; then the posture yields (``state[S_POSTURE_OFF]``) and the goals
converge from there, near the rest posture (the posture is the lowest priority: it held 18-20 of 20
Panda targets off their 1e-6 m tolerance at weights 1e-3 to 0.5);
``pinv`` and ``dls`` treat it as the secondary task of the task-priority scheme, i.e. it adds the
``"posture"`` objective to η (never disturbing the goals to first order).

A null-space motion moves the goals at second order; while it is large that drift can hold the
residual above tolerance, so whenever the residual grows η is halved for the rest of the attempt
(the secondary objective yields to the goals, never the reverse).

Every step is capped (``max_step``: largest joint increment per iteration [rad or m]; the whole
step is scaled). ``transpose`` is a descent method: a step that does not lower the cost is rejected
and the cap halved (doubled again after a success). ``pinv``/``dls``/``gauss-seidel`` take every
step and remember the best configuration of the attempt, which they return when they stall.
Stall rules: no relative cost decrease of 1e-3 over ``PATIENCE`` iterations, a zero step, or (for
transpose) a zero gradient — the pull points along a singular direction (Welman).

Options (``ik.solve(..., method=..., **options)``):

* transpose: ``max_step=0.5`` [rad or m]; ``alpha=None`` (Buss–Kim's adaptive step) or Welman's
  fixed α [rad/m² for position rows]: ``δq = α W⁻¹Jᵀe`` capped at max_step, taken even when the
  cost grows (too large an α oscillates, too small a one crawls: the document's trade-off).
* pinv: ``nullspace=None`` (None, "joint_limits", "posture", "manipulability" or a callable),
  ``nullspace_gain=0.1`` (≥ 0), ``max_step=0.5``, ``regularization=1e-10`` (ε, in the units of
  ``JJᵀ``), ``weight_matrix=None`` (a full (dof, dof) W instead of ``joint_weights``; the
  manipulability objective then uses W = I).
* dls: ``nullspace``, ``nullspace_gain``, ``max_step`` as pinv; ``damping=0.1`` (λ_max) and
  ``singular_threshold=0.1`` (σ0), both in the units of J's singular values (m/rad for position
  rows, 1 for rotation rows): larger values make the boundary of the workspace calmer and a
  near-singular solution slower to reach.
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit

from ..errors import SolverError
from ._common import CONVERGED, RUNNING, STALLED, integrate_into, posture_residual, step_and_clamp, task_eval
from ._iterate import end_iterations, take_trial
from ._linalg import cap_step, damped_solve, scale_columns, sigma_min_and_w, sqnorm
from ._linalg import sym_eigvals  # noqa: F401 - re-exported: its home before _linalg

JOINT_TYPES = ("revolute", "continuous", "prismatic", "ball")

# null-space objective codes (kernel argument)
NS_NONE = 0
NS_JOINT_LIMITS = 1
NS_POSTURE = 2
NS_MANIPULABILITY = 3
NS_EXTERNAL = 4  # η supplied by the caller in eta_ext (Python callable path)
NULLSPACE_NAMES = {None: NS_NONE, "joint_limits": NS_JOINT_LIMITS, "posture": NS_POSTURE,
                   "manipulability": NS_MANIPULABILITY}

MODE_PINV = 0
MODE_DLS = 1

# slots of the driver's state array (8,) used here; 1-3 are the driver's (iterations, errors);
# the driver marks LM's free attempts in 4, which transpose and gauss-seidel use as S_POSTURE_OFF
S_SCALAR = 0  # transpose: step cap; pinv/dls: η scale
S_POSTURE_OFF = 4  # transpose, gauss-seidel: 1 once the attempt's posture term has yielded to the goals
S_SINCE = 5   # iterations since the progress window's reference cost fell
S_BEST = 6    # best cost of the attempt (<= 0: a fresh attempt)
S_REF = 7     # reference cost of the progress window

PATIENCE = 20             # pinv / dls / gauss-seidel: iterations without progress before STALLED
PATIENCE_TRANSPOSE = 50   # transpose converges linearly: give it a longer window
PROGRESS = 1e-3           # relative cost decrease (within the window) that counts as progress
MANIP_H = 1e-6            # finite-difference step of the manipulability gradient


# --------------------------------------------------------------------------- small kernels


@njit(cache=True)
def joint_limit_eta(q, lower, upper, gain, eta):
    """η += the scaled descent direction of Chan & Dubey's joint-limit barrier (module docstring)."""
    for i in range(q.shape[0]):
        lo = lower[i]
        hi = upper[i]
        if not (math.isfinite(lo) and math.isfinite(hi)) or hi <= lo:
            continue
        h = 0.5 * (hi - lo)
        x = q[i] - 0.5 * (hi + lo)
        d = h * h - x * x
        if d <= 1e-12 * h * h:
            v = -x
        else:
            v = -gain * x * (h * h / d) * (h * h / d)
            if abs(v) > abs(x):
                v = -x
        eta[i] += v


# --------------------------------------------------------------------------- transpose


@njit(cache=True)
def transpose_iterate(ni, nf, origin, lower, upper, balls, gnode, gkind, gvec, gR, gaxis, gw, q_rest, w_post, jw,
                      tol_p, tol_r, q, max_iter, state, max_step, alpha_fixed):
    """Jacobian transpose (Welman 1993 §4.1.1; SEEDS.md §5), step size of Buss & Kim (2005) or
    Welman's fixed α.

    Update: ``g = Jᵀe + w_p² (q_rest ⊖ q)`` (the negative cost gradient), ``d = W⁻¹ g`` with the
    components pushing into an active joint limit removed, ``α = ⟨g, d⟩ / (|J d|² + w_p² |d|²)``
    (for W = I, no posture: ``⟨e, JJᵀe⟩/⟨JJᵀe, JJᵀe⟩``, the minimiser of the linearised cost
    along d), ``δq = α d`` capped at ``cap`` (≤ max_step); ``q ← clamp(q ⊕ δq)`` if the cost fell,
    else the cap halves. ``alpha_fixed > 0``: Welman's ``δq = α W⁻¹ Jᵀ e`` with α = alpha_fixed,
    capped at max_step and taken whether or not the cost fell (the document's iteration).

    state: [cap, iterations, position error, rotation error, (driver's), iterations since
    progress, attempt started, reference cost]. Returns RUNNING, CONVERGED or STALLED.
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
    errs = np.empty(20)  # task_eval uses the tail as scratch
    errs2 = np.empty(20)
    g = np.empty(dof)
    d = np.empty(dof)
    Jd = np.empty(m)
    pr = np.zeros(dof)
    pr2 = np.zeros(dof)
    qn = np.empty(dof)
    w2 = w_post * w_post if state[S_POSTURE_OFF] == 0.0 else 0.0
    cap = state[S_SCALAR] if state[S_SCALAR] > 0.0 else max_step
    task_eval(ni, nf, origin, q, gnode, gkind, gvec, gR, gaxis, gw, Tall, Jf, e, J, errs)
    if w_post > 0.0:
        posture_residual(q, q_rest, balls, pr)
    cost = 0.5 * (sqnorm(e) + w2 * sqnorm(pr))
    if state[S_BEST] <= 0.0:  # fresh attempt
        state[S_BEST] = max(cost, 1e-300)
        state[S_REF] = cost
        state[S_SINCE] = 0.0
    code = RUNNING
    it = 0
    while it < max_iter:
        if errs[0] <= tol_p and errs[1] <= tol_r:
            code = CONVERGED
            break
        if code == STALLED:
            if w2 > 0.0:  # settled on the posture's compromise: the posture yields, the goals go on
                w2 = 0.0
                state[S_POSTURE_OFF] = 1.0
                cost = 0.5 * sqnorm(e)
                state[S_REF] = cost
                state[S_SINCE] = 0.0
                cap = max_step
                code = RUNNING
            else:
                break
        it += 1
        for c in range(dof):
            s = 0.0
            for k in range(m):
                s += J[k, c] * e[k]
            g[c] = s + w2 * pr[c]
        for c in range(dof):
            d[c] = g[c] / jw[c]
            # projected gradient: a joint at its limit is not pushed into it
            if (q[c] >= upper[c] and d[c] > 0.0) or (q[c] <= lower[c] and d[c] < 0.0):
                d[c] = 0.0
        num = 0.0
        for c in range(dof):
            num += g[c] * d[c]
        den = w2 * sqnorm(d)
        for k in range(m):
            s = 0.0
            for c in range(dof):
                s += J[k, c] * d[c]
            Jd[k] = s
            den += s * s
        if not (num > 0.0 and den > 0.0):
            code = STALLED  # Jᵀe = 0: the pull points along a singular direction
            continue
        alpha = num / den if alpha_fixed <= 0.0 else alpha_fixed
        for c in range(dof):
            d[c] *= alpha
        cap_step(d, cap if alpha_fixed <= 0.0 else max_step)
        step_and_clamp(q, d, lower, upper, balls, qn)
        task_eval(ni, nf, origin, qn, gnode, gkind, gvec, gR, gaxis, gw, Tall, Jf, e2, J2, errs2)
        if w_post > 0.0:
            posture_residual(qn, q_rest, balls, pr2)
        cost2 = 0.5 * (sqnorm(e2) + w2 * sqnorm(pr2))
        if cost2 < cost or alpha_fixed > 0.0:
            for c in range(dof):
                q[c] = qn[c]
                pr[c] = pr2[c]
            take_trial(e, J, errs, e2, J2, errs2)
            cost = cost2
            cap = min(2.0 * cap, max_step)
        else:
            cap *= 0.5
            if cap < 1e-14:
                code = STALLED
                continue
        if cost < state[S_REF] * (1.0 - PROGRESS):
            state[S_REF] = cost
            state[S_SINCE] = 0.0
        else:
            state[S_SINCE] += 1.0
            if state[S_SINCE] >= PATIENCE_TRANSPOSE:
                code = STALLED
                continue
    if code == STALLED and w2 > 0.0 and not (errs[0] <= tol_p and errs[1] <= tol_r):
        code = RUNNING  # (stalled on the last iteration of the call: the next call drops the posture)
        state[S_POSTURE_OFF] = 1.0
        state[S_REF] = 0.5 * sqnorm(e)
        state[S_SINCE] = 0.0
        cap = max_step
    state[S_SCALAR] = cap
    return end_iterations(code, it, errs[0], errs[1], tol_p, tol_r, state)


# --------------------------------------------------------------------------- pinv / dls


@njit(cache=True)
def _manipulability(ni, nf, origin, q, gnode, gkind, gvec, gR, gaxis, gw, jw, Tall, Jf, e, J, Jh, G, ev, errs):
    task_eval(ni, nf, origin, q, gnode, gkind, gvec, gR, gaxis, gw, Tall, Jf, e, J, errs)
    scale_columns(J, jw, Jh)
    return sigma_min_and_w(Jh, J.shape[0], J.shape[1], G, ev)[1]


@njit(cache=True)
def manipulability_gradient(ni, nf, origin, balls, gnode, gkind, gvec, gR, gaxis, gw, jw, q, grad):
    """grad = ∇w(q), w = sqrt(det(J W⁻¹ Jᵀ)) of the stacked task Jacobian, by central differences
    (ball joints: derivative with respect to the local increment, the kernels' convention).
    Returns w(q)."""
    dof = q.shape[0]
    m = 3 * gnode.shape[0]
    k = min(m, dof)
    Tall = np.empty((ni.shape[0], 4, 4))
    Jf = np.empty((6, dof))
    e = np.empty(m)
    J = np.empty((m, dof))
    Jh = np.empty((m, dof))
    G = np.empty((k, k))
    ev = np.empty(k)
    errs = np.empty(20)  # task_eval uses the tail as scratch
    dq = np.zeros(dof)
    qp = np.empty(dof)
    for j in range(dof):
        dq[j] = MANIP_H
        integrate_into(q, dq, balls, qp)
        wp = _manipulability(ni, nf, origin, qp, gnode, gkind, gvec, gR, gaxis, gw, jw, Tall, Jf, e, J, Jh, G, ev,
                             errs)
        dq[j] = -MANIP_H
        integrate_into(q, dq, balls, qp)
        wm = _manipulability(ni, nf, origin, qp, gnode, gkind, gvec, gR, gaxis, gw, jw, Tall, Jf, e, J, Jh, G, ev,
                             errs)
        dq[j] = 0.0
        grad[j] = (wp - wm) / (2.0 * MANIP_H)
    return _manipulability(ni, nf, origin, q, gnode, gkind, gvec, gR, gaxis, gw, jw, Tall, Jf, e, J, Jh, G, ev, errs)


@njit(cache=True)
def _track_best(q, qbest, cost, state):
    """Best-so-far bookkeeping (state[S_BEST], qbest) and the progress window (state[S_REF],
    state[S_SINCE]); returns True when progress has stopped."""
    if cost < state[S_BEST]:
        state[S_BEST] = max(cost, 1e-300)
        for i in range(q.shape[0]):
            qbest[i] = q[i]
    if cost < state[S_REF] * (1.0 - PROGRESS):
        state[S_REF] = cost
        state[S_SINCE] = 0.0
        return False
    state[S_SINCE] += 1.0
    return state[S_SINCE] >= PATIENCE


@njit(cache=True)
def start_attempt(q, qbest, cost, state):
    """Initialise the bookkeeping on an attempt's first call; returns True if it was fresh."""
    if state[S_BEST] > 0.0:
        return False
    state[S_BEST] = max(cost, 1e-300)
    state[S_REF] = cost
    state[S_SINCE] = 0.0
    for i in range(q.shape[0]):
        qbest[i] = q[i]
    return True


@njit(cache=True)
def restore_best(ni, nf, origin, gnode, gkind, gvec, gR, gaxis, gw, q, qbest, Tall, Jf, e, J, errs):
    """q = qbest and its errors into errs (an attempt that stalled returns its best point)."""
    for i in range(q.shape[0]):
        q[i] = qbest[i]
    task_eval(ni, nf, origin, q, gnode, gkind, gvec, gR, gaxis, gw, Tall, Jf, e, J, errs)


@njit(cache=True)
def weighted_solve(J, r, jw, Lt, lam2, dq, Jt, dy, Jh, A, y, b):
    """dq = W⁻¹Jᵀ(J W⁻¹ Jᵀ + λ²I)⁻¹ r for W = diag(jw) or, when ``Lt`` (dof, dof) is not empty, the
    full W = L Lᵀ with ``Lt = L⁻ᵀ``: with J̃ = J L⁻ᵀ, ``W⁻¹Jᵀ = L⁻ᵀ J̃ᵀ`` and ``J W⁻¹ Jᵀ = J̃ J̃ᵀ``,
    so dq = L⁻ᵀ J̃⁺ r (:func:`damped_solve` on J̃ with unit weights: ``jw`` is then all ones, as
    the callers guarantee, and passed on rather than a fresh array of ones, so that damped_solve
    is compiled once for the read-only weights of the Robot). Returns False when the system could
    not be factorised."""
    if Lt.shape[0] == 0:
        return damped_solve(J, r, jw, lam2, dq, Jh, A, y, b)
    dof = J.shape[1]
    mat_mul(J, Lt, Jt)
    if not damped_solve(Jt, r, jw, lam2, dy, Jh, A, y, b):
        return False
    for i in range(dof):
        s = 0.0
        for k in range(dof):
            s += Lt[i, k] * dy[k]
        dq[i] = s
    return True


@njit(cache=True)
def mat_mul(A, B, out):
    """out = A @ B for small dense matrices."""
    for i in range(A.shape[0]):
        for j in range(B.shape[1]):
            s = 0.0
            for k in range(A.shape[1]):
                s += A[i, k] * B[k, j]
            out[i, j] = s


@njit(cache=True)
def dls_iterate(ni, nf, origin, lower, upper, balls, gnode, gkind, gvec, gR, gaxis, gw, q_rest, w_post, jw,
                tol_p, tol_r, q, max_iter, state, qbest, eta_ext, mode, ns_kind, ns_gain, posture_on, reg, lam_max,
                sigma0, max_step, Lt):
    """Weighted pseudo-inverse (mode 0, SEEDS.md §1) or damped least squares (mode 1, Wampler 1986
    with Chiaverini's singularity-robust damping) with a null-space term.

    Update: ``δq = η + W⁻¹Jᵀ(J W⁻¹ Jᵀ + λ²I)⁻¹ (e − J η)`` ``= J⁺e + (I − J⁺J) η``, capped at
    ``max_step``; ``q ← clamp(q ⊕ δq)``. pinv: ``λ² = reg``; dls: ``λ² = reg + λ_max² (1 −
    (σ_min/σ0)²)`` when ``σ_min < σ0`` (σ_min of ``J W^-1/2``), else ``reg``. η: see the module
    docstring (``ns_kind``; ``posture_on`` adds ``ns_gain (q_rest ⊖ q)``; NS_EXTERNAL reads
    ``eta_ext``, already scaled). ``Lt`` (dof, dof): L⁻ᵀ of a full weight matrix W = L Lᵀ (then
    ``jw`` is all ones), or empty (0, 0) for W = diag(jw) (:func:`weighted_solve`).

    state: [η scale (halved whenever the residual grows), iterations, position error, rotation
    error, (driver's), iterations since progress, best cost, reference cost]; ``qbest`` (dof,)
    holds the best configuration of the attempt (restored on STALLED). Returns RUNNING,
    CONVERGED or STALLED. The manipulability objective is not computed here: it arrives as an
    external η from :func:`dls_manipulability`, so that a plain pinv/dls solve does not compile
    the gradient's kernels.
    """
    dof = q.shape[0]
    G = gnode.shape[0]
    m = 3 * G
    n = ni.shape[0]
    kk = min(m, dof)
    Tall = np.empty((n, 4, 4))
    Jf = np.empty((6, dof))
    e = np.empty(m)
    J = np.empty((m, dof))
    Jh = np.empty((m, dof))
    errs = np.empty(20)  # task_eval uses the tail as scratch
    A = np.empty((kk, kk))
    ev = np.empty(kk)
    y = np.empty(kk)
    b = np.empty(kk)
    r = np.empty(m)
    eta = np.zeros(dof)
    pr = np.empty(dof)
    dq = np.empty(dof)
    qn = np.empty(dof)
    full_w = Lt.shape[0] > 0
    Jt = np.empty((m if full_w else 0, dof if full_w else 0))
    dy = np.empty(dof)
    task_eval(ni, nf, origin, q, gnode, gkind, gvec, gR, gaxis, gw, Tall, Jf, e, J, errs)
    cost = 0.5 * sqnorm(e)
    if start_attempt(q, qbest, cost, state):
        state[S_SCALAR] = 1.0
    lam2 = reg
    eta_scale = state[S_SCALAR]
    code = RUNNING
    it = 0
    while it < max_iter:
        if errs[0] <= tol_p and errs[1] <= tol_r:
            code = CONVERGED
            break
        it += 1
        lam2 = reg
        if mode == MODE_DLS:
            if full_w:
                mat_mul(J, Lt, Jt)
                scale_columns(Jt, jw, Jh)  # J̃ = J L⁻ᵀ (jw all ones) has the singular values of J W^-1/2
            else:
                scale_columns(J, jw, Jh)
            smin = sigma_min_and_w(Jh, m, dof, A, ev)[0]
            if smin < sigma0:
                rho = smin / sigma0
                lam2 += lam_max * lam_max * (1.0 - rho * rho)
        # null-space term
        for i in range(dof):
            eta[i] = 0.0
        if ns_kind == NS_JOINT_LIMITS:
            joint_limit_eta(q, lower, upper, ns_gain, eta)
        elif ns_kind == NS_EXTERNAL:
            for i in range(dof):
                eta[i] = eta_ext[i]
        if posture_on:
            posture_residual(q, q_rest, balls, pr)
            for i in range(dof):
                eta[i] += ns_gain * pr[i]
        for i in range(dof):
            eta[i] *= eta_scale
        for k in range(m):
            s = e[k]
            for c in range(dof):
                s -= J[k, c] * eta[c]
            r[k] = s
        if not weighted_solve(J, r, jw, Lt, lam2, dq, Jt, dy, Jh, A, y, b):
            code = STALLED
            restore_best(ni, nf, origin, gnode, gkind, gvec, gR, gaxis, gw, q, qbest, Tall, Jf, e, J, errs)
            break
        for i in range(dof):
            dq[i] += eta[i]
        big = cap_step(dq, max_step)
        if not (big > 0.0) or not math.isfinite(big):
            code = STALLED  # no step (e.g. the error lies along a singular direction) or a broken one
            restore_best(ni, nf, origin, gnode, gkind, gvec, gR, gaxis, gw, q, qbest, Tall, Jf, e, J, errs)
            break
        step_and_clamp(q, dq, lower, upper, balls, qn)
        for i in range(dof):
            q[i] = qn[i]
        task_eval(ni, nf, origin, q, gnode, gkind, gvec, gR, gaxis, gw, Tall, Jf, e, J, errs)
        cost_old = cost
        cost = 0.5 * sqnorm(e)
        if cost > cost_old:
            # the residual grew: the null-space motion's second-order drift now outweighs the
            # goals' progress, so the secondary objective yields (η is halved for this attempt)
            eta_scale *= 0.5
        if _track_best(q, qbest, cost, state):
            if not (errs[0] <= tol_p and errs[1] <= tol_r):
                code = STALLED
                restore_best(ni, nf, origin, gnode, gkind, gvec, gR, gaxis, gw, q, qbest, Tall, Jf, e, J, errs)
            break
    state[S_SCALAR] = eta_scale
    return end_iterations(code, it, errs[0], errs[1], tol_p, tol_r, state)


@njit(cache=True)
def dls_manipulability(ni, nf, origin, lower, upper, balls, gnode, gkind, gvec, gR, gaxis, gw, q_rest, w_post, jw,
                       tol_p, tol_r, q, max_iter, state, qbest, eta_ext, mode, ns_gain, posture_on, reg, lam_max,
                       sigma0, max_step, Lt):
    """:func:`dls_iterate` with the manipulability objective: before every iteration
    ``η = ns_gain ∇w / max(w, 1e-9)`` (:func:`manipulability_gradient`) goes to dls_iterate as an
    external η (one iteration per call; the attempt's state carries over between calls, as on
    the Python path of a callable objective). Same arguments as dls_iterate without ``ns_kind``."""
    grad = np.empty(q.shape[0])
    # int(...): plain int64 values, the types the Python path passes. A literal or a global
    # constant would arrive as Literal[int](1) / Literal[int](4), a second compile of dls_iterate.
    one = int(1)
    external = int(NS_EXTERNAL)
    code = RUNNING
    for _ in range(max_iter):
        wq = manipulability_gradient(ni, nf, origin, balls, gnode, gkind, gvec, gR, gaxis, gw, jw, q, grad)
        wq = max(wq, 1e-9)
        for i in range(q.shape[0]):
            eta_ext[i] = ns_gain * grad[i] / wq
        code = dls_iterate(ni, nf, origin, lower, upper, balls, gnode, gkind, gvec, gR, gaxis, gw, q_rest, w_post,
                           jw, tol_p, tol_r, q, one, state, qbest, eta_ext, mode, external, ns_gain, posture_on,
                           reg, lam_max, sigma0, max_step, Lt)
        if code != RUNNING:
            break
    return code


# --------------------------------------------------------------------------- Python side


def problem_scratch(problem, key: str, factory):
    """Per-solve scratch kept on the Problem (the driver builds one per solve call)."""
    cache = problem.scratch
    if key not in cache:
        cache[key] = factory()
    return cache[key]


def _positive(name, v, allow_zero=False):
    ok = isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, bool) and math.isfinite(v) \
        and (v >= 0 if allow_zero else v > 0)
    if not ok:
        raise SolverError(f"option {name}: expected a finite number {'>= 0' if allow_zero else '> 0'}, got {v!r}")
    return float(v)


def _nullspace_kind(opt):
    if callable(opt):
        return NS_EXTERNAL
    try:
        return NULLSPACE_NAMES[opt]
    except (KeyError, TypeError):
        raise SolverError(f"option nullspace: expected None, 'joint_limits', 'posture', 'manipulability' or a "
                          f"callable eta(q) -> (dof,), got {opt!r}") from None


def _eta_from_callable(fn, q, dof, gain, out):
    try:
        v = np.asarray(fn(q.copy()), dtype=np.float64)
    except SolverError:
        raise
    except Exception as exc:  # a user's callable failing is reported, not swallowed
        raise SolverError(f"option nullspace: the callable raised {type(exc).__name__}: {exc}") from exc
    if v.shape != (dof,) or not np.all(np.isfinite(v)):
        raise SolverError(f"option nullspace: eta(q) must return {dof} finite numbers, got shape {v.shape}")
    out[:] = gain * v


NO_MATRIX = np.empty((0, 0))


def weight_factor(W, dof, joint_weights_given=False) -> np.ndarray:
    """L⁻ᵀ (dof, dof) of a full joint weight matrix W = L Lᵀ (symmetric positive definite), checked;
    ``W is None`` gives the empty matrix that means "diagonal W from joint_weights"."""
    if W is None:
        return NO_MATRIX
    if joint_weights_given:
        raise SolverError("option weight_matrix: give either joint_weights (a diagonal W) or weight_matrix "
                          "(a full W), not both")
    try:
        W = np.array(W, dtype=np.float64)
    except (TypeError, ValueError):
        raise SolverError(f"option weight_matrix: expected a ({dof}, {dof}) matrix, got {W!r:.200}") from None
    if W.shape != (dof, dof) or not np.all(np.isfinite(W)):
        raise SolverError(f"option weight_matrix: expected a finite ({dof}, {dof}) matrix, got shape {W.shape}")
    if not np.allclose(W, W.T, rtol=1e-10, atol=1e-12 * max(1.0, float(np.abs(W).max()))):
        raise SolverError("option weight_matrix: W must be symmetric (SEEDS.md §1: n×n symmetric positive "
                          "definite)")
    try:
        L = np.linalg.cholesky(W)
    except np.linalg.LinAlgError:
        raise SolverError(f"option weight_matrix: W must be positive definite; its smallest eigenvalue is "
                          f"{np.linalg.eigvalsh(W)[0]:.3g}") from None
    return np.ascontiguousarray(np.linalg.inv(L).T)


def _run_dls(problem, q, max_iter, state, options, mode):
    ns = options["nullspace"]
    kind = _nullspace_kind(ns)
    gain = _positive("nullspace_gain", options["nullspace_gain"], allow_zero=True)
    max_step = _positive("max_step", options["max_step"])
    if mode == MODE_PINV:
        reg = _positive("regularization", options["regularization"], allow_zero=True)
        lam_max, sigma0 = 0.0, 1.0
    else:
        reg = 1e-12
        lam_max = _positive("damping", options["damping"], allow_zero=True)
        sigma0 = _positive("singular_threshold", options["singular_threshold"])
    posture_on = kind == NS_POSTURE or problem.w_posture > 0.0
    if kind == NS_POSTURE:
        kind = NS_NONE
    dof = problem.dof
    qbest = problem_scratch(problem, "qbest", lambda: np.empty(dof))
    eta_ext = problem_scratch(problem, "eta_ext", lambda: np.zeros(dof))
    Lt = problem_scratch(problem, "weight_factor", lambda: weight_factor(
        options["weight_matrix"], dof, problem.joint_weights is not problem.robot.unit_weights))
    args = problem.args
    if kind == NS_MANIPULABILITY:
        return dls_manipulability(*args, q, max_iter, state, qbest, eta_ext, mode, gain, posture_on, reg, lam_max,
                                  sigma0, max_step, Lt)
    if kind != NS_EXTERNAL:
        return dls_iterate(*args, q, max_iter, state, qbest, eta_ext, mode, kind, gain, posture_on, reg, lam_max,
                           sigma0, max_step, Lt)
    code = RUNNING
    for _ in range(max_iter):
        _eta_from_callable(ns, q, dof, gain, eta_ext)
        code = dls_iterate(*args, q, 1, state, qbest, eta_ext, mode, kind, gain, posture_on, reg, lam_max, sigma0,
                           max_step, Lt)
        if code != RUNNING:
            break
    return code


def _iterate_transpose(problem, q, max_iter, state, options):
    max_step = _positive("max_step", options["max_step"])
    alpha = options["alpha"]
    alpha = 0.0 if alpha is None else _positive("alpha", alpha)
    return transpose_iterate(*problem.args, q, max_iter, state, max_step, alpha)


def _iterate_pinv(problem, q, max_iter, state, options):
    return _run_dls(problem, q, max_iter, state, options, MODE_PINV)


def _iterate_dls(problem, q, max_iter, state, options):
    return _run_dls(problem, q, max_iter, state, options, MODE_DLS)


def pinv_step(J, e, eta=None, joint_weights=None, damping: float = 0.0, regularization: float = 1e-10):
    """The step of ``pinv`` (``damping = 0``) or ``dls`` for a given Jacobian, split in two parts.

    J: (m, dof) task Jacobian; e: (m,) residual; eta: (dof,) null-space vector (default 0);
    joint_weights: (dof,) > 0 (W = diag) or a full (dof, dof) symmetric positive definite W.
    Returns ``(dq_task, dq_null)`` with ``dq_task = J⁺_W e``, ``J⁺_W = W⁻¹Jᵀ(J W⁻¹ Jᵀ + λ²I)⁻¹``, and
    ``dq_null = (I − J⁺_W J) η`` (so ``J @ dq_null ≈ 0`` wherever J has full row rank), computed by
    the same kernel the solvers run.
    """
    def arr(name, v, shape):  # (a wrong length was numpy's reshape error, a weight <= 0 a NaN step)
        try:
            a = np.ascontiguousarray(v, dtype=np.float64)
        except (TypeError, ValueError):
            raise SolverError(f"pinv_step: {name} must be finite numbers of shape {shape}, got {v!r:.100}") from None
        if (shape is not None and a.shape != shape) or not np.all(np.isfinite(a)):
            raise SolverError(f"pinv_step: {name} must be finite numbers of shape {shape or '(m, dof)'}, got "
                              f"shape {a.shape}" + ("" if np.all(np.isfinite(a)) else " with NaN or inf"))
        return a

    J = arr("J", J, None)
    if J.ndim != 2:
        raise SolverError(f"pinv_step: J must be (m, dof), got shape {J.shape}")
    m, dof = J.shape
    e = arr("e", e, (m,))
    eta = np.zeros(dof) if eta is None else arr("eta", eta, (dof,))
    damping = _positive("damping", damping, allow_zero=True)
    regularization = _positive("regularization", regularization, allow_zero=True)
    ones = np.ones(dof)
    if joint_weights is not None and np.ndim(joint_weights) == 2:
        jw, Lt = ones, weight_factor(joint_weights, dof)
    else:
        jw = ones if joint_weights is None else arr("joint_weights", joint_weights, (dof,))
        if not np.all(jw > 0):
            raise SolverError(f"pinv_step: joint_weights must be > 0, got {jw.tolist()}")
        Lt = NO_MATRIX
    k = min(m, dof)
    lam2 = regularization + damping * damping
    scratch = (np.empty((m, dof)), np.empty(dof), np.empty((m, dof)), np.empty((k, k)), np.empty(k), np.empty(k))
    dq_task = np.empty(dof)
    dq_all = np.empty(dof)
    ok = weighted_solve(J, e, jw, Lt, lam2, dq_task, *scratch)
    ok &= weighted_solve(J, e - J @ eta, jw, Lt, lam2, dq_all, *scratch)
    if not ok:
        raise SolverError("pinv_step: the system could not be factorised")
    return dq_task, dq_all + eta - dq_task


def _register():
    from . import Method, register

    register(Method("transpose", _iterate_transpose,
                    "Jacobian transpose with Buss–Kim step size (Welman 4.1.1): slow at tight tolerances",
                    JOINT_TYPES, defaults=dict(max_step=0.5, alpha=None)))
    ns_defaults = dict(nullspace=None, nullspace_gain=0.1, max_step=0.5, weight_matrix=None)
    register(Method("pinv", _iterate_pinv,
                    "Weighted pseudo-inverse with a null-space objective (SEEDS §1); plain near singularities",
                    JOINT_TYPES, defaults=dict(ns_defaults, regularization=1e-10)))
    register(Method("dls", _iterate_dls,
                    "Damped least squares with singularity-robust damping and a null-space objective",
                    JOINT_TYPES, defaults=dict(ns_defaults, damping=0.1, singular_threshold=0.1)))


_register()
