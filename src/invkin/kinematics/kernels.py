"""Numba kernels for forward kinematics and geometric Jacobians over a Robot's arrays.

Model arrays (see :class:`invkin.model.robot.Robot`), one row per node in topological order:

* ``ni`` (n, 3) int64: parent index (-1 for a root), joint type, first q index (-1: none)
* ``nf`` (n, 5) float64: joint axis (3, unit, in the node frame), mimic multiplier, mimic offset
* ``origin`` (n, 4, 4): fixed transform from the parent node's frame to the joint frame

A node's world transform is ``T_world_parent @ origin @ M(theta)`` with, for the joint value
``theta = multiplier * q[qidx] + offset``:

* revolute: ``M = [exp(axis * theta), 0]``; prismatic: ``M = [I, axis * theta]``;
* ball: ``M = [exp(r), 0]`` with the rotation vector ``r = q[qidx:qidx + 3]``;
* fixed: ``M = I``.

Jacobian columns (rows vx vy vz wx wy wz, world-aligned, at the frame origin ``p``):

* revolute: ``[a x (p - p_j); a]`` with ``a`` the world axis and ``p_j`` the joint origin;
* prismatic: ``[a; 0]``;
* ball: three revolute columns about the node's own x, y, z axes in world coordinates; they are
  the derivative with respect to a *local* increment ``d`` in ``R_new = R exp(d)``, which is what
  ``Robot.integrate`` applies.

Mimic followers add ``multiplier * column`` to their leader's column.
"""
from __future__ import annotations

import numpy as np
from numba import njit, prange

from ..spatial import so3_exp_nb

FIXED = 0
REVOLUTE = 1
PRISMATIC = 2
BALL = 3



@njit(cache=True, inline="always")
def _local_motion(jtype, ax0, ax1, ax2, mult, off, qidx, q, M):
    """Write the joint motion M (4x4) of one node; M must hold identity outside the 3x3/xyz parts."""
    if jtype == REVOLUTE:
        th = mult * q[qidx] + off
        so3_exp_nb(ax0 * th, ax1 * th, ax2 * th, M)
        M[0, 3] = 0.0
        M[1, 3] = 0.0
        M[2, 3] = 0.0
    elif jtype == PRISMATIC:
        th = mult * q[qidx] + off
        for r in range(3):
            for c in range(3):
                M[r, c] = 1.0 if r == c else 0.0
        M[0, 3] = ax0 * th
        M[1, 3] = ax1 * th
        M[2, 3] = ax2 * th
    elif jtype == BALL:
        so3_exp_nb(q[qidx], q[qidx + 1], q[qidx + 2], M)
        M[0, 3] = 0.0
        M[1, 3] = 0.0
        M[2, 3] = 0.0
    else:
        for r in range(3):
            for c in range(4):
                M[r, c] = 1.0 if r == c else 0.0


@njit(cache=True, inline="always")
def _compose3(A, B, C, out):
    """out = A @ B @ C for rigid 4x4 transforms (last rows assumed [0 0 0 1])."""
    # tmp = B @ C (rigid)
    t00 = B[0, 0] * C[0, 0] + B[0, 1] * C[1, 0] + B[0, 2] * C[2, 0]
    t01 = B[0, 0] * C[0, 1] + B[0, 1] * C[1, 1] + B[0, 2] * C[2, 1]
    t02 = B[0, 0] * C[0, 2] + B[0, 1] * C[1, 2] + B[0, 2] * C[2, 2]
    t03 = B[0, 0] * C[0, 3] + B[0, 1] * C[1, 3] + B[0, 2] * C[2, 3] + B[0, 3]
    t10 = B[1, 0] * C[0, 0] + B[1, 1] * C[1, 0] + B[1, 2] * C[2, 0]
    t11 = B[1, 0] * C[0, 1] + B[1, 1] * C[1, 1] + B[1, 2] * C[2, 1]
    t12 = B[1, 0] * C[0, 2] + B[1, 1] * C[1, 2] + B[1, 2] * C[2, 2]
    t13 = B[1, 0] * C[0, 3] + B[1, 1] * C[1, 3] + B[1, 2] * C[2, 3] + B[1, 3]
    t20 = B[2, 0] * C[0, 0] + B[2, 1] * C[1, 0] + B[2, 2] * C[2, 0]
    t21 = B[2, 0] * C[0, 1] + B[2, 1] * C[1, 1] + B[2, 2] * C[2, 1]
    t22 = B[2, 0] * C[0, 2] + B[2, 1] * C[1, 2] + B[2, 2] * C[2, 2]
    t23 = B[2, 0] * C[0, 3] + B[2, 1] * C[1, 3] + B[2, 2] * C[2, 3] + B[2, 3]
    for r in range(3):
        a0 = A[r, 0]
        a1 = A[r, 1]
        a2 = A[r, 2]
        out[r, 0] = a0 * t00 + a1 * t10 + a2 * t20
        out[r, 1] = a0 * t01 + a1 * t11 + a2 * t21
        out[r, 2] = a0 * t02 + a1 * t12 + a2 * t22
        out[r, 3] = a0 * t03 + a1 * t13 + a2 * t23 + A[r, 3]
    out[3, 0] = 0.0
    out[3, 1] = 0.0
    out[3, 2] = 0.0
    out[3, 3] = 1.0


@njit(cache=True)
def all_finite(q):
    for v in q.ravel():
        if not (v - v == 0.0):
            return False
    return True


@njit(cache=True)
def fk_all_into(ni, nf, origin, q, out):
    """World transforms of every node into ``out`` (n, 4, 4)."""
    n = ni.shape[0]
    M = np.eye(4)
    I4 = np.eye(4)
    for i in range(n):
        _local_motion(ni[i, 1], nf[i, 0], nf[i, 1], nf[i, 2], nf[i, 3], nf[i, 4], ni[i, 2], q, M)
        p = ni[i, 0]
        if p < 0:
            _compose3(I4, origin[i], M, out[i])
        else:
            _compose3(out[p], origin[i], M, out[i])


@njit(cache=True)
def _path(ni, node, stack):
    """Fill ``stack`` with the ancestors of ``node`` (node first); return how many."""
    k = 0
    i = node
    while i >= 0:
        stack[k] = i
        k += 1
        i = ni[i, 0]
    return k


@njit(cache=True)
def fk_frame_into(ni, nf, origin, q, node, out):
    """World transform of one node into ``out`` (4, 4), walking only its ancestors."""
    stack = np.empty(ni.shape[0], np.int64)
    k = _path(ni, node, stack)
    M = np.eye(4)
    T = np.eye(4)
    for s in range(k - 1, -1, -1):
        i = stack[s]
        _local_motion(ni[i, 1], nf[i, 0], nf[i, 1], nf[i, 2], nf[i, 3], nf[i, 4], ni[i, 2], q, M)
        _compose3(T, origin[i], M, out)
        T[:, :] = out


@njit(cache=True)
def fk_frame(ni, nf, origin, q, node):
    """Single-frame FK; returns (T (4, 4), ok) where ok is False for non-finite q."""
    out = np.empty((4, 4))
    if not all_finite(q):
        return out, False
    fk_frame_into(ni, nf, origin, q, node, out)
    return out, True


@njit(cache=True)
def jacobian_into(ni, nf, origin, q, node, J, T_out):
    """Geometric Jacobian (6, dof) of ``node``'s origin into ``J``; its transform into ``T_out``."""
    stack = np.empty(ni.shape[0], np.int64)
    k = _path(ni, node, stack)
    n = ni.shape[0]
    # world transforms along the path, root first
    Ts = np.empty((k, 4, 4))
    M = np.eye(4)
    I4 = np.eye(4)
    for s in range(k - 1, -1, -1):
        i = stack[s]
        _local_motion(ni[i, 1], nf[i, 0], nf[i, 1], nf[i, 2], nf[i, 3], nf[i, 4], ni[i, 2], q, M)
        if s == k - 1:
            _compose3(I4, origin[i], M, Ts[s])
        else:
            _compose3(Ts[s + 1], origin[i], M, Ts[s])
    T_out[:, :] = Ts[0]
    px = Ts[0, 0, 3]
    py = Ts[0, 1, 3]
    pz = Ts[0, 2, 3]
    J[:, :] = 0.0
    for s in range(k):
        i = stack[s]
        jt = ni[i, 1]
        if jt == FIXED:
            continue
        c = ni[i, 2]
        Tw = Ts[s]
        dx = px - Tw[0, 3]
        dy = py - Tw[1, 3]
        dz = pz - Tw[2, 3]
        if jt == BALL:
            for a in range(3):
                ax = Tw[0, a]
                ay = Tw[1, a]
                az = Tw[2, a]
                J[0, c + a] += ay * dz - az * dy
                J[1, c + a] += az * dx - ax * dz
                J[2, c + a] += ax * dy - ay * dx
                J[3, c + a] += ax
                J[4, c + a] += ay
                J[5, c + a] += az
            continue
        m = nf[i, 3]
        a0 = nf[i, 0]
        a1 = nf[i, 1]
        a2 = nf[i, 2]
        ax = Tw[0, 0] * a0 + Tw[0, 1] * a1 + Tw[0, 2] * a2
        ay = Tw[1, 0] * a0 + Tw[1, 1] * a1 + Tw[1, 2] * a2
        az = Tw[2, 0] * a0 + Tw[2, 1] * a1 + Tw[2, 2] * a2
        if jt == REVOLUTE:
            J[0, c] += m * (ay * dz - az * dy)
            J[1, c] += m * (az * dx - ax * dz)
            J[2, c] += m * (ax * dy - ay * dx)
            J[3, c] += m * ax
            J[4, c] += m * ay
            J[5, c] += m * az
        else:  # prismatic
            J[0, c] += m * ax
            J[1, c] += m * ay
            J[2, c] += m * az
    _ = n


@njit(cache=True)
def jacobian(ni, nf, origin, q, node, dof):
    """Single-frame Jacobian; returns (J (6, dof), ok)."""
    J = np.empty((6, dof))
    if not all_finite(q):
        return J, False
    T = np.empty((4, 4))
    jacobian_into(ni, nf, origin, q, node, J, T)
    return J, True


@njit(cache=True, parallel=True)
def fk_frame_batch(ni, nf, origin, qs, node):
    B = qs.shape[0]
    out = np.empty((B, 4, 4))
    for b in prange(B):
        fk_frame_into(ni, nf, origin, qs[b], node, out[b])
    return out


@njit(cache=True, parallel=True)
def fk_all_batch(ni, nf, origin, qs):
    B = qs.shape[0]
    n = ni.shape[0]
    out = np.empty((B, n, 4, 4))
    for b in prange(B):
        fk_all_into(ni, nf, origin, qs[b], out[b])
    return out


@njit(cache=True, parallel=True)
def jacobian_batch(ni, nf, origin, qs, node, dof):
    B = qs.shape[0]
    out = np.empty((B, 6, dof))
    for b in prange(B):
        T = np.empty((4, 4))
        jacobian_into(ni, nf, origin, qs[b], node, out[b], T)
    return out


@njit(cache=True)
def jacobian_from_all(ni, nf, Tall, node, J):
    """Geometric Jacobian (6, dof) of ``node`` from precomputed world transforms ``Tall``."""
    J[:, :] = 0.0
    px = Tall[node, 0, 3]
    py = Tall[node, 1, 3]
    pz = Tall[node, 2, 3]
    i = node
    while i >= 0:
        jt = ni[i, 1]
        if jt != FIXED:
            c = ni[i, 2]
            Tw = Tall[i]
            dx = px - Tw[0, 3]
            dy = py - Tw[1, 3]
            dz = pz - Tw[2, 3]
            if jt == BALL:
                for a in range(3):
                    ax = Tw[0, a]
                    ay = Tw[1, a]
                    az = Tw[2, a]
                    J[0, c + a] += ay * dz - az * dy
                    J[1, c + a] += az * dx - ax * dz
                    J[2, c + a] += ax * dy - ay * dx
                    J[3, c + a] += ax
                    J[4, c + a] += ay
                    J[5, c + a] += az
            else:
                m = nf[i, 3]
                a0 = nf[i, 0]
                a1 = nf[i, 1]
                a2 = nf[i, 2]
                ax = Tw[0, 0] * a0 + Tw[0, 1] * a1 + Tw[0, 2] * a2
                ay = Tw[1, 0] * a0 + Tw[1, 1] * a1 + Tw[1, 2] * a2
                az = Tw[2, 0] * a0 + Tw[2, 1] * a1 + Tw[2, 2] * a2
                if jt == REVOLUTE:
                    J[0, c] += m * (ay * dz - az * dy)
                    J[1, c] += m * (az * dx - ax * dz)
                    J[2, c] += m * (ax * dy - ay * dx)
                    J[3, c] += m * ax
                    J[4, c] += m * ay
                    J[5, c] += m * az
                else:
                    J[0, c] += m * ax
                    J[1, c] += m * ay
                    J[2, c] += m * az
        i = ni[i, 0]
