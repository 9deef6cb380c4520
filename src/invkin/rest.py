"""Springhead's rest posture as two springs (SEEDS.md §3, 5.1): the blend of an IK result with it.

Its own module so that the solve driver (``solve(rest=...)``) and :mod:`invkin.motion`
(``solve_with_rest``, which calls the driver) both use it without importing each other.
"""
from __future__ import annotations

import numpy as np

from .errors import GoalError, SolverError
from .spatial import so3_exp, so3_log

__all__ = ["rest_blend", "RestPoseWarning", "check_springs"]


class RestPoseWarning(UserWarning):
    """The rest-posture blend pulled the configuration off the goals (p_orig ≫ p_ik)."""


def check_springs(name, v, strict):
    """``v`` as a float array of springs (> 0 when ``strict``) or dampers (>= 0); GoalError otherwise."""
    try:
        a = np.asarray(v, dtype=np.float64)
    except (TypeError, ValueError):
        raise GoalError(f"{name}: expected numbers, got {v!r:.200}") from None
    bad = ~np.isfinite(a) | ((a <= 0) if strict else (a < 0))
    if bad.any():
        first = a[bad].ravel()[0] if a.ndim else float(a)
        raise GoalError(f"{name}: expected finite values {'> 0' if strict else '>= 0'}, got {first!r}"
                        + (f" (in {a.tolist()})" if a.ndim else ""))
    return a


def rest_blend(theta_orig, theta_ik, p_orig, p_ik, d_orig=0.0, d_ik=0.0, *, robot=None):
    """Blend the IK result with the rest posture as two springs (SEEDS.md §3, 5.1) → (theta, p, d).

        θ_new = (p_orig θ_orig + p_ik θ_ik) / (p_orig + p_ik),  p_new = p_orig + p_ik,
        d_new = d_orig + d_ik.

    Every argument broadcasts (per joint or one value for all; a (B, dof) batch of angles works
    too); angles in [rad] or [m], springs p > 0, dampers d ≥ 0. With ``robot`` given, each ball
    joint (three entries of q) is blended on SO(3): ``R = R_orig exp(t log(R_origᵀ R_ik))`` with
    ``t = p_ik / (p_orig + p_ik)`` of its first entry. Springs ≤ 0, negative dampers and
    non-finite values raise GoalError. Scalars in, floats out; otherwise arrays of the broadcast shape.
    """
    to = _springs_angles("theta_orig", theta_orig)
    ti = _springs_angles("theta_ik", theta_ik)
    po = check_springs("p_orig", p_orig, True)
    pi = check_springs("p_ik", p_ik, True)
    do = check_springs("d_orig", d_orig, False)
    di = check_springs("d_ik", d_ik, False)
    try:
        to, ti, po, pi, do, di = np.broadcast_arrays(to, ti, po, pi, do, di)
    except ValueError:
        raise GoalError(f"rest_blend: shapes do not broadcast: theta_orig {np.shape(to)}, theta_ik "
                        f"{np.shape(ti)}, p_orig {np.shape(po)}, p_ik {np.shape(pi)}, d_orig {np.shape(do)}, "
                        f"d_ik {np.shape(di)}") from None
    p = po + pi
    theta = (po * to + pi * ti) / p
    d = do + di
    if robot is not None and robot.has_ball_joints:
        if theta.ndim == 0 or theta.shape[-1] != robot.dof:
            raise GoalError(f"rest_blend: expected angles of shape (..., {robot.dof}) for robot {robot.name!r}, "
                            f"got {theta.shape}")
        theta = theta.copy()
        flat_t, flat_o, flat_i = theta.reshape(-1, robot.dof), to.reshape(-1, robot.dof), ti.reshape(-1, robot.dof)
        flat_w = (pi / p).reshape(-1, robot.dof)
        for b in range(flat_t.shape[0]):
            for s in robot.ball_starts:
                Ro = so3_exp(flat_o[b, s:s + 3])
                Ri = so3_exp(flat_i[b, s:s + 3])
                flat_t[b, s:s + 3] = so3_log(Ro @ so3_exp(flat_w[b, s] * so3_log(Ro.T @ Ri)))
    if theta.ndim == 0:
        return float(theta), float(p), float(d)
    return theta, p, d


def _springs_angles(name, v):
    try:
        a = np.asarray(v, dtype=np.float64)
    except (TypeError, ValueError):
        raise GoalError(f"{name}: expected numbers, got {v!r:.200}") from None
    if not np.all(np.isfinite(a)):
        raise GoalError(f"{name}: expected finite values, got {a.tolist() if a.ndim else float(a)}")
    return a


#: Where :func:`solve_with_rest` and ``solve(rest=...)`` apply the springs.
REST_MODES = ("loop", "blend")


def rest_in_loop(method: str, rest_mode) -> bool:
    """True when the rest springs act inside the IK loop: ``rest_mode`` "loop" (Springhead's
    ``gauss-seidel`` only), "blend" (once after any method's solve) or None (loop for
    gauss-seidel, blend for the others)."""
    if rest_mode is None:
        return method == "gauss-seidel"
    if rest_mode not in REST_MODES:
        raise GoalError(f"rest mode: expected one of {', '.join(map(repr, REST_MODES))}, got {rest_mode!r}")
    if rest_mode == "loop" and method != "gauss-seidel":
        raise SolverError(f"rest springs inside the loop run with method 'gauss-seidel' (Springhead, SEEDS.md §3), "
                          f"got method {method!r}; use mode='blend' to blend another method's result once")
    return rest_mode == "loop"
