"""Large IK jobs (invkin.jobs.solve_dataset, `invkin batch`): local and Dask runs give the same
bits, a worker killed mid-job loses no row, interrupted runs resume, bad input is a clear error."""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import invkin as ik
from invkin.jobs import JobError, load_targets, read_results, solve_dataset
from invkin.jobs.dataset import MANIFEST, part_name

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

FRAME = "panda_hand"
N = 320
CHUNK = 40  # 8 parts
KW = dict(frame=FRAME, chunk_size=CHUNK, max_restarts=3, progress=False)
INVKIN = str(Path(sys.executable).with_name("invkin"))


@pytest.fixture(scope="module")
def panda():
    return ik.load_robot("panda")


@pytest.fixture(scope="module")
def poses(panda):
    rng = np.random.default_rng(7)
    T = np.array([panda.fk(q, FRAME) for q in panda.sample(N, rng=rng)])
    T[::37, :3, 3] += 2.0  # a few targets beyond reach: not converged, still one row each
    return T


@pytest.fixture(scope="module")
def npz(poses, tmp_path_factory):
    p = tmp_path_factory.mktemp("targets") / "targets.npz"
    np.savez(p, T=poses)
    return str(p)


@pytest.fixture(scope="module")
def reference(npz, tmp_path_factory):
    """The local run: results and folder."""
    out = tmp_path_factory.mktemp("ref") / "job"
    summary = solve_dataset("panda", npz, out, **KW)
    return summary, read_results(out)


@pytest.fixture(scope="module")
def cluster():
    distributed = pytest.importorskip("dask.distributed")
    cl = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None,
                                  env={"NUMBA_NUM_THREADS": "1"}, host="127.0.0.1")
    client = distributed.Client(cl, set_as_default=False)
    try:
        yield cl, client
    finally:
        client.close()
        cl.close()


def same(a, b):
    for k in ("index", "q", "success", "status", "position_error", "rotation_error", "iterations", "restarts"):
        assert np.array_equal(a[k], b[k]), k


def mtimes(out):
    return {p.name: p.stat().st_mtime_ns for p in Path(out).glob("part-*.parquet")}


# ---------------------------------------------------------------------------- local runs


def test_local_run_matches_one_solve_many_call(reference, poses, panda):
    summary, res = reference
    assert summary.complete and summary.n_parts == N // CHUNK and summary.parts_computed == summary.n_parts
    assert np.array_equal(res["index"], np.arange(N))
    b = ik.solve_many(panda, FRAME, poses, max_restarts=3, seed=0)  # target i uses seed + i
    assert np.array_equal(res["q"], b.q)
    assert np.array_equal(res["success"], b.success)
    assert np.array_equal(res["iterations"], b.iterations)
    assert list(res["status"]) == [s.value for s in b.status]
    assert summary.n_success == int(b.success.sum()) and 0 < summary.n_success < N
    assert res["joint_names"] == panda.joint_names
    assert np.all(panda.within_limits(res["q"][res["success"]]))


def test_manifest_and_parts(reference):
    summary, _ = reference
    out = Path(summary.out)
    m = json.loads((out / MANIFEST).read_text())
    assert m["job_id"] == summary.job_id and m["complete"] and m["n_parts"] == N // CHUNK
    assert m["totals"]["rows"] == N and m["totals"]["success"] == summary.n_success
    assert sum(m["totals"]["status_counts"].values()) == N
    import hashlib

    for c in range(m["n_parts"]):
        e = m["parts"][str(c)]
        data = (out / part_name(c)).read_bytes()
        assert e["file"] == part_name(c) and e["rows"] == CHUNK and e["seed"] == c * CHUNK
        assert hashlib.sha256(data).hexdigest() == e["sha256"] and len(data) == e["bytes"]
    t = pq.read_table(out / part_name(1))
    assert t.column_names == ["index", "q", "success", "status", "position_error", "rotation_error",
                              "iterations", "restarts"]
    assert t.column("index").to_pylist() == list(range(CHUNK, 2 * CHUNK))
    assert t.schema.metadata[b"invkin.job_id"] == summary.job_id.encode()
    assert not [p for p in os.listdir(out) if ".tmp-" in p]
    table = read_results(out, as_table=True)
    assert table.num_rows == N and table.column("index").to_pylist() == list(range(N))


def test_results_do_not_depend_on_chunk_size(reference, npz, tmp_path):
    s = solve_dataset("panda", npz, tmp_path / "j", **{**KW, "chunk_size": 57})
    assert s.n_parts == -(-N // 57) and s.job_id != reference[0].job_id
    same(read_results(tmp_path / "j"), reference[1])


def test_rerun_of_a_finished_job_solves_nothing(reference, npz):
    out = reference[0].out
    before = mtimes(out)
    s = solve_dataset("panda", npz, out, **KW)
    assert s.parts_computed == 0 and s.parts_skipped == N // CHUNK and s.complete
    assert mtimes(out) == before


def test_interrupted_run_resumes_without_redoing_parts(reference, npz, tmp_path):
    out = tmp_path / "job"

    def stop_after_three(c):
        if len(list(out.glob("part-*.parquet"))) == 3:
            raise KeyboardInterrupt  # as if the user pressed Ctrl-C after three parts

    with pytest.raises(KeyboardInterrupt):
        solve_dataset("panda", npz, out, _after_part=stop_after_three, **KW)
    m = json.loads((out / MANIFEST).read_text())
    assert len(m["parts"]) == 3 and not m["complete"]
    with pytest.raises(JobError, match="unfinished"):
        read_results(out)
    assert read_results(out, allow_partial=True)["index"].size == 3 * CHUNK
    before = mtimes(out)
    s = solve_dataset("panda", npz, out, **KW)
    assert (s.parts_skipped, s.parts_computed) == (3, N // CHUNK - 3) and s.complete
    after = mtimes(out)
    assert all(after[k] == v for k, v in before.items())
    same(read_results(out), reference[1])


def test_corrupt_missing_and_unlisted_parts_are_redone(reference, npz, tmp_path):
    out = tmp_path / "job"
    solve_dataset("panda", npz, out, **KW)
    p2 = out / part_name(2)
    p2.write_bytes(p2.read_bytes()[:100])  # torn write
    (out / part_name(5)).unlink()  # lost
    m = json.loads((out / MANIFEST).read_text())
    del m["parts"]["6"]  # written, but the run died before the manifest listed it
    (out / MANIFEST).write_text(json.dumps(m))
    (out / ".part-000007.parquet.tmp-1-abc").write_bytes(b"junk")  # a temporary left by a crash
    before = mtimes(out)
    s = solve_dataset("panda", npz, out, **KW)
    assert s.parts_computed == 3 and s.complete
    after = mtimes(out)
    assert {k for k in after if after[k] != before.get(k)} == {part_name(2), part_name(5), part_name(6)}
    assert not [p for p in os.listdir(out) if ".tmp-" in p]
    same(read_results(out), reference[1])


def test_read_results_detects_a_corrupt_part(reference, npz, tmp_path):
    out = tmp_path / "job"
    solve_dataset("panda", npz, out, **KW)
    p = out / part_name(0)
    data = bytearray(p.read_bytes())
    data[len(data) // 2] ^= 0xFF
    p.write_bytes(bytes(data))
    with pytest.raises(JobError, match="checksum"):
        read_results(out)


def test_other_jobs_folder_is_refused_unless_overwrite(reference, npz, tmp_path):
    out = tmp_path / "job"
    first = solve_dataset("panda", npz, out, **KW)
    with pytest.raises(JobError, match="another job"):
        solve_dataset("panda", npz, out, seed=1, **KW)
    s = solve_dataset("panda", npz, out, seed=1, overwrite=True, **KW)
    assert s.job_id != first.job_id and s.parts_computed == N // CHUNK
    assert json.loads((out / MANIFEST).read_text())["job_id"] == s.job_id
    stray = tmp_path / "stray"
    stray.mkdir()
    (stray / part_name(0)).write_bytes(b"x")
    with pytest.raises(JobError, match="unknown job"):
        solve_dataset("panda", npz, stray, **KW)
    (tmp_path / "afile").write_text("x")
    with pytest.raises(JobError, match="not a folder"):
        solve_dataset("panda", npz, tmp_path / "afile", **KW)


# ---------------------------------------------------------------------------- target files


def test_parquet_targets(reference, poses, npz, tmp_path, panda):
    cols = {f"T{i}{j}": poses[:, i, j] for i in range(4) for j in range(4)}
    pq.write_table(pa.table({**cols, "label": ["a"] * N}), tmp_path / "t.parquet")
    s = solve_dataset("panda", str(tmp_path / "t.parquet"), tmp_path / "j", **KW)
    assert s.job_id == reference[0].job_id  # same targets, same settings: the same job
    same(read_results(tmp_path / "j"), reference[1])
    # x, y, z + quaternion (wxyz), and positions only
    quat = np.array([ik.spatial.matrix_to_quat_wxyz(T[:3, :3]) for T in poses[1:21]])
    p = poses[1:21, :3, 3]
    pq.write_table(pa.table({"x": p[:, 0], "y": p[:, 1], "z": p[:, 2], "qw": quat[:, 0], "qx": quat[:, 1],
                             "qy": quat[:, 2], "qz": quat[:, 3]}), tmp_path / "q.parquet")
    t = load_targets(str(tmp_path / "q.parquet"))
    assert t.kind == "pose" and np.allclose(t.X, poses[1:21], atol=1e-12)
    pq.write_table(pa.table({"x": p[:, 0], "y": p[:, 1], "z": p[:, 2],
                             "q0": [[0.1] * 7] * 20}), tmp_path / "p.parquet")
    t = load_targets(str(tmp_path / "p.parquet"), dof=7)
    assert t.kind == "position" and t.q0.shape == (20, 7)
    solve_dataset("panda", t, tmp_path / "pj", **KW)
    r = read_results(tmp_path / "pj")
    b = ik.solve_many(panda, FRAME, p, q0=np.full((20, 7), 0.1), max_restarts=3)
    assert r["index"].tolist() == list(range(20)) and np.array_equal(r["q"], b.q)
    assert r["success"].any() and r["position_error"][r["success"]].max() <= 1e-6


def test_npz_with_q0_and_peer_names(poses, tmp_path, panda):
    np.savez(tmp_path / "a.npz", T_goal=poses[:10], q_seed=panda.neutral())
    t = load_targets(str(tmp_path / "a.npz"), dof=7)
    assert t.kind == "pose" and t.q0.shape == (7,)
    np.savez(tmp_path / "b.npz", p=poses[:10, :3, 3], q0=np.tile(panda.neutral(), (10, 1)))
    t = load_targets(str(tmp_path / "b.npz"), dof=7)
    assert t.kind == "position" and t.q0.shape == (10, 7)


def _bad_files(tmp, poses):
    np.savez(tmp / "noT.npz", X=poses)
    np.savez(tmp / "shape.npz", T=poses[:, :3, :3])
    nan = poses.copy()
    nan[4, 0, 3] = np.nan
    np.savez(tmp / "nan.npz", T=nan)
    skew = poses.copy()
    skew[2, :3, :3] *= 2.0
    np.savez(tmp / "skew.npz", T=skew)
    np.savez(tmp / "both.npz", T=poses, p=poses[:, :3, 3])
    np.savez(tmp / "q0.npz", T=poses, q0=np.zeros((3, 7)))
    np.savez(tmp / "empty.npz", p=np.zeros((0, 3)))
    (tmp / "garbage.npz").write_bytes(b"this is not a zip archive")
    (tmp / "garbage.parquet").write_bytes(b"PAR1 nope")
    (tmp / "t.csv").write_text("x,y,z\n0,0,0\n")
    pq.write_table(pa.table({"a": [1.0], "b": [2.0]}), tmp / "cols.parquet")
    pq.write_table(pa.table({"x": [0.3], "y": [0.0], "z": [0.5], "qw": [1.0], "qx": [0.0]}), tmp / "quat.parquet")
    pq.write_table(pa.table({"x": ["a"], "y": [0.0], "z": [0.5]}), tmp / "text.parquet")
    pq.write_table(pa.table({"x": [0.3, None], "y": [0.0, 0.0], "z": [0.5, 0.5]}), tmp / "null.parquet")
    pq.write_table(pa.table({f"T{i}{j}": [1.0] for i in range(4) for j in range(3)}), tmp / "partT.parquet")
    pq.write_table(pa.table({"x": [0.3], "y": [0.0], "z": [0.5], "qw": [0.0], "qx": [0.0], "qy": [0.0],
                             "qz": [0.0]}), tmp / "zeroquat.parquet")


@pytest.mark.parametrize("name, match", [
    ("missing.npz", "no such targets file"),
    ("garbage.npz", "not a targets file: not a zip archive"),
    ("garbage.parquet", "not a readable Parquet"),
    ("noT.npz", "expected an array 'T'"),
    ("shape.npz", r"shape \(N, 4, 4\)"),
    ("nan.npz", "target 4 holds NaN"),
    ("skew.npz", "target 2 is not a rigid transform"),
    ("both.npz", "both 'T'"),
    ("q0.npz", r"expected shape \(7,\) or \(320, 7\)"),
    ("empty.npz", "no targets"),
    ("t.csv", "unsupported targets file type"),
    ("cols.parquet", "expected columns T00..T33"),
    ("quat.parquet", "all of qw, qx, qy, qz"),
    ("text.parquet", "column 'x' must be numeric"),
    ("null.parquet", "null"),
    ("partT.parquet", "missing"),
    ("zeroquat.parquet", "zero quaternion"),
])
def test_bad_targets_are_clear_errors(name, match, poses, tmp_path):
    _bad_files(tmp_path, poses)
    with pytest.raises(JobError, match=match):
        solve_dataset("panda", str(tmp_path / name), tmp_path / "out", **KW)
    assert not (tmp_path / "out").exists()  # nothing created for bad input


@pytest.mark.parametrize("kw, match", [
    (dict(chunk_size=0), "chunk_size"),
    (dict(max_restarts=-1), "max_restarts"),
    (dict(seed=-3), "seed"),
    (dict(method="nope"), "unknown 'nope'"),
    (dict(frame="nope"), "nope"),
])
def test_bad_settings(kw, match, npz, tmp_path):
    with pytest.raises(ik.InvkinError, match=match):
        solve_dataset("panda", npz, tmp_path / "out", **{**KW, **kw})


def _closed_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def test_unreachable_scheduler_is_a_clear_error(npz, tmp_path):
    pytest.importorskip("dask.distributed")
    with pytest.raises(JobError, match="cannot reach the Dask scheduler"):
        solve_dataset("panda", npz, tmp_path / "out", scheduler=f"tcp://127.0.0.1:{_closed_port()}",
                      connect_timeout=1.0, **KW)


def test_missing_extra_names_the_install_command(npz, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "pyarrow", None)
    with pytest.raises(JobError, match=r"'pyarrow'.*pip install invkin\[distributed\]"):
        solve_dataset("panda", npz, tmp_path / "out", **KW)
    monkeypatch.undo()
    monkeypatch.setitem(sys.modules, "dask.distributed", None)
    with pytest.raises(JobError, match=r"'dask'.*pip install invkin\[distributed\]"):
        solve_dataset("panda", npz, tmp_path / "out", scheduler="tcp://127.0.0.1:1", **KW)


# ---------------------------------------------------------------------------- Dask


@pytest.mark.slow  # Dask cluster
def test_dask_run_is_bit_identical_to_the_local_run(cluster, reference, npz, tmp_path):
    _, client = cluster
    s = solve_dataset("panda", npz, tmp_path / "job", client=client, **KW)
    assert s.job_id == reference[0].job_id and s.complete and s.parts_computed == N // CHUNK
    same(read_results(tmp_path / "job"), reference[1])


@pytest.mark.slow  # Dask cluster
def test_dask_urdf_robot_travels_as_text(cluster, tmp_path, panda):
    _, client = cluster
    from invkin.model.catalog import bundled_urdf_path

    urdf = tmp_path / "arm.urdf"
    urdf.write_bytes(bundled_urdf_path("panda").read_bytes())
    T = np.array([panda.fk(q, FRAME) for q in panda.sample(30, rng=1)])
    local = solve_dataset(str(urdf), T, tmp_path / "a", **{**KW, "chunk_size": 10})
    dist = solve_dataset(str(urdf), T, tmp_path / "b", client=client, **{**KW, "chunk_size": 10})
    assert local.job_id == dist.job_id
    same(read_results(tmp_path / "a"), read_results(tmp_path / "b"))


def test_an_mjcf_robot_travels_pickled_and_solves_as_loaded(tmp_path):
    """An MJCF .xml is MuJoCo's, not a URDF (its includes and meshes may be out of a worker's
    reach): it travels as the loaded model, and the job solves what load_robot reads."""
    pytest.importorskip("mujoco")
    from invkin.jobs.chunks import robot_from_spec, robot_spec

    xml = Path(__file__).parent / "data" / "mjcf" / "arm.xml"
    model, spec = robot_spec(str(xml))
    assert spec[0] == "pickle"
    direct = ik.load_robot(str(xml))
    q = direct.sample(5, rng=3)
    frame = direct.node_names[-1]
    for r in (model, robot_from_spec(spec)):
        assert r.joint_names == direct.joint_names
        np.testing.assert_array_equal(r.fk(q, frame), direct.fk(q, frame))
    T = direct.fk(direct.sample(12, rng=4), frame)
    s = solve_dataset(str(xml), T, tmp_path / "job", frame=frame, chunk_size=6, max_restarts=5, progress=False)
    res = read_results(tmp_path / "job")
    assert s.complete and len(res["success"]) == 12 and np.mean(res["success"]) >= 0.9


def _kill_plugin(chunk: int, marker: str):
    from distributed import WorkerPlugin

    class KillWhenChunkStarts(WorkerPlugin):
        """Worker plugin: SIGKILL the worker as it starts executing a given chunk, the first time
        only (a marker file remembers), so that Dask must run that chunk again elsewhere."""

        name = "invkin-test-kill-once"

        def __init__(self, chunk: int, marker: str):
            self.suffix, self.marker = f"-{chunk:06d}", marker

        def setup(self, worker):
            pass

        def teardown(self, worker):
            pass

        def transition(self, key, start, finish, **kwargs):
            if finish == "executing" and str(key).endswith(self.suffix) and not os.path.exists(self.marker):
                with open(self.marker, "w") as f:
                    f.write(str(os.getpid()))
                os.kill(os.getpid(), signal.SIGKILL)

    return KillWhenChunkStarts(chunk, marker)


@pytest.mark.slow  # Dask cluster
def test_worker_killed_mid_job_loses_and_duplicates_nothing(cluster, reference, npz, tmp_path):
    cl, client = cluster
    marker = tmp_path / "killed"
    written = []
    try:
        client.register_plugin(_kill_plugin(6, str(marker)))
        s = solve_dataset("panda", npz, tmp_path / "job", client=client, max_in_flight=4,
                          _after_part=written.append, **{**KW, "chunk_size": 20})
    finally:
        client.unregister_worker_plugin("invkin-test-kill-once")
    assert marker.exists()  # a worker died running chunk 6 (submitted once 3 parts were written)
    assert s.complete and s.parts_computed == N // 20
    assert sorted(written) == list(range(N // 20))  # each part written once
    res = read_results(tmp_path / "job")
    assert np.array_equal(res["index"], np.arange(N))  # every row exactly once
    same(res, reference[1])
    client.wait_for_workers(2, timeout=30)  # the nanny has started a fresh worker


# ---------------------------------------------------------------------------- the command


def run_cli(*args):
    return subprocess.run([INVKIN, *args], capture_output=True, text=True, timeout=120)


@pytest.mark.slow  # subprocess
def test_cli_batch(reference, npz, tmp_path):
    out = tmp_path / "job"
    p = run_cli("batch", "panda", "--targets", npz, "--out", str(out), "--frame", FRAME, "--chunk-size",
                str(CHUNK), "--max-restarts", "3")
    assert p.returncode == 1, p.stderr  # some targets are beyond reach
    assert f"job {reference[0].job_id}" in p.stdout and "pose/s" in p.stderr  # summary; progress bar
    same(read_results(out), reference[1])
    p = run_cli("batch", "panda", "--targets", npz, "--out", str(out), "--frame", FRAME, "--chunk-size",
                str(CHUNK), "--max-restarts", "3", "--json", "--no-progress")
    info = json.loads(p.stdout)
    assert info["parts_skipped"] == N // CHUNK and info["parts_computed"] == 0 and p.stderr == ""
    # all reachable targets: exit code 0
    np.savez(tmp_path / "ok.npz", T=np.load(npz)["T"][1:30])
    p = run_cli("batch", "panda", "--targets", str(tmp_path / "ok.npz"), "--out", str(tmp_path / "ok"),
                "--frame", FRAME, "--chunk-size", "10", "--no-progress")
    assert p.returncode == 0, p.stdout + p.stderr


def _bad_batch_args(case, reference, npz, tmp_path):
    args = ["batch", "panda", "--targets", npz, "--out", str(tmp_path / "o"), "--frame", FRAME, "--no-progress"]
    if case == "missing":
        args[3] = str(tmp_path / "nope.npz")
    elif case == "columns":
        pq.write_table(pa.table({"a": [1.0]}), tmp_path / "c.parquet")
        args[3] = str(tmp_path / "c.parquet")
    elif case == "other_job":
        args[5] = reference[0].out
        args += ["--seed", "5"]
    elif case == "scheduler":
        args += ["--scheduler", f"tcp://127.0.0.1:{_closed_port()}", "--connect-timeout", "1"]
    elif case == "frame":
        args[7] = "nope"
    else:
        args += ["--chunk-size", "0"]
    return args


@pytest.mark.slow  # subprocess
def test_cli_batch_bad_input_exits_2_subprocess(reference, npz, tmp_path):
    p = run_cli(*_bad_batch_args("other_job", reference, npz, tmp_path))
    assert p.returncode == 2, p.stdout + p.stderr
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("invkin: error:") and "another job" in lines[0], p.stderr


@pytest.mark.parametrize("case", ["missing", "columns", "scheduler", "frame", "chunk"])
def test_cli_batch_bad_input_exits_2(case, reference, npz, tmp_path, capsys):
    from invkin.cli import main

    assert main(_bad_batch_args(case, reference, npz, tmp_path)) == 2
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("invkin: error:"), err
    assert not (tmp_path / "o").exists()  # bad input touches nothing


@pytest.mark.slow  # Dask cluster
def test_cli_batch_on_a_scheduler(cluster, reference, npz, tmp_path):
    cl, _ = cluster
    out = tmp_path / "job"
    p = run_cli("batch", "panda", "--targets", npz, "--out", str(out), "--frame", FRAME, "--chunk-size",
                str(CHUNK), "--max-restarts", "3", "--scheduler", cl.scheduler_address, "--no-progress")
    assert p.returncode == 1, p.stderr
    same(read_results(out), reference[1])


@pytest.mark.parametrize("timeout", [-1.0, 0.0, float("nan"), float("inf")])
def test_bad_connect_timeout_is_a_clear_error(timeout, npz, tmp_path):
    """Was: handed to Dask as is ('could not convert string to float: 1-1.0', 'Invalid time unit: nan')."""
    pytest.importorskip("dask.distributed")
    with pytest.raises(JobError, match=r"connect_timeout: expected a finite number of seconds > 0, got"):
        solve_dataset("panda", npz, tmp_path / "out", scheduler="tcp://127.0.0.1:1", connect_timeout=timeout, **KW)
    assert not (tmp_path / "out").exists()


def test_cli_bad_connect_timeout_exits_2(npz, tmp_path, capsys):
    pytest.importorskip("dask.distributed")
    from invkin.cli import main

    for cmd in (["batch", "panda", "--targets", npz, "--out", str(tmp_path / "o")],
                ["reachability", "panda", "--resolution", "0.3"]):
        assert main([*cmd, "--scheduler", "tcp://127.0.0.1:1", "--connect-timeout", "-1", "--no-progress"]) == 2
        err = capsys.readouterr().err
        assert err.startswith("invkin: error: connect_timeout:") and "-1" in err and err.count("\n") == 1, err


def test_out_below_a_file_is_a_clear_error(npz, tmp_path):
    """Was: the bare OSError '[Errno 20] Not a directory: ...'."""
    (tmp_path / "f").write_text("x")
    with pytest.raises(JobError, match=r"cannot create the output folder: .*f is a file, not a folder"):
        solve_dataset("panda", npz, tmp_path / "f" / "sub", **KW)
    assert (tmp_path / "f").read_text() == "x"


def test_sigterm_mid_job_leaves_a_manifest_listing_every_written_part(reference, npz, tmp_path, monkeypatch,
                                                                      capsys):
    """Was: SIGTERM (timeout, a batch system, kill) ended the process at once: parts written since the
    last manifest rewrite (<= 1 s) were on disk but unlisted. Now it ends like Ctrl-C: the manifest is
    rewritten, one line says how to resume, exit code 143."""
    from invkin.cli import main
    from invkin.jobs import dataset

    class Sentinel(Exception):
        pass

    def not_handled(signum, frame):  # without invkin's handler: a clear failure, not a dead pytest
        raise Sentinel("SIGTERM not handled by invkin batch")

    old = signal.signal(signal.SIGTERM, not_handled)
    real_run = dataset.run_chunks
    written = []

    def run_chunks(*a, **kw):
        real_on_result = a[8]

        def on_result(c, res):
            real_on_result(c, res)
            written.append(c)
            if len(written) == 2:
                os.kill(os.getpid(), signal.SIGTERM)

        return real_run(*a[:8], on_result, *a[9:], **kw)

    monkeypatch.setattr(dataset, "run_chunks", run_chunks)
    monkeypatch.setattr(dataset, "_MANIFEST_INTERVAL", 3600.0)  # only the end of the run writes it
    out = tmp_path / "job"
    try:
        rc = main(["batch", "panda", "--targets", npz, "--out", str(out), "--frame", FRAME, "--chunk-size",
                   str(CHUNK), "--max-restarts", "3", "--no-progress"])
        assert signal.getsignal(signal.SIGTERM) is not_handled  # restored
    finally:
        signal.signal(signal.SIGTERM, old)
    err = capsys.readouterr().err
    assert rc == 143, err
    assert "terminated" in err and "rerun" in err and err.count("\n") == 1, err
    m = json.loads((out / MANIFEST).read_text())
    assert sorted(int(k) for k in m["parts"]) == sorted(written) and not m["complete"]
    res = read_results(out, allow_partial=True)
    assert res["index"].size == 2 * CHUNK


@pytest.mark.parametrize("text", ['{"name": "my web app", "icons": []}\n', "not json at all\n"])
def test_a_foreign_manifest_json_is_never_deleted(text, npz, tmp_path):
    """Was: a folder holding someone else's manifest.json (a web app's, say) was refused with 'pass
    --overwrite', and --overwrite then deleted that file and wrote the job's manifest in its place."""
    out = tmp_path / "site"
    out.mkdir()
    (out / MANIFEST).write_text(text)
    for overwrite in (False, True):
        with pytest.raises(JobError, match=r"not an invkin job manifest.*will not (delete|replace) it") as e:
            solve_dataset("panda", npz, out, overwrite=overwrite, **KW)
        assert "--overwrite" not in str(e.value)
    assert (out / MANIFEST).read_text() == text and sorted(os.listdir(out)) == [MANIFEST]


def test_overwrite_still_replaces_a_broken_invkin_manifest(reference, npz, tmp_path):
    out = tmp_path / "job"
    solve_dataset("panda", npz, out, **KW)
    m = json.loads((out / MANIFEST).read_text())
    m["parts"] = "garbage"
    (out / MANIFEST).write_text(json.dumps(m))
    with pytest.raises(JobError, match="--overwrite"):
        solve_dataset("panda", npz, out, **KW)
    same(read_results(solve_dataset("panda", npz, out, overwrite=True, **KW).out), reference[1])


def test_orientation_axes_for_position_targets_are_refused_before_the_folder_is_touched(panda, tmp_path):
    """solve_many refuses axes='z' for positions (B, 3): a dataset of positions with axes='z' says so
    before it starts, not in every chunk."""
    p = panda.fk(panda.sample(10, rng=4), FRAME)[:, :3, 3]
    src = tmp_path / "positions.npz"
    np.savez(src, p=p)
    out = tmp_path / "out"
    with pytest.raises(JobError, match="axes='z'.*positions"):
        solve_dataset("panda", src, out, axes="z", **KW)
    assert not out.exists()
