"""Clip correction: animate with FK, correct effector positions with IK (SEEDS.md §1).

:func:`correct_clip` takes a motion (:class:`~invkin.Clip`) and goals that may vary per frame and
returns a corrected copy of the clip plus a :class:`ClipReport`. Two kinds of goal:

* :class:`FootPlant` — foot planting. Contacts are detected on the original motion
  (:func:`detect_contacts`): the foot frame is *near the floor* (height − floor below
  ``height_threshold``) **and** *slow* (3-D speed of its path smoothed over ±25 ms below
  ``speed_threshold``); the contact ends only when the height or the speed exceeds ``hysteresis`` ×
  its threshold; contacts shorter than ``min_duration`` are dropped. While in contact the foot is
  pinned at its position at the contact's start (``pin="start"``) or at the contact's mean position
  (``pin="mean"``): its horizontal position is held, and its height is the pin's — or, with
  ``lift=True`` (default), the original foot's where that is higher (the heel rising before
  toe-off). The pin is raised to the floor if below it, then moved the least needed so that the leg
  can reach it on every frame of the contact: within (1 − REACH_MARGIN) × the chain's length of the
  chain's top joint (the hip), whose path comes from the original motion — horizontally if that
  suffices (the foot keeps its height), else in 3-D. (Mocap legs are nearly straight at heel strike
  and toe-off; without this, a pin at the start position is out of reach late in the stance.) Around
  each contact the pin's offset blends in/out over ``blend`` frames (a raised cosine), so that
  setting and releasing a pin does not pop; blends never push a foot below the floor.
* :class:`Reach` — a frame (a hand) follows a moving target over a frame range: an array of
  positions, one per frame of the range (or per frame of the clip), or a callable
  ``targets(i) -> (3,)`` of the frame index ``i`` (time is ``i * clip.frame_time``). The target
  offset blends in before the range and out after it over ``blend`` frames.

When a goal's last blended frame has passed, whatever correction its chain still holds (a
redundant arm may reach the original hand position with other joint angles) fades to zero in
joint space over another ``blend`` frames (a raised cosine), so the clip returns to the captured
motion without a jump.

Units are the clip's (BVH files: whatever length unit the file uses; speeds are units/s).

How a frame is solved. Each goal moves only its *chain*: the rotation channels of the ``chain``
BVH joints above its frame (default 2: hip and knee for a foot, shoulder and elbow for a hand),
or the joints named in ``chain``. Frame ``i`` is solved with :func:`invkin.solve` (Levenberg–
Marquardt, ``restarts=False``, deterministic iteration budget) for every goal active at ``i``,
on the whole skeleton but with ``joint_weights`` of 1 on the active chains and 1e9 on every other
channel, so that only the chains move; the other channels are then copied back from the
original frame exactly, so the rest of the pose — the root translation included — is the
original to the last bit. The start configuration is the original frame plus the previous
frame's correction (temporal continuity: the solver continues from where the last frame ended
and stays on the same branch; no random restarts).

Continuity guarantees. Write ``c[i] = q_corrected[i] − q_original[i]`` (the correction, rotation
channels wrapped into (−π, π]). Its change per frame is bounded: ``max |c[i] − c[i−1]| ≤ max_step``
over every channel (with ``c[−1] = 0``); a larger step is scaled down uniformly (direction kept)
and the frame is flagged ``clipped`` (the bound binds; the goal is then met a few frames later).
The bound applies to the correction, not to the clip's own motion (mocap may hold jumps — a
reference pose in frame 0, angle wrap-arounds — that must pass unchanged). Frames where the
unbounded solution would have jumped are reported in :attr:`ClipReport.discontinuities` with
the size of the jump (a branch flip or an unreachable target shows up there).
"""
from __future__ import annotations

import math
import sys
from dataclasses import dataclass, replace

import numpy as np

from .errors import FrameError, GoalError, ModelError, closest_names
from .goals import Position
from .model.bvh import Clip, skeleton_robot

__all__ = ["FootPlant", "Reach", "Contact", "ClipReport", "correct_clip", "detect_contacts", "detect_up_axis",
           "foot_sliding"]

#: Joint weight of the channels a frame's goals may not move (see the module docstring).
FROZEN_WEIGHT = 1e9
#: Default correction speed bound [rad/s]: max_step = this * frame_time (5 deg/frame at 120 fps),
#: capped at MAX_STEP_CAP per frame.
DEFAULT_MAX_SPEED = math.radians(600.0)
MAX_STEP_CAP = math.radians(20.0)
#: Pins are kept within (1 − REACH_MARGIN) × the chain's length of its top joint (a straight leg
#: is a singular pose: joint speeds blow up near it).
REACH_MARGIN = 0.005
_UP = {"x": 0, "y": 1, "z": 2}


# ------------------------------------------------------------------------------------- goals
def _opt_positive(v, what):
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating)) or not (
            math.isfinite(v) and v > 0):
        raise GoalError(f"{what}: expected a finite number > 0 or None, got {v!r}")
    return float(v)


def _chain_arg(chain, what):
    if isinstance(chain, (int, np.integer)) and not isinstance(chain, bool):
        if chain < 1:
            raise GoalError(f"{what}.chain: expected a number of joints >= 1 or joint names, got {chain!r}")
        return int(chain)
    if isinstance(chain, str):
        return (chain,)
    try:
        names = tuple(chain)
    except TypeError:
        raise GoalError(f"{what}.chain: expected a number of joints or a sequence of joint names, "
                        f"got {chain!r}") from None
    if not names or not all(isinstance(n, str) for n in names):
        raise GoalError(f"{what}.chain: expected joint names (str), got {chain!r}")
    return names


def _frame_arg(frame, what):
    if not isinstance(frame, str) or not frame:
        raise GoalError(f"{what}: frame must be a frame name (str), got {frame!r}")
    return frame


def _blend_arg(blend, what):
    if blend is None:
        return None
    if isinstance(blend, bool) or not isinstance(blend, (int, np.integer)) or blend < 0:
        raise GoalError(f"{what}.blend: expected a number of frames >= 0 or None, got {blend!r}")
    return int(blend)


def _weight_arg(w, what):
    try:
        w = float(w)
    except (TypeError, ValueError):
        raise GoalError(f"{what}.weight: expected a number, got {w!r}") from None
    if not (math.isfinite(w) and w > 0):
        raise GoalError(f"{what}.weight: expected a finite number > 0, got {w!r}")
    return w


@dataclass(frozen=True)
class Contact:
    """A foot contact: frames ``start`` .. ``stop - 1`` (``stop`` exclusive, like ``range``)."""

    foot: str
    start: int
    stop: int

    @property
    def frames(self) -> range:
        return range(self.start, self.stop)

    def __len__(self) -> int:
        return self.stop - self.start


@dataclass(frozen=True)
class FootPlant:
    """Pin ``frame`` (a foot) while it touches the floor.

    Attributes:
        frame: the foot frame (a BVH joint or End Site name), e.g. ``"LeftFoot"``.
        chain: how many BVH joints above the frame may move (2: hip and knee), or their names.
        pin: ``"start"`` (the position at the contact's first frame) or ``"mean"``.
        height_threshold: contact when height − floor is below this [clip units]; default
            0.08 × the limb length (sum of the bone lengths from the root to the foot).
        speed_threshold: … and the smoothed speed is below this [units/s]; default 0.2 × the
            limb length per second.
        hysteresis: the contact ends when height or speed exceeds this × its threshold (≥ 1).
        min_duration: shorter contacts are dropped [s].
        floor: height of the foot frame when the foot stands on the floor [clip units] (for an
            ankle, the ground plus the ankle's height); default the ``floor_percentile``
            percentile of the frame's heights over the clip (a per-foot estimate).
        floor_percentile: see ``floor``.
        blend: frames over which the pin's offset fades in/out around each contact (default
            0.1 s worth of frames).
        contacts: explicit contacts instead of detection: ``(start, stop)`` pairs (stop
            exclusive) or :class:`Contact` objects.
        lift: True (default): the pinned foot's height follows the original motion where that
            rises above the pin (the heel lifting before toe-off; only the horizontal position
            is pinned then); False: the height is pinned too.
        weight: weight of the position goal.
    """

    frame: str
    chain: int | tuple = 2
    pin: str = "start"
    height_threshold: float | None = None
    speed_threshold: float | None = None
    hysteresis: float = 1.5
    min_duration: float = 0.05
    floor: float | None = None
    floor_percentile: float = 5.0
    blend: int | None = None
    contacts: tuple | None = None
    lift: bool = True
    weight: float = 1.0

    def __post_init__(self):
        what = f"FootPlant({self.frame!r})"
        if not isinstance(self.lift, (bool, np.bool_)):
            raise GoalError(f"{what}.lift: expected True or False, got {self.lift!r}")
        object.__setattr__(self, "frame", _frame_arg(self.frame, "FootPlant"))
        object.__setattr__(self, "chain", _chain_arg(self.chain, what))
        if self.pin not in ("start", "mean"):
            raise GoalError(f"{what}.pin: expected 'start' or 'mean', got {self.pin!r}")
        object.__setattr__(self, "height_threshold", _opt_positive(self.height_threshold, f"{what}.height_threshold"))
        object.__setattr__(self, "speed_threshold", _opt_positive(self.speed_threshold, f"{what}.speed_threshold"))
        h = _opt_positive(self.hysteresis, f"{what}.hysteresis")
        if h is None or h < 1.0:
            raise GoalError(f"{what}.hysteresis: expected a number >= 1, got {self.hysteresis!r}")
        object.__setattr__(self, "hysteresis", h)
        md = self.min_duration
        if isinstance(md, bool) or not isinstance(md, (int, float, np.integer, np.floating)) or not (
                math.isfinite(md) and md >= 0):
            raise GoalError(f"{what}.min_duration: expected a duration >= 0 [s], got {md!r}")
        object.__setattr__(self, "min_duration", float(md))
        if self.floor is not None:
            try:
                fl = float(self.floor)
            except (TypeError, ValueError):
                raise GoalError(f"{what}.floor: expected a number or None, got {self.floor!r}") from None
            if not math.isfinite(fl):
                raise GoalError(f"{what}.floor: expected a finite number, got {self.floor!r}")
            object.__setattr__(self, "floor", fl)
        fp = self.floor_percentile
        if isinstance(fp, bool) or not isinstance(fp, (int, float, np.integer, np.floating)) or not 0 <= fp <= 100:
            raise GoalError(f"{what}.floor_percentile: expected a percentile in [0, 100], got {fp!r}")
        object.__setattr__(self, "blend", _blend_arg(self.blend, what))
        if self.contacts is not None:
            cs = []
            for c in self.contacts:
                if isinstance(c, Contact):
                    s, e = c.start, c.stop
                else:
                    try:
                        s, e = (int(x) for x in c)
                    except (TypeError, ValueError):
                        raise GoalError(f"{what}.contacts: expected (start, stop) pairs, got {c!r}") from None
                if not 0 <= s < e:
                    raise GoalError(f"{what}.contacts: expected 0 <= start < stop, got ({s}, {e})")
                cs.append(Contact(self.frame, s, e))
            cs.sort(key=lambda c: c.start)
            for a, b in zip(cs, cs[1:]):
                if b.start < a.stop:
                    raise GoalError(f"{what}.contacts: ({a.start}, {a.stop}) and ({b.start}, {b.stop}) overlap")
            object.__setattr__(self, "contacts", tuple(cs))
        object.__setattr__(self, "weight", _weight_arg(self.weight, what))


@dataclass(frozen=True)
class Reach:
    """``frame`` (a hand) follows ``targets`` over the frames ``frames``.

    Attributes:
        frame: the effector frame, e.g. ``"RightHand"``.
        targets: (len(frames), 3) or (n_frames, 3) positions [clip units], or a callable
            ``targets(i) -> (3,)`` of the frame index.
        frames: the frame range (a ``range`` with step 1; default every frame).
        chain: BVH joints above the frame that may move (2: shoulder and elbow), or their names.
        blend: frames over which the target's offset fades in before and out after the range
            (default 0.25 s worth of frames).
        weight: weight of the position goal.
    """

    frame: str
    targets: object
    frames: range | None = None
    chain: int | tuple = 2
    blend: int | None = None
    weight: float = 1.0

    def __post_init__(self):
        what = f"Reach({self.frame!r})"
        object.__setattr__(self, "frame", _frame_arg(self.frame, "Reach"))
        if self.frames is not None:
            if not isinstance(self.frames, range) or self.frames.step != 1 or len(self.frames) == 0 \
                    or self.frames.start < 0:
                raise GoalError(f"{what}.frames: expected a non-empty range(start, stop) of frame indices with "
                                f"step 1, got {self.frames!r}")
        if not callable(self.targets):
            try:
                t = np.array(self.targets, dtype=np.float64)
            except (TypeError, ValueError):
                raise GoalError(f"{what}.targets: expected an array (N, 3) or a callable, got "
                                f"{self.targets!r:.100}") from None
            if t.ndim != 2 or t.shape[1] != 3 or t.shape[0] == 0:
                raise GoalError(f"{what}.targets: expected shape (N, 3) (one position per frame), got {t.shape}")
            if not np.all(np.isfinite(t)):
                bad = int(np.argwhere(~np.isfinite(t))[0][0])
                raise GoalError(f"{what}.targets: expected finite positions; row {bad} is {t[bad].tolist()}")
            t.setflags(write=False)
            object.__setattr__(self, "targets", t)
        object.__setattr__(self, "chain", _chain_arg(self.chain, what))
        object.__setattr__(self, "blend", _blend_arg(self.blend, what))
        object.__setattr__(self, "weight", _weight_arg(self.weight, what))


# ------------------------------------------------------------------------------------- report
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


# ------------------------------------------------------------------------------------- helpers
def _robot_for(robot, clip):
    if not isinstance(clip, Clip):
        raise ModelError(f"expected a Clip (from read_bvh), got {type(clip).__name__}")
    if robot is None:
        return skeleton_robot(clip)
    if tuple(robot.joint_names) != clip.channel_names:
        raise ModelError(f"robot {robot.name!r} is not the clip's skeleton: its joints "
                         f"{list(robot.joint_names)[:3]}... differ from the clip's channels "
                         f"{list(clip.channel_names)[:3]}... (use the robot read_bvh returned with the clip)")
    return robot


def _clip_node(clip, frame, what="goal") -> int:
    try:
        return clip.names.index(frame)
    except ValueError:
        raise FrameError(f"{what} on frame {frame!r}: the skeleton has no such joint; closest: "
                         f"{closest_names(str(frame), clip.names)}") from None


def _columns(clip):
    """Per clip node: the q columns of its channels (tuple of (channel, column))."""
    out, col = [], 0
    for ch in clip.channels:
        out.append(tuple((c, col + k) for k, c in enumerate(ch)))
        col += len(ch)
    return out


def _chain_joints(clip, frame, chain, what) -> list:
    """Clip node indices of the joints that move ``frame`` for a goal (rotation channels only)."""
    node = _clip_node(clip, frame, what)
    anc = []
    p = clip.parents[node]
    while p >= 0:
        anc.append(p)
        p = clip.parents[p]
    rot = [i for i in anc if any(c.endswith("rotation") for c in clip.channels[i])]
    if isinstance(chain, int):
        if not rot:
            raise ModelError(f"{what}: no joint above {frame!r} has rotation channels")
        return rot[:chain]
    out = []
    for nm in chain:
        i = _clip_node(clip, nm, f"{what}.chain")
        if i not in anc:
            raise ModelError(f"{what}.chain: joint {nm!r} does not move {frame!r} (not above it in the "
                             f"hierarchy); joints above it: {[clip.names[k] for k in anc]}")
        if i not in rot:
            raise ModelError(f"{what}.chain: joint {nm!r} has no rotation channels")
        out.append(i)
    return out


def _chain_cols(clip, joints) -> np.ndarray:
    cols = _columns(clip)
    return np.array(sorted(c for i in joints for ch, c in cols[i] if ch.endswith("rotation")), dtype=np.int64)


def _limb_length(clip, frame) -> float:
    """Sum of the bone lengths (OFFSETs) from the root down to ``frame``."""
    i = _clip_node(clip, frame)
    total = 0.0
    while i >= 0:
        total += float(np.linalg.norm(clip.offsets[i]))
        i = clip.parents[i]
    return total


def _skeleton_scale(clip) -> float:
    """Length of the longest root-to-node path (a size for tolerances)."""
    lens = np.zeros(len(clip.names))
    for i, p in enumerate(clip.parents):
        lens[i] = float(np.linalg.norm(clip.offsets[i])) + (lens[p] if p >= 0 else 0.0)
    s = float(lens.max(initial=0.0))
    return s if s > 0 else 1.0


def _track(robot, frames, frame) -> np.ndarray:
    return np.ascontiguousarray(robot.fk(frames, frame)[:, :3, 3])


def _up_arg(up):
    if up is None:
        return None
    u = str(up).lower()
    if u not in _UP:
        raise GoalError(f"up: expected 'y', 'z' (or 'x') or None to detect it, got {up!r}")
    return u


def detect_up_axis(robot, clip, feet=None) -> str:
    """The clip's up axis, ``"y"`` or ``"z"``: the axis along which the root lies highest above the
    feet on average (feet default: the joints whose name contains "foot", else "toe")."""
    robot = _robot_for(robot, clip)
    if feet is None:
        low = [n for n in clip.joint_names if "foot" in n.lower()] or \
              [n for n in clip.joint_names if "toe" in n.lower()]
        if not low:
            raise ModelError("cannot detect the up axis: no joint named like a foot; pass up='y' or up='z'")
        feet = low
    elif isinstance(feet, str):
        feet = [feet]
    root = next(n for n, p in zip(clip.names, clip.parents) if p < 0)
    sel = clip.frames[np.linspace(0, clip.n_frames - 1, min(clip.n_frames, 64)).astype(int)]
    pr = _track(robot, sel, root)
    d = np.mean([pr - _track(robot, sel, f) for f in feet], axis=(0, 1))
    k = int(np.argmax(np.abs(d[1:]))) + 1  # y or z
    if d[k] <= 0:
        raise ModelError(f"cannot detect the up axis: the root is not above the feet along y or z "
                         f"(mean root - feet = {d.round(4).tolist()}); pass up='y' or up='z'")
    return "xyz"[k]


def _horizontal(up: str):
    k = _UP[up]
    return [a for a in range(3) if a != k]


def _smooth(P, half: int):
    if half <= 0 or P.shape[0] < 3:
        return P
    F = P.shape[0]
    pad = np.concatenate([np.repeat(P[:1], half, 0), P, np.repeat(P[-1:], half, 0)])
    c = np.cumsum(np.concatenate([np.zeros((1, 3)), pad]), axis=0)
    return (c[2 * half + 1:2 * half + 1 + F] - c[:F]) / (2 * half + 1)


def _need_fps(clip, what):
    if not clip.frame_time > 0:
        raise ModelError(f"{what}: the clip's frame time is 0; speeds are undefined")


def _detect(P, clip, up, floor, h_on, v_on, hysteresis, min_duration, foot):
    u = _UP[up]
    dt = clip.frame_time
    F = P.shape[0]
    if F < 2:
        return []
    half = max(1, int(round(0.025 / dt)))
    Ps = _smooth(P, half)
    speed = np.linalg.norm(np.gradient(Ps, dt, axis=0), axis=1)
    h = P[:, u] - floor
    on = (h < h_on) & (speed < v_on)
    stay = (h < h_on * hysteresis) & (speed < v_on * hysteresis)
    out, start = [], None
    for i in range(F):
        if start is None:
            if on[i]:
                start = i
        elif not stay[i]:
            out.append((start, i))
            start = None
    if start is not None:
        out.append((start, F))
    min_len = max(1, int(math.ceil(min_duration / dt - 1e-9)))
    return [Contact(foot, s, e) for s, e in out if e - s >= min_len]


def _plant_params(robot, clip, plant, up, floor, P):
    """floor, height threshold and speed threshold of a FootPlant (defaults filled in)."""
    fl = plant.floor if plant.floor is not None else floor
    if fl is None:
        fl = float(np.percentile(P[:, _UP[up]], plant.floor_percentile))
    ell = _limb_length(clip, plant.frame)
    h_on = plant.height_threshold if plant.height_threshold is not None else 0.08 * ell
    v_on = plant.speed_threshold if plant.speed_threshold is not None else 0.2 * ell
    return float(fl), h_on, v_on


def detect_contacts(robot, clip, foot, *, up=None, floor=None, height_threshold=None, speed_threshold=None,
                    hysteresis: float = 1.5, min_duration: float = 0.05, floor_percentile: float = 5.0) -> list:
    """Contacts of ``foot`` with the floor in ``clip``: a list of :class:`Contact`, in frame order.

    ``foot`` is a frame name or a :class:`FootPlant` (whose settings are then used). A frame is in
    contact when the foot frame's height above ``floor`` is below ``height_threshold`` and its
    smoothed speed below ``speed_threshold``, with hysteresis and a minimum duration; see
    :class:`FootPlant` for the defaults. ``up``: "y" or "z" (default: :func:`detect_up_axis`).
    """
    robot = _robot_for(robot, clip)
    _need_fps(clip, "detect_contacts")
    plant = foot if isinstance(foot, FootPlant) else FootPlant(
        _frame_arg(foot, "detect_contacts: foot"), height_threshold=height_threshold,
        speed_threshold=speed_threshold, hysteresis=hysteresis, min_duration=min_duration, floor=floor,
        floor_percentile=floor_percentile)
    _clip_node(clip, plant.frame, "detect_contacts: foot")
    up = _up_arg(up) or detect_up_axis(robot, clip, [plant.frame])
    P = _track(robot, clip.frames, plant.frame)
    if plant.contacts is not None:
        return [c for c in plant.contacts if c.start < clip.n_frames]
    fl, h_on, v_on = _plant_params(robot, clip, plant, up, None, P)
    return _detect(P, clip, up, fl, h_on, v_on, plant.hysteresis, plant.min_duration, plant.frame)


def foot_sliding(positions, contacts, frame_time: float, up: str = "y") -> float:
    """Mean horizontal speed [units/s] of a foot over its contact frames.

    positions: (F, 3) foot positions; contacts: :class:`Contact` objects (or (start, stop) pairs);
    speeds are finite differences between consecutive frames of the same contact. 0.0 if no
    contact spans two frames.
    """
    P = np.asarray(positions, dtype=np.float64)
    hz = _horizontal(_up_arg(up) or "y")
    total, n = 0.0, 0
    for c in contacts:
        s, e = (c.start, c.stop) if isinstance(c, Contact) else c
        e = min(e, P.shape[0])
        if e - s < 2:
            continue
        d = np.linalg.norm(np.diff(P[s:e][:, hz], axis=0), axis=1)
        total += float(d.sum())
        n += d.size
    return total / (n * frame_time) if n and frame_time > 0 else 0.0


def _raised_cos(k: int, B: int) -> float:
    """Weight of the k-th frame (1..B) away from a pinned frame: 1 → 0."""
    return 0.5 * (1.0 + math.cos(math.pi * k / (B + 1)))


def _project_balls(x, centres, radii, iterations=500):
    """Alternating projections of ``x`` onto the balls (discs) ``|x − centres[k]| ≤ radii[k]``:
    (point, True) once inside all of them, (compromise, False) if they do not meet."""
    x = x.copy()
    tol = 1e-12 * float(np.max(radii, initial=1.0))
    for _ in range(iterations):
        moved = 0.0
        for k in range(centres.shape[0]):
            d = x - centres[k]
            n = math.sqrt(float(d @ d))
            if n > radii[k]:
                x -= d * (1.0 - radii[k] / n)
                moved = max(moved, n - radii[k])
        if moved <= tol:
            return x, True
    return x, False


def _contact_targets(pin, P, tops, radius, u, floor, lift):
    """The pin moved the least needed to be reachable, and the contact's per-frame targets.

    Targets: the pin's horizontal position; height the pin's, or (``lift``) the original foot's
    where that is higher (the heel rising before toe-off). The chain must reach every target:
    ``|target − tops[f]| ≤ radius``. The pin moves horizontally if that suffices (alternating
    projections onto the discs the balls cut at each frame's target height) — the foot keeps
    its height — else in 3-D; when even that fails the frames that cannot reach are reported
    as missed by the solve.
    """
    x = pin.copy()
    x[u] = max(x[u], floor)
    n = P.shape[0]

    def targets(x):
        T = np.repeat(x[None, :], n, axis=0)
        if lift:
            T[:, u] = np.maximum(x[u], P[:, u])
        return T

    if radius <= 0 or tops is None or n == 0:
        return x, targets(x)
    hz = [k for k in range(3) if k != u]
    T = targets(x)
    dh = tops[:, u] - T[:, u]
    if np.all(np.abs(dh) < radius):
        y, ok = _project_balls(x[hz], tops[:, hz], np.sqrt(radius * radius - dh * dh))
        if ok:
            x[hz] = y
            return x, targets(x)
    x, _ = _project_balls(x, tops, np.full(n, radius))
    x[u] = max(x[u], floor)
    return x, targets(x)


def _plant_targets(P, contacts, pin_mode, up, floor, B, tops=None, radius=0.0, lift=True):
    """(F, 3) targets with NaN where the plant is inactive, and the pins. ``tops`` (F, 3): the
    position of the chain's top joint per frame, ``radius`` the chain's reach (pins are kept
    within it, see :func:`_contact_targets`)."""
    F = P.shape[0]
    u = _UP[up]
    off = np.zeros((F, 3))
    active = np.zeros(F, dtype=bool)
    in_contact = np.zeros(F, dtype=bool)
    pins = []
    for c in contacts:
        in_contact[c.start:c.stop] = True
    T = np.full((F, 3), np.nan)
    for c in contacts:
        s, e = c.start, min(c.stop, F)
        pin = P[s].copy() if pin_mode == "start" else P[s:e].mean(axis=0)
        pin, T[s:e] = _contact_targets(pin, P[s:e], tops[s:e] if tops is not None else None, radius, u, floor,
                                       lift)
        pins.append(pin)
        for k in range(1, B + 1):  # fade the pin's offset in before and out after the contact
            w = _raised_cos(k, B)
            f = s - k
            if f >= 0 and not in_contact[f]:
                off[f] += w * (T[s] - P[s])
                active[f] = True
            f = e - 1 + k
            if f < F and not in_contact[f]:
                off[f] += w * (T[e - 1] - P[e - 1])
                active[f] = True
    blend = active & ~in_contact
    Tb = P[blend] + off[blend]
    Tb[:, u] = np.maximum(Tb[:, u], np.minimum(floor, P[blend, u]))  # never pushed below the floor
    T[blend] = Tb
    return T, pins


def _reach_targets(reach, clip, P):
    F = clip.n_frames
    fr = reach.frames if reach.frames is not None else range(F)
    if fr.stop > F:
        raise GoalError(f"Reach({reach.frame!r}).frames: {fr!r} goes past the clip's {F} frames")
    if callable(reach.targets):
        rows = []
        for i in fr:
            try:
                v = np.asarray(reach.targets(i), dtype=np.float64)
            except (TypeError, ValueError) as exc:
                raise GoalError(f"Reach({reach.frame!r}).targets({i}): expected a position (3,), got an error: "
                                f"{exc}") from None
            if v.shape != (3,) or not np.all(np.isfinite(v)):
                raise GoalError(f"Reach({reach.frame!r}).targets({i}): expected a finite position of shape (3,), "
                                f"got {v.tolist() if v.size < 10 else v.shape}")
            rows.append(v)
        tg = np.array(rows)
    else:
        t = reach.targets
        if t.shape[0] == len(fr):
            tg = t
        elif t.shape[0] == F:
            tg = t[fr.start:fr.stop]
        else:
            raise GoalError(f"Reach({reach.frame!r}).targets: expected {len(fr)} rows (one per frame of {fr!r}) "
                            f"or {F} (one per clip frame), got {t.shape[0]}")
    T = np.full((F, 3), np.nan)
    T[fr.start:fr.stop] = tg
    B = reach.blend if reach.blend is not None else _default_blend(clip, 0.25)
    s, e = fr.start, fr.stop
    for k in range(1, B + 1):
        w = _raised_cos(k, B)
        if s - k >= 0 and np.isnan(T[s - k, 0]):
            T[s - k] = P[s - k] + w * (tg[0] - P[s])
        if e - 1 + k < F and np.isnan(T[e - 1 + k, 0]):
            T[e - 1 + k] = P[e - 1 + k] + w * (tg[-1] - P[e - 1])
    return T


def _default_blend(clip, seconds):
    if not clip.frame_time > 0:
        return 0
    return int(round(seconds / clip.frame_time))


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


# ------------------------------------------------------------------------------------- main entry
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

    Returns the corrected clip and a :class:`ClipReport`. See the module docstring for the method.
    """
    import time

    from .solve import solve

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
    if floor is not None:
        try:
            floor = float(floor)
        except (TypeError, ValueError):
            raise GoalError(f"floor: expected a number or None, got {floor!r}") from None
        if not math.isfinite(floor):
            raise GoalError(f"floor: expected a finite number, got {floor!r}")
    if max_step is None:
        max_step = min(DEFAULT_MAX_SPEED * clip.frame_time, MAX_STEP_CAP) if clip.frame_time > 0 else MAX_STEP_CAP
    max_step = _opt_positive(max_step, "max_step [rad per frame]")
    scale = _skeleton_scale(clip)
    tol = _opt_positive(position_tolerance, "position_tolerance") or 1e-6 * scale
    if isinstance(max_iterations, bool) or not isinstance(max_iterations, (int, np.integer)) or max_iterations < 1:
        raise GoalError(f"max_iterations: expected an integer >= 1, got {max_iterations!r}")

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


