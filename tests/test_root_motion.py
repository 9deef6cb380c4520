"""Root motion: extraction of the root's ground trajectory and heading; clips made in place."""
from pathlib import Path

import numpy as np
import pytest

import invkin as ik

MOCAP = Path(ik.__file__).parent / "data" / "mocap"


@pytest.fixture(scope="module")
def walk():
    return ik.read_bvh(MOCAP / "cmu_02_01_walk.bvh")


def _T(robot, clip, name):
    return robot.fk(np.ascontiguousarray(clip.frames), name)


def test_extracted_trajectory_is_the_root_on_the_ground(walk):
    robot, clip = walk
    rm = ik.extract_root_motion(robot, clip)
    P = _T(robot, clip, "Hips")[:, :3, 3]
    np.testing.assert_allclose(rm.positions[:, [0, 2]], P[:, [0, 2]])
    assert np.all(rm.positions[:, 1] == 0.0) and rm.up == "y"
    # the walk goes forward: travel along the heading
    d = rm.positions[-1] - rm.positions[0]
    h = np.mean(rm.heading)
    assert np.linalg.norm(d) > 10 and abs(np.cos(np.arctan2(d[0], d[2]) - h)) > 0.9
    T = rm.transforms
    np.testing.assert_allclose(T[:, :3, 3], rm.positions)
    np.testing.assert_allclose(np.linalg.det(T[:, :3, :3]), 1.0)
    assert "RootMotion(" in repr(rm)


@pytest.mark.parametrize("remove_heading", [False, True])
def test_in_place_holds_the_root_and_keeps_the_pose_relative_to_it(walk, remove_heading):
    robot, clip = walk
    new, rm = ik.make_in_place(robot, clip, remove_heading=remove_heading)
    P = _T(robot, new, "Hips")[:, :3, 3]
    assert np.abs(P[:, [0, 2]] - P[0, [0, 2]]).max() < 1e-9
    np.testing.assert_allclose(P[:, 1], _T(robot, clip, "Hips")[:, 1, 3])  # height kept
    # only the root's channels change
    assert np.array_equal(new.frames[:, 6:], clip.frames[:, 6:])
    Ra, Rb = _T(robot, clip, "Hips"), _T(robot, new, "Hips")
    Fa, Fb = _T(robot, clip, "LeftFoot"), _T(robot, new, "LeftFoot")
    rel_a = np.linalg.inv(Ra) @ Fa
    rel_b = np.linalg.inv(Rb) @ Fb
    np.testing.assert_allclose(rel_b, rel_a, atol=1e-9)
    if remove_heading:
        rm2 = ik.extract_root_motion(robot, new)
        assert np.abs(rm2.heading - rm2.heading[0]).max() < 1e-9
        # in place + the extracted transform puts every frame back where it was
        Tw = rm.transforms @ np.linalg.inv(rm.transforms[0])
        np.testing.assert_allclose((Tw @ Fb)[:, :3, 3][:, [0, 2]], Fa[:, :3, 3][:, [0, 2]], atol=1e-7)


def test_root_without_position_channels_is_refused(walk):
    robot, clip = walk
    import dataclasses
    ch = list(clip.channels)
    ch[0] = ch[0][3:]
    bad = dataclasses.replace(clip, channels=tuple(ch), frames=clip.frames[:, 3:])
    with pytest.raises(ik.ModelError, match="position channel"):
        ik.make_in_place(None, bad, up="y")


def test_clip_without_frames_is_a_model_error_without_warnings(walk):
    import dataclasses
    import warnings

    robot, clip = walk
    empty = dataclasses.replace(clip, frames=clip.frames[:0])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "Mean of empty slice" on the way
        with pytest.raises(ik.ModelError, match="^extract_root_motion: the clip has no frames$"):
            ik.extract_root_motion(robot, empty, up="y")
        with pytest.raises(ik.ModelError, match="^make_in_place: the clip has no frames$"):
            ik.make_in_place(robot, empty, up="y")
    # one frame is a trajectory of one point
    rm = ik.extract_root_motion(robot, dataclasses.replace(clip, frames=clip.frames[:1]), up="y")
    assert rm.positions.shape == (1, 3) and rm.positions[0, 1] == 0.0


def test_up_axis_is_detected_from_ankles_when_no_joint_is_named_foot():
    """mocapdata.com skeletons name their feet LeftAnkle/RightAnkle (fix-feet finds them): the up axis
    was 'cannot detect ... no joint named like a foot', so extract_root_motion needed up= there."""
    robot, clip = ik.read_bvh(Path(ik.__file__).parent / "data" / "mocap" / "eyesjapan_mocapdata_sample_6ch.bvh")
    assert not any("foot" in n.lower() for n in clip.joint_names)
    assert ik.detect_up_axis(robot, clip) == "y"
    assert ik.extract_root_motion(robot, clip).up == "y"
