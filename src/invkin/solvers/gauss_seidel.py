"""Springhead2's multi-control-point IK: block Jacobian, Gauss–Seidel on the normal equations
(SEEDS.md §3).

Control points are the goal rows (position, orientation, axis, aim); joint nodes are the moving
joints (one per q index: mimic followers join their leader's node). Block ``J[c][n]`` is control
point c's motion from node n alone (zero unless n is an ancestor of c's frame):

* hinge + position: ``e_n × r(c, n)``; hinge + orientation: ``e_n``; slide + position: ``e_n``;
* ball + position (the node's only control point): ``[e1 × r, e2 × r]`` (3×2), with
  ``e0 = r/|r|``, ``e1'' = e_x`` (``e_y`` if ``e0 = e_x``), ``e1 = normalise(e1'' − (e1''·e0) e0)``,
  ``e2 = e1 × e0`` (:func:`springhead_ball_position_block`): rotation about r moves nothing, so
  the ball's increment is ``(ω1, ω2)``;
* ball with an orientation control point or several control points: the world angular velocity ω
  (3 unknowns): block ``I`` for orientation, ``−[r]×`` for position.

The blocks are read off the stacked task Jacobian of ``task_eval`` (so goal weights and the
axis/aim rows come for free): a ball's world-axis columns are ``J_b R_nodeᵀ``. A ball unknown ω
(world) is applied as the local increment ``R_nodeᵀ ω`` (the kernels' convention, ``R exp(d)``).

Each outer iteration: (1) J; (2) goal velocity ``v = gain · e`` toward the target; (3) a few
Gauss–Seidel sweeps on ``(JᵀJ) ω = Jᵀ v`` starting from ω = 0,
``ω_i = (β_i − Σ_{j≠i} γ_ij ω_j) / α_i`` with, restricted to ``Cp_n`` (control points node n
moves) and ``Nd_n`` (nodes sharing one with n), ``α_i = Σ_{c∈Cp_n} |J[c][n]_{:,i}|²``,
``β_i = Σ_{c∈Cp_n} J[c][n]_{:,i}ᵀ v_c``, ``γ_ij = Σ_{c∈Cp_n∩Cp_m} J[c][n]_{:,i}ᵀ J[c][m]_{:,j}``;
(4) ``θ ← clamp(θ ⊕ ω)`` (capped at ``max_step``). The sets are built once per problem from the
tree and the goal frames. A Posture goal adds the rows ``w_p I ω = w_p (q_rest ⊖ q)``
(``α += w_p²``, ``β += w_p² (q_rest ⊖ q)``) until the attempt settles on that compromise short of
the goals; then the posture yields (the lowest priority, as in transpose) and the goals converge
from there, near the rest posture.

Rest springs (§5.1), options ``theta_orig`` (dof,), ``p_orig`` ≥ 0, ``p_ik`` > 0 (one number or
one per q entry): Springhead moves a joint by changing the reference angle of its spring, and a
second spring pulls toward the original reference. Inside the loop, step (4) moves the IK
reference, ``θ_ik ← clamp(θ_ik ⊕ ω)``, and the joint settles at the springs' equilibrium
``θ = (p_orig θ_orig + p_ik θ_ik)/(p_orig + p_ik)`` (eq. 24) before the next J. ω is always
computed at the settled θ, so the reference keeps moving until the goal is met: the springs slow
the motion by ``p_ik/(p_orig + p_ik)`` and keep it near θ_orig, and the goal is lost only when
θ_ik would have to leave the joint range, i.e. when p_orig ≫ p_ik (then the attempt stalls).
The springs are the method's per-joint stiffness: ``joint_weights`` are refused (SolverError),
since Gauss–Seidel takes the same step whatever the scale of each unknown (ω_i = D_i ω̃_i gives
α̃_i = D_i² α_i, β̃_i = D_i β_i, γ̃_ij = D_i D_j γ_ij: the same ω).
:func:`invkin.motion.solve_with_rest` and ``solve(rest=...)`` run it and report a lost goal.
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit

from ..errors import SolverError
from ..goals import KIND_POSITION
from ..kinematics.kernels import BALL
from ._common import CONVERGED, LAYOUTS_KEPT, RUNNING, STALLED, posture_residual, step_and_clamp, task_eval
from ._iterate import end_iterations
from ._linalg import cap_step, sqnorm
from .jacobian import S_BEST, S_POSTURE_OFF, S_REF, S_SINCE, _positive, _track_best, problem_scratch, restore_best, \
    start_attempt

NAME = "gauss-seidel"
JOINT_TYPES = ("revolute", "continuous", "prismatic", "ball")
MAX_SWEEPS = 1000  # the most Gauss-Seidel sweeps per iteration (option sweeps)

VAR_SCALAR = 0  # hinge / slide: one column of J
VAR_BALL2 = 1   # ball, one position control point: component k of (ω1, ω2)
VAR_BALL3 = 2   # ball, general: component k of the world angular velocity


# --------------------------------------------------------------------------- ball block


@njit(cache=True)
def _ball_basis(rx, ry, rz, e1, e2):
    """e1, e2 ⟂ e0 = r/|r| as in SEEDS.md §3; returns False when |r| is ~0."""
    n = math.sqrt(rx * rx + ry * ry + rz * rz)
    if n < 1e-12:
        return False
    x0 = rx / n
    y0 = ry / n
    z0 = rz / n
    # e1'' = e_x, or e_y when e0 is (numerically) e_x
    if abs(x0) > 1.0 - 1e-6:
        px, py, pz = 0.0, 1.0, 0.0
    else:
        px, py, pz = 1.0, 0.0, 0.0
    dot = px * x0 + py * y0 + pz * z0
    ax = px - dot * x0
    ay = py - dot * y0
    az = pz - dot * z0
    a = math.sqrt(ax * ax + ay * ay + az * az)
    e1[0] = ax / a
    e1[1] = ay / a
    e1[2] = az / a
    e2[0] = e1[1] * z0 - e1[2] * y0
    e2[1] = e1[2] * x0 - e1[0] * z0
    e2[2] = e1[0] * y0 - e1[1] * x0
    return True


def springhead_ball_position_block(r) -> np.ndarray:
    """Springhead's ball-joint + position block ``[e1 × r, e2 × r]`` (3, 2) for r (3,) [m], the
    vector from the joint centre to the control point (SEEDS.md §3). Its columns are orthogonal
    to r and span the plane ⟂ r (each has length |r|); r = 0 gives zeros."""
    r = np.asarray(r, dtype=np.float64)
    if r.shape != (3,) or not np.all(np.isfinite(r)):
        raise SolverError(f"springhead_ball_position_block: r must be 3 finite numbers, got {r!r}")
    e1 = np.zeros(3)
    e2 = np.zeros(3)
    if not _ball_basis(r[0], r[1], r[2], e1, e2):
        return np.zeros((3, 2))
    return np.stack([np.cross(e1, r), np.cross(e2, r)], axis=1)


# --------------------------------------------------------------------------- sets (Python)


def build_tables(problem):
    """The Cp_n / Nd_n sets and the unknowns, as flat int64 arrays (see module docstring).

    Returns (var_kind, var_col, var_comp, var_node, var_cp, cp_ptr, cp_idx, nbr_ptr, nbr_idx):
    per unknown: kind, q index (first of a ball), component, tree node (for its rotation), the
    control point fixing its basis (ball-2) and its Cp range ``cp_idx[cp_ptr[i]:cp_ptr[i+1]]``
    (goal indices); ``nbr_idx[nbr_ptr[i]:nbr_ptr[i+1]]`` lists the unknowns coupled to i (Nd,
    own node included, i itself excluded).
    """
    robot = problem.robot
    # joint nodes by q index (mimic followers share their leader's)
    groups = {}
    for i in range(robot.n_nodes):
        c = int(robot.qidx[i])
        if c >= 0:
            groups.setdefault(c, []).append(i)
    goal_anc = [set(robot.ancestors(int(n))) for n in problem.gnode]
    cols = sorted(groups)
    cp = {c: [g for g in range(len(goal_anc)) if any(i in goal_anc[g] for i in groups[c])] for c in cols}
    var_kind, var_col, var_comp, var_node, var_cp, owner = [], [], [], [], [], []
    for c in cols:
        nodes = groups[c]
        if not cp[c]:
            continue  # moves no control point
        node = nodes[0]
        if robot.joint_type[node] == BALL:
            single = len(cp[c]) == 1 and problem.gkind[cp[c][0]] == KIND_POSITION
            kind, ncomp = (VAR_BALL2, 2) if single else (VAR_BALL3, 3)
        else:
            kind, ncomp = VAR_SCALAR, 1
        for k in range(ncomp):
            var_kind.append(kind)
            var_col.append(c)
            var_comp.append(k)
            var_node.append(node)
            var_cp.append(cp[c][0])
            owner.append(c)
    nv = len(var_kind)
    cp_ptr = [0]
    cp_idx = []
    for i in range(nv):
        cp_idx.extend(cp[owner[i]])
        cp_ptr.append(len(cp_idx))
    # Nd: unknowns of nodes sharing a control point
    by_goal = {}
    for i in range(nv):
        for g in cp[owner[i]]:
            by_goal.setdefault(g, []).append(i)
    nbr_ptr = [0]
    nbr_idx = []
    for i in range(nv):
        nb = sorted({j for g in cp[owner[i]] for j in by_goal[g]} - {i})
        nbr_idx.extend(nb)
        nbr_ptr.append(len(nbr_idx))
    as_i = lambda x: np.array(x, dtype=np.int64)  # noqa: E731 - local shorthand
    return (as_i(var_kind), as_i(var_col), as_i(var_comp), as_i(var_node), as_i(var_cp), as_i(cp_ptr),
            as_i(cp_idx), as_i(nbr_ptr), as_i(nbr_idx))


def robot_tables(problem):
    """:func:`build_tables` for the problem's goal frames and kinds, built once per robot and kept in
    ``robot.cache["gauss_seidel_tables"]`` (read-only): they depend on nothing else, and building them
    in Python took 30-35 µs of every solve (Panda, UR5: a quarter of a one-iteration solve, and the
    time per iteration the driver measures on its first call)."""
    kept = problem.robot.cache.setdefault("gauss_seidel_tables", {})
    key = (problem.gnode.tobytes(), problem.gkind.tobytes())
    tables = kept.get(key)
    if tables is None:
        if len(kept) >= LAYOUTS_KEPT:
            kept.clear()
        tables = build_tables(problem)
        for a in tables:
            a.setflags(write=False)
        kept[key] = tables
    return tables


# --------------------------------------------------------------------------- kernel


@njit(cache=True)
def spring_point(th_o, th_x, t, lower, upper, balls, rel, out):
    """out = clamp(θ_o ⊕ t ⊙ (θ_x ⊖ θ_o)): the point at fraction t (per entry) of the way from θ_o to
    θ_x, ball joints along the SO(3) geodesic (t = p_ik / (p_orig + p_ik): eq. 24's spring
    equilibrium; t = 1 + p_orig / p_ik: the IK reference whose equilibrium is θ_x). ``rel`` scratch."""
    posture_residual(th_o, th_x, balls, rel)  # θ_x ⊖ θ_o
    for i in range(rel.shape[0]):
        rel[i] *= t[i]
    step_and_clamp(th_o, rel, lower, upper, balls, out)


@njit(cache=True)
def gs_iterate(ni, nf, origin, lower, upper, balls, gnode, gkind, gvec, gR, gaxis, gw, q_rest, w_post, jw,
               tol_p, tol_r, q, max_iter, state, qbest, var_kind, var_col, var_comp, var_node, var_cp, cp_ptr,
               cp_idx, nbr_ptr, nbr_idx, gain, sweeps, max_step, th_orig, ratio, th_ik):
    """Springhead2 block Gauss–Seidel IK (SEEDS.md §3): per iteration ``v = gain · e``, ``sweeps``
    Gauss–Seidel sweeps ``ω_i = (β_i − Σ_{j∈Nd, j≠i} γ_ij ω_j) / α_i`` on ``(JᵀJ) ω = Jᵀ v`` from
    ω = 0 over the Cp/Nd sets, then ``θ ← clamp(θ ⊕ ω)`` (step capped at ``max_step``).

    Rest springs (§5.1, ``th_orig`` (dof,) not empty): IK moves the joints' spring reference
    ``θ_ik ← clamp(θ_ik ⊕ ω)`` (``th_ik``, kept across calls), and every iteration the joint
    settles between the two springs, ``θ = (p_orig θ_orig + p_ik θ_ik)/(p_orig + p_ik)``
    (``ratio`` = p_orig / p_ik per entry, :func:`spring_point`); ω is always computed at that θ.
    A fresh attempt starts with θ_ik at the reference whose equilibrium is the start q.

    state: [-, iterations, position error, rotation error, (driver's), iterations since progress,
    best cost, reference cost]; ``qbest`` keeps the best configuration of the attempt (restored
    on STALLED). Returns RUNNING, CONVERGED or STALLED.
    """
    dof = q.shape[0]
    G = gnode.shape[0]
    m = 3 * G
    nv = var_kind.shape[0]
    Tall = np.empty((ni.shape[0], 4, 4))
    Jf = np.empty((6, dof))
    e = np.empty(m)
    J = np.empty((m, dof))
    errs = np.empty(20)  # task_eval uses the tail as scratch
    B = np.zeros((nv, m))      # block columns, filled on Cp rows only
    bl = np.zeros((nv, 3))     # ball unknowns: local increment per unit ω_i
    alpha = np.empty(nv)
    beta = np.empty(nv)
    gamma = np.empty(nbr_idx.shape[0])
    omega = np.empty(nv)
    pr = np.zeros(dof)
    dq = np.empty(dof)
    qn = np.empty(dof)
    e1 = np.empty(3)
    e2 = np.empty(3)
    if state[S_POSTURE_OFF] != 0.0:  # the posture has yielded to the goals in this attempt
        w_post = 0.0
    w2 = w_post * w_post
    springs = th_orig.shape[0] > 0
    t_settle = np.empty(dof if springs else 0)
    rel = np.empty(dof)
    if springs:
        for c in range(dof):
            t_settle[c] = 1.0 / (1.0 + ratio[c])
        if state[S_BEST] <= 0.0:  # a fresh attempt: θ_ik from the start, θ its equilibrium
            for c in range(dof):
                rel[c] = 1.0 + ratio[c]
            spring_point(th_orig, q, rel, lower, upper, balls, dq, th_ik)
            spring_point(th_orig, th_ik, t_settle, lower, upper, balls, rel, qn)
            for c in range(dof):
                q[c] = qn[c]
    task_eval(ni, nf, origin, q, gnode, gkind, gvec, gR, gaxis, gw, Tall, Jf, e, J, errs)
    cost = 0.5 * sqnorm(e)
    start_attempt(q, qbest, cost, state)
    code = RUNNING
    it = 0
    while it < max_iter:
        if errs[0] <= tol_p and errs[1] <= tol_r:
            code = CONVERGED
            break
        it += 1
        if w_post > 0.0:
            posture_residual(q, q_rest, balls, pr)
        # (1) blocks J[c][n] on the Cp rows, (2) α, β with v = gain e
        for i in range(nv):
            kind = var_kind[i]
            col = var_col[i]
            if kind != VAR_SCALAR:
                node = var_node[i]
                if kind == VAR_BALL2:
                    c0 = gnode[var_cp[i]]
                    ok = _ball_basis(Tall[c0, 0, 3] - Tall[node, 0, 3], Tall[c0, 1, 3] - Tall[node, 1, 3],
                                     Tall[c0, 2, 3] - Tall[node, 2, 3], e1, e2)
                    if not ok:  # control point at the joint centre: the ball cannot move it
                        e1[0] = 0.0
                        e1[1] = 0.0
                        e1[2] = 0.0
                        e2[0] = 0.0
                        e2[1] = 0.0
                        e2[2] = 0.0
                    for a in range(3):  # local increment R_nodeᵀ e_k
                        if var_comp[i] == 0:
                            bl[i, a] = Tall[node, 0, a] * e1[0] + Tall[node, 1, a] * e1[1] + Tall[node, 2, a] * e1[2]
                        else:
                            bl[i, a] = Tall[node, 0, a] * e2[0] + Tall[node, 1, a] * e2[1] + Tall[node, 2, a] * e2[2]
                else:
                    for a in range(3):  # R_nodeᵀ e_k = row k of R_node
                        bl[i, a] = Tall[node, var_comp[i], a]
            a_i = 0.0
            b_i = 0.0
            for p in range(cp_ptr[i], cp_ptr[i + 1]):
                r0 = 3 * cp_idx[p]
                for k in range(3):
                    if kind == VAR_SCALAR:
                        val = J[r0 + k, col]
                    else:
                        val = J[r0 + k, col] * bl[i, 0] + J[r0 + k, col + 1] * bl[i, 1] + J[r0 + k, col + 2] * bl[i, 2]
                    B[i, r0 + k] = val
                    a_i += val * val
                    b_i += val * gain * e[r0 + k]
            if w_post > 0.0:
                a_i += w2
                if kind == VAR_SCALAR:
                    b_i += w2 * pr[col]
                else:
                    b_i += w2 * (bl[i, 0] * pr[col] + bl[i, 1] * pr[col + 1] + bl[i, 2] * pr[col + 2])
            alpha[i] = a_i
            beta[i] = b_i
        # γ over Nd (B[j] is zero outside Cp_j: the sum runs over the shared control points)
        for i in range(nv):
            for p in range(nbr_ptr[i], nbr_ptr[i + 1]):
                j = nbr_idx[p]
                s = 0.0
                for t in range(cp_ptr[i], cp_ptr[i + 1]):
                    r0 = 3 * cp_idx[t]
                    s += B[i, r0] * B[j, r0] + B[i, r0 + 1] * B[j, r0 + 1] + B[i, r0 + 2] * B[j, r0 + 2]
                if w_post > 0.0 and var_col[j] == var_col[i] and var_kind[i] != VAR_SCALAR:
                    s += w2 * (bl[i, 0] * bl[j, 0] + bl[i, 1] * bl[j, 1] + bl[i, 2] * bl[j, 2])
                gamma[p] = s
        # (3) Gauss–Seidel sweeps from ω = 0
        amax = 0.0
        for i in range(nv):
            omega[i] = 0.0
            if alpha[i] > amax:
                amax = alpha[i]
        for _s in range(sweeps):
            for i in range(nv):
                if alpha[i] <= 1e-14 * amax or alpha[i] <= 1e-300:
                    continue
                s = beta[i]
                for p in range(nbr_ptr[i], nbr_ptr[i + 1]):
                    s -= gamma[p] * omega[nbr_idx[p]]
                omega[i] = s / alpha[i]
        # (4) θ ← θ ⊕ ω
        for c in range(dof):
            dq[c] = 0.0
        for i in range(nv):
            col = var_col[i]
            if var_kind[i] == VAR_SCALAR:
                dq[col] += omega[i]
            else:
                for a in range(3):
                    dq[col + a] += omega[i] * bl[i, a]
        big = cap_step(dq, max_step)
        if not (big > 0.0) or not math.isfinite(big):
            code = STALLED
            restore_best(ni, nf, origin, gnode, gkind, gvec, gR, gaxis, gw, q, qbest, Tall, Jf, e, J, errs)
            break
        if springs:  # IK moves the reference, the joint settles between the springs
            step_and_clamp(th_ik, dq, lower, upper, balls, qn)
            for c in range(dof):
                th_ik[c] = qn[c]
            spring_point(th_orig, th_ik, t_settle, lower, upper, balls, rel, qn)
        else:
            step_and_clamp(q, dq, lower, upper, balls, qn)
        for c in range(dof):
            q[c] = qn[c]
        task_eval(ni, nf, origin, q, gnode, gkind, gvec, gR, gaxis, gw, Tall, Jf, e, J, errs)
        cost = 0.5 * sqnorm(e)
        if _track_best(q, qbest, cost, state):
            if errs[0] <= tol_p and errs[1] <= tol_r:
                break
            if w_post > 0.0:
                # settled on the posture's compromise, short of the goals: the posture yields (the
                # lowest priority) and the goals go on from here, near the rest posture
                w_post = 0.0
                w2 = 0.0
                state[S_POSTURE_OFF] = 1.0
                state[S_REF] = cost
                state[S_SINCE] = 0.0
                continue
            code = STALLED
            restore_best(ni, nf, origin, gnode, gkind, gvec, gR, gaxis, gw, q, qbest, Tall, Jf, e, J, errs)
            break
    return end_iterations(code, it, errs[0], errs[1], tol_p, tol_r, state)


# --------------------------------------------------------------------------- registration


NO_SPRINGS = np.empty(0)


def spring_arrays(problem, theta_orig, p_orig, p_ik):
    """(θ_orig (dof,), p_orig / p_ik (dof,)) checked, or empty arrays without ``theta_orig``.

    p_orig ≥ 0 and p_ik > 0 are one number or one per q entry; a ball joint takes the ratio of its
    first entry (one spring per joint, as in :func:`invkin.motion.rest_blend`)."""
    if theta_orig is None and type(p_orig) is float and type(p_ik) is float and p_orig == 0.0 and p_ik == 1.0:
        return NO_SPRINGS, NO_SPRINGS  # (the defaults: no springs; the checks below took 20 µs of every solve)
    robot = problem.robot
    dof = robot.dof
    try:
        th = None if theta_orig is None else np.array(theta_orig, dtype=np.float64)
        po = np.array(np.broadcast_to(np.asarray(p_orig, dtype=np.float64), (dof,)))
        pi = np.array(np.broadcast_to(np.asarray(p_ik, dtype=np.float64), (dof,)))
    except (TypeError, ValueError):
        raise SolverError(f"options theta_orig, p_orig, p_ik: expected ({dof},) angles and springs (one number "
                          f"or {dof}), got {theta_orig!r:.100}, {p_orig!r:.100}, {p_ik!r:.100}") from None
    if not np.all(np.isfinite(po) & (po >= 0)):
        raise SolverError(f"option p_orig: expected springs >= 0, got {po.tolist()}")
    if not np.all(np.isfinite(pi) & (pi > 0)):
        raise SolverError(f"option p_ik: expected springs > 0, got {pi.tolist()}")
    if th is None:
        if np.any(po != 0.0) or np.any(pi != 1.0):  # springs with no rest posture to pull toward: a no-op
            raise SolverError(f"options p_orig, p_ik: the rest springs pull toward theta_orig, which is not "
                              f"given (p_orig={p_orig!r:.100}, p_ik={p_ik!r:.100}); give theta_orig ({dof},) "
                              f"too, or rest=dict(theta_orig=..., p_orig=..., p_ik=...)")
        return NO_SPRINGS, NO_SPRINGS
    if th.shape != (dof,) or not np.all(np.isfinite(th)):
        raise SolverError(f"option theta_orig: expected {dof} finite joint values, got shape {th.shape}")
    ratio = po / pi
    for s in robot.ball_starts:
        ratio[s + 1:s + 3] = ratio[s]
    return np.clip(th, robot.lower, robot.upper), ratio


def _iterate(problem, q, max_iter, state, options):
    gain = _positive("gain", options["gain"])
    if gain > 2.0:
        raise SolverError(f"option gain: expected a number in (0, 2], got {gain!r}")
    sweeps = options["sweeps"]
    if isinstance(sweeps, bool) or not isinstance(sweeps, (int, np.integer)) or not 1 <= sweeps <= MAX_SWEEPS:
        # bounded: one iteration runs every sweep before the driver can look at the clock
        raise SolverError(f"option sweeps: expected an integer in [1, {MAX_SWEEPS}], got {sweeps!r}")
    max_step = _positive("max_step", options["max_step"])
    tables = problem_scratch(problem, "gauss_seidel_tables", lambda: robot_tables(problem))
    qbest = problem_scratch(problem, "qbest", lambda: np.empty(problem.dof))
    th_orig, ratio = problem_scratch(problem, "springs", lambda: spring_arrays(
        problem, options["theta_orig"], options["p_orig"], options["p_ik"]))
    th_ik = problem_scratch(problem, "theta_ik", lambda: np.empty(problem.dof))
    return gs_iterate(*problem.args, q, max_iter, state, qbest, *tables, gain, int(sweeps), max_step, th_orig, ratio,
                      th_ik)


def _register():
    from . import Method, register

    register(Method(NAME, _iterate, "Springhead2 block Gauss–Seidel on JᵀJ ω = Jᵀv, multi control point (SEEDS §3)",
                    JOINT_TYPES, defaults=dict(gain=1.0, sweeps=5, max_step=0.5, theta_orig=None, p_orig=0.0,
                                               p_ik=1.0),
                    ignores=dict(joint_weights="Gauss-Seidel on JᵀJ ω = Jᵀv takes the same step whatever the scale "
                                               "of each unknown, and Springhead's IK has no joint weights; its rest "
                                               "springs p_orig, p_ik hold joints instead")))


_register()
