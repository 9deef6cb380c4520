"""The examples run as scripts (a subprocess each, a temporary output folder) and do what they say."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import invkin as ik

pytestmark = pytest.mark.slow  # runs the example programs (make test-fast skips them)

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
PNG = b"\x89PNG\r\n\x1a\n"


def run_example(name, out_dir):
    r = subprocess.run([sys.executable, str(EXAMPLES / name), str(out_dir)], capture_output=True, text=True,
                       timeout=300, env={**__import__("os").environ, "MPLBACKEND": "Agg"})
    assert r.returncode == 0, r.stderr[-3000:]
    return r.stdout


def number(pattern, text):
    m = re.search(pattern, text)
    assert m, f"{pattern!r} not in the output:\n{text}"
    return float(m.group(1))


def check_png(path):
    data = path.read_bytes()
    assert data.startswith(PNG) and len(data) > 20_000  # a real figure, not an empty canvas


def test_foot_planting_example(tmp_path):
    out = run_example("foot_planting.py", tmp_path)
    check_png(tmp_path / "foot_planting.png")
    robot, clip = ik.read_bvh(tmp_path / "walk_planted.bvh")
    _, orig = ik.read_bvh(Path(ik.__file__).parent / "data" / "mocap" / "cmu_02_01_walk.bvh")
    assert clip.n_frames == orig.n_frames == 344
    np.testing.assert_allclose(clip.frames[:, :3], orig.frames[:, :3], atol=1e-9)  # root translation
    before = number(r"sliding overall: before ([0-9.eE+-]+)", out)
    after = number(r"sliding overall: before [0-9.eE+-]+ after ([0-9.eE+-]+)", out)
    assert before > 1.0 and after <= 0.5 * before
    for foot in ("LeftFoot", "RightFoot"):
        b = number(foot + r": sliding before ([0-9.eE+-]+) units/s", out)
        a = number(foot + r": sliding before [0-9.eE+-]+ units/s \([0-9.]+ cm/s\), after ([0-9.eE+-]+)", out)
        assert a <= 0.5 * b
        # the printed numbers are the clip's: recompute them from the written file
        contacts = ik.detect_contacts(None, orig, foot)
        P = robot.fk(clip.frames, foot)[:, :3, 3]
        assert ik.foot_sliding(P, contacts, clip.frame_time, "y") == pytest.approx(a, rel=0.05, abs=2e-3)


def test_hand_reach_example(tmp_path):
    out = run_example("hand_reach.py", tmp_path)
    check_png(tmp_path / "hand_reach.png")
    robot, clip = ik.read_bvh(tmp_path / "wave_reach.bvh")
    assert clip.n_frames == 839
    worst = number(r"tracking error over frames 300-539: max ([0-9.eE+-]+)", out)
    assert worst <= 1e-3
    assert number(r"status over the range: (\d+) ok", out) == 240
    assert "unchanged: True" in out
    captured = number(r"the captured hand, for comparison: max ([0-9.eE+-]+)", out)
    assert captured > 1.0  # the correction did something


def test_humanoid_reach_example(tmp_path):
    out = run_example("humanoid_reach.py", tmp_path)
    check_png(tmp_path / "humanoid_reach.png")
    robot = ik.load_robot("g1")
    data = np.load(tmp_path / "humanoid_reach.npz")
    assert tuple(data["joint_names"]) == robot.joint_names
    q_stance, support, targets = data["q_stance"], data["support"], data["targets"]
    feet = ("left_ankle_roll_link", "right_ankle_roll_link")
    hand = "right_rubber_hand"
    assert list(data["status"]) == ["converged"] * 8 + ["unreachable"]
    assert out.count("goals met (feet, feet, balance, hand): yes yes yes yes") == 8
    assert out.count("goals met (feet, feet, balance, hand): yes yes yes no") == 1
    np.testing.assert_allclose(support[:2], np.mean([robot.fk(q_stance, f)[:2, 3] for f in feet], axis=0),
                               atol=1e-12)
    for q, target in zip(data["q"], targets):  # recompute what the example prints
        assert robot.within_limits(q)
        for f in feet:  # hard: held within the tolerance whatever the hand asks
            assert np.linalg.norm(robot.fk(q, f)[:3, 3] - robot.fk(q_stance, f)[:3, 3]) <= 1e-6
        assert np.linalg.norm(robot.center_of_mass(q)[:2] - support[:2]) <= 1e-6  # balanced
    np.testing.assert_allclose(data["com"], robot.center_of_mass(data["q"]), atol=1e-12)
    for q, target in zip(data["q"][:8], targets[:8]):
        assert np.linalg.norm(robot.fk(q, hand)[:3, 3] - target) <= 1e-6
    p_hand = robot.fk(q_stance, hand)[:3, 3]
    np.testing.assert_allclose(targets[7] - p_hand, (0.3, 0.0, -0.5), atol=1e-12)
    np.testing.assert_allclose(targets[8] - p_hand, (1.0, 0.0, 0.0), atol=1e-12)
    # the unreachable target: the hand stops short, nearer than where the crouch left it
    far = np.linalg.norm(robot.fk(data["q"][8], hand)[:3, 3] - targets[8])
    assert 0.1 < far < np.linalg.norm(robot.fk(data["q"][7], hand)[:3, 3] - targets[8])
    assert number(r"final pelvis drop: ([0-9.]+) cm", out) > 5.0  # it crouched


def test_retarget_example(tmp_path):
    out = run_example("retarget_g1.py", tmp_path)
    check_png(tmp_path / "retarget_g1.png")
    motion = ik.read_motion(tmp_path / "walk_g1.npz")
    assert motion.n_frames == 344 and motion.robot_name.startswith("g1")
    slides = [float(x) for x in re.findall(r"slide ([0-9.]+) mm", out)]
    assert len(slides) >= 4 and max(slides) <= 10.0
    assert number(r"max penetration ([0-9.]+) mm", out) <= 5.0
    assert number(r"([0-9]+) limit violations", out) == 0
