"""The general core of Levenberg–Marquardt: every problem that is not one frame's goals on its
chain program (solvers/lm.py) — goals on several frames, CenterOfMass, Relative, Plane, hard goals,
Posture, per-solve joint step bounds, mode="distance". Same damping schedule and active set as
the chain kernels; see the comment below and docs/architecture.md, "The general core in one page".
"""
from __future__ import annotations

import math
import types as pytypes

import numpy as np
from numba import njit, types
from numba.extending import overload

from .._checks import MAX_LENGTH
from ..goals import KIND_AIM, KIND_COM, KIND_PLANE, KIND_REL_POSITION, KIND_REL_ROTATION, KINDS, PACKED
from ..kinematics.kernels import BALL, FAST, FIXED, NO_RC, fk_all_into, jacobian_from_all
from ..spatial import rotvec_product
from ..collision.rows import E_ROWS, E_VIOL, active_rows, ineq_eval, ineq_size, no_rows
from ._common import (com_row, goal_errors, goal_row_call, ldl_apply, ldl_factor, plane_row, posture_residual,
                      relative_frame)
from .lm import (ACTIVE_SET_PASSES, AGREE, CHAIN_LAMBDA_INIT, CONVERGED, EPS_DAMP, L_BALL, L_JW, L_LOWER,
                 L_SAMPLE_LO, L_SAMPLE_SPAN, L_UPPER, LAMBDA_MAX, NEAR, PROGRESS_FACTOR,
                 RUNNING, S_AGREE, S_ATTEMPT, S_ATTEMPT_ITERS, S_BEST, S_BEST_PERR, S_BEST_RERR, S_ITERS, S_LAMBDA,
                 S_MINIMIZE, NAME, JOINT_TYPES, ATTEMPT_ITERATIONS, S_PERR, S_RERR, STALLED, UNREACHABLE, _mix64,
                 limits_table, lm_accept)

# Every problem that is not one frame's goals on its chain program runs here: goals on several
# frames, CenterOfMass, Relative, Plane, hard goals, Posture, per-solve joint step bounds. One
# iteration (core_iterate), one attempts kernel (core_attempts), the same damping schedule
# (CHAIN_LAMBDA_INIT / LAMBDA_SHRINK / CHAIN_LAMBDA_GROW, mu = lambda E + eps; an attempt with
# hard and soft rows, which no chain route takes, starts at MIXED_LAMBDA_INIT) and the same
# active set on the joint limits as the chain kernel.
#
# The step is a constrained LM step: with the soft rows (J_s, e_s) and the hard rows (A, b),
#
#     min |J_s dq - e_s|^2 + mu |dq|_W^2   subject to   A dq = b   (regularised by mu_h)
#
# solved through the Schur complement of H = J_s^T J_s + mu W:
#     y = H^-1 J_s^T e_s,  X = H^-1 A^T,  (A X + mu_h I) lam = A y - b,  dq = y - X lam.
# mu_h = (lambda E_hard + eps) / mu: hard rows alone get the plain LM step (A A^T + lambda E_hard)
# and once they are met they hold exactly to first order. Where each hard goal moves with a limb of
# its own (feet: the legs) that no other row moves, _reduced_step solves the same step with those
# limbs eliminated in closed form (no Schur complement; the general step wherever it cannot). A trial point is accepted
# lexicographically: while a hard goal is off by more than HARD_HOLD x its tolerance the hard
# cost must fall, afterwards the hard goals must stay within HARD_HOLD x tolerance and the soft
# cost must fall. The first RELAX_ITERATIONS iterations of an attempt with soft and hard rows
# skip that hold (no second-order corrections, only the soft cost must fall): the hard rows of
# the next steps bring the hard goals back quadratically, and a solve converges only with every
# goal within its tolerance. Measured on the whole-body benchmark's 32 reachable sets per robot:
# the same iterations (G1 4.50 / 4.41 mean, Talos 4.19, Solo12 3.00) without the ~1.2 corrections
# per iteration, kernel time 66 -> 42 us (G1), 66 -> 42 (Talos), 27 -> 18 (Solo12); hard goals
# that start met then end within their tolerance (largest foot drift 7.2e-7 m at 1e-6) instead of
# HARD_HOLD x tolerance. After those iterations the hard cost must fall until they are back within
# HARD_HOLD x tolerance, and there they stay whatever the soft goals ask (unreachable soft goals).
#
# Inequality rows: the joint box (limits, tightened per solve by max_joint_step) is an active
# set: joints a step would push past a bound are held there and the others re-solved (as on the
# chain path). The collision distances d_i(q) >= margin (collision/rows.py; model[5], None
# without collision: the kernels then compile without collision code) join the same way: evaluated after the goal rows at every point (rows
# 3G.. of e, J; ineq_eval), a row that is violated, or that the step would violate, becomes a
# hard row d_i + grad d_i . dq = margin of that step (_ineq_step). A point closer than the
# margin (errs[E_VIOL] > 0) is never converged and a step from it must lower the violation; from
# a point without one, a step that makes one is refused. See docs/architecture.md, "Collision".
#
# Posture is a regulariser: once every goal is met, settle() moves q toward q_rest inside the
# null space of the goals (all goal rows as constraints, the damping term pulling toward
# q_rest ⊖ q) while they stay within tolerance; converged means goals met and posture settled.

# Reference counting: the evaluation (core_eval_rows) and the step (_ineq_step, core_active_step,
# core_step and its factorisations) allocate nothing and are compiled without Numba's reference
# counting (NO_RC): with it every call counted its ~20 array arguments in and out, ~0.5 µs of a
# 2.3 µs G1 evaluation and ~0.3 µs of a step (benchmarks/RESULTS.md, session 5). A kernel
# compiled without it also compiles its callees so on first use: they must not allocate either
# (relative_frame and plane_row write scalars for that reason; so must collision/rows.active_rows,
# which _ineq_step calls; a cold compile of tests/test_collision_ik.py shows it). core_iterate and
# settle keep counting where the collision rows' evaluation (which allocates) is compiled into
# them; without collision rows they are compiled from _core_attempts_nrc without it (below).

HARD_HOLD = 0.1       # hard goals met stay within HARD_HOLD x tolerance through the soft steps
RELAX_ITERATIONS = 2  # ... after the first RELAX_ITERATIONS iterations of an attempt with soft and hard rows
EPS_HARD = 1e-14
NEAR_ATTEMPTS = 6     # general-core restarts re-seed near q0 first (radius grows per attempt)
NEAR_STEP = 0.15      # radius of near restart k: k x NEAR_STEP x the sampling span
FREE_RADIUS = 0.05    # [m or rad] per near attempt, for DOFs without limits (a floating base)
SETTLE_ITERATIONS = 100
CORE_PROGRESS_WINDOW = 8
SOC_PASSES = 3        # second-order corrections of a trial point that bent the hard goals
SOFT_PROGRESS = 1e-3  # with hard goals, an attempt ends when its soft cost falls less over a window
# AGREE (solvers/lm.py): two attempts agree when their largest errors differ by less than this fraction
AGREE_HARD = 0.1      # ... attempts that end with the hard goals missed agree within this fraction of the
                      # largest hard miss (a soft goal moves the least miss along the hard goals' valley)
AGREEMENTS = 3        # unreachable once this many later attempts agree with the best (near restarts of a
                      # reachable problem can fall back into the start's basin: 1 gave 6 false verdicts in
                      # 60 reachable G1 two-hand targets; 2, with NEAR_STEP 0.15, 8 in 200 G1 targets whose
                      # waist and arms were drawn uniformly; 3 gives 1 in 200, and a truly unreachable
                      # G1 hand about 1.6x the time: benchmarks/RESULTS.md, "False unreachable verdicts")
# Soft goals only (several frames, or one with a Posture; no hard goal, no max_joint_step box): attempts are
# cut by the progress test, so they end scattered, and the chain's rule (lm.CHAIN_AGREEMENTS attempts in a
# row without a better best) gave reachable problems false verdicts: a hand Pose beside its middle link's
# Position ran up to 563 such attempts before one converged (g1_left_arm; 99 panda, 251 baxter). Unreachable
# ones differ in where those attempts end: every configuration misses by at least the target's distance
# from the workspace, so restarts end at or near the closest answer, where a reachable problem's restarts
# end at local minima many times its best miss. So the count takes only the attempts that end within
# SOFT_SPREAD x the best miss (since the best last improved by more than lm.AGREE; others neither count nor
# reset it), and the verdict needs that best miss beyond lm.NEAR x tolerance (a nearly met answer: keep
# trying). Measured (benchmarks/core_soft_verdict.py, RESULTS.md "Session 16: the general core's verdict"):
# on 36,296 reachable soft-only problems the count reached at most 53 before an attempt converged (6 reached
# 40, 13 reached 30, all two-frame problems); on 1,888 unreachable ones the verdict came at attempt 100-372
# (median per set 100-128).
SOFT_SPREAD = 2.0      # an attempt that ends within this x the best miss found the closest answer again
SOFT_AGREEMENTS = 100  # unreachable once this many such attempts ended since the best last improved
AT_BOUND = 1e-12      # [rad or m] a joint this close to a bound starts a step held there (_active_step)
RELEASE_STEP = 1e-9  # [rad or m] ... and is released when it alone would move inside by more than this
FREE_SOLVE_HELD = 8   # _active_step: with at least this many joints held, and a quarter of them or more, a
                      # pass factors the free joints' problem afresh (_free_solve) instead of adding a row per
                      # held joint to the factor of H (_held_solve): G1 in a 0.05 box, 26-28 held, 100-150
                      # -> ~30 us a step (benchmarks/RESULTS.md, "Session 15")
INEQ_PASSES = 4       # re-solves of a step with the collision rows it would violate
MU_INEQ = 1e-10       # least regularisation of the hard system once collision rows join it
ELIM_PIVOT = 1e-12    # _reduced_step: a hard block's pivot below this x its largest takes the general step
HOLD_PIVOT = 1e-8     # ... and so does a held joint's pivot of E K^-1 E^T below this x its largest
MIXED_LAMBDA_INIT = 0.1  # an attempt's first damping with hard and soft rows (no chain route takes them;
                      # else CHAIN_LAMBDA_INIT = 0.3): whole_body.py's sets plus 150 more per robot
                      # (seed 7), mean iterations G1 4.69 -> 4.24 (most 31 -> 9), Talos 4.20 -> 4.16,
                      # Solo12 3.04 -> 3.05, all converged without restarts (0.05: 4.16 / 4.14 / 3.05;
                      # 0.01 and below: more again, G1 up to 13)
# UNREACHABLE (solvers/lm.py), core_attempts: 1 + AGREEMENTS attempts agree on the same closest, non-converged answer
# (SOFT_AGREEMENTS near it with soft goals only)
# core state slots after the chain kernel's (CHAIN_STATE of them, S_AGREE among them)
S_BEST_HARD, S_DISTANCE, S_BEST_DIST, S_HARD, S_HOLD_ALWAYS, S_BOXED = range(14, 20)
CORE_STATE = 20


@njit(cache=True, **NO_RC)
def core_eval(ni, nf, origin, mass, com, q, gnode, gkind, gref, glevel, gvec, gR, gaxis, gw, wvec, wR, Tall, Jf,
              Jr, sub, e, J, errs, want_jac):
    return core_eval_rows(ni, nf, origin, mass, com, q, gnode, gkind, gref, glevel, gvec, gR, gaxis, gw, wvec, wR,
                          Tall, Jf, Jr, sub, e, J, errs, want_jac, errs[:0])


@njit(cache=True, **NO_RC)
def core_eval_rows(ni, nf, origin, mass, com, q, gnode, gkind, gref, glevel, gvec, gR, gaxis, gw, wvec, wR, Tall, Jf,
                   Jr, sub, e, J, errs, want_jac, rowerr):
    """Stacked weighted residual e (3G,) and, with want_jac, Jacobian J (3G, dof) of every goal
    row at q (each kind through its own function: goal_row, com_row, relative_frame, plane_row;
    each dispatched by equality with its code, so a code that none of them knows is never read as
    another kind: its rows are 0 and its error inf, never met); each row's unweighted error goes
    to rowerr (G,) when it is not empty.
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
        elif 0 <= kind <= KIND_AIM or kind == KIND_REL_POSITION or kind == KIND_REL_ROTATION or kind == KIND_PLANE:
            if want_jac and node != last:
                jacobian_from_all(ni, nf, Tall, node, Jf)
                last = node
            if kind == KIND_PLANE:
                err = plane_row(Tall[node], Jf, g, gvec, gaxis, gw, e, J, want_jac)
                cls = 0
            else:
                if kind == KIND_REL_POSITION or kind == KIND_REL_ROTATION:
                    ref = gref[g]
                    if want_jac:
                        jacobian_from_all(ni, nf, Tall, ref, Jr)
                        last = -1  # Jf is changed in place below
                    kind = relative_frame(kind, g, Tall[ref], Tall[node], gvec, gR, wvec, wR, Jf, Jr, want_jac)
                cls, err = goal_row_call(Tall[node], Jf, g, kind, wvec, wR, gaxis, gw, e, J, want_jac)
        else:  # not a code of goals.KINDS (compile_problem and Layout refuse one before it gets here)
            for k in range(3 * g, 3 * g + 3):
                e[k] = 0.0
                if want_jac:
                    for c in range(J.shape[1]):
                        J[k, c] = 0.0
            err = math.inf
            cls = 0
        if rowerr.shape[0] > 0:
            rowerr[g] = err
        if gw[g] > 0.0:
            if err > errs[cls]:
                errs[cls] = err
            if glevel[g] == 0 and err > errs[2 + cls]:
                errs[2 + cls] = err


@njit(cache=True, fastmath=FAST, **NO_RC)
def _udu_factor(H, n):
    """H[:n, :n] = U D U^T in place from its lower triangle, eliminating the last index first
    (U unit upper triangular, stored transposed below the diagonal; D on it). False if H is not
    positive definite.

    Eliminating leaves first keeps the tree's sparsity: q is in topological order (a joint's
    ancestors have smaller indices) and H_ij of stacked frame rows is nonzero only when one of
    joints i, j is an ancestor of the other, so eliminating a joint updates only its ancestors'
    block and adds no fill; rows i with H_ki = 0 are skipped, and every update is a contiguous
    axpy (vectorised without reassociation)."""
    for k in range(n - 1, -1, -1):
        d = H[k, k]
        if not d > 0.0:
            return False
        inv = 1.0 / d
        for i in range(k - 1, -1, -1):  # descending: H[k, :i + 1] is still unscaled when read
            h = H[k, i]
            if h == 0.0:
                continue
            f = h * inv
            for j in range(i + 1):
                H[i, j] -= f * H[k, j]
            H[k, i] = f
    return True


@njit(cache=True, fastmath=FAST, **NO_RC)
def _udu_half(H, n, Z, c_lo, c_hi):
    """Z[:n, c_lo:c_hi] = U^-1 Z (those columns of Z, in place) for the factor of _udu_factor: the
    half of H^-1 = U^-T D^-1 U^-1 that the Schur complement needs. Zero rows of Z cost nothing, and a
    row's leading zero columns are skipped: a joint that no hard row moves (a humanoid's arm, waist)
    has only the gradient column nonzero, so its updates are one entry instead of the hard rows + 1
    (G1: 17 of 35 joints; the skipped terms are exact zeros), and a held joint's column e_k reaches
    only k's ancestors."""
    for k in range(n - 1, 0, -1):
        c0 = c_hi
        for c in range(c_lo, c_hi):
            if Z[k, c] != 0.0:
                c0 = c
                break
        if c0 == c_hi:
            continue
        for j in range(k):
            h = H[k, j]
            if h != 0.0:
                for c in range(c0, c_hi):
                    Z[j, c] -= h * Z[k, c]


@njit(cache=True, fastmath=FAST, **NO_RC)
def _udu_finish(H, n, w, x):
    """x = U^-T D^-1 w (the other half of H^-1, for w = U^-1 b); x may be w itself (x[i] is written
    after w[i] is read)."""
    for i in range(n):
        t = w[i] / H[i, i]
        for j in range(i):
            t -= H[i, j] * x[j]
        x[i] = t


@njit(cache=True, fastmath=FAST, **NO_RC)
def _hard_least_norm(J, e, hard, jw, mu, mu_h, hold, nheld, Jm, Z, S, lam, col, dq):
    """core_step without soft rows and without a bias (the second-order corrections): the least
    mu W-norm step of the hard rows A dq = r over the joints not held,
    dq = (mu W)^-1 A^T (A (mu W)^-1 A^T + mu_h I)^-1 r, from the Gram matrix of the hard rows
    (mh x mh, built as contiguous axpys over the rows' nonzero columns) instead of a
    factorisation of the diagonal H."""
    dof = J.shape[1]
    mh = hard.shape[0]
    for k in range(dof):  # dq holds (mu W)^-1 until the step is written
        dq[k] = 1.0 / (mu * jw[k])
    for i in range(mh):  # Jm[i] = A_i (mu W)^-1, Z = A^T, held joints' columns zeroed; lam = r
        row = hard[i]
        s = e[row]
        for k in range(dof):
            v = J[row, k]
            if nheld > 0 and hold[k] == hold[k]:
                s -= v * hold[k]
                v = 0.0
            Jm[i, k] = v * dq[k]
            Z[k, i] = v
        lam[i] = s
    for i in range(mh):
        for j in range(i + 1):
            S[i, j] = 0.0
        for k in range(dof):
            f = Jm[i, k]
            if f != 0.0:
                for j in range(i + 1):
                    S[i, j] += f * Z[k, j]
        S[i, i] += mu_h
    if not ldl_factor(S, mh):
        return False
    ldl_apply(S, mh, lam, col)
    for k in range(dof):
        dq[k] = 0.0
    for i in range(mh):  # lam: the multipliers of core_step's convention (mu W dq + A^T lam = 0)
        lam[i] = -col[i]
    for i in range(mh):
        c = col[i]
        for k in range(dof):
            dq[k] += Jm[i, k] * c
    if nheld > 0:
        for k in range(dof):
            if hold[k] == hold[k]:
                dq[k] = hold[k]
    return True


@njit(cache=True, fastmath=FAST, **NO_RC)
def core_step(J, e, soft, hard, jw, mu, mu_h, bias, hold, H, Jm, Z, S, r, lam, col, dq):
    """dq of the constrained damped step (see above) over the joints not held; a held joint k
    (hold[k] not NaN) moves by hold[k]. ``soft`` / ``hard``: row indices of J; with ``bias``
    (dof,) the damping pulls toward bias (mu W |dq - bias|^2; settle). False if not solvable.
    The scratch: core_step_scratch. core_active_step factors once and re-solves with held joints
    (_held_solve); this is one such step."""
    if _hard_only(soft, hard, bias):
        nheld = 0
        for k in range(hold.shape[0]):
            if hold[k] == hold[k]:
                nheld += 1
        return _hard_least_norm(J, e, hard, jw, mu, mu_h, hold, nheld, Jm, Z, S, lam, col, dq)
    if not _step_factor(J, e, soft, hard, jw, mu, bias, H, Z, S):
        return False
    return _held_solve(e, hard, mu_h, hold, H, Z, S, lam, col, dq)


@njit(cache=True, **NO_RC)
def _hard_only(soft, hard, bias):
    """The step of hard rows only without a bias (the second-order corrections): _hard_least_norm."""
    if soft.shape[0] > 0 or hard.shape[0] == 0:
        return False
    for k in range(bias.shape[0]):
        if bias[k] != 0.0:
            return False
    return True


@njit(cache=True, fastmath=FAST, **NO_RC)
def _step_factor(J, e, soft, hard, jw, mu, bias, H, Z, S):
    """The part of core_step that does not depend on the held joints: H = J_s^T J_s + mu W = U D U^T
    (_udu_factor, in place), Z[:, :mh] = U^-1 A^T and Z[:, mh] = U^-1 g (one half solve for every
    hard row and the gradient g = J_s^T e_s + mu W bias at once) and their products
    S[:mh + 1, :mh + 1] = [Z_A z_g]^T D^-1 [Z_A z_g] (lower triangle): A H^-1 A^T and A y,
    y = H^-1 g. False if H is not positive definite."""
    dof = J.shape[1]
    mh = hard.shape[0]
    for a in range(dof):
        for c in range(a + 1):
            H[a, c] = 0.0
        Z[a, mh] = mu * jw[a] * bias[a]
    for i in range(soft.shape[0]):  # H += J_s^T J_s (lower triangle), g += J_s^T e_s
        row = soft[i]
        ri = e[row]
        for a in range(dof):
            v = J[row, a]
            if v != 0.0:
                Z[a, mh] += v * ri
                for c in range(a + 1):
                    H[a, c] += v * J[row, c]
    for a in range(dof):
        H[a, a] += mu * jw[a]
        for i in range(mh):
            Z[a, i] = J[hard[i], a]
    if not _udu_factor(H, dof):
        return False
    _udu_half(H, dof, Z, 0, mh + 1)
    for i in range(mh + 1):
        for j in range(i + 1):
            S[i, j] = 0.0
    if mh > 0:
        for k in range(dof):
            dk = 1.0 / H[k, k]
            j0 = 0  # Z[k, :j0] is zero (see _udu_half): those terms add exact zeros
            while j0 < mh and Z[k, j0] == 0.0:
                j0 += 1
            for i in range(j0, mh + 1):
                f = Z[k, i] * dk
                if f != 0.0:
                    for j in range(j0, i + 1):
                        S[i, j] += f * Z[k, j]
    return True


@njit(cache=True, fastmath=FAST, **NO_RC)
def _held_solve(e, hard, mu_h, hold, H, Z, S, lam, col, dq):
    """The step from _step_factor's factor with the held joints (hold[k] not NaN) as equality rows
    e_k^T dq = hold[k] beside the hard rows, without regularisation: their columns U^-1 e_k (k's
    ancestors only) join Z after the gradient's and their products S, and the multipliers solve

        [E H^-1 E^T   E H^-1 A^T         ] [lam_E]   [E y - h]
        [A H^-1 E^T   A H^-1 A^T + mu_h I] [lam_A] = [A y - b],   dq = U^-T D^-1 (z_g - Z_A lam_A - Z_E lam_E)

    by LDL^T in S[L:] (L = S.shape[1]; the held rows first, so their pivots are the joints' own
    curvature). The same step as factoring H with the held joints' columns removed (exact
    arithmetic); a re-solve after the active set changes costs these columns and a small LDL^T
    instead of a new H and its factorisation. lam (mh,): the hard rows' multipliers (H dq - g +
    A^T lam_A + E^T lam_E = 0), for the active set. Without held joints, the same operations as the
    plain Schur step. False if the system is not positive definite."""
    dof = H.shape[0]
    mh = hard.shape[0]
    L = S.shape[1]
    c0 = mh + 1  # the held joints' columns of Z and rows of S
    nh = 0
    for k in range(dof):
        if hold[k] == hold[k]:
            for i in range(dof):
                Z[i, c0 + nh] = 0.0
            Z[k, c0 + nh] = 1.0
            nh += 1
    if nh > 0:
        _udu_half(H, dof, Z, c0, c0 + nh)
        for i in range(c0, c0 + nh):
            for j in range(i + 1):
                S[i, j] = 0.0
        for k in range(dof):
            dk = 1.0 / H[k, k]
            for i in range(c0, c0 + nh):
                f = Z[k, i] * dk
                if f != 0.0:
                    for j in range(i + 1):
                        S[i, j] += f * Z[k, j]
    n = nh + mh
    M = S[L:]
    rhs = S[S.shape[0] - 1]  # past M's last row (n <= mh + dof = L - 1)
    p = 0
    for k in range(dof):
        if hold[k] == hold[k]:
            i = c0 + p
            for j in range(p + 1):
                M[p, j] = S[i, c0 + j]
            rhs[p] = S[i, mh] - hold[k]
            p += 1
    for i in range(mh):
        for j in range(nh):
            M[nh + i, j] = S[c0 + j, i]
        for j in range(i + 1):
            M[nh + i, nh + j] = S[i, j]
        rhs[nh + i] = S[mh, i] - e[hard[i]]
        M[nh + i, nh + i] += mu_h
    if n > 0:
        if not ldl_factor(M, n):
            return False
        ldl_apply(M, n, rhs, col)
    for i in range(mh):
        lam[i] = col[nh + i]
    for k in range(dof):
        t = Z[k, mh]
        for i in range(mh):
            t -= Z[k, i] * col[nh + i]
        for p in range(nh):
            t -= Z[k, c0 + p] * col[p]
        dq[k] = t
    _udu_finish(H, dof, dq, dq)
    for k in range(dof):
        if hold[k] == hold[k]:
            dq[k] = hold[k]
    return True


@njit(cache=True, fastmath=FAST, **NO_RC)
def _free_solve(J, e, soft, hard, jw, mu, mu_h, bias, hold, nheld, H, Jm, Z, S, r, lam, col, dq):
    """_held_solve's step (the same minimiser) over the nf = dof - nheld free joints alone: the held
    joints' moves go to the right-hand side (e_i - sum_held J_ik hold[k] for the soft and hard rows
    i), their columns out of J, and _step_factor and _held_solve (without held joints) run on that
    smaller problem. With many joints held it costs a factorisation of nf x nf instead of a column
    and a row of the multipliers' system per held joint on the factor of the full H (G1 in a 0.05
    box, 26-28 of 35 held: 100-150 -> ~30 us a step). Its scratch is the caller's: Jm, H, Z as
    C-contiguous (m, nf), (nf, nf), (nf, L) views of their first entries, r (the right-hand side),
    and four spare rows at the end of S (the multipliers' system uses rows L to L + mh and the last
    one; nf <= dof <= L - mh - 1 rows lie between); H no longer holds the factor of the full H.
    lam: the hard rows' multipliers, as _held_solve's. False if not solvable. The caller needs
    dof >= 4 (it calls this with FREE_SOLVE_HELD held joints or more)."""
    m, dof = J.shape
    nf = dof - nheld
    mh = hard.shape[0]
    L = S.shape[1]
    n2 = S.shape[0]
    Jc = Jm.reshape(Jm.size)[:m * nf].reshape((m, nf))
    Hc = H.reshape(H.size)[:nf * nf].reshape((nf, nf))
    Zc = Z.reshape(Z.size)[:nf * L].reshape((nf, L))
    jwc = S[n2 - 5][:nf]
    bc = S[n2 - 4][:nf]
    hc = S[n2 - 3][:nf]
    dqc = S[n2 - 2][:nf]
    p = 0
    for k in range(dof):
        if hold[k] != hold[k]:
            jwc[p] = jw[k]
            bc[p] = bias[k]
            hc[p] = np.nan
            p += 1
    for t in range(soft.shape[0] + mh):
        row = soft[t] if t < soft.shape[0] else hard[t - soft.shape[0]]
        v = e[row]
        p = 0
        for k in range(dof):
            h = hold[k]
            if h == h:
                v -= J[row, k] * h
            else:
                Jc[row, p] = J[row, k]
                p += 1
        r[row] = v
    if not _step_factor(Jc, r, soft, hard, jwc, mu, bc, Hc, Zc, S):
        return False
    if not _held_solve(r, hard, mu_h, hc, Hc, Zc, S, lam, col, dqc):
        return False
    p = 0
    for k in range(dof):
        h = hold[k]
        if h == h:
            dq[k] = h
        else:
            dq[k] = dqc[p]
            p += 1
    return True


@njit(cache=True)
def core_step_scratch(m, dof, mh):
    """The scratch of core_step / core_active_step for J (m, dof) and up to mh hard rows: H, Jm, Z,
    S, r, lam, col (Z: a column per hard row, the gradient's and one per held joint; S: their
    products, then the multipliers' LDL^T and its right-hand side)."""
    L = mh + 1 + dof
    return (np.empty((dof, dof)), np.empty((m, dof)), np.empty((dof, L)), np.empty((2 * L, L)), np.empty(m),
            np.empty(mh), np.empty(mh + dof))


@njit(cache=True, **NO_RC)
def core_active_step(J, e, soft, hard, lims, lo, hi, q, mu, mu_h, bias, hold, H, Jm, Z, S, r, lam, col, dq):
    """core_step with the active set on the bounds lo, hi (dof,): joints the step would push past
    a bound are held at it and the others re-solved (up to ACTIVE_SET_PASSES times)."""
    return _active_step(J, e, soft, hard, lims, lo, hi, q, mu, mu_h, bias, hold, H, Jm, Z, S, r, lam, col, dq,
                        bool(0))


@njit(cache=True, **NO_RC)
def _active_step(J, e, soft, hard, lims, lo, hi, q, mu, mu_h, bias, hold, H, Jm, Z, S, r, lam, col, dq, warm):
    """core_active_step; with ``warm`` the joints at a bound of q start held there (the set of the
    step before, which left them there), and once no free joint leaves the box a warm-held joint
    whose multiplier nu_k = (J_s^T (J_s dq - e_s) + mu W (dq - bias) + A^T lam)_k says that the
    step, solved with it free, would move it back inside (nu_k < 0 at a lower bound, > 0 at an
    upper) is released and the rest re-solved. An active set that does not change between
    iterations then costs one solve instead of two (a crouch, whose knees and ankles stay at
    their bounds: G1 10 -> 5 solves in 5 iterations). A pass with FREE_SOLVE_HELD joints held or
    more (and a quarter of them) solves the free joints' problem afresh (_free_solve); the others
    re-solve from one factor of H (_held_solve)."""
    dof = q.shape[0]
    nwarm = _hold_at_bounds(q, lo, hi, hold, warm)
    jw = lims[L_JW]
    hard_only = _hard_only(soft, hard, bias)
    # H and its factor do not depend on the held joints: one factorisation, a re-solve per pass; with
    # many joints held, the free joints' smaller problem is factored instead (then H holds its factor)
    factored = False
    for _ in range(ACTIVE_SET_PASSES):
        nheld = 0
        for k in range(dof):
            if hold[k] == hold[k]:
                nheld += 1
        if hard_only:
            ok = _hard_least_norm(J, e, hard, jw, mu, mu_h, hold, nheld, Jm, Z, S, lam, col, dq)
        elif nheld >= FREE_SOLVE_HELD and 4 * nheld >= dof:
            ok = _free_solve(J, e, soft, hard, jw, mu, mu_h, bias, hold, nheld, H, Jm, Z, S, r, lam, col, dq)
            factored = False
        else:
            if not factored:
                if not _step_factor(J, e, soft, hard, jw, mu, bias, H, Z, S):
                    return False
                factored = True
            ok = _held_solve(e, hard, mu_h, hold, H, Z, S, lam, col, dq)
        if not ok:
            return False
        new = _hold_outside(q, dq, lo, hi, hold)
        if new == 0:
            if nwarm == 0:
                return True
            new = _release(J, e, soft, hard, lims, lo, hi, q, mu, bias, hold, r, lam, dq)
            nwarm = 0  # the multipliers are checked once
            if new == 0:
                return True
    return True


@njit(cache=True, **NO_RC)
def _release(J, e, soft, hard, lims, lo, hi, q, mu, bias, hold, r, lam, dq):
    """Release the warm-held joints (held, at a bound of q) whose multiplier has the wrong sign
    (see _active_step; lam: the hard rows' multipliers from core_step, r: scratch for the soft
    residuals). Returns how many."""
    dof = q.shape[0]
    for i in range(soft.shape[0]):  # r_i = J_i dq - e_i over the soft rows
        row = soft[i]
        t = -e[row]
        for c in range(dof):
            t += J[row, c] * dq[c]
        r[i] = t
    released = 0
    for k in range(dof):
        if hold[k] != hold[k]:
            continue
        low = q[k] <= lo[k] + AT_BOUND
        if not (low or q[k] >= hi[k] - AT_BOUND):
            continue  # held by this step's own passes, not warm
        hkk = mu * lims[L_JW, k]
        nu = hkk * (dq[k] - bias[k])
        for i in range(soft.shape[0]):
            v = J[soft[i], k]
            nu += v * r[i]
            hkk += v * v
        for i in range(hard.shape[0]):
            nu += J[hard[i], k] * lam[i]
        # nu / H_kk: how far the joint alone would move inside; at a settled bound the multiplier
        # is round-off around 0 (+-5e-11 on G1's crouch), and releasing it bought a third solve
        if _moves_inside(nu, low, hkk):
            hold[k] = np.nan
            released += 1
    return released


@njit(cache=True, **NO_RC)
def _moves_inside(nu, low, hkk):
    """The release test of a joint held at its bound (lower if ``low``) with multiplier nu and
    curvature hkk: the step, solved with it free, would move it inside by more than RELEASE_STEP
    (_release, _reduced_step)."""
    return ((nu < 0.0) if low else (nu > 0.0)) and abs(nu) > RELEASE_STEP * hkk


@njit(cache=True, **NO_RC)
def _costs(e, soft, hard):
    cs = 0.0
    for i in range(soft.shape[0]):
        cs += e[soft[i]] * e[soft[i]]
    ch = 0.0
    for i in range(hard.shape[0]):
        ch += e[hard[i]] * e[hard[i]]
    return cs, ch


@njit(cache=True, **NO_RC)
def _correct_trial(J, e, rows, lims, lo, hi, qn, zero, hold, H, Jm, Z, S, r, lam, col, dqc, qc):
    """One second-order correction of the trial point qn (in place): the least-norm step of
    ``rows`` alone (J, e evaluated at qn) within the joint box; qc keeps the trial before it.
    False when that step cannot be solved (qn unchanged). core_iterate's hard rows after a long
    soft step, settle's goal rows after a posture step."""
    if not core_active_step(J, e, rows[:0], rows, lims, lo, hi, qn, 1.0, 1e-12, zero, hold, H, Jm, Z, S, r, lam, col,
                            dqc):
        return False
    for i in range(qn.shape[0]):
        qc[i] = qn[i]
    _step_into(qc, dqc, lims, lo, hi, qn)
    return True


@njit(cache=True, **NO_RC)
def _step_into(q, dq, lims, lo, hi, out):
    """out = clamp(q ⊕ dq) into lo, hi (ball joints composed on SO(3))."""
    n = q.shape[0]
    for i in range(n):
        out[i] = q[i] + dq[i]
    for s in range(n):
        if lims[L_BALL, s] != 0.0:
            out[s], out[s + 1], out[s + 2] = rotvec_product(q[s], q[s + 1], q[s + 2], dq[s], dq[s + 1], dq[s + 2],
                                                            bool(0))
    for i in range(n):
        if out[i] < lo[i]:
            out[i] = lo[i]
        elif out[i] > hi[i]:
            out[i] = hi[i]


step_into = _step_into  # public name for kernels outside solvers/ (solvers.shared)


@njit(cache=True, **NO_RC)
def workspace_shapes(n, dof, G, nhard, nrows):
    """The shape of every array of the general core's scratch, in core_workspace's order (Tall, Jf,
    Jr, sub, e, J, e2, J2, errs, errs2, wvec, wR, H, Jm, Z, S, r, lam, col, dq, qn, hold, bias, zero,
    dqc, qc, hardx, rw2, rowsx, ballx; the WS_INT ones int64) for n nodes, dof, G goal rows, nhard
    hard rows and nrows collision rows: the one table that core_workspace allocates,
    core_scratch_size sizes and _carve_workspace views."""
    m = 3 * G + nrows
    mh = max(m, nhard, 1)
    L = mh + 1 + dof  # core_step_scratch's Z and S
    return ((n, 4, 4), (6, dof), (6, dof), (n, 4), (m,), (m, dof), (m,), (m, dof), (7,), (7,), (G, 3), (G, 3, 3),
            (dof, dof), (m, dof), (dof, L), (2 * L, L), (m,), (mh,), (mh + dof,), (dof,), (dof,), (dof,), (dof,),
            (dof,), (dof,), (dof,), (max(m, nhard + nrows, 1),), (G,), (m,), (dof,))


WS_INT = (26, 28, 29)  # workspace_shapes' int64 arrays: hardx, rowsx, ballx


@njit(cache=True, **NO_RC)
def head_shapes(dof, G):
    """The shapes of what core_attempts_packed keeps at the start of its scratch, before the
    workspace, in its order: the state, q, the rows' errors, q0 clamped, the goal columns (gvec,
    gR, gaxis, gw) and q_rest; packed_state reads the first three back."""
    return ((CORE_STATE,), (dof,), (G,), (dof,), (G, 3), (G, 3, 3), (G, 3), (G,), (dof,))


@njit(cache=True, **NO_RC)
def _size(shape):
    """The number of entries of an array of ``shape``."""
    k = 1
    for d in shape:
        k *= d
    return k


@njit(cache=True, **NO_RC)
def _take(buf, o, shape):
    """(the view of buf from o on with ``shape``, the offset after it): how core_attempts_packed and
    _carve_workspace cut their scratch."""
    k = _size(shape)
    return buf[o:o + k].reshape(shape), o + k


@njit(cache=True)
def core_workspace(n, dof, gvec, gR, nhard, nrows):
    """Scratch of the general core (its arrays: workspace_shapes): hardx holds the hard rows and the
    collision rows a step adds, rw2 the row errors at a trial point, rowsx and ballx settle's goal
    rows and ball joints (the core allocates nothing past this); room for every row as a
    constraint (settle), and for nrows collision rows after the 3G goal rows (errs: 4 goal errors,
    then the collision slots of collision/rows.py). e, J, e2, J2, errs, errs2 and zero start zeroed,
    wvec and wR as copies of gvec and gR."""
    s = workspace_shapes(n, dof, gvec.shape[0], nhard, nrows)
    return (np.empty(s[0]), np.empty(s[1]), np.empty(s[2]), np.empty(s[3]), np.zeros(s[4]), np.zeros(s[5]),
            np.zeros(s[6]), np.zeros(s[7]), np.zeros(s[8]), np.zeros(s[9]), gvec.copy(), gR.copy(), np.empty(s[12]),
            np.empty(s[13]), np.empty(s[14]), np.empty(s[15]), np.empty(s[16]), np.empty(s[17]), np.empty(s[18]),
            np.empty(s[19]), np.empty(s[20]), np.empty(s[21]), np.empty(s[22]), np.zeros(s[23]), np.empty(s[24]),
            np.empty(s[25]), np.empty(s[26], np.int64), np.empty(s[27]), np.empty(s[28], np.int64),
            np.empty(s[29], np.int64))


@njit(cache=True, **NO_RC)
def _ineq_step(J, e, soft, hard, hardx, m0, k, lims, lo, hi, q, mu, mu_h, bias, hold, H, Jm, Z, S, r, lam, col, dq,
               warm):
    """core_active_step, then again with the collision rows (m0 … m0 + k − 1) the step would leave
    below their target as hard rows (collision/rows.py: active_rows), up to INEQ_PASSES times.
    The hook of the inequality rows: without collision rows (k = 0) it is core_active_step."""
    ok = _active_step(J, e, soft, hard, lims, lo, hi, q, mu, mu_h, bias, hold, H, Jm, Z, S, r, lam, col, dq, warm)
    if k == 0 or not ok:
        return ok
    n = hard.shape[0]
    for i in range(n):
        hardx[i] = hard[i]
    for _ in range(INEQ_PASSES):
        n2 = active_rows(J, e, m0, k, dq, hardx, n)
        if n2 == n:
            break
        n = n2
        if not _active_step(J, e, soft, hardx[:n], lims, lo, hi, q, mu, max(mu_h, MU_INEQ), bias, hold, H, Jm, Z,
                            S, r, lam, col, dq, warm):
            return False
    return True


@njit(cache=True, **NO_RC)
def _limb_walk(ni, node, b, own):
    """The columns of node's joint and its ancestors' (those a goal on node moves; jacobian_from_all
    writes no other): with b >= 0 marked own[c] = b (-2 where another block marked it); with b < 0
    only looked at. True if one of them is private to a block (own >= 0) when looked at."""
    i = node
    while i >= 0:
        jt = ni[i, 1]
        if jt != FIXED:
            c = ni[i, 2]
            for a in range(3 if jt == BALL else 1):
                o = own[c + a]
                if b < 0:
                    if o >= 0:
                        return True
                else:
                    own[c + a] = b if o == -1 or o == b else -2
        i = ni[i, 0]
    return False


@njit(cache=True, **NO_RC)
def limb_partition(ni, gnode, gkind, gref, hard, soft, blk, own):
    """The split of the joints that _reduced_step eliminates, from the tree (once per core_iterate
    call): blk[:mh] = each hard row's goal node (a block: a foot), own (dof) = each joint's position
    among the joints R that stay in the step, or -3 - node for a joint private to the block of node
    (it moves that block's rows and no other hard or soft row: a leg). Returns (mh, part) with part
    = (nr, b0, b1, p0, p1) (_limb_positions), or 0 where nothing is eliminated: no soft rows, a
    CenterOfMass or Relative hard row (it moves with several limbs), one node's rows apart in
    ``hard``, a soft row on a private joint (a soft CenterOfMass), a block with fewer private
    joints than rows."""
    none = (0, 0, 0, 0, 0)
    mh = hard.shape[0]
    if soft.shape[0] == 0 or mh == 0:
        return 0, none
    for k in range(own.shape[0]):
        own[k] = -1
    for i in range(mh):
        g = hard[i] // 3
        if gkind[g] > KIND_AIM or gkind[g] < 0:  # (CenterOfMass, Relative, Plane: not eliminated)
            return 0, none
        blk[i] = gnode[g]
        if i == 0 or blk[i] != blk[i - 1]:
            for j in range(i - 1):
                if blk[j] == blk[i]:
                    return 0, none
            _limb_walk(ni, blk[i], blk[i], own)
    last = -1
    for i in range(soft.shape[0]):
        g = soft[i] // 3
        if g == last:
            continue
        last = g
        if gkind[g] == KIND_COM:
            for k in range(own.shape[0]):
                if own[k] >= 0:
                    return 0, none
        elif _limb_walk(ni, gnode[g], -1, own) or (gref[g] >= 0 and _limb_walk(ni, gref[g], -1, own)):
            return 0, none
    ok, part = _limb_positions(own, blk[:mh])
    return (mh if ok else 0), part


@njit(cache=True, **NO_RC)
def _limb_positions(own, blk):
    """own from block marks (a block's node for the joints only it moves, -2 for several, -1 for
    none) to _reduced_step's encoding: R's positions in joint order, -3 - node for the private
    joints. Returns (ok, (nr, b0, b1, p0, p1)): R's size, the joints b0:b1 that hold every joint
    that several blocks move (the floating base, the trunk) and their positions p0:p1 in R; ok is
    False where a block has fewer private joints than rows."""
    mh = blk.shape[0]
    i0 = 0
    while i0 < mh:
        i1 = i0 + 1
        while i1 < mh and blk[i1] == blk[i0]:
            i1 += 1
        p = 0
        for k in range(own.shape[0]):
            if own[k] == blk[i0]:
                p += 1
        if p < i1 - i0:
            return False, (0, 0, 0, 0, 0)
        i0 = i1
    dof = own.shape[0]
    b0 = dof
    b1 = 0
    p0 = 0
    p1 = 0
    nr = 0
    for k in range(dof):
        o = own[k]
        if o >= 0:
            own[k] = -3 - o
            continue
        if o == -2:
            if b0 == dof:
                b0 = k
                p0 = nr
            b1 = k + 1
            p1 = nr + 1
        own[k] = nr
        nr += 1
    return True, (nr, b0, b1, p0, p1)


@njit(cache=True, fastmath=FAST, **NO_RC)
def _reduced_factor(J, e, soft, hard, blk, own, part, lrow, jw, mu, mu_h, H, Jm, S, c, col, dq):
    """The step of core_step (no bias, no joint held) with every hard block's private joints
    eliminated, and the factors _reduced_apply reuses; False where they cannot be (the caller then
    takes the general step, unchanged).

    The split is limb_partition's (from the tree, once per core_iterate call): block f, the hard
    rows of one goal node (blk: a foot); its private joints L_f, which move rows of f and no other
    row (the leg); B, the joints several blocks move (the floating base, the trunk); R, every joint
    not private, in own's positions (part = (nr, b0, b1, p0, p1)). The step's problem (see the top:
    its minimiser is the Schur step's)

        min |J_s dq - e_s|^2 + mu |dq|_W^2 + |A dq - b|^2 / mu_h

    is minimised over each dq_Lf in closed form: with r_f = b_f - A_f,B dq_B,
    mu |dq_Lf|^2_W + |A_f,Lf dq_Lf - r_f|^2 / mu_h has the minimum r_f^T G_f^-1 r_f,
    G_f = A_f,Lf (mu W_Lf)^-1 A_f,Lf^T + mu_h I (n_f x n_f), at dq_Lf = (mu W_Lf)^-1 A_f,Lf^T G_f^-1 r_f,
    and what is left is a damped step over R alone, without constraints:

        (J_s,R^T J_s,R + mu W_R + sum_f A_f,B^T G_f^-1 A_f,B) dq_R = J_s,R^T e_s + sum_f A_f,B^T G_f^-1 b_f,

    over R's joints in their order (G1: 23 of 35), factored by _udu_factor (A_f,B^T G_f^-1 A_f,B
    couples only B, ancestors of everything below: the tree's sparsity stays). No Schur complement
    over all the hard rows, no factorisation over the legs: G_f is a foot's 6 x 6. The same step
    as core_step's in exact arithmetic (tests/test_limb_elimination.py compares it with the KKT
    system solved by NumPy). G_f is factored as H' is (_udu_factor); a pivot below ELIM_PIVOT x
    its largest diagonal entry (a limb at a singularity: a straight knee) gives False.

    Scratch: lrow (int, mh: a block's row count at its first row), Jm (rows :mh: Y_f = G_f^-1
    A_f,B on p0:p1; rows mh:: J_s,R), S (rows L + i: G_f's factor; row dof: mu W_R), H (H' and
    its factor), c (mh: G_f^-1 b_f), col (G_f^-1 r_f)."""
    dof = J.shape[1]
    mh = hard.shape[0]
    ms = soft.shape[0]
    L = S.shape[1]
    nr, b0, b1, p0, p1 = part
    pw = S[dof]
    for k in range(dof):
        p = own[k]
        if p >= 0:
            pw[p] = mu * jw[k]
    for s in range(ms):  # J_s,R
        row = soft[s]
        Js = Jm[mh + s]
        for k in range(dof):
            p = own[k]
            if p >= 0:
                Js[p] = J[row, k]
    i0 = 0
    while i0 < mh:  # each block: G = A_L (mu W_L)^-1 A_L^T + mu_h I = U D U^T, Y = G^-1 A_B, c = G^-1 b
        b = -3 - blk[i0]
        i1 = i0 + 1
        while i1 < mh and blk[i1] == blk[i0]:
            i1 += 1
        n = i1 - i0
        lrow[i0] = n
        G = S[L + i0:]
        for j in range(n):
            for t in range(j + 1):
                G[j, t] = 0.0
        p = 0
        for k in range(dof):
            if own[k] == b:
                p += 1
                wk = 1.0 / (mu * jw[k])
                for j in range(n):
                    v = J[hard[i0 + j], k] * wk
                    if v != 0.0:
                        for t in range(j + 1):
                            G[j, t] += v * J[hard[i0 + t], k]
        if p < n:
            return False
        gmax = 0.0
        for j in range(n):
            gmax = max(gmax, G[j, j])
            G[j, j] += mu_h
        if not _udu_factor(G, n):  # G = U D U^T (the same factor as H's)
            return False
        for j in range(n):
            if not G[j, j] > ELIM_PIVOT * gmax:
                return False
        for j in range(n):  # Y = G^-1 [A_B b] by rows (R positions p0:p1): U^-1, then U^-T D^-1
            Aj = J[hard[i0 + j]]
            Yj = Jm[i0 + j]
            for k in range(b0, b1):
                p = own[k]
                if p >= 0:
                    Yj[p] = Aj[k]
            c[i0 + j] = e[hard[i0 + j]]
        for u in range(n - 1, 0, -1):
            Yu = Jm[i0 + u]
            cu = c[i0 + u]
            for j in range(u):
                f = G[u, j]
                if f != 0.0:
                    Yj = Jm[i0 + j]
                    c[i0 + j] -= f * cu
                    for p in range(p0, p1):
                        Yj[p] -= f * Yu[p]
        for j in range(n):
            Yj = Jm[i0 + j]
            d = 1.0 / G[j, j]
            t = c[i0 + j] * d
            for p in range(p0, p1):
                Yj[p] *= d
            for u in range(j):
                f = G[j, u]
                if f != 0.0:
                    Yu = Jm[i0 + u]
                    t -= f * c[i0 + u]
                    for p in range(p0, p1):
                        Yj[p] -= f * Yu[p]
            c[i0 + j] = t
        i0 = i1
    for a in range(nr):  # H' = J_s,R^T J_s,R + mu W_R + sum_f A_f,B^T G_f^-1 A_f,B (lower triangle), g' in dq
        for u in range(a + 1):
            H[a, u] = 0.0
        dq[a] = 0.0
    s = 0
    while s + 2 < ms:  # three rows a pass: H' is read and written a third as often (G1: 0.2 us a step)
        J0 = Jm[mh + s]
        J1 = Jm[mh + s + 1]
        J2 = Jm[mh + s + 2]
        t0 = e[soft[s]]
        t1 = e[soft[s + 1]]
        t2 = e[soft[s + 2]]
        for a in range(nr):
            v0 = J0[a]
            v1 = J1[a]
            v2 = J2[a]
            if v0 != 0.0 or v1 != 0.0 or v2 != 0.0:
                dq[a] += v0 * t0 + v1 * t1 + v2 * t2
                Ha = H[a]
                for u in range(a + 1):
                    Ha[u] += v0 * J0[u] + v1 * J1[u] + v2 * J2[u]
        s += 3
    while s < ms:
        Js = Jm[mh + s]
        t = e[soft[s]]
        for a in range(nr):
            v = Js[a]
            if v != 0.0:
                dq[a] += v * t
                for u in range(a + 1):
                    H[a, u] += v * Js[u]
        s += 1
    for i in range(mh):  # A_B^T (G^-1 A_B) and A_B^T G^-1 b: A's row times its block's row of Y
        Ai = J[hard[i]]
        Yi = Jm[i]
        ci = c[i]
        for k in range(b0, b1):
            a = own[k]
            v = Ai[k]
            if a >= 0 and v != 0.0:
                dq[a] += v * ci
                for u in range(p0, a + 1):
                    H[a, u] += v * Yi[u]
    for a in range(nr):
        H[a, a] += pw[a]
    if not _udu_factor(H, nr):
        return False
    for p in range(nr - 1, 0, -1):  # dq = U^-T D^-1 U^-1 g'
        x = dq[p]
        if x != 0.0:
            for j in range(p):
                dq[j] -= H[p, j] * x
    _udu_finish(H, nr, dq, dq)
    for k in range(dof - 1, -1, -1):  # R's steps to their joints (p <= k: in place, last first)
        p = own[k]
        if p >= 0:
            dq[k] = dq[p]
        else:
            dq[k] = 0.0
    i0 = 0
    while i0 < mh:  # the private joints: dq_L = (mu W_L)^-1 A_L^T G^-1 (b - A_B dq_B)
        n = lrow[i0]
        G = S[L + i0:]
        z = col[:n]
        for j in range(n):
            Aj = J[hard[i0 + j]]
            t = e[hard[i0 + j]]
            for k in range(b0, b1):
                if own[k] >= 0:
                    t -= Aj[k] * dq[k]
            z[j] = t
        for u in range(n - 1, 0, -1):  # z = G^-1 z (G's factor: U^-1, then U^-T D^-1)
            for j in range(u):
                z[j] -= G[u, j] * z[u]
        _udu_finish(G, n, z, z)
        b = -3 - blk[i0]
        for k in range(dof):
            if own[k] == b:
                t = 0.0
                for j in range(n):
                    t += J[hard[i0 + j], k] * z[j]
                t /= mu * jw[k]
                dq[k] = t
        i0 += n
    return True


@njit(cache=True, fastmath=FAST, **NO_RC)
def _reduced_apply(J, hard, blk, own, part, lrow, jw, mu, H, Jm, S, v, z, out):
    """out = K^-1 v for the step's matrix K = J_s^T J_s + mu W + A^T A / mu_h (dof) from
    _reduced_factor's factors, the same elimination with v in place of the gradient: per block
    w_f = G_f^-1 A_f,L (mu W_L)^-1 v_L; H' x_R = v_R - sum_f A_f,B^T w_f; lam_f = Y_f x_B + w_f;
    x_Lf = (mu W_L)^-1 (v_L - A_f,L^T lam_f). A held joint's column K^-1 e_k costs this instead of a
    new factorisation (_reduced_step). z: scratch (mh)."""
    dof = J.shape[1]
    mh = hard.shape[0]
    L = S.shape[1]
    nr, b0, b1, p0, p1 = part
    i0 = 0
    while i0 < mh:  # w_f
        n = lrow[i0]
        b = -3 - blk[i0]
        G = S[L + i0:]
        for j in range(n):
            Aj = J[hard[i0 + j]]
            t = 0.0
            for k in range(dof):
                if own[k] == b and v[k] != 0.0:
                    t += Aj[k] * v[k] / (mu * jw[k])
            z[i0 + j] = t
        w = z[i0:i0 + n]
        for u in range(n - 1, 0, -1):
            for j in range(u):
                w[j] -= G[u, j] * w[u]
        _udu_finish(G, n, w, w)
        i0 += n
    for k in range(dof):
        p = own[k]
        if p >= 0:
            out[p] = v[k]
    for i in range(mh):
        Ai = J[hard[i]]
        wi = z[i]
        if wi != 0.0:
            for k in range(b0, b1):
                a = own[k]
                if a >= 0:
                    out[a] -= Ai[k] * wi
    _udu_solve(H, nr, out)
    for k in range(dof - 1, -1, -1):  # R's entries to their joints (p <= k: in place, last first)
        p = own[k]
        out[k] = out[p] if p >= 0 else 0.0
    i0 = 0
    while i0 < mh:  # lam_f = Y_f x_B + w_f, then the private joints
        n = lrow[i0]
        b = -3 - blk[i0]
        for j in range(n):
            Yj = Jm[i0 + j]
            t = z[i0 + j]
            for k in range(b0, b1):
                p = own[k]
                if p >= 0:
                    t += Yj[p] * out[k]
            z[i0 + j] = t
        for k in range(dof):
            if own[k] == b:
                t = v[k]
                for j in range(n):
                    t -= J[hard[i0 + j], k] * z[i0 + j]
                out[k] = t / (mu * jw[k])
        i0 += n


@njit(cache=True, fastmath=FAST, **NO_RC)
def _udu_solve(H, n, x):
    """x = H^-1 x in place from _udu_factor's factor (U^-1, then U^-T D^-1); zero entries cost one test."""
    for p in range(n - 1, 0, -1):
        v = x[p]
        if v != 0.0:
            for j in range(p):
                x[j] -= H[p, j] * v
    _udu_finish(H, n, x, x)


@njit(cache=True, **NO_RC)
def _reduced_step(J, e, soft, hard, blk, own, part, lrow, lims, lo, hi, q, mu, mu_h, hold, H, Jm, Z, S, c, col, dq,
                  x):
    """core_active_step (warm, no bias) with every hard block's private joints eliminated
    (_reduced_factor), or False where they cannot be (the caller then takes the general step,
    _active_step, unchanged). The active set is _active_step's, pass for pass: the joints at a
    bound of q start held there, a joint a pass would push past a bound is held at it (up to
    ACTIVE_SET_PASSES passes), and once none leaves the box the warm-held joints whose multiplier
    says they would move back inside are released (_release's rule) and the step re-solved.

    The held joints are equality rows e_k^T dq = hold[k] on the factored step, as _held_solve
    does on H: with dq0 the free step and X = K^-1 E^T (a column per held joint, _reduced_apply:
    the factors are not redone), (E X) nu = E dq0 - h and dq = dq0 - X nu; nu_k is minus the
    joint's multiplier (K dq - g = -E^T nu), which decides the release. A crouch holds leg joints
    (G1: both ankle rolls at their ±0.26 rad bounds); a foot's block keeps its six leg joints in
    its factor, so nothing in it degenerates. Before, any joint at a bound gave False and the
    general step (G1's crouch: 4 of its 5 steps; a step 7-15 µs there against 5-9 µs here under
    the same load). With FREE_SOLVE_HELD joints held or more (and a quarter of them: a box of
    max_joint_step) a column each costs more than _active_step's _free_solve: False; so does a
    pivot of E X below HOLD_PIVOT x its largest (held joints and feet that pin the base).

    Scratch: Z[:, k] = K^-1 e_k for a held joint k (Z[k, L - 1]: computed), S[:nh] E X and its
    factor, col[:dof] dq0, col[dof:] _reduced_apply's, x (dof) a column and then nu."""
    dof = q.shape[0]
    jw = lims[L_JW]
    L = Z.shape[1]
    nwarm = _hold_at_bounds(q, lo, hi, hold, bool(1))
    for k in range(dof):
        Z[k, L - 1] = 0.0
    if nwarm >= FREE_SOLVE_HELD and 4 * nwarm >= dof:
        return False  # many joints held (a box of max_joint_step): _active_step's _free_solve is cheaper
    if not _reduced_factor(J, e, soft, hard, blk, own, part, lrow, jw, mu, mu_h, H, Jm, S, c, col, dq):
        return False
    if nwarm == 0:
        new = _hold_outside(q, dq, lo, hi, hold)
        if new == 0:
            return True
    dq0 = col[:dof]
    for k in range(dof):
        dq0[k] = dq[k]
    z = col[dof:]
    for _ in range(ACTIVE_SET_PASSES):
        nh = 0
        for k in range(dof):
            if hold[k] == hold[k]:
                nh += 1
        if nh >= FREE_SOLVE_HELD and 4 * nh >= dof:
            return False
        for k in range(dof):
            if hold[k] == hold[k]:
                if Z[k, L - 1] == 0.0:
                    for i in range(dof):
                        x[i] = 0.0
                    x[k] = 1.0
                    _reduced_apply(J, hard, blk, own, part, lrow, jw, mu, H, Jm, S, x, z, dq)
                    for i in range(dof):
                        Z[i, k] = dq[i]
                    Z[k, L - 1] = 1.0
        M = S
        i = 0
        for k in range(dof):  # E X (lower triangle) and E dq0 - h
            if hold[k] == hold[k]:
                j = 0
                for u in range(k + 1):
                    if hold[u] == hold[u]:
                        M[i, j] = Z[k, u]
                        j += 1
                x[i] = dq0[k] - hold[k]
                i += 1
        dmax = 0.0
        for i in range(nh):
            dmax = max(dmax, M[i, i])
        if not _udu_factor(M, nh):
            return False
        for i in range(nh):  # held joints the hard rows pin together (more rows on B than its joints): the general step
            if not M[i, i] > HOLD_PIVOT * dmax:
                return False
        _udu_solve(M, nh, x)
        for i in range(dof):
            dq[i] = dq0[i]
        i = 0
        for k in range(dof):
            if hold[k] == hold[k]:
                f = x[i]
                if f != 0.0:
                    for u in range(dof):
                        dq[u] -= Z[u, k] * f
                i += 1
        for k in range(dof):
            if hold[k] == hold[k]:
                dq[k] = hold[k]
        new = _hold_outside(q, dq, lo, hi, hold)
        if new == 0:
            if nwarm == 0:
                return True
            new = 0
            i = 0
            for k in range(dof):  # release: the multiplier -nu_k over the joint's own curvature
                if hold[k] != hold[k]:
                    continue
                nu = -x[i]
                i += 1
                low = q[k] <= lo[k] + AT_BOUND
                if not (low or q[k] >= hi[k] - AT_BOUND):
                    continue  # held by this step's own passes, not warm
                hkk = mu * jw[k]
                for s in range(soft.shape[0]):
                    v = J[soft[s], k]
                    hkk += v * v
                if _moves_inside(nu, low, hkk):
                    hold[k] = np.nan
                    new += 1
            nwarm = 0  # the multipliers are checked once
            if new == 0:
                return True
    return True


@njit(cache=True, **NO_RC)
def _hold_at_bounds(q, lo, hi, hold, warm):
    """hold = NaN (free), or with ``warm`` the joints at a bound of q held there (the warm active
    set of _active_step and _reduced_step); returns how many are held."""
    nwarm = 0
    for k in range(q.shape[0]):
        hold[k] = np.nan
        if warm:
            if q[k] <= lo[k] + AT_BOUND:
                hold[k] = lo[k] - q[k]
                nwarm += 1
            elif q[k] >= hi[k] - AT_BOUND:
                hold[k] = hi[k] - q[k]
                nwarm += 1
    return nwarm


@njit(cache=True, **NO_RC)
def _hold_outside(q, dq, lo, hi, hold):
    """Hold the free joints that q + dq puts past a bound (at it); returns how many (a pass of
    _active_step's and _reduced_step's active set)."""
    new = 0
    for k in range(q.shape[0]):
        if hold[k] != hold[k]:
            v = q[k] + dq[k]
            if v < lo[k]:
                hold[k] = lo[k] - q[k]
                new += 1
            elif v > hi[k]:
                hold[k] = hi[k] - q[k]
                new += 1
    return new


@njit(cache=True, **NO_RC)
def _hard_key(errs, tol_p, tol_r):
    return max(errs[2] / tol_p, errs[3] / tol_r)


@njit(cache=True)
def core_iterate(model, table, lims, lo, hi, tol_p, tol_r, q, max_iter, state, ws, rowq):
    """Up to max_iter constrained LM iterations on q (in place) for one attempt; the state and
    return codes of lm_chain_iterate_ws (RUNNING, CONVERGED, STALLED). rowq (G,) receives each
    goal row's error at the returned q (no evaluation more: kept from the evaluations)."""
    ni, nf, origin, mass, com, coll = model
    gnode, gkind, gref, glevel, gvec, gR, gaxis, gw, soft, hard = table
    Tall, Jf, Jr, sub, e, J, e2, J2, errs, errs2, wvec, wR, H, Jm, Z, S, r, lam_h, col, dq, qn, hold, bias, zero, \
        dqc, qc, hardx, rw2, rowsx, ballx = ws
    dof = q.shape[0]
    lam = state[S_LAMBDA] if state[S_LAMBDA] > 0.0 else (
        MIXED_LAMBDA_INIT if soft.shape[0] > 0 and hard.shape[0] > 0 else CHAIN_LAMBDA_INIT)
    # with hard goals an attempt minimises the soft goals to the end (they may be out of reach)
    progress_test = not (state[S_MINIMIZE] > 0.5) and hard.shape[0] == 0
    # (not with S_HOLD_ALWAYS: a Tracker's update of a few bounded iterations may end before they
    # are back; on G1 with a hand out of reach, feet 2-11 cm off after 2-10 iterations, 1.9e-6 m at 20)
    relax = soft.shape[0] > 0 and hard.shape[0] > 0 and not (state[S_HOLD_ALWAYS] > 0.5)
    # the active set starts from the joints at a bound with hard rows only: a soft problem takes
    # the chain kernel's iterates (its cold active set; warm, Panda took 12 iterations for 9)
    warm = hard.shape[0] > 0
    m0 = 3 * gvec.shape[0]
    # the hard blocks and private limbs _reduced_step eliminates (rowsx, ballx: settle's scratch, free here)
    nelim, part = limb_partition(ni, gnode, gkind, gref, hard, soft, rowsx, ballx)
    blk = rowsx[:nelim]
    rw = rowq  # row errors at q, then at the trial point (swapped with e, e2)
    swapped = False
    core_eval_rows(ni, nf, origin, mass, com, q, gnode, gkind, gref, glevel, gvec, gR, gaxis, gw, wvec, wR, Tall, Jf,
                   Jr, sub, e, J, errs, bool(1), rw)
    ineq_eval(coll, ni, nf, Tall, m0, e, J, errs)
    cs, ch = _costs(e, soft, hard)
    code = RUNNING
    it = 0
    small = 0
    window = cs + ch if progress_test else cs
    while it < max_iter:
        if errs[0] <= tol_p and errs[1] <= tol_r and errs[E_VIOL] == 0.0:
            code = CONVERGED
            break
        it += 1
        mu = lam * 0.5 * (cs + ch) + EPS_DAMP
        mu_h = (lam * 0.5 * ch + EPS_HARD) / mu
        nrows = int(errs[E_ROWS])
        if not (nelim > 0 and nrows == 0
                and _reduced_step(J, e, soft, hard, blk, ballx, part, hardx, lims, lo, hi, q, mu, mu_h, hold, H, Jm,
                                  Z, S, lam_h, col, dq, dqc)) \
                and not _ineq_step(J, e, soft, hard, hardx, m0, nrows, lims, lo, hi, q, mu, mu_h, zero, hold, H, Jm, Z,
                                   S, r, lam_h, col, dq, warm):
            lam *= 10.0
            if lam > LAMBDA_MAX:
                code = STALLED
                break
            continue
        _step_into(q, dq, lims, lo, hi, qn)
        core_eval_rows(ni, nf, origin, mass, com, qn, gnode, gkind, gref, glevel, gvec, gR, gaxis, gw, wvec, wR, Tall,
                       Jf, Jr, sub, e2, J2, errs2, bool(1), rw2)
        ineq_eval(coll, ni, nf, Tall, m0, e2, J2, errs2)
        hk = _hard_key(errs, tol_p, tol_r)
        # the first RELAX_ITERATIONS of an attempt with soft and hard rows do not hold the hard goals
        # (their rows in the step bring them back to first order); see the comment at the top
        held = np.inf if relax and state[S_ATTEMPT_ITERS] + it <= RELAX_ITERATIONS else HARD_HOLD
        for _ in range(SOC_PASSES):
            # second-order correction: a long soft step bends the hard goals off by its square;
            # project the trial back onto them (hard rows only, least norm) before judging it
            if hk > held or _hard_key(errs2, tol_p, tol_r) <= held:
                break
            if not _correct_trial(J2, e2, hard, lims, lo, hi, qn, zero, hold, H, Jm, Z, S, r, lam_h, col, dqc, qc):
                break
            core_eval_rows(ni, nf, origin, mass, com, qn, gnode, gkind, gref, glevel, gvec, gR, gaxis, gw, wvec, wR,
                           Tall, Jf, Jr, sub, e2, J2, errs2, bool(1), rw2)
            ineq_eval(coll, ni, nf, Tall, m0, e2, J2, errs2)
        cs2, ch2 = _costs(e2, soft, hard)
        if it % CORE_PROGRESS_WINDOW == 0:
            # no attempt: cut when it does not halve its cost (restart); with hard goals: end the
            # minimisation when the soft cost no longer falls by SOFT_PROGRESS over the window, once
            # the hard goals are held again (G1, hard feet, a hand out of reach under max_joint_step=1:
            # attempts ended with the feet 1.2e-6 and 4.8e-6 m off)
            if progress_test and cs + ch > PROGRESS_FACTOR * window and (errs[0] > NEAR * tol_p
                                                                         or errs[1] > NEAR * tol_r):
                code = STALLED
                break
            if not progress_test and hard.shape[0] > 0 and cs > (1.0 - SOFT_PROGRESS) * window and hk <= held:
                code = STALLED
                break
            window = cs + ch if progress_test else cs
        if errs[E_VIOL] > 0.0:  # closer than the margin: get out first
            ok = errs2[E_VIOL] < errs[E_VIOL]
            before = errs[E_VIOL]
            after = errs2[E_VIOL]
        elif hk > held:
            ok = ch2 < ch and errs2[E_VIOL] == 0.0
            before = ch + cs
            after = ch2 + cs2
        else:
            ok = _hard_key(errs2, tol_p, tol_r) <= held and cs2 < cs and errs2[E_VIOL] == 0.0
            before = cs
            after = cs2
        if ok:
            for i in range(dof):
                q[i] = qn[i]
            e, e2 = e2, e
            J, J2 = J2, J
            errs, errs2 = errs2, errs
            rw, rw2 = rw2, rw
            swapped = not swapped
            cs = cs2
            ch = ch2
        lam, small, stop = lm_accept(ok, before, after, lam, small)
        if stop:
            code = STALLED
            break
    if code == RUNNING and errs[0] <= tol_p and errs[1] <= tol_r and errs[E_VIOL] == 0.0:
        code = CONVERGED
    if swapped:
        for g in range(rowq.shape[0]):
            rowq[g] = rw[g]
    state[S_LAMBDA] = lam
    state[S_ITERS] += it
    state[S_PERR] = errs[0]
    state[S_RERR] = errs[1]
    # an attempt that ends closer than the margin ranks below every collision-free one
    state[S_HARD] = _hard_key(errs, tol_p, tol_r) + (1e6 if errs[E_VIOL] > 0.0 else 0.0)
    return code


@njit(cache=True)
def settle(model, table, lims, lo, hi, q_rest, tol_p, tol_r, q, max_iter, ws):
    """Posture as a regulariser: from q where every goal is met, move toward q_rest inside the
    null space of the goals (every goal row a constraint, the damping pulling toward
    q_rest ⊖ q), accepting a step only while every goal stays within tolerance and the distance
    to q_rest falls; the gain halves after a refused step. Returns the iterations used."""
    ni, nf, origin, mass, com, coll = model
    gnode, gkind, gref, glevel, gvec, gR, gaxis, gw, soft, hard = table
    Tall, Jf, Jr, sub, e, J, e2, J2, errs, errs2, wvec, wR, H, Jm, Z, S, r, lam_h, col, dq, qn, hold, bias, zero, \
        dqc, qc, hardx, rw2, rowsx, ballx = ws
    dof = q.shape[0]
    m0 = 3 * gvec.shape[0]
    for i in range(m0):
        rowsx[i] = i
    allrows = rowsx[:m0]  # the goal rows; collision rows join a step when it would violate them
    none = allrows[:0]
    balls = ballx[:_balls_into(lims, ballx)]
    core_eval(ni, nf, origin, mass, com, q, gnode, gkind, gref, glevel, gvec, gR, gaxis, gw, wvec, wR, Tall, Jf, Jr,
              sub, e, J, errs, bool(1))
    ineq_eval(coll, ni, nf, Tall, m0, e, J, errs)
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
        if not _ineq_step(J, e, none, allrows, hardx, m0, int(errs[E_ROWS]), lims, lo, hi, q, 1.0, 1e-10, bias,
                          hold, H, Jm, Z, S, r, lam_h, col, dq, bool(0)):
            break
        _step_into(q, dq, lims, lo, hi, qn)
        core_eval(ni, nf, origin, mass, com, qn, gnode, gkind, gref, glevel, gvec, gR, gaxis, gw, wvec, wR, Tall,
                  Jf, Jr, sub, e2, J2, errs2, bool(1))
        ineq_eval(coll, ni, nf, Tall, m0, e2, J2, errs2)
        for _ in range(SOC_PASSES):
            # the step met the goals to first order only: its square bends them off (a 0.1 rad
            # step, ~1e-3 m); project the trial back onto them (least norm) before judging it, or
            # only steps of ~sqrt(tolerance) pass and the posture barely moves (Panda: none at 1e-6)
            if errs2[0] <= tol_p and errs2[1] <= tol_r:
                break
            if not _correct_trial(J2, e2, allrows, lims, lo, hi, qn, zero, hold, H, Jm, Z, S, r, lam_h, col, dqc,
                                  qc):
                break
            core_eval(ni, nf, origin, mass, com, qn, gnode, gkind, gref, glevel, gvec, gR, gaxis, gw, wvec, wR, Tall,
                      Jf, Jr, sub, e2, J2, errs2, bool(1))
            ineq_eval(coll, ni, nf, Tall, m0, e2, J2, errs2)
        posture_residual(qn, q_rest, balls, bias)
        cost2 = 0.0
        for i in range(dof):
            cost2 += lims[L_JW, i] * bias[i] * bias[i]
        if errs2[0] <= tol_p and errs2[1] <= tol_r and errs2[E_VIOL] == 0.0 and cost2 < cost:
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


@njit(cache=True, **NO_RC)
def _balls_into(lims, out):
    """The first index of every ball joint into out[:n] (dof,); returns n."""
    n = 0
    for s in range(lims.shape[1]):
        if lims[L_BALL, s] != 0.0:
            out[n] = s
            n += 1
    return n


@njit(cache=True, **NO_RC)
def _restart_near(lims, lo, hi, q0, seed, attempt, q):
    """Restart number ``attempt`` of the general core: the first NEAR_ATTEMPTS re-seed near q0
    (radius attempt x NEAR_STEP x the sampling span), later ones sample the sampling box
    uniformly; a DOF without limits (a floating base) always stays near q0 (attempt x
    FREE_RADIUS), one with a zero sampling span at q0. Counter-based hash, as _restart_sample."""
    base = _mix64(np.uint64(seed) * np.uint64(0x9E3779B97F4A7C15) + np.uint64(attempt))
    for i in range(q.shape[0]):
        x = _mix64(base + np.uint64(i + 1) * np.uint64(0xD1B54A32D192ED03))
        u = float(x >> np.uint64(11)) * (1.0 / 9007199254740992.0)
        unbounded = not (lims[L_LOWER, i] > -np.inf and lims[L_UPPER, i] < np.inf)
        if unbounded:
            v = q0[i] + min(attempt, NEAR_ATTEMPTS) * FREE_RADIUS * (2.0 * u - 1.0)
        elif lims[L_SAMPLE_SPAN, i] == 0.0:  # no range, or a DOF that moves no goal (solve._restart_lims)
            v = q0[i]
        elif attempt <= NEAR_ATTEMPTS:
            v = q0[i] + attempt * NEAR_STEP * lims[L_SAMPLE_SPAN, i] * (2.0 * u - 1.0)
        else:
            v = lims[L_SAMPLE_LO, i] + lims[L_SAMPLE_SPAN, i] * u
        q[i] = min(max(v, lo[i]), hi[i])


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
    STALLED (max_attempts done) or UNREACHABLE (with hard goals: 1 + AGREEMENTS attempts stalled, the
    hard goals met, at the same closest answer: the soft goals cannot be met with them; soft goals only:
    SOFT_AGREEMENTS attempts ended within SOFT_SPREAD x the best miss, beyond NEAR x tolerance, since
    the best last improved by more than AGREE). rowerr (G,)
    receives each goal row's error at best_q (Result.goals_met)."""
    ni, nf, origin, mass, com, coll = model
    gnode, gkind, gref, glevel, gvec, gR, gaxis, gw, soft, hard = table
    ws = core_workspace(ni.shape[0], q.shape[0], gvec, gR, hard.shape[0], ineq_size(coll))
    code = _attempts_for_rows(model, table, lims, lo, hi, q_rest, w_post, tol_p, tol_r, q0, q, best_q, state, budget,
                              attempt_iters, max_attempts, seed, ws, rowerr)
    _report_rows(model, table, best_q, state, code, ws, rowerr)
    return code


@njit(cache=True, **NO_RC)
def _report_rows(model, table, best_q, state, code, ws, rowerr):
    """rowerr (G,) = each goal row's error at best_q, unless best_q is the last q of a converged
    attempt (mode "speed"), whose row errors rowerr holds already."""
    if not (code == CONVERGED and state[S_DISTANCE] == 0.0):
        ni, nf, origin, mass, com, coll = model
        gnode, gkind, gref, glevel, gvec, gR, gaxis, gw, soft, hard = table
        core_eval_rows(ni, nf, origin, mass, com, best_q, gnode, gkind, gref, glevel, gvec, gR, gaxis, gw, ws[10],
                       ws[11], ws[0], ws[1], ws[2], ws[3], ws[4], ws[5], ws[8], bool(0), rowerr)


@njit(cache=True, **NO_RC)
def core_attempts_packed(prepared, gtab, q_rest, w_post, tol_p, tol_r, q0, best_q, seed, buf, ibuf):
    """core_attempts for a problem without collision rows, with its arguments split in what is the
    same for every solve of these goal structures on this robot, ``prepared`` (packed_problem: the
    model, ``layout`` = (gnode, gkind, gref, glevel, soft, hard, gsrc), lims, lo, hi, the state
    template ``state0``, the first call's iteration ``budget``, attempt_iters, max_attempts; one
    argument from Python, its ~20 arrays unboxed without Python looking at them), and what
    changes: the target and weight columns in one flat array ``gtab`` (the goals' joined target
    bytes, Goal.lean), where row g's number c (vec, R row-major, axis, weight) is
    gtab[gsrc[PACKED g + c]] (goals.lean_index), unpacked here; seed: the restarts' 31-bit seed
    (solve._seed31 of the caller's, as the driver's; only its low 31 bits are read). Everything but best_q
    (out: the answer) lives in ``buf`` (float64) and ``ibuf`` (int64) of at least
    core_scratch_size() entries (the caller's per-thread buffers): the state (a copy of
    ``state0``), q and the rows' errors first (packed_state reads them back for a driver that goes
    on), then the goal columns, q_rest's copy and core_workspace's arrays; so it allocates nothing
    and compiles without reference counting. q0 is checked and clamped here (returns code -1 for
    a q0 of another length or with an entry that is not a number within ±MAX_LENGTH, doing
    nothing).

    Returns (code, ok, best position error, best rotation error, iterations, attempt): ok says
    that best_q and its errors are finite numbers (a converged answer is never called so
    otherwise). The whole-body fast path (solve._solve_core_fast) calls it through its entry
    point: a third of core_attempts' arrays to unbox, no array allocated but the answer, the
    targets gathered by one join of bytes in Python; the iterates are core_attempts' (the same
    _core_attempts_nrc on the same values)."""
    model, layout, lims, lo, hi, state0, budget, attempt_iters, max_attempts = prepared
    gnode, gkind, gref, glevel, soft, hard, gsrc = layout
    G = gnode.shape[0]
    dof = best_q.shape[0]
    if q0.shape[0] != dof:
        return -1, False, 0.0, 0.0, 0, 0
    for i in range(dof):  # q0 as given: NaN, inf or an entry beyond MAX_LENGTH goes back to the caller
        if not (-MAX_LENGTH <= q0[i] <= MAX_LENGTH):
            return -1, False, 0.0, 0.0, 0, 0
    h = head_shapes(dof, G)
    state, o = _take(buf, 0, h[0])
    for i in range(CORE_STATE):
        state[i] = state0[i]
    q, o = _take(buf, o, h[1])
    rowerr, o = _take(buf, o, h[2])
    qs, o = _take(buf, o, h[3])  # q0 clamped into lo, hi: the attempts' start and restart centre
    for i in range(dof):
        qs[i] = min(max(q0[i], lo[i]), hi[i])
        q[i] = qs[i]
        best_q[i] = qs[i]
    gvec, o = _take(buf, o, h[4])
    gR, o = _take(buf, o, h[5])
    gaxis, o = _take(buf, o, h[6])
    gw, o = _take(buf, o, h[7])
    qr, o = _take(buf, o, h[8])
    unpack_goal_columns(gtab, gsrc, gvec, gR, gaxis, gw)
    for i in range(dof):
        qr[i] = q_rest[i]
    ws = _carve_workspace(buf[o:], ibuf, model[0].shape[0], dof, gvec, gR, hard.shape[0])
    table = (gnode, gkind, gref, glevel, gvec, gR, gaxis, gw, soft, hard)
    code = _core_attempts_nrc(model, table, lims, lo, hi, qr, w_post, tol_p, tol_r, qs, q, best_q, state, budget,
                              attempt_iters, max_attempts, seed & 0x7FFFFFFF, ws, rowerr)
    _report_rows(model, table, best_q, state, code, ws, rowerr)
    perr = state[S_BEST_PERR]
    rerr = state[S_BEST_RERR]
    ok = np.isfinite(perr) and np.isfinite(rerr)
    for i in range(dof):
        ok = ok and np.isfinite(best_q[i])
    return code, ok, perr, rerr, int(state[S_ITERS]), int(state[S_ATTEMPT])


@njit(cache=True, **NO_RC)
def unpack_goal_columns(gtab, gsrc, gvec, gR, gaxis, gw):
    """The goal table's columns (gvec (G, 3), gR (G, 3, 3), gaxis (G, 3), gw (G,)) from the goals'
    joined target numbers ``gtab``: row g's number c (vec, R row-major, axis, weight) is
    gtab[gsrc[PACKED g + c]] (goals.lean_index)."""
    for g in range(gvec.shape[0]):
        b = g * PACKED
        for k in range(3):
            gvec[g, k] = gtab[gsrc[b + k]]
            gaxis[g, k] = gtab[gsrc[b + 12 + k]]
            for c in range(3):
                gR[g, k, c] = gtab[gsrc[b + 3 + 3 * k + c]]
        gw[g] = gtab[gsrc[b + 15]]


def packed_problem(model, layout, lims, lo, hi, state0, budget, attempt_iters, max_attempts):
    """core_attempts_packed's ``prepared`` argument (see there): one tuple, in its order."""
    return model, layout, lims, lo, hi, state0, budget, attempt_iters, max_attempts


def packed_state(buf, dof, G):
    """Copies of the state, q and the rows' errors that core_attempts_packed left at the start of
    its scratch ``buf`` (dof, G: the problem's), for a driver that goes on from them: the first
    three arrays of head_shapes."""
    a, b, c = (math.prod(shape) for shape in head_shapes.py_func(dof, G)[:3])
    return buf[:a].copy(), buf[a:a + b].copy(), buf[a + b:a + b + c].copy()


def core_scratch_size(n, dof, G, nhard):
    """(float64 entries, int64 entries) that core_attempts_packed carves its scratch from, for n
    nodes, dof, G goal rows and nhard hard residual rows (no collision rows): the state, q, the
    rows' errors, q0 clamped, the goal columns (gvec, gR, gaxis, gw) and q_rest, then the
    workspace's arrays (workspace_shapes)."""
    sizes = [math.prod(shape) for shape in workspace_shapes.py_func(n, dof, G, nhard, 0)]
    ints = sum(sizes[i] for i in WS_INT)
    return packed_head_size(dof, G) + sum(sizes) - ints, ints


def packed_head_size(dof, G):
    """The float64 entries that core_attempts_packed keeps before the workspace (head_shapes)."""
    return sum(math.prod(shape) for shape in head_shapes.py_func(dof, G))


@njit(cache=True, **NO_RC)
def _carve_workspace(buf, ibuf, n, dof, gvec, gR, nhard):
    """core_workspace(n, dof, gvec, gR, nhard, 0) as views of buf and ibuf (core_scratch_size), in
    workspace_shapes' order and shapes, filled as core_workspace's arrays are where a value is read
    before it is written (errs, errs2, zero, wvec, wR)."""
    s = workspace_shapes(n, dof, gvec.shape[0], nhard, 0)
    Tall, o = _take(buf, 0, s[0])
    Jf, o = _take(buf, o, s[1])
    Jr, o = _take(buf, o, s[2])
    sub, o = _take(buf, o, s[3])
    e, o = _take(buf, o, s[4])
    J, o = _take(buf, o, s[5])
    e2, o = _take(buf, o, s[6])
    J2, o = _take(buf, o, s[7])
    errs, o = _take(buf, o, s[8])
    errs2, o = _take(buf, o, s[9])
    for i in range(errs.shape[0]):  # the collision slots stay 0 (no collision rows); every evaluation writes
        errs[i] = 0.0  # all of its goal rows of e and J (and the four goal errors) before they are read
        errs2[i] = 0.0
    wvec, o = _take(buf, o, s[10])
    wR, o = _take(buf, o, s[11])
    for g in range(gvec.shape[0]):
        for k in range(3):
            wvec[g, k] = gvec[g, k]
            for c in range(3):
                wR[g, k, c] = gR[g, k, c]
    H, o = _take(buf, o, s[12])
    Jm, o = _take(buf, o, s[13])
    Z, o = _take(buf, o, s[14])
    S, o = _take(buf, o, s[15])
    r, o = _take(buf, o, s[16])
    lam, o = _take(buf, o, s[17])
    col, o = _take(buf, o, s[18])
    dq, o = _take(buf, o, s[19])
    qn, o = _take(buf, o, s[20])
    hold, o = _take(buf, o, s[21])
    bias, o = _take(buf, o, s[22])
    zero, o = _take(buf, o, s[23])
    dqc, o = _take(buf, o, s[24])
    qc, o = _take(buf, o, s[25])
    for i in range(dof):
        zero[i] = 0.0
    rw2, o = _take(buf, o, s[27])
    hardx, oi = _take(ibuf, 0, s[26])
    rowsx, oi = _take(ibuf, oi, s[28])
    ballx, oi = _take(ibuf, oi, s[29])
    return (Tall, Jf, Jr, sub, e, J, e2, J2, errs, errs2, wvec, wR, H, Jm, Z, S, r, lam, col, dq, qn, hold, bias,
            zero, dqc, qc, hardx, rw2, rowsx, ballx)


@njit(cache=True)
def _core_attempts(model, table, lims, lo, hi, q_rest, w_post, tol_p, tol_r, q0, q, best_q, state, budget,
                   attempt_iters, max_attempts, seed, ws, rowq):
    """core_attempts on the scratch ws = core_workspace(...); rowq (G,) receives the row errors
    at the last q (core_iterate), which is best_q when it returns CONVERGED outside
    mode="distance"."""
    ni, nf, origin, mass, com, coll = model
    gnode, gkind, gref, glevel, gvec, gR, gaxis, gw, soft, hard = table
    dof = q.shape[0]
    used = 0
    while used < budget:
        if state[S_ATTEMPT] >= max_attempts:
            return CONVERGED if state[S_BEST_DIST] < np.inf else STALLED
        n = min(attempt_iters - int(state[S_ATTEMPT_ITERS]), budget - used)
        before = state[S_ITERS]
        c = core_iterate(model, table, lims, lo, hi, tol_p, tol_r, q, n, state, ws, rowq)
        done = int(state[S_ITERS] - before)
        if done == 0:  # an attempt that did nothing (met at its start) still spends one iteration,
            state[S_ITERS] += 1.0  # so a loop of them (mode="distance") ends within the budget
        used += max(done, 1)
        state[S_ATTEMPT_ITERS] += done
        if c == CONVERGED:
            if w_post > 0.0:
                state[S_ITERS] += settle(model, table, lims, lo, hi, q_rest, tol_p, tol_r, q, SETTLE_ITERATIONS, ws)
                errs = ws[8]  # the errors at the settled q
                core_eval_rows(ni, nf, origin, mass, com, q, gnode, gkind, gref, glevel, gvec, gR, gaxis, gw, ws[10],
                               ws[11], ws[0], ws[1], ws[2], ws[3], ws[4], ws[5], errs, bool(0), rowq)
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
                rank_new = key + (1e12 * hk if hk > 1.0 else 0.0)
                rank_old = state[S_BEST] + (1e12 * state[S_BEST_HARD] if state[S_BEST_HARD] > 1.0 else 0.0)
                soft_only = hard.shape[0] == 0 and not (state[S_BOXED] > 0.5)
                # (with hard goals, or in a per-solve joint step box, S_BOXED: restarts inside a
                # small box find the same closest answer again; a Panda pose target out of the box
                # of dt = 0.01 s ran 4,000 restarts to the 50 ms timeout)
                if soft_only:  # (SOFT_AGREEMENTS: attempts that end near the best since it last improved)
                    if rank_new < (1.0 - AGREE) * rank_old:
                        state[S_AGREE] = 0.0
                    elif rank_new <= SOFT_SPREAD * rank_old:
                        state[S_AGREE] += 1.0
                elif (hard.shape[0] > 0 or state[S_BOXED] > 0.5) and hk <= 1.0 and c == STALLED \
                        and state[S_BEST] < np.inf \
                        and abs(key - state[S_BEST]) <= AGREE * state[S_BEST]:
                    state[S_AGREE] += 1.0
                elif hard.shape[0] > 0 and 1.0 < hk < 1e6 and c != CONVERGED and state[S_BEST_HARD] > 1.0 \
                        and state[S_BEST] < np.inf and abs(hk - state[S_BEST_HARD]) <= AGREE_HARD * state[S_BEST_HARD]:
                    # the hard goals cannot be met together (a hard CenterOfMass beyond what hard feet
                    # allow): attempts stall, or creep to their iteration cap, at the same least miss
                    state[S_AGREE] += 1.0
                if rank_new < rank_old:
                    state[S_BEST] = key
                    state[S_BEST_HARD] = hk
                    state[S_BEST_PERR] = state[S_PERR]
                    state[S_BEST_RERR] = state[S_RERR]
                    for i in range(dof):
                        best_q[i] = q[i]
                if soft_only:
                    if state[S_AGREE] >= SOFT_AGREEMENTS and min(rank_new, rank_old) > NEAR:
                        return UNREACHABLE
                elif state[S_AGREE] >= AGREEMENTS:
                    return UNREACHABLE
            attempt = int(state[S_ATTEMPT]) + 1
            state[S_ATTEMPT] = attempt
            state[S_ATTEMPT_ITERS] = 0.0
            state[S_LAMBDA] = 0.0
            _restart_near(lims, lo, hi, q0, seed, attempt, q)
    if not (state[S_BEST] < np.inf):  # no attempt finished: report the current q ...
        errs = ws[8]
        core_eval(ni, nf, origin, mass, com, q, gnode, gkind, gref, glevel, gvec, gR, gaxis, gw, ws[10], ws[11],
                  ws[0], ws[1], ws[2], ws[3], ws[4], ws[5], errs, bool(0))
        src = q
        if hard.shape[0] > 0 and _hard_key(errs, tol_p, tol_r) > 1.0:
            # ... or the start, where the budget ended in an attempt's relaxed first steps with the
            # hard goals off and the start had them nearer (hard goals first: G1, hard feet, one
            # iteration of a crouch moved the feet 4.9 cm)
            core_eval(ni, nf, origin, mass, com, q0, gnode, gkind, gref, glevel, gvec, gR, gaxis, gw, ws[10],
                      ws[11], ws[0], ws[1], ws[2], ws[3], ws[4], ws[5], ws[9], bool(0))
            if _hard_key(ws[9], tol_p, tol_r) < _hard_key(errs, tol_p, tol_r):
                src = q0
                errs = ws[9]
        for i in range(dof):
            best_q[i] = src[i]
        state[S_BEST_PERR] = errs[0]
        state[S_BEST_RERR] = errs[1]
        state[S_BEST_HARD] = _hard_key(errs, tol_p, tol_r)
    return RUNNING


def _twin(f, name):
    """A second Python function with f's code under another name (its own Numba dispatcher and
    cache files)."""
    g = pytypes.FunctionType(f.__code__, f.__globals__, name, f.__defaults__, f.__closure__)
    g.__qualname__ = name
    g.__doc__ = f.__doc__
    return g


# _core_attempts without reference counting, for problems without collision rows (model[5] None):
# the attempts, the iteration (core_iterate), settle and every callee then allocate nothing (the
# workspace holds their scratch) and compile without counting, which took ~1.3 µs of core_iterate's
# and ~0.9 µs of _core_attempts's time per G1 solve (tuple unpacking and swaps counted in and out;
# benchmarks/RESULTS.md, session 6). With collision rows the evaluation allocates (collision/rows.py),
# so that route keeps _core_attempts. Numba compiles a callee in its first caller's mode: core_iterate
# and settle for model[5] None are compiled here without counting.
_core_attempts_nrc = njit(cache=True, **NO_RC)(_twin(_core_attempts.py_func, "_core_attempts_nrc"))


def _attempts_for_rows(model, table, lims, lo, hi, q_rest, w_post, tol_p, tol_r, q0, q, best_q, state, budget,
                       attempt_iters, max_attempts, seed, ws, rowerr):
    """_core_attempts_nrc without collision rows, _core_attempts with them (chosen by type when
    core_attempts compiles)."""
    if model[5] is None:
        return _core_attempts_nrc(model, table, lims, lo, hi, q_rest, w_post, tol_p, tol_r, q0, q, best_q, state,
                                  budget, attempt_iters, max_attempts, seed, ws, rowerr)
    return _core_attempts(model, table, lims, lo, hi, q_rest, w_post, tol_p, tol_r, q0, q, best_q, state, budget,
                          attempt_iters, max_attempts, seed, ws, rowerr)


@overload(_attempts_for_rows, jit_options={"cache": True})
def _attempts_for_rows_ov(model, table, lims, lo, hi, q_rest, w_post, tol_p, tol_r, q0, q, best_q, state, budget,
                          attempt_iters, max_attempts, seed, ws, rowerr):
    if isinstance(model[5], types.NoneType):
        def plain(model, table, lims, lo, hi, q_rest, w_post, tol_p, tol_r, q0, q, best_q, state, budget,
                  attempt_iters, max_attempts, seed, ws, rowerr):
            return _core_attempts_nrc(model, table, lims, lo, hi, q_rest, w_post, tol_p, tol_r, q0, q, best_q, state,
                                      budget, attempt_iters, max_attempts, seed, ws, rowerr)
        return plain

    def with_rows(model, table, lims, lo, hi, q_rest, w_post, tol_p, tol_r, q0, q, best_q, state, budget,
                  attempt_iters, max_attempts, seed, ws, rowerr):
        return _core_attempts(model, table, lims, lo, hi, q_rest, w_post, tol_p, tol_r, q0, q, best_q, state, budget,
                              attempt_iters, max_attempts, seed, ws, rowerr)
    return with_rows


def problem_rows(problem, q, want_jac=True):
    """(e (3G,), J (3G, dof) or None, largest position error [m], largest rotation error [rad]) of
    a compiled problem at q (dof,), for a caller outside the solve's kernels (the null-space
    refinement, the rest springs, the cone projection's re-measure). Every kind of goals.KINDS
    through core_eval_rows; task_eval (goal_errors) knows the basic kinds only and would read a
    CenterOfMass, Relative or Plane row as an axis or aim row."""
    model, table = core_tables(problem)
    ni, nf, origin, mass, com, coll = model
    gnode, gkind, gref, glevel, gvec, gR, gaxis, gw, soft, hard = table
    ws = core_workspace(ni.shape[0], q.shape[0], gvec, gR, hard.shape[0], 0)
    e, J, errs = ws[4], ws[5], ws[8]
    core_eval_rows(ni, nf, origin, mass, com, q, gnode, gkind, gref, glevel, gvec, gR, gaxis, gw, ws[10], ws[11],
                   ws[0], ws[1], ws[2], ws[3], e, J, errs, want_jac, errs[:0])
    return e, (J if want_jac else None), float(errs[0]), float(errs[1])


def problem_errors(problem, q):
    """(largest position error [m], largest rotation error [rad]) of a compiled problem at q over
    its rows with weight > 0, whatever their kinds: goal_errors (task_eval, the same numbers as
    before) where every kind is basic, else problem_rows."""
    if problem.basic_kinds_only():
        r = problem.robot
        return goal_errors(r.node_table, r.node_params, r.origin, q, problem.gnode, problem.gkind, problem.gvec,
                           problem.gR, problem.gaxis, problem.gw)
    return problem_rows(problem, q, False)[2:]


def row_errors(model, table, q):
    """(G,) unweighted error of every goal row at q [m or rad] (solve's per-goal report)."""
    ni, nf, origin, mass, com, coll = model
    gnode, gkind, gref, glevel, gvec, gR, gaxis, gw, soft, hard = table
    ws = core_workspace(ni.shape[0], q.shape[0], gvec, gR, hard.shape[0], 0)
    out = np.empty(gnode.shape[0])
    core_eval_rows(ni, nf, origin, mass, com, q, gnode, gkind, gref, glevel, gvec, gR, gaxis, gw, ws[10], ws[11],
                   ws[0], ws[1], ws[2], ws[3], ws[4], ws[5], ws[8], bool(0), out)
    return out


_NO_ROWS = no_rows()


def core_tables(problem, coll=None, prune=False):
    """(model, table) of core_attempts for a compiled problem: the model arrays with the link
    masses (cached per robot) and the collision rows ``coll`` (collision/rows.py: solve_rows; None:
    none), and the goal table with its soft and hard row indices. With ``prune`` (and no collision
    rows, no CenterOfMass row) the model holds only the nodes the goal rows read (their frames,
    reference frames and every ancestor: _pruned_model) and the table's gnode, gref index that
    model: the same transforms, Jacobians and iterates, without the forward kinematics of the
    branches no goal is on (Talos: 41 of 64 nodes, its grippers' fingers and head sensors)."""
    robot = problem.robot
    model = robot.cache.get("core_model")
    if model is None:
        model = (robot.node_table, robot.node_params, robot.origin, robot.link_mass, robot.link_com, _NO_ROWS)
        robot.cache["core_model"] = model
    layout = problem.layout  # its soft and hard residual rows
    gnode, gref = problem.gnode, problem.gref
    if coll is not None:
        model = model[:5] + (coll,)
    elif prune and layout is not None and not bool(np.any(problem.gkind == KIND_COM)):
        model, gnode, gref = _pruned_model(robot, model, gnode, gref)
    table = (gnode, problem.gkind, gref, problem.glevel, problem.gvec, problem.gR, problem.gaxis,
             problem.gw, layout.soft, layout.hard)
    return model, table


PRUNED_KEPT = 16  # pruned models kept per robot (a goal structure's frames each)


def _pruned_model(robot, model, gnode, gref):
    """(model, gnode, gref) on the nodes that gnode and gref (a node per goal row; gref -1 where a
    row has no reference frame) and their ancestors are: the nodes keep their order (parents
    before children) and their parents are renumbered, so every kernel runs on it unchanged; the
    q indices stay (a joint off every goal's path is not read, its q entry not moved). The model
    itself, gnode and gref when no node can go. Cached per robot and node set."""
    parent = model[0][:, 0]
    n = parent.shape[0]
    need = np.zeros(n, dtype=np.bool_)
    for i in np.concatenate((gnode, gref)).tolist():
        while i >= 0 and not need[i]:
            need[i] = True
            i = int(parent[i])
    if need.all():
        return model, gnode, gref
    key = need.tobytes()
    cache = robot.cache.setdefault("core_pruned", {})
    hit = cache.get(key)
    if hit is None:
        keep = np.flatnonzero(need)
        new = np.full(n + 1, -1, dtype=np.int64)  # new[-1] = -1: a root's parent, a row without reference
        new[keep] = np.arange(keep.shape[0])
        ni = model[0][keep].copy()
        ni[:, 0] = new[ni[:, 0]]
        arrays = [ni] + [np.ascontiguousarray(a[keep]) for a in model[1:5]]
        for a, b in zip(arrays, model[:5]):
            a.flags.writeable = b.flags.writeable  # the same Numba types: no new specialisation
        if len(cache) >= PRUNED_KEPT:
            cache.clear()
        hit = cache[key] = (tuple(arrays) + model[5:], new)
    pruned, new = hit
    gnode2, gref2 = new[gnode], new[gref]
    gnode2.flags.writeable = gnode.flags.writeable
    gref2.flags.writeable = gref.flags.writeable
    return pruned, gnode2, gref2


def _iterate(problem, q, max_iter, state, options):
    """The registry's iterate contract on the general core (one attempt, clamped into the limits);
    solve() itself drives lm through core_attempts / lm_chain_attempts."""
    r = problem.robot
    model, table = core_tables(problem)
    lims = limits_table(r.lower, r.upper, r.lower, np.zeros(r.dof), np.zeros(r.dof), problem.joint_weights,
                        r.ball_starts)
    lo, hi = r.lower, r.upper
    st = new_core_state(0.0)
    st[S_LAMBDA] = state[0]
    ws = core_workspace(model[0].shape[0], q.shape[0], table[4], table[5], table[9].shape[0], 0)
    code = core_iterate(model, table, lims, lo, hi, problem.tol_p, problem.tol_r, q, max_iter, st, ws,
                        np.empty(table[0].shape[0]))
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
