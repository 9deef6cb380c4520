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
def horn_rotation(S, R):
    """R (3, 3) maximising Σ w t·(R e) given S = Σ w e tᵀ (3, 3) (Horn 1987, unit quaternions).

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
    w, x, y, z = v[0], v[1], v[2], v[3]
    n = math.sqrt(w * w + x * x + y * y + z * z)
    w /= n
    x /= n
    y /= n
    z /= n
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
