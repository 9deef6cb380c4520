"""Target files: loading and validation (:func:`load_targets`, :class:`Targets`).

``.npz``: an array ``T`` (N, 4, 4) of poses, or ``p`` (N, 3) of positions [m] (position-only
goals); optional ``q0`` (N, dof) or (dof,) start configurations. The names ``T_goal`` and
``q_seed`` (the peers benchmark's target files) are accepted for ``T`` and ``q0``.

Parquet: either the 16 columns ``T00 … T33`` (row-major pose matrix, ``Tij`` = row i, column j;
the last row must be 0 0 0 1), or ``x, y, z`` [m] with optionally all four of ``qw, qx, qy, qz``
(orientation as a quaternion, normalised on load; without them the goals are position-only).
Optional column ``q0``: a list of dof start values per row. Numeric, no nulls; other columns are
ignored. The target index is the row number.
"""
from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .._io import read_npz
from .errors import JobError, _arrow

_T_COLUMNS = tuple(f"T{i}{j}" for i in range(4) for j in range(4))
_Q_COLUMNS = ("qw", "qx", "qy", "qz")


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
    return read_npz(path, "targets file", JobError)


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
    pa, pq = _arrow()
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
    if suffix in (".npz", ".parquet", ".pq") and os.path.exists(source):
        from .._io import open_regular

        open_regular(source, "targets file", JobError).close()  # a FIFO named x.npz must not block
    if suffix == ".npz":
        X, q0 = _from_mapping(_load_npz(source), source, dof)
    elif suffix in (".parquet", ".pq"):
        X, q0 = _load_parquet(source, dof)
    else:
        if not os.path.exists(source):
            raise JobError(f"{source}: no such targets file")
        raise JobError(f"{source}: unsupported targets file type {suffix or '(none)'!r}; expected .npz or .parquet")
    return Targets(X, q0, os.path.abspath(source))
