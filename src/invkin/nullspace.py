"""Null-space objectives: the redundancy term η of SEEDS.md §1, and a refinement that uses it.

The general solution of ``J δq = δx`` (SEEDS.md §1, weighted by the joint stiffness W) is

    δq = J⁺_W δx + (I − J⁺_W J) η,        J⁺_W = W⁻¹Jᵀ(J W⁻¹ Jᵀ)⁻¹,

and the second term moves the joints without moving the goals (to first order). Each objective
here is a scalar cost ``H(q)`` to minimise, its exact gradient ``∇H`` (:meth:`Objective.gradient`,
in the coordinates of the local increment that ``Robot.integrate`` applies), and a descent
direction ``η = −c ∇H`` (:meth:`Objective.direction`, c > 0 a constant that makes a gain of ~0.5
a sensible step for every objective; a scalar, so that the projected ``N_W W⁻¹ η`` stays a descent
direction):

* ``"joint_limits"`` (Liégeois 1977): ``H = ½ Σ_i ((q_i − mid_i) / (u_i − l_i))²`` over the joints
  with two finite limits, ``∂H/∂q_i = (q_i − mid_i) / (u_i − l_i)²``; ``c`` = the mean of ``(u_i − l_i)²`` (so that
  ``η ≈ mid − q`` for similar ranges).
* ``"manipulability"`` (Yoshikawa 1985): ``H = −log w``, ``w = sqrt(det(J Jᵀ))`` of ``frame``'s
  Jacobian (``rows``: 'all', 'position', 'orientation'), or of the goals' stacked task Jacobian
  when no frame is given. ``∇H = −∇w / w`` (the ascent direction of w, scale-free); computed by
  central differences of w (h = 1e-6, ball joints by local increments). η = −∇H.
* ``"posture"``: ``H = ½ Σ_i s_i (q ⊖ q_rest)_i²`` (``s``: per-joint weights, default 1;
  ``q_rest`` default: the goals' Posture, else ``robot.neutral()``); ``∇H = s ⊙ (q ⊖ q_rest)`` (exact for revolute and
  prismatic entries, first order for ball joints); η = −∇H.
* a callable ``eta(q) -> (dof,)``: the user's η itself (no cost: the refinement then accepts any
  step that keeps the goals).

:func:`refine_in_nullspace` moves a solved configuration along ``N_W η`` (``N_W = I − J⁺_W J``),
re-converges the goals with damped Gauss–Newton steps and keeps a step only when the goals are
still within tolerance and the cost fell (a backtracking line search on the gain).
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import numpy as np

from ._checks import count, positive
from .errors import GoalError
from .solvers.shared import compile_problem, problem_rows, task_eval

__all__ = ["Objective", "make_objective", "refine_in_nullspace", "OBJECTIVES"]

#: Names accepted by :func:`make_objective` (and ``solve(nullspace=...)``).
OBJECTIVES = ("joint_limits", "manipulability", "posture")

_FD_STEP = 1e-6


@dataclass
class Objective:
    """A null-space objective bound to a robot (see the module docstring).

    ``cost(q)`` → float (None for a user η), ``gradient(q)`` → (dof,) ∇cost,
    ``direction(q)`` → (dof,) η, a descent direction of the cost.
    """

    name: str
    robot: object
    _cost: object = field(repr=False)
    _grad: object = field(repr=False)
    _dir: object = field(repr=False)

    def cost(self, q):
        return None if self._cost is None else float(self._cost(q))

    def gradient(self, q) -> np.ndarray:
        if self._grad is None:
            raise GoalError(f"objective {self.name!r} has no cost, hence no gradient")
        return self._grad(q)

    def direction(self, q) -> np.ndarray:
        return self._dir(q)


def _ball_mask(robot) -> np.ndarray:
    m = np.zeros(robot.dof, dtype=bool)
    for s in robot.ball_starts:
        m[s:s + 3] = True
    return m


def _joint_limits(robot) -> Objective:
    lo, hi = robot.lower, robot.upper
    ok = np.isfinite(lo) & np.isfinite(hi) & (hi > lo) & ~_ball_mask(robot)
    lo_ok, hi_ok = np.where(ok, lo, 0.0), np.where(ok, hi, 0.0)  # (no inf - inf for a floating base)
    mid = 0.5 * (lo_ok + hi_ok)
    rng2 = np.where(ok, (hi_ok - lo_ok) ** 2, 1.0)
    scale = float(np.mean(rng2[ok])) if ok.any() else 1.0

    def cost(q):
        x = np.where(ok, q - mid, 0.0)
        return 0.5 * float(np.sum(x * x / rng2))

    def grad(q):
        return np.where(ok, (q - mid) / rng2, 0.0)

    def direction(q):
        return -scale * grad(q)

    return Objective("joint_limits", robot, cost, grad, direction)


def _posture(robot, q_rest=None, weights=None) -> Objective:
    if q_rest is None:
        q_rest = robot.neutral()
    q_rest = robot.check_q(q_rest, "posture q_rest")
    if q_rest.shape != (robot.dof,):
        raise GoalError(f"posture q_rest: expected shape ({robot.dof},), got {q_rest.shape}")
    s = np.ones(robot.dof) if weights is None else np.array(weights, dtype=np.float64)
    if s.shape != (robot.dof,) or not np.all(np.isfinite(s)) or np.any(s < 0):
        raise GoalError(f"posture weights: expected {robot.dof} finite numbers >= 0, got {weights!r}")

    def grad(q):
        return s * robot.difference(q_rest, q)

    def cost(q):
        d = robot.difference(q_rest, q)
        return 0.5 * float(np.sum(s * d * d))

    return Objective("posture", robot, cost, grad, lambda q: -grad(q))


def _manipulability(robot, frame=None, rows="all", problem=None) -> Objective:
    from .diagnostics import _rows

    if frame is not None:
        sl = _rows(rows)
        node = robot.frame_index(frame)

        def w_of(q):
            J = robot.jacobian(q, node)[sl]
            return _w(J)
    else:
        if problem is None:
            raise GoalError("objective 'manipulability': give a frame, or use it with goals "
                            "(refine_in_nullspace binds it to the goals' task Jacobian)")
        ev = _TaskEval(problem)

        def w_of(q):
            return _w(ev(q)[1])

    dof = robot.dof

    def cost(q):
        w = w_of(q)
        return math.inf if w <= 0.0 else -math.log(w)

    def grad(q):
        w0 = w_of(q)
        g = np.empty(dof)
        e = np.zeros(dof)
        for i in range(dof):
            e[i] = _FD_STEP
            wp = w_of(robot.integrate(q, e))
            wm = w_of(robot.integrate(q, -e))
            e[i] = 0.0
            g[i] = (wp - wm) / (2.0 * _FD_STEP)
        return -g / max(w0, 1e-300)

    return Objective("manipulability", robot, cost, grad, lambda q: -grad(q))


def _w(J) -> float:
    if J.shape[0] > J.shape[1]:
        return 0.0
    return float(np.prod(np.linalg.svd(J, compute_uv=False)))


def make_objective(spec, robot, problem=None, **params) -> Objective:
    """An :class:`Objective` from a name in :data:`OBJECTIVES`, a callable ``eta(q)`` or an Objective.

    Parameters by name: joint_limits: none; manipulability: ``frame=None``, ``rows='all'``;
    posture: ``q_rest=None`` (dof,), ``weights=None`` (dof,) ≥ 0. ``problem`` (a compiled goal
    table) binds a frame-less manipulability objective to the goals' task Jacobian.
    """
    if isinstance(spec, Objective):
        if params:
            raise GoalError(f"objective {spec.name!r} is already built; got extra parameters {sorted(params)}")
        return spec
    if callable(spec):
        if params:
            raise GoalError(f"a callable eta(q) takes no parameters, got {sorted(params)}")
        dof = robot.dof

        def direction(q):
            eta = np.asarray(spec(q.copy()), dtype=np.float64)
            if eta.shape != (dof,) or not np.all(np.isfinite(eta)):
                raise GoalError(f"eta(q): expected {dof} finite numbers, got {eta!r:.200}")
            return eta

        return Objective(getattr(spec, "__name__", "eta"), robot, None, None, direction)
    if not isinstance(spec, str):  # (an array compared with a name: numpy's ambiguous truth value)
        raise GoalError(f"unknown null-space objective {spec!r:.200}; choose one of: {', '.join(OBJECTIVES)}, "
                        f"or pass a callable eta(q)")
    try:
        if spec == "joint_limits":
            if params:
                raise TypeError
            return _joint_limits(robot)
        if spec == "posture":
            if "q_rest" not in params and problem is not None and problem.w_posture > 0:
                params["q_rest"] = problem.q_rest  # the goals' Posture
            return _posture(robot, **params)
        if spec == "manipulability":
            return _manipulability(robot, problem=problem, **params)
    except TypeError:
        raise GoalError(f"objective {spec!r}: unknown parameter(s) {sorted(params)}") from None
    raise GoalError(f"unknown null-space objective {spec!r}; choose one of: {', '.join(OBJECTIVES)}, "
                    f"or pass a callable eta(q)")


class _TaskEval:
    """(e (m,), J (m, dof), perr, rerr) of a compiled problem at q (one kernel call)."""

    def __init__(self, problem):
        r = problem.robot
        self.p = problem
        m = 3 * problem.gnode.shape[0]
        self.Tall = np.empty((r.n_nodes, 4, 4))
        self.Jf = np.empty((6, r.dof))
        self.errs = np.empty(20)
        self.m = m

    def __call__(self, q):
        p = self.p
        r = p.robot
        if not p.basic_kinds_only():  # (task_eval knows the basic kinds only: the general core's rows)
            e, J, pe, re_ = problem_rows(p, q)
            return e.copy(), J.copy(), pe, re_
        e = np.empty(self.m)
        J = np.empty((self.m, r.dof))
        task_eval(r.node_table, r.node_params, r.origin, q, p.gnode, p.gkind, p.gvec, p.gR, p.gaxis, p.gw, self.Tall, self.Jf,
                  e, J, self.errs)
        return e, J, float(self.errs[0]), float(self.errs[1])


def _converge(robot, ev, q, W, tol_p, tol_r, iterations, free):
    """Damped Gauss–Newton on the goals from q, moving only ``free`` joints; (q, ok)."""
    e, J, pe, re_ = ev(q)
    for _ in range(iterations):
        if pe <= tol_p and re_ <= tol_r:
            return q, True
        Jf = J * free
        E = 0.5 * float(e @ e)
        A = Jf.T @ Jf + np.diag((E + 1e-12) * W + (~free) * 1.0)
        dq = np.linalg.solve(A, Jf.T @ e) * free
        qn = np.clip(robot.integrate(q, dq), robot.lower, robot.upper)
        en, Jn, pn, rn = ev(qn)
        if float(en @ en) >= float(e @ e) and not (pn <= tol_p and rn <= tol_r):
            return q, False
        q, e, J, pe, re_ = qn, en, Jn, pn, rn
    return q, (pe <= tol_p and re_ <= tol_r)


def refine_in_nullspace(robot, goals, q, objective, gain: float = 0.5, iterations: int = 50,
                        position_tolerance: float = 1e-6, rotation_tolerance: float = 1e-6,
                        joint_weights=None, max_step: float = 0.2, corrections: int = 10,
                        timeout: float | None = None, **objective_params) -> np.ndarray:
    """Improve ``objective`` at q while keeping every goal within tolerance → q (dof,).

    Each iteration moves ``δq = α N_W W⁻¹ η`` (``N_W = I − J⁺_W J`` on the weighted task Jacobian
    of the goals, W = diag(joint_weights): stiffer joints move less; ``α`` starts at ``gain``),
    scaled so that no entry exceeds ``max_step`` [rad or m]; clamps into the limits; then runs up
    to ``corrections`` damped Gauss–Newton iterations on the goals. The step is kept when every
    goal is within ``position_tolerance`` [m] / ``rotation_tolerance`` [rad] and the cost fell
    (any step that keeps the goals, for a callable η); otherwise α is halved. Joints at a limit
    that η pushes outward are held still. Stops after ``iterations`` steps or when α < 1e-6 gain.

    If the goals are not within tolerance at q, they are first re-converged from q; if that
    fails, q (clamped into the limits) is returned unchanged. Inputs are never modified.
    ``objective``: a name of :data:`OBJECTIVES`, a callable ``eta(q)`` or an :class:`Objective`;
    ``objective_params`` go to :func:`make_objective`. ``timeout`` [s] (None: no clock): no new
    iteration starts after it (the q reached so far keeps the goals); ``solve(nullspace=...)``
    gives it what is left of its own timeout.
    """
    problem = compile_problem(robot, goals, position_tolerance, rotation_tolerance, joint_weights)
    obj = make_objective(objective, robot, problem=problem, **objective_params)
    gain = positive("gain", gain)
    max_step = positive("max_step", max_step)
    iterations = count("iterations", iterations)
    corrections = count("corrections", corrections)
    if timeout is not None:
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float, np.integer, np.floating)) \
                or not (timeout >= 0 and math.isfinite(timeout)):
            raise GoalError(f"timeout: expected a finite number >= 0 [s] or None, got {timeout!r:.50}")
        deadline = time.perf_counter() + timeout
    q_in = robot.check_q(q, "q")
    if q_in.ndim != 1:
        raise GoalError(f"q: expected shape ({robot.dof},), got {q_in.shape}")
    q = np.clip(q_in, robot.lower, robot.upper)
    W = problem.joint_weights
    tol_p, tol_r = problem.tol_p, problem.tol_r
    ev = _TaskEval(problem)
    all_free = np.ones(robot.dof, dtype=bool)
    q, ok = _converge(robot, ev, q, W, tol_p, tol_r, max(corrections, 20), all_free)
    if not ok:
        return np.clip(q_in, robot.lower, robot.upper)
    c = obj.cost(q)
    alpha = gain
    w_isqrt = 1.0 / np.sqrt(W)
    for _ in range(iterations):
        if alpha < 1e-6 * gain or (timeout is not None and time.perf_counter() >= deadline):
            break
        _, J, _, _ = ev(q)
        eta = obj.direction(q) / W
        # hold joints at a limit that eta pushes outward (they cannot follow the projected step)
        free = ~(((q <= robot.lower) & (eta < 0)) | ((q >= robot.upper) & (eta > 0)))
        eta = eta * free
        Jt = (J * free) * w_isqrt  # J W^-1/2 over the free joints
        Jp = np.linalg.pinv(Jt, rcond=1e-10)
        # N_W eta = W^-1/2 (I - Jt⁺ Jt) W^1/2 eta
        y = eta / w_isqrt
        dq = w_isqrt * (y - Jp @ (Jt @ y))
        dq *= free
        if not np.any(dq):
            break
        big = float(np.max(np.abs(dq)))
        scale = alpha if alpha * big <= max_step else max_step / big
        q_try = np.clip(robot.integrate(q, scale * dq), robot.lower, robot.upper)
        q_try, ok = _converge(robot, ev, q_try, W, tol_p, tol_r, corrections, all_free)
        c_try = obj.cost(q_try) if ok else None
        if ok and (c is None or c_try < c):
            q, c = q_try, c_try
            alpha = min(alpha * 1.5, gain)
        else:
            alpha *= 0.5
    return q
