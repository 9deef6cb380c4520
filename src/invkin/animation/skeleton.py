"""What correct_clip needs to know of a clip's skeleton: its nodes, the channels a goal's chain
moves, limb lengths, and frame paths over the clip."""
from __future__ import annotations

import numpy as np

from ..errors import FrameError, ModelError, closest_names
from ..model.bvh import Clip, check_skeleton, skeleton_robot


def _robot_for(robot, clip):
    if not isinstance(clip, Clip):
        raise ModelError(f"expected a Clip (from read_bvh), got {type(clip).__name__}")
    if robot is None:
        return skeleton_robot(clip)
    check_skeleton(robot, clip, "", " (use the robot read_bvh returned with the clip)")
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


def _bone_lengths(clip) -> np.ndarray:
    """(N,) length of each node's bone to its parent [clip units]: 0 for a root and the nodes down
    to its motion root (:func:`_motion_root`: their OFFSETs and position channels place the
    character in the world, they are no bone); else the norm of its translation, the OFFSET with
    the components that position channels replace taken from those channels (median over the
    frames), as :func:`~invkin.model.bvh.skeleton_robot` composes it."""
    out = np.zeros(len(clip.names))
    cols = _columns(clip)
    placing = set()
    for r in (i for i, p in enumerate(clip.parents) if p < 0):
        n = _motion_root(clip, r)
        while n >= 0:
            placing.add(n)
            n = clip.parents[n]
    for i, p in enumerate(clip.parents):
        if i in placing:
            continue
        pos = [(ord(c[0]) - ord("X"), col) for c, col in cols[i] if c.endswith("position")]
        if not pos or clip.n_frames == 0:
            t = np.array(clip.offsets[i], dtype=float)
            for k, _ in pos:
                t[k] = 0.0
            out[i] = float(np.linalg.norm(t))
            continue
        t = np.repeat(np.asarray(clip.offsets[i], dtype=float)[None], clip.n_frames, axis=0)
        for k, col in pos:
            t[:, k] = clip.frames[:, col]
        out[i] = float(np.median(np.linalg.norm(t, axis=1)))
    return out


def _limb_length(clip, frame) -> float:
    """Sum of the bone lengths (:func:`_bone_lengths`) from the root down to ``frame``."""
    i = _clip_node(clip, frame)
    lens = _bone_lengths(clip)
    total = 0.0
    while i >= 0:
        total += float(lens[i])
        i = clip.parents[i]
    return total


def _skeleton_scale(clip) -> float:
    """Length of the longest root-to-node path (a size for tolerances)."""
    bones = _bone_lengths(clip)
    lens = np.zeros(len(clip.names))
    for i, p in enumerate(clip.parents):
        lens[i] = float(bones[i]) + (lens[p] if p >= 0 else 0.0)
    s = float(lens.max(initial=0.0))
    return s if s > 0 else 1.0


def _motion_root(clip, root: int | None = None) -> int:
    """The node that carries the character's motion: from ``root`` (default the first ROOT) down
    through nodes without position channels that have a single child (a glTF armature node, a Z-up
    to Y-up matrix above the hips), to the first node with position channels or several children.
    A BVH ROOT (position channels) is its own motion root."""
    r = next(i for i, p in enumerate(clip.parents) if p < 0) if root is None else root
    kids = [[] for _ in clip.names]
    for i, p in enumerate(clip.parents):
        if p >= 0:
            kids[p].append(i)
    n = r
    while not any(c.endswith("position") for c in clip.channels[n]) and len(kids[n]) == 1:
        n = kids[n][0]
    return n if any(c.endswith("position") for c in clip.channels[n]) or kids[n] else r


def _track(robot, frames, frame) -> np.ndarray:
    return np.ascontiguousarray(robot.fk(frames, frame)[:, :3, 3])
