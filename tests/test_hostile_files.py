"""Hostile and careless input (issue 19), files and processes: output files are never clobbered,
readers never block or recurse, the CLI never prints a traceback, the viewer does not expose
itself, a job folder is never left through its manifest."""
from __future__ import annotations

import json
import os
import re
import stat
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import invkin as ik
from invkin import _io
from invkin.model.bvh import read_bvh, write_bvh

import support

ROOT = Path(__file__).resolve().parents[1]
INVKIN = [sys.executable, "-m", "invkin.cli"]

SMALL = (Path(__file__).parent / "data" / "two_joints.bvh").read_text()  # a root and one joint, two frames


def run(*args, timeout=120):
    return subprocess.run(INVKIN + [str(a) for a in args], capture_output=True, text=True, timeout=timeout,
                          cwd=ROOT, env={**os.environ, "PYTHONUNBUFFERED": "1"}, check=False)


def one_line_error(p, code=2):
    assert p.returncode == code, (p.returncode, p.stdout, p.stderr)
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("invkin: error: "), p.stderr
    assert "Traceback" not in p.stderr + p.stdout
    return lines[0]


def bounded(fn, seconds=60.0):
    """fn() under the shared watchdog (tests/support.py)."""
    return support.bounded(fn, seconds)


def leftovers(folder) -> list:
    return [n for n in os.listdir(folder) if _io.TMP_MARK in n or n.endswith(".tmp")]


@pytest.fixture()
def clip(tmp_path):
    p = tmp_path / "in.bvh"
    p.write_text(SMALL)
    return read_bvh(p)


# ------------------------------------------------------------------------- 2. files destroyed
def test_atomic_write_refuses_a_fifo_and_a_folder_and_leaves_them(tmp_path):
    fifo = tmp_path / "out.bvh"
    os.mkfifo(fifo)
    with pytest.raises(ik.FileError, match=r"out\.bvh.*FIFO.*refusing"):
        bounded(lambda: _io.atomic_write(fifo, b"x"))
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    folder = tmp_path / "dir.json"
    folder.mkdir()
    with pytest.raises(ik.FileError, match="directory"):
        _io.atomic_write(folder, b"x")
    assert folder.is_dir() and leftovers(tmp_path) == []


def test_atomic_write_goes_through_a_symlink_and_keeps_it(tmp_path):
    target = tmp_path / "real.txt"
    target.write_text("old")
    link = tmp_path / "link.txt"
    link.symlink_to(target)
    _io.atomic_write(link, "new")
    assert link.is_symlink() and target.read_text() == "new"
    dangling = tmp_path / "dangling.txt"
    dangling.symlink_to(tmp_path / "created.txt")
    _io.atomic_write(dangling, "made")
    assert dangling.is_symlink() and (tmp_path / "created.txt").read_text() == "made"


def test_atomic_write_keeps_the_mode_and_new_files_get_the_umask_default(tmp_path):
    old = tmp_path / "old.txt"
    old.write_text("a")
    os.chmod(old, 0o640)
    _io.atomic_write(old, "b")
    assert stat.S_IMODE(os.stat(old).st_mode) == 0o640
    umask = os.umask(0)
    os.umask(umask)
    new = tmp_path / "new.txt"
    _io.atomic_write(new, "c")
    assert stat.S_IMODE(os.stat(new).st_mode) == 0o666 & ~umask


def test_a_failed_write_removes_its_temporary_and_leaves_the_destination(tmp_path):
    dst = tmp_path / "keep.txt"
    dst.write_text("original")
    with pytest.raises(RuntimeError), _io.atomic_open(dst, "w") as f:
        f.write("half")
        raise RuntimeError("disk full")
    assert dst.read_text() == "original" and leftovers(tmp_path) == []
    with pytest.raises(ik.FileError, match="cannot write"):
        _io.atomic_write(tmp_path / "no" / "such" / "dir.txt", b"x")


def test_write_bvh_new_files_get_the_default_mode_and_links_survive(tmp_path, clip):
    robot, c = clip
    umask = os.umask(0)
    os.umask(umask)
    out = tmp_path / "out.bvh"
    write_bvh(out, robot, c)
    assert stat.S_IMODE(os.stat(out).st_mode) == 0o666 & ~umask  # was 0600 (mkstemp)
    link = tmp_path / "link.bvh"
    link.symlink_to(out)
    write_bvh(link, robot, c)
    assert link.is_symlink() and read_bvh(link)[1].n_frames == c.n_frames
    fifo = tmp_path / "fifo.bvh"
    os.mkfifo(fifo)
    with pytest.raises(ik.InvkinError, match="fifo.bvh"):
        bounded(lambda: write_bvh(fifo, robot, c))
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode) and leftovers(tmp_path) == []


def test_bench_json_into_a_folder_is_refused_without_a_tmp_left(tmp_path):
    from invkin.bench.cli import _write_json

    d = tmp_path / "results"
    d.mkdir()
    with pytest.raises(ik.FileError, match="directory"):
        _write_json(str(d), {"a": 1})
    assert leftovers(tmp_path) == [] and d.is_dir()
    _write_json(str(tmp_path / "r.json"), {"a": 1.0})
    assert json.loads((tmp_path / "r.json").read_text()) == {"a": 1.0}


def test_every_writer_goes_through_the_atomic_helper():
    """No module but invkin._io renames or replaces files itself (grep of the sources)."""
    src = ROOT / "src" / "invkin"
    offenders = []
    for p in src.rglob("*.py"):
        if p.name == "_io.py":
            continue
        text = p.read_text(encoding="utf-8")
        for needle in ("os.replace(", "os.rename(", "mkstemp(", ".savefig(p"):
            if needle in text:
                offenders.append(f"{p.relative_to(src)}: {needle}")
    assert offenders == []


# ------------------------------------------------------------------------------ readers block
@pytest.mark.parametrize("name", ["x.urdf", "x.bvh"])
def test_a_fifo_named_like_a_model_is_refused_at_once(tmp_path, name):
    fifo = tmp_path / name
    os.mkfifo(fifo)
    with pytest.raises(ik.ModelError, match="FIFO"):
        bounded(lambda: ik.load_robot(str(fifo)))
    p = bounded(lambda: run("info", fifo))
    assert "FIFO" in one_line_error(p)


@pytest.mark.parametrize("element", ['<include file="{fifo}"/>',
                                     '<asset><mesh name="m" file="{fifo}"/></asset>',
                                     '<compiler meshdir="{folder}"/><asset><mesh name="m" file="feed.stl"/></asset>'])
def test_an_mjcf_that_names_a_fifo_is_refused_before_mujoco_blocks_on_it(tmp_path, element):
    # the main file was checked, but MuJoCo's compiler opened an included file or a mesh that is a
    # FIFO and waited for a writer forever
    pytest.importorskip("mujoco")
    fifo = tmp_path / "feed.stl"
    os.mkfifo(fifo)
    p = tmp_path / "robot.xml"
    p.write_text("<mujoco>" + element.format(fifo=fifo, folder=tmp_path) + "<worldbody/></mujoco>")
    try:
        with pytest.raises(ik.ModelError, match=rf"{re.escape(str(p))}: <(include|mesh) file=.*> line 1: "
                                                 rf"{re.escape(str(fifo))} is not a regular file"):
            bounded(lambda: ik.load_robot(p), seconds=20.0)
    finally:  # a reader left blocked on the FIFO by a failed run: let it go
        try:
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        except OSError:
            pass


def test_fifos_named_like_gltf_or_targets_are_refused_at_once(tmp_path):
    pytest.importorskip("pygltflib")
    from invkin.jobs import JobError, load_targets

    glb = tmp_path / "x.glb"
    os.mkfifo(glb)
    with pytest.raises(ik.ModelError, match="FIFO"):
        bounded(lambda: ik.read_gltf(glb))
    npz = tmp_path / "t.npz"
    os.mkfifo(npz)
    with pytest.raises(JobError, match="FIFO"):
        bounded(lambda: load_targets(str(npz)))


def test_urdf_with_an_unknown_encoding_is_a_model_error():
    from invkin.model.urdf import parse_urdf

    doc = b'<?xml version="1.0" encoding="bogus"?><robot name="r"><link name="a"/></robot>'
    with pytest.raises(ik.ModelError, match="encoding"):
        parse_urdf(doc)


def _deep_bvh(n: int) -> str:
    out = ["HIERARCHY", "ROOT J0", "{", "OFFSET 0 0 0", "CHANNELS 3 Zrotation Xrotation Yrotation"]
    for k in range(1, n):
        out += [f"JOINT J{k}", "{", "OFFSET 0 0.01 0", "CHANNELS 1 Zrotation"]
    out += ["End Site", "{", "OFFSET 0 0.01 0", "}"] + ["}"] * n
    out += ["MOTION", "Frames: 1", "Frame Time: 0.1", " ".join(["1"] * (n + 2))]
    return "\n".join(out) + "\n"


def test_a_bvh_deeper_than_the_recursion_limit_reads_and_writes(tmp_path):
    n = sys.getrecursionlimit() + 500
    p = tmp_path / "deep.bvh"
    p.write_text(_deep_bvh(n))
    _, c = read_bvh(p)
    assert len(c.joint_names) == n and c.dof == n + 2
    write_bvh(tmp_path / "deep_out.bvh", None, c)
    c2 = read_bvh(tmp_path / "deep_out.bvh")[1]
    assert c2.names == c.names
    np.testing.assert_allclose(c2.frames, c.frames, rtol=1e-13)


def test_bvh_reader_memory_stays_proportional_to_the_file(tmp_path):
    """Peak traced memory of read_bvh on a ~8 MB file stays under 3x the file size. (The large-file
    figures, a 200 MB file's peak RSS and time, are in benchmarks/RESULTS.md: bvh_memory.py.)"""
    import tracemalloc

    rng = np.random.default_rng(0)
    n_joints, frames = 20, 12000
    out = ["HIERARCHY", "ROOT J0", "{", "OFFSET 0 0 0",
           "CHANNELS 6 Xposition Yposition Zposition Zrotation Xrotation Yrotation"]
    for k in range(1, n_joints):
        out += [f"JOINT J{k}", "{", "OFFSET 0 1 0", "CHANNELS 3 Zrotation Xrotation Yrotation"]
    out += ["End Site", "{", "OFFSET 0 1 0", "}"] + ["}"] * n_joints
    dof = 6 + 3 * (n_joints - 1)
    out += ["MOTION", f"Frames: {frames}", "Frame Time: 0.01"]
    vals = rng.uniform(-180, 180, size=(frames, dof))
    p = tmp_path / "big.bvh"
    with open(p, "w") as f:
        f.write("\n".join(out) + "\n")
        np.savetxt(f, vals, fmt="%.6f")
    size = p.stat().st_size
    read_bvh(p)  # warm caches (Robot kernels) outside the measurement
    tracemalloc.start()
    _, c = read_bvh(p)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert c.frames.shape == (frames, dof)
    np.testing.assert_allclose(c.file_values(), vals, atol=5e-7)
    assert peak < 3 * size, (peak, size)


# ------------------------------------------------------------------------------ the command
def test_cli_errors_are_one_line_with_exit_2():
    for args in (["solve", "planar2", "--frame", "hand", "--xyz", "1", "1", "nan"],
                 ["solve", "planar2", "--frame", "hand", "--xyz", "0.5", "0.5", "0", "--seed", "-1"],
                 ["solve", "planar2", "--frame", "hand", "--xyz", "1e300", "0", "0"],
                 ["solve", "planar2", "--frame", "hand", "--xyz", "0.5", "0.5", "0", "--timeout", "inf"],
                 ["fk", "planar2", "--q", "1e400", "0"]):
        one_line_error(run(*args))


def test_an_unexpected_exception_is_one_line_and_debug_shows_the_traceback(monkeypatch, capsys):
    from invkin import cli

    def boom(args):
        raise RecursionError("maximum recursion depth exceeded")

    monkeypatch.setattr(cli, "cmd_info", boom)
    assert cli.main(["info", "planar2"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "RecursionError" in err[0] and "--debug" in err[0]
    with pytest.raises(RecursionError):
        cli.main(["--debug", "info", "planar2"])


def test_a_garbage_scheduler_address_fails_at_once(tmp_path):
    np.savez(tmp_path / "t.npz", p=np.zeros((2, 3)))
    t0 = time.monotonic()
    p = run("batch", "planar2", "--targets", tmp_path / "t.npz", "--frame", "hand", "--out", tmp_path / "job",
            "--scheduler", "garbage address!")
    assert "scheduler" in one_line_error(p) and time.monotonic() - t0 < 60


def test_reachability_through_nan_is_refused_before_the_run(tmp_path):
    p = run("reachability", "planar2", "--frame", "hand", "--resolution", "0.1", "--through", "nan", "0", "0",
            "--plot", tmp_path / "r.png")
    assert "through" in one_line_error(p)


# ------------------------------------------------------------------------------ the viewer
def test_viewer_host_check_refuses_non_loopback_without_allow_remote():
    from invkin.viewer.errors import ViewerError, check_host

    assert check_host("127.0.0.1") is None and check_host("localhost") is None
    for host in ("0.0.0.0", "::"):
        with pytest.raises(ViewerError, match="--allow-remote"):
            check_host(host)
        assert "without authentication" in check_host(host, allow_remote=True)
    with pytest.raises(ViewerError, match="cannot bind"):
        check_host("no-such-host.invalid")


def test_view_on_every_interface_or_a_bad_host_fails_at_once():
    assert "--allow-remote" in one_line_error(bounded(lambda: run("view", "planar2", "--host", "0.0.0.0")))
    p = bounded(lambda: run("view", "planar2", "--port", "0", "--host", "no-such-host.invalid"))
    assert "no-such-host.invalid" in one_line_error(p)


def test_the_printed_url_is_the_bound_address():
    from invkin.viewer.cli import bound_url

    class App:
        host, port = "0.0.0.0", 8123

    assert bound_url(App()) == "http://0.0.0.0:8123"
    App.host = "::1"
    assert bound_url(App()) == "http://[::1]:8123"


# ------------------------------------------------------------------------------ job folders
@pytest.fixture(scope="module")
def job(tmp_path_factory):
    pytest.importorskip("pyarrow")
    from invkin.jobs import solve_dataset

    d = tmp_path_factory.mktemp("job")
    rng = np.random.default_rng(3)
    np.savez(d / "t.npz", p=np.column_stack([rng.uniform(-1, 1, (60, 2)), np.zeros(60)]))
    solve_dataset("planar2", str(d / "t.npz"), d / "out", frame="hand", chunk_size=20, max_restarts=2,
                  progress=False)
    return d / "out"


def _copy_job(job, tmp_path):
    import shutil

    dst = tmp_path / "copy"
    shutil.copytree(job, dst)
    m = json.loads((dst / "manifest.json").read_text())
    return dst, m


def test_read_results_refuses_part_paths_that_leave_the_folder(job, tmp_path):
    from invkin.jobs import JobError, read_results

    assert read_results(job)["index"].tolist() == list(range(60))
    dst, m = _copy_job(job, tmp_path)
    key = min(m["parts"])
    outside = tmp_path / "outside.parquet"
    os.replace(dst / m["parts"][key]["file"], outside)
    m["parts"][key]["file"] = "../outside.parquet"
    (dst / "manifest.json").write_text(json.dumps(m))
    with pytest.raises(JobError, match="plain file name"):
        read_results(dst)
    m["parts"][key]["file"] = "evil.parquet"
    (dst / "evil.parquet").symlink_to(outside)
    (dst / "manifest.json").write_text(json.dumps(m))
    with pytest.raises(JobError, match="outside the job folder"):
        read_results(dst)


def test_read_results_refuses_a_complete_manifest_with_missing_rows(job, tmp_path):
    from invkin.jobs import JobError, read_results

    dst, m = _copy_job(job, tmp_path)
    key = max(m["parts"])
    os.unlink(dst / m["parts"][key]["file"])
    del m["parts"][key]
    (dst / "manifest.json").write_text(json.dumps(m))  # still says complete
    with pytest.raises(JobError, match="says complete"):
        read_results(dst)
    dst2, m2 = _copy_job(job, tmp_path / "b")
    key = min(m2["parts"])
    m2["parts"][key]["rows"] = int(m2["parts"][key]["rows"]) + 5  # the part holds fewer rows
    (dst2 / "manifest.json").write_text(json.dumps(m2))
    with pytest.raises(JobError, match="rows"):
        read_results(dst2, verify=False)
