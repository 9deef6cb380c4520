"""One chunk of a job and where it runs: the robot sent to workers as a small spec, the chunk's
:func:`invkin.solve_many` call, and the loop that runs chunks here or on a Dask cluster."""
from __future__ import annotations

import hashlib
import os
import pickle
import re
import threading
import uuid
from pathlib import Path

import numpy as np

from ..errors import InvkinError
from .errors import JobError, _require

_ROBOT_CACHE: dict = {}
_ROBOT_LOCK = threading.Lock()
_KERNEL_LOCK = threading.Lock()  # one solve_many at a time per process: each one uses every core


def robot_spec(robot):
    """(Robot, spec): spec is a small picklable description a worker loads the robot from.

    A bundled name travels as the name, a URDF file as its text, anything else (a BVH file, an
    MJCF file, whose includes and assets a worker may not see, a built or cut :class:`Robot`) as
    the pickled model (a few kB).
    """
    from ..model import Robot, _is_mjcf, load_robot

    if isinstance(robot, Robot):
        payload = pickle.dumps(robot, protocol=4)
        return robot, ("pickle", payload, hashlib.sha256(payload).hexdigest())
    if isinstance(robot, os.PathLike):
        robot = os.fspath(robot)
    if not isinstance(robot, str):
        raise JobError(f"robot: expected a Robot, a bundled name or a .urdf/.xml/.bvh path, got {robot!r:.200}")
    suffix = Path(robot).suffix.lower()
    if suffix == ".urdf" or (suffix == ".xml" and not _is_mjcf(robot)):
        from ..model.urdf import load_urdf

        model = load_urdf(robot)  # validates the file (size cap, errors with line numbers)
        with open(robot, "rb") as f:
            text = f.read()
        return model, ("urdf", text, hashlib.sha256(text).hexdigest(), robot)
    model = load_robot(robot)
    if suffix in (".bvh", ".xml") or "/" in robot or os.sep in robot:
        payload = pickle.dumps(model, protocol=4)
        return model, ("pickle", payload, hashlib.sha256(payload).hexdigest())
    return model, ("bundled", robot, "bundled:" + robot)


def robot_and_frame(robot, frame):
    """(Robot, spec, node, frame name) of a job; ``frame`` defaults to the robot's last node."""
    model, spec = robot_spec(robot)
    node = model.frame_index(model.node_names[-1] if frame is None else frame)
    return model, spec, node, model.node_names[node]


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
    from .._parallel import call as parallel_call
    from ..kinematics.kernels import jacobian_batch

    node = robot.frame_index(frame)
    qs = np.ascontiguousarray(qs, dtype=np.float64).reshape(-1, robot.dof)
    if qs.shape[0] == 0:
        return np.zeros(0)
    J = parallel_call(jacobian_batch, robot.node_table, robot.node_params, robot.origin, qs, node, robot.dof)
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


#: A Dask scheduler address: [protocol://]host[:port] (host: a name, IPv4 or [IPv6]); anything
#: else fails at once instead of after the connect timeout.
_ADDRESS = re.compile(r"\A(?:(?:tcp|tls|ws|wss|ucx|inproc)://)?(?:[A-Za-z0-9._-]+|\[[0-9A-Fa-f:.]+\])(?::\d{1,5})?\Z")


def connect(scheduler: str, timeout: float = 5.0):
    """A ``dask.distributed.Client`` for ``tcp://host:port``, or a clear JobError within about
    ``timeout`` seconds when the scheduler cannot be reached."""
    if not isinstance(scheduler, str) or not _ADDRESS.match(scheduler):
        raise JobError(f"scheduler: expected an address such as tcp://host:8786 (or host:8786), got "
                       f"{scheduler!r:.200}")
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float, np.integer, np.floating)) \
            or not (0 < timeout < float("inf")):
        raise JobError(f"connect_timeout: expected a finite number of seconds > 0, got {timeout!r:.100}")
    timeout = float(timeout)
    distributed = _require("dask.distributed")
    try:
        return distributed.Client(scheduler, timeout=timeout, set_as_default=False)
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as e:  # OSError, TimeoutError, ValueError (bad address), protocol garbage
        msg = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise JobError(f"cannot reach the Dask scheduler at {scheduler!r} within {timeout:g} s: {msg}") from None


def client_for(stack, client, scheduler, timeout):
    """The Dask client a job runs on: ``client`` as given (None: this machine), or one connected to
    ``scheduler`` that ``stack`` (a ``contextlib.ExitStack``) closes."""
    if scheduler is not None:
        client = connect(scheduler, timeout)
        stack.callback(_close_quietly, client, timeout)
    return client


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
