"""Two-bone IK on a named limb of a skeleton: joint rotations, pole target and angle, stretch, soft reach.

A limb is three frames of a :class:`~invkin.Robot`: the upper joint ``J1`` (hip, shoulder), the middle
joint ``J2`` (knee, elbow) and the tip ``J3`` (ankle, wrist). Each of ``J1`` and ``J2`` turns about its
own position through its rotation joints: three revolute channels about distinct axes (a BVH or glTF
joint: internal nodes ``J.Zrotation → J.Xrotation → J`` with no offset between them) or one ball
joint. Tip positions come from :func:`~invkin.two_bone_3d` (law of cosines, soft reach); the rotations
that put the bones there are:

1. the knee turns about its current hinge ``h = b1 × b2`` (``b1 = J2 − J1``, ``b2 = J3 − J2``; for a
   straight limb ``h = n × b1`` with ``n`` the pole direction) by ``Δ = φ' − φ``, the new bend angle
   minus the current one, so a 3-DOF knee keeps its twist: ``R2 ← Rot(h, Δ) R2`` (world);
2. the hip turns by the rotation ``R_Δ`` that maps the triangle ``(b1, b1 + Rot(h, Δ) b2)`` onto
   ``(E − J1, H − J1)`` (two vector pairs of equal lengths and angle → one rotation):
   ``R1 ← R_Δ R1``, ``R2 ← R_Δ Rot(h, Δ) R2``;
3. local rotations ``L = (T_above · origin)ᵀ_R · R`` become channel angles: Euler angles for the
   channels' axis order (the solution nearest the current angles, modulo 2π, of the two Tait–Bryan
   solutions), or the rotation vector of a ball joint. The tip's own rotation channels are left as
   they are (its world orientation follows the knee).

Pole: a *point* (Blender's and Unity's pole target): the knee bends toward it; ``pole_angle`` [rad]
turns the bend plane about the hip→target axis. Without a pole the current bend plane is kept.
Stretch: beyond reach the bones may lengthen up to ``max_stretch`` × (``stretch=True``); the rotations
are those of the stretched triangle and :attr:`LimbSolution.stretch` says by how much to scale the
bones (a rig applies it as a scale; a Robot's bones are rigid, so ``q`` alone reaches ``l1 + l2``).
Limits: the two joints' new entries are projected into the robot's limits (``robot.with_limits``:
swing cone and twist by :func:`invkin.model.limits.project_limits`, then the ``[lower, upper]`` box of
each entry); when that moves them, :attr:`LimbSolution.limited` is True and ``reached`` False. A bone of
zero length (CMU's Hips → LHipJoint) is a SolverError naming it: it has no direction to turn.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..errors import FrameError, GoalError, SolverError, closest_names
from ..kinematics import kernels as K
from ..model.euler import euler_from_matrix
from ..model.euler import frame_groups as _frame_groups
from ..model.euler import rot as _rot
from .analytic import two_bone_3d as _two_bone_points

__all__ = ["LimbSolution", "two_bone_limb", "limb_joints", "two_bone_3d"]


@dataclass(frozen=True)
class LimbSolution:
    """Result of :func:`two_bone_limb`.

    Attributes:
        q: (dof,) the configuration with the limb's two joints turned (every other entry as given).
        rotations: {joint frame name: (3, 3) new world rotation} for the upper and middle joints.
        positions: (3, 3) world positions of upper joint, middle joint and tip after the solve [m]
            (with stretch: those of the stretched limb).
        stretch: the bone scale used (1.0 unless ``stretch=True`` and the target is out of reach).
        reached: True when the tip lands on the target within ``1e-9 × limb length`` (False when
            ``limited``).
        error: distance from the tip to the target [m].
        limited: True when the robot's joint limits (:meth:`~invkin.Robot.with_limits`: swing cone,
            twist, per-entry boxes) bound: the limb's joints were projected into them, and
            ``rotations``, ``positions`` (rigid bones, ``stretch`` 1.0) and ``error`` are those of the
            projected pose.
    """

    q: np.ndarray
    rotations: dict
    positions: np.ndarray
    stretch: float
    reached: bool
    error: float
    limited: bool = False


def _frame_node(robot, name) -> int:
    try:
        return robot.frame_index(name)
    except FrameError:
        raise FrameError(f"two_bone_3d: robot {robot.name!r} has no frame {name!r}; closest: "
                         f"{closest_names(str(name), robot.frame_names)}") from None


def limb_joints(robot, tip) -> tuple:
    """(upper, middle, tip) frame names of the limb ending at ``tip``: the nearest two frames above it
    that have rotation joints (for a BVH foot: hip and knee, e.g. LeftUpLeg, LeftLeg, LeftFoot)."""
    t = _frame_node(robot, tip)
    found = []
    i = int(robot.parent[t])
    while i >= 0 and len(found) < 2:
        if robot.is_frame[i] and _frame_groups(robot, i):
            found.append(i)
        i = int(robot.parent[i])
    if len(found) < 2:
        raise SolverError(f"two_bone_3d: fewer than two rotating joints above {robot.node_names[t]!r} on robot "
                          f"{robot.name!r}")
    return robot.node_names[found[1]], robot.node_names[found[0]], robot.node_names[t]


def _frame_of(u, v) -> np.ndarray:
    e1 = u / np.linalg.norm(u)
    w = v - (v @ e1) * e1
    nw = np.linalg.norm(w)
    if nw < 1e-12 * max(1.0, np.linalg.norm(v)):
        k = int(np.argmin(np.abs(e1)))
        w = np.eye(3)[k] - e1[k] * e1
        nw = np.linalg.norm(w)
    e2 = w / nw
    return np.stack([e1, e2, np.cross(e1, e2)], axis=1)


def _angle(u, v) -> float:
    return math.atan2(np.linalg.norm(np.cross(u, v)), float(u @ v))


def _set_joint(robot, q, nodes, Ts, R_world):
    """Write the local rotation that gives ``nodes``' last frame the world rotation ``R_world``."""
    first = nodes[0]
    p = int(robot.parent[first])
    R_above = (Ts[p][:3, :3] if p >= 0 else np.eye(3)) @ robot.origin[first][:3, :3]
    L = R_above.T @ R_world
    if len(nodes) == 1 and robot.joint_type[first] == K.BALL:
        from ..spatial import so3_log
        c = int(robot.qidx[first])
        q[c:c + 3] = so3_log(L)
        return
    axes = []
    for k, i in enumerate(nodes):
        if k and np.any(robot.origin[i][:3, :3] != np.eye(3)):
            raise SolverError(f"two_bone_3d: joint {robot.node_joint_names[i]!r} has a rotated origin between "
                              f"rotation channels; use method='lm'")
        a = np.abs(robot.axis[i])
        if robot.joint_type[i] != K.REVOLUTE or np.count_nonzero(a) != 1:
            raise SolverError(f"two_bone_3d: joint {robot.node_joint_names[i]!r} is not a rotation about x, y "
                              f"or z; use method='lm'")
        axes.append(int(np.argmax(a)))
    if len(nodes) != 3 or len(set(axes)) != 3:
        raise SolverError(f"two_bone_3d: joint {robot.node_names[nodes[-1]]!r} needs three rotation channels "
                          f"about x, y and z (or one ball joint) to take any rotation; it has "
                          f"{[robot.node_joint_names[i] for i in nodes]}; use method='lm'")
    order = "".join("XYZ"[k] for k in axes)
    sg = np.array([np.sign(robot.axis[i][axes[k]]) for k, i in enumerate(nodes)])
    a = euler_from_matrix(L, order)
    cands = (a, np.array([a[0] + math.pi, math.pi - a[1], a[2] + math.pi]))
    best = None
    for th in cands:
        th = th * sg  # a negative axis turns the other way
        qs = []
        for k, i in enumerate(nodes):
            c = int(robot.qidx[i])
            v = (th[k] - robot.offset[i]) / robot.multiplier[i]
            period = 2 * math.pi / abs(robot.multiplier[i])
            qs.append(q[c] + math.remainder(v - q[c], period))
        d = sum((v - q[int(robot.qidx[i])]) ** 2 for v, i in zip(qs, nodes))
        if best is None or d < best[0]:
            best = (d, qs)
    for v, i in zip(best[1], nodes):
        q[int(robot.qidx[i])] = v


def two_bone_limb(robot, q, tip, target, *, pole=None, pole_angle: float = 0.0, soft=None,
                  stretch: bool = False, max_stretch: float = 1.25, limb=None) -> LimbSolution:
    """Two-bone IK on the limb ending at frame ``tip`` (see the module docstring).

    Args:
        robot, q: the skeleton and its current configuration (dof,).
        tip: the end frame (e.g. "LeftFoot"); the limb is :func:`limb_joints` of it unless ``limb``
            names ``(upper, middle, tip)``.
        target: (3,) world position for the tip [m].
        pole: (3,) world *point* the middle joint bends toward; None keeps the current bend plane.
        pole_angle: turn of the bend plane about the upper-joint→target axis [rad].
        soft: soft-reach length [m] (see :func:`~invkin.two_bone_3d`); None: hard reach.
        stretch: let the bones lengthen (up to ``max_stretch`` ×) toward an out-of-reach target.
    """
    q = robot.check_q(q).copy()
    if q.ndim != 1:
        raise SolverError(f"two_bone_3d on a limb takes one configuration (dof,), got shape {q.shape}")
    names = tuple(limb) if limb is not None else limb_joints(robot, tip)
    if len(names) != 3:
        raise SolverError(f"two_bone_3d: limb must name (upper, middle, tip), got {limb!r}")
    n1, n2, n3 = (_frame_node(robot, nm) for nm in names)
    g1, g2 = _frame_groups(robot, n1), _frame_groups(robot, n2)
    if not g1 or not g2:
        bad = names[0] if not g1 else names[1]
        raise SolverError(f"two_bone_3d: frame {bad!r} has no rotation joint of its own")
    t = np.asarray(target, float)
    if t.shape != (3,) or not np.all(np.isfinite(t)):
        raise SolverError(f"two_bone_3d: target must be 3 finite numbers, got {target!r}")
    if not (math.isfinite(max_stretch) and max_stretch >= 1.0):
        raise SolverError(f"two_bone_3d: max_stretch must be >= 1, got {max_stretch!r}")
    Ts = robot.fk_all_array(q)
    P1, P2, P3 = Ts[n1][:3, 3], Ts[n2][:3, 3], Ts[n3][:3, 3]
    b1, b2 = P2 - P1, P3 - P2
    l1, l2 = float(np.linalg.norm(b1)), float(np.linalg.norm(b2))
    for a, b, ell in ((names[0], names[1], l1), (names[1], names[2], l2)):
        if not ell > 1e-12 * (l1 + l2):  # a bone of no length has no direction to turn
            raise SolverError(f"two_bone_3d: limb {names}: the bone {a!r} -> {b!r} has zero length (the two "
                              f"frames coincide), so the limb has no two bones to bend; choose another tip, "
                              f"or name the limb with limb=(upper, middle, tip)")
    u = t - P1
    # bend direction n: toward the pole point, or the current knee's side of the hip→tip line
    if pole is not None:
        pv = np.asarray(pole, float)
        if pv.shape != (3,) or not np.all(np.isfinite(pv)):
            raise SolverError(f"two_bone_3d: pole must be a point (3 finite numbers), got {pole!r}")
        n = pv - P1
    else:
        f = P3 - P1
        n = b1 - (b1 @ f) / max(f @ f, 1e-300) * f
        if np.linalg.norm(n) < 1e-9 * max(l1, 1e-300):  # straight: keep the hinge's bend side
            h0 = np.cross(b1, b2)
            n = np.cross(b1, h0) if np.linalg.norm(h0) > 0 else np.zeros(3)
    if np.linalg.norm(n - (n @ u) / max(u @ u, 1e-300) * u) <= 1e-12 * max(np.linalg.norm(n), 1e-300):
        n = _frame_of(u if np.linalg.norm(u) > 0 else b1, np.zeros(3))[:, 1]  # any bend side: no pole, straight
    if pole_angle:
        n = _rot(u, float(pole_angle)) @ n
    k = 1.0
    b = float(np.linalg.norm(u))
    if stretch and b > l1 + l2 > 0:
        k = min(b / (l1 + l2), float(max_stretch))
    E, H = _two_bone_points(P1, l1 * k, l2 * k, t, n, soft=soft)
    E, H = np.asarray(E, float), np.asarray(H, float)
    # 1. knee about its hinge
    h = np.cross(b1, b2)
    if np.linalg.norm(h) < 1e-12 * max(l1 * l2, 1e-300):
        h = np.cross(n, b1)
    phi, phi_new = _angle(b1, b2), _angle(E - P1, H - E)
    Rk = _rot(h, phi_new - phi)
    f_src = b1 + Rk @ b2
    # 2. hip: map (b1, f_src) onto (E - P1, H - P1)
    Rd = _frame_of(E - P1, H - P1) @ _frame_of(b1, f_src).T
    R1 = Rd @ Ts[n1][:3, :3]
    R2 = Rd @ Rk @ Ts[n2][:3, :3]
    _set_joint(robot, q, g1, Ts, R1)
    Ts2 = robot.fk_all_array(q)
    _set_joint(robot, q, g2, Ts2, R2)
    limited = _project_limb(robot, q, g1 + g2)
    Tf = robot.fk_all_array(q)
    tipp = Tf[n3][:3, 3]
    err = float(np.linalg.norm(tipp - t))
    q.setflags(write=False)
    if limited:  # the pose the limits allow, as forward kinematics gives it (rigid bones)
        return LimbSolution(q=q, rotations={names[0]: Tf[n1][:3, :3], names[1]: Tf[n2][:3, :3]},
                            positions=np.stack([Tf[n1][:3, 3], Tf[n2][:3, 3], tipp]), stretch=1.0, reached=False,
                            error=err, limited=True)
    positions = np.stack([P1, E, H]) if k != 1.0 else np.stack([Tf[n1][:3, 3], Tf[n2][:3, 3], tipp])
    return LimbSolution(q=q, rotations={names[0]: R1, names[1]: R2}, positions=positions, stretch=k,
                        reached=err <= 1e-9 * max(l1 + l2, 1e-300) or (k != 1.0 and
                                                                       np.linalg.norm(H - t) <= 1e-9 * b),
                        error=err if k == 1.0 else float(np.linalg.norm(H - t)))


def _project_limb(robot, q, nodes) -> bool:
    """The limb joints' entries of ``q`` (in place) projected into the robot's limits: swing cone and
    twist (:func:`invkin.model.limits.project_limits`), then the box ``[lower, upper]`` per entry;
    every other entry as given. True when that moved any entry."""
    from ..model.limits import project_limits

    cols = np.array([c for i in nodes for c in range(int(robot.qidx[i]),
                                                     int(robot.qidx[i]) + (3 if robot.joint_type[i] == K.BALL else 1))],
                    dtype=np.int64)
    qp = project_limits(robot, q)
    new = np.clip(qp[cols], robot.lower[cols], robot.upper[cols])
    if np.array_equal(new, q[cols]):
        return False
    q[cols] = new
    return True


def two_bone_3d(shoulder, l1, l2, target, pole=None, soft=None, **limb):
    """``invkin.two_bone_3d``: the closed form on points (:func:`invkin.solvers.analytic.two_bone_3d`:
    ``(elbow, hand)`` positions), or on a skeleton's limb when the first argument is a Robot:
    ``two_bone_3d(robot, q, "LeftFoot", target, pole=point, pole_angle=0.0, soft=None, stretch=False)``
    returns a :class:`LimbSolution` with the joint rotations and the new ``q`` (:func:`two_bone_limb`)."""
    if hasattr(shoulder, "fk_all_array") and hasattr(shoulder, "joint_names"):  # a Robot
        return two_bone_limb(shoulder, l1, l2, target, pole=pole, soft=soft, **limb)
    if limb:
        raise GoalError(f"two_bone_3d: options {sorted(limb)} apply to a skeleton's limb only "
                          f"(two_bone_3d(robot, q, tip, target, ...))")
    if pole is None:
        raise GoalError("two_bone_3d: pole (a bend direction, (..., 3)) is required for points")
    return _two_bone_points(shoulder, l1, l2, target, pole, soft)
