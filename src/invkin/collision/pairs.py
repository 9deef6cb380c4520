"""Which link pairs are checked for self-collision: :func:`collision_pairs`.

With an SRDF (``load_robot(..., srdf=...)``, ``robot.disabled_collision_pairs``) every pair of links
that have collision shapes is checked except the SRDF's ``<disable_collisions>``. Without one, the
pairs are chosen as MoveIt's setup assistant does, from the capsules of ``robot.collision``:

* *adjacent*: a link and the nearest ancestor link that has shapes (the joint between them keeps
  their shapes touching);
* *default*: pairs in contact (signed distance < 0) at :meth:`Robot.neutral`;
* *always* / *never*: pairs in contact in every one / none of ``samples`` (10 000, MoveIt's
  default) configurations drawn uniformly inside the joint limits (seeded: the same robot gives
  the same pairs).

The result is computed once per Robot (``robot.memo``) and cached on disk beside the fitted meshes
(:func:`invkin.collision.model.cache_folder`), keyed by a SHA-256 of the capsules, the kinematic
tables, the limits, the sample count and the seed; sampling 10 000 configurations of a Panda
takes well under a second.
"""
from __future__ import annotations

import hashlib
import os

import numpy as np

from . import kernels as CK
from .model import cache_folder, collision_model, save_cached

__all__ = ["collision_pairs", "pair_names", "DEFAULT_SAMPLES"]

DEFAULT_SAMPLES = 10_000
_VERSION = 1


def _adjacent(robot, cm) -> set:
    have = {int(n): ell for ell, n in enumerate(cm.links)}
    parent = robot.node_table[:, 0]
    out = set()
    for ell, node in enumerate(cm.links):
        i = int(parent[node])
        while i >= 0 and i not in have:
            i = int(parent[i])
        if i >= 0:
            out.add((min(ell, have[i]), max(ell, have[i])))
    return out


def _in_contact(robot, cm, pairs, qs) -> np.ndarray:
    """(len(qs), P) bool: pairs in contact (d < 0) at each configuration."""
    hits = np.zeros((len(qs), len(pairs)), dtype=np.bool_)
    CK.contacts(robot.node_table, robot.node_params, robot.origin, np.ascontiguousarray(qs, dtype=np.float64),
                cm.links, cm.link_caps, cm.caps, cm.bounds, pairs, hits)
    return hits


def _compute(robot, samples, seed) -> np.ndarray:
    cm = collision_model(robot)
    L = len(cm.links)
    allp = [(a, b) for a in range(L) for b in range(a + 1, L)]
    srdf = robot.disabled_collision_pairs
    if srdf:
        idx = {n: ell for ell, n in enumerate(cm.link_names)}
        off = {tuple(sorted((idx[a], idx[b]))) for a, b in srdf if a in idx and b in idx}
        return np.array([p for p in allp if p not in off], dtype=np.int64).reshape(-1, 2)
    off = _adjacent(robot, cm)
    cand = np.array([p for p in allp if p not in off], dtype=np.int64).reshape(-1, 2)
    if len(cand) == 0:
        return cand
    default = _in_contact(robot, cm, cand, robot.neutral()[None])[0]
    qs = robot.sample(samples, rng=np.random.default_rng(seed))
    hits = _in_contact(robot, cm, cand, qs)
    count = hits.sum(axis=0)
    keep = ~default & (count > 0) & (count < samples)
    return cand[keep]


def _key(robot, samples, seed) -> str:
    cm = collision_model(robot)
    h = hashlib.sha256()
    for a in (cm.caps, cm.links, robot.node_table, robot.node_params, robot.origin, robot.lower, robot.upper):
        h.update(np.ascontiguousarray(a).tobytes())
    h.update(repr((cm.link_names, sorted(robot.disabled_collision_pairs), samples, seed, _VERSION)).encode())
    return h.hexdigest()[:32]


def collision_pairs(robot, samples: int = DEFAULT_SAMPLES, seed: int = 0) -> np.ndarray:
    """Link pairs checked for self-collision: (P, 2) int64, read-only, indices into
    ``robot.collision.link_names`` (first < second). See the module docstring."""
    def build():
        fn = os.path.join(cache_folder(), f"pairs-{_key(robot, samples, seed)}.npy")
        pairs = None
        if os.path.isfile(fn):
            try:
                pairs = np.load(fn)
                if pairs.ndim != 2 or pairs.shape[1] != 2:
                    pairs = None
            except (OSError, ValueError):
                pairs = None
        if pairs is None:
            pairs = _compute(robot, samples, seed)
            save_cached(fn, pairs)
        pairs = np.ascontiguousarray(pairs, dtype=np.int64)
        pairs.setflags(write=False)
        return pairs
    return robot.memo(("collision_pairs", samples, seed), build)


def pair_names(robot, pairs=None) -> tuple:
    """The pairs of :func:`collision_pairs` as link names ((link_a, link_b), ...)."""
    cm = collision_model(robot)
    pairs = collision_pairs(robot) if pairs is None else pairs
    return tuple((cm.link_names[a], cm.link_names[b]) for a, b in pairs)
