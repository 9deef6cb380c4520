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
tables, the limits, the sample count and the seed. The sampling runs in NumPy over the samples
(no kernel to compile on a first use): 10 000 configurations of G1 (30 links, 435 candidate
pairs) take ~0.4 s, of a Panda ~0.1 s.
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
_HITS_BYTES = 1 << 28  # [bytes] of contact booleans held at once while sampling
_NUMPY_CHUNK = 2000  # samples per pass of _in_contact_numpy


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
    """(len(qs), P) bool: pairs in contact (d < 0) at each configuration: in NumPy
    (:func:`_in_contact_numpy`; G1's 10 000 samples 0.4 s, where the contacts kernel took 0.1 s
    after 2.7-5 s of compile in the calling process on a first use), or the kernel for a robot
    with ball joints other than a floating base's."""
    qs = np.ascontiguousarray(qs, dtype=np.float64)
    if _numpy_ok(robot):
        return _in_contact_numpy(robot, cm, pairs, qs)
    hits = np.zeros((len(qs), len(pairs)), dtype=np.bool_)
    CK.contacts(robot.node_table, robot.node_params, robot.origin, qs, cm.links, cm.link_caps, cm.caps, cm.bounds,
                pairs, hits)
    return hits


def _numpy_ok(robot) -> bool:
    """Whether :func:`_in_contact_numpy` applies: every ball joint is the floating base's."""
    return set(robot.ball_starts.tolist()) <= set(robot.base_dofs.tolist())


def _in_contact_numpy(robot, cm, pairs, qs, chunk=_NUMPY_CHUNK) -> np.ndarray:
    """_in_contact in NumPy, the samples on the last axis: the FK and the capsules in the world are
    the kernels' own code run elementwise (invkin._tiers.vectorized: their branches read only the
    robot's tables), the capsule distances :func:`_segment_gaps`. A floating base stays at the
    origin (its joints fixed: a pose of the whole robot moves no self pair, and its ball joint's
    exponential branches on the angle); no other ball joint (:func:`_numpy_ok`). Pairs whose
    bounding spheres do not meet are not in contact, as in the kernel."""
    from .._tiers import interpreted, vectorized
    from ..kinematics.kernels import FIXED, fk_upto_into

    fk = vectorized(fk_upto_into)
    to_world = interpreted(CK.world_capsules)
    ni = robot.node_table
    if robot.floating:
        ni = ni.copy()
        base = np.isin(ni[:, 2], robot.base_dofs)
        ni[base, 1], ni[base, 2] = FIXED, -1
    n = ni.shape[0]
    hits = np.zeros((len(qs), len(pairs)), dtype=np.bool_)
    lc = cm.link_caps
    for k0 in range(0, len(qs), chunk):
        q = np.ascontiguousarray(qs[k0:k0 + chunk].T)
        B = q.shape[1]
        Tall = np.empty((n, 4, 4, B))
        fk(ni, robot.node_params, robot.origin, q, n - 1, Tall)
        wcaps = np.empty(cm.caps.shape + (B,))
        wb = np.empty(cm.bounds.shape + (B,))
        to_world(Tall, cm.links, lc, cm.caps, cm.bounds, wcaps, wb)
        for p, (la, lb) in enumerate(pairs):
            near = np.linalg.norm(wb[la, :3] - wb[lb, :3], axis=0) - wb[la, 3] - wb[lb, 3] <= 0.0
            if not near.any():
                continue
            idx = np.nonzero(near)[0]
            d = np.full(idx.shape, np.inf)
            for i in range(lc[la], lc[la + 1]):
                for j in range(lc[lb], lc[lb + 1]):
                    d = np.minimum(d, _segment_gaps(wcaps[i, :, idx].T, wcaps[j, :, idx].T))
            hits[k0 + idx, p] = d < 0.0
    return hits


def _segment_gaps(c1, c2) -> np.ndarray:
    """Signed distances of capsule pairs (7, B) each (a, b, r in the world): kernels.segment_closest
    and capsule_capsule's distance, elementwise (the same steps and the same degenerate cases)."""
    eps = CK._EPS
    d1, d2, r = c1[3:6] - c1[:3], c2[3:6] - c2[:3], c1[:3] - c2[:3]
    a = np.einsum("ij,ij->j", d1, d1)
    e = np.einsum("ij,ij->j", d2, d2)
    f = np.einsum("ij,ij->j", d2, r)
    c = np.einsum("ij,ij->j", d1, r)
    b = np.einsum("ij,ij->j", d1, d2)
    pa, pe = a <= eps, e <= eps
    with np.errstate(divide="ignore", invalid="ignore"):
        denom = a * e - b * b
        s = np.where(denom > eps * a * e, np.clip((b * f - c * e) / denom, 0.0, 1.0), 0.0)
        t = (b * s + f) / e
        s = np.where(t < 0.0, np.clip(-c / a, 0.0, 1.0), np.where(t > 1.0, np.clip((b - c) / a, 0.0, 1.0), s))
        t = np.clip(t, 0.0, 1.0)
        # a point (a ≈ 0) and/or a point (e ≈ 0)
        s = np.where(pa, 0.0, np.where(pe, np.clip(-c / a, 0.0, 1.0), s))
        t = np.where(pe, 0.0, np.where(pa, np.clip(f / e, 0.0, 1.0), t))
    v = c2[:3] + t * d2 - (c1[:3] + s * d1)
    return np.sqrt(np.einsum("ij,ij->j", v, v)) - c1[6] - c2[6]


def _candidates(L: int, off) -> np.ndarray:
    """(P, 2) int64: every pair (a, b), a < b < L, not in ``off`` (pairs (a, b) with a < b), in
    row order (a, then b): one boolean (L, L) mask, not a Python list of L²/2 tuples."""
    mask = np.triu(np.ones((L, L), dtype=np.bool_), 1)
    if off:
        a, b = np.array(sorted(off), dtype=np.int64).reshape(-1, 2).T
        mask[a, b] = False
    return np.argwhere(mask).astype(np.int64).reshape(-1, 2)


def _contact_counts(robot, cm, pairs, qs) -> np.ndarray:
    """(P,) int64: at how many of the configurations ``qs`` each pair is in contact, the samples
    taken in chunks of at most _HITS_BYTES of (chunk, P) booleans (10 000 samples of a 400-link
    chain's 80 000 pairs were 0.8 GB at once, of 3,000 links' 4.5 million pairs 42 GiB)."""
    count = np.zeros(len(pairs), dtype=np.int64)
    step = max(1, _HITS_BYTES // max(1, len(pairs)))
    if step > _NUMPY_CHUNK:
        step -= step % _NUMPY_CHUNK  # whole chunks of _in_contact_numpy: its loop over the pairs runs once per chunk
    for k in range(0, len(qs), step):
        count += _in_contact(robot, cm, pairs, qs[k:k + step]).sum(axis=0)
    return count


def _compute(robot, samples, seed) -> np.ndarray:
    cm = collision_model(robot)
    L = len(cm.links)
    srdf = robot.disabled_collision_pairs
    if srdf:
        idx = {n: ell for ell, n in enumerate(cm.link_names)}
        off = {tuple(sorted((idx[a], idx[b]))) for a, b in srdf if a in idx and b in idx}
        return _candidates(L, {p for p in off if p[0] != p[1]})
    cand = _candidates(L, _adjacent(robot, cm))
    if len(cand) == 0:
        return cand
    default = _in_contact(robot, cm, cand, robot.neutral()[None])[0]
    rng = np.random.default_rng(seed)
    # (the NumPy sampling keeps a floating base at the origin: sample()'s moves of the base, the
    # last draws, integrated on SE(3) by a kernel, would only cost its compile; every other entry is
    # sample()'s own)
    qs = robot._sample_uniform(samples, rng) if _numpy_ok(robot) else robot.sample(samples, rng=rng)
    count = _contact_counts(robot, cm, cand, qs)
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
