"""The goals of :func:`~invkin.animation.correct_clip`: :class:`FootPlant`, :class:`Reach`, and the
:class:`Contact` a FootPlant pins over (frozen dataclasses, validated on construction)."""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..errors import GoalError


def _opt_positive(v, what):
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating)) or not (
            math.isfinite(v) and v > 0):
        raise GoalError(f"{what}: expected a finite number > 0 or None, got {v!r}")
    return float(v)


def _opt_finite(v, what):
    if v is None:
        return None
    try:
        f = float(v)
    except (TypeError, ValueError):
        raise GoalError(f"{what}: expected a number or None, got {v!r}") from None
    if not math.isfinite(f):
        raise GoalError(f"{what}: expected a finite number, got {v!r}")
    return f


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
        speed_threshold: … and the smoothed speed is below this [units/s]; default the larger of
            0.2 × the limb length per second and 0.15 × the root's median horizontal speed (a
            running foot in stance moves faster than a walking one).
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
        toe: the foot's second contact point (the ball or the toe tip) for whole-foot planting:
            None (default) finds it (a joint below the foot named like a toe, else the foot's End
            Site), a frame name sets it, False plants the ankle only. The toe has its own contacts
            (detected with the same thresholds, its own floor); while both heel (``frame``) and toe
            are down both points are pinned, which locks the foot's heel→toe direction (its
            orientation but for the roll about that line); the toe's chain adds the ankle.
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
    toe: str | bool | None = None

    def __post_init__(self):
        what = f"FootPlant({self.frame!r})"
        if self.toe is not None and self.toe is not False:
            object.__setattr__(self, "toe", _frame_arg(self.toe, f"{what}.toe"))
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
        object.__setattr__(self, "floor", _opt_finite(self.floor, f"{what}.floor"))
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
