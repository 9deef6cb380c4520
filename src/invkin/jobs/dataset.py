"""Large IK jobs: a target set split into chunks, solved on this machine or on a Dask cluster,
written as Parquet parts with a manifest; resumable and lossless.

Layout of an output folder::

    out/
      manifest.json          job id, robot, frame, settings, per-part sha256/bytes/rows, totals
      part-000000.parquet    rows [0, S) of the targets      (S = chunk_size)
      part-000001.parquet    rows [S, 2S)
      ...

Chunk ``c`` holds targets ``[c·S, min((c+1)·S, N))`` and is solved by one
:func:`invkin.solve_many` call with ``seed = job_seed + c·S``. ``solve_many`` seeds its item
``b`` with ``seed + b``, so target ``i`` is always solved with seed ``job_seed + i``: the results
do not depend on the chunk size, on the order in which chunks finish, on the number of Numba
threads or on which Dask worker ran the chunk. A local run and a Dask run are bit-identical.

Every file is written to a temporary name in the folder and renamed (:mod:`invkin._io`) once
complete; the manifest lists a part only after its rename, with the sha256 of its bytes. A
rerun verifies every listed part against its checksum and solves again only the chunks that are
missing, corrupt or unlisted (each chunk is written once per run, so every target index appears
exactly once in the finished folder).

Targets: :mod:`invkin.jobs.targets`; the folder, its parts and the results: :mod:`invkin.jobs.parts`;
the chunk task and the Dask loop: :mod:`invkin.jobs.chunks`.
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import sys
import time
from dataclasses import dataclass, field

import numpy as np

from .. import __version__
from .chunks import client_for, connect, model_sha256, robot_and_frame, run_chunks
from .errors import JobError, _arrow
from .parts import FORMAT, MANIFEST, _part_bytes, _prepare_out, atomic_write, part_name, read_results
from .targets import Targets, load_targets

__all__ = ["JobError", "JobSummary", "Targets", "load_targets", "solve_dataset", "read_results",
           "connect", "FORMAT", "MANIFEST"]

_MANIFEST_INTERVAL = 1.0  # [s] between manifest rewrites while parts are being written


@dataclass
class JobSummary:
    """What :func:`solve_dataset` did. ``poses_per_second`` counts the poses solved in this run."""

    job_id: str
    out: str
    n_targets: int
    n_parts: int
    parts_computed: int
    parts_skipped: int
    n_success: int
    status_counts: dict
    elapsed: float
    poses_per_second: float
    complete: bool
    manifest: dict = field(repr=False, default_factory=dict)

    def __str__(self) -> str:
        rate = f"{self.poses_per_second:,.0f} poses/s" if self.parts_computed else "nothing to solve"
        pct = 100.0 * self.n_success / max(self.n_targets, 1)
        return (f"job {self.job_id}: {self.n_targets} targets in {self.n_parts} parts "
                f"({self.parts_computed} solved now, {self.parts_skipped} already done); "
                f"success {self.n_success}/{self.n_targets} ({pct:.1f}%); {self.elapsed:.2f} s, {rate}; "
                f"results in {self.out}")


def _check_settings(chunk_size, max_restarts, seed, position_tolerance, rotation_tolerance, method, axes):
    def pos_int(name, v, lo):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < lo:
            raise JobError(f"{name}: expected an integer >= {lo}, got {v!r}")
        return int(v)

    chunk_size = pos_int("chunk_size", chunk_size, 1)
    max_restarts = pos_int("max_restarts", max_restarts, 0)
    from ..solve import MAX_RESTARTS

    if max_restarts > MAX_RESTARTS:  # solve_many's bound, checked before the folder is touched
        raise JobError(f"max_restarts: expected an integer in [0, {MAX_RESTARTS}], got {max_restarts}")
    seed = pos_int("seed", seed, 0)
    if seed >= 2**31:
        raise JobError(f"seed: expected an integer in [0, 2**31), got {seed}")
    for nm, v in (("position_tolerance", position_tolerance), ("rotation_tolerance", rotation_tolerance)):
        if isinstance(v, bool) or not isinstance(v, (int, float, np.floating, np.integer)) or not (0 < v < math.inf):
            raise JobError(f"{nm}: expected a finite number > 0, got {v!r}")
    from ..solvers import methods

    if method not in methods():
        raise JobError(f"method: unknown {method!r}; registered: {', '.join(methods())}")
    if axes not in ("xyz", "x", "y", "z"):
        raise JobError(f"axes: expected 'xyz', 'x', 'y' or 'z', got {axes!r}")
    return dict(method=str(method), position_tolerance=float(position_tolerance),
                rotation_tolerance=float(rotation_tolerance), max_restarts=max_restarts, axes=str(axes)), \
        chunk_size, seed


def _progress(total, initial, enabled, desc):
    if not enabled:
        return None
    try:
        from tqdm import tqdm
    except ImportError:
        return None
    return tqdm(total=total, initial=initial, unit="pose", desc=desc, file=sys.stderr,
                dynamic_ncols=True, smoothing=0.1)


def solve_dataset(robot, goals_source, out, frame: str | None = None, *, chunk_size: int = 1000, client=None,
                  scheduler: str | None = None, seed: int = 0, method: str = "lm",
                  position_tolerance: float = 1e-6, rotation_tolerance: float = 1e-6, max_restarts: int = 50,
                  axes: str = "xyz", overwrite: bool = False, progress: bool = True,
                  connect_timeout: float = 5.0, max_in_flight: int | None = None, _after_part=None) -> JobSummary:
    """Solve every target of ``goals_source`` for ``frame`` and write the results to ``out``.

    Args:
        robot: a bundled name, a ``.urdf``/``.bvh`` path or a :class:`Robot`.
        goals_source: a ``.npz``/``.parquet`` file, an array or a :class:`Targets` (see
            :mod:`invkin.jobs.targets` for the array and column names).
        out: the output folder (created; a rerun of the same job resumes in it).
        frame: the goal frame (default: the robot's last frame).
        chunk_size: targets per chunk (= per Parquet part, = per Dask task).
        client: a ``dask.distributed.Client``; or ``scheduler="tcp://host:port"`` to connect one
            (a clear error after ``connect_timeout`` seconds if it cannot be reached). Neither:
            solve here, one chunk at a time on all cores.
        seed: job seed; target i is solved with seed + i (results identical local or on Dask).
        method, position_tolerance, rotation_tolerance, max_restarts, axes: as
            :func:`invkin.solve_many` (only ``lm`` is deterministic: other methods run
            :func:`invkin.solve` under its time budget).
        overwrite: replace whatever job the folder holds (otherwise another job's folder is
            refused, and the same job resumes).
        progress: a tqdm bar on stderr (poses/s).
        max_in_flight: Dask chunks submitted at a time (default 3 per worker thread, >= 4).

    Returns a :class:`JobSummary`; the results are read back with :func:`read_results`.
    """
    _arrow()
    t_start = time.perf_counter()
    model, spec, _, frame = robot_and_frame(robot, frame)
    targets = load_targets(goals_source, model.dof)
    settings, chunk_size, seed = _check_settings(chunk_size, max_restarts, seed, position_tolerance,
                                                 rotation_tolerance, method, axes)
    if targets.kind == "position" and axes != "xyz":  # (solve_many refuses it: say so before any chunk runs)
        raise JobError(f"axes={axes!r}: the orientation axes of pose targets; {targets.source} holds positions")
    if client is not None and scheduler is not None:
        raise JobError("give either client or scheduler, not both")
    out = os.path.abspath(os.fspath(out))
    N = targets.n
    P = -(-N // chunk_size)
    ident = {"format": FORMAT, "invkin": __version__, "robot_model_sha256": model_sha256(model), "frame": frame,
             "targets_sha256": targets.sha256(), "n_targets": N, "kind": targets.kind,
             "settings": {**settings, "seed": seed, "chunk_size": chunk_size}}
    job_id = hashlib.sha256(json.dumps(ident, sort_keys=True).encode()).hexdigest()[:16]
    describe = f"robot {model.name!r}, frame {frame!r}, {N} {targets.kind} targets, seed {seed}, chunk {chunk_size}"
    with contextlib.ExitStack() as stack:
        # before touching the folder: an unreachable scheduler changes nothing
        client = client_for(stack, client, scheduler, connect_timeout)
        good = _prepare_out(out, job_id, overwrite, describe)
        manifest = {
            "format": FORMAT, "job_id": job_id, "describe": describe,
            "robot": {"name": model.name, "dof": model.dof, "joint_names": list(model.joint_names),
                      "source": spec[0] if spec[0] != "bundled" else spec[2],
                      "model_sha256": ident["robot_model_sha256"]},
            "frame": frame,
            "targets": {"source": targets.source, "kind": targets.kind, "count": N, "sha256": ident["targets_sha256"],
                        "has_q0": targets.q0 is not None},
            "settings": ident["settings"],
            "seed_rule": "chunk c solves targets [c*chunk_size, (c+1)*chunk_size) with solve_many seed = seed + "
                         "c*chunk_size, i.e. target i uses seed + i",
            "n_parts": P,
            "parts": dict(good),
            "complete": False,
        }
        status_names = None

        def totals():
            nonlocal status_names
            from ..result import STATUS_CODES

            if status_names is None:
                status_names = [s.value for s in STATUS_CODES]
            rows = sum(int(e["rows"]) for e in manifest["parts"].values())
            succ = sum(int(e["success"]) for e in manifest["parts"].values())
            counts = {}
            for e in manifest["parts"].values():
                for k, v in e.get("status_counts", {}).items():
                    counts[k] = counts.get(k, 0) + int(v)
            return {"rows": rows, "parts": len(manifest["parts"]), "success": succ, "status_counts": counts}

        def flush():
            manifest["totals"] = totals()
            manifest["complete"] = len(manifest["parts"]) == P and manifest["totals"]["rows"] == N
            manifest["updated"] = time.strftime("%Y-%m-%dT%H:%M:%S%z")
            atomic_write(os.path.join(out, MANIFEST), (json.dumps(manifest, indent=1) + "\n").encode())

        flush()
        chunks = [(c, c * chunk_size, min(N, (c + 1) * chunk_size)) for c in range(P)
                  if str(c) not in manifest["parts"]]
        skipped = P - len(chunks)
        computed = 0
        rows_now = 0
        last_flush = time.perf_counter()
        from ..result import STATUS_CODES

        def on_result(c, res):
            nonlocal computed, rows_now, last_flush
            a = c * chunk_size
            data = _part_bytes(c, a, res, job_id, model.dof)
            name = part_name(c)
            atomic_write(os.path.join(out, name), data, durable=False)
            codes, cnt = np.unique(np.asarray(res["status_code"], dtype=np.int64), return_counts=True)
            n = int(res["success"].shape[0])
            manifest["parts"][str(c)] = {
                "file": name, "rows": n, "start": a, "stop": a + n, "seed": seed + a, "bytes": len(data),
                "sha256": hashlib.sha256(data).hexdigest(), "success": int(np.count_nonzero(res["success"])),
                "status_counts": {STATUS_CODES[int(k)].value: int(v) for k, v in zip(codes, cnt)},
            }
            computed += 1
            rows_now += n
            now = time.perf_counter()
            if now - last_flush >= _MANIFEST_INTERVAL:
                flush()
                last_flush = now
            if _after_part is not None:
                _after_part(c)

        bar = _progress(N, N - sum(b - a for _, a, b in chunks), progress, f"invkin batch {job_id[:8]}")
        t_run = time.perf_counter()
        try:
            run_chunks(model, spec, frame, targets.X, targets.q0, settings, chunks, client, on_result, seed=seed,
                       max_in_flight=max_in_flight, progress=bar)
        finally:
            if bar is not None:
                bar.close()
            flush()
        run_s = time.perf_counter() - t_run
        tot = manifest["totals"]
        return JobSummary(job_id=job_id, out=out, n_targets=N, n_parts=P, parts_computed=computed,
                          parts_skipped=skipped, n_success=tot["success"], status_counts=tot["status_counts"],
                          elapsed=time.perf_counter() - t_start,
                          poses_per_second=rows_now / run_s if run_s > 0 else 0.0,
                          complete=manifest["complete"], manifest=manifest)
