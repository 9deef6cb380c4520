"""What the ccd and fabrik kernels share about the chain itself: one node's frame from the ball
joints' quaternions (no trigonometry), the position errors of a set of frames, and writing the
quaternions back into q.

Inside a call both kernels keep each ball joint's rotation as a unit quaternion ``Lq[i]`` next to
its rotation vector in q (:func:`invkin.solvers._rotfit.ball_update`); where nothing else reads q
during the call they let q lag and write it once (:func:`sync_ball_q`).
"""
from __future__ import annotations

import math

from numba import njit

from ..kinematics.kernels import BALL, PRISMATIC, REVOLUTE
from ..spatial import so3_exp_nb
from ._rotfit import quat_to_matrix_into, rotvec_from_quat


@njit(cache=True)
def node_fk(ni, nf, origin, q, Lq, Tall, i, M):
    """Tall[i] = Tall[parent] @ origin[i] @ M(q) for one node, rows 0-2 only (the last row stays
    [0 0 0 1]); a ball joint's rotation from its quaternion Lq[i] (kept by ball_update), a hinge's
    from its angle. M (3, 4): scratch."""
    jt = ni[i, 1]
    if jt == BALL and ni[i, 2] >= 0:
        quat_to_matrix_into(Lq[i, 0], Lq[i, 1], Lq[i, 2], Lq[i, 3], M)
        M[0, 3] = M[1, 3] = M[2, 3] = 0.0
    else:
        for r in range(3):
            for c in range(4):
                M[r, c] = 1.0 if r == c else 0.0
        if jt == REVOLUTE and ni[i, 2] >= 0:
            th = nf[i, 3] * q[ni[i, 2]] + nf[i, 4]
            so3_exp_nb(nf[i, 0] * th, nf[i, 1] * th, nf[i, 2] * th, M)
        elif jt == PRISMATIC and ni[i, 2] >= 0:
            th = nf[i, 3] * q[ni[i, 2]] + nf[i, 4]
            M[0, 3] = nf[i, 0] * th
            M[1, 3] = nf[i, 1] * th
            M[2, 3] = nf[i, 2] * th
    p = ni[i, 0]
    for r in range(3):  # A = (Tall[p] @ origin[i]) row r, then A @ M
        if p < 0:
            a0, a1, a2, a3 = origin[i, r, 0], origin[i, r, 1], origin[i, r, 2], origin[i, r, 3]
        else:
            a0 = Tall[p, r, 0] * origin[i, 0, 0] + Tall[p, r, 1] * origin[i, 1, 0] + Tall[p, r, 2] * origin[i, 2, 0]
            a1 = Tall[p, r, 0] * origin[i, 0, 1] + Tall[p, r, 1] * origin[i, 1, 1] + Tall[p, r, 2] * origin[i, 2, 1]
            a2 = Tall[p, r, 0] * origin[i, 0, 2] + Tall[p, r, 1] * origin[i, 1, 2] + Tall[p, r, 2] * origin[i, 2, 2]
            a3 = (Tall[p, r, 0] * origin[i, 0, 3] + Tall[p, r, 1] * origin[i, 1, 3] + Tall[p, r, 2] * origin[i, 2, 3]
                  + Tall[p, r, 3])
        for c in range(4):
            Tall[i, r, c] = a0 * M[0, c] + a1 * M[1, c] + a2 * M[2, c] + (a3 if c == 3 else 0.0)
    Tall[i, 3, 0] = Tall[i, 3, 1] = Tall[i, 3, 2] = 0.0
    Tall[i, 3, 3] = 1.0


@njit(cache=True)
def position_errors(gnode, gkind, gvec, gw, Tall):
    """(largest position error [m], Σ gw² |p* − p|²) over the position goals, frames Tall."""
    perr = 0.0
    cost = 0.0
    for g in range(gnode.shape[0]):
        if gkind[g] == 0 and gw[g] > 0.0:
            d2 = 0.0
            for c in range(3):
                d2 += (gvec[g, c] - Tall[gnode[g], c, 3]) ** 2
            perr = max(perr, math.sqrt(d2))
            cost += gw[g] * gw[g] * d2
    return perr, cost


@njit(cache=True)
def sync_ball_q(ni, Lq, q, lower, upper):
    """q[c:c+3] ← the rotation vector of Lq[i] for every ball joint i (clamped into its box)."""
    for i in range(ni.shape[0]):
        c = ni[i, 2]
        if ni[i, 1] == BALL and c >= 0:
            r0, r1, r2 = rotvec_from_quat(Lq[i, 0], Lq[i, 1], Lq[i, 2], Lq[i, 3])
            q[c] = min(max(r0, lower[c]), upper[c])
            q[c + 1] = min(max(r1, lower[c + 1]), upper[c + 1])
            q[c + 2] = min(max(r2, lower[c + 2]), upper[c + 2])
