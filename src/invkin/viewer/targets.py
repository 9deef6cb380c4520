"""Targets: the draggable goals of the viewer (viser transform gizmos) and the API that moves them."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .draw import quats_wxyz
from .errors import ViewerError


@dataclass
class _Target:
    frame: str
    position: np.ndarray        # (3,) in the robot's base frame
    wxyz: np.ndarray            # (4,) orientation in the base frame
    weight: float = 1.0
    handle: object = None       # viser TransformControlsHandle


def _unit_quaternion(wxyz) -> np.ndarray:
    """``wxyz`` (4,) normalised; a ViewerError for anything that is not a finite, non-zero quaternion."""
    try:
        w = np.array(wxyz, dtype=float) if not isinstance(wxyz, str) else np.zeros(0)
    except (TypeError, ValueError):
        w = np.zeros(0)
    n = float(np.linalg.norm(w)) if w.shape == (4,) and np.all(np.isfinite(w)) else 0.0
    if not (n > 1e-12 and np.isfinite(n)):
        raise ViewerError(f"set_target: expected wxyz, a finite non-zero quaternion of shape (4,) (normalised "
                          f"to a unit quaternion), got {wxyz!r:.200}")
    return w / n


class TargetsMixin:
    """ViewerApp's targets: one per frame, kept in ``_targets``; a moved target solves at once."""

    @property
    def target_frames(self) -> list:
        with self._lock:
            return [t.frame for t in self._targets]

    def target_position(self, frame: str | None = None) -> np.ndarray:
        """Position (3,) of the target on ``frame`` (default: the first target) in the base frame."""
        with self._lock:
            return self._target(frame).position.copy()

    def set_target(self, position, frame: str | None = None, wxyz=None, solve: bool = True):
        """Move (or create) the target on ``frame`` to ``position`` (3,) [m, base frame].

        Solves at once (in the caller's thread) and returns the :class:`Result`; the two-bone
        scene returns ``(theta1, theta2)``; the reach scene starts the straight-line motion and
        returns None (see :meth:`wait_reach`).
        """
        p = np.array(position, dtype=float) if not isinstance(position, str) else np.zeros(0)
        if p.shape != (3,) or not np.all(np.isfinite(p)):
            raise ViewerError(f"set_target: expected a finite point of shape (3,) [m], got {position!r}")
        if wxyz is not None:
            wxyz = _unit_quaternion(wxyz)
        with self._lock:
            if self.scene == "two-bone" and frame == "arm3d":
                self.arm3d_target = p.copy()
                if self.server is not None:
                    self._arm3d_gizmo.position = p
                return self._solve_two_bone()
            t = self._target(frame, create=True)
            t.position = p.copy()
            if wxyz is not None:
                t.wxyz = wxyz
            if t.handle is not None:
                t.handle.position = t.position
                t.handle.wxyz = t.wxyz
            self._pause()
            if not solve:
                return None
            return self._on_target_moved()

    def move_target(self, dx: float = 0.0, dy: float = 0.0, dz: float = 0.0, frame: str | None = None):
        """Shift a target by (dx, dy, dz) [m] (the arrow keys) and solve."""
        with self._lock:
            p = self._target(frame).position + (dx, dy, dz)
            return self.set_target(p, frame)

    def add_target(self, frame: str) -> None:
        with self._lock:
            self._target(frame, create=True)

    def remove_target(self, frame: str) -> None:
        with self._lock:
            t = self._target(frame)
            if t.handle is not None:
                t.handle.remove()
            self._targets.remove(t)
            self._redraw()

    def _new_target(self, frame: str, offset=None) -> _Target:
        T = self.robot.fk(self.q, frame)
        p = T[:3, 3].copy() if offset is None else T[:3, 3] + offset
        return _Target(frame, p, quats_wxyz(T[:3, :3]))

    def _target(self, frame: str | None, create: bool = False) -> _Target:
        if frame is None:
            if not self._targets:
                if not create:
                    raise ViewerError("there is no target; add one on a frame first")
                frame = self.robot.frame_names[-1]
            else:
                return self._targets[0]
        for t in self._targets:
            if t.frame == frame:
                return t
        if not create:
            raise ViewerError(f"no target on frame {frame!r}; targets: {[t.frame for t in self._targets]}")
        self.robot.frame_index(frame)
        t = self._new_target(frame)
        self._targets.append(t)
        if self.server is not None:
            self._add_gizmo(t)
        return t

    def _add_gizmo(self, t: _Target) -> None:
        sc = self.server.scene
        k = self._gizmo_count
        self._gizmo_count += 1
        kw = {}
        if self.scene == "tentacle":
            kw = dict(active_axes=(True, False, True), disable_rotations=True)
        elif self.scene in ("two-bone",):
            kw = dict(active_axes=(True, True, False), disable_rotations=True)
        elif self.scene == "reach":
            kw = dict(disable_rotations=True)
        h = sc.add_transform_controls(f"/robot/targets/{k}", scale=0.22 * self.size, position=t.position,
                                      wxyz=t.wxyz, depth_test=False, **kw)
        t.handle = h

        def moved(_event, t=t):
            with self._lock:
                t.position = np.array(h.position, dtype=float)
                t.wxyz = np.array(h.wxyz, dtype=float)
                self._pause()
                if self.scene in ("two-bone", "reach"):
                    self._on_target_moved()
                    return
            self._wake.set()

        h.on_update(moved)

    def _targets_to_frames(self) -> None:
        """Put every target (and its gizmo) where its frame is at the current configuration."""
        for t in self._targets:
            T = self.robot.fk(self.q, t.frame)
            t.position, t.wxyz = T[:3, 3].copy(), quats_wxyz(T[:3, :3])
            if t.handle is not None:
                t.handle.position, t.handle.wxyz = t.position, t.wxyz
