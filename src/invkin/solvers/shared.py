"""What the rest of invkin uses from the solvers' kernels: their one public home.

The kernels live in the solvers' private modules (``_common``: the compiled goal table, its
residual/Jacobian and the manifold step; ``_iterate``: the accepted-trial bookkeeping;
``_linalg``: small dense linear algebra). The solve driver, diagnostics, motion, null-space
refinement and the tracker import them from here, so the private modules can be rearranged
without touching their callers.
"""
from __future__ import annotations

from ._common import (CONVERGED, RUNNING, STALLED, chol_solve, compile_problem, goal_errors,
                      posture_residual, step_and_clamp, task_eval)
from ._iterate import take_trial
from ._linalg import damped_normal_equations, residual_sqnorm, smallest_singular_value, sym_eigvals
from .lm import L_BALL
from .lm_core import _costs as row_costs
from .lm_core import (core_active_step, core_eval_rows, core_step_scratch, core_workspace, problem_errors,
                      problem_rows, step_into)

__all__ = ["CONVERGED", "RUNNING", "STALLED", "chol_solve", "compile_problem", "goal_errors", "problem_errors",
           "problem_rows",
           "posture_residual", "step_and_clamp", "task_eval", "take_trial", "damped_normal_equations",
           "residual_sqnorm", "smallest_singular_value", "sym_eigvals", "GEOMETRIC", "geometric_kernel",
           "project_cones_in_place", "cone_coverage",
           # the LM general core's step and rows, for kernels that iterate frame by frame (retarget)
           "L_BALL", "core_active_step", "core_eval_rows", "core_step_scratch", "core_workspace", "row_costs",
           "step_into"]

GEOMETRIC = ("ccd", "fabrik")


def cone_coverage(robot):
    """"" when the robot has no cone/twist limit, "kernel" when :func:`project_cones_in_place` covers
    every one, "python" when some joint needs :func:`invkin.model.limits.project_limits` (three
    channels not about ±x, ±y, ±z)."""
    lim = robot.extras.get("cone_limits") or {}
    if not lim:
        return ""
    from ..kinematics.kernels import BALL
    from ._twist import cone_groups_table

    groups, _ = cone_groups_table(robot)
    last = {int(g[2]) for g in groups}
    for f in lim:
        i = robot.frame_index(f)
        if not ((robot.joint_type[i] == BALL and robot.qidx[i] >= 0) or i in last):
            return "python"
    return "kernel"


def project_cones_in_place(robot, q) -> bool:
    """q (dof,) (in place) projected onto the robot's swing-cone/twist limits by the kernels
    (solvers/_twist.project_cones); True when it moved. Three-channel joints about other axes than
    ±x, ±y, ±z are not covered here (the result's projection in solve covers them)."""
    from ._twist import cone_groups_table, cone_rows, project_cones

    return project_cones(robot.node_table, robot.node_params, q, robot.lower, robot.upper, cone_rows(robot),
                         *cone_groups_table(robot))  # the methods whose sweeps run through geometric_kernel


def geometric_kernel(problem, method: str, options: dict):
    """(kernel, tail) of ``ccd`` or ``fabrik`` for ``problem`` after the method's goal checks and with
    its options validated: ``kernel(*problem.args, q, max_iter, state, *tail)`` runs its iterations
    (what the solve driver calls through the registry, for a caller that keeps ``tail``)."""
    from . import get_method

    m = get_method(method)
    unknown = set(options) - set(m.defaults)
    if unknown:
        from ..errors import SolverError
        raise SolverError(f"method {method!r} has no option(s) {sorted(unknown)}; its options: {sorted(m.defaults)}")
    if m.check is not None:
        m.check(problem)
    # what solve() refuses for these methods (solve._check_unused): its iterations would not use it
    given = {"posture": problem.w_posture > 0.0,
             "joint_weights": problem.joint_weights is not problem.robot.unit_weights}
    for what, reason in m.ignores.items():
        if given.get(what):
            from ..errors import SolverError
            raise SolverError(f"{'a Posture goal' if what == 'posture' else what}: method {method!r} does not use "
                              f"it ({reason})")
    if method == "ccd":
        from .ccd import kernel_call
    else:
        from .fabrik import kernel_call
    return kernel_call(problem, {**m.defaults, **options})
