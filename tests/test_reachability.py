"""Reachability maps (invkin.jobs.reachability_map, `invkin reachability`)."""
from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import invkin as ik
from invkin.jobs import JobError, ReachabilityMap, reachability_map

INVKIN = str(Path(sys.executable).with_name("invkin"))
PANDA_KW = dict(resolution=0.25, n_orientations=3, max_restarts=3, chunk_size=500, n_samples=4000, progress=False)


@pytest.fixture(scope="module")
def planar():
    """planar2 (l1 = 1, l2 = 0.8, joints ±pi) position-only: the reachable set is the annulus
    0.2 <= r <= 1.8 in the z = 0 plane."""
    return reachability_map("planar2", "hand", resolution=0.1, n_orientations=0, max_restarts=10, progress=False)


@pytest.fixture(scope="module")
def panda_map():
    return reachability_map("panda", "panda_hand", **PANDA_KW)


def test_planar_annulus(planar):
    m = planar
    assert m.shape[2] == 1 and m.z[0] == 0.0  # the grid is aligned on the shoulder
    X, Y = np.meshgrid(m.x, m.y, indexing="ij")
    r = np.hypot(X, Y)
    f = m.fraction[:, :, 0]
    assert np.all(f[(r > 0.25) & (r < 1.75)] == 1.0)
    assert np.all(f[r > 1.8] == 0.0) and not m.evaluated[:, :, 0][r > 1.8 + 1e-6].any()
    assert np.all(f[r < 0.15] == 0.0)
    # manipulability of a planar 2R arm: l1 l2 |sin(elbow)|, at most 0.8
    man = m.manipulability[:, :, 0]
    assert np.all(np.isnan(man[f == 0])) and np.all(man[f > 0] <= 0.8 + 1e-9)
    elbow = np.arccos(np.clip((r ** 2 - 1.0 - 0.64) / 1.6, -1, 1))
    inner = (r > 0.25) & (r < 1.75)  # away from the singular rims, where tolerance moves the elbow
    assert np.allclose(man[inner], 0.8 * np.abs(np.sin(elbow[inner])), atol=1e-6)


def test_summary_numbers(planar):
    s = planar.summary()
    n = int(np.count_nonzero(planar.fraction > 0))
    assert s["voxels_reachable"] == n and s["voxels"] == planar.fraction.size
    assert math.isclose(s["reachable_volume_m3"], n * 0.1 ** 3)
    assert s["solves"] == s["voxels_evaluated"] == int(planar.evaluated.sum())
    # the annulus area (pi (1.8² - 0.2²) = 10.05 m²) times one 0.1 m layer, within the voxelisation error
    assert abs(s["reachable_volume_m3"] - math.pi * (1.8 ** 2 - 0.2 ** 2) * 0.1) < 0.1
    text = planar.format_summary()
    assert "reachable volume" in text and "position only" in text


def test_panda_map_consistency(panda_map):
    m = panda_map
    K = 3
    assert m.orientations.shape == (K, 3, 3)
    assert np.allclose(np.einsum("kji,kjl->kil", m.orientations, m.orientations), np.eye(3), atol=1e-12)
    assert np.all((m.fraction >= 0) & (m.fraction <= 1))
    assert np.array_equal(m.n_solved, np.rint(m.fraction * K).astype(int))
    assert np.all(np.isfinite(m.manipulability[m.fraction > 0])) and np.all(m.manipulability[m.fraction > 0] > 0)
    assert np.all(np.isnan(m.manipulability[m.fraction == 0]))
    d = np.linalg.norm(np.stack(np.meshgrid(m.x, m.y, m.z, indexing="ij"), -1) - m.anchor, axis=-1)
    assert not m.evaluated[d > m.reach_radius + 1e-6].any()
    assert np.all(m.fraction[~m.evaluated] == 0)
    s = m.summary()
    assert 0 < s["voxels_reachable"] < s["voxels_evaluated"] <= s["voxels"]
    assert s["solves"] == s["voxels_evaluated"] * K


def test_deterministic_and_chunking_does_not_matter(panda_map):
    again = reachability_map("panda", "panda_hand", **{**PANDA_KW, "chunk_size": 333})
    for k in ("fraction", "n_solved", "evaluated", "orientations", "x", "y", "z"):
        assert np.array_equal(getattr(again, k), getattr(panda_map, k)), k
    assert np.array_equal(again.manipulability, panda_map.manipulability, equal_nan=True)


def test_files(panda_map, tmp_path):
    pytest.importorskip("matplotlib")
    pq = pytest.importorskip("pyarrow.parquet")
    m = panda_map
    p = m.save_npz(tmp_path / "m.npz")
    back = ReachabilityMap.load(p)
    for k in ("x", "y", "z", "fraction", "n_solved", "evaluated", "orientations", "anchor"):
        assert np.array_equal(getattr(back, k), getattr(m, k)), k
    assert back.summary()["voxels_reachable"] == m.summary()["voxels_reachable"]
    with np.load(p) as z:
        assert json.loads(str(z["summary_json"]))["voxels"] == m.fraction.size
    t = pq.read_table(m.save_parquet(tmp_path / "m.parquet"))
    assert t.num_rows == m.fraction.size
    i = int(np.argmax(m.fraction.ravel()))
    row = t.slice(i, 1).to_pylist()[0]
    assert row["fraction"] == m.fraction.ravel()[i] and row["x"] == m.x[row["ix"]]
    png = Path(m.plot_slices(tmp_path / "m.png", through=(0.3, 0.0, 0.5)))
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert m.slice_indices((0.3, 0.0, 0.5)) == tuple(int(np.argmin(np.abs(a - v)))
                                                     for a, v in zip((m.x, m.y, m.z), (0.3, 0.0, 0.5)))


@pytest.mark.parametrize("kw, match", [
    (dict(resolution=0.0), "resolution"),
    (dict(resolution=float("nan")), "resolution"),
    (dict(n_orientations=-1), "n_orientations"),
    (dict(bounds=((0, 1), (0, 1))), "bounds"),
    (dict(bounds=((1, 0), (0, 1), (0, 1))), "min <= max"),
    (dict(resolution=1e-4), "too large"),
])
def test_bad_arguments(kw, match):
    with pytest.raises(JobError, match=match):
        reachability_map("panda", "panda_hand", **{**PANDA_KW, **kw})


def test_frame_without_moving_joints():
    with pytest.raises(ik.InvkinError):
        reachability_map("panda", "panda_link0", **PANDA_KW)


@pytest.mark.slow  # Dask cluster
def test_dask_map_equals_local_map(panda_map):
    distributed = pytest.importorskip("dask.distributed")
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=True, dashboard_address=None,
                                  env={"NUMBA_NUM_THREADS": "1"}, host="127.0.0.1") as cl, \
            distributed.Client(cl, set_as_default=False) as client:
        m = reachability_map("panda", "panda_hand", client=client, **PANDA_KW)
    assert np.array_equal(m.fraction, panda_map.fraction)
    assert np.array_equal(m.manipulability, panda_map.manipulability, equal_nan=True)


@pytest.mark.slow  # subprocess
def test_cli_reachability(tmp_path):
    out = tmp_path / "planar.npz"
    p = subprocess.run([INVKIN, "reachability", "planar2", "--frame", "hand", "--resolution", "0.2",
                        "--orientations", "0", "--out", str(out), "--parquet", str(tmp_path / "v.parquet")],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert "reachable volume" in p.stdout and "voxels" in p.stdout and "pose/s" in p.stderr  # summary; progress
    assert out.exists() and (tmp_path / "planar.png").exists() and (tmp_path / "v.parquet").exists()
    assert ReachabilityMap.load(out).frame == "hand"


def test_cli_reachability_json(tmp_path, capsys):
    from invkin.cli import main

    assert main(["reachability", "panda", "--frame", "panda_hand", "--resolution", "0.4", "--orientations", "2",
                 "--max-restarts", "2", "--json", "--no-progress", "--plot", str(tmp_path / "p.png")]) == 0
    s = json.loads(capsys.readouterr().out)
    assert s["orientations"] == 2 and s["files"] == [str(tmp_path / "p.png")] and s["voxels_reachable"] > 0
    assert main(["reachability", "planar2", "--resolution", "0.3", "--orientations", "0", "--reach-box",
                 "--json", "--no-progress"]) == 0
    s = json.loads(capsys.readouterr().out)
    assert s["grid_shape"] == [13, 13, 13]  # the reach sphere's box (radius 1.8) on a 0.3 m grid


@pytest.mark.parametrize("args", [
    ["--resolution", "-1"],
    ["--resolution", "0.3", "--out", "map.txt"],
    ["--resolution", "0.3", "--frame", "nope"],
    ["--resolution", "0.3", "--out", "/nonexistent-dir/x.npz"],
    ["--resolution", "0.3", "--reach-box", "--bounds", "0", "1", "0", "1", "0", "1"],
])
def test_cli_reachability_bad_input(args, tmp_path, capsys, monkeypatch):
    from invkin.cli import main

    monkeypatch.chdir(tmp_path)
    assert main(["reachability", "planar2", "--no-progress", *args]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("invkin: error:")


@pytest.mark.slow  # subprocess
def test_cli_reachability_bad_input_subprocess(tmp_path):
    p = subprocess.run([INVKIN, "reachability", "planar2", "--resolution", "0"], capture_output=True, text=True,
                       timeout=120, cwd=tmp_path)
    assert p.returncode == 2 and p.stderr.startswith("invkin: error: resolution"), p.stderr


def test_missing_matplotlib_names_the_extra(planar, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    with pytest.raises(JobError, match=r"pip install invkin\[plot\]"):
        planar.plot_slices(tmp_path / "x.png")


@pytest.mark.parametrize("args, match", [
    (["--out", "m.npz", "--plot", "m.npz"], r"--plot 'm.npz' and --out 'm.npz' name the same file"),
    (["--out", "m.npz", "--parquet", "./m.npz"], r"--parquet './m.npz' and --out 'm.npz' name the same file"),
    (["--out", "m.npz", "--plot", "d.png"], r"--plot 'd.png': is a directory"),
    (["--out", "d.npz"], r"--out 'd.npz': is a directory"),
])
def test_cli_reachability_output_clashes_are_refused_before_the_run(args, match, tmp_path, capsys, monkeypatch):
    """Was: the same path for --out and --plot wrote the map, then the PNG over it ('wrote m.npz' twice, the
    map lost); a folder in the way failed only after the whole run, with the .npz already written."""
    from invkin.cli import main
    from invkin.jobs import reachability

    monkeypatch.chdir(tmp_path)
    (tmp_path / "d.png").mkdir()
    (tmp_path / "d.npz").mkdir()
    ran = []
    monkeypatch.setattr(reachability, "run_chunks", lambda *a, **k: ran.append(1))
    assert main(["reachability", "planar2", "--resolution", "0.3", "--no-progress", *args]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("invkin: error:"), err
    assert __import__("re").search(match, err), err
    assert not ran and not (tmp_path / "m.npz").exists()


def test_loading_a_file_that_is_not_a_map_names_what_it_is(tmp_path):
    # a PNG saved under a .npz name got numpy's advice to load it with pickle
    png = tmp_path / "map.npz"
    png.write_bytes(b"\x89PNG\r\n\x1a\n" + b"\0" * 32)
    with pytest.raises(JobError, match=r"not a reachability map: not a zip archive \(it starts with b'\\x89PNG"):
        ReachabilityMap.load(png)
    one = tmp_path / "one.npz"
    with open(one, "wb") as f:
        np.save(f, np.zeros(3))
    with pytest.raises(JobError, match="not a reachability map: a single .npy array"):
        ReachabilityMap.load(one)
    with pytest.raises(JobError, match="no such reachability map"):
        ReachabilityMap.load(tmp_path / "missing.npz")
