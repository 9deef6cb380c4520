"""Large IK jobs: million-pose datasets and reachability maps, on this machine or a Dask cluster.

    from invkin.jobs import solve_dataset, read_results, reachability_map

    summary = solve_dataset("panda", "targets.npz", "out/", frame="panda_hand", chunk_size=1000)
    res = read_results("out/")            # dict of arrays sorted by target index
    m = reachability_map("panda", "panda_hand", resolution=0.05, n_orientations=8)

Dask, pyarrow and matplotlib are optional (``pip install invkin[distributed]``, ``invkin[plot]``);
they are imported only when a job needs them. See docs/scaling.md.
"""
from __future__ import annotations

from .chunks import connect
from .dataset import JobSummary, solve_dataset
from .errors import JobError
from .parts import read_results
from .targets import Targets, load_targets
from .reachability import ReachabilityMap, reachability_map

__all__ = ["solve_dataset", "read_results", "load_targets", "Targets", "JobSummary", "JobError", "connect",
           "reachability_map", "ReachabilityMap"]
