"""A retargeted motion in the viewer: loading a motion file, its robot and its source clip, and the
pairing checks (no server, no browser; the page itself is tested in test_viewer.py)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import invkin as ik
from invkin.retarget.motion import RobotMotion
from invkin.viewer.errors import ViewerError
from invkin.viewer.motion import motion_view

ROOT = Path(__file__).resolve().parents[1]
WALK = ROOT / "src" / "invkin" / "data" / "mocap" / "cmu_02_01_walk.bvh"
WAVE = ROOT / "src" / "invkin" / "data" / "mocap" / "fair1_wave_hello.bvh"


@pytest.fixture(scope="module")
def g1():
    return ik.load_robot("g1")


@pytest.fixture(scope="module")
def walk_clip():
    return ik.read_bvh(WALK)


def _motion(g1, n, spec="g1", clip=""):
    """A motion of n frames: G1 in its zero pose walking 2 m along -y (a synthetic stand-in for a
    retargeted clip: the pairing logic does not care how q was made)."""
    q = np.tile(np.zeros(g1.dof), (n, 1))
    q[:, 2] = 0.79
    q[:, 1] = np.linspace(1.0, -1.0, n)
    q[:, 6] = 0.3 * np.sin(np.linspace(0.0, 6.0, n))  # a joint that moves
    return RobotMotion(q, 120.0, g1.joint_names, robot_name=g1.name, robot_spec=spec, clip_path=clip)


def test_a_motion_file_records_how_to_load_its_robot_and_its_clip(g1, walk_clip, tmp_path):
    m = _motion(g1, walk_clip[1].n_frames, clip=str(WALK))
    m.save(tmp_path / "m.npz")
    back = ik.read_motion(tmp_path / "m.npz")
    assert (back.robot_spec, back.clip_path, back.robot_name) == ("g1", str(WALK), g1.name)
    mv = motion_view(tmp_path / "m.npz")  # nothing but the file: its robot, its clip
    assert mv.robot.joint_names == g1.joint_names and mv.fps == 120.0
    np.testing.assert_allclose(mv.frames, m.q, atol=1e-12)
    assert mv.clip.n_frames == len(mv.frames) and "cmu_02_01_walk.bvh" in mv.note


def test_the_source_stands_beside_the_robot_at_its_height_on_every_frame(g1, walk_clip):
    m = _motion(g1, walk_clip[1].n_frames)
    mv = motion_view(m, clip=walk_clip)
    F, n, _ = mv.source_points.shape
    assert F == m.n_frames and n == int(np.count_nonzero(walk_clip[0].is_frame))
    R = g1.fk_all_array(mv.frames)[:, g1.is_frame][..., :3, 3]
    h_rob = np.ptp(R[0, :, 2])
    assert np.ptp(mv.source_points[0, :, 2]) == pytest.approx(h_rob, rel=1e-9)  # scaled to the robot
    assert mv.source_points[..., 2].min() == pytest.approx(0.0, abs=1e-12)     # on the ground
    assert np.all(mv.source_points[..., 2].max(axis=1) > 0.8 * h_rob)           # upright (y-up clip turned)
    # beside, not over: the robot walks along y, the source is off to one side in x on every frame
    base = mv.frames[:, None, :2]
    gap = np.linalg.norm(mv.source_points[..., :2].mean(axis=1, keepdims=True) - base, axis=2)[:, 0]
    assert gap.min() > 0.5 * h_rob
    # and it moves: the clip's frames, not one pose repeated
    assert np.linalg.norm(mv.source_points[-1] - mv.source_points[0], axis=1).max() > 0.5


def test_a_clip_with_another_frame_count_is_refused(g1, walk_clip):
    m = _motion(g1, walk_clip[1].n_frames)
    with pytest.raises(ViewerError, match=r"fair1_wave_hello.bvh has \d+ frames but the motion has 344"):
        motion_view(m, clip=WAVE)


def test_not_a_motion_file_is_refused(g1, tmp_path):
    with pytest.raises(ViewerError, match="expected a motion file"):
        motion_view(WALK)
    np.savez(tmp_path / "other.npz", a=np.zeros(3))
    with pytest.raises(ik.FileError, match="not a motion file: missing keys"):
        motion_view(tmp_path / "other.npz")
    (tmp_path / "junk.npz").write_bytes(b"not a zip")
    with pytest.raises(ik.FileError, match="not a .npz motion file") as err:
        motion_view(tmp_path / "junk.npz")
    assert "zip archive" in str(err.value) and "pickle" not in str(err.value)  # was: numpy's pickle advice
    with open(tmp_path / "array.npz", "wb") as f:  # one .npy array under a .npz name
        np.save(f, np.zeros(3))
    with pytest.raises(ik.FileError, match="not a .npz motion file: a single .npy array"):  # was: AttributeError
        motion_view(tmp_path / "array.npz")


def test_an_older_file_without_robot_spec_needs_the_robot_named(g1, tmp_path):
    m = _motion(g1, 10)
    path = tmp_path / "old.npz"
    m.save(path)
    z = dict(np.load(path))
    del z["robot_spec"], z["clip"]  # what `invkin retarget` wrote before
    np.savez(path, **z)
    old = ik.read_motion(path)
    assert old.robot_spec == "" and old.clip_path == ""
    with pytest.raises(ViewerError, match="g1_29dof_rev_1_0.*--robot g1"):
        motion_view(path)
    mv = motion_view(path, robot="g1")
    assert mv.clip is None and "no source clip" in mv.note
    np.testing.assert_allclose(mv.frames, m.q, atol=1e-12)


def test_a_robot_that_cannot_be_loaded_or_does_not_fit_is_refused(g1, tmp_path):
    with pytest.raises(ViewerError, match="cannot load its robot 'g2'"):
        motion_view(_motion(g1, 10, spec="g2"))
    with pytest.raises(ViewerError, match="does not fit robot 'panda'.*missing"):
        motion_view(_motion(g1, 10), robot="panda")


def test_a_recorded_clip_that_is_gone_leaves_the_robot_playing_alone(g1, tmp_path):
    mv = motion_view(_motion(g1, 10, clip=str(tmp_path / "gone.bvh")))
    assert mv.source_points is None and "gone.bvh is not there" in mv.note


def test_the_viewer_takes_a_motion_and_refuses_a_source_without_one(g1, walk_clip):
    from invkin.viewer import ViewerApp

    m = _motion(g1, walk_clip[1].n_frames)
    app = ViewerApp(motion=m, source=walk_clip, port=0)  # not started: no server needed
    assert app.robot.name == g1.name and app.playing and app.target_frames == []
    np.testing.assert_allclose(app.current_q, m.q[0])
    with pytest.raises(ViewerError, match="source="):
        ViewerApp("g1", source=walk_clip, port=0)


@pytest.mark.slow
def test_retarget_cli_writes_a_file_the_viewer_opens_on_its_own(tmp_path):
    out = tmp_path / "walk.npz"
    r = subprocess.run([sys.executable, "-m", "invkin.cli", "retarget", str(WALK), "g1", "--out", str(out),
                        "--no-progress"], capture_output=True, text=True, timeout=600)
    assert r.returncode in (0, 1), r.stderr  # 1: written, some frames missed a hard goal
    m = ik.read_motion(out)
    assert m.robot_spec == "g1" and Path(m.clip_path) == WALK
    mv = motion_view(out)
    assert mv.clip is not None and len(mv.frames) == mv.clip.n_frames == 344
    bad = subprocess.run([sys.executable, "-m", "invkin.cli", "view", str(out), "--clip", str(WAVE), "--port", "0"],
                         capture_output=True, text=True, timeout=300)
    assert bad.returncode == 2 and "frames but the motion has 344" in bad.stderr
    assert "Traceback" not in bad.stderr

