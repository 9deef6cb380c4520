"""Units and up axis of a :class:`~invkin.model.bvh.Clip`: exact conversions by relabelling channels.

A change of up axis is a proper signed permutation ``P`` of the world axes (det P = +1), applied
to every node by conjugation, ``T' = P · T · Pᵀ``. With the clip's mapping
``T_J = T_P · Trans(o) · Trans(p) · R_c1 · R_c2 · …`` this gives

    T'_J = T'_P · Trans(P o) · Trans(P p) · R_{P a1}(θ1) · R_{P a2}(θ2) · …

and ``P a`` of a unit axis ``a`` is again a unit axis up to its sign, so the conversion renames each
channel (``Zrotation`` becomes ``Yrotation``…) and negates the columns whose axis flips sign. Nothing is
re-sampled: the converted clip is exact, and converting back restores the original bits. A length
unit change multiplies offsets and position columns by ``scale``.

Up axes are named ``"x"``, ``"y"``, ``"z"`` (optionally signed: ``"-z"``); BVH and glTF files are
Y-up by convention.
"""
from __future__ import annotations

import dataclasses
import math

import numpy as np

from ..errors import ModelError

__all__ = ["up_rotation", "convert_clip", "UP_AXES"]

UP_AXES = ("x", "y", "z", "-x", "-y", "-z")


def _axis_vector(up, what: str) -> np.ndarray:
    s = str(up).strip().lower() if isinstance(up, str) else None
    if s not in UP_AXES:
        raise ModelError(f"{what}: up axis must be one of {', '.join(UP_AXES)}, got {up!r}")
    v = np.zeros(3)
    v["xyz".index(s[-1])] = -1.0 if s.startswith("-") else 1.0
    return v


def _scale_value(scale, what: str) -> float:
    try:
        v = float(scale)
    except (TypeError, ValueError):
        v = math.nan
    if isinstance(scale, bool) or not (math.isfinite(v) and v > 0.0):
        raise ModelError(f"{what}: expected a finite number > 0, got {scale!r}")
    return v


def check_conversion(what: str, scale, **axes) -> float:
    """``scale`` as a float (a finite number > 0) with every up-axis argument of ``axes``
    ({argument name: value or None}) checked; ModelError naming ``what`` and the argument."""
    for name, v in axes.items():
        if v is not None:
            _axis_vector(v, f"{what}: {name}")
    return _scale_value(scale, f"{what}: scale")


def up_rotation(up_from, up_to) -> np.ndarray:
    """(3, 3) signed permutation with det +1 taking the ``up_from`` axis onto ``up_to``.

    Between Y-up and Z-up it is the quarter turn about x, ``y → z`` and ``z → -y`` (what Blender's BVH
    and glTF importers do: a Y-up file's forward ``+z`` becomes ``-y``).
    """
    a = _axis_vector(up_from, "up_from")
    b = _axis_vector(up_to, "up_to")
    if np.array_equal(a, b):
        return np.eye(3)
    if np.array_equal(a, -b):  # half turn about an axis perpendicular to both
        e = np.zeros(3)
        e[int(np.flatnonzero(a == 0.0)[0])] = 1.0
        return 2.0 * np.outer(e, e) - np.eye(3)
    axis = np.cross(a, b)  # quarter turn about a ⨯ b takes a onto b
    K = np.array([[0, -axis[2], axis[1]], [axis[2], 0, -axis[0]], [-axis[1], axis[0], 0]])
    return np.rint(np.eye(3) + K + K @ K)


def convert_clip(clip, *, scale: float = 1.0, up_from="y", up_to="y"):
    """``clip`` in other length units (× ``scale``) and with ``up_from`` turned onto ``up_to``.

    Returns a new clip of the same class (other fields kept, through ``dataclasses.replace``); the
    input clip is unchanged. Exact: channels are relabelled and columns negated or multiplied. A
    :class:`~invkin.model.gltf.GltfClip`'s ``rest`` (a q) and ``inverse_bind`` matrices are
    converted with it.
    """
    scale = _scale_value(scale, "convert_clip: scale")
    P = up_rotation(up_from, up_to)
    if scale == 1.0 and np.array_equal(P, np.eye(3)):
        return clip
    frames = _columns(clip.frames, clip.channels, P, scale)
    channels = tuple(tuple("XYZ"[int(np.flatnonzero(P[:, "XYZ".index(c[0])])[0])] + c[1:] for c in chs)
                     for chs in clip.channels)
    offsets = (np.asarray(clip.offsets) @ P.T) * scale
    extra = {}
    rest = getattr(clip, "rest", None)  # a GltfClip's rest pose (a q) and inverse bind matrices
    if rest is not None and np.shape(rest) == (clip.dof,):
        extra["rest"] = _columns(np.asarray(rest, dtype=float)[None], clip.channels, P, scale)[0]
    ibm = getattr(clip, "inverse_bind", None)
    if ibm is not None and np.ndim(ibm) == 3 and np.shape(ibm)[1:] == (4, 4):
        A = np.eye(4)
        A[:3, :3] = P
        S, S_inv = np.diag([scale] * 3 + [1.0]), np.diag([1.0 / scale] * 3 + [1.0])  # translations x scale
        extra["inverse_bind"] = S @ A @ np.asarray(ibm, dtype=float) @ A.T @ S_inv
    return dataclasses.replace(clip, frames=frames, offsets=offsets, channels=channels, **extra)


def _columns(values: np.ndarray, channels, P: np.ndarray, scale: float) -> np.ndarray:
    """(F, dof) values of ``channels`` as the converted clip's columns (signs flipped, lengths scaled)."""
    out = np.array(values, dtype=float)
    col = 0
    for chs in channels:
        for c in chs:
            img = P[:, "XYZ".index(c[0])]
            out[:, col] *= img[int(np.flatnonzero(img)[0])] * (scale if c.endswith("position") else 1.0)
            col += 1
    return out
