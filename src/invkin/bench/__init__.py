"""Benchmarks of the IK methods (``invkin bench``; docs/benchmarks.md).

* :mod:`invkin.bench.accuracy` — Welman's comparison (1993, figures 4.4/4.5): time and iterations
  against the requested accuracy, and where the joint motion goes along the chain.
* :mod:`invkin.bench.suite` — the TRAC-IK protocol for every method on the six bundled fixed-base chains, with
  the peer libraries (``../shared/peers/bench_peers.py``) merged in when their venv is available.
* :mod:`invkin.bench.plots` — matplotlib figures (Agg), PNG and SVG.
"""
from __future__ import annotations

from ..lazy import lazy_exports

__getattr__, __dir__ = lazy_exports(__name__, {
    "run_accuracy": ".accuracy", "welman_chain": ".accuracy", "run_suite": ".suite", "run_peers": ".suite"})

__all__ = ["run_accuracy", "welman_chain", "run_suite", "run_peers"]


def seconds(s):
    """A wall time for a summary line: two significant digits below 10 s ("0.42 s", "3.1 s"),
    whole seconds above (a quick run read "in 0 s")."""
    return f"{s:.2g} s" if s < 10 else f"{s:.0f} s"
