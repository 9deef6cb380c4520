"""Clip correction: animate with FK, correct effector positions with IK (SEEDS.md §1).

:func:`correct_clip` takes a motion (:class:`~invkin.Clip`) and goals that may vary per frame and
returns a corrected copy of the clip plus a :class:`ClipReport`. Two kinds of goal:

* :class:`FootPlant` — whole-foot planting. Contacts are detected on the original motion
  (:func:`detect_contacts`), separately for the heel (the FootPlant frame, the ankle) and the toe
  (:func:`foot_toe`: a joint below the foot named like a toe, else its End Site): the point is
  *near the floor* (height − its floor below ``height_threshold``) **and** *slow* (3-D speed of its
  path smoothed over ±25 ms below ``speed_threshold``); a contact ends only when the height or the
  speed exceeds ``hysteresis`` × its threshold; contacts shorter than ``min_duration`` are dropped.
  A heel contact pins the ankle at its position at the contact's start (``pin="start"``) or its
  mean (``pin="mean"``): the horizontal position is held, the height is the pin's or, with
  ``lift=True`` (default), the original's where that is higher. While heel and toe are both down
  (flat) the point that touched first stays pinned and the foot keeps its orientation (eased in
  over ``blend`` frames), so the toe does not slide; a toe that stays down after the heel lifts is
  pinned where the locked foot left it; a toe alone (a forefoot strike, toe-off) is pinned like the
  heel. Pins are moved the least needed to be reachable from the hip (whose path is the original
  motion), and a target that asks a leg for more extension than the captured leg had is eased in
  (soft reach, :data:`SOFT_REACH`): a straight captured leg stays straight, no knee is forced to bend.
  Around each contact the target blends between the free motion and the contact's path extrapolated
  linearly past its ends (a raised cosine over ``blend`` frames): position and velocity are
  continuous at both joins. A foot with no contact at all raises a :class:`NoContactWarning` (the
  thresholds used are in the message) and is left as it is.
* :class:`Reach` — a frame (a hand) follows a moving target over a frame range: an array of
  positions, one per frame of the range (or per frame of the clip), or a callable
  ``targets(i) -> (3,)`` of the frame index ``i`` (time is ``i * clip.frame_time``). The target
  blends in before the range and out after it over ``blend`` frames (velocity-continuous, as for
  contacts); a target beyond the arm's reach is eased in by the soft reach (no wobble at the edge),
  and the report still measures the error against the requested target ("missed").

When a goal's last blended frame has passed, whatever correction its chain still holds (a
redundant arm may reach the original hand position with other joint angles) fades to zero in
joint space over another ``blend`` frames (a raised cosine), so the clip returns to the captured
motion without a jump.

Units are the clip's (BVH files: whatever length unit the file uses; speeds are units/s).

How a frame is solved. Each goal moves only its *chain*: the rotation channels of the ``chain``
BVH joints above its frame (default 2: hip and knee for a foot, shoulder and elbow for a hand),
or the joints named in ``chain``; a whole foot's toe and orientation lock add the ankle. Frame ``i`` is solved with :func:`invkin.solve` (Levenberg–
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
and the frame is flagged ``clipped`` (the bound binds; the goal is then met a few frames later —
a run of such frames that the goal's end reaches first is flagged ``missed``: the bound was too
small for the motion).
The bound applies to the correction, not to the clip's own motion (mocap may hold jumps — a
reference pose in frame 0, angle wrap-arounds — that must pass unchanged). Frames where the
unbounded solution would have jumped are reported in :attr:`ClipReport.discontinuities` with
the size of the jump (a branch flip or an unreachable target shows up there).
"""
from __future__ import annotations

from .contacts import NoContactWarning, detect_contacts, detect_up_axis, foot_sliding, foot_toe
from .correct import ClipReport, correct_clip
from .correct import DEFAULT_MAX_SPEED, FROZEN_WEIGHT, MAX_STEP_CAP, SOFT_REACH  # noqa: F401 - documented settings
from .goals import Contact, FootPlant, Reach
from .root_motion import RootMotion, extract_root_motion, make_in_place

__all__ = ["FootPlant", "Reach", "Contact", "ClipReport", "correct_clip", "detect_contacts", "detect_up_axis",
           "foot_sliding", "foot_toe", "NoContactWarning", "RootMotion", "extract_root_motion", "make_in_place"]
