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

import math

import numpy as np
from numba import njit, prange


FIXED = 0
REVOLUTE = 1
PRISMATIC = 2
BALL = 3



# Floating-point contraction and reassociation only: NaN/inf semantics are kept.
FAST = {"nsz", "arcp", "contract", "afn", "reassoc"}


@njit(cache=True, fastmath=FAST)
def fk_upto_into(ni, nf, origin, q, last, out):
    """World transforms of nodes 0..last into ``out`` (>= last + 1, 4, 4).

    Parents come before children, so this holds every ancestor of ``last``. The node update
    ``T = T_parent @ origin @ M(theta)`` is written out in scalars (3x faster than a helper call).
    """
    for i in range(last + 1):
        ps = ni[i, 0]
        jt = ni[i, 1]
        m00 = 1.0
        m01 = 0.0
        m02 = 0.0
        m03 = 0.0
        m10 = 0.0
        m11 = 1.0
        m12 = 0.0
        m13 = 0.0
        m20 = 0.0
        m21 = 0.0
        m22 = 1.0
        m23 = 0.0
        if jt == REVOLUTE:
            # Rodrigues for a unit axis: R = c I + s [a]x + (1 - c) a a^T
            th = nf[i, 3] * q[ni[i, 2]] + nf[i, 4]
            c = math.cos(th)
            s = math.sin(th)
            t = 1.0 - c
            a0 = nf[i, 0]
            a1 = nf[i, 1]
            a2 = nf[i, 2]
            m00 = c + t * a0 * a0
            m11 = c + t * a1 * a1
            m22 = c + t * a2 * a2
            m01 = t * a0 * a1 - s * a2
            m10 = t * a0 * a1 + s * a2
            m02 = t * a0 * a2 + s * a1
            m20 = t * a0 * a2 - s * a1
            m12 = t * a1 * a2 - s * a0
            m21 = t * a1 * a2 + s * a0
        elif jt == PRISMATIC:
            th = nf[i, 3] * q[ni[i, 2]] + nf[i, 4]
            m03 = nf[i, 0] * th
            m13 = nf[i, 1] * th
            m23 = nf[i, 2] * th
        elif jt == BALL:
            k = ni[i, 2]
            r0 = q[k]
            r1 = q[k + 1]
            r2 = q[k + 2]
            th2 = r0 * r0 + r1 * r1 + r2 * r2
            if th2 < 1e-12:  # sin(t)/t and (1 - cos t)/t^2 to second order
                a = 1.0 - th2 / 6.0
                b = 0.5 - th2 / 24.0
            else:
                th = math.sqrt(th2)
                a = math.sin(th) / th
                b = (1.0 - math.cos(th)) / th2
            m00 = 1.0 - b * (r1 * r1 + r2 * r2)
            m11 = 1.0 - b * (r0 * r0 + r2 * r2)
            m22 = 1.0 - b * (r0 * r0 + r1 * r1)
            m01 = -a * r2 + b * r0 * r1
            m10 = a * r2 + b * r0 * r1
            m02 = a * r1 + b * r0 * r2
            m20 = -a * r1 + b * r0 * r2
            m12 = -a * r0 + b * r1 * r2
            m21 = a * r0 + b * r1 * r2
        o = origin[i]
        b00 = o[0, 0] * m00 + o[0, 1] * m10 + o[0, 2] * m20
        b01 = o[0, 0] * m01 + o[0, 1] * m11 + o[0, 2] * m21
        b02 = o[0, 0] * m02 + o[0, 1] * m12 + o[0, 2] * m22
        b03 = o[0, 0] * m03 + o[0, 1] * m13 + o[0, 2] * m23 + o[0, 3]
        b10 = o[1, 0] * m00 + o[1, 1] * m10 + o[1, 2] * m20
        b11 = o[1, 0] * m01 + o[1, 1] * m11 + o[1, 2] * m21
        b12 = o[1, 0] * m02 + o[1, 1] * m12 + o[1, 2] * m22
        b13 = o[1, 0] * m03 + o[1, 1] * m13 + o[1, 2] * m23 + o[1, 3]
        b20 = o[2, 0] * m00 + o[2, 1] * m10 + o[2, 2] * m20
        b21 = o[2, 0] * m01 + o[2, 1] * m11 + o[2, 2] * m21
        b22 = o[2, 0] * m02 + o[2, 1] * m12 + o[2, 2] * m22
        b23 = o[2, 0] * m03 + o[2, 1] * m13 + o[2, 2] * m23 + o[2, 3]
        d = out[i]
        if ps < 0:
            d[0, 0] = b00
            d[0, 1] = b01
            d[0, 2] = b02
            d[0, 3] = b03
            d[1, 0] = b10
            d[1, 1] = b11
            d[1, 2] = b12
            d[1, 3] = b13
            d[2, 0] = b20
            d[2, 1] = b21
            d[2, 2] = b22
            d[2, 3] = b23
        else:
            P = out[ps]
            for r in range(3):
                a0 = P[r, 0]
                a1 = P[r, 1]
                a2 = P[r, 2]
                a3 = P[r, 3]
                d[r, 0] = a0 * b00 + a1 * b10 + a2 * b20
                d[r, 1] = a0 * b01 + a1 * b11 + a2 * b21
                d[r, 2] = a0 * b02 + a1 * b12 + a2 * b22
                d[r, 3] = a0 * b03 + a1 * b13 + a2 * b23 + a3
        d[3, 0] = 0.0
        d[3, 1] = 0.0
        d[3, 2] = 0.0
        d[3, 3] = 1.0


@njit(cache=True)
def all_finite(q):
    for v in q.ravel():
        if not (v - v == 0.0):
            return False
    return True


@njit(cache=True)
def clamp_finite(q, lower, upper):
    """Clamp q into [lower, upper] in place; False if q holds NaN or inf."""
    for i in range(q.shape[0]):
        v = q[i]
        if not (v - v == 0.0):
            return False
        if v < lower[i]:
            q[i] = lower[i]
        elif v > upper[i]:
            q[i] = upper[i]
    return True


@njit(cache=True)
def fk_all_into(ni, nf, origin, q, out):
    """World transforms of every node into ``out`` (n, 4, 4)."""
    fk_upto_into(ni, nf, origin, q, ni.shape[0] - 1, out)


@njit(cache=True)
def fk_frame_into(ni, nf, origin, q, node, out):
    """World transform of one node into ``out`` (4, 4)."""
    Ts = np.empty((node + 1, 4, 4))
    fk_upto_into(ni, nf, origin, q, node, Ts)
    for r in range(4):
        for c in range(4):
            out[r, c] = Ts[node, r, c]


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
    Ts = np.empty((node + 1, 4, 4))
    fk_upto_into(ni, nf, origin, q, node, Ts)
    for r in range(4):
        for c in range(4):
            T_out[r, c] = Ts[node, r, c]
    jacobian_from_all(ni, nf, Ts, node, J)


@njit(cache=True)
def fk_frame_checked(ni, nf, origin, q, node, out):
    """Single-frame FK into ``out`` (4, 4); False (out untouched) for non-finite q."""
    if not all_finite(q):
        return False
    fk_frame_into(ni, nf, origin, q, node, out)
    return True


@njit(cache=True)
def jacobian_checked(ni, nf, origin, q, node, J):
    """Single-frame Jacobian into ``J`` (6, dof); False for non-finite q."""
    if not all_finite(q):
        return False
    T = np.empty((4, 4))
    jacobian_into(ni, nf, origin, q, node, J, T)
    return True


class EntryPoints:
    """Compiled overloads called without Numba's per-call type dispatch.

    Only for call sites whose argument types are fixed by construction (read-only model arrays,
    a writable C-contiguous float64 q, an int node, a fresh output array): the first call goes
    through the dispatcher (compiling or loading the cache), later calls use the entry point of
    the overload it picked (saves ~0.5-1 µs per call)."""

    def __init__(self):
        self._eps = {}

    def call(self, dispatcher, *args):
        ep = self._eps.get(dispatcher)
        if ep is not None:
            return ep(*args)
        # a read-only q would type differently: make the first call with the canonical types
        args = tuple(np.array(a) if isinstance(a, np.ndarray) and a.ndim == 1 and a.dtype == np.float64
                     and not a.flags.writeable else a for a in args)
        res = dispatcher(*args)
        import numba

        self._eps[dispatcher] = dispatcher.overloads[tuple(numba.typeof(a) for a in args)].entry_point
        return res


ENTRY = EntryPoints()


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
