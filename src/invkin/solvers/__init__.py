"""The solver registry: one module per method, each registered by name.

A method supplies only its iteration; the driver in :mod:`invkin.solve` owns restarts,
tolerances, the time budget and the RNG. ``iterate(problem, q, max_iter, state, options)``
runs up to ``max_iter`` iterations on ``q`` in place and returns RUNNING, CONVERGED or STALLED
(:mod:`invkin.solvers._common`). ``state`` (8,) is zeroed by the driver at every attempt:
slot 1 = iterations (the method adds its own), 2 = position error, 3 = rotation error (the
method writes them); slots 0 and 4-7 belong to the method (lm uses 4 as its free/clamped flag,
which the driver sets for lm only). ``problem.scratch`` is a dict a method may use for
per-solve caches.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from ..errors import SolverError

__all__ = ["Method", "register", "get_method", "methods"]


@dataclass(frozen=True)
class Method:
    name: str
    iterate: Callable
    summary: str
    joint_types: tuple = ("revolute", "continuous", "prismatic", "ball")
    goal_kinds: tuple = ("position", "rotation", "axis", "aim")
    restarts: bool = True
    attempt_iterations: int | None = None  # restart an attempt not converged after this many
    check: Callable | None = field(default=None, repr=False)  # (problem) -> None, raises SolverError
    defaults: dict = field(default_factory=dict)


_REGISTRY: dict[str, Method] = {}
_LOADED = False


def register(method: Method) -> Method:
    _REGISTRY[method.name] = method
    return method


def _load_all():
    global _LOADED
    if _LOADED:
        return
    _LOADED = True
    import importlib

    from .._compile_clock import setup

    with setup():  # (~50 ms of imports on a first solve: not its time)
        for mod in ("lm_core", "jacobian", "gauss_seidel", "ccd", "fabrik", "analytic", "analytic_method"):
            try:
                importlib.import_module(f"{__name__}.{mod}")
            except ModuleNotFoundError as exc:  # a method module not written yet
                if exc.name != f"{__name__}.{mod}":
                    raise


def methods() -> list:
    """Names of every registered solver, sorted."""
    _load_all()
    return sorted(_REGISTRY)


def get_method(name) -> Method:
    _load_all()
    try:
        return _REGISTRY[name]
    except (KeyError, TypeError):
        raise SolverError(f"unknown method {name!r}; choose one of: {', '.join(methods())}") from None
