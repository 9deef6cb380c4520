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
from .lm_core import core_active_step, core_eval_rows, core_workspace, step_into

__all__ = ["CONVERGED", "RUNNING", "STALLED", "chol_solve", "compile_problem", "goal_errors",
           "posture_residual", "step_and_clamp", "task_eval", "take_trial", "damped_normal_equations",
           "residual_sqnorm", "smallest_singular_value", "sym_eigvals",
           # the LM general core's step and rows, for kernels that iterate frame by frame (retarget)
           "L_BALL", "core_active_step", "core_eval_rows", "core_workspace", "step_into"]
