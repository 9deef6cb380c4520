"""Large IK jobs: million-pose datasets and reachability maps, on this machine or a Dask cluster.

    from invkin.jobs import solve_dataset, read_results, reachability_map

    summary = solve_dataset("panda", "targets.npz", "out/", frame="panda_hand", chunk_size=1000)
    res = read_results("out/")            # dict of arrays sorted by target index
    m = reachability_map("panda", "panda_hand", resolution=0.05, n_orientations=8)

Dask, pyarrow and matplotlib are optional (``pip install invkin[distributed]``, ``invkin[plot]``);
they are imported only when a job needs them. See docs/scaling.md.
"""
from __future__ import annotations

from ..lazy import lazy_exports

__getattr__, __dir__ = lazy_exports(__name__, {
    "connect": ".chunks", "JobSummary": ".dataset", "solve_dataset": ".dataset", "JobError": ".errors",
    "read_results": ".parts", "Targets": ".targets", "load_targets": ".targets",
    "ReachabilityMap": ".reachability", "reachability_map": ".reachability"})

__all__ = ["solve_dataset", "read_results", "load_targets", "Targets", "JobSummary", "JobError", "connect",
           "reachability_map", "ReachabilityMap"]
