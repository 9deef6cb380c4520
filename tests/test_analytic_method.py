"""Method ``analytic``: the closed-form two-bone arm through ik.solve."""
from __future__ import annotations

import math

import numpy as np
import pytest

import invkin as ik


def _rot_x(a):
    T = np.eye(4)
    c, s = math.cos(a), math.sin(a)
    T[1:3, 1:3] = [[c, -s], [s, c]]
    return T


def _trans(x, y, z):
    T = np.eye(4)
    T[:3, 3] = (x, y, z)
    return T


def _cross2(a, b):
    return a[0] * b[1] - a[1] * b[0]


def test_registered():
    assert "analytic" in ik.methods()


@pytest.mark.parametrize("up", [True, False])
def test_planar2_reaches_targets_on_both_branches(up):
    robot = ik.load_robot("planar2")
    rng = np.random.default_rng(1)
    for _ in range(200):
        b = rng.uniform(0.2 + 1e-6, 1.8 - 1e-6)
        phi = rng.uniform(-math.pi, math.pi)
        p = np.array([b * math.cos(phi), b * math.sin(phi), 0.0])
        res = ik.solve(robot, [ik.Position("hand", p)], method="analytic", elbow_up=up)
        assert res.success and res.status == ik.Status.CONVERGED
        assert np.linalg.norm(robot.fk(res.q, "hand")[:3, 3] - p) <= 1e-9
        assert res.iterations == 1 and res.restarts == 0
        assert robot.within_limits(res.q)
        elbow = robot.fk(res.q, "lower")[:3, 3]
        side = _cross2(p[:2], elbow[:2])
        if b < 1.8 - 1e-3 and b > 0.2 + 1e-3:
            assert (side > 0) == up  # elbow_up: counter-clockwise of the shoulder→target line
            assert (res.q[1] < 0) == up


def test_both_branches_differ_and_agree_on_the_hand():
    robot = ik.load_robot("planar2")
    p = np.array([1.1, 0.6, 0.0])
    a = ik.solve(robot, [ik.Position("hand", p)], method="analytic", elbow_up=True)
    b = ik.solve(robot, [ik.Position("hand", p)], method="analytic", elbow_up=False)
    assert a.success and b.success
    assert abs(a.q[1] + b.q[1]) < 1e-12 and abs(a.q[1]) > 0.5
    for r in (a, b):
        assert np.linalg.norm(robot.fk(r.q, "hand")[:3, 3] - p) <= 1e-9


def test_elbow_up_none_picks_the_branch_nearer_q0():
    robot = ik.load_robot("planar2")
    p = np.array([0.9, 0.9, 0.0])
    up = ik.solve(robot, [ik.Position("hand", p)], method="analytic", elbow_up=True)
    dn = ik.solve(robot, [ik.Position("hand", p)], method="analytic", elbow_up=False)
    near_dn = ik.solve(robot, [ik.Position("hand", p)], q0=dn.q + 0.1, method="analytic", elbow_up=None)
    near_up = ik.solve(robot, [ik.Position("hand", p)], q0=up.q - 0.1, method="analytic", elbow_up=None)
    np.testing.assert_allclose(near_dn.q, dn.q, atol=1e-12)
    np.testing.assert_allclose(near_up.q, up.q, atol=1e-12)


@pytest.mark.parametrize("f", [1.0 + 1e-6, 1.5, 10.0, 1e6])
def test_unreachable_target_stretches_toward_it(f):
    robot = ik.load_robot("planar2")
    L = 1.8
    for phi in np.linspace(-3.0, 3.0, 7):
        p = f * L * np.array([math.cos(phi), math.sin(phi), 0.0])
        res = ik.solve(robot, [ik.Position("hand", p)], method="analytic")
        assert not res.success and res.status == ik.Status.UNREACHABLE
        assert abs(res.q[1]) <= 1e-12  # straight arm
        hand = robot.fk(res.q, "hand")[:3, 3]
        np.testing.assert_allclose(hand, L * p / np.linalg.norm(p), atol=1e-9)
        assert res.position_error == pytest.approx(np.linalg.norm(p) - L, rel=1e-9, abs=1e-9)


def test_too_close_target_folds_without_nan():
    robot = ik.load_robot("planar2")
    for p in ([0.05, 0.0, 0.0], [0.0, 0.0, 0.0], [-0.1, 0.1, 0.0]):
        res = ik.solve(robot, [ik.Position("hand", p)], method="analytic")
        assert np.all(np.isfinite(res.q)) and not res.success
        assert abs(abs(res.q[1]) - math.pi) < 1e-12  # folded
        assert res.position_error == pytest.approx(0.2 - np.linalg.norm(p), abs=1e-9)


def test_target_off_the_plane_gets_the_in_plane_solution():
    robot = ik.load_robot("planar2")
    res = ik.solve(robot, [ik.Position("hand", [1.0, 0.5, 0.3])], method="analytic")
    assert not res.success
    hand = robot.fk(res.q, "hand")[:3, 3]
    np.testing.assert_allclose(hand, [1.0, 0.5, 0.0], atol=1e-9)
    assert res.position_error == pytest.approx(0.3, abs=1e-9)


def _arm(elbow_lo=-math.pi, elbow_hi=math.pi, flip=False, tilt=0.0):
    """A planar arm in a tilted plane with offsets off the plane and an anti-parallel elbow axis."""
    b = ik.RobotBuilder("tilted")
    b.add_root("base")
    b.add_joint("mount", "base", "mount", "fixed", _rot_x(tilt) @ _trans(0.1, -0.2, 0.3))
    b.add_joint("shoulder", "mount", "upper", "revolute", _trans(0.0, 0.0, 0.05), (0, 0, 1), -math.pi, math.pi)
    b.add_joint("elbow", "upper", "lower", "revolute", _trans(0.6, 0.3, 0.1), (0, 0, -1 if flip else 1),
                elbow_lo, elbow_hi)
    b.add_joint("wrist", "lower", "hand", "fixed", _trans(0.5, -0.1, -0.02))
    b.add_joint("other", "base", "other_link", "revolute", None, (1, 0, 0), -1, 1)  # another branch
    return b.build()


@pytest.mark.parametrize("flip", [False, True])
@pytest.mark.parametrize("up", [True, False])
def test_general_planar_arm_offsets_tilt_and_flipped_axis(flip, up):
    robot = _arm(flip=flip, tilt=0.7)
    rng = np.random.default_rng(3)
    for _ in range(50):
        p = robot.fk(robot.sample(rng=rng), "hand")[:3, 3]  # reachable by construction
        res = ik.solve(robot, [ik.Position("hand", p)], method="analytic", elbow_up=up)
        assert res.success, res
        assert np.linalg.norm(robot.fk(res.q, "hand")[:3, 3] - p) <= 1e-9
        assert res.q[robot.joint_index("other")] == robot.neutral()[robot.joint_index("other")]


def test_limits_pick_the_branch_inside_them():
    robot = _arm(elbow_lo=0.0, elbow_hi=math.pi)  # only the elbow_up=False branch (θ2 ≥ 0) fits
    p = robot.fk(np.array([0.3, 1.0, 0.0]), "hand")[:3, 3]
    res = ik.solve(robot, [ik.Position("hand", p)], method="analytic", elbow_up=True)
    assert res.success and robot.within_limits(res.q)
    assert np.linalg.norm(robot.fk(res.q, "hand")[:3, 3] - p) <= 1e-9
    assert res.q[1] >= 0.0


def test_limits_that_exclude_both_branches_clamp_and_do_not_converge():
    robot = _arm(elbow_lo=0.5, elbow_hi=0.6)
    p = robot.fk(np.array([0.3, 1.5, 0.0]), "hand")[:3, 3]
    res = ik.solve(robot, [ik.Position("hand", p)], method="analytic")
    assert not res.success and robot.within_limits(res.q)
    assert res.position_error > 1e-3
    assert res.position_error == pytest.approx(np.linalg.norm(robot.fk(res.q, "hand")[:3, 3] - p), abs=1e-12)


@pytest.mark.parametrize("robot_name, frame, words", [
    ("panda", "panda_hand", ["exactly two revolute joints", "7 joint(s)", "method='lm'"]),
    ("seed8dof", "effector", ["exactly two revolute joints", "8 joint(s)"]),
])
def test_chains_it_cannot_handle_raise_solver_error(robot_name, frame, words):
    robot = ik.load_robot(robot_name)
    p = robot.fk(robot.neutral(), frame)[:3, 3]
    with pytest.raises(ik.SolverError) as ei:
        ik.solve(robot, [ik.Position(frame, p)], method="analytic")
    for w in words:
        assert w in str(ei.value)


def test_two_ball_joints_are_a_3d_limb_three_are_refused_and_orientation_goals_too():
    balls = ik.load_robot("tentacle", n=2, joint="ball")
    res = ik.solve(balls, [ik.Position(balls.frame_names[-1], [0.05, 0.0, 0.15])], method="analytic")
    assert res.status == ik.Status.CONVERGED and res.iterations == 1
    three = ik.load_robot("tentacle", n=3, joint="ball")
    with pytest.raises(ik.SolverError, match="ball"):
        ik.solve(three, [ik.Position(three.frame_names[-1], [0.05, 0.0, 0.15])], method="analytic")
    robot = ik.load_robot("planar2")
    with pytest.raises(ik.SolverError, match="Position goal only"):
        ik.solve(robot, [ik.Pose("hand", np.eye(4))], method="analytic")
    with pytest.raises(ik.SolverError, match="Position goal only"):
        ik.solve(robot, [ik.Orientation("hand", np.eye(3), axes="z")], method="analytic")
    with pytest.raises(ik.SolverError, match="exactly one Position goal"):
        ik.solve(robot, [ik.Position("hand", [1, 0, 0]), ik.Position("lower", [1, 0, 0])], method="analytic")
    with pytest.raises(ik.SolverError, match="Posture"):
        ik.solve(robot, [ik.Position("hand", [1, 0, 0]), ik.Posture(np.zeros(2), 0.1)], method="analytic")
    with pytest.raises(ik.SolverError, match="elbow_up"):
        ik.solve(robot, [ik.Position("hand", [1, 0, 0])], method="analytic", elbow_up="yes")


def test_non_parallel_axes_are_refused():
    b = ik.RobotBuilder("skew")
    b.add_root("base")
    b.add_joint("j1", "base", "l1", "revolute", None, (0, 0, 1), -3, 3)
    b.add_joint("j2", "l1", "l2", "revolute", _trans(1, 0, 0), (0, 1, 0), -3, 3)
    b.add_joint("tip", "l2", "hand", "fixed", _trans(1, 0, 0))
    with pytest.raises(ik.SolverError, match="not parallel"):
        ik.solve(b.build(), [ik.Position("hand", [1, 1, 0])], method="analytic")


def test_unknown_frame_is_a_frame_error():
    with pytest.raises(ik.FrameError, match="hand"):
        ik.solve(ik.load_robot("planar2"), [ik.Position("hnad", [1, 0, 0])], method="analytic")


# ---------------------------------------------------------------- the vectorised two_bone_2d path
def _reference(l1, l2, t, up):
    from invkin.solvers.analytic import _two_bone_2d_serial

    l1, l2 = np.broadcast_arrays(np.asarray(l1, float), np.asarray(l2, float), t[..., 0])[:2]
    n = t.shape[0]
    th1, th2 = np.empty(n), np.empty(n)
    _two_bone_2d_serial(np.ascontiguousarray(l1), np.ascontiguousarray(l2), np.ascontiguousarray(t), np.zeros(1),
                        up, th1, th2)
    return th1, th2


@pytest.mark.parametrize("n", [1, 7, 4096, 4097, (1 << 18) + 5])
@pytest.mark.parametrize("up", [True, False])
def test_fast_two_bone_2d_is_bit_for_bit_the_scalar_kernel(n, up):
    rng = np.random.default_rng(n)
    l1 = rng.uniform(0.0, 2.0, n)
    l2 = rng.uniform(0.0, 2.0, n)
    scale = rng.choice([1e-200, 1e-160, 1.0, 1e160, 1e200, 0.0], size=(n, 1), p=[.01, .01, .95, .01, .01, .01])
    t = rng.normal(size=(n, 2)) * scale
    l1[::97] = 0.0  # degenerate arms the fast loop hands back to the scalar kernel
    l2[::89] = 0.0
    l1[::1009] = l2[::1009] = 1e-290
    th1, th2 = ik.two_bone_2d(l1, l2, t, elbow_up=up)
    r1, r2 = _reference(l1, l2, t, up)
    assert np.array_equal(th1, r1) and np.array_equal(th2, r2)
    assert np.all(np.isfinite(th1)) and np.all(np.isfinite(th2))


def test_fast_two_bone_2d_broadcasts_and_validates():
    rng = np.random.default_rng(0)
    t = rng.normal(size=(3, 5000, 2))
    th1, th2 = ik.two_bone_2d(1.0, 0.8, t)  # scalar lengths, a 2-D batch
    assert th1.shape == (3, 5000)
    r1, r2 = _reference(np.ones(15000), np.full(15000, 0.8), t.reshape(-1, 2), True)
    assert np.array_equal(th1.ravel(), r1) and np.array_equal(th2.ravel(), r2)
    big = np.ones(300_000)
    tt = np.ones((300_000, 2))
    bad = big.copy()
    bad[299_999] = -1.0
    with pytest.raises(ik.GoalError, match=">= 0"):
        ik.two_bone_2d(bad, big, tt)
    bad[299_999] = np.nan
    with pytest.raises(ik.GoalError, match="finite"):
        ik.two_bone_2d(big, bad, tt)
    tt[12345, 1] = np.inf
    with pytest.raises(ik.GoalError, match="target_xy"):
        ik.two_bone_2d(big, big, tt)


def test_a_urdf_leg_on_a_floating_base_gets_the_planar_message_and_a_subchain_that_works():
    # go2's and G1's floating bases have internal nodes: the refusal read them as a skeleton and advised
    # robot.subchain('FL_thigh', 'FL_foot') (one joint: refused again) and two_bone_3d (refused: no channels)
    go2 = ik.load_robot("go2")
    with pytest.raises(ik.SolverError) as ei:
        ik.solve(go2, [ik.Position("FL_foot", [0.2, 0.1, -0.2])], method="analytic")
    msg = str(ei.value)
    assert "exactly two revolute joints" in msg and "'root_joint' (free)" in msg and "two_bone_3d" not in msg
    assert "robot.subchain('FL_hip', 'FL_foot')" in msg
    leg = go2.subchain("FL_hip", "FL_foot")
    p = leg.fk(leg.sample(rng=3), "FL_foot")[:3, 3]
    assert ik.solve(leg, [ik.Position("FL_foot", p)], method="analytic").success
    g1 = ik.load_robot("g1")
    with pytest.raises(ik.SolverError, match="exactly two revolute joints") as ei:
        ik.solve(g1, [ik.Position("left_ankle_roll_link", [0.0, 0.1, -0.6])], method="analytic")
    assert "subchain" not in str(ei.value)  # its ankle's last two joints are not parallel: no advice


def _cmu_walk():
    from importlib import resources

    path = resources.files("invkin") / "data" / "mocap" / "cmu_02_01_walk.bvh"
    with resources.as_file(path) as p:
        return ik.read_bvh(p)


def test_a_whole_skeleton_is_refused_with_the_limb_advice_not_a_recursion():
    skeleton, clip = _cmu_walk()
    with pytest.raises(ik.SolverError, match=r"robot.subchain\('LeftUpLeg', 'LeftFoot'\)"):
        ik.solve(skeleton, [ik.Position("LeftFoot", [0.0, 0.0, 0.0])], method="analytic")


def test_elbow_up_on_a_skeleton_limb_is_checked_and_false_is_refused():
    # it was dropped without a word: elbow_up=False and elbow_up="x" gave the same answer as True
    skeleton, _ = _cmu_walk()
    leg = skeleton.subchain("LeftUpLeg", "LeftFoot")
    target = leg.fk(leg.neutral(), "LeftFoot")[:3, 3] + [3.0, 3.0, 0.0]
    goal = [ik.Position("LeftFoot", target)]
    assert ik.solve(leg, goal, method="analytic").success
    assert ik.solve(leg, goal, method="analytic", elbow_up=None).success
    with pytest.raises(ik.SolverError, match="elbow_up=False does not apply to the skeleton limb"):
        ik.solve(leg, goal, method="analytic", elbow_up=False)
    with pytest.raises(ik.SolverError, match="elbow_up must be True, False or None"):
        ik.solve(leg, goal, method="analytic", elbow_up="x")


def test_too_close_and_off_plane_targets_are_unreachable_and_clamped_answers_only_stalled():
    # the closed form's answer is the closest reachable point: those targets said "stalled"
    robot = ik.load_robot("planar2")
    for p in ([0.05, 0.0, 0.0], [0.0, 0.0, 0.0], [1.0, 0.5, 0.3]):
        res = ik.solve(robot, [ik.Position("hand", p)], method="analytic")
        assert res.status == ik.Status.UNREACHABLE, (p, res)
    skeleton, _ = _cmu_walk()
    leg = skeleton.subchain("LeftUpLeg", "LeftFoot")
    far = leg.fk(leg.neutral(), "LeftFoot")[:3, 3] * 3.0  # three times the leg's length from the hip
    assert ik.solve(leg, [ik.Position("LeftFoot", far)], method="analytic").status == ik.Status.UNREACHABLE
    robot = _arm(elbow_lo=0.5, elbow_hi=0.6)  # a limit binds: not proven closest
    p = robot.fk(np.array([0.3, 1.5, 0.0]), "hand")[:3, 3]
    assert ik.solve(robot, [ik.Position("hand", p)], method="analytic").status == ik.Status.STALLED
