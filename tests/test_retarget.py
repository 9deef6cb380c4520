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


@pytest.fixture(scope="module")
def crouch(g1):
    sk, clip = ik.read_bvh(MOCAP / "cmu_131_01_walk_crouch_3dsmaxfriendly.bvh")
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
    assert abs(int(m.group(2)) - len(rep.missed_frames)) <= 2  # 0 measured (12 before session 16); a CPU's rounding may move a frame
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


def _chain_urdf(chains, shaped=()) -> str:
    """A URDF of revolute chains below ``base_link``, 0.1 m per link down -z, 0.2 m apart sideways
    (left +y); the links in ``shaped`` get a collision sphere of radius 0.03 m."""
    def link(n):
        if n not in shaped:
            return f'<link name="{n}"/>'
        return f'<link name="{n}"><collision><geometry><sphere radius="0.03"/></geometry></collision></link>'

    links, joints = ["base_link"], []
    for chain in chains:
        parent = "base_link"
        for name in chain:
            links.append(name)
            y = (0.1 if name[0] == "l" else -0.1) if parent == "base_link" else 0.0
            joints.append(f'<joint name="{name}_joint" type="revolute"><parent link="{parent}"/><child link="{name}"/>'
                          f'<origin xyz="0 {y} -0.1"/><axis xyz="0 1 0"/>'
                          f'<limit lower="-1" upper="1" effort="1" velocity="10"/></joint>')
            parent = name
    return ('<robot name="icub_like">' + "".join(link(n) for n in links) + "".join(joints) + "</robot>")


def test_proposed_mapping_reads_names_without_their_separators(tmp_path):
    """iCub's legs are l_hip_1 .. l_hip_3, l_upper_leg (thigh), l_lower_leg (shin), l_foot: before,
    "upperleg" did not match "upper_leg", so the source's knee went onto the thigh link (at the hip)."""
    chains = [[f"{s}_{n}" for n in ("hip_1", "hip_2", "upper_leg", "lower_leg", "ankle_1", "foot")] for s in "lr"]
    chains += [[f"{s}_{n}" for n in ("shoulder_1", "upper_arm", "elbow_1", "forearm", "hand")] for s in "lr"]
    (tmp_path / "icub_like.urdf").write_text(_chain_urdf(chains))
    robot = ik.load_robot(tmp_path / "icub_like.urdf", floating_base=True)
    sk, clip = ik.read_bvh(MOCAP / "cmu_02_01_walk.bvh")
    pairs = {b.source: b.link for b in propose_mapping(sk, clip, robot).bodies}
    assert pairs["LeftUpLeg"] == "l_upper_leg" and pairs["RightUpLeg"] == "r_upper_leg"
    assert pairs["LeftLeg"] == "l_lower_leg" and pairs["RightLeg"] == "r_lower_leg"
    assert pairs["LeftFoot"] == "l_foot" and pairs["LeftHand"] == "l_hand" and pairs["LeftArm"] == "l_upper_arm"


def test_a_foot_mapped_above_the_link_with_its_sole_is_refused_and_not_proposed(tmp_path):
    """Romeo's LAnklePitchLink has no collision shapes; its child l_ankle (the sole) has. Before, the
    draft took LAnklePitchLink and the retargeting put that link's origin on the floor: Romeo's
    l_sole stood 68 mm under the floor while the report said penetration 0.0 mm."""
    legs = [[f"{s}_{n}" for n in ("hip_roll", "knee", "ankle_pitch", "ankle")] for s in "lr"]
    (tmp_path / "r.urdf").write_text(_chain_urdf(legs, shaped=("l_ankle", "r_ankle")))
    robot = ik.load_robot(tmp_path / "r.urdf", floating_base=True)
    sk, clip = ik.read_bvh(MOCAP / "cmu_49_04_run_leap.bvh")
    pairs = {b.source: b.link for b in propose_mapping(sk, clip, robot).bodies}
    assert pairs["LeftFoot"] == "l_ankle" and pairs["RightFoot"] == "r_ankle"
    bad = load_mapping({"body": [{"source": "Hips", "link": "base_link", "role": "root"},
                                 {"source": "LeftFoot", "link": "l_ankle_pitch", "role": "foot"},
                                 {"source": "RightFoot", "link": "r_ankle", "role": "foot"}]})
    with pytest.raises(MappingError, match=r"foot 'LeftFoot' -> link 'l_ankle_pitch' has no collision shapes to "
                                           r"stand on .* but 'l_ankle' below it have"):
        ik.retarget(sk, clip, robot, mapping=bad)


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


# --------------------------------------------------------------------------- arguments checked before the work

@pytest.mark.parametrize("kw, error, expected", [
    ({"up": "-y"}, ik.GoalError, r"up: expected 'y', 'z'"),
    ({"margin": "a"}, MappingError, r"margin: expected a number in \[0, 0.1\] \[m\], got 'a'"),
    ({"margin": None}, MappingError, r"margin: expected a number"),
    ({"contact_options": {"height_treshold": 0.1}}, ik.GoalError,
     r"contact_options: unknown keyword argument\(s\) 'height_treshold' \(did you mean 'height_threshold'\?\)"),
    ({"contact_options": {"up": "y"}}, ik.GoalError, r"contact_options: unknown keyword argument\(s\) 'up'"),
    ({"contact_options": 5}, ik.GoalError, r"contact_options: expected a dict"),
    ({"progress": 5}, ik.GoalError, r"progress: expected a callable"),
])
def test_bad_options_are_an_invkin_error_naming_them(g1, kw, error, expected):
    """Before: up="-y" was a KeyError, margin="a" a ValueError, a contact option's typo a TypeError
    from inside detect_contacts, progress=5 a TypeError after the first chunk."""
    sk, clip = ik.read_bvh(MOCAP / "cmu_49_04_run_leap.bvh")
    with pytest.raises(error, match=expected):
        ik.retarget(sk, clip, g1, **kw)


def test_the_up_axis_is_read_in_any_case_as_detect_contacts_reads_it(g1):
    import dataclasses

    sk, clip = ik.read_bvh(MOCAP / "cmu_49_04_run_leap.bvh")
    clip = dataclasses.replace(clip, frames=clip.frames[:30])
    a = ik.retarget(sk, clip, g1, up="Y", contact_options={"min_duration": 0.05})
    np.testing.assert_array_equal(a.q, ik.retarget(sk, clip, g1, up="y").q)


def test_a_dataset_option_nothing_reads_is_refused_before_the_output_folder_is_made(tmp_path):
    from invkin.jobs.errors import JobError
    from invkin.retarget.dataset import retarget_dataset

    with pytest.raises(JobError, match=r"unknown keyword argument\(s\) 'iteration' \(did you mean 'iterations'\?\)"):
        retarget_dataset(MOCAP, "g1", tmp_path / "out", iteration=3, progress=False)
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("extra, expected", [
    (["--out", "{tmp}/missing/m.npz"], r"--out .*missing/m.npz: cannot write in .*missing: No such folder"),
    (["--out", "{tmp}/m.npz", "--csv", "{tmp}/m.txt"], r"--csv .*m.txt: expected a .csv file"),
    (["--out", "{tmp}/m.npz", "--csv", "{tmp}/missing/m.csv"], r"--csv .*: cannot write in .*missing: No such"),
    (["--out", "{tmp}/m.npz", "--scheduler", "tcp://127.0.0.1:1"], r"--scheduler: applies to a folder of clips"),
    (["--out", "{tmp}/m.npz", "--overwrite"], r"--overwrite: applies to a folder of clips"),
])
def test_cli_refuses_an_output_or_option_for_a_clip_before_retargeting(tmp_path, capsys, extra, expected):
    """Before: a missing output folder or a bad --csv failed after the whole clip was retargeted (and
    --csv m.txt left --out written with exit 2); --scheduler and --overwrite were ignored."""
    import re

    from invkin.cli import main

    code = main(["retarget", str(MOCAP / "cmu_49_04_run_leap.bvh"), "g1", "--no-progress",
                 *(a.format(tmp=tmp_path) for a in extra)])
    err = capsys.readouterr().err
    assert code == 2 and re.search(expected, err), err
    assert "retarget: 252 frames" not in err and list(tmp_path.iterdir()) == []


def test_cli_refuses_csv_or_a_file_output_for_a_folder(tmp_path, capsys):
    """Before: --csv was silently ignored for a folder, and --out m.npz made a folder named m.npz."""
    from invkin.cli import main

    src = tmp_path / "clips"
    src.mkdir()
    (src / "a.bvh").write_bytes((MOCAP / "cmu_49_04_run_leap.bvh").read_bytes())
    assert main(["retarget", str(src), "g1", "--out", str(tmp_path / "out"), "--csv", str(tmp_path / "m.csv")]) == 2
    assert "--csv" in capsys.readouterr().err
    assert main(["retarget", str(src), "g1", "--out", str(tmp_path / "m.npz")]) == 2
    assert "is a folder; its motions go to an output folder, not a .npz file" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["clips"]


def test_cli_names_a_failed_clip_of_a_folder_once(tmp_path, capsys):
    from invkin.cli import main

    src = tmp_path / "clips"
    src.mkdir()
    (src / "broken.bvh").write_text("HIERARCHY\nROOT x\n")
    assert main(["retarget", str(src), "g1", "--out", str(tmp_path / "out"), "--no-progress"]) == 1
    err = capsys.readouterr().err
    assert "retarget: broken.bvh: line 3: no MOTION section" in err and "broken.bvh: broken.bvh" not in err, err


def test_two_clips_of_one_output_name_are_not_written_over_each_other(tmp_path):
    """Before: a.bvh and a.BVH both wrote out/a.npz (the second over the first), the manifest said
    2 clips done, and every rerun redid one of them over the other."""
    from invkin.retarget.dataset import retarget_dataset

    src = tmp_path / "clips"
    src.mkdir()
    (src / "a.BVH").write_bytes((MOCAP / "cmu_49_04_run_leap.bvh").read_bytes())
    (src / "a.bvh").write_bytes((MOCAP / "fair1_wave_hello.bvh").read_bytes())
    if len(list(src.iterdir())) != 2:
        pytest.skip("a case-insensitive file system keeps one of a.bvh and a.BVH")
    m = retarget_dataset(src, "g1", tmp_path / "out", progress=False)
    assert m["failed"] == ["a.bvh"] and m["done"] == 1
    assert m["clips"]["a.bvh"]["error"] == "a.bvh: its output a.npz is also the output of a.BVH; rename one of the two clips"
    assert ik.read_motion(tmp_path / "out" / "a.npz").n_frames == 252  # a.BVH's, the leap
    again = retarget_dataset(src, "g1", tmp_path / "out", progress=False)
    assert again["computed"] == 0 and again["skipped"] == 2


def test_a_rerun_after_the_bundled_maps_change_is_another_job(tmp_path, monkeypatch):
    """The job's identity left out the bundled maps (picked per clip) and the library's version: a
    rerun after either changed skipped the clips made the old way as done."""
    from invkin.jobs.errors import JobError
    from invkin.retarget import dataset as D

    src = tmp_path / "clips"
    src.mkdir()
    (src / "leap.bvh").write_bytes((MOCAP / "cmu_49_04_run_leap.bvh").read_bytes())
    first = D.retarget_dataset(src, "g1", tmp_path / "out", progress=False)
    assert first["done"] == 1
    monkeypatch.setattr(D, "_bundled_maps_sha256", lambda: "0" * 64)  # a map file edited
    with pytest.raises(JobError, match="holds another retargeting job"):
        D.retarget_dataset(src, "g1", tmp_path / "out", progress=False)
    monkeypatch.undo()
    monkeypatch.setattr(D, "__version__", "99.0")
    with pytest.raises(JobError, match="holds another retargeting job"):
        D.retarget_dataset(src, "g1", tmp_path / "out", progress=False)


def test_no_bundled_map_says_what_the_nearest_one_lacks(g1):
    """Before: 'no bundled mapping fits this clip' alone; a CMU clip with one joint renamed did not
    say which."""
    import dataclasses

    from invkin.retarget import bundled_mapping

    sk, clip = ik.read_bvh(MOCAP / "cmu_02_01_walk.bvh")
    renamed = dataclasses.replace(clip, names=tuple("LeftPalm" if n == "LeftHand" else n for n in clip.names))
    with pytest.raises(MappingError, match=r"nearest: cmu_g1 \(the clip lacks 'LeftHand'\)"):
        bundled_mapping(renamed, g1)
    with pytest.raises(MappingError, match=r"nearest: cmu_g1 \(the robot lacks 'pelvis', 'torso_link'"):
        bundled_mapping(clip, ik.load_robot("go2"))


def _longest_still(q) -> int:
    """The longest run of frames whose configuration equals the frame before's exactly."""
    still = np.all(q[1:] == q[:-1], axis=1)
    best = run = 0
    for s in still:
        run = run + 1 if s else 0
        best = max(best, run)
    return best


@pytest.mark.parametrize("clip", ["eyesjapan_mocapdata_sample_6ch.bvh", "cmu_02_01_walk.bvh"])
def test_the_robot_keeps_following_a_moving_source(g1, clip):
    """Before: every step of a frame could be refused (two near-parallel collision rows, the torso
    against two adjacent wrist links, as equalities with different targets: a step to the step box;
    or a long step crossing a row beyond the rows' reach), and the robot stood still: 214 frames
    (7 s) of the mocapdata clip with its targets up to 0.6 m away and no frame flagged; the CMU walk's
    frames 1-14 (hands 0.3 m off) after its T-pose frame."""
    sk, c = ik.read_bvh(MOCAP / clip)
    motion = ik.retarget(sk, c, g1)
    assert _longest_still(motion.q) <= 5  # (was 214 and 13)
    err = motion.report.position_error
    assert np.nanpercentile(err, 95) < 0.12, np.nanpercentile(err, 95)


def test_a_clip_removed_from_the_folder_is_not_counted_on_a_rerun(tmp_path):
    """Before: a rerun after removing a clip still counted it (done 2 of a folder of 1, or failed
    forever: exit 1), and 'complete' stayed False for good."""
    from invkin.retarget.dataset import retarget_dataset

    src = tmp_path / "clips"
    src.mkdir()
    (src / "leap.bvh").write_bytes((MOCAP / "cmu_49_04_run_leap.bvh").read_bytes())
    (src / "broken.bvh").write_text("HIERARCHY\nROOT x\n")
    m = retarget_dataset(src, "g1", tmp_path / "out", progress=False)
    assert m["failed"] == ["broken.bvh"] and m["done"] == 1 and m["complete"]
    (src / "broken.bvh").unlink()
    m = retarget_dataset(src, "g1", tmp_path / "out", progress=False)
    assert m["failed"] == [] and m["done"] == 1 and m["complete"] and m["gone"] == ["broken.bvh"]
    assert m["skipped"] == 1 and m["computed"] == 0


@pytest.mark.parametrize("rename", [
    lambda n: "mixamorig:" + n,  # Mixamo's namespace
    lambda n: {"LeftUpLeg": "Bip01 L Thigh", "LeftLeg": "Bip01 L Calf", "LeftFoot": "Bip01 L Foot",
               "RightUpLeg": "Bip01 R Thigh", "RightLeg": "Bip01 R Calf", "RightFoot": "Bip01 R Foot"}.get(n, n),
])
def test_proposed_mapping_reads_namespaced_and_biped_joint_names(g1, rename):
    """Before: 'mixamorig:LeftFoot' and 'Bip01 L Foot' had no side, so the draft had no legs (and
    with the namespace no arms either): no feet, nothing held on the floor."""
    import dataclasses

    sk, clip = ik.read_bvh(MOCAP / "cmu_02_01_walk.bvh")
    plain = {b.source: b.link for b in propose_mapping(sk, clip, g1).bodies}
    renamed = dataclasses.replace(clip, names=tuple(rename(n) for n in clip.names))
    got = {b.source: b.link for b in propose_mapping(sk, renamed, g1).bodies}
    assert got == {rename(s): link for s, link in plain.items()}


@pytest.mark.parametrize("value", ['"123"', "[true, false, true]"])
def test_an_offset_that_is_not_three_numbers_is_refused(tmp_path, value):
    """Before: position_offset = "123" read as [1.0, 2.0, 3.0] and [true, false, true] as [1, 0, 1]."""
    p = tmp_path / "m.toml"
    p.write_text(f'[[body]]\nsource = "Hips"\nlink = "pelvis"\nrole = "root"\nposition_offset = {value}\n')
    with pytest.raises(MappingError, match="position_offset must be 3 finite numbers"):
        load_mapping(p)


def test_a_draft_without_feet_warns(tmp_path, g1):
    """Before: Talos's links (leg_left_1_link .. leg_left_6_link) gave a draft of the root, the torso
    and the head, without a word: retargeted as it was, nothing was held on the floor."""
    import warnings

    legs = [[f"leg_{s}_{k}_link" for k in range(1, 7)] for s in ("left", "right")]
    (tmp_path / "t.urdf").write_text(_chain_urdf(legs + [["torso_1_link", "head_1_link"]]))
    robot = ik.load_robot(tmp_path / "t.urdf", floating_base=True)
    sk, clip = ik.read_bvh(MOCAP / "cmu_02_01_walk.bvh")
    with pytest.warns(ik.InvkinWarning, match=r"gave no pair of feet \(nor upper_arm, forearm, hand, thigh, shin\): "
                                              r"the draft maps 3 bodies and holds nothing on the floor"):
        m = propose_mapping(sk, clip, robot)
    assert not m.feet
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        propose_mapping(sk, clip, g1)  # a draft with feet: no warning


def test_cli_refuses_a_margin_that_no_self_collision_would_ignore(tmp_path, capsys):
    from invkin.cli import main

    code = main(["retarget", str(MOCAP / "cmu_49_04_run_leap.bvh"), "g1", "--out", str(tmp_path / "m.npz"),
                 "--no-self-collision", "--margin", "0.02", "--no-progress"])
    assert code == 2 and "--no-self-collision no pair is kept apart" in capsys.readouterr().err
    assert not (tmp_path / "m.npz").exists()


def test_a_wrong_up_axis_names_the_other_one_and_the_option(tmp_path, capsys):
    """Before: '... is the clip's up axis 'z' right? pass up=' (no value, no command-line option)."""
    from invkin.cli import main

    assert main(["retarget", str(MOCAP / "cmu_49_04_run_leap.bvh"), "g1", "--out", str(tmp_path / "m.npz"),
                 "--up", "z", "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "not above the feet at rest along the clip's up axis 'z'" in err
    assert "if the clip is y-up, pass up='y' (invkin retarget --up y)" in err


def test_a_motion_with_a_path_or_none_for_its_texts_saves_a_file_that_reads_back(tmp_path):
    """Before: clip_path=Path(...) or robot_spec=None was accepted and saved as a pickled object
    array, and read_motion then refused the file as 'a damaged zip archive'."""
    panda = ik.load_robot("panda")
    q = panda.sample(3, rng=1)
    m = ik.RobotMotion(q, 30.0, panda.joint_names, robot_spec=None, clip_path=tmp_path / "walk.bvh")
    m.save(tmp_path / "m.npz")
    back = ik.read_motion(tmp_path / "m.npz")
    assert back.robot_spec == "" and back.clip_path == str(tmp_path / "walk.bvh")
    with pytest.raises(ik.ModelError, match="robot_spec must be a string"):
        ik.RobotMotion(q, 30.0, panda.joint_names, robot_spec=5)


def test_a_held_foot_is_put_back_while_the_swing_foot_dips_below_the_floor(crouch, g1):
    """Before: the projection that puts a held foot back stopped at its first pass whose hard error²
    + violation² rose, and a pass that moved the base to put the right foot back dipped the swinging
    left foot's sole 2 mm below the floor (a row that joins only the next pass): the pass was undone,
    and the right foot stayed up to 9 mm off its hold for frames 542-550 and 675-678 of the CMU crouch
    clip (flagged missed); the CMU walk had 12 such frames."""
    sk, clip, motion = crouch
    frames = [*range(536, 555), *range(644, 680)]
    assert {(507, 555), (644, 693)} <= set(_contacts(sk, clip, "RightAnkle"))  # the right foot held, the left
    assert not any(s < 555 and e > 536 or s < 680 and e > 644 for s, e in _contacts(sk, clip, "LeftAnkle"))
    missed = set(motion.report.missed_frames)
    assert not missed & set(frames), sorted(missed & set(frames))
    z = _sole_heights(g1, motion.q[frames], FEET[1]).min(axis=1)
    assert np.all(np.abs(z) < 1e-3), z  # the held right foot stands on the floor


def test_a_stance_the_robot_cannot_hold_flat_lands_the_foot_where_it_can_and_holds_it(crouch, g1):
    """Before: a hold was the foot where it was when its contact began, dropped to the floor and
    turned flat, whatever the other foot's hold; the CMU crouch clip ends in a 0.72-0.78 m stance,
    toes in, that G1 cannot stand with both feet flat, and frames 802-929 and 951-993 (171) missed
    their holds while the feet crept (up to 17 cm). Now the foot lands where it can on the contact's
    first frame and is held there."""
    sk, clip, motion = crouch
    rep = motion.report
    assert not set(rep.missed_frames) & set(range(796, clip.n_frames)), rep.missed_frames
    for (link, start, stop), slide in zip(rep.contacts, rep.foot_slide):
        if start >= 796:
            assert slide < 1e-3, (link, start, slide)
    held = {link: np.zeros(clip.n_frames, dtype=bool) for link in FEET}
    for link, start, stop in rep.contacts:
        held[link][start:stop] = True
    both = [f for f in range(796, clip.n_frames) if held[FEET[0]][f] and held[FEET[1]][f]]
    assert len(both) > 150
    for link in FEET:
        z = _sole_heights(g1, motion.q[both], link)
        assert np.all(np.abs(z.min(axis=1)) < 1e-3) and np.all(z.max(axis=1) - z.min(axis=1) < 2e-3)  # on it, flat


def test_targets_and_report_of_a_clip_peak_below_3_kb_a_frame(crouch, g1):
    """Before: the report held the FK of every node for the whole clip (G1: 5.1 kB a frame) and the
    targets the source's (F, B, 4, 4) poses built from a list: 9.4 and 4.7 kB a frame above what they
    keep (tracemalloc, the 994-frame crouch clip), the retargeting's peak at 11.3 kB a frame."""
    import tracemalloc

    from invkin.retarget.core import _goals
    from invkin.retarget.report import measure
    from invkin.retarget.scale import make_targets

    sk, clip, motion = crouch
    mapping = ik.bundled_mapping(clip, g1)
    F = clip.n_frames
    tracemalloc.start()
    try:
        t = make_targets(sk, clip, g1, mapping)
        targets_peak = tracemalloc.get_traced_memory()[1]
        _, row_body, row_rot = _goals(g1, mapping.bodies, t)
        has_pos = np.isin(np.arange(len(mapping.bodies)), row_body[~row_rot])
        has_rot = np.isin(np.arange(len(mapping.bodies)), row_body[row_rot])
        start = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        rep = measure(g1, motion.q, clip.fps, mapping.bodies, t, has_pos, has_rot, motion.report.flags)
        report_peak = tracemalloc.get_traced_memory()[1] - start
    finally:
        tracemalloc.stop()
    assert targets_peak / F < 3000 and report_peak / F < 3000, (targets_peak / F, report_peak / F)
    assert rep.summary() == {**motion.report.summary(), "fps_solve": rep.summary()["fps_solve"]}


def test_cli_drafts_a_map_that_retargets_once_edited_and_fed_back(tmp_path, capsys):
    """Before: propose_mapping existed only in Python; a user with a new skeleton had no command that
    wrote a map to edit."""
    import tomllib

    from invkin.cli import main

    clip, draft = MOCAP / "cmu_02_01_walk.bvh", tmp_path / "walk_g1.toml"
    assert main(["retarget", str(clip), "g1", "--draft-map", str(draft)]) == 0
    out = capsys.readouterr().out
    assert f"wrote {draft}" in out and f"--mapping {draft}" in out
    m = load_mapping(draft)
    assert m.root.link == "pelvis" and len(m.feet) == 2 and "hand" in {b.role for b in m.bodies}
    edited = tomllib.loads(draft.read_text())  # the user's edit: the hands' targets ignored
    edited["body"] = [b for b in edited["body"] if b["role"] != "hand"]
    draft.write_text(load_mapping(edited).to_toml())
    # kept unless --overwrite (it may hold the edits); JSON by the file's name
    assert main(["retarget", str(clip), "g1", "--draft-map", str(draft)]) == 2
    assert "exists" in capsys.readouterr().err and "hand" not in {b.role for b in load_mapping(draft).bodies}
    assert main(["retarget", str(clip), "g1", "--draft-map", str(tmp_path / "d.json"), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["feet"] == 2 and load_mapping(tmp_path / "d.json").feet
    motion = tmp_path / "walk.npz"
    assert main(["retarget", str(clip), "g1", "--mapping", str(draft), "--out", str(motion), "--no-progress",
                 "--json"]) in (0, 1)
    s = json.loads(capsys.readouterr().out)
    assert s["frames"] == 344 and s["limit_violations"] == 0 and ik.read_motion(motion).n_frames == 344


def test_cli_draft_of_a_map_without_feet_warns_and_exits_1(tmp_path, capsys):
    from invkin.cli import main

    legs = [[f"leg_{s}_{k}_link" for k in range(1, 7)] for s in ("left", "right")]
    (tmp_path / "t.urdf").write_text(_chain_urdf(legs + [["torso_1_link", "head_1_link"]]))
    code = main(["retarget", str(MOCAP / "cmu_02_01_walk.bvh"), str(tmp_path / "t.urdf"), "--draft-map",
                 str(tmp_path / "t.toml")])
    err = capsys.readouterr().err
    assert code == 1 and "invkin: warning: propose_mapping:" in err and "holds nothing on the floor" in err
    assert len(load_mapping(tmp_path / "t.toml").bodies) == 3  # written all the same, to edit


@pytest.mark.parametrize("clip, extra, expected", [
    ("cmu_02_01_walk.bvh", ["--draft-map", "{tmp}/m.toml", "--out", "{tmp}/m.npz"],
     r"--out: applies to a retargeting; --draft-map .* only drafts a map"),
    ("cmu_02_01_walk.bvh", ["--draft-map", "{tmp}/m.toml", "--mapping", "{tmp}/x.toml"], r"--mapping: applies to a "),
    ("cmu_02_01_walk.bvh", ["--draft-map", "{tmp}/m.toml", "--iterations", "3"], r"--iterations: applies to a "),
    ("cmu_02_01_walk.bvh", ["--draft-map", "{tmp}/m.txt"], r"expected a .toml \(or .json\) file"),
    ("", ["--draft-map", "{tmp}/m.toml"], r"expected a .bvh clip, got .*mocap"),
    ("cmu_02_01_walk.bvh", ["--draft-map", "{tmp}/no/m.toml"], r"cannot write in .*no: No such folder"),
    ("cmu_02_01_walk.bvh", [], r"--out: required .* or --draft-map MAP.toml"),
])
def test_cli_draft_map_refuses_what_it_would_ignore_and_bad_files(tmp_path, capsys, clip, extra, expected):
    import re

    from invkin.cli import main

    code = main(["retarget", str(MOCAP / clip), "g1", *(a.format(tmp=tmp_path) for a in extra)])
    err = capsys.readouterr().err
    assert code == 2 and re.search(expected, err), err
    assert list(tmp_path.iterdir()) == []
