"""MJCF through MuJoCo's compiler: FK equal to mj_kinematics, qpos conversions, geoms, errors."""
from __future__ import annotations

import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

import invkin as ik
from invkin.errors import ModelError

mujoco = pytest.importorskip("mujoco")
from invkin.model.mjcf import load_mjcf, q_from_qpos, qpos_from_q

DATA = Path(__file__).resolve().parent / "data" / "mjcf"


def _fk_error(robot, m, rng, n=20):
    """Largest |invkin FK - MuJoCo mj_kinematics| over every body and site at n random q."""
    d = mujoco.MjData(m)
    err = 0.0
    for _ in range(n):
        q = robot.sample(rng=rng)
        d.qpos[:] = qpos_from_q(robot, q)
        mujoco.mj_kinematics(m, d)
        Ts = robot.fk_all(q)
        for i in range(m.nbody):
            T = Ts[mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_BODY, i) or f"body{i}"]
            err = max(err, np.abs(T[:3, 3] - d.xpos[i]).max(), np.abs(T[:3, :3] - d.xmat[i].reshape(3, 3)).max())
        for s in range(m.nsite):
            T = Ts[mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_SITE, s)]
            err = max(err, np.abs(T[:3, 3] - d.site_xpos[s]).max(),
                      np.abs(T[:3, :3] - d.site_xmat[s].reshape(3, 3)).max())
    return err


def test_fk_of_every_body_and_site_equals_mujoco_on_the_test_arm():
    robot = ik.load_robot(DATA / "arm.xml")
    m = mujoco.MjModel.from_xml_path(str(DATA / "arm.xml"))
    assert _fk_error(robot, m, np.random.default_rng(0)) <= 1e-12


def test_a_free_joint_is_x_y_z_and_a_rotation_vector_and_fk_equals_mujoco():
    robot = ik.load_robot(DATA / "floater.xml")
    m = mujoco.MjModel.from_xml_path(str(DATA / "floater.xml"))
    assert robot.name == "floater"
    assert robot.joint_names == ("root.x", "root.y", "root.z", "root.rx", "root.ry", "root.rz", "hip", "knee")
    q0 = q_from_qpos(robot, m.qpos0)  # the initial pose: the body's pos and quat
    assert np.allclose(robot.fk(q0, "torso"), _mj_pose(m, m.qpos0, 1), atol=1e-12)
    rng = np.random.default_rng(5)
    assert _fk_error(robot, m, rng) <= 1e-12
    for _ in range(5):  # far from the origin and turned anywhere
        q = robot.sample(rng=rng)
        q[:3] = rng.uniform(-5, 5, 3)
        q[3:6] = ik.spatial.so3_log(ik.spatial.so3_exp(rng.normal(size=3) * 2))
        assert np.allclose(robot.fk(q, "foot"), _mj_pose(m, qpos_from_q(robot, q), site=0), atol=1e-12)


def _mj_pose(m, qpos, body=None, site=None):
    """World pose of a body (or a site) after MuJoCo's own forward kinematics at qpos."""
    d = mujoco.MjData(m)
    d.qpos[:] = qpos
    mujoco.mj_kinematics(m, d)
    R, p = (d.xmat[body], d.xpos[body]) if site is None else (d.site_xmat[site], d.site_xpos[site])
    T = np.eye(4)
    T[:3, :3] = R.reshape(3, 3)
    T[:3, 3] = p
    return T


def test_defaults_degrees_ref_and_include_are_resolved_by_mujoco():
    robot = ik.load_robot(DATA / "arm.xml")
    assert robot.joint_names == ("j1", "j2", "j3", "j5", "j4.x", "j4.y", "j4.z", "pan")  # pan from head.xml
    i = robot.joint_index
    assert robot.lower[i("j1")] == pytest.approx(-np.radians(170)) and robot.upper[i("j2")] == pytest.approx(np.pi / 2)
    assert (robot.lower[i("j3")], robot.upper[i("j3")]) == pytest.approx((-0.1, 0.2))
    assert robot.joint_types_per_dof[i("j5")] == "continuous"  # limited="false" overrides the default
    assert robot.offset[robot.frame_index("base")] == pytest.approx(-np.radians(15))  # ref="15"
    assert {"world", "base", "upper", "fore", "hand", "head", "tip"} <= set(robot.frame_names)
    assert not any("/" in f for f in robot.frame_names)  # joint nodes inside a body are internal


def test_qpos_and_q_convert_both_ways():
    robot = ik.load_robot(DATA / "arm.xml")
    m = mujoco.MjModel.from_xml_path(str(DATA / "arm.xml"))
    assert robot.dof == m.nq - 1  # the ball's 4 quaternion entries are a 3-vector here
    for q in robot.sample(10, rng=1):
        qpos = qpos_from_q(robot, q)
        assert np.allclose(robot.difference(q_from_qpos(robot, qpos), q), 0.0, atol=1e-12)
        assert np.allclose(qpos_from_q(robot, q_from_qpos(robot, qpos)) * np.sign(qpos[4]), qpos * np.sign(qpos[4]),
                           atol=1e-12)
    assert np.array_equal(q_from_qpos(robot, m.qpos0)[:3], m.qpos0[:3])


def test_geoms_and_inertials_are_kept_per_link():
    robot = ik.load_robot(DATA / "arm.xml")
    m = mujoco.MjModel.from_xml_path(str(DATA / "arm.xml"))
    g = robot.geoms
    assert set(g) == {"base", "upper", "hand", "head"}
    box, = g["base"]
    assert box.type == "box" and box.size.tolist() == [0.1, 0.1, 0.05] and np.array_equal(box.T_link_geom, np.eye(4))
    cap, = g["upper"]  # fromto: MuJoCo centres the capsule and aligns its z axis with the segment
    assert cap.type == "capsule" and cap.size[:2] == pytest.approx([0.02, 0.15])
    assert cap.T_link_geom[:3, 3] == pytest.approx([0.15, 0, 0]) and np.abs(cap.T_link_geom[:3, 2]) == pytest.approx([1, 0, 0])
    sphere, = g["hand"]
    assert (sphere.contype, sphere.conaffinity) == (0, 0)  # visual only
    mass, com = robot.extras["inertials"]["upper"]
    assert mass == pytest.approx(m.body_mass[2]) and com == pytest.approx([0.15, 0, 0])
    assert robot.subchain("world", "hand").geoms.keys() == {"base", "upper", "hand"}


def _random_mjcf(rng, n_bodies, masses=False):
    """A random tree: random body poses, 0-2 joints per body of random type, anchors, axes and refs;
    ``masses``: each body's sphere of a random size off its origin (distinct masses and centres)."""
    lines, parents = [], [-1]
    bodies = []

    def vec(k, s=0.3):
        return " ".join(f"{x:.6f}" for x in rng.uniform(-s, s, k))

    for b in range(n_bodies):
        bodies.append([])
        p = int(rng.integers(-1, b)) if b else -1
        parents.append(p)
    kids = {i: [b for b in range(n_bodies) if parents[b + 1] == i] for i in range(-1, n_bodies)}

    def emit(b, depth):
        quat = rng.normal(size=4)
        quat /= np.linalg.norm(quat)
        pad = "  " * depth
        lines.append(f'{pad}<body name="b{b}" pos="{vec(3)}" quat="{" ".join(f"{x:.9f}" for x in quat)}">')
        geom = f' size="{rng.uniform(0.02, 0.1):.6f}" pos="{vec(3, 0.2)}"' if masses else ' size="0.05"'
        lines.append(f'{pad}  <geom type="sphere"{geom}/>')
        kinds = list(rng.choice(["hinge", "slide", "hinge", "ball", "none"], size=int(rng.integers(0, 3))))
        if depth == 2 and rng.random() < 0.5:  # a top-level body: a free joint, alone in its body
            kinds = []
            lines.append(f'{pad}  <freejoint name="b{b}_free"/>')
        if "ball" in kinds:  # MuJoCo: no rotation after a ball in one body
            kinds = [k for k in kinds if k != "ball"] + ["ball"]
        for k, kind in enumerate(kinds):
            if kind == "none":
                continue
            extra = "" if kind == "ball" else f' axis="{vec(3, 1)}" ref="{rng.uniform(-0.5, 0.5):.6f}"'
            if kind != "ball" and rng.random() < 0.7:
                extra += ' limited="true" range="-1.2 0.9"'
            lines.append(f'{pad}  <joint name="b{b}_j{k}" type="{kind}" pos="{vec(3, 0.1)}"{extra}/>')
        if rng.random() < 0.5:
            lines.append(f'{pad}  <site name="s{b}" pos="{vec(3)}" euler="{vec(3, 3)}"/>')
        for c in kids[b]:
            emit(c, depth + 1)
        lines.append(f"{pad}</body>")

    for r in kids[-1]:
        emit(r, 2)
    return '<mujoco model="random">\n  <worldbody>\n' + "\n".join(lines) + "\n  </worldbody>\n</mujoco>\n"


@pytest.mark.parametrize("seed", range(8))
def test_fk_equals_mujoco_on_generated_trees(tmp_path, seed):
    rng = np.random.default_rng(seed)
    p = tmp_path / "random.xml"
    p.write_text(_random_mjcf(rng, 12))
    robot = load_mjcf(p)
    m = mujoco.MjModel.from_xml_path(str(p))
    assert robot.n_nodes >= m.nbody + m.nsite
    assert sum(t == "free" for t in robot.joint_types_per_dof) == 6 * int(np.sum(m.jnt_type == 0))
    assert _fk_error(robot, m, rng) <= 1e-12


def _com_error(robot, m, rng, n=10):
    """Largest |invkin - MuJoCo| of the centre of mass (subtree_com of the world body after
    mj_comPos) and of its Jacobian (mj_jacSubtreeCom: the same columns, local ball and free
    rotations included) at n random q."""
    d = mujoco.MjData(m)
    jac = np.zeros((3, m.nv))
    err = 0.0
    for _ in range(n):
        q = robot.sample(rng=rng)
        d.qpos[:] = qpos_from_q(robot, q)
        mujoco.mj_kinematics(m, d)
        mujoco.mj_comPos(m, d)
        mujoco.mj_jacSubtreeCom(m, d, jac, 0)
        err = max(err, np.abs(robot.center_of_mass(q) - d.subtree_com[0]).max(),
                  np.abs(robot.com_jacobian(q) - jac).max())
    return err


@pytest.mark.parametrize("seed", range(4))
def test_centre_of_mass_and_its_jacobian_equal_mujoco_on_generated_trees(tmp_path, seed):
    rng = np.random.default_rng(100 + seed)
    p = tmp_path / "random.xml"
    p.write_text(_random_mjcf(rng, 12, masses=True))
    robot = load_mjcf(p)
    m = mujoco.MjModel.from_xml_path(str(p))
    assert robot.dof == m.nv and np.ptp(m.body_mass[1:]) > 0
    assert _com_error(robot, m, rng) <= 1e-12


@pytest.mark.parametrize("name", ["arm", "floater"])
def test_centre_of_mass_and_its_jacobian_equal_mujoco_on_the_test_models(name):
    robot = ik.load_robot(DATA / f"{name}.xml")
    m = mujoco.MjModel.from_xml_path(str(DATA / f"{name}.xml"))
    assert _com_error(robot, m, np.random.default_rng(1)) <= 1e-12


def test_a_compile_error_names_the_file_and_mujocos_message(tmp_path):
    p = tmp_path / "bad.xml"
    p.write_text('<mujoco><worldbody><body><joint type="hinge" range="1 0" limited="true"/>'
                 '<geom size="0.1"/></body></worldbody></mujoco>')
    with pytest.raises(ModelError, match=rf"{p}: MuJoCo could not compile the model: .*range"):
        ik.load_robot(p)


def test_an_xml_file_with_a_robot_root_still_goes_to_the_urdf_reader(tmp_path):
    p = tmp_path / "arm.xml"
    p.write_text('<?xml version="1.0"?>\n<!-- a URDF -->\n<robot name="r"><link name="a"/></robot>\n')
    assert ik.load_robot(p).frame_names == ("a",)


def test_without_the_mujoco_package_the_error_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "mujoco", None)  # import mujoco now raises ImportError
    with pytest.raises(ModelError, match=r'pip install "invkin\[mujoco\]"'):
        ik.load_robot(DATA / "arm.xml")


def test_a_robot_not_from_mjcf_has_no_qpos_layout():
    with pytest.raises(ModelError, match="not loaded from MJCF"):
        qpos_from_q(ik.load_robot("panda"), np.zeros(7))


def test_a_nan_position_names_the_file_and_the_joint_once(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # MuJoCo's own warning handler appends to MUJOCO_LOG.TXT in the working folder
    p = tmp_path / "nan.xml"
    p.write_text('<mujoco><worldbody><body name="b1"><joint name="h" type="hinge"/><geom size=".1"/>'
                 '<body name="b2" pos="1 nan 0"><joint name="s" type="slide"/><geom size=".1"/></body></body>'
                 '</worldbody></mujoco>')
    with pytest.raises(ModelError) as e, pytest.warns(ik.ModelWarning) as rec:
        ik.load_robot(p)
    assert str(e.value) == f"{p}: joint 's': origin must be a finite (4, 4) transform"
    # MuJoCo's warning is a ModelWarning, not a print and a log file written into the user's folder
    assert [str(w.message) for w in rec] == [f"{p}: MuJoCo: XML contains a 'NaN'. Please check it carefully."]
    assert not (tmp_path / "MUJOCO_LOG.TXT").exists()
    assert mujoco.get_mju_user_warning() is None  # MuJoCo's handler is back


def test_builder_errors_without_a_where_do_not_repeat_the_joint():
    from invkin.model.build import RobotBuilder
    b = RobotBuilder("r")
    b.add_root("base")
    with pytest.raises(ModelError) as e:
        b.add_joint("j1", "base", "l1", "revolute", origin=np.full((4, 4), np.nan))
    assert str(e.value).count("joint 'j1'") == 1, str(e.value)


def test_unnamed_bodies_joints_and_sites_never_take_a_name_the_file_gives_another(tmp_path):
    # body 2 and joint 0 are unnamed; the file names body 1 "body2" and joint 1 "joint0"
    p = tmp_path / "names.xml"
    p.write_text('<mujoco><worldbody><body name="body2" pos="0 0 1"><joint type="hinge" axis="0 0 1"/>'
                 '<geom size=".1"/><site/><body pos="0 0 1"><joint name="joint0" type="hinge" axis="0 1 0"/>'
                 '<geom size=".1"/><site name="site0" pos="0 0 .2"/></body></body></worldbody></mujoco>')
    robot = ik.load_robot(p)
    m = mujoco.MjModel.from_xml_path(str(p))
    assert robot.joint_names == ("joint0_1", "joint0")
    assert set(robot.frame_names) == {"world", "body2", "body2_1", "site0_1", "site0"}
    assert robot.node_names[robot.ancestors("site0_1")[1]] == "body2"  # the unnamed site of body2
    q = np.array([0.4, -0.7])
    qpos = qpos_from_q(robot, q)
    assert np.allclose(robot.fk(q, "body2_1"), _mj_pose(m, qpos, body=2), atol=1e-12)
    assert np.allclose(robot.fk(q, "site0"), _mj_pose(m, qpos, site=1), atol=1e-12)
    assert set(robot.geoms) == {"body2", "body2_1"}


def test_qpos_of_a_locked_or_cut_model_keeps_the_locked_values_and_fk_equals_mujoco():
    robot = ik.load_robot(DATA / "arm.xml")
    m = mujoco.MjModel.from_xml_path(str(DATA / "arm.xml"))
    locked = robot.lock({"j1": 0.3, "j4": [0.1, -0.2, 0.3]})  # a hinge and a ball joint
    assert "j1" not in locked.joint_names
    rng = np.random.default_rng(3)
    for _ in range(5):
        q = locked.sample(rng=rng)
        qpos = qpos_from_q(locked, q)
        assert qpos[0] == 0.3
        assert np.allclose(qpos_from_q(robot, q_from_qpos(robot, qpos)), qpos, atol=1e-12)
        for frame in ("hand", "tip"):
            T = _mj_pose(m, qpos, body=m.body(frame).id) if frame == "hand" else _mj_pose(m, qpos, site=m.site(frame).id)
            assert np.allclose(locked.fk(q, frame), T, atol=1e-12)
        assert np.allclose(q_from_qpos(locked, qpos), q, atol=1e-12)
    cut = ik.load_robot(DATA / "arm.xml", base="world", tip="hand")  # the head's joint is cut off
    qpos = qpos_from_q(cut, cut.neutral())
    assert qpos.shape == (m.nq,) and np.allclose(q_from_qpos(cut, qpos), cut.neutral())


@pytest.mark.parametrize("qpos, pattern", [
    (np.zeros(9), r"joint 'j4': qpos\[4:8\] = \[0.0, 0.0, 0.0, 0.0\] is not a rotation; expected a nonzero quaternion"),
    (np.full(9, np.nan), r"q_from_qpos: qpos: expected finite numbers"),
    ("abc", r"q_from_qpos: qpos: expected numbers, got 'abc'"),
])
def test_q_from_qpos_refuses_a_zero_quaternion_nan_and_text_naming_them(qpos, pattern):
    robot = ik.load_robot(DATA / "arm.xml")  # qpos: j1 j2 j3 j5, j4's quaternion w x y z, pan
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no RuntimeWarning from a division by zero on the way
        with pytest.raises(ik.InvkinError, match=pattern):
            q_from_qpos(robot, qpos)
    tiny = np.r_[np.zeros(4), 1e-200, 0.0, 0.0, 1e-200, 0.0]  # a tiny quaternion is still a rotation
    assert np.allclose(q_from_qpos(robot, tiny)[4:7], [0.0, 0.0, np.pi / 2])


def test_a_model_without_a_model_attribute_is_named_after_its_file(tmp_path):
    p = tmp_path / "two_link_arm.xml"  # MuJoCo names it "MuJoCo Model"
    p.write_text('<mujoco><worldbody><body name="a"><joint name="h" type="hinge"/><geom size=".1"/></body>'
                 '</worldbody></mujoco>')
    assert ik.load_robot(p).name == "two_link_arm"
    p.write_text(p.read_text().replace("<mujoco>", '<mujoco model="arm2">'))
    assert ik.load_robot(p).name == "arm2"


def test_a_hinge_named_like_a_ball_joints_entry_is_refused_not_given_the_balls_qpos(tmp_path):
    p = tmp_path / "dup.xml"  # qpos_from_q wrote the ball's x component into the hinge 'b.x'
    p.write_text('<mujoco><worldbody><body name="a"><joint name="b" type="ball"/><geom size=".1"/>'
                 '<body name="c" pos="0 0 1"><joint name="b.x" type="hinge"/><geom size=".1"/></body></body>'
                 '</worldbody></mujoco>')
    with pytest.raises(ModelError, match=rf"{p}: joint 'b.x': its q entry 'b.x' is also an entry of joint 'b'"):
        ik.load_robot(p)


def test_a_chain_based_at_a_body_with_two_joints_starts_at_that_body_as_with_one_joint():
    # "upper" has two joints (j2, j3): base="upper" started the chain at its parent "base" and kept
    # j2 and j3, where a one-joint body (or "fore", whose joint is off its origin) starts at itself
    arm = ik.load_robot(DATA / "arm.xml", base="upper", tip="tip")
    assert arm.root == "upper" and arm.joint_names == ("j5", "j4.x", "j4.y", "j4.z")
    whole = ik.load_robot(DATA / "arm.xml")
    q = whole.sample(rng=np.random.default_rng(7))
    T_upper_tip = np.linalg.solve(whole.fk(q, "upper"), whole.fk(q, "tip"))
    qa = q[[whole.joint_index(n) for n in arm.joint_names]]
    assert np.allclose(arm.fk(qa, "tip"), T_upper_tip, atol=1e-12)
    assert ik.load_robot(DATA / "arm.xml", base="fore", tip="tip").joint_names == ()


def test_active_equality_constraints_are_named_in_one_warning_as_not_kept(tmp_path):
    # a gripper's coupled fingers loaded as independent joints, in silence
    p = tmp_path / "eq.xml"
    p.write_text('<mujoco><worldbody><body name="a"><joint name="h1" type="hinge"/><geom size=".1"/>'
                 '<body name="b"><joint name="h2" type="hinge"/><geom size=".1"/></body></body></worldbody>'
                 '<equality><joint joint1="h2" joint2="h1" polycoef="0 2 0 0 0"/><weld body1="world" body2="b"/>'
                 '<connect body1="a" body2="b" anchor="0 0 0" active="false"/></equality></mujoco>')
    with pytest.warns(ik.ModelWarning) as rec:
        robot = ik.load_robot(p)
    assert [str(w.message) for w in rec] == [
        f"{p}: 2 <equality> constraint(s) not kept, the joints move independently of them: joint 'h2'-'h1', "
        f"weld 'world'-'b'"]
    assert robot.joint_names == ("h1", "h2")
    with warnings.catch_warnings():
        warnings.simplefilter("error", ik.ModelWarning)
        ik.load_robot(DATA / "arm.xml")  # no constraint: nothing said


def test_loads_from_several_threads_leave_mujocos_warning_handler_as_it_was(tmp_path, monkeypatch):
    # the handler that turns MuJoCo's warnings into ModelWarnings is process-wide: unguarded, two
    # threads restored each other's and one stayed installed (or the process aborted)
    import threading

    monkeypatch.chdir(tmp_path)
    bad = tmp_path / "nan.xml"
    bad.write_text('<mujoco><worldbody><body name="b" pos="1 nan 0"><joint type="slide"/><geom size=".1"/></body>'
                   '</worldbody></mujoco>')

    def go():
        for _ in range(15):
            with pytest.raises(ModelError):
                ik.load_robot(bad)
            ik.load_robot(DATA / "arm.xml")

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ik.ModelWarning)
        threads = [threading.Thread(target=go) for _ in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert mujoco.get_mju_user_warning() is None and not (tmp_path / "MUJOCO_LOG.TXT").exists()


def test_centre_of_mass_against_pinocchio_differs_only_by_the_base_link():
    """A user checking Robot.center_of_mass against Pinocchio finds ~2 cm on the Panda: Pinocchio's
    centerOfMass leaves out the inertia fixed to its universe (panda_link0), invkin counts every
    link (as MuJoCo's subtree_com of the world body, above). The docstring says so; here the
    two agree once that link is taken out."""
    pin = pytest.importorskip("pinocchio")
    path = Path(__file__).parent / "data" / "erd" / "panda_fingers.urdf"
    robot = ik.load_robot(path)
    model = pin.buildModelFromUrdf(str(path))
    data = model.createData()
    base = robot.node_names.index("panda_link0")
    m0, M = robot.link_mass[base], robot.link_mass.sum()
    for q in robot.sample(5, rng=0):
        qp = pin.neutral(model)
        for i, name in enumerate(robot.joint_names):
            qp[model.idx_qs[model.getJointId(name)]] = q[i]
        qp[model.idx_qs[model.getJointId("panda_finger_joint2")]] = q[-1]  # the mimic follower
        c = robot.center_of_mass(q)
        p0 = robot.fk(q, "panda_link0") @ np.r_[robot.link_com[base], 1.0]
        np.testing.assert_allclose((M * c - m0 * p0[:3]) / (M - m0), pin.centerOfMass(model, data, qp), atol=1e-12)
        assert np.linalg.norm(c - pin.centerOfMass(model, data, qp)) > 0.005
