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


def _under_armature(tmp_path):
    """The glTF walker below an "Armature" node turned 60 deg about +y and moved (5, 0, 2), as
    exporters write a skin's parent: the same motion in world space, turned."""
    import math
    pg = pytest.importorskip("pygltflib")
    doc = pg.GLTF2().load(str(Path(__file__).parent / "data" / "gltf" / "walker.glb"))
    roots = doc.scenes[doc.scene or 0].nodes
    s, c = math.sin(math.radians(30)), math.cos(math.radians(30))
    doc.nodes.append(pg.Node(name="Armature", children=list(roots), rotation=[0, s, 0, c], translation=[5.0, 0, 2.0]))
    doc.scenes[doc.scene or 0].nodes = [len(doc.nodes) - 1]
    doc.save(str(tmp_path / "armature.glb"))
    return ik.read_gltf(tmp_path / "armature.glb"), ik.read_gltf(Path(__file__).parent / "data" / "gltf" / "walker.glb")


def test_a_gltf_armature_node_above_the_hips_is_not_the_root(tmp_path):
    """read_gltf keeps the skin's ancestors (an armature node) as the clip's ROOT; the up axis, the
    root speed, the limb lengths and the root motion were taken from that static node: the up axis
    came out 'z' for a Y-up walk (foot planting on a wall: 24 of 60 frames ok, no RightFoot contact),
    the root motion had distance 0, and make_in_place refused ("the root 'Armature' has no
    Xposition"). They now follow the hips, the first node with position channels."""
    (ra, ca), (rw, cw) = _under_armature(tmp_path)
    assert ca.names[0] == "Armature" and ca.parents[1] == 0
    assert ik.detect_up_axis(ra, ca) == "y"
    plants = [ik.FootPlant("LeftFoot"), ik.FootPlant("RightFoot")]
    new_a, rep_a = ik.correct_clip(ra, ca, plants, max_iterations=20)
    new_w, rep_w = ik.correct_clip(rw, cw, plants, max_iterations=20)
    assert rep_a.up == "y" and rep_a.contacts == rep_w.contacts
    for f in rep_w.sliding_after:
        assert rep_a.sliding_after[f] == pytest.approx(rep_w.sliding_after[f], rel=1e-3, abs=1e-6)
    rm_a, rm_w = ik.extract_root_motion(ra, ca), ik.extract_root_motion(rw, cw)
    np.testing.assert_allclose(np.linalg.norm(rm_a.positions[-1] - rm_a.positions[0]),
                               np.linalg.norm(rm_w.positions[-1] - rm_w.positions[0]), rtol=1e-9)
    np.testing.assert_allclose(np.diff(rm_a.heading), np.diff(rm_w.heading), atol=1e-9)
    for remove_heading in (False, True):
        placed, _ = ik.make_in_place(ra, ca, remove_heading=remove_heading)
        P = _T(ra, placed, "Hips")[:, :3, 3]
        np.testing.assert_allclose(P[:, [0, 2]], np.repeat(P[:1, [0, 2]], len(P), axis=0), atol=1e-9)
        np.testing.assert_allclose(P[:, 1], _T(ra, ca, "Hips")[:, 1, 3], atol=1e-12)  # heights kept
        if remove_heading:  # the forward axis the extraction used keeps frame 0's heading
            k, sg = "xyz".index(rm_a.forward[1]), (1.0 if rm_a.forward[0] == "+" else -1.0)
            f = sg * _T(ra, placed, "Hips")[:, :3, k]
            assert np.ptp(np.unwrap(np.arctan2(f[:, 0], f[:, 2]))) < 1e-9
        ref = _T(ra, ca, "Hips")
        got = _T(ra, placed, "Hips")
        for name in ("LeftFoot", "Head"):  # the pose relative to the hips is unchanged
            a = np.linalg.inv(ref) @ _T(ra, ca, name)
            b = np.linalg.inv(got) @ _T(ra, placed, name)
            np.testing.assert_allclose(a, b, atol=1e-9)


def test_a_clip_that_walks_there_and_back_keeps_its_forward_axis(walk):
    """The forward axis was the one along the clip's net travel: the walk followed by the same walk
    turned about (back to the start, net travel 0) took the sideways +x, so every heading was 90 deg
    off (1.54 rad on the way out instead of -0.03). It now follows the travel frame by frame."""
    import dataclasses
    from invkin.model.euler import axis_rot, euler_from_matrix
    from invkin.model.gltf import _channels_rotation
    robot, clip = walk
    f = clip.frames[1:]  # (frame 0 is the T-pose)
    assert clip.channels[0][3:] == ("Zrotation", "Yrotation", "Xrotation")
    Y = axis_rot(1, np.pi)
    back = f.copy()
    back[:, :3] = f[-1, :3] + (f[:, :3] - f[0, :3]) @ Y.T
    back[:, 3:6] = euler_from_matrix(Y @ _channels_rotation(clip.channels[0], f[:, :6]), "ZYX")
    there_and_back = dataclasses.replace(clip, frames=np.concatenate([f, back]))
    out = ik.extract_root_motion(robot, dataclasses.replace(clip, frames=f))
    rm = ik.extract_root_motion(robot, there_and_back)
    assert rm.forward == out.forward == "+z"
    n = len(f)
    np.testing.assert_allclose(rm.heading[:n], out.heading, atol=1e-12)
    np.testing.assert_allclose(rm.heading[n:] - np.pi, out.heading, atol=1e-9)
