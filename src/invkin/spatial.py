"""SO(3) and SE(3) helpers: exponential/logarithm, roll-pitch-yaw, quaternions, pose errors.

Conventions
-----------
* Rotation matrices act on column vectors; ``T_a_b`` maps points of frame b into frame a.
* Roll-pitch-yaw follows URDF: ``R = Rz(yaw) @ Ry(pitch) @ Rx(roll)`` (fixed axes X, Y, Z).
* Quaternions say their order in their names: ``quat_wxyz`` (scalar first: Eigen's coefficients
  constructor, MuJoCo, Blender) or ``quat_xyzw`` (scalar last: ROS messages, SciPy, Pinocchio's
  SE3 vectors). :func:`quat_to_matrix` takes exactly one of them by keyword, normalises a
  quaternion whose norm is off 1 by at most :data:`QUAT_NORM_TOL` (the bound within which a
  rotation matrix is repaired, :data:`ORTHONORMAL_REPAIR_TOL`) and refuses one further off,
  naming the norm (a swapped order cannot be detected from the numbers, so nothing is guessed).
* ``so3_exp(r)`` is Rodrigues' formula for the rotation vector ``r`` (axis * angle, |r| in [0, pi]
  for ``so3_log``'s output).

The ``*_nb`` functions are Numba kernels used inside other kernels; the plain names are the
validated public versions.
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit

from .errors import GoalError

__all__ = [
    "so3_exp",
    "so3_log",
    "rpy_to_matrix",
    "matrix_to_rpy",
    "quat_to_matrix",
    "matrix_to_quat",
    "quat_wxyz_to_matrix",
    "matrix_to_quat_wxyz",
    "QUAT_NORM_TOL",
    "make_transform",
    "transform_inverse",
    "rotation_angle",
    "orthonormalize",
    "as_rotation",
    "as_transform",
    "skew",
]


# --------------------------------------------------------------------------- kernels


@njit(cache=True)
def so3_exp_s(r0, r1, r2):
    """exp([r]x) as 9 scalars m00, m01, m02, m10, ..., m22, stable near 0 (Taylor) and everywhere
    else: the one home of the exponential map (FK of ball joints, ⊕ on ball joints, so3_exp_nb)."""
    th2 = r0 * r0 + r1 * r1 + r2 * r2
    if th2 < 1e-12:
        # A = sin(t)/t, B = (1 - cos t)/t^2 to second order
        a = 1.0 - th2 / 6.0
        b = 0.5 - th2 / 24.0
    else:
        th = math.sqrt(th2)
        a = math.sin(th) / th
        b = (1.0 - math.cos(th)) / th2
    return (1.0 - b * (r1 * r1 + r2 * r2), -a * r2 + b * r0 * r1, a * r1 + b * r0 * r2,
            a * r2 + b * r0 * r1, 1.0 - b * (r0 * r0 + r2 * r2), -a * r0 + b * r1 * r2,
            -a * r1 + b * r0 * r2, a * r0 + b * r1 * r2, 1.0 - b * (r0 * r0 + r1 * r1))


@njit(cache=True)
def so3_exp_nb(r0, r1, r2, out):
    """Write exp([r]x) into ``out`` (3x3) (so3_exp_s)."""
    (out[0, 0], out[0, 1], out[0, 2], out[1, 0], out[1, 1], out[1, 2],
     out[2, 0], out[2, 1], out[2, 2]) = so3_exp_s(r0, r1, r2)


@njit(cache=True)
def so3_log_s(m00, m01, m02, m10, m11, m12, m20, m21, m22):
    """Rotation vector (3 scalars) of the rotation with entries m, angle in [0, pi]; exact near 0
    and near pi: the one home of the logarithm map (so3_log_nb, the LM goal rows, rotvec_product)."""
    tr = m00 + m11 + m22
    # sin(theta) * axis from the skew part, cos(theta) from the trace: atan2 is exact near 0
    sx = 0.5 * (m21 - m12)
    sy = 0.5 * (m02 - m20)
    sz = 0.5 * (m10 - m01)
    s = math.sqrt(sx * sx + sy * sy + sz * sz)
    c = 0.5 * (tr - 1.0)
    th = math.atan2(s, c)
    if c > -0.99:
        k = 1.0 + th * th / 6.0 if s < 1e-12 else th / s  # theta / sin(theta), its series near 0
        return k * sx, k * sy, k * sz
    # Near pi: the axis from the symmetric part, B = (R + R^T)/2 = cos I + (1 - cos) a a^T
    omc = 1.0 - c
    ax2 = max((m00 - c) / omc, 0.0)
    ay2 = max((m11 - c) / omc, 0.0)
    az2 = max((m22 - c) / omc, 0.0)
    if ax2 >= ay2 and ax2 >= az2:
        ax = math.sqrt(ax2)
        ay = 0.5 * (m01 + m10) / (omc * ax)
        az = 0.5 * (m02 + m20) / (omc * ax)
    elif ay2 >= az2:
        ay = math.sqrt(ay2)
        ax = 0.5 * (m01 + m10) / (omc * ay)
        az = 0.5 * (m12 + m21) / (omc * ay)
    else:
        az = math.sqrt(az2)
        ax = 0.5 * (m02 + m20) / (omc * az)
        ay = 0.5 * (m12 + m21) / (omc * az)
    n = math.sqrt(ax * ax + ay * ay + az * az)
    ax /= n
    ay /= n
    az /= n
    # the sign of the axis follows the skew part (sin theta * axis)
    if ax * sx + ay * sy + az * sz < 0.0:
        ax = -ax
        ay = -ay
        az = -az
    return th * ax, th * ay, th * az


@njit(cache=True)
def so3_log_nb(R, out):
    """Rotation vector of R into ``out`` (3,), angle in [0, pi]; exact near 0 and near pi (so3_log_s)."""
    out[0], out[1], out[2] = so3_log_s(R[0, 0], R[0, 1], R[0, 2], R[1, 0], R[1, 1], R[1, 2], R[2, 0], R[2, 1], R[2, 2])


@njit(cache=True)
def rotvec_product(a0, a1, a2, b0, b1, b2, transpose_a):
    """log(exp(a)^(T if transpose_a) exp(b)) as 3 scalars: rotation vectors composed (a local
    increment b after a), or with ``transpose_a`` the rotation from a to b in a's frame. Callers in
    kernels pass a ``bool(...)`` value, not a literal (one specialisation)."""
    a00, a01, a02, a10, a11, a12, a20, a21, a22 = so3_exp_s(a0, a1, a2)
    b00, b01, b02, b10, b11, b12, b20, b21, b22 = so3_exp_s(b0, b1, b2)
    if transpose_a:
        a01, a10 = a10, a01
        a02, a20 = a20, a02
        a12, a21 = a21, a12
    return so3_log_s(a00 * b00 + a01 * b10 + a02 * b20, a00 * b01 + a01 * b11 + a02 * b21,
                     a00 * b02 + a01 * b12 + a02 * b22, a10 * b00 + a11 * b10 + a12 * b20,
                     a10 * b01 + a11 * b11 + a12 * b21, a10 * b02 + a11 * b12 + a12 * b22,
                     a20 * b00 + a21 * b10 + a22 * b20, a20 * b01 + a21 * b11 + a22 * b21,
                     a20 * b02 + a21 * b12 + a22 * b22)


@njit(cache=True)
def rotation_angle_nb(Ra, Rb):
    """Angle of Ra^T Rb in [0, pi] (atan2 form: exact near 0 and pi)."""
    # M = Ra^T Rb
    tr = 0.0
    sx = 0.0
    sy = 0.0
    sz = 0.0
    for k in range(3):
        tr += Ra[k, 0] * Rb[k, 0] + Ra[k, 1] * Rb[k, 1] + Ra[k, 2] * Rb[k, 2]
        sx += Ra[k, 2] * Rb[k, 1] - Ra[k, 1] * Rb[k, 2]
        sy += Ra[k, 0] * Rb[k, 2] - Ra[k, 2] * Rb[k, 0]
        sz += Ra[k, 1] * Rb[k, 0] - Ra[k, 0] * Rb[k, 1]
    s = 0.5 * math.sqrt(sx * sx + sy * sy + sz * sz)
    c = 0.5 * (tr - 1.0)
    return math.atan2(s, c)


@njit(cache=True)
def rpy_to_matrix_nb(r, p, y, out):
    cr, sr = math.cos(r), math.sin(r)
    cp, sp = math.cos(p), math.sin(p)
    cy, sy = math.cos(y), math.sin(y)
    out[0, 0] = cy * cp
    out[0, 1] = cy * sp * sr - sy * cr
    out[0, 2] = cy * sp * cr + sy * sr
    out[1, 0] = sy * cp
    out[1, 1] = sy * sp * sr + cy * cr
    out[1, 2] = sy * sp * cr - cy * sr
    out[2, 0] = -sp
    out[2, 1] = cp * sr
    out[2, 2] = cp * cr


# --------------------------------------------------------------------------- public API


def _vec(x, n: int, what: str) -> np.ndarray:
    a = np.asarray(x, dtype=np.float64)
    if a.shape != (n,):
        raise GoalError(f"{what}: expected shape ({n},), got {a.shape}")
    if not np.all(np.isfinite(a)):
        raise GoalError(f"{what}: expected finite values, got {a.tolist()}")
    return a


def skew(v) -> np.ndarray:
    """The 3x3 cross-product matrix [v]x."""
    v = np.asarray(v, dtype=np.float64)
    return np.array([[0.0, -v[2], v[1]], [v[2], 0.0, -v[0]], [-v[1], v[0], 0.0]])


def so3_exp(r) -> np.ndarray:
    """Rotation matrix of the rotation vector ``r`` (3,) [rad], or a batch (..., 3)."""
    a = np.asarray(r, dtype=np.float64)
    if a.shape[-1:] != (3,):
        raise GoalError(f"rotation vector: expected shape (..., 3), got {a.shape}")
    flat = a.reshape(-1, 3)
    out = np.empty((flat.shape[0], 3, 3))
    for i in range(flat.shape[0]):
        so3_exp_nb(flat[i, 0], flat[i, 1], flat[i, 2], out[i])
    return out.reshape(a.shape[:-1] + (3, 3))


def so3_log(R) -> np.ndarray:
    """Rotation vector (axis * angle, angle in [0, pi]) of a rotation matrix or batch (..., 3, 3)."""
    a = np.asarray(R, dtype=np.float64)
    if a.shape[-2:] != (3, 3):
        raise GoalError(f"rotation matrix: expected shape (..., 3, 3), got {a.shape}")
    flat = a.reshape(-1, 3, 3)
    out = np.empty((flat.shape[0], 3))
    for i in range(flat.shape[0]):
        so3_log_nb(flat[i], out[i])
    return out.reshape(a.shape[:-2] + (3,))


def rpy_to_matrix(rpy) -> np.ndarray:
    """URDF roll-pitch-yaw [rad] to a rotation matrix: Rz(yaw) @ Ry(pitch) @ Rx(roll)."""
    r, p, y = _vec(rpy, 3, "rpy")
    out = np.empty((3, 3))
    rpy_to_matrix_nb(r, p, y, out)
    return out


def matrix_to_rpy(R) -> np.ndarray:
    """Inverse of :func:`rpy_to_matrix`; pitch in [-pi/2, pi/2]. At pitch = +-pi/2, roll = 0."""
    R = np.asarray(R, dtype=np.float64)
    sp = -R[2, 0]
    cp = math.hypot(R[0, 0], R[1, 0])
    p = math.atan2(sp, cp)
    if cp > 1e-9:
        r = math.atan2(R[2, 1], R[2, 2])
        y = math.atan2(R[1, 0], R[0, 0])
    else:  # gimbal lock: only yaw -+ roll is defined; put it all in yaw
        r = 0.0
        y = math.atan2(-R[0, 1], R[1, 1])
    return np.array([r, p, y])


def quat_wxyz_to_matrix(quat_wxyz) -> np.ndarray:
    """Quaternion (w, x, y, z) to a rotation matrix; any non-zero norm is normalised (the strict,
    order-naming form is :func:`quat_to_matrix`)."""
    q = _vec(quat_wxyz, 4, "quat_wxyz")
    n = np.linalg.norm(q)
    if n < 1e-9:
        raise GoalError(f"quat_wxyz: expected a non-zero quaternion, got {q.tolist()}")
    w, x, y, z = q / n
    return np.array(
        [
            [1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
            [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
            [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)],
        ]
    )


def matrix_to_quat_wxyz(R) -> np.ndarray:
    """Rotation matrix to a unit quaternion (w, x, y, z) with w >= 0 (Shepperd's method)."""
    R = np.asarray(R, dtype=np.float64)
    tr = R[0, 0] + R[1, 1] + R[2, 2]
    if tr > 0:
        s = 2.0 * math.sqrt(tr + 1.0)
        q = [0.25 * s, (R[2, 1] - R[1, 2]) / s, (R[0, 2] - R[2, 0]) / s, (R[1, 0] - R[0, 1]) / s]
    elif R[0, 0] > R[1, 1] and R[0, 0] > R[2, 2]:
        s = 2.0 * math.sqrt(1.0 + R[0, 0] - R[1, 1] - R[2, 2])
        q = [(R[2, 1] - R[1, 2]) / s, 0.25 * s, (R[0, 1] + R[1, 0]) / s, (R[0, 2] + R[2, 0]) / s]
    elif R[1, 1] > R[2, 2]:
        s = 2.0 * math.sqrt(1.0 + R[1, 1] - R[0, 0] - R[2, 2])
        q = [(R[0, 2] - R[2, 0]) / s, (R[0, 1] + R[1, 0]) / s, 0.25 * s, (R[1, 2] + R[2, 1]) / s]
    else:
        s = 2.0 * math.sqrt(1.0 + R[2, 2] - R[0, 0] - R[1, 1])
        q = [(R[1, 0] - R[0, 1]) / s, (R[0, 2] + R[2, 0]) / s, (R[1, 2] + R[2, 1]) / s, 0.25 * s]
    q = np.array(q)
    q /= np.linalg.norm(q)
    return -q if q[0] < 0 else q


# Rotations whose columns drift from orthonormal by more than this are rejected, not repaired.
ORTHONORMAL_REPAIR_TOL = 1e-3
#: Largest accepted | |q| - 1 | of a quaternion given to :func:`quat_to_matrix`; within it the
#: quaternion is normalised. The same bound as a rotation matrix's repair (as_rotation), so that
#: four rounded decimals pass in either form: (0, 0, 0.7071, 0.7071) has norm 0.99999 and
#: [[0.7071, -0.7071, 0], [0.7071, 0.7071, 0], [0, 0, 1]] a drift of 2e-5.
QUAT_NORM_TOL = ORTHONORMAL_REPAIR_TOL

_QUAT_ORDERS = ("wxyz", "xyzw")


def quat_to_matrix(*, quat_wxyz=None, quat_xyzw=None) -> np.ndarray:
    """Rotation matrix (3, 3) (or (..., 3, 3)) of a unit quaternion given in a named order.

    Exactly one of ``quat_wxyz`` (w, x, y, z) and ``quat_xyzw`` (x, y, z, w), shape (4,) or
    (..., 4). A quaternion whose norm differs from 1 by more than :data:`QUAT_NORM_TOL` is a
    :class:`GoalError` naming the norm; within it, it is normalised.
    """
    if (quat_wxyz is None) == (quat_xyzw is None):
        raise GoalError("quat_to_matrix: give exactly one of quat_wxyz=(w, x, y, z) or "
                        "quat_xyzw=(x, y, z, w)")
    name = "quat_wxyz" if quat_xyzw is None else "quat_xyzw"
    q = _quat(quat_wxyz if quat_xyzw is None else quat_xyzw, name)
    if name == "quat_xyzw":
        q = q[..., [3, 0, 1, 2]]
    w, x, y, z = np.moveaxis(q, -1, 0)
    R = np.empty(q.shape[:-1] + (3, 3))
    R[..., 0, 0] = 1 - 2 * (y * y + z * z)
    R[..., 0, 1] = 2 * (x * y - w * z)
    R[..., 0, 2] = 2 * (x * z + w * y)
    R[..., 1, 0] = 2 * (x * y + w * z)
    R[..., 1, 1] = 1 - 2 * (x * x + z * z)
    R[..., 1, 2] = 2 * (y * z - w * x)
    R[..., 2, 0] = 2 * (x * z - w * y)
    R[..., 2, 1] = 2 * (y * z + w * x)
    R[..., 2, 2] = 1 - 2 * (x * x + y * y)
    return R


def _quat(x, what: str) -> np.ndarray:
    """A finite unit quaternion array (..., 4), normalised; GoalError naming the shape or norm."""
    try:
        q = np.array(x, dtype=np.float64)
    except (TypeError, ValueError):
        raise GoalError(f"{what}: expected 4 numbers, got {x!r:.200}") from None
    if q.ndim == 0 or q.shape[-1] != 4:
        raise GoalError(f"{what}: expected shape (4,) or (..., 4), got {q.shape}")
    if not np.all(np.isfinite(q)):
        raise GoalError(f"{what}: expected finite values, got {q.tolist()}")
    n = np.linalg.norm(q, axis=-1)
    off = np.abs(n - 1.0)
    if np.any(off > QUAT_NORM_TOL):
        k = np.unravel_index(int(np.argmax(off)), n.shape) if n.ndim else ()
        bad = q[k] if k else q
        where = f" at index {tuple(int(i) for i in k)}" if k else ""
        raise GoalError(f"{what}: expected a unit quaternion (| |q| - 1 | <= {QUAT_NORM_TOL:g}), got "
                        f"{bad.tolist()}{where} with norm {float(n[k] if k else n):.9g}")
    return q / n[..., None]


def matrix_to_quat(R, order: str = "wxyz") -> np.ndarray:
    """Unit quaternion of a rotation matrix (3, 3), scalar part >= 0, in ``order`` "wxyz" or "xyzw"."""
    if order not in _QUAT_ORDERS:
        raise GoalError(f"matrix_to_quat: order must be one of {', '.join(map(repr, _QUAT_ORDERS))}, "
                        f"got {order!r}")
    q = matrix_to_quat_wxyz(R)
    return q if order == "wxyz" else q[[1, 2, 3, 0]]


def make_transform(R=None, p=None) -> np.ndarray:
    """4x4 homogeneous transform from a rotation (3, 3) and a translation (3,) [m]."""
    T = np.eye(4)
    if R is not None:
        T[:3, :3] = R
    if p is not None:
        T[:3, 3] = p
    return T


def transform_inverse(T) -> np.ndarray:
    """Inverse of a rigid transform (4, 4) or batch (..., 4, 4) without a general inverse."""
    T = np.asarray(T, dtype=np.float64)
    out = np.zeros_like(T)
    Rt = np.swapaxes(T[..., :3, :3], -1, -2)
    out[..., :3, :3] = Rt
    out[..., :3, 3] = -np.einsum("...ij,...j->...i", Rt, T[..., :3, 3])
    out[..., 3, 3] = 1.0
    return out


def rotation_angle(Ra, Rb) -> float:
    """Angle [rad] of the relative rotation Ra^T Rb, in [0, pi]."""
    return float(rotation_angle_nb(np.ascontiguousarray(Ra, dtype=np.float64)[:3, :3],
                                   np.ascontiguousarray(Rb, dtype=np.float64)[:3, :3]))


def orthonormalize(R) -> np.ndarray:
    """Closest rotation matrix (polar decomposition via SVD, det = +1)."""
    U, _, Vt = np.linalg.svd(np.asarray(R, dtype=np.float64))
    M = U @ Vt
    if np.linalg.det(M) < 0:
        U[:, -1] = -U[:, -1]
        M = U @ Vt
    return M


@njit(cache=True)
def rotation_drift_nb(R):
    """(max |R^T R - I|, det R, all finite) of a 3x3 matrix."""
    fin = True
    for i in range(3):
        for j in range(3):
            v = R[i, j]
            if not (v - v == 0.0):
                fin = False
    drift = 0.0
    for i in range(3):
        for j in range(3):
            s = R[0, i] * R[0, j] + R[1, i] * R[1, j] + R[2, i] * R[2, j]
            if i == j:
                s -= 1.0
            drift = max(drift, abs(s))
    det = (R[0, 0] * (R[1, 1] * R[2, 2] - R[1, 2] * R[2, 1]) - R[0, 1] * (R[1, 0] * R[2, 2] - R[1, 2] * R[2, 0])
           + R[0, 2] * (R[1, 0] * R[2, 1] - R[1, 1] * R[2, 0]))
    return drift, det, fin


def _real(x):
    """x, unless it is complex (NumPy would drop the imaginary part): then a TypeError."""
    if np.asarray(x).dtype.kind == "c":
        raise TypeError("complex values")
    return x


def as_rotation(R, what: str = "rotation") -> np.ndarray:
    """Validate a 3x3 rotation: re-orthonormalise slight drift, reject garbage with GoalError."""
    try:
        a = np.array(_real(R), dtype=np.float64)
    except (TypeError, ValueError):
        raise GoalError(f"{what}: expected a (3, 3) rotation matrix, got {R!r:.200}") from None
    if a.shape != (3, 3):
        raise GoalError(f"{what}: expected a (3, 3) rotation matrix, got shape {a.shape}")
    drift, det, fin = rotation_drift_nb(a)
    if not fin:
        raise GoalError(f"{what}: expected finite values, got {a.tolist()}")
    if drift > ORTHONORMAL_REPAIR_TOL or det <= 0:
        raise GoalError(
            f"{what}: expected a rotation matrix (orthonormal, det +1); "
            f"|R^T R - I| = {drift:.3g}, det = {det:.3g}"
        )
    if drift > 1e-12:
        a = orthonormalize(a)
    return a


def as_transform(T, what: str = "transform") -> np.ndarray:
    """Validate a 4x4 rigid transform (rotation part repaired as in :func:`as_rotation`)."""
    try:
        a = np.array(_real(T), dtype=np.float64)
    except (TypeError, ValueError):
        raise GoalError(f"{what}: expected a (4, 4) homogeneous transform, got {T!r:.200}") from None
    if a.shape != (4, 4):
        raise GoalError(f"{what}: expected a (4, 4) homogeneous transform, got shape {a.shape}")
    p = a[:3, 3]
    if not (math.isfinite(p[0]) and math.isfinite(p[1]) and math.isfinite(p[2])):
        raise GoalError(f"{what}: expected finite values, got {a.tolist()}")
    last = a[3]
    if last[0] != 0.0 or last[1] != 0.0 or last[2] != 0.0 or last[3] != 1.0:
        if not np.all(np.isfinite(last)) or np.abs(last - np.array([0.0, 0.0, 0.0, 1.0])).max() > 1e-9:
            raise GoalError(f"{what}: expected last row [0, 0, 0, 1], got {last.tolist()}")
        a[3] = (0.0, 0.0, 0.0, 1.0)
    R = as_rotation(a[:3, :3], what + " rotation")
    if R is not a[:3, :3]:
        a[:3, :3] = R
    return a
