"""Euler angles and rotation-joint groups: the small rotation helpers that the glTF reader, the limb
solver and the joint limits share (a leaf module: NumPy and the kernels' joint-type constants only).

``euler_from_matrix(R, "IJK")`` gives ``(a, b, c)`` with ``R = R_I(a) · R_J(b) · R_K(c)`` (Tait–Bryan);
``frame_groups(robot, frame)`` lists the rotation joints that turn a frame about its own position
(three BVH/glTF channel nodes, or one ball joint).
"""
from __future__ import annotations

import math

import numpy as np

from ..kinematics import kernels as K

__all__ = ["ORDERS", "euler_from_matrix", "axis_rot", "rot", "frame_groups"]

#: Euler orders (Tait–Bryan, rotation channels in this order).
ORDERS = ("ZXY", "ZYX", "YXZ", "YZX", "XYZ", "XZY")
_CYCLIC = ("XYZ", "YZX", "ZXY")


def axis_rot(axis: int, angle: np.ndarray) -> np.ndarray:
    """(..., 3, 3) rotations about x/y/z by ``angle`` [rad]."""
    c, s = np.cos(angle), np.sin(angle)
    R = np.zeros(np.shape(angle) + (3, 3))
    i, j = (axis + 1) % 3, (axis + 2) % 3
    R[..., axis, axis] = 1.0
    R[..., i, i] = c
    R[..., j, j] = c
    R[..., i, j] = -s
    R[..., j, i] = s
    return R


def euler_from_matrix(R: np.ndarray, order: str) -> np.ndarray:
    """(..., 3) angles ``(a, b, c)`` [rad] with ``R = R_i(a) · R_j(b) · R_k(c)`` for ``order = "IJK"``.

    ``b = atan2(σ R_ik, √(R_ii² + R_ij²))`` (σ = +1 for cyclic orders, -1 otherwise) stays accurate
    near ±90°; at exact gimbal lock ``c = 0`` and ``a`` carries the whole remaining turn.
    """
    i, j, k = ("XYZ".index(ch) for ch in order)
    sg = 1.0 if order in _CYCLIC else -1.0
    R = np.asarray(R, float)
    cb = np.hypot(R[..., i, i], R[..., i, j])
    b = np.arctan2(sg * R[..., i, k], cb)
    a = np.arctan2(-sg * R[..., j, k], R[..., k, k])
    c = np.arctan2(-sg * R[..., i, j], R[..., i, i])
    lock = cb < 1e-9
    if np.any(lock):  # R = R_i(a ± c) R_j(±90°): put everything in a
        a = np.where(lock, np.arctan2(sg * R[..., k, j], R[..., j, j]), a)
        c = np.where(lock, 0.0, c)
    return np.stack([a, b, c], axis=-1)


def rot(axis, angle) -> np.ndarray:
    a = np.asarray(axis, float)
    n = np.linalg.norm(a)
    if n == 0.0 or angle == 0.0:
        return np.eye(3)
    a = a / n
    Kx = np.array([[0, -a[2], a[1]], [a[2], 0, -a[0]], [-a[1], a[0], 0]])
    return np.eye(3) + math.sin(angle) * Kx + (1 - math.cos(angle)) * Kx @ Kx


def frame_groups(robot, frame: int) -> list:
    """Rotation-joint nodes that turn ``frame`` about its own position (first to last)."""
    nodes = []
    i = frame
    while i >= 0:
        if robot.qidx[i] >= 0 and robot.joint_type[i] in (K.REVOLUTE, K.BALL):
            nodes.append(i)
        p = int(robot.parent[i])
        if p < 0 or robot.is_frame[p] or robot.joint_type[i] == K.PRISMATIC:
            break
        if np.any(robot.origin[i][:3, 3] != 0.0) and i != frame:
            break
        i = p
    return nodes[::-1]
