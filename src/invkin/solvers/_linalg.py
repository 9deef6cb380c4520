"""Small dense linear algebra for the solver kernels (Numba; no LAPACK call inside a kernel).

One home for what several kernels compute the same way (``jacobian``, ``gauss_seidel``, ``ccd``,
``tracking``, :mod:`invkin.diagnostics`):

* :func:`sym_eigvals`: eigenvalues of a symmetric matrix by cyclic Jacobi rotations (exact to
  rounding for the small Gram matrices of a task Jacobian, k ≤ ~12);
* :func:`gram`: ``J Jᵀ`` (m ≤ n) or ``Jᵀ J``, whichever is smaller; :func:`scale_columns`:
  ``J W^-1/2``;
* :func:`smallest_singular_value` (σ_min of J) and :func:`sigma_min_and_w`
  (σ_min and Yoshikawa's ``w = sqrt(det Gram)``), both through the Gram matrix's eigenvalues;
* :func:`damped_solve`: ``δq = W⁻¹Jᵀ(J W⁻¹ Jᵀ + λ²I)⁻¹ r = (JᵀJ + λ²W)⁻¹Jᵀ r`` on the smaller side;
* :func:`damped_normal_equations`: Levenberg–Marquardt's system
  ``(JᵀJ + w_p² I + μ W) δq = Jᵀe + w_p² r_p``;
* :func:`sqnorm`, :func:`residual_sqnorm` (``|e|² + w_p² |r_p|²``), :func:`cap_step`.

Every routine sums in a fixed index order, so moving a kernel onto these helpers changes no bit
of its results.
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit

from ._common import chol_solve


@njit(cache=True)
def sym_eigvals(A, n, out):
    """Eigenvalues of the symmetric leading n×n block of A (overwritten) into out[:n] (cyclic Jacobi).

    Sweeps (at most 50) stop once the off-diagonal mass is below 1e-30 of the diagonal's (or below
    1e-300); a rotation with |θ| > 1e150 uses t = 1/(2θ), where θ² would overflow.
    """
    for _sweep in range(50):
        off = 0.0
        diag = 0.0
        for p in range(n):
            diag += A[p, p] * A[p, p]
            for r in range(p + 1, n):
                off += A[p, r] * A[p, r]
        if off <= 1e-30 * diag or off < 1e-300:
            break
        for p in range(n - 1):
            for r in range(p + 1, n):
                apr = A[p, r]
                if apr == 0.0:
                    continue
                theta = (A[r, r] - A[p, p]) / (2.0 * apr)
                if abs(theta) > 1e150:
                    t = 0.5 / theta
                else:
                    t = 1.0 / (abs(theta) + math.sqrt(theta * theta + 1.0))
                    if theta < 0.0:
                        t = -t
                c = 1.0 / math.sqrt(t * t + 1.0)
                s = t * c
                for k in range(n):
                    akp = A[k, p]
                    akr = A[k, r]
                    A[k, p] = c * akp - s * akr
                    A[k, r] = s * akp + c * akr
                for k in range(n):
                    apk = A[p, k]
                    ark = A[r, k]
                    A[p, k] = c * apk - s * ark
                    A[r, k] = s * apk + c * ark
    for k in range(n):
        out[k] = A[k, k]


@njit(cache=True)
def row_gram(A, m, dof, G):
    """G = A Aᵀ of A's first m rows (m×m; the rows' dot products over dof columns)."""
    for i in range(m):
        for j in range(i, m):
            s = 0.0
            for k in range(dof):
                s += A[i, k] * A[j, k]
            G[i, j] = s
            G[j, i] = s


@njit(cache=True)
def gram(Jh, m, dof, G):
    """G = Jh Jhᵀ (m×m) if m <= dof else Jhᵀ Jh (dof×dof); returns its size."""
    if m <= dof:
        row_gram(Jh, m, dof, G)
        return m
    for i in range(dof):
        for j in range(i, dof):
            s = 0.0
            for k in range(m):
                s += Jh[k, i] * Jh[k, j]
            G[i, j] = s
            G[j, i] = s
    return dof


@njit(cache=True)
def scale_columns(J, jw, Jh):
    """Jh = J W^-1/2: column k of J (m, dof) divided by sqrt(jw[k])."""
    m = J.shape[0]
    for k in range(J.shape[1]):
        s = 1.0 / math.sqrt(jw[k])
        for i in range(m):
            Jh[i, k] = J[i, k] * s


@njit(cache=True)
def sigma_min_and_w(Jh, m, dof, G, ev):
    """(smallest singular value, sqrt(det(Gram))) of Jh (the Gram of the smaller side)."""
    n = gram(Jh, m, dof, G)
    sym_eigvals(G, n, ev)
    lo = np.inf
    det = 1.0
    for k in range(n):
        v = max(ev[k], 0.0)
        if v < lo:
            lo = v
        det *= v
    return math.sqrt(lo), math.sqrt(det)


@njit(cache=True)
def damped_solve(J, r, jw, lam2, dq, Jh, A, y, b):
    """dq = W⁻¹Jᵀ(J W⁻¹ Jᵀ + λ²I)⁻¹ r = (JᵀJ + λ²W)⁻¹Jᵀ r, solved on the smaller side.

    Jh (m, dof), A (k, k) with k = min(m, dof), y, b (k,) are scratch. Returns False if the
    system could not be factorised (dq untouched)."""
    m = J.shape[0]
    dof = J.shape[1]
    scale_columns(J, jw, Jh)
    n = gram(Jh, m, dof, A)
    for _try in range(4):
        if _try > 0:
            n = gram(Jh, m, dof, A)
        for i in range(n):
            A[i, i] += lam2
        if m <= dof:
            for i in range(m):
                b[i] = r[i]
            ok = chol_solve(A, b, y)
            if ok:
                for k in range(dof):
                    s = 0.0
                    for i in range(m):
                        s += Jh[i, k] * y[i]
                    dq[k] = s / math.sqrt(jw[k])
                return True
        else:
            for k in range(dof):
                s = 0.0
                for i in range(m):
                    s += Jh[i, k] * r[i]
                b[k] = s
            ok = chol_solve(A, b, y)
            if ok:
                for k in range(dof):
                    dq[k] = y[k] / math.sqrt(jw[k])
                return True
        lam2 = max(lam2 * 100.0, 1e-12)
    return False


@njit(cache=True)
def cap_step(dq, max_step):
    """Scale dq so that max |dq_i| <= max_step; returns max |dq_i| before scaling."""
    big = 0.0
    for i in range(dq.shape[0]):
        a = abs(dq[i])
        if a > big:
            big = a
    if big > max_step:
        s = max_step / big
        for i in range(dq.shape[0]):
            dq[i] *= s
    return big


@njit(cache=True)
def sqnorm(v):
    """|v|² (summed in index order)."""
    s = 0.0
    for i in range(v.shape[0]):
        s += v[i] * v[i]
    return s


@njit(cache=True)
def smallest_singular_value(J):
    """σ_min of J (m, n): sqrt of the smallest eigenvalue of J Jᵀ or Jᵀ J, whichever is smaller.

    For m > n this is the smallest of the n singular values (the task can still lose rank)."""
    m, n = J.shape
    k = min(m, n)
    if k == 0:
        return 0.0
    A = np.empty((k, k))
    gram(J, m, n, A)
    ev = np.empty(k)
    sym_eigvals(A, k, ev)
    lo = ev[0]
    for i in range(1, k):
        if ev[i] < lo:
            lo = ev[i]
    return math.sqrt(lo) if lo > 0.0 else 0.0


@njit(cache=True)
def damped_normal_equations(J, e, jw, mu, w_post, pr, A, g):
    """Levenberg–Marquardt's system: A = JᵀJ + w_p² I + μ W, g = Jᵀe + w_p² pr.

    J (m, dof), e (m,): the stacked task; jw (dof,): W = diag(jw); mu: the damping μ; w_post: a
    Posture goal's weight w_p, pr (dof,) its residual q_rest ⊖ q (read only when w_p > 0).
    A (dof, dof), g (dof,) are written.
    """
    m = J.shape[0]
    dof = J.shape[1]
    for r in range(dof):
        s = 0.0
        for k in range(m):
            s += J[k, r] * e[k]
        g[r] = s
        for c in range(r, dof):
            s = 0.0
            for k in range(m):
                s += J[k, r] * J[k, c]
            A[r, c] = s
            A[c, r] = s
    w2 = w_post * w_post
    for r in range(dof):
        A[r, r] += w2 + mu * jw[r]
        if w_post > 0.0:
            g[r] += w2 * pr[r]


@njit(cache=True)
def residual_sqnorm(e, w_post, pr):
    """|e|² + w_p² |pr|²: the squared residual that LM minimises (the pr term only when w_p > 0)."""
    s = 0.0
    for i in range(e.shape[0]):
        s += e[i] * e[i]
    if w_post > 0.0:
        w2 = w_post * w_post
        for i in range(pr.shape[0]):
            s += w2 * pr[i] * pr[i]
    return s
