"""Tracking streaming targets: warm-started local IK with a bounded joint step per update.

Each :meth:`Tracker.update` writes the new targets into a precompiled goal table (no goal objects
are built) and runs at most ``iterations`` local iterations in one Numba kernel call, starting
from the previous solution. Iterations (task residual ``e`` and Jacobian ``J`` from
``task_eval``, W = diag(joint_weights), ``w_p`` a Posture goal's weight):

* ``"dls"``: ``(JᵀJ + w_p² I + λ² W) δq = Jᵀe + w_p²(q_rest ⊖ q)`` with the damping
  λ = ``damping`` (Wampler 1986); near a singularity the step stays bounded
  (``|δq| ≤ |e| / 2λ`` in the W-norm). A step that does not lower the cost is rejected and λ²
  quadrupled for the rest of the update (so a singular pull toward an unreachable target settles
  instead of chattering).
* ``"lm"``: the same system with ``λ² = μ E + ε`` (``E = ½|e|²``, Sugihara 2011), a step kept only
  when the cost falls (else μ doubles), as the ``lm`` solver.

After every iteration ``q ← clamp(q ⊕ δq)`` (joint limits, ball joints on SO(3)) and then the
*update bound*: every entry stays within ``max_joint_step`` of the configuration at the start of
the update (units: rad per update for revolute entries, m per update for prismatic ones; for a
ball joint the angle of its rotation change, rad per update). Only local iterations run: no
restarts, no random samples, so the solution never switches branch.

Per update the :class:`TrackStep` says: ``status`` (converged: every goal within tolerance;
iteration_limit: the iterations ran out or the update bound held the robot while the target
was still ahead; stalled: no
progress, e.g. pulling along a singular direction or against a limit; unreachable: stalled with a
position target beyond its frame's reach radius), the largest errors, ``jump`` (the largest
joint change of this update, ≤ max_joint_step), ``flagged`` (a discontinuity: the target moved
further than the bound lets the robot follow in one update, i.e. not converged while the bound
was active) and ``near_singular`` (σ_min of the task Jacobian below ``singular_threshold``,
default 0.01 [m/rad for position rows], see :mod:`invkin.diagnostics`).

With ``world=`` / ``self_collision=True`` (``margin``, as :func:`invkin.solve`), or with hard
goals (``hard=True``; method "lm"), an update runs the general LM core instead, with the collision
distances as inequality rows (docs/architecture.md, "Collision") and the hard goals met first and
kept while the soft ones move (feet held while a hand follows a target): the same warm start,
update bound (q0 ± max_joint_step as joint bounds; a ball joint's or floating base's rotation
vector entries ± max_joint_step/√3, which keeps the angle of its change within the bound) and
iteration budget, no restarts;
``near_singular`` is then not computed (False). An update whose goals are met only closer than the
margin is ``Status.IN_COLLISION``.
"""
from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
from numba import njit

from ._checks import MAX_LENGTH, count, positive, real_array
from .model.robot import robot_arg
from .diagnostics import NEAR_SINGULAR_THRESHOLD
from .errors import GoalError, SolverError
from .goals import KIND_AXIS, Aim, Goal, Orientation, Pose, Position, Posture
from .result import Status
from .solvers.shared import (CONVERGED, GEOMETRIC, RUNNING, STALLED, chol_solve, cone_coverage,
                             damped_normal_equations, geometric_kernel, project_cones_in_place, posture_residual, residual_sqnorm, smallest_singular_value,
                             step_and_clamp, take_trial, task_eval)
from .kinematics.kernels import rotvec_between, rotvec_compose
from .spatial import so3_exp_nb

__all__ = ["Tracker", "TrackStep", "TRACK_METHODS"]

TRACK_METHODS = ("dls", "lm", "ccd", "fabrik")

# kernel outputs (out array)
O_PERR, O_RERR, O_JUMP, O_ITERS, O_BOUND, O_SIGMA, O_BAD = range(7)
BAD_TARGET = -1
EPS_DAMP = 1e-12


class TrackStep(NamedTuple):
    """One update of a :class:`Tracker` (see the module docstring).

    q (dof,): the new configuration (a copy). position_error [m], rotation_error [rad]: the
    largest over the goals. jump [rad or m]: the largest joint change of this update.
    """

    q: np.ndarray
    status: Status
    position_error: float
    rotation_error: float
    jump: float
    flagged: bool
    near_singular: bool
    iterations: int


@njit(cache=True)
def _bound_step(q0, qn, bound, balls, is_ball):
    """Clip qn into q0 ± bound (ball joints: rotation angle of R0ᵀ Rn ≤ bound); True if it clipped."""
    clipped = False
    n = qn.shape[0]
    for i in range(n):
        if is_ball[i]:
            continue
        lo = q0[i] - bound[i]
        hi = q0[i] + bound[i]
        if qn[i] < lo:
            qn[i] = lo
            clipped = True
        elif qn[i] > hi:
            qn[i] = hi
            clipped = True
    r = np.empty(3)
    for k in range(balls.shape[0]):
        s = balls[k]
        rotvec_between(q0, s, qn, s, r, 0)
        th = math.sqrt(r[0] * r[0] + r[1] * r[1] + r[2] * r[2])
        b = bound[s]
        if th > b:
            f = b / th
            for i in range(3):
                r[i] *= f
            rotvec_compose(q0, s, r, 0, qn, s)
            clipped = True
    return clipped


@njit(cache=True)
def _jump(q0, q, balls, is_ball):
    """Largest joint change q0 → q (ball joints: the angle of R0ᵀ R)."""
    j = 0.0
    for i in range(q.shape[0]):
        if not is_ball[i]:
            d = abs(q[i] - q0[i])
            if d > j:
                j = d
    if balls.shape[0] > 0:
        Ra = np.empty((3, 3))
        Rb = np.empty((3, 3))
        for k in range(balls.shape[0]):
            s = balls[k]
            so3_exp_nb(q0[s], q0[s + 1], q0[s + 2], Ra)
            so3_exp_nb(q[s], q[s + 1], q[s + 2], Rb)
            c = 0.0
            for i in range(3):
                for jj in range(3):
                    c += Ra[i, jj] * Rb[i, jj]
            c = min(1.0, max(-1.0, 0.5 * (c - 1.0)))
            th = math.acos(c)
            if th > j:
                j = th
    return j


@njit(cache=True)
def _targets_ok(gkind, gvec, gR):
    """False when a target holds a non-finite number or one beyond MAX_LENGTH (1e9 m: squared
    distances of larger ones overflow), or a rotation target is not a rotation."""
    for g in range(gkind.shape[0]):
        for k in range(3):
            v = gvec[g, k]
            if not (v - v == 0.0) or abs(v) > MAX_LENGTH:
                return False
        if gkind[g] == 1:
            R = gR[g]
            for i in range(3):
                for j in range(3):
                    v = R[i, j]
                    if not (v - v == 0.0):
                        return False
            for i in range(3):
                for j in range(3):
                    s = R[0, i] * R[0, j] + R[1, i] * R[1, j] + R[2, i] * R[2, j]
                    if i == j:
                        s -= 1.0
                    if abs(s) > 1e-6:
                        return False
            det = (R[0, 0] * (R[1, 1] * R[2, 2] - R[1, 2] * R[2, 1]) - R[0, 1] * (R[1, 0] * R[2, 2] - R[1, 2] * R[2, 0])
                   + R[0, 2] * (R[1, 0] * R[2, 1] - R[1, 1] * R[2, 0]))
            if det <= 0.0:
                return False
    return True


@njit(cache=True)
def track_update(ni, nf, origin, lower, upper, balls, gnode, gkind, gvec, gR, gaxis, gw, q_rest, w_post, jw,
                 tol_p, tol_r, q, gvec_ok, gR_ok, bound, is_ball, max_iter, use_lm, damping, out):
    """One tracker update in place on q (see the module docstring); returns a code.

    The targets in gvec/gR are checked first: a bad one is replaced by the last good targets
    (gvec_ok, gR_ok) and BAD_TARGET is returned with q untouched. Otherwise the good copies are
    refreshed and up to ``max_iter`` iterations run. out: [perr, rerr, jump, iterations, bound
    active, σ_min of the task Jacobian]. Returns CONVERGED, RUNNING or STALLED.
    """
    if not _targets_ok(gkind, gvec, gR):
        gvec[:, :] = gvec_ok
        gR[:, :, :] = gR_ok
        return BAD_TARGET
    gvec_ok[:, :] = gvec
    gR_ok[:, :, :] = gR
    dof = q.shape[0]
    m = 3 * gnode.shape[0]
    Tall = np.empty((ni.shape[0], 4, 4))
    Jf = np.empty((6, dof))
    e = np.empty(m)
    J = np.empty((m, dof))
    e2 = np.empty(m)
    J2 = np.empty((m, dof))
    errs = np.empty(20)
    errs2 = np.empty(20)
    A = np.empty((dof, dof))
    g = np.empty(dof)
    dq = np.empty(dof)
    qn = np.empty(dof)
    pr = np.empty(dof)
    q0 = q.copy()
    held = np.zeros(dof, dtype=np.bool_)
    box_lo = np.empty(dof)
    box_hi = np.empty(dof)
    for i in range(dof):
        box_lo[i] = max(lower[i], q0[i] - bound[i])
        box_hi[i] = min(upper[i], q0[i] + bound[i])
        if is_ball[i]:  # ball joints: the angle bound is applied on SO(3) by _bound_step
            box_lo[i] = -np.inf
            box_hi[i] = np.inf
    task_eval(ni, nf, origin, q, gnode, gkind, gvec, gR, gaxis, gw, Tall, Jf, e, J, errs)
    if w_post > 0.0:
        posture_residual(q, q_rest, balls, pr)
    cost = residual_sqnorm(e, w_post, pr)
    mu = 1.0
    lam2 = damping * damping
    code = RUNNING
    bound_active = False
    it = 0
    stuck = 0
    while it < max_iter:
        if errs[0] <= tol_p and errs[1] <= tol_r:
            code = CONVERGED
            break
        it += 1
        d = mu * 0.5 * cost + EPS_DAMP if use_lm else lam2 + EPS_DAMP
        # Held joints (at the edge of their box, pushed outward) are taken out of the system and
        # the step re-solved: the other joints keep following the target (projected Newton).
        for i in range(dof):
            held[i] = False
        ok = True
        for _pass in range(dof + 1):
            damped_normal_equations(J, e, jw, d, w_post, pr, A, g)
            for r in range(dof):
                if held[r]:
                    for c in range(dof):
                        A[r, c] = 0.0
                        A[c, r] = 0.0
                    A[r, r] = 1.0
                    g[r] = 0.0
            ok = chol_solve(A, g, dq)
            if not ok:
                break
            newly = False
            for i in range(dof):
                if is_ball[i] or held[i]:
                    continue
                if (q[i] <= box_lo[i] and dq[i] < 0.0) or (q[i] >= box_hi[i] and dq[i] > 0.0):
                    held[i] = True
                    newly = True
            if not newly:
                break
        if not ok:
            mu *= 10.0
            if not use_lm:
                lam2 = lam2 * 10.0 + 1e-6
            continue
        # scale the whole step into the box (its direction is kept)
        t = 1.0
        clipped = False
        for i in range(dof):
            if is_ball[i]:
                continue
            if held[i]:
                dq[i] = 0.0
                if (q[i] <= box_lo[i] and q0[i] - bound[i] >= lower[i]) or \
                        (q[i] >= box_hi[i] and q0[i] + bound[i] <= upper[i]):
                    clipped = True
                continue
            x = q[i] + dq[i]
            if x > box_hi[i]:
                f = (box_hi[i] - q[i]) / dq[i]
                if f < t:
                    t = f
                if q0[i] + bound[i] <= upper[i]:
                    clipped = True
            elif x < box_lo[i]:
                f = (box_lo[i] - q[i]) / dq[i]
                if f < t:
                    t = f
                if q0[i] - bound[i] >= lower[i]:
                    clipped = True
        if t < 1.0:
            for i in range(dof):
                if not is_ball[i]:
                    dq[i] *= max(t, 0.0)
        step_and_clamp(q, dq, box_lo, box_hi, balls, qn)
        if _bound_step(q0, qn, bound, balls, is_ball):
            clipped = True
        moved = 0.0
        for i in range(dof):
            moved = max(moved, abs(qn[i] - q[i]))
        task_eval(ni, nf, origin, qn, gnode, gkind, gvec, gR, gaxis, gw, Tall, Jf, e2, J2, errs2)
        if w_post > 0.0:
            posture_residual(qn, q_rest, balls, pr)
        cost2 = residual_sqnorm(e2, w_post, pr)
        if cost2 >= cost:
            # reject: more damping for the rest of this update (dls: λ² x4, lm: μ x2)
            if w_post > 0.0:
                posture_residual(q, q_rest, balls, pr)
            if use_lm:
                mu *= 2.0
            else:
                lam2 *= 4.0
            if mu > 1e8 or lam2 > 1e8 or moved < 1e-15:
                code = STALLED
                break
            continue
        improved = cost2 < cost * (1.0 - 1e-6)
        for i in range(dof):
            q[i] = qn[i]
        take_trial(e, J, errs, e2, J2, errs2)
        cost = cost2
        bound_active = clipped
        if use_lm:
            mu = max(mu * 0.5, 1e-9)
        # no joint motion, or no progress for a few iterations: nothing more to gain this update
        if moved < 1e-15:
            code = STALLED
            break
        if improved:
            stuck = 0
        else:
            stuck += 1
            if stuck >= 3:
                code = STALLED
                break
    if code == RUNNING and errs[0] <= tol_p and errs[1] <= tol_r:
        code = CONVERGED
    out[O_PERR] = errs[0]
    out[O_RERR] = errs[1]
    out[O_JUMP] = _jump(q0, q, balls, is_ball)
    out[O_ITERS] = it
    out[O_BOUND] = 1.0 if bound_active else 0.0
    out[O_SIGMA] = smallest_singular_value(J)
    return code


@njit(cache=True)
def geometric_after(ni, nf, origin, gnode, gkind, gvec, gR, gaxis, gw, q0, q, bound, balls, is_ball, out):
    """After a ccd/fabrik update of q (from q0): the update bound, then out = [perr, rerr, jump, -, bound
    active, σ_min of the task Jacobian] as :func:`track_update` writes them."""
    clipped = _bound_step(q0, q, bound, balls, is_ball)
    dof = q.shape[0]
    m = 3 * gnode.shape[0]
    Tall = np.empty((ni.shape[0], 4, 4))
    J = np.empty((m, dof))
    errs = np.empty(20)
    task_eval(ni, nf, origin, q, gnode, gkind, gvec, gR, gaxis, gw, Tall, np.empty((6, dof)), np.empty(m), J, errs)
    out[O_PERR] = errs[0]
    out[O_RERR] = errs[1]
    out[O_JUMP] = _jump(q0, q, balls, is_ball)
    out[O_BOUND] = 1.0 if clipped else 0.0
    out[O_SIGMA] = smallest_singular_value(J)


#: Tracker's default update bound [rad or m per update].
TRACK_STEP = 0.1


class Tracker:
    """Follow streaming targets with warm-started, step-bounded local IK (see the module docstring).

    Args:
        robot: the Robot.
        goals_or_frames: a frame name or a list of them (each becomes a Position goal, started at
            the frame's current position), or a goal / list of goals (Position, Orientation, Pose,
            Aim; a Posture goal is a soft term with fixed q_rest). The goals' own targets are only
            the initial ones: :meth:`update` replaces them.
        max_joint_step: the update bound [rad or m per update]: a number, or (dof,) per entry (a
            ball joint reads its first entry, as an angle); None: no bound. Default
            :data:`TRACK_STEP` = 0.1.
        dt [s]: instead of max_joint_step, the bound is the model's joint velocity limits × dt
            (URDF ``<limit velocity>``; the update period of a control loop), as in
            :func:`invkin.solve`; entries without a velocity limit (a floating base) are not
            bounded. Giving both is a GoalError.
        method: "dls" (constant damping), "lm" (Levenberg–Marquardt step acceptance), or "ccd" /
            "fabrik": their sweeps (``iterations`` of them per update, the method's own update rules,
            cone/twist limits and twist continuity, :mod:`invkin.solvers.ccd`), warm-started, with the
            goal table and the kernel's arguments kept between updates — the lean per-frame path for
            a character's chains; the update bound is applied after the sweeps.
        q0: (dof,) start configuration (clamped into the limits); default ``robot.neutral()``.
        iterations: the most iterations per update (≥ 1).
        position_tolerance [m], rotation_tolerance [rad]: an update stops iterating once every
            goal is within them.
        damping: λ of "dls" [units of J's singular values: m/rad for position rows].
        joint_weights: (dof,) > 0, per-joint stiffness W (stiffer joints move less).
        singular_threshold: σ_min of the task Jacobian below which ``near_singular`` is set.
        options: the options of "ccd" / "fabrik" (as in :func:`invkin.solve`), e.g. ``variant``,
            ``twist``; refused for "dls" and "lm".

    Targets per goal in :meth:`update`: Position → point (3,) [m]; Orientation → rotation (3, 3)
    (or, for ``axes='x'|'y'|'z'``, the world direction (3,) of that axis); Pose → transform (4, 4);
    Aim → point (3,) [m].
    """

    def __init__(self, robot, goals_or_frames, max_joint_step=TRACK_STEP, method: str = "dls", *, q0=None,
                 iterations: int = 20, position_tolerance: float = 1e-5, rotation_tolerance: float = 1e-5,
                 damping: float = 0.01, joint_weights=None, singular_threshold: float = NEAR_SINGULAR_THRESHOLD,
                 options: dict | None = None, world=None, self_collision: bool = False, margin: float = 0.005,
                 dt=None):
        robot_arg(robot)
        from .solve import _collision_options

        from .solvers.shared import compile_problem

        if method not in TRACK_METHODS:
            raise SolverError(f"Tracker: unknown method {method!r}; choose one of: {', '.join(TRACK_METHODS)}")
        iterations = count("iterations", iterations, 1)
        self.robot = robot
        self.method = method
        self.iterations = iterations
        self.damping = positive("damping", damping)
        self.singular_threshold = positive("singular_threshold", singular_threshold)
        if q0 is None:
            q = robot.neutral()
        else:
            q = robot.check_q(q0, "q0")
            if q.ndim != 1:
                raise GoalError(f"q0: expected shape ({robot.dof},), got {q.shape}")
            q = np.clip(q, robot.lower, robot.upper)
        self._q = np.ascontiguousarray(q, dtype=np.float64).copy()
        goals = self._goals(robot, goals_or_frames, self._q)
        self.goals = tuple(goals)
        problem = compile_problem(robot, goals, position_tolerance, rotation_tolerance, joint_weights)
        self._problem = problem
        self._bound = self._make_bound(robot, max_joint_step, dt)
        self._dt = None if dt is None else float(dt)
        self._is_ball = np.zeros(robot.dof, dtype=np.bool_)
        for s in robot.ball_starts:
            self._is_ball[s:s + 3] = True
        from .solve import _rotation_box

        # the general core bounds entries (a box): a rotation vector's within bound/√3 (solve's rule)
        self._box = _rotation_box(robot, self._bound)
        # one writer per non-Posture goal: (kind, position row, rotation row, axis index)
        self._slots = []
        self._by_frame = {}
        row = 0
        for gl in goals:
            if isinstance(gl, Posture):
                continue
            n = len(gl.rows())
            if isinstance(gl, Pose):
                kind_r = gl.rows()[1][0]
                ax = -1 if kind_r != KIND_AXIS else "xyz".index(gl.axes)
                slot = ("pose", row, row + 1, ax)
            elif isinstance(gl, Orientation):
                ax = -1 if gl.rows()[0][0] != KIND_AXIS else "xyz".index(gl.axes)
                slot = ("rot", row, row, ax)
            else:  # Position, Aim: a point
                slot = ("point", row, row, -1)
            self._slots.append(slot)
            self._by_frame.setdefault(gl.frame, []).append(len(self._slots) - 1)
            row += n
        self._single = self._slots[0] if len(self._slots) == 1 else None
        self._gvec = problem.gvec.copy()
        self._gR = problem.gR.copy()
        self._gvec_ok = self._gvec.copy()
        self._gR_ok = self._gR.copy()
        p = problem
        self._head = (robot.node_table, robot.node_params, robot.origin, p.lower, p.upper, p.balls, p.gnode, p.gkind, self._gvec,
                      self._gR, p.gaxis, p.gw, p.q_rest, p.w_posture, p.joint_weights, p.tol_p, p.tol_r)
        self._out = np.zeros(8)
        self._use_lm = method == "lm"
        # reach radius of each position row (status unreachable), computed once (radius 0 around
        # a frame that no joint moves)
        from .solve import reach_point

        self._reach = []
        for g in range(p.gnode.shape[0]):
            if p.gkind[g] == 0 and p.gw[g] > 0:
                self._reach.append((g, *reach_point(robot, int(p.gnode[g]))))
        self._status = {CONVERGED: Status.CONVERGED, RUNNING: Status.ITERATION_LIMIT, STALLED: Status.STALLED}
        self._collision = _collision_options(world, self_collision, margin)
        self._geo = None
        self._geo_eps = None
        self._cones = cone_coverage(robot)
        if options is not None and not isinstance(options, dict):
            raise GoalError(f"options: expected a dict of method options, got {options!r:.120}")
        if method in GEOMETRIC:
            kernel, tail = geometric_kernel(problem, method, options or {})
            args = list(problem.args)
            args[8], args[9] = self._gvec, self._gR  # the live targets
            self._geo = (kernel, tuple(args), tail, np.zeros(8))
        elif options:
            raise SolverError(f"Tracker: method {method!r} takes no options, got {sorted(options)}")
        if self._collision is not None and self._geo is not None:
            raise SolverError(f"Tracker: method {method!r} cannot keep collision distances (world / "
                              f"self_collision); use method='lm' or 'dls'")
        if problem.has_hard and method != "lm":
            hard = [f"{type(g).__name__}({g.frame!r})" for g in goals if not isinstance(g, Posture) and g.level == 0]
            raise SolverError(f"Tracker: hard goals ({', '.join(hard)}) need method='lm' (the general LM core "
                              f"holds them while the soft goals move); got method={method!r}")
        self._core = self._collision is not None or problem.has_hard  # updates run the general LM core
        self._coll = None
        if self._collision is not None:
            from .collision.rows import solve_rows
            self._coll = solve_rows(robot, *self._collision)
            tables, (world, self_collision, _) = self._coll[0], self._collision
            if len(tables[4]) == 0 and (world is None or len(world) == 0 or len(tables[0]) == 0):
                import warnings

                from .collision.errors import CollisionWarning
                warnings.warn(f"no collision pair to check on robot {robot.name!r} (world: {world!r}, "
                              f"self_collision={self_collision}, {len(tables[0])} links with collision shapes): "
                              f"the distances did nothing", CollisionWarning, stacklevel=2)


    # ------------------------------------------------------------------ construction helpers
    @staticmethod
    def _goals(robot, spec, q):
        if isinstance(spec, (str, np.str_)):
            spec = [spec]
        elif isinstance(spec, Goal):
            spec = [spec]
        try:
            items = list(spec)
        except TypeError:
            raise GoalError(f"goals_or_frames: expected a frame name, a goal or a list of them, got {spec!r}") from None
        if not items:
            raise GoalError("goals_or_frames: expected at least one frame or goal, got none")
        goals = []
        for it in items:
            if isinstance(it, Goal):
                if not isinstance(it, (Position, Orientation, Pose, Aim, Posture)):
                    raise GoalError(f"Tracker: unsupported goal {type(it).__name__} ({it!r:.120}); the Tracker "
                                    f"takes Position, Orientation, Pose, Aim and Posture goals (solve() with "
                                    f"q0=the last answer and max_joint_step takes every goal)")
                goals.append(it)
            elif isinstance(it, (str, np.str_)):
                goals.append(Position(str(it), robot.fk(q, it)[:3, 3]))
            else:
                raise GoalError(f"goals_or_frames: expected frame names or goals, got {it!r}")
        if all(isinstance(g, Posture) for g in goals):
            raise GoalError("Tracker: expected at least one goal besides Posture")
        return goals

    @staticmethod
    def _make_bound(robot, max_joint_step, dt=None):
        if dt is not None:
            if max_joint_step is not TRACK_STEP:
                raise GoalError(f"max_joint_step={max_joint_step!r:.100} and dt={dt!r}: give one of them (dt sets "
                                f"the bound to the joint velocity limits x dt, max_joint_step sets it directly)")
            dt = positive("dt", dt, " [s]")
            v = robot.velocity_limit
            if not np.any(np.isfinite(v)):
                raise GoalError(f"dt: robot {robot.name!r} has no joint velocity limits (URDF <limit velocity>); "
                                f"pass max_joint_step instead")
            return np.where(np.isfinite(v), v * dt, np.inf)
        if max_joint_step is None:
            return np.full(robot.dof, np.inf)
        try:
            b = np.array(np.broadcast_to(np.asarray(max_joint_step, dtype=np.float64), (robot.dof,)))
        except (TypeError, ValueError):
            raise GoalError(f"max_joint_step: expected a number or {robot.dof} numbers > 0 [rad or m per "
                            f"update], got {max_joint_step!r}") from None
        if not np.all(np.isfinite(b)) or np.any(b <= 0):
            raise GoalError(f"max_joint_step: expected finite values > 0 [rad or m per update], "
                            f"got {max_joint_step!r}")
        return b

    # ------------------------------------------------------------------ state
    @property
    def q(self) -> np.ndarray:
        """The current configuration (a copy)."""
        return self._q.copy()

    @property
    def max_joint_step(self) -> np.ndarray:
        """The update bound per entry of q [rad or m per update] (a copy)."""
        return self._bound.copy()

    def reset(self, q=None) -> None:
        """Restart from q (default ``robot.neutral()``), clamped into the limits."""
        r = self.robot
        q = r.neutral() if q is None else r.check_q(q, "q")
        if q.ndim != 1:
            raise GoalError(f"q: expected shape ({r.dof},), got {q.shape}")
        self._q[:] = np.clip(q, r.lower, r.upper)

    # ------------------------------------------------------------------ the hot path
    def _write(self, slot, t):
        kind, rp, rr, ax = slot
        a = t if type(t) is np.ndarray and t.dtype.kind == "f" else real_array("target", t)  # complex refused
        if kind == "point":
            if a.shape != (3,):
                raise GoalError(f"target for goal {self._slot_name(slot)}: expected a point (3,) [m], "
                                f"got shape {a.shape}")
            self._gvec[rp] = a
        elif kind == "pose":
            if a.shape != (4, 4):
                raise GoalError(f"target for goal {self._slot_name(slot)}: expected a pose (4, 4), "
                                f"got shape {a.shape}")
            self._gvec[rp] = a[:3, 3]
            if ax < 0:
                self._gR[rr] = a[:3, :3]
            else:
                self._write_axis(rr, a[:3, ax])
        else:  # rotation
            if ax >= 0 and a.shape == (3,):
                self._write_axis(rr, a)
            elif a.shape != (3, 3):
                raise GoalError(f"target for goal {self._slot_name(slot)}: expected a rotation (3, 3), "
                                f"got shape {a.shape}")
            elif ax < 0:
                self._gR[rr] = a
            else:
                self._write_axis(rr, a[:, ax])

    def _write_axis(self, r, v):
        n = math.sqrt(float(v[0] * v[0] + v[1] * v[1] + v[2] * v[2]))
        if not (n > 1e-12) or not math.isfinite(n):
            raise GoalError(f"target axis direction: expected a finite non-zero (3,) vector, got {np.asarray(v).tolist()}")
        self._gvec[r] = v / n

    def _slot_name(self, slot):
        k = self._slots.index(slot)
        target_goals = [g for g in self.goals if not isinstance(g, Posture)]
        return f"{k} ({target_goals[k]!r:.120})"

    def update(self, targets) -> TrackStep:
        """New targets → one bounded, warm-started update.

        ``targets``: for a single goal its target array; for several, a sequence in goal order
        (Posture goals skipped) or a dict ``{frame: target}`` (a frame with several goals takes a
        sequence). Non-finite values or a non-rotation raise GoalError and leave the tracker as it was.
        """
        single = self._single
        try:
            if single is not None and not isinstance(targets, dict):
                self._write(single, targets)
            else:
                self._write_many(targets)
        except Exception:
            self._gvec[:] = self._gvec_ok  # a half-written update must not linger
            self._gR[:] = self._gR_ok
            raise
        if self._core:
            return self._update_core(targets)
        out = self._out
        q_before = self._q.copy()
        if self._geo is not None:
            code = self._update_geometric(q_before)
        else:
            code = track_update(*self._head, self._q, self._gvec_ok, self._gR_ok, self._bound, self._is_ball,
                                self.iterations, self._use_lm, self.damping, out)
        if code == BAD_TARGET:
            raise GoalError(f"targets: expected finite values within ±{MAX_LENGTH:g} m and proper rotations "
                            f"(orthonormal, det +1), got {_short(targets)}")
        if not (np.all(np.isfinite(self._q)) and math.isfinite(out[O_PERR]) and math.isfinite(out[O_RERR])):
            # never report (or keep) a non-finite configuration: stay where the update started
            self._q[:] = q_before
            code = STALLED
            out[O_JUMP] = 0.0
            out[O_PERR], out[O_RERR] = _errors(self.robot, self._problem, self._q, self._gvec_ok, self._gR_ok)
        if self._cones:  # swing-cone/twist limits: the returned pose meets them (ccd/fabrik already inside)
            moved = project_cones_in_place(self.robot, self._q)
            if self._cones == "python":  # limited joints the kernels do not cover (channels off the axes)
                from .model.limits import project_limits

                qp = project_limits(self.robot, self._q)
                moved = moved or not np.array_equal(qp, self._q)
                self._q[:] = qp
            if moved:
                out[O_PERR], out[O_RERR] = _errors(self.robot, self._problem, self._q, self._gvec_ok, self._gR_ok)
                if code == CONVERGED and not (out[O_PERR] <= self._problem.tol_p and out[O_RERR] <= self._problem.tol_r):
                    code = STALLED
        status = self._status[code]
        bound_active = out[O_BOUND] > 0.5
        if bound_active and code != CONVERGED:
            status = Status.ITERATION_LIMIT  # held by the update bound: the target is still ahead
        elif code == STALLED and self._reach:
            for g, anchor, radius in self._reach:
                if math.dist(self._gvec[g], anchor) > radius + self._problem.tol_p:
                    status = Status.UNREACHABLE
                    break
        return TrackStep(self._q.copy(), status, float(out[O_PERR]), float(out[O_RERR]), float(out[O_JUMP]),
                         bool(code != CONVERGED and bound_active), bool(out[O_SIGMA] < self.singular_threshold),
                         int(out[O_ITERS]))

    def _update_core(self, targets) -> TrackStep:
        """update() on the general LM core (collision rows, hard goals): from the current q,
        bounded by max_joint_step, no restarts (solve._solve_lm)."""
        import copy
        import time

        from .collision.rows import rows_clear
        from .solve import _solve_lm

        p = self._problem
        if not _targets_ok(p.gkind, self._gvec, self._gR):
            self._gvec[:] = self._gvec_ok
            self._gR[:] = self._gR_ok
            raise GoalError(f"targets: expected finite values within ±{MAX_LENGTH:g} m and proper rotations "
                            f"(orthonormal, det +1), got {_short(targets)}")
        self._gvec_ok[:] = self._gvec
        self._gR_ok[:] = self._gR
        problem = copy.copy(p)
        problem.gvec, problem.gR = self._gvec_ok, self._gR_ok
        q_before = self._q.copy()
        res = _solve_lm(self.robot, problem, q_before, None, self.iterations, 0, False, "speed", self._box,
                        time.perf_counter(), self._coll, hold_always=True)
        q = res.q if np.all(np.isfinite(res.q)) else q_before
        self._q[:] = q
        status = res.status
        jump = float(_jump(q_before, q, p.balls, self._is_ball))  # the kernels' measure, the bound's
        bound_active = bool(np.any(np.abs(q - q_before) >= self._box - 1e-12))
        if self._coll is not None and res.position_error <= p.tol_p and res.rotation_error <= p.tol_r \
                and not rows_clear(self.robot, q, self._coll):
            status = Status.IN_COLLISION
        elif status == Status.TIME_LIMIT or (bound_active and status == Status.STALLED):
            # held by the update bound, the target still ahead: iteration_limit, as the plain route says
            # (was: stalled, "no progress", for a robot that had moved the whole bound toward it); a
            # proven unreachable stays unreachable
            status = Status.ITERATION_LIMIT
        return TrackStep(self._q.copy(), status, float(res.position_error), float(res.rotation_error), jump,
                         bool(status != Status.CONVERGED and bound_active), False, int(res.iterations))

    def _update_geometric(self, q_before):
        """One ccd/fabrik update: the targets checked (a bad one restores the last good ones), the
        kernel's sweeps from the current q, then the update bound and the step's report."""
        p = self._problem
        if not _targets_ok(p.gkind, self._gvec, self._gR):
            self._gvec[:] = self._gvec_ok
            self._gR[:] = self._gR_ok
            return BAD_TARGET
        self._gvec_ok[:] = self._gvec
        self._gR_ok[:] = self._gR
        kernel, args, tail, state = self._geo
        state[:] = 0.0
        out = self._out
        run = (*args, self._q, self.iterations, state, *tail)
        after = (args[0], args[1], args[2], p.gnode, p.gkind, self._gvec, self._gR, p.gaxis, p.gw, q_before, self._q,
                 self._bound, p.balls, self._is_ball, out)
        if self._geo_eps is None:  # the first update picks (or compiles) the overloads; later ones call them directly
            code = kernel(*run)
            geometric_after(*after)
            eps = (_entry_point(kernel, run), _entry_point(geometric_after, after))
            if None not in eps:  # both compiled (not running interpreted while they compile)
                self._geo_eps = eps
        else:  # the argument types are fixed by construction: no per-call type dispatch (a few µs)
            code = self._geo_eps[0](*run)
            self._geo_eps[1](*after)
        out[O_ITERS] = state[1]
        if out[O_BOUND] > 0.5:
            code = CONVERGED if out[O_PERR] <= p.tol_p and out[O_RERR] <= p.tol_r else RUNNING
        return code

    def _write_many(self, targets):
        slots = self._slots
        if isinstance(targets, dict):
            for frame, t in targets.items():
                idx = self._by_frame.get(frame)
                if idx is None:
                    raise GoalError(f"targets: no goal on frame {frame!r}; goals are on "
                                    f"{sorted(map(str, self._by_frame))}")
                if len(idx) == 1:
                    self._write(slots[idx[0]], t)
                else:
                    if len(t) != len(idx):
                        raise GoalError(f"targets for frame {frame!r}: expected {len(idx)} targets, got {len(t)}")
                    for i, tt in zip(idx, t):
                        self._write(slots[i], tt)
            return
        try:
            n = len(targets)
        except TypeError:
            raise GoalError(f"targets: expected {len(slots)} targets (one per goal), got {_short(targets)}") from None
        if n != len(slots):
            raise GoalError(f"targets: expected {len(slots)} targets (one per goal), got {n}")
        for s, t in zip(slots, targets):
            self._write(s, t)

    def __repr__(self) -> str:
        # with dt the bound is per joint (velocity limit x dt) and a floating base's is inf: its
        # largest entry read "max_joint_step=inf", as if the update were not bounded at all
        bound = f"dt={self._dt:g}" if self._dt is not None else f"max_joint_step={float(self._bound.max()):g}"
        return (f"Tracker({self.robot.name!r}, goals={len(self._slots)}, method={self.method}, {bound}, "
                f"iterations={self.iterations})")


def _entry_point(dispatcher, args):
    """The compiled overload of ``dispatcher`` that these arguments select (called without dispatch);
    None while it runs interpreted (invkin._tiers)."""
    import numba

    ov = dispatcher.overloads.get(tuple(numba.typeof(a) for a in args))
    return None if ov is None else ov.entry_point


def _errors(robot, p, q, gvec, gR):
    from .solvers.shared import goal_errors

    return goal_errors(robot.node_table, robot.node_params, robot.origin, q, p.gnode, p.gkind, gvec, gR, p.gaxis, p.gw)


def _short(v):
    try:
        return repr(np.asarray(v, dtype=np.float64).tolist())[:200]
    except (TypeError, ValueError):
        return repr(v)[:200]
