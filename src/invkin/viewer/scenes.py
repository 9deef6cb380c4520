"""The scenes beside plain IK: the tentacle, two-bone and reach demos, and a BVH clip playing.

The constructor sets a scene's state (``_init_*``); the ticker thread advances the sway, the reach
and the clip (``_tick_*``, at ``TICK_HZ``, under the lock).
"""
from __future__ import annotations

import time

import numpy as np

from ..model.robot import Robot
from .errors import ViewerError

REACH_MAX_STEPS = 5000   # the straight-line loop gives up after this many steps


def _frames_in(out, dof: int, attrs):
    """Configurations (K, dof) in whatever another module returned: an array, or an object (or a
    tuple holding one) with one of ``attrs``; None when there are none."""
    for c in [out] + (list(out) if isinstance(out, tuple) else []):
        for attr in attrs:
            v = getattr(c, attr, None)
            if isinstance(v, np.ndarray) and v.ndim == 2 and v.shape[1] == dof:
                return v
        if isinstance(c, np.ndarray) and c.ndim == 2 and c.shape[1] == dof:
            return c
    return None


def _clip_frames(out, robot: Robot):
    """Frames (F, dof) from whatever correct_clip returned: a Clip, (Clip, ...), an array, .frames/.q."""
    frames = _frames_in(out, robot.dof, ("frames", "q"))
    if frames is not None:
        return frames
    raise ViewerError(f"correct_clip returned {type(out).__name__}, not frames of {robot.dof} joint values")


def _clip_correction_api():
    """(correct_clip, FootPlant) from invkin (or invkin.animation), or (None, None)."""
    import invkin as _ik

    fn, plant = getattr(_ik, "correct_clip", None), getattr(_ik, "FootPlant", None)
    if fn is None:
        try:
            from .. import animation  # noqa: PLC0415 - optional module, written alongside
        except ImportError:
            return None, None
        fn, plant = getattr(animation, "correct_clip", None), getattr(animation, "FootPlant", None)
    return fn, plant


def _feet(frames) -> list:
    """Foot frames of a skeleton by name: "...foot" (else "...ankle"), End Sites excluded; at most 2."""
    for word in ("foot", "ankle"):
        feet = [f for f in frames if word in f.lower() and not f.lower().endswith("_end")]
        if feet:
            return feet[:2]
    return []


def _path_frames(out, dof: int):
    """Configurations (K, dof) from whatever ik.reach returned (array, object with a path)."""
    return _frames_in(out, dof, ("qs", "path", "trajectory", "q"))


class ScenesMixin:
    """ViewerApp's tentacle, two-bone, reach and clip scenes (state set by the constructor)."""

    # ------------------------------------------------------------------ tentacle

    def _init_tentacle(self) -> None:
        self.sway_robot = self.robot
        self.sway_q = np.zeros(self.robot.dof)
        if self._targets:  # start bent: the target off to the side and lower
            self._targets[0].position = self._targets[0].position + (0.35, 0.0, -0.35)

    def _tick_sway(self, t: float) -> None:
        k = np.arange(self.sway_robot.dof)
        self.sway_q = 0.35 * np.sin(1.6 * t - 0.45 * k) * (0.4 + 0.6 * k / max(len(k) - 1, 1))
        if self.server is not None:
            self._sway_skel.update(self.sway_q)

    # ------------------------------------------------------------------ two-bone

    def _init_two_bone(self) -> None:
        from ..solvers.analytic import two_bone_lengths

        r = self.robot
        names = set(r.frame_names)
        if r.dof != 2 or not {"upper", "lower", "hand"} <= names:
            raise ViewerError(f"the two-bone scene needs the planar2 arm (frames upper, lower, hand), "
                              f"not {r.name!r}")
        q0 = np.zeros(2)
        rest = np.stack([r.fk(q0, f)[:3, 3] for f in ("upper", "lower", "hand")])
        l1, l2 = two_bone_lengths(rest)
        self.bone_lengths = (float(l1), float(l2))
        self.shoulder = rest[0].copy()
        self.arm3d_shoulder = np.array([0.0, 0.0, 0.0]) + (0.0, -2.4 * (l1 + l2) / 1.8, 0.0)
        self.arm3d_target = self.arm3d_shoulder + (1.1, 0.3, 0.6)
        self.arm3d_points = np.stack([self.arm3d_shoulder] * 3)
        self.two_bone_q = None
        self.q = np.array([0.6, -1.0])

    def _solve_two_bone(self):
        from ..solvers.analytic import two_bone_2d, two_bone_3d

        l1, l2 = self.bone_lengths
        if self._targets:
            t = self._targets[0].position - self.shoulder
            th1, th2 = two_bone_2d(l1, l2, t[:2], elbow_up=self.elbow_up)
            self.q = np.array([float(th1), float(th2)])
            b = float(np.hypot(t[0], t[1]))
            reach = ("reachable" if abs(l1 - l2) <= b <= l1 + l2 else
                     "out of reach: stretched toward it" if b > l1 + l2 else "too close: folded")
        else:
            th1 = th2 = float("nan")
            reach = "no target"
        pole = np.array([0.0, 0.0, 1.0 if self.elbow_up else -1.0])
        elbow, hand = two_bone_3d(self.arm3d_shoulder, l1, l2, self.arm3d_target, pole)
        self.arm3d_points = np.stack([self.arm3d_shoulder, elbow, hand])
        self.status = (f"2-D (two_bone_2d, elbow {'up' if self.elbow_up else 'down'}): θ1 = {float(th1):.3f}, "
                       f"θ2 = {float(th2):.3f} rad, {reach}; 3-D (two_bone_3d, pole {pole.tolist()}): "
                       f"hand error {np.linalg.norm(hand - self.arm3d_target):.2e} m")
        self._redraw()
        self._show_status()
        return self.q.copy()

    # ------------------------------------------------------------------ straight-line reach

    def _init_reach(self) -> None:
        frame = self.robot.frame_names[-1]
        node, radius = self.robot.reach_bound(frame)
        self.reach_frame = frame
        self.reach_center = np.zeros(3) if node is None else self.robot.fk(self.robot.neutral(), node)[:3, 3]
        self.reach_radius = float(radius)
        self._reaching = False
        self._reach_path = None
        self._reach_steps = 0
        self._reach_fn = None
        try:
            import invkin as _ik

            self._reach_fn = getattr(_ik, "reach", None)
        except ImportError:  # pragma: no cover
            pass
        self.q = np.array([0.3, -0.4, 0.2, 0.5, 0.3, 0.0, 0.6, 0.2])[: self.robot.dof]
        if len(self.q) < self.robot.dof:
            self.q = self.robot.neutral()
        self.reach_start = self.robot.fk(self.q, frame)[:3, 3].copy()
        self._reaching = False

    def wait_reach(self, timeout: float = 10.0) -> bool:
        """Reach scene: wait until the straight-line motion stops; True when it did."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            with self._lock:
                if not self._reaching:
                    return True
            time.sleep(0.02)
        return False

    def _start_reach(self) -> None:
        t = self._targets[0]
        x = self.robot.fk(self.q, t.frame)[:3, 3]
        self.reach_start = x.copy()
        self._reach_steps = 0
        self._reach_path = None
        if np.linalg.norm(t.position - self.reach_center) > self.reach_radius:
            self._reaching = False
            self.status = (f"out of workspace: the target is {np.linalg.norm(t.position - self.reach_center):.3f} "
                           f"from the base, beyond the reach radius {self.reach_radius:g}")
            self._redraw()
            self._show_status()
            return
        self._reach_result = None
        if self._reach_fn is not None:  # the library's own loop (invkin.reach), when present
            try:
                try:
                    out = self._reach_fn(self.robot, t.frame, t.position, step=self.reach_step, q0=self.q,
                                         damping=self.damping)
                except TypeError:
                    out = self._reach_fn(self.robot, t.frame, t.position, step=self.reach_step, q0=self.q)
                self._reach_path = _path_frames(out, self.robot.dof)
                self._reach_result = out
            except Exception as exc:  # another module's API: fall back to the viewer's own loop
                self._reach_fn = None
                self.status = f"ik.reach failed ({type(exc).__name__}: {exc}); using the viewer's own loop"
        self._reaching = True
        self._redraw()

    def _reach_iter(self) -> bool:
        """One straight-line step (SEEDS.md §1); False when the loop stops."""
        t = self._targets[0]
        if self._reach_path is not None:
            if self._reach_steps >= len(self._reach_path):
                r = self._reach_result
                st = getattr(getattr(r, "status", None), "value", getattr(r, "status", "done"))
                self.status = (f"ik.reach: {st} after {self._reach_steps} frames of Δ = {self.reach_step:g}, "
                               f"error {getattr(r, 'position_error', float('nan')):.2e} m, largest "
                               f"deviation from the line {getattr(r, 'max_deviation', float('nan')):.2e} m")
                return False
            self.q = self.robot.clamp(self._reach_path[self._reach_steps])
            self._reach_steps += 1
            return True
        T, J = self.robot.fk_jacobian(self.q, t.frame)
        e = t.position - T[:3, 3]
        d = float(np.linalg.norm(e))
        if d < 0.5 * self.reach_step:
            self.status = f"reached: error {d:.2e} m after {self._reach_steps} steps of Δ = {self.reach_step:g}"
            return False
        if self._reach_steps >= REACH_MAX_STEPS:
            self.status = f"stopped after {REACH_MAX_STEPS} steps, {d:.3f} from the target (singular posture?)"
            return False
        dx = self.reach_step * e / d
        Jv = J[:3]
        lam2 = self.damping ** 2
        dq = Jv.T @ np.linalg.solve(Jv @ Jv.T + lam2 * np.eye(3), dx)
        self.q = self.robot.clamp(self.q + dq)
        self._reach_steps += 1
        return True

    def _tick_reach(self, dt: float) -> None:
        n = max(1, int(round(self.reach_rate * dt)))
        for _ in range(n):
            if not self._reach_iter():
                self._reaching = False
                break
        else:
            d = np.linalg.norm(self._targets[0].position - self.robot.fk(self.q, self._targets[0].frame)[:3, 3])
            self.status = f"reaching: step {self._reach_steps}, {d:.3f} to go"
        self._redraw()
        self._show_status()

    # ------------------------------------------------------------------ BVH clip

    def _correct_clip(self) -> None:
        """The clip corrected by ``invkin.correct_clip`` with its feet planted, when it exists."""
        fn, plant = _clip_correction_api()
        if fn is None:
            self.correction_note = ("**IK-corrected clip:** `invkin.correct_clip` is not available in this "
                                    "version, so the clip plays alone.")
            return
        feet = _feet(self.robot.frame_names)
        try:
            if plant is None or not feet:
                out = fn(self.robot, self.clip)
            else:
                out = fn(self.robot, self.clip, [plant(f) for f in feet])
            self.corrected_frames = _clip_frames(out, self.robot)
        except Exception as exc:  # another module's API: report, keep playing the original
            self.corrected_frames = None
            self.correction_note = (f"**IK-corrected clip:** `correct_clip` failed ({type(exc).__name__}: "
                                    f"{exc}); the clip plays alone.")
            return
        report = out[1] if isinstance(out, tuple) and len(out) > 1 else None
        self._clip_report = report
        before = getattr(report, "sliding_before", None)
        after = getattr(report, "sliding_after", None)
        sliding = ""
        if isinstance(before, dict) and isinstance(after, dict):
            sliding = " Foot sliding: " + ", ".join(
                f"{k} {before[k]:.3g} → {after.get(k, float('nan')):.3g}" for k in before) + " (units/s)."
        self.correction_note = (f"**Green:** `invkin.correct_clip` with {', '.join(feet) or 'no'} planted; "
                                f"**faint blue:** the clip as read (its ghost).{sliding}")

    def _tick_clip(self, dt: float) -> None:
        n = self.clip.n_frames
        step = self.clip_speed * dt / max(self.clip.frame_time, 1e-6)
        self._clip_pos = (getattr(self, "_clip_pos", float(self.clip_frame)) + step) % n
        self.clip_frame = int(self._clip_pos)
        self.q = self.clip.frames[self.clip_frame].copy()
        if self._gui.get("frame") is not None:
            self._sync(self._gui["frame"], self.clip_frame)
        self._redraw()
