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

Every file is written to a temporary name in the folder and renamed (``os.replace``) once
complete; the manifest lists a part only after its rename, with the sha256 of its bytes. A
rerun verifies every listed part against its checksum and solves again only the chunks that are
missing, corrupt or unlisted (each chunk is written once per run, so every target index appears
exactly once in the finished folder).

Targets (:func:`load_targets`)
------------------------------
``.npz``: an array ``T`` (N, 4, 4) of poses, or ``p`` (N, 3) of positions [m] (position-only
goals); optional ``q0`` (N, dof) or (dof,) start configurations. The names ``T_goal`` and
``q_seed`` (the peers benchmark's target files) are accepted for ``T`` and ``q0``.

Parquet: either the 16 columns ``T00 … T33`` (row-major pose matrix, ``Tij`` = row i, column j;
the last row must be 0 0 0 1), or ``x, y, z`` [m] with optionally all four of ``qw, qx, qy, qz``
(orientation as a quaternion, normalised on load; without them the goals are position-only).
Optional column ``q0``: a list of dof start values per row. Numeric, no nulls; other columns are
ignored. The target index is the row number.

Results (Parquet parts, :func:`read_results`)
---------------------------------------------
``index`` int64 (the target's row), ``q`` fixed-size list<double>[dof] (joint order: the
manifest's ``robot.joint_names``), ``success`` bool, ``status`` string (``converged``,
``unreachable``, ``stalled``, …), ``position_error`` [m], ``rotation_error`` [rad] double,
``iterations``, ``restarts`` int64.
"""
from __future__ import annotations

import contextlib
import hashlib
import io
import json
import math
import os
import pickle
import sys
import threading
import time
import uuid
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..errors import InvkinError

__all__ = ["JobError", "JobSummary", "Targets", "load_targets", "solve_dataset", "read_results",
           "connect", "FORMAT", "MANIFEST"]

FORMAT = "invkin-dataset/1"
MANIFEST = "manifest.json"
PART_PREFIX = "part-"
PART_SUFFIX = ".parquet"
_TMP_MARK = ".tmp-"
_MANIFEST_INTERVAL = 1.0  # [s] between manifest rewrites while parts are being written
_T_COLUMNS = tuple(f"T{i}{j}" for i in range(4) for j in range(4))
_Q_COLUMNS = ("qw", "qx", "qy", "qz")


class JobError(InvkinError):
    """Bad job input: a targets file, an output folder, a scheduler address, a missing extra."""


def _require(module: str, extra: str = "distributed"):
    """Import an optional dependency, or say which extra installs it."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError:
        raise JobError(f"this feature needs the optional package {module.split('.')[0]!r}: "
                       f"pip install invkin[{extra}]") from None


def part_name(c: int) -> str:
    return f"{PART_PREFIX}{c:06d}{PART_SUFFIX}"


# ---------------------------------------------------------------------------- robots on workers


_ROBOT_CACHE: dict = {}
_ROBOT_LOCK = threading.Lock()
_KERNEL_LOCK = threading.Lock()  # one solve_many at a time per process: each one uses every core


def robot_spec(robot):
    """(Robot, spec): spec is a small picklable description a worker loads the robot from.

    A bundled name travels as the name, a URDF file as its text, anything else (a BVH file, a
    built or cut :class:`Robot`) as the pickled model (a few kB).
    """
    from ..model import Robot, load_robot

    if isinstance(robot, Robot):
        payload = pickle.dumps(robot, protocol=4)
        return robot, ("pickle", payload, hashlib.sha256(payload).hexdigest())
    if isinstance(robot, os.PathLike):
        robot = os.fspath(robot)
    if not isinstance(robot, str):
        raise JobError(f"robot: expected a Robot, a bundled name or a .urdf/.bvh path, got {robot!r:.200}")
    suffix = Path(robot).suffix.lower()
    if suffix in (".urdf", ".xml"):
        from ..model.urdf import load_urdf

        model = load_urdf(robot)  # validates the file (size cap, errors with line numbers)
        with open(robot, "rb") as f:
            text = f.read()
        return model, ("urdf", text, hashlib.sha256(text).hexdigest(), robot)
    model = load_robot(robot)
    if suffix == ".bvh" or "/" in robot or os.sep in robot:
        payload = pickle.dumps(model, protocol=4)
        return model, ("pickle", payload, hashlib.sha256(payload).hexdigest())
    return model, ("bundled", robot, "bundled:" + robot)


def robot_from_spec(spec):
    """The Robot a spec describes (cached per process: a worker loads each model once)."""
    key = spec[2]
    with _ROBOT_LOCK:
        r = _ROBOT_CACHE.get(key)
        if r is None:
            kind = spec[0]
            if kind == "bundled":
                from ..model import load_robot

                r = load_robot(spec[1])
            elif kind == "urdf":
                from ..model.urdf import parse_urdf

                r = parse_urdf(spec[1], source=spec[3])
            elif kind == "pickle":
                r = pickle.loads(spec[1])
            else:  # pragma: no cover - specs are built by robot_spec
                raise JobError(f"unknown robot spec kind {kind!r}")
            _ROBOT_CACHE[key] = r
    return r


def model_sha256(robot) -> str:
    """A digest of everything that changes the kinematics (names, tree, origins, axes, limits)."""
    h = hashlib.sha256()
    for nm in ("parent", "joint_type", "axis", "origin", "qidx", "multiplier", "offset", "lower", "upper"):
        h.update(np.ascontiguousarray(getattr(robot, nm)).tobytes())
    h.update("\0".join(robot.node_names).encode())
    h.update(b"\1" + "\0".join(robot.joint_names).encode())
    return h.hexdigest()


# ---------------------------------------------------------------------------- the chunk task


def manipulability(robot, frame, qs, position_only: bool) -> np.ndarray:
    """Yoshikawa's manipulability per configuration: the product of the singular values of J,
    i.e. sqrt(det(J Jᵀ)) (sqrt(det(Jᵀ J)) when the robot has fewer DOF than rows). Rows: the 3
    linear rows for position-only goals, all 6 otherwise."""
    from ..kinematics.kernels import jacobian_batch

    node = robot.frame_index(frame)
    qs = np.ascontiguousarray(qs, dtype=np.float64).reshape(-1, robot.dof)
    if qs.shape[0] == 0:
        return np.zeros(0)
    J = jacobian_batch(robot._ni, robot._nf, robot.origin, qs, node, robot.dof)
    if position_only:
        J = J[:, :3]
    if robot.dof >= J.shape[1]:
        d = np.linalg.det(np.einsum("bij,bkj->bik", J, J))  # J Jᵀ
    else:
        d = np.linalg.det(np.einsum("bji,bjk->bik", J, J))  # Jᵀ J
    return np.sqrt(np.maximum(d, 0.0))


def solve_chunk(spec, frame, X, q0, settings: dict, seed: int, with_manipulability: bool = False,
                robot=None) -> dict:
    """One chunk: :func:`invkin.solve_many` on targets ``X`` with ``seed``. Runs on a Dask worker
    (or in the driver for local runs); returns plain arrays."""
    from ..solve import solve_many

    if robot is None:
        robot = robot_from_spec(spec)
    with _KERNEL_LOCK:
        br = solve_many(robot, frame, X, q0=q0, method=settings["method"],
                        position_tolerance=settings["position_tolerance"],
                        rotation_tolerance=settings["rotation_tolerance"],
                        max_restarts=settings["max_restarts"], seed=seed, axes=settings["axes"])
        out = dict(q=br.q, success=br.success, status_code=br.status_code, position_error=br.position_error,
                   rotation_error=br.rotation_error, iterations=np.asarray(br.iterations, dtype=np.int64),
                   restarts=np.asarray(br.restarts, dtype=np.int64), time=br.time)
        if with_manipulability:
            out["manipulability"] = manipulability(robot, frame, br.q, np.asarray(X).ndim == 2)
    return out


# ---------------------------------------------------------------------------- Dask plumbing


def connect(scheduler: str, timeout: float = 5.0):
    """A ``dask.distributed.Client`` for ``tcp://host:port``, or a clear JobError within about
    ``timeout`` seconds when the scheduler cannot be reached."""
    distributed = _require("dask.distributed")
    if not isinstance(scheduler, str) or not scheduler.strip():
        raise JobError(f"scheduler: expected an address such as tcp://host:8786, got {scheduler!r}")
    try:
        return distributed.Client(scheduler, timeout=timeout, set_as_default=False)
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as e:  # OSError, TimeoutError, ValueError (bad address), protocol garbage
        msg = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise JobError(f"cannot reach the Dask scheduler at {scheduler!r} within {timeout:g} s: {msg}") from None


def _close_quietly(client, timeout) -> None:
    try:
        client.close(timeout=timeout)
    except Exception:  # pragma: no cover - best effort on the way out
        pass


def _n_threads(client) -> int:
    try:
        info = client.scheduler_info()
        workers = info.get("workers", {})
        return max(1, sum(int(w.get("nthreads", 1)) for w in workers.values()))
    except Exception:  # pragma: no cover - informational only
        return 1


def run_chunks(robot, spec, frame, X, q0, settings: dict, chunks, client, on_result, *, seed: int,
               with_manipulability=False, max_in_flight=None, progress=None):
    """Solve ``chunks`` [(c, start, stop)] locally (client None) or on Dask; call
    ``on_result(c, arrays)`` in the driver once per chunk, in completion order.

    Dask: at most ``max_in_flight`` chunks are submitted at a time (default 3 per worker thread,
    at least 4), so the driver and the scheduler hold a bounded amount of target data whatever
    N is; finished futures come back through ``as_completed`` and a chunk whose worker died is
    recomputed by Dask. A chunk reported twice is handled once.
    """
    done = set()

    def handle(c, res):
        if c in done:
            return
        done.add(c)
        on_result(c, res)
        if progress is not None:
            progress.update(int(res["success"].shape[0]))

    def q0_of(a, b):
        return None if q0 is None else (q0 if q0.ndim == 1 else q0[a:b])

    if client is None:
        for c, a, b in chunks:
            handle(c, solve_chunk(spec, frame, X[a:b], q0_of(a, b), settings, seed + a, with_manipulability,
                                  robot=robot))
        return
    distributed = _require("dask.distributed")
    window = int(max_in_flight) if max_in_flight else max(4, 3 * _n_threads(client))
    token = uuid.uuid4().hex[:8]
    todo = iter(chunks)
    live = {}

    def submit_next():
        try:
            c, a, b = next(todo)
        except StopIteration:
            return None
        q0c = q0_of(a, b)
        f = client.submit(solve_chunk, spec, frame, X[a:b], q0c, settings, seed + a, with_manipulability,
                          key=f"invkin-chunk-{token}-{c:06d}", pure=False, retries=2)
        live[f.key] = (c, f)
        return f

    first = [f for f in (submit_next() for _ in range(window)) if f is not None]
    ac = distributed.as_completed(first, loop=client.loop, with_results=True, raise_errors=False)
    try:
        for fut, res in ac:
            entry = live.pop(fut.key, None)
            if entry is None:  # pragma: no cover - as_completed reports each future once
                continue
            c = entry[0]
            if fut.status == "error" or isinstance(res, BaseException):
                exc = res if isinstance(res, BaseException) else fut.exception()
                if isinstance(exc, InvkinError):
                    raise exc
                raise JobError(f"chunk {c}: the Dask task failed: {type(exc).__name__}: {exc}") from None
            handle(c, res)
            nxt = submit_next()
            if nxt is not None:
                ac.add(nxt)
    finally:
        if live:
            try:
                client.cancel([f for _, f in live.values()])
            except Exception:  # pragma: no cover - best effort on the way out
                pass


# ---------------------------------------------------------------------------- targets


@dataclass(frozen=True)
class Targets:
    """Validated targets: ``X`` (N, 4, 4) poses or (N, 3) positions [m]; ``q0`` None, (dof,) or
    (N, dof)."""

    X: np.ndarray
    q0: np.ndarray | None = None
    source: str = "<array>"

    @property
    def n(self) -> int:
        return int(self.X.shape[0])

    @property
    def kind(self) -> str:
        return "position" if self.X.ndim == 2 else "pose"

    def sha256(self) -> str:
        h = hashlib.sha256(self.kind.encode())
        h.update(np.ascontiguousarray(self.X, dtype=np.float64).tobytes())
        if self.q0 is not None:
            h.update(b"q0" + str(self.q0.shape).encode())
            h.update(np.ascontiguousarray(self.q0, dtype=np.float64).tobytes())
        return h.hexdigest()


def _check_X(X, what: str) -> np.ndarray:
    try:
        X = np.asarray(X)
    except Exception:
        raise JobError(f"{what}: expected a numeric array") from None
    if X.dtype.kind not in "fiu":
        raise JobError(f"{what}: expected numbers, got dtype {X.dtype}")
    X = np.ascontiguousarray(X, dtype=np.float64)
    if not ((X.ndim == 3 and X.shape[1:] == (4, 4)) or (X.ndim == 2 and X.shape[1] == 3)):
        raise JobError(f"{what}: expected shape (N, 4, 4) poses or (N, 3) positions, got {X.shape}")
    if X.shape[0] == 0:
        raise JobError(f"{what}: no targets (N = 0)")
    flat = X.reshape(X.shape[0], -1)
    finite = np.isfinite(flat).all(axis=1)
    if not finite.all():
        bad = int(np.argmin(finite))
        raise JobError(f"{what}: target {bad} holds NaN or inf: {X[bad].tolist()}")
    if X.ndim == 3:
        R = X[:, :3, :3]
        drift = np.abs(np.einsum("bki,bkj->bij", R, R) - np.eye(3)).max(axis=(1, 2))
        det = np.linalg.det(R)
        bad = np.nonzero((drift > 1e-3) | (det <= 0) | (np.abs(X[:, 3] - [0, 0, 0, 1]).max(axis=1) > 1e-9))[0]
        if bad.size:
            b = int(bad[0])
            raise JobError(f"{what}: target {b} is not a rigid transform (orthonormal rotation, det +1, "
                           f"last row 0 0 0 1): {X[b].tolist()}")
    return X


def _check_q0(q0, n: int, dof, what: str):
    if q0 is None:
        return None
    q0 = np.asarray(q0)
    if q0.dtype.kind not in "fiu":
        raise JobError(f"{what}: expected numbers, got dtype {q0.dtype}")
    q0 = np.ascontiguousarray(q0, dtype=np.float64)
    if dof is not None and not (q0.shape == (dof,) or q0.shape == (n, dof)):
        raise JobError(f"{what}: expected shape ({dof},) or ({n}, {dof}), got {q0.shape}")
    if dof is None and not (q0.ndim == 1 or (q0.ndim == 2 and q0.shape[0] == n)):
        raise JobError(f"{what}: expected shape (dof,) or ({n}, dof), got {q0.shape}")
    if not np.isfinite(q0).all():
        raise JobError(f"{what}: holds NaN or inf")
    return q0


def _quat_to_matrices(qw, qx, qy, qz, what):
    qn = np.stack([qw, qx, qy, qz], axis=1)
    n = np.linalg.norm(qn, axis=1)
    if np.any(n < 1e-9):
        bad = int(np.argmax(n < 1e-9))
        raise JobError(f"{what}: row {bad} has a zero quaternion (qw, qx, qy, qz) = {qn[bad].tolist()}")
    w, x, y, z = (qn / n[:, None]).T
    R = np.empty((qn.shape[0], 3, 3))
    R[:, 0, 0] = 1 - 2 * (y * y + z * z)
    R[:, 0, 1] = 2 * (x * y - w * z)
    R[:, 0, 2] = 2 * (x * z + w * y)
    R[:, 1, 0] = 2 * (x * y + w * z)
    R[:, 1, 1] = 1 - 2 * (x * x + z * z)
    R[:, 1, 2] = 2 * (y * z - w * x)
    R[:, 2, 0] = 2 * (x * z - w * y)
    R[:, 2, 1] = 2 * (y * z + w * x)
    R[:, 2, 2] = 1 - 2 * (x * x + y * y)
    return R


def _load_npz(path: str):
    try:
        with np.load(path, allow_pickle=False) as z:
            arrays = {k: z[k] for k in z.files}
    except FileNotFoundError:
        raise JobError(f"{path}: no such targets file") from None
    except IsADirectoryError:
        raise JobError(f"{path}: is a directory; expected a .npz targets file") from None
    except (OSError, ValueError, EOFError, zipfile.BadZipFile, KeyError) as e:
        raise JobError(f"{path}: not a readable .npz archive ({type(e).__name__}: {e})") from None
    return arrays


def _from_mapping(arrays: dict, what: str, dof):
    names = sorted(arrays)
    T = arrays.get("T", arrays.get("T_goal"))
    p = arrays.get("p")
    if T is not None and p is not None:
        raise JobError(f"{what}: holds both 'T' (poses) and 'p' (positions); keep one")
    if T is None and p is None:
        raise JobError(f"{what}: expected an array 'T' (N, 4, 4) of poses or 'p' (N, 3) of positions "
                       f"(optional 'q0'); found {names}")
    key = "T" if "T" in arrays else "T_goal" if T is not None else "p"
    X = np.asarray(T if T is not None else p)
    if key != "p" and not (X.ndim == 3 and X.shape[1:] == (4, 4)):
        raise JobError(f"{what}: array {key!r} must have shape (N, 4, 4), got {X.shape}")
    if key == "p" and not (X.ndim == 2 and X.shape[1] == 3):
        raise JobError(f"{what}: array 'p' must have shape (N, 3), got {X.shape}")
    X = _check_X(X, f"{what}[{key!r}]")
    qk = "q0" if "q0" in arrays else "q_seed" if "q_seed" in arrays else None
    q0 = _check_q0(arrays[qk], X.shape[0], dof, f"{what}[{qk!r}]") if qk else None
    return X, q0


def _load_parquet(path: str, dof):
    pa = _require("pyarrow")
    pq = _require("pyarrow.parquet")
    if not os.path.exists(path):
        raise JobError(f"{path}: no such targets file")
    if os.path.isdir(path):
        raise JobError(f"{path}: is a directory; expected a .parquet targets file")
    try:
        table = pq.read_table(path)
    except (pa.ArrowException, OSError, ValueError) as e:
        raise JobError(f"{path}: not a readable Parquet file ({type(e).__name__}: {str(e).splitlines()[0]})") \
            from None
    cols = table.column_names

    def col(name):
        c = table.column(name)
        if not (pa.types.is_floating(c.type) or pa.types.is_integer(c.type)):
            raise JobError(f"{path}: column {name!r} must be numeric, got {c.type}")
        if c.null_count:
            raise JobError(f"{path}: column {name!r} has {c.null_count} null value(s)")
        return np.asarray(c.to_numpy(), dtype=np.float64)

    if table.num_rows == 0:
        raise JobError(f"{path}: no rows")
    has_T = [c for c in _T_COLUMNS if c in cols]
    if has_T:
        missing = [c for c in _T_COLUMNS if c not in cols]
        if missing:
            raise JobError(f"{path}: pose columns T00..T33 are incomplete; missing {missing}")
        X = np.stack([col(c) for c in _T_COLUMNS], axis=1).reshape(-1, 4, 4)
    elif all(c in cols for c in "xyz"):
        p = np.stack([col(c) for c in "xyz"], axis=1)
        have_q = [c for c in _Q_COLUMNS if c in cols]
        if have_q and len(have_q) != 4:
            raise JobError(f"{path}: quaternion columns must be all of qw, qx, qy, qz; found only {have_q}")
        if have_q:
            qs = [col(c) for c in _Q_COLUMNS]
            if not all(np.isfinite(v).all() for v in qs):
                raise JobError(f"{path}: quaternion columns hold NaN or inf")
            X = np.zeros((p.shape[0], 4, 4))
            X[:, :3, :3] = _quat_to_matrices(*qs, what=path)
            X[:, :3, 3] = p
            X[:, 3, 3] = 1.0
        else:
            X = p
    else:
        raise JobError(f"{path}: expected columns T00..T33 (row-major pose) or x, y, z [+ qw, qx, qy, qz]; "
                       f"found {cols}")
    X = _check_X(X, path)
    q0 = None
    if "q0" in cols:
        c = table.column("q0")
        if not (pa.types.is_list(c.type) or pa.types.is_fixed_size_list(c.type) or pa.types.is_large_list(c.type)):
            raise JobError(f"{path}: column 'q0' must be a list of {dof or 'dof'} numbers per row, got {c.type}")
        try:
            q0 = np.array(c.to_pylist(), dtype=np.float64)
        except (TypeError, ValueError):
            raise JobError(f"{path}: column 'q0' must hold the same number of values on every row, no nulls") \
                from None
        q0 = _check_q0(q0, X.shape[0], dof, f"{path}: column 'q0'")
        if q0.ndim != 2:
            raise JobError(f"{path}: column 'q0' must hold one list per row")
    return X, q0


def load_targets(source, dof: int | None = None) -> Targets:
    """Targets from a ``.npz`` or ``.parquet`` file (see the module docstring for the names), an
    array (N, 4, 4) / (N, 3), a mapping of arrays like the ``.npz``, or a :class:`Targets`."""
    if isinstance(source, Targets):
        _check_q0(source.q0, source.n, dof, "q0")
        return source
    if isinstance(source, np.ndarray):
        return Targets(_check_X(source, "targets"), None, "<array>")
    if isinstance(source, dict):
        X, q0 = _from_mapping(source, "targets", dof)
        return Targets(X, q0, "<mapping>")
    if isinstance(source, os.PathLike):
        source = os.fspath(source)
    if not isinstance(source, str):
        raise JobError(f"targets: expected a .npz/.parquet path, an array or a Targets, got {source!r:.200}")
    suffix = Path(source).suffix.lower()
    if suffix == ".npz":
        X, q0 = _from_mapping(_load_npz(source), source, dof)
    elif suffix in (".parquet", ".pq"):
        X, q0 = _load_parquet(source, dof)
    else:
        if not os.path.exists(source):
            raise JobError(f"{source}: no such targets file")
        raise JobError(f"{source}: unsupported targets file type {suffix or '(none)'!r}; expected .npz or .parquet")
    return Targets(X, q0, os.path.abspath(source))


# ---------------------------------------------------------------------------- files


def _fsync_dir(path: str) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:  # pragma: no cover - platforms without directory fds
        return
    try:
        os.fsync(fd)
    except OSError:  # pragma: no cover
        pass
    finally:
        os.close(fd)


def atomic_write(path: str, data: bytes, durable: bool = True) -> None:
    """Write ``data`` to a temporary name beside ``path`` and rename it over ``path``.

    ``durable``: fsync the file and the folder too (the manifest). Parts skip it: a part torn by a
    power cut fails its manifest checksum on the next run and is solved again."""
    d, name = os.path.split(os.path.abspath(path))
    tmp = os.path.join(d, f".{name}{_TMP_MARK}{os.getpid()}-{uuid.uuid4().hex[:8]}")
    try:
        with open(tmp, "wb") as f:
            f.write(data)
            if durable:
                f.flush()
                os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    if durable:
        _fsync_dir(d)


def _sha256_file(path: str) -> tuple[str, int]:
    h = hashlib.sha256()
    n = 0
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
            n += len(block)
    return h.hexdigest(), n


def _part_bytes(c: int, a: int, res: dict, job_id: str, dof: int) -> bytes:
    pa = _require("pyarrow")
    pq = _require("pyarrow.parquet")
    from ..result import STATUS_CODES

    n = int(res["success"].shape[0])
    names = np.array([s.value for s in STATUS_CODES], dtype=object)
    q = np.ascontiguousarray(res["q"], dtype=np.float64).reshape(n, dof)
    table = pa.table({
        "index": pa.array(np.arange(a, a + n, dtype=np.int64)),
        "q": pa.FixedSizeListArray.from_arrays(pa.array(q.ravel()), dof),
        "success": pa.array(np.asarray(res["success"], dtype=bool)),
        "status": pa.array(names[np.asarray(res["status_code"], dtype=np.int64)].tolist(), type=pa.string()),
        "position_error": pa.array(np.asarray(res["position_error"], dtype=np.float64)),
        "rotation_error": pa.array(np.asarray(res["rotation_error"], dtype=np.float64)),
        "iterations": pa.array(np.asarray(res["iterations"], dtype=np.int64)),
        "restarts": pa.array(np.asarray(res["restarts"], dtype=np.int64)),
    }, metadata={b"invkin.job_id": job_id.encode(), b"invkin.chunk": str(c).encode(),
                 b"invkin.format": FORMAT.encode()})
    sink = io.BytesIO()
    pq.write_table(table, sink)
    return sink.getvalue()


def _read_manifest(out: str):
    path = os.path.join(out, MANIFEST)
    if not os.path.exists(path):
        return None
    try:
        with open(path, encoding="utf-8") as f:
            m = json.load(f)
        if not isinstance(m, dict) or m.get("format") != FORMAT or not isinstance(m.get("parts"), dict):
            raise ValueError("not an invkin job manifest")
        return m
    except (OSError, ValueError, UnicodeDecodeError) as e:
        raise JobError(f"{path}: unreadable job manifest ({e}); pass --overwrite (overwrite=True) to start "
                       f"the job again in this folder") from None


def _our_files(out: str):
    """Files of a job in ``out``: parts, the manifest, leftover temporaries."""
    parts, tmps = [], []
    for name in os.listdir(out):
        if _TMP_MARK in name and (name.startswith("." + PART_PREFIX) or name.startswith("." + MANIFEST)):
            tmps.append(name)
        elif name.startswith(PART_PREFIX) and name.endswith(PART_SUFFIX):
            parts.append(name)
    return parts, tmps


def _prepare_out(out: str, job_id: str, overwrite: bool, describe: str) -> dict:
    """Create or check ``out``; return the verified part entries of this job already there."""
    if os.path.exists(out) and not os.path.isdir(out):
        raise JobError(f"{out}: exists and is not a folder")
    os.makedirs(out, exist_ok=True)
    parts, tmps = _our_files(out)
    for t in tmps:  # a previous run died mid-write: its temporaries are garbage
        try:
            os.unlink(os.path.join(out, t))
        except OSError:
            pass
    manifest = None if overwrite else _read_manifest(out)
    if overwrite:
        for p in parts + ([MANIFEST] if os.path.exists(os.path.join(out, MANIFEST)) else []):
            os.unlink(os.path.join(out, p))
        return {}
    if manifest is None:
        if parts:
            raise JobError(f"{out}: holds {len(parts)} part file(s) but no {MANIFEST}; they belong to an "
                           f"unknown job. Pass --overwrite (overwrite=True) to replace them, or choose "
                           f"another folder")
        return {}
    if manifest.get("job_id") != job_id:
        other = manifest.get("job_id", "?")
        raise JobError(f"{out}: holds the parts of another job ({other}: {manifest.get('describe', '?')}); "
                       f"this job is {job_id} ({describe}). Pass --overwrite (overwrite=True) to replace "
                       f"them, or choose another folder")
    good = {}
    for key, e in manifest["parts"].items():
        try:
            path = os.path.join(out, e["file"])
            if os.path.basename(e["file"]) != e["file"] or not os.path.isfile(path):
                continue
            if os.path.getsize(path) != int(e["bytes"]):
                continue
            if _sha256_file(path)[0] != e["sha256"]:
                continue
            good[str(int(key))] = e
        except (KeyError, TypeError, ValueError, OSError):
            continue
    return good


# ---------------------------------------------------------------------------- the job


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
        goals_source: a ``.npz``/``.parquet`` file, an array or a :class:`Targets` (see the
            module docstring for the array and column names).
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
    _require("pyarrow")
    _require("pyarrow.parquet")
    t_start = time.perf_counter()
    model, spec = robot_spec(robot)
    if frame is None:
        frame = model.node_names[-1]
    frame = model.node_names[model.frame_index(frame)]
    targets = load_targets(goals_source, model.dof)
    settings, chunk_size, seed = _check_settings(chunk_size, max_restarts, seed, position_tolerance,
                                                 rotation_tolerance, method, axes)
    if client is not None and scheduler is not None:
        raise JobError("give either client or scheduler, not both")
    out = os.path.abspath(os.fspath(out))
    N = targets.n
    P = -(-N // chunk_size)
    ident = {"format": FORMAT, "robot_model_sha256": model_sha256(model), "frame": frame,
             "targets_sha256": targets.sha256(), "n_targets": N, "kind": targets.kind,
             "settings": {**settings, "seed": seed, "chunk_size": chunk_size}}
    job_id = hashlib.sha256(json.dumps(ident, sort_keys=True).encode()).hexdigest()[:16]
    describe = f"robot {model.name!r}, frame {frame!r}, {N} {targets.kind} targets, seed {seed}, chunk {chunk_size}"
    with contextlib.ExitStack() as stack:
        if scheduler is not None:  # before touching the folder: an unreachable scheduler changes nothing
            client = connect(scheduler, connect_timeout)
            stack.callback(_close_quietly, client, connect_timeout)
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


def read_results(out, *, as_table: bool = False, verify: bool = True, allow_partial: bool = False):
    """The results of a job folder, sorted by target index.

    Returns a dict of arrays: ``index`` (N,), ``q`` (N, dof), ``success``, ``status`` (str),
    ``position_error``, ``rotation_error``, ``iterations``, ``restarts``, and ``joint_names``
    (a tuple); or, with ``as_table=True``, one ``pyarrow.Table`` with the part schema.
    ``verify`` checks each part against the manifest's sha256. An unfinished job is an error
    unless ``allow_partial``.
    """
    pa = _require("pyarrow")
    pq = _require("pyarrow.parquet")
    out = os.path.abspath(os.fspath(out))
    if not os.path.isdir(out):
        raise JobError(f"{out}: no such job folder")
    m = _read_manifest(out)
    if m is None:
        raise JobError(f"{out}: no {MANIFEST}; not an invkin job folder")
    parts = sorted(((int(k), e) for k, e in m["parts"].items()), key=lambda t: t[0])
    if not m.get("complete") and not allow_partial:
        raise JobError(f"{out}: job {m['job_id']} is unfinished ({len(parts)} of {m['n_parts']} parts); "
                       f"rerun the same command to finish it, or pass allow_partial=True")
    tables = []
    for c, e in parts:
        path = os.path.join(out, e["file"])
        if verify:
            try:
                sha, n = _sha256_file(path)
            except OSError as err:
                raise JobError(f"{path}: cannot read part {c}: {err}") from None
            if sha != e["sha256"]:
                raise JobError(f"{path}: part {c} does not match its manifest checksum; rerun the job to redo it")
        try:
            tables.append(pq.read_table(path))
        except (pa.ArrowException, OSError) as err:
            raise JobError(f"{path}: unreadable part {c}: {err}") from None
    dof = int(m["robot"]["dof"])
    if tables:
        table = pa.concat_tables(tables)
    else:
        table = pa.table({"index": pa.array([], pa.int64()),
                          "q": pa.FixedSizeListArray.from_arrays(pa.array([], pa.float64()), dof)})
    idx = np.asarray(table.column("index").to_numpy())
    order = np.argsort(idx, kind="stable")
    if not np.array_equal(order, np.arange(order.size)):
        table = table.take(pa.array(order))
        idx = idx[order]
    if as_table:
        return table
    if table.num_rows == 0:
        q = np.zeros((0, dof))
    else:
        q = np.asarray(table.column("q").combine_chunks().flatten().to_numpy()).reshape(-1, dof)
    res = {"index": idx, "q": q}
    for nm in ("success", "position_error", "rotation_error", "iterations", "restarts"):
        res[nm] = np.asarray(table.column(nm).to_numpy(zero_copy_only=False)) if table.num_rows else np.zeros(0)
    res["status"] = np.array(table.column("status").to_pylist() if table.num_rows else [], dtype=str)
    res["joint_names"] = tuple(m["robot"]["joint_names"])
    return res
