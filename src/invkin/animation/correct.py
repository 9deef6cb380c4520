"""correct_clip: the per-frame solve with a bounded correction step, and its :class:`ClipReport`.

The method is described in the package docstring (:mod:`invkin.animation`).
"""
from __future__ import annotations

import math
import sys
import warnings
from dataclasses import dataclass, replace

import numpy as np

from .._checks import count
from ..errors import GoalError
from ..goals import Orientation, Position
from ..spatial import so3_exp, so3_log
from ..model.bvh import Clip, need_frames
from .contacts import (NoContactWarning, _detect, _need_fps, _plant_params, _up_arg, check_up_axis,
                       detect_up_axis, foot_sliding, foot_toe)
from .goals import Contact, FootPlant, Reach, _opt_finite, _opt_positive
from .skeleton import _chain_cols, _chain_joints, _clip_node, _limb_length, _robot_for, _skeleton_scale, _track
from .targets import _default_blend, _plant_targets, _raised_cos, SOFT_REACH, _reach_targets, _soft_radius, _soft_reach

#: Joint weight of the channels a frame's goals may not move (see the package docstring).
FROZEN_WEIGHT = 1e9
#: Default correction speed bound [rad/s]: max_step = this * frame_time (5 deg/frame at 120 fps),
#: capped at MAX_STEP_CAP per frame.
DEFAULT_MAX_SPEED = math.radians(600.0)
MAX_STEP_CAP = math.radians(20.0)


@dataclass(frozen=True, eq=False)
class ClipReport:
    """What :func:`correct_clip` did.

    Per frame (arrays of length n_frames):
        status: "free" (no goal active), "ok" (every active goal within tolerance), "clipped"
            (the max_step bound bound; a goal it held back is met on the frame that ends the run
            of such frames), "missed" (a goal not met: out of reach, not converged, or held back
            by the bound until the goal ended or the clip did).
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


def _runs(mask):
    """[start, stop) runs of True in a boolean array."""
    d = np.diff(np.concatenate([[0], mask.astype(np.int8), [0]]))
    return list(zip(np.flatnonzero(d == 1), np.flatnonzero(d == -1)))


def _foot_targets(robot, clip, g, toe, det, tops, up, B):
    """Targets of a foot's heel (the FootPlant frame) and toe: {frame: (T, pins)}, and the foot's
    orientation lock (F, 3, 3) (NaN where none).

    While heel and toe are both down (flat) the part that touched first (the anchor) stays pinned and
    the foot keeps its orientation of the flat phase's first frame; the other part is implied (NaN
    target). A toe that stays down after the heel lifts is pinned where the locked foot put it, so
    the hand-over is seamless. Blends of one part are dropped where the other part is in contact
    (one goal per foot there), and the toe's where both blend.
    """
    F = clip.n_frames
    heel = g.frame
    P_h, fl_h, _, _, cs_h = det[heel]
    lock = np.full((F, 3, 3), np.nan)

    def targets(frame, given=None):
        P, fl, _, _, cs = det[frame]
        top = _limb_top(clip, heel, g)
        L = _limb_length(clip, frame) - _limb_length(clip, top)
        d0 = _soft_radius(np.linalg.norm(P - tops, axis=1), L, SOFT_REACH * L)
        T, pins = _plant_targets(P, cs, g.pin, up, fl, B, tops, d0, g.lift, given)
        return _soft_reach(T, tops, L, d0), pins

    T_h, pins_h = targets(heel)
    if toe is None:
        return {heel: (T_h, pins_h)}, None
    P_t, fl_t, _, _, cs_t = det[toe]
    in_h = np.zeros(F, bool)
    in_t = np.zeros(F, bool)
    start_h = np.full(F, -1)
    start_t = np.full(F, -1)
    for c in cs_h:
        in_h[c.start:c.stop] = True
        start_h[c.start:c.stop] = c.start
    for c in cs_t:
        in_t[c.start:c.stop] = True
        start_t[c.start:c.stop] = c.start
    R_foot = robot.fk(np.ascontiguousarray(clip.frames), heel)[:, :3, :3]
    given = [None] * len(cs_t)
    toe_anchor = []
    for a, b in _runs(in_h & in_t):
        lock[a:b] = R_foot[a]
        for f in range(a, min(b, a + B)):  # the lock eases in (no angular-velocity step at its onset)
            w = 1.0 - _raised_cos(f - a + 1, B)
            lock[f] = R_foot[f] @ so3_exp(w * so3_log(R_foot[f].T @ R_foot[a]))
        if start_t[a] < start_h[a]:
            toe_anchor.append((a, b))
            continue
        # heel anchors: the toe's pin follows from the heel's pin and the locked foot
        o = R_foot[a].T @ (P_t[a] - P_h[a])
        k = next(j for j, c in enumerate(cs_t) if c.start <= a < c.stop)
        given[k] = T_h[b - 1] + R_foot[a] @ o  # where the locked foot leaves the toe when the heel lifts
    T_t, pins_t = targets(toe, given)
    for a, b in _runs(in_h & in_t):
        if (a, b) in toe_anchor:
            T_h[a:b] = np.nan
        else:
            T_t[a:b] = np.nan
    both = ~np.isnan(T_h[:, 0]) & ~np.isnan(T_t[:, 0])
    T_t[both & in_h & ~in_t] = np.nan
    T_h[both & in_t & ~in_h] = np.nan
    prev = "heel"
    for i in range(F):  # both blending: the part that was active on the previous frame goes on
        if both[i] and not in_h[i] and not in_t[i]:
            (T_t if prev == "heel" else T_h)[i] = np.nan
        if not np.isnan(T_t[i, 0]) and np.isnan(T_h[i, 0]):
            prev = "toe"
        else:
            prev = "heel"
    # wherever the heel is the foot's goal, the foot keeps its captured orientation (so the lock of a
    # flat phase starts from where the foot is, and the toe does not swing with a corrected shin)
    free = np.isnan(lock[:, 0, 0]) & ~np.isnan(T_h[:, 0])
    lock[free] = R_foot[free]
    return {heel: (T_h, pins_h), toe: (T_t, pins_t)}, lock


def _limb_top(clip, heel, g):
    return clip.names[_chain_joints(clip, heel, g.chain, f"FootPlant({heel!r})")[-1]]


def _unmet_clipped_runs_missed(status: list, err: np.ndarray, tol: float) -> None:
    """A run of "clipped" frames whose goals are off target is only a delay when a frame with the
    goals met ends it; a run that the goal's end (or the clip's) ends instead never met them:
    its frames are "missed" (a max_step too small for the motion)."""
    off = [s == "clipped" and err[i] > tol * (1 + 1e-9) for i, s in enumerate(status)]
    i, F = 0, len(status)
    while i < F:
        if not off[i]:
            i += 1
            continue
        k = i
        while k < F and off[k]:
            k += 1
        if k == F or status[k] not in ("ok", "clipped") or np.isnan(err[k]):
            status[i:k] = ["missed"] * (k - i)
        i = k


def correct_clip(robot, clip: Clip, goals, *, up=None, floor=None, max_step=None, position_tolerance=None,
                 max_iterations: int = 60, progress=False, world=None, self_collision: bool = False,
                 margin: float = 0.005):
    """Correct ``clip`` with per-frame IK goals: ``(new_clip, report)``.

    Args:
        robot: the clip's skeleton (as returned by :func:`read_bvh`), or None to build it.
        clip: the motion; never modified (the result is ``dataclasses.replace(clip, frames=...)``).
        goals: a :class:`FootPlant` / :class:`Reach` or a list of them.
        up: "y" or "z" (default: detected from the feet, :func:`detect_up_axis`; only needed with
            FootPlant goals); an InvkinWarning says when the root is not above the feet along it.
        floor: floor height for every FootPlant that does not set its own (see FootPlant.floor).
        max_step: bound on the per-frame change of the correction [rad per frame] (default
            600 deg/s × frame_time, at most 20 deg).
        position_tolerance: goal tolerance [clip units] (default 1e-6 × the skeleton's size).
        max_iterations: LM iterations per frame.
        progress: True for a tqdm bar on stderr, or a callable ``progress(i, n_frames)``.
        world, self_collision, margin: collision distances kept by every frame's solve, as in
            :func:`invkin.solve` (the skeleton needs collision shapes, ``robot.collision``); the
            per-frame bound ``max_step`` may still hold a frame short of the solve's answer.

    Returns the corrected clip and a :class:`ClipReport`. See :mod:`invkin.animation` for the method.
    """
    import time

    from ..solve import _collision_options, solve

    t0 = time.perf_counter()
    _collision_options(world, self_collision, margin)  # bad options fail before any frame
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
    need_frames(clip, "correct_clip")
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
        nodes = {p.frame: _clip_node(clip, p.frame, f"FootPlant({p.frame!r})") for p in plants}
        for p in plants:  # one foot planted twice (the foot and its toe): the two goals fight over the leg
            a = clip.parents[nodes[p.frame]]
            while a >= 0:
                if clip.names[a] in nodes:
                    raise GoalError(f"goals: FootPlant({p.frame!r}) is below FootPlant({clip.names[a]!r}) and would "
                                    f"fight it over the same leg; plant {clip.names[a]!r} alone (a whole foot: its toe "
                                    f"is planted with it, FootPlant({clip.names[a]!r}, toe={p.frame!r}) picks which)")
                a = clip.parents[a]
        if up is None:
            up = detect_up_axis(robot, clip, feet)
        else:
            check_up_axis(robot, clip, feet, up, "correct_clip")

    # per goal: frame name, weight, chain columns, (F, 3) targets with NaN where inactive
    compiled = []
    contacts, floors, pins_of, plant_T = {}, {}, {}, {}
    P_orig = {}

    def track(name):
        P = P_orig.get(name)
        if P is None:
            P = P_orig[name] = _track(robot, clip.frames, name)
        return P

    parts = []  # (frame, plant) of every planted point: heels (the FootPlant frame) and toes
    wanted = {}  # compiled index -> requested targets, where they differ from the solved ones
    for g in goals:
        kind = "FootPlant" if isinstance(g, FootPlant) else "Reach"
        what = f"{kind}({g.frame!r})"
        if isinstance(g, Reach):
            joints = _chain_joints(clip, g.frame, g.chain, what)
            P = track(g.frame)
            B = g.blend if g.blend is not None else _default_blend(clip, 0.25)
            top = clip.names[joints[-1]]
            L = _limb_length(clip, g.frame) - _limb_length(clip, top)
            T = _reach_targets(g, clip, P, track(top), L)
            wanted[len(compiled)] = _reach_targets(g, clip, P)  # errors are measured against the request
            compiled.append((g.frame, g.weight, _chain_cols(clip, joints), T, max(B, 1), None))
            continue
        toe = foot_toe(clip, g)
        B = g.blend if g.blend is not None else _default_blend(clip, 0.1)
        heel_joints = _chain_joints(clip, g.frame, g.chain, what)
        if toe is not None:  # every goal of a whole foot moves hip, knee and ankle
            chain = g.chain + 1 if isinstance(g.chain, int) else tuple(g.chain) + (g.frame,)
            foot_joints = _chain_joints(clip, toe, chain, f"{what}.toe")
        else:
            foot_joints = heel_joints
        top = clip.names[heel_joints[-1]]
        tops = track(top)
        det = {}
        for frame in (g.frame, toe):
            if frame is None:
                continue
            P = track(frame)
            fl, h_on, v_on = _plant_params(robot, clip, g, up, floor, P, frame)
            if g.contacts is not None:
                cs = [Contact(frame, c.start, min(c.stop, F)) for c in g.contacts if c.start < F] \
                    if frame == g.frame else []  # explicit contacts are the heel's
            else:
                cs = _detect(P, clip, up, fl, h_on, v_on, g.hysteresis, g.min_duration, frame)
            det[frame] = (P, fl, h_on, v_on, cs)
        found = sum(len(v[4]) for v in det.values())
        T_of, lock = _foot_targets(robot, clip, g, toe, det, tops, up, B)
        for frame, (P, fl, h_on, v_on, cs) in det.items():
            T, pins = T_of[frame]
            contacts[frame] = tuple(cs)
            floors[frame] = fl
            pins_of[frame] = pins
            plant_T[frame] = T
            parts.append((frame, g, h_on, v_on))
            # the heel alone moves hip and knee (the ankle keeps the captured foot); the lock and the
            # toe move the ankle too
            cols = _chain_cols(clip, heel_joints if frame == g.frame else foot_joints)
            compiled.append((frame, g.weight, cols, T, max(B, 1),
                             (lock, _chain_cols(clip, foot_joints)) if frame == g.frame and lock is not None
                             else None))
        if not found:
            _, h_on, v_on = _plant_params(robot, clip, g, up, floor, track(g.frame))
            warnings.warn(NoContactWarning(
                f"FootPlant({g.frame!r}): no contact found{' (toe ' + repr(toe) + ' too)' if toe else ''} with "
                f"height_threshold {h_on:.4g} and speed_threshold {v_on:.4g} [clip units, /s] above floor "
                f"{floors[g.frame]:.4g} (up {up!r}); the foot is left as it is. Raise the thresholds, check the "
                f"up axis, or pass contacts explicitly"), stacklevel=2)

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
            locks = []
            for k, (name, w, cols, T, B, lk) in enumerate(compiled):
                if lk is not None and not np.isnan(lk[0][i, 0, 0]):
                    locks.append(Orientation(name, lk[0][i], weight=w))
                    cols = lk[1]
                    if np.isnan(T[i, 0]):  # the toe is the anchor: the lock still needs the chain
                        act.append((None, w, cols, None, None))
                        release[k] = None
                        continue
                if not np.isnan(T[i, 0]):
                    act.append((name, w, cols, T[i], wanted[k][i] if k in wanted else T[i]))
                    release[k] = None
                    continue
                if i > 0 and not np.isnan(T[i - 1, 0]):  # the goal just ended: release its chain
                    release[k] = (i, corr[cols].copy(), B)
                    for k2, other in enumerate(compiled):  # one release per column (heel and toe share)
                        if k2 != k and np.intersect1d(other[2], cols).size:
                            release[k2] = None
                if release[k] is not None:
                    i0, c0, n = release[k]
                    if i - i0 < n:
                        desired[cols] += _raised_cos(i - i0 + 1, n) * c0
                    else:
                        release[k] = None
            if act:
                cols_all = np.unique(np.concatenate([c for _, _, c, _, _ in act]))
                start = q0.copy()
                start[cols_all] += corr[cols_all]
                jw[:] = FROZEN_WEIGHT
                jw[cols_all] = 1.0
                res = solve(robot, [Position(name, t, weight=w) for name, w, _, t, _ in act if name is not None] + locks,
                            q0=start,
                            method="lm", position_tolerance=tol, timeout=None, max_iterations=int(max_iterations),
                            restarts=False, joint_weights=jw, world=world, self_collision=self_collision, margin=margin)
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
                e = max((float(np.linalg.norm(robot.fk(q, name)[:3, 3] - t)) for name, _, _, _, t in act
                         if name is not None), default=0.0)
                err[i] = e
                status.append("clipped" if clipped else ("ok" if e <= tol * (1 + 1e-9) else "missed"))
            else:
                status.append("clipped" if clipped else "free")
            tick(i)
    finally:
        close()

    _unmet_clipped_runs_missed(status, err, tol)
    new_clip = replace(clip, frames=out)
    jump = np.zeros(F)
    jump_orig = np.zeros(F)
    if F > 1:
        jump[1:] = np.max(np.abs(_wrap(np.diff(out[:, rot], axis=0))), axis=1, initial=0.0)
        jump_orig[1:] = np.max(np.abs(_wrap(np.diff(q_orig[:, rot], axis=0))), axis=1, initial=0.0)
    slide_before, slide_after, pin_err = {}, {}, {}
    for frame, _, _, _ in parts:
        cs = contacts[frame]
        Pn = _track(robot, out, frame)
        slide_before[frame] = foot_sliding(P_orig[frame], cs, clip.frame_time, up)
        slide_after[frame] = foot_sliding(Pn, cs, clip.frame_time, up)
        pe = 0.0
        for c in cs:
            pe = max(pe, float(np.max(np.linalg.norm(Pn[c.start:c.stop] - plant_T[frame][c.start:c.stop], axis=1))))
        pin_err[frame] = pe
    report = ClipReport(status=tuple(status), error=err, step=step, raw_step=raw_step, joint_jump=jump,
                        contacts=contacts, floor=floors, up=up, sliding_before=slide_before,
                        sliding_after=slide_after, pins={f: tuple(v) for f, v in pins_of.items()},
                        pin_error=pin_err, max_step=float(max_step), tolerance=float(tol),
                        max_joint_jump=float(jump.max(initial=0.0)),
                        max_joint_jump_original=float(jump_orig.max(initial=0.0)),
                        discontinuities=tuple(discont), iterations=int(iters), time=time.perf_counter() - t0)
    return new_clip, report
