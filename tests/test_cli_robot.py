"""--base/--tip/--floating-base/--srdf on every command that loads a robot; --quat-wxyz/--quat-xyzw."""
from __future__ import annotations

import json
import math
import warnings
from pathlib import Path

import numpy as np
import pytest

import invkin as ik
from invkin.cli import build_parser, main

from test_cli import assert_one_line_error, run

ERD = Path(__file__).resolve().parent / "data" / "erd"
MJCF = Path(__file__).resolve().parent / "data" / "mjcf"


def _commands_loading_a_robot():
    """(name, argv prefix) of every subcommand with a ROBOT argument, found from the parser."""
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    out = []
    for name, p in sub.choices.items():
        if any(a.dest == "robot" for a in p._actions):
            out.append((name, p))
    return out


def test_every_command_with_a_robot_argument_has_the_robot_options():
    cmds = _commands_loading_a_robot()
    assert {n for n, _ in cmds} >= {"info", "fk", "solve", "batch", "reachability", "view"}
    for name, p in cmds:
        flags = {s for a in p._actions for s in a.option_strings}
        assert {"--base", "--tip", "--floating-base", "--srdf"} <= flags, name


def test_info_with_base_and_tip_shows_the_cut_chain(capsys):
    assert main(["info", str(ERD / "talos_reduced.urdf"), "--base", "torso_2_link", "--tip", "arm_left_7_link",
                 "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["joint_names"] == [f"arm_left_{k}_joint" for k in range(1, 8)]
    assert info["frames"][0] == "torso_2_link"


def test_fk_of_a_named_chain_equals_the_library(capsys):
    q = [0.1, -0.2, 0.3, -0.4, 0.5, -0.6, 0.7]
    assert main(["fk", str(ERD / "talos_reduced.urdf"), "--base", "torso_2_link", "--tip", "arm_left_7_link",
                 "--q", *map(str, q), "--json"]) == 0
    T = np.array(json.loads(capsys.readouterr().out)["T"])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ik.ModelWarning)
        arm = ik.load_robot(ERD / "talos_reduced.urdf", base="torso_2_link", tip="arm_left_7_link")
    assert np.allclose(T, arm.fk(np.array(q), "arm_left_7_link"), atol=1e-14)


def test_solve_with_an_srdf_and_a_ros_quaternion_in_a_subprocess():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ik.ModelWarning)
        arm = ik.load_robot(ERD / "talos_reduced.urdf", base="torso_2_link", tip="arm_left_7_link")
    T = arm.fk(arm.sample(rng=3), "arm_left_7_link")
    qx = ik.spatial.matrix_to_quat(T[:3, :3], "xyzw")
    p = run("solve", ERD / "talos_reduced.urdf", "--base", "torso_2_link", "--tip", "arm_left_7_link",
            "--srdf", ERD / "talos.srdf", "--frame", "arm_left_7_link", "--xyz", *T[:3, 3], "--quat-xyzw", *qx,
            "--json")
    assert p.returncode == 0, p.stderr
    res = json.loads(p.stdout)
    T2 = arm.fk(np.array(res["q"]), "arm_left_7_link")
    assert np.allclose(T2, T, atol=1e-5)


def test_quat_wxyz_and_quat_xyzw_give_the_same_solve(capsys):
    half = math.sqrt(0.5)
    base = ["solve", "panda", "--frame", "panda_link8", "--xyz", "0.4", "0.1", "0.5", "--json"]
    assert main(base + ["--quat-wxyz", "0", str(half), str(half), "0"]) == 0
    a = json.loads(capsys.readouterr().out)
    assert main(base + ["--quat-xyzw", str(half), str(half), "0", "0"]) == 0
    b = json.loads(capsys.readouterr().out)
    assert a["q"] == b["q"]


def test_a_non_unit_quaternion_is_one_error_line_naming_the_norm():
    line = assert_one_line_error(run("solve", "panda", "--frame", "panda_link8", "--xyz", 0.4, 0, 0.5,
                                     "--quat-xyzw", 0, 0, 0, 2))
    assert "quat_xyzw: expected a unit quaternion" in line and "norm 2" in line


def test_a_rounded_quaternion_is_read_as_the_api_reads_it(capsys):
    from invkin.cli import target_goal

    argv = ["solve", "panda", "--frame", "panda_link8", "--xyz", "0.4", "0.1", "0.5"]
    goal = target_goal(build_parser().parse_args(argv + ["--quat-xyzw", "0", "0", "0.7071", "0.7071"]))
    api = ik.Pose.from_position_quaternion("panda_link8", (0.4, 0.1, 0.5), quat_xyzw=(0, 0, 0.7071, 0.7071))
    assert np.array_equal(goal.T, api.T)
    assert np.allclose(goal.T[:3, :3], [[0, -1, 0], [1, 0, 0], [0, 0, 1]], atol=1e-15)
    with pytest.raises(ik.GoalError, match=r"quat_wxyz: expected a unit quaternion.*norm 0\.98994949"):
        target_goal(build_parser().parse_args(argv + ["--quat-wxyz", "0.7", "0", "0", "0.7"]))
    assert main(argv + ["--quat-xyzw", "0", "0", "0.7071", "0.7071"]) in (0, 1)  # solved or not, not a usage error
    assert "error" not in capsys.readouterr().err


def test_two_orientations_are_refused(capsys):
    assert main(["solve", "panda", "--frame", "panda_link8", "--xyz", "0.4", "0", "0.5", "--rpy", "0", "0", "0",
                 "--quat-wxyz", "1", "0", "0", "0"]) == 2
    assert "give one orientation, not --rpy and --quat-wxyz" in capsys.readouterr().err


def test_fk_prints_both_quaternion_orders(capsys):
    assert main(["fk", "panda", "--frame", "panda_link8"]) == 0
    out = capsys.readouterr().out
    assert "quat_wxyz = " in out and "quat_xyzw = " in out


def test_an_unknown_tip_is_one_error_line_with_the_closest_names():
    line = assert_one_line_error(run("info", "panda", "--tip", "panda_lnk8"))
    assert "panda_lnk8" in line and "panda_link8" in line


def test_an_srdf_naming_a_missing_link_is_one_error_line(tmp_path):
    bad = tmp_path / "bad.srdf"
    bad.write_text('<robot name="panda"><disable_collisions link1="panda_lnk1" link2="panda_link2"/></robot>')
    line = assert_one_line_error(run("info", "panda", "--srdf", bad))
    assert "no link 'panda_lnk1'" in line and "closest: 'panda_link1'" in line


def test_mjcf_info_through_the_cli(capsys):
    pytest.importorskip("mujoco")
    assert main(["info", str(MJCF / "arm.xml"), "--tip", "hand", "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["joint_names"] == ["j1", "j2", "j3", "j5", "j4.x", "j4.y", "j4.z"]


def test_model_warnings_are_one_line_each(capsys):
    assert main(["info", str(ERD / "talos_reduced.urdf"), "--json"]) == 0
    err = capsys.readouterr().err.strip().splitlines()
    # the 12 ignored gripper mimics: one warning that lists them, on one line
    assert len(err) == 1 and err[0].startswith("invkin: warning: ") and "12 <mimic> element(s) ignored" in err[0]
    assert err[0].count("on a fixed joint") == 12


def test_floating_base_puts_a_free_joint_first(capsys):
    assert main(["info", "panda", "--floating-base", "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["joint_names"][:6] == ["root_joint.x", "root_joint.y", "root_joint.z", "root_joint.rx",
                                       "root_joint.ry", "root_joint.rz"]
    assert info["joint_names"][6:] == list(ik.load_robot("panda").joint_names)


def test_info_lists_the_srdf_named_configurations_and_disabled_pairs(capsys):
    assert main(["info", str(ERD / "talos_reduced.urdf"), "--srdf", str(ERD / "talos.srdf"), "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert list(info["named_configurations"]) == ["half_sitting"]
    q = info["named_configurations"]["half_sitting"]
    assert q[info["joint_names"].index("leg_left_4_joint")] == 0.859395
    assert len(info["disabled_collision_pairs"]) == 459
    assert main(["info", str(ERD / "talos_reduced.urdf"), "--srdf", str(ERD / "talos.srdf")]) == 0
    out = capsys.readouterr().out
    assert "named configurations (SRDF): half_sitting" in out and "disabled collision pairs (SRDF): 459" in out


def test_fk_and_solve_start_from_an_srdf_named_configuration(capsys):
    # --srdf loaded the group states, but fk and solve had no way to use them
    talos, srdf = str(ERD / "talos_reduced.urdf"), str(ERD / "talos.srdf")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ik.ModelWarning)
        assert main(["fk", talos, "--srdf", srdf, "--state", "half_sitting", "--frame", "left_sole_link",
                     "--json"]) == 0
        robot = ik.load_robot(ERD / "talos_reduced.urdf", srdf=ERD / "talos.srdf")
        out = json.loads(capsys.readouterr().out)
        q = robot.named_configuration("half_sitting")
        assert out["q"] == q.tolist() and np.allclose(out["T"], robot.fk(q, "left_sole_link"), atol=1e-14)
        target = robot.fk(q, "arm_left_7_link")[:3, 3] + (0.02, 0.0, 0.0)
        assert main(["solve", talos, "--srdf", srdf, "--state", "half_sitting", "--frame", "arm_left_7_link",
                     "--xyz", *map(str, target), "--json"]) == 0
        res = json.loads(capsys.readouterr().out)
    legs = [robot.joint_index(f"leg_left_{k}_joint") for k in range(1, 7)]
    assert res["success"] and np.allclose(np.array(res["q"])[legs], q[legs])  # moved from half_sitting


@pytest.mark.parametrize("argv, says", [
    (["fk", "panda", "--state", "home"], "--state 'home': robot 'panda' has no named configurations; give the "
                                         "SRDF that defines them with --srdf FILE"),
    (["fk", str(ERD / "talos_reduced.urdf"), "--srdf", str(ERD / "talos.srdf"), "--state", "half_sittin"],
     "unknown named configuration 'half_sittin' on robot 'talos'; closest: 'half_sitting'"),
    (["fk", "panda", "--state", "home", "--q", *["0"] * 7], "give --q or --state, not both"),
])
def test_a_wrong_state_is_one_error_line(argv, says, capsys):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ik.ModelWarning)
        assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1] == f"invkin: error: {says}" or err[-1].startswith(f"invkin: error: {says}"), err
