"""A folder of BVH clips retargeted through the jobs machinery: resumable, here or on Dask.

``retarget_dataset("clips/", "g1", "out/")`` writes ``out/<clip path>.npz`` for every ``*.bvh``
below ``clips/`` (sub-folders mirrored) and ``out/retarget_manifest.json``: the job's identity
(robot model digest, map (or the bundled maps' digest), options, invkin's version) and, per clip, its source digest, the output's digest and the
report's headline figures (or the error that stopped it). A rerun of the same job skips the clips
whose output is there and intact (same digests) and does the rest; another job's folder is
refused unless ``overwrite=True``. A clip that fails (malformed BVH, a map that does not fit) is
recorded with its error and the others go on.

Each clip is one task: the worker gets the robot spec (:func:`invkin.jobs.chunks.robot_spec`: a
bundled name, a URDF's text or a pickled model), the BVH bytes and the map, and sends back the
``.npz`` bytes and the report's figures; only this process writes files (atomically), so workers
need no shared file system. ``scheduler="tcp://host:8786"`` or ``client=`` runs the tasks on
Dask (``invkin[distributed]``); otherwise they run here, one after the other.
"""
from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import io
import json
import os
import sys
import tempfile
import time
from pathlib import Path

from .. import __version__

MANIFEST = "retarget_manifest.json"
FORMAT = "invkin-retarget-1"

__all__ = ["retarget_dataset", "MANIFEST"]


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _bundled_maps_sha256() -> str:
    """One digest of the bundled retargeting maps (their names and contents): a job without a map
    of its own picks one of them per clip."""
    h = hashlib.sha256()
    for p in sorted((Path(__file__).parent.parent / "data" / "retarget").glob("*.toml")):
        h.update(p.name.encode() + b"\0" + p.read_bytes() + b"\0")
    return h.hexdigest()


def retarget_bytes(spec, bvh: bytes, name: str, mapping_toml, options: dict, view=("", "")) -> dict:
    """One task: a clip's BVH bytes → {"npz": bytes, "summary": dict} or {"error": str}. ``view``:
    (what loads the robot back, the clip's path), recorded in the motion file for ``invkin view``."""
    from ..errors import InvkinError
    from ..jobs.chunks import robot_from_spec
    from ..model.bvh import read_bvh
    from .core import retarget

    robot = robot_from_spec(spec)
    p = name
    try:
        with tempfile.TemporaryDirectory() as d:
            p = os.path.join(d, os.path.basename(name))
            with open(p, "wb") as f:
                f.write(bvh)
            sk, clip = read_bvh(p)
        mapping = None
        if mapping_toml is not None:
            import tomllib

            from .mapping import mapping_from_dict
            mapping = mapping_from_dict(tomllib.loads(mapping_toml), name)
        motion = retarget(sk, clip, robot, mapping=mapping, **options)
        motion = dataclasses.replace(motion, robot_spec=view[0], clip_path=view[1])
    except InvkinError as e:  # named by the clip's path in the dataset, not the worker's temporary copy
        return {"error": " ".join(str(e).replace(p, name).split())}
    buf = io.BytesIO()
    with tempfile.TemporaryDirectory() as d:
        p = os.path.join(d, "m.npz")
        motion.save(p)
        with open(p, "rb") as f:
            buf.write(f.read())
    return {"npz": buf.getvalue(), "summary": motion.report.summary()}


def _progress(total, initial, enabled):
    if not enabled:
        return None
    try:
        from tqdm import tqdm
    except ImportError:
        return None
    return tqdm(total=total, initial=initial, unit="clip", desc="invkin retarget", file=sys.stderr,
                dynamic_ncols=True)


def retarget_dataset(folder, robot, out, *, mapping=None, client=None, scheduler: str | None = None,
                     overwrite: bool = False, progress: bool = True, connect_timeout: float = 5.0,
                     **options) -> dict:
    """Retarget every ``*.bvh`` below ``folder`` onto ``robot`` into ``out`` (see the module
    docstring). ``options`` go to :func:`invkin.retarget` (iterations, self_collision, margin, up,
    velocity_scale). Returns the manifest (a dict: ``clips`` per clip, ``done``, ``failed``,
    ``skipped``, ``computed``, ``seconds``, ``complete``; ``gone``: clips of an earlier run no longer in
    the folder, whose entries and outputs are kept but not counted)."""
    from .._io import path_str
    from ..jobs.chunks import client_for, model_sha256, robot_spec
    from ..jobs.errors import JobError
    from ..jobs.parts import atomic_write
    from .mapping import Mapping, load_mapping

    import inspect

    from .._checks import no_unknown_kwargs
    from .core import retarget

    known = [k for k, p in inspect.signature(retarget).parameters.items() if p.kind is p.KEYWORD_ONLY and k != "progress"]
    no_unknown_kwargs("retarget_dataset", options, known, JobError)  # before any folder is made
    folder = path_str(folder, JobError, "a folder of .bvh clips")
    if not os.path.isdir(folder):
        raise JobError(f"{folder}: not a folder; expected a folder of .bvh clips")
    clips = sorted(p for p in Path(folder).rglob("*") if p.is_file() and p.suffix.lower() == ".bvh")
    if not clips:
        raise JobError(f"{folder}: no .bvh file found (searched the folder and its sub-folders)")
    model, spec = robot_spec(robot)
    loads = ""  # what loads the robot back (invkin view): a bundled name or a URDF's path, as given
    if isinstance(robot, (str, os.PathLike)):
        loads = os.path.abspath(robot) if os.path.exists(robot) else os.fspath(robot)
    if mapping is not None and not isinstance(mapping, Mapping):
        mapping = load_mapping(mapping)
    mapping_toml = mapping.to_toml() if mapping is not None else None
    # what decides the outputs: with the bundled maps (picked per clip), their files' contents too,
    # and the library's version, so that a rerun after an upgrade does not skip clips made by the old
    ident = {"format": FORMAT, "invkin": __version__, "robot_model_sha256": model_sha256(model),
             "mapping": mapping_toml, "bundled_maps_sha256": None if mapping is not None else _bundled_maps_sha256(),
             "options": {k: options[k] for k in sorted(options)}}
    job_id = _sha(json.dumps(ident, sort_keys=True, default=str).encode())[:16]
    out = os.path.abspath(path_str(out, JobError, "an output folder"))
    if os.path.exists(out) and not os.path.isdir(out):
        raise JobError(f"{out}: exists and is not a folder")
    os.makedirs(out, exist_ok=True)
    mpath = os.path.join(out, MANIFEST)
    manifest = None
    if os.path.exists(mpath) and not overwrite:
        try:
            with open(mpath, encoding="utf-8") as f:
                manifest = json.load(f)
        except (OSError, ValueError):
            manifest = None
        if manifest is None or manifest.get("job_id") != job_id:
            raise JobError(f"{out}: holds another retargeting job ({(manifest or {}).get('job_id', 'unreadable')}); "
                           f"this job is {job_id}. Pass --overwrite (overwrite=True) or choose another folder")
    if manifest is None:
        manifest = {"format": FORMAT, "job_id": job_id, "robot": model.name, "source": folder,
                    "mapping": mapping_toml or "bundled (chosen per clip)", "options": ident["options"], "clips": {}}
    todo = []
    clash = []  # clips whose output is another clip's (a.bvh and a.BVH both write a.npz)
    owner = {}
    skipped = 0
    for p in clips:
        rel = p.relative_to(folder).as_posix()
        data = p.read_bytes()
        e = manifest["clips"].get(rel)
        target = os.path.join(out, rel[:-4] + ".npz")
        key = os.path.normcase(target).lower()  # (the same file on a case-insensitive file system too)
        if key in owner:
            if not (e is not None and e.get("source_sha256") == _sha(data) and "error" in e):
                clash.append((rel, data, target, owner[key]))
            else:
                skipped += 1
            continue
        owner[key] = rel
        if e is not None and e.get("source_sha256") == _sha(data) and (
                "error" in e or (os.path.isfile(target) and _sha(Path(target).read_bytes()) == e.get("npz_sha256"))):
            skipped += 1
            continue
        todo.append((rel, data, target, (loads, str(p.resolve()))))
    t0 = time.perf_counter()
    computed = 0

    def flush():
        manifest["updated"] = time.strftime("%Y-%m-%dT%H:%M:%S%z")
        atomic_write(mpath, (json.dumps(manifest, indent=1) + "\n").encode())

    def on_result(rel, data, target, res):
        nonlocal computed
        entry = {"source_sha256": _sha(data)}
        if "error" in res:
            entry["error"] = res["error"]
        else:
            os.makedirs(os.path.dirname(target), exist_ok=True)
            atomic_write(target, res["npz"])
            entry.update(file=os.path.relpath(target, out), npz_sha256=_sha(res["npz"]), report=res["summary"])
        manifest["clips"][rel] = entry
        computed += 1
        flush()

    flush()
    for rel, data, target, first in clash:
        on_result(rel, data, target, {"error": f"{rel}: its output {os.path.relpath(target, out)} is also the output "
                                               f"of {first}; rename one of the two clips"})
    bar = _progress(len(clips), skipped + len(clash), progress)
    try:
        with contextlib.ExitStack() as stack:
            client = client_for(stack, client, scheduler, connect_timeout)
            if client is None:
                for rel, data, target, view in todo:
                    on_result(rel, data, target, retarget_bytes(spec, data, rel, mapping_toml, options, view))
                    if bar is not None:
                        bar.update(1)
            else:
                from dask.distributed import as_completed

                futs = {client.submit(retarget_bytes, spec, data, rel, mapping_toml, options, view, pure=False):
                        (rel, data, t) for rel, data, t, view in todo}
                for fut in as_completed(list(futs)):
                    rel, data, target = futs[fut]
                    on_result(rel, data, target, fut.result())
                    if bar is not None:
                        bar.update(1)
    finally:
        if bar is not None:
            bar.close()
    # counted over the clips in the folder now: a clip of an earlier run since removed (its entry
    # and output are kept) is listed in "gone", neither done nor failed
    present = {p.relative_to(folder).as_posix() for p in clips}
    failed = sorted(k for k, e in manifest["clips"].items() if k in present and "error" in e)
    done = sum(1 for k, e in manifest["clips"].items() if k in present and "error" not in e)
    gone = sorted(k for k in manifest["clips"] if k not in present)
    manifest.update(done=done, failed=failed, gone=gone, skipped=skipped, computed=computed,
                    seconds=time.perf_counter() - t0, complete=all(k in manifest["clips"] for k in present))
    flush()
    return manifest
