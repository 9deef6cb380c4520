"""Lazy package attributes (PEP 562): a package names what it exports, a module loads on first use.

``import invkin`` (and ``invkin.jobs``, ``invkin.bench``, ``invkin.viewer``) then costs
milliseconds, and a command line or a program pays only for the modules it touches.
"""
from __future__ import annotations

import importlib

__all__ = ["lazy_exports"]


def lazy_exports(package: str, where: dict):
    """``(__getattr__, __dir__)`` for ``package`` from ``{name: module}``.

    ``module`` is relative to the package (``".goals"``); ``None`` means the name is itself a
    submodule. A loaded name is stored in the package's namespace, so later lookups are plain.
    """
    def __getattr__(name: str):
        try:
            mod = where[name]
        except KeyError:
            raise AttributeError(f"module {package!r} has no attribute {name!r}") from None
        pkg = importlib.import_module(package)
        if mod is None:
            value = importlib.import_module(f".{name}", package)
        else:
            value = getattr(importlib.import_module(mod, package), name)
        setattr(pkg, name, value)
        return value

    def __dir__():
        return sorted(set(vars(importlib.import_module(package))) | set(where))

    return __getattr__, __dir__
