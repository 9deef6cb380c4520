"""Root motion: the ground trajectory of a clip's root (position on the floor plane and heading), and
the clip made in place (that trajectory taken out, for game engines that drive the root themselves).

With ``u`` the up axis and ``h1, h2`` the horizontal axes (right-handed: ``h1 × h2 = u``), frame ``i``:

* position ``p_i``: the root's world position with its up component set to 0;
* heading ``ψ_i = atan2(f · h2, f · h1)`` of the root's *forward axis* ``f = R_i a``, where ``a`` is
  the root's local axis (x, y or z, either sign) that stays near horizontal and points along the
  clip's travel frame by frame (for a clip that does not travel: the most horizontal one), unwrapped
  over frames (continuous, may pass ±π);
* ``T_i = Trans(p_i) · Rot(u, ψ_i)``: the root-motion transform (an engine's "root bone").

:func:`make_in_place` holds the root's horizontal position at frame 0's (and, with
``remove_heading=True``, turns every frame about the up axis through the root by ``−(ψ_i − ψ_0)``),
rewriting only the root's channels; every other channel keeps its bits, so the pose relative to
the root is unchanged. The root must have position channels (every BVH root has them). The root is
the node that carries the motion: a glTF armature node above the hips (no position channels, one
child; :func:`~invkin.read_gltf` keeps a skin's ancestors) is passed over.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import numpy as np

from ..errors import ModelError
from ..model.bvh import Clip, need_frames
from .contacts import _UP, _up_arg, detect_up_axis
from .skeleton import _columns, _motion_root, _robot_for

__all__ = ["RootMotion", "extract_root_motion", "make_in_place"]


@dataclass(frozen=True, eq=False)
class RootMotion:
    """The ground trajectory of a clip's root.

    Attributes:
        positions: (F, 3) the root's position with its up component 0 [clip units].
        heading: (F,) the root's heading about the up axis [rad], unwrapped.
        up: the up axis ("x", "y" or "z").
        forward: the root's local axis used as forward, e.g. "+z".
        frame_time: seconds per frame.
    """

    positions: np.ndarray
    heading: np.ndarray
    up: str
    forward: str
    frame_time: float

    @property
    def transforms(self) -> np.ndarray:
        """(F, 4, 4): ``Trans(p_i) · Rot(up, ψ_i)``."""
        F = len(self.heading)
        T = np.broadcast_to(np.eye(4), (F, 4, 4)).copy()
        u = _UP[self.up]
        i, j = (u + 1) % 3, (u + 2) % 3
        c, s = np.cos(self.heading), np.sin(self.heading)
        T[:, i, i] = c
        T[:, j, j] = c
        T[:, i, j] = -s
        T[:, j, i] = s
        T[:, :3, 3] = self.positions
        return T

    @property
    def velocity(self) -> np.ndarray:
        """(F, 3) ground velocity [units/s] (central differences)."""
        if len(self.heading) < 2 or not self.frame_time > 0:
            return np.zeros_like(self.positions)
        return np.gradient(self.positions, self.frame_time, axis=0)

    def __repr__(self) -> str:
        d = float(np.linalg.norm(self.positions[-1] - self.positions[0])) if len(self.positions) else 0.0
        return (f"RootMotion(frames={len(self.heading)}, up={self.up!r}, forward={self.forward!r}, "
                f"distance={d:.4g}, turn={math.degrees(self.heading[-1] - self.heading[0]):.1f} deg)")


def _root(clip):
    """The motion root (:func:`~invkin.animation.skeleton._motion_root`) of the clip's one ROOT."""
    roots = [i for i, p in enumerate(clip.parents) if p < 0]
    if len(roots) != 1:
        raise ModelError(f"root motion needs one ROOT joint; the clip has {len(roots)}")
    return _motion_root(clip, roots[0])


def extract_root_motion(robot, clip: Clip, *, up=None) -> RootMotion:
    """The root's ground trajectory and heading (see the module docstring). ``up``: default detected.
    The root is the node that carries the motion: a glTF armature node (no position channels, one
    child) above the hips is passed over."""
    robot = _robot_for(robot, clip)
    need_frames(clip, "extract_root_motion")
    up = _up_arg(up) or detect_up_axis(robot, clip)
    r = _root(clip)
    T = robot.fk(np.ascontiguousarray(clip.frames), clip.names[r])
    u = _UP[up]
    i, j = (u + 1) % 3, (u + 2) % 3
    P = T[:, :3, 3].copy()
    P[:, u] = 0.0
    # forward: of the local axes that stay near horizontal, the one (either sign) pointing along the
    # travel, frame by frame (a clip that walks there and back travels nowhere in total); for a clip
    # that does not travel, the most horizontal one
    tilt = np.mean(np.abs(T[:, u, :3]), axis=0)
    cand = [k for k in range(3) if tilt[k] < 0.5] or [int(np.argmin(tilt))]
    V = np.diff(P, axis=0)
    if np.any(V != 0.0):
        score = {(k, sg): sg * float(np.mean(np.sum(T[:-1, :3, k] * V, axis=1))) for k in cand for sg in (1.0, -1.0)}
        k, sg = max(score, key=score.get)
    else:
        k, sg = min(cand, key=lambda c: tilt[c]), 1.0
    f = sg * T[:, :3, k]
    heading = np.unwrap(np.arctan2(f[:, j], f[:, i]))
    return RootMotion(positions=P, heading=heading, up=up, forward=("+" if sg > 0 else "-") + "xyz"[k],
                      frame_time=clip.frame_time)


def make_in_place(robot, clip: Clip, *, up=None, remove_heading: bool = False):
    """``(clip_in_place, root_motion)``: the clip with its root held over frame 0's ground position
    (and, with ``remove_heading``, facing frame 0's heading); see the module docstring. The root is
    the node that carries the motion (the hips below a glTF armature node); its channels act in its
    parent's frame, which may be turned (the armature's Z-up to Y-up rotation)."""
    from ..model.gltf import _channels_rotation, euler_from_matrix

    robot = _robot_for(robot, clip)
    need_frames(clip, "make_in_place")
    rm = extract_root_motion(robot, clip, up=up)
    r = _root(clip)
    p = clip.parents[r]
    cols = dict(_columns(clip)[r])
    u = _UP[rm.up]
    pos = {c: col for c, col in cols.items() if c.endswith("position")}
    F = clip.n_frames
    q = np.ascontiguousarray(clip.frames)
    out = np.array(clip.frames)
    P = robot.fk(q, clip.names[r])[:, :3, 3]
    hz = [a for a in range(3) if a != u]
    if p < 0:  # a ROOT: its channels are world axes
        R_p = None
        shift = {a: -(P[:, a] - P[0, a]) for a in hz}
        need = hz
    else:  # below a fixed or moving parent: the world shift in the parent's axes
        R_p = robot.fk(q, clip.names[p])[:, :3, :3]
        dw = np.zeros((F, 3))
        for a in hz:
            dw[:, a] = -(P[:, a] - P[0, a])
        dl = np.einsum("fji,fj->fi", R_p, dw)
        tiny = 1e-12 * max(1.0, float(np.max(np.abs(P), initial=0.0)))
        need = [a for a in range(3) if np.any(np.abs(dl[:, a]) > tiny)]
        shift = {a: dl[:, a] for a in need}
    missing = ["XYZ"[a] + "position" for a in need if "XYZ"[a] + "position" not in pos]
    if missing:
        raise ModelError(f"make_in_place: the root {clip.names[r]!r} has no {', '.join(missing)} channel; "
                         f"its channels are {list(cols)}")
    for a, d in shift.items():
        c = pos["XYZ"[a] + "position"]
        out[:, c] = clip.frames[:, c] + d
    if remove_heading:
        rot = [c for c in clip.channels[r] if c.endswith("rotation")]
        if len(rot) != 3 or len({c[0] for c in rot}) != 3:
            raise ModelError(f"make_in_place(remove_heading=True): the root needs three rotation channels about "
                             f"x, y and z; it has {rot}")
        rc = [cols[c] for c in rot]
        R = _channels_rotation(rot, clip.frames[:, rc])
        d = -(rm.heading - rm.heading[0])
        i, j = (u + 1) % 3, (u + 2) % 3
        Ru = np.broadcast_to(np.eye(3), (F, 3, 3)).copy()
        Ru[:, i, i] = np.cos(d)
        Ru[:, j, j] = np.cos(d)
        Ru[:, i, j] = -np.sin(d)
        Ru[:, j, i] = np.sin(d)
        if R_p is not None:  # the turn about the world up axis, in the parent's frame
            Ru = np.transpose(R_p, (0, 2, 1)) @ Ru @ R_p
        ang = euler_from_matrix(Ru @ R, "".join(c[0] for c in rot))
        # nearest to the original angles modulo 2π (no wrap jumps in the written file)
        ang = clip.frames[:, rc] + np.remainder(ang - clip.frames[:, rc] + np.pi, 2 * np.pi) - np.pi
        out[:, rc] = ang
    return dataclasses.replace(clip, frames=out), rm
