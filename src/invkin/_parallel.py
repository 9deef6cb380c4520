"""Calls of invkin's ``parallel=True`` kernels that are safe from several Python threads at once.

Numba runs a ``prange`` loop on its threading layer: TBB or OpenMP, which are thread-safe, or its
own ``workqueue``, which is not: two Python threads that launch parallel kernels at the same time
make it print "Concurrent access has been detected" and abort the process (exit 134). workqueue is
the layer wherever neither TBB nor an OpenMP runtime is installed (macOS without libomp, for one),
so ``solve_many`` or a batched ``robot.fk`` from a thread pool killed the program there. Every
Python call of such a kernel goes through :func:`call`, which holds one process-wide lock until
Numba says the layer it picked is thread-safe (then it takes no lock). A parallel kernel uses every
core already, so the lock costs the threads little.
"""
from __future__ import annotations

import threading

__all__ = ["call"]

_LOCK = threading.Lock()
_SAFE = [False]  # the threading layer in use is thread-safe (tbb, omp): no lock needed


def call(kernel, *args):
    """``kernel(*args)`` for a ``parallel=True`` kernel, one at a time per process while the
    threading layer is workqueue or not chosen yet (no parallel launch so far)."""
    if _SAFE[0]:
        return kernel(*args)
    with _LOCK:
        out = kernel(*args)
        try:
            import numba

            _SAFE[0] = numba.threading_layer() in ("tbb", "omp")
        except ValueError:  # no parallel region launched yet (a call that ran on the interpreter)
            pass
        return out
