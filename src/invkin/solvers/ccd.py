"""Cyclic coordinate descent: Welman's CCD with position and orientation, and the simple CCD.

One iteration is one sweep over the joints from the tip to the root (node indices descending, so
every joint is visited after all the joints below it). At each joint only that joint moves; the
goal frames it carries are updated at once (a rigid motion about the joint) before the next
joint is visited.

``variant="welman"`` (default; Welman 1993, §4.2.1, SEEDS.md §5). For a revolute joint with world
axis ``a`` at the point ``j``, maximise over the joint's rotation Φ

    g(Φ) = k1 (1 − cosΦ) + k2 cosΦ + k3 sinΦ,
    k1 = Σ w (t·a)(e·a),   k2 = Σ w (t·e),   k3 = a · Σ w (e × t),

summed over the vector pairs (e current, t desired) of every goal whose frame the joint moves:

* Position goal: e = P_ic = p_frame − j, t = P_id = p_target − j, weight
  w_p = gw² α (1 + ρ), α = k / W, ρ = min(|P_id|, |P_ic|) / max(|P_id|, |P_ic|), with W the reach
  radius of the goal frame's chain (the world scale, :func:`world_scale`) and k the option
  ``position_gain`` (Welman's α = k/W; note that g1 is in m², so the balance between position
  and orientation still depends on the model's size: raise k for small models).
* Rotation goal: the three pairs (u_jc, u_jd), the world axes of the frame and of the target —
  the columns of our rotation matrices, which are the rows u_j of Welman's row-vector
  orientation matrix — with w_o = gw².
* Axis goal (``Orientation(axes="z")``): the one pair (R_c · axis, goal direction), w_o = gw².
* Aim goal: a position goal on the virtual point v = p_frame + s R_c·axis, s = |point − p_frame|,
  i.e. the pair (v − j, point − j), with w = gw² / s² (dimensionless like an orientation row;
  when the joint sits at the frame this is exactly the direction pair).

(gw² because g is, up to a constant, minus half the squared error that ``lm`` minimises with
weights gw.) Φ = atan(k3/(k2 − k1)) or Φ ± π — the candidate in (−π, π] with g'' < 0 and the
largest g (:func:`welman_angle`); with limits, the best angle inside the joint's range
(:func:`best_arc_angle`). A joint whose g is flat — amplitude |(k2 − k1, k3)| ≤ 1e-12 Σ w s (|e| + |t|),
s = W for points and 1 for unit axes — cannot move the goal (its axis passes through the goal
point, or the goal axis lies along it) and is not moved: otherwise rounding noise in k2 − k1 and
k3 would choose an arbitrary angle every sweep. Stiffness: q_i ← q_i + w_i Φ, then clamp into
[lower, upper]. The option ``stiffness`` gives Welman's w_i ∈ [0, 1] directly (one number for every
joint, or one per q entry; 0 freezes a joint); without it w_i = min_j(jw_j) / jw_i from
``joint_weights`` (stiffnesses as in the weighted least-norm methods: the loosest joint moves
fully, a joint twice as heavy half as far; default all 1).

* Prismatic joint (eq. 4.24): λ = Σ w (P_d − P_c)·a / Σ w over position goals, weighted by s_i,
  clamped.
* Ball joint: the rotation Q maximising the same objective Σ w t·(Q e) over all of SO(3) —
  Wahba's problem, solved exactly by Horn's quaternion method; with a single position pair this
  is the §4 rule, the smallest rotation (axis e × t, angle acos(ê·t̂)), used directly. Applied
  as a local increment R ← R exp(s_i Wᵀ log Q), W the joint frame's world rotation, then projected
  onto the joint's swing cone and twist range (``robot.with_limits``) inside the same update
  (:func:`invkin.solvers._rotfit.ball_update`). Three-channel BVH/glTF joints with such a limit are
  projected after every sweep (:func:`invkin.solvers._twist.project_groups`).

Twist (option ``twist``, default ``"previous"``): the smallest rotations turn a ball joint's bone
about itself whenever e is off the bone (8-14°/frame on a tracked 20-bone tail: a candy-wrapper pop
on a skinned character). A bone's twist moves no goal when only its child ball joint and points on
its line hang from it, so after the sweeps every such bone gets back the twist it had at the start
of the solve, its child turning back by the same angle (:func:`invkin.solvers._twist.resolve_twist`);
``"free"`` keeps whatever the sweeps left.

``variant="simple"`` (SEEDS.md §4, position goals only): per goal the rotation vector
θ unit(e × t), θ = acos(ê·t̂), averaged with weights gw² over the goals the joint moves; skipped
when |θ| < ``threshold``; a revolute joint takes its projection onto the axis, Φ = θ·a, a ball
joint the whole rotation, a prismatic joint λ as above. ``threshold="article"`` is the article's
0.001 rad; ``threshold=None`` (default) means min(0.001 rad, 0.1 · position_tolerance / W): the
article's value unless the requested tolerance needs finer rotations (with 0.001 rad a chain of
reach W stops moving once the tip is within about 0.001 W of the target).

Mimic followers are not visited themselves; their leader's update moves them (full FK then).
Posture goals are ignored. STALLED when the weighted squared residual has not dropped by
1e-4 (relative) within 10 sweeps (a local minimum, a limit, or the stretched pose of an
unreachable target).
"""
from __future__ import annotations

import math
import weakref

import numpy as np
from numba import njit

from ..errors import SolverError
from ..goals import KIND_POSITION
from ..kinematics.kernels import BALL, PRISMATIC, REVOLUTE, fk_all_into
from ..spatial import so3_exp_nb
from ._common import CONVERGED, RUNNING, STALLED, task_eval
from ._iterate import end_iterations
from ._linalg import sqnorm
from ._rotfit import (ball_update, local_quats, best_arc_angle, horn_quat, min_rotation_quat, min_rotvec, quat_from_rotvec,
                      rigid_rotate_about, rigid_translate)
from ._chain import fk_quat, position_errors, sync_ball_q
from ._twist import cone_groups_table, cone_rows, project_groups, resolve_twist, twist_structure

NAME = "ccd"
JOINT_TYPES = ("revolute", "continuous", "prismatic", "ball")
VARIANTS = ("welman", "simple")

STALL_REL = 1e-4    # relative drop of the squared residual that counts as progress
STALL_SWEEPS = 10   # sweeps without such progress -> STALLED
SIMPLE_THRESHOLD = 1e-3  # [rad] SEEDS.md §4: the article's skip threshold, threshold="article"
# A revolute joint whose objective g(Φ) varies by at most FLAT_REL · Σ w s (|e| + |t|) (s: W for
# points, 1 for unit axes) cannot move the goal: its amplitude |(k2 − k1, k3)| = Σ w |e⊥||t⊥| is then
# rounding noise (a goal point on the axis gives |e⊥| ~ 1e-16 W) and the joint is left alone.
FLAT_REL = 1e-12


# --------------------------------------------------------------------------- helpers


@njit(cache=True)
def goal_ancestry(ni, gnode):
    """anc (n, G): anc[i, g] is True when node i is the goal frame or one of its ancestors."""
    n = ni.shape[0]
    G = gnode.shape[0]
    anc = np.zeros((n, G), dtype=np.bool_)
    for g in range(G):
        i = gnode[g]
        while i >= 0:
            anc[i, g] = True
            i = ni[i, 0]
    return anc


@njit(cache=True)
def stiffness_factors(ni, colfac):
    """s (n,): each node's CCD stiffness factor w_i ∈ [0, 1] from the per-column factors ``colfac``
    (dof,) (ball joint: the mean of its 3)."""
    n = ni.shape[0]
    s = np.ones(n)
    for i in range(n):
        c = ni[i, 2]
        if c < 0:
            continue
        w = colfac[c]
        if ni[i, 1] == BALL:
            w = (colfac[c] + colfac[c + 1] + colfac[c + 2]) / 3.0
        s[i] = w
    return s


def column_factors(problem, stiffness) -> np.ndarray:
    """(dof,) Welman's stiffness w_i ∈ [0, 1] per q entry: ``stiffness`` as given (absolute, his
    ``q_i ← q_i + w_i Φ``; a scalar applies to every joint), else relative to ``joint_weights``,
    min(jw) / jw (the loosest joint moves fully, a joint twice as heavy half as far)."""
    dof = problem.dof
    if stiffness is None:
        jw = problem.joint_weights
        return jw.min() / jw if dof else np.ones(0)
    if problem.joint_weights is not problem.robot.unit_weights:
        raise SolverError("ccd: give either joint_weights (relative stiffness) or the option stiffness "
                          "(Welman's absolute w_i in [0, 1]), not both")
    try:
        w = np.array(np.broadcast_to(np.asarray(stiffness, dtype=np.float64), (dof,)))
    except (TypeError, ValueError):
        raise SolverError(f"ccd: stiffness must be one number or {dof} numbers in [0, 1], got {stiffness!r:.200}") \
            from None
    if not np.all((w >= 0.0) & (w <= 1.0)):  # also rejects NaN
        raise SolverError(f"ccd: stiffness must be in [0, 1] (Welman's w_i; 0 freezes a joint), got {w.tolist()}")
    return w


@njit(cache=True)
def set_joint(q, c, m, d, lower, upper):
    """q[c] += d / m, clamped into [lower[c], upper[c]]; returns the change actually made to
    θ = m q + offset (d in θ's units: rad for a hinge, m for a slider)."""
    old = q[c]
    v = old + d / m
    if v < lower[c]:
        v = lower[c]
    elif v > upper[c]:
        v = upper[c]
    q[c] = v
    return m * (v - old)


@njit(cache=True)
def set_revolute(q, c, m, dth, lower, upper):
    """q[c] += dth / m, clamped (continuous joints wrapped into (−π, π]); returns the actual Δθ."""
    actual = set_joint(q, c, m, dth, lower, upper)
    v = q[c]
    if math.isinf(lower[c]) and math.isinf(upper[c]) and (m == 1.0 or m == -1.0) and abs(v) > math.pi:
        q[c] = v - 2.0 * math.pi * math.floor((v + math.pi) / (2.0 * math.pi))
    return actual


@njit(cache=True)
def welman_terms(ev, tv, ax, ay, az, w, S):
    """One vector pair (e current, t desired, weight w) at a joint with world axis a.

    Adds ``w e tᵀ`` to Horn's ``S`` and returns the pair's terms of Welman's k1, k2, k3
    (eqs. 4.20-4.22): ``(w (t·a)(e·a), w t·e, w a·(e × t))``.
    """
    ea = ev[0] * ax + ev[1] * ay + ev[2] * az
    ta = tv[0] * ax + tv[1] * ay + tv[2] * az
    for r in range(3):
        for k in range(3):
            S[r, k] += w * ev[r] * tv[k]
    return (w * ta * ea, w * (tv[0] * ev[0] + tv[1] * ev[1] + tv[2] * ev[2]),
            w * (ax * (ev[1] * tv[2] - ev[2] * tv[1]) + ay * (ev[2] * tv[0] - ev[0] * tv[2])
                 + az * (ev[0] * tv[1] - ev[1] * tv[0])))


@njit(cache=True)
def sweep_progress(cost, best, small):
    """The stall rule of ccd and fabrik → (best, small): a sweep whose squared residual ``cost``
    falls below ``best (1 − STALL_REL)`` is progress (small = 0), any other adds one to small; the
    caller stops with STALLED once small reaches STALL_SWEEPS."""
    if cost < best * (1.0 - STALL_REL):
        return cost, 0.0
    return best, small + 1.0


@njit(cache=True)
def _axis_rotation(ax, ay, az, th, Q):
    so3_exp_nb(ax * th, ay * th, az * th, Q)


# --------------------------------------------------------------------------- kernel


@njit(cache=True)
def ccd_iterate(ni, nf, origin, lower, upper, balls, gnode, gkind, gvec, gR, gaxis, gw, q_rest, w_post, jw,
                tol_p, tol_r, q, max_iter, state, simple, k_pos, threshold, gscale, visit, colfac, cone, tw_axes,
                tw_modes, twist, groups, grows):
    """Run up to ``max_iter`` CCD sweeps on q (in place), joints from the tip to the root.

    Welman (1993 §4.2.1, SEEDS.md §5), at a revolute joint with world axis a at j: over the goal
    vector pairs (e, t) it moves (position: P_ic, P_id with w_p = gw² (k/W)(1 + ρ); rotation:
    the frame's world axes with w_o = gw²), k1 = Σ w (t·a)(e·a), k2 = Σ w t·e,
    k3 = a·Σ w e × t; Φ maximises g(Φ) = k1(1 − cosΦ) + k2 cosΦ + k3 sinΦ inside the limits;
    q ← clamp(q + w_i Φ), no move when g is flat (|(k2 − k1, k3)| ≤ FLAT_REL Σ w s (|e| + |t|)). Prismatic: λ = Σ w (P_d − P_c)·a / Σ w. Ball: Q = argmax Σ w t·(Q e)
    (Horn; one position pair: the smallest rotation e → t), R ← R exp(s Wᵀ log Q).
    ``simple`` (SEEDS.md §4): per position goal θ unit(e × t), θ = acos(ê·t̂), weighted mean;
    skipped below ``threshold``; revolute Φ = θ·a. The goal frames move with each joint at once.

    state (8,): [best squared residual (0: fresh), sweeps done, position error, rotation error,
    sweeps without progress, ...]. gscale (G,): world scale W of each goal [m]. visit (n,):
    0 skip the node, 1 visit its joint, 2 visit it and refresh the whole FK after (mimic leader).
    colfac (dof,): Welman's stiffness w_i ∈ [0, 1] per q entry (:func:`column_factors`).
    Returns RUNNING, CONVERGED or STALLED.
    """
    dof = q.shape[0]
    G = gnode.shape[0]
    n = ni.shape[0]
    Tall = np.empty((n, 4, 4))
    Tg = np.empty((G, 4, 4))
    Jf = np.empty((6, dof))
    e = np.empty(3 * G)
    J = np.empty((0, dof))  # task_eval: residual and errors only
    errs = np.empty(20)  # task_eval uses the tail as scratch
    anc = goal_ancestry(ni, gnode)
    sfac = stiffness_factors(ni, colfac)
    one_point = np.full(n, -1, np.int64)  # the one goal a node moves when that is a position goal
    if not simple:
        for i in range(n):
            cnt = 0
            for g in range(G):
                if anc[i, g] and gw[g] > 0.0:
                    cnt += 1
                    one_point[i] = g if gkind[g] == 0 else -2
            if cnt != 1 or one_point[i] < 0:
                one_point[i] = -1
    Q = np.empty((3, 3))
    S = np.empty((3, 3))
    rv = np.empty(3)
    rg = np.empty(3)
    ev = np.empty(3)
    tv = np.empty(3)
    Lq = np.empty((n, 4))  # the ball joints' quaternions, kept in step with q by ball_update
    local_quats(ni, q, Lq)
    # position goals only and no mimic leader: ball rotations live in Lq during the call, q is written
    # at its end (_chain.sync_ball_q), the frames come from Lq (_chain.fk_quat)
    lazy = True
    for g in range(G):
        if gkind[g] != 0:
            lazy = False
    for i in range(n):
        if visit[i] == 2:
            lazy = False
    task_eval(ni, nf, origin, q, gnode, gkind, gvec, gR, gaxis, gw, Tall, Jf, e, J, errs)
    Rref = Tall[:, :3, :3].copy() if twist else Tall[:1, :3, :3].copy()  # the frames the twist is kept from
    cost = sqnorm(e)
    best = state[0] if state[0] > 0.0 else cost
    small = state[4]
    code = RUNNING
    it = 0
    while it < max_iter:
        if errs[0] <= tol_p and errs[1] <= tol_r:
            code = CONVERGED
            break
        it += 1
        for g in range(G):
            Tg[g, :, :] = Tall[gnode[g]]
        for i in range(n - 1, -1, -1):
            if visit[i] == 0 or sfac[i] == 0.0:
                continue  # a fixed joint, a mimic follower or a frozen joint (w_i = 0)
            jt = ni[i, 1]
            c = ni[i, 2]
            m = nf[i, 3]
            Ti = Tall[i]
            jx = Ti[0, 3]
            jy = Ti[1, 3]
            jz = Ti[2, 3]
            ax = ay = az = 0.0  # the joint's world axis (not needed by the one-point ball branch)
            if jt != BALL or one_point[i] < 0:
                ax = Ti[0, 0] * nf[i, 0] + Ti[0, 1] * nf[i, 1] + Ti[0, 2] * nf[i, 2]
                ay = Ti[1, 0] * nf[i, 0] + Ti[1, 1] * nf[i, 1] + Ti[1, 2] * nf[i, 2]
                az = Ti[2, 0] * nf[i, 0] + Ti[2, 1] * nf[i, 1] + Ti[2, 2] * nf[i, 2]
            moved = False
            if jt == PRISMATIC:
                if m == 0.0:
                    continue
                num = 0.0
                den = 0.0
                for g in range(G):
                    if not anc[i, g] or gw[g] <= 0.0 or gkind[g] != 0:
                        continue
                    w = gw[g] * gw[g]
                    num += w * ((gvec[g, 0] - Tg[g, 0, 3]) * ax + (gvec[g, 1] - Tg[g, 1, 3]) * ay
                                + (gvec[g, 2] - Tg[g, 2, 3]) * az)
                    den += w
                if den == 0.0:
                    continue
                lam = sfac[i] * num / den
                act = set_joint(q, c, m, lam, lower, upper)
                for g in range(G):
                    if anc[i, g]:
                        rigid_translate(Tg[g], act * ax, act * ay, act * az)
                moved = act != 0.0
            elif jt == BALL and one_point[i] >= 0:
                # the joint moves one position goal: Welman's best rotation is the smallest one,
                # e = p − j onto t = p* − j (the general branch below gives the same), and only
                # the goal's point needs to turn with it
                g = one_point[i]
                P = Tg[g]
                dw, dx, dy, dz = min_rotation_quat(P[0, 3] - jx, P[1, 3] - jy, P[2, 3] - jz,
                                                   gvec[g, 0] - jx, gvec[g, 1] - jy, gvec[g, 2] - jz)
                ball_update(q, c, lower, upper, Ti, dw, dx, dy, dz, sfac[i], cone, i, Lq, Q, not lazy)
                ex, ey, ez = P[0, 3] - jx, P[1, 3] - jy, P[2, 3] - jz
                P[0, 3] = jx + Q[0, 0] * ex + Q[0, 1] * ey + Q[0, 2] * ez
                P[1, 3] = jy + Q[1, 0] * ex + Q[1, 1] * ey + Q[1, 2] * ez
                P[2, 3] = jz + Q[2, 0] * ex + Q[2, 1] * ey + Q[2, 2] * ez
                moved = True
            elif jt == REVOLUTE or jt == BALL:
                if jt == REVOLUTE and m == 0.0:
                    continue
                k1 = 0.0
                k2 = 0.0
                k3 = 0.0
                S[:, :] = 0.0
                npairs = 0
                pos_only = True
                wsum = 0.0
                kscale = 0.0
                rg[:] = 0.0
                for g in range(G):
                    if not anc[i, g] or gw[g] <= 0.0:
                        continue
                    kind = gkind[g]
                    w2 = gw[g] * gw[g]
                    T = Tg[g]
                    sc = 1.0  # length scale of the pair's vectors: W for points, 1 for unit axes
                    nrows = 1
                    if kind == 1:
                        nrows = 3
                    for row in range(nrows):
                        if kind == 0:
                            for k in range(3):
                                ev[k] = T[k, 3] - Ti[k, 3]
                                tv[k] = gvec[g, k] - Ti[k, 3]
                            if simple:
                                min_rotvec(ev[0], ev[1], ev[2], tv[0], tv[1], tv[2], rv)
                                for k in range(3):
                                    rg[k] += w2 * rv[k]
                                wsum += w2
                                continue
                            ne = math.sqrt(ev[0] * ev[0] + ev[1] * ev[1] + ev[2] * ev[2])
                            nt = math.sqrt(tv[0] * tv[0] + tv[1] * tv[1] + tv[2] * tv[2])
                            mx = max(ne, nt)
                            rho = 1.0 if mx == 0.0 else min(ne, nt) / mx
                            w = w2 * (k_pos / gscale[g]) * (1.0 + rho)
                            sc = gscale[g]
                        elif kind == 1:
                            pos_only = False
                            for k in range(3):
                                ev[k] = T[k, row]
                                tv[k] = gR[g, k, row]
                            w = w2
                        elif kind == 2:
                            pos_only = False
                            for k in range(3):
                                ev[k] = T[k, 0] * gaxis[g, 0] + T[k, 1] * gaxis[g, 1] + T[k, 2] * gaxis[g, 2]
                                tv[k] = gvec[g, k]
                            w = w2
                        else:  # aim: the virtual point at the target's distance along the axis
                            pos_only = False
                            dx = gvec[g, 0] - T[0, 3]
                            dy = gvec[g, 1] - T[1, 3]
                            dz = gvec[g, 2] - T[2, 3]
                            s = math.sqrt(dx * dx + dy * dy + dz * dz)
                            if s < 1e-12:
                                continue
                            for k in range(3):
                                a_k = T[k, 0] * gaxis[g, 0] + T[k, 1] * gaxis[g, 1] + T[k, 2] * gaxis[g, 2]
                                ev[k] = T[k, 3] + s * a_k - Ti[k, 3]
                                tv[k] = gvec[g, k] - Ti[k, 3]
                            w = w2 / (s * s)
                            sc = gscale[g]
                        npairs += 1
                        if jt == REVOLUTE:  # the flat-g test of a hinge
                            kscale += w * sc * (math.sqrt(ev[0] * ev[0] + ev[1] * ev[1] + ev[2] * ev[2])
                                                + math.sqrt(tv[0] * tv[0] + tv[1] * tv[1] + tv[2] * tv[2]))
                        # k1, k2, k3 (eqs. 4.20-4.22) and Horn's S = Σ w e tᵀ
                        d1, d2, d3 = welman_terms(ev, tv, ax, ay, az, w, S)
                        k1 += d1
                        k2 += d2
                        k3 += d3
                if simple:
                    if wsum == 0.0:
                        continue
                    for k in range(3):
                        rg[k] /= wsum
                    ang = math.sqrt(rg[0] * rg[0] + rg[1] * rg[1] + rg[2] * rg[2])
                    if ang < threshold:
                        continue
                    if jt == REVOLUTE:
                        phi = rg[0] * ax + rg[1] * ay + rg[2] * az
                        act = set_revolute(q, c, m, sfac[i] * phi, lower, upper)
                        if act == 0.0:
                            continue
                        _axis_rotation(ax, ay, az, act, Q)
                    else:
                        dw, dx, dy, dz = quat_from_rotvec(rg[0], rg[1], rg[2])
                        ball_update(q, c, lower, upper, Ti, dw, dx, dy, dz, sfac[i], cone, i, Lq, Q, not lazy)
                else:
                    if npairs == 0:
                        continue
                    if jt == REVOLUTE:
                        if math.sqrt((k2 - k1) * (k2 - k1) + k3 * k3) <= FLAT_REL * kscale:
                            # g(Φ) is flat: the axis passes through the goal points (or the goal
                            # axes lie along it), so the joint cannot move the goal and rounding
                            # noise would pick an arbitrary angle; it stays where it is
                            continue
                        # the joint's feasible rotation interval, in θ = m q + offset, for Φ:
                        # the step is w_i Φ, so Φ may range over the interval divided by w_i
                        lo = m * (lower[c] - q[c]) / sfac[i]
                        hi = m * (upper[c] - q[c]) / sfac[i]
                        if lo > hi:
                            lo, hi = hi, lo
                        phi = best_arc_angle(k1, k2, k3, min(lo, 0.0), max(hi, 0.0))
                        act = set_revolute(q, c, m, sfac[i] * phi, lower, upper)
                        if act == 0.0:
                            continue
                        _axis_rotation(ax, ay, az, act, Q)
                    else:
                        if npairs == 1 and pos_only:
                            dw, dx, dy, dz = min_rotation_quat(ev[0], ev[1], ev[2], tv[0], tv[1], tv[2])
                        else:
                            dw, dx, dy, dz = horn_quat(S)
                        ball_update(q, c, lower, upper, Ti, dw, dx, dy, dz, sfac[i], cone, i, Lq, Q, not lazy)
                for g in range(G):
                    if anc[i, g]:
                        rigid_rotate_about(Tg[g], Q, jx, jy, jz)
                moved = True
            if moved and visit[i] == 2:
                fk_all_into(ni, nf, origin, q, Tall)
                for g in range(G):
                    Tg[g, :, :] = Tall[gnode[g]]
        if groups.shape[0] > 0:  # three-channel joints: their cone/twist limits after every sweep
            project_groups(ni, nf, q, lower, upper, groups, grows)
        if lazy:  # position goals only: the frames from Lq, no trigonometry
            fk_quat(ni, nf, origin, q, Lq, Tall, 0, n)
            errs[0], cost = position_errors(gnode, gkind, gvec, gw, Tall)
            errs[1] = 0.0
        else:
            task_eval(ni, nf, origin, q, gnode, gkind, gvec, gR, gaxis, gw, Tall, Jf, e, J, errs)
            cost = sqnorm(e)
        best, small = sweep_progress(cost, best, small)
        if small >= STALL_SWEEPS:
            code = STALLED
            break
    if lazy:
        sync_ball_q(ni, Lq, q, lower, upper)
    if twist and it > 0:
        resolve_twist(ni, q, tw_axes, tw_modes, cone, lower, upper, math.inf, Rref, Tall)  # Tall: FK(q)
    state[0] = best
    state[4] = small
    return end_iterations(code, it, errs[0], errs[1], tol_p, tol_r, state)


# --------------------------------------------------------------------------- Python side

_ROBOT_CACHE: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def visit_flags(robot) -> np.ndarray:
    """(n,) int64: 0 for fixed joints and mimic followers, 1 for other moving joints, 2 for a
    mimic leader (moving it moves nodes outside its subtree: refresh the whole FK)."""
    cache = _ROBOT_CACHE.setdefault(robot, {})
    v = cache.get("visit")
    if v is None:
        n = robot.n_nodes
        v = np.zeros(n, dtype=np.int64)
        follower_cols = set()
        for i in range(n):
            if robot.qidx[i] >= 0 and robot.mimic_leader[i]:
                follower_cols.add(int(robot.qidx[i]))
        for i in range(n):
            if robot.qidx[i] < 0 or robot.mimic_leader[i]:
                continue
            v[i] = 2 if int(robot.qidx[i]) in follower_cols else 1
        v.setflags(write=False)
        cache["visit"] = v
    return v


def world_scale(robot, node: int) -> float:
    """Welman's world scale W [m] for a goal frame: the reach radius of its chain — the link
    offsets after the first moving joint plus the finite travel of prismatic joints (unbounded
    travel, e.g. a BVH root translation, is left out). 1 when that is zero."""
    path = robot.ancestors(node)[::-1]  # root first
    first = next((k for k, i in enumerate(path) if robot.qidx[i] >= 0), None)
    if first is None:
        return 1.0
    radius = sum(float(np.linalg.norm(robot.origin[i][:3, 3])) for i in path[first + 1:])
    for i in path[first:]:
        if robot.joint_type[i] == PRISMATIC and robot.qidx[i] >= 0:
            c = int(robot.qidx[i])
            travel = abs(robot.multiplier[i]) * max(abs(robot.lower[c]), abs(robot.upper[c]))
            if math.isfinite(travel):
                radius += travel
    return radius if radius > 1e-9 else 1.0


def goal_scales(problem) -> np.ndarray:
    """(G,) Welman's world scale W [m] of each goal frame (:func:`world_scale`), cached per robot."""
    robot = problem.robot
    cache = _ROBOT_CACHE.setdefault(robot, {})
    radii = cache.setdefault("scale", {})
    out = np.empty(problem.gnode.shape[0])
    for g, node in enumerate(problem.gnode):
        node = int(node)
        if node not in radii:
            radii[node] = world_scale(robot, node)
        out[g] = radii[node]
    return out


def _options(problem, options):
    variant = options.get("variant", "welman")
    if variant not in VARIANTS:
        raise SolverError(f"ccd: variant must be one of {', '.join(map(repr, VARIANTS))}, got {variant!r}")
    simple = variant == "simple"
    if simple and not problem.is_position_only():
        raise SolverError("ccd variant='simple' handles Position goals only (SEEDS.md §4); "
                          "use variant='welman' for orientation, axis and aim goals")
    k_pos = options.get("position_gain", 1.0)
    if isinstance(k_pos, bool) or not isinstance(k_pos, (int, float, np.integer, np.floating)) \
            or not (k_pos > 0 and math.isfinite(k_pos)):
        raise SolverError(f"ccd: position_gain must be a finite number > 0, got {k_pos!r}")
    scales = goal_scales(problem)
    thr = options.get("threshold", None)
    if isinstance(thr, str):
        if thr != "article":
            raise SolverError(f"ccd: threshold must be a number >= 0 [rad], None or 'article' (the article's "
                              f"{SIMPLE_THRESHOLD} rad), got {thr!r}")
        thr = SIMPLE_THRESHOLD
    elif thr is None:
        thr = SIMPLE_THRESHOLD
        pos = problem.gkind == KIND_POSITION
        if np.any(pos):
            thr = min(thr, 0.1 * problem.tol_p / float(np.max(scales[pos])))
    elif isinstance(thr, bool) or not isinstance(thr, (int, float, np.integer, np.floating)) \
            or not (thr >= 0 and math.isfinite(thr)):
        raise SolverError(f"ccd: threshold must be a finite number >= 0 [rad], None or 'article', got {thr!r}")
    colfac = column_factors(problem, options.get("stiffness", None))
    return simple, float(k_pos), float(thr), scales, colfac


def kernel_call(problem, options):
    """(kernel, tail): ``kernel(*problem.args, q, max_iter, state, *tail)`` runs the sweeps; the
    driver (:func:`_iterate`) and :class:`invkin.Tracker` (which keeps ``tail`` between updates) both
    call it so."""
    simple, k_pos, thr, scales, colfac = _options(problem, options)
    twist = twist_option("ccd", options)
    tw_axes, tw_modes = twist_structure(problem.robot, problem)
    return ccd_iterate, (simple, k_pos, thr, scales, visit_flags(problem.robot), colfac, cone_rows(problem.robot),
                         tw_axes, tw_modes, twist, *cone_groups_table(problem.robot))


def _iterate(problem, q, max_iter, state, options):
    kernel, tail = kernel_call(problem, options)
    return kernel(*problem.args, q, max_iter, state, *tail)


def twist_option(method, options) -> bool:
    """The option ``twist``: "previous" (default: every free bone keeps its twist from the start of the
    solve, :func:`invkin.solvers._twist.resolve_twist`) or "free" (whatever the updates leave)."""
    tw = options.get("twist", "previous")
    if tw not in ("previous", "free"):
        raise SolverError(f"{method}: twist must be 'previous' or 'free', got {tw!r}")
    return tw == "previous"


def _register():
    from . import Method, register

    register(Method(NAME, _iterate,
                    "cyclic coordinate descent (Welman: position + orientation, limits, stiffness; or simple)",
                    JOINT_TYPES, defaults=dict(variant="welman", threshold=None, position_gain=1.0, stiffness=None,
                                  twist="previous")))


_register()
