r"""Signed distances between collision shapes, and the distance Jacobian rows (Numba kernels).

Shapes are rows of float64 tables (see :mod:`invkin.collision.world` and
:mod:`invkin.collision.model`): a *capsule* ``a, b, r`` is every point within ``r`` of the segment
``a``–``b`` (a sphere has ``a = b``); a *box* is ``R`` (row-major 9), centre ``c``, half extents
``h``; a *half-space* ``n, c`` is the solid ``{x: n·x ≤ c}``.

Every pair kernel returns ``(d, pA, pB, n)``: the signed distance ``d`` [m] (negative in
penetration), a witness point on each shape and the unit normal ``n`` from A towards B, with
``d = n·(pB − pA)`` in every case (touching, separated or penetrating):

* capsule–capsule: the closest points ``s*, t*`` of the two segments (Ericson, *Real-Time Collision
  Detection*, §5.1.9) give ``d = |c₂ − c₁| − r₁ − r₂``; exact, also in penetration;
* capsule–box: the signed distance function of a box, ``φ(p) = |max(q, 0)| + min(max qᵢ, 0)`` with
  ``q = |R^T(p − c)| − h``, is convex in ``p``, so along the segment it is a convex function of
  ``t ∈ [0, 1]``. A segment that stays out of the box is measured in closed form: between the
  (at most six) t where it crosses a face's plane, the squared distance is a quadratic in t
  (:func:`_segment_box_t`), so ``d = min_t φ(a + t(b − a)) − r`` is exact. For a segment that
  enters the box, ``d`` is minus the depth of the deepest point of the segment (where the largest
  of six lines in t is least, :func:`_deepest_t`), whose sign is exact and whose magnitude is at most the
  penetration depth (any separating translation must move that point out). A golden-section
  search of φ along the segment (:func:`capsule_box_search`, 64 steps) is the reference of both;
* capsule–half-space: ``d = min(n·a, n·b) − c − r``, exact.

Distance rows (:func:`distance_rows`): holding the two witness points fixed to their links
(the envelope theorem: the closest points move, but to first order ``d`` changes only through
the motion of the material points), ``∂d/∂q = nᵀ(J_B(p_B) − J_A(p_A))`` with the point Jacobian
``J_X(p) = Jv_X − [p − o_X]× Jω_X``, i.e. the row ``nᵀJv + ((p − o) × n)ᵀJω`` of each link
(world obstacles have ``J = 0``). Finite-difference tested (tests/test_collision.py).
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit, types
from numba.experimental import structref

from ..kinematics.kernels import NO_RC, fk_all_into, jacobian_from_all

_GOLD = 0.6180339887498949
_SEARCH_STEPS = 64
_EPS = 1e-14


@njit(cache=True, **NO_RC)
def _clamp01(x):
    return 0.0 if x < 0.0 else (1.0 if x > 1.0 else x)


@njit(cache=True, **NO_RC)
def segment_closest(a1, b1, a2, b2):
    """Parameters ``(s, t)`` of the closest points ``a1 + s(b1 − a1)``, ``a2 + t(b2 − a2)``."""
    d1x, d1y, d1z = b1[0] - a1[0], b1[1] - a1[1], b1[2] - a1[2]
    d2x, d2y, d2z = b2[0] - a2[0], b2[1] - a2[1], b2[2] - a2[2]
    rx, ry, rz = a1[0] - a2[0], a1[1] - a2[1], a1[2] - a2[2]
    a = d1x * d1x + d1y * d1y + d1z * d1z
    e = d2x * d2x + d2y * d2y + d2z * d2z
    f = d2x * rx + d2y * ry + d2z * rz
    if a <= _EPS and e <= _EPS:
        return 0.0, 0.0
    if a <= _EPS:
        return 0.0, _clamp01(f / e)
    c = d1x * rx + d1y * ry + d1z * rz
    if e <= _EPS:
        return _clamp01(-c / a), 0.0
    b = d1x * d2x + d1y * d2y + d1z * d2z
    denom = a * e - b * b
    s = _clamp01((b * f - c * e) / denom) if denom > _EPS * a * e else 0.0
    t = (b * s + f) / e
    if t < 0.0:
        t = 0.0
        s = _clamp01(-c / a)
    elif t > 1.0:
        t = 1.0
        s = _clamp01((b - c) / a)
    return s, t


@njit(cache=True, **NO_RC)
def _any_normal(ax, ay, az):
    """A unit vector perpendicular to (ax, ay, az) (any unit vector if that is zero)."""
    if abs(ax) < 0.9:
        nx, ny, nz = 0.0, az, -ay      # (1, 0, 0) × v
    else:
        nx, ny, nz = -az, 0.0, ax      # (0, 1, 0) × v
    m = math.sqrt(nx * nx + ny * ny + nz * nz)
    if m < 1e-300:
        return 0.0, 0.0, 1.0
    return nx / m, ny / m, nz / m


@njit(cache=True, **NO_RC)
def capsule_capsule(a1, b1, r1, a2, b2, r2, out):
    """Capsule A (a1, b1, r1) – capsule B (a2, b2, r2) into ``out`` (10,) = d, pA, pB, n."""
    s, t = segment_closest(a1, b1, a2, b2)
    c1x = a1[0] + s * (b1[0] - a1[0])
    c1y = a1[1] + s * (b1[1] - a1[1])
    c1z = a1[2] + s * (b1[2] - a1[2])
    c2x = a2[0] + t * (b2[0] - a2[0])
    c2y = a2[1] + t * (b2[1] - a2[1])
    c2z = a2[2] + t * (b2[2] - a2[2])
    vx, vy, vz = c2x - c1x, c2y - c1y, c2z - c1z
    dist = math.sqrt(vx * vx + vy * vy + vz * vz)
    if dist > 1e-12:
        nx, ny, nz = vx / dist, vy / dist, vz / dist
    else:  # the segments meet: any direction perpendicular to A's axis
        nx, ny, nz = _any_normal(b1[0] - a1[0], b1[1] - a1[1], b1[2] - a1[2])
    out[0] = dist - r1 - r2
    out[1], out[2], out[3] = c1x + r1 * nx, c1y + r1 * ny, c1z + r1 * nz
    out[4], out[5], out[6] = c2x - r2 * nx, c2y - r2 * ny, c2z - r2 * nz
    out[7], out[8], out[9] = nx, ny, nz
    return out[0]


@njit(cache=True, **NO_RC)
def _box_sdf(box, px, py, pz):
    """Signed distance of the world point p to the box row (R 9, c 3, h 3)."""
    dx, dy, dz = px - box[9], py - box[10], pz - box[11]
    lx = box[0] * dx + box[3] * dy + box[6] * dz
    ly = box[1] * dx + box[4] * dy + box[7] * dz
    lz = box[2] * dx + box[5] * dy + box[8] * dz
    qx, qy, qz = abs(lx) - box[12], abs(ly) - box[13], abs(lz) - box[14]
    ox, oy, oz = max(qx, 0.0), max(qy, 0.0), max(qz, 0.0)
    return math.sqrt(ox * ox + oy * oy + oz * oz) + min(max(qx, max(qy, qz)), 0.0)


@njit(cache=True, **NO_RC)
def _box_frame(a, b, box):
    """The segment a–b in the box's frame (row R, c, h): ``l + t u``, as (l0, l1, l2, u0, u1, u2)."""
    dx, dy, dz = a[0] - box[9], a[1] - box[10], a[2] - box[11]
    ex, ey, ez = b[0] - a[0], b[1] - a[1], b[2] - a[2]
    l0 = box[0] * dx + box[3] * dy + box[6] * dz
    l1 = box[1] * dx + box[4] * dy + box[7] * dz
    l2 = box[2] * dx + box[5] * dy + box[8] * dz
    u0 = box[0] * ex + box[3] * ey + box[6] * ez
    u1 = box[1] * ex + box[4] * ey + box[7] * ez
    u2 = box[2] * ex + box[5] * ey + box[8] * ez
    return l0, l1, l2, u0, u1, u2


@njit(cache=True, **NO_RC)
def _segment_box_t(a, b, box, ts):
    """The parameter t ∈ [0, 1] of the point of the segment a–b closest to the box (row R, c, h),
    in closed form, or −1 when the segment enters the box (then φ < 0 somewhere: the caller
    searches). In the box frame the segment is ``l + t u``; its excess over the box on axis i,
    ``max(|l_i + t u_i| − h_i, 0)``, changes form only where ``l_i + t u_i = ±h_i`` (at most six
    t), and between two such t the squared distance ``Σ (s_i (l_i + t u_i) − h_i)²`` over the axes
    outside (s_i = ±1) is a quadratic whose minimum is ``t = −Σ u_i (l_i − s_i h_i) / Σ u_i²``,
    clamped to the piece. The least of those minima is the segment's. ``ts`` (8,): scratch."""
    l0, l1, l2, u0, u1, u2 = _box_frame(a, b, box)
    h0, h1, h2 = box[12], box[13], box[14]
    n = 0
    for i in range(3):  # the t where an axis' excess changes form, sorted (insertion)
        li, ui, hi = (l0, u0, h0) if i == 0 else ((l1, u1, h1) if i == 1 else (l2, u2, h2))
        if ui == 0.0:
            continue
        for sgn in (-1.0, 1.0):
            t = (sgn * hi - li) / ui
            if 0.0 < t < 1.0:
                j = n
                while j > 0 and ts[j - 1] > t:
                    ts[j] = ts[j - 1]
                    j -= 1
                ts[j] = t
                n += 1
    best_t, best = 0.0, np.inf
    ta = 0.0
    for k in range(n + 1):
        tb = ts[k] if k < n else 1.0
        tm = 0.5 * (ta + tb)
        num, den = 0.0, 0.0
        outside = False
        for i in range(3):
            li, ui, hi = (l0, u0, h0) if i == 0 else ((l1, u1, h1) if i == 1 else (l2, u2, h2))
            p = li + tm * ui
            if p > hi:
                num += ui * (li - hi)
                den += ui * ui
                outside = True
            elif p < -hi:
                num += ui * (li + hi)
                den += ui * ui
                outside = True
        if not outside:
            return -1.0  # this piece lies in the box
        t = tm if den == 0.0 else -num / den
        t = ta if t < ta else (tb if t > tb else t)
        q0, q1, q2 = abs(l0 + t * u0) - h0, abs(l1 + t * u1) - h1, abs(l2 + t * u2) - h2
        o0, o1, o2 = max(q0, 0.0), max(q1, 0.0), max(q2, 0.0)
        f = o0 * o0 + o1 * o1 + o2 * o2
        if f < best:
            best, best_t = f, t
        ta = tb
    return best_t


@njit(cache=True, **NO_RC)
def _deepest_t(a, b, box):
    """The parameter t ∈ [0, 1] of the deepest point of the segment a–b in the box (row R, c, h), in
    closed form, for a segment that enters the box (:func:`_segment_box_t` returned −1). In the box
    frame (``l + t u``), ``g(t) = max_i |l_i + t u_i| − h_i`` is the largest of six lines
    ``s (l_i + t u_i) − h_i``; g ≤ φ everywhere, with equality where g ≤ 0 (inside, the box's
    signed distance is the largest excess), and g > 0 outside, so the segment's least φ (negative:
    it enters) is g's least value: a convex piecewise-linear function, least at an end or where a
    rising line crosses a falling one (at most nine crossings). The golden-section search it
    replaces spent 66 evaluations of φ."""
    l0, l1, l2, u0, u1, u2 = _box_frame(a, b, box)
    h0, h1, h2 = box[12], box[13], box[14]
    best_t = 0.0
    best = max(abs(l0) - h0, abs(l1) - h1, abs(l2) - h2)
    g1 = max(abs(l0 + u0) - h0, abs(l1 + u1) - h1, abs(l2 + u2) - h2)
    if g1 < best:
        best_t, best = 1.0, g1
    for j in range(6):  # rising line j (slope > 0) against falling line k (slope < 0)
        ij = j >> 1
        lj, uj, hj = (l0, u0, h0) if ij == 0 else ((l1, u1, h1) if ij == 1 else (l2, u2, h2))
        sj = 1.0 if j & 1 else -1.0
        bj = sj * uj
        if not bj > 0.0:
            continue
        aj = sj * lj - hj
        for k in range(6):
            ik = k >> 1
            lk, uk, hk = (l0, u0, h0) if ik == 0 else ((l1, u1, h1) if ik == 1 else (l2, u2, h2))
            sk = 1.0 if k & 1 else -1.0
            bk = sk * uk
            if not bk < 0.0:
                continue
            t = (sk * lk - hk - aj) / (bj - bk)
            if 0.0 < t < 1.0:
                g = max(abs(l0 + t * u0) - h0, abs(l1 + t * u1) - h1, abs(l2 + t * u2) - h2)
                if g < best:
                    best_t, best = t, g
    return best_t


@njit(cache=True, **NO_RC)
def _search_t(a, b, r, box, reach):
    """The golden-section search of the convex φ(a + t(b − a)) over t ∈ [0, 1] (64 steps,
    ``0.618⁶⁴ ≈ 4·10⁻¹⁴`` of the segment, then the ends); −1 when it shows that the capsule is
    farther than ``reach`` [m]: φ is 1-Lipschitz, so along the segment of length ℓ no point of
    the bracket [lo, hi] is below ``min(f1, f2) − ℓ(hi − lo)``."""
    ex, ey, ez = b[0] - a[0], b[1] - a[1], b[2] - a[2]
    lo, hi = 0.0, 1.0
    ell = math.sqrt(ex * ex + ey * ey + ez * ez)
    t1 = hi - _GOLD * (hi - lo)
    t2 = lo + _GOLD * (hi - lo)
    f1 = _box_sdf(box, a[0] + t1 * ex, a[1] + t1 * ey, a[2] + t1 * ez)
    f2 = _box_sdf(box, a[0] + t2 * ex, a[1] + t2 * ey, a[2] + t2 * ez)
    for _ in range(_SEARCH_STEPS):
        if (f1 if f1 < f2 else f2) - ell * (hi - lo) - r > reach:
            return -1.0
        if f1 <= f2:
            hi = t2
            t2, f2 = t1, f1
            t1 = hi - _GOLD * (hi - lo)
            f1 = _box_sdf(box, a[0] + t1 * ex, a[1] + t1 * ey, a[2] + t1 * ez)
        else:
            lo = t1
            t1, f1 = t2, f2
            t2 = lo + _GOLD * (hi - lo)
            f2 = _box_sdf(box, a[0] + t2 * ex, a[1] + t2 * ey, a[2] + t2 * ez)
    # the end points too: the minimum of a convex function on [0, 1] may sit on an end
    t = 0.5 * (lo + hi)
    ft = _box_sdf(box, a[0] + t * ex, a[1] + t * ey, a[2] + t * ez)
    f0 = _box_sdf(box, a[0], a[1], a[2])
    fe = _box_sdf(box, b[0], b[1], b[2])
    if f0 < ft:
        t, ft = 0.0, f0
    if fe < ft:
        t = 1.0
    return t


@njit(cache=True, **NO_RC)
def capsule_box(a, b, r, box, reach, out):
    """Capsule A (a, b, r) – box B (row R, c, h) into ``out`` (10,) = d, pA, pB, n; ``d = inf`` (and
    nothing else written) when ``d > reach`` [m] (``reach = inf``: always measured). A segment
    that stays out of the box is measured in closed form (:func:`_segment_box_t`), one that
    enters it at its deepest point (:func:`_deepest_t`, also in closed form: 78 ns where the
    golden-section search, :func:`capsule_box_search`, took 423 ns a pair)."""
    return _capsule_box(a, b, r, box, reach, out, False)


@njit(cache=True, **NO_RC)
def capsule_box_search(a, b, r, box, reach, out):
    """:func:`capsule_box` by the golden-section search alone (the reference of the closed form)."""
    return _capsule_box(a, b, r, box, reach, out, True)


@njit(cache=True, **NO_RC)
def _capsule_box(a, b, r, box, reach, out, search):
    ex, ey, ez = b[0] - a[0], b[1] - a[1], b[2] - a[2]
    ee = ex * ex + ey * ey + ez * ez
    if ee > _EPS:
        if search:
            t = _search_t(a, b, r, box, reach)
            if t < 0.0:
                out[0] = np.inf
                return out[0]
        else:
            t = _segment_box_t(a, b, box, out)
            if t < 0.0:  # the segment enters the box: its deepest point
                t = _deepest_t(a, b, box)
    else:
        t = 0.0
    px, py, pz = a[0] + t * ex, a[1] + t * ey, a[2] + t * ez
    # closest surface point of the box and outward normal at p, in the box frame
    dx, dy, dz = px - box[9], py - box[10], pz - box[11]
    l0 = box[0] * dx + box[3] * dy + box[6] * dz
    l1 = box[1] * dx + box[4] * dy + box[7] * dz
    l2 = box[2] * dx + box[5] * dy + box[8] * dz
    h0, h1, h2 = box[12], box[13], box[14]
    q0, q1, q2 = abs(l0) - h0, abs(l1) - h1, abs(l2) - h2
    if q0 > 0.0 or q1 > 0.0 or q2 > 0.0:
        s0, s1, s2 = min(max(l0, -h0), h0), min(max(l1, -h1), h1), min(max(l2, -h2), h2)
        g0, g1, g2 = l0 - s0, l1 - s1, l2 - s2
        phi = math.sqrt(g0 * g0 + g1 * g1 + g2 * g2)
        g0, g1, g2 = g0 / phi, g1 / phi, g2 / phi
    else:  # inside: the nearest face
        s0, s1, s2 = l0, l1, l2
        g0, g1, g2 = 0.0, 0.0, 0.0
        if q0 >= q1 and q0 >= q2:
            s0 = h0 if l0 >= 0.0 else -h0
            g0 = 1.0 if l0 >= 0.0 else -1.0
            phi = q0
        elif q1 >= q2:
            s1 = h1 if l1 >= 0.0 else -h1
            g1 = 1.0 if l1 >= 0.0 else -1.0
            phi = q1
        else:
            s2 = h2 if l2 >= 0.0 else -h2
            g2 = 1.0 if l2 >= 0.0 else -1.0
            phi = q2
    # back to the world: box point c + R s, box normal R g (outward, towards p); n (A→B) = −R g
    wx = box[9] + box[0] * s0 + box[1] * s1 + box[2] * s2
    wy = box[10] + box[3] * s0 + box[4] * s1 + box[5] * s2
    wz = box[11] + box[6] * s0 + box[7] * s1 + box[8] * s2
    nx = -(box[0] * g0 + box[1] * g1 + box[2] * g2)
    ny = -(box[3] * g0 + box[4] * g1 + box[5] * g2)
    nz = -(box[6] * g0 + box[7] * g1 + box[8] * g2)
    if phi - r > reach:
        out[0] = np.inf
        return out[0]
    out[0] = phi - r
    out[1], out[2], out[3] = px + r * nx, py + r * ny, pz + r * nz
    out[4], out[5], out[6] = wx, wy, wz
    out[7], out[8], out[9] = nx, ny, nz
    return out[0]


@njit(cache=True, **NO_RC)
def capsule_halfspace(a, b, r, hs, out):
    """Capsule A (a, b, r) – half-space B {x: n·x ≤ c} (row n, c) into ``out`` = d, pA, pB, n."""
    sa = hs[0] * a[0] + hs[1] * a[1] + hs[2] * a[2] - hs[3]
    sb = hs[0] * b[0] + hs[1] * b[1] + hs[2] * b[2] - hs[3]
    if sb < sa:
        s, px, py, pz = sb, b[0], b[1], b[2]
    elif sa < sb:
        s, px, py, pz = sa, a[0], a[1], a[2]
    else:  # parallel to the plane: the middle of the segment
        s, px, py, pz = sa, 0.5 * (a[0] + b[0]), 0.5 * (a[1] + b[1]), 0.5 * (a[2] + b[2])
    out[0] = s - r
    out[1], out[2], out[3] = px - r * hs[0], py - r * hs[1], pz - r * hs[2]
    out[4], out[5], out[6] = px - s * hs[0], py - s * hs[1], pz - s * hs[2]
    out[7], out[8], out[9] = -hs[0], -hs[1], -hs[2]
    return out[0]


# --------------------------------------------------------------------------- robot tables
#
# The robot's shapes (invkin.collision.model): ``links`` (L,) node of each link that has shapes;
# ``link_caps`` (L + 1,) CSR offsets into ``caps`` (m, 7) = a, b (link frame), r; ``bounds``
# (L, 4) = centre (link frame), radius of a sphere holding every capsule of the link.


@njit(cache=True, **NO_RC)
def _to_world(T, x, y, z, out, k):
    out[k] = T[0, 0] * x + T[0, 1] * y + T[0, 2] * z + T[0, 3]
    out[k + 1] = T[1, 0] * x + T[1, 1] * y + T[1, 2] * z + T[1, 3]
    out[k + 2] = T[2, 0] * x + T[2, 1] * y + T[2, 2] * z + T[2, 3]


@njit(cache=True, **NO_RC)
def world_capsules(Tall, links, link_caps, caps, bounds, wcaps, wbounds):
    """Capsules (m, 7) and link bounding spheres (L, 4) in the world for the FK ``Tall``."""
    for ell in range(links.shape[0]):
        T = Tall[links[ell]]
        for c in range(link_caps[ell], link_caps[ell + 1]):
            _to_world(T, caps[c, 0], caps[c, 1], caps[c, 2], wcaps[c], 0)
            _to_world(T, caps[c, 3], caps[c, 4], caps[c, 5], wcaps[c], 3)
            wcaps[c, 6] = caps[c, 6]
        _to_world(T, bounds[ell, 0], bounds[ell, 1], bounds[ell, 2], wbounds[ell], 0)
        wbounds[ell, 3] = bounds[ell, 3]


@njit(cache=True, **NO_RC)
def _keep(res, tmp):
    if tmp[0] < res[0]:
        for k in range(10):
            res[k] = tmp[k]


@njit(cache=True)
def self_distances(wcaps, wbounds, link_caps, pairs, cutoff, out):
    """Closest capsules of each link pair ``pairs`` (P, 2) into ``out`` (P, 10) (d = inf when the
    bounding spheres are farther apart than ``cutoff``: the pair is not evaluated)."""
    _self_distances(wcaps, wbounds, link_caps, pairs, cutoff, out, np.empty(10))


@njit(cache=True, **NO_RC)
def _self_distances(wcaps, wbounds, link_caps, pairs, cutoff, out, tmp):
    """:func:`self_distances` with its scratch ``tmp`` (10,) given (allocates nothing)."""
    for p in range(pairs.shape[0]):
        la, lb = pairs[p, 0], pairs[p, 1]
        out[p, 0] = np.inf
        dx = wbounds[la, 0] - wbounds[lb, 0]
        dy = wbounds[la, 1] - wbounds[lb, 1]
        dz = wbounds[la, 2] - wbounds[lb, 2]
        if math.sqrt(dx * dx + dy * dy + dz * dz) - wbounds[la, 3] - wbounds[lb, 3] > cutoff:
            continue
        for i in range(link_caps[la], link_caps[la + 1]):
            for j in range(link_caps[lb], link_caps[lb + 1]):
                capsule_capsule(wcaps[i, 0:3], wcaps[i, 3:6], wcaps[i, 6],
                                wcaps[j, 0:3], wcaps[j, 3:6], wcaps[j, 6], tmp)
                _keep(out[p], tmp)


@njit(cache=True)
def contacts(ni, nf, origin, qs, links, link_caps, caps, bounds, pairs, hits):
    """hits[k, p] = the link pair pairs[p] in contact (signed distance < 0) at configuration qs[k]:
    the sampling of collision_pairs in one call (one call per configuration from Python ran on the
    interpreter while the kernels compiled, 10 000 times)."""
    Tall = np.empty((ni.shape[0], 4, 4))
    wcaps = np.empty_like(caps)
    wb = np.empty_like(bounds)
    out = np.empty((pairs.shape[0], 10))
    for k in range(qs.shape[0]):
        fk_all_into(ni, nf, origin, qs[k], Tall)
        world_capsules(Tall, links, link_caps, caps, bounds, wcaps, wb)
        self_distances(wcaps, wb, link_caps, pairs, 0.0, out)
        for p in range(pairs.shape[0]):
            hits[k, p] = out[p, 0] < 0.0


@njit(cache=True, **NO_RC)
def _beyond(ocaps, k, bx, by, bz, br, reach):
    """True when obstacle capsule k lies farther than ``reach`` from the sphere (bx, by, bz, br)
    (its bound: a sphere about its middle; scalars only, no array views: this runs once per point
    of a cloud's chunk near a link)."""
    mx = 0.5 * (ocaps[k, 0] + ocaps[k, 3]) - bx
    my = 0.5 * (ocaps[k, 1] + ocaps[k, 4]) - by
    mz = 0.5 * (ocaps[k, 2] + ocaps[k, 5]) - bz
    hx = 0.5 * (ocaps[k, 3] - ocaps[k, 0])
    hy = 0.5 * (ocaps[k, 4] - ocaps[k, 1])
    hz = 0.5 * (ocaps[k, 5] - ocaps[k, 2])
    gap = math.sqrt(mx * mx + my * my + mz * mz) - ocaps[k, 6] - br
    return gap - reach > 0.0 and (gap - reach) * (gap - reach) > hx * hx + hy * hy + hz * hz


@njit(cache=True, **NO_RC)
def _chunk_beyond(wcaps, c0, c1, sphere, reach):
    """True when the sphere (centre, radius) of a chunk lies farther than ``reach`` from every
    capsule c0..c1 of a link (centre to segment, less both radii): a tighter test than the link's
    bounding sphere, which is loose around a long link."""
    px, py, pz = sphere[0], sphere[1], sphere[2]
    for c in range(c0, c1):
        ax, ay, az = wcaps[c, 0], wcaps[c, 1], wcaps[c, 2]
        ex, ey, ez = wcaps[c, 3] - ax, wcaps[c, 4] - ay, wcaps[c, 5] - az
        ee = ex * ex + ey * ey + ez * ez
        t = _clamp01(((px - ax) * ex + (py - ay) * ey + (pz - az) * ez) / ee) if ee > _EPS else 0.0
        dx, dy, dz = px - ax - t * ex, py - ay - t * ey, pz - az - t * ez
        far = reach + sphere[3] + wcaps[c, 6]
        if far < 0.0 or dx * dx + dy * dy + dz * dz <= far * far:
            return False
    return True


@njit(cache=True, **NO_RC)
def _cloud_point(wcaps, c0, c1, ocaps, k, cutoff, res, tmp):
    """Obstacle capsule k against the link's capsules c0..c1, kept in ``res`` (10,) when closer (its
    bound passed _beyond)."""
    reach = cutoff if cutoff < res[0] else res[0]
    px, py, pz = 0.5 * (ocaps[k, 0] + ocaps[k, 3]), 0.5 * (ocaps[k, 1] + ocaps[k, 4]), 0.5 * (ocaps[k, 2] + ocaps[k, 5])
    hx = 0.5 * (ocaps[k, 3] - ocaps[k, 0])
    hy = 0.5 * (ocaps[k, 4] - ocaps[k, 1])
    hz = 0.5 * (ocaps[k, 5] - ocaps[k, 2])
    slack = math.sqrt(hx * hx + hy * hy + hz * hz) + ocaps[k, 6]  # the obstacle capsule lies within this of p
    for c in range(c0, c1):
        # a lower bound first (the middle of the obstacle capsule to the link capsule's segment): a
        # cloud's point is then measured in full only when it can be the closest within the cutoff
        ax, ay, az = wcaps[c, 0], wcaps[c, 1], wcaps[c, 2]
        ex, ey, ez = wcaps[c, 3] - ax, wcaps[c, 4] - ay, wcaps[c, 5] - az
        ee = ex * ex + ey * ey + ez * ez
        t = ((px - ax) * ex + (py - ay) * ey + (pz - az) * ez) / ee if ee > _EPS else 0.0
        t = _clamp01(t)
        dx, dy, dz = px - ax - t * ex, py - ay - t * ey, pz - az - t * ez
        low = math.sqrt(dx * dx + dy * dy + dz * dz) - wcaps[c, 6] - slack
        if low > reach:
            continue
        capsule_capsule(wcaps[c, 0:3], wcaps[c, 3:6], wcaps[c, 6], ocaps[k, 0:3], ocaps[k, 3:6], ocaps[k, 6], tmp)
        _keep(res, tmp)
        reach = cutoff if cutoff < res[0] else res[0]


@njit(cache=True, **NO_RC)
def _cloud_sphere(wcaps, c0, c1, ocaps, k, cutoff, res):
    """Obstacle sphere k (a cloud's point: a capsule with a = b) against the link's capsules c0..c1,
    kept in ``res`` (10,) when closer: :func:`capsule_capsule` and :func:`_keep` with the same
    arithmetic (so the same result to the bit), on scalars, with the square of the distance
    compared first (a point out of reach costs no root and writes nothing)."""
    px, py, pz, rp = ocaps[k, 0], ocaps[k, 1], ocaps[k, 2], ocaps[k, 6]
    for c in range(c0, c1):
        reach = cutoff if cutoff < res[0] else res[0]
        rc = wcaps[c, 6]
        lim = reach + rc + rp
        if lim < 0.0:
            continue
        ax, ay, az = wcaps[c, 0], wcaps[c, 1], wcaps[c, 2]
        ex, ey, ez = wcaps[c, 3] - ax, wcaps[c, 4] - ay, wcaps[c, 5] - az
        ee = ex * ex + ey * ey + ez * ez
        t = _clamp01(((px - ax) * ex + (py - ay) * ey + (pz - az) * ez) / ee) if ee > _EPS else 0.0
        c1x, c1y, c1z = ax + t * ex, ay + t * ey, az + t * ez
        vx, vy, vz = px - c1x, py - c1y, pz - c1z
        dd = vx * vx + vy * vy + vz * vz
        if dd > lim * lim:
            continue
        dist = math.sqrt(dd)
        d = dist - rc - rp
        if not d < res[0]:
            continue
        if dist > 1e-12:
            nx, ny, nz = vx / dist, vy / dist, vz / dist
        else:
            nx, ny, nz = _any_normal(ex, ey, ez)
        res[0] = d
        res[1], res[2], res[3] = c1x + rc * nx, c1y + rc * ny, c1z + rc * nz
        res[4], res[5], res[6] = px - rp * nx, py - rp * ny, pz - rp * nz
        res[7], res[8], res[9] = nx, ny, nz


@njit(cache=True)
def world_distances(wcaps, wbounds, link_caps, ocaps, ocap_obj, chunk_range, chunk_bound, boxes, box_obj, hs, hs_obj,
                    cutoff, out):
    """Closest shapes of every (link, obstacle) into ``out`` (L, n_obstacles, 10), d = inf where
    the link's bounding sphere is farther than ``cutoff`` from the obstacle's bound (not evaluated).
    A point cloud is one obstacle: its closest point counts. Obstacle capsules come in a tree per
    obstacle (``chunk_range``, ``chunk_bound``: see :func:`invkin.collision.world._chunks`; leaves of
    a few neighbouring points of a cloud, nodes of a few children, each under one sphere); a node
    whose sphere is beyond the cutoff or no closer than the best found so far (from the link's
    bounding sphere, then from each of its capsules) skips its subtree, and a point is measured
    only when its squared distance can beat the best: nothing changes in the result (the points
    are measured in the same order, with :func:`capsule_capsule`'s arithmetic), and the work grows
    with the points near the link."""
    out[:, :, 0] = np.inf
    tmp = np.empty(10)
    for ell in range(wbounds.shape[0]):
        _link_world(ell, wcaps, wbounds, link_caps, ocaps, ocap_obj, chunk_range, chunk_bound, boxes, box_obj, hs,
                    hs_obj, cutoff, out, tmp)


@njit(cache=True, **NO_RC)
def _link_world(ell, wcaps, wbounds, link_caps, ocaps, ocap_obj, chunk_range, chunk_bound, boxes, box_obj, hs, hs_obj,
                cutoff, out, tmp):
    """Row ``out[ell]`` of :func:`world_distances` (its d already inf): link ell against every obstacle."""
    bx, by, bz, br = wbounds[ell, 0], wbounds[ell, 1], wbounds[ell, 2], wbounds[ell, 3]
    c0, c1 = link_caps[ell], link_caps[ell + 1]
    ch = 0
    while ch < chunk_range.shape[0]:  # the tree in preorder: a node out of reach skips its subtree
        k0, k1, nxt = chunk_range[ch, 0], chunk_range[ch, 1], chunk_range[ch, 2]
        o = ocap_obj[k0]
        reach = cutoff if cutoff < out[ell, o, 0] else out[ell, o, 0]
        cx, cy, cz = chunk_bound[ch, 0] - bx, chunk_bound[ch, 1] - by, chunk_bound[ch, 2] - bz
        far = chunk_bound[ch, 3] + br + reach
        if (far >= 0.0 and cx * cx + cy * cy + cz * cz > far * far) or \
                _chunk_beyond(wcaps, c0, c1, chunk_bound[ch], reach):
            ch = nxt
            continue
        if nxt == ch + 1:  # a leaf: its capsules
            res = out[ell, o]
            for k in range(k0, k1):
                if ocaps[k, 0] == ocaps[k, 3] and ocaps[k, 1] == ocaps[k, 4] and ocaps[k, 2] == ocaps[k, 5]:
                    _cloud_sphere(wcaps, c0, c1, ocaps, k, cutoff, res)
                elif not _beyond(ocaps, k, bx, by, bz, br, cutoff if cutoff < res[0] else res[0]):
                    _cloud_point(wcaps, c0, c1, ocaps, k, cutoff, res, tmp)
        ch += 1
    for k in range(boxes.shape[0]):
        bo = boxes[k]
        if _box_sdf(bo, bx, by, bz) - br > cutoff:
            continue
        res = out[ell, box_obj[k]]
        for c in range(c0, c1):
            # a lower bound first: the box's signed distance is 1-Lipschitz, so no point of the
            # capsule is closer than φ(middle) − half length − r; the search runs only when the
            # capsule can beat the best so far within the cutoff
            ex, ey, ez = wcaps[c, 3] - wcaps[c, 0], wcaps[c, 4] - wcaps[c, 1], wcaps[c, 5] - wcaps[c, 2]
            low = _box_sdf(bo, wcaps[c, 0] + 0.5 * ex, wcaps[c, 1] + 0.5 * ey, wcaps[c, 2] + 0.5 * ez) \
                - 0.5 * math.sqrt(ex * ex + ey * ey + ez * ez) - wcaps[c, 6]
            reach = cutoff if cutoff < res[0] else res[0]
            if low > reach:
                continue
            capsule_box(wcaps[c, 0:3], wcaps[c, 3:6], wcaps[c, 6], bo, reach, tmp)
            _keep(res, tmp)
    for k in range(hs.shape[0]):
        h = hs[k]
        if h[0] * bx + h[1] * by + h[2] * bz - h[3] - br > cutoff:
            continue
        res = out[ell, hs_obj[k]]
        for c in range(c0, c1):
            capsule_halfspace(wcaps[c, 0:3], wcaps[c, 3:6], wcaps[c, 6], h, tmp)
            _keep(res, tmp)


@njit(cache=True, **NO_RC)
def _point_row(J, Tall, node, px, py, pz, nx, ny, nz, sign, row):
    """row += sign · (nᵀJv + ((p − o) × n)ᵀJω) of ``node``'s Jacobian ``J`` (6, dof)."""
    rx, ry, rz = px - Tall[node, 0, 3], py - Tall[node, 1, 3], pz - Tall[node, 2, 3]
    cx, cy, cz = ry * nz - rz * ny, rz * nx - rx * nz, rx * ny - ry * nx
    for j in range(J.shape[1]):
        row[j] += sign * (nx * J[0, j] + ny * J[1, j] + nz * J[2, j] + cx * J[3, j] + cy * J[4, j] + cz * J[5, j])


@njit(cache=True)
def distance_rows(ni, nf, Tall, node_a, node_b, res, Jd):
    """∂d/∂q (R, dof) into ``Jd`` for result rows ``res`` (R, 10) = d, pA, pB, n between the links at
    nodes ``node_a`` (R,) and ``node_b`` (R,) (−1: a world obstacle)."""
    dof = Jd.shape[1]
    J = np.empty((6, dof))
    Jd[:, :] = 0.0
    for r in range(res.shape[0]):
        nx, ny, nz = res[r, 7], res[r, 8], res[r, 9]
        jacobian_from_all(ni, nf, Tall, node_a[r], J)
        _point_row(J, Tall, node_a[r], res[r, 1], res[r, 2], res[r, 3], nx, ny, nz, -1.0, Jd[r])
        if node_b[r] >= 0:
            jacobian_from_all(ni, nf, Tall, node_b[r], J)
            _point_row(J, Tall, node_b[r], res[r, 4], res[r, 5], res[r, 6], nx, ny, nz, 1.0, Jd[r])


# --------------------------------------------------------------------------- solver entry point


@njit(cache=True)
def collision_rows(ni, nf, Tall, tables, cutoff, d, J, node_a, node_b):
    """Inequality rows for a solver: every checked pair (self pairs and (link, obstacle)) whose bounds
    are within ``cutoff`` [m] at the FK ``Tall`` writes its signed distance into ``d`` and its
    gradient ∂d/∂q into ``J`` (rows ``d_i + J_i Δq ≥ margin``), its nodes into ``node_a`` /
    ``node_b`` (−1: an obstacle); returns the number of rows ``k`` (unsorted). Rows whose gradient is
    zero (two links that no joint moves, e.g. the base on the floor) are left out: no step can
    change them. ``d``, ``J``, ``node_*`` need :func:`invkin.collision.distance.max_rows` rows.
    ``tables`` is the tuple of :func:`invkin.collision.distance.collision_tables` (built once per
    robot and world); no Python runs here, so an LM kernel can call it every iteration."""
    (links, link_caps, caps, bounds, pairs, ocaps, ocap_obj, boxes, box_obj, hs, hs_obj,
     wcaps, wb, out_self, out_world, chunk_range, chunk_bound) = tables
    world_capsules(Tall, links, link_caps, caps, bounds, wcaps, wb)
    self_distances(wcaps, wb, link_caps, pairs, cutoff, out_self)
    if out_world.shape[1] > 0:
        world_distances(wcaps, wb, link_caps, ocaps, ocap_obj, chunk_range, chunk_bound, boxes, box_obj, hs, hs_obj,
                        cutoff, out_world)
    return measured_rows(ni, nf, Tall, tables, cutoff, d, J, node_a, node_b)


@njit(cache=True)
def measured_rows(ni, nf, Tall, tables, cutoff, d, J, node_a, node_b):
    """:func:`collision_rows` from the distances already in the tables' scratch (``out_self``,
    ``out_world``), measured at the FK ``Tall`` with a cutoff at least ``cutoff``: by a full
    :func:`closest_moving` (no ``stop``), whose pairs within ``cutoff`` are the rows' own (a pair
    whose bounds are farther apart than the cutoff is farther apart too), so the rows cost only
    their gradients (collision/retry.py: the check of an answer, then its escape's rows)."""
    return measured_rows_into(ni, nf, Tall, tables, cutoff, d, J, node_a, node_b, np.empty((6, J.shape[1])))


@njit(cache=True, **NO_RC)
def measured_rows_into(ni, nf, Tall, tables, cutoff, d, J, node_a, node_b, Jl):
    """:func:`measured_rows` with its scratch ``Jl`` (6, dof) given (no allocation, no reference counting)."""
    links, pairs, out_self, out_world = tables[0], tables[4], tables[13], tables[14]
    k = 0
    for p in range(pairs.shape[0]):
        if out_self[p, 0] <= cutoff:
            node_a[k] = links[pairs[p, 0]]
            node_b[k] = links[pairs[p, 1]]
            k = _row(ni, nf, Tall, out_self[p], node_a[k], node_b[k], Jl, d, J, k)
    for ell in range(out_world.shape[0]):
        for o in range(out_world.shape[1]):
            if out_world[ell, o, 0] <= cutoff:
                node_a[k] = links[ell]
                node_b[k] = -1
                k = _row(ni, nf, Tall, out_world[ell, o], node_a[k], -1, Jl, d, J, k)
    return k


@njit(cache=True, **NO_RC)
def _row(ni, nf, Tall, res, na, nb, Jl, d, J, k):
    """Row k of collision_rows from one result (d, pA, pB, n); returns the next free row."""
    nx, ny, nz = res[7], res[8], res[9]
    for j in range(J.shape[1]):
        J[k, j] = 0.0
    jacobian_from_all(ni, nf, Tall, na, Jl)
    _point_row(Jl, Tall, na, res[1], res[2], res[3], nx, ny, nz, -1.0, J[k])
    if nb >= 0:
        jacobian_from_all(ni, nf, Tall, nb, Jl)
        _point_row(Jl, Tall, nb, res[4], res[5], res[6], nx, ny, nz, 1.0, J[k])
    moves = False
    for j in range(J.shape[1]):
        if J[k, j] != 0.0:
            moves = True
    if not moves:
        return k
    d[k] = res[0]
    return k + 1


@njit(cache=True)
def closest_moving(ni, nf, origin, q, Tall, tables, cutoff, moving_self, moving_link, static_close, stop):
    """The check of one configuration, in one call: FK of ``q`` into ``Tall``, every checked pair whose
    bounds are within ``cutoff`` [m] measured (as :func:`collision_rows`, without the Jacobians), and
    ``(d_min, index)`` of the closest pair some joint moves (``moving_self`` (P,), ``moving_link``
    (L,): 1 when a joint moves the pair; index ``p < P`` a self pair, ``P + ℓ·n_obstacles + o`` a
    (link, obstacle)); ``(inf, −1)`` when none lies within the cutoff. Pairs no joint moves and
    closer than ``static_close`` [m] are counted in the third value. Early exit: once a pair some
    joint moves is closer than ``stop`` [m] (self pairs first, then link by link), that pair is
    returned as it stands, the rest unmeasured (a d_min ≥ stop is always the exact one; ``stop =
    −inf``: everything measured)."""
    return closest_moving_into(ni, nf, origin, q, Tall, tables, cutoff, moving_self, moving_link, static_close, stop,
                           np.empty(10))


@njit(cache=True, **NO_RC)
def closest_moving_into(ni, nf, origin, q, Tall, tables, cutoff, moving_self, moving_link, static_close, stop, tmp):
    """:func:`closest_moving` with its scratch ``tmp`` (10,) given: no allocation and no reference
    counting (in a kernel, Panda at the shelf: 2.32 → 1.87 µs a check; the 17 tables were
    counted in and out at each call)."""
    (links, link_caps, caps, bounds, pairs, ocaps, ocap_obj, boxes, box_obj, hs, hs_obj,
     wcaps, wb, out_self, out_world, chunk_range, chunk_bound) = tables
    fk_all_into(ni, nf, origin, q, Tall)
    world_capsules(Tall, links, link_caps, caps, bounds, wcaps, wb)
    _self_distances(wcaps, wb, link_caps, pairs, cutoff, out_self, tmp)
    dmin = np.inf
    imin = -1
    n_static = 0
    P = pairs.shape[0]
    for p in range(P):
        d = out_self[p, 0]
        if moving_self[p]:
            if d < dmin and d <= cutoff:
                dmin, imin = d, p
        elif d < static_close:
            n_static += 1
    if dmin < stop:
        return dmin, imin, n_static
    n_obj = out_world.shape[1]
    if n_obj == 0:
        return dmin, imin, n_static
    for ell in range(out_world.shape[0]):
        out_world[ell, :, 0] = np.inf
        _link_world(ell, wcaps, wb, link_caps, ocaps, ocap_obj, chunk_range, chunk_bound, boxes, box_obj, hs, hs_obj,
                    cutoff, out_world, tmp)
        for o in range(n_obj):
            d = out_world[ell, o, 0]
            if moving_link[ell]:
                if d < dmin and d <= cutoff:
                    dmin, imin = d, P + ell * n_obj + o
            elif d < static_close:
                n_static += 1
        if dmin < stop:
            return dmin, imin, n_static
    return dmin, imin, n_static


# --------------------------------------------------------------------------- tables held for a cheap call


@structref.register
class HeldTablesType(types.StructRef):
    """Numba type of :class:`HeldTables`."""

    def preprocess_fields(self, fields):
        return tuple((name, types.unliteral(typ)) for name, typ in fields)


class HeldTables(structref.StructRefProxy):
    """A collision_tables 17-tuple held by Numba (``.t``): a kernel called from Python with it
    unboxes one pointer, where the tuple costs ~1.9 µs a call (17 arrays), half of a check. Also holds
    ``.tmp`` (10,), the check's scratch (:func:`closest_moving_held` allocates nothing)."""

    def __new__(cls, tables):
        held = _held_tables(tables, np.empty(10))
        held._tables = tables  # for .t on the interpreter (invkin._tiers): the proxy has no Python fields
        return held

    @property
    def t(self):
        """The 17-tuple, in Python (compiled code reads the struct's own field)."""
        return self._tables


@njit(cache=True)
def _held_tables(tables, tmp):
    return HeldTables(tables, tmp)


_held_tables.py_func.compiled_only = True  # a structref exists only in compiled code: invkin._tiers never interprets it


structref.define_proxy(HeldTables, HeldTablesType, ["t", "tmp"])


@njit(cache=True)
def closest_moving_held(ni, nf, origin, Tall, held, cutoff, moving_self, moving_link, static_close, stop, q):
    """:func:`closest_moving` with the tables held (``HeldTables``) and q last: the Check's entry
    point (rows.Check.measure binds every argument but q)."""
    return closest_moving_into(ni, nf, origin, q, Tall, held.t, cutoff, moving_self, moving_link, static_close, stop,
                               held.tmp)
