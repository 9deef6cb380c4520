"""Tracker: warm-started, step-bounded local IK for streaming targets."""
import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import invkin as ik
from invkin import FrameError, GoalError, SolverError, Status
from invkin.spatial import so3_exp, so3_log

PANDA = ik.load_robot("panda")
SEED8 = ik.load_robot("seed8dof")
PANDA_Q = np.array([0.0, -0.3, 0.0, -2.2, 0.0, 2.0, 0.785])
T0 = PANDA.fk(PANDA_Q, "panda_hand")


def circle(n, radius=0.1, turns=1.0, tilt=0.0):
    """Poses of panda_hand on a horizontal circle through its start pose, orientation wobbling by tilt."""
    out = []
    for k in range(n):
        a = 2 * math.pi * turns * k / n
        T = T0.copy()
        T[:3, 3] = T0[:3, 3] + radius * np.array([math.cos(a) - 1.0, math.sin(a), 0.0])
        T[:3, :3] = so3_exp([tilt * math.sin(a), 0.0, 0.0]) @ T0[:3, :3]
        out.append(T)
    return out


@pytest.mark.parametrize("method", ["dls", "lm"])
def test_tracker_follows_a_circle_on_panda_within_tolerance_and_the_step_bound(method):
    bound = 0.05
    tr = ik.Tracker(PANDA, ik.Pose("panda_hand", T0), max_joint_step=bound, method=method, q0=PANDA_Q)
    q_prev = tr.q
    for T in circle(400, tilt=0.2):
        s = tr.update(T)
        assert s.status == Status.CONVERGED and not s.flagged
        assert s.position_error <= 1e-5 and s.rotation_error <= 1e-5
        assert np.abs(s.q - q_prev).max() <= bound + 1e-12
        assert s.jump == pytest.approx(np.abs(s.q - q_prev).max(), abs=1e-12)
        np.testing.assert_allclose(PANDA.fk(s.q, "panda_hand")[:3, 3], T[:3, 3], atol=1e-5)
        assert PANDA.within_limits(s.q)
        q_prev = s.q


def test_tracker_update_is_deterministic_and_warm_started_no_restarts():
    a = ik.Tracker(PANDA, ik.Pose("panda_hand", T0), q0=PANDA_Q)
    b = ik.Tracker(PANDA, ik.Pose("panda_hand", T0), q0=PANDA_Q)
    for T in circle(50):
        sa, sb = a.update(T), b.update(T)
        assert np.array_equal(sa.q, sb.q)
    # an update at the current target does nothing
    s = a.update(circle(50)[-1])
    assert s.iterations == 0 and s.jump == 0.0


def test_tracker_keeps_the_branch_along_a_long_path():
    # elbow-down start: the elbow (joint 4) never crosses over to the mirrored branch
    tr = ik.Tracker(PANDA, ik.Pose("panda_hand", T0), max_joint_step=0.05, q0=PANDA_Q)
    qs = np.array([tr.update(T).q for T in circle(600, radius=0.15, turns=3)])
    assert np.all(qs[:, 3] < -1.0)
    assert np.abs(np.diff(qs, axis=0)).max() <= 0.05 + 1e-12


def seed8_path_through_singularity():
    up = np.array([0.0, 0.0, 3.0])
    legs = [(up, [0.5, 0.0, 2.8]), ([0.5, 0.0, 2.8], [0.0, 0.0, 3.0]), ([0.0, 0.0, 3.0], [-0.5, 0.2, 2.8]),
            ([-0.5, 0.2, 2.8], [0.0, 0.0, 2.0]), ([0.0, 0.0, 2.0], [0.0, 0.0, 3.0])]
    return np.concatenate([np.linspace(a, b, 120) for a, b in legs])


@pytest.mark.parametrize("method", ["dls", "lm"])
def test_tracker_through_a_singularity_seed8dof_stretched_up_stays_bounded(method):
    bound = 0.04
    tr = ik.Tracker(SEED8, "effector", max_joint_step=bound, method=method)  # neutral: stretched straight up
    q_prev = tr.q
    steps = [tr.update(p) for p in seed8_path_through_singularity()]
    for s in steps:
        assert np.all(np.isfinite(s.q)) and math.isfinite(s.position_error)
        assert np.abs(s.q - q_prev).max() <= bound + 1e-12 and s.jump <= bound + 1e-12
        q_prev = s.q
    assert steps[0].near_singular  # the first target sits at the stretched posture
    assert any(s.near_singular for s in steps[200:280])  # back through (0, 0, 3)
    # the path is followed, through the singular points too; only the last step up the axis into
    # the stretched posture needs more joint motion than the bound allows (dz ~ θ dθ)
    assert max(s.position_error for s in steps[:-1]) <= 1e-4
    assert sum(s.status == Status.CONVERGED for s in steps) >= 0.95 * len(steps)
    for _ in range(10):
        s = tr.update([0.0, 0.0, 3.0])
    assert s.status == Status.CONVERGED and s.near_singular


@pytest.mark.parametrize("method", ["dls", "lm"])
def test_tracker_flags_the_discontinuity_when_the_target_teleports(method):
    bound = 0.05
    tr = ik.Tracker(PANDA, ik.Pose("panda_hand", T0), max_joint_step=bound, method=method, q0=PANDA_Q)
    for T in circle(200)[:20]:
        assert not tr.update(T).flagged
    far = T0.copy()
    far[:3, 3] += [-0.3, 0.3, -0.2]
    q_prev = tr.q
    s = tr.update(far)
    assert s.flagged and s.status == Status.ITERATION_LIMIT
    assert s.jump == pytest.approx(bound) and np.abs(s.q - q_prev).max() <= bound + 1e-12
    # it then walks over within the bound and settles: no longer flagged
    for _ in range(200):
        q_prev = s.q
        s = tr.update(far)
        assert np.abs(s.q - q_prev).max() <= bound + 1e-12
        if s.status == Status.CONVERGED:
            break
    assert s.status == Status.CONVERGED and not s.flagged


def test_tracker_per_joint_bound():
    bound = np.full(7, 0.05)
    bound[0] = 0.001
    tr = ik.Tracker(PANDA, ik.Position("panda_hand", T0[:3, 3]), max_joint_step=bound, q0=PANDA_Q)
    s = tr.update(T0[:3, 3] + [0.0, 0.3, 0.0])
    assert abs(s.q[0] - PANDA_Q[0]) <= 0.001 + 1e-12 and s.flagged
    np.testing.assert_array_equal(tr.max_joint_step, bound)


def test_tracker_target_beyond_the_reach_radius_settles_as_unreachable():
    tr = ik.Tracker(SEED8, "effector", max_joint_step=0.05, q0=[0.3, -0.2, 0.1, 0.5, 0.4, -0.3, 0.6, 0.2])
    for _ in range(200):
        s = tr.update([0.0, 0.0, 4.0])
        assert np.all(np.isfinite(s.q))
    assert s.status == Status.UNREACHABLE and not s.flagged
    assert s.position_error == pytest.approx(1.0, abs=1e-3)  # stretched toward it


def test_tracker_holds_hard_goals_while_a_soft_one_follows_g1():
    """Hard feet stay where they are (within the tolerance) while the hand follows its targets,
    even out of reach; a method that cannot hold hard goals is refused by name."""
    g1 = ik.load_robot("g1")
    q0 = g1.neutral()
    feet = ("left_ankle_roll_link", "right_ankle_roll_link")
    hand = "left_rubber_hand"
    T_feet = [g1.fk(q0, f) for f in feet]
    p_hand = g1.fk(q0, hand)[:3, 3]
    goals = [ik.Pose(f, T, hard=True) for f, T in zip(feet, T_feet)] + [ik.Position(hand, p_hand)]
    tol = 1e-6
    tr = ik.Tracker(g1, goals, method="lm", max_joint_step=0.1, position_tolerance=tol, rotation_tolerance=tol)
    path = [p_hand + np.array([0.3, 0.0, -0.1]) * min(1.0, k / 4) for k in range(1, 8)] + [p_hand + [1.0, 0, 0]] * 3
    for k, target in enumerate(path):
        s = tr.update([*T_feet, target])
        for f, T in zip(feet, T_feet):
            Tq = g1.fk(s.q, f)
            assert np.linalg.norm(Tq[:3, 3] - T[:3, 3]) <= tol
            assert np.linalg.norm(so3_log(T[:3, :3].T @ Tq[:3, :3])) <= tol
        assert s.jump <= 0.1 + 1e-12
        if k in (4, 6):  # reachable and a few updates old: the hand is there
            assert s.status == Status.CONVERGED and np.linalg.norm(g1.fk(s.q, hand)[:3, 3] - target) <= tol
    assert s.status == Status.UNREACHABLE and s.position_error > 0.3  # a metre ahead: stretched, feet kept
    with pytest.raises(SolverError, match=r"hard goals \(Pose\('left_ankle_roll_link'\).*method='lm'"):
        ik.Tracker(g1, goals[:1] + goals[2:], method="dls")


def test_tracker_several_goals_by_sequence_or_dict():
    p4 = PANDA.fk(PANDA_Q, "panda_link4")[:3, 3]
    g = [ik.Position("panda_link4", p4), ik.Position("panda_hand", T0[:3, 3])]
    tr = ik.Tracker(PANDA, g, q0=PANDA_Q)
    for k, T in enumerate(circle(100, radius=0.05)):
        s = tr.update([p4, T[:3, 3]]) if k % 2 else tr.update({"panda_hand": T[:3, 3], "panda_link4": p4})
        assert s.status == Status.CONVERGED
    np.testing.assert_allclose(PANDA.fk(s.q, "panda_link4")[:3, 3], p4, atol=1e-5)
    with pytest.raises(GoalError, match="2 targets"):
        tr.update([T[:3, 3]])
    with pytest.raises(GoalError, match="no goal on frame 'panda_link2'"):
        tr.update({"panda_link2": p4})


def test_tracker_frames_become_position_goals_and_axis_targets_work():
    tr = ik.Tracker(PANDA, ["panda_hand"], q0=PANDA_Q)
    s = tr.update(T0[:3, 3] + [0.01, 0.0, 0.0])
    assert s.status == Status.CONVERGED and s.rotation_error == 0.0
    tr = ik.Tracker(PANDA, [ik.Position("panda_hand", T0[:3, 3]), ik.Orientation("panda_hand", T0[:3, :3], axes="z")],
                    q0=PANDA_Q)
    z = so3_exp([0.1, 0.0, 0.0]) @ T0[:3, 2]
    s = tr.update([T0[:3, 3], 3.0 * z])  # a direction (3,) need not be unit
    assert s.status == Status.CONVERGED
    np.testing.assert_allclose(PANDA.fk(s.q, "panda_hand")[:3, 2], z, atol=1e-5)


def test_tracker_with_a_posture_goal_and_ball_joints():
    ten = ik.load_robot("tentacle", n=6, joint="ball")
    q0 = np.tile([0.1, 0.1, 0.0], 6)
    p0 = ten.fk(q0, "tip")[:3, 3]
    tr = ik.Tracker(ten, [ik.Position("tip", p0), ik.Posture(np.zeros(18), weight=1e-3)], max_joint_step=0.02,
                    q0=q0)
    prev = tr.q
    for k in range(60):
        a = 2 * math.pi * k / 60
        s = tr.update(p0 + 0.03 * np.array([math.cos(a) - 1, math.sin(a), 0.0]))
        # the bound on a ball joint is the angle of its rotation change
        for b in range(0, 18, 3):
            ang = np.linalg.norm(so3_log(so3_exp(prev[b:b + 3]).T @ so3_exp(s.q[b:b + 3])))
            assert ang <= 0.02 + 1e-9
        prev = s.q
        assert s.position_error <= 1e-4


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.floats(-0.6, 0.6), min_size=3, max_size=3), st.floats(0.005, 0.2))
def test_tracker_never_exceeds_its_bound_nor_leaves_the_limits_for_any_target_jump(offset, bound):
    tr = ik.Tracker(PANDA, ik.Position("panda_hand", T0[:3, 3]), max_joint_step=bound, q0=PANDA_Q)
    target = T0[:3, 3] + np.array(offset)
    prev = tr.q
    for _ in range(5):
        s = tr.update(target)
        assert np.abs(s.q - prev).max() <= bound + 1e-12
        assert PANDA.within_limits(s.q) and np.all(np.isfinite(s.q))
        if s.flagged:  # a discontinuity is only flagged while the target is still ahead
            assert s.status != Status.CONVERGED and s.position_error > 1e-5
        prev = s.q


def test_tracker_reset_and_repr():
    tr = ik.Tracker(PANDA, ik.Pose("panda_hand", T0), q0=PANDA_Q)
    tr.update(circle(10)[3])
    tr.reset(PANDA_Q)
    np.testing.assert_array_equal(tr.q, PANDA_Q)
    assert "Tracker('panda'" in repr(tr) and "dls" in repr(tr)


@pytest.mark.parametrize("target, match", [
    (np.full((4, 4), np.nan), "finite"), (np.eye(3), r"pose \(4, 4\)"), ([1.0, 2.0, 3.0], r"pose \(4, 4\)"),
])
def test_tracker_bad_targets_raise_and_leave_the_tracker_unchanged(target, match):
    tr = ik.Tracker(PANDA, ik.Pose("panda_hand", T0), q0=PANDA_Q)
    tr.update(circle(200)[2])
    q = tr.q
    with pytest.raises(GoalError, match=match):
        tr.update(target)
    np.testing.assert_array_equal(tr.q, q)
    assert tr.update(circle(200)[2]).iterations == 0  # the old target is still in place


def test_tracker_rejects_a_non_rotation():
    tr = ik.Tracker(PANDA, ik.Pose("panda_hand", T0), q0=PANDA_Q)
    T = T0.copy()
    T[:3, :3] *= 2.0
    with pytest.raises(GoalError, match="rotation"):
        tr.update(T)
    tr2 = ik.Tracker(PANDA, ik.Position("panda_hand", T0[:3, 3]), q0=PANDA_Q)
    with pytest.raises(GoalError, match="finite"):
        tr2.update([0.0, np.inf, 0.0])


@pytest.mark.parametrize("kw, err, match", [
    (dict(max_joint_step=0.0), GoalError, "max_joint_step"), (dict(max_joint_step=-0.1), GoalError, "max_joint_step"),
    (dict(max_joint_step=[0.1, 0.2]), GoalError, "max_joint_step"), (dict(method="ccdd"), SolverError, "dls, lm, ccd, fabrik"),
    (dict(method="dls", options={"variant": "simple"}), SolverError, "takes no options"),
    (dict(method="fabrik", options={"variant": "simple"}), SolverError, "no option"),
    (dict(iterations=0), GoalError, "iterations"), (dict(damping=-1.0), GoalError, "damping"),
])
def test_tracker_bad_settings(kw, err, match):
    with pytest.raises(err, match=match):
        ik.Tracker(PANDA, "panda_hand", **kw)


def test_tracker_bad_goals():
    with pytest.raises(FrameError):
        ik.Tracker(PANDA, "hand")
    with pytest.raises(GoalError):
        ik.Tracker(PANDA, [])
    with pytest.raises(GoalError):
        ik.Tracker(PANDA, [ik.Posture(np.zeros(7))])


@pytest.mark.parametrize("method, kw, words", [
    ("fabrik", dict(joint_weights=np.arange(1.0, 8.0)), "joint_weights: method 'fabrik' does not use it"),
    ("ccd", dict(posture=True), "a Posture goal: method 'ccd' does not use it"),
])
def test_a_tracker_refuses_what_its_geometric_method_would_not_use(method, kw, words):
    # accepted and silently ignored, as solve() did before it refused them
    robot = ik.load_robot("panda")
    goals = ["panda_hand"]
    if kw.pop("posture", False):
        goals = [ik.Position("panda_hand", [0.4, 0.1, 0.5]), ik.Posture(robot.neutral(), 0.5)]
    with pytest.raises(ik.SolverError, match=words):
        ik.Tracker(robot, goals, method=method, **kw)


def test_a_tracker_bounded_by_velocity_limits_times_dt():
    """Tracker(dt=...) raised "unexpected keyword argument 'dt'" while solve() takes dt: a control
    loop's bound is its period times the joints' velocity limits."""
    panda = ik.load_robot("panda")
    tr = ik.Tracker(panda, "panda_hand", dt=0.01)
    np.testing.assert_allclose(tr.max_joint_step, panda.velocity_limit * 0.01)
    p = panda.fk(panda.neutral(), "panda_hand")[:3, 3]
    q_before = tr.q
    step = tr.update(p + [0.3, 0.0, -0.2])  # far: the bound holds every joint's move
    assert np.all(np.abs(step.q - q_before) <= panda.velocity_limit * 0.01 + 1e-12)
    with pytest.raises(ik.GoalError, match="give one of them"):
        ik.Tracker(panda, "panda_hand", max_joint_step=0.05, dt=0.01)
    with pytest.raises(ik.GoalError, match=r"dt: expected a finite number > 0 \[s\]"):
        ik.Tracker(panda, "panda_hand", dt=-1.0)
    arm = ik.load_robot("planar2")  # (no <limit velocity> in its URDF)
    with pytest.raises(ik.GoalError, match="no joint velocity limits"):
        ik.Tracker(arm, arm.frame_names[-1], dt=0.01)
