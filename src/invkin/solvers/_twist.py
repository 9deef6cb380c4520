"""Twist continuity and cone limits for the geometric solvers (``ccd``, ``fabrik``) on ball joints.

**Twist gauge.** A ball joint ``i`` whose bone (the direction ``b`` from the joint to its child, in
the joint's frame) carries only points on that line — fixed frames on the line with position goals
at most, and child ball joints on the line — can turn about ``b`` without moving any goal, if each
child ball joint ``d`` turns back by the same angle: with ``C`` the fixed rotation from ``i``'s frame
to ``d``'s (the origins between them),

    R_i ← R_i Rot(b, −τ),      R_d ← Rot(Cᵀ b, τ) R_d

leaves every point and every frame below ``d`` where it was. That twist is therefore free (CCD's
smallest rotations ê → t̂ about ê × t̂ pick it arbitrarily, which a skinned tail shows as a
candy-wrapper pop between frames), and :func:`resolve_twist` sets it from the previous frame: root
to tip, τ is the twist about ``b`` of the bone's world rotation change since the start of the solve,
Wᵣₑ𝒻ᵀ W (swing-twist decomposition, τ = 2 atan2(2 s·b, 1 + tr), s the axial vector of that change),
so each free bone keeps the twist it had in the previous frame. Joints with a twist range (cone
limits) take the τ that keeps the joint and its children inside their ranges.

**Cone limits in the kernels.** ``cone_rows(robot)`` gives (n, 6) rows ``(axis, swing_max, twist_lo,
twist_hi)`` [rad] from ``robot.extras["cone_limits"]`` for ball joints (no limit: swing_max = inf,
twist ±inf); ccd and fabrik project a ball joint onto its row at every update
(:func:`invkin.solvers._rotfit.ball_update`), not only the returned pose.
``cone_groups_table(robot)`` lists the BVH/glTF joints of three coincident channels about ±x, ±y, ±z
with their rows: :func:`project_groups` projects their composed rotation L = R_a R_b R_c and writes
the Euler angles nearest the current ones back (ccd after every sweep, the solve driver after every
iteration of dls/pinv/transpose/gauss-seidel through :func:`project_cones`), and fabrik turns such a
joint as one (:func:`group_quat`, :func:`write_group`).
"""
from __future__ import annotations

import math
import weakref

import numpy as np
from numba import njit

from ..goals import KIND_POSITION
from ..kinematics.kernels import BALL
from ..kinematics.kernels import REVOLUTE as K_REVOLUTE
from ._rotfit import (clamp_swing_twist_quat, has_cone, qmul, quat_from_rotvec, quat_to_matrix_into, rotvec_from_quat,
                      twist_angle)

ON_LINE = 1e-9  # [m, relative to the bone length] a point this close to the bone's line is on it
FREE, FREE_LIMITED = 1, 2  # twist modes of a ball joint (0: its twist moves a goal)

_CACHE: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def cone_rows(robot) -> np.ndarray:
    """(n, 6) per node: ``(ax, ay, az, swing_max, twist_lo, twist_hi)`` of a ball joint's cone limit
    (model/limits.py), ``(0, 0, 1, inf, -inf, inf)`` elsewhere. Cached per robot, read-only."""
    cache = _CACHE.setdefault(robot, {})
    rows = cache.get("cone")
    if rows is None:
        rows = np.zeros((robot.n_nodes, 6))
        rows[:, 2] = 1.0
        rows[:, 3] = math.inf
        rows[:, 4] = -math.inf
        rows[:, 5] = math.inf
        for frame, (axis, smax, tlo, thi) in (robot.extras.get("cone_limits") or {}).items():
            i = robot.frame_index(frame)
            if robot.joint_type[i] == BALL and robot.qidx[i] >= 0:
                rows[i] = (*np.asarray(axis, float), smax, tlo, thi)
        rows.setflags(write=False)
        cache["cone"] = rows
    return rows


def twist_structure(robot, problem):
    """(axes (n, 6), modes (n, 2) int64) for :func:`resolve_twist`: axes[i, :3] = the bone direction
    b of a free ball joint i (its frame), axes[d, 3:] = Cᵀ b for a child ball joint d that turns back
    (module docstring); modes[i, 0] = 0, FREE or FREE_LIMITED, modes[d, 1] = the joint d turns back
    for (−1: none). Cached per robot and set of frames with non-position goals."""
    oriented = tuple(sorted({int(n) for n, k in zip(problem.gnode, problem.gkind) if k != KIND_POSITION}))
    cache = _CACHE.setdefault(robot, {}).setdefault("twist", {})
    out = cache.get(oriented)
    if out is not None:
        return out
    n = robot.n_nodes
    kids = [[] for _ in range(n)]
    for i in range(n):
        if robot.parent[i] >= 0:
            kids[int(robot.parent[i])].append(i)
    cone = cone_rows(robot)
    axes = np.zeros((n, 6))
    modes = np.zeros((n, 2), dtype=np.int64)
    modes[:, 1] = -1
    oriented = set(oriented)
    mimic_cols = {int(robot.qidx[i]) for i in range(n) if robot.qidx[i] >= 0 and robot.mimic_leader[i]}

    def ball(i):
        return (robot.joint_type[i] == BALL and robot.qidx[i] >= 0 and not robot.mimic_leader[i]
                and int(robot.qidx[i]) not in mimic_cols)

    for i in range(n):
        if not ball(i) or i in oriented:
            continue
        b = None
        comps = []
        ok = True
        stack = [(d, robot.origin[d]) for d in kids[i]]
        lines = []
        while stack and ok:
            d, C = stack.pop()
            p = C[:3, 3]
            lines.append(p)
            if ball(d):
                comps.append((d, C[:3, :3]))
            elif robot.qidx[d] >= 0 or d in oriented:
                ok = False  # a moving non-ball joint or an oriented goal rides on the twist
            else:
                stack.extend((k, C @ robot.origin[k]) for k in kids[d])
        if not ok:
            continue
        for p in lines:
            if np.linalg.norm(p) > 0.0:
                b = p / np.linalg.norm(p)
                break
        if b is None or any(np.linalg.norm(p - (p @ b) * b) > ON_LINE * max(1.0, np.linalg.norm(p)) for p in lines):
            continue
        limited = has_cone(cone, i) or any(has_cone(cone, d) for d, _ in comps)
        if limited:  # a twist range must be about the bone (the twist moves along it), else leave it
            if any(has_cone(cone, d) and abs(abs(CR.T @ b @ cone[d, :3]) - 1.0) > 1e-9 for d, CR in comps):
                continue
            if has_cone(cone, i) and abs(abs(b @ cone[i, :3]) - 1.0) > 1e-9:
                continue
        modes[i, 0] = FREE_LIMITED if limited else FREE
        axes[i, :3] = b
        for d, CR in comps:
            modes[d, 1] = i
            axes[d, 3:] = CR.T @ b
    axes.setflags(write=False)
    modes.setflags(write=False)
    cache[tuple(sorted(oriented))] = (axes, modes)
    return axes, modes


@njit(cache=True)
def _twist_of(q, c, ax, ay, az, cone, i):
    """The twist of the ball joint q[c:c+3] about its limit axis cone[i, :3] (sign: + when that axis is
    along a)."""
    w, x, y, z = quat_from_rotvec(q[c], q[c + 1], q[c + 2])
    s = 1.0 if cone[i, 0] * ax + cone[i, 1] * ay + cone[i, 2] * az > 0.0 else -1.0
    return s, twist_angle(w, x, y, z, cone[i, 0], cone[i, 1], cone[i, 2])


@njit(cache=True)
def _turn(q, c, ax, ay, az, ang, right):
    """R ← R Rot(a, ang) (right) or Rot(a, ang) R on the ball joint q[c:c+3]."""
    h = 0.5 * ang
    s = math.sin(h)
    ow, ox, oy, oz = quat_from_rotvec(q[c], q[c + 1], q[c + 2])
    if right:
        w, x, y, z = qmul(ow, ox, oy, oz, math.cos(h), s * ax, s * ay, s * az)
    else:
        w, x, y, z = qmul(math.cos(h), s * ax, s * ay, s * az, ow, ox, oy, oz)
    r0, r1, r2 = rotvec_from_quat(w, x, y, z)
    q[c] = r0
    q[c + 1] = r1
    q[c + 2] = r2


@njit(cache=True)
def _inside(q, c, lower, upper, max_angle):
    for k in range(3):
        if q[c + k] < lower[c + k] or q[c + k] > upper[c + k]:
            return False
    return q[c] * q[c] + q[c + 1] * q[c + 1] + q[c + 2] * q[c + 2] <= max_angle * max_angle


@njit(cache=True)
def resolve_twist(ni, q, axes, modes, cone, lower, upper, max_angle, Rref, Tcur):
    """Give every free ball joint of q (in place) the twist of its bone in the reference pose (module
    docstring): Rref (n, 3, 3) are the world rotations of the nodes there, Tcur (n, 4, 4) the world
    frames at q (the caller's last FK). A turn that would take the joint or a child it turns back out of
    its rotation-vector box [lower, upper] or beyond ``max_angle`` [rad] (|q| of a ball joint) is not
    made; twist ranges bound τ (FREE_LIMITED joints).
    """
    n = ni.shape[0]
    D = np.empty((3, 3))
    saved = np.empty(3 * n)
    for i in range(n):
        if modes[i, 0] == 0:
            continue
        bx, by, bz = axes[i, 0], axes[i, 1], axes[i, 2]
        # twist about b of the bone's world rotation change D = Wrefᵀ W: 2 atan2(2 s·b, 1 + tr D)
        # (Tcur[i] still holds: the turns above i were turned back at i or above it)
        tr = 0.0
        for r in range(3):
            for k in range(3):
                D[r, k] = Rref[i, 0, r] * Tcur[i, 0, k] + Rref[i, 1, r] * Tcur[i, 1, k] + Rref[i, 2, r] * Tcur[i, 2, k]
            tr += D[r, r]
        sb = 0.5 * ((D[2, 1] - D[1, 2]) * bx + (D[0, 2] - D[2, 0]) * by + (D[1, 0] - D[0, 1]) * bz)
        if abs(sb) < 1e-15 and 1.0 + tr < 1e-15:
            continue
        t = 2.0 * math.atan2(2.0 * sb, 1.0 + tr)
        c = ni[i, 2]
        if modes[i, 0] == FREE_LIMITED:  # keep i (twist − τ) and its children (twist + τ) inside their ranges
            lo = -math.inf
            hi = math.inf
            if has_cone(cone, i):
                s, tw = _twist_of(q, c, bx, by, bz, cone, i)
                a, b = s * (tw - cone[i, 5]), s * (tw - cone[i, 4])
                lo, hi = max(lo, min(a, b)), min(hi, max(a, b))
            for d in range(i + 1, n):
                if modes[d, 1] == i and has_cone(cone, d):
                    s, tw = _twist_of(q, ni[d, 2], axes[d, 3], axes[d, 4], axes[d, 5], cone, d)
                    a, b = s * (cone[d, 4] - tw), s * (cone[d, 5] - tw)
                    lo, hi = max(lo, min(a, b)), min(hi, max(a, b))
            if not lo <= hi:
                continue
            t = min(max(t, lo), hi)
        if t == 0.0:
            continue
        # turn i and its children together; undo all of it if one leaves its bounds
        ok = True
        for d in range(i, n):
            if d != i and modes[d, 1] != i:
                continue
            cd = ni[d, 2]
            for k in range(3):
                saved[3 * d + k] = q[cd + k]
            if d == i:
                _turn(q, cd, bx, by, bz, -t, True)
            else:
                _turn(q, cd, axes[d, 3], axes[d, 4], axes[d, 5], t, False)
            ok = ok and _inside(q, cd, lower, upper, max_angle)
        if not ok:
            for d in range(i, n):
                if d == i or modes[d, 1] == i:
                    for k in range(3):
                        q[ni[d, 2] + k] = saved[3 * d + k]


# --------------------------------------------------------------------------- cone limits on Euler groups

_ORDER_SIGN = {(0, 1, 2): 1.0, (1, 2, 0): 1.0, (2, 0, 1): 1.0}  # cyclic Tait–Bryan orders (model/euler.py)


def cone_groups_table(robot):
    """(groups (m, 4) int64, rows (m, 6)): every BVH/glTF joint of three coincident rotation channels
    about ±x, ±y, ±z — its nodes (first to last) and ±1 in column 3 for a cyclic channel order — and
    its cone-limit row (as :func:`cone_rows`; no limit: swing_max = inf). Joints with other channel
    axes are left out (a cone limit on one is applied to the returned pose only). Cached per robot."""
    cache = _CACHE.setdefault(robot, {})
    out = cache.get("groups")
    if out is not None:
        return out
    from ..model.euler import frame_groups

    limits = {robot.frame_index(f): v for f, v in (robot.extras.get("cone_limits") or {}).items()}
    groups, rows = [], []
    seen = set()
    for f in range(robot.n_nodes):
        nodes = frame_groups(robot, f)
        if len(nodes) != 3 or nodes[-1] != f or any(robot.joint_type[i] != K_REVOLUTE for i in nodes) \
                or any(robot.mimic_leader[i] for i in nodes) or tuple(nodes) in seen:
            continue
        idx = []
        for i in nodes:
            a = np.asarray(robot.axis[i], float)
            k = int(np.argmax(np.abs(a)))
            if abs(abs(a[k]) - 1.0) > 1e-12 or np.count_nonzero(a) != 1:
                break
            idx.append(k)
        if len(idx) != 3 or len(set(idx)) != 3:
            continue
        seen.add(tuple(nodes))
        lim = limits.get(f)
        groups.append([*nodes, 1 if tuple(idx) in _ORDER_SIGN else -1])
        rows.append([0.0, 0.0, 1.0, math.inf, -math.inf, math.inf] if lim is None
                    else [*np.asarray(lim[0], float), lim[1], lim[2], lim[3]])
    g = np.array(groups, dtype=np.int64).reshape(-1, 4)
    r = np.array(rows, dtype=float).reshape(-1, 6)
    g.setflags(write=False)
    r.setflags(write=False)
    cache["groups"] = (g, r)
    return g, r


@njit(cache=True)
def _axis_index(nf, i):
    k = 0
    if abs(nf[i, 1]) > 0.5:
        k = 1
    elif abs(nf[i, 2]) > 0.5:
        k = 2
    return k, nf[i, k]


@njit(cache=True)
def group_quat(ni, nf, q, groups, g):
    """The composed rotation R_a R_b R_c of three-channel joint g at q, as a unit quaternion."""
    w, x, y, z = 1.0, 0.0, 0.0, 0.0
    for k in range(3):
        i = groups[g, k]
        th = nf[i, 3] * q[ni[i, 2]] + nf[i, 4]
        s = math.sin(0.5 * th)
        w, x, y, z = qmul(w, x, y, z, math.cos(0.5 * th), s * nf[i, 0], s * nf[i, 1], s * nf[i, 2])
    return w, x, y, z


@njit(cache=True)
def write_group(ni, nf, q, lower, upper, groups, g, w, x, y, z, R):
    """Write the rotation (w, x, y, z) into three-channel joint g of q as the Euler angles nearest the
    current ones (either Tait–Bryan solution, each channel to its nearest turn: model/limits.py's
    _write_rotation in a kernel), clamped into the box limits. R (3, 3): scratch."""
    quat_to_matrix_into(w, x, y, z, R)
    a_, sa = _axis_index(nf, groups[g, 0])
    b_, sb = _axis_index(nf, groups[g, 1])
    c_, sc = _axis_index(nf, groups[g, 2])
    sg = float(groups[g, 3])
    # R = R_i(a) R_j(b) R_k(c) (model/euler.py euler_from_matrix), i, j, k = the channels' axes
    cb = math.hypot(R[a_, a_], R[a_, b_])
    eb = math.atan2(sg * R[a_, c_], cb)
    if cb < 1e-9:
        ea = math.atan2(sg * R[c_, b_], R[b_, b_])
        ec = 0.0
    else:
        ea = math.atan2(-sg * R[b_, c_], R[c_, c_])
        ec = math.atan2(-sg * R[a_, b_], R[a_, a_])
    best = math.inf
    v0 = v1 = v2 = 0.0
    for alt in range(2):
        phis = (ea, eb, ec) if alt == 0 else (ea + math.pi, math.pi - eb, ec + math.pi)
        d = 0.0
        vals = (0.0, 0.0, 0.0)
        for k in range(3):
            i = groups[g, k]
            c = ni[i, 2]
            m = nf[i, 3]
            v = (phis[k] * (sa, sb, sc)[k] - nf[i, 4]) / m
            period = 2.0 * math.pi / abs(m)
            dv = v - q[c]
            v = q[c] + dv - period * math.floor(dv / period + 0.5)  # the turn nearest q[c]
            if k == 0:
                vals = (v, vals[1], vals[2])
            elif k == 1:
                vals = (vals[0], v, vals[2])
            else:
                vals = (vals[0], vals[1], v)
            d += (v - q[c]) ** 2
        if d < best:
            best = d
            v0, v1, v2 = vals
    for k, v in ((0, v0), (1, v1), (2, v2)):
        c = ni[groups[g, k], 2]
        q[c] = min(max(v, lower[c]), upper[c])


@njit(cache=True)
def project_groups(ni, nf, q, lower, upper, groups, rows):
    """Project every limited three-channel joint of q (in place) onto its cone/twist limit: the
    channels' composed rotation L = R_a R_b R_c is clamped (:func:`clamp_swing_twist_quat`) and written
    back (:func:`write_group`). Returns True when some joint changed."""
    changed_any = False
    R = np.empty((3, 3))
    for g in range(groups.shape[0]):
        if not has_cone(rows, g):
            continue
        w, x, y, z = group_quat(ni, nf, q, groups, g)
        w, x, y, z, changed = clamp_swing_twist_quat(w, x, y, z, rows, g)
        if changed:
            changed_any = True
            write_group(ni, nf, q, lower, upper, groups, g, w, x, y, z, R)
    return changed_any


@njit(cache=True)
def project_cones(ni, nf, q, lower, upper, cone, groups, rows):
    """q (in place) projected onto every cone/twist limit: ball joints (rows ``cone``, :func:`cone_rows`)
    and three-channel joints (:func:`project_groups`), then clamped into the box limits — the kernel
    twin of :func:`invkin.model.limits.project_limits`. Returns True when q changed."""
    changed_any = project_groups(ni, nf, q, lower, upper, groups, rows)
    for i in range(ni.shape[0]):
        c = ni[i, 2]
        if ni[i, 1] != BALL or c < 0 or not has_cone(cone, i):
            continue
        w, x, y, z = quat_from_rotvec(q[c], q[c + 1], q[c + 2])
        w, x, y, z, changed = clamp_swing_twist_quat(w, x, y, z, cone, i)
        if changed:
            changed_any = True
            r0, r1, r2 = rotvec_from_quat(w, x, y, z)
            q[c] = min(max(r0, lower[c]), upper[c])
            q[c + 1] = min(max(r1, lower[c + 1]), upper[c + 1])
            q[c + 2] = min(max(r2, lower[c + 2]), upper[c + 2])
    return changed_any
