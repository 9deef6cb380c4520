"""correct_clip: the per-frame solve with a bounded correction step, and its :class:`ClipReport`.

The method is described in the package docstring (:mod:`invkin.animation`).
"""
from __future__ import annotations

import math
import sys
from dataclasses import dataclass, replace

import numpy as np

from .._checks import count
from ..errors import GoalError, ModelError
from ..goals import Position
from ..model.bvh import Clip
from .contacts import _detect, _need_fps, _plant_params, _up_arg, detect_up_axis, foot_sliding
from .goals import Contact, FootPlant, Reach, _opt_finite, _opt_positive
from .skeleton import _chain_cols, _chain_joints, _clip_node, _limb_length, _robot_for, _skeleton_scale, _track
from .targets import _default_blend, _plant_targets, _raised_cos, _reach_targets

#: Joint weight of the channels a frame's goals may not move (see the package docstring).
FROZEN_WEIGHT = 1e9
#: Default correction speed bound [rad/s]: max_step = this * frame_time (5 deg/frame at 120 fps),
#: capped at MAX_STEP_CAP per frame.
DEFAULT_MAX_SPEED = math.radians(600.0)
MAX_STEP_CAP = math.radians(20.0)
#: Pins are kept within (1 − REACH_MARGIN) × the chain's length of its top joint (a straight leg
#: is a singular pose: joint speeds blow up near it).
REACH_MARGIN = 0.005


@dataclass(frozen=True, eq=False)
class ClipReport:
    """What :func:`correct_clip` did.

    Per frame (arrays of length n_frames):
        status: "free" (no goal active), "ok" (every active goal within tolerance), "clipped"
            (the max_step bound bound), "missed" (a goal not met: out of reach or not converged).
        error: largest distance of an active goal frame from its target [units] (NaN if none).
        step: largest change of the correction over the channels [rad] (≤ max_step).
        raw_step: the same before the bound was applied [rad].
        joint_jump: largest change of any rotation channel of the corrected clip from the
            previous frame [rad] (angle wrap ignored; 0 for frame 0).

    Summaries:
        contacts: {foot: (Contact, ...)}; floor: {foot: height}; up: "x", "y", "z" or None.
        sliding_before / sliding_after: {foot: mean horizontal foot speed over its contact
            frames [units/s]} on the original and the corrected clip (:func:`foot_sliding`).
        pins: {foot: ((3,) pin position per contact, ...)} (after the reach/floor adjustment;
            with ``FootPlant.lift`` the height on a frame is the larger of the pin's and the
            original foot's).
        pin_error: {foot: largest distance of the foot from its contact target over the contact
            frames [units]}.
        max_step: the bound used [rad/frame]; tolerance: the goals' position tolerance [units].
        max_joint_jump / max_joint_jump_original: largest ``joint_jump`` of the corrected / the
            original clip [rad].
        discontinuities: ((frame, raw_step [rad]), ...) where the bound bound.
    """

    status: tuple
    error: np.ndarray
    step: np.ndarray
    raw_step: np.ndarray
    joint_jump: np.ndarray
    contacts: dict
    floor: dict
    up: str | None
    sliding_before: dict
    sliding_after: dict
    pins: dict
    pin_error: dict
    max_step: float
    tolerance: float
    max_joint_jump: float
    max_joint_jump_original: float
    discontinuities: tuple
    iterations: int = 0
    time: float = 0.0

    @property
    def n_frames(self) -> int:
        return len(self.status)

    def count(self, status: str) -> int:
        return sum(1 for s in self.status if s == status)

    def summary(self) -> str:
        """A few lines for humans."""
        n = self.n_frames
        deg = math.degrees
        lines = [f"{n} frames: {self.count('ok')} ok, {self.count('clipped')} clipped, "
                 f"{self.count('missed')} missed, {self.count('free')} free; max correction step "
                 f"{deg(float(np.max(self.step, initial=0))):.2f} deg/frame (bound {deg(self.max_step):.2f}); "
                 f"max joint jump {deg(self.max_joint_jump):.2f} deg (original "
                 f"{deg(self.max_joint_jump_original):.2f})"]
        for foot in self.sliding_before:
            lines.append(f"{foot}: {len(self.contacts.get(foot, ()))} contacts, floor {self.floor[foot]:.4g}, sliding "
                         f"{self.sliding_before[foot]:.4g} -> {self.sliding_after[foot]:.4g} units/s, pin error max "
                         f"{self.pin_error[foot]:.3g}")
        if self.discontinuities:
            fr = ", ".join(str(f) for f, _ in self.discontinuities[:8])
            lines.append(f"bound binds at {len(self.discontinuities)} frame(s): {fr}"
                         f"{' ...' if len(self.discontinuities) > 8 else ''}")
        return "\n".join(lines)


def _wrap(a):
    return (a + math.pi) % (2.0 * math.pi) - math.pi


def _progress(progress, n):
    """A per-frame callback (and a closer) for ``progress``."""
    if callable(progress):
        return (lambda i: progress(i, n)), (lambda: None)
    if progress:
        try:
            from tqdm import tqdm
        except ImportError:  # pragma: no cover - tqdm is optional
            return (lambda i: None), (lambda: None)
        bar = tqdm(total=n, file=sys.stderr, unit="frame", desc="correcting", leave=False, mininterval=0.2)
        return (lambda i: bar.update(1)), bar.close
    return (lambda i: None), (lambda: None)


def correct_clip(robot, clip: Clip, goals, *, up=None, floor=None, max_step=None, position_tolerance=None,
                 max_iterations: int = 60, progress=False):
    """Correct ``clip`` with per-frame IK goals: ``(new_clip, report)``.

    Args:
        robot: the clip's skeleton (as returned by :func:`read_bvh`), or None to build it.
        clip: the motion; never modified (the result is ``dataclasses.replace(clip, frames=...)``).
        goals: a :class:`FootPlant` / :class:`Reach` or a list of them.
        up: "y" or "z" (default: detected from the feet, :func:`detect_up_axis`; only needed with
            FootPlant goals).
        floor: floor height for every FootPlant that does not set its own (see FootPlant.floor).
        max_step: bound on the per-frame change of the correction [rad per frame] (default
            600 deg/s × frame_time, at most 20 deg).
        position_tolerance: goal tolerance [clip units] (default 1e-6 × the skeleton's size).
        max_iterations: LM iterations per frame.
        progress: True for a tqdm bar on stderr, or a callable ``progress(i, n_frames)``.

    Returns the corrected clip and a :class:`ClipReport`. See :mod:`invkin.animation` for the method.
    """
    import time

    from ..solve import solve

    t0 = time.perf_counter()
    robot = _robot_for(robot, clip)
    if isinstance(goals, (FootPlant, Reach)):
        goals = [goals]
    try:
        goals = list(goals)
    except TypeError:
        raise GoalError(f"goals: expected FootPlant/Reach goals or a list of them, got {goals!r}") from None
    if not goals:
        raise GoalError("goals: expected at least one FootPlant or Reach goal, got none")
    for g in goals:
        if not isinstance(g, (FootPlant, Reach)):
            raise GoalError(f"goals: expected FootPlant or Reach objects, got {g!r:.120}")
    F = clip.n_frames
    if F == 0:
        raise ModelError("correct_clip: the clip has no frames")
    floor = _opt_finite(floor, "floor")
    if max_step is None:
        max_step = min(DEFAULT_MAX_SPEED * clip.frame_time, MAX_STEP_CAP) if clip.frame_time > 0 else MAX_STEP_CAP
    max_step = _opt_positive(max_step, "max_step [rad per frame]")
    scale = _skeleton_scale(clip)
    tol = _opt_positive(position_tolerance, "position_tolerance") or 1e-6 * scale
    max_iterations = count("max_iterations", max_iterations, 1)

    plants = [g for g in goals if isinstance(g, FootPlant)]
    feet = [p.frame for p in plants]
    if len(set(feet)) != len(feet):
        raise GoalError(f"goals: two FootPlant goals on the same frame {feet}")
    up = _up_arg(up)
    if plants:
        _need_fps(clip, "correct_clip (foot planting)")
        for p in plants:
            _clip_node(clip, p.frame, f"FootPlant({p.frame!r})")
        if up is None:
            up = detect_up_axis(robot, clip, feet)

    # per goal: frame name, weight, chain columns, (F, 3) targets with NaN where inactive
    compiled = []
    contacts, floors, pins_of, plant_T = {}, {}, {}, {}
    P_orig = {}
    for g in goals:
        kind = "FootPlant" if isinstance(g, FootPlant) else "Reach"
        what = f"{kind}({g.frame!r})"
        joints = _chain_joints(clip, g.frame, g.chain, what)
        cols = _chain_cols(clip, joints)
        P = P_orig.get(g.frame)
        if P is None:
            P = P_orig[g.frame] = _track(robot, clip.frames, g.frame)
        if isinstance(g, FootPlant):
            fl, h_on, v_on = _plant_params(robot, clip, g, up, floor, P)
            if g.contacts is not None:
                cs = [c for c in g.contacts if c.start < F]
                cs = [Contact(c.foot, c.start, min(c.stop, F)) for c in cs]
            else:
                cs = _detect(P, clip, up, fl, h_on, v_on, g.hysteresis, g.min_duration, g.frame)
            B = g.blend if g.blend is not None else _default_blend(clip, 0.1)
            top = clip.names[joints[-1]]
            tops = P_orig.get(top)
            if tops is None:
                tops = P_orig[top] = _track(robot, clip.frames, top)
            radius = (1.0 - REACH_MARGIN) * (_limb_length(clip, g.frame) - _limb_length(clip, top))
            T, pins = _plant_targets(P, cs, g.pin, up, fl, B, tops, radius, g.lift)
            contacts[g.frame] = tuple(cs)
            floors[g.frame] = fl
            pins_of[g.frame] = pins
            plant_T[g.frame] = T
        else:
            T = _reach_targets(g, clip, P)
            B = g.blend if g.blend is not None else _default_blend(clip, 0.25)
        compiled.append((g.frame, g.weight, cols, T, max(B, 1)))

    dof = clip.dof
    rot = clip.rotation_mask
    q_orig = clip.frames
    out = np.empty_like(q_orig)
    corr = np.zeros(dof)
    err = np.full(F, np.nan)
    step = np.zeros(F)
    raw_step = np.zeros(F)
    status = []
    discont = []
    iters = 0
    jw = np.full(dof, FROZEN_WEIGHT)
    release = [None] * len(compiled)  # per goal: (first frame, its chain's correction then, frames)
    tick, close = _progress(progress, F)
    try:
        for i in range(F):
            q0 = q_orig[i]
            act = []
            desired = np.zeros(dof)  # the correction this frame asks for
            for k, (name, w, cols, T, B) in enumerate(compiled):
                if not np.isnan(T[i, 0]):
                    act.append((name, w, cols, T[i]))
                    release[k] = None
                    continue
                if i > 0 and not np.isnan(T[i - 1, 0]):  # the goal just ended: release its chain
                    release[k] = (i, corr[cols].copy(), B)
                if release[k] is not None:
                    i0, c0, n = release[k]
                    if i - i0 < n:
                        desired[cols] += _raised_cos(i - i0 + 1, n) * c0
                    else:
                        release[k] = None
            if act:
                cols_all = np.unique(np.concatenate([c for _, _, c, _ in act]))
                start = q0.copy()
                start[cols_all] += corr[cols_all]
                jw[:] = FROZEN_WEIGHT
                jw[cols_all] = 1.0
                res = solve(robot, [Position(name, t, weight=w) for name, w, _, t in act], q0=start,
                            method="lm", position_tolerance=tol, timeout=None, max_iterations=int(max_iterations),
                            restarts=False, joint_weights=jw)
                iters += res.iterations
                desired[cols_all] = _wrap(res.q[cols_all] - q0[cols_all])
            d = desired - corr
            d[rot] = _wrap(d[rot])
            raw = float(np.max(np.abs(d)))
            clipped = raw > max_step * (1.0 + 1e-12)
            if clipped:
                d *= max_step / raw
                discont.append((i, raw))
            if clipped:
                corr = corr + d
                corr[rot] = _wrap(corr[rot])
            else:
                corr = desired  # exactly (zero where nothing is corrected: the original bits)
            q = q0 + corr
            out[i] = q
            step[i] = min(raw, max_step)
            raw_step[i] = raw
            if act:
                e = max(float(np.linalg.norm(robot.fk(q, name)[:3, 3] - t)) for name, _, _, t in act)
                err[i] = e
                status.append("clipped" if clipped else ("ok" if e <= tol * (1 + 1e-9) else "missed"))
            else:
                status.append("clipped" if clipped else "free")
            tick(i)
    finally:
        close()

    new_clip = replace(clip, frames=out)
    jump = np.zeros(F)
    jump_orig = np.zeros(F)
    if F > 1:
        jump[1:] = np.max(np.abs(_wrap(np.diff(out[:, rot], axis=0))), axis=1, initial=0.0)
        jump_orig[1:] = np.max(np.abs(_wrap(np.diff(q_orig[:, rot], axis=0))), axis=1, initial=0.0)
    slide_before, slide_after, pin_err = {}, {}, {}
    for p in plants:
        cs = contacts[p.frame]
        Pn = _track(robot, out, p.frame)
        slide_before[p.frame] = foot_sliding(P_orig[p.frame], cs, clip.frame_time, up)
        slide_after[p.frame] = foot_sliding(Pn, cs, clip.frame_time, up)
        pe = 0.0
        for c in cs:
            pe = max(pe, float(np.max(np.linalg.norm(Pn[c.start:c.stop] - plant_T[p.frame][c.start:c.stop], axis=1))))
        pin_err[p.frame] = pe
    report = ClipReport(status=tuple(status), error=err, step=step, raw_step=raw_step, joint_jump=jump,
                        contacts=contacts, floor=floors, up=up, sliding_before=slide_before,
                        sliding_after=slide_after, pins={f: tuple(v) for f, v in pins_of.items()},
                        pin_error=pin_err, max_step=float(max_step), tolerance=float(tol),
                        max_joint_jump=float(jump.max(initial=0.0)),
                        max_joint_jump_original=float(jump_orig.max(initial=0.0)),
                        discontinuities=tuple(discont), iterations=int(iters), time=time.perf_counter() - t0)
    return new_clip, report
