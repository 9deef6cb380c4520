"""Per-frame targets of the goals: foot pins moved within the leg's reach, Reach targets, and the
raised-cosine blends in and out of them (NaN rows where a goal is inactive)."""
from __future__ import annotations

import math

import numpy as np

from ..errors import GoalError
from .contacts import _UP

#: Soft reach: a target asking a limb for more extension than the source motion had is eased in
#: over the last SOFT_REACH × the limb's length (see _soft_reach); a straight source limb stays
#: straight (no minimum knee bend).
SOFT_REACH = 0.03


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
    ``|target − tops[f]| ≤ radius[f]`` (a scalar or one radius per frame). The pin moves
    horizontally if that suffices (alternating projections onto the discs the balls cut at each
    frame's target height) — the foot keeps its height — else in 3-D; when even that fails the
    soft-reach rule (:func:`_soft_reach`) shortens the remaining targets.
    """
    x = pin.copy()
    x[u] = max(x[u], floor)
    n = P.shape[0]
    radius = np.broadcast_to(np.asarray(radius, dtype=np.float64), (n,))

    def targets(x):
        T = np.repeat(x[None, :], n, axis=0)
        if lift:
            T[:, u] = np.maximum(x[u], P[:, u])
        return T

    if tops is None or n == 0 or np.any(radius <= 0):
        return x, targets(x)
    hz = [k for k in range(3) if k != u]
    T = targets(x)
    dh = tops[:, u] - T[:, u]
    if np.all(np.abs(dh) < radius):
        y, ok = _project_balls(x[hz], tops[:, hz], np.sqrt(radius * radius - dh * dh))
        if ok:
            x[hz] = y
            return x, targets(x)
    x, _ = _project_balls(x, tops, radius)
    x[u] = max(x[u], floor)
    return x, targets(x)


def _soft_radius(d_src, L, room):
    """Per frame, the distance from the chain's top below which a target is left alone:
    ``d0 = max(min(d_src, L), L − room)``; a source limb that was straight (``d_src ≈ L``) is not
    asked to bend (no minimum knee bend), a bent one may straighten up to ``L − room``."""
    return np.maximum(np.minimum(d_src, L), L - room)


def _soft_reach(T, tops, L, d0):
    """Targets farther than ``d0`` from the chain's top pulled in: ``d' = d0 + r (1 − e^{−(d − d0)/r})``
    with ``r = L − d0`` (slope 1 at ``d0``, never beyond ``L``: the limb eases to full extension
    instead of locking and popping; with ``r = 0`` the target stops at ``d0``). NaN rows stay NaN."""
    v = T - tops
    d = np.linalg.norm(v, axis=1)
    over = np.isfinite(d) & (d > d0)
    if not np.any(over):
        return T
    r = np.maximum(L - d0, 0.0)
    ex = np.where(over, np.maximum(d - d0, 0.0), 0.0) / np.where(r > 0, r, 1.0)
    dn = np.where(r > 0, d0 + r * (1.0 - np.exp(-ex)), d0)
    out = T.copy()
    out[over] = tops[over] + v[over] * (dn[over] / d[over])[:, None]
    return out


def _plant_targets(P, contacts, pin_mode, up, floor, B, tops=None, radius=0.0, lift=True, given=None):
    """(F, 3) targets with NaN where the plant is inactive, and the pins. ``tops`` (F, 3): the
    position of the chain's top joint per frame, ``radius`` the chain's reach, a scalar or (F,)
    (pins are kept within it, see :func:`_contact_targets`). ``given``: per contact a pin to use as
    it is, or None.

    Blends: ``B`` frames before a contact the target is ``(1 − w) P + w X`` with ``X`` the contact's
    target path extrapolated linearly from its first two frames (and after it, from its last two),
    ``w`` a raised cosine 1 → 0 (zero slope at both ends): position and velocity are continuous
    where the contact starts and ends and where the blend meets the free motion.
    """
    F = P.shape[0]
    u = _UP[up]
    off = np.zeros((F, 3))
    active = np.zeros(F, dtype=bool)
    in_contact = np.zeros(F, dtype=bool)
    pins = []
    radius = np.broadcast_to(np.asarray(radius, dtype=np.float64), (F,))
    for c in contacts:
        in_contact[c.start:c.stop] = True
    T = np.full((F, 3), np.nan)
    for c in contacts:
        s, e = c.start, min(c.stop, F)
        g = given[len(pins)] if given is not None else None
        if g is not None:  # a pin fixed by the caller (a toe placed by its locked foot): not moved
            pin, T[s:e] = _contact_targets(np.asarray(g, float), P[s:e], None, 0.0, u, -np.inf, lift)
        else:
            pin = P[s].copy() if pin_mode == "start" else P[s:e].mean(axis=0)
            pin, T[s:e] = _contact_targets(pin, P[s:e], tops[s:e] if tops is not None else None, radius[s:e], u,
                                           floor, lift)
        pins.append(pin)
        v_in = T[s + 1] - T[s] if e - s > 1 else np.zeros(3)
        v_out = T[e - 1] - T[e - 2] if e - s > 1 else np.zeros(3)
        for k in range(1, B + 1):  # blend toward the contact's extrapolated path before and after it
            w = _raised_cos(k, B)
            f = s - k
            if f >= 0 and not in_contact[f]:
                off[f] += w * (T[s] - k * v_in - P[f])
                active[f] = True
            f = e - 1 + k
            if f < F and not in_contact[f]:
                off[f] += w * (T[e - 1] + k * v_out - P[f])
                active[f] = True
    blend = active & ~in_contact
    Tb = P[blend] + off[blend]
    Tb[:, u] = np.maximum(Tb[:, u], np.minimum(floor, P[blend, u]))  # never pushed below the floor
    T[blend] = Tb
    return T, pins


def _reach_targets(reach, clip, P, tops=None, L=0.0):
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
    # blend toward the target path extrapolated past the range (velocity-continuous, see _plant_targets)
    v_in = tg[1] - tg[0] if len(tg) > 1 else np.zeros(3)
    v_out = tg[-1] - tg[-2] if len(tg) > 1 else np.zeros(3)
    for k in range(1, B + 1):
        w = _raised_cos(k, B)
        if s - k >= 0 and np.isnan(T[s - k, 0]):
            T[s - k] = P[s - k] + w * (tg[0] - k * v_in - P[s - k])
        if e - 1 + k < F and np.isnan(T[e - 1 + k, 0]):
            T[e - 1 + k] = P[e - 1 + k] + w * (tg[-1] + k * v_out - P[e - 1 + k])
    if tops is not None and L > 0:  # an unreachable prop: the arm eases to full extension, no wobble
        d0 = _soft_radius(np.linalg.norm(P - tops, axis=1), L, SOFT_REACH * L)
        T = _soft_reach(T, tops, L, d0)
    return T


def _default_blend(clip, seconds):
    if not clip.frame_time > 0:
        return 0
    return int(round(seconds / clip.frame_time))
