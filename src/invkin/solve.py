"""The solve driver: validate, compile the goals, run a method with restarts inside the time
budget, keep the best configuration, and say why it stopped.

Every method shares this driver (restarts, tolerances, time budget, RNG). The RNG is
``numpy.random.default_rng(seed)``; restart k always starts from the k-th draw, so a solve is
deterministic for a given seed whenever it ends before its time budget (``timeout=None`` makes
it deterministic always: the budget is then ``max_iterations`` alone).
"""
from __future__ import annotations

import math
import time

import numpy as np

from .errors import ConfigurationError, GoalError, SolverError
from .goals import KIND_POSITION
from .kinematics import kernels as K
from .result import Result, Status
from .solvers import get_method, methods
from .solvers._common import CONVERGED, STALLED, compile_problem, goal_errors

__all__ = ["solve", "methods", "DEFAULTS"]

#: Defaults of :func:`solve`.
DEFAULTS = dict(position_tolerance=1e-6, rotation_tolerance=1e-6, timeout=0.05, max_iterations=None)

_FIRST_CHUNK = 100  # iterations of the first attempt before the clock is looked at


def _check_positive(name, v, allow_none=False):
    if v is None and allow_none:
        return None
    if type(v) is float and v > 0 and v < math.inf:
        return v
    if isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating)) or not v > 0 \
            or not math.isfinite(v):
        raise GoalError(f"{name}: expected a finite number > 0{' or None' if allow_none else ''}, got {v!r}")
    return v


def reach_bound(robot, node: int):
    """(fixed point [m], radius [m]): the node's origin always lies within radius of the point.

    The point is the origin of the first moving joint on the path from the root; the radius
    sums the link offsets after it and the prismatic travel.
    """
    path = robot.ancestors(node)[::-1]  # root first
    first = None
    for k, i in enumerate(path):
        if robot.qidx[i] >= 0:
            first = k
            break
    if first is None:
        return None, 0.0
    radius = 0.0
    for i in path[first + 1:]:
        radius += float(np.linalg.norm(robot.origin[i][:3, 3]))
    for i in path[first:]:
        if robot.joint_type[i] == K.PRISMATIC and robot.qidx[i] >= 0:
            c = int(robot.qidx[i])
            radius += abs(robot.multiplier[i]) * max(abs(robot.lower[c]), abs(robot.upper[c])) + abs(robot.offset[i])
    return path[first], radius


def provably_unreachable(problem) -> bool:
    """True when a position goal lies beyond the reach radius of its frame."""
    robot = problem.robot
    if not hasattr(robot, "_reach_cache"):
        object.__setattr__(robot, "_reach_cache", {})
    cache = robot._reach_cache
    for g in range(problem.gnode.shape[0]):
        if problem.gkind[g] != KIND_POSITION or problem.gw[g] <= 0:
            continue
        node = int(problem.gnode[g])
        if node not in cache:
            cache[node] = reach_bound(robot, node)
        anchor, radius = cache[node]
        if anchor is None:
            continue
        # the anchor does not move: its position at any q
        p_anchor = robot.fk(robot.neutral(), anchor)[:3, 3]
        if np.linalg.norm(problem.gvec[g] - p_anchor) > radius + problem.tol_p:
            return True
    return False


def _initial_q(robot, q0):
    if q0 is None:
        return robot.neutral()
    q = robot.check_q(q0, "q0")
    if q.ndim != 1:
        raise ConfigurationError(f"q0: expected shape ({robot.dof},), got {q.shape}")
    return np.minimum(np.maximum(q, robot.lower), robot.upper)


def _sampler(robot):
    """Cached (lo, hi) for fast uniform restarts (continuous: [-pi, pi], free prismatic: [-1, 1])."""
    s = getattr(robot, "_sample_bounds", None)
    if s is None:
        types = robot.joint_types_per_dof
        span = np.array([1.0 if t == "prismatic" else math.pi for t in types])
        lo = np.where(np.isfinite(robot.lower), robot.lower, -span)
        hi = np.where(np.isfinite(robot.upper), robot.upper, span)
        lo = np.minimum(lo, hi)
        s = (lo, hi - lo)
        object.__setattr__(robot, "_sample_bounds", s)
    return s


def solve(robot, goals, q0=None, method: str = "lm", position_tolerance: float = 1e-6,
          rotation_tolerance: float = 1e-6, timeout: float | None = 0.05, max_iterations: int | None = None,
          seed=0, joint_weights=None, restarts: bool = True, mode: str = "speed", **options) -> Result:
    """Solve inverse kinematics for one or more goals.

    Args:
        robot: a :class:`Robot`.
        goals: a goal or a list of goals (Position, Orientation, Pose, Aim, Posture).
        q0: (dof,) start configuration (clamped into the limits); default ``robot.neutral()``.
        method: a registered name (:func:`methods`); default Levenberg–Marquardt.
        position_tolerance [m], rotation_tolerance [rad]: success thresholds on every goal.
        timeout [s]: wall-clock budget including restarts; None: no clock, only max_iterations.
        max_iterations: total iterations over all restarts (default: unlimited within the timeout,
            1000 without one).
        seed: RNG seed for restarts (int or numpy Generator).
        joint_weights: (dof,) > 0, stiffness of each joint (weighted least norm).
        restarts: restart from random configurations when an attempt stalls.
        mode: "speed" returns the first solution; "distance" keeps solving until the budget is
            spent and returns the converged solution closest to q0 (TRAC-IK's Distance mode).
        **options: method-specific settings (see each method's docstring).

    Returns a :class:`Result`; an unreachable or hard target is a status, never an exception.
    """
    t_start = time.perf_counter()
    m = get_method(method)
    _check_positive("position_tolerance", position_tolerance)
    _check_positive("rotation_tolerance", rotation_tolerance)
    timeout = _check_positive("timeout", timeout, allow_none=True)
    if max_iterations is not None:
        if type(max_iterations) is int and max_iterations >= 1:
            pass
        elif isinstance(max_iterations, bool) or not isinstance(max_iterations, (int, np.integer)) \
                or max_iterations < 1:
            raise GoalError(f"max_iterations: expected an integer >= 1 or None, got {max_iterations!r}")
    elif timeout is None:
        max_iterations = 1000
    if mode not in ("speed", "distance"):
        raise SolverError(f"mode: expected 'speed' or 'distance', got {mode!r}")
    problem = compile_problem(robot, goals, position_tolerance, rotation_tolerance, joint_weights)
    if m.check is not None:
        m.check(problem)
    opts = m.defaults
    if options:
        unknown = set(options) - set(opts)
        if unknown:
            raise SolverError(f"method {m.name!r} has no option(s) {sorted(unknown)}; "
                              f"its options: {sorted(opts) or 'none'}")
        opts = {**opts, **options}
    q_start = _initial_q(robot, q0)
    rng = seed if isinstance(seed, np.random.Generator) else None  # created at the first restart
    deadline = None if timeout is None else t_start + timeout

    q = q_start.copy()
    state = np.zeros(8)
    best_q = q.copy()
    best_key = (math.inf, math.inf)
    best_conv_q = None
    best_conv_dist = math.inf
    total_it = 0
    n_restarts = 0
    stalled_errs = []
    stop_reason = None
    chunk = _FIRST_CHUNK
    unreachable_known = None
    per_iter = None
    attempt_cap = m.attempt_iterations
    attempt_it = 0
    while True:
        budget_it = chunk if max_iterations is None else min(chunk, max_iterations - total_it)
        if attempt_cap is not None:
            budget_it = min(budget_it, attempt_cap - attempt_it)
        it_before = state[1]
        t0 = time.perf_counter()
        code = m.iterate(problem, q, budget_it, state, opts)
        done = int(state[1] - it_before)
        total_it += done
        attempt_it += done
        if code != CONVERGED and attempt_cap is not None and attempt_it >= attempt_cap:
            code = STALLED
        if done:
            dt = (time.perf_counter() - t0) / done
            per_iter = dt if per_iter is None else 0.5 * (per_iter + dt)
        perr, rerr = state[2], state[3]
        converged = code == CONVERGED
        key = (max(perr / position_tolerance, rerr / rotation_tolerance), perr + rerr)
        if converged:
            if mode == "speed":
                return Result(q, True, Status.CONVERGED, float(perr), float(rerr), int(total_it), n_restarts,
                              time.perf_counter() - t_start, m.name)
            d = float(np.sum(problem.joint_weights * robot.difference(q_start, q) ** 2))
            if d < best_conv_dist:
                best_conv_q, best_conv_dist = q.copy(), d
        elif key < best_key:
            best_q, best_key = q.copy(), key
        now = time.perf_counter()
        if deadline is not None and now >= deadline:
            stop_reason = Status.TIME_LIMIT
            break
        if max_iterations is not None and total_it >= max_iterations:
            stop_reason = Status.ITERATION_LIMIT
            break
        if code == STALLED or converged or done == 0:
            if code == STALLED:
                stalled_errs.append(key[1])
                if unreachable_known is None:
                    unreachable_known = provably_unreachable(problem)
                if unreachable_known and len(stalled_errs) >= 3:
                    stop_reason = Status.UNREACHABLE
                    break
            if not (restarts and m.restarts):
                stop_reason = Status.STALLED if code == STALLED else Status.ITERATION_LIMIT
                break
            if rng is None:
                rng = np.random.default_rng(seed)
            lo, span = _sampler(robot)
            q = lo + span * rng.random(robot.dof)
            if robot.has_ball_joints:
                q = robot.sample(rng=rng)
            state[:] = 0.0
            attempt_it = 0
            n_restarts += 1
        if deadline is not None and per_iter:
            chunk = int(min(max(16, 0.25 * (deadline - now) / per_iter), 10_000))
    if best_conv_q is not None:
        best_q = best_conv_q
        perr, rerr = goal_errors(robot._ni, robot._nf, robot.origin, best_q, problem.gnode, problem.gkind,
                                 problem.gvec, problem.gR, problem.gaxis, problem.gw)
        status = Status.CONVERGED
    else:
        perr, rerr = goal_errors(robot._ni, robot._nf, robot.origin, best_q, problem.gnode, problem.gkind,
                                 problem.gvec, problem.gR, problem.gaxis, problem.gw)
        if perr <= position_tolerance and rerr <= rotation_tolerance:
            status = Status.CONVERGED
        else:
            if unreachable_known is None:
                unreachable_known = provably_unreachable(problem)
            if unreachable_known:
                status = Status.UNREACHABLE
            elif stop_reason in (Status.TIME_LIMIT, Status.ITERATION_LIMIT) and not stalled_errs:
                status = stop_reason
            elif len(stalled_errs) >= 3 and np.ptp(sorted(stalled_errs)[:3]) <= 1e-6 * max(stalled_errs[0], 1e-12):
                status = Status.UNREACHABLE  # several restarts agree on the same closest pose
            elif stop_reason in (Status.TIME_LIMIT, Status.ITERATION_LIMIT, Status.STALLED):
                status = Status.STALLED if stalled_errs else stop_reason
            else:
                status = stop_reason or Status.STALLED
    return Result(best_q, status == Status.CONVERGED, status, float(perr), float(rerr), int(total_it),
                  n_restarts, time.perf_counter() - t_start, m.name)
