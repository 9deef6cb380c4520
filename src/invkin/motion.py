"""Motion on top of IK: straight-line reaching (SEEDS.md §1), the rest-posture springs (§3, 5.1: inside
Springhead's loop, or blended once) and statics, τ = Jᵀ F (§3, 5.2).

Straight-line reaching (:func:`reach`) is the main loop of the JacIK sample: with ``x`` the
effector position, ``x*`` the target and ``Δ`` the step, each frame moves the effector by
``δx = Δ·e/|e|`` (``e = x* − x``; the last step shorter) through ``δθ = J⁺_W δx (+ (I − J⁺_W J) η)``
and the loop stops once ``|e| < Δ/2``. Here the frame's target is the next waypoint
``x_k = x_0 + min(kΔ, L) u`` on the segment from the start to the target (``u`` its direction,
``L`` its length), so ``x_k − x = Δ u`` whenever the effector is on the line: the seed's step; a
few corrective iterations of the same inverse then pull the effector back onto the line.

At a singular posture (the seed model stretched straight, its default start) the step the
target needs can lie along a direction that no joint moves to first order: ``J⁺`` returns no
motion and the loop would stall. The step is then made singularity-robust by a nudge along the
null space of J chosen by second order (:func:`_singular_nudge`): the null-space direction whose
curvature moves the effector toward the target, by just enough to cover the step.
"""
from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import numpy as np

from ._checks import count, positive
from .diagnostics import NEAR_SINGULAR_THRESHOLD
from .errors import ConfigurationError, GoalError, SolverError
from .rest import REST_MODES, RestPoseWarning, check_springs, rest_blend, rest_in_loop
from .result import Result, Status
from .solvers.shared import compile_problem, problem_errors
from .spatial import as_transform, so3_exp, so3_log

__all__ = ["reach", "ReachResult", "rest_blend", "solve_with_rest", "RestResult", "RestPoseWarning",
           "joint_torques", "REACH_METHODS", "REST_MODES"]

#: Inverses accepted by :func:`reach`'s ``method``.
REACH_METHODS = ("pinv", "dls")


def _start(robot, q0):
    if q0 is None:
        return robot.neutral()
    q = robot.check_q(q0, "q0")
    if q.ndim != 1:
        raise ConfigurationError(f"q0: expected shape ({robot.dof},), got {q.shape}")
    return np.clip(q, robot.lower, robot.upper)


# =========================================================================== reach


@dataclass(frozen=True, repr=False)
class ReachResult:
    """Outcome of :func:`reach`: the trajectory, one entry per animation frame (the start first).

    qs (N, dof); positions (N, 3) [m]; rotations (N, 3, 3) for pose targets, else None;
    near_singular (N,) bool (σ_min of the task Jacobian < ``singular_threshold``);
    max_deviation [m]: the largest distance of a position from the straight segment start → target;
    position_error [m], rotation_error [rad]: the final errors to the target;
    status: converged (within Δ/2), out_of_workspace (at or beyond the reach radius: nothing moved),
    stalled (no progress for ``patience`` frames, e.g. pulling along a singular direction) or
    iteration_limit (``max_steps`` frames); iterations: inverse-kinematics steps in all.
    """

    qs: np.ndarray
    positions: np.ndarray
    rotations: np.ndarray | None
    near_singular: np.ndarray
    status: Status
    max_deviation: float
    position_error: float
    rotation_error: float
    iterations: int
    method: str

    @property
    def q(self) -> np.ndarray:
        """The last configuration."""
        return self.qs[-1]

    @property
    def success(self) -> bool:
        return self.status == Status.CONVERGED

    def __len__(self) -> int:
        return int(self.qs.shape[0])

    def __repr__(self) -> str:
        return (f"ReachResult({self.status.value}, method={self.method}, frames={len(self)}, "
                f"pos_err={self.position_error:.2e} m, rot_err={self.rotation_error:.2e} rad, "
                f"max_deviation={self.max_deviation:.2e} m, near_singular={int(self.near_singular.sum())})")


def _target(target):
    try:
        a = np.array(target, dtype=np.float64)
    except (TypeError, ValueError):
        raise GoalError(f"target: expected a point (3,) [m] or a pose (4, 4), got {target!r:.200}") from None
    if a.shape == (3,):
        if not np.all(np.isfinite(a)):
            raise GoalError(f"target: expected finite coordinates [m], got {a.tolist()}")
        return a, None
    if a.shape == (4, 4):
        T = as_transform(a, "target")
        return T[:3, 3].copy(), T[:3, :3].copy()
    raise GoalError(f"target: expected a point (3,) [m] or a pose (4, 4), got shape {a.shape}")


class _Inverse:
    """δq = J⁺_W e with damping (SEEDS.md §1): ``W⁻¹Jᵀ(J W⁻¹ Jᵀ + λ² I)⁻¹ e``.

    dls: λ = damping always; pinv: λ = 0 unless σ_min(J W^-1/2) < threshold, then
    λ² = damping² (1 − (σ_min/threshold)²) (Chiaverini's singularity-robust fallback).
    """

    def __init__(self, method, damping, threshold, w_inv):
        self.dls = method == "dls"
        self.lam2 = damping * damping
        self.thr = threshold
        self.w_inv = w_inv

    def __call__(self, J, e, free, eta=None):
        wi = self.w_inv * free
        JW = J * wi  # J W⁻¹ over the free joints
        A = JW @ J.T
        if self.dls:
            lam2 = self.lam2
        else:
            smin = math.sqrt(max(float(np.linalg.eigvalsh(A)[0]), 0.0))
            lam2 = 0.0 if smin >= self.thr else self.lam2 * (1.0 - (smin / self.thr) ** 2)
        A[np.diag_indices_from(A)] += lam2 + 1e-14
        if eta is not None:
            # J⁺e + (I − J⁺J)η = η + J⁺(e − Jη), with η moving free joints only
            eta = eta * free
            return eta + JW.T @ np.linalg.solve(A, e - J @ eta)
        return JW.T @ np.linalg.solve(A, e)


def reach(robot, frame, target, step: float = 0.01, q0=None, method: str = "pinv", *,
          rotation_step: float | None = None, corrections: int = 4, max_steps: int | None = None,
          patience: int = 25, joint_weights=None, damping: float = 0.05, damping_threshold: float = 0.1,
          max_joint_step: float = 0.5, nullspace=None, nullspace_gain: float = 0.1,
          singular_threshold: float = NEAR_SINGULAR_THRESHOLD) -> ReachResult:
    """Move ``frame`` to ``target`` along a straight line in steps of ``step`` (SEEDS.md §1).

    Args:
        robot, frame: the robot and the effector frame.
        target: a point (3,) [m], or a pose (4, 4): the orientation is then interpolated along
            the geodesic (slerp) with the same parameter as the position.
        step: Δ [m], the length of every step but the last.
        q0: (dof,) start (clamped into the limits); default ``robot.neutral()``.
        method: the inverse, "pinv" (the seed's pseudo-inverse, damped only near a singularity)
            or "dls" (damped least squares, λ = ``damping`` always).
        rotation_step: [rad] per frame for pose targets (default: ``step`` taken as radians); the
            frame count is set by whichever of position and rotation needs more steps.
        corrections: corrective iterations per frame after the predictor step; they stop once
            the effector is within 0.05Δ (and 0.05 rotation_step) of its waypoint.
        max_steps: cap on the number of frames (default 2·ceil(L/Δ) + 200): the loop always ends.
        patience: frames without progress toward the target before the status is stalled.
        joint_weights: (dof,) > 0, the stiffness W of the weighted pseudo-inverse.
        damping: λ [units of J's singular values: m/rad for position rows]; damping_threshold:
            σ below which "pinv" starts damping.
        max_joint_step: [rad or m] the largest joint increment per iteration (the step is scaled).
        nullspace, nullspace_gain: the seed's redundancy term η (a name of
            ``invkin.nullspace.OBJECTIVES``, a callable ``eta(q)`` or an Objective), added to the
            predictor as ``(I − J⁺_W J) gain W⁻¹ η``.
        singular_threshold: frames whose task Jacobian has σ_min below it are flagged near_singular.

    Joint limits hold at every frame: joints at a limit that the step pushes outward are held
    still and the step is recomputed with the others. A frame whose waypoint is more than Δ
    away after its corrections holds the waypoint (the next frame aims at it again), so the
    effector never runs ahead of a lagging line. When the inverse cannot produce half of the
    frame's step at a near-singular posture (σ_min < ``damping_threshold``), the step gets a
    second-order nudge along J's null space (module docstring), so a straight, singular start
    gets out. Like the document's loop, every frame ends with the test ``|e| < Δ/2`` (then
    converged), and a target at or beyond the reach radius (|x − base| ≥ radius) is rejected.
    Returns a :class:`ReachResult`; a target outside the workspace is the status
    ``out_of_workspace``, not an error.
    """
    from .nullspace import make_objective

    node = robot.frame_index(frame)
    step = positive("step", step, " [m]")
    rstep = step if rotation_step is None else positive("rotation_step", rotation_step, " [rad]")
    if method not in REACH_METHODS:
        raise SolverError(f"reach: unknown method {method!r}; choose one of: {', '.join(REACH_METHODS)}")
    corrections = count("corrections", corrections)
    patience = count("patience", patience, 1)
    damping = positive("damping", damping)
    damping_threshold = positive("damping_threshold", damping_threshold)
    max_joint_step = positive("max_joint_step", max_joint_step, " [rad or m]")
    singular_threshold = positive("singular_threshold", singular_threshold)
    nullspace_gain = float(nullspace_gain)
    if not (nullspace_gain >= 0 and math.isfinite(nullspace_gain)):
        raise GoalError(f"nullspace_gain: expected a finite number >= 0, got {nullspace_gain!r}")
    p_goal, R_goal = _target(target)
    if joint_weights is None:
        W = np.ones(robot.dof)
    else:
        W = np.array(joint_weights, dtype=np.float64)
        if W.shape != (robot.dof,) or not np.all(np.isfinite(W)) or np.any(W <= 0):
            raise GoalError(f"joint_weights: expected {robot.dof} finite numbers > 0, got {joint_weights!r}")
    obj = None if nullspace is None else make_objective(
        nullspace, robot, **({"frame": node} if nullspace == "manipulability" else {}))
    q = _start(robot, q0)
    pose = R_goal is not None
    rows = slice(0, 6) if pose else slice(0, 3)

    T, J = robot.fk_jacobian(q, node)
    p0, R0 = T[:3, 3].copy(), T[:3, :3].copy()
    qs, ps, Rs = [q.copy()], [p0.copy()], [R0.copy()]
    sing = [bool(np.linalg.svd(J[rows], compute_uv=False)[-1] < singular_threshold)]

    def finish(status, iters):
        P = np.array(ps)
        dev = _segment_distance(P, p0, p_goal)
        pe = float(np.linalg.norm(p_goal - P[-1]))
        re_ = float(np.linalg.norm(so3_log(R_goal @ Rs[-1].T))) if pose else 0.0
        return ReachResult(np.array(qs), P, np.array(Rs) if pose else None, np.array(sing, dtype=bool), status,
                           float(dev.max()), pe, re_, iters, method)

    anchor, radius = robot.reach_bound(node)
    if anchor is not None:
        p_anchor = robot.fk(robot.neutral(), anchor)[:3, 3]
        if np.linalg.norm(p_goal - p_anchor) >= radius * (1 - 1e-12):  # the sample rejects |x| >= reach
            return finish(Status.OUT_OF_WORKSPACE, 0)

    L = float(np.linalg.norm(p_goal - p0))
    u = (p_goal - p0) / L if L > 0 else np.zeros(3)
    r_total = so3_log(R_goal @ R0.T) if pose else np.zeros(3)
    ang = float(np.linalg.norm(r_total))
    n_pos = math.ceil(L / step - 1e-12)
    n_rot = math.ceil(ang / rstep - 1e-12) if pose else 0
    by_rot = n_rot > n_pos
    n_wp = max(n_pos, n_rot)
    if max_steps is None:
        max_steps = 2 * n_wp + 200
    max_steps = count("max_steps", max_steps, 1)

    def waypoint(k):
        if by_rot:
            s = min(k * rstep / ang, 1.0)
        else:
            s = min(k * step / L, 1.0) if L > 0 else 1.0
        pk = p_goal if s >= 1.0 else p0 + s * L * u
        Rk = None
        if pose:
            Rk = R_goal if s >= 1.0 else so3_exp(s * r_total) @ R0
        return pk, Rk

    inv = _Inverse(method, damping, damping_threshold, 1.0 / W)
    line_tol, rot_tol = 0.05 * step, 0.05 * rstep
    lo, hi = robot.lower, robot.upper
    iters = 0
    k = 0
    best = math.inf
    since_best = 0

    def errors(T, pk, Rk):
        e = np.empty(6 if pose else 3)
        e[:3] = pk - T[:3, 3]
        if pose:
            e[3:] = so3_log(Rk @ T[:3, :3].T)
        return e

    def done(T):
        if np.linalg.norm(p_goal - T[:3, 3]) >= step / 2:
            return False
        return not pose or np.linalg.norm(so3_log(R_goal @ T[:3, :3].T)) < rstep / 2

    if done(T):
        return finish(Status.CONVERGED, 0)
    status = Status.ITERATION_LIMIT
    for _frame in range(max_steps):
        k_next = min(k + 1, n_wp)
        pk, Rk = waypoint(k_next)
        for it in range(1 + corrections):
            e = errors(T, pk, Rk)
            if it > 0 and np.linalg.norm(e[:3]) <= line_tol and (not pose or np.linalg.norm(e[3:]) <= rot_tol):
                break
            eta = None
            if it == 0 and obj is not None and nullspace_gain > 0:
                eta = nullspace_gain * obj.direction(q) / W
            Jr = J[rows]
            free = np.ones(robot.dof)
            for _ in range(3):  # hold joints at a limit that the step pushes outward
                dq = inv(Jr, e, free, eta)
                out = ((q <= lo) & (dq < 0)) | ((q >= hi) & (dq > 0))
                out &= free > 0
                if not out.any():
                    break
                free[out] = 0.0
            dq *= free
            if it == 0:
                dq += _singular_nudge(robot, node, q, Jr, e, dq, free, rows, damping_threshold, max_joint_step)
            big = float(np.max(np.abs(dq))) if dq.size else 0.0
            if big > max_joint_step:
                dq *= max_joint_step / big
            q = np.clip(robot.integrate(q, dq), lo, hi)
            iters += 1
            T, J = robot.fk_jacobian(q, node)
        e = errors(T, pk, Rk)
        qs.append(q.copy())
        ps.append(T[:3, 3].copy())
        Rs.append(T[:3, :3].copy())
        sing.append(bool(np.linalg.svd(J[rows], compute_uv=False)[-1] < singular_threshold))
        if done(T):  # the document's test, at every frame
            status = Status.CONVERGED
            break
        # advance along the line unless the effector lags more than one step behind its waypoint
        if np.linalg.norm(e[:3]) <= step and (not pose or np.linalg.norm(e[3:]) <= rstep):
            k = k_next
        dist = float(np.linalg.norm(p_goal - T[:3, 3]))
        if pose:
            dist += float(np.linalg.norm(so3_log(R_goal @ T[:3, :3].T))) * step / rstep
        if dist < best - 1e-3 * step:
            best, since_best = dist, 0
        else:
            since_best += 1
            if since_best >= patience:
                status = Status.STALLED
                break
    return finish(status, iters)


def _singular_nudge(robot, node, q, Jr, e, dq, free, rows, threshold, max_step):
    """A null-space step that moves the effector toward ``e`` at second order, where J cannot.

    Used when the linear step ``dq`` achieves less than half of ``e`` and σ_min(J) < threshold.
    With ``u`` the unit direction of the part ``r = e − J dq`` the step misses, N a basis of the
    (near-)null space of J (right singular vectors with σ < threshold, and the exact null space),
    and ``M_jk = uᵀ ∂J_j/∂q_k`` (central differences, symmetrised: the Hessian of uᵀx), the
    effector moves by ``½ δqᵀ M δq`` along u for ``δq = t N v``: v is the eigenvector of NᵀMN
    with the largest eigenvalue λ > 0 and ``t = sqrt(2|r| / λ)`` covers the missing part (capped
    at max_step). Returns zeros when nothing is missing or no null-space direction helps.
    """
    dof = q.shape[0]
    Jf = Jr * free
    r = e - Jf @ dq
    rn = float(np.linalg.norm(r))
    if rn <= 0.5 * float(np.linalg.norm(e)) or dof == 0:
        return np.zeros(dof)
    _, S, Vt = np.linalg.svd(Jf, full_matrices=True)
    rank = int(np.sum(S >= threshold))
    if rank == S.shape[0] and rank >= dof:
        return np.zeros(dof)  # not near a singularity: the shortfall has another cause (limits)
    N = Vt[rank:].T * free[:, None]
    u = r / rn
    h = 1e-6
    steps = np.eye(dof) * h
    Jp = robot.jacobian(robot.integrate(np.broadcast_to(q, (dof, dof)), steps), node)[:, rows]
    Jm = robot.jacobian(robot.integrate(np.broadcast_to(q, (dof, dof)), -steps), node)[:, rows]
    M = np.einsum("i,kij->jk", u, (Jp - Jm) / (2 * h))
    M = 0.5 * (M + M.T)
    lam, V = np.linalg.eigh(N.T @ M @ N)
    if not lam[-1] > 1e-9 * max(1.0, float(np.abs(lam).max())):
        return np.zeros(dof)
    t = math.sqrt(2.0 * rn / lam[-1])
    nudge = N @ V[:, -1] * t
    big = float(np.max(np.abs(nudge)))
    return nudge * (max_step / big) if big > max_step else nudge


def _segment_distance(P, a, b):
    """Distance of each point of P (N, 3) from the segment a–b."""
    d = b - a
    L2 = float(d @ d)
    if L2 == 0.0:
        return np.linalg.norm(P - a, axis=1)
    t = np.clip((P - a) @ d / L2, 0.0, 1.0)
    return np.linalg.norm(P - (a + t[:, None] * d), axis=1)


# =========================================================================== rest posture


@dataclass(frozen=True)
class RestResult:
    """Outcome of :func:`solve_with_rest`.

    q (dof,): the configuration where the joints settle between the springs; stiffness,
    damping (dof,): p_new = p_orig + p_ik, d_new = d_orig + d_ik; goal_reached: every goal within
    tolerance at q; position_error [m], rotation_error [rad] at q; ik: the solve's own Result
    (mode "blend": before the blend); goal_lost: the goals are reachable without the rest
    springs but not with them (p_orig too strong against p_ik: SEEDS.md §3, 5.1); mode: "loop"
    or "blend".
    """

    q: np.ndarray
    stiffness: np.ndarray
    damping: np.ndarray
    goal_reached: bool
    position_error: float
    rotation_error: float
    ik: Result
    goal_lost: bool = False
    mode: str = "blend"


def solve_with_rest(robot, goals, theta_orig, p_orig, p_ik, d_orig=0.0, d_ik=0.0, *, q0=None,
                    position_tolerance: float = 1e-6, rotation_tolerance: float = 1e-6, warn: bool = True,
                    mode: str = "loop", **solve_options) -> RestResult:
    """Solve with rest-posture springs (SEEDS.md §3, 5.1) and report whether the goals survive them.

    ``theta_orig`` (dof,) is the rest posture (also the start of the solve unless ``q0`` is
    given); the springs broadcast per joint.

    * ``mode="loop"`` (default, the document's scheme): Springhead's solver (method
      ``gauss-seidel``) moves each joint's IK reference θ_ik, and at every iteration the joint
      settles at ``(p_orig θ_orig + p_ik θ_ik)/(p_orig + p_ik)``; the goals are reached while
      θ_ik stays inside the joint range, i.e. unless p_orig ≫ p_ik.
    * ``mode="blend"``: any method solves without springs, then the result is blended once with
      :func:`rest_blend` (the goals are missed by about p_orig/(p_orig + p_ik) of the motion).

    When the goals are not reached with the springs but are without them, ``goal_lost`` is True
    and a :class:`RestPoseWarning` is emitted (``warn=False`` silences it). ``solve_options`` go
    to :func:`invkin.solve` (``method`` only in blend mode).
    """
    from .solve import solve

    theta_orig = robot.check_q(theta_orig, "theta_orig")
    if theta_orig.ndim != 1:
        raise GoalError(f"theta_orig: expected shape ({robot.dof},), got {theta_orig.shape}")
    for nm, v, strict in (("p_orig", p_orig, True), ("p_ik", p_ik, True), ("d_orig", d_orig, False),
                          ("d_ik", d_ik, False)):
        check_springs(nm, v, strict)  # bad springs fail before the solve runs
    loop = rest_in_loop(solve_options.get("method", "gauss-seidel" if mode == "loop" else "lm"), mode)
    problem = compile_problem(robot, goals, position_tolerance, rotation_tolerance)
    q_start = theta_orig if q0 is None else q0
    tols = dict(position_tolerance=position_tolerance, rotation_tolerance=rotation_tolerance)
    p = np.broadcast_to(np.asarray(p_orig, dtype=float) + np.asarray(p_ik, dtype=float), (robot.dof,)).copy()
    d = np.broadcast_to(np.asarray(d_orig, dtype=float) + np.asarray(d_ik, dtype=float), (robot.dof,)).copy()
    if loop:
        opts = {**solve_options, "method": "gauss-seidel"}
        res = solve(robot, goals, q0=q_start, theta_orig=theta_orig, p_orig=p_orig, p_ik=p_ik, **tols, **opts)
        theta = res.q
        reached = res.success
        lost = not reached and solve(robot, goals, q0=q_start, **tols, **opts).success
    else:
        res = solve(robot, goals, q0=q_start, **tols, **solve_options)
        theta, p, d = rest_blend(theta_orig, res.q, p_orig, p_ik, d_orig, d_ik, robot=robot)
        theta = np.clip(theta, robot.lower, robot.upper)
        pe, re_ = problem_errors(problem, theta)
        reached = bool(pe <= problem.tol_p and re_ <= problem.tol_r)
        lost = res.success and not reached
    pe, re_ = problem_errors(problem, theta)
    if warn and lost:
        warnings.warn(f"rest-posture springs ({mode}): the goals are no longer reached (position error {pe:.3g} m, "
                      f"rotation error {re_:.3g} rad), though they are without the springs; p_orig dominates p_ik",
                      RestPoseWarning, stacklevel=2)
    return RestResult(theta, np.broadcast_to(p, (robot.dof,)).copy(), np.broadcast_to(d, (robot.dof,)).copy(),
                      bool(reached), float(pe), float(re_), res, bool(lost), "loop" if loop else "blend")


# =========================================================================== statics


def joint_torques(robot, q, wrenches) -> np.ndarray:
    """Joint torques that hold the given wrenches (SEEDS.md §3, 5.2): ``τ = Σ_c J_cᵀ F_c`` → (dof,).

    ``wrenches``: ``{frame: F}`` or a sequence of ``(frame, F)`` pairs (one frame may appear
    twice), ``F`` (6,) = force xyz [N] and torque xyz [N·m], both in the base frame, the force
    applied at the frame's origin. ``J_c`` is the frame's geometric Jacobian (world-aligned, at
    its origin), so τ_i is the virtual work ``F · δx / δq_i``: [N·m] for revolute entries, [N]
    for prismatic ones; ball-joint entries pair with the local increment that
    ``Robot.integrate`` applies.
    """
    q = robot.check_q(q)
    if q.ndim != 1:
        raise ConfigurationError(f"q: expected shape ({robot.dof},), got {q.shape}")
    items = wrenches.items() if isinstance(wrenches, dict) else wrenches
    try:
        items = list(items)
    except TypeError:
        raise GoalError(f"wrenches: expected {{frame: (6,) wrench}} or (frame, wrench) pairs, "
                        f"got {wrenches!r:.200}") from None
    tau = np.zeros(robot.dof)
    for item in items:
        try:
            frame, F = item
        except (TypeError, ValueError):
            raise GoalError(f"wrenches: expected (frame, wrench) pairs, got {item!r:.200}") from None
        node = robot.frame_index(frame)
        try:
            Fa = np.asarray(F, dtype=np.float64)
        except (TypeError, ValueError):
            raise GoalError(f"wrench on frame {frame!r}: expected 6 numbers (force xyz, torque xyz), "
                            f"got {F!r:.200}") from None
        if Fa.shape != (6,):
            raise GoalError(f"wrench on frame {frame!r}: expected shape (6,) (force xyz, torque xyz), "
                            f"got shape {Fa.shape}")
        if not np.all(np.isfinite(Fa)):
            raise GoalError(f"wrench on frame {frame!r}: expected finite values, got {Fa.tolist()}")
        tau += robot.jacobian(q, node).T @ Fa
    return tau
