"""The URDF reader: FK against an independent reference, mimic joints, base/tip, hostile input.

The reference FK here parses the XML with ``xml.etree.ElementTree`` and multiplies 4x4 matrices
written out below (own roll-pitch-yaw and Rodrigues formulas); it shares no code with invkin.
"""
from __future__ import annotations

import math
import re
import warnings
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest

from invkin.errors import FrameError, ModelError, ModelWarning
from invkin.model import load_robot
from invkin.model.catalog import URDF_MODELS, seed8dof
from invkin.model.urdf import load_urdf, parse_urdf

from support import fd_jacobian

ROBOTS = Path(__file__).resolve().parents[1] / "src" / "invkin" / "data" / "robots"
DATA = Path(__file__).resolve().parent / "data"


# ---------------------------------------------------------------------- independent reference FK
def _rot_x(a):
    c, s = math.cos(a), math.sin(a)
    return np.array([[1.0, 0.0, 0.0], [0.0, c, -s], [0.0, s, c]])


def _rot_y(a):
    c, s = math.cos(a), math.sin(a)
    return np.array([[c, 0.0, s], [0.0, 1.0, 0.0], [-s, 0.0, c]])


def _rot_z(a):
    c, s = math.cos(a), math.sin(a)
    return np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])


def _axis_angle(axis, angle):
    """Rodrigues: I + sin(a) K + (1 - cos(a)) K^2 for the unit axis k."""
    k = np.asarray(axis, dtype=float)
    k = k / np.linalg.norm(k)
    K = np.array([[0.0, -k[2], k[1]], [k[2], 0.0, -k[0]], [-k[1], k[0], 0.0]])
    return np.eye(3) + math.sin(angle) * K + (1.0 - math.cos(angle)) * (K @ K)


def _homogeneous(R=None, p=None):
    T = np.eye(4)
    if R is not None:
        T[:3, :3] = R
    if p is not None:
        T[:3, 3] = p
    return T


def _vec3(el, attr, default):
    if el is None or el.get(attr) is None:
        return np.array(default, dtype=float)
    return np.array([float(x) for x in el.get(attr).split()])


class RefChain:
    """The joints from ``base`` to ``tip`` of a URDF, read with ElementTree."""

    def __init__(self, path, base, tip):
        root = ET.parse(path).getroot()
        by_child = {j.find("child").get("link"): j for j in root.findall("joint")}
        chain = []
        link = tip
        while link != base:
            j = by_child[link]
            chain.append(j)
            link = j.find("parent").get("link")
        self.joints = chain[::-1]
        self.moving = [j for j in self.joints if j.get("type") != "fixed"]
        self.names = [j.get("name") for j in self.moving]
        lo, hi = [], []
        for j in self.moving:
            lim = j.find("limit")
            if j.get("type") == "continuous":
                lo.append(-math.pi)
                hi.append(math.pi)
            else:
                lo.append(float(lim.get("lower", 0)))
                hi.append(float(lim.get("upper", 0)))
        self.lower, self.upper = np.array(lo), np.array(hi)

    def fk(self, q):
        """T_base_tip: product over joints of origin (Rz Ry Rx, xyz) then the joint motion."""
        T = np.eye(4)
        values = dict(zip(self.names, q))
        for j in self.joints:
            o = j.find("origin")
            r, p, y = _vec3(o, "rpy", (0, 0, 0))
            T = T @ _homogeneous(_rot_z(y) @ _rot_y(p) @ _rot_x(r), _vec3(o, "xyz", (0, 0, 0)))
            t = j.get("type")
            if t == "fixed":
                continue
            axis = _vec3(j.find("axis"), "xyz", (1, 0, 0))
            theta = values[j.get("name")]
            if t in ("revolute", "continuous"):
                T = T @ _homogeneous(R=_axis_angle(axis, theta))
            elif t == "prismatic":
                T = T @ _homogeneous(p=theta * axis / np.linalg.norm(axis))
            else:
                raise AssertionError(f"reference FK: unexpected joint type {t}")
        return T


@pytest.mark.parametrize("name", sorted(URDF_MODELS))
def test_bundled_urdf_fk_matches_independent_reference_fk(name):
    fname, base, tip = URDF_MODELS[name]
    path = ROBOTS / fname
    ref = RefChain(path, base, tip)
    robot = load_urdf(path, base=base, tip=tip)
    assert robot.root == base and robot.node_names[-1] == tip
    assert list(robot.joint_names) == ref.names
    np.testing.assert_array_equal(robot.lower, ref.lower)
    np.testing.assert_array_equal(robot.upper, ref.upper)
    rng = np.random.default_rng(20240611)
    for _ in range(20):
        q = rng.uniform(ref.lower, ref.upper)
        np.testing.assert_allclose(robot.fk(q), ref.fk(q), rtol=0, atol=1e-12)


def test_bundled_names_load_through_load_robot_with_the_reference_fk():
    rng = np.random.default_rng(5)
    for name, (fname, base, tip) in URDF_MODELS.items():
        r = load_robot(name)
        assert r.root == base and tip in r.frame_names
        ref = RefChain(ROBOTS / fname, base, tip)
        q = rng.uniform(r.lower, r.upper)
        qref = q[[r.joint_index(n) for n in ref.names]]
        np.testing.assert_allclose(r.fk(q, tip), ref.fk(qref), rtol=0, atol=1e-12)


def test_seed8dof_urdf_fk_equals_builtin_seed8dof():
    urdf = load_robot(DATA / "seed8dof.urdf")
    built = seed8dof()
    assert urdf.dof == built.dof == 8
    assert urdf.joint_names == built.joint_names
    np.testing.assert_array_equal(urdf.lower, built.lower)
    np.testing.assert_array_equal(urdf.upper, built.upper)
    q = np.random.default_rng(8).uniform(-math.pi, math.pi, size=(25, 8))
    np.testing.assert_allclose(urdf.fk(q, "effector"), built.fk(q, "effector"), rtol=0, atol=1e-12)


def test_whole_tree_is_returned_without_base_and_tip():
    r = load_urdf(ROBOTS / "panda.urdf")
    assert r.root == "panda_link0" and r.dof == 7


def test_origin_defaults_identity_axis_defaults_x_and_continuous_is_unbounded():
    r = parse_urdf("""<robot name="d">
      <link name="a"/><link name="b"/><link name="c"/>
      <joint name="j1" type="continuous"><parent link="a"/><child link="b"/></joint>
      <joint name="j2" type="prismatic"><parent link="b"/><child link="c"/>
        <origin rpy="0 0 0.5"/><axis xyz="0 0 2"/><limit upper="0.4"/></joint>
    </robot>""")
    assert r.joint_types_per_dof == ("continuous", "prismatic")
    assert r.lower[0] == -math.inf and r.upper[0] == math.inf
    assert (r.lower[1], r.upper[1]) == (0.0, 0.4)  # missing lower is 0 per the URDF spec
    np.testing.assert_allclose(r.axis[r.frame_index("b")], [1, 0, 0])
    np.testing.assert_allclose(r.axis[r.frame_index("c")], [0, 0, 1])
    T = r.fk(np.array([0.7, 0.3]))
    ref = _homogeneous(R=_axis_angle((1, 0, 0), 0.7)) @ _homogeneous(R=_rot_z(0.5)) \
        @ _homogeneous(p=(0, 0, 0.3))
    np.testing.assert_allclose(T, ref, atol=1e-14)


def test_a_negative_velocity_limit_is_said_and_read_as_none():
    """<limit velocity="-1"> was read as no velocity limit without a word (0, the usual "not
    given", stays silent)."""
    text = """<robot name="v">
      <link name="a"/><link name="b"/><link name="c"/>
      <joint name="j1" type="revolute"><parent link="a"/><child link="b"/>
        <limit lower="-1" upper="1" velocity="-2"/></joint>
      <joint name="j2" type="revolute"><parent link="b"/><child link="c"/>
        <limit lower="-1" upper="1" velocity="0"/></joint>
    </robot>"""
    with pytest.warns(ModelWarning, match=r"<limit velocity> is negative for joint\(s\) 'j1' \(-2, line 4\)"):
        r = parse_urdf(text)
    assert np.all(np.isinf(r.velocity_limit))


def test_transmission_joints_and_inertial_origins_are_ignored():
    r = parse_urdf("""<robot name="t">
      <link name="a"><inertial><origin xyz="5 5 5"/></inertial></link><link name="b"/>
      <joint name="j" type="fixed"><parent link="a"/><child link="b"/><origin xyz="1 2 3"/></joint>
      <transmission name="tr"><joint name="j"><hardwareInterface>x</hardwareInterface></joint></transmission>
      <gazebo reference="a"><material>Gazebo/Grey</material></gazebo>
      <material name="grey"><color rgba="0.5 0.5 0.5 1"/></material>
    </robot>""")
    assert r.node_names == ("a", "b")
    np.testing.assert_allclose(r.fk(np.zeros(0))[:3, 3], [1, 2, 3])


# ---------------------------------------------------------------------- mimic
MIMIC = """<?xml version="1.0"?>
<robot name="mimic">
  <link name="base"/><link name="l1"/><link name="l2"/><link name="l3"/><link name="tip"/>
  <joint name="leader" type="revolute"><parent link="base"/><child link="l1"/>
    <axis xyz="0 0 1"/><limit lower="-2" upper="2"/></joint>
  <joint name="follower" type="revolute"><parent link="l1"/><child link="l2"/>
    <origin xyz="1 0 0"/><axis xyz="0 0 1"/><limit lower="-9" upper="9"/>
    <mimic joint="leader" multiplier="2" offset="0.3"/></joint>
  <joint name="slide" type="prismatic"><parent link="l2"/><child link="l3"/>
    <origin xyz="1 0 0"/><axis xyz="1 0 0"/><limit lower="-0.5" upper="0.5"/></joint>
  <joint name="tip_joint" type="fixed"><parent link="l3"/><child link="tip"/>
    <origin xyz="0.5 0 0.25"/></joint>
</robot>
"""


def _mimic_formula(q):
    a, s = q
    b = a + (2.0 * a + 0.3)  # absolute angle after the follower
    p = np.array([math.cos(a) + (1.5 + s) * math.cos(b), math.sin(a) + (1.5 + s) * math.sin(b), 0.25])
    return _rot_z(b), p


def test_mimic_follower_fk_matches_formula_and_has_no_dof():
    r = parse_urdf(MIMIC)
    assert r.dof == 2 and r.joint_names == ("leader", "slide")
    assert "follower" not in r.joint_names
    for q in np.random.default_rng(3).uniform([-2, -0.5], [2, 0.5], size=(10, 2)):
        T = r.fk(q)
        R, p = _mimic_formula(q)
        np.testing.assert_allclose(T[:3, :3], R, atol=1e-13)
        np.testing.assert_allclose(T[:3, 3], p, atol=1e-13)


def test_mimic_jacobian_equals_central_finite_differences():
    r = parse_urdf(MIMIC)
    for q in np.random.default_rng(4).uniform([-2, -0.5], [2, 0.5], size=(5, 2)):
        J = r.jacobian(q)
        Jfd = fd_jacobian(r, q)
        np.testing.assert_allclose(J, Jfd, rtol=0, atol=1e-7)


def test_mimic_defaults_are_multiplier_1_offset_0():
    r = parse_urdf(MIMIC.replace('multiplier="2" offset="0.3"', ""))
    i = r.frame_index("l2")
    assert (r.multiplier[i], r.offset[i], r.mimic_leader[i]) == (1.0, 0.0, "leader")


# ---------------------------------------------------------------------- base / tip
TWO_ARMS = """<robot name="two_arms">
  <link name="world"/><link name="torso"/>
  <link name="l_upper"/><link name="l_hand"/><link name="r_upper"/><link name="r_hand"/>
  <joint name="waist" type="revolute"><parent link="world"/><child link="torso"/>
    <axis xyz="0 0 1"/><limit lower="-1" upper="1"/></joint>
  <joint name="l_shoulder" type="revolute"><parent link="torso"/><child link="l_upper"/>
    <origin xyz="0 0.2 0.5"/><axis xyz="0 1 0"/><limit lower="-1" upper="1"/></joint>
  <joint name="l_elbow" type="revolute"><parent link="l_upper"/><child link="l_hand"/>
    <origin xyz="0.3 0 0"/><axis xyz="0 1 0"/><limit lower="-1" upper="1"/></joint>
  <joint name="r_shoulder" type="revolute"><parent link="torso"/><child link="r_upper"/>
    <origin xyz="0 -0.2 0.5"/><axis xyz="0 1 0"/><limit lower="-1" upper="1"/></joint>
  <joint name="r_elbow" type="revolute"><parent link="r_upper"/><child link="r_hand"/>
    <origin xyz="0.3 0 0"/><axis xyz="0 1 0"/><limit lower="-1" upper="1"/></joint>
</robot>
"""


@pytest.fixture
def two_arms(tmp_path):
    p = tmp_path / "two_arms.urdf"
    p.write_text(TWO_ARMS)
    return p


def test_base_tip_keeps_only_that_chain(two_arms):
    r = load_robot(two_arms, base="torso", tip="l_hand")
    assert r.node_names == ("torso", "l_upper", "l_hand")
    assert r.joint_names == ("l_shoulder", "l_elbow")
    full = load_urdf(two_arms)
    assert full.dof == 5
    q = np.array([0.4, -0.7])
    qf = np.zeros(5)
    qf[[full.joint_index("l_shoulder"), full.joint_index("l_elbow")]] = q
    np.testing.assert_allclose(r.fk(q), np.linalg.inv(full.fk(qf, "torso")) @ full.fk(qf, "l_hand"),
                               atol=1e-14)


def test_tip_alone_cuts_from_the_root(two_arms):
    r = load_urdf(two_arms, tip="r_hand")
    assert r.node_names == ("world", "torso", "r_upper", "r_hand")


def test_base_alone_infers_the_tip_of_an_unbranched_subtree(two_arms):
    r = load_urdf(two_arms, base="l_upper")
    assert r.node_names == ("l_upper", "l_hand")


def test_base_alone_on_a_branching_tree_requires_tip(two_arms):
    with pytest.raises(ModelError, match=r"tip is required.*'l_hand'.*'r_hand'"):
        load_urdf(two_arms, base="torso")


def test_unknown_base_or_tip_is_a_frame_error_naming_the_file(two_arms):
    with pytest.raises(FrameError, match=re.escape(str(two_arms)) + r".*'l_hnd'.*closest.*'l_hand'"):
        load_urdf(two_arms, base="torso", tip="l_hnd")


@pytest.mark.parametrize("kw", [{"base": 1}, {"tip": 3.0}])
def test_a_base_or_tip_that_is_not_a_name_is_refused_for_files_and_bundled_models_alike(two_arms, kw):
    # load_robot("panda", base=1) cut the chain at node 1 while a file said "base=1 is not a link"
    for model in ("panda", two_arms):
        with pytest.raises(FrameError, match=rf"load_robot: {next(iter(kw))} must be a link name \(str\), got "):
            load_robot(model, **kw)


def test_base_not_above_tip_is_refused(two_arms):
    with pytest.raises(ModelError, match=re.escape(str(two_arms)) + r".*not an ancestor"):
        load_urdf(two_arms, base="l_upper", tip="r_hand")


# ---------------------------------------------------------------------- hostile / malformed input
def _robot(joints: str, links=("a", "b", "c")) -> str:
    ls = "".join(f'\n  <link name="{n}"/>' for n in links)
    return f'<?xml version="1.0"?>\n<robot name="bad">{ls}\n{joints}\n</robot>\n'


def _rev(name, parent, child, extra='<limit lower="-1" upper="1"/>', jtype="revolute"):
    return (f'  <joint name="{name}" type="{jtype}">\n    <parent link="{parent}"/>\n'
            f'    <child link="{child}"/>\n    {extra}\n  </joint>')


def _line_of(text: str, needle: str) -> int:
    return text[: text.index(needle)].count("\n") + 1


def _refused(tmp_path, text, *patterns, **kw):
    """load_urdf on ``text`` written to a file raises ModelError naming the file and patterns."""
    p = tmp_path / "bad.urdf"
    p.write_bytes(text.encode() if isinstance(text, str) else text)
    with pytest.raises(ModelError, match=re.escape(str(p))) as ei:
        load_urdf(p, **kw)
    msg = str(ei.value)
    for pat in patterns:
        assert re.search(pat, msg), f"{pat!r} not in {msg!r}"
    return msg


def test_doctype_is_refused(tmp_path):
    _refused(tmp_path, '<?xml version="1.0"?>\n<!DOCTYPE robot>\n<robot name="x"><link name="a"/></robot>',
             r"line 2", r"DOCTYPE robot.*refused")


def test_entity_declarations_billion_laughs_are_refused(tmp_path):
    lol = ['<!ENTITY lol0 "lol">'] + [f'<!ENTITY lol{i} "{f"&lol{i - 1};" * 10}">' for i in range(1, 10)]
    text = ('<?xml version="1.0"?>\n<!DOCTYPE robot [\n' + "\n".join(lol)
            + ']>\n<robot name="&lol9;"><link name="a"/></robot>\n')
    _refused(tmp_path, text, r"line 2", r"ENTITY", r"billion laughs")


def test_external_entity_is_refused(tmp_path):
    text = ('<?xml version="1.0"?>\n<!DOCTYPE robot [\n<!ENTITY xxe SYSTEM "file:///etc/passwd">\n]>\n'
            '<robot name="x"><link name="&xxe;"/></robot>\n')
    msg = _refused(tmp_path, text, r"line 2", r"DOCTYPE.*refused")
    assert "root:" not in msg


def test_external_dtd_is_refused(tmp_path):
    text = '<!DOCTYPE robot SYSTEM "file:///etc/passwd">\n<robot name="x"><link name="a"/></robot>\n'
    _refused(tmp_path, text, r"line 1", r"SYSTEM 'file:///etc/passwd'.*refused")


def test_entity_declarations_are_refused_by_parse_urdf_too():
    with pytest.raises(ModelError, match=r"<string>: line 1: .*DOCTYPE"):
        parse_urdf('<!DOCTYPE r [<!ENTITY e "x">]><robot name="&e;"/>')


def test_oversize_file_is_refused_without_reading(tmp_path):
    _refused(tmp_path, _robot(_rev("j1", "a", "b")), r"larger than max_bytes=64", max_bytes=64)


def test_the_size_cap_named_in_the_refusal_can_be_raised_through_load_robot_and_the_command(tmp_path, capsys):
    # the refusal said "pass a larger max_bytes", which load_robot and the command did not take
    from invkin.cli import main

    p = tmp_path / "big.urdf"
    p.write_text(_robot(_rev("j1", "a", "b"), links=("a", "b")))
    with pytest.raises(ModelError, match=r"larger than max_bytes=64; refused \(pass a larger max_bytes if it is "
                                         r"trusted: load_robot\(\.\.\., max_bytes=n\), invkin --max-bytes N\)"):
        load_robot(p, max_bytes=64)
    assert load_robot(p, max_bytes=10_000).joint_names == ("j1",)
    assert load_robot(p, max_bytes=10_000, floating_base=True).dof == 7
    assert main(["info", str(p), "--max-bytes", "64"]) == 2
    assert "invkin --max-bytes N" in capsys.readouterr().err
    assert main(["info", str(p), "--max-bytes", "10000", "--json"]) == 0
    for bad, says in ((0, "expected a positive integer"), ("big", "expected a positive integer")):
        with pytest.raises(ModelError, match=says):
            load_robot(p, max_bytes=bad)
    with pytest.raises(ModelError, match=r"max_bytes applies to URDF, MJCF and SRDF files; 'panda' reads none"):
        load_robot("panda", max_bytes=10_000)


def test_missing_file_is_a_model_error(tmp_path):
    p = tmp_path / "nope.urdf"
    with pytest.raises(ModelError, match=re.escape(str(p)) + r".*no such"):
        load_urdf(p)
    with pytest.raises(ModelError, match=r"no such"):
        load_robot(p)


def test_directory_is_a_model_error(tmp_path):
    with pytest.raises(ModelError, match=r"directory"):
        load_urdf(tmp_path)


def test_malformed_xml_is_refused_with_its_line(tmp_path):
    _refused(tmp_path, '<?xml version="1.0"?>\n<robot name="x">\n  <link name="a">\n</robot>\n',
             r"line 4, column \d+: malformed XML: mismatched tag")


@pytest.mark.parametrize("as_bytes", [False, True])
def test_blank_lines_before_the_xml_declaration_are_read_as_pinocchio_reads_them(tmp_path, as_bytes):
    # pybullet_data's differential/diff_ring.urdf starts with a newline; expat alone refuses it
    text = "\n\n" + _robot(_rev("j1", "a", "b"), links=("a", "b")).replace('<robot name="bad">', '<robot name="ok">')
    p = tmp_path / "blank.urdf"
    p.write_text(text)
    robot = load_urdf(p) if not as_bytes else parse_urdf(text.encode())
    assert robot.name == "ok" and robot.joint_names == ("j1",)
    bad = "\n\n" + _robot(_rev("j1", "a", "b", extra=""))  # line numbers still count the blank lines
    _refused(tmp_path, bad, rf"<joint name='j1'> line {_line_of(bad, '<joint')}: revolute joint 'j1' has no <limit")


def test_empty_document_is_refused(tmp_path):
    _refused(tmp_path, "", r"malformed XML")


def test_root_element_must_be_robot(tmp_path):
    _refused(tmp_path, '<?xml version="1.0"?>\n<sdf><link name="a"/></sdf>', r"line 2: root element is <sdf>")


def test_unexpanded_xacro_is_refused(tmp_path):
    text = '<robot name="x" xmlns:xacro="http://www.ros.org/wiki/xacro">\n<xacro:include filename="a"/>\n</robot>'
    _refused(tmp_path, text, r"<xacro:include filename='a'> line 2", r"run `xacro")


def test_cycle_is_refused(tmp_path):
    text = _robot("\n".join([_rev("j1", "a", "b"), _rev("j2", "b", "c"), _rev("j3", "c", "a")]))
    _refused(tmp_path, text, rf"<joint name='j1'> line {_line_of(text, 'j1')}", r"cycle", r"'j2'", r"'j3'")


def test_cycle_below_a_root_is_refused(tmp_path):
    text = _robot("\n".join([_rev("j1", "a", "b"), _rev("j2", "c", "d"), _rev("j3", "d", "c")]),
                  links=("a", "b", "c", "d"))
    _refused(tmp_path, text, rf"<joint name='j2'> line {_line_of(text, 'j2')}", r"cycle")


def test_two_roots_are_refused(tmp_path):
    text = _robot(_rev("j1", "a", "b"))
    la, lc = _line_of(text, '<link name="a"'), _line_of(text, '<link name="c"')
    _refused(tmp_path, text, r"2 root links", rf"'a' \(line {la}\)", rf"'c' \(line {lc}\)")


def test_duplicate_link_is_refused(tmp_path):
    text = _robot(_rev("j1", "a", "b"), links=("a", "b", "a"))
    _refused(tmp_path, text, r"<link name='a'> line 5", r"duplicate link name 'a' \(first defined at line 3\)")


def test_duplicate_joint_is_refused(tmp_path):
    text = _robot("\n".join([_rev("j1", "a", "b"), _rev("j1", "b", "c")]))
    second = text.index('name="j1"', text.index('name="j1"') + 1)
    line = text[:second].count("\n") + 1
    _refused(tmp_path, text, rf"<joint name='j1'> line {line}", r"duplicate joint name 'j1'")


def test_missing_parent_link_is_refused(tmp_path):
    text = _robot("\n".join([_rev("j1", "a", "b"), _rev("j2", "bb", "c")]))
    _refused(tmp_path, text, rf"<joint name='j2'> line {_line_of(text, 'j2')}",
             r"parent link 'bb' is not a <link>", r"closest: 'b'")


def test_missing_child_link_is_refused(tmp_path):
    text = _robot("\n".join([_rev("j1", "a", "b"), _rev("j2", "b", "cc"), _rev("j3", "b", "c")]))
    _refused(tmp_path, text, rf"<joint name='j2'> line {_line_of(text, 'j2')}", r"child link 'cc' is not a <link>")


def test_link_with_two_parent_joints_is_refused(tmp_path):
    text = _robot("\n".join([_rev("j1", "a", "b"), _rev("j2", "a", "b")]))
    _refused(tmp_path, text, rf"<joint name='j2'> line {_line_of(text, 'j2')}", r"child of two joints")


@pytest.mark.parametrize("xyz, what", [("nan 0 0", "not finite"), ("0 inf 0", "not finite"),
                                       ("0 0 abc", "not a number"), ("1 2", "expected 3 numbers"),
                                       ("1e999 0 0", "overflows"), ("${l} 0 0", "not a number")])
def test_bad_numbers_in_xyz_are_refused(tmp_path, xyz, what):
    text = _robot(_rev("j1", "a", "b", f'<origin xyz="{xyz}" rpy="0 0 0"/><limit lower="-1" upper="1"/>'),
                  links=("a", "b"))
    _refused(tmp_path, text, rf"<joint name='j1'> line {_line_of(text, 'j1')}",
             rf"<origin xyz='{re.escape(xyz)}'> \(line {_line_of(text, '<origin')}\)", what)


@pytest.mark.parametrize("part", ['<origin rpy="0 0"/>', '<axis xyz="1 0 0 0"/>', '<axis xyz="x 0 0"/>'])
def test_wrong_components_in_rpy_or_axis_are_refused(tmp_path, part):
    text = _robot(_rev("j1", "a", "b", part + '<limit lower="-1" upper="1"/>'), links=("a", "b"))
    _refused(tmp_path, text, rf"<joint name='j1'> line {_line_of(text, 'j1')}", r"expected 3 numbers|not a number")


def test_zero_axis_is_refused(tmp_path):
    text = _robot(_rev("j1", "a", "b", '<axis xyz="0 0 0"/><limit lower="-1" upper="1"/>'), links=("a", "b"))
    _refused(tmp_path, text, rf"<joint name='j1'> line {_line_of(text, 'j1')}", r"zero; expected a non-zero")


def test_zero_axis_on_a_fixed_joint_is_ignored():
    r = parse_urdf(_robot(_rev("j1", "a", "b", '<axis xyz="0 0 0"/>', jtype="fixed"), links=("a", "b")))
    assert r.dof == 0


@pytest.mark.parametrize("jtype, kind, n", [("floating", "free", 6), ("planar", "planar", 3)])
def test_floating_and_planar_joints_load_as_free_and_planar_joints(jtype, kind, n):
    r = parse_urdf(_robot(_rev("j1", "a", "b", '<axis xyz="0 0 1"/>', jtype=jtype), links=("a", "b")))
    assert r.joint_types_per_dof == (kind,) * n and r.free_joints == ("j1",)


def test_floating_joint_on_or_off_the_selected_chain(tmp_path):
    text = TWO_ARMS.replace('type="revolute"><parent link="world"/>', 'type="floating"><parent link="world"/>')
    p = tmp_path / "floating.urdf"
    p.write_text(text)
    r = load_urdf(p, base="torso", tip="l_hand")
    assert r.joint_names == ("l_shoulder", "l_elbow")
    r = load_urdf(p, base="world", tip="l_hand")
    assert r.joint_names == ("waist.x", "waist.y", "waist.z", "waist.rx", "waist.ry", "waist.rz",
                             "l_shoulder", "l_elbow")
    assert load_urdf(p).floating


def test_unknown_joint_type_is_refused(tmp_path):
    text = _robot(_rev("j1", "a", "b", "", jtype="hinge"), links=("a", "b"))
    _refused(tmp_path, text, rf"<joint name='j1'> line {_line_of(text, 'j1')}", r"unknown type 'hinge'")


@pytest.mark.parametrize("jtype", ["revolute", "prismatic"])
def test_missing_limit_on_revolute_or_prismatic_is_refused(tmp_path, jtype):
    text = _robot(_rev("j1", "a", "b", '<axis xyz="0 0 1"/>', jtype=jtype), links=("a", "b"))
    _refused(tmp_path, text, rf"<joint name='j1'> line {_line_of(text, 'j1')}", r"no <limit")


def test_lower_above_upper_is_refused(tmp_path):
    text = _robot(_rev("j1", "a", "b", '<limit lower="1" upper="-1"/>'), links=("a", "b"))
    _refused(tmp_path, text, rf"<joint name='j1'> line {_line_of(text, 'j1')}", r"lower=1.0 > upper=-1.0")


def test_nan_limit_is_refused(tmp_path):
    text = _robot(_rev("j1", "a", "b", '<limit lower="nan" upper="1"/>'), links=("a", "b"))
    _refused(tmp_path, text, rf"<joint name='j1'> line {_line_of(text, 'j1')}", r"<limit lower='nan'>.*not finite")


def test_missing_parent_element_and_names_are_refused(tmp_path):
    text = _robot('  <joint name="j1" type="fixed">\n    <child link="b"/>\n  </joint>', links=("a", "b"))
    _refused(tmp_path, text, r"<joint name='j1'> line", r"no <parent link")
    text = _robot('  <joint type="fixed">\n    <parent link="a"/><child link="b"/>\n  </joint>', links=("a", "b"))
    _refused(tmp_path, text, rf"<joint type='fixed'> line {_line_of(text, '<joint')}", r"name=.*missing")
    _refused(tmp_path, _robot("", links=("",)), r"<link name=''> line 3", r"empty")


def test_duplicate_origin_in_a_joint_is_refused(tmp_path):
    text = _robot(_rev("j1", "a", "b", '<origin xyz="1 0 0"/><origin xyz="2 0 0"/>', jtype="fixed"),
                  links=("a", "b"))
    _refused(tmp_path, text, r"<origin> appears twice")


def test_mimic_of_a_missing_joint_warns_with_the_closest_name_and_loads_an_independent_joint():
    text = _robot(_rev("Left_q1", "a", "b", '<limit lower="-1" upper="1"/>') + "\n"
                  + _rev("Left_q2", "b", "c", '<limit lower="-1" upper="1"/><mimic joint="q1"/>'),
                  links=("a", "b", "c"))
    with pytest.warns(ModelWarning, match=rf"<joint name='Left_q2'> line {_line_of(text, 'Left_q2')}.*"
                                          r"no joint 'q1'; closest: 'Left_q1'.*independent joint"):
        r = parse_urdf(text)
    assert r.joint_names == ("Left_q1", "Left_q2") and r.mimic_leader == ("", "", "")


def test_mimic_on_a_fixed_joint_is_ignored_with_a_warning():
    text = _robot(_rev("j1", "a", "b", '<limit lower="-1" upper="1"/>') + "\n"
                  + _rev("grip", "b", "c", '<origin xyz="0 0.1 0"/><mimic joint="j1"/>', jtype="fixed"),
                  links=("a", "b", "c"))
    with pytest.warns(ModelWarning, match=r"1 <mimic> element\(s\) ignored.*<joint name='grip'>.*<mimic joint='j1'>.*on a fixed joint"):
        r = parse_urdf(text)
    assert r.dof == 1 and r.joint_type[r.frame_index("c")] == 0
    assert np.allclose(r.fk(np.array([0.4]), "c")[:3, 3], _rot_x(0.4) @ [0, 0.1, 0])  # j1 turns about x


def _warnings_of(load) -> list:
    """(category, file, line) of every warning that calling ``load`` emits."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        load()
    return [(w.category, w.filename, w.lineno) for w in caught]


def test_model_warnings_point_at_the_callers_load_line(tmp_path):
    text = _robot(_rev("j1", "a", "b", '<limit lower="-1" upper="1"/>') + "\n"
                  + _rev("grip", "b", "c", '<mimic joint="j1"/>', jtype="fixed") + "\n"
                  + _rev("j3", "c", "d", '<limit lower="-1" upper="1"/><mimic joint="nope"/>'),
                  links=("a", "b", "c", "d"))
    path = tmp_path / "m.urdf"
    path.write_text(text)
    for load in (lambda: load_robot(path), lambda: load_urdf(path), lambda: parse_urdf(text),
                 lambda: load_robot(path, floating_base=True), lambda: load_robot(path, tip="d")):
        # both repairs (the ignored mimic, the independent follower), each at the line of the call
        assert _warnings_of(load) == [(ModelWarning, __file__, load.__code__.co_firstlineno)] * 2
    # a cut chain that keeps a mimic follower fixed (Robot.subchain, deeper in the package)
    for load in (lambda: load_robot(DATA / "erd" / "panda_fingers.urdf", tip="panda_rightfinger"),):
        assert _warnings_of(load) == [(ModelWarning, __file__, load.__code__.co_firstlineno)]


def test_mimic_of_a_mimic_resolves_to_the_first_leader():
    text = _robot(_rev("j1", "a", "b", '<limit lower="-1" upper="1"/>') + "\n"
                  + _rev("j2", "b", "c", '<limit lower="-9" upper="9"/><mimic joint="j1" multiplier="2" offset="0.1"/>')
                  + "\n"
                  + _rev("j3", "c", "d", '<limit lower="-9" upper="9"/><mimic joint="j2" multiplier="3" offset="0.2"/>'),
                  links=("a", "b", "c", "d"))
    r = parse_urdf(text)
    i = r.frame_index("d")
    assert r.dof == 1 and r.mimic_leader[i] == "j1"
    assert (r.multiplier[i], r.offset[i]) == pytest.approx((6.0, 0.5))


def test_tip_behind_a_mimic_whose_leader_is_on_another_branch_keeps_it_fixed():
    # the panda's right finger mimics the left one: the chain to the right finger loses its leader
    with pytest.warns(ModelWarning, match=r"panda_finger_joint2.*follows 'panda_finger_joint1'.*kept fixed at 0.02"):
        arm = load_robot(DATA / "erd" / "panda_fingers.urdf", tip="panda_rightfinger")
    full = load_robot(DATA / "erd" / "panda_fingers.urdf")
    assert arm.dof == 7 and arm.joint_names == full.joint_names[:7]
    q = full.neutral()
    q[:7] = full.sample(rng=2)[:7]
    np.testing.assert_allclose(arm.fk(q[:7], "panda_rightfinger"), full.fk(q, "panda_rightfinger"), atol=1e-13)


def test_no_links_is_refused(tmp_path):
    _refused(tmp_path, '<robot name="x">\n</robot>', r"<robot name='x'> line 1", r"no <link>")


def test_parse_urdf_rejects_non_text():
    with pytest.raises(ModelError, match=r"expects str or bytes, got int"):
        parse_urdf(42)


def test_a_600_joint_chain_loads_and_its_fk_and_jacobian_match_finite_differences(tmp_path):
    n = 600  # deeper than any fixed-size path buffer a kernel might use
    links = "\n".join(f'<link name="l{i}"/>' for i in range(n + 1))
    joints = "\n".join(
        f'<joint name="j{i}" type="revolute"><origin xyz="0 0 0.01"/><axis xyz="0 1 0"/>'
        f'<parent link="l{i}"/><child link="l{i + 1}"/><limit lower="-1" upper="1"/></joint>'
        for i in range(n))
    p = tmp_path / "long.urdf"
    p.write_text(f'<robot name="long">\n{links}\n{joints}\n</robot>\n')
    robot = load_urdf(p)
    q = np.full(n, 0.001)
    T = robot.fk(q, f"l{n}")
    assert np.all(np.isfinite(T))
    J = robot.jacobian(q, f"l{n}")
    k = n // 2
    e = np.zeros(n)
    e[k] = 1e-6
    fd = (robot.fk(q + e, f"l{n}")[:3, 3] - robot.fk(q - e, f"l{n}")[:3, 3]) / 2e-6
    assert np.allclose(fd, J[:3, k], atol=1e-7)


def test_the_tree_of_a_chain_deeper_than_the_recursion_limit_is_drawn_in_linear_size():
    n = 3000  # Robot.tree() walked recursively: RecursionError from about 1,000 links
    links = "".join(f'<link name="l{i}"/>' for i in range(n + 1))
    joints = "".join(f'<joint name="j{i}" type="revolute"><parent link="l{i}"/><child link="l{i + 1}"/>'
                     f'<limit lower="-1" upper="1"/></joint>' for i in range(n))
    lines = parse_urdf(f'<robot name="deep">{links}{joints}</robot>').tree().splitlines()
    assert len(lines) == n + 1 and lines[0] == "l0"
    assert lines[1] == "└─ l1  <- j0 (revolute [-1, 1])"
    assert lines[-1] == "… " + "   " * 48 + f"└─ l{n}  <- j{n - 1} (revolute [-1, 1])"  # indentation stops at 48
    assert max(map(len, lines)) < 200


def test_the_standard_talos_model_loads_with_its_gripper_mimics_ignored():
    with pytest.warns(ModelWarning, match=r"12 <mimic> element\(s\) ignored.*gripper_left_inner_double_joint.*"
                                          r"on a fixed joint") as seen:
        talos = load_robot(DATA / "erd" / "talos_reduced.urdf")
    assert len([w for w in seen if issubclass(w.category, ModelWarning)]) == 1  # one warning, not one per joint
    assert talos.dof == 32 and "gripper_left_joint" in talos.joint_names
    with pytest.warns(ModelWarning):
        arm = load_robot(DATA / "erd" / "talos_reduced.urdf", base="torso_2_link", tip="gripper_left_fingertip_3_link")
    assert arm.joint_names == tuple(f"arm_left_{k}_joint" for k in range(1, 8))
    q = talos.sample(rng=1)
    cols = [talos.joint_index(n) for n in arm.joint_names]
    T = np.linalg.inv(talos.fk(q, "torso_2_link")) @ talos.fk(q, "gripper_left_fingertip_3_link")
    np.testing.assert_allclose(arm.fk(q[cols], "gripper_left_fingertip_3_link"), T, atol=1e-12)


def test_a_joint_named_like_a_floating_joints_q_entry_is_refused_naming_both(tmp_path):
    # q entries are looked up by name: a second 'base.x' made joint_index, lock and SRDF values pick
    # the floating joint's entry
    text = _robot('  <joint name="base" type="floating"><parent link="a"/><child link="b"/></joint>\n'
                  + _rev("base.x", "b", "c"))
    _refused(tmp_path, text, r"<joint name='base.x'> line \d+: joint 'base.x': its q entry 'base.x' is also an "
                             r"entry of joint 'base'.*rename one")


def test_floating_base_refuses_a_model_with_a_joint_named_like_its_entries(tmp_path):
    p = tmp_path / "r.urdf"
    p.write_text(_robot(_rev("root_joint.rx", "a", "b"), links=("a", "b")))
    assert load_urdf(p).joint_names == ("root_joint.rx",)
    with pytest.raises(ModelError, match=r"already has a joint 'root_joint.rx', which the free joint's q entries "
                                         r"would repeat; choose another joint= name"):
        load_robot(p, floating_base=True)
    assert load_urdf(p).with_floating_base(joint="base").joint_names[:1] == ("base.x",)
