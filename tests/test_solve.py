"""The solve driver and the default Levenberg–Marquardt method."""
import math
import re
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import invkin as ik
from invkin import FrameError, GoalError, SolverError, Status
from invkin.spatial import make_transform, rotation_angle, so3_exp


@pytest.fixture(scope="module")
def seed8():
    return ik.load_robot("seed8dof")


@pytest.fixture(scope="module")
def panda():
    return ik.load_robot("panda")


def test_lm_reaches_reachable_position_goals_on_seed8dof_from_neutral(seed8):
    rng = np.random.default_rng(0)
    for i in range(30):
        p = seed8.fk(seed8.sample(rng=rng), "effector")[:3, 3]
        res = ik.solve(seed8, [ik.Position("effector", p)], seed=i)
        assert res.success and res.status is Status.CONVERGED
        assert np.linalg.norm(seed8.fk(res.q, "effector")[:3, 3] - p) <= 1e-6


def test_lm_solves_panda_poses_to_the_requested_tolerance(panda):
    rng = np.random.default_rng(1)
    for i in range(30):
        T = panda.fk(panda.sample(rng=rng), "panda_hand")
        res = ik.solve(panda, [ik.Pose("panda_hand", T)], position_tolerance=1e-9, rotation_tolerance=1e-9,
                       timeout=0.1, seed=i)
        assert res.success, res
        T2 = panda.fk(res.q, "panda_hand")
        assert np.linalg.norm(T2[:3, 3] - T[:3, 3]) <= 1e-9
        assert rotation_angle(T2, T) <= 1e-9
        assert panda.within_limits(res.q)


@settings(max_examples=40, deadline=None)
@given(st.tuples(*[st.floats(-3.0, 3.0)] * 3), st.integers(0, 2**16))
def test_lm_never_returns_q_outside_the_limits(xyz, seed):
    panda = ik.load_robot("panda")
    res = ik.solve(panda, [ik.Position("panda_hand", np.array(xyz))], timeout=0.01, seed=seed)
    assert panda.within_limits(res.q)
    assert np.all(np.isfinite(res.q))


def test_unreachable_target_stretches_toward_it(seed8):
    res = ik.solve(seed8, [ik.Position("effector", [0.0, 0.0, 5.0])])
    assert res.status is Status.UNREACHABLE and not res.success
    assert np.allclose(seed8.fk(res.q, "effector")[:3, 3], [0, 0, 3], atol=1e-4)
    assert res.position_error == pytest.approx(2.0, abs=1e-4)
    target = np.array([3.0, 4.0, 0.0])  # |target| = 5 > 3: the arm points at it
    res = ik.solve(seed8, [ik.Position("effector", target)])
    p = seed8.fk(res.q, "effector")[:3, 3]
    assert res.status is Status.UNREACHABLE
    assert np.allclose(p, 3 * target / 5, atol=1e-3)


def test_unreachable_panda_target_points_the_stretched_arm_at_it(panda):
    target = np.array([3.0, 0.0, 0.0])
    res = ik.solve(panda, [ik.Position("panda_hand", target)])
    assert res.status is Status.UNREACHABLE
    shoulder = panda.fk(panda.neutral(), "panda_link2")[:3, 3]
    p = panda.fk(res.q, "panda_hand")[:3, 3]
    # the hand lies (nearly) on the shoulder -> target line, at full extension
    d = (target - shoulder) / np.linalg.norm(target - shoulder)
    assert np.linalg.norm(np.cross(p - shoulder, d)) < 0.05
    assert np.linalg.norm(p - shoulder) > 0.8


ROUTES = [{}, {"restarts": False}, {"timeout": None}, {"method": "dls"}, {"method": "dls", "restarts": False},
          {"method": "pinv", "max_iterations": 50}]


@pytest.mark.parametrize("kw", ROUTES)
def test_goals_met_of_a_missed_single_goal_is_false_on_every_route(panda, kw):
    q = panda.neutral()
    far = panda.fk(q, "panda_hand")
    far[0, 3] += 3.0  # 3 m beyond the hand: out of reach
    for goals in ([ik.Pose("panda_hand", far)], ik.Pose("panda_hand", far), [ik.Position("panda_hand", far[:3, 3])]):
        res = ik.solve(panda, goals, q0=q, **kw)
        assert not res.success
        assert res.goals_met == (False,), (kw, res)


@pytest.mark.parametrize("kw", ROUTES)
def test_goals_met_of_a_converged_single_goal_is_true_on_every_route(panda, kw):
    q = panda.neutral()
    T = panda.fk(q, "panda_hand")
    T[0, 3] += 0.05
    res = ik.solve(panda, [ik.Pose("panda_hand", T)], q0=q, **kw)
    assert res.success and res.goals_met == (True,), (kw, res)


def test_a_batch_item_says_whether_its_goal_is_met(panda):
    T = panda.fk(panda.neutral(), "panda_hand")
    far = T.copy()
    far[0, 3] += 3.0
    batch = ik.solve_many(panda, "panda_hand", np.array([T, far]))
    assert [batch[i].goals_met for i in range(2)] == [(True,), (False,)]


def _turn_from_q0(robot, q, q0):
    """Joints of q that a whole turn would bring nearer q0 while inside the limits."""
    out = []
    for j in robot.wrap_dofs.tolist():
        for shift in (-2 * math.pi, 2 * math.pi):
            v = q[j] + shift
            if robot.lower[j] <= v <= robot.upper[j] and abs(v - q0[j]) < abs(q[j] - q0[j]) - 1e-9:
                out.append(j)
    return out


@pytest.mark.parametrize("method", ["lm", "dls", "ccd"])
def test_a_ur5_answer_takes_the_turn_of_each_joint_nearest_q0_within_the_limits(method):
    """UR5's joints span ±2 pi: a pose has representatives a turn apart. 42 of 100 random lm
    solves returned a joint a turn away from q0 although the nearer one was inside the limits
    too (3 of 100 for a 0.05 rad move from q0)."""
    ur5 = ik.load_robot("ur5")
    assert ur5.wrap_dofs.tolist() == list(range(6))
    rng = np.random.default_rng(1)
    spun, solved = [], 0
    for i in range(25):
        q0, qt = ur5.sample(rng=rng), ur5.sample(rng=rng)
        T = ur5.fk(qt, "tool0")
        res = ik.solve(ur5, [ik.Pose("tool0", T)], q0=q0, method=method, seed=i, timeout=None,
                       max_iterations=3000)
        assert np.all(res.q >= ur5.lower) and np.all(res.q <= ur5.upper)
        if res.success:
            solved += 1
            np.testing.assert_allclose(ur5.fk(res.q, "tool0"), T, atol=1e-5)
            if _turn_from_q0(ur5, res.q, q0):
                spun.append(i)
    assert solved >= 15 and not spun, (solved, spun)
    Q0, Qt = ur5.sample(30, rng=rng), ur5.sample(30, rng=rng)
    batch = ik.solve_many(ur5, "tool0", ur5.fk(Qt, "tool0"), q0=Q0)
    assert [b for b in range(30) if batch.success[b] and _turn_from_q0(ur5, batch.q[b], Q0[b])] == []
    assert np.all(batch.q >= ur5.lower) and np.all(batch.q <= ur5.upper)


def test_a_joint_near_its_limit_takes_the_nearest_representative_inside_the_limits():
    """Joint 1 of the answer is -0.05 rad (or -0.05 ± 2 pi): q0 = -6.28 is nearest -6.33, below
    the lower limit -2 pi, so the answer is -0.05 (6.23 from q0), not 6.23 (12.5 from q0)."""
    ur5 = ik.load_robot("ur5")
    qt = np.array([-0.05, -1.0, 1.2, -0.5, 1.0, 0.3])
    q0 = qt.copy()
    q0[0] = -6.28
    res = ik.solve(ur5, [ik.Pose("tool0", ur5.fk(qt, "tool0"))], q0=q0, timeout=None)
    assert res.success and np.all(res.q >= ur5.lower) and np.all(res.q <= ur5.upper)
    assert abs(res.q[0] - qt[0]) < 1e-3, res.q
    np.testing.assert_allclose(res.q[1:], qt[1:], atol=1e-3)


@pytest.mark.parametrize("kw", [{"self_collision": True}, {"world": "sphere"}])
def test_collision_options_on_a_robot_without_shapes_leave_an_unreachable_target_a_status(panda, kw):
    """The bundled panda has no collision shapes: an out-of-reach target with world= or
    self_collision=True raised numpy's "ufunc 'bitwise_and' not supported" (collision/limbs.py)
    after the warning that the distances do nothing."""
    if kw.get("world") == "sphere":
        kw = {"world": ik.World([ik.Sphere((2.0, 2.0, 2.0), 0.1)])}
    T = panda.fk(panda.sample(rng=1), "panda_hand")
    T[:3, 3] *= 3.0
    with pytest.warns(ik.CollisionWarning, match="did nothing"):
        res = ik.solve(panda, [ik.Pose("panda_hand", T)], timeout=0.02, **kw)
    assert res.status is Status.UNREACHABLE and not res.success


def test_solve_many_lm_refuses_a_timeout_saying_what_bounds_it(panda):
    """The message named the option only ("takes no options ['timeout']") while the docstring
    speaks of a timeout: it now says that max_restarts is the lm kernel's budget."""
    T = panda.fk(panda.neutral(), "panda_hand")[None]
    with pytest.raises(SolverError, match=r"\['timeout'\].*budget per target is max_restarts"):
        ik.solve_many(panda, "panda_hand", T, timeout=0.01)


@pytest.mark.parametrize("method", ["lm", "pinv", "dls"])
def test_a_nullspace_gain_without_a_nullspace_objective_says_it_does_nothing(panda, method):
    """solve(nullspace_gain=0.5) without nullspace= returned the plain answer: the gain did nothing,
    without a word (pinv's and dls's null-space term is off without an objective too)."""
    goal = ik.Position("panda_hand", [0.4, 0.1, 0.5])
    with pytest.warns(ik.InvkinWarning, match="nullspace_gain=0.5 without nullspace does nothing"):
        plain = ik.solve(panda, [goal], method=method, nullspace_gain=0.5)
    assert plain.success
    res = ik.solve(panda, [goal], method=method, nullspace="joint_limits", nullspace_gain=0.5)
    assert res.success


def test_a_bad_nullspace_iterations_is_named_as_given(panda):
    """The error said 'iterations: expected an integer >= 0', a name solve() does not take."""
    with pytest.raises(GoalError, match="^nullspace_iterations: expected an integer"):
        ik.solve(panda, [ik.Position("panda_hand", [0.4, 0.1, 0.5])], nullspace="joint_limits",
                 nullspace_iterations=2.5)


def test_goals_compare_and_hash_by_value():
    """`goal in goals` raised "The truth value of an array with more than one element is
    ambiguous" (the dataclass's == on array fields) and a goal could not be a dict key or set
    member ("unhashable type: 'numpy.ndarray'")."""
    T = make_transform(so3_exp(np.array([0.1, 0.2, 0.3])), np.array([0.4, 0.1, 0.5]))
    a, b = ik.Pose("panda_hand", T), ik.Pose("panda_hand", T.copy())
    assert a == b and hash(a) == hash(b) and len({a, b}) == 1
    assert a in [ik.Pose("panda_hand", np.eye(4)), b]
    assert a != ik.Pose("panda_hand", T, weight=2.0) and a != ik.Pose("panda_hand", T, hard=True)
    assert a != ik.Position("panda_hand", T[:3, 3]) and a != ik.Pose("panda_link8", T)
    goals = {ik.Position("panda_hand", [0.4, 0.1, 0.5]): "hand", ik.Posture(np.zeros(7), weight=0.1): "rest"}
    assert goals[ik.Position("panda_hand", (0.4, 0.1, 0.5))] == "hand"
    assert goals[ik.Posture(np.zeros(7), weight=0.1)] == "rest"


def test_solve_many_refuses_orientation_axes_for_position_targets(panda):
    """solve_many(Ts (B, 3), axes='z') solved the positions and dropped axes without a word."""
    p = panda.fk(panda.sample(3, rng=2), "panda_hand")[:, :3, 3]
    with pytest.raises(GoalError, match="axes='z'.*positions"):
        ik.solve_many(panda, "panda_hand", p, axes="z")
    assert ik.solve_many(panda, "panda_hand", p).success.all()


def test_a_batch_sliced_or_masked_is_a_batch_of_those_targets(panda):
    """batch[1:3] and batch[batch.success] raised NumPy's 'only 0-dimensional arrays can be
    converted to Python scalars'."""
    Ts = panda.fk(panda.sample(4, rng=3), "panda_hand")
    Ts[2, :3, 3] = [3.0, 0.0, 0.0]  # out of reach
    batch = ik.solve_many(panda, "panda_hand", Ts)
    part = batch[1:3]
    assert isinstance(part, ik.BatchResult) and len(part) == 2
    np.testing.assert_array_equal(part.q, batch.q[1:3])
    assert part.status == batch.status[1:3] and list(part.success) == [True, False]
    met = batch[batch.success]
    assert len(met) == 3 and met.success.all() and met[2].status is Status.CONVERGED
    assert batch[[3, 0]].iterations.tolist() == [batch.iterations[3], batch.iterations[0]]
    assert math.isclose(part.time, batch.time / 2)
    for bad in (1.5, "0", (0, 1), True):
        with pytest.raises(TypeError, match="BatchResult indices"):
            batch[bad]


@pytest.mark.parametrize("kw", [{}, {"timeout": None}, {"method": "dls"}, {"method": "pinv"}])
def test_restarts_false_runs_and_counts_no_restart(panda, kw):
    far = panda.fk(panda.neutral(), "panda_hand")
    far[0, 3] += 3.0
    res = ik.solve(panda, ik.Pose("panda_hand", far), restarts=False, **kw)
    assert not res.success and res.restarts == 0, res


@pytest.mark.parametrize("max_restarts", [0, 1, 5])
def test_solve_many_counts_at_most_max_restarts(panda, max_restarts):
    far = panda.fk(panda.neutral(), "panda_hand")
    far[0, 3] += 3.0
    batch = ik.solve_many(panda, "panda_hand", far[None], max_restarts=max_restarts)
    assert not batch.success[0] and int(batch.restarts[0]) == max_restarts


@pytest.mark.parametrize("call", [
    lambda r: ik.solve(r, ik.Position("panda_hand", [0.3, 0.0, 0.5])),
    lambda r: ik.solve(r, [ik.Position("panda_hand", [0.3, 0.0, 0.5])], method="dls"),
    lambda r: ik.solve_many(r, "panda_hand", np.zeros((1, 3))),
    lambda r: ik.Tracker(r, ["panda_hand"]),
], ids=["solve", "solve-dls", "solve_many", "Tracker"])
@pytest.mark.parametrize("robot", ["panda", None, 3])
def test_a_robot_name_instead_of_a_robot_is_a_model_error_saying_how_to_load_one(call, robot):
    with pytest.raises(ik.ModelError, match=rf"robot: expected an invkin Robot \(e.g. ik.load_robot\('panda'\)\), "
                                            rf"got {re.escape(repr(robot))}$"):
        call(robot)


def test_same_seed_same_answer(panda):
    T = panda.fk(panda.sample(rng=3), "panda_hand")
    a = ik.solve(panda, [ik.Pose("panda_hand", T)], q0=panda.sample(rng=4), seed=7, timeout=None,
                 max_iterations=2000)
    b = ik.solve(panda, [ik.Pose("panda_hand", T)], q0=panda.sample(rng=4), seed=7, timeout=None,
                 max_iterations=2000)
    assert np.array_equal(a.q, b.q) and a.iterations == b.iterations


def test_multi_goal_solve_on_a_tree_reaches_both_hands():
    b = ik.RobotBuilder("twoarms")
    b.add_root("pelvis")
    b.add_joint("waist", "pelvis", "torso", "revolute", make_transform(p=(0, 0, 0.3)), (0, 0, 1), -1, 1)
    for side, y in (("l", 0.2), ("r", -0.2)):
        b.add_joint(f"{side}_sh1", "torso", f"{side}_sh", "revolute", make_transform(p=(0, y, 0.3)), (0, 1, 0), -2, 2)
        b.add_joint(f"{side}_sh2", f"{side}_sh", f"{side}_up", "revolute", None, (1, 0, 0), -2, 2)
        b.add_joint(f"{side}_el", f"{side}_up", f"{side}_fo", "revolute", make_transform(p=(0.3, 0, 0)), (0, 1, 0),
                    -2.5, 0.0)
        b.add_joint(f"{side}_wr", f"{side}_fo", f"{side}_hand", "revolute", make_transform(p=(0.25, 0, 0)),
                    (0, 0, 1), -1, 1)
        b.add_joint(f"{side}_tip", f"{side}_hand", f"{side}_tool", "fixed", make_transform(p=(0.05, 0, 0)))
    robot = b.build()
    q_true = robot.sample(rng=5)
    goals = [ik.Position("l_tool", robot.fk(q_true, "l_tool")[:3, 3]),
             ik.Position("r_tool", robot.fk(q_true, "r_tool")[:3, 3])]
    res = ik.solve(robot, goals, timeout=0.2)
    assert res.success
    for g in goals:
        assert np.linalg.norm(robot.fk(res.q, g.frame)[:3, 3] - g.p) <= 1e-6


def test_orientation_axis_mask_only_aligns_the_tool_z_axis(panda):
    R_goal = so3_exp([0.4, -0.3, 0.2])
    res = ik.solve(panda, [ik.Orientation("panda_hand", R_goal, axes="z")], seed=0)
    assert res.success
    R = panda.fk(res.q, "panda_hand")[:3, :3]
    assert np.dot(R[:, 2], R_goal[:, 2]) == pytest.approx(1.0, abs=1e-10)


def test_aim_points_the_frame_axis_at_the_point(panda):
    point = np.array([0.6, 0.3, 0.1])
    res = ik.solve(panda, [ik.Aim("panda_hand", [0, 0, 1], point)], seed=0)
    assert res.success
    T = panda.fk(res.q, "panda_hand")
    d = (point - T[:3, 3]) / np.linalg.norm(point - T[:3, 3])
    assert np.dot(T[:3, 2], d) == pytest.approx(1.0, abs=1e-10)


@pytest.mark.parametrize("goals", [
    [ik.Aim("panda_hand", [0, 0.6, 0.8], [0.6, 0.3, 0.1]), ik.Orientation("panda_link7", so3_exp([0.2, 0.1, 0.3]),
                                                                        axes="x")],
    [ik.Pose("panda_hand", make_transform(so3_exp([1.0, -2.0, 0.5]), [0.3, 0.2, 0.4]))],
    [ik.Orientation("panda_link5", so3_exp([0.0, 2.9, 0.3])), ik.Position("panda_link4", [0.1, 0.2, 0.3])],
], ids=["aim+axis", "pose", "rotation+position"])
def test_goal_residual_jacobians_equal_finite_differences(panda, goals):
    from invkin.solvers._common import compile_problem, task_eval

    problem = compile_problem(panda, goals, 1e-6, 1e-6)
    q = panda.sample(rng=8)
    a = problem.args
    m = 3 * problem.gnode.shape[0]

    def ev(q):
        e = np.empty(m)
        J = np.empty((m, 7))
        task_eval(a[0], a[1], a[2], q, a[6], a[7], a[8], a[9], a[10], a[11], np.empty((panda.n_nodes, 4, 4)),
                  np.empty((6, 7)), e, J, np.empty(20))
        return e, J

    _, J = ev(q)
    for k in range(7):
        dq = np.zeros(7)
        dq[k] = 1e-6
        de = (ev(q + dq)[0] - ev(q - dq)[0]) / 2e-6
        # e is the change wanted (minus the residual), J the residual's derivative
        assert np.allclose(-de, J[:, k], atol=1e-7), (k, -de, J[:, k])


def test_task_eval_with_an_empty_jacobian_gives_the_same_residual_and_errors(panda):
    from invkin.solvers._common import compile_problem, task_eval

    goals = [ik.Aim("panda_hand", [0, 0, 1], [0.5, 0.2, 0.3]),
             ik.Pose("panda_link5", panda.fk(panda.sample(rng=3), "panda_link5"))]
    problem = compile_problem(panda, goals, 1e-6, 1e-6)
    a = problem.args
    q = panda.sample(rng=4)
    m = 3 * problem.gnode.shape[0]
    out = []
    for J in (np.full((m, 7), np.nan), np.empty((0, 7))):
        e, errs = np.empty(m), np.empty(20)
        task_eval(a[0], a[1], a[2], q, a[6], a[7], a[8], a[9], a[10], a[11], np.empty((panda.n_nodes, 4, 4)),
                  np.empty((6, 7)), e, J, errs)
        out.append((e, errs[:2].copy(), J))
    assert np.array_equal(out[0][0], out[1][0]) and np.array_equal(out[0][1], out[1][1])
    assert np.all(np.isfinite(out[0][2]))  # a J with rows is filled


def test_posture_goal_biases_the_redundant_solution(panda):
    T = panda.fk(panda.sample(rng=9), "panda_hand")
    rest = panda.neutral()
    free = ik.solve(panda, [ik.Position("panda_hand", T[:3, 3])], q0=panda.sample(rng=10), seed=1)
    biased = ik.solve(panda, [ik.Position("panda_hand", T[:3, 3]), ik.Posture(rest, weight=0.05)],
                      q0=panda.sample(rng=10), seed=1, method="lm")
    assert free.success
    assert np.linalg.norm(biased.q - rest) <= np.linalg.norm(free.q - rest) + 1e-9


def test_distance_mode_returns_the_solution_closest_to_q0(panda):
    q0 = panda.sample(rng=11)
    T = panda.fk(panda.sample(rng=12), "panda_hand")
    ik.solve(panda, [ik.Pose("panda_hand", T)], q0=q0, timeout=None, mode="distance", max_iterations=50)  # compile
    speed = ik.solve(panda, [ik.Pose("panda_hand", T)], q0=q0, seed=3, timeout=0.03)
    dist = ik.solve(panda, [ik.Pose("panda_hand", T)], q0=q0, seed=3, timeout=0.03, mode="distance")
    assert dist.success
    assert np.linalg.norm(dist.q - q0) <= np.linalg.norm(speed.q - q0) + 1e-9


def test_ball_joint_tentacle_solves_with_lm():
    robot = ik.load_robot("tentacle", n=8, joint="ball")
    p = robot.fk(robot.sample(rng=2), "tip")[:3, 3]
    res = ik.solve(robot, [ik.Position("tip", p)], seed=0)
    assert res.success


def test_timeout_and_iteration_limits_are_statuses(panda):
    T = panda.fk(panda.sample(rng=13), "panda_hand")
    res = ik.solve(panda, [ik.Pose("panda_hand", T)], position_tolerance=1e-15, rotation_tolerance=1e-15,
                   timeout=None, max_iterations=25)
    assert res.status in (Status.ITERATION_LIMIT, Status.STALLED, Status.CONVERGED)
    assert res.iterations <= 25


def test_result_repr_is_one_readable_line(panda):
    res = ik.solve(panda, [ik.Position("panda_hand", [0.4, 0.1, 0.5])])
    text = repr(res)
    assert "\n" not in text and "converged" in text and "ms" in text


def test_methods_lists_every_registered_solver():
    names = ik.methods()
    assert "lm" in names and names == sorted(names)


def test_unknown_method_lists_the_valid_ones(panda):
    with pytest.raises(SolverError, match=r"unknown method 'ccdd'; choose one of: .*lm"):
        ik.solve(panda, [ik.Position("panda_hand", [0.4, 0, 0.4])], method="ccdd")


def test_unknown_option_names_the_method_options(panda):
    with pytest.raises(SolverError, match="no option"):
        ik.solve(panda, [ik.Position("panda_hand", [0.4, 0, 0.4])], damping=3)


@pytest.mark.parametrize("kwargs, match", [
    (dict(position_tolerance=-1.0), "position_tolerance"),
    (dict(rotation_tolerance=0.0), "rotation_tolerance"),
    (dict(timeout=-1e-3), "timeout"),
    (dict(timeout=float("nan")), "timeout"),
    (dict(max_iterations=0), "max_iterations"),
])
def test_bad_numeric_options_are_goal_errors(panda, kwargs, match):
    with pytest.raises(GoalError, match=match):
        ik.solve(panda, [ik.Position("panda_hand", [0.4, 0, 0.4])], **kwargs)


@pytest.mark.parametrize("make, err, match", [
    (lambda: ik.Position("panda_hand", [np.nan, 0, 0]), GoalError, "finite"),
    (lambda: ik.Position("panda_hand", [0, 0]), GoalError, r"shape \(3,\)"),
    (lambda: ik.Pose("panda_hand", np.ones((4, 4))), GoalError, "last row|rotation"),
    (lambda: ik.Orientation("panda_hand", np.eye(3), axes="w"), GoalError, "axes"),
    (lambda: ik.Aim("panda_hand", [0, 0, 0], [1, 1, 1]), GoalError, "non-zero"),
    (lambda: ik.Position("panda_hand", [0, 0, 1], weight=-1), GoalError, "weight"),
])
def test_malformed_goals_are_rejected(make, err, match):
    with pytest.raises(err, match=match):
        make()


@pytest.mark.parametrize("kw, given", [({"hard": True}, "hard=True"), ({"priority": 0}, "priority=0"),
                                       ({"priority": 1}, "priority=1"), ({"hard": "yes"}, "hard='yes'")])
def test_a_posture_cannot_be_hard_and_says_it_is_a_regulariser(kw, given):
    with pytest.raises(GoalError, match=rf"Posture: got {given}; a Posture is a regulariser.*cannot be hard"):
        ik.Posture(np.zeros(7), **kw)
    assert ik.Posture(np.zeros(7), hard=False).level == 1  # the default, spelt out, is accepted


def test_goal_on_unknown_frame_names_the_closest(panda):
    with pytest.raises(FrameError, match="panda_hand"):
        ik.solve(panda, [ik.Position("panda_hnd", [0.4, 0, 0.4])])


def test_a_frame_name_near_nothing_is_not_given_near_misses(panda):
    """With no close name, the first names were listed as 'closest'."""
    with pytest.raises(FrameError) as e:
        panda.fk(panda.neutral(), "zzzz")
    assert f"closest: none of the {len(panda.frame_names)} names is close (they begin 'panda_link0'" in str(e.value)


def test_wrong_q0_shape_is_refused(panda):
    with pytest.raises(ik.ConfigurationError, match=r"\(7,\)"):
        ik.solve(panda, [ik.Position("panda_hand", [0.4, 0, 0.4])], q0=np.zeros(3))


def test_slightly_drifted_goal_rotation_is_repaired_and_solved(panda):
    T = panda.fk(panda.sample(rng=14), "panda_hand")
    T_drift = T.copy()
    T_drift[:3, :3] += 1e-6
    res = ik.solve(panda, [ik.Pose("panda_hand", T_drift)], position_tolerance=1e-6, rotation_tolerance=1e-5)
    assert res.success


def test_solve_many_matches_per_pose_success_and_is_deterministic(panda):
    qs = panda.sample(64, rng=15)
    Ts = panda.fk(qs, "panda_hand")
    a = ik.solve_many(panda, "panda_hand", Ts, seed=1)
    b = ik.solve_many(panda, "panda_hand", Ts, seed=1)
    # target 13 lies next to a singular configuration (smallest singular value of J ~6e-4):
    # LM crawls there, so a few misses are allowed, but never a wrong claim
    assert a.success.sum() >= 62
    assert np.array_equal(a.q, b.q)
    T2 = panda.fk(a.q, "panda_hand")
    err = np.linalg.norm(T2[:, :3, 3] - Ts[:, :3, 3], axis=1)
    assert np.all(err[a.success] <= 1e-6)
    assert np.allclose(err, a.position_error, atol=1e-12)
    assert panda.within_limits(a.q).all()
    assert a[3].success and len(a) == 64


def test_solve_many_position_targets_and_unreachable_rows(seed8):
    P = np.array([[0.5, 0.5, 1.0], [0.0, 0.0, 7.0]])
    res = ik.solve_many(seed8, "effector", P, max_restarts=2)
    assert res.success.tolist() == [True, False]
    assert res.status[1] is Status.UNREACHABLE
    assert np.allclose(seed8.fk(res.q[1], "effector")[:3, 3], [0, 0, 3], atol=1e-3)


def test_solve_many_pose_targets_beyond_reach_are_unreachable_as_solve_says(panda):
    # a pose target 0.6 m beyond the Panda's reach was 'stalled' in solve_many, 'unreachable' in solve
    T = panda.fk(panda.neutral(), "panda_hand")
    far = T.copy()
    far[:3, 3] = [1.4, 0.3, 0.5]
    batch = ik.solve_many(panda, "panda_hand", np.stack([T, far]), max_restarts=2)
    assert batch.status == [Status.CONVERGED, Status.UNREACHABLE]
    assert ik.solve(panda, ik.Pose("panda_hand", far)).status is Status.UNREACHABLE


@pytest.mark.parametrize("Ts, method", [(np.zeros((0, 4, 4)), "lm"), (np.zeros((0, 3)), "lm"),
                                        (np.zeros((0, 4, 4)), "dls")])
def test_an_empty_batch_says_so_without_warnings(panda, Ts, method):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        batch = ik.solve_many(panda, "panda_hand", Ts, method=method)
        text = repr(batch)
    assert len(batch) == 0 and batch.q.shape == (0, panda.dof) and batch.status == []
    assert re.fullmatch(rf"BatchResult\(B=0, time=\d+\.\d{{3}} s, method={method}\)", text), text


def test_solve_many_bad_shapes_are_goal_errors(panda):
    with pytest.raises(GoalError, match=r"\(B, 4, 4\)"):
        ik.solve_many(panda, "panda_hand", np.zeros((5, 3, 3)))
    with pytest.raises(GoalError, match="finite"):
        ik.solve_many(panda, "panda_hand", np.full((2, 3), np.nan))


def test_inputs_are_not_mutated(panda):
    T = panda.fk(panda.sample(rng=16), "panda_hand")
    T_copy = T.copy()
    q0 = panda.sample(rng=17)
    q0_copy = q0.copy()
    ik.solve(panda, [ik.Pose("panda_hand", T)], q0=q0)
    assert np.array_equal(T, T_copy) and np.array_equal(q0, q0_copy)
    assert math.isfinite(float(np.sum(q0)))


def test_nullspace_option_refines_lm_toward_the_objective_within_tolerance(panda):
    T = panda.fk(panda.sample(rng=3), "panda_hand")
    goal = [ik.Position("panda_hand", T[:3, 3])]
    plain = ik.solve(panda, goal, seed=0)
    refined = ik.solve(panda, goal, seed=0, nullspace="joint_limits")
    assert refined.success and refined.info["nullspace"] == "joint_limits"
    assert np.linalg.norm(panda.fk(refined.q, "panda_hand")[:3, 3] - T[:3, 3]) <= 1e-6
    assert ik.distance_to_limits(panda, refined.q).min() > ik.distance_to_limits(panda, plain.q).min()


def test_nullspace_option_goes_to_methods_with_an_in_loop_term(panda):
    T = panda.fk(panda.sample(rng=3), "panda_hand")
    res = ik.solve(panda, [ik.Position("panda_hand", T[:3, 3])], method="pinv", nullspace="posture")
    assert res.success and "nullspace" not in res.info


def test_rest_springs_blend_the_result_and_report_when_the_goal_is_lost(panda):
    T = panda.fk(panda.sample(rng=3), "panda_hand")
    goal = [ik.Position("panda_hand", T[:3, 3])]
    rest = panda.neutral()
    stiff_ik = ik.solve(panda, goal, seed=0, position_tolerance=1e-2,
                        rest=dict(theta_orig=rest, p_orig=1.0, p_ik=1000.0))
    stiff_rest = ik.solve(panda, goal, seed=0, rest=dict(theta_orig=rest, p_orig=1000.0, p_ik=1.0))
    assert stiff_ik.info["rest"]["goal_reached"] and stiff_ik.success
    assert not stiff_rest.info["rest"]["goal_reached"] and not stiff_rest.success
    theta_ik = stiff_rest.info["rest"]["theta_ik"]
    assert np.allclose(stiff_rest.q, (1000.0 * rest + theta_ik) / 1001.0)
    assert np.allclose(stiff_rest.info["rest"]["stiffness"], 1001.0)


@pytest.mark.parametrize("kwargs, match", [
    (dict(nullspace="bogus"), "null-space objective"),
    (dict(rest=dict(theta_orig=np.zeros(7), p_orig=-1.0, p_ik=1.0)), "p_orig"),
    (dict(rest=dict(p_orig=1.0)), "theta_orig"),
    # a misspelt spring was ignored in silence (the solve ran without the damping the caller asked for)
    (dict(rest=dict(theta_orig=np.zeros(7), p_orig=1.0, p_ik=1.0, d_IK=0.1)), "unknown.*'d_IK'.*did you mean 'd_ik'"),
])
def test_bad_nullspace_and_rest_options_are_goal_errors(panda, kwargs, match):
    with pytest.raises(GoalError, match=match):
        ik.solve(panda, [ik.Position("panda_hand", [0.4, 0, 0.4])], **kwargs)


@pytest.mark.parametrize("method", ["ccd", "dls", "transpose"])
def test_solve_many_bounds_the_restarts_of_every_method(panda, method):
    # other methods ran solve() per target with unbounded restarts: 2-6 restarts with max_restarts=0
    Ts = panda.fk(panda.sample(12, rng=3), "panda_hand")
    kw = dict(method=method, timeout=None, max_iterations=4000, position_tolerance=1e-10, rotation_tolerance=1e-10)
    for n in (0, 2):
        batch = ik.solve_many(panda, "panda_hand", Ts, max_restarts=n, **kw)
        assert batch.restarts.max() <= n
        assert np.array_equal(batch.q, ik.solve_many(panda, "panda_hand", Ts, max_restarts=n, **kw).q)  # no clock


def test_the_nullspace_refinement_stays_inside_the_timeout():
    # the refinement after the solve ran past it: 830 ms under timeout=0.02 (G1's four limbs, the
    # manipulability objective); it now gets what is left of the budget (one iteration may overrun it)
    g1 = ik.load_robot("g1")
    q = g1.sample(rng=1)
    goals = [ik.Pose(f, g1.fk(q, f)) for f in ("left_wrist_yaw_link", "right_wrist_yaw_link",
                                                "left_ankle_roll_link", "right_ankle_roll_link")]
    ik.solve(g1, goals, nullspace="manipulability", nullspace_iterations=1, timeout=None)  # (compiled outside)
    res = ik.solve(g1, goals, nullspace="manipulability", timeout=0.02)
    assert res.success and res.time < 0.2, res
    with pytest.raises(GoalError, match="timeout"):
        ik.refine_in_nullspace(g1, goals, res.q, "joint_limits", timeout=-1.0)


def test_results_compare_and_hash_by_identity(panda):
    """`res == other` raised "The truth value of an array ... is ambiguous" (the dataclass's == on
    q), and so did `res in [...]`; results differ in time at least, so they compare by identity."""
    goal = ik.Position("panda_hand", [0.4, 0.1, 0.5])
    a, b = ik.solve(panda, [goal], seed=0), ik.solve(panda, [goal], seed=0)
    assert a == a and a != b and a in [b, a] and len({a, b}) == 2
    batch = ik.solve_many(panda, "panda_hand", np.array([[0.4, 0.1, 0.5]]))
    assert batch == batch and batch != ik.solve_many(panda, "panda_hand", np.array([[0.4, 0.1, 0.5]]))
    assert {batch: 1}[batch] == 1


def test_seeds_apart_only_above_bit_31_give_different_restarts(panda):
    """lm kept only the seed's low 31 bits: seeds 0 and 2**31 (or base * 2**32 + i) gave identical
    answers; a seed below 2**31 keeps its restarts."""
    T = panda.fk(panda.sample(rng=3), "panda_hand")
    q0 = panda.neutral()
    runs = {s: ik.solve(panda, [ik.Pose("panda_hand", T)], q0=q0, seed=s, mode="distance", timeout=None,
                        max_iterations=400) for s in (0, 2**31, 5)}
    assert not np.array_equal(runs[0].q, runs[2**31].q)
    again = ik.solve(panda, [ik.Pose("panda_hand", T)], q0=q0, seed=5, mode="distance", timeout=None,
                     max_iterations=400)
    np.testing.assert_array_equal(again.q, runs[5].q)
