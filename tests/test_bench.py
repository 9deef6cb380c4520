"""`invkin bench accuracy` and `invkin bench suite`: quick runs through the console script,
their JSON and plots, the peers' merge (with a stand-in bench_peers.py) and bad input.

Timings are never asserted (shared, noisy machine); only that they are positive and finite.
"""
from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import textwrap
import zlib
from pathlib import Path

import numpy as np
import pytest

import invkin as ik
from invkin.bench.accuracy import motion_spread, welman_chain
from invkin.bench.suite import SUITE_ROBOTS, make_targets, robot_seed, suite_tip

pytestmark = pytest.mark.slow  # benchmark runs in subprocesses (make test-fast skips them)

INVKIN = str(Path(sys.executable).with_name("invkin"))
STANDARD = ("lm", "dls", "pinv", "transpose", "gauss-seidel", "ccd", "fabrik")
PEERS_RESULTS = Path(__file__).resolve().parents[2] / "shared" / "peers" / "results"


def run_cli(*args, cwd=None, timeout=300):
    env = dict(os.environ, MPLBACKEND="Agg")
    return subprocess.run([INVKIN, *args], capture_output=True, text=True, cwd=cwd, timeout=timeout, env=env)


def check_png(path: Path):
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", path
    assert len(data) > 5000, (path, len(data))
    import matplotlib.image as mpimg

    img = mpimg.imread(str(path))
    assert img.ndim == 3 and img.shape[0] > 100 and img.shape[1] > 100
    flat = img.reshape(-1, img.shape[2])
    assert np.ptp(flat, axis=0).max() > 0.2, "the image is a single colour"
    assert len(np.unique(flat[::37], axis=0)) > 20


def finite_pos(x):
    return x is not None and math.isfinite(x) and x > 0


# --------------------------------------------------------------------------- accuracy


@pytest.fixture(scope="module")
def accuracy_run(tmp_path_factory):
    d = tmp_path_factory.mktemp("acc")
    p = run_cli("bench", "accuracy", "--quick", "--json", str(d / "acc.json"), "--out", str(d / "img"))
    assert p.returncode == 0, p.stderr[-3000:]
    return p, json.loads((d / "acc.json").read_text()), d


def test_accuracy_json(accuracy_run):
    p, res, _ = accuracy_run
    st = res["settings"]
    assert st["accuracies"] == sorted(st["accuracies"], reverse=True) and 2 <= len(st["accuracies"]) <= 3
    assert set(res["sets"]) == {"inside", "boundary", "seed8dof"}
    assert set(st["methods"]) == set(ik.methods())
    for sname, s in res["sets"].items():
        assert set(s["methods"]) | set(s["unsupported"]) == set(ik.methods())
        for m in STANDARD:  # every classic method handles position goals on these chains
            assert m in s["methods"], (sname, m)
        for m, rows in s["methods"].items():
            assert [r["accuracy"] for r in rows] == st["accuracies"]
            for r in rows:
                assert 0.0 <= r["success"] <= 1.0
                assert finite_pos(r["time_ms_median"]) and finite_pos(r["time_ms_mean"])
                assert r["iterations_median"] >= 1
                assert len(r["per_goal"]["time_s"]) == st["goals_per_set"]
                assert all(finite_pos(t) for t in r["per_goal"]["time_s"])
                ds = r["distal_share_median"]
                assert ds is None or 0.0 <= ds <= 1.0
                if r["success"] == 1.0:
                    assert ds is not None
                    assert max(r["per_goal"]["position_error"]) <= r["accuracy"]
        assert 0 < s["uniform_distal_share"] < 1
    # deterministic runs: the transpose needs at least as many iterations for a tighter accuracy
    for s in res["sets"].values():
        its = [r["iterations_mean"] for r in s["methods"]["transpose"]]
        assert all(b >= a for a, b in zip(its, its[1:])), its
    # the tight-accuracy LM solves everything in a few iterations
    for s in res["sets"].values():
        assert all(r["success"] == 1.0 for r in s["methods"]["lm"])
    f = res["findings"]["per_set"]["boundary"]
    assert f["fastest_at_reference"] in ik.methods()
    assert "ccd_vs_transpose_iterations_ratio_at_reference" in f
    last = p.stdout.strip().splitlines()[-1]
    assert last.startswith("accuracy: ") and "goal sets" in last and "\n" not in last
    assert "transpose" in p.stdout and "boundary" in p.stdout


def test_accuracy_plots(accuracy_run):
    _, res, d = accuracy_run
    for stem in ("bench_accuracy", "bench_distal"):
        check_png(d / "img" / f"{stem}.png")
        svg = (d / "img" / f"{stem}.svg").read_text()
        assert svg.lstrip().startswith("<?xml") and "<svg" in svg


def test_welman_chain_and_motion_spread():
    r = welman_chain()
    assert r.dof == 7 and all(t == "continuous" for t in r.joint_types_per_dof)
    assert np.allclose(r.fk(np.zeros(7), "tip")[:3, 3], [0, 0, 1.0])  # reach 1 m, stretched along +Z
    q0 = np.zeros(7)
    q = q0.copy()
    q[-1] = 0.5
    share, centroid, a = motion_spread(r, q0, q)
    assert share == pytest.approx(1.0) and centroid == pytest.approx(1.0)
    q = q0 + 0.1
    share, centroid, _ = motion_spread(r, q0, q)
    assert share == pytest.approx(3 / 7) and centroid == pytest.approx(0.5)
    q = q0.copy()
    q[0] = 2 * math.pi + 0.2  # continuous joints: the motion is taken modulo 2π
    _, _, a = motion_spread(r, q0, q)
    assert a[0] == pytest.approx(0.2)


# --------------------------------------------------------------------------- suite


@pytest.fixture(scope="module")
def suite_run(tmp_path_factory):
    d = tmp_path_factory.mktemp("suite")
    p = run_cli("bench", "suite", "--quick", "--no-progress", "--json", str(d / "suite.json"), "--out", str(d / "img"),
                cwd=str(d))  # no ../shared/peers from here, and no --peers-python: peers not run
    assert p.returncode == 0, p.stderr[-3000:]
    return p, json.loads((d / "suite.json").read_text()), d


def test_suite_json(suite_run):
    p, res, _ = suite_run
    assert list(res["robots"]) == list(SUITE_ROBOTS)
    for rname, info in res["robots"].items():
        tip, kind = suite_tip(rname)
        assert info["tip"] == tip and info["kind"] == kind
        assert set(info["solvers"]) == set(ik.methods())  # no peers in this run
        for m, e in info["solvers"].items():
            if "unsupported" in e:
                assert m in ("fabrik", "analytic"), (rname, m, e["unsupported"])
                continue
            assert e["n"] == res["settings"]["n"]
            for k in ("success_strict", "success_loose", "success_strict_within_budget"):
                assert 0.0 <= e[k] <= 1.0
            assert e["success_strict"] <= e["success_loose"]
            for k in ("time_ms_median", "time_ms_mean", "time_ms_p95"):
                assert finite_pos(e[k]), (rname, m, k)
            assert all(finite_pos(t) for t in e["per_target"]["time_ms"])
            assert e["n_out_of_limits"] == 0  # the driver never returns q outside the limits
        assert info["solvers"]["lm"]["success_strict"] >= 0.9, rname
        assert ("unsupported" in info["solvers"]["fabrik"]) == (kind == "pose")
    assert res["peers"]["available"] is False
    assert "peers: not run" in p.stderr
    last = p.stdout.strip().splitlines()[-1]
    assert last.startswith("suite: ") and "peers: not run" in last


def test_suite_plot(suite_run):
    _, _, d = suite_run
    check_png(d / "img" / "bench_suite.png")
    assert (d / "img" / "bench_suite.svg").stat().st_size > 5000


def test_targets_are_the_peers_targets():
    """Same formula as bench_peers.py: with seed 2015 the targets are its saved ones."""
    for name in ("panda", "seed8dof"):
        robot = ik.load_robot(name)
        tip, _ = suite_tip(name)
        Q, T = make_targets(robot, 7, robot_seed(2015, name), tip)
        assert robot_seed(2015, name) == (2015 * 1000003 + zlib.crc32(name.encode())) % 2**32
        assert np.all(robot.within_limits(Q))
        saved = PEERS_RESULTS / f"targets_{name}.npz"
        if saved.exists():
            z = np.load(saved)
            assert np.array_equal(Q, z["q_goal"][:7])
            assert np.abs(T - z["T_goal"][:7]).max() < 1e-9


FAKE_PEERS = textwrap.dedent('''
    """Stand-in for bench_peers.py: same CLI, writes summary.json and targets_<robot>.npz."""
    import argparse, json, os, zlib
    import numpy as np
    ap = argparse.ArgumentParser()
    for a in ("--robots", "--solvers", "--out"):
        ap.add_argument(a)
    ap.add_argument("--n", type=int)
    ap.add_argument("--seed", type=int)
    ap.add_argument("--budget-ms", type=float)
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    out = {"meta": {"args": vars(a)}, "robots": {}}
    for r in a.robots.split(","):
        rs = (a.seed * 1000003 + zlib.crc32(r.encode())) % 2**32
        q = np.random.default_rng(rs).uniform(-np.pi, np.pi, size=(a.n, 8))
        np.savez(os.path.join(a.out, "targets_%s.npz" % r), q_goal=q,
                 joint_names=np.array(["joint%d" % k for k in range(8)]))
        out["robots"][r] = {"solvers": {
            "fakeik": {"n": a.n, "success_strict": 0.5, "success_loose": 0.75, "success_strict_within_budget": 0.5,
                       "n_out_of_limits": 0, "n_claimed_but_failed_strict": 1, "time_ms_median": 0.2,
                       "time_ms_mean": 0.3, "time_ms_p95": 0.9, "pos_err_median": 1e-6, "rot_err_median": None},
            "poseonly": {"skipped": "poseonly does not take position-only targets"}}}
        print("=== %s done" % r, flush=True)
    json.dump(out, open(os.path.join(a.out, "summary.json"), "w"))
''')


def test_suite_merges_peers(tmp_path):
    peers = tmp_path / "peers"
    peers.mkdir()
    (peers / "bench_peers.py").write_text(FAKE_PEERS)
    p = run_cli("bench", "suite", "--robots", "seed8dof", "--methods", "lm,ccd", "--n", "6", "--no-progress",
                "--peers-python", sys.executable, "--peers-dir", str(peers), "--json", str(tmp_path / "s.json"))
    assert p.returncode == 0, p.stderr[-3000:]
    res = json.loads((tmp_path / "s.json").read_text())
    assert res["peers"]["available"] is True
    assert res["peers"]["same_targets"] == {"seed8dof": True}
    S = res["robots"]["seed8dof"]["solvers"]
    assert set(S) == {"lm", "ccd", "peer:fakeik", "peer:poseonly"}
    assert S["peer:fakeik"]["success_strict"] == 0.5 and S["peer:fakeik"]["source"] == "peer"
    assert "unsupported" in S["peer:poseonly"]
    assert "peer:fakeik" in p.stdout and "peers| === seed8dof done" in p.stderr
    assert "2 solvers merged (same targets)" in p.stdout.strip().splitlines()[-1]


def test_suite_peers_unavailable(tmp_path):
    p = run_cli("bench", "suite", "--robots", "seed8dof", "--methods", "lm", "--n", "3", "--no-progress",
                "--peers-python", str(tmp_path / "no-such-python"), "--peers-dir", str(tmp_path))
    assert p.returncode == 0, p.stderr[-3000:]
    lines = [x for x in p.stderr.splitlines() if x.startswith("peers:")]
    assert len(lines) == 1 and "not run" in lines[0]


# --------------------------------------------------------------------------- bad input


@pytest.mark.parametrize("args, needle", [
    (("suite", "--methods", "lm,nosuch"), "nosuch"),
    (("suite", "--robots", "r2d2"), "r2d2"),
    (("suite", "--n", "-5"), "--n"),
    (("accuracy", "--methods", "nosuch"), "nosuch"),
    (("accuracy", "--goals", "-1"), "--goals"),
    (("accuracy", "--accuracies", "1e-3,-1"), "--accuracies"),
    (("accuracy", "--sets", "inside,moon"), "moon"),
])
def test_bad_input(args, needle):
    p = run_cli("bench", *args, "--no-progress", timeout=60)
    assert p.returncode == 2, (p.returncode, p.stdout[-500:], p.stderr[-500:])
    err = p.stderr.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("invkin: error:") and needle in err[0], err
    assert p.stdout == ""


def test_summary_wall_times_keep_two_digits_below_ten_seconds():
    # a --quick run used to read "in 0 s"
    from invkin.bench import seconds

    assert seconds(0.42) == "0.42 s"
    assert seconds(3.14159) == "3.1 s"
    assert seconds(12.4) == "12 s"


def test_the_suite_says_which_robots_it_runs(capsys):
    """`invkin bench --help` and the suite's docstrings said "every bundled robot"; the suite runs the
    six fixed-base chains of SUITE_ROBOTS (not g1, go2, planar2, tentacle)."""
    import invkin.bench as bench_pkg
    from invkin.bench import suite
    from invkin.cli import main
    from invkin.model.catalog import bundled_names

    assert set(suite.SUITE_ROBOTS) < set(bundled_names())
    assert main(["bench", "--help"]) == 0
    texts = [capsys.readouterr().out, suite.__doc__, bench_pkg.__doc__]
    for text in texts:
        assert "every bundled robot" not in " ".join(text.split())
    assert all(name in " ".join(suite.__doc__.split()) for name in suite.SUITE_ROBOTS)
