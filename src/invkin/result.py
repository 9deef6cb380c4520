"""Solve results: Status, Result (one solve) and BatchResult (arrays over a batch)."""
from __future__ import annotations

import enum
from dataclasses import dataclass, field

import numpy as np

__all__ = ["Status", "Result", "BatchResult"]


class Status(str, enum.Enum):
    """Why a solve stopped. Only ``converged`` means every goal is within tolerance.

    ``unreachable`` rests on one of two grounds: a proof (a position goal beyond its chain's reach
    radius, two goals farther apart than the links between them stretch, ...) or the restarts'
    verdict: they keep ending at the same closest answer and none does better (lm's chain route:
    40 attempts in a row, from uniform random starts, none better than the best by more than 1 %;
    lm's general core with soft goals only, several frames or a Posture: 100 attempts that ended
    within twice the best miss, none better by more than 1 %, that miss beyond 100 x tolerance; with
    hard goals or ``max_joint_step``: 4 attempts that stall at the same closest answer; see
    docs/architecture.md, "The restart verdict"). Either way ``Result.q`` is the closest answer
    found. ``time_limit`` / ``iteration_limit`` mean the budget ran out first: restarts were still
    finding better answers, or too few had run for a verdict, so more time may help.
    """

    CONVERGED = "converged"
    UNREACHABLE = "unreachable"          # no configuration meets the goals (proved, or the restarts agree): closest returned
    ITERATION_LIMIT = "iteration_limit"  # max_iterations spent while still improving (or before a verdict)
    TIME_LIMIT = "time_limit"            # timeout spent while still improving (or before a verdict)
    STALLED = "stalled"                  # every attempt stopped in a local minimum
    OUT_OF_WORKSPACE = "out_of_workspace"  # (reach) the target is beyond the reach radius
    IN_COLLISION = "in_collision"        # the goals are met only closer than the margin (world / self_collision)

    def __str__(self) -> str:
        return self.value


#: Integer codes used by kernels and batch results, in this order.
STATUS_CODES = (Status.CONVERGED, Status.UNREACHABLE, Status.ITERATION_LIMIT, Status.TIME_LIMIT,
                Status.STALLED, Status.OUT_OF_WORKSPACE, Status.IN_COLLISION)


_NEW, _SET = object.__new__, object.__setattr__


@dataclass(frozen=True, eq=False)
class Result:
    """Outcome of :func:`invkin.solve`. Results compare and hash by identity (two solves differ in
    ``time`` at least; compare ``q`` with :func:`numpy.allclose`).

    q (dof,): the best configuration found (always inside the joint limits).
    position_error [m], rotation_error [rad]: the largest error over the goals.
    time [s]: wall time of the call. iterations: total over restarts. restarts: the attempts after
    the first that ran (0 with ``restarts=False``).
    goals_met: which goals are met, e.g. hard feet met and a hand out of reach not.
    info["collision"] (with ``world=`` / ``self_collision=True``): ``pairs`` checked, ``min_distance``
    [m] and the ``closest`` pair at q among the pairs that some joint moves and that lie within
    ``margin + 0.05`` m (the check's broad phase, :data:`invkin.collision.rows.CUTOFF`): ``inf``
    and None when none is that close, however near the nearest one is beyond it
    (:func:`invkin.distances` measures every pair); ``collision_free`` (every pair at least
    ``margin`` apart), ``static`` (pairs closer than the margin that no joint moves).
    """

    q: np.ndarray
    success: bool
    status: Status
    position_error: float
    rotation_error: float
    iterations: int
    restarts: int
    time: float
    method: str = "lm"
    info: dict = field(default_factory=dict, repr=False)
    #: one bool per goal in the order given (Posture left out): that goal within tolerance. Every
    #: method and route of :func:`invkin.solve` fills it (all True when the solve converged), so
    #: ``all(res.goals_met)`` is False for a result that missed a goal; empty only for a Result
    #: built by hand.
    goals_met: tuple = field(default=(), repr=False)

    @classmethod
    def _new(cls, q, success, status, position_error, rotation_error, iterations, restarts, time, method,
             goals_met=()):
        """Construct without the frozen dataclass __init__ (its fields as one dict display instead of
        eleven object.__setattr__ calls, ~0.4 µs): the solve fast paths build one per call."""
        r = _NEW(cls)
        _SET(r, "__dict__", {"q": q, "success": success, "status": status, "position_error": position_error,
                             "rotation_error": rotation_error, "iterations": iterations, "restarts": restarts,
                             "time": time, "method": method, "info": {}, "goals_met": goals_met})
        return r

    def __repr__(self) -> str:
        return (f"Result({self.status.value}, method={self.method}, pos_err={self.position_error:.2e} m, "
                f"rot_err={self.rotation_error:.2e} rad, iterations={self.iterations}, "
                f"restarts={self.restarts}, time={self.time * 1e3:.3f} ms)")


@dataclass(frozen=True, eq=False)
class BatchResult:
    """Outcome of :func:`invkin.solve_many`: arrays over B problems (compared and hashed by identity,
    as :class:`Result`). ``collision`` (with ``world=`` /
    ``self_collision=True``): each target's ``info["collision"]`` from its solve, a tuple of B dicts
    (``batch[b].info["collision"]``); None without collision options."""

    q: np.ndarray               # (B, dof)
    success: np.ndarray         # (B,) bool
    status_code: np.ndarray     # (B,) int, index into STATUS_CODES
    position_error: np.ndarray  # (B,) [m]
    rotation_error: np.ndarray  # (B,) [rad]
    iterations: np.ndarray      # (B,)
    restarts: np.ndarray        # (B,)
    time: float                 # wall time of the whole batch [s]
    method: str = "lm"
    collision: tuple | None = field(default=None, repr=False)  # (B,) info["collision"] dicts, or None

    @property
    def status(self) -> list:
        return [STATUS_CODES[int(c)] for c in self.status_code]

    def __len__(self) -> int:
        return int(self.q.shape[0])

    def __getitem__(self, i):
        """``batch[b]``: target b's :class:`Result` (its time the batch's mean); ``batch[1:3]``,
        ``batch[batch.success]`` or ``batch[[0, 5]]``: a BatchResult of those targets (its time the
        batch's mean times their number)."""
        if isinstance(i, (slice, list, np.ndarray)):
            idx = np.arange(len(self))[i]  # (NumPy's rules: a bool mask of length B, integers, a slice)
            if idx.ndim != 1:
                raise TypeError(f"BatchResult indices: expected an integer, a slice, a list of integers or a "
                                f"bool mask of length {len(self)}, got {i!r:.100}")
            return BatchResult(self.q[idx], self.success[idx], self.status_code[idx], self.position_error[idx],
                               self.rotation_error[idx], self.iterations[idx], self.restarts[idx],
                               self.time * idx.size / max(len(self), 1), self.method,
                               None if self.collision is None else tuple(self.collision[int(k)] for k in idx))
        if isinstance(i, (bool, np.bool_)) or not isinstance(i, (int, np.integer)):
            raise TypeError(f"BatchResult indices: expected an integer, a slice, a list of integers or a bool mask, "
                            f"got {i!r:.100}")
        status = STATUS_CODES[int(self.status_code[i])]
        # the batch's one goal: met when the solve converged, or met closer than the margin (in_collision)
        info = {} if self.collision is None else {"collision": dict(self.collision[i])}
        return Result(self.q[i].copy(), bool(self.success[i]), status, float(self.position_error[i]),
                      float(self.rotation_error[i]), int(self.iterations[i]), int(self.restarts[i]),
                      self.time / max(len(self), 1), self.method, info=info,
                      goals_met=(status == Status.CONVERGED or status == Status.IN_COLLISION,))

    def __repr__(self) -> str:
        if not len(self):  # no success rate of nothing (NumPy's mean of it warns and gives nan)
            return f"BatchResult(B=0, time={self.time:.3f} s, method={self.method})"
        return (f"BatchResult(B={len(self)}, success={self.success.mean() * 100:.1f}%, "
                f"time={self.time:.3f} s, method={self.method})")
