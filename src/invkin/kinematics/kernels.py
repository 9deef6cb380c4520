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

Free and planar joints (``FREE``, ``PLANAR``) are chains of these nodes (see model/build.py).

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

import numba
import numpy as np
from llvmlite import ir as llvm_ir
from numba import njit, prange, types
from numba.core.extending import intrinsic

from .._checks import MAX_LENGTH
from ..spatial import rotvec_product, so3_exp_s


FIXED = 0
REVOLUTE = 1
PRISMATIC = 2
BALL = 3
# Composite joint kinds: the builder expands them into internal nodes of the kinds above, so no
# kernel ever meets these codes (Robot.joint_kind tells which nodes belong to one):
# free (6 q entries) = prismatic x, y, z along the joint frame's axes, then a ball joint;
# planar (3 q entries) = prismatic along two in-plane axes, then a revolute joint about the normal.
FREE = 4
PLANAR = 5


# Floating-point contraction and reassociation only: NaN/inf semantics are kept.
# Only "nsz": contraction (FMA), reassociation and approximate functions let LLVM compile the
# same kernel to different bits when it is inlined into a fresh compile versus loaded from the
# cache, which broke bit-identical results between processes (local vs Dask workers, measured).
FAST = {"nsz"}
# Kernels that allocate nothing compile without Numba's reference counting: FK's two views per
# node (out[i], out[parent]) were counted in and out, 0.45 of G1's 1.1 µs FK (session 5). Their
# callees are then compiled the same way on first use and must not allocate either.
NO_RC = {"_nrt": False} if hasattr(numba.core.options.DefaultOptions, "_nrt") else {}


@njit(cache=True, fastmath=FAST, **NO_RC)
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
            m00, m01, m02, m10, m11, m12, m20, m21, m22 = so3_exp_s(q[k], q[k + 1], q[k + 2])
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
def all_within(q, bound):
    """True when every entry of ``q`` is a number within ±bound (NaN and inf are not)."""
    for v in q.ravel():
        if not (-bound <= v <= bound):
            return False
    return True



@njit(cache=True, **NO_RC)
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
def jacobian_into(ni, nf, origin, q, node, J, T_out):
    """Geometric Jacobian (6, dof) of ``node``'s origin into ``J``; its transform into ``T_out``."""
    Ts = np.empty((node + 1, 4, 4))
    fk_upto_into(ni, nf, origin, q, node, Ts)
    for r in range(4):
        for c in range(4):
            T_out[r, c] = Ts[node, r, c]
    jacobian_from_all(ni, nf, Ts, node, J)


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


@njit(cache=True, **NO_RC)
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


# --------------------------------------------------------------------------- chain programs
#
# The path from the root to one node, compiled once per (robot, node) into a float64 array
# ``ch`` (S + 1, 16): one row per moving joint on the path (root first) and a last row for the
# fixed transform after it. A row is ``type, qidx, multiplier, offset, pre`` with ``pre`` the
# 3 x 4 (row-major) fixed transform that leads to the joint. Fixed nodes are folded into the
# next row's ``pre`` (or the last row), and every revolute / prismatic joint is expressed about
# the z axis of a rotated joint frame ``G = T P`` (``P`` a rotation with ``P e_z = axis``; its
# inverse is folded into the next ``pre``), so a node update is ``G = G_prev @ pre @ Rz(theta)``
# (or ``Tz``): 36 multiply-adds for ``G_prev @ pre`` and 6 for the joint, against 72 for
# ``T_parent @ origin @ M`` in ``fk_upto_into``. The frames ``G`` of the moving joints give the
# Jacobian directly: the world axis is G's z column, the joint origin its translation (ball:
# the three columns of G). Kernels that walk a chain need no (n, 4, 4) scratch. The last row's
# offset slot (unused by a fixed row) flags a chain whose joints share a q entry (mimic).
#
# The small kernels of the LM hot path are inlined into their callers (inline="always", Numba
# IR inlining): a call passes every array as its 7-9 struct fields, which for the 11-13 array
# arguments of a residual or a step cost more than the arithmetic (-25 % per LM iteration on
# ur5; inlining lm_chain_iterate_ws itself too made the attempt loop slower, +18 %).
#
# Kernels marked NO_RC never allocate; they are compiled without Numba's reference counting
# (its ``_nrt`` option): with it, every array handed to a helper costs atomic increments and
# decrements that took more time than the arithmetic of these small kernels (a goal row: 134
# against 69 ns), and every array argument of a call from Python a heap-allocated wrapper
# (3 arrays: 142 against 67 ns).

@intrinsic
def fma(typingctx, a, b, c):
    """a * b + c with one rounding (llvm.fma): the same bits whether the caller is compiled fresh,
    inlined or loaded from the cache — unlike contraction left to fastmath, which LLVM applies
    differently in each context — and one instruction on CPUs with FMA."""
    if not all(isinstance(t, (types.Float, types.Integer)) for t in (a, b, c)):
        return None
    sig = types.float64(types.float64, types.float64, types.float64)

    def codegen(context, builder, signature, args):
        x, y, z = (context.cast(builder, v, t, types.float64) for v, t in zip(args, signature.args))
        d = llvm_ir.DoubleType()
        fn = builder.module.declare_intrinsic("llvm.fma", [d], llvm_ir.FunctionType(d, [d, d, d]))
        return builder.call(fn, [x, y, z])

    return sig, codegen


CH_TYPE, CH_QIDX, CH_MULT, CH_OFFSET, CH_PRE = 0, 1, 2, 3, 4
CH_COLS = 16


def _frame_with_z(a) -> np.ndarray:
    """A rotation (3, 3) whose third column is the unit vector ``a``; exact (entries 0 and +-1)
    when ``a`` is a coordinate axis."""
    a = np.asarray(a, dtype=np.float64)
    h = np.zeros(3)
    h[int(np.argmin(np.abs(a)))] = 1.0
    x = np.cross(h, a)
    x /= np.linalg.norm(x)
    y = np.cross(a, x)
    return np.column_stack([x, y, a])


def chain_program(parent, joint_type, axis, origin, qidx, multiplier, offset, node: int) -> np.ndarray:
    """The chain program (S + 1, 16) of ``node`` (see above); read-only."""
    path = []
    i = int(node)
    while i >= 0:
        path.append(i)
        i = int(parent[i])
    path.reverse()
    rows = []
    cols = []
    acc = np.eye(4)  # fixed transform since the last moving joint frame G
    for i in path:
        acc = acc @ origin[i]
        jt = int(joint_type[i])
        if jt == FIXED or qidx[i] < 0:
            continue
        P = np.eye(4)
        if jt != BALL:
            P[:3, :3] = _frame_with_z(axis[i])
        pre = acc @ P
        rows.append([float(jt), float(qidx[i]), float(multiplier[i]), float(offset[i])] + pre[:3].ravel().tolist())
        cols.extend(range(int(qidx[i]), int(qidx[i]) + (3 if jt == BALL else 1)))
        acc = P.T.copy()  # P^-1 (a rotation; the next node's origin follows it)
    shared = 1.0 if len(set(cols)) < len(cols) else 0.0
    rows.append([float(FIXED), -1.0, 1.0, shared] + acc[:3].ravel().tolist())
    ch = np.ascontiguousarray(np.array(rows, dtype=np.float64).reshape(len(rows), CH_COLS))
    ch.setflags(write=False)
    return ch


@njit(cache=True, fastmath=FAST, inline="always")
def sincos(x):
    """(sin x, cos x): fdlibm's Cody-Waite reduction by pi/2 and its __kernel_sin / __kernel_cos
    polynomials on [-pi/4, pi/4]; abs error <= 1.2e-16 against libm on |x| < 20 (tested), in
    about 2/3 of the time of math.sin plus math.cos (one reduction for both): 15 % of an LM
    iteration on a 6-7 joint chain."""
    n = math.floor(x * 0.63661977236758134308 + 0.5)
    r = fma(-n, 6.07710050650619224932e-11, fma(-n, 1.57079632673412561417e+00, x))
    z = r * r
    ps = fma(z, fma(z, fma(z, fma(z, 1.58969099521155010221e-10, -2.50507602534068634195e-08),
                           2.75573137070700676789e-06), -1.98412698298579493134e-04), 8.33333333332248946124e-03)
    s = fma(z * r, fma(z, ps, -1.66666666666666324348e-01), r)
    pc = fma(z, fma(z, fma(z, fma(z, -1.13596475577881948265e-11, 2.08757232129817482790e-09),
                           -2.75573143513906633035e-07), 2.48015872894767294178e-05), -1.38888888888741095749e-03)
    cr = z * fma(z, pc, 4.16666666666666019037e-02)
    hz = 0.5 * z
    w = 1.0 - hz
    c = w + (((1.0 - w) - hz) + z * cr)
    k = int(n)  # quadrant k mod 4: (s, c), (c, -s), (-s, -c), (-c, s), without branches
    odd = (k & 1) != 0
    ss = c if odd else s
    cc = s if odd else c
    return (1.0 - 2.0 * ((k >> 1) & 1)) * ss, (1.0 - 2.0 * (((k + 1) >> 1) & 1)) * cc


@njit(cache=True, fastmath=FAST, inline="always")
def _chain_step(ch, k, q, w00, w01, w02, w03, w10, w11, w12, w13, w20, w21, w22, w23):
    """G_k = G_{k-1} @ pre_k @ M_k(theta) for row k of a chain program (12 scalars in and out)."""
    p00 = ch[k, 4]
    p01 = ch[k, 5]
    p02 = ch[k, 6]
    p03 = ch[k, 7]
    p10 = ch[k, 8]
    p11 = ch[k, 9]
    p12 = ch[k, 10]
    p13 = ch[k, 11]
    p20 = ch[k, 12]
    p21 = ch[k, 13]
    p22 = ch[k, 14]
    p23 = ch[k, 15]
    a00 = fma(w00, p00, fma(w01, p10, w02 * p20))
    a01 = fma(w00, p01, fma(w01, p11, w02 * p21))
    a02 = fma(w00, p02, fma(w01, p12, w02 * p22))
    a03 = fma(w00, p03, fma(w01, p13, fma(w02, p23, w03)))
    a10 = fma(w10, p00, fma(w11, p10, w12 * p20))
    a11 = fma(w10, p01, fma(w11, p11, w12 * p21))
    a12 = fma(w10, p02, fma(w11, p12, w12 * p22))
    a13 = fma(w10, p03, fma(w11, p13, fma(w12, p23, w13)))
    a20 = fma(w20, p00, fma(w21, p10, w22 * p20))
    a21 = fma(w20, p01, fma(w21, p11, w22 * p21))
    a22 = fma(w20, p02, fma(w21, p12, w22 * p22))
    a23 = fma(w20, p03, fma(w21, p13, fma(w22, p23, w23)))
    jt = ch[k, 0]
    if jt == 1.0:  # revolute about z: columns 0 and 1 turn by theta
        th = ch[k, 2] * q[int(ch[k, 1])] + ch[k, 3]
        s, c = sincos(th)
        return (fma(c, a00, s * a01), fma(c, a01, -(s * a00)), a02, a03,
                fma(c, a10, s * a11), fma(c, a11, -(s * a10)), a12, a13,
                fma(c, a20, s * a21), fma(c, a21, -(s * a20)), a22, a23)
    if jt == 2.0:  # prismatic along z
        th = ch[k, 2] * q[int(ch[k, 1])] + ch[k, 3]
        return (a00, a01, a02, a03 + a02 * th, a10, a11, a12, a13 + a12 * th, a20, a21, a22, a23 + a22 * th)
    if jt == 3.0:  # ball: R = exp(r)
        j = int(ch[k, 1])
        m00, m01, m02, m10, m11, m12, m20, m21, m22 = so3_exp_s(q[j], q[j + 1], q[j + 2])
        return (a00 * m00 + a01 * m10 + a02 * m20, a00 * m01 + a01 * m11 + a02 * m21,
                a00 * m02 + a01 * m12 + a02 * m22, a03,
                a10 * m00 + a11 * m10 + a12 * m20, a10 * m01 + a11 * m11 + a12 * m21,
                a10 * m02 + a11 * m12 + a12 * m22, a13,
                a20 * m00 + a21 * m10 + a22 * m20, a20 * m01 + a21 * m11 + a22 * m21,
                a20 * m02 + a21 * m12 + a22 * m22, a23)
    return (a00, a01, a02, a03, a10, a11, a12, a13, a20, a21, a22, a23)


@njit(cache=True, fastmath=FAST, inline="always")
def _store_T(out, w00, w01, w02, w03, w10, w11, w12, w13, w20, w21, w22, w23):
    out[0, 0] = w00
    out[0, 1] = w01
    out[0, 2] = w02
    out[0, 3] = w03
    out[1, 0] = w10
    out[1, 1] = w11
    out[1, 2] = w12
    out[1, 3] = w13
    out[2, 0] = w20
    out[2, 1] = w21
    out[2, 2] = w22
    out[2, 3] = w23
    out[3, 0] = 0.0
    out[3, 1] = 0.0
    out[3, 2] = 0.0
    out[3, 3] = 1.0


@njit(cache=True, fastmath=FAST, **NO_RC)
def chain_fk_into(ch, q, out):
    """Transform of the chain's node into ``out`` (4, 4); no scratch."""
    w00, w01, w02, w03 = 1.0, 0.0, 0.0, 0.0
    w10, w11, w12, w13 = 0.0, 1.0, 0.0, 0.0
    w20, w21, w22, w23 = 0.0, 0.0, 1.0, 0.0
    for k in range(ch.shape[0]):
        w00, w01, w02, w03, w10, w11, w12, w13, w20, w21, w22, w23 = _chain_step(
            ch, k, q, w00, w01, w02, w03, w10, w11, w12, w13, w20, w21, w22, w23)
    _store_T(out, w00, w01, w02, w03, w10, w11, w12, w13, w20, w21, w22, w23)


@njit(cache=True, fastmath=FAST, inline="always", **NO_RC)
def chain_frames_into(ch, q, F, out):
    """chain_fk_into, also keeping the joint frames: F[k] (12,) = G_k row-major 3 x 4 for every
    moving row k < S (F has at least S rows)."""
    w00, w01, w02, w03 = 1.0, 0.0, 0.0, 0.0
    w10, w11, w12, w13 = 0.0, 1.0, 0.0, 0.0
    w20, w21, w22, w23 = 0.0, 0.0, 1.0, 0.0
    S = ch.shape[0] - 1
    for k in range(S + 1):
        w00, w01, w02, w03, w10, w11, w12, w13, w20, w21, w22, w23 = _chain_step(
            ch, k, q, w00, w01, w02, w03, w10, w11, w12, w13, w20, w21, w22, w23)
        if k < S:
            F[k, 0] = w00
            F[k, 1] = w01
            F[k, 2] = w02
            F[k, 3] = w03
            F[k, 4] = w10
            F[k, 5] = w11
            F[k, 6] = w12
            F[k, 7] = w13
            F[k, 8] = w20
            F[k, 9] = w21
            F[k, 10] = w22
            F[k, 11] = w23
    _store_T(out, w00, w01, w02, w03, w10, w11, w12, w13, w20, w21, w22, w23)


@njit(cache=True, fastmath=FAST, inline="always", **NO_RC)
def chain_jacobian_from_frames(ch, F, px, py, pz, J):
    """Geometric Jacobian (6, dof) at the point p of the frames F of chain_frames_into."""
    J[:, :] = 0.0
    for k in range(ch.shape[0] - 1):
        jt = ch[k, 0]
        c = int(ch[k, 1])
        if jt == 3.0:
            dx = px - F[k, 3]
            dy = py - F[k, 7]
            dz = pz - F[k, 11]
            for a in range(3):
                ax = F[k, a]
                ay = F[k, 4 + a]
                az = F[k, 8 + a]
                J[0, c + a] += ay * dz - az * dy
                J[1, c + a] += az * dx - ax * dz
                J[2, c + a] += ax * dy - ay * dx
                J[3, c + a] += ax
                J[4, c + a] += ay
                J[5, c + a] += az
            continue
        m = ch[k, 2]
        ax = m * F[k, 2]
        ay = m * F[k, 6]
        az = m * F[k, 10]
        if jt == 1.0:
            dx = px - F[k, 3]
            dy = py - F[k, 7]
            dz = pz - F[k, 11]
            J[0, c] += ay * dz - az * dy
            J[1, c] += az * dx - ax * dz
            J[2, c] += ax * dy - ay * dx
            J[3, c] += ax
            J[4, c] += ay
            J[5, c] += az
        else:
            J[0, c] += ax
            J[1, c] += ay
            J[2, c] += az


@njit(cache=True, fastmath=FAST, inline="always", **NO_RC)
def chain_jacobian_direct(ch, q, J, out):
    """Jacobian (6, dof) and transform (4, 4) of a chain whose joints have distinct q entries
    (no mimic), without scratch: the forward pass parks each joint's axis and origin in its own
    column of J, the backward pass turns them into the column."""
    J[:, :] = 0.0
    w00, w01, w02, w03 = 1.0, 0.0, 0.0, 0.0
    w10, w11, w12, w13 = 0.0, 1.0, 0.0, 0.0
    w20, w21, w22, w23 = 0.0, 0.0, 1.0, 0.0
    S = ch.shape[0] - 1
    for k in range(S + 1):
        w00, w01, w02, w03, w10, w11, w12, w13, w20, w21, w22, w23 = _chain_step(
            ch, k, q, w00, w01, w02, w03, w10, w11, w12, w13, w20, w21, w22, w23)
        if k < S:
            c = int(ch[k, 1])
            if ch[k, 0] == 3.0:
                J[0, c] = w00
                J[1, c] = w10
                J[2, c] = w20
                J[0, c + 1] = w01
                J[1, c + 1] = w11
                J[2, c + 1] = w21
                J[0, c + 2] = w02
                J[1, c + 2] = w12
                J[2, c + 2] = w22
                for a in range(3):
                    J[3, c + a] = w03
                    J[4, c + a] = w13
                    J[5, c + a] = w23
            else:
                m = ch[k, 2]
                J[0, c] = m * w02
                J[1, c] = m * w12
                J[2, c] = m * w22
                J[3, c] = w03
                J[4, c] = w13
                J[5, c] = w23
    _store_T(out, w00, w01, w02, w03, w10, w11, w12, w13, w20, w21, w22, w23)
    for k in range(S):
        jt = ch[k, 0]
        c = int(ch[k, 1])
        for a in range(3 if jt == 3.0 else 1):
            ax = J[0, c + a]
            ay = J[1, c + a]
            az = J[2, c + a]
            if jt == 2.0:
                J[3, c] = 0.0
                J[4, c] = 0.0
                J[5, c] = 0.0
                continue
            dx = w03 - J[3, c + a]
            dy = w13 - J[4, c + a]
            dz = w23 - J[5, c + a]
            J[0, c + a] = ay * dz - az * dy
            J[1, c + a] = az * dx - ax * dz
            J[2, c + a] = ax * dy - ay * dx
            J[3, c + a] = ax
            J[4, c + a] = ay
            J[5, c + a] = az


@njit(cache=True, **NO_RC)
def _finite_vec(q, dof):
    """q is (dof,) numbers within ±MAX_LENGTH (beyond it sincos's reduction, and products of
    lengths, lose every digit: FK of 1e20 rad was not a rotation, of 1e100 NaN)."""
    if q.shape[0] != dof:
        return False
    for i in range(dof):
        v = q[i]
        if not (-MAX_LENGTH <= v <= MAX_LENGTH):
            return False
    return True


@njit(cache=True, **NO_RC)
def chain_fk_checked(ch, q, dof, out):
    """Single-call FK of a chain into ``out`` (4, 4); False (out untouched) when q is not (dof,)
    numbers within ±MAX_LENGTH (Robot.check_q then names the bad entry)."""
    if not _finite_vec(q, dof):
        return False
    chain_fk_into(ch, q, out)
    return True


@njit(cache=True)
def chain_fk_jacobian_into(ch, q, T, J):
    """Transform (4, 4) and Jacobian (6, dof) of a chain's node in one pass (any chain)."""
    if ch[ch.shape[0] - 1, CH_OFFSET] == 0.0:
        chain_jacobian_direct(ch, q, J, T)
        return
    F = np.empty((ch.shape[0], 12))
    chain_frames_into(ch, q, F, T)
    chain_jacobian_from_frames(ch, F, T[0, 3], T[1, 3], T[2, 3], J)


@njit(cache=True, **NO_RC)
def chain_jacobian_checked(ch, q, J, T):
    """Single-call Jacobian of a chain into ``J`` (6, dof), its transform into T (scratch,
    (4, 4)); False when q is not (dof,) numbers within ±MAX_LENGTH or the chain shares q entries (mimic:
    use chain_fk_jacobian_into)."""
    if ch[ch.shape[0] - 1, CH_OFFSET] != 0.0 or not _finite_vec(q, J.shape[1]):
        return False
    chain_jacobian_direct(ch, q, J, T)
    return True


@njit(cache=True, parallel=True)
def chain_fk_batch(ch, qs):
    B = qs.shape[0]
    out = np.empty((B, 4, 4))
    for b in prange(B):
        chain_fk_into(ch, qs[b], out[b])
    return out


@njit(cache=True, parallel=True)
def chain_jacobian_batch(ch, qs, dof):
    B = qs.shape[0]
    out = np.empty((B, 6, dof))
    nchunk = min(B, 64)
    for t in prange(nchunk):  # one scratch per chunk of items
        T = np.empty((4, 4))
        F = np.empty((ch.shape[0], 12))
        _jacobian_chunk(ch, qs, out, t * B // nchunk, (t + 1) * B // nchunk, T, F)
    return out


@njit(cache=True, **NO_RC)
def _jacobian_chunk(ch, qs, out, b0, b1, T, F):
    if ch[ch.shape[0] - 1, CH_OFFSET] == 0.0:
        for b in range(b0, b1):
            chain_jacobian_direct(ch, qs[b], out[b], T)
    else:
        for b in range(b0, b1):
            chain_frames_into(ch, qs[b], F, T)
            chain_jacobian_from_frames(ch, F, T[0, 3], T[1, 3], T[2, 3], out[b])


# --------------------------------------------------------------------------- q ⊕ dq, q1 ⊖ q0


@njit(cache=True)
def rotvec_compose(a, i, b, j, out, k):
    """out[k:k+3] = log(exp(a[i:i+3]) exp(b[j:j+3])): rotation vectors composed (a local increment)."""
    out[k], out[k + 1], out[k + 2] = rotvec_product(a[i], a[i + 1], a[i + 2], b[j], b[j + 1], b[j + 2], bool(0))


@njit(cache=True)
def rotvec_between(a, i, b, j, out, k):
    """out[k:k+3] = log(exp(a[i:i+3])^T exp(b[j:j+3])): the rotation from a to b, in a's frame."""
    out[k], out[k + 1], out[k + 2] = rotvec_product(a[i], a[i + 1], a[i + 2], b[j], b[j + 1], b[j + 2], bool(1))


@njit(cache=True)
def integrate_into(q, dq, balls, out):
    """out = q ⊕ dq (Robot.integrate of one configuration): the plain sum, and for the ball joint
    starting at each index of ``balls`` ``log(exp(q[ball]) exp(dq[ball]))`` (a local increment)."""
    for i in range(q.shape[0]):
        out[i] = q[i] + dq[i]
    for k in range(balls.shape[0]):
        rotvec_compose(q, balls[k], dq, balls[k], out, balls[k])


@njit(cache=True)
def difference_into(q, q_rest, balls, out):
    """out = q_rest ⊖ q (Robot.difference(q, q_rest) of one configuration): the plain difference,
    and for the ball joint starting at each index of ``balls`` ``log(R_q^T R_rest)``; the solvers'
    posture residual (solvers._common.posture_residual)."""
    for i in range(q.shape[0]):
        out[i] = q_rest[i] - q[i]
    for k in range(balls.shape[0]):
        rotvec_between(q, balls[k], q_rest, balls[k], out, balls[k])
