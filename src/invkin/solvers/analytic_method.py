"""Method ``analytic``: the closed-form two-bone solution (:func:`~invkin.two_bone_2d`, its scalar
form for one arm) as a solver.

Supported problems (``check`` raises :class:`~invkin.SolverError` for anything else):

* exactly one :class:`~invkin.Position` goal (no Orientation/Pose/Aim goal, no Posture bias);
* the goal frame is moved by exactly two joints, both revolute (continuous or limited), not
  mimic-coupled, with parallel (or anti-parallel) axes: a planar arm such as ``planar2``
  (shoulder and elbow about +Z). Fixed joints anywhere on the path and any number of joints on
  *other* branches of the tree are fine (they are left as they are).

* a skeleton limb (BVH or glTF leg or arm): the goal frame's two nearest rotating joints above it
  (hip and knee) each turn about their own position through three rotation channels about x, y, z
  or one ball joint; the goal frame's own rotations are left alone. Solved in 3-D by
  :func:`~invkin.solvers.two_bone_limb.two_bone_limb` keeping the current bend plane (``q0``'s),
  so the knee keeps its side and twist.

Not supported: prismatic joints on the path, other moving joints, two revolute joints whose axes are
not parallel and are not a skeleton limb. Use ``lm`` for those.

Geometry. With ``a`` the first joint's axis, the point's component along ``a`` cannot change
(both joints rotate about ``a``), so the solve happens in the plane perpendicular to ``a`` through
the first joint: the upper bone runs from the first joint's axis to the second's
(``l1``), the lower bone from the second joint's axis to the goal frame (``l2``), both measured
in that plane from the model (not assumed). A target off that plane gets the closest point
(the in-plane solution; the result is not converged). Out of reach the arm stretches toward
the target; too close it folds (see :mod:`invkin.solvers.analytic`).

Branches and limits. Both solutions (elbow on either side) are computed and each angle is
shifted by whole turns into the joint's limits where possible. ``elbow_up=True`` (default)
prefers the elbow on the counter-clockwise side of the shoulder→target line seen from the tip of
the first joint's axis (``θ2 ≤ 0`` in ``two_bone_2d``'s terms); ``elbow_up=False`` the other;
``elbow_up=None`` the branch nearer the start configuration ``q0``. If the preferred branch
violates a limit the other one is used when it fits; if neither fits, both are clamped into
the limits and the one whose hand lands closer to the target is returned (not converged unless
it still meets the tolerance). One call computes the answer: ``iterate`` reports CONVERGED only
if the goal is met within ``position_tolerance``, else STALLED; the method never restarts.
"""
from __future__ import annotations

import math

import numpy as np

from ..errors import SolverError
from ..goals import KIND_POSITION
from ..kinematics import kernels as K
from ._common import CONVERGED, STALLED, goal_errors
from .analytic import two_bone_2d_scalar
from .two_bone_limb import _frame_groups, limb_joints, two_bone_limb

NAME = "analytic"
JOINT_TYPES = ("revolute", "continuous", "ball")

_PARALLEL_TOL = 1e-9  # |a1 x a2'| above this: axes not parallel
_KIND_NAMES = {1: "orientation", 2: "axis orientation", 3: "aim"}
_TYPE_NAMES = {K.FIXED: "fixed", K.REVOLUTE: "revolute", K.PRISMATIC: "prismatic", K.BALL: "ball"}


def _chain(problem) -> dict:
    """Analyse (and cache in ``problem.scratch``) the two-joint planar chain of the goal."""
    cached = problem.scratch.get(NAME)
    if cached is not None:
        return cached
    robot = problem.robot
    G = problem.gnode.shape[0]
    if problem.w_posture > 0.0:
        raise SolverError("analytic: a Posture goal cannot bias a closed-form solution; drop it or use "
                          "method='lm'")
    for g in range(G):
        if problem.gkind[g] != KIND_POSITION:
            kind = _KIND_NAMES.get(int(problem.gkind[g]), "non-position")
            raise SolverError(f"analytic supports one Position goal only; got an {kind} goal on frame "
                              f"{problem.goal_frames[g]!r} (two revolute joints cannot also set an "
                              f"orientation); use method='lm'")
    if G != 1:
        raise SolverError(f"analytic solves exactly one Position goal (a two-bone arm), got {G} (frames "
                          f"{problem.goal_frames}); use method='lm' for several goals")
    node = int(problem.gnode[0])
    # the geometry depends on the (immutable) robot and the frame only
    info = robot.memo(("analytic_chain", node), lambda: _analyse(robot, node))
    problem.scratch[NAME] = info
    return info


def _analyse(robot, node: int) -> dict:
    try:
        return _analyse_planar(robot, node)
    except SolverError as planar:
        try:
            return _analyse_limb(robot, node)
        except SolverError as limb:
            if all(robot.is_frame):  # not a skeleton: the planar message says what is supported
                raise planar from None
            raise limb from None


def _analyse_limb(robot, node: int) -> dict:
    """A skeleton limb (hip/knee groups of three rotation channels or ball joints): solved in 3-D by
    :func:`~invkin.solvers.two_bone_limb.two_bone_limb`, keeping the current bend plane."""
    names = limb_joints(robot, robot.node_names[node])
    groups = [set(_frame_groups(robot, robot.frame_index(nm))) for nm in names]
    path = robot.ancestors(node)
    moving = {i for i in path if robot.qidx[i] >= 0 and robot.joint_type[i] != K.FIXED}
    extra = moving - groups[0] - groups[1] - groups[2]
    if extra or not groups[0] or not groups[1]:
        raise SolverError(f"analytic: frame {robot.node_names[node]!r} is moved by joints outside the limb "
                          f"{names}: {[robot.node_joint_names[i] for i in sorted(extra)][:6]}...; solve the "
                          f"limb alone: robot.subchain({names[0]!r}, {names[2]!r}), or use "
                          f"ik.two_bone_3d(robot, q, {names[2]!r}, target) on the whole skeleton")
    for g in groups[:2]:
        ball = len(g) == 1 and all(robot.joint_type[i] == K.BALL for i in g)
        axes = {int(np.argmax(np.abs(robot.axis[i]))) for i in g if np.count_nonzero(robot.axis[i]) == 1}
        if not ball and not (len(g) == 3 and len(axes) == 3 and all(robot.joint_type[i] == K.REVOLUTE for i in g)):
            raise SolverError(f"analytic: a limb joint needs three rotation channels about x, y, z or one ball "
                              f"joint; {[robot.node_joint_names[i] for i in sorted(g)]} is neither")
    for i in groups[0] | groups[1]:
        if robot.mimic_leader[i]:
            raise SolverError(f"analytic: joint {robot.node_joint_names[i]!r} is mimic-coupled")
    return dict(limb=names)


def _analyse_planar(robot, node: int) -> dict:
    frame = robot.node_names[node]
    path = robot.ancestors(node)[::-1]  # root first
    moving = [i for i in path if robot.qidx[i] >= 0 and robot.joint_type[i] != K.FIXED]
    desc = ", ".join(f"{robot.node_joint_names[i]!r} ({_TYPE_NAMES.get(int(robot.joint_type[i]), '?')})"
                     for i in moving) or "none"
    if len(moving) != 2:
        raise SolverError(f"analytic needs the goal frame {frame!r} to be moved by exactly two revolute joints "
                          f"with parallel axes (a planar two-bone arm such as planar2); robot {robot.name!r} "
                          f"moves it with {len(moving)} joint(s): {desc}; use method='lm'")
    for i in moving:
        if robot.joint_type[i] != K.REVOLUTE:
            raise SolverError(f"analytic handles revolute joints only; joint {robot.node_joint_names[i]!r} of "
                              f"frame {frame!r} is {_TYPE_NAMES.get(int(robot.joint_type[i]), '?')}; use "
                              f"method='lm'")
        if robot.multiplier[i] == 0.0:
            raise SolverError(f"analytic: joint {robot.node_joint_names[i]!r} has multiplier 0")
    n1, n2 = moving
    if robot.qidx[n1] == robot.qidx[n2]:
        raise SolverError(f"analytic: joints {robot.node_joint_names[n1]!r} and {robot.node_joint_names[n2]!r} "
                          f"are mimic-coupled (one q entry); the two-bone form needs two free angles")
    # F1: world frame of joint 1 before its rotation; A: joint 1 (rotated) -> joint 2 (before its
    # rotation); B: joint 2 (rotated) -> goal frame. Everything on the path but n1, n2 is fixed.
    F1 = np.eye(4)
    A = np.eye(4)
    B = np.eye(4)
    stage = 0
    for i in path:
        if stage == 0:
            F1 = F1 @ robot.origin[i]
        elif stage == 1:
            A = A @ robot.origin[i]
        else:
            B = B @ robot.origin[i]
        if i == n1:
            stage = 1
        elif i == n2:
            stage = 2
    a1 = np.array(robot.axis[n1], dtype=float)
    a1 /= np.linalg.norm(a1)
    a2 = A[:3, :3] @ (np.array(robot.axis[n2], dtype=float) / np.linalg.norm(robot.axis[n2]))
    if np.linalg.norm(np.cross(a1, a2)) > _PARALLEL_TOL:
        raise SolverError(f"analytic: the axes of joints {robot.node_joint_names[n1]!r} and "
                          f"{robot.node_joint_names[n2]!r} are not parallel (angle "
                          f"{math.degrees(math.acos(min(1.0, abs(float(a1 @ a2))))):.3g} deg); only planar "
                          f"two-bone arms are supported; use method='lm'")
    s = 1.0 if a1 @ a2 > 0 else -1.0
    c3 = A[:3, 3]             # joint 2's axis point, in joint 1's rotated frame
    r3 = A[:3, :3] @ B[:3, 3]  # joint 2 -> goal frame, same frame
    # in-plane basis: e_x along the upper bone if it has one
    ex = None
    for v in (c3, r3, np.eye(3)[int(np.argmin(np.abs(a1)))]):
        w = v - (v @ a1) * a1
        if np.linalg.norm(w) > 1e-12 * max(1.0, np.linalg.norm(v)):
            ex = w / np.linalg.norm(w)
            break
    ey = np.cross(a1, ex)
    c = np.array([c3 @ ex, c3 @ ey])
    r = np.array([r3 @ ex, r3 @ ey])
    info = dict(n1=n1, n2=n2, c1=int(robot.qidx[n1]), c2=int(robot.qidx[n2]), F1inv=np.linalg.inv(F1),
                a1=a1, ex=ex, ey=ey, s=s, l1=float(np.hypot(*c)), l2=float(np.hypot(*r)),
                phi_c=math.atan2(c[1], c[0]), phi_r=math.atan2(r[1], r[0]),
                m1=float(robot.multiplier[n1]), o1=float(robot.offset[n1]),
                m2=float(robot.multiplier[n2]), o2=float(robot.offset[n2]))
    return info


def _check(problem):
    _chain(problem)


def _into_limits(v: float, lo: float, hi: float, period: float) -> float:
    """Shift v by whole periods into [lo, hi] where possible (else return v unchanged)."""
    if lo <= v <= hi:
        return v
    if not (math.isfinite(lo) or math.isfinite(hi)):
        return v
    base = lo if math.isfinite(lo) else hi - period
    w = v - period * math.floor((v - base) / period)
    if lo <= w <= hi:
        return w
    return v


def _branch(ch, t1: float, t2: float, lower, upper):
    """(q1, q2) for the two_bone_2d angles (t1, t2), shifted into the limits where possible."""
    th1 = t1 - ch["phi_c"]
    th2 = ch["s"] * (t2 - ch["phi_r"] + ch["phi_c"])
    q1 = (th1 - ch["o1"]) / ch["m1"]
    q2 = (th2 - ch["o2"]) / ch["m2"]
    c1, c2 = ch["c1"], ch["c2"]
    q1 = _into_limits(q1, lower[c1], upper[c1], 2.0 * math.pi / abs(ch["m1"]))
    q2 = _into_limits(q2, lower[c2], upper[c2], 2.0 * math.pi / abs(ch["m2"]))
    return q1, q2


def _iterate(problem, q, max_iter, state, options):
    if max_iter < 1:
        return STALLED
    ch = _chain(problem)
    robot = problem.robot
    if "limb" in ch:
        q[:] = robot.clamp(two_bone_limb(robot, q, ch["limb"][2], problem.gvec[0], limb=ch["limb"]).q)
        perr, _ = goal_errors(robot.node_table, robot.node_params, robot.origin, q, problem.gnode, problem.gkind,
                              problem.gvec, problem.gR, problem.gaxis, problem.gw)
        state[1] += 1
        state[2] = perr
        state[3] = 0.0
        return CONVERGED if perr <= problem.tol_p else STALLED
    elbow_up = options.get("elbow_up", True)
    if elbow_up is not None and not isinstance(elbow_up, (bool, np.bool_)):
        raise SolverError(f"analytic: elbow_up must be True, False or None (nearest to q0), got {elbow_up!r}")
    t = ch["F1inv"][:3, :3] @ problem.gvec[0] + ch["F1inv"][:3, 3]
    xy = np.array([t @ ch["ex"], t @ ch["ey"]])
    lo, hi = problem.lower, problem.upper
    c1, c2 = ch["c1"], ch["c2"]
    cands = []
    for up in (True, False):
        t1, t2 = two_bone_2d_scalar(ch["l1"], ch["l2"], float(xy[0]), float(xy[1]), up)  # one arm: plain math
        q1, q2 = _branch(ch, t1, t2, lo, hi)
        inside = lo[c1] <= q1 <= hi[c1] and lo[c2] <= q2 <= hi[c2]
        cands.append((up, q1, q2, inside))
    if elbow_up is None:
        d = [math.remainder(q1 - q[c1], 2 * math.pi) ** 2 + math.remainder(q2 - q[c2], 2 * math.pi) ** 2
             for _, q1, q2, _ in cands]
        order = [0, 1] if d[0] <= d[1] else [1, 0]
    else:
        order = [0, 1] if elbow_up else [1, 0]
    fitting = [cands[k] for k in order if cands[k][3]]
    if fitting:
        _, q1, q2, _ = fitting[0]
        q[c1] = q1
        q[c2] = q2
        perr, _ = goal_errors(robot.node_table, robot.node_params, robot.origin, q, problem.gnode, problem.gkind,
                              problem.gvec, problem.gR, problem.gaxis, problem.gw)
    else:  # neither branch fits the limits: clamp both, keep the closer hand
        best = None
        q_try = q.copy()
        for k in order:
            _, q1, q2, _ = cands[k]
            q_try[c1] = min(max(q1, lo[c1]), hi[c1])
            q_try[c2] = min(max(q2, lo[c2]), hi[c2])
            pe, _ = goal_errors(robot.node_table, robot.node_params, robot.origin, q_try, problem.gnode, problem.gkind,
                                problem.gvec, problem.gR, problem.gaxis, problem.gw)
            if best is None or pe < best[0]:
                best = (pe, q_try[c1], q_try[c2])
        perr, q[c1], q[c2] = best
    state[1] += 1
    state[2] = perr
    state[3] = 0.0
    return CONVERGED if perr <= problem.tol_p else STALLED


def _register():
    from . import Method, register

    register(Method(NAME, _iterate, "closed-form two-bone arm (two parallel revolute joints, one Position goal)",
                    JOINT_TYPES, goal_kinds=("position",), restarts=False, check=_check,
                    defaults=dict(elbow_up=True)))


_register()
