"""SRDF: named configurations, disabled collision pairs, names checked, hostile input refused."""
from __future__ import annotations

import re
import warnings
from pathlib import Path

import numpy as np
import pytest

import invkin as ik
from invkin.errors import FrameError, ModelError, ModelWarning
from invkin.model.build import RobotBuilder
from invkin.model.srdf import load_srdf, parse_srdf

ERD = Path(__file__).resolve().parent / "data" / "erd"

HALF_SITTING = {  # Talos' SRDF, copied by hand from tests/data/erd/talos.srdf
    "arm_left_1_joint": 0.25847, "arm_left_2_joint": 0.173046, "arm_left_3_joint": -0.0002,
    "arm_left_4_joint": -0.525366, "arm_left_7_joint": 0.1, "arm_right_1_joint": -0.25847,
    "arm_right_2_joint": -0.173046, "arm_right_3_joint": 0.0002, "arm_right_4_joint": -0.525366,
    "arm_right_7_joint": 0.1, "leg_left_3_joint": -0.411354, "leg_left_4_joint": 0.859395,
    "leg_left_5_joint": -0.448041, "leg_left_6_joint": -0.001708, "leg_right_3_joint": -0.411354,
    "leg_right_4_joint": 0.859395, "leg_right_5_joint": -0.448041, "leg_right_6_joint": -0.001708,
    "torso_2_joint": 0.006761,
}


def _talos(**kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ModelWarning)  # the gripper mimics on fixed joints
        return ik.load_robot(ERD / "talos_reduced.urdf", srdf=ERD / "talos.srdf", **kw)


def test_talos_half_sitting_is_a_full_q_with_the_file_values_and_neutral_elsewhere():
    talos = _talos()
    assert talos.named_configurations == ("half_sitting",)
    q = talos.named_configuration("half_sitting")
    assert q.shape == (talos.dof,)
    named = {"arm_left_5_joint", "arm_left_6_joint", "arm_right_5_joint", "arm_right_6_joint", "head_1_joint",
             "head_2_joint", "leg_left_1_joint", "leg_left_2_joint", "leg_right_1_joint", "leg_right_2_joint",
             "torso_1_joint"} | set(HALF_SITTING)
    for i, nm in enumerate(talos.joint_names):
        expected = HALF_SITTING.get(nm, 0.0) if nm in named else talos.neutral()[i]
        assert q[i] == expected, nm
    assert talos.within_limits(q)
    assert q[talos.joint_index("gripper_left_joint")] == talos.neutral()[talos.joint_index("gripper_left_joint")]


def test_talos_disabled_collision_pairs_are_kept_in_file_order():
    talos = _talos()
    pairs = talos.disabled_collision_pairs
    assert len(pairs) == 459  # every <disable_collisions> of the file
    text = (ERD / "talos.srdf").read_text()
    first = re.search(r'<disable_collisions link1="([^"]+)" link2="([^"]+)"', text).groups()
    assert pairs[0] == first
    assert all(a in talos.frame_names and b in talos.frame_names for a, b in pairs)


def test_a_cut_chain_keeps_what_applies_to_it_and_is_checked_against_the_whole_robot():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ModelWarning)
        arm = ik.load_robot(ERD / "talos_reduced.urdf", base="torso_2_link", tip="arm_left_7_link",
                            srdf=ERD / "talos.srdf")
    q = arm.named_configuration("half_sitting")
    assert q.tolist() == [0.25847, 0.173046, -0.0002, -0.525366, 0.0, 0.0, 0.1]
    assert all(a in arm.frame_names and b in arm.frame_names for a, b in arm.disabled_collision_pairs)
    assert 0 < len(arm.disabled_collision_pairs) < 459


def test_named_configurations_survive_pickling_and_derived_models():
    import pickle

    talos = _talos()
    again = pickle.loads(pickle.dumps(talos))
    assert np.array_equal(again.named_configuration("half_sitting"), talos.named_configuration("half_sitting"))
    assert again.disabled_collision_pairs == talos.disabled_collision_pairs
    tool = talos.add_frame("tool", "arm_left_7_link")
    assert tool.named_configurations == ("half_sitting",)


def test_load_srdf_on_a_loaded_robot_equals_load_robot_with_srdf():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ModelWarning)
        panda = ik.load_robot(ERD / "panda_fingers.urdf")
    a = ik.load_srdf(panda, ERD / "panda.srdf")
    q = a.named_configuration("default")
    assert q[panda.joint_index("panda_joint2")] == -0.785398
    assert q[panda.joint_index("panda_finger_joint1")] == 0.001
    assert ("panda_hand", "panda_leftfinger") in a.disabled_collision_pairs
    assert panda.named_configurations == ()  # the input robot is unchanged


def test_unknown_named_configuration_lists_the_names():
    with pytest.raises(FrameError, match=r"unknown named configuration 'half_sitings'.*closest: 'half_sitting'"):
        _talos().named_configuration("half_sitings")
    with pytest.raises(FrameError, match=r"named configurations: none \(load an SRDF"):
        ik.load_robot("panda").named_configuration("home")


def _arm():
    b = RobotBuilder("arm")
    b.add_root("base")
    b.add_joint("shoulder", "base", "upper", "revolute", None, (0, 0, 1), -2, 2)
    b.add_joint("elbow", "upper", "fore", "revolute", None, (0, 1, 0), -2, 2)
    b.add_joint("wrist", "fore", "hand", "ball")
    return b.build()


def _srdf(body: str) -> str:
    return f'<?xml version="1.0"?>\n<robot name="arm">\n{body}\n</robot>\n'


def _write(tmp_path, text):
    p = tmp_path / "arm.srdf"
    p.write_bytes(text.encode() if isinstance(text, str) else text)
    return p


def test_ball_joint_values_as_rotation_vector_or_xyzw_quaternion(tmp_path):
    s = 0.5 ** 0.5
    p = _write(tmp_path, _srdf(f'''<group_state name="a" group="all"><joint name="wrist" value="0 0 0.5"/></group_state>
<group_state name="b" group="all"><joint name="wrist" value="0 0 {s} {s}"/>
<joint name="shoulder" value="1.5"/></group_state>'''))
    arm = load_srdf(_arm(), p)
    assert arm.named_configuration("a")[2:].tolist() == [0.0, 0.0, 0.5]
    qb = arm.named_configuration("b")
    assert qb[0] == 1.5 and np.allclose(qb[2:], [0, 0, np.pi / 2], atol=1e-12)


def test_the_pinocchio_free_flyer_value_is_dropped_on_a_fixed_base_model(tmp_path):
    p = _write(tmp_path, _srdf('<group_state name="a" group="all"><joint name="root_joint" value="0 0 1 0 0 0 1"/>'
                               '<joint name="elbow" value="0.3"/></group_state>'))
    assert load_srdf(_arm(), p).named_configuration("a").tolist() == [0.0, 0.3, 0.0, 0.0, 0.0]


@pytest.mark.parametrize("body, pattern", [
    ('<group_state name="a" group="g"><joint name="elbw" value="1"/></group_state>',
     r"<joint name='elbw'> line 3: group_state 'a': no joint 'elbw' in robot 'arm'; closest: 'elbow'"),
    ('<disable_collisions link1="uper" link2="fore" reason="Adjacent"/>',
     r"<disable_collisions link1='uper' link2='fore' reason='Adjacent'> line 3: no link 'uper'.*closest: 'upper'"),
    ('<group_state name="a" group="g"><joint name="elbow" value="1 2"/></group_state>',
     r"joint 'elbow' takes 1 value, got 2"),
    ('<group_state name="a" group="g"><joint name="wrist" value="1 2"/></group_state>',
     r"ball joint 'wrist' takes 3 values \(rotation vector\) or 4"),
    ('<group_state name="a" group="g"><joint name="wrist" value="0 0 0 2"/></group_state>',
     r"expected a unit quaternion.*norm 2"),
    ('<group_state name="a" group="g"><joint name="elbow" value="nan"/></group_state>', r"not finite"),
    ('<group_state name="a" group="g"><joint name="elbow"/></group_state>', r"no value="),
    ('<group_state name="a" group="g"/><group_state name="a" group="g"/>', r"duplicate group_state 'a'"),
])
def test_bad_srdf_content_is_refused_naming_the_value_and_line(tmp_path, body, pattern):
    p = _write(tmp_path, _srdf(body))
    with pytest.raises(ModelError, match=re.escape(str(p))) as ei:
        load_srdf(_arm(), p)
    assert re.search(pattern, str(ei.value)), str(ei.value)


def test_strict_false_drops_unknown_names_with_a_warning(tmp_path):
    p = _write(tmp_path, _srdf('<group_state name="a" group="g"><joint name="elbw" value="1"/>'
                               '<joint name="elbow" value="0.5"/></group_state>'
                               '<disable_collisions link1="uper" link2="fore"/><disable_collisions link1="upper" link2="fore"/>'))
    with pytest.warns(ModelWarning, match=r"no joint 'elbw'.*dropped"):
        arm = load_srdf(_arm(), p, strict=False)
    assert arm.named_configuration("a")[1] == 0.5 and arm.disabled_collision_pairs == (("upper", "fore"),)


def test_doctype_and_entities_are_refused_before_expansion(tmp_path):
    lol = ('<?xml version="1.0"?>\n<!DOCTYPE robot [<!ENTITY a "aaaaaaaa"><!ENTITY b "&a;&a;&a;&a;">]>\n'
           '<robot name="arm"><group_state name="&b;" group="g"/></robot>')
    with pytest.raises(ModelError, match=r"line 2: <!DOCTYPE robot> with an internal subset \[...\] refused: a SRDF"):
        load_srdf(_arm(), _write(tmp_path, lol))


def test_size_cap_wrong_root_malformed_xml_and_missing_file_are_refused(tmp_path):
    p = _write(tmp_path, _srdf("<disable_collisions link1='upper' link2='fore'/>" * 50))
    with pytest.raises(ModelError, match=r"larger than max_bytes=100"):
        load_srdf(_arm(), p, max_bytes=100)
    with pytest.raises(ModelError, match=r"root element is <mujoco>; expected <robot>"):
        load_srdf(_arm(), _write(tmp_path, "<mujoco/>"))
    with pytest.raises(ModelError, match=r"line 4, column 3: malformed XML: mismatched tag"):
        load_srdf(_arm(), _write(tmp_path, _srdf("<group_state name='a'>")))
    with pytest.raises(ModelError, match=r"no such SRDF file"):
        load_srdf(_arm(), tmp_path / "missing.srdf")
    with pytest.raises(ModelError, match=r"load_srdf: expected a Robot"):
        load_srdf("arm", p)


def test_parse_srdf_reads_group_states_in_file_order():
    s = parse_srdf(_srdf('<group_state name="z" group="g"><joint name="elbow" value="1"/></group_state>'
                         '<group_state name="a" group="g"/><virtual_joint name="world_joint" type="floating" '
                         'parent_frame="world" child_link="base"/>'))
    assert list(s.group_states) == ["z", "a"] and s.virtual_joints == ("world_joint",)


def test_with_a_floating_base_the_pinocchio_root_joint_value_sets_the_free_joint():
    talos = _talos(floating_base=True)
    q = talos.named_configuration("half_sitting")
    base = [talos.joint_index(f"root_joint{s}") for s in (".x", ".y", ".z", ".rx", ".ry", ".rz")]
    assert q[base].tolist() == [0.0, 0.0, 1.01927, 0.0, 0.0, 0.0]
    assert q[talos.joint_index("leg_left_4_joint")] == 0.859395
    assert np.allclose(talos.fk(q, "base_link")[:3, 3], [0, 0, 1.01927])


def test_a_free_joint_takes_a_quaternion_in_pinocchios_x_y_z_w_order(tmp_path):
    s = 0.5 ** 0.5
    p = _write(tmp_path, _srdf(f'<group_state name="a" group="all"><joint name="root_joint" value="1 2 3 0 0 {s} {s}"/>'
                               '</group_state><group_state name="b" group="all">'
                               '<joint name="root_joint" value="1 2 3 0 0 0.5"/></group_state>'))
    arm = load_srdf(_arm().with_floating_base(), p)
    assert np.allclose(arm.named_configuration("a")[:6], [1, 2, 3, 0, 0, np.pi / 2], atol=1e-12)
    assert arm.named_configuration("b")[:6].tolist() == [1, 2, 3, 0, 0, 0.5]


def test_a_group_state_value_outside_the_joint_limits_warns_naming_the_line(tmp_path):
    b = RobotBuilder("r")
    b.add_root("base")
    b.add_joint("j1", "base", "l1", "revolute", axis=(0, 0, 1), lower=-1.0, upper=1.0)
    b.add_joint("j2", "l1", "l2", "prismatic", axis=(1, 0, 0), lower=0.0, upper=0.5)
    robot = b.build()
    p = tmp_path / "r.srdf"
    p.write_text('<robot name="r">\n<group_state name="home" group="all">\n<joint name="j1" value="5"/>\n'
                 '<joint name="j2" value="0.25"/>\n</group_state>\n<group_state name="up" group="all">\n'
                 '<joint name="j2" value="-0.5"/>\n</group_state>\n</robot>\n')
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        out = load_srdf(robot, p)
    msgs = [str(x.message) for x in w if issubclass(x.category, ModelWarning)]
    assert len(msgs) == 1, msgs  # one warning for the file, listing every value
    assert re.search(r"r\.srdf: 2 group_state values are outside their joint limits \(kept as the file says\): "
                     r"'home' j1 = 5 not in \[-1, 1\] \(line 3\), 'up' j2 = -0.5 not in \[0, 0.5\] \(line 7\)",
                     msgs[0]), msgs[0]
    np.testing.assert_array_equal(out.named_configuration("home"), [5.0, 0.25])
    p.write_text(p.read_text().replace('value="5"', 'value="1"').replace('value="-0.5"', 'value="0"'))
    with warnings.catch_warnings():
        warnings.simplefilter("error", ModelWarning)
        load_srdf(robot, p)


def _planar_arm():
    b = RobotBuilder("arm")
    b.add_root("world")
    b.add_joint("base_joint", "world", "base", "planar", axis=(0, 0, 1))
    b.add_joint("j1", "base", "arm", "revolute", None, (0, 0, 1), -1, 1)
    return b.build()


def test_a_planar_joint_takes_x_y_yaw_or_pinocchios_x_y_cos_sin(tmp_path):
    c, s = float(np.cos(0.5)), float(np.sin(0.5))
    p = _write(tmp_path, _srdf('<group_state name="moveit" group="all"><joint name="base_joint" value="1 2 0.5"/>'
                               '<joint name="j1" value="0.3"/></group_state><group_state name="pin" group="all">'
                               f'<joint name="base_joint" value="1 2 {c!r} {s!r}"/></group_state>'))
    arm = load_srdf(_planar_arm(), p)
    assert arm.joint_names == ("base_joint.x", "base_joint.y", "base_joint.yaw", "j1")
    assert arm.named_configuration("moveit").tolist() == [1.0, 2.0, 0.5, 0.3]  # the yaw was dropped
    assert np.allclose(arm.named_configuration("pin"), [1.0, 2.0, 0.5, 0.0], atol=1e-15)


@pytest.mark.parametrize("value, pattern", [
    ("1 2", r"planar joint 'base_joint' takes 3 values \(x y yaw\) or 4 \(x y cos\(yaw\) sin\(yaw\)\), got 2"),
    ("1 2 0.5 0.5", r"planar joint 'base_joint': \(cos, sin\) = \(0.5, 0.5\) has norm 0.707107; expected 1"),
])
def test_a_planar_joint_value_of_the_wrong_size_or_norm_is_refused_as_planar(tmp_path, value, pattern):
    p = _write(tmp_path, _srdf(f'<group_state name="a" group="g"><joint name="base_joint" value="{value}"/>'
                               '</group_state>'))
    with pytest.raises(ModelError, match=pattern):
        load_srdf(_planar_arm(), p)


def test_a_chain_floating_from_its_base_is_placed_where_the_whole_robot_puts_that_base():
    # the SRDF's root_joint value is the pose of base_link; torso_2_link sits above it, moved by the
    # torso joints: the named configuration puts the chain's free joint there
    whole = _talos(floating_base=True)
    arm = _talos(floating_base=True, base="torso_2_link", tip="arm_left_7_link")
    qw, qa = whole.named_configuration("half_sitting"), arm.named_configuration("half_sitting")
    assert arm.joint_names[:6] == tuple(f"root_joint.{c}" for c in ("x", "y", "z", "rx", "ry", "rz"))
    for frame in ("torso_2_link", "arm_left_4_link", "arm_left_7_link"):
        np.testing.assert_allclose(arm.fk(qa, frame), whole.fk(qw, frame), atol=1e-12)
    assert qa[2] == pytest.approx(whole.fk(qw, "torso_2_link")[2, 3]) and qa[2] != qw[2]
    tip_only = _talos(floating_base=True, tip="arm_left_7_link")  # the free joint stays at base_link
    assert tip_only.named_configuration("half_sitting")[:6].tolist() == qw[:6].tolist()
