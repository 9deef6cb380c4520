"""Foot contacts: the clip's up axis, contact detection (near the floor and slow, with hysteresis),
and the foot-sliding metric."""
from __future__ import annotations

import math

import numpy as np

from ..errors import GoalError, ModelError
from .goals import Contact, FootPlant, _frame_arg
from .skeleton import _clip_node, _limb_length, _motion_root, _robot_for, _track

_UP = {"x": 0, "y": 1, "z": 2}


class NoContactWarning(UserWarning):
    """Foot planting found no contact for a foot: nothing was planted (the thresholds are in the message)."""


def _up_arg(up):
    if up is None:
        return None
    u = str(up).lower()
    if u not in _UP:
        raise GoalError(f"up: expected 'y', 'z' (or 'x') or None to detect it, got {up!r}")
    return u


def detect_up_axis(robot, clip, feet=None) -> str:
    """The clip's up axis, ``"y"`` or ``"z"``: the axis along which the root lies highest above the
    feet on average (feet default: the joints whose name contains "foot", else "ankle", else "toe")."""
    robot = _robot_for(robot, clip)
    if feet is None:
        low = next(([n for n in clip.joint_names if w in n.lower()] for w in ("foot", "ankle", "toe")
                    if any(w in n.lower() for n in clip.joint_names)), None)
        if not low:
            raise ModelError("cannot detect the up axis: no joint named like a foot, an ankle or a toe; pass "
                             "up='y' or up='z'")
        feet = low
    elif isinstance(feet, str):
        feet = [feet]
    d = _root_above_feet(robot, clip, feet)
    k = int(np.argmax(np.abs(d[1:]))) + 1  # y or z
    if d[k] <= 0:
        raise ModelError(f"cannot detect the up axis: the root is not above the feet along y or z "
                         f"(mean root - feet = {d.round(4).tolist()}); pass up='y' or up='z'")
    return "xyz"[k]


def _root_above_feet(robot, clip, feet) -> np.ndarray:
    """(3,) mean of root − foot positions over (up to 64) frames and the feet (the motion root:
    the hips below a glTF armature node)."""
    root = clip.names[_motion_root(clip)]
    sel = clip.frames[np.linspace(0, clip.n_frames - 1, min(clip.n_frames, 64)).astype(int)]
    pr = _track(robot, sel, root)
    return np.mean([pr - _track(robot, sel, f) for f in feet], axis=(0, 1))


def check_up_axis(robot, clip, feet, up: str, what: str) -> None:
    """An InvkinWarning when the root is not mostly above the feet along ``up`` (an up axis given
    by the caller that the clip contradicts: the floor would be a wall)."""
    if clip.n_frames == 0:
        return
    d = _root_above_feet(robot, clip, feet)
    k = _UP[up]
    if d[k] <= 0.5 * float(np.max(np.abs(d))):
        from ..errors import InvkinWarning, warn_caller
        best = "xyz"[int(np.argmax(np.abs(d)))]
        warn_caller(f"{what}: up {up!r}, but the root is not above the feet along {up} (mean root - feet = "
                    f"{d.round(4).tolist()}: most along {'-' if d['xyz'.index(best)] < 0 else ''}{best}); is the "
                    f"clip {best}-up? (leave up unset to detect it)", InvkinWarning)


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
        raise ModelError(f"{what}: the clip's frame time is 0; speeds are undefined (give the clip its rate: the "
                         f"file's Frame Time, or dataclasses.replace(clip, frame_time=1 / fps))")


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


def _root_speed(robot, clip, up) -> float:
    """Median horizontal speed of the clip's (motion) root [units/s]."""
    root = clip.names[_motion_root(clip)]
    R = _track(robot, clip.frames, root)[:, _horizontal(up)]
    if R.shape[0] < 2 or not clip.frame_time > 0:
        return 0.0
    return float(np.median(np.linalg.norm(np.gradient(R, clip.frame_time, axis=0), axis=1)))


def _plant_params(robot, clip, plant, up, floor, P, frame=None):
    """floor, height threshold and speed threshold of a FootPlant (defaults filled in) for its
    ``frame`` (default the plant's; the toe passes its own and uses its own floor)."""
    frame = plant.frame if frame is None else frame
    fl = (plant.floor if plant.floor is not None else floor) if frame == plant.frame else None
    if fl is None:
        fl = float(np.percentile(P[:, _UP[up]], plant.floor_percentile))
    ell = _limb_length(clip, frame)
    h_on = plant.height_threshold if plant.height_threshold is not None else 0.08 * ell
    v_on = plant.speed_threshold if plant.speed_threshold is not None else max(
        0.2 * ell, 0.15 * _root_speed(robot, clip, up))
    return float(fl), h_on, v_on


def foot_toe(clip, plant) -> str | None:
    """The toe frame of a FootPlant (``plant.toe``, or found below the foot; None for none)."""
    if plant.toe is False:
        return None
    foot = _clip_node(clip, plant.frame, f"FootPlant({plant.frame!r})")
    if plant.toe is not None:
        t = _clip_node(clip, plant.toe, f"FootPlant({plant.frame!r}).toe")
        p = clip.parents[t]
        while p >= 0 and p != foot:
            p = clip.parents[p]
        if p != foot:
            raise ModelError(f"FootPlant({plant.frame!r}).toe: {plant.toe!r} is not below the foot")
        return plant.toe
    kids = [i for i, p in enumerate(clip.parents) if p == foot]
    named = [i for i in kids if "toe" in clip.names[i].lower() or "ball" in clip.names[i].lower()]
    ends = [i for i in kids if clip.end_site[i]]
    pick = (named or ends or [None])[0]
    if pick is None or not np.linalg.norm(clip.offsets[pick]) > 0:
        return None
    return clip.names[pick]


def detect_contacts(robot, clip, foot, *, up=None, floor=None, height_threshold=None, speed_threshold=None,
                    hysteresis: float = 1.5, min_duration: float = 0.05, floor_percentile: float = 5.0) -> list:
    """Contacts of ``foot`` with the floor in ``clip``: a list of :class:`Contact`, in frame order.

    ``foot`` is a frame name or a :class:`FootPlant` (whose settings are then used; giving the
    threshold keywords with one is a GoalError, ``floor`` is the fallback for its own). A frame is in
    contact when the foot frame's height above ``floor`` is below ``height_threshold`` and its
    smoothed speed below ``speed_threshold``, with hysteresis and a minimum duration; see
    :class:`FootPlant` for the defaults. ``up``: "y" or "z" (default: :func:`detect_up_axis`).
    """
    robot = _robot_for(robot, clip)
    _need_fps(clip, "detect_contacts")
    if isinstance(foot, FootPlant):
        given = {k: v for k, v, default in (("height_threshold", height_threshold, None),
                                             ("speed_threshold", speed_threshold, None),
                                             ("hysteresis", hysteresis, 1.5), ("min_duration", min_duration, 0.05),
                                             ("floor_percentile", floor_percentile, 5.0)) if v != default}
        if given:
            raise GoalError(f"detect_contacts: {', '.join(f'{k}={v!r}' for k, v in given.items())} would be ignored: "
                            f"the FootPlant's own settings are used; set them on the FootPlant "
                            f"(dataclasses.replace(plant, ...)) or pass the foot's name")
    plant = foot if isinstance(foot, FootPlant) else FootPlant(
        _frame_arg(foot, "detect_contacts: foot"), height_threshold=height_threshold,
        speed_threshold=speed_threshold, hysteresis=hysteresis, min_duration=min_duration, floor=floor,
        floor_percentile=floor_percentile)
    _clip_node(clip, plant.frame, "detect_contacts: foot")
    up = _up_arg(up) or detect_up_axis(robot, clip, [plant.frame])
    P = _track(robot, clip.frames, plant.frame)
    if plant.contacts is not None:
        return [c for c in plant.contacts if c.start < clip.n_frames]
    fl, h_on, v_on = _plant_params(robot, clip, plant, up, floor, P)
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
