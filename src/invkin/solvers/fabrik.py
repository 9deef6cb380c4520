"""FABRIK: Forward And Backward Reaching Inverse Kinematics, for chains and trees.

A. Aristidou and J. Lasenby, "FABRIK: A fast, iterative solver for the Inverse Kinematics
problem", Graphical Models 73(5), 2011. The method works on joint *positions*; this library
works on joint values q, so each iteration is:

1. **Points.** The world positions of the nodes at the current q. Coincident nodes (zero-length
   bones: the three axes of a URDF wrist, BVH channel nodes) are merged into one point, so no
   bone has zero length (a prismatic node is never merged: its bone may have length 0 at times,
   and every direction below falls back to the bone's old one rather than dividing by zero);
   bone lengths d = |p_child − p_parent| are those of the current configuration.
   Only points on the paths from the goal frames to the root take part; points that no joint
   can move are the fixed bases.
2. **Stage 1, tip to root** (the paper's "forward reaching"): a point with a goal is put on its
   target; every other point on the centroid of the positions its child branches propose,
   p_parent' = p_child' + d · unit(p_parent − p_child'), where p_parent is its position before the
   pass (the paper's sub-base rule for several end effectors; one branch gives the chain rule).
3. **Stage 2, root to tip** (the paper's "backward reaching") in joint space, so that every
   constraint holds by construction: from the root, each joint, with its own position p_j
   already placed by the joints above it, is turned so that its bone(s) point at the stage-1
   positions f_c of the points they carry (the chain rule p_c' = p_j + d · unit(f_c − p_j)):

   * revolute (hinge): the angle about the world axis a maximising Σ w t̂·R_a(Φ) ê over the
     bones, i.e. the angle between the bone and its target projected onto the plane ⟂ a
     (Welman's k1, k2, k3 with unit vectors, :func:`welman_angle`); bones leaving the joint's
     point weigh 1, points further down 1e-3 (that only decides joints whose own bone lies on
     their axis, such as the twist of a coincident X-Y-Z group); the best angle inside
     [lower, upper] (:func:`best_arc_angle`);
   * ball: the smallest rotation taking the bone's *current* direction to the target direction,
     applied as an increment ``R ← R exp(Rᵀ_world rv)`` (a minimal-rotation update: its axis is
     perpendicular to the bone, so the bone's twist is the previous frame's — no candy-wrapper
     flips while a tail follows a moving target), then the joint's swing cone and twist range
     (``robot.with_limits``) inside the update, and the option ``cone_angle``, |q| ≤ cone_angle on
     its rotation vector (scaled down); a ball carrying several bones takes the best rotation
     of all of them (Horn's quaternion fit);
   * a BVH/glTF joint of three coincident channels: the ball rule on its composed rotation
     L = R_a R_b R_c (L ← (Wᵀ d W) L, W the frame above its first channel), its cone, then the
     Euler angles nearest the current ones, clamped into their boxes (three separate hinge fits
     converged slowly: 93.5 % of reachable spine targets within 50 ms, benchmarks/spine_limits.py);
   * prismatic: stage 1 treats its bone as rigid (its current length); stage 2 slides the joint
     so that its node moves toward its stage-1 position along the axis, λ = (f − p)·a, clamped
     (a BVH root translation thus lets the whole skeleton follow its goals).

   The FK after stage 2 gives the positions for the next iteration. After the iterations the
   bones' twists are set from the start of the solve as in ccd (option ``twist``).

Position goals only (an orientation goal raises SolverError at check time; use ``ccd`` or
``lm``). ``joint_weights`` and Posture goals are ignored. Hinge-only problems with few spare
degrees of freedom (e.g. a tree of single-axis joints whose two hands fix every joint) converge
slowly: the per-joint fits move one hinge at a time, like CCD, without its objective. STALLED
when the weighted squared position error has not dropped by 1e-4 (relative) within 10
iterations.
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit

from ..errors import SolverError
from ..goals import KIND_POSITION
from ..kinematics.kernels import BALL, PRISMATIC, REVOLUTE, fk_all_into
from ._common import CONVERGED, RUNNING, STALLED
from ._iterate import end_iterations
from ._rotfit import (ball_update, best_arc_angle, clamp_swing_twist_quat, has_cone, horn_quat, local_quats,
                      min_rotation_quat, qmul, quat_from_rotvec)
from ._chain import fk_quat, position_errors, sync_ball_q
from ._twist import (cone_groups_table, cone_rows, group_quat, project_groups, resolve_twist, twist_structure,
                     write_group)
from .ccd import STALL_SWEEPS, set_joint, set_revolute, sweep_progress, twist_option, visit_flags, welman_terms

NAME = "fabrik"
JOINT_TYPES = ("revolute", "continuous", "prismatic", "ball")

EPS_LEN = 1e-9     # [m] bones shorter than this merge their two joints into one point
W_DEEP = 1e-3      # weight of points beyond a joint's own bones in the hinge fit


@njit(cache=True)
def point_structure(ni, origin, gnode, gkind, gw):
    """(rep, point, movable, pp, anc): the FABRIK point tree of the model.

    rep[i]: the node whose position node i shares (its topmost coincident ancestor, else i);
    point[k]: k is a point on a path from a position goal to the root; movable[k]: some joint
    above k moves it; pp[k]: the parent point; anc[i, j]: node i is j or an ancestor of j.
    """
    n = ni.shape[0]
    rep = np.empty(n, np.int64)
    movable = np.zeros(n, np.bool_)
    for i in range(n):
        p = ni[i, 0]
        if p < 0:
            rep[i] = i
            continue
        off = math.sqrt(origin[i, 0, 3] ** 2 + origin[i, 1, 3] ** 2 + origin[i, 2, 3] ** 2)
        rep[i] = rep[p] if (off < EPS_LEN and ni[i, 1] != PRISMATIC) else i
        movable[i] = movable[p] or ni[p, 2] >= 0 or (ni[i, 1] == PRISMATIC and ni[i, 2] >= 0)
    for i in range(n):  # coincident nodes move with their representative
        movable[i] = movable[rep[i]]
    point = np.zeros(n, np.bool_)
    anc = np.zeros((n, n), np.bool_)
    for j in range(n):
        i = j
        while i >= 0:
            anc[i, j] = True
            i = ni[i, 0]
    for g in range(gnode.shape[0]):
        if gkind[g] != 0 or gw[g] <= 0.0:
            continue
        i = gnode[g]
        while i >= 0:
            point[rep[i]] = True
            i = ni[i, 0]
    pp = np.full(n, -1, np.int64)
    for k in range(n):
        if point[k] and ni[k, 0] >= 0:
            pp[k] = rep[ni[k, 0]]
    return rep, point, movable, pp, anc


@njit(cache=True)
def fabrik_iterate(ni, nf, origin, lower, upper, balls, gnode, gkind, gvec, gR, gaxis, gw, q_rest, w_post, jw,
                   tol_p, tol_r, q, max_iter, state, visit, cone_angle, cone, tw_axes, tw_modes, twist,
                   groups, grows):
    """Run up to ``max_iter`` FABRIK iterations on q in place (Aristidou & Lasenby 2011).

    Stage 1, tip to root over the merged points: f_k = target (a goal point) or the centroid of
    the children's proposals f_c + d_c · unit(p_k − f_c). Stage 2, root to tip in joint space:
    a hinge takes Φ = argmax Σ w t̂·R_a(Φ)ê (bones to the stage-1 points, clamped to its range),
    a ball the smallest rotation from its bone's rest direction to f_c − p_j (|q| ≤ cone_angle),
    a slider λ = (f − p)·a; then FK. Details in the module docstring.

    state (8,): [best squared error (0: fresh), iterations, position error, rotation error (0),
    iterations without progress]. visit (n,): 0 for nodes whose joint is not set here (fixed,
    mimic followers). cone_angle [rad]: ball-joint cone half-angle (inf: none).
    """
    n = ni.shape[0]
    G = gnode.shape[0]
    rep, point, movable, pp, anc = point_structure(ni, origin, gnode, gkind, gw)
    Told = np.empty((n, 4, 4))
    Tcur = np.empty((n, 4, 4))
    fwd = np.empty((n, 3))
    acc = np.empty((n, 3))
    cnt = np.empty(n)
    tsum = np.zeros((n, 3))
    tw = np.zeros(n)
    for g in range(G):
        if gkind[g] == 0 and gw[g] > 0.0:
            k = rep[gnode[g]]
            for c in range(3):
                tsum[k, c] += gw[g] * gvec[g, c]
            tw[k] += gw[g]
    pts = np.empty(n, np.int64)  # the points that move, in topological order
    npts = 0
    for k in range(n):
        if point[k] and movable[k]:
            pts[npts] = k
            npts += 1
    # node -> the three-channel joint it is the first channel of (-2: one of its other two channels,
    # set with the first; -1: none)
    gstart = np.full(n, -1, np.int64)
    for g in range(groups.shape[0]):
        if visit[groups[g, 0]] != 0:
            gstart[groups[g, 0]] = g
            gstart[groups[g, 1]] = -2
            gstart[groups[g, 2]] = -2
    chs = np.zeros(n + 1, np.int64)  # the moving points by parent point: chl[chs[r]:chs[r + 1]]
    for kk in range(npts):
        chs[pp[pts[kk]] + 1] += 1
    for r in range(n):
        chs[r + 1] += chs[r]
    chl = np.empty(max(npts, 1), np.int64)
    fill = chs[:n].copy()
    for kk in range(npts):
        r = pp[pts[kk]]
        chl[fill[r]] = pts[kk]
        fill[r] += 1
    S = np.empty((3, 3))
    Q = np.empty((3, 3))
    W = np.empty((3, 3))
    ev = np.empty(3)
    tv = np.empty(3)
    e1 = np.empty(3)
    t1 = np.empty(3)
    Lq = np.empty((n, 4))  # the ball joints' quaternions, kept in step with q by ball_update
    local_quats(ni, q, Lq)
    followers = False
    for i in range(n):
        if ni[i, 2] >= 0 and visit[i] == 0:
            followers = True
    lazy = not followers and cone_angle == math.inf  # ball rotations in Lq only; q written at the end
    fk_all_into(ni, nf, origin, q, Told)
    Rref = Told[:, :3, :3].copy() if twist else Told[:1, :3, :3].copy()  # the frames the twist is kept from
    perr, cost = position_errors(gnode, gkind, gvec, gw, Told)  # at the start
    best = state[0] if state[0] > 0.0 else cost
    small = state[4]
    code = RUNNING
    it = 0
    while it < max_iter:
        if perr <= tol_p:
            code = CONVERGED
            break
        it += 1
        # ---- stage 1: tip to root, in positions
        acc[:, :] = 0.0
        cnt[:] = 0.0
        for kk in range(npts - 1, -1, -1):
            k = pts[kk]
            if tw[k] > 0.0:
                for c in range(3):
                    fwd[k, c] = tsum[k, c] / tw[k]
            elif cnt[k] > 0.0:
                for c in range(3):
                    fwd[k, c] = acc[k, c] / cnt[k]
            else:
                for c in range(3):
                    fwd[k, c] = Told[k, c, 3]
            r = pp[k]
            L = 0.0
            dn = 0.0
            for c in range(3):
                L += (Told[k, c, 3] - Told[r, c, 3]) ** 2
                dn += (Told[r, c, 3] - fwd[k, c]) ** 2
            L = math.sqrt(L)
            dn = math.sqrt(dn)
            for c in range(3):
                if dn > 1e-12 * (L + 1e-300):
                    acc[r, c] += fwd[k, c] + L * (Told[r, c, 3] - fwd[k, c]) / dn
                else:  # the child landed on its parent: keep the bone's old direction
                    acc[r, c] += fwd[k, c] + (Told[r, c, 3] - Told[k, c, 3])
            cnt[r] += 1.0
        # ---- stage 2: root to tip, in joint space
        for i in range(n):
            fk_quat(ni, nf, origin, q, Lq, Tcur, i, i + 1)
            if visit[i] == 0 or not point[rep[i]]:
                continue
            jt = ni[i, 1]
            ci = ni[i, 2]
            jx = Tcur[i, 0, 3]
            jy = Tcur[i, 1, 3]
            jz = Tcur[i, 2, 3]
            if jt == PRISMATIC:
                # slide the node toward its stage-1 position along the axis
                m = nf[i, 3]
                if m == 0.0 or not movable[i]:
                    continue
                lam = 0.0
                for r in range(3):
                    a_r = Tcur[i, r, 0] * nf[i, 0] + Tcur[i, r, 1] * nf[i, 1] + Tcur[i, r, 2] * nf[i, 2]
                    lam += a_r * (fwd[i, r] - Tcur[i, r, 3])
                set_joint(q, ci, m, lam, lower, upper)
                fk_quat(ni, nf, origin, q, Lq, Tcur, i, i + 1)
                continue
            if jt != REVOLUTE and jt != BALL:
                continue
            # Δ = Tcur[i] Told[i]^-1 carries the points below i to where they are now
            k1 = 0.0
            k2 = 0.0
            k3 = 0.0
            S[:, :] = 0.0
            nb = 0
            ax = Tcur[i, 0, 0] * nf[i, 0] + Tcur[i, 0, 1] * nf[i, 1] + Tcur[i, 0, 2] * nf[i, 2]
            ay = Tcur[i, 1, 0] * nf[i, 0] + Tcur[i, 1, 1] * nf[i, 1] + Tcur[i, 1, 2] * nf[i, 2]
            az = Tcur[i, 2, 0] * nf[i, 0] + Tcur[i, 2, 1] * nf[i, 1] + Tcur[i, 2, 2] * nf[i, 2]
            grp = gstart[i]  # the first channel of a three-channel joint: the joint turns as one (below)
            if grp == -2:  # a second or third channel: set with the first
                continue
            lst = pts
            a0 = 0
            a1 = npts
            if jt == BALL or grp >= 0:  # fit its own bones only: the points whose parent point is its own
                lst = chl
                a0 = chs[rep[i]]
                a1 = chs[rep[i] + 1]
            for kk in range(a0, a1):
                k = lst[kk]
                if k == rep[i] or not anc[i, k]:
                    continue
                child = pp[k] == rep[i]
                if (jt == BALL or grp >= 0) and not child:
                    continue
                # b = the point in the old frame of i (local), e = where it is now (world, from p_j)
                bx = Told[k, 0, 3] - Told[i, 0, 3]
                by = Told[k, 1, 3] - Told[i, 1, 3]
                bz = Told[k, 2, 3] - Told[i, 2, 3]
                lx = Told[i, 0, 0] * bx + Told[i, 1, 0] * by + Told[i, 2, 0] * bz
                ly = Told[i, 0, 1] * bx + Told[i, 1, 1] * by + Told[i, 2, 1] * bz
                lz = Told[i, 0, 2] * bx + Told[i, 1, 2] * by + Told[i, 2, 2] * bz
                for r in range(3):  # ball too: from the bone's current direction (minimal-rotation update)
                    ev[r] = Tcur[i, r, 0] * lx + Tcur[i, r, 1] * ly + Tcur[i, r, 2] * lz
                tv[0] = fwd[k, 0] - jx
                tv[1] = fwd[k, 1] - jy
                tv[2] = fwd[k, 2] - jz
                ne = math.sqrt(ev[0] ** 2 + ev[1] ** 2 + ev[2] ** 2)
                nt = math.sqrt(tv[0] ** 2 + tv[1] ** 2 + tv[2] ** 2)
                if ne < 1e-12 or nt < 1e-12:
                    continue
                w = (1.0 if child else W_DEEP) / (ne * nt)
                nb += 1
                if nb == 1:
                    for r in range(3):
                        e1[r] = ev[r]
                        t1[r] = tv[r]
                if (jt == REVOLUTE and grp < 0) or a1 - a0 > 1:  # (one bone of a ball: its smallest rotation)
                    d1, d2, d3 = welman_terms(ev, tv, ax, ay, az, w, S)
                    k1 += d1
                    k2 += d2
                    k3 += d3
            if nb == 0:
                continue
            if grp >= 0:
                # a BVH/glTF joint of three channels turns like a ball: L ← (Wᵀ d W) L with d the
                # smallest rotation of its bone(s) onto the stage-1 points, W the frame above its first
                # channel (W = Tcur[i] R_a(θ_a)ᵀ); then its cone, the nearest Euler angles and their
                # boxes (its other two channels are set here and not fitted again).
                if nb == 1:
                    dw, dx, dy, dz = min_rotation_quat(e1[0], e1[1], e1[2], t1[0], t1[1], t1[2])
                else:
                    dw, dx, dy, dz = horn_quat(S)
                ux = Tcur[i, 0, 0] * dx + Tcur[i, 1, 0] * dy + Tcur[i, 2, 0] * dz
                uy = Tcur[i, 0, 1] * dx + Tcur[i, 1, 1] * dy + Tcur[i, 2, 1] * dz
                uz = Tcur[i, 0, 2] * dx + Tcur[i, 1, 2] * dy + Tcur[i, 2, 2] * dz
                th = nf[i, 3] * q[ci] + nf[i, 4]
                kx, ky, kz = nf[i, 0], nf[i, 1], nf[i, 2]
                cth = math.cos(th)
                sth = math.sin(th)
                kd = (kx * ux + ky * uy + kz * uz) * (1.0 - cth)
                vx = ux * cth + (ky * uz - kz * uy) * sth + kx * kd
                vy = uy * cth + (kz * ux - kx * uz) * sth + ky * kd
                vz = uz * cth + (kx * uy - ky * ux) * sth + kz * kd
                lw, lx, ly, lz = group_quat(ni, nf, q, groups, grp)
                lw, lx, ly, lz = qmul(dw, vx, vy, vz, lw, lx, ly, lz)
                if has_cone(grows, grp):
                    lw, lx, ly, lz, _ = clamp_swing_twist_quat(lw, lx, ly, lz, grows, grp)
                write_group(ni, nf, q, lower, upper, groups, grp, lw, lx, ly, lz, W)
                fk_quat(ni, nf, origin, q, Lq, Tcur, i, i + 1)
                continue
            if jt == REVOLUTE:
                m = nf[i, 3]
                if m == 0.0:
                    continue
                lo = m * (lower[ci] - q[ci])
                hi = m * (upper[ci] - q[ci])
                if lo > hi:
                    lo, hi = hi, lo
                phi = best_arc_angle(k1, k2, k3, min(lo, 0.0), max(hi, 0.0))
                set_revolute(q, ci, m, phi, lower, upper)
            else:
                if nb == 1:
                    dw, dx, dy, dz = min_rotation_quat(e1[0], e1[1], e1[2], t1[0], t1[1], t1[2])
                else:
                    dw, dx, dy, dz = horn_quat(S)
                # R <- R (Wᵀ d W): the increment turns the bone from its current direction (its axis is
                # ⟂ to the bone, so the bone keeps its twist); the cone/twist limit applies at once
                for r in range(3):
                    for c in range(3):
                        W[r, c] = Tcur[i, r, c]
                ball_update(q, ci, lower, upper, W, dw, dx, dy, dz, 1.0, cone, i, Lq, Q, not lazy)
                ang = math.sqrt(q[ci] ** 2 + q[ci + 1] ** 2 + q[ci + 2] ** 2)
                if ang > cone_angle:  # the option cone_angle: |q| <= cone_angle on the rotation vector
                    for c in range(3):
                        q[ci + c] = min(max(q[ci + c] * cone_angle / ang, lower[ci + c]), upper[ci + c])
                    Lq[i, 0], Lq[i, 1], Lq[i, 2], Lq[i, 3] = quat_from_rotvec(q[ci], q[ci + 1], q[ci + 2])
                else:  # the frame turned by Q about its own point
                    for c in range(3):
                        a0_, a1_, a2_ = Tcur[i, 0, c], Tcur[i, 1, c], Tcur[i, 2, c]
                        for r in range(3):
                            Tcur[i, r, c] = Q[r, 0] * a0_ + Q[r, 1] * a1_ + Q[r, 2] * a2_
                    continue
            fk_quat(ni, nf, origin, q, Lq, Tcur, i, i + 1)
        # three-channel joints: their cone/twist limits after every iteration
        projected = groups.shape[0] > 0 and project_groups(ni, nf, q, lower, upper, groups, grows)
        if followers or projected:
            if lazy:
                sync_ball_q(ni, Lq, q, lower, upper)
            fk_all_into(ni, nf, origin, q, Told)  # exact FK (mimic followers may precede leaders)
        else:  # stage 2 left every frame at FK(q)
            Told, Tcur = Tcur, Told
        perr, cost = position_errors(gnode, gkind, gvec, gw, Told)
        best, small = sweep_progress(cost, best, small)
        if small >= STALL_SWEEPS:
            code = STALLED
            break
    if lazy:
        sync_ball_q(ni, Lq, q, lower, upper)
    if twist and it > 0:
        resolve_twist(ni, q, tw_axes, tw_modes, cone, lower, upper, cone_angle, Rref, Told)  # Told: FK(q)
    state[0] = best
    state[4] = small
    return end_iterations(code, it, perr, 0.0, tol_p, tol_r, state)  # no rotation error (tol_r > 0)


# --------------------------------------------------------------------------- Python side


def _check(problem):
    robot = problem.robot
    for g in range(problem.gnode.shape[0]):
        if problem.gkind[g] != KIND_POSITION:
            kind = {1: "orientation", 2: "axis orientation", 3: "aim"}.get(int(problem.gkind[g]), "non-position")
            raise SolverError(f"fabrik supports Position goals only (it moves joint positions); got an {kind} "
                              f"goal on frame {robot.node_names[int(problem.gnode[g])]!r}; use method='ccd' or "
                              f"'lm' for orientations")
        for i in robot.ancestors(int(problem.gnode[g])):
            if robot.composite[i]:  # FABRIK moves joint positions of a rooted chain
                raise SolverError(f"fabrik does not move {robot.composite[i]} joints; joint "
                                  f"{robot.node_joint_names[i]!r} moves frame "
                                  f"{robot.node_names[int(problem.gnode[g])]!r}: lock it "
                                  f"(robot.lock({{{robot.node_joint_names[i]!r}: q_base}})) or use method='lm', "
                                  f"'dls' or 'pinv'")


def kernel_call(problem, options):
    """(kernel, tail): ``kernel(*problem.args, q, max_iter, state, *tail)`` runs the iterations (as
    :func:`invkin.solvers.ccd.kernel_call`); the goals are checked by ``_check`` before."""
    cone = options.get("cone_angle", None)
    if cone is None:
        cone = math.inf
    elif isinstance(cone, bool) or not isinstance(cone, (int, float, np.integer, np.floating)) \
            or not (cone > 0 and math.isfinite(cone)):
        raise SolverError(f"fabrik: cone_angle must be a finite angle > 0 [rad] or None, got {cone!r}")
    tw_axes, tw_modes = twist_structure(problem.robot, problem)
    return fabrik_iterate, (visit_flags(problem.robot), float(cone), cone_rows(problem.robot), tw_axes, tw_modes,
                            twist_option("fabrik", options), *cone_groups_table(problem.robot))


def _iterate(problem, q, max_iter, state, options):
    kernel, tail = kernel_call(problem, options)
    return kernel(*problem.args, q, max_iter, state, *tail)


def _register():
    from . import Method, register

    register(Method(NAME, _iterate, "FABRIK (Aristidou & Lasenby 2011): chains and trees, hinge and cone limits",
                    JOINT_TYPES, goal_kinds=("position",), check=_check, defaults=dict(cone_angle=None, twist="previous")))


_register()
