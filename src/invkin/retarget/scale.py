r"""From a clip to per-frame robot targets: up axis, limb-length scaling, rest-pose alignment, floor.

With ``A`` the rotation of the clip's world onto the robot's (the clip's up axis onto +z) and
``p_s(b, t)``, ``R_s(b, t)`` the world pose of body ``b``'s source joint in frame ``t``:

* **Positions, scaled per segment.** Each body hangs from its nearest mapped ancestor ``a`` (the
  root from none); its segment's scale is the ratio of the rest lengths
  ``s_b = |p_r(b) − p_r(a)| / |p_s(b) − p_s(a)|`` (robot at q = 0 clipped into its limits, source
  at all channels 0). Then ``p*(root) = s_root · A p_s(root)`` with ``s_root`` the ratio of the
  root's rest heights above the feet, and down a limb ``p*(b) = p*(a) + s_b · A (p_s(b) − p_s(a))``:
  every target segment has the robot's length because the source's is rigid (one scale per
  segment, not one number). A limb's first body (its parent a branch point of the map: the
  pelvis for the hips, the chest for the shoulders) is placed by the robot's own rest offset
  carried by the parent's rotation target, ``p*(b) = p*(a) + R*(a) R_r⁰(a)ᵀ (p_r(b) − p_r(a))``:
  where hips and shoulders sit differs from body to body, so only the limbs take the source's
  directions.
* **Rotations with rest-pose offsets.** ``R*(b) = A R_s(b) O_b`` with
  ``O_b = (Y A R_s⁰(b))ᵀ M_b R_r⁰(b)``: ``Y`` turns the source's rest heading onto the robot's
  (a yaw fitted to the rest positions of every body, 2-D Procrustes), and ``M_b`` is the shortest
  rotation taking the robot's rest segment direction onto the source's (so a T-posed source and
  an arms-down robot agree on what a raised arm means); at rest the robot would stand exactly in
  its rest pose, turned to the source's heading.
* **Floor.** One vertical shift puts the feet's targets during contact (detected on the source,
  :func:`invkin.detect_contacts`) at the robot's sole height above the ground ``z = 0``; a swing
  foot's target is kept at or above it. During a contact the foot's target is held where the
  contact began, flat on the floor with the source's heading (hard goals in the solve).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..errors import ModelError

__all__ = ["Targets", "make_targets", "sole_points", "rest_clearance", "robot_rest", "REST_SLACK"]

_UP_ROT = {"z": np.eye(3), "y": np.array([[1.0, 0.0, 0.0], [0.0, 0.0, -1.0], [0.0, 1.0, 0.0]]),
           "x": np.array([[0.0, 0.0, 1.0], [1.0, 0.0, 0.0], [0.0, 1.0, 0.0]])}


@dataclass(frozen=True, eq=False)
class Targets:
    """What the solve tracks, per frame (arrays in the robot's world, metres).

    p: (F, B, 3) position targets; R: (F, B, 3, 3) rotation targets; contact: (F, B) bool, True
    while body b (a foot) is held on the floor; scale: (B,) the segment scales; up: the clip's up
    axis; contacts: {foot body index: [(start, stop), ...]}; sole: {body index: (P, 4) sole points
    in the link frame and their radius}; sole_height [m]: a foot link's height above the floor when flat.
    """

    p: np.ndarray
    R: np.ndarray
    contact: np.ndarray
    scale: np.ndarray
    up: str
    contacts: dict
    sole: dict
    sole_height: dict


def robot_rest(robot) -> np.ndarray:
    """q = 0 clipped into the joint limits (a floating base at the origin): the robot's rest pose."""
    return np.clip(np.zeros(robot.dof), robot.lower, robot.upper)


def sole_points(robot, link: str) -> np.ndarray:
    """(P, 4) the ends of ``link``'s collision capsules that bound it from below at rest, in the
    link frame, with their radius: ``x y z r``; a point's lowest surface point is its height − r,
    whatever the link's tilt (exact for spheres and capsules). Ends whose bottom lies within 1 cm
    of the lowest are kept. Empty when the link has no collision shapes."""
    cm = robot.collision
    if link not in cm.link_names:
        return np.zeros((0, 4))
    k = cm.link_names.index(link)
    caps = cm.caps[cm.link_caps[k]:cm.link_caps[k + 1]]
    T = robot.fk(robot_rest(robot), link)
    pts = np.concatenate([caps[:, [0, 1, 2, 6]], caps[:, [3, 4, 5, 6]]])
    bottom = pts[:, :3] @ T[:3, :3].T[:, 2] - pts[:, 3]  # heights of the ends' bottoms at rest
    return np.unique(pts[bottom <= bottom.min() + 0.01].round(12), axis=0)


REST_SLACK = 0.0  # [m] a pair closer than the margin at rest may come this much closer still (1 cm let
#                   G1's arm meshes touch its torso: tests/test_retarget.py checks the meshes with coal)


def rest_clearance(robot) -> np.ndarray:
    """(n_nodes, n_nodes) [m] the least distance the retargeting keeps each collision pair's
    capsules apart, before the margin: inf for pairs apart at rest (the margin applies), the rest
    pose's distance − REST_SLACK for pairs whose capsules are closer than 5 cm at rest (capsules
    that enclose meshes overlap where the meshes do not: G1's hanging arms and its torso; the
    kernel keeps such a pair at min(margin, this))."""
    from ..collision.distance import distances

    def build():
        out = np.full((robot.n_nodes, robot.n_nodes), np.inf)
        d = distances(robot, robot_rest(robot))
        for a, b, x in zip(d.node_a, d.node_b, d.distance):
            if x < 0.05:
                out[a, b] = out[b, a] = x - REST_SLACK
        out.setflags(write=False)
        return out

    return robot.memo("retarget_rest_clearance", build)


def _below_with_shapes(robot, link: str) -> list:
    """The links below ``link`` (not itself) that have collision shapes, nearest first."""
    k = robot.frame_index(link)
    cm = robot.collision
    found = [n for n in cm.link_names if n != link and k in robot.ancestors(n)]
    return sorted(found, key=lambda n: len(robot.ancestors(n)))


def _no_sole(robot, body) -> None:
    """A foot link without collision shapes has no sole: it would be put on the floor at its own
    origin (an ankle: the foot sinks into the floor, unmeasured). Refused when links below it have
    shapes (the map names a link above the foot); a robot without shapes there keeps the origin."""
    from .mapping import MappingError

    below = _below_with_shapes(robot, body.link)
    if below:
        raise MappingError(f"mapping: foot {body.source!r} -> link {body.link!r} has no collision shapes to stand "
                           f"on (the sole that is put on the floor and measured for penetration), but "
                           f"{', '.join(map(repr, below[:3]))} below it have; map the foot onto the link its "
                           f"sole belongs to")


def _shortest_rotation(a, b) -> np.ndarray:
    """The rotation of least angle taking direction a onto direction b."""
    from ..spatial import so3_exp

    a = a / np.linalg.norm(a)
    b = b / np.linalg.norm(b)
    c = np.cross(a, b)
    s = np.linalg.norm(c)
    d = float(np.clip(a @ b, -1.0, 1.0))
    if s < 1e-12:
        if d > 0:
            return np.eye(3)
        perp = np.cross(a, [1.0, 0.0, 0.0] if abs(a[0]) < 0.9 else [0.0, 1.0, 0.0])
        return so3_exp(math.pi * perp / np.linalg.norm(perp))
    return so3_exp(c / s * math.atan2(s, d))


def _yaw(theta) -> np.ndarray:
    c, s = math.cos(theta), math.sin(theta)
    return np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])


def make_targets(skeleton, clip, robot, mapping, up=None, contact_options=None) -> Targets:
    """The per-frame targets of ``mapping``'s bodies (see the module docstring)."""
    from ..animation import detect_contacts, detect_up_axis
    from ..spatial import rpy_to_matrix

    bodies = mapping.bodies
    B = len(bodies)
    feet_src = [b.source for b in bodies if b.role == "foot"]
    up = up or mapping.up or detect_up_axis(skeleton, clip, feet_src or None)
    A = _UP_ROT[up]
    # source and robot at rest, and the source over the clip
    # the source's rest: every rotation channel 0; position channels below the root keep frame 0's
    # values (files with 6 channels on every joint carry their bone lengths there)
    qs0 = np.where(clip.rotation_mask, 0.0, clip.frames[0])
    root_node = next(i for i, p in enumerate(clip.parents) if p < 0)
    qs0[:len(clip.channels[root_node])] = 0.0
    qr0 = robot_rest(robot)
    Ts0 = np.stack([skeleton.fk(qs0, b.source) for b in bodies])
    Tr0 = np.stack([robot.fk(qr0, b.link) for b in bodies])
    ps0 = Ts0[:, :3, 3] @ A.T
    pr0 = Tr0[:, :3, 3]
    # nearest mapped ancestor of every body
    index = {b.source: i for i, b in enumerate(bodies)}
    parent = np.full(B, -1)
    for i, b in enumerate(bodies):
        j = clip.parents[clip.names.index(b.source)]
        while j >= 0 and clip.names[j] not in index:
            j = clip.parents[j]
        parent[i] = index[clip.names[j]] if j >= 0 else -1
    root = next(i for i, b in enumerate(bodies) if b.role == "root")
    if parent[root] != -1:
        raise ModelError(f"mapping: the root body's joint {bodies[root].source!r} is below another mapped joint "
                         f"({bodies[parent[root]].source!r}); the root must be the top mapped joint")
    feet = [i for i, b in enumerate(bodies) if b.role == "foot"]
    # root scale: heights of the root above the feet at rest; else the mean segment scale
    scale = np.ones(B)
    for i in range(B):
        a = parent[i]
        if a < 0:
            continue
        ls = np.linalg.norm(ps0[i] - ps0[a])
        lr = np.linalg.norm(pr0[i] - pr0[a])
        scale[i] = lr / ls if ls > 1e-9 * max(1.0, np.abs(ps0).max()) else np.nan
    if feet:
        hs = ps0[root, 2] - ps0[feet, 2].mean()
        hr = pr0[root, 2] - pr0[feet, 2].mean()
        if not hs > 0 or not hr > 0:
            other = "z" if up == "y" else "y"
            raise ModelError(f"retarget: the root {bodies[root].source!r} is not above the feet at rest along the "
                             f"clip's up axis {up!r} (source {hs:.3g}, robot {hr:.3g}); if the clip is {other}-up, "
                             f"pass up={other!r} (invkin retarget --up {other})")
        scale[root] = hr / hs
    else:
        scale[root] = float(np.nanmean(np.delete(scale, root))) if B > 1 else 1.0
    scale = np.where(np.isnan(scale), scale[root], scale)
    # heading: the yaw that best turns the source's rest layout onto the robot's (2-D Procrustes)
    ds = (ps0 - ps0[root])[:, :2]
    dr = (pr0 - pr0[root])[:, :2]
    yaw = math.atan2(float(np.sum(ds[:, 0] * dr[:, 1] - ds[:, 1] * dr[:, 0])), float(np.sum(ds * dr)))
    Y = _yaw(yaw)
    # rotation offsets O_b = (Y A Rs0)^T M_b Rr0
    O = np.empty((B, 3, 3))
    for i, b in enumerate(bodies):
        M = np.eye(3)
        a = parent[i]
        if a >= 0 and b.role != "root":
            vs = Y @ (ps0[i] - ps0[a])
            vr = pr0[i] - pr0[a]
            if np.linalg.norm(vs) > 1e-9 and np.linalg.norm(vr) > 1e-9:
                M = _shortest_rotation(vr, vs)
        O[i] = (Y @ A @ Ts0[i, :3, :3]).T @ M @ Tr0[i, :3, :3] @ rpy_to_matrix(b.rotation_offset_rpy)
    # positions: the root scaled, then segment by segment (parents come first in file order);
    # a body hanging from a branch point of the map (pelvis, chest) sits where the robot's own
    # geometry puts it, carried by the parent's rotation target (hips and shoulders are placed
    # differently in every body: only the limbs below them take the source's directions)
    F = clip.n_frames
    # the source's positions and rotation targets body by body (the (F, B, 4, 4) poses of every body
    # at once, built from a list, were 3.6 kB a frame at the peak)
    psw = np.empty((F, B, 3))
    R = np.empty((F, B, 3, 3))
    for i, b in enumerate(bodies):
        Ts = skeleton.fk(clip.frames, b.source)  # (F, 4, 4)
        psw[:, i] = Ts[:, :3, 3] @ A.T
        R[:, i] = A @ Ts[:, :3, :3] @ O[i]
    del Ts
    n_children = np.bincount(parent[parent >= 0], minlength=B)
    p = np.empty((F, B, 3))
    order = sorted(range(B), key=lambda i: clip.names.index(bodies[i].source))
    for i in order:
        a = parent[i]
        if a < 0:
            p[:, i] = scale[i] * psw[:, i]
        elif n_children[a] >= 2:
            v = Tr0[a, :3, :3].T @ (pr0[i] - pr0[a])  # the robot's rest offset in the parent's frame
            p[:, i] = p[:, a] + R[:, a] @ v
        else:
            p[:, i] = p[:, a] + scale[i] * (psw[:, i] - psw[:, a])
        off = np.asarray(bodies[i].position_offset)
        if np.any(off):
            p[:, i] += np.einsum("fij,j->fi", R[:, i] @ O[i].T, off)  # A R_s(b): the source's rotation
    # contacts on the source, the floor, holds
    contacts, sole, sole_h = {}, {}, {}
    contact = np.zeros((F, B), dtype=bool)
    opts = dict(contact_options or {})
    for i in feet:
        cs = detect_contacts(skeleton, clip, bodies[i].source, up=up, **opts) if clip.frame_time > 0 else []
        contacts[i] = [(c.start, c.stop) for c in cs]
        for s, e in contacts[i]:
            contact[s:e, i] = True
        pts = sole_points(robot, bodies[i].link)
        if not len(pts):
            _no_sole(robot, bodies[i])
        sole[i] = pts
        # height of the link frame above the floor when the foot stands flat at rest
        Tl = Tr0[i]
        sole_h[i] = float(-(pts[:, :3] @ Tl[:3, :3].T[:, 2] - pts[:, 3]).min()) if len(pts) else 0.0
    if feet:
        gaps = np.concatenate([sole_h[i] - p[contact[:, i], i, 2] for i in feet])
        if gaps.size == 0:
            gaps = np.array([min(sole_h[i] - p[:, i, 2].min() for i in feet)])
        p[:, :, 2] += float(np.median(gaps))
    else:
        p[:, :, 2] -= p[:, :, 2].min()
    for i in feet:
        low = p[:, i, 2] < sole_h[i]
        p[low, i, 2] = sole_h[i]
        for s, e in contacts[i]:
            Rh = R[s, i] @ Tr0[i, :3, :3].T  # the target's turn away from the rest orientation
            psi = math.atan2(Rh[1, 0] - Rh[0, 1], Rh[0, 0] + Rh[1, 1])
            R[s:e, i] = _yaw(psi) @ Tr0[i, :3, :3]
            p[s:e, i, :2] = p[s, i, :2]
            p[s:e, i, 2] = sole_h[i]
    return Targets(np.ascontiguousarray(p), np.ascontiguousarray(R), contact, scale, up, contacts, sole, sole_h)
