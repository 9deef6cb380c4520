"""The kernel side of the iterate contract (see :mod:`invkin.solvers`), written once.

Every iteration kernel ends a call the same way: an attempt still RUNNING whose errors are
within tolerance is CONVERGED, and the driver's slots of ``state`` get the call's iterations
(slot 1, added) and the errors at the returned q (slots 2, 3).
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
