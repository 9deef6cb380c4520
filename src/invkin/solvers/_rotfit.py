"""One-joint rotation fits shared by the geometric solvers (``ccd``, ``fabrik``).

* :func:`welman_angle` — the maximiser of Welman's one-joint objective
  ``g(Φ) = k1(1 − cosΦ) + k2 cosΦ + k3 sinΦ`` by his candidate-angle rule (SEEDS.md §5, eq. 4.23).
* :func:`best_arc_angle` — the same maximiser restricted to a joint's feasible interval.
* :func:`min_rotvec` — the smallest rotation taking one direction onto another (SEEDS.md §4).
* :func:`horn_rotation` — the rotation R maximising ``Σ_k w_k t_k · (R e_k)`` (Wahba's problem),
  by Horn's unit-quaternion method (B. K. P. Horn, "Closed-form solution of absolute orientation
  using unit quaternions", JOSA A 4(4), 1987): the quaternion is the eigenvector of the largest
  eigenvalue of a symmetric 4 × 4 matrix built from ``S = Σ w e tᵀ``; the eigenproblem is solved by
  cyclic Jacobi rotations (no LAPACK needed inside a kernel).
* :func:`rigid_rotate_about` / :func:`rigid_translate` — move a frame rigidly with a joint.
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit

from ..kinematics.kernels import BALL

TWO_PI = 2.0 * math.pi


@njit(cache=True)
def welman_g(k1, k2, k3, phi):
    """Welman's one-joint objective g(Φ) = k1(1 − cosΦ) + k2 cosΦ + k3 sinΦ (SEEDS.md §5, eq. 4.19)."""
    c = math.cos(phi)
    return k1 * (1.0 - c) + k2 * c + k3 * math.sin(phi)


@njit(cache=True)
def welman_angle(k1, k2, k3):
    """Φ in (−π, π] maximising g(Φ) = k1(1 − cosΦ) + k2 cosΦ + k3 sinΦ (SEEDS.md §5, eq. 4.23).

    g'(Φ) = (k1 − k2) sinΦ + k3 cosΦ = 0 gives the candidate Φ_c = atan(k3 / (k2 − k1)) in
    (−π/2, π/2); since tan has period π, Φ_c ± π are candidates too. Those inside (−π, π] whose
    second derivative g''(Φ) = (k1 − k2) cosΦ − k3 sinΦ is negative are maxima; the best by g wins.
    A constant g (k2 = k1 and k3 = 0) returns 0: no motion.
    """
    den = k2 - k1
    if den == 0.0:
        if k3 == 0.0:
            return 0.0
        phi_c = math.pi / 2 if k3 > 0.0 else -math.pi / 2
    else:
        phi_c = math.atan(k3 / den)
    best = 0.0
    best_g = -math.inf
    for s in range(3):
        phi = phi_c + (0.0 if s == 0 else (math.pi if s == 1 else -math.pi))
        if phi <= -math.pi or phi > math.pi:
            continue
        g2 = (k1 - k2) * math.cos(phi) - k3 * math.sin(phi)
        if g2 >= 0.0:
            continue
        g = welman_g(k1, k2, k3, phi)
        if g > best_g:
            best_g = g
            best = phi
    return best


@njit(cache=True)
def best_arc_angle(k1, k2, k3, lo, hi):
    """Φ in [lo, hi] (lo ≤ 0 ≤ hi) maximising Welman's g.

    g is a sinusoid of Φ with one maximum per turn, so on an interval its best point is the
    unconstrained maximiser (or a 2π-shift of it) when one lies inside, else the better end.
    Plain clamping (Welman's text) can pick the wrong end when the maximum lies "behind" a limit.
    """
    phi = welman_angle(k1, k2, k3)
    for s in range(3):
        p = phi + (0.0 if s == 0 else (TWO_PI if s == 1 else -TWO_PI))
        if lo <= p <= hi:
            return p
    g_lo = welman_g(k1, k2, k3, lo) if math.isfinite(lo) else -math.inf
    g_hi = welman_g(k1, k2, k3, hi) if math.isfinite(hi) else -math.inf
    return lo if g_lo > g_hi else hi


@njit(cache=True)
def min_rotvec(ex, ey, ez, tx, ty, tz, out):
    """out = angle · unit(e × t): the smallest rotation taking direction e onto direction t.

    angle = atan2(|e × t|, e · t) (= acos of the unit dot product, stable near 0 and π). For
    antiparallel e, t any axis ⟂ e is used. Returns the angle; 0 when e or t is (near) zero.
    """
    ne = math.sqrt(ex * ex + ey * ey + ez * ez)
    nt = math.sqrt(tx * tx + ty * ty + tz * tz)
    out[0] = 0.0
    out[1] = 0.0
    out[2] = 0.0
    if ne < 1e-300 or nt < 1e-300:
        return 0.0
    cx = ey * tz - ez * ty
    cy = ez * tx - ex * tz
    cz = ex * ty - ey * tx
    s = math.sqrt(cx * cx + cy * cy + cz * cz)
    c = ex * tx + ey * ty + ez * tz
    th = math.atan2(s, c)
    if s > 1e-12 * ne * nt:
        k = th / s
        out[0] = k * cx
        out[1] = k * cy
        out[2] = k * cz
    elif c < 0.0:  # antiparallel: any axis perpendicular to e
        px, py, pz = 1.0, 0.0, 0.0
        if abs(ex) > 0.9 * ne:
            px, py = 0.0, 1.0
        ux = ey * pz - ez * py
        uy = ez * px - ex * pz
        uz = ex * py - ey * px
        n = math.sqrt(ux * ux + uy * uy + uz * uz)
        out[0] = th * ux / n
        out[1] = th * uy / n
        out[2] = th * uz / n
    else:
        th = 0.0
    return th


@njit(cache=True)
def _jacobi_top_eigvec4(N, v):
    """Eigenvector of the largest eigenvalue of the symmetric 4 × 4 ``N`` (overwritten) into v."""
    V = np.eye(4)
    for _sweep in range(50):
        off = 0.0
        for p in range(4):
            for r in range(p + 1, 4):
                off += N[p, r] * N[p, r]
        scale = 0.0
        for p in range(4):
            scale += N[p, p] * N[p, p]
        if off <= 1e-30 * (scale + off) or off == 0.0:
            break
        for p in range(3):
            for r in range(p + 1, 4):
                apr = N[p, r]
                if apr == 0.0:
                    continue
                theta = (N[r, r] - N[p, p]) / (2.0 * apr)
                t = 1.0 / (abs(theta) + math.sqrt(theta * theta + 1.0))
                if theta < 0.0:
                    t = -t
                c = 1.0 / math.sqrt(t * t + 1.0)
                s = t * c
                for k in range(4):  # N <- J^T N J
                    akp = N[k, p]
                    akr = N[k, r]
                    N[k, p] = c * akp - s * akr
                    N[k, r] = s * akp + c * akr
                for k in range(4):
                    apk = N[p, k]
                    ark = N[r, k]
                    N[p, k] = c * apk - s * ark
                    N[r, k] = s * apk + c * ark
                for k in range(4):
                    vkp = V[k, p]
                    vkr = V[k, r]
                    V[k, p] = c * vkp - s * vkr
                    V[k, r] = s * vkp + c * vkr
    best = 0
    for p in range(1, 4):
        if N[p, p] > N[best, best]:
            best = p
    for k in range(4):
        v[k] = V[k, best]


@njit(cache=True)
def horn_quat(S):
    """Unit quaternion (w, x, y, z) of the rotation maximising Σ w t·(R e) given S = Σ w e tᵀ (3, 3)
    (Horn 1987).

    N = [[Sxx+Syy+Szz, Syz−Szy, Szx−Sxz, Sxy−Syx], [·, Sxx−Syy−Szz, Sxy+Syx, Szx+Sxz],
         [·, ·, −Sxx+Syy−Szz, Syz+Szy], [·, ·, ·, −Sxx−Syy+Szz]] (symmetric); the unit quaternion
    (w, x, y, z) of R is N's top eigenvector. A tiny multiple of the identity pairs (e = t = the
    basis vectors) is added to S so that a rank-deficient S (one vector pair, or parallel pairs)
    picks the rotation closest to the identity, i.e. the smallest one.
    """
    tr = abs(S[0, 0]) + abs(S[1, 1]) + abs(S[2, 2])
    for i in range(3):
        for j in range(3):
            tr += abs(S[i, j])
    eps = 1e-9 * tr
    sxx = S[0, 0] + eps
    syy = S[1, 1] + eps
    szz = S[2, 2] + eps
    sxy, sxz = S[0, 1], S[0, 2]
    syx, syz = S[1, 0], S[1, 2]
    szx, szy = S[2, 0], S[2, 1]
    N = np.empty((4, 4))
    N[0, 0] = sxx + syy + szz
    N[0, 1] = syz - szy
    N[0, 2] = szx - sxz
    N[0, 3] = sxy - syx
    N[1, 1] = sxx - syy - szz
    N[1, 2] = sxy + syx
    N[1, 3] = szx + sxz
    N[2, 2] = -sxx + syy - szz
    N[2, 3] = syz + szy
    N[3, 3] = -sxx - syy + szz
    for i in range(4):
        for j in range(i):
            N[i, j] = N[j, i]
    v = np.empty(4)
    _jacobi_top_eigvec4(N, v)
    n = math.sqrt(v[0] * v[0] + v[1] * v[1] + v[2] * v[2] + v[3] * v[3])
    return v[0] / n, v[1] / n, v[2] / n, v[3] / n


@njit(cache=True)
def horn_rotation(S, R):
    """R (3, 3) of :func:`horn_quat`."""
    w, x, y, z = horn_quat(S)
    quat_to_matrix_into(w, x, y, z, R)


@njit(cache=True)
def rigid_rotate_about(T, Q, px, py, pz):
    """T ← D T in place, D = the rotation Q (3, 3) about the world point p (frame moved by a joint)."""
    for c in range(3):
        a0 = T[0, c]
        a1 = T[1, c]
        a2 = T[2, c]
        for r in range(3):
            T[r, c] = Q[r, 0] * a0 + Q[r, 1] * a1 + Q[r, 2] * a2
    dx = T[0, 3] - px
    dy = T[1, 3] - py
    dz = T[2, 3] - pz
    T[0, 3] = px + Q[0, 0] * dx + Q[0, 1] * dy + Q[0, 2] * dz
    T[1, 3] = py + Q[1, 0] * dx + Q[1, 1] * dy + Q[1, 2] * dz
    T[2, 3] = pz + Q[2, 0] * dx + Q[2, 1] * dy + Q[2, 2] * dz


@njit(cache=True)
def rigid_translate(T, dx, dy, dz):
    T[0, 3] += dx
    T[1, 3] += dy
    T[2, 3] += dz


# --------------------------------------------------------------------------- unit quaternions (w, x, y, z)
# The ball-joint updates of ccd and fabrik compose rotations as quaternions: no trigonometry for a
# minimal rotation, one sin/cos pair to read a joint's rotation vector and one atan2 to write it.


@njit(cache=True)
def qmul(aw, ax, ay, az, bw, bx, by, bz):
    """The Hamilton product a ⊗ b (rotation b first, then a)."""
    return (aw * bw - ax * bx - ay * by - az * bz, aw * bx + ax * bw + ay * bz - az * by,
            aw * by - ax * bz + ay * bw + az * bx, aw * bz + ax * by - ay * bx + az * bw)


@njit(cache=True)
def quat_from_rotvec(r0, r1, r2):
    """exp of the rotation vector r as a unit quaternion (Taylor terms near 0)."""
    th2 = r0 * r0 + r1 * r1 + r2 * r2
    if th2 < 1e-12:
        s = 0.5 - th2 / 48.0
        return 1.0 - th2 / 8.0, s * r0, s * r1, s * r2
    th = math.sqrt(th2)
    s = math.sin(0.5 * th) / th
    return math.cos(0.5 * th), s * r0, s * r1, s * r2


@njit(cache=True)
def rotvec_from_quat(w, x, y, z):
    """The rotation vector (angle in [0, π]) of the unit quaternion (w, x, y, z)."""
    if w < 0.0:
        w, x, y, z = -w, -x, -y, -z
    s = math.sqrt(x * x + y * y + z * z)
    if s < 1e-12:
        k = 2.0 / w if w > 0.0 else 2.0
    else:
        k = 2.0 * math.atan2(s, w) / s
    return k * x, k * y, k * z


@njit(cache=True)
def quat_to_matrix_into(w, x, y, z, R):
    """R (3, 3) of the unit quaternion (w, x, y, z)."""
    R[0, 0] = 1.0 - 2.0 * (y * y + z * z)
    R[0, 1] = 2.0 * (x * y - w * z)
    R[0, 2] = 2.0 * (x * z + w * y)
    R[1, 0] = 2.0 * (x * y + w * z)
    R[1, 1] = 1.0 - 2.0 * (x * x + z * z)
    R[1, 2] = 2.0 * (y * z - w * x)
    R[2, 0] = 2.0 * (x * z - w * y)
    R[2, 1] = 2.0 * (y * z + w * x)
    R[2, 2] = 1.0 - 2.0 * (x * x + y * y)


@njit(cache=True)
def min_rotation_quat(ex, ey, ez, tx, ty, tz):
    """The smallest rotation taking direction e onto direction t as a unit quaternion:
    normalise(|e||t| + e·t, e × t) (the half-angle form, no trigonometry). Antiparallel e, t: the
    half turn about an axis ⟂ e; e or t (near) zero: the identity."""
    ne = math.sqrt(ex * ex + ey * ey + ez * ez)
    nt = math.sqrt(tx * tx + ty * ty + tz * tz)
    if ne < 1e-300 or nt < 1e-300:
        return 1.0, 0.0, 0.0, 0.0
    w = ne * nt + ex * tx + ey * ty + ez * tz
    x = ey * tz - ez * ty
    y = ez * tx - ex * tz
    z = ex * ty - ey * tx
    if w < 1e-12 * ne * nt:  # antiparallel: any axis perpendicular to e
        px, py, pz = 1.0, 0.0, 0.0
        if abs(ex) > 0.9 * ne:
            px, py = 0.0, 1.0
        x = ey * pz - ez * py
        y = ez * px - ex * pz
        z = ex * py - ey * px
        w = 0.0
    n = math.sqrt(w * w + x * x + y * y + z * z)
    if not n > 0.0:  # |e| |t| ~ 1e-160: the squares underflow (hypothesis found it): the identity
        return 1.0, 0.0, 0.0, 0.0
    return w / n, x / n, y / n, z / n


@njit(cache=True)
def twist_angle(w, x, y, z, ax, ay, az):
    """τ in [−π, π]: the twist of the rotation (w, x, y, z) about the unit axis a in its swing-twist
    decomposition q = q_swing ⊗ q_twist (model/limits.py), 2 atan2(v·a, w) with w ≥ 0; 0 when the
    twist is undefined (a half turn about an axis ⟂ a)."""
    p = x * ax + y * ay + z * az
    if w < 0.0:
        w, p = -w, -p
    if abs(p) < 1e-15 and w < 1e-15:
        return 0.0
    return 2.0 * math.atan2(p, w)


@njit(cache=True)
def clamp_swing_twist_quat(w, x, y, z, cone, i):
    """The unit quaternion (w, x, y, z) projected onto the swing-cone/twist limit row
    ``cone[i] = (ax, ay, az, swing_max, twist_lo, twist_hi)`` (angles [rad], a unit): the kernel twin of
    :func:`invkin.model.limits.clamp_swing_twist` (twist clamped into [lo, hi], the swing's angle
    scaled down to swing_max about its own axis). Returns ``(w, x, y, z, changed)``."""
    ax, ay, az = cone[i, 0], cone[i, 1], cone[i, 2]
    smax, tlo, thi = cone[i, 3], cone[i, 4], cone[i, 5]
    if w < 0.0:
        w, x, y, z = -w, -x, -y, -z
    p = x * ax + y * ay + z * az
    n = math.sqrt(w * w + p * p)
    if n > 1e-15:
        tw, tx, ty, tz = w / n, p * ax / n, p * ay / n, p * az / n
        tau = 2.0 * math.atan2(p, w)
    else:
        tw, tx, ty, tz = 1.0, 0.0, 0.0, 0.0
        tau = 0.0
    sw, sx, sy, sz = qmul(w, x, y, z, tw, -tx, -ty, -tz)  # q_swing = q ⊗ q_twist⁻¹
    if sw < 0.0:
        sw, sx, sy, sz = -sw, -sx, -sy, -sz
    sv = math.sqrt(sx * sx + sy * sy + sz * sz)
    sigma = 2.0 * math.atan2(sv, sw)
    tau_c = min(max(tau, tlo), thi)
    if sigma <= smax and tau_c == tau:
        return w, x, y, z, False
    if sigma > smax:
        h = 0.5 * smax
        k = math.sin(h) / sv
        sw, sx, sy, sz = math.cos(h), k * sx, k * sy, k * sz
    if tau_c != tau:
        h = 0.5 * tau_c
        sh = math.sin(h)
        tw, tx, ty, tz = math.cos(h), sh * ax, sh * ay, sh * az
    w, x, y, z = qmul(sw, sx, sy, sz, tw, tx, ty, tz)
    return w, x, y, z, True


@njit(cache=True)
def has_cone(cone, i):
    """True when the limit row cone[i] = (ax, ay, az, swing_max, twist_lo, twist_hi) restricts anything
    (rows are read in place: a row view would cost more than the test)."""
    return cone[i, 3] < math.pi or cone[i, 4] > -math.pi or cone[i, 5] < math.pi


@njit(cache=True)
def local_quats(ni, q, Lq):
    """Lq[i] (n, 4) = the unit quaternion of every ball joint's rotation vector in q (the cache that
    :func:`ball_update` keeps next to q)."""
    for i in range(ni.shape[0]):
        c = ni[i, 2]
        if ni[i, 1] == BALL and c >= 0:
            Lq[i, 0], Lq[i, 1], Lq[i, 2], Lq[i, 3] = quat_from_rotvec(q[c], q[c + 1], q[c + 2])


@njit(cache=True)
def ball_update(q, c, lower, upper, W, dw, dx, dy, dz, sf, cone, i, Lq, Q, write_q):
    """Turn the ball joint q[c:c+3] (rotation vector; its quaternion in Lq[i], kept in step; world frame
    rotation W (3, 3)) by the world rotation d = (dw, dx, dy, dz), as the local increment
    R ← R (Wᵀ d W) with its angle scaled by the stiffness ``sf``; then its limits, inside the update:
    the swing cone and twist range ``cone[i]`` (:func:`clamp_swing_twist_quat`) and the box
    [lower, upper] on the rotation vector. Writes the world rotation actually applied
    (W Rₒᵀ Rₙ Wᵀ) into Q (3, 3). ``write_q`` False: q is left behind (the caller writes it later,
    :func:`invkin.solvers._chain.sync_ball_q`) unless a finite box needs it now."""
    lx = W[0, 0] * dx + W[1, 0] * dy + W[2, 0] * dz  # the increment's axis in the joint's frame
    ly = W[0, 1] * dx + W[1, 1] * dy + W[2, 1] * dz
    lz = W[0, 2] * dx + W[1, 2] * dy + W[2, 2] * dz
    if sf != 1.0:
        if dw < 0.0:
            dw, lx, ly, lz = -dw, -lx, -ly, -lz
        s = math.sqrt(lx * lx + ly * ly + lz * lz)
        if s > 0.0:
            h = sf * math.atan2(s, dw)
            k = math.sin(h) / s
            dw, lx, ly, lz = math.cos(h), k * lx, k * ly, k * lz
    ow, ox, oy, oz = Lq[i, 0], Lq[i, 1], Lq[i, 2], Lq[i, 3]
    nw, nx, ny, nz = qmul(ow, ox, oy, oz, dw, lx, ly, lz)
    nn = 1.0 / math.sqrt(nw * nw + nx * nx + ny * ny + nz * nz)  # no drift over many updates
    nw, nx, ny, nz = nw * nn, nx * nn, ny * nn, nz * nn
    exact = True  # the increment applied as asked (no limit took part of it)
    if cone[i, 3] < math.pi or cone[i, 4] > -math.pi or cone[i, 5] < math.pi:
        nw, nx, ny, nz, clamped = clamp_swing_twist_quat(nw, nx, ny, nz, cone, i)
        exact = not clamped
    if write_q or max(lower[c], lower[c + 1], lower[c + 2]) > -math.inf \
            or min(upper[c], upper[c + 1], upper[c + 2]) < math.inf:
        r0, r1, r2 = rotvec_from_quat(nw, nx, ny, nz)
        q[c] = min(max(r0, lower[c]), upper[c])
        q[c + 1] = min(max(r1, lower[c + 1]), upper[c + 1])
        q[c + 2] = min(max(r2, lower[c + 2]), upper[c + 2])
        if q[c] != r0 or q[c + 1] != r1 or q[c + 2] != r2:
            nw, nx, ny, nz = quat_from_rotvec(q[c], q[c + 1], q[c + 2])
            exact = False
    Lq[i, 0], Lq[i, 1], Lq[i, 2], Lq[i, 3] = nw, nx, ny, nz
    if not exact:  # the applied local increment Rₒᵀ Rₙ
        dw, lx, ly, lz = qmul(ow, -ox, -oy, -oz, nw, nx, ny, nz)
    # turned into the world frame: (w, W v)
    quat_to_matrix_into(dw, W[0, 0] * lx + W[0, 1] * ly + W[0, 2] * lz, W[1, 0] * lx + W[1, 1] * ly + W[1, 2] * lz,
                        W[2, 0] * lx + W[2, 1] * ly + W[2, 2] * lz, Q)
