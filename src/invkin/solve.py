"""The solve driver: validate, compile the goals, run a method with restarts inside the time
budget, keep the best configuration, and say why it stopped.

Every method shares this driver (restarts, tolerances, time budget, RNG). The RNG is
``numpy.random.default_rng(seed)``; restart k always starts from the k-th draw, so a solve is
deterministic for a given seed whenever it ends before its time budget (``timeout=None`` makes
it deterministic always: the budget is then ``max_iterations`` alone).
"""
from __future__ import annotations

import math
import threading
import time

import numpy as np

from ._parallel import call as parallel_call
from ._compile_clock import Budget, interpreted_seconds, moved_seconds, one_solve
from ._tiers import call_interpreted, entry_point
from ._tiers import ready as _tier_ready
from ._checks import MAX_LENGTH, SEED_LIMIT
from .model.robot import robot_arg
from ._checks import seed as check_seed
from .errors import ConfigurationError, GoalError, SolverError, warn_caller
from .goals import (_TINY_WEIGHT, BASIC_KINDS, KIND_COM, KIND_POSITION, KIND_REL_POSITION, KINDS, PACKED, Goal,
                    Pose, Position, Posture, lean_index, relative_weights)
from .result import Result, Status
from .solvers import get_method, methods
from .solvers.shared import (CONVERGED, RUNNING, STALLED, compile_problem, goal_errors, problem_errors,
                              project_cones_in_place)
from .solvers._common import LAYOUTS_KEPT
from .model.limits import respect_cone_limits
from .solvers import lm as _lm
from .solvers import lm_core as _core
from .kinematics.kernels import all_finite as _lm_finite
from .solvers.lm import ATTEMPT_ITERATIONS as _LM_ATTEMPT_ITERATIONS
from .solvers.lm import lm_chain_attempts as _lm_chain_attempts
from .solvers.lm import wrap_near_into as _wrap_near_into

_CHAIN_STATE0 = (_lm.new_chain_state(0.0), _lm.new_chain_state(1.0))  # clamped / free attempts
_CORE_STATE0 = (_core.new_core_state(0.0), _core.new_core_state(1.0))  # mode "speed" / "distance"
ATTEMPT_ITERATIONS, S_ATTEMPT, S_ITERS, S_MINIMIZE = _lm.ATTEMPT_ITERATIONS, _lm.S_ATTEMPT, _lm.S_ITERS, _lm.S_MINIMIZE
S_ATTEMPT_ITERS = _lm.S_ATTEMPT_ITERS
S_BEST_PERR, S_BEST_RERR, S_BEST_DIST, UNREACHABLE = _lm.S_BEST_PERR, _lm.S_BEST_RERR, _core.S_BEST_DIST, _lm.UNREACHABLE


class _Scratch(threading.local):
    """Per-thread scratch buffers (class defaults: a missing attribute of a thread-local costs an
    AttributeError)."""

    buf = None  # float64 (_scratch)
    lean = None  # (float64, int64, their lengths) of the whole-body fast path (_lean_scratch)


_THREAD = _Scratch()
_F64 = np.dtype(np.float64)
_CONVERGED = Status.CONVERGED


def _scratch(size: int) -> np.ndarray:
    """A per-thread float64 scratch buffer of at least ``size`` entries, reused across solves."""
    buf = _THREAD.buf
    if buf is None or buf.shape[0] < size:
        buf = np.empty(max(size, 1024))
        _THREAD.buf = buf
    return buf


def _lean_scratch(fsize: int, isize: int) -> tuple:
    """(float64, int64, their lengths): this thread's buffers of at least fsize, isize entries
    for core_attempts_packed (_solve_core_fast, which reads ``_THREAD.lean`` itself and calls
    this only to grow them), reused across solves."""
    s = _THREAD.lean
    if s is None or s[2] < fsize or s[3] < isize:
        f, i = max(fsize, 4096, 0 if s is None else s[2]), max(isize, 512, 0 if s is None else s[3])
        s = _THREAD.lean = (np.empty(f), np.empty(i, dtype=np.int64), f, i)
    return s


__all__ = ["solve", "solve_many", "methods", "DEFAULTS"]

#: Defaults of :func:`solve`.
DEFAULTS = dict(position_tolerance=1e-6, rotation_tolerance=1e-6, timeout=0.05, max_iterations=None)

_FIRST_CHUNK = 100  # iterations of the first attempt before the clock is looked at
_TIMED_FIRST_CHUNK = 1  # the same with a timeout, for the methods of _solve (measured, then sized)
_MIN_CHUNK = 1  # the fewest iterations per kernel call of _solve once they are measured
#: max_iterations when timeout is None and max_iterations is None.
DEFAULT_MAX_ITERATIONS = 1000
#: max_iterations when a timeout is given and max_iterations is None: a hard bound that holds
#: whatever the clock says (a timeout of 1e300 s, a clock that stalls).
ITERATION_CAP = 1_000_000
_MAX_RESTARTS_KEY = "_max_restarts"  # solve_many -> solve -> _solve: restarts per target (methods other than lm)
#: solve_many's largest max_restarts (per target).
MAX_RESTARTS = 10_000


def _check_positive(name, v, allow_none=False):
    if v is None and allow_none:
        return None
    if type(v) is float and v > 0 and v < math.inf:
        return v
    if isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating)) or not v > 0 \
            or not math.isfinite(v):
        raise GoalError(f"{name}: expected a finite number > 0{' or None' if allow_none else ''}, got {v!r}")
    return v


def provably_unreachable(problem) -> bool:
    """True when a position goal lies beyond the reach radius of its frame, or two position goals
    lie farther apart than the tree path between their frames can stretch (Robot.pair_reach: a
    hand 2 m from the feet that hard goals hold, whatever the floating base does), or a Relative
    position farther from its reference frame than that path can stretch, or a CenterOfMass
    beyond where the links' reach bounds let the centre of mass go (com_reach), or a goal on a frame
    that no joint moves (the root, a link fixed to it) is not met where that frame is."""
    return _beyond_reach(problem.robot, problem.gnode, problem.gkind, problem.gvec, problem.gw, problem.tol_p,
                         problem.gR, problem.gaxis, problem.tol_r, problem.gref)


def reach_point(robot, node):
    """(point [m], radius [m]): the origin of frame ``node`` lies within radius of the point at
    every q: Robot.reach_bound's anchor, or the frame's own origin, radius 0, for a frame that no
    joint moves (the root, a link fixed to it). Cached per robot and node."""
    reach = robot.cache.setdefault("reach_points", {})
    bound = reach.get(node)
    if bound is None:
        anchor, radius = robot.reach_bound(node)
        # the anchor does not move: its position at any q (the frame itself when nothing moves it)
        bound = reach[node] = (robot.fk(robot.neutral(), node if anchor is None else anchor)[:3, 3].copy(),
                               radius)
    return bound


def com_reach(robot):
    """(point [m], radius [m]): the centre of mass lies within radius of the point at every q (the
    mass-weighted mean of each link's reach_point, the radius the mass-weighted mean of each link's
    radius plus its centre's offset; inf with a floating base). Cached per robot."""
    bound = robot.cache.get("com_reach")
    if bound is None:
        mass = np.asarray(robot.link_mass, dtype=np.float64)
        total = float(mass.sum())
        point, radius = np.zeros(3), 0.0
        for i in range(robot.n_nodes):
            if mass[i] > 0:
                a, r = reach_point(robot, i)
                point += (mass[i] / total) * a
                radius += (mass[i] / total) * (r + float(np.linalg.norm(robot.link_com[i])))
        bound = robot.cache["com_reach"] = (point, radius)
    return bound


def _beyond_reach(robot, gnode, gkind, gvec, gw, tol_p, gR=None, gaxis=None, tol_r=None, gref=None) -> bool:
    """provably_unreachable on the goal rows' arrays (gnode: a node per row, or one int for all);
    with gR, gaxis and tol_r, also the rotation, axis and aim rows on frames that no joint moves
    (their error is the same at every q); with gref, the relative position rows (the frame lies
    |t| from its reference frame's origin, the rotation keeps lengths)."""
    for g in range(gkind.shape[0]):
        if gw[g] <= 0:
            continue
        node = int(gnode if isinstance(gnode, int) else gnode[g])
        if gkind[g] == KIND_COM and gaxis is not None:  # (the axes mask rides in the axis slot)
            point, radius = com_reach(robot)
            if np.linalg.norm(gaxis[g] * (gvec[g] - point)) > radius + tol_p:
                return True
        elif gkind[g] == KIND_REL_POSITION and gref is not None and gref[g] >= 0:
            if np.linalg.norm(gvec[g]) > robot.pair_reach(node, int(gref[g])) + tol_p:
                return True
        elif gkind[g] == KIND_POSITION:
            p_anchor, radius = reach_point(robot, node)
            if np.linalg.norm(gvec[g] - p_anchor) > radius + tol_p:
                return True
        elif gR is not None and gkind[g] in BASIC_KINDS and robot.reach_bound(node)[0] is None:
            _, re_ = goal_errors(robot.node_table, robot.node_params, robot.origin, robot.neutral(),
                                 np.array([node], dtype=np.int64), gkind[g:g + 1], gvec[g:g + 1], gR[g:g + 1],
                                 gaxis[g:g + 1], gw[g:g + 1])
            if re_ > tol_r:
                return True
    if isinstance(gnode, int):
        return False
    rows = [g for g in range(gkind.shape[0]) if gkind[g] == KIND_POSITION and gw[g] > 0]
    for i, g in enumerate(rows):
        for h in rows[i + 1:]:
            if np.linalg.norm(gvec[g] - gvec[h]) > robot.pair_reach(int(gnode[g]), int(gnode[h])) + 2 * tol_p:
                return True
    return False


def _initial_q(robot, q0):
    if q0 is None:
        return robot.neutral()
    q = robot.check_q(q0, "q0")
    if q.ndim != 1:
        raise ConfigurationError(f"q0: expected shape ({robot.dof},), got {q.shape}")
    if q.size and float(np.max(np.abs(q))) > MAX_LENGTH:  # FK of such values overflows
        raise ConfigurationError(f"q0: expected values within ±{MAX_LENGTH:g}, got {q.tolist()}")
    return np.minimum(np.maximum(q, robot.lower), robot.upper)


RESTART_MARGIN = 0.1  # restarts sample the middle 80 % of each limited range (measured: ~15 % fewer
                      # LM iterations on panda and g1 than the full range; starts at a limit waste steps)


def _sampler(robot, q0=None):
    """Cached (lo, span) for fast uniform restarts: the middle of each limited range, [-pi, pi] for
    continuous joints, [-1, 1] m for unbounded prismatic joints; the q entries of free and planar
    joints (a floating base) within model.robot.BASE_SAMPLE_SPREAD of ``q0`` (default: of the
    neutral configuration, the origin), never over their infinite range."""
    if q0 is not None and robot.floating:
        lo, span = (a.copy() for a in _sampler(robot))
        lo[robot.base_dofs], span[robot.base_dofs] = _base_box(robot, q0)
        return lo, span
    s = robot.cache.get("sample_bounds")
    if s is None:
        types = robot.joint_types_per_dof
        half = np.array([1.0 if t == "prismatic" else math.pi for t in types])
        limited = np.isfinite(robot.lower) & np.isfinite(robot.upper)
        lo = np.where(np.isfinite(robot.lower), robot.lower, -half)
        hi = np.where(np.isfinite(robot.upper), robot.upper, half)
        lo = np.minimum(lo, hi)
        span = hi - lo
        lo = np.where(limited, lo + RESTART_MARGIN * span, lo)
        span = np.where(limited, (1.0 - 2.0 * RESTART_MARGIN) * span, span)
        if robot.floating:
            lo[robot.base_dofs], span[robot.base_dofs] = _base_box(robot, robot.q_neutral)
        s = (lo, span)
        robot.cache["sample_bounds"] = s
    return s


def free_attempts(lower, upper, wrap) -> float:
    """1.0 when LM attempts may run free of the limits: every joint either is unbounded or is a
    revolute joint whose range spans a full turn (less 0.05 rad), so that a converged q can be
    shifted by 2 pi into the limits (nearly always; when it cannot, the attempt goes on clamped).
    Otherwise 0.0: attempts clamp every step into the limits. Measured on the peers' 6 x 1000
    targets: free attempts take fewer iterations on ur5 (every range >= 2 pi); on panda, iiwa14,
    baxter_left and g1_left_arm, whose ranges are narrower, clamped attempts with held joints
    (solvers/lm.py: _active_set_step) take 20-85 % fewer than alternating free and clamped ones."""
    unbounded = np.isneginf(lower) & np.isposinf(upper)
    turn = (wrap > 0.0) & (upper - lower >= 2.0 * math.pi - 0.05)
    return 1.0 if bool(np.all(unbounded | turn)) else 0.0


def _base_box(robot, q0):
    """(lo, span) of the restart box of the floating base's q entries: q0 ± BASE_SAMPLE_SPREAD."""
    spread = robot.base_spread
    return q0[robot.base_dofs] - spread, 2.0 * spread


def _lm_tables(robot, joint_weights=None, q0=None):
    """(lims, free, scratch size) for the chain LM kernels: the per-DOF table of
    solvers.lm.limits_table, free_attempts, and a scratch length that fits any chain of the robot
    with up to two goal rows. Cached per robot for the default joint weights, except on a
    floating robot, whose base restarts are sampled around ``q0``."""
    if joint_weights is None:
        t = robot.cache.get("lm_tables") or robot.cache.get("lm_tables_origin")
        if t is not None:
            return t if q0 is None or not robot.floating else _around(robot, t, q0)
    lo, span = _sampler(robot)
    wrap = _lm.wrappable_dofs(robot.node_table, robot.node_params, robot.dof)
    lims = _lm.limits_table(robot.lower, robot.upper, lo, span, wrap,
                            robot.unit_weights if joint_weights is None else joint_weights, robot.ball_starts)
    t = (lims, free_attempts(robot.lower, robot.upper, wrap),
         _lm.chain_workspace_size(robot.n_nodes + 1, robot.dof, 6))
    if joint_weights is None:  # a floating robot's table samples its base around the origin
        robot.cache["lm_tables_origin" if robot.floating else "lm_tables"] = t
    return t if q0 is None or not robot.floating else _around(robot, t, q0)


def _around(robot, t, q0):
    """The LM tables ``t`` with the floating base's restart box moved around ``q0`` (the last
    one kept per robot: repeated solves from the same base place rebuild nothing)."""
    key = q0[robot.base_dofs].tobytes()
    last = robot.cache.get("lm_tables_at")
    if last is not None and last[0] == key and last[1] is t[0]:
        return last[2]
    lims = t[0].copy()
    lims[_lm.L_SAMPLE_LO, robot.base_dofs], lims[_lm.L_SAMPLE_SPAN, robot.base_dofs] = _base_box(robot, q0)
    lims.setflags(write=False)
    out = (lims,) + tuple(t[1:])
    robot.cache["lm_tables_at"] = (key, t[0], out)
    return out


def _one_frame(problem):
    """The node all of the problem's goal rows are on when the chain LM kernel can run the
    problem (no posture term), else None."""
    node = problem.layout.one_node
    return None if problem.w_posture != 0.0 or node < 0 else node


def solve(robot, goals, q0=None, method: str = "lm", position_tolerance: float = 1e-6,
          rotation_tolerance: float = 1e-6, timeout: float | None = 0.05, max_iterations: int | None = None,
          seed=0, joint_weights=None, restarts: bool = True, mode: str = "speed", nullspace=None,
          nullspace_gain: float | None = None, nullspace_iterations: int = 50, rest: dict | None = None,
          max_joint_step=None, dt: float | None = None, world=None, self_collision: bool = False,
          margin: float = 0.005, **options) -> Result:
    """Solve inverse kinematics for one or more goals.

    Args:
        robot: a :class:`Robot`.
        goals: a goal or a list of goals (Position, Orientation, Pose, Aim, CenterOfMass, Relative,
            Plane, at most one Posture); ``hard=True`` goals are met first and kept (lm; ``Result.goals_met`` says which
            goals are met).
        q0: (dof,) start configuration (clamped into the limits); default ``robot.neutral()``.
        method: a registered name (:func:`methods`); default Levenberg–Marquardt.
        position_tolerance [m], rotation_tolerance [rad]: success thresholds on every goal.
        timeout [s]: wall-clock budget including restarts; None: no clock, the solve is bounded by
            ``max_iterations`` alone. The first call of a method in a process also compiles (or
            loads from Numba's cache) its kernels; that time is not bounded by the timeout (the
            driver moves its deadline by the compile time it observes, :mod:`invkin._compile_clock`).
        max_iterations: total iterations over all restarts (default: :data:`DEFAULT_MAX_ITERATIONS`
            = 1000 without a timeout; with one, as many as fit in it, never more than
            :data:`ITERATION_CAP` = 1,000,000). Every attempt counts at least one, so a loop of
            attempts that each do nothing (``mode="distance"`` on a goal met everywhere) ends.
            With hard goals, a budget under :data:`HOLD_BUDGET` = 20 keeps them at every step (a
            capped solve returns them met wherever its start had them met), and a budget or timeout
            that ends before any attempt does returns the start if it had the hard goals nearer.
        seed: RNG seed for restarts: an int in [0, 2**63), a numpy Generator, or None (fresh entropy).
        joint_weights: (dof,) > 0, stiffness of each joint (weighted least norm; ccd: relative stiffness).
            Methods that would not use them (gauss-seidel, fabrik, analytic) refuse them (SolverError),
            except with mode="distance" or a ``nullspace`` refinement, which measure with them.
        restarts: True: restart from random configurations when an attempt stalls, while the
            budget lasts; False: one attempt (anything else is a GoalError). With lm on one frame's
            goals, 40 restarts in a row that find nothing better than the best answer (by 1 %) end
            the solve ``unreachable`` with that answer, before the budget (:class:`Status`); with
            soft goals on several frames or a Posture, 100 restarts that end within twice the
            best answer's miss without beating it (while that miss exceeds 100 x tolerance); with
            hard goals or max_joint_step / dt, three restarts that stall at the best answer again.
        mode: "speed" returns the first solution; "distance" keeps solving until the budget is
            spent and returns the converged solution closest to q0 (TRAC-IK's Distance mode).
        nullspace: a redundancy objective (SEEDS.md §1's η): "joint_limits", "manipulability",
            "posture" or a callable ``eta(q) -> (dof,)``. Methods with an in-loop null-space term
            (pinv, dls) get it as their option (``nullspace_gain`` overrides their default gain);
            for the others a converged result is refined by
            :func:`invkin.nullspace.refine_in_nullspace` (``nullspace_gain``, default 0.5,
            ``nullspace_iterations``, in what is left of ``timeout``) without leaving the tolerances.
        rest: rest-pose springs (SEEDS.md §3, 5.1): ``dict(theta_orig=(dof,), p_orig=..., p_ik=...,
            d_orig=0, d_ik=0, mode=None)``. mode "loop" (the default for gauss-seidel, the only
            method that has it): the springs act inside Springhead's loop (options theta_orig,
            p_orig, p_ik of gauss-seidel); mode "blend" (the default for the others): the result
            is blended toward ``theta_orig`` once by :func:`invkin.motion.rest_blend`.
            ``info["rest"]`` holds the stiffness and damping and whether the goals are reached
            with the springs (status and success describe the returned q). ``nullspace`` and
            ``rest`` run after the solve, so they are refused (SolverError) with ``max_joint_step`` /
            ``dt``, and the rest blend with hard goals: neither would keep them (a Posture goal does).
        max_joint_step: [rad or m] a number or (dof,): no joint moves farther than this from q0
            (lm; the joint limits tightened to q0 ± max_joint_step, an active set like them; a ball
            joint's or a floating base's rotation turns by at most this angle: its rotation-vector
            entries are held within max_joint_step/√3 of q0's).
            Restarts start inside that box; when they stall at the same closest answer again the
            solve ends ``unreachable`` (out of reach within the bound) instead of restarting to
            the timeout. A target beyond the box settles slowly with many joints at its faces
            (G1, hard feet, both hands 5 cm beyond a 0.05 box: 56 iterations, ~1 ms, with
            ``restarts=False``; ~600 iterations, ~10 ms, with the restarts' check): for targets
            that stream in faster than the bound (a control loop), :class:`invkin.Tracker` makes
            one bounded update per target with a fixed iteration budget (G1 with hard feet:
            ~0.1 ms an update).
        dt [s]: instead of max_joint_step, the bound is the model's joint velocity limits × dt
            (URDF ``<limit velocity>``); giving both is a GoalError. Entries without a velocity
            limit (``robot.velocity_limit`` inf: a floating base, a joint whose URDF gives none) are
            not bounded; to bound them, pass ``max_joint_step`` per entry instead.
        world: an :class:`invkin.World` of obstacles (or a list of them) that every link with
            collision shapes (``robot.collision``) keeps at least ``margin`` away from (lm only).
        self_collision: also keep every checked pair of the robot's own links
            (:func:`invkin.collision_pairs`) at least ``margin`` apart (lm only).
        margin [m]: the least distance, >= 0. The distances are inequality rows inside the LM
            core (docs/architecture.md, "Collision"); a successful result is checked again with the
            distance kernels: a q that meets the goals only closer than ``margin`` is
            ``Status.IN_COLLISION``, never success. ``Result.info["collision"]`` reports the pairs
            checked and the closest one within ``margin`` + 0.05 m (``min_distance`` inf beyond
            that; :class:`Result`, :func:`invkin.collision.rows.final_check`).
        **options: method-specific settings (see each method's docstring).

    Returns a :class:`Result`; an unreachable or hard target is a status, never an exception.
    """
    robot_arg(robot)
    common = (type(method) is str and method == "lm" and type(mode) is str and mode == "speed"  # (no array's truth)
              and nullspace is None and rest is None and nullspace_gain is None and joint_weights is None
              and type(nullspace_iterations) is int and nullspace_iterations == 50 and restarts is True
              and max_iterations is None and not options
              and max_joint_step is None and dt is None)  # (read once: a collision solve asks it twice)
    if common and world is None and self_collision is False and type(margin) is float and margin == 0.005:
        if type(goals) is list and len(goals) > 1:  # (a whole-body list: not the chain's case)
            res = _solve_core_fast(robot, goals, q0, position_tolerance, rotation_tolerance, timeout, seed)
        else:
            res = _solve_lm_fast(robot, goals, q0, position_tolerance, rotation_tolerance, timeout, seed)
            if res is None:
                res = _solve_core_fast(robot, goals, q0, position_tolerance, rotation_tolerance, timeout, seed)
        if res is not None:
            return res  # (with the last steps of _post_solve done where the robot needs them)
    collision = _collision_options(world, self_collision, margin)
    first = None
    if common and collision is not None:
        res, first = _collision_fast(robot, goals, q0, position_tolerance, rotation_tolerance, timeout, seed,
                                     collision)
        if res is not None:
            return res
    _check_unused(method, goals, joint_weights, mode, nullspace, nullspace_iterations)
    if nullspace is None and rest is None and nullspace_gain is None:
        res = _solve(robot, goals, q0, method, position_tolerance, rotation_tolerance, timeout, max_iterations,
                     seed, joint_weights, restarts, mode, options, max_joint_step, dt, collision, first)
    else:
        if collision is not None:
            raise SolverError("nullspace / rest: not combined with world / self_collision (the refinement "
                              "after the solve does not keep the distances)")
        res = _solve_extended(robot, goals, q0, method, position_tolerance, rotation_tolerance, timeout,
                              max_iterations, seed, joint_weights, restarts, mode, options, nullspace,
                              nullspace_gain, nullspace_iterations, rest, max_joint_step, dt)
    res = _post_solve(robot, goals, res, q0, position_tolerance, rotation_tolerance)
    if collision is None:
        return res
    res = _collision_result(robot, res, collision, position_tolerance, rotation_tolerance)
    if first is not None:  # the time and iterations of the first solve too
        object.__setattr__(res, "time", res.time + first[1].time)
    return res


NULLSPACE_ITERATIONS = 50  # solve()'s default nullspace_iterations


def _weighted_posture(goals) -> bool:
    """True when ``goals`` (a goal or a list of them) hold a Posture goal with a weight > 0."""
    return any(isinstance(g, Posture) and g.weight > 0 for g in (goals if isinstance(goals, (list, tuple)) else [goals]))


def _check_unused(method, goals, joint_weights, mode, nullspace, nullspace_iterations=NULLSPACE_ITERATIONS) -> None:
    """SolverError for an input the method's iterations do not use (``Method.ignores``): joint_weights
    (unless mode="distance" measures the distance to q0 with them over restarts, or a null-space
    refinement after the solve uses them) and a Posture goal (unless nullspace="posture" takes its
    q_rest). Solving as if they were not given would be a silent no-op. Also checks
    ``nullspace_iterations`` (an integer >= 0) whether or not a refinement runs (a null-space setting
    passed to every solve of a loop over objectives, None among them, is no error)."""
    m = get_method(method)
    if not (type(nullspace_iterations) is int and nullspace_iterations == NULLSPACE_ITERATIONS):
        if isinstance(nullspace_iterations, bool) or not isinstance(nullspace_iterations, (int, np.integer)) \
                or nullspace_iterations < 0:
            raise GoalError(f"nullspace_iterations: expected an integer >= 0, got {nullspace_iterations!r:.50}")
    ignores = m.ignores
    if not ignores:
        return
    if joint_weights is not None and "joint_weights" in ignores and nullspace is None \
            and (mode != "distance" or not m.restarts):
        raise SolverError(f"joint_weights: method {method!r} does not use them ({ignores['joint_weights']}); "
                          f"use method 'lm', 'dls', 'pinv', 'transpose' or 'ccd' (stiffness) for weighted joints")
    if "posture" in ignores and not (isinstance(nullspace, str) and nullspace == "posture"):
        if _weighted_posture(goals):
            raise SolverError(f"Posture goal: method {method!r} does not use it ({ignores['posture']}); use "
                              f"nullspace='posture' (a refinement toward q_rest after the solve, in the goals' "
                              f"null space) or method 'lm', 'dls', 'pinv', 'transpose' or 'gauss-seidel'")


_ROWS = []  # invkin.collision.rows (and .retry) once a collision solve has imported it (_collision_rows)


def _collision_rows():
    """The module invkin.collision.rows, imported on the first collision solve (``import invkin``
    stays light) and then held: an import statement in a function costs ~0.5 µs per call, a few
    % of a clear collision solve."""
    if not _ROWS:
        from .collision import rows

        _ROWS.append(rows)
    return _ROWS[0]


def _collision_retry():
    """The module invkin.collision.retry, held as _collision_rows holds rows."""
    if len(_ROWS) < 2:
        _collision_rows()
        from .collision import retry

        _ROWS.append(retry)
    return _ROWS[1]


def _collision_fast(robot, goals, q0, tol_p, tol_r, timeout, seed, collision):
    """The first solve of a collision solve (see _solve_lm_collision) on the chain fast path
    (_solve_lm_fast, a quarter of the budget) and its check in one kernel call
    (collision/rows.py: Check, cached per robot and world): ``(result, None)`` when that answer
    meets the goals at least ``margin`` clear, else ``(None, (q or None, first result or None))``
    for the general route to go on from. Most answers among obstacles are already clear
    (benchmarks/collision_ik.py: 58-95 % of Panda's first answers by the check at a 5 mm margin),
    so they cost the plain solve and a check; most of the others are cleared by the retries."""
    if not (type(timeout) is float and 0.0 < timeout < math.inf):
        return None, None
    res = _solve_lm_fast(robot, goals, q0, tol_p, tol_r, FIRST_SHARE * timeout, seed)
    if res is None:
        return None, None
    t0 = time.perf_counter()
    t_first = res.time
    check = _collision_rows().check_for(robot, *collision)
    if not check.n_pairs:
        return None, None  # nothing to check: the general route says so
    closest = check.measure(res.q)  # (check.closest in full: a colliding answer's retries take its rows from it)
    stop = check.margin - 1e-9
    if res.success and closest[0] < stop:
        # other answers of the goal: escapes along its null space from this one, then plain solves
        # from random starts, each checked and escaped, in one kernel (collision/retry.py): a
        # redundant arm has many answers and most of them are clear. Their deadline starts after
        # the check (its first call's compile, or run on the interpreter, is not charged)
        clock = Budget(time.perf_counter() + FIRST_SHARE * timeout - t_first)
        iters, restarts = res.iterations, res.restarts
        goal = goals[0] if type(goals) is list or type(goals) is tuple else goals
        fast = robot.cache["lm_fast"][goal.frame]
        ok, q, st = _collision_retry().find_clear(check, (type(goal), goal.frame), fast, goal.table(), tol_p, tol_r, _scratch(fast[3]), res.q,
                               _seed31(seed), clock, COLLISION_RETRIES, _LM_ATTEMPT_ITERATIONS)
        s = st.tolist()  # (one conversion instead of seven scalar reads)
        # the clear answer's check (measured in the kernel), else the least close one's in full for the rows' start
        closest = (s[6], int(s[7]), int(s[8])) if ok else check.closest(q)
        object.__setattr__(res, "q", q)
        if ok:  # the errors of the clear answer (the plain answer's were for res.q)
            object.__setattr__(res, "position_error", s[4])
            object.__setattr__(res, "rotation_error", s[5])
        object.__setattr__(res, "iterations", iters + int(s[0]))
        object.__setattr__(res, "restarts", restarts + int(s[1]))
        if ok and fast[6]:  # Robot.wrap_dofs shifted by turns near q0, as _solve_lm_fast does
            res = _post_solve(robot, goals, res, q0, tol_p, tol_r)
    object.__setattr__(res, "time", t_first + time.perf_counter() - t0)
    if res.success and closest[0] >= check.margin - 1e-9:
        res.info["collision"] = check.report(res.q, closest)
        return res, None
    return None, (res.q if np.all(np.isfinite(res.q)) else None, res)


def _collision_options(world, self_collision, margin):
    """(world, self_collision, margin) validated, or None when nothing is asked (world None and
    self_collision False; margin is still checked)."""
    if world is None and self_collision is False and type(margin) is float and margin == 0.005:
        return None
    world, self_collision, margin = _collision_rows().check_options(world, self_collision, margin)
    if world is None and not self_collision:
        return None
    return world, self_collision, margin


def _collision_result(robot, res, collision, tol_p, tol_r) -> Result:
    """res with ``info["collision"]`` (collision/rows.py: final_check of its q): a result that
    meets its goals only closer than the margin is not a success (Status.IN_COLLISION)."""
    import dataclasses

    from .collision.errors import CollisionWarning
    from .collision.rows import final_check

    world, self_collision, margin = collision
    report = final_check(robot, res.q, world, self_collision, margin)
    if report["pairs"] == 0:
        warn_caller(f"no collision pair to check on robot {robot.name!r} (world: {world!r}, self_collision="
                      f"{self_collision}, {len(robot.collision.links)} links with collision shapes): the "
                      f"distances did nothing", CollisionWarning)
    info = {**res.info, "collision": report}
    goals_met = res.success or (res.position_error <= tol_p and res.rotation_error <= tol_r)
    if report["collision_free"] or not goals_met:
        return dataclasses.replace(res, info=info)
    return dataclasses.replace(res, success=False, status=Status.IN_COLLISION, info=info)


def _needs_post(robot) -> bool:
    """True when a result of ``robot`` needs the driver's last steps (joints of Robot.wrap_dofs to
    shift by turns near q0, swing/twist limits to project onto); cached per robot."""
    memo = robot.cache
    post = memo.get("post_solve")
    if post is None:
        post = memo["post_solve"] = bool(robot.wrap_dofs.size) or bool(robot.extras.get("cone_limits"))
    return post


def _project_cones(robot, problem, q, state, code):
    """q (in place) projected onto the robot's swing-cone/twist limits after an iteration of a method
    that does not apply them itself; when that moved q, its errors are re-measured (state slots 2, 3)
    and the code says whether the projected q meets the tolerances (CONVERGED) or not (RUNNING,
    unless the method had STALLED)."""
    if not project_cones_in_place(robot, q):
        return code
    perr, rerr = problem_errors(problem, q)
    state[2], state[3] = perr, rerr
    if perr <= problem.tol_p and rerr <= problem.tol_r:
        return CONVERGED
    return STALLED if code == STALLED else RUNNING


def _post_solve(robot, goals, res, q0, position_tolerance, rotation_tolerance):
    """The driver's last steps on a result: Robot.wrap_dofs shifted by turns near q0 (None: the neutral
    configuration), the swing/twist limits respected (respect_cone_limits)."""
    if robot.wrap_dofs.size:
        _wrap_near(robot, res.q, robot.q_neutral if q0 is None else robot.check_q(q0, "q0"))
    out = respect_cone_limits(robot, goals, res, position_tolerance, rotation_tolerance)
    if out is not res:  # q projected onto the limits: which goals it meets, measured again
        problem = compile_problem(robot, goals, position_tolerance, rotation_tolerance)
        object.__setattr__(out, "goals_met", goals_met_at(problem, out.q))
    return out


def _wrap_near(robot, q, q0) -> None:
    """Shift every joint of Robot.wrap_dofs in q ((dof,) or (B, dof), in place) by the multiple
    of 2 pi that brings it nearest its value in q0 while inside its limits: the same poses (a
    turn changes no frame of those joints), without spinning a joint most of a turn away from the
    seed. A continuous joint ends within pi of q0; a joint limited to ±2 pi (a UR arm) kept the
    representative the LM kernel wrapped into the limits (the lowest one), a turn from q0 in 42
    of 100 random UR5 solves where the nearer one was within the limits too."""
    c = robot.wrap_dofs
    if not c.size:
        return
    if q.ndim == 1:  # one solve: a kernel over the few joints (NumPy's calls cost ~40 µs here)
        spec = robot.cache.get("wrap_near")
        if spec is None:
            spec = robot.cache["wrap_near"] = (np.ascontiguousarray(c, dtype=np.int64), robot.lower[c].copy(),
                                               robot.upper[c].copy())
        _wrap_near_into(q, q0, *spec)  # (none inside the limits, or rounding at a bound: unshifted)
        return
    qc = q[..., c]
    lo, hi = robot.lower[c], robot.upper[c]
    k = -np.round((qc - np.asarray(q0)[..., c]) / _TURN)
    with np.errstate(invalid="ignore"):  # (a continuous joint's infinite bound: no bound on k)
        k_lo = np.where(np.isneginf(lo), -np.inf, np.ceil((lo - qc) / _TURN))
        k_hi = np.where(np.isposinf(hi), np.inf, np.floor((hi - qc) / _TURN))
    k = np.minimum(np.maximum(k, k_lo), k_hi)
    v = qc + _TURN * k
    q[..., c] = np.where((v >= lo) & (v <= hi), v, qc)


_TURN = 2.0 * math.pi


def _solve_extended(robot, goals, q0, method, position_tolerance, rotation_tolerance, timeout, max_iterations,
                    seed, joint_weights, restarts, mode, options, nullspace, nullspace_gain, nullspace_iterations,
                    rest, max_joint_step=None, dt=None) -> Result:
    """solve() with a null-space objective and/or rest-pose springs."""
    import dataclasses

    t_start = time.perf_counter()
    m = get_method(method)
    refine = rest_loop = None
    if max_joint_step is not None or dt is not None:  # (the refinement or blend moved G1's joints 0.7-1.5 rad
        given = "max_joint_step" if max_joint_step is not None else "dt"  # under max_joint_step=0.1)
        raise SolverError(f"nullspace / rest: not combined with {given} (the refinement or blend after the solve "
                          f"would move joints past the step bound); for a rest posture under a bound, give a "
                          f"Posture goal")
    posture_eta = method in ("pinv", "dls") and _weighted_posture(goals)  # (η scales its pull: the gain is used)
    if nullspace is None and nullspace_gain is not None and not posture_eta:  # (it did nothing, without a word)
        warn_caller(f"nullspace_gain={nullspace_gain!r} without nullspace does nothing: it is the gain of a "
                    f"null-space objective; give nullspace='joint_limits', 'manipulability', 'posture' or a callable")
    if nullspace_gain is not None and "nullspace_gain" in m.defaults:
        options = {**options, "nullspace_gain": nullspace_gain}  # the method validates it
    elif nullspace_gain is not None and not (isinstance(nullspace_gain, (int, float)) and nullspace_gain > 0
                                             and math.isfinite(nullspace_gain)):
        raise SolverError(f"nullspace_gain: expected a finite number > 0, got {nullspace_gain!r}")
    if nullspace is not None:
        from .nullspace import make_objective

        if "nullspace" in m.defaults:
            options = {**options, "nullspace": nullspace}
        else:
            problem = compile_problem(robot, goals, position_tolerance, rotation_tolerance, joint_weights)
            make_objective(nullspace, robot, problem=problem)  # a bad name fails before solving
            refine = nullspace
    if rest is not None:
        if not isinstance(rest, dict) or not {"theta_orig", "p_orig", "p_ik"} <= set(rest):
            raise GoalError(f"rest: expected dict(theta_orig=..., p_orig=..., p_ik=..., [d_orig, d_ik]), "
                            f"got {rest!r:.200}")
        from ._checks import no_unknown_kwargs
        from .rest import rest_blend

        no_unknown_kwargs("rest", rest, ("theta_orig", "p_orig", "p_ik", "d_orig", "d_ik", "mode"))  # a typo

        rest_blend(rest["theta_orig"], robot.neutral(), rest["p_orig"], rest["p_ik"], rest.get("d_orig", 0.0),
                   rest.get("d_ik", 0.0), robot=robot)  # validates the springs before solving
        from .rest import rest_in_loop

        listed = goals if isinstance(goals, (list, tuple)) else [goals]
        if not rest_in_loop(m.name, rest.get("mode")) and \
                any(isinstance(g, Goal) and g.level == 0 for g in listed):  # (the goals are checked in _solve)
            raise SolverError("rest: the blend toward theta_orig after the solve does not keep hard goals "
                              "(it moved G1's hard feet 3.5 mm); give a Posture goal (the null space of the "
                              "goals) instead")
        if rest_in_loop(m.name, rest.get("mode")):
            both = sorted({"theta_orig", "p_orig", "p_ik"} & set(options))
            if both:  # (rest's values replaced the options without a word)
                raise SolverError(f"rest and the option(s) {', '.join(both)} both set the springs; give them once, "
                                  f"in rest=dict(...)")
            options = {**options, "theta_orig": rest["theta_orig"], "p_orig": rest["p_orig"], "p_ik": rest["p_ik"]}
            _, p, d = rest_blend(0.0, 0.0, rest["p_orig"], rest["p_ik"], rest.get("d_orig", 0.0), rest.get("d_ik", 0.0))
            rest_loop, rest = {"stiffness": p, "damping": d}, None  # in the loop: nothing to blend after it
    res = _solve(robot, goals, q0, method, position_tolerance, rotation_tolerance, timeout, max_iterations, seed,
                 joint_weights, restarts, mode, options, max_joint_step, dt)
    q = res.q
    info = dict(res.info)
    if refine is not None and res.success:
        from .nullspace import refine_in_nullspace

        # what is left of the timeout (the refinement ran past it: 830 ms under timeout=0.02, G1's
        # four limbs with the manipulability objective); the compile of a first call is not charged
        left = None if timeout is None else max(t_start + timeout - time.perf_counter(), 0.0)
        q = refine_in_nullspace(robot, goals, q, refine, gain=0.5 if nullspace_gain is None else nullspace_gain,
                                iterations=nullspace_iterations,
                                position_tolerance=position_tolerance, rotation_tolerance=rotation_tolerance,
                                joint_weights=joint_weights, timeout=left)
        info["nullspace"] = refine if isinstance(refine, str) else "callable"
    if rest_loop is not None:
        info["rest"] = {**rest_loop, "goal_reached": bool(res.success)}
    elif rest is not None:
        from .rest import rest_blend

        q_ik = q
        q, p, d = rest_blend(rest["theta_orig"], q_ik, rest["p_orig"], rest["p_ik"], rest.get("d_orig", 0.0),
                             rest.get("d_ik", 0.0), robot=robot)
        q = np.minimum(np.maximum(np.asarray(q, dtype=float), robot.lower), robot.upper)
        info["rest"] = {"theta_ik": q_ik, "stiffness": p, "damping": d}
    if q is res.q and "rest" not in info:
        return res
    problem = compile_problem(robot, goals, position_tolerance, rotation_tolerance, joint_weights)
    perr, rerr = problem_errors(problem, q)
    ok = perr <= position_tolerance and rerr <= rotation_tolerance
    if "rest" in info:
        info["rest"]["goal_reached"] = bool(ok)
    status = Status.CONVERGED if ok else (res.status if not res.success else Status.STALLED)
    return dataclasses.replace(res, q=q, success=bool(ok), status=status, position_error=float(perr),
                               rotation_error=float(rerr), time=time.perf_counter() - t_start, info=info,
                               goals_met=goals_met_at(problem, q))


def _solve(robot, goals, q0, method, position_tolerance, rotation_tolerance, timeout, max_iterations, seed,
           joint_weights, restarts, mode, options, max_joint_step=None, dt=None, collision=None, first=None) -> Result:
    """The general route of solve(); ``first``: (q, Result) of a collision solve's first solve,
    already run (solve._collision_fast): the budget left after it, the rows from its q."""
    m = get_method(method)  # (first: the methods' modules imported, not the solve's time)
    t_start = time.perf_counter()
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
        max_iterations = DEFAULT_MAX_ITERATIONS
    else:
        max_iterations = ITERATION_CAP
    check_seed("seed", seed)
    if not (isinstance(mode, str) and mode in ("speed", "distance")):
        raise SolverError(f"mode: expected 'speed' or 'distance', got {mode!r}")
    if not isinstance(restarts, (bool, np.bool_)):  # (5 or "no" were taken as True: unlimited restarts)
        raise GoalError(f"restarts: expected True (restart from random configurations while the budget lasts) "
                        f"or False (one attempt), got {restarts!r:.100}; the number of attempts is bounded by "
                        f"timeout and max_iterations")
    problem = compile_problem(robot, goals, position_tolerance, rotation_tolerance, joint_weights)
    if m.check is not None:
        m.check(problem)
    opts = m.defaults
    max_restarts = None
    if options and _MAX_RESTARTS_KEY in options:  # solve_many's per-target bound (not a method option)
        options = dict(options)
        max_restarts = options.pop(_MAX_RESTARTS_KEY)
    if options:
        unknown = set(options) - set(opts)
        if unknown:
            raise SolverError(f"method {m.name!r} has no option(s) {sorted(unknown)}; "
                              f"its options: {sorted(opts) or 'none'}")
        opts = {**opts, **options}
    q_start = _initial_q(robot, q0)
    if m.name == "lm" and not (robot.extras.get("cone_limits") and collision is None and max_joint_step is None
                               and dt is None and problem.basic_kinds_only() and not problem.has_hard):
        step = _joint_step(robot, max_joint_step, dt)
        if collision is None:
            return _solve_lm(robot, problem, q_start, timeout, max_iterations, seed, restarts, mode, step, t_start)
        with one_solve():  # (its phases share one interpreted grace)
            return _solve_lm_collision(robot, problem, q_start, timeout, max_iterations, seed, restarts, mode, step,
                                       t_start, collision, first)
    if collision is not None:
        raise SolverError(f"world / self_collision: method {m.name!r} cannot keep collision distances (they are "
                          f"inequality rows of the LM core): use method='lm'")
    if max_joint_step is not None or dt is not None:
        raise SolverError(f"max_joint_step / dt: supported by method 'lm' only, got method {m.name!r}")
    if not problem.basic_kinds_only() or problem.has_hard:
        kinds = sorted({KINDS[int(k)] for k in problem.gkind if int(k) not in BASIC_KINDS})
        raise SolverError(f"method {m.name!r} takes position, rotation, axis and aim goals, all soft; got "
                          f"{', '.join(kinds + (['hard goals'] if problem.has_hard else []))}: use method='lm'")
    rng = seed if isinstance(seed, np.random.Generator) else None  # created at the first restart
    clock = Budget(None if timeout is None else t_start + timeout)

    q = q_start.copy()
    state = np.zeros(8)
    is_lm = m.name == "lm"
    if is_lm:
        state[4] = 1.0  # LM only: attempt 0 runs free of the limits (solvers/lm.py); restarts alternate
    best_q = q.copy()
    best_key = (math.inf, math.inf)
    best_conv_q = None
    best_conv_dist = math.inf
    total_it = 0
    n_restarts = 0
    stalled_errs = []
    stop_reason = None
    # with a clock, a first call of one iteration measures its cost before the chunks are sized by
    # the time left: 100 unmeasured iterations overran a 10 ms budget 75-fold (dls with the
    # manipulability objective on G1, ~10 ms per iteration; gauss-seidel with sweeps=1000, 3-fold)
    chunk = _FIRST_CHUNK if timeout is None else _TIMED_FIRST_CHUNK
    # ccd and fabrik apply cone limits inside their updates; the other methods get one iteration per
    # call and a projection after it (a projected iteration; solvers/_twist.py, model/limits.py)
    cones = bool(robot.extras.get("cone_limits")) and m.name not in ("ccd", "fabrik")
    if cones:
        chunk = 1
    unreachable_known = None
    per_iter = None
    measured = 0  # kernel calls that ran iterations, whose time per_iter has measured
    attempt_cap = m.attempt_iterations
    attempt_it = 0
    idle = 0
    while True:
        budget_it = chunk if max_iterations is None else max(min(chunk, max_iterations - total_it - idle), 0)
        if attempt_cap is not None:
            budget_it = min(budget_it, attempt_cap - attempt_it)
        it_before = state[1]
        t0 = time.perf_counter()
        code = m.iterate(problem, q, budget_it, state, opts)
        if code == STALLED and m.closest and state[5] == 1.0:
            unreachable_known = True  # a closed form's closest reachable point: the goal is out of reach
        t0 += clock.update(t0)  # a first call's compile (or interpreted run) is not the solve's time
        deadline = clock.deadline
        if cones:  # swing-cone/twist limits the method's iterations do not see: projected every iteration
            code = _project_cones(robot, problem, q, state, code)
        done = int(state[1] - it_before)
        total_it += done
        attempt_it += done
        idle += done == 0  # an attempt that did nothing still spends one unit of max_iterations
        if code != CONVERGED and attempt_cap is not None and attempt_it >= attempt_cap:
            code = STALLED
        if done:
            dt = (time.perf_counter() - t0) / done
            # the solve's first call also carries the method's setup (ccd's tables, 40-110 µs on Panda;
            # gauss-seidel's 55 µs before they were kept per robot: 50 of its iterations): the next call's
            # time replaces its one-iteration measure; averaged with it, the setup halved from call to call
            # and the chunks only doubled (1, 14, 27, 52, 97, 171 for a 202-iteration Panda solve; 5.8 calls
            # per converged gauss-seidel solve of the suite's Panda targets, 2.3 before the first call was one
            # iteration, 4.0 with this; benchmarks/RESULTS.md, Session 16)
            per_iter = dt if per_iter is None or measured == 1 else 0.5 * (per_iter + dt)
            measured += 1
        perr, rerr = state[2], state[3]
        converged = code == CONVERGED and bool(np.all(np.isfinite(q)))  # never call NaN/inf converged
        if code == CONVERGED and not converged:
            code = STALLED
            q[:] = q_start
        key = (max(perr / position_tolerance, rerr / rotation_tolerance), perr + rerr)
        if converged:
            if mode == "speed":
                return Result(q, True, Status.CONVERGED, float(perr), float(rerr), int(total_it), n_restarts,
                              time.perf_counter() - t_start, m.name, goals_met=(True,) * len(problem.goal_rows))
            d = float(np.sum(problem.joint_weights * robot.difference(q_start, q) ** 2))
            if d < best_conv_dist:
                best_conv_q, best_conv_dist = q.copy(), d
        else:
            # a free attempt may have left the limits: judge (and keep) its clamped version
            qc = np.minimum(np.maximum(q, robot.lower), robot.upper)
            if not np.array_equal(qc, q):
                pe, re_ = goal_errors(robot.node_table, robot.node_params, robot.origin, qc, problem.gnode, problem.gkind,
                                      problem.gvec, problem.gR, problem.gaxis, problem.gw)
                key = (max(pe / position_tolerance, re_ / rotation_tolerance), pe + re_)
            if key < best_key:
                best_q, best_key = qc, key
        now = time.perf_counter()
        if deadline is not None and now >= deadline:
            stop_reason = Status.TIME_LIMIT
        elif max_iterations is not None and total_it + idle >= max_iterations:
            stop_reason = Status.ITERATION_LIMIT
        if stop_reason is not None:
            if code == RUNNING and "qbest" in problem.scratch and state[6] > 0.0:
                # pinv, dls and gauss-seidel take every step and keep the best point of the attempt
                # (restored when they stall): cut off while running, the last q may be worse than it,
                # even worse than the start (pinv on Panda: 1.10 m from 0.84 m after 23 iterations)
                qb = problem.scratch["qbest"]
                pe, re_ = goal_errors(robot.node_table, robot.node_params, robot.origin, qb, problem.gnode,
                                      problem.gkind, problem.gvec, problem.gR, problem.gaxis, problem.gw)
                kb = (max(pe / position_tolerance, re_ / rotation_tolerance), pe + re_)
                if kb < best_key:
                    best_q, best_key = qb.copy(), kb
            break
        if code == STALLED or converged or done == 0:
            if code == STALLED:
                stalled_errs.append(key[1])
                if unreachable_known is None:
                    unreachable_known = provably_unreachable(problem)
                if unreachable_known and len(stalled_errs) >= 3:
                    stop_reason = Status.UNREACHABLE
                    break
            if not (restarts and m.restarts) or (max_restarts is not None and n_restarts >= max_restarts):
                stop_reason = Status.STALLED if code == STALLED else Status.ITERATION_LIMIT
                break
            if rng is None:
                rng = np.random.default_rng(seed)
            lo, span = _sampler(robot, q_start)
            q = lo + span * rng.random(robot.dof)
            if robot.has_ball_joints:
                q = robot.sample(rng=rng, around=q_start)
            if m.held is not None:  # joints the method never moves (ccd's stiffness 0) stay where they started
                held = m.held(problem, opts)
                if held is not None:
                    q[held] = q_start[held]
            state[:] = 0.0
            if is_lm:
                state[4] = 1.0 if n_restarts % 2 == 1 else 0.0
            attempt_it = 0
            n_restarts += 1
        if deadline is not None and per_iter and not cones:
            chunk = int(min(max(_MIN_CHUNK, 0.25 * (deadline - now) / per_iter), 10_000))
    if best_conv_q is not None:
        best_q = best_conv_q
        perr, rerr = goal_errors(robot.node_table, robot.node_params, robot.origin, best_q, problem.gnode, problem.gkind,
                                 problem.gvec, problem.gR, problem.gaxis, problem.gw)
        status = Status.CONVERGED
    else:
        perr, rerr = goal_errors(robot.node_table, robot.node_params, robot.origin, best_q, problem.gnode, problem.gkind,
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
    met = (True,) * len(problem.goal_rows) if status == Status.CONVERGED else goals_met_at(problem, best_q)
    return Result(best_q, status == Status.CONVERGED, status, float(perr), float(rerr), int(total_it),
                  n_restarts, time.perf_counter() - t_start, m.name, goals_met=met)


_FAST_GOALS = (Pose, Position)
_MET_ONE = (True,)  # Result.goals_met of a converged single-goal solve
INTERPRETED_BATCH = 32  # targets per solve_many piece while its kernel runs interpreted (invkin._tiers)
_LM_ENTRY = [None]


def _entry_point(dispatcher, args, any_layout=()):
    """The compiled overload of ``dispatcher`` for these arguments, callable without Numba's
    per-call type dispatch (about 1 µs for 27 arguments). Only for call sites whose argument
    types are fixed by construction, as in _solve_lm_fast: Robot arrays are read-only
    C-contiguous, goal tables and buffers are fresh C-contiguous arrays, scalars are int/float.
    Arguments at the positions ``any_layout`` (1-D float64 vectors) are typed with any layout, so
    the caller may pass views without copying them."""
    import numba
    from numba import types

    sig = [numba.typeof(a) for a in args]
    for i in any_layout:
        sig[i] = types.Array(types.float64, 1, "A")  # read only by the kernel: any view will do
    sig = tuple(sig)
    ov = dispatcher.overloads.get(sig)
    return ov.entry_point if ov is not None else entry_point(dispatcher, sig)


def _chain_attempts_entry(args):
    """The entry point of lm_chain_attempts (q0 typed as any 1-D float64 view), compiled once
    and shared by the fast path and _solve_lm: its arguments there have the same types
    (read-only chain program and per-DOF table from the robot's caches, C-contiguous float64 /
    int64 goal tables, fresh buffers, Python floats and ints). While the kernel compiles in the
    background (invkin._tiers), its interpreted form, asked again on the next call."""
    ep = _LM_ENTRY[0]
    if ep is None:
        ep = _entry_point(_lm_chain_attempts, args, any_layout=(9,))
        if ep is None:
            return _interpreted_chain_attempts
        _LM_ENTRY[0] = ep
    return ep


def _interpreted_chain_attempts(*args):
    return call_interpreted(_lm_chain_attempts, *args)


def _solve_lm_fast(robot, goals, q0, tol_p, tol_r, timeout, seed):
    """The common call — lm, one Pose or Position goal, plain float options — with the least
    Python: the goal's table is built once per goal, the chain program and the per-DOF table
    are cached per robot, and q0 is clamped and checked inside the kernel (lm_chain_attempts,
    through its entry point). Returns None when the call is not that common case (the general
    path then validates and explains)."""
    if type(goals) is list or type(goals) is tuple:
        if len(goals) != 1:
            return None  # (before the clock: the whole-body route comes next)
        goal = goals[0]
    else:
        goal = goals
    t_start = time.perf_counter()
    if type(goal) not in _FAST_GOALS or type(tol_p) is not float or type(tol_r) is not float \
            or not (0.0 < tol_p < math.inf and 0.0 < tol_r < math.inf):
        return None
    if not (type(timeout) is float and 0.0 < timeout < math.inf):
        return None  # timeout=None: the general path bounds it by DEFAULT_MAX_ITERATIONS
    if type(seed) is not int or not 0 <= seed < SEED_LIMIT:
        return None
    frames = robot.cache.get("lm_fast")  # frame -> _fast_tables
    fast = None if frames is None else frames.get(goal.frame)
    if fast is None:
        fast = _fast_tables(robot, goal.frame)
        if fast is None:
            return None
    ch, lims, free, size, dof, q_neutral, post = fast
    if q0 is None:
        q0 = q_neutral
    elif not (type(q0) is np.ndarray and q0.dtype is _F64 and q0.ndim == 1 and q0.shape[0] == dof):
        return None
    if lims is None:  # a floating robot: its base restarts are sampled around q0
        lims, free, size = _lm_tables(robot, None, q0)
    gkind, gvec, gR, gaxis, gw = goal.table()
    # only the soft weights' ratios count (goals.relative_weights); read from the goal's fields, not
    # Goal.lean(), whose first build on a fresh goal cost a UR5 solve 2.4 µs (11.1 -> 13.5)
    if (goal.weight != 1.0 or (type(goal) is Pose and goal.rotation_weight is not None
                               and goal.rotation_weight != 1.0)) and not goal.hard:
        gw = relative_weights(gw.copy(), np.ones(gw.shape[0]), float(gw.max()))  # (one soft goal: every row soft)
    best_q = np.empty(dof)
    st = _CHAIN_STATE0[1 if free else 0].copy()
    buf = _scratch(size)
    budget = _FIRST_CHUNK
    deadline = t_start + timeout
    max_attempts = 2**62
    attempt_iters = _LM_ATTEMPT_ITERATIONS
    checked_reach = False
    unreachable = False
    seed = _seed31(seed)  # as _seed_int on the general path
    while True:
        t0 = time.perf_counter()
        it0 = st[1]
        ep = _LM_ENTRY[0]
        clock = None
        if ep is None:  # compiled (or run interpreted) on this call: that time is not the solve's
            clock = Budget(deadline)
            ep = _chain_attempts_entry((ch, lims, gkind, gvec, gR, gaxis, gw, tol_p, tol_r, q0, best_q, st, budget,
                                        attempt_iters, max_attempts, seed, buf))
        code = ep(ch, lims, gkind, gvec, gR, gaxis, gw, tol_p, tol_r, q0, best_q, st, budget, attempt_iters,
                  max_attempts, seed, buf)
        if clock is not None:
            t0 += clock.update(t0)
            deadline = clock.deadline
        if code == CONVERGED:
            s = st.tolist()  # one conversion instead of four scalar reads
            if not (math.isfinite(s[8]) and math.isfinite(s[9])):  # math: a fraction of numpy's call cost
                return None  # never call non-finite numbers converged: the general path judges it
            res = Result._new(best_q, True, _CONVERGED, s[8], s[9], int(s[1]), int(s[5]), time.perf_counter() - t_start,
                              "lm", _MET_ONE)
            return _post_checked(robot, goals, res, q0, tol_p, tol_r) if post else res
        if code < 0:
            return None  # a non-finite q0: the general path names the bad entry
        if code == UNREACHABLE:  # restarts keep stalling at the same closest answer (lm.CHAIN_AGREEMENTS)
            status = Status.UNREACHABLE
            break
        now = time.perf_counter()
        if not checked_reach:
            checked_reach = True
            unreachable = _beyond_reach(robot, robot.frame_index(goal.frame), gkind, gvec, gw, tol_p, gR, gaxis,
                                           tol_r)
            if unreachable:  # minimise to the end in a few long attempts (see _solve_lm)
                max_attempts = min(max_attempts, int(st[5]) + 3)
                attempt_iters = 10 * _LM_ATTEMPT_ITERATIONS
                st[10] = 1.0
        if code == STALLED:
            status = Status.UNREACHABLE if unreachable else Status.STALLED
            break
        if now >= deadline or st[1] >= ITERATION_CAP:
            status = Status.UNREACHABLE if unreachable else Status.TIME_LIMIT
            break
        per_iter = (now - t0) / max(st[1] - it0, 1)
        budget = 10_000 if deadline is None else int(min(max(16, 0.5 * (deadline - now) / per_iter), 10_000))
    perr, rerr = float(st[8]), float(st[9])  # (the one goal's largest row errors: met when both are within)
    res = Result._new(best_q, False, status, perr, rerr, int(st[1]), restarts_run(st, False),
                      time.perf_counter() - t_start, "lm", (perr <= tol_p and rerr <= tol_r,))
    return _post_checked(robot, goals, res, q0, tol_p, tol_r) if post else res


def _post_checked(robot, goals, res, q0, tol_p, tol_r):
    """_post_solve after lm_chain_attempts, which has shifted the turns near q0 itself (its
    _chain_wrap_near): only swing/twist limits are left (UR5, whose six joints span two turns each:
    19 us a solve with the shift in _post_solve, 14 without it)."""
    if robot.extras.get("cone_limits"):
        return _post_solve(robot, goals, res, q0, tol_p, tol_r)
    return res


_MAX_SQ = MAX_LENGTH * MAX_LENGTH
_clock = time.perf_counter
_INF = math.inf
_NO_PREPS = {}  # (read only) robot.cache["core_fast"] before a robot's first lean solve


def _solve_core_fast(robot, goals, q0, tol_p, tol_r, timeout, seed):
    """The common whole-body call — lm, a list of goals, plain float options, q0 a float64
    vector — with the least Python. What depends only on the goals' structures is prepared once
    per robot and structures (_core_prep: the layout's arrays, the model and per-DOF tables, the
    kernel's entry point), keyed by the goals' structure ids (Goal.lean); a solve gathers its
    goals' targets with one join of their target bytes and calls core_attempts_packed through its
    entry point, which runs the same core_attempts, with the same iterates, as the general path,
    on per-thread scratch (only the answer is allocated). A first call that does not converge
    goes on in the one LM driver (_solve_lm, from the kernel's state). Returns None when the
    call is not that case (the general path then validates and explains)."""
    t_start = _clock()
    if not ((type(goals) is list or type(goals) is tuple) and goals and type(timeout) is float
            and 0.0 < timeout < _INF and type(seed) is int and 0 <= seed < SEED_LIMIT and type(tol_p) is float
            and 0.0 < tol_p < _INF and type(tol_r) is float and 0.0 < tol_r < _INF):
        return None
    try:
        recs = [g._lean for g in goals]
        if None in recs:  # a goal's first solve (a test here: raising and catching costs 0.4 µs more)
            recs = [g.lean() for g in goals]
    except (AttributeError, TypeError):  # not a goal (a goal class, say): the general path names it
        return None
    sids, parts, wmaxes = zip(*recs)
    prep = robot.cache.get("core_fast", _NO_PREPS).get(sids)
    moved = None  # (a prepared call compiles nothing: _compile_clock.moved_seconds() then reads the same at its end)
    if prep is None or prep[0] is None:
        moved = moved_seconds()  # (a first call compiles or loads its entry point after t_start: not its time)
        prep = _core_prep(robot, goals, sids, tol_p, tol_r)
    if prep is not None:  # (its entry point is compiled)
        ep, prepared, post_at, n_met, one_frame, fsize, isize, post, q_rest, n, wpos = prep
        w_post = 0.0  # (without a Posture goal q_rest is the neutral q, unused)
        if post_at >= 0:
            q_rest, w_post = goals[post_at].q_rest, goals[post_at].weight
            if q_rest.shape[0] != n or (one_frame and w_post == 0.0):
                prep = None  # the general path names the wrong shape / runs the chain kernel
    if prep is None:
        if not (q0 is None or (type(q0) is np.ndarray and q0.dtype is _F64 and q0.shape == (robot.dof,))):
            return None
        q_start = _lean_start(robot, q0)
        if q_start is None or robot.extras.get("cone_limits"):
            return None
        problem = compile_problem(robot, goals, tol_p, tol_r)
        res = _solve_lm(robot, problem, q_start, timeout, ITERATION_CAP, seed, True, "speed", None, t_start)
        return _post_solve(robot, goals, res, q0, tol_p, tol_r) if _needs_post(robot) else res
    if q0 is None:
        q_in = prep[8]  # the neutral q
    elif type(q0) is np.ndarray and q0.dtype is _F64 and q0.ndim == 1:
        q_in = q0  # (its length, its entries checked and clamped into the limits in the kernel)
    else:
        return None
    scratch = _THREAD.lean
    if scratch is None or scratch[2] < fsize or scratch[3] < isize:
        scratch = _lean_scratch(fsize, isize)
    best_q = np.empty(n)
    gtab = np.frombuffer(b"".join(parts))
    wmax = max(wmaxes)
    if wmax != 1.0 and wmax > 0.0:  # only the soft weights' ratios count (goals.relative_weights)
        gtab = gtab.copy()
        gtab[wpos] = np.maximum(gtab[wpos] / wmax, _TINY_WEIGHT)
        gtab.setflags(write=False)  # (the entry point's type: a read-only array, as frombuffer's)
    code, ok, perr, rerr, iters, attempts = ep(prepared, gtab, q_rest, w_post, tol_p, tol_r, q_in, best_q,
                                               _seed31(seed), scratch[0], scratch[1])
    if code == CONVERGED and ok:
        # converged: every row with a weight within its tolerance (the kernel's test), so every goal is met
        res = Result._new(best_q, True, _CONVERGED, perr, rerr, iters, attempts, _clock() - t_start, "lm", n_met)
    elif code < 0:
        return None  # a bad q0: the general path names it
    else:  # the rest of the budget in the one driver loop, from the kernel's state
        st, q, rowerr = _core.packed_state(scratch[0], n, prepared[1][0].shape[0])
        problem = compile_problem(robot, goals, tol_p, tol_r)
        res = _solve_lm(robot, problem, _lean_start(robot, q0), timeout, ITERATION_CAP, seed, True, "speed", None,
                        t_start, resume=(code, q, best_q, st, rowerr, t_start,
                                         moved_seconds() if moved is None else moved))
    return _post_solve(robot, goals, res, q0, tol_p, tol_r) if post else res


def _lean_start(robot, q0):
    """The clamped start of a lean solve (a copy), or None for a q0 the general path must name:
    |q0|^2 <= MAX_LENGTH^2 bounds every entry (one dot product, a fifth of min() and max()); NaN
    fails both tests."""
    if q0 is None:
        return robot.q_neutral.copy()
    if not q0.dot(q0) <= _MAX_SQ and not (-MAX_LENGTH <= q0.min() and q0.max() <= MAX_LENGTH):
        return None
    return np.minimum(np.maximum(q0, robot.lower), robot.upper)


_CORE_ATTEMPT_ITERATIONS = 3 * ATTEMPT_ITERATIONS  # of the general core (_solve_lm)
_MAX_ATTEMPTS = 2**62
# an iteration budget (max_iterations) below this holds the hard goals at every step (lm_core's
# S_HOLD_ALWAYS, as a Tracker does): the relaxed first steps of an attempt bend them off and a
# budget that ends there returned them off (G1, hard feet: one iteration of a crouch moved the feet
# 4.9 cm, three 0.36 mm); held, they stay within 1e-8 m and the benchmark's sets converge in the
# same 4-5 iterations (the relaxed steps save second-order corrections, not iterations)
HOLD_BUDGET = 20
_CORE_ENTRY = {}  # argument types -> core_attempts_packed's entry point (_core_prep)


def _core_prep(robot, goals, sids, tol_p, tol_r):
    """What _solve_core_fast needs besides the targets, per robot and goal structures (kept in
    ``robot.cache["core_fast"]``, keyed by the goals' structure ids ``sids``, Goal.lean): a list
    (entry point, core_attempts_packed's ``prepared`` tuple (lm_core.packed_problem: model, layout
    arrays, lims, lo, hi, ...), index of the Posture goal or -1, goals_met of a converged solve, whether the rows are one frame's (the chain kernel's when the Posture
    weight is 0), the kernel's scratch sizes (core_scratch_size: the per-thread buffers of
    _lean_scratch), whether results need _post_solve, the neutral q, dof, the positions of the soft
    rows' weights in the joined target bytes (scaled there by goals.relative_weights)). None when
    these goals do not run on the general core in mode "speed" (the chain kernel's problems, goals without rows, a robot with
    swing-cone/twist limits) or are not goals; the entry point None while core_attempts_packed
    compiles in the background (invkin._tiers: the general path runs it interpreted meanwhile),
    asked again later."""
    preps = robot.cache.get("core_fast")
    if preps is None:
        preps = robot.cache["core_fast"] = {}
    prep = preps.get(sids)
    if prep is None:
        if sids in preps:
            return None
        if len(preps) >= LAYOUTS_KEPT:
            preps.clear()
        problem = compile_problem(robot, goals, tol_p, tol_r)  # validates every goal
        layout = problem.layout
        post_at = max((i for i, g in enumerate(goals) if isinstance(g, Posture)), default=-1)
        one_frame = layout.one_node >= 0 and layout.basic and not layout.mixed  # the chain kernel's, without posture
        if (one_frame and post_at < 0) or not any(g.structure()[1] for g in goals) \
                or problem.joint_weights is not robot.unit_weights or robot.extras.get("cone_limits"):
            preps[sids] = None
            return None
        model, table, lims, lo, hi = core_args(problem, prune=True)
        src = lean_index(layout.goal_rows)
        packed = (table[0], layout.gkind, table[2], layout.glevel, layout.soft, layout.hard,
                  src)  # (gnode, gref on the pruned model)
        prep = [None, _core.packed_problem(model, packed, lims, lo, hi, _CORE_STATE0[0], _FIRST_CHUNK,
                                           _CORE_ATTEMPT_ITERATIONS, _MAX_ATTEMPTS),
                post_at, (True,) * len(layout.goal_rows), one_frame,
                *_core.core_scratch_size(model[0].shape[0], robot.dof, layout.gnode.shape[0], layout.hard.shape[0]),
                _needs_post(robot), robot.q_neutral, robot.dof,
                src[PACKED * np.flatnonzero(layout.glevel != 0) + PACKED - 1]]  # the soft rows' weights in gtab
        preps[sids] = prep
    if prep[0] is None:
        prep[0] = _packed_entry(prep, robot, tol_p, tol_r)
        if prep[0] is None:
            return None
    return prep


def _packed_entry(prep, robot, tol_p, tol_r):
    """core_attempts_packed's entry point for a prepared problem (shared by every robot: the
    argument types are fixed by construction), or None while it compiles in the background.
    gtab is typed read-only C-contiguous (np.frombuffer of the goals' joined bytes; the kernel
    only reads it), q_rest and q0 as any 1-D float64 view."""
    import numba
    from numba import types

    n = robot.dof
    buf, ibuf = _lean_scratch(prep[5], prep[6])[:2]
    args = (prep[1], np.frombuffer(bytes(8 * PACKED)), robot.q_neutral, 0.0, tol_p, tol_r, np.empty(n), np.empty(n), 0,
            buf, ibuf)
    sig = [numba.typeof(a) for a in args]
    sig[2] = sig[6] = types.Array(types.float64, 1, "A")
    sig = tuple(sig)
    ep = _CORE_ENTRY.get(sig)
    if ep is None:
        ov = _core.core_attempts_packed.overloads.get(sig)
        ep = ov.entry_point if ov is not None else entry_point(_core.core_attempts_packed, sig)
        if ep is not None:
            _CORE_ENTRY[sig] = ep
    return ep


def _fast_tables(robot, frame):
    """What _solve_lm_fast reads per (robot, frame), kept in ``robot.cache["lm_fast"][frame]`` (two
    dict look-ups instead of six queries): (chain program, lims, free, scratch size, dof,
    q neutral, whether results need _post_solve); lims None on a floating robot (its tables
    depend on q0). None for a name that is not a frame of the robot, or not a str, and on a robot
    with swing-cone/twist limits (its lm solves run projected iterations on the general path)."""
    if type(frame) is not str or not robot.has_frame(frame) or robot.extras.get("cone_limits"):
        return None
    lims, free, size = (None, None, None) if robot.floating else _lm_tables(robot)
    fast = (robot.chain_program(frame), lims, free, size, robot.dof, robot.q_neutral, _needs_post(robot))
    robot.cache.setdefault("lm_fast", {})[frame] = fast
    return fast


def _seed31(seed: int) -> int:
    """The kernels' 31-bit restart seed of an int seed in [0, 2**63): its low 31 bits folded with the
    higher ones (a seed below 2**31 is itself), so that seeds apart only above bit 31 (0 and 2**31,
    base * 2**32 + i) do not give the same restarts, as a plain mask did."""
    return (seed ^ (seed >> 31) ^ (seed >> 62)) & 0x7FFFFFFF


def _seed_int(seed) -> int:
    seed = check_seed("seed", seed)
    if isinstance(seed, np.random.Generator):
        return int(seed.integers(0, 2**31 - 1))
    if seed is None:
        return int(np.random.default_rng().integers(0, 2**31 - 1))
    try:
        return _seed31(int(seed))
    except (TypeError, ValueError):
        raise GoalError(f"seed: expected an integer, a numpy Generator or None, got {seed!r}") from None


def _lims_for(robot, joint_weights):
    """The per-DOF table of the LM kernels for these joint weights (see _weighted_tables)."""
    if joint_weights is None or joint_weights is robot.unit_weights:
        return _lm_tables(robot)[0]
    return _weighted_tables(robot, joint_weights)[0]


def _weighted_tables(robot, joint_weights):
    """_lm_tables for these joint weights, cached per robot for the last few weights
    (correct_clip solves every frame with the same per-joint weights)."""
    cache = robot.cache.setdefault("lims_by_weights", {})
    key = np.asarray(joint_weights, dtype=np.float64).tobytes()
    t = cache.get(key)
    if t is None:
        if len(cache) >= 8:
            cache.clear()
        t = _lm_tables(robot, joint_weights)
        cache[key] = t
    return t


def core_args(problem, q0=None, max_joint_step=None, coll=None, prune=False):
    """(model, table, lims, lo, hi) of solvers.lm.core_attempts for a compiled problem: the model
    arrays with the link masses and the collision rows ``coll`` (None: none), the goal table with
    its hard and soft row indices, the per-DOF table, and the joint bounds of this solve (the
    limits, tightened to q0 ± max_joint_step). ``prune``: the model on the goals' nodes only
    (lm_core.core_tables; the table's gnode, gref then index it), for callers that read nothing
    else of it."""
    robot = problem.robot
    model, table = _core.core_tables(problem, coll, prune)
    lims = _restart_lims(robot, problem.layout, _lims_for(robot, problem.joint_weights))
    lo, hi = robot.lower, robot.upper
    if max_joint_step is not None:
        lo = np.maximum(lo, q0 - max_joint_step)
        hi = np.minimum(hi, q0 + max_joint_step)
    return model, table, lims, lo, hi


def _restart_lims(robot, layout, lims):
    """lims with a zero sampling span on the DOFs that move no goal row, so that the general core's
    restarts keep them at q0 (lm_core._restart_near): the legs under two hand goals with the pelvis
    held, drawn at random, came back in a random pose, into the pelvis or the table (12 of 33 G1
    answers in collision in benchmarks/collision_ik.py). lims itself when every DOF moves some row
    (a CenterOfMass row moves them all). Cached on the layout for the last base table."""
    if layout is None:
        return lims
    memo = layout.restart_lims
    if memo is None or memo[0] is not lims:
        held = lims
        if not bool(np.any(layout.gkind == KIND_COM)):
            idle = np.setdiff1d(np.arange(robot.dof), _goal_dofs(robot, layout.gnode, layout.gref))
            if idle.size:
                held = lims.copy()
                held[_lm.L_SAMPLE_SPAN, idle] = 0.0
        memo = layout.restart_lims = (lims, held)
    return memo[1]


def _joint_step(robot, max_joint_step, dt):
    """max_joint_step (dof,) [rad or m] from the argument, or velocity_limit x dt; None for none."""
    if max_joint_step is None and dt is None:
        return None
    if max_joint_step is not None and dt is not None:
        raise GoalError(f"max_joint_step={max_joint_step!r:.100} and dt={dt!r}: give one of them (dt sets the "
                        f"bound to the joint velocity limits x dt, max_joint_step sets it directly)")
    if max_joint_step is None:
        dt = _check_positive("dt", dt)
        if not np.any(np.isfinite(robot.velocity_limit)):
            raise GoalError(f"dt: robot {robot.name!r} has no joint velocity limits (URDF <limit velocity>); "
                            f"pass max_joint_step instead")
        return _rotation_box(robot, robot.velocity_limit * float(dt))
    try:
        s = np.broadcast_to(np.asarray(max_joint_step, dtype=np.float64), (robot.dof,)).copy()
    except (TypeError, ValueError):
        raise GoalError(f"max_joint_step: expected a number or {robot.dof} numbers > 0 [rad or m], "
                        f"got {max_joint_step!r:.200}") from None
    if not np.all(s > 0):
        raise GoalError(f"max_joint_step: expected numbers > 0 [rad or m], got {s.tolist()}")
    return _rotation_box(robot, s)


def _rotation_box(robot, step):
    """step with a ball joint's (a floating base's rotation) three rotation-vector entries divided
    by √3: the core bounds entries (a box), and entries within s/√3 keep the angle of the rotation's
    change within s (exp is 1-Lipschitz on so(3)), as the Tracker's box. Entry by entry, a G1
    pelvis turned 0.087 rad under max_joint_step=0.05."""
    if len(robot.ball_starts):
        step = np.array(step, dtype=np.float64)
        for b in robot.ball_starts:
            step[b:b + 3] /= math.sqrt(3.0)
    return step


FIRST_SHARE = 0.25  # of a collision solve's budget, for the solve without rows that goes first
COLLISION_RETRIES = 32  # plain solves from random starts tried, each checked, before the rows (_collision_fast)
LIMBS_SHARE = 0.8  # of a collision solve's budget, by when the general route's limb search (collision/limbs.py) ends
ROWS_SHARE = 0.35  # of a collision solve's budget, for the general route's rows before its plain retries


def _solve_lm_collision(robot, problem, q_start, timeout, max_iterations, seed, restarts, mode, step, t_start,
                        collision, first=None) -> Result:
    """LM with the collision distances as inequality rows of the general core. In mode "speed"
    without a joint step bound, a solve without the rows goes first (the chain route when the goals
    allow it), with a quarter of the budget: when it converges at least ``margin`` clear of
    everything it is the answer (Panda reaching into a shelf: most answers; ~35 % less mean time
    than the rows from the start), otherwise the core starts from it with the rows
    (benchmarks/collision_ik.py). On the general route, goals on several frames search limb by
    limb first (_collision_limbs, until LIMBS_SHARE of the budget), then the rows take the rest;
    where that search does not apply, the rows get ROWS_SHARE of the budget, then plain retries
    from new starts the rest (_collision_retries)."""
    import dataclasses

    from .collision.rows import check_for

    clock = Budget(0.0)
    check = check_for(robot, *collision)
    clock.update()
    t_start += clock.deadline  # a first call's compile (or interpreted run) of the check: not the solve's
    coll = check.coll
    first_iters = 0
    if first is not None:  # run already (solve._collision_fast): the rows from its answer
        first_q, first_res = first
        first_iters = first_res.iterations
        if first_q is not None:
            q_start = first_q
        if timeout is not None:
            timeout = max(timeout - first_res.time, 1e-4)
    elif mode == "speed" and step is None:
        first = _solve_lm(robot, problem, q_start, None if timeout is None else FIRST_SHARE * timeout,
                          None if max_iterations is None else max(int(FIRST_SHARE * max_iterations), 1), seed,
                          restarts, mode, None, t_start)
        if first.success and check.clear(first.q):
            return first
        first_iters = first.iterations
        if restarts:
            found = _collision_limbs(robot, problem, first, q_start, check, timeout, max_iterations, seed, mode,
                                     t_start)
            if found is not None:
                if found.success:
                    return found
                first_iters = found.iterations
                if max_iterations is not None:
                    max_iterations = max(max_iterations - first_iters, 1)
                # the rows from the first answer with the rest of the budget (the deadline t_start + timeout)
                res = _solve_lm(robot, problem, first.q if np.all(np.isfinite(first.q)) else q_start, timeout,
                                max_iterations, seed, restarts, mode, step, t_start, coll)
                return dataclasses.replace(res, iterations=res.iterations + first_iters)
        if np.all(np.isfinite(first.q)):
            q_start = first.q
        if max_iterations is not None:
            max_iterations = max(max_iterations - first_iters, 1)
        if timeout is not None:
            # the rows from the first answer, with part of the budget; then plain retries from new starts
            res = _solve_lm(robot, problem, q_start, (FIRST_SHARE + ROWS_SHARE) * timeout, max_iterations, seed,
                            restarts, mode, step, t_start, coll)
            if not res.success and restarts and np.all(np.isfinite(first.q)):
                found = _collision_retries(robot, problem, first, check, t_start + timeout, seed, mode)
                if found is not None:
                    res = found
            return dataclasses.replace(res, iterations=res.iterations + first_iters)
    res = _solve_lm(robot, problem, q_start, timeout, max_iterations, seed, restarts, mode, step, t_start, coll)
    return dataclasses.replace(res, iterations=res.iterations + first_iters) if first_iters else res


_INTERPRETED_CHUNK = 8  # iterations of the general core's first chunk when it runs on the interpreter
_CORE_READY = {}  # (coll is None) -> the coll of a call whose core_attempts was machine code (None: plain)


def _core_chunk(budget, coll, args):
    """The first chunk of the general core (_solve_lm) in a process that has run kernels on the
    interpreter: _INTERPRETED_CHUNK iterations while core_attempts would run interpreted too (G1:
    6-80 ms an iteration there, so the clock, and the interpreted grace, are looked at every few
    iterations instead of after 100: a first G1 collision solve's rows ran 100 iterations, 4-8 s,
    in one call), else ``budget``; asked until the machine code is there (then _CORE_READY)."""
    if _tier_ready(_core.core_attempts, args):
        _CORE_READY[coll is None] = coll
        return budget
    return min(budget, _INTERPRETED_CHUNK)


def _collision_limbs(robot, problem, first, q_start, check, timeout, max_iterations, seed, mode, t_start):
    """The limb search of collision/limbs.py after a first plain answer that is not clear (or did
    not meet the goals, unless they are provably out of reach), until LIMBS_SHARE of the budget
    (of the timeout, and of max_iterations): None where it does not apply (goals beyond the basic
    kinds, a posture, no limb), else a Result: converged with the clear q it found, or not
    successful (its iterations counted) for the rows to go on."""
    from .collision.limbs import Limbs

    limbs = Limbs.of(problem, check, _lm_tables(robot), _sampler(robot))
    if limbs is None:
        return None
    clock = Budget(None if timeout is None else t_start + LIMBS_SHARE * timeout)
    iters = ITERATION_CAP if max_iterations is None else max(int(LIMBS_SHARE * max_iterations) - first.iterations, 0)
    seed_i = _seed31(seed) if type(seed) is int else _seed_int(seed)

    def solve_plain(start, max_iterations, seed):
        now = time.perf_counter()
        left = None if clock.deadline is None else max(clock.deadline - now, 1e-4)
        return _solve_lm(robot, problem, start, left, max_iterations, seed, False, mode, None, now)

    met = first.success and np.all(np.isfinite(first.q))
    if not met and provably_unreachable(problem):  # no answer at all: the rows minimise the distance
        return Result._new(first.q, False, first.status, first.position_error, first.rotation_error,
                           first.iterations, first.restarts, time.perf_counter() - t_start, "lm", first.goals_met)
    q, n, tries = limbs.find_clear(problem, first.q if met else None, q_start, clock, iters, seed_i, solve_plain)
    n += first.iterations
    if q is not None:
        pe, re_ = problem_errors(problem, q)
        if pe <= problem.tol_p and re_ <= problem.tol_r:
            res = Result._new(q, True, Status.CONVERGED, pe, re_, n, first.restarts + tries,
                              time.perf_counter() - t_start, "lm")
            res.__dict__["goals_met"] = (True,) * len(problem.goal_rows)
            return res
    return Result._new(first.q, False, first.status, first.position_error, first.rotation_error, n,
                       first.restarts + tries, time.perf_counter() - t_start, "lm", first.goals_met)


def _goal_dofs(robot, gnode, gref):
    """Sorted q entries that move some goal row's frame or reference frame (Robot.dofs_of: every
    entry of a ball joint, mimic followers for their leader), cached per robot and those nodes."""
    nodes = set(int(n) for n in gnode.tolist() if n >= 0)
    if gref is not None:
        nodes.update(int(n) for n in gref.tolist() if n >= 0)
    key = tuple(sorted(nodes))
    memo = robot.cache.setdefault("goal_dofs", {})
    dofs = memo.get(key)
    if dofs is None:
        cols = set()
        for n in key:
            cols.update(robot.dofs_of(n).tolist())
        dofs = memo[key] = np.array(sorted(cols), dtype=np.int64)
    return dofs


def _goal_chain_dofs(robot, problem):
    """The q entries that move the goals' frames, less a floating base's: what a plain retry of
    the general route re-samples."""
    dofs = _goal_dofs(robot, problem.gnode, problem.gref)
    return np.setdiff1d(dofs, robot.base_dofs) if robot.floating else dofs


def _collision_retries(robot, problem, first, check, deadline, seed, mode):
    """Plain retries of the general route (several goal frames, hard goals: a humanoid's two hands):
    the first answer met the goals in collision, or did not meet them (the core's "unreachable"
    verdict is sometimes wrong on a reachable target: its restarts stay near q0), so the DOFs on
    the goals' chains (a humanoid's waist and arms) are drawn uniformly, the others kept, and one
    plain attempt is solved from there and checked, until the time.perf_counter() ``deadline``.
    The clear result, or None. They run after the rows (ROWS_SHARE of the budget), which clear
    most answers sooner; G1 at a table: 93-94 % -> 96 % success (benchmarks/RESULTS.md)."""
    import random

    dofs = _goal_chain_dofs(robot, problem)
    if dofs.size == 0:
        return None
    rnd = random.Random(seed if type(seed) is int else 0)
    lo, span = _sampler(robot)
    lo, span = lo[dofs], span[dofs]
    clock = Budget(deadline)
    while True:
        clock.update()
        left = clock.deadline - time.perf_counter()
        if left <= 0.0:
            return None
        start = first.q.copy()
        start[dofs] = lo + span * np.array([rnd.random() for _ in range(dofs.shape[0])])
        r = _solve_lm(robot, problem, start, left, None, rnd.randrange(SEED_LIMIT), False, mode, None,
                      time.perf_counter())
        if r.success and check.clear(r.q):
            return r


def restarts_run(st, in_attempt: bool) -> int:
    """Result.restarts from an LM kernel's state ``st`` (lm_chain_attempts, core_attempts): the
    attempts after the first that ran. An attempt that ends unconverged counts itself in
    st[S_ATTEMPT] and draws the next start at once; when the solve stops there (restarts=False,
    the attempts or the budget spent) that start never ran an iteration (st[S_ATTEMPT_ITERS] is
    0) and is not a restart. ``in_attempt``: the solve converged in its current attempt (mode
    "speed"), which ran, however few iterations it took."""
    n = int(st[S_ATTEMPT])
    return n - 1 if n > 0 and not in_attempt and st[S_ATTEMPT_ITERS] == 0.0 else n


def goals_met_at(problem, q) -> tuple:
    """Result.goals_met at q (dof,): one bool per goal of the compiled problem (Posture left out),
    from its rows' errors (lm_core.row_errors)."""
    return _goals_met(problem, _core.row_errors(*core_args(problem, prune=True)[:2], q))


def _goals_met(problem, err) -> tuple:
    """One bool per goal (Posture left out): every row of that goal within its tolerance, from the
    rows' errors err (G,) [m or rad]."""
    tol_p, tol_r = problem.tol_p, problem.tol_r
    ok = [e <= (tol_p if metres else tol_r) or w == 0.0  # (a Python loop: G is a few rows)
          for e, metres, w in zip(err.tolist(), problem.layout.metres_list, problem.gw.tolist())]
    out = []
    i = 0
    for n in problem.goal_rows:
        out.append(all(ok[i:i + n]))
        i += n
    return tuple(out)


def _solve_lm(robot, problem, q_start, timeout, max_iterations, seed, restarts, mode, max_joint_step,
              t_start, coll=None, resume=None, hold_always=False) -> Result:
    """The one LM driver loop. The attempts run inside a kernel (solvers/lm.py:
    lm_chain_attempts when every goal row is on one frame's chain, no posture, no hard/soft mix
    and no new goal kind; else core_attempts) that the driver calls with an iteration budget
    sized to the time left, reading the clock between calls. ``resume`` (general core only):
    (code, q, best_q, state, rowerr, t0, moved) of a first kernel call already made with the first
    budget from q_start (_solve_core_fast), which the loop takes as its first call's outcome, the
    clock when that call's solve began (for the time per iteration) and
    _compile_clock.moved_seconds() at t_start (the deadline moves by the compile and setup since).
    ``hold_always`` (general core): every step holds the hard goals, the first ones of an attempt
    too (lm_core.S_HOLD_ALWAYS; a Tracker's few bounded iterations per update)."""
    seed_i = _seed31(seed) if type(seed) is int and 0 <= seed < SEED_LIMIT else _seed_int(seed)
    step = max_joint_step
    node = _one_frame(problem)
    chain = (node is not None and mode == "speed" and step is None and problem.basic_kinds_only()
             and not problem.layout.mixed and coll is None)
    best_q = q_start.copy()
    if chain:
        default = problem.joint_weights is robot.unit_weights
        if robot.floating:  # base restarts are sampled around q_start
            lims, free, size = (_lm_tables(robot, None, q_start) if default
                                else _around(robot, _weighted_tables(robot, problem.joint_weights), q_start))
        else:
            lims, free, size = _lm_tables(robot) if default else (_lims_for(robot, problem.joint_weights), 0.0, 0)
            if not default:
                free = free_attempts(robot.lower, robot.upper, lims[_lm.L_WRAP])
        ch = robot.chain_program(node)
        st = _lm.new_chain_state(free)
        buf = _scratch(_lm.chain_workspace_size(ch.shape[0], robot.dof, 3 * problem.gnode.shape[0]))
        p = problem
        chain_args = (ch, lims, p.gkind, p.gvec, p.gR, p.gaxis, p.gw, p.tol_p, p.tol_r, q_start)
    else:
        model, table, lims, lo, hi = core_args(problem, q_start, step, coll, prune=True)
        if resume is None:
            q = q_start.copy() if step is None else np.minimum(np.maximum(q_start, lo), hi)  # (q_start is in the limits)
            st = _CORE_STATE0[1 if mode == "distance" else 0].copy()
            if hold_always or (max_iterations is not None and max_iterations < HOLD_BUDGET):
                st[_core.S_HOLD_ALWAYS] = 1.0  # every step holds the hard goals (no relaxed first steps)
            if step is not None:
                st[_core.S_BOXED] = 1.0  # agreeing stalled attempts end the solve: unreachable in the box
            rowerr = np.empty(problem.gnode.shape[0])
        else:
            q, best_q, st, rowerr = resume[1:5]
        q_rest, w_post, tol_p, tol_r = problem.q_rest, problem.w_posture, problem.tol_p, problem.tol_r
    max_attempts = 2**62 if restarts else 1
    budget = _FIRST_CHUNK if max_iterations is None else min(_FIRST_CHUNK, max_iterations)
    if not chain and interpreted_seconds() and _CORE_READY.get(coll is None, 0) is not coll:
        budget = _core_chunk(budget, coll, (model, table, lims, lo, hi, q_rest, w_post, tol_p, tol_r, q_start, q,
                                            best_q, st, int(budget), 3 * ATTEMPT_ITERATIONS, max_attempts, seed_i,
                                            rowerr))
    clock = Budget(None if timeout is None else t_start + timeout, None if resume is None else resume[6])
    checked_reach = False
    unreachable = False
    attempt_iters = ATTEMPT_ITERATIONS if chain else 3 * ATTEMPT_ITERATIONS
    while True:
        t0 = time.perf_counter()
        it0 = st[S_ITERS]
        if resume is not None:  # the first call, made by the caller
            code, t0, it0 = resume[0], resume[5], 0.0
            resume = None
        elif chain:
            args = chain_args + (best_q, st, int(budget), attempt_iters, max_attempts, seed_i, buf)
            code = (_LM_ENTRY[0] or _chain_attempts_entry(args))(*args)
        else:
            code = _core.core_attempts(model, table, lims, lo, hi, q_rest, w_post, tol_p, tol_r, q_start, q, best_q, st,
                                       int(budget), attempt_iters, max_attempts, seed_i, rowerr)
        t0 += clock.update(t0)  # (a call that compiled: its wall time is not the solve's)
        deadline = clock.deadline
        if code == CONVERGED:
            if math.isfinite(st[S_BEST_PERR]) and math.isfinite(st[S_BEST_RERR]) and _lm_finite(best_q):
                status = Status.CONVERGED
                break
            code = STALLED  # never call non-finite numbers converged
            st[S_BEST_PERR] = math.inf
            best_q[:] = q_start
        now = time.perf_counter()
        if code == UNREACHABLE:  # restarts agree on the closest answer (lm.CHAIN_AGREEMENTS, lm_core.AGREEMENTS,
            # lm_core.SOFT_AGREEMENTS)
            status = Status.UNREACHABLE
            break
        if not checked_reach:
            checked_reach = True
            unreachable = provably_unreachable(problem)
            if unreachable:
                # minimise the distance to the end (the arm stretches toward the target) in a few
                # long attempts, then stop
                max_attempts = min(max_attempts, int(st[S_ATTEMPT]) + 3)
                attempt_iters = 10 * ATTEMPT_ITERATIONS
                st[S_MINIMIZE] = 1.0
        if code == STALLED:
            status = Status.UNREACHABLE if unreachable else Status.STALLED
            break
        if deadline is not None and now >= deadline:
            status = Status.UNREACHABLE if unreachable else Status.TIME_LIMIT
            break
        if max_iterations is not None and st[S_ITERS] >= max_iterations:
            status = Status.UNREACHABLE if unreachable else Status.ITERATION_LIMIT
            break
        per_iter = (now - t0) / max(st[S_ITERS] - it0, 1)
        budget = 10_000 if deadline is None else int(min(max(16, 0.5 * (deadline - now) / per_iter), 10_000))
        if max_iterations is not None:
            budget = int(min(budget, max_iterations - st[S_ITERS]))
    if not chain and mode == "distance" and st[S_BEST_DIST] < np.inf:
        status = Status.CONVERGED
    if not math.isfinite(st[S_BEST_PERR]) and not chain:
        pe, re_ = problem_errors(problem, best_q)
        st[S_BEST_PERR], st[S_BEST_RERR] = pe, re_
    elif not math.isfinite(st[S_BEST_PERR]):  # chain: no attempt finished inside the budget
        best_q = np.minimum(np.maximum(best_q, robot.lower), robot.upper)
        pe, re_ = goal_errors(robot.node_table, robot.node_params, robot.origin, best_q, problem.gnode, problem.gkind,
                              problem.gvec, problem.gR, problem.gaxis, problem.gw)
        st[S_BEST_PERR], st[S_BEST_RERR] = pe, re_
    if chain:
        met = ((True,) * len(problem.goal_rows) if status == Status.CONVERGED else goals_met_at(problem, best_q))
    elif status == Status.CONVERGED and mode == "speed":
        # converged: every row with a weight within its tolerance (the kernel's test), so every goal is met
        met = (True,) * len(problem.goal_rows)
    else:
        met = _goals_met(problem, rowerr)
    s = st.tolist()
    res = Result._new(best_q, status == Status.CONVERGED, status, s[S_BEST_PERR], s[S_BEST_RERR], int(s[S_ITERS]),
                      restarts_run(st, status == Status.CONVERGED and mode == "speed"),
                      time.perf_counter() - t_start, "lm")
    res.__dict__["goals_met"] = met
    return res


def solve_many(robot, frame, Ts, q0=None, method: str = "lm", position_tolerance: float = 1e-6,
               rotation_tolerance: float = 1e-6, max_restarts: int = 100, seed: int = 0, joint_weights=None,
               axes: str = "xyz", world=None, self_collision: bool = False, margin: float = 0.005, **options):
    """Solve B pose (or position) targets of one frame in parallel.

    Args:
        frame: the goal frame.
        Ts: (B, 4, 4) poses, or (B, 3) positions [m] (position-only goals).
        q0: (dof,) or (B, dof) start configurations (default ``robot.neutral()``).
        max_restarts: random restarts per target after the first attempt, 0 to
            :data:`MAX_RESTARTS` = 10,000 (lm: no clock inside the parallel kernel, the budget is
            iterations, so results are deterministic for a seed; a target whose restarts find
            nothing better for 40 in a row stops there, ``unreachable``, as in :func:`solve`; other
            methods run :func:`solve`
            per target, with its ``timeout``, default 0.05 s, as well: pass ``timeout=None`` (and
            ``max_iterations``) for results that do not depend on the clock).
        seed: an int in [0, 2**63 - B); target ``b`` is seeded with ``seed + b``.
        axes: orientation axes that matter for pose targets ("xyz", or "x"/"y"/"z").
        world, self_collision, margin: collision distances as in :func:`solve` (lm only); then
            every target runs :func:`solve` in turn (its ``timeout``, default 0.05 s, may be
            passed), seeded with ``seed + b``, and ``BatchResult.collision`` (``batch[b].info``)
            holds each target's ``info["collision"]``.

    ``method="lm"`` runs one Numba ``prange`` kernel over all targets (all cores); any other
    method, or collision distances, runs :func:`solve` per target. Returns a :class:`BatchResult`.
    """
    from .goals import Pose, Position
    from .result import BatchResult, STATUS_CODES
    from .solvers.lm import ATTEMPT_ITERATIONS, batch_pose_rows, lm_chain_batch

    t0 = time.perf_counter()
    node = robot_arg(robot).frame_index(frame)
    if isinstance(Ts, (str, bytes)) or Ts is None or (isinstance(Ts, np.ndarray) and Ts.dtype.kind == "c"):
        raise GoalError(f"Ts: expected a real array (B, 4, 4) or (B, 3), got {Ts!r:.200}")
    try:
        Ts = np.ascontiguousarray(Ts, dtype=np.float64)
    except (TypeError, ValueError, OverflowError):
        raise GoalError(f"Ts: expected a real array (B, 4, 4) or (B, 3), got {Ts!r:.200}") from None
    if Ts.ndim == 2 and Ts.shape[1] == 3:
        position_only = True
    elif Ts.ndim == 3 and Ts.shape[1:] == (4, 4):
        position_only = False
    else:
        raise GoalError(f"Ts: expected shape (B, 4, 4) poses or (B, 3) positions, got {Ts.shape}")
    if position_only and axes != "xyz":  # (it did nothing, without a word)
        raise GoalError(f"axes={axes!r}: the orientation axes of pose targets (B, 4, 4); positions (B, 3) have no "
                        f"orientation")
    B = Ts.shape[0]
    if position_only and not np.all(np.isfinite(Ts)):
        bad = int(np.argwhere(~np.isfinite(Ts.reshape(B, -1)))[0][0])
        raise GoalError(f"Ts: expected finite values; target {bad} has {Ts[bad].tolist()}")
    if np.any(np.abs(Ts[np.isfinite(Ts)]) > MAX_LENGTH):
        bad = int(np.argmax(np.any(np.abs(np.nan_to_num(Ts.reshape(B, -1))) > MAX_LENGTH, axis=1)))
        raise GoalError(f"Ts: expected coordinates within ±{MAX_LENGTH:g} m; target {bad} has "
                        f"{Ts[bad].tolist()}")
    if isinstance(max_restarts, bool) or not isinstance(max_restarts, (int, np.integer)) \
            or not 0 <= max_restarts <= MAX_RESTARTS:
        raise GoalError(f"max_restarts: expected an integer in [0, {MAX_RESTARTS}], got {max_restarts!r}")
    check_seed("seed", seed, allow_generator=False, allow_none=False)
    if seed + B >= SEED_LIMIT:
        raise GoalError(f"seed: target b is seeded with seed + b, which must stay below 2**63; got seed={seed} "
                        f"for {B} targets")
    if q0 is None:
        q0s = np.broadcast_to(robot.q_neutral, (B, robot.dof))
    else:
        q0s = robot.check_q(q0, "q0")  # (numbers within ±MAX_LENGTH, as solve's q0)
        if q0s.ndim == 1:
            q0s = np.broadcast_to(q0s, (B, robot.dof))
        elif q0s.shape[0] != B:
            raise ConfigurationError(f"q0: expected shape ({robot.dof},) or ({B}, {robot.dof}), got {q0s.shape}")
    q0s = np.ascontiguousarray(q0s)  # clamped into the limits by each solve
    # one goal template; the per-target rows are filled (and the poses validated) in one kernel pass
    name = robot.node_names[node]
    template = [Position(name, np.zeros(3))] if position_only else [Pose(name, np.eye(4), axes=axes)]
    problem = compile_problem(robot, template, position_tolerance, rotation_tolerance, joint_weights)
    G = problem.gnode.shape[0]
    gvecs = np.empty((B, G, 3))
    if position_only:
        gvecs[:, 0] = Ts
        gRs = np.broadcast_to(problem.gR, (B, G, 3, 3)).copy()
    else:
        gRs = np.empty((B, G, 3, 3))
        bad, reason = batch_pose_rows(Ts, problem.gkind, problem.gR, problem.gaxis, gvecs, gRs)
        if reason == 1:
            raise GoalError(f"Ts: expected finite values; target {bad} has {Ts[bad].tolist()}")
        if reason == 2:
            raise GoalError(f"Ts[{bad}]: expected a rigid transform (orthonormal rotation, det +1, "
                            f"last row 0 0 0 1), got {Ts[bad].tolist()}")
    collision = _collision_options(world, self_collision, margin)
    if method != "lm" or collision is not None:
        get_method(method)  # unknown names fail here, listing the methods
        if collision is not None:
            options = {**options, "world": collision[0], "self_collision": collision[1], "margin": collision[2]}
        if _MAX_RESTARTS_KEY in options:
            raise SolverError(f"solve_many: unknown option {_MAX_RESTARTS_KEY!r}; use max_restarts")
        # max_restarts bounds each target's restarts (it was ignored: 2-6 restarts with max_restarts=0);
        # lm's collision solves keep their own retries
        bound = {} if method == "lm" else {_MAX_RESTARTS_KEY: int(max_restarts)}
        results = []
        for b in range(B):
            goal = (Position(name, Ts[b]) if position_only else Pose(name, Ts[b], axes=axes))
            results.append(solve(robot, [goal], q0=q0s[b], method=method, position_tolerance=position_tolerance,
                                 rotation_tolerance=rotation_tolerance, seed=seed + b, joint_weights=joint_weights,
                                 **options, **bound))
        codes = np.array([STATUS_CODES.index(r.status) for r in results], dtype=np.int64)  # q wrapped by solve
        return BatchResult(np.array([r.q for r in results]).reshape(B, robot.dof),
                           np.array([r.success for r in results], dtype=bool), codes,
                           np.array([r.position_error for r in results]), np.array([r.rotation_error for r in results]),
                           np.array([r.iterations for r in results]), np.array([r.restarts for r in results]),
                           time.perf_counter() - t0, method,
                           None if collision is None else tuple(r.info.get("collision") for r in results))
    if options:
        raise SolverError(f"solve_many(method='lm') takes no options {sorted(options)}: its parallel kernel has no "
                          f"clock, its budget per target is max_restarts (timeout and method options apply with "
                          f"another method or with world= / self_collision=True, where each target is one solve)")
    q_out = np.empty((B, robot.dof))
    errs = np.full((B, 2), np.inf)
    iters = np.zeros(B, dtype=np.int64)
    rest = np.zeros(B, dtype=np.int64)
    kcode = np.zeros(B, dtype=np.int64)  # each item's kernel code
    p = problem
    default = p.joint_weights is robot.unit_weights
    jw = None if default else p.joint_weights
    ch = robot.chain_program(node)
    base = robot.base_dofs
    if robot.floating and B > 1 and not np.all(q0s[:, base] == q0s[0, base]):
        # restarts sample the floating base around each item's own q0: one table per item
        for b in range(B):
            lims, free, _ = _lm_tables(robot, jw, q0s[b])
            sl = slice(b, b + 1)
            parallel_call(lm_chain_batch, ch, lims, p.gkind, gvecs[sl], gRs[sl], p.gaxis, p.gw, p.tol_p, p.tol_r,
                           q0s[sl], free, ATTEMPT_ITERATIONS, int(max_restarts), int(seed) + b, q_out[sl], errs[sl],
                           iters[sl], rest[sl], kcode[sl])
    else:
        lims, free, _ = _lm_tables(robot, jw, q0s[0] if B else None)
        b0 = 0
        while b0 < B:  # one call; while the kernel compiles in the background, small interpreted pieces
            piece = slice(b0, b0 + INTERPRETED_BATCH)  # would a piece run interpreted?
            args = (ch, lims, p.gkind, gvecs[piece], gRs[piece], p.gaxis, p.gw, p.tol_p, p.tol_r, q0s[piece], free,
                    ATTEMPT_ITERATIONS, int(max_restarts), int(seed) + b0, q_out[piece], errs[piece], iters[piece],
                    rest[piece], kcode[piece])
            n = B - b0 if _tier_ready(lm_chain_batch, args) else min(B - b0, INTERPRETED_BATCH)
            sl = slice(b0, b0 + n)
            parallel_call(lm_chain_batch, ch, lims, p.gkind, gvecs[sl], gRs[sl], p.gaxis, p.gw, p.tol_p, p.tol_r,
                           q0s[sl], free, ATTEMPT_ITERATIONS, int(max_restarts), int(seed) + b0, q_out[sl], errs[sl],
                           iters[sl], rest[sl], kcode[sl])
            b0 += n
    _wrap_near(robot, q_out, q0s)
    # an item that stalled ran all its max_restarts + 1 attempts; the kernel also counts the start it
    # drew after the last one, which never ran (restarts_run); one whose restarts kept stalling at the
    # same closest answer stopped early, unreachable (lm.CHAIN_AGREEMENTS), as solve() does
    np.minimum(rest, max_restarts, out=rest)
    conv = kcode == CONVERGED
    codes = np.where(conv, 0, np.where(kcode == UNREACHABLE, 1, 4)).astype(np.int64)  # else stalled
    if not conv.all():
        # a position beyond the reach radius: unreachable (a status, not an error), for a pose target too
        p_anchor, radius = reach_point(robot, node)
        far = np.linalg.norm((Ts if position_only else Ts[:, :3, 3]) - p_anchor, axis=1) > radius + position_tolerance
        codes[far & ~conv] = 1
    return BatchResult(q_out, conv, codes, errs[:, 0], errs[:, 1], iters, rest, time.perf_counter() - t0, "lm")
