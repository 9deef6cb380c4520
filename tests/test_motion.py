"""Straight-line reaching, rest-posture blend, statics (τ = Jᵀ F), null-space refinement and the
diagnostics (SEEDS.md §1 and §3, 5.1–5.2)."""
import math
import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import invkin as ik
from invkin import ConfigurationError, FrameError, GoalError, SolverError, Status
from invkin.diagnostics import smallest_singular_value
from invkin.nullspace import OBJECTIVES, make_objective
from invkin.solvers._common import compile_problem
from invkin.spatial import so3_exp, so3_log

DELTA = 0.01
SEED8 = ik.load_robot("seed8dof")
PANDA = ik.load_robot("panda")
TENTACLE = ik.load_robot("tentacle", n=4, joint="ball")
BENT = np.array([0.3, -0.2, 0.1, 0.5, 0.4, -0.3, 0.6, 0.2])
PANDA_Q = np.array([0.0, -0.3, 0.0, -2.2, 0.0, 2.0, 0.785])


def segment_distance(P, a, b):
    d = b - a
    t = np.clip((P - a) @ d / (d @ d), 0.0, 1.0)
    return np.linalg.norm(P - (a + t[:, None] * d), axis=1)


# --------------------------------------------------------------------------- reach


@pytest.mark.parametrize("method", ["pinv", "dls"])
@pytest.mark.parametrize("q0", [None, BENT], ids=["stretched", "bent"])
@pytest.mark.parametrize("target", [(1.0, 0.5, 1.5), (2.0, 0.5, 0.5), (-1.5, -1.5, -1.5), (0.0, 0.05, 2.5)])
def test_reach_seed8dof_stays_within_one_step_of_the_line_and_ends_within_half_a_step(method, q0, target):
    target = np.array(target)
    r = ik.reach(SEED8, "effector", target, step=DELTA, q0=q0, method=method)
    assert r.status == Status.CONVERGED and r.success
    start = SEED8.fk(SEED8.neutral() if q0 is None else q0, "effector")[:3, 3]
    dev = segment_distance(r.positions, start, target)
    assert dev.max() <= DELTA and r.max_deviation == pytest.approx(dev.max())
    assert np.linalg.norm(r.positions[-1] - target) < DELTA / 2
    assert r.position_error == pytest.approx(np.linalg.norm(r.positions[-1] - target))
    # the trajectory is the configurations' FK, one frame per step of about Δ
    np.testing.assert_allclose(SEED8.fk(r.qs, "effector")[:, :3, 3], r.positions, atol=1e-12)
    steps = np.linalg.norm(np.diff(r.positions, axis=0), axis=1)
    # from the stretched (singular) start the first frame lags and the next catches up
    assert steps.max() <= (1.1 if q0 is not None else 2.0) * DELTA
    # the document's loop stops at the first frame with |e| < Δ/2: after about L/Δ − 1/2 steps
    n_expected = math.floor(np.linalg.norm(target - start) / DELTA - 0.5) + 1
    assert n_expected <= len(r) - 1 <= n_expected + 5
    assert np.all(SEED8.within_limits(r.qs))


def test_reach_target_beyond_the_reach_radius_is_out_of_workspace_not_an_error():
    r = ik.reach(SEED8, "effector", [0.0, 4.0, 0.0], step=DELTA, q0=BENT)
    assert r.status == Status.OUT_OF_WORKSPACE and not r.success
    assert len(r) == 1 and np.array_equal(r.q, BENT)
    assert r.position_error > 1.0


def test_reach_target_just_inside_the_radius_is_not_out_of_workspace():
    r = ik.reach(SEED8, "effector", [0.0, 2.95, 0.0], step=0.05, q0=BENT)
    assert r.status != Status.OUT_OF_WORKSPACE


@pytest.mark.parametrize("method", ["pinv", "dls"])
def test_reach_straight_through_the_singular_stretched_posture_gets_out_without_nan(method):
    # stretched straight up, pulled straight down: the pull lies outside J's range, so the first
    # step is the second-order nudge along J's null space; after it the posture is regular
    r = ik.reach(SEED8, "effector", [0.0, 0.0, 1.0], step=DELTA, method=method)
    assert r.status == Status.CONVERGED, r
    assert np.all(np.isfinite(r.qs)) and np.all(np.isfinite(r.positions))
    assert r.near_singular[0] and not r.near_singular[1:].any()
    assert r.max_deviation < DELTA
    assert np.abs(np.diff(r.qs, axis=0)).max(initial=0.0) <= 0.5


@pytest.mark.parametrize("target", [(0.0, 1e-4, 1.0), (1e-3, 0.0, 2.9), (0.0, 0.0, 2.999)])
def test_reach_near_a_singular_posture_is_bounded_and_the_iteration_cap_ends_it(target):
    r = ik.reach(SEED8, "effector", target, step=DELTA, max_steps=50, max_joint_step=0.2)
    assert len(r) <= 51
    assert np.all(np.isfinite(r.qs))
    assert np.abs(np.diff(r.qs, axis=0)).max(initial=0.0) <= 0.2 + 1e-12
    assert r.status in (Status.CONVERGED, Status.STALLED, Status.ITERATION_LIMIT)


def test_reach_iteration_cap_gives_iteration_limit():
    r = ik.reach(SEED8, "effector", (2.0, 0.5, 0.5), step=DELTA, q0=BENT, max_steps=10)
    assert r.status == Status.ITERATION_LIMIT and len(r) == 11


@pytest.mark.parametrize("method", ["pinv", "dls"])
def test_reach_pose_target_slerps_the_orientation_alongside(method):
    T0 = PANDA.fk(PANDA_Q, "panda_hand")
    T1 = T0.copy()
    T1[:3, 3] += [0.1, 0.2, -0.15]
    T1[:3, :3] = so3_exp([0.3, -0.4, 0.5]) @ T0[:3, :3]
    r = ik.reach(PANDA, "panda_hand", T1, step=DELTA, q0=PANDA_Q, method=method)
    assert r.status == Status.CONVERGED
    assert r.position_error < DELTA / 2 and r.rotation_error < DELTA / 2
    assert r.max_deviation <= DELTA
    assert np.all(PANDA.within_limits(r.qs))
    # every frame's orientation lies near the geodesic at the frame's line parameter
    L = np.linalg.norm(T1[:3, 3] - T0[:3, 3])
    s = np.clip((r.positions - T0[:3, 3]) @ (T1[:3, 3] - T0[:3, 3]) / L**2, 0, 1)
    rv = so3_log(T1[:3, :3] @ T0[:3, :3].T)
    for sk, R in zip(s, r.rotations):
        assert np.linalg.norm(so3_log(so3_exp(sk * rv) @ T0[:3, :3] @ R.T)) < 0.05
    ang = [np.linalg.norm(so3_log(T1[:3, :3] @ R.T)) for R in r.rotations]
    assert np.all(np.diff(ang) <= 1e-6)


def test_reach_pure_rotation_uses_rotation_steps():
    T0 = PANDA.fk(PANDA_Q, "panda_hand")
    T1 = T0.copy()
    T1[:3, :3] = so3_exp([0.0, 0.0, 0.4]) @ T0[:3, :3]
    r = ik.reach(PANDA, "panda_hand", T1, step=DELTA, q0=PANDA_Q, rotation_step=0.02)
    assert r.status == Status.CONVERGED and r.rotation_error < 0.01
    assert 20 <= len(r) - 1 <= 25
    assert r.max_deviation <= DELTA


def test_reach_holds_joint_limits_when_the_line_presses_against_them():
    lo = PANDA.lower.copy()
    q0 = PANDA_Q.copy()
    q0[3] = lo[3] + 0.05  # elbow near its limit
    p = PANDA.fk(q0, "panda_hand")[:3, 3]
    r = ik.reach(PANDA, "panda_hand", p + [0.25, 0.0, 0.1], step=DELTA, q0=q0)
    assert np.all(PANDA.within_limits(r.qs))
    assert r.status == Status.CONVERGED and r.max_deviation <= DELTA


def test_reach_with_the_redundancy_term_still_follows_the_line_and_moves_differently():
    tgt = np.array([1.0, 0.5, 1.5])
    plain = ik.reach(SEED8, "effector", tgt, step=DELTA, q0=BENT)
    r = ik.reach(SEED8, "effector", tgt, step=DELTA, q0=BENT, nullspace="joint_limits", nullspace_gain=0.2)
    assert r.status == Status.CONVERGED and r.max_deviation <= DELTA
    assert not np.allclose(r.q, plain.q)
    ru = ik.reach(SEED8, "effector", tgt, step=DELTA, q0=BENT, nullspace=lambda q: -q, nullspace_gain=0.1)
    assert ru.status == Status.CONVERGED and ru.max_deviation <= DELTA
    assert np.linalg.norm(ru.q) < np.linalg.norm(plain.q)


def test_reach_joint_weights_make_stiff_joints_move_less():
    tgt = np.array([1.0, 0.5, 1.5])
    W = np.ones(8)
    W[:3] = 100.0
    plain = ik.reach(SEED8, "effector", tgt, step=DELTA, q0=BENT)
    stiff = ik.reach(SEED8, "effector", tgt, step=DELTA, q0=BENT, joint_weights=W)
    assert stiff.status == Status.CONVERGED
    assert np.abs(stiff.q[:3] - BENT[:3]).sum() < np.abs(plain.q[:3] - BENT[:3]).sum()


def test_reach_result_flags_near_singular_frames_with_the_documented_threshold():
    r = ik.reach(SEED8, "effector", (1.0, 0.5, 1.5), step=DELTA)  # starts stretched
    assert r.near_singular[0] and not r.near_singular[-1]
    J = SEED8.jacobian(r.qs[-1], "effector")[:3]
    assert smallest_singular_value(J) >= ik.diagnostics.NEAR_SINGULAR_THRESHOLD


def test_reach_on_a_ball_joint_tentacle():
    q0 = np.tile([0.1, 0.2, 0.0], 4)
    p0 = TENTACLE.fk(q0, "tip")[:3, 3]
    r = ik.reach(TENTACLE, "tip", p0 + [0.05, -0.03, -0.08], step=0.005, q0=q0)
    assert r.status == Status.CONVERGED and r.max_deviation <= 0.005


@pytest.mark.parametrize("bad, match", [
    (dict(step=-0.01), "step"), (dict(step=0.0), "step"), (dict(step=float("nan")), "step"),
    (dict(target=[np.nan, 0, 1]), "target"), (dict(target=[0, 1]), "target"),
    (dict(target=np.full((4, 4), np.inf)), "target"), (dict(rotation_step=-1.0), "rotation_step"),
    (dict(joint_weights=np.zeros(8)), "joint_weights"), (dict(max_steps=0), "max_steps"),
])
def test_reach_bad_input_raises_goal_error_naming_the_value(bad, match):
    kw = dict(target=[1.0, 0.5, 1.5])
    kw.update(bad)
    target = kw.pop("target")
    with pytest.raises(GoalError, match=match):
        ik.reach(SEED8, "effector", target, **kw)


def test_reach_unknown_method_or_frame_fails_helpfully():
    with pytest.raises(SolverError, match="pinv, dls"):
        ik.reach(SEED8, "effector", [1, 0, 1], method="lm")
    with pytest.raises(FrameError):
        ik.reach(SEED8, "efector", [1, 0, 1])
    with pytest.raises(ConfigurationError):
        ik.reach(SEED8, "effector", [1, 0, 1], q0=np.zeros(3))


# --------------------------------------------------------------------------- statics: τ = Jᵀ F


def virtual_work_torques(robot, q, wrenches, h=1e-6):
    """τ_i = ∂(F·x)/∂q_i by central differences: f·δp plus m·δφ (δφ the world rotation vector)."""
    tau = np.zeros(robot.dof)
    for i in range(robot.dof):
        d = np.zeros(robot.dof)
        d[i] = h
        qp, qm = robot.integrate(q, d), robot.integrate(q, -d)
        for frame, F in wrenches:
            Tp, Tm = robot.fk(qp, frame), robot.fk(qm, frame)
            dp = Tp[:3, 3] - Tm[:3, 3]
            dphi = so3_log(Tp[:3, :3] @ Tm[:3, :3].T)
            tau[i] += (F[:3] @ dp + F[3:] @ dphi) / (2 * h)
    return tau


@pytest.mark.parametrize("robot, frames", [(PANDA, ["panda_hand", "panda_link4"]), (TENTACLE, ["tip", "seg2"])],
                         ids=["panda", "ball-tentacle"])
def test_joint_torques_equal_virtual_work_by_finite_differences(robot, frames):
    rng = np.random.default_rng(3)
    for _ in range(5):
        q = robot.sample(rng=rng)
        wrenches = [(f, rng.normal(size=6)) for f in frames]
        tau = ik.joint_torques(robot, q, dict(wrenches))
        np.testing.assert_allclose(tau, virtual_work_torques(robot, q, wrenches), atol=1e-6)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.floats(-math.pi, math.pi), min_size=7, max_size=7),
       st.lists(st.floats(-50, 50), min_size=6, max_size=6))
def test_joint_torques_match_virtual_work_for_any_configuration_and_wrench(q, F):
    q = np.clip(np.array(q), PANDA.lower, PANDA.upper)
    F = np.array(F)
    tau = ik.joint_torques(PANDA, q, {"panda_hand": F})
    np.testing.assert_allclose(tau, virtual_work_torques(PANDA, q, [("panda_hand", F)]), atol=1e-5 * (1 + np.abs(F).max()))


def test_joint_torques_sum_over_control_points_and_accept_pairs_for_one_frame_twice():
    q = PANDA_Q
    F1, F2 = np.arange(6.0), -0.5 * np.ones(6)
    a = ik.joint_torques(PANDA, q, [("panda_hand", F1), ("panda_hand", F2)])
    b = ik.joint_torques(PANDA, q, {"panda_hand": F1 + F2})
    np.testing.assert_allclose(a, b, atol=1e-12)
    assert np.array_equal(ik.joint_torques(PANDA, q, {}), np.zeros(7))


def test_joint_torques_of_a_pure_vertical_force_on_a_planar_arm_are_lever_arms():
    planar = ik.load_robot("planar2")
    # arm along +x: a force -y at the hand (1.8 m out) loads the shoulder by -1.8, the elbow by -0.8
    tau = ik.joint_torques(planar, [0.0, 0.0], {"hand": [0, -1.0, 0, 0, 0, 0]})
    np.testing.assert_allclose(tau, [-1.8, -0.8], atol=1e-12)
    tau = ik.joint_torques(planar, [0.0, 0.0], {"hand": [0, 0, 0, 0, 0, 2.0]})  # a torque about z
    np.testing.assert_allclose(tau, [2.0, 2.0], atol=1e-12)


@pytest.mark.parametrize("wrench, match", [
    (np.zeros(3), r"'panda_hand'.*shape \(3,\)"), (np.zeros((2, 3)), r"'panda_hand'.*shape \(2, 3\)"),
    ([0, 0, np.nan, 0, 0, 0], "'panda_hand'.*finite"), ("abc", "'panda_hand'"),
])
def test_joint_torques_bad_wrench_names_the_frame_and_the_shape(wrench, match):
    with pytest.raises(GoalError, match=match):
        ik.joint_torques(PANDA, PANDA_Q, {"panda_hand": wrench})


def test_joint_torques_unknown_frame_and_bad_q():
    with pytest.raises(FrameError):
        ik.joint_torques(PANDA, PANDA_Q, {"hand": np.zeros(6)})
    with pytest.raises(ConfigurationError):
        ik.joint_torques(PANDA, np.full(7, np.nan), {"panda_hand": np.zeros(6)})
    with pytest.raises(GoalError):
        ik.joint_torques(PANDA, PANDA_Q, [("panda_hand",)])


# --------------------------------------------------------------------------- rest-posture blend


def test_rest_blend_hand_computed_scalar():
    theta, p, d = ik.rest_blend(0.0, 1.0, 1.0, 3.0, 0.5, 0.25)
    assert (theta, p, d) == (0.75, 4.0, 0.75)
    theta, p, d = ik.rest_blend(0.2, -0.4, 2.0, 2.0)
    assert theta == pytest.approx(-0.1) and p == 4.0 and d == 0.0


def test_rest_blend_is_vectorised_per_joint():
    theta, p, d = ik.rest_blend([0.0, 1.0, -2.0], [1.0, 1.0, 2.0], [1.0, 9.0, 1.0], [1.0, 1.0, 3.0],
                                d_orig=[0.1, 0.2, 0.3], d_ik=0.5)
    np.testing.assert_allclose(theta, [0.5, 1.0, 1.0])
    np.testing.assert_allclose(p, [2.0, 10.0, 4.0])
    np.testing.assert_allclose(d, [0.6, 0.7, 0.8])
    batch, _, _ = ik.rest_blend(np.zeros((4, 3)), np.ones((4, 3)), 1.0, 3.0)
    np.testing.assert_allclose(batch, 0.75)


def test_rest_blend_ball_joints_follow_the_geodesic():
    rng = np.random.default_rng(0)
    to, ti = TENTACLE.sample(rng=rng), TENTACLE.sample(rng=rng)
    theta, p, _ = ik.rest_blend(to, ti, 1.0, 3.0, robot=TENTACLE)
    for s in range(0, 12, 3):
        Ro, Ri, R = so3_exp(to[s:s + 3]), so3_exp(ti[s:s + 3]), so3_exp(theta[s:s + 3])
        full = np.linalg.norm(so3_log(Ro.T @ Ri))
        assert np.linalg.norm(so3_log(Ro.T @ R)) == pytest.approx(0.75 * full, abs=1e-9)
        assert np.linalg.norm(so3_log(R.T @ Ri)) == pytest.approx(0.25 * full, abs=1e-9)
    # about one common axis the SO(3) blend is the plain formula
    a, b = np.tile([0.0, 0.0, 0.2], 4), np.tile([0.0, 0.0, 1.0], 4)
    np.testing.assert_allclose(ik.rest_blend(a, b, 1.0, 1.0, robot=TENTACLE)[0], np.tile([0, 0, 0.6], 4))


@pytest.mark.parametrize("kw, name", [
    (dict(p_orig=0.0), "p_orig"), (dict(p_ik=-1.0), "p_ik"), (dict(p_orig=[1.0, 0.0]), "p_orig"),
    (dict(p_ik=np.nan), "p_ik"), (dict(d_orig=-0.1), "d_orig"), (dict(d_ik=np.inf), "d_ik"),
    (dict(theta_ik=[np.nan, 0.0]), "theta_ik"),
])
def test_rest_blend_rejects_springs_at_or_below_zero_and_non_finite_values(kw, name):
    args = dict(theta_orig=[0.0, 0.0], theta_ik=[1.0, 1.0], p_orig=1.0, p_ik=1.0)
    args.update(kw)
    with pytest.raises(GoalError, match=name):
        ik.rest_blend(**args)


def test_solve_with_rest_weak_rest_spring_keeps_the_goal():
    T = PANDA.fk(PANDA.sample(rng=np.random.default_rng(5)), "panda_hand")
    res = ik.solve_with_rest(PANDA, ik.Position("panda_hand", T[:3, 3]), PANDA_Q, 1e-9, 1.0,
                             position_tolerance=1e-4, seed=1)
    assert res.ik.success and res.goal_reached and res.position_error <= 1e-4
    np.testing.assert_allclose(res.stiffness, 1.0 + 1e-9)
    assert np.all(PANDA.within_limits(res.q))


def test_solve_with_rest_blended_once_a_strong_rest_spring_warns_that_the_goal_is_lost():
    T = PANDA.fk(PANDA.sample(rng=np.random.default_rng(5)), "panda_hand")
    with pytest.warns(ik.RestPoseWarning, match="no longer reached"):
        res = ik.solve_with_rest(PANDA, ik.Position("panda_hand", T[:3, 3]), PANDA_Q, 100.0, 1.0, d_orig=2.0,
                                 d_ik=1.0, seed=1, mode="blend")
    assert res.ik.success and not res.goal_reached and res.goal_lost and res.mode == "blend"
    np.testing.assert_allclose(res.q, (100 * PANDA_Q + res.ik.q) / 101)
    np.testing.assert_allclose(res.damping, 3.0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ik.solve_with_rest(PANDA, ik.Position("panda_hand", T[:3, 3]), PANDA_Q, 100.0, 1.0, seed=1, warn=False,
                           mode="blend")


def test_solve_with_rest_rejects_bad_springs_before_solving():
    with pytest.raises(GoalError, match="p_ik"):
        ik.solve_with_rest(PANDA, ik.Position("panda_hand", [0.3, 0, 0.5]), PANDA_Q, 1.0, 0.0)


# --------------------------------------------------------------------------- null space


def pose_goal(q):
    return [ik.Pose("panda_hand", PANDA.fk(q, "panda_hand"))]


@pytest.mark.parametrize("name, params", [("joint_limits", {}), ("posture", {}),
                                          ("manipulability", {"frame": "panda_hand"}), ("manipulability", {})])
def test_refine_in_nullspace_keeps_the_goal_within_tolerance_and_improves_its_objective(name, params):
    rng = np.random.default_rng(0)
    for _ in range(3):
        q = PANDA.sample(rng=rng)
        goals = pose_goal(q)
        q2 = ik.refine_in_nullspace(PANDA, goals, q, name, position_tolerance=1e-6, rotation_tolerance=1e-6,
                                    **params)
        T, T2 = PANDA.fk(q, "panda_hand"), PANDA.fk(q2, "panda_hand")
        assert np.linalg.norm(T2[:3, 3] - T[:3, 3]) <= 1e-6
        assert np.linalg.norm(so3_log(T[:3, :3] @ T2[:3, :3].T)) <= 1e-6
        assert np.all(PANDA.within_limits(q2))
        problem = compile_problem(PANDA, goals, 1e-6, 1e-6)
        obj = make_objective(name, PANDA, problem=problem, **params)
        assert obj.cost(q2) < obj.cost(q) - 1e-6


def test_refine_in_nullspace_posture_reaches_a_stationary_point_of_the_self_motion():
    q = PANDA.sample(rng=np.random.default_rng(1))
    goals = pose_goal(q)
    q2 = ik.refine_in_nullspace(PANDA, goals, q, "posture", iterations=200)
    obj = make_objective("posture", PANDA)
    J = PANDA.jacobian(q2, "panda_hand")
    N = np.eye(7) - np.linalg.pinv(J) @ J
    assert np.linalg.norm(N @ obj.gradient(q2)) < 1e-3 * np.linalg.norm(obj.gradient(q))


def test_refine_in_nullspace_user_eta_and_joint_weights():
    q = PANDA.sample(rng=np.random.default_rng(2))
    goals = [ik.Position("panda_hand", PANDA.fk(q, "panda_hand")[:3, 3])]
    q2 = ik.refine_in_nullspace(PANDA, goals, q, lambda x: -x, iterations=30)
    assert np.linalg.norm(PANDA.fk(q2, "panda_hand")[:3, 3] - goals[0].p) <= 1e-6
    assert not np.allclose(q2, q)
    W = np.ones(7)
    W[0] = 1e6  # a stiff base joint barely moves
    q3 = ik.refine_in_nullspace(PANDA, goals, q, "posture", joint_weights=W)
    q4 = ik.refine_in_nullspace(PANDA, goals, q, "posture")
    assert abs(q3[0] - q[0]) < 0.1 * abs(q4[0] - q[0])


def test_refine_in_nullspace_returns_q_unchanged_when_the_goal_cannot_be_met():
    q = PANDA_Q.copy()
    out = ik.refine_in_nullspace(PANDA, [ik.Position("panda_hand", [3.0, 0, 0])], q, "posture")
    np.testing.assert_array_equal(out, q)


def test_refine_in_nullspace_never_leaves_the_limits():
    q = PANDA_Q.copy()
    q[3] = PANDA.lower[3] + 1e-3
    goals = pose_goal(q)
    q2 = ik.refine_in_nullspace(PANDA, goals, q, lambda x: np.where(np.arange(7) == 3, -10.0, 0.0))
    assert np.all(PANDA.within_limits(q2))


@pytest.mark.parametrize("name, params", [("joint_limits", {}), ("posture", {"q_rest": PANDA_Q}),
                                          ("manipulability", {"frame": "panda_hand"}),
                                          ("manipulability", {"frame": "panda_hand", "rows": "position"})])
def test_objective_gradients_equal_finite_differences_of_their_costs(name, params):
    obj = make_objective(name, PANDA, **params)
    rng = np.random.default_rng(4)
    for _ in range(3):
        q = PANDA.sample(rng=rng)
        fd = np.array([(obj.cost(q + 1e-6 * e) - obj.cost(q - 1e-6 * e)) / 2e-6 for e in np.eye(7)])
        np.testing.assert_allclose(obj.gradient(q), fd, atol=1e-6 * (1 + np.abs(fd).max()))
        g = obj.gradient(q)
        assert obj.direction(q) @ g < 0  # a descent direction


def test_manipulability_objective_gradient_is_that_of_sqrt_det_j_jt():
    obj = make_objective("manipulability", PANDA, frame="panda_hand")
    q = PANDA_Q
    w = lambda x: math.sqrt(np.linalg.det(PANDA.jacobian(x, "panda_hand") @ PANDA.jacobian(x, "panda_hand").T))  # noqa: E731
    fd = np.array([(w(q + 1e-6 * e) - w(q - 1e-6 * e)) / 2e-6 for e in np.eye(7)])
    np.testing.assert_allclose(-obj.gradient(q) * w(q), fd, rtol=1e-5, atol=1e-9)


def test_null_space_bad_objectives_fail_helpfully():
    with pytest.raises(GoalError, match="joint_limits, manipulability, posture"):
        make_objective("limits", PANDA)
    with pytest.raises(GoalError, match="frame"):
        make_objective("manipulability", PANDA)
    with pytest.raises(GoalError, match="unknown parameter"):
        make_objective("joint_limits", PANDA, gain=2)
    with pytest.raises(GoalError, match="gain"):
        ik.refine_in_nullspace(PANDA, pose_goal(PANDA_Q), PANDA_Q, "posture", gain=-1)
    with pytest.raises(GoalError, match="eta"):
        ik.refine_in_nullspace(PANDA, pose_goal(PANDA_Q), PANDA_Q, lambda q: np.full(7, np.nan))
    assert OBJECTIVES == ("joint_limits", "manipulability", "posture")


# --------------------------------------------------------------------------- diagnostics


def test_manipulability_is_sqrt_det_j_jt_and_vanishes_stretched():
    q = PANDA_Q
    J = PANDA.jacobian(q, "panda_hand")
    assert ik.manipulability(PANDA, q, "panda_hand") == pytest.approx(math.sqrt(np.linalg.det(J @ J.T)))
    Jp = J[:3]
    assert ik.manipulability(PANDA, q, "panda_hand", rows="position") == pytest.approx(
        math.sqrt(np.linalg.det(Jp @ Jp.T)))
    assert ik.manipulability(SEED8, SEED8.neutral(), "effector", rows="position") == pytest.approx(0.0, abs=1e-12)
    batch = ik.manipulability(PANDA, np.stack([q, q]), "panda_hand")
    assert batch.shape == (2,)
    # more rows than joints: det(J Jᵀ) = 0
    assert ik.manipulability(ik.load_robot("planar2"), [0.3, 0.5], "hand") == 0.0


def test_condition_number_and_near_singularity():
    assert ik.condition_number(SEED8, SEED8.neutral(), "effector", rows="position") == math.inf
    k = ik.condition_number(SEED8, BENT, "effector", rows="position")
    s = np.linalg.svd(SEED8.jacobian(BENT, "effector")[:3], compute_uv=False)
    assert k == pytest.approx(s[0] / s[-1])
    assert ik.diagnostics.is_near_singular(SEED8, SEED8.neutral(), "effector", rows="position")
    assert not ik.diagnostics.is_near_singular(SEED8, BENT, "effector", rows="position")
    for J in (SEED8.jacobian(BENT, "effector"), PANDA.jacobian(PANDA_Q, "panda_hand"), np.ones((9, 4))):
        assert smallest_singular_value(J) == pytest.approx(np.linalg.svd(J, compute_uv=False)[-1], abs=1e-7)
    with pytest.raises(ConfigurationError, match="rows"):
        ik.manipulability(PANDA, PANDA_Q, "panda_hand", rows="xyz")


def test_distance_to_limits():
    d = ik.distance_to_limits(PANDA, PANDA_Q)
    np.testing.assert_allclose(d, np.minimum(PANDA_Q - PANDA.lower, PANDA.upper - PANDA_Q))
    assert np.all(np.isinf(ik.distance_to_limits(TENTACLE, TENTACLE.neutral())))
    assert ik.distance_to_limits(PANDA, np.stack([PANDA_Q] * 3)).shape == (3, 7)
