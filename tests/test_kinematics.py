"""Forward kinematics and Jacobians: independent products, finite differences, every joint type."""
import math

import numpy as np
import pytest

import invkin as ik
from invkin import ConfigurationError, FrameError, ModelError
from invkin.spatial import make_transform, so3_exp

from support import fd_jacobian



def rot(axis, t):
    c, s = math.cos(t), math.sin(t)
    if axis == "x":
        return np.array([[1, 0, 0, 0], [0, c, -s, 0], [0, s, c, 0], [0, 0, 0, 1.0]])
    if axis == "y":
        return np.array([[c, 0, s, 0], [0, 1, 0, 0], [-s, 0, c, 0], [0, 0, 0, 1.0]])
    return np.array([[c, -s, 0, 0], [s, c, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1.0]])


def offset_z(d):
    T = np.eye(4)
    T[2, 3] = d
    return T


def seed_document_fk(q):
    """SEEDS.md §1 written out in DirectX row-vector order and transposed back to columns.

    effector = OffsetZ(1)·RotY(θ7)·RotX(θ6)·OffsetZ(1)·RotZ(θ5)·RotY(θ4)·RotX(θ3)·OffsetZ(1)·RotZ(θ2)·RotY(θ1)·RotX(θ0)
    with row vectors (v' = v M): the matrix of each factor is the transpose of the column form.
    """
    factors = [offset_z(1), rot("y", q[7]), rot("x", q[6]), offset_z(1), rot("z", q[5]), rot("y", q[4]),
               rot("x", q[3]), offset_z(1), rot("z", q[2]), rot("y", q[1]), rot("x", q[0])]
    M = np.eye(4)
    for F in factors:
        M = M @ F.T  # row-vector convention
    return M.T


def test_seed8dof_fk_equals_the_seed_documents_matrix_product():
    robot = ik.load_robot("seed8dof")
    rng = np.random.default_rng(1)
    for _ in range(50):
        q = rng.uniform(-math.pi, math.pi, 8)
        assert np.allclose(robot.fk(q, "effector"), seed_document_fk(q), atol=1e-13)
    assert np.allclose(robot.fk(np.zeros(8), "effector")[:3, 3], [0, 0, 3])


def mixed_tree():
    """A tree with every joint type: revolute, continuous, prismatic, ball, fixed, mimic; two branches."""
    b = ik.RobotBuilder("mixed")
    b.add_root("base")
    b.add_joint("yaw", "base", "torso", "revolute", make_transform(p=(0, 0, 0.2)), (0, 0, 1), -2, 2)
    b.add_joint("lift", "torso", "carriage", "prismatic", make_transform(so3_exp([0.1, 0.2, 0]), (0.1, 0, 0.3)),
                (0.2, 0.1, 1), -0.3, 0.5)
    b.add_joint("shoulder", "carriage", "upper", "ball", make_transform(p=(0, 0.1, 0.1)))
    b.add_joint("elbow", "upper", "fore", "revolute", make_transform(so3_exp([0, 0.3, 0.2]), (0.4, 0, 0)),
                (0, 1, 0), -2.5, 0.1)
    b.add_joint("wrist", "fore", "hand", "continuous", make_transform(p=(0.3, 0, 0)), (1, 0, 0))
    b.add_joint("finger", "hand", "finger_link", "revolute", make_transform(p=(0.05, 0.02, 0)), (0, 0, 1), -1, 1,
                mimic=("elbow", -0.5, 0.2))
    b.add_joint("tool", "finger_link", "tool0", "fixed", make_transform(so3_exp([0.3, 0, 0.1]), (0.02, 0, 0.01)))
    b.add_joint("head_pan", "torso", "head", "revolute", make_transform(p=(0, 0, 0.5)), (0, 0, 1), -1, 1)
    b.add_joint("head_ball", "head", "eye", "ball", make_transform(p=(0.1, 0, 0.1)))
    return b.build()


@pytest.mark.parametrize("name", ["seed8dof", "panda", "ur5", "iiwa14", "baxter_left", "g1_left_arm", "planar2",
                                  "mixed", "tentacle_ball"])
def test_every_jacobian_equals_central_finite_differences(name):
    robot = {"mixed": mixed_tree, "tentacle_ball": lambda: ik.load_robot("tentacle", n=6, joint="ball")}.get(
        name, lambda: ik.load_robot(name))()
    rng = np.random.default_rng(7)
    for frame in robot.frame_names:
        for _ in range(3):
            q = robot.sample(rng=rng)
            assert np.allclose(robot.jacobian(q, frame), fd_jacobian(robot, q, frame), atol=1e-7), frame


def test_batch_fk_and_jacobian_equal_single_calls():
    robot = mixed_tree()
    qs = robot.sample(64, rng=3)
    Ts = robot.fk(qs, "tool0")
    Js = robot.jacobian(qs, "tool0")
    assert Ts.shape == (64, 4, 4) and Js.shape == (64, 6, robot.dof)
    for i in range(64):
        assert np.array_equal(Ts[i], robot.fk(qs[i], "tool0"))
        assert np.allclose(Js[i], robot.jacobian(qs[i], "tool0"), atol=1e-15)
    allT = robot.fk_all(qs)
    assert np.allclose(allT["eye"][5], robot.fk(qs[5], "eye"))


def test_mimic_follower_is_not_in_q_and_follows_its_leader():
    robot = mixed_tree()
    assert "finger" not in robot.joint_names
    assert robot.dof == 1 + 1 + 3 + 1 + 1 + 1 + 3
    q = robot.neutral()
    q[robot.joint_index("elbow")] = -1.0
    T_hand = robot.fk(q, "hand")
    expected = T_hand @ make_transform(p=(0.05, 0.02, 0)) @ rot("z", -0.5 * -1.0 + 0.2)
    assert np.allclose(robot.fk(q, "finger_link"), expected, atol=1e-14)


def test_fk_all_names_every_frame_including_fixed_links():
    robot = ik.load_robot("panda")
    allT = robot.fk_all(robot.neutral())
    assert set(allT) == set(robot.frame_names)
    assert "panda_link8" in allT and "panda_hand" in allT


def test_integrate_and_difference_round_trip_on_ball_joints():
    robot = mixed_tree()
    rng = np.random.default_rng(11)
    for _ in range(50):
        q0 = robot.sample(rng=rng)
        q1 = robot.sample(rng=rng)
        d = robot.difference(q0, q1)
        q1b = robot.integrate(q0, d)
        # same configuration (ball joints: the same rotation)
        for frame in ("tool0", "eye"):
            assert np.allclose(robot.fk(q1b, frame), robot.fk(q1, frame), atol=1e-12)
        small = rng.normal(size=robot.dof) * 0.1
        assert np.allclose(robot.difference(q0, robot.integrate(q0, small)), small, atol=1e-12)


def test_integrate_and_difference_work_on_batches():
    robot = ik.load_robot("tentacle", n=3, joint="ball")
    q0 = robot.sample(10, rng=1)
    dq = np.random.default_rng(2).normal(size=(10, 9)) * 0.2
    q1 = robot.integrate(q0, dq)
    assert q1.shape == (10, 9)
    assert np.allclose(robot.difference(q0, q1), dq, atol=1e-12)
    assert np.allclose(q1[3], robot.integrate(q0[3], dq[3]))


def test_neutral_is_mid_range_and_zero_where_unbounded():
    robot = ik.load_robot("panda")
    assert np.allclose(robot.neutral(), 0.5 * (robot.lower + robot.upper))
    t = ik.load_robot("tentacle", n=4)
    assert np.array_equal(t.neutral(), np.zeros(4))
    assert np.all(np.isinf(t.lower)) and np.all(np.isinf(t.upper))


def test_sample_stays_inside_the_limits():
    robot = mixed_tree()
    qs = robot.sample(500, rng=5)
    assert qs.shape == (500, robot.dof)
    assert robot.within_limits(qs).all()


def test_add_frame_returns_a_new_robot_with_a_tool_frame():
    robot = ik.load_robot("panda")
    T = make_transform(p=(0, 0, 0.1))
    tool = robot.add_frame("tcp", "panda_hand", T)
    q = robot.sample(rng=0)
    assert "tcp" not in robot.frame_names
    assert np.allclose(tool.fk(q, "tcp"), robot.fk(q, "panda_hand") @ T)
    with pytest.raises(ModelError, match="already exists"):
        tool.add_frame("tcp", "panda_hand")


def test_subchain_cuts_one_branch_out_of_a_tree():
    robot = mixed_tree()
    arm = robot.subchain("carriage", "tool0")
    assert arm.root == "carriage"
    assert arm.joint_names == ("shoulder.x", "shoulder.y", "shoulder.z", "elbow", "wrist")
    q = robot.sample(rng=4)
    idx = [robot.joint_names.index(n) for n in arm.joint_names]
    T_world = robot.fk(q, "carriage")
    assert np.allclose(T_world @ arm.fk(q[idx], "tool0"), robot.fk(q, "tool0"), atol=1e-13)
    with pytest.raises(ModelError, match="not an ancestor"):
        robot.subchain("head", "tool0")


def test_subchain_keeps_a_mimic_whose_leader_is_cut_off_fixed_at_its_value_in_the_reference():
    robot = mixed_tree()
    ref = robot.sample(rng=5)
    with pytest.warns(ik.ModelWarning, match=r"mimic joint 'finger' follows 'elbow'.*kept fixed"):
        hand = robot.subchain("hand", "tool0", reference=ref)
    assert hand.dof == 0 and hand.mimic_leader == ("", "", "")
    T_world_hand = robot.fk(ref, "hand")
    assert np.allclose(T_world_hand @ hand.fk(np.zeros(0), "tool0"), robot.fk(ref, "tool0"), atol=1e-13)
    with pytest.warns(ik.ModelWarning):  # default reference: the neutral configuration
        default = robot.subchain("hand", "tool0")
    q = robot.neutral()
    assert np.allclose(robot.fk(q, "hand") @ default.fk(np.zeros(0), "tool0"), robot.fk(q, "tool0"), atol=1e-13)


def test_dh_chain_equals_the_product_of_dh_matrices():
    params = [(0.0, math.pi / 2, 0.333, 0.0), (0.3, 0.0, 0.0, 0.1), (0.2, -math.pi / 2, 0.1, 0.0)]
    robot = ik.chain_from_dh(params)
    q = np.array([0.3, -0.7, 1.1])
    T = np.eye(4)
    for (a, al, d, th), qi in zip(params, q):
        T = T @ rot("z", th + qi) @ offset_z(d) @ np.array(
            [[1, 0, 0, a], [0, 1, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1.0]]) @ rot("x", al)
    assert np.allclose(robot.fk(q, "tip"), T, atol=1e-14)


def test_modified_dh_chain_equals_craigs_product():
    params = [(0.0, 0.0, 0.3, 0.0), (0.1, -math.pi / 2, 0.0, 0.2), (0.4, 0.0, 0.05, 0.0)]
    robot = ik.chain_from_dh(params, modified=True)
    q = np.array([0.4, 0.9, -0.3])
    T = np.eye(4)
    for (a, al, d, th), qi in zip(params, q):
        T = T @ rot("x", al) @ np.array([[1, 0, 0, a], [0, 1, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1.0]]) @ \
            rot("z", th + qi) @ offset_z(d)
    assert np.allclose(robot.fk(q, "tip"), T, atol=1e-14)


def test_wrong_q_shape_names_the_shape_received():
    robot = ik.load_robot("panda")
    with pytest.raises(ConfigurationError, match=r"expected shape \(7,\) or \(B, 7\).*got \(6,\)"):
        robot.fk(np.zeros(6), "panda_hand")
    with pytest.raises(ConfigurationError, match=r"got \(2, 3, 7\)"):
        robot.jacobian(np.zeros((2, 3, 7)), "panda_hand")
    with pytest.raises(ConfigurationError, match="numbers"):
        robot.fk("abc", "panda_hand")


def test_non_finite_q_is_refused_with_its_index():
    robot = ik.load_robot("panda")
    q = robot.neutral()
    q[3] = np.nan
    with pytest.raises(ConfigurationError, match=r"finite.*nan.*\(3,\)"):
        robot.fk(q, "panda_hand")
    qs = np.zeros((4, 7))
    qs[2, 5] = np.inf
    with pytest.raises(ConfigurationError, match=r"\(2, 5\)"):
        robot.jacobian(qs, "panda_hand")


def test_unknown_frame_lists_the_closest_names():
    robot = ik.load_robot("panda")
    with pytest.raises(FrameError, match=r"unknown frame 'panda_hnd'.*'panda_hand'"):
        robot.fk(robot.neutral(), "panda_hnd")
    assert isinstance(FrameError("x"), ik.InvkinError)


def test_unknown_bundled_model_lists_the_bundled_names():
    with pytest.raises(ModelError, match="bundled models: .*panda"):
        ik.load_robot("pandaa")


def test_the_closest_names_ignore_case():
    """load_robot('PANDA') suggested 'baxter_left', 'g1', 'g1_left_arm' (difflib is case-sensitive)."""
    with pytest.raises(ModelError, match=r"\(closest: 'panda'"):
        ik.load_robot("PANDA")
    robot = ik.load_robot("panda")
    with pytest.raises(FrameError, match=r"closest: 'panda_hand'"):
        robot.fk(robot.neutral(), "PANDA_HAND")


def test_sample_checks_around_on_a_robot_without_a_floating_base():
    """panda.sample(around=np.zeros(3)) returned a sample, the wrong shape taken without a word."""
    robot = ik.load_robot("panda")
    with pytest.raises(ConfigurationError, match="around"):
        robot.sample(around=np.zeros(3))
    with pytest.raises(ConfigurationError, match="around"):
        robot.sample(4, around=np.zeros((2, 7)))
    np.testing.assert_array_equal(robot.sample(rng=3, around=robot.neutral()), robot.sample(rng=3))


def test_model_arrays_are_read_only():
    robot = ik.load_robot("panda")
    with pytest.raises(ValueError):
        robot.lower[0] = 0.0
    with pytest.raises(ValueError):
        robot.origin[1, 0, 0] = 2.0
