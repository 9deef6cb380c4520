"""A retargeted :class:`~invkin.retarget.motion.RobotMotion` in the viewer: the robot plays it (its
floating base moving) on a time slider, and its source clip plays beside it on the same slider.

``invkin view MOTION.npz [--clip CLIP.bvh] [--robot ROBOT]`` / ``ViewerApp(motion=..., source=...)``.
The robot is the one the file records (``robot_spec``: the name or URDF path ``invkin retarget``
loaded it by) unless given; the source clip is the one given, else the one the file records when
that file exists. :func:`motion_view` does the loading and pairing (no server).

The source skeleton is drawn as a stick figure, turned upright from its up axis, scaled uniformly
to the robot's height at the first frame, standing on the ground and shifted sideways (across the
robot's direction of travel) so that the two figures do not overlap.
"""
from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from .errors import ViewerError

__all__ = ["MotionView", "motion_view"]

_SOURCE_LINK_COLOR = (120, 200, 120)
_SOURCE_JOINT_COLOR = (40, 130, 60)


@dataclass(frozen=True)
class MotionView:
    """What the viewer plays: ``frames`` (F, dof) of ``robot`` at ``fps``, and the source clip's
    frame origins ``source_points`` (F, n, 3) [m] placed beside the robot (None without a clip)."""

    motion: object
    robot: object
    frames: np.ndarray
    fps: float
    skeleton: object = None
    clip: object = None
    source_points: np.ndarray | None = None
    note: str = ""


def _read(motion):
    from ..retarget.motion import RobotMotion, read_motion

    if isinstance(motion, RobotMotion):
        return motion
    if isinstance(motion, (str, os.PathLike)):
        p = os.fspath(motion)
        if not p.lower().endswith(".npz"):
            raise ViewerError(f"{p}: expected a motion file (.npz from `invkin retarget`)")
        return read_motion(p)
    raise ViewerError(f"motion: expected a RobotMotion or a .npz path, got {type(motion).__name__}")


def _robot_of(motion, robot):
    from ..errors import InvkinError
    from ..model import load_robot
    from ..model.robot import Robot

    what = f"motion {motion.source or motion.robot_name!r}"
    if robot is None:
        spec = motion.robot_spec
        if not spec:
            raise ViewerError(f"{what} does not record how to load its robot ({motion.robot_name!r}, a model name, "
                              f"not a bundled name or a file: saved from Python without robot_spec, or before it was "
                              f"stored); give the robot: `invkin view MOTION.npz --robot g1` (or a .urdf)")
        try:
            robot = load_robot(spec)
        except InvkinError as exc:
            raise ViewerError(f"{what}: cannot load its robot {spec!r}: {exc}; give it with --robot") from None
    elif not isinstance(robot, Robot):
        robot = load_robot(robot)
    if motion.floating and not robot.floating:
        robot = robot.with_floating_base()  # as `invkin retarget` does for a fixed-root URDF
    names = tuple(robot.joint_names)
    if motion.floating:
        ok = robot.dof == len(motion.joint_names) and names[6:] == motion.actuated_names and names[0].endswith(".x")
    else:
        ok = names == motion.joint_names
    if not ok:
        missing = [n for n in motion.actuated_names if n not in names]
        raise ViewerError(f"{what} does not fit robot {robot.name!r}: its {len(motion.joint_names)} joints "
                          f"{'(' + ', '.join(missing[:5]) + ' missing) ' if missing else ''}differ from the "
                          f"robot's {robot.dof} ({', '.join(names[:8])}, ...)")
    return robot


def _source_of(motion, clip):
    """(skeleton, clip, note) of the source: ``clip`` (a path or a (skeleton, Clip) pair), else the
    recorded clip when its file exists, else (None, None, why)."""
    from ..model.bvh import read_bvh

    if clip is None:
        p = motion.clip_path
        if not p:
            return None, None, "no source clip (give one with --clip)"
        if not os.path.isfile(p):
            return None, None, f"the recorded source clip {p} is not there (give one with --clip)"
        clip = p
    if isinstance(clip, (str, os.PathLike)):
        p = os.fspath(clip)
        if p.lower().endswith((".gltf", ".glb")):
            from ..model.gltf import read_gltf

            sk, c = read_gltf(p)
        else:
            sk, c = read_bvh(p)
        name = os.path.basename(p)
    else:
        try:
            sk, c = clip
        except (TypeError, ValueError):
            raise ViewerError(f"source clip: expected a path or a (skeleton, clip) pair, got "
                              f"{type(clip).__name__}") from None
        name = getattr(sk, "name", "clip")
    if c.n_frames != motion.n_frames:
        raise ViewerError(f"source clip {name} has {c.n_frames} frames but the motion has {motion.n_frames}; "
                          f"give the clip the motion was retargeted from")
    return sk, c, f"source: {name}"


def _frame_points(robot, qs) -> np.ndarray:
    return robot.fk_all_array(np.atleast_2d(qs))[:, robot.is_frame][..., :3, 3]


def _place_source(robot, frames, floating: bool, skeleton, clip) -> np.ndarray:
    """The source's frame origins (F, n, 3) [m]: upright, the robot's height, on the ground, beside it
    (across the robot's travel, one robot height away)."""
    from .character import clip_up_axis, up_rotation

    R = up_rotation(clip_up_axis(skeleton, clip)[0])
    P = _frame_points(skeleton, clip.frames) @ R.T
    h_src = float(np.ptp(P[0, :, 2]))
    h_rob = float(np.ptp(_frame_points(robot, frames[:1])[0, :, 2]))
    s = h_rob / h_src if h_src > 1e-12 and h_rob > 1e-12 else 1.0
    P = s * P
    P[..., 2] -= P[..., 2].min()
    root = frames[[0, -1], :2] if floating else np.zeros((2, 2))
    travel = root[1] - root[0]
    d = float(np.linalg.norm(travel))
    side = np.array([-travel[1], travel[0]]) / d if d > 0.2 * h_rob else np.array([0.0, 1.0])
    P[..., :2] += root[0] - P[0].mean(axis=0)[:2] + max(h_rob, 1e-3) * side
    return P


def motion_view(motion, robot=None, clip=None) -> MotionView:
    """Load and pair what the viewer plays (raises ViewerError, or the readers' InvkinError).

    Args:
        motion: a RobotMotion or a ``.npz`` path (:func:`invkin.read_motion`).
        robot: the robot (a Robot, bundled name or URDF path); default: the one the file records.
        clip: the source (a BVH/glTF path or a (skeleton, Clip) pair); default: the recorded clip
            when its file exists. Its frame count must be the motion's.
    """
    m = _read(motion)
    r = _robot_of(m, robot)
    frames = np.array(m.q, dtype=np.float64)
    sk, c, note = _source_of(m, clip)
    P = _place_source(r, frames, m.floating, sk, c) if c is not None else None
    return MotionView(m, r, frames, float(m.fps), sk, c, P, note)


class MotionMixin:
    """ViewerApp's motion playback (``self.motion``: a :class:`MotionView`, or None)."""

    def _motion_points(self) -> np.ndarray:
        """Points the camera frames: the robot's root path and the source's figures (k, 3)."""
        mv = self.motion
        step = max(1, len(mv.frames) // 40)
        P = _frame_points(self.robot, mv.frames[::step]).reshape(-1, 3)
        if mv.source_points is not None:
            P = np.vstack([P, mv.source_points[::step].reshape(-1, 3)])
        return P

    def _build_motion(self, sc, size: float) -> None:
        from .draw import _Skeleton

        self._source_skel = None
        mv = self.motion
        if mv.source_points is None:
            return
        self._source_skel = _Skeleton(sc, "/source/skeleton", mv.skeleton, size, link_color=_SOURCE_LINK_COLOR,
                                      joint_color=_SOURCE_JOINT_COLOR, axes=False)

    def _redraw_motion(self) -> None:
        if self._source_skel is not None:
            self._source_skel.bones.update(self.motion.source_points[self.clip_frame])

    def set_motion_frame(self, frame: int) -> None:
        """Pause and show frame ``frame`` of the motion (and of its source)."""
        with self._lock:
            n = len(self.motion.frames)
            if not 0 <= int(frame) < n:
                raise ViewerError(f"frame {frame} is outside the motion's 0..{n - 1}")
            self._pause()
            self._show_motion_frame(int(frame))
            if self._gui.get("frame") is not None:
                self._sync(self._gui["frame"], self.clip_frame)

    def _show_motion_frame(self, f: int) -> None:
        self.clip_frame = f
        self._clip_pos = float(f)
        self.q = self.motion.frames[f].copy()
        self._redraw()

    def _tick_motion(self, dt: float) -> None:
        n = len(self.motion.frames)
        self._clip_pos = (getattr(self, "_clip_pos", float(self.clip_frame)) + self.clip_speed * dt * self.motion.fps) % n
        self._show_motion_frame(int(self._clip_pos))
        if self._gui.get("frame") is not None:
            self._sync(self._gui["frame"], self.clip_frame)

    def _build_motion_gui(self, gui) -> None:
        mv = self.motion
        with gui.add_folder("Motion"):
            gui.add_markdown(f"{len(mv.frames)} frames at {mv.fps:.1f} fps on `{self.robot.name}`; {mv.note}.")
            h = gui.add_checkbox("play", self.playing)
            self._gui["play"] = h
            h.on_update(self._guarded(lambda v: setattr(self, "playing", bool(v))))
            h = gui.add_slider("frame", 0, max(len(mv.frames) - 1, 1), 1, 0)
            self._gui["frame"] = h

            def seek(v):
                self._pause()
                self._show_motion_frame(min(int(v), len(mv.frames) - 1))

            h.on_update(self._guarded(seek))
            h = gui.add_slider("speed", 0.1, 3.0, 0.1, 1.0)
            h.on_update(self._guarded(lambda v: setattr(self, "clip_speed", float(v))))
