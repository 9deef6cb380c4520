"""Analytic two-bone IK (SEEDS.md §2, after Alan Zucconi): closed form, vectorised over any batch.

Shoulder A at the origin, bone lengths ``l1`` (A→elbow B) and ``l2`` (B→hand), target at distance
``b``. The arm is a triangle with sides ``l1``, ``l2``, ``d`` where ``d`` is ``b`` clamped into the
reachable band ``[|l1 − l2|, l1 + l2]`` (after the optional soft reach below). Law of cosines::

    cos α = (d² + l1² − l2²) / (2 d l1)      interior angle at the shoulder
    cos β = (l1² + l2² − d²) / (2 l1 l2)     interior angle at the elbow

With ``φ = atan2(target.y, target.x)`` the two mirrored solutions are::

    elbow_up=False:  θ1 = φ − α,   θ2 = π − β     (elbow on the clockwise side, θ2 ≥ 0)
    elbow_up=True:   θ1 = φ + α,   θ2 = −(π − β)  (elbow on the counter-clockwise side, θ2 ≤ 0)

``θ1`` is the upper bone's angle from +x, ``θ2`` the lower bone's angle relative to the upper one
(0 = straight); angles are not wrapped. Out of reach (``b > l1 + l2``) the clamp gives ``α = 0``,
``β = π``: the arm stretches toward the target. Too close (``b < |l1 − l2|``) it gives a folded arm
(``θ2 = ±π``) whose hand is as close to the target as the bones allow; ``b = 0`` uses the +x
direction. No input of finite lengths ≥ 0 and a finite target gives NaN.

Numerics: the angles come from ``atan2(4·area, numerator)`` with the area from Heron's formula in
factored form (``(d+L)(L−d)(d−(l1−l2))(d+(l1−l2))``, every factor exactly ≥ 0 after the clamp) and
all lengths divided by ``L = l1 + l2``; this keeps full precision near full extension and folding,
where ``acos`` loses half the digits, and does not overflow for coordinates and lengths up to 1e300.

Soft reach (``soft = s > 0``, a length): with ``L = l1 + l2`` and ``d0 = L − s`` (``s`` capped at
``L``), the distance the arm aims for is::

    d = b                                    if b ≤ d0
    d = d0 + s · (1 − exp(−(b − d0) / s))    if b > d0

continuous with slope 1 at ``d0`` and approaching ``L`` only as ``b → ∞``, so the elbow eases to
straight instead of snapping when the target crosses full extension; the hand then falls short of
targets beyond ``d0``, along the shoulder→target ray.
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit, parallel_chunksize, prange

from .._parallel import call as parallel_call
from .._checks import real_array
from ..errors import GoalError

__all__ = ["two_bone_2d", "two_bone_3d", "two_bone_lengths", "two_bone_2d_scalar"]


# ------------------------------------------------------------------------------ scalar maths
# Plain Python (math module only): the scalar reference. The kernels run an njit-compiled copy of
# _triangle and the same angle formulas with a faster atan2 (_atan2_nb).
def _triangle(l1, l2, b, soft):
    """(d, ca, sa, cb, sb): effective distance d and (cos, sin) of α and β, each pair scaled by a
    common positive factor (so ``atan2(sa, ca) = α``)."""
    L = l1 + l2
    if not L > 0.0:
        return 0.0, 1.0, 0.0, -1.0, 0.0
    scale = 1.0
    if L < 1e-280:  # 1 / L would overflow: work in scaled units (angles are scale free)
        scale = 1e280
        l1 *= scale
        l2 *= scale
        b *= scale
        soft *= scale
        L = l1 + l2
    d = b
    if soft > 0.0:
        s = min(soft, L)
        d0 = L - s
        if d > d0:
            d = d0 - s * math.expm1(-(d - d0) / s)
    dl = l1 - l2
    d = min(max(d, abs(dl)), L)
    iL = 1.0 / L
    e = d * iL
    a = l1 * iL
    c = l2 * iL
    # Heron: (4 area / L²)²; every factor is >= 0 exactly because of the clamp above
    area4 = math.sqrt((e + 1.0) * ((L - d) * iL) * ((d - dl) * iL) * ((d + dl) * iL))
    ca = e * e + dl * iL  # (d² + l1² − l2²) / L²
    cb = a * a + c * c - e * e  # (l1² + l2² − d²) / L²
    sa = area4
    sb = area4
    if l1 == 0.0 or (ca == 0.0 and sa == 0.0):  # shoulder angle free: point the bone at the target
        ca = 1.0
        sa = 0.0
    if l1 == 0.0 or l2 == 0.0:  # a zero bone: keep the arm straight
        cb = -1.0
        sb = 0.0
    return d / scale, ca, sa, cb, sb


def two_bone_2d_scalar(l1: float, l2: float, x: float, y: float, elbow_up: bool = True,
                       soft: float = 0.0) -> tuple:
    """One arm, in plain Python ``math``: ``(θ1, θ2)`` [rad] as in :func:`two_bone_2d`.

    No validation; the reference for the kernel and the pure-Python baseline of the benchmark.
    """
    b = math.hypot(x, y)
    if not 1e-150 < b < 1e150:  # keep the products below finite; atan2 ignores the scale
        x, y = (x / b, y / b) if b > 0.0 else (1.0, 0.0)
    d, ca, sa, cb, sb = _triangle(l1, l2, b, soft)
    if elbow_up:  # θ1 = φ + α: (x, y) rotated by +α; θ2 = −(π − β)
        return math.atan2(ca * y + sa * x, ca * x - sa * y), -math.atan2(sb, -cb)
    return math.atan2(ca * y - sa * x, ca * x + sa * y), math.atan2(sb, -cb)


_triangle_nb = njit(cache=True, inline="always")(_triangle)

# atan2 for the kernel: Cephes' atan rational approximation (S. L. Moshier), reduced to [0, tan(π/8)]
# and written with selects instead of branches; |error| <= 4.5e-16 rad against libm for
# |x|, |y| <= 1e300 (the kernel's arguments are O(1)), about 2.5x faster than libm's atan2 here.
_TAN_PI_8 = 0.41421356237309504880
_P0, _P1, _P2, _P3, _P4 = (-8.750608600031904122785e-01, -1.615753718733365076637e+01,
                           -7.500855792314704667340e+01, -1.228866684490136173410e+02,
                           -6.485021904942025371773e+01)
_Q0, _Q1, _Q2, _Q3, _Q4 = (2.485846490142306297962e+01, 1.650270098316988542046e+02,
                           4.328810604912902668951e+02, 4.853903996359136964868e+02,
                           1.945506571482613964425e+02)


@njit(cache=True, inline="always")
def _atan2_nb(y, x):
    ax = abs(x)
    ay = abs(y)
    swap = ay > ax
    num = ax if swap else ay
    den = ay if swap else ax
    big = num > _TAN_PI_8 * den  # atan(r) = π/4 + atan((r − 1)/(r + 1))
    rn = num - den if big else num
    rd = num + den if big else den
    r = rn / rd if rd > 0.0 else 0.0
    z = r * r
    p = z * ((((_P0 * z + _P1) * z + _P2) * z + _P3) * z + _P4) / (
        ((((z + _Q0) * z + _Q1) * z + _Q2) * z + _Q3) * z + _Q4)
    a = r * p + r + (0.25 * math.pi if big else 0.0)
    a = 0.5 * math.pi - a if swap else a
    a = math.pi - a if (x < 0.0 or (x == 0.0 and math.copysign(1.0, x) < 0.0)) else a
    return math.copysign(a, y)


# ------------------------------------------------------------------------------ kernels
# Inputs are rows; an input with one row is broadcast over the batch (index i * (rows > 1)).
@njit(cache=True, inline="always")
def _arm_2d(i, l1, l2, t, soft, up, th1, th2):
    k = i * (t.shape[0] > 1)
    x = t[k, 0]
    y = t[k, 1]
    b = math.sqrt(x * x + y * y)
    if not 1e-150 < b < 1e150:  # x² + y² may have under- or overflowed: rescale
        b = math.hypot(x, y)
        x, y = (x / b, y / b) if b > 0.0 else (1.0, 0.0)
    d, ca, sa, cb, sb = _triangle_nb(l1[i * (l1.shape[0] > 1)], l2[i * (l2.shape[0] > 1)], b,
                                     soft[i * (soft.shape[0] > 1)])
    if up:  # atan2 is scale invariant: (x, y) need not be normalised
        th1[i] = _atan2_nb(ca * y + sa * x, ca * x - sa * y)
        th2[i] = -_atan2_nb(sb, -cb)
    else:
        th1[i] = _atan2_nb(ca * y - sa * x, ca * x + sa * y)
        th2[i] = _atan2_nb(sb, -cb)


@njit(cache=True, inline="always")
def _arm_3d(i, shoulder, l1, l2, target, pole, soft, elbow, hand):
    S = shoulder[i * (shoulder.shape[0] > 1)]
    T = target[i * (target.shape[0] > 1)]
    P = pole[i * (pole.shape[0] > 1)]
    vx = T[0] - S[0]
    vy = T[1] - S[1]
    vz = T[2] - S[2]
    b = math.sqrt(vx * vx + vy * vy + vz * vz)
    if not 1e-150 < b < 1e150:  # |v|² may have under- or overflowed: measure it rescaled
        m = max(abs(vx), abs(vy), abs(vz))
        b = m * math.sqrt((vx / m) ** 2 + (vy / m) ** 2 + (vz / m) ** 2) if m > 0.0 else 0.0
    pm = max(abs(P[0]), abs(P[1]), abs(P[2]))
    px, py, pz = (P[0] / pm, P[1] / pm, P[2] / pm) if pm > 0.0 else (0.0, 0.0, 0.0)
    pn = math.sqrt(px * px + py * py + pz * pz)
    if b > 0.0:
        ux, uy, uz = vx / b, vy / b, vz / b
    elif pn > 0.0:  # target at the shoulder: fold toward the pole
        ux, uy, uz = px / pn, py / pn, pz / pn
    else:
        ux, uy, uz = 1.0, 0.0, 0.0
    # bend direction: the pole's component perpendicular to u
    pu = px * ux + py * uy + pz * uz
    nx, ny, nz = px - pu * ux, py - pu * uy, pz - pu * uz
    nn = math.sqrt(nx * nx + ny * ny + nz * nz)
    if not nn > 1e-12 * pn:  # no usable pole: any perpendicular, the axis least along u
        ax, ay, az = abs(ux), abs(uy), abs(uz)
        if ax <= ay and ax <= az:
            ex, ey, ez = 1.0, 0.0, 0.0
        elif ay <= az:
            ex, ey, ez = 0.0, 1.0, 0.0
        else:
            ex, ey, ez = 0.0, 0.0, 1.0
        eu = ex * ux + ey * uy + ez * uz
        nx, ny, nz = ex - eu * ux, ey - eu * uy, ez - eu * uz
        nn = math.sqrt(nx * nx + ny * ny + nz * nz)
    nx /= nn
    ny /= nn
    nz /= nn
    L1 = l1[i * (l1.shape[0] > 1)]
    d, ca, sa, cb, sb = _triangle_nb(L1, l2[i * (l2.shape[0] > 1)], b, soft[i * (soft.shape[0] > 1)])
    r = math.hypot(ca, sa)
    c = L1 * ca / r
    s = L1 * sa / r
    elbow[i, 0] = S[0] + c * ux + s * nx
    elbow[i, 1] = S[1] + c * uy + s * ny
    elbow[i, 2] = S[2] + c * uz + s * nz
    hand[i, 0] = S[0] + d * ux
    hand[i, 1] = S[1] + d * uy
    hand[i, 2] = S[2] + d * uz


# Small batches run serially: waking the thread pool costs more than it saves below ~10^4 arms.
_PARALLEL_MIN = 16384


@njit(cache=True)
def _two_bone_2d_serial(l1, l2, t, soft, up, th1, th2):
    for i in range(th1.shape[0]):
        _arm_2d(i, l1, l2, t, soft, up, th1, th2)


@njit(cache=True, parallel=True)
def _two_bone_2d_parallel(l1, l2, t, soft, up, th1, th2):
    for i in prange(th1.shape[0]):
        _arm_2d(i, l1, l2, t, soft, up, th1, th2)


# The fast 2-D path (no soft reach; every input a full contiguous array): the loop body below is
# branch-free — the triangle of _triangle for its common case (lengths not both ~0, target
# distance in [1e-150, 1e150], no zero bone), the kernel atan2, selects for the branch — so LLVM
# vectorises it (AVX2/AVX-512: ~10x the scalar kernel). It also checks the inputs (finite,
# lengths >= 0) so that the caller needs no separate NumPy passes. Arms outside the common case
# are only counted; their chunk is then recomputed by the exact scalar kernel (_arm_2d), so the
# results are bit-for-bit those of _two_bone_2d_serial. error_model="numpy": no division check
# (a branch per division that would stop the vectoriser; 1/L is never reached with L = 0 in a
# kept result).
_FAST_CHUNK = 4096
_FAST_PARALLEL_MIN = 1 << 18  # the fast kernel is memory-bound sooner: threads pay off later
_BIG = 1.7976931348623157e308


@njit(cache=True, inline="always", error_model="numpy")
def _fast_2d_run(l1, l2, t, up, th1, th2):
    """One chunk: (number of invalid inputs, number of arms outside the common case)."""
    bad = 0
    rare = 0
    tf = t.reshape(-1)  # (x0, y0, x1, y1, ...): a constant stride (t[i, 0] would be a gather)
    for i in range(th1.shape[0]):
        a1 = l1[i]
        a2 = l2[i]
        x = tf[2 * i]
        y = tf[2 * i + 1]
        bad += ((a1 >= 0.0) & (a1 <= _BIG) & (a2 >= 0.0) & (a2 <= _BIG) & (abs(x) <= _BIG)
                & (abs(y) <= _BIG)) == False  # noqa: E712 - elementwise, no short circuit
        b = math.sqrt(x * x + y * y)
        L = a1 + a2
        dl = a1 - a2
        d = min(max(b, abs(dl)), L)
        iL = 1.0 / L
        e = d * iL
        a = a1 * iL
        c = a2 * iL
        area4 = math.sqrt((e + 1.0) * ((L - d) * iL) * ((d - dl) * iL) * ((d + dl) * iL))
        ca = e * e + dl * iL
        cb = a * a + c * c - e * e
        rare += ((b > 1e-150) & (b < 1e150) & (L >= 1e-280) & (a1 != 0.0) & (a2 != 0.0)
                 & ((ca != 0.0) | (area4 != 0.0))) == False  # noqa: E712
        sa = area4 if up else -area4
        th1[i] = _atan2_nb(ca * y + sa * x, ca * x - sa * y)
        g = _atan2_nb(area4, -cb)
        th2[i] = -g if up else g
    return bad, rare


@njit(cache=True, error_model="numpy")  # not inlined: inside a prange body the loop would not vectorise
def _fast_2d_chunk(k, l1, l2, t, up, th1, th2, soft0):
    lo = k * _FAST_CHUNK
    hi = min(lo + _FAST_CHUNK, th1.shape[0])
    bad, rare = _fast_2d_run(l1[lo:hi], l2[lo:hi], t[lo:hi], up, th1[lo:hi], th2[lo:hi])
    if rare and not bad:
        for i in range(lo, hi):
            _arm_2d(i, l1, l2, t, soft0, up, th1, th2)
    return bad


@njit(cache=True, error_model="numpy")
def _two_bone_2d_fast_serial(l1, l2, t, up, th1, th2):
    soft0 = np.zeros(1)
    bad = 0
    for k in range((th1.shape[0] + _FAST_CHUNK - 1) // _FAST_CHUNK):
        bad += _fast_2d_chunk(k, l1, l2, t, up, th1, th2, soft0)
    return bad


@njit(cache=True, parallel=True, error_model="numpy")
def _two_bone_2d_fast_parallel(l1, l2, t, up, th1, th2):
    soft0 = np.zeros(1)
    bad = 0
    for k in prange((th1.shape[0] + _FAST_CHUNK - 1) // _FAST_CHUNK):
        bad += _fast_2d_chunk(k, l1, l2, t, up, th1, th2, soft0)
    return bad


def _fast_2d(l1, l2, target_xy, up):
    """The fast path of two_bone_2d, or None where it does not apply (or the inputs are bad: the
    general path then raises the error)."""
    try:
        a1 = np.asarray(l1, dtype=np.float64)
        a2 = np.asarray(l2, dtype=np.float64)
        t = np.asarray(target_xy, dtype=np.float64)
    except (TypeError, ValueError):
        return None
    if t.ndim == 0 or t.shape[-1] != 2:
        return None
    try:
        shape = np.broadcast_shapes(a1.shape, a2.shape, t.shape[:-1])
    except ValueError:
        return None
    n = math.prod(shape)
    if n == 0:
        return None

    def full(a, item):
        if a.shape == shape + item and a.flags.c_contiguous:
            return a.reshape((n,) + item)
        return np.ascontiguousarray(np.broadcast_to(a, shape + item)).reshape((n,) + item)

    a1, a2, t = full(a1, ()), full(a2, ()), full(t, (2,))
    th1 = np.empty(n)
    th2 = np.empty(n)
    if n >= _FAST_PARALLEL_MIN:
        # hand the chunks out 4 at a time, not in one static share per thread: a thread whose core
        # is taken by another process then does less of the work instead of holding up the call
        with parallel_chunksize(4):
            bad = parallel_call(_two_bone_2d_fast_parallel, a1, a2, t, up, th1, th2)
    else:
        bad = _two_bone_2d_fast_serial(a1, a2, t, up, th1, th2)
    if bad:
        return None
    return th1.reshape(shape), th2.reshape(shape)


@njit(cache=True)
def _two_bone_3d_serial(shoulder, l1, l2, target, pole, soft, elbow, hand):
    for i in range(elbow.shape[0]):
        _arm_3d(i, shoulder, l1, l2, target, pole, soft, elbow, hand)


@njit(cache=True, parallel=True)
def _two_bone_3d_parallel(shoulder, l1, l2, target, pole, soft, elbow, hand):
    for i in prange(elbow.shape[0]):
        _arm_3d(i, shoulder, l1, l2, target, pole, soft, elbow, hand)


# ------------------------------------------------------------------------------ public API
#: Largest magnitude of any two_bone_3d input (lengths, points, pole): its kernels stay finite for
#: every finite input up to it (property-tested); beyond, l1 + l2 or a squared length can overflow
#: to inf and the result to NaN, so larger values are a GoalError.
MAX_INPUT = 1e300


def _array(x, what: str, last: int | None = None, nonneg: bool = False, bound: float | None = None) -> np.ndarray:
    """x as float64, finite and real (complex refused), within ±bound if given."""
    a = real_array(what, x, bound=bound, unit=" [m]")
    if last is not None and (a.ndim == 0 or a.shape[-1] != last):
        raise GoalError(f"{what}: expected shape (..., {last}), got {a.shape}")
    if nonneg and np.any(a < 0):
        raise GoalError(f"{what}: expected lengths >= 0, got {a.min()}")
    return a


def _rows(a: np.ndarray, shape: tuple, k: int | None) -> np.ndarray:
    """``a`` as contiguous rows for the kernels: one row if it is a single item, else one per batch entry."""
    item = () if k is None else (k,)
    if a.size == (k or 1):
        return np.ascontiguousarray(a).reshape((1,) + item)
    return np.ascontiguousarray(np.broadcast_to(a, shape + item)).reshape((-1,) + item)


def _soft(soft) -> np.ndarray:
    return np.zeros(()) if soft is None else _array(soft, "soft", nonneg=True)


def _batch_shape(*shapes) -> tuple:
    try:
        return np.broadcast_shapes(*shapes)
    except ValueError:
        raise GoalError(f"two-bone IK: input batch shapes {list(shapes)} do not broadcast") from None


def two_bone_2d(l1, l2, target_xy, elbow_up: bool = True, soft=None):
    """Planar two-bone IK: ``(theta1, theta2)`` [rad] for a shoulder at the origin.

    l1, l2: bone lengths (≥ 0, any shape broadcasting with the batch). target_xy: (..., 2) [same
    length unit]. elbow_up: True puts the elbow on the counter-clockwise (left) side of the
    shoulder→target line (θ1 = φ + α, θ2 ≤ 0); False is the seed's first solution (θ1 = φ − α,
    θ2 = π − β ≥ 0). soft: optional soft-reach band [length] (module docstring). Returns two arrays
    of the broadcast batch shape (0-d for a single arm). Forward kinematics of the result::

        elbow = l1 (cos θ1, sin θ1);  hand = elbow + l2 (cos(θ1 + θ2), sin(θ1 + θ2))
    """
    if soft is None and isinstance(elbow_up, (bool, np.bool_)):
        out = _fast_2d(l1, l2, target_xy, bool(elbow_up))
        if out is not None:
            return out
    a1 = _array(l1, "l1", nonneg=True)
    a2 = _array(l2, "l2", nonneg=True)
    t = _array(target_xy, "target_xy", last=2)
    sf = _soft(soft)
    try:
        up = bool(elbow_up)
    except ValueError:
        raise GoalError("elbow_up: expected one bool for the whole batch") from None
    shape = _batch_shape(a1.shape, a2.shape, t.shape[:-1], sf.shape)
    n = math.prod(shape)
    th1 = np.empty(n)
    th2 = np.empty(n)
    if n:
        kernel = _two_bone_2d_parallel if n >= _PARALLEL_MIN else _two_bone_2d_serial
        parallel_call(kernel, _rows(a1, shape, None), _rows(a2, shape, None), _rows(t, shape, 2),
                       _rows(sf, shape, None), up, th1, th2)
    return th1.reshape(shape), th2.reshape(shape)


def two_bone_3d(shoulder, l1, l2, target, pole, soft=None):
    """Two-bone IK in space: ``(elbow, hand)`` positions, each (..., 3).

    (``invkin.two_bone_3d`` also takes a skeleton's limb: :func:`invkin.solvers.two_bone_limb.two_bone_3d`.)

    shoulder, target: (..., 3) points; l1, l2: bone lengths (≥ 0), every input within ±1e300
    (:data:`MAX_INPUT`); pole: (..., 3) bend *direction*
    (a vector, not a point; for a pole point pass ``pole_point − shoulder``). The elbow lies in the
    plane spanned by ``u = (target − shoulder)/|target − shoulder|`` and the pole, on the pole's
    side: ``elbow = shoulder + l1 (cos α u + sin α n)`` with ``n`` the unit component of the pole
    perpendicular to ``u``; ``hand = shoulder + d u`` (``d`` as in the module docstring: the target
    itself when reachable, the stretched or folded arm's reach otherwise). Degenerate inputs stay
    finite: a pole parallel to ``u`` (or zero) bends toward the coordinate axis least aligned with
    ``u``; a target at the shoulder folds the arm along the pole (or +x). soft: as in
    :func:`two_bone_2d`. The joint rotations follow from the returned points.
    """
    S = _array(shoulder, "shoulder", last=3, bound=MAX_INPUT)
    a1 = _array(l1, "l1", nonneg=True, bound=MAX_INPUT)
    a2 = _array(l2, "l2", nonneg=True, bound=MAX_INPUT)
    T = _array(target, "target", last=3, bound=MAX_INPUT)
    P = _array(pole, "pole", last=3, bound=MAX_INPUT)
    sf = _soft(soft)
    shape = _batch_shape(S.shape[:-1], a1.shape, a2.shape, T.shape[:-1], P.shape[:-1], sf.shape)
    n = math.prod(shape)
    elbow = np.empty((n, 3))
    hand = np.empty((n, 3))
    if n:
        kernel = _two_bone_3d_parallel if n >= _PARALLEL_MIN else _two_bone_3d_serial
        parallel_call(kernel, _rows(S, shape, 3), _rows(a1, shape, None), _rows(a2, shape, None),
                       _rows(T, shape, 3), _rows(P, shape, 3), _rows(sf, shape, None), elbow, hand)
    return elbow.reshape(shape + (3,)), hand.reshape(shape + (3,))


def two_bone_lengths(rest_positions):
    """Bone lengths ``(l1, l2)`` measured from a rest pose (SEEDS.md §2: measured, not assumed).

    rest_positions: (..., 3, D) — shoulder, elbow and hand positions (D = 2 or 3), e.g.
    ``np.stack([robot.fk(q_rest, f)[:3, 3] for f in ("LeftArm", "LeftForeArm", "LeftHand")])``.
    Returns two arrays of shape (...).
    """
    p = _array(rest_positions, "rest_positions")
    if p.ndim < 2 or p.shape[-2] != 3 or p.shape[-1] not in (2, 3):
        raise GoalError(f"rest_positions: expected shape (..., 3, 2) or (..., 3, 3) (shoulder, elbow, "
                        f"hand), got {p.shape}")
    l1 = np.linalg.norm(p[..., 1, :] - p[..., 0, :], axis=-1)
    l2 = np.linalg.norm(p[..., 2, :] - p[..., 1, :], axis=-1)
    return l1, l2
