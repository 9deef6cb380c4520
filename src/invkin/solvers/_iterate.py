"""What the iteration kernels share beyond linear algebra, written once.

* :func:`end_iterations`: the kernel side of the iterate contract (see :mod:`invkin.solvers`).
  Every iteration kernel ends a call the same way: an attempt still RUNNING whose errors are
  within tolerance is CONVERGED, and the driver's slots of ``state`` get the call's iterations
  (slot 1, added) and the errors at the returned q (slots 2, 3).
* :func:`take_trial`: an accepted trial point becomes the current one (its residual, Jacobian
  and errors from ``task_eval``).
"""
from __future__ import annotations

from numba import njit

from ._common import CONVERGED, RUNNING


@njit(cache=True)
def end_iterations(code, it, perr, rerr, tol_p, tol_r, state):
    """→ the code to return: CONVERGED for a RUNNING attempt with perr ≤ tol_p [m] and rerr ≤ tol_r
    [rad], else ``code``. Writes state[1] += it, state[2] = perr, state[3] = rerr."""
    if code == RUNNING and perr <= tol_p and rerr <= tol_r:
        code = CONVERGED
    state[1] += it
    state[2] = perr
    state[3] = rerr
    return code


@njit(cache=True)
def take_trial(e, J, errs, e2, J2, errs2):
    """e, J, errs[0:2] = e2, J2, errs2[0:2]: the trial's task_eval outputs become the current ones."""
    for k in range(e.shape[0]):
        e[k] = e2[k]
        for c in range(J.shape[1]):
            J[k, c] = J2[k, c]
    errs[0] = errs2[0]
    errs[1] = errs2[1]
