"""RetargetReport: what a retargeted motion got right and wrong, measured on the motion itself.

Every figure is recomputed from the output configurations with forward kinematics and the
collision model (``robot.collision``: capsules that enclose the link shapes), not read from the
solver's rows:

* goal errors: per frame and body, the distance [m] and angle [rad] to the targets;
* foot sliding: per contact, the largest horizontal distance [m] the foot link travels from where
  the contact began (GMR's paper measures sliding the same way, over contact frames);
* ground penetration: per frame, the deepest sole point of a foot below the floor z = 0 [m]
  (:func:`invkin.retarget.scale.sole_points`: the lowest points of the foot's collision capsules);
* self-collision: per frame, the number of the robot's collision pairs
  (:func:`invkin.collision_pairs`) whose capsules overlap (signed distance < 0) by more than
  1 mm beyond what the retargeting allows them (:func:`invkin.retarget.scale.rest_clearance`: a
  pair that overlaps at rest may overlap as much, no more; capsules enclose the meshes: G1's hanging arms
  overlap its torso's capsule where the meshes are 9 mm apart; tests check the meshes with coal);
* joint limits: entries outside [lower, upper] (more than 1e-9);
* joint velocity and acceleration: largest |Δq|·fps [rad/s] and |Δ²q|·fps² [rad/s²] over the
  joints (floating base excluded), velocity-limit violations, the largest per-frame jump [rad];
* fallbacks: frames that needed the kernel's extra iterations, those where a hard goal or an
  inequality was still not met, and those where the velocity bound cut the answer.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["RetargetReport", "measure"]

MEASURE_CHUNK = 64  # frames whose FK (every node) is held at once


@dataclass(frozen=True, eq=False)
class RetargetReport:
    """Quality figures of a retargeted motion (see the module docstring; arrays per frame)."""

    bodies: tuple
    position_error: np.ndarray     # (F, B) [m], NaN where the body has no position row
    rotation_error: np.ndarray     # (F, B) [rad], NaN where the body has no rotation row
    contacts: tuple                # ((foot link, start, stop), ...)
    foot_slide: np.ndarray         # (n_contacts,) [m] per contact
    penetration: np.ndarray        # (F,) [m] >= 0
    self_collisions: np.ndarray    # (F,) int: overlapping pairs
    limit_violations: int
    velocity_violations: int
    max_joint_velocity: float      # [rad/s]
    max_joint_acceleration: float  # [rad/s^2]
    max_joint_jump: float          # [rad] per frame
    fallback_frames: tuple
    missed_frames: tuple
    bounded_frames: tuple          # frames where the velocity bound cut the solve's answer
    flags: np.ndarray = None       # (F,) the kernel's bits per frame (kernel.F_*), zeros when not solved here
    seconds: float = 0.0           # the solve's wall time [s]

    @property
    def n_frames(self) -> int:
        return int(self.penetration.shape[0])

    @property
    def max_foot_slide(self) -> float:
        return float(self.foot_slide.max(initial=0.0))

    @property
    def max_penetration(self) -> float:
        return float(self.penetration.max(initial=0.0))

    @property
    def self_collision_frames(self) -> int:
        return int(np.count_nonzero(self.self_collisions))

    @property
    def frames_per_second(self) -> float:
        return self.n_frames / self.seconds if self.seconds > 0 else float("inf")

    def summary(self) -> dict:
        """The headline figures as plain numbers (JSON-ready)."""
        pe = self.position_error
        return {"frames": self.n_frames, "fps_solve": round(self.frames_per_second, 1),
                "mean_position_error_m": float(np.nanmean(pe)) if np.isfinite(pe).any() else 0.0,
                "contacts": len(self.contacts), "max_foot_slide_m": self.max_foot_slide,
                "max_penetration_m": self.max_penetration, "self_collision_frames": self.self_collision_frames,
                "limit_violations": self.limit_violations, "velocity_violations": self.velocity_violations,
                "max_joint_velocity": self.max_joint_velocity, "max_joint_acceleration": self.max_joint_acceleration,
                "max_joint_jump": self.max_joint_jump, "fallback_frames": len(self.fallback_frames),
                "missed_frames": len(self.missed_frames), "bounded_frames": len(self.bounded_frames)}

    def __repr__(self) -> str:
        s = self.summary()
        return (f"RetargetReport({s['frames']} frames, slide ≤ {s['max_foot_slide_m'] * 1000:.1f} mm over "
                f"{s['contacts']} contacts, penetration ≤ {s['max_penetration_m'] * 1000:.1f} mm, "
                f"{s['self_collision_frames']} frames in self-collision, {s['limit_violations']} limit violations, "
                f"jump ≤ {s['max_joint_jump']:.3f} rad, {s['fallback_frames']} fallbacks)")


def _self_collisions(robot, Tall, count):
    """Self-collision pair counts into count (F,) from the link capsules (overlap beyond the rest
    pose's), for the FK Tall (F, n_nodes, 4, 4)."""
    from .scale import rest_clearance

    from ..collision import kernels as CK
    from ..collision.distance import collision_tables

    t = collision_tables(robot)
    links, link_caps, caps, bounds, pairs = t[:5]
    wcaps, wb, out = t[11], t[12], t[13]
    count[:] = 0
    rest = rest_clearance(robot)
    allowed = np.minimum(0.0, rest[links[pairs[:, 0]], links[pairs[:, 1]]]) - 1e-3 if len(pairs) else None
    if len(pairs):
        for f in range(Tall.shape[0]):
            CK.world_capsules(Tall[f], links, link_caps, caps, bounds, wcaps, wb)
            CK.self_distances(wcaps, wb, link_caps, pairs, 0.0, out)
            count[f] = int(np.count_nonzero(out[:, 0] < allowed))


def measure(robot, q, fps, bodies, targets, has_pos, has_rot, flags=None, seconds=0.0) -> RetargetReport:
    """The report of configurations q (F, dof) against ``targets`` (a scale.Targets)."""
    from .kernel import F_BOUND, F_FALLBACK, F_HARD_MISSED, F_INEQ_MISSED

    q = np.asarray(q, dtype=np.float64)
    F = q.shape[0]
    nodes = [robot.frame_index(b.link) for b in bodies]
    B = len(nodes)
    pe = np.empty((F, B))
    re = np.empty((F, B))
    p_feet = np.empty((F, B, 2))  # the bodies' horizontal positions (the feet's slide)
    count = np.zeros(F, dtype=np.int64)
    pen = np.zeros(F)
    # the FK of every node, a chunk of frames at a time: the whole clip's (G1: 5.1 kB a frame) was
    # the report's and the retargeting's peak memory (11.3 kB a frame on the CMU crouch clip)
    for a in range(0, F, MEASURE_CHUNK):
        b_ = min(F, a + MEASURE_CHUNK)
        Tall = robot.fk_all_array(q[a:b_]).reshape(b_ - a, robot.n_nodes, 4, 4)
        T = Tall[:, nodes]  # (chunk, B, 4, 4)
        pe[a:b_] = np.linalg.norm(T[:, :, :3, 3] - targets.p[a:b_], axis=2)
        Rrel = np.einsum("fbji,fbjk->fbik", T[:, :, :3, :3], targets.R[a:b_])
        re[a:b_] = np.arccos(np.clip((np.trace(Rrel, axis1=2, axis2=3) - 1.0) / 2.0, -1.0, 1.0))
        p_feet[a:b_] = T[:, :, :2, 3]
        _self_collisions(robot, Tall, count[a:b_])
        for b, pts in targets.sole.items():
            if len(pts):
                z = np.einsum("fj,pj->fp", T[:, b, 2, :3], pts[:, :3]) + T[:, b, 2, 3:4] - pts[:, 3]
                pen[a:b_] = np.maximum(pen[a:b_], -z.min(axis=1))
    pe[:, ~np.asarray(has_pos, dtype=bool)] = np.nan
    re[:, ~np.asarray(has_rot, dtype=bool)] = np.nan
    contacts, slide = [], []
    for b, spans in targets.contacts.items():
        for s, e in spans:
            P = p_feet[s:e, b]
            contacts.append((bodies[b].link, int(s), int(e)))
            slide.append(float(np.linalg.norm(P - P[0], axis=1).max()) if len(P) else 0.0)
    lo, hi = robot.lower, robot.upper
    lim = int(np.count_nonzero((q < lo - 1e-9) | (q > hi + 1e-9)))
    joints = slice(6, None) if robot.floating else slice(None)
    qj = q[:, joints]
    v = np.abs(np.diff(qj, axis=0)) * fps
    a = np.abs(np.diff(qj, 2, axis=0)) * fps * fps
    vl = robot.velocity_limit[joints]
    vviol = int(np.count_nonzero(v > vl * (1 + 1e-6) + 1e-9)) if len(v) else 0
    flags = np.zeros(F, dtype=np.int64) if flags is None else np.asarray(flags)
    return RetargetReport(
        bodies=tuple(b.link for b in bodies), position_error=pe, rotation_error=re, contacts=tuple(contacts),
        foot_slide=np.array(slide), penetration=pen, self_collisions=count, limit_violations=lim,
        velocity_violations=vviol, max_joint_velocity=float(v.max(initial=0.0)),
        max_joint_acceleration=float(a.max(initial=0.0)), max_joint_jump=float(v.max(initial=0.0)) / fps,
        fallback_frames=tuple(int(i) for i in np.nonzero(flags & F_FALLBACK)[0]),
        missed_frames=tuple(int(i) for i in np.nonzero(flags & (F_HARD_MISSED | F_INEQ_MISSED))[0]),
        bounded_frames=tuple(int(i) for i in np.nonzero(flags & F_BOUND)[0]), flags=flags,
        seconds=float(seconds))
