"""Motion retargeting (invkin.retarget): bundled clips onto the bundled G1, checked from the output
configurations alone (forward kinematics, the URDF's own foot spheres, coal on the link meshes),
never from the solver's rows."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import invkin as ik
from invkin.retarget import MappingError, bundled_mappings, load_mapping, propose_mapping

MOCAP = Path(ik.__file__).parent / "data" / "mocap"
FEET = ("left_ankle_roll_link", "right_ankle_roll_link")


@pytest.fixture(scope="module")
def g1():
    return ik.load_robot("g1")


@pytest.fixture(scope="module")
def wave(g1):
    sk, clip = ik.read_bvh(MOCAP / "fair1_wave_hello.bvh")
    return sk, clip, ik.retarget(sk, clip, g1)


@pytest.fixture(scope="module")
def walk(g1):
    sk, clip = ik.read_bvh(MOCAP / "cmu_02_01_walk.bvh")
    return sk, clip, ik.retarget(sk, clip, g1)


def _sole_heights(robot, q, link):
    """(F, k) heights of the bottoms of the URDF's collision spheres of ``link`` [m]."""
    Ts = robot.fk(q, link)
    out = []
    for g in robot.collisions:
        if g.link == link and g.kind == "sphere":
            c = Ts[:, :3, :3] @ g.T_link_geom[:3, 3] + Ts[:, :3, 3]
            out.append(c[:, 2] - g.size[0])
    return np.stack(out, axis=1)


def _contacts(sk, clip, foot):
    return [(c.start, c.stop) for c in ik.detect_contacts(sk, clip, foot)]


def _mesh_collisions(robot, q, frames):
    """Colliding link pairs per frame by coal on the real collision meshes (the capsules are used only
    to skip pairs that are certainly apart: they enclose the meshes)."""
    pytest.importorskip("coal")
    from invkin.collision.reference import CoalReference

    ref = CoalReference(robot, self_collision=False)
    return np.array([len(ref.colliding(q[f], ik.distances(robot, q[f], cutoff=0.0).pairs)) for f in frames])


@pytest.mark.parametrize("clip_fixture", ["wave", "walk"])
def test_retargeted_clip_keeps_feet_planted_out_of_the_floor_and_inside_the_limits(clip_fixture, g1, request):
    sk, clip, motion = request.getfixturevalue(clip_fixture)
    q = motion.q
    assert q.shape == (clip.n_frames, g1.dof) and motion.fps == pytest.approx(clip.fps)
    source_feet = {"wave": ("LeftFoot", "RightFoot"), "walk": ("LeftFoot", "RightFoot")}[clip_fixture]
    n_contacts = 0
    for foot, link in zip(source_feet, FEET):
        p = g1.fk(q, link)[:, :2, 3]
        for s, e in _contacts(sk, clip, foot):
            n_contacts += 1
            slide = np.linalg.norm(p[s:e] - p[s], axis=1).max()
            assert slide <= 0.01, f"{link} slides {slide * 1000:.1f} mm during contact {s}-{e}"
        assert _sole_heights(g1, q, link).min() >= -0.005
    assert n_contacts >= 2
    assert np.all(q >= g1.lower - 1e-9) and np.all(q <= g1.upper + 1e-9)
    assert motion.report.limit_violations == 0
    # joint speeds within the URDF velocity limits (hard), the floating base excluded
    v = np.abs(np.diff(q[:, 6:], axis=0)) * motion.fps
    assert np.all(v <= g1.velocity_limit[6:] * (1 + 1e-6))


def test_readme_states_the_walks_missed_frames_and_foot_slide_as_measured(walk):
    """The feet are hard goals, not a promise of no sliding: the README's figures are the report's."""
    import re

    readme = " ".join((Path(__file__).parents[1] / "README.md").read_text().split())
    assert "no sliding" not in readme
    m = re.search(r"CMU walk \((\d+) frames, read in its own units\) onto the G1 has (\d+) such frames and feet "
                  r"that slide at most ([\d.]+) mm", readme)
    assert m, "the README's retargeting paragraph lost its measured figures"
    rep = walk[2].report
    assert int(m.group(1)) == walk[1].n_frames
    assert abs(int(m.group(2)) - len(rep.missed_frames)) <= 2  # 27 measured; a CPU's rounding may move a frame
    assert float(m.group(3)) == pytest.approx(rep.max_foot_slide * 1000, abs=0.1)


def test_retargeted_wave_has_no_mesh_self_collision_and_no_joint_jump_over_0_2_rad(wave, g1):
    sk, clip, motion = wave
    q = motion.q
    assert np.abs(np.diff(q[:, 6:], axis=0)).max() <= 0.2
    assert _mesh_collisions(g1, q, range(0, clip.n_frames, 7)).max() == 0
    assert motion.report.self_collision_frames == 0


@pytest.mark.slow
def test_retargeted_walk_has_no_mesh_self_collision(walk, g1):
    sk, clip, motion = walk
    assert _mesh_collisions(g1, motion.q, range(0, clip.n_frames, 3)).max() == 0


def test_report_figures_agree_with_forward_kinematics(walk, g1):
    sk, clip, motion = walk
    rep = motion.report
    assert rep.n_frames == clip.n_frames and len(rep.contacts) == len(rep.foot_slide) > 0
    for (link, s, e), slide in zip(rep.contacts, rep.foot_slide):
        p = g1.fk(motion.q[s:e], link)[:, :2, 3]
        assert slide == pytest.approx(np.linalg.norm(p - p[0], axis=1).max(), abs=1e-12)
    pen = np.maximum(0.0, -np.minimum(_sole_heights(g1, motion.q, FEET[0]).min(1),
                                      _sole_heights(g1, motion.q, FEET[1]).min(1)))
    np.testing.assert_allclose(rep.penetration, pen, atol=1e-9)
    assert rep.max_joint_jump == pytest.approx(np.abs(np.diff(motion.q[:, 6:], axis=0)).max())
    assert set(json.loads(json.dumps(rep.summary()))) >= {"max_foot_slide_m", "max_penetration_m"}
    assert "RetargetReport(" in repr(rep)


def test_hands_and_pelvis_follow_the_scaled_source(wave, g1):
    rep = wave[2].report
    assert np.nanmedian(rep.position_error) < 0.03
    i = rep.bodies.index("pelvis")
    assert np.nanmax(rep.position_error[:, i]) < 0.05


def test_limb_targets_keep_the_robots_segment_lengths(g1):
    from invkin.retarget.mapping import bundled_mapping
    from invkin.retarget.scale import make_targets, robot_rest

    sk, clip = ik.read_bvh(MOCAP / "cmu_02_01_walk.bvh")
    m = bundled_mapping(clip, g1)
    t = make_targets(sk, clip, g1, m)
    links = [b.link for b in m.bodies]
    q0 = robot_rest(g1)
    for a, b in (("left_knee_link", "left_ankle_roll_link"), ("right_elbow_link", "right_wrist_yaw_link")):
        want = np.linalg.norm(g1.fk(q0, a)[:3, 3] - g1.fk(q0, b)[:3, 3])
        got = np.linalg.norm(t.p[:, links.index(a)] - t.p[:, links.index(b)], axis=1)
        j = links.index(b)
        free = ~t.contact[:, j] & (t.p[:, j, 2] > t.sole_height.get(j, -np.inf) + 1e-9)  # not held nor lifted
        assert free.sum() > 50
        np.testing.assert_allclose(got[free], want, rtol=1e-6)


def test_npz_round_trip_keeps_every_link_pose(wave, g1, tmp_path):
    motion = wave[2]
    path = tmp_path / "m.npz"
    motion.save(path)
    z = np.load(path)
    assert set(z.files) == {"root_position", "root_quat_wxyz", "joint_positions", "joint_names", "fps", "robot",
                            "robot_spec", "clip", "floating_base"}
    assert str(z["floating_base"]) == "root_joint"
    np.testing.assert_allclose(np.linalg.norm(z["root_quat_wxyz"], axis=1), 1.0, atol=1e-12)
    back = ik.read_motion(path)
    assert back.joint_names == motion.joint_names and back.fps == motion.fps and back.n_frames == motion.n_frames
    Ta, Tb = g1.fk_all_array(motion.q), g1.fk_all_array(back.q)
    np.testing.assert_allclose(Ta, Tb, atol=1e-9)


def test_python_motion_records_robot_and_clip_as_the_readme_says(wave, tmp_path):
    """retarget cannot know the bundled name nor the clip's file; the README's recipe records them."""
    import dataclasses

    motion = wave[2]
    motion.save(tmp_path / "bare.npz")
    bare = ik.read_motion(tmp_path / "bare.npz")
    assert (bare.robot_spec, bare.clip_path) == ("", "")
    clip = str(MOCAP / "fair1_wave_hello.bvh")
    dataclasses.replace(motion, robot_spec="g1", clip_path=clip).save(tmp_path / "m.npz")
    back = ik.read_motion(tmp_path / "m.npz")
    assert (back.robot_spec, back.clip_path) == ("g1", clip)
    assert ik.load_robot(back.robot_spec).joint_names == motion.joint_names
    readme = (Path(__file__).parents[1] / "README.md").read_text()
    assert 'dataclasses.replace(motion, robot_spec="g1", clip_path="walk.bvh")' in readme
    assert "invkin view walk_g1.npz --robot g1 --clip walk.bvh" in readme


def test_csv_has_a_row_per_frame_and_the_joint_names(wave, tmp_path):
    motion = wave[2]
    path = tmp_path / "m.csv"
    motion.save(path)
    lines = path.read_text().splitlines()
    head = lines[0].split(",")
    assert head[:9] == ["frame", "time", "root_x", "root_y", "root_z", "root_qw", "root_qx", "root_qy", "root_qz"]
    assert head[9:] == list(motion.joint_names[6:]) and len(lines) == motion.n_frames + 1
    row = np.array(lines[5].split(","), dtype=float)
    np.testing.assert_allclose(row[9:], motion.q[4, 6:], rtol=1e-15)


def test_bundled_mappings_load_and_fit_their_clips(g1):
    maps = bundled_mappings()
    assert {"cmu_g1", "maxfriendly_g1", "daz_g1"} <= set(maps)
    for clip_name in ("cmu_02_01_walk", "cmu_02_03_run_dazfriendly", "cmu_131_01_walk_crouch_3dsmaxfriendly",
                      "eyesjapan_mocapdata_sample_6ch", "fair1_wave_hello", "cmu_49_04_run_leap"):
        sk, clip = ik.read_bvh(MOCAP / f"{clip_name}.bvh")
        ik.bundled_mapping(clip, g1).check(clip, g1)


def test_mapping_round_trips_through_toml_and_json(tmp_path, g1):
    m = load_mapping(bundled_mappings()["cmu_g1"])
    p = tmp_path / "m.toml"
    p.write_text(m.to_toml())
    assert load_mapping(p) == m
    import tomllib

    j = tmp_path / "m.json"
    j.write_text(json.dumps(tomllib.loads(m.to_toml())))
    assert load_mapping(j) == m


def test_proposed_mapping_finds_feet_hands_and_root(g1):
    sk, clip = ik.read_bvh(MOCAP / "cmu_02_01_walk.bvh")
    m = propose_mapping(sk, clip, g1)
    by_role = {}
    for b in m.bodies:
        by_role.setdefault(b.role, []).append((b.source, b.link))
    assert by_role["root"] == [("Hips", "pelvis")]
    assert sorted(by_role["foot"]) == [("LeftFoot", "left_ankle_roll_link"), ("RightFoot", "right_ankle_roll_link")]
    assert sorted(s for s, _ in by_role["hand"]) == ["LeftHand", "RightHand"]
    assert all("wrist" in ln or "hand" in ln for _, ln in by_role["hand"])
    motion = ik.retarget(sk, clip, g1, mapping=m)  # usable as it is
    assert motion.report.limit_violations == 0


def test_unknown_names_in_a_mapping_name_the_closest(tmp_path, g1):
    sk, clip = ik.read_bvh(MOCAP / "cmu_02_01_walk.bvh")
    text = load_mapping(bundled_mappings()["cmu_g1"]).to_toml()
    bad = tmp_path / "bad.toml"
    bad.write_text(text.replace('"LeftFoot"', '"LeftFot"'))
    with pytest.raises(ik.FrameError, match="LeftFot.*closest.*LeftFoot"):
        ik.retarget(sk, clip, g1, mapping=bad)
    bad.write_text(text.replace('"left_ankle_roll_link"', '"left_ankle_link"'))
    with pytest.raises(ik.FrameError, match="left_ankle_link.*closest.*left_ankle"):
        ik.retarget(sk, clip, g1, mapping=bad)
    bad.write_text(text.replace("position_weight", "positon_weight", 1))
    with pytest.raises(MappingError, match="positon_weight.*closest.*position_weight"):
        load_mapping(bad)
    bad.write_text(text.replace('role = "root"', 'role = "body"'))
    with pytest.raises(MappingError, match="exactly one body with role"):
        load_mapping(bad)
    bad.write_text("name = [")
    with pytest.raises(MappingError, match="not valid TOML"):
        load_mapping(bad)
    with pytest.raises(ik.FileError, match="no such"):
        load_mapping(tmp_path / "missing.toml")


def test_bad_arguments_are_refused(g1):
    sk, clip = ik.read_bvh(MOCAP / "cmu_02_01_walk.bvh")
    with pytest.raises(ik.ModelError, match="floating base"):
        ik.retarget(sk, clip, ik.load_robot("panda"))
    with pytest.raises(MappingError, match="margin"):
        ik.retarget(sk, clip, g1, margin=-1)
    with pytest.raises(ik.InvkinError, match="iterations"):
        ik.retarget(sk, clip, g1, iterations=0)
    with pytest.raises(ik.ModelError, match="Clip"):
        ik.retarget(sk, "clip.bvh", g1)
    with pytest.raises(ik.FileError, match="motion"):
        ik.read_motion(MOCAP / "cmu_02_01_walk.bvh")


def test_clip_without_a_frame_time_or_frames_or_of_another_skeleton_is_refused(g1):
    """No rate is assumed: the velocity bounds and the contacts need the clip's own frame time."""
    import dataclasses

    sk, clip = ik.read_bvh(MOCAP / "cmu_02_01_walk.bvh")
    with pytest.raises(ik.ModelError, match="retarget: the clip's frame time is 0; speeds are undefined"):
        ik.retarget(sk, dataclasses.replace(clip, frame_time=0.0), g1)
    with pytest.raises(ik.ModelError, match="retarget: the clip has no frames"):
        ik.retarget(sk, dataclasses.replace(clip, frames=clip.frames[:0]), g1)
    other = ik.read_bvh(MOCAP / "fair1_wave_hello.bvh")[0]
    with pytest.raises(ik.ModelError, match=r"its 84 joints and the clip's 96 channels first differ at index 3: "
                                            r"'Hips.Xrotation' in the robot, 'Hips.Zrotation' in the clip"):
        ik.retarget(other, clip, g1)


def test_read_motion_of_the_csv_export_says_it_reads_npz_files(tmp_path):
    from invkin.retarget.motion import RobotMotion

    names = ("root_joint.x", "root_joint.y", "root_joint.z", "root_joint.rx", "root_joint.ry", "root_joint.rz", "knee")
    motion = RobotMotion(np.zeros((3, 7)), 30.0, names, robot_name="r")
    motion.save(tmp_path / "m.csv")
    with pytest.raises(ik.FileError) as e:
        ik.read_motion(tmp_path / "m.csv")
    msg = str(e.value)
    assert msg.startswith(f"{tmp_path / 'm.csv'}: read_motion reads the .npz files") and "export only" in msg
    assert "pickled" not in msg
    (tmp_path / "renamed.txt").write_bytes((tmp_path / "m.csv").read_bytes())  # known by its header too
    with pytest.raises(ik.FileError, match="renamed.txt: read_motion reads the .npz files"):
        ik.read_motion(tmp_path / "renamed.txt")


# --------------------------------------------------------------------------- command line and datasets

def _cli(*args, cwd=None):
    import subprocess
    import sys

    return subprocess.run([sys.executable, "-m", "invkin.cli", *map(str, args)], capture_output=True, text=True,
                          cwd=cwd, timeout=600)


@pytest.mark.slow
def test_cli_retargets_a_clip_to_npz_and_csv_with_a_progress_bar(tmp_path, g1):
    out, csv = tmp_path / "m.npz", tmp_path / "m.csv"
    mp = tmp_path / "map.toml"
    mp.write_text(load_mapping(bundled_mappings()["cmu_g1"]).to_toml())
    r = _cli("retarget", MOCAP / "fair1_wave_hello.bvh", "g1", "--mapping", mp, "--out", out, "--csv", csv)
    assert r.returncode == 0, r.stderr
    assert "frame" in r.stderr and "100%" in r.stderr  # the progress bar
    assert "0 limit violations" in r.stdout and str(out) in r.stdout
    motion = ik.read_motion(out)
    assert motion.n_frames == 839 and len(csv.read_text().splitlines()) == 840
    sk, clip = ik.read_bvh(MOCAP / "fair1_wave_hello.bvh")
    direct = ik.retarget(sk, clip, g1, mapping=mp)
    np.testing.assert_allclose(g1.fk_all_array(motion.q), g1.fk_all_array(direct.q), atol=1e-9)
    r = _cli("retarget", MOCAP / "fair1_wave_hello.bvh", "g1", "--out", tmp_path / "x.npz", "--json", "--no-progress")
    assert r.returncode == 0 and json.loads(r.stdout)["limit_violations"] == 0 and r.stderr == ""


@pytest.mark.slow
def test_cli_bad_input_is_one_line_and_exit_2(tmp_path):
    r = _cli("retarget", tmp_path / "missing.bvh", "g1", "--out", tmp_path / "m.npz")
    assert r.returncode == 2 and "missing.bvh" in r.stderr and "Traceback" not in r.stderr
    r = _cli("retarget", MOCAP / "fair1_wave_hello.bvh", "g1", "--out", tmp_path / "m.txt")
    assert r.returncode == 2 and ".npz" in r.stderr
    bad = tmp_path / "bad.toml"
    bad.write_text(load_mapping(bundled_mappings()["cmu_g1"]).to_toml().replace('"LeftHand"', '"LeftHnd"'))
    r = _cli("retarget", MOCAP / "fair1_wave_hello.bvh", "g1", "--mapping", bad, "--out", tmp_path / "m.npz")
    assert r.returncode == 2 and "LeftHnd" in r.stderr and "LeftHand" in r.stderr
    assert not (tmp_path / "m.npz").exists()


@pytest.mark.slow
def test_cli_retargets_a_folder_resumably_and_records_failures(tmp_path):
    import shutil

    src = tmp_path / "clips"
    (src / "sub").mkdir(parents=True)
    shutil.copy(MOCAP / "fair1_wave_hello.bvh", src)
    shutil.copy(MOCAP / "cmu_49_04_run_leap.bvh", src / "sub")
    (src / "broken.bvh").write_text("HIERARCHY\nROOT")
    out = tmp_path / "out"
    r = _cli("retarget", src, "g1", "--out", out, "--no-progress")
    assert r.returncode == 1 and "broken.bvh" in r.stderr and "tmp" not in r.stderr.split("broken.bvh:")[1][:3]
    m = json.loads((out / "retarget_manifest.json").read_text())
    assert sorted(m["clips"]) == ["broken.bvh", "fair1_wave_hello.bvh", "sub/cmu_49_04_run_leap.bvh"]
    assert m["failed"] == ["broken.bvh"] and m["computed"] == 3
    leap = ik.read_motion(out / "sub" / "cmu_49_04_run_leap.npz")
    assert leap.n_frames == 252
    # each file says what loads its robot and where its clip is, so `invkin view` opens it alone
    assert leap.robot_spec == "g1" and leap.clip_path == str((src / "sub" / "cmu_49_04_run_leap.bvh").resolve())
    first = (out / "fair1_wave_hello.npz").read_bytes()
    (out / "sub" / "cmu_49_04_run_leap.npz").unlink()  # a lost output is redone, the rest skipped
    r = _cli("retarget", src, "g1", "--out", out, "--no-progress", "--json")
    s = json.loads(r.stdout)
    assert s["computed"] == 1 and s["skipped"] == 2 and (out / "fair1_wave_hello.npz").read_bytes() == first
    r = _cli("retarget", src, "g1", "--out", out, "--no-progress", "--margin", "0.01")  # another job
    assert r.returncode == 2 and "another retargeting job" in r.stderr


@pytest.mark.slow
def test_dataset_on_a_dask_cluster_writes_the_same_files(tmp_path):
    distributed = pytest.importorskip("dask.distributed")
    import shutil

    from invkin.retarget.dataset import retarget_dataset

    src = tmp_path / "clips"
    src.mkdir()
    shutil.copy(MOCAP / "cmu_49_04_run_leap.bvh", src)
    retarget_dataset(src, "g1", tmp_path / "local", progress=False)
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=False) as cluster, \
            distributed.Client(cluster) as client:
        m = retarget_dataset(src, "g1", tmp_path / "dask", client=client, progress=False)
    assert m["computed"] == 1 and not m["failed"]
    a = np.load(tmp_path / "local" / "cmu_49_04_run_leap.npz")
    b = np.load(tmp_path / "dask" / "cmu_49_04_run_leap.npz")
    for k in a.files:
        np.testing.assert_array_equal(a[k], b[k])


_GOOD_NPZ = dict(root_position=np.zeros((4, 3)), root_quat_wxyz=np.tile([1.0, 0, 0, 0], (4, 1)),
                 joint_positions=np.zeros((4, 2)), joint_names=np.array(["a", "b"]), fps=np.float64(30),
                 robot=np.array("r"))


@pytest.mark.parametrize("case, change, expected", [
    ("0-d positions", {"joint_positions": np.float64(1.0)}, r"joint_positions"),
    ("text positions", {"joint_positions": np.array([["a", "b"]] * 4)}, r"joint_positions.*numbers"),
    ("NaN positions", {"joint_positions": np.full((4, 2), np.nan)}, r"finite"),
    ("zero quaternion", {"root_quat_wxyz": np.zeros((4, 4))}, r"root_quat_wxyz.*frame 0"),
    ("fps 0", {"fps": np.float64(0.0)}, r"fps"),
    ("fps of two values", {"fps": np.array([1.0, 2.0])}, r"fps"),
    ("fps as text", {"fps": np.array("x")}, r"fps"),
    ("object names", {"joint_names": np.array(["a", None], dtype=object)}, r"Object arrays cannot be loaded"),
])
def test_a_damaged_motion_npz_is_a_file_error_naming_the_file(tmp_path, case, change, expected):
    p = tmp_path / "m.npz"
    np.savez(p, **{**_GOOD_NPZ, **change})
    with pytest.raises(ik.InvkinError, match=expected) as e:
        ik.read_motion(p)
    assert str(e.value).startswith(str(p)), str(e.value)


def test_a_truncated_motion_npz_is_a_file_error(tmp_path):
    p = tmp_path / "m.npz"
    np.savez(p, **_GOOD_NPZ)
    data = p.read_bytes()
    for cut in (4, 60, len(data) // 2, len(data) - 10):
        p.write_bytes(data[:cut])
        with pytest.raises(ik.FileError, match=r"m\.npz: not a \.npz motion file"):
            ik.read_motion(p)


def test_a_motion_of_the_floating_base_alone_round_trips(tmp_path):
    q = np.zeros((3, 6))
    q[:, 0] = [0.0, 0.1, 0.2]
    m = ik.RobotMotion(q, 30.0, ("root_joint.x", "root_joint.y", "root_joint.z", "root_joint.rx", "root_joint.ry",
                                 "root_joint.rz"), robot_name="box")
    m.save(tmp_path / "m.npz")
    back = ik.read_motion(tmp_path / "m.npz")
    assert back.joint_names == m.joint_names
    np.testing.assert_allclose(back.q, m.q, atol=1e-15)


def test_a_fixed_base_motion_reads_back_without_a_floating_base(tmp_path):
    """A fixed-base robot's motion came back with six zero base columns (the file had no flag):
    q no longer fitted its robot."""
    panda = ik.load_robot("panda")
    q = np.array([panda.neutral(), panda.neutral() + 0.1])
    m = ik.RobotMotion(q, 25.0, panda.joint_names, robot_name=panda.name)
    m.save(tmp_path / "m.npz")
    back = ik.read_motion(tmp_path / "m.npz")
    assert not back.floating and back.joint_names == panda.joint_names
    np.testing.assert_array_equal(back.q, q)
    np.testing.assert_allclose(panda.fk(back.q, "panda_hand"), panda.fk(q, "panda_hand"), atol=0)


def test_a_floating_base_keeps_its_joint_name(tmp_path):
    names = tuple(f"base.{a}" for a in ("x", "y", "z", "rx", "ry", "rz")) + ("j",)
    m = ik.RobotMotion(np.zeros((2, 7)) + 0.1, 30.0, names)
    m.save(tmp_path / "m.npz")
    back = ik.read_motion(tmp_path / "m.npz")
    assert back.joint_names == names and back.base_joint == "base"
    np.testing.assert_allclose(back.q, m.q, atol=1e-15)


def test_a_fixed_base_file_with_a_moving_root_is_a_file_error(tmp_path):
    p = tmp_path / "m.npz"
    np.savez(p, **{**_GOOD_NPZ, "floating_base": np.array(""), "root_position": np.ones((4, 3))})
    with pytest.raises(ik.FileError, match=r"floating_base is \"\" .* not the identity"):
        ik.read_motion(p)
