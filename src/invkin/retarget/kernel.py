r"""The retargeting loop: every frame of a clip in one Numba call.

Frame ``t`` starts from the answer of frame ``t − 1`` (warm start; no restarts, no random samples,
so no branch flips) and:

1. writes the frame's targets into the goal table; a foot row in contact becomes a hard row whose
   target is the contact's hold, taken on its first frame: the foot where the robot has it, on
   the floor, flat, with its heading (so a contact never pulls a foot sideways);
2. first projects the hard goals back (a contact that just began), then runs up to
   ``iterations`` damped steps of the general core's constrained step (``core_active_step``, see
   docs/architecture.md "The general core in one page": soft rows least squares, hard rows
   through the Schur complement) inside the step box = the joint limits ∩ q_{t−1} ± ``step``
   (velocity limit × dt; an active set; flagged F_BOUND where it binds); a refused step is
   tried at 1/2, 1/4, 1/8 of its length before the damping grows;
3. projects onto the inequality rows: every self-collision row (``collision_rows``) with
   ``d_i < m_i = min(margin, clearance_i)`` (``clearance_i``: the pair's distance in the robot's
   rest pose; the capsules that enclose a mesh can overlap where the meshes do not, e.g. G1's
   hanging arms and its torso: such a pair is kept at least as far apart as at rest) and every sole point of a foot below the floor (``z_i < 0``) joins the hard
   goal rows as the equality ``d_i + ∇d_i·δq = m_i`` (``z_i + ∇z_i·δq = 0``) of a least-norm
   step inside the step box (the joint limits ∩ q_{t−1} ± step, an active set) (up to ``PROJECT_PASSES`` times). Only the soles meet the floor:
   the capsules that enclose a shin reach below its ankle, so the floor is not a collision
   obstacle here.
4. If a hard goal is still off by more than its tolerance or an inequality is still violated,
   the frame gets ``fallback_iterations`` more iterations and projections and is flagged.
5. A contact whose hold is still not met at the end of its first frame *lands*: the frame is solved
   again from its start with that foot's height and tilt hard and where it stands and its heading
   soft (toward the hold), in this frame and the next ones until the height and tilt are met; the
   hold is then taken where the foot stands. A hold is taken where the foot is, dropped to the
   floor and turned flat, and beside the other foot's hold that can be a stance the robot cannot
   stand with both feet flat: the CMU crouch clip ends in a 0.72-0.78 m stance, toes in, that G1
   cannot hold (facing forward, flat feet hold up to about 0.55 m; a whole-body solve with 19,000
   restarts stays 2 cm off), and its frames 802-993 missed their holds, 171 of them, with the
   solver creeping the feet on; landed, the foot stands 9 and 14 cm further in and is held. The
   landing foot's soft rows weigh LANDING_WEIGHT x the map's foot weights (x1 let the other soft
   goals carry it 14-16 cm).

Frame 0 has no previous frame: it runs ``first_iterations`` iterations inside the joint limits
only.
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit

from ..collision.kernels import collision_rows
from ..kinematics.kernels import fk_all_into, jacobian_from_all
from ..solvers.shared import (L_BALL, core_active_step, core_eval_rows, core_step_scratch, core_workspace, row_costs,
                              step_into)

PROJECT_PASSES = 4
PROJECT_REG = 1e-6    # regularisation of the projection's row system (contradicting rows stay bounded)
GROUND_SLACK = 1e-5   # [m] a floor row is active below -GROUND_SLACK (a held foot sits at 0)
LIFT = 1e-4           # [m] a projected row aims this far inside its margin
INEQ_TOL = 1e-3       # [m] a collision deeper than this after the projection (not the margin): a fallback
HARD_WEIGHT = 1.0     # hard rows in the merit function of the damped steps (the projection restores them)
PENALTY = 100.0       # violated inequality rows in that merit function [1/m²]
NEAR = 0.01           # [m] inequality rows this close to their bound join the steps' active set
INEQ_PASSES = 3
BACKTRACK = 3         # a refused step is tried again at 1/2, 1/4, 1/8 of its length before the damping grows
PARALLEL = 0.99       # two inequality rows whose gradients meet at |cos| above this are one row in a step
FIRST_SETTLE = 30     # iterations with the inequality rows after the first pose's free solve
LANDING_WEIGHT = 10.0  # a landing foot's soft rows (where it stands, its heading) over the map's foot weights
HOLD = 0.05           # hard goals are projected back once off by more than HOLD x tolerance (the core
                      # judges soft steps only while they are within 0.1 x: lm_core.HARD_HOLD)
# out_flags bits
F_FALLBACK, F_HARD_MISSED, F_INEQ_MISSED, F_BOUND = 1, 2, 4, 8


@njit(cache=True)
def _eval(model, table, q, ws, rowerr):
    ni, nf, origin, mass, com = model[0], model[1], model[2], model[3], model[4]
    gnode, gkind, gref, glevel, gvec, gR, gaxis, gw, soft, hard = table
    core_eval_rows(ni, nf, origin, mass, com, q, gnode, gkind, gref, glevel, gvec, gR, gaxis, gw, ws[10], ws[11],
                   ws[0], ws[1], ws[2], ws[3], ws[4], ws[5], ws[8], bool(1), rowerr)


@njit(cache=True)
def _sole_row(Tall, J, node, local, row):
    """Height z [m] of the bottom of the sphere ``local`` (x, y, z, radius) of ``node`` and its
    gradient ∂z/∂q into row (J: the node's Jacobian): e_zᵀ(J_v − [p − o]× J_ω)."""
    T = Tall[node]
    rx = T[0, 0] * local[0] + T[0, 1] * local[1] + T[0, 2] * local[2]
    ry = T[1, 0] * local[0] + T[1, 1] * local[1] + T[1, 2] * local[2]
    z = T[2, 0] * local[0] + T[2, 1] * local[1] + T[2, 2] * local[2] + T[2, 3] - local[3]
    for j in range(J.shape[1]):
        row[j] = J[2, j] + ry * J[3, j] - rx * J[4, j]
    return z


@njit(cache=True)
def _ineq(model, Tall, ctables, clearance, margin, cutoff, sole_node, sole_local, cb, Jc, ec, near):
    """The inequality rows within ``near`` [m] of their bound at the FK ``Tall``: self-collision
    pairs (bound m_i = min(margin, clearance_i)) and sole points (bound 0, the floor), as rows
    ``Jc[i] δq ≥ ec[i]`` with ec = bound − value (> 0: violated). Returns (rows, Σ violation², the
    deepest collision [m]: a pair closer than min(0, clearance) or a sole below the floor; being
    inside the margin is not one)."""
    ni, nf = model[0], model[1]
    d, Jd, na, nb, Js = cb
    dof = Jc.shape[1]
    n = 0
    viol = 0.0
    miss = 0.0
    if margin > -np.inf:
        k = collision_rows(ni, nf, Tall, ctables, cutoff, d, Jd, na, nb)
        for i in range(k):
            m = min(margin, clearance[na[i], nb[i]])
            if d[i] < m + near:
                for c in range(dof):
                    Jc[n, c] = Jd[i, c]
                ec[n] = m - d[i]
                miss = max(miss, min(0.0, clearance[na[i], nb[i]]) - d[i])
                if ec[n] > 0.0:
                    viol += ec[n] * ec[n]
                n += 1
    last = -1
    for i in range(sole_node.shape[0]):
        node = sole_node[i]
        if node != last:
            jacobian_from_all(ni, nf, Tall, node, Js)
            last = node
        z = _sole_row(Tall, Js, node, sole_local[i], Jc[n])
        if z < near - GROUND_SLACK:
            ec[n] = -z - GROUND_SLACK
            miss = max(miss, -z)
            if ec[n] > 0.0:
                viol += ec[n] * ec[n]
            n += 1
    return n, viol, miss


@njit(cache=True)
def _project(model, table, lims, lo, hi, q, ws, pb, ctables, margin, clearance, cutoff, sole_node, sole_local, rowerr,
             tol_p, tol_r):
    """Least-norm steps onto the violated inequality rows with the hard goal rows held (also when
    only a hard goal is off by more than HOLD x its tolerance); returns the deepest collision left
    [m] (0 when none; see _ineq).

    Each pass steps on the rows violated at its start; a row that only the step pushes past its
    bound (the swing foot's sole below the floor when the base moves to put the held foot back)
    joins the next pass. So a pass whose Σ hard error² + Σ violation² rises is not yet a conflict:
    the passes go on and the point of least cost over them is kept (stopping at the first rise left G1's
    held foot 9 mm off for 9 frames of the CMU crouch clip, frames 542-550, while its other foot
    swung 2 mm into the floor)."""
    hard = table[9]
    Tall, e, J = ws[0], ws[4], ws[5]
    cb, Jc, ec, Jc2, ec2, Jp, ep, idx, Jm, Z, S, r, lam, col, H, dq, qn, hold, zero = pb
    dof = q.shape[0]
    worst = 0.0
    best = np.inf
    qb = np.empty(dof)
    for it in range(PROJECT_PASSES + 1):
        _eval(model, table, q, ws, rowerr)
        k, viol, miss = _ineq(model, Tall, ctables, clearance, margin, cutoff, sole_node, sole_local, cb, Jc, ec, 0.0)
        n = 0
        ch = 0.0
        for i in range(hard.shape[0]):
            for c in range(dof):
                Jp[n, c] = J[hard[i], c]
            ep[n] = e[hard[i]]
            ch += e[hard[i]] * e[hard[i]]
            n += 1
        n_goal = n
        worst = miss
        cost = ch + viol
        if cost < best:
            best = cost
            for c in range(dof):
                qb[c] = q[c]
        for i in range(k):
            if ec[i] > 0.0:
                for c in range(dof):
                    Jp[n, c] = Jc[i, c]
                ep[n] = ec[i] + LIFT
                n += 1
        if n == n_goal and _hard_error(table, e, tol_p, tol_r, hard[:0], -1) <= HOLD:
            return worst  # every row holds
        if it == PROJECT_PASSES:
            break
        for i in range(n):
            idx[i] = i
        # regularised least norm: rows that contradict each other give a bounded step, not a jump
        if not core_active_step(Jp[:n], ep[:n], idx[:0], idx[:n], lims, lo, hi, q, 1.0, PROJECT_REG, zero, hold,
                                H, Jm, Z, S, r, lam, col, dq):
            break
        step_into(q, dq, lims, lo, hi, qn)
        for c in range(dof):
            q[c] = qn[c]
    if cost > best:  # the rows cannot all hold (they contradict each other): keep the best point
        for c in range(dof):
            q[c] = qb[c]
        _eval(model, table, q, ws, rowerr)
        worst = _ineq(model, Tall, ctables, clearance, margin, cutoff, sole_node, sole_local, cb, Jc, ec, 0.0)[2]
    return worst


@njit(cache=True)
def _add_bound_row(Jp, ep, idx, m, n, nh, g, target):
    """Append the inequality row ``g δq = target`` to the step's hard rows (Jp, ep from row n, its
    index at idx[nh]) unless a row already taken (rows m..n-1) has nearly the same direction
    (|cos| > PARALLEL): the rows are equalities in the step, and two near-parallel ones with
    different targets (the torso against two adjacent wrist links) have no bounded solution: the
    step jumped to the step box on every joint, was refused, and the robot froze for hundreds of
    frames. A parallel row takes the larger of the two targets (both bounds then hold), an
    antiparallel one is left out (the bounds squeeze: the projection judges them). Returns (n, nh)."""
    dof = g.shape[0]
    gg = 0.0
    for c in range(dof):
        gg += g[c] * g[c]
    if gg == 0.0:
        return n, nh
    for k in range(m, n):
        kk = 0.0
        gk = 0.0
        for c in range(dof):
            kk += Jp[k, c] * Jp[k, c]
            gk += Jp[k, c] * g[c]
        if kk > 0.0 and gk * gk > PARALLEL * PARALLEL * gg * kk:
            if gk > 0.0:  # g ≈ (|g| / |J_k|) J_k: g δq >= target  <=>  J_k δq >= target |J_k| / |g|
                ep[k] = max(ep[k], target * math.sqrt(kk / gg))
            return n, nh
    for c in range(dof):
        Jp[n, c] = g[c]
    ep[n] = target
    idx[nh] = n
    return n + 1, nh + 1


@njit(cache=True)
def _costs(e, soft, hard):
    """The soft cost plus HARD_WEIGHT x the hard cost (row_costs: the core's two sums)."""
    cs, ch = row_costs(e, soft, hard)
    return cs + HARD_WEIGHT * ch


@njit(cache=True)
def _track_iterate(model, table, lims, lo, hi, q, max_iter, damping, ws, pb, ctables, margin, clearance, cutoff,
                   sole_node, sole_local):
    """Up to max_iter damped constrained steps (lm_core.core_active_step: soft rows least squares,
    hard rows as equalities, the box lo, hi as an active set) with the damping
    μ = damping + λ·cost: a floor that keeps a frame's answer near the previous frame's (the
    general core's μ = λE + ε lets a large soft residual take long steps: a warm start would jump
    between branches). The inequality rows within NEAR of their bound form an active set of their
    own: a violated row, or one the step would violate, joins the hard rows as
    ``J_i δq = bound − value`` and the step is solved again (up to INEQ_PASSES times). A step is
    kept when the merit cost_soft + HARD_WEIGHT·cost_hard + PENALTY·Σ violation² falls, else λ
    grows 4x. Returns the iterations used."""
    Tall, Jf, Jr, sub, e, J, e2, J2, errs, errs2, wvec, wR, H, Jm_, Z_, S_, r_, lam_, col_, dq, qn, hold, bias, zero, \
        dqc, qc, _hardx, _rw2, _rowsx, _ballx = ws
    cb, Jc, ec, Jc2, ec2, Jp, ep, idx, Jm, Z, S, r, lam_a, col, Hp, dqp, qnp, holdp, zerop = pb
    ni, nf, origin, mass, com = model[0], model[1], model[2], model[3], model[4]
    gnode, gkind, gref, glevel, gvec, gR, gaxis, gw, soft, hard = table
    dof = q.shape[0]
    m = e.shape[0]
    nof = ep[:0]  # no per-row errors wanted
    _eval(model, table, q, ws, nof)
    nc, viol, _ = _ineq(model, Tall, ctables, clearance, margin, cutoff, sole_node, sole_local, cb, Jc, ec, NEAR)
    cost = _costs(e, soft, hard) + PENALTY * viol
    for i in range(m):
        for c in range(dof):
            Jp[i, c] = J[i, c]
        ep[i] = e[i]
    lam = 0.1
    it = 0
    while it < max_iter:
        it += 1
        mu = damping + lam * cost
        # the goal rows, then the active inequality rows (violated ones from the start)
        for i in range(m):
            for c in range(dof):
                Jp[i, c] = J[i, c]
            ep[i] = e[i]
        nh = 0
        for i in range(hard.shape[0]):
            idx[nh] = hard[i]
            nh += 1
        n = m
        for i in range(nc):
            if ec[i] > 0.0:
                n, nh = _add_bound_row(Jp, ep, idx, m, n, nh, Jc[i], ec[i] + LIFT)
        for i in range(nc):  # ec2 (the trial's rows, written after the solve) marks the rows taken
            ec2[i] = 1.0 if ec[i] > 0.0 else 0.0
        ok = True
        for _ in range(INEQ_PASSES):
            ok = core_active_step(Jp[:n], ep[:n], soft, idx[:nh], lims, lo, hi, q, mu, 1e-10, zero, hold, H, Jm, Z,
                                  S, r, lam_a, col, dq)
            if not ok:
                break
            added = 0
            for i in range(nc):
                if ec2[i] > 0.0:
                    continue
                s = 0.0
                for c in range(dof):
                    s += Jc[i, c] * dq[c]
                if s < ec[i]:  # the step would cross this bound: hold it there
                    n2, nh = _add_bound_row(Jp, ep, idx, m, n, nh, Jc[i], ec[i] + LIFT)
                    ec2[i] = 1.0
                    if n2 > n:
                        added += 1
                    n = n2
            if added == 0:
                break
        if not ok:
            break
        # the step, then (refused) the same direction shortened: a row beyond NEAR at q (an arm
        # swinging down onto the hips from a T-pose) is not in the step's set and a long step
        # crosses it; more damping hardly shortens a step the step box cuts, so the step was
        # refused on every iteration of every frame and the robot stood still while its targets
        # moved (CMU walk frames 1-14, mocapdata clip 7 s). A shorter step stops before the row,
        # which then joins the next step's set.
        t = 1.0
        for tries in range(BACKTRACK + 1):
            if tries > 0:
                t *= 0.5
            for c in range(dof):
                dqc[c] = t * dq[c]
            step_into(q, dqc, lims, lo, hi, qn)
            core_eval_rows(ni, nf, origin, mass, com, qn, gnode, gkind, gref, glevel, gvec, gR, gaxis, gw, wvec,
                           wR, Tall, Jf, Jr, sub, e2, J2, errs2, bool(1), nof)
            nc2, viol2, _ = _ineq(model, Tall, ctables, clearance, margin, cutoff, sole_node, sole_local, cb, Jc2,
                                  ec2, NEAR)
            cost2 = _costs(e2, soft, hard) + PENALTY * viol2
            if cost2 < cost:
                break
        if cost2 < cost:
            rel = (cost - cost2) / cost
            for i in range(dof):
                q[i] = qn[i]
            e, e2 = e2, e
            J, J2 = J2, J
            Jc, Jc2 = Jc2, Jc
            ec, ec2 = ec2, ec
            nc = nc2
            cost = cost2
            lam = max(lam * 0.25, 1e-3)
            if rel < 1e-4:
                break
        else:
            lam *= 4.0
            if lam > 1e6:
                break
    if it > 0:  # leave the goal rows at q in the workspace (the swaps may have moved them)
        _eval(model, table, q, ws, nof)
    return it


@njit(cache=True)
def _hard_error(table, e, tol_p, tol_r, row_body, body):
    """Largest error of a goal's hard components over its tolerance (<= 1: met), from the weighted
    residual e (dof rows 3g..3g+2 of goal g; table[9], the hard components, in goal order): every
    goal's, or with body >= 0 those of that body's goals. A landing foot's goals have hard and
    soft components (the height and the tilt hard)."""
    gkind, gw, hard = table[1], table[7], table[9]
    worst = 0.0
    i = 0
    while i < hard.shape[0]:
        g = hard[i] // 3
        s = 0.0
        while i < hard.shape[0] and hard[i] // 3 == g:
            s += e[hard[i]] * e[hard[i]]
            i += 1
        if body < 0 or row_body[g] == body:
            t = tol_p if gkind[g] == 0 else tol_r
            worst = max(worst, math.sqrt(s) / (gw[g] * t))
    return worst


@njit(cache=True)
def _new_hold(model, q, node, height, R0, Tall, hp, hR):
    """A contact's hold: the link's position now with its height set to ``height`` (on the floor),
    and its rest orientation R0 turned about the vertical to its heading now (flat)."""
    ni, nf, origin = model[0], model[1], model[2]
    fk_all_into(ni, nf, origin, q, Tall)
    T = Tall[node]
    hp[0] = T[0, 3]
    hp[1] = T[1, 3]
    hp[2] = height
    # Rh = R R0^T: the turn away from rest; its heading psi about z
    a00 = T[0, 0] * R0[0, 0] + T[0, 1] * R0[0, 1] + T[0, 2] * R0[0, 2]
    a01 = T[0, 0] * R0[1, 0] + T[0, 1] * R0[1, 1] + T[0, 2] * R0[1, 2]
    a10 = T[1, 0] * R0[0, 0] + T[1, 1] * R0[0, 1] + T[1, 2] * R0[0, 2]
    a11 = T[1, 0] * R0[1, 0] + T[1, 1] * R0[1, 1] + T[1, 2] * R0[1, 2]
    psi = math.atan2(a10 - a01, a00 + a11)
    c, s = math.cos(psi), math.sin(psi)
    for j in range(3):
        hR[0, j] = c * R0[0, j] - s * R0[1, j]
        hR[1, j] = s * R0[0, j] + c * R0[1, j]
        hR[2, j] = R0[2, j]


@njit(cache=True)
def _frame_rows(f, tp, tR, contact, landing, row_body, row_rot, gvec0, gw0, hold_p, hold_R, gvec, gR, wvec, wR, gw,
                glevel, soft_buf, hard_buf):
    """Frame f's goal table: each row's target (a held foot's hold, else the frame's target, also
    into the core's world targets wvec, wR), its level, and the soft and hard components (returns
    their counts). A held foot's rows are hard; a landing foot's height and tilt are hard, where it
    stands and its heading soft (toward its hold; a world rotation vector's z component turns the
    foot about the vertical)."""
    ns = 0
    nh = 0
    for g in range(row_body.shape[0]):
        b = row_body[g]
        held = contact[f, b]
        if row_rot[g]:
            for i in range(3):
                gvec[g, i] = gvec0[g, i]
        else:
            for i in range(3):
                gvec[g, i] = hold_p[b, i] if held else tp[f, b, i]
        for i in range(3):
            for j in range(3):
                gR[g, i, j] = hold_R[b, i, j] if held else tR[f, b, i, j]
        for i in range(3):
            wvec[g, i] = gvec[g, i]
            for j in range(3):
                wR[g, i, j] = gR[g, i, j]
        glevel[g] = 0 if held else 1
        gw[g] = gw0[g] * LANDING_WEIGHT if held and landing[b] else gw0[g]
        for k in range(3):
            if held and not (landing[b] and (k == 2) == row_rot[g]):
                hard_buf[nh] = 3 * g + k
                nh += 1
            else:
                soft_buf[ns] = 3 * g + k
                ns += 1
    return ns, nh


@njit(cache=True)
def _solve_frame(model, table, lims, lo, hi, lower, upper, q, ws, pb, ctables, margin, clearance, cutoff, sole_node,
                 sole_local, rowerr, tol_p, tol_r, iterations, first_iterations, fallback_iterations, damping, bounded):
    """One frame from q inside the step box lo, hi (steps 2-4 of the module docstring): returns its
    flags and the iterations used."""
    e = ws[4]
    row_any = table[0][:0]  # _hard_error over every goal reads no body array
    # hard goals met first, then damped steps toward the soft ones inside the step box, then
    # the inequalities (and the hard goals bent by the soft steps) by projection
    if table[9].shape[0] > 0:
        _project(model, table, lims, lo, hi, q, ws, pb, ctables, -np.inf, clearance, cutoff, sole_node,
                 sole_local, rowerr, tol_p, tol_r)
    used = 0
    if not bounded:  # the clip's first pose from the rest pose: reach it free of the link pairs, then
        # push the pairs apart (a rest pose far from the first pose would leave the limbs tangled)
        used = _track_iterate(model, table, lims, lo, hi, q, first_iterations, damping, ws, pb, ctables,
                              -np.inf, clearance, cutoff, sole_node, sole_local)
    used += _track_iterate(model, table, lims, lo, hi, q, iterations if bounded else FIRST_SETTLE, damping, ws, pb,
                           ctables, margin, clearance, cutoff, sole_node, sole_local)
    flags = 0
    dof = q.shape[0]
    if bounded:
        for i in range(dof):
            if lims[L_BALL, i] == 0.0 and ((q[i] <= lo[i] and lo[i] > lower[i]) or
                                           (q[i] >= hi[i] and hi[i] < upper[i])):
                flags = F_BOUND
    worst = _project(model, table, lims, lo, hi, q, ws, pb, ctables, margin, clearance, cutoff, sole_node,
                     sole_local, rowerr, tol_p, tol_r)
    if worst > INEQ_TOL or _hard_error(table, e, tol_p, tol_r, row_any, -1) > 1.0:
        flags |= F_FALLBACK
        used += _track_iterate(model, table, lims, lo, hi, q, fallback_iterations, damping, ws, pb, ctables, margin,
                               clearance, cutoff, sole_node, sole_local)
        worst = _project(model, table, lims, lo, hi, q, ws, pb, ctables, margin, clearance, cutoff, sole_node,
                         sole_local, rowerr, tol_p, tol_r)
        if _hard_error(table, e, tol_p, tol_r, row_any, -1) > 1.0:
            flags |= F_HARD_MISSED
        if worst > INEQ_TOL:
            flags |= F_INEQ_MISSED
    return flags, used


@njit(cache=True)
def retarget_frames(model, gnode, gkind, gref, gaxis, gw0, gvec0, row_body, row_rot, tp, tR, contact, contact_start,
                    body_node, sole_height, rest_R, hold_p, hold_R, landing, lims, lower,
                    upper, step, tol_p, tol_r, q, iterations, first_iterations, fresh, damping, fallback_iterations, ctables,
                    n_rows, margin, clearance, cutoff, sole_node, sole_local, out_q, out_err, out_flags, out_iters):
    """Retarget every frame (see the module docstring). tp (F, B, 3), tR (F, B, 3, 3) targets per
    body; contact (F, B); contact_start (F, B): a contact begins (its hold is taken: the foot where
    it is, on the floor, flat with its heading; body_node, sole_height [m], rest_R (B, 3, 3): each
    body's node, its link's height above the floor when flat, its rest orientation); hold_p (B, 3),
    hold_R (B, 3, 3), landing (B,) bool: the holds and the landing feet (see the module docstring), kept
    between calls; row_body, row_rot (G,): the body of each goal row and whether it is a rotation row. q (dof,): the start of frame 0 (changed in place); ``fresh``: frame 0 is the clip's
    first (first_iterations, no step bound), else it continues from the previous frame's q. Writes out_q (F, dof),
    out_err (F, G) each row's error [m or rad], out_flags (F,) and out_iters (F,)."""
    F = tp.shape[0]
    G = gnode.shape[0]
    dof = q.shape[0]
    n = model[0].shape[0]
    gvec = gvec0.copy()
    gw = gw0.copy()
    gR = np.zeros((G, 3, 3))
    glevel = np.ones(G, dtype=np.int64)
    soft_buf = np.empty(3 * G, dtype=np.int64)
    hard_buf = np.empty(3 * G, dtype=np.int64)
    ws = core_workspace(n, dof, gvec, gR, 3 * G, 0)
    wvec, wR = ws[10], ws[11]
    e = ws[4]  # the goal rows' weighted residual at q after every _eval (_project ends with one)
    nr = max(n_rows, 1)
    nc = n_rows + sole_node.shape[0]
    mp = 3 * G + nc
    cb = (np.empty(nr), np.empty((nr, dof)), np.empty(nr, dtype=np.int64), np.empty(nr, dtype=np.int64),
          np.empty((6, dof)))
    # cb, Jc, ec, Jc2, ec2, Jp, ep, idx, then core_active_step's scratch for mp rows: Jm, Z, S, r, lam,
    # col, H, dq, qn, hold, zero
    sc = core_step_scratch(mp, dof, mp)  # H, Jm, Z, S, r, lam, col
    pb = (cb, np.empty((nc, dof)), np.empty(nc), np.empty((nc, dof)), np.empty(nc), np.empty((mp, dof)),
          np.empty(mp), np.empty(mp, dtype=np.int64), sc[1], sc[2], sc[3], sc[4], sc[5], sc[6], sc[0],
          np.empty(dof), np.empty(dof), np.empty(dof), np.zeros(dof))
    lo = np.empty(dof)
    hi = np.empty(dof)
    rowerr = np.empty(G)
    Tb = np.empty((n, 4, 4))
    q_start = np.empty(dof)
    for f in range(F):
        first = f == 0 and fresh
        for b in range(contact.shape[1]):
            if contact[f, b] and (contact_start[f, b] or first):
                _new_hold(model, q, body_node[b], sole_height[b], rest_R[b], Tb, hold_p[b], hold_R[b])
                landing[b] = False
            elif not contact[f, b]:
                landing[b] = False
        for i in range(dof):
            q_start[i] = q[i]
        bounded = not first
        for i in range(dof):
            lo[i] = max(lower[i], q[i] - step[i]) if bounded else lower[i]
            hi[i] = min(upper[i], q[i] + step[i]) if bounded else upper[i]
        ns, nh = _frame_rows(f, tp, tR, contact, landing, row_body, row_rot, gvec0, gw0, hold_p, hold_R, gvec, gR,
                             wvec, wR, gw, glevel, soft_buf, hard_buf)
        table = (gnode, gkind, gref, glevel, gvec, gR, gaxis, gw, soft_buf[:ns], hard_buf[:nh])
        flags, used = _solve_frame(model, table, lims, lo, hi, lower, upper, q, ws, pb, ctables, margin, clearance,
                                   cutoff, sole_node, sole_local, rowerr, tol_p, tol_r, iterations, first_iterations,
                                   fallback_iterations, damping, bounded)
        # a contact whose hold the robot cannot meet on its first frame (a stance wider than its legs
        # and ankles allow with both feet flat): the frame again, the foot landing where it can
        again = False
        for b in range(contact.shape[1]):
            if contact[f, b] and (contact_start[f, b] or first) and \
                    _hard_error(table, e, tol_p, tol_r, row_body, b) > 1.0:
                landing[b] = True
                again = True
        if again:
            for i in range(dof):
                q[i] = q_start[i]
            ns, nh = _frame_rows(f, tp, tR, contact, landing, row_body, row_rot, gvec0, gw0, hold_p, hold_R, gvec,
                                 gR, wvec, wR, gw, glevel, soft_buf, hard_buf)
            table = (gnode, gkind, gref, glevel, gvec, gR, gaxis, gw, soft_buf[:ns], hard_buf[:nh])
            flags, more = _solve_frame(model, table, lims, lo, hi, lower, upper, q, ws, pb, ctables, margin,
                                       clearance, cutoff, sole_node, sole_local, rowerr, tol_p, tol_r, iterations,
                                       first_iterations, fallback_iterations, damping, bounded)
            flags |= F_FALLBACK
            used += more
        for b in range(contact.shape[1]):  # down and flat: held from here on where it stands
            if contact[f, b] and landing[b] and _hard_error(table, e, tol_p, tol_r, row_body, b) <= 1.0:
                _new_hold(model, q, body_node[b], sole_height[b], rest_R[b], Tb, hold_p[b], hold_R[b])
                landing[b] = False
        for i in range(dof):
            out_q[f, i] = q[i]
        for g in range(G):
            out_err[f, g] = rowerr[g]
        out_flags[f] = flags
        out_iters[f] = used
