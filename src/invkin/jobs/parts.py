"""A job folder on disk: Parquet parts, the manifest, checksums, atomic writes, reading results back.

Every file is written to a temporary name in the folder and renamed (:func:`atomic_write`); the
manifest lists a part with the sha256 of its bytes, which a rerun and :func:`read_results` check.

Results (Parquet parts, :func:`read_results`)
---------------------------------------------
``index`` int64 (the target's row), ``q`` fixed-size list<double>[dof] (joint order: the
manifest's ``robot.joint_names``), ``success`` bool, ``status`` string (``converged``,
``unreachable``, ``stalled``, …), ``position_error`` [m], ``rotation_error`` [rad] double,
``iterations``, ``restarts`` int64.
"""
from __future__ import annotations

import hashlib
import io
import json
import os
import uuid

import numpy as np

from .errors import JobError, _arrow

FORMAT = "invkin-dataset/1"
MANIFEST = "manifest.json"
PART_PREFIX = "part-"
PART_SUFFIX = ".parquet"
_TMP_MARK = ".tmp-"


def part_name(c: int) -> str:
    return f"{PART_PREFIX}{c:06d}{PART_SUFFIX}"


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
    pa, pq = _arrow()
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


def read_results(out, *, as_table: bool = False, verify: bool = True, allow_partial: bool = False):
    """The results of a job folder, sorted by target index.

    Returns a dict of arrays: ``index`` (N,), ``q`` (N, dof), ``success``, ``status`` (str),
    ``position_error``, ``rotation_error``, ``iterations``, ``restarts``, and ``joint_names``
    (a tuple); or, with ``as_table=True``, one ``pyarrow.Table`` with the part schema.
    ``verify`` checks each part against the manifest's sha256. An unfinished job is an error
    unless ``allow_partial``.
    """
    pa, pq = _arrow()
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
