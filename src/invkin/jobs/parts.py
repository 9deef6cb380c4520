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

import numpy as np

from .._io import TMP_MARK
from .._io import atomic_write as _atomic_write
from ..errors import FileError
from .errors import JobError, _arrow

FORMAT = "invkin-dataset/1"
MANIFEST = "manifest.json"
PART_PREFIX = "part-"
PART_SUFFIX = ".parquet"
_TMP_MARK = TMP_MARK


def part_name(c: int) -> str:
    return f"{PART_PREFIX}{c:06d}{PART_SUFFIX}"


def atomic_write(path: str, data: bytes, durable: bool = True) -> None:
    """Write ``data`` to a temporary name beside ``path`` and rename it over ``path``
    (:func:`invkin._io.atomic_write`; a destination that is not a regular file is a JobError).

    ``durable``: fsync the file and the folder too (the manifest). Parts skip it: a part torn by a
    power cut fails its manifest checksum on the next run and is solved again."""
    try:
        _atomic_write(path, data, durable=durable)
    except FileError as e:
        raise JobError(str(e)) from None


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


def _part_file(out: str, name) -> str:
    """A part's file name from a manifest, if it is a plain name that stays inside ``out``."""
    if not isinstance(name, str) or not name or os.path.basename(name) != name or name in (".", "..") \
            or "\\" in name or "\0" in name:
        raise JobError(f"{out}: the manifest names a part file {name!r:.200}; expected a plain file name "
                       f"inside the job folder")
    real = os.path.realpath(os.path.join(out, name))
    if os.path.dirname(real) != os.path.realpath(out):
        raise JobError(f"{out}: part file {name!r} leads outside the job folder (to {real}); refused")
    return name


class _ForeignManifest(JobError):
    """``manifest.json`` in the folder is not an invkin job's: never replaced, even with overwrite."""


def _read_manifest(out: str):
    """The job manifest in ``out`` (None when there is none). A manifest.json that is not an invkin
    job manifest (another program's file) is a JobError that never suggests --overwrite: invkin
    does not delete it."""
    path = os.path.join(out, MANIFEST)
    if not os.path.exists(path):
        return None
    try:
        with open(path, encoding="utf-8") as f:
            m = json.load(f)
    except (OSError, ValueError, UnicodeDecodeError) as e:
        raise _ForeignManifest(f"{path}: not an invkin job manifest (unreadable: {e}); invkin will not replace it: "
                       f"choose another folder for the job, or remove the file yourself") from None
    if not isinstance(m, dict) or not str(m.get("format", "")).startswith("invkin-dataset/"):
        raise _ForeignManifest(f"{path}: not an invkin job manifest (another program's file?); invkin will not replace "
                       f"it: choose another folder for the job, or remove the file yourself")
    if m.get("format") != FORMAT or not isinstance(m.get("parts"), dict):
        raise JobError(f"{path}: unreadable job manifest (format {m.get('format')!r}, expected {FORMAT!r} with "
                       f"a 'parts' mapping); pass --overwrite (overwrite=True) to start the job again in this "
                       f"folder")
    return m


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
    try:
        os.makedirs(out, exist_ok=True)
    except NotADirectoryError:
        parent = os.path.dirname(out)
        while parent and not os.path.exists(parent):
            parent = os.path.dirname(parent)
        raise JobError(f"{out}: cannot create the output folder: {parent} is a file, not a folder") from None
    except OSError as e:
        raise JobError(f"{out}: cannot create the output folder: {e.strerror or e}") from None
    parts, tmps = _our_files(out)
    for t in tmps:  # a previous run died mid-write: its temporaries are garbage
        try:
            os.unlink(os.path.join(out, t))
        except OSError:
            pass
    try:
        manifest = _read_manifest(out)
    except _ForeignManifest:
        raise  # another program's manifest.json: never deleted, whatever overwrite says
    except JobError:
        if not overwrite:
            raise
        manifest = None
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
    unless ``allow_partial``. Always checked, whatever the manifest claims: every part file is a
    plain name inside ``out`` (a ``../`` path or a symlink leading out of the folder is refused),
    each part holds the rows ``[start, stop)`` its manifest entry lists, and a job called complete
    has all ``n_parts`` parts and every one of its ``n_targets`` rows exactly once.
    """
    pa, pq = _arrow()
    out = os.path.abspath(os.fspath(out))
    if not os.path.isdir(out):
        raise JobError(f"{out}: no such job folder")
    m = _read_manifest(out)
    if m is None:
        raise JobError(f"{out}: no {MANIFEST}; not an invkin job folder")
    try:
        parts = sorted(((int(k), e) for k, e in m["parts"].items()), key=lambda t: t[0])
        n_targets, n_parts = int(m["targets"]["count"]), int(m["n_parts"])
        for _, e in parts:
            e["file"], e["rows"], e["start"] = _part_file(out, e["file"]), int(e["rows"]), int(e["start"])
    except JobError:
        raise
    except (KeyError, TypeError, ValueError, AttributeError) as err:
        raise JobError(f"{out}: malformed job manifest ({type(err).__name__}: {err})") from None
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
            t = pq.read_table(path)
        except (pa.ArrowException, OSError) as err:
            raise JobError(f"{path}: unreadable part {c}: {err}") from None
        got = np.asarray(t.column("index").to_numpy()) if "index" in t.column_names else None
        want = np.arange(e["start"], e["start"] + e["rows"], dtype=np.int64)
        if got is None or t.num_rows != e["rows"] or not np.array_equal(got, want):
            raise JobError(f"{path}: part {c} holds {t.num_rows} rows, its manifest lists {e['rows']} (rows "
                           f"{e['start']}..{e['start'] + e['rows'] - 1}); rerun the job to redo it")
        tables.append(t)
    if m.get("complete"):
        rows = sum(e["rows"] for _, e in parts)
        pos = 0
        for a, n in sorted((e["start"], e["rows"]) for _, e in parts):
            pos = pos + n if a == pos else -1  # the parts tile [0, n_targets) without gap or overlap
        if len(parts) != n_parts or rows != n_targets or pos != n_targets:
            raise JobError(f"{out}: the manifest says complete, but its {len(parts)} of {n_parts} parts hold "
                           f"{rows} of {n_targets} rows; rerun the job to finish it")
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
