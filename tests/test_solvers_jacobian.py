"""Jacobian transpose, pseudo-inverse, damped least squares and Springhead's Gauss–Seidel through
``ik.solve``, as users call them.

SEEDS.md §1 (pseudo-inverse, weighted, null-space term), §3 (Springhead block Gauss–Seidel),
§5 (Welman's Jacobian transpose).
"""
from __future__ import annotations

import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import invkin as ik
from invkin.solvers._common import compile_problem
from invkin.solvers.gauss_seidel import build_tables, springhead_ball_position_block
from invkin.solvers.jacobian import pinv_step, sym_eigvals

METHODS = ["transpose", "pinv", "dls", "gauss-seidel"]
# transpose converges linearly (Welman's finding): a looser tolerance keeps the suite fast
TOL = {"transpose": 1e-4, "pinv": 1e-6, "dls": 1e-6, "gauss-seidel": 1e-6}


@pytest.fixture(scope="module")
def seed8():
    return ik.load_robot("seed8dof")


def _tip(robot, q, frame="effector"):
    return robot.fk(np.asarray(q, dtype=np.float64), frame)[:3, 3]


def _reachable(robot, n, seed, frame="effector"):
    qs = robot.sample(n, rng=np.random.default_rng(seed))
    return robot.fk(qs, frame)[:, :3, 3]


def _margin(robot, q):
    """Smallest distance to a joint limit, as a fraction of the joint's range."""
    return float(np.min(np.minimum(q - robot.lower, robot.upper - q) / (robot.upper - robot.lower)))


def slide_arm():
    """Revolute Z, prismatic X (0..1 m), revolute Y: every scalar joint type in one chain."""
    steps = [ik.Step((0, 0, 0.2), "revolute", (0, 0, 1), -3.0, 3.0, "yaw"),
             ik.Step((0.3, 0, 0), "prismatic", (1, 0, 0), 0.0, 1.0, "slide"),
             ik.Step((0, 0, 0), "revolute", (0, 1, 0), -2.0, 2.0, "pitch")]
    return ik.chain_from_steps(steps, name="slide_arm", tip_offset=(0.4, 0, 0), tip="tool")


# --------------------------------------------------------------------------- reaching


@pytest.mark.parametrize("method", METHODS)
def test_every_method_reaches_reachable_position_goals_on_seed8dof(seed8, method):
    tol = TOL[method]
    for k, p in enumerate(_reachable(seed8, 5, seed=1)):
        res = ik.solve(seed8, [ik.Position("effector", p)], q0=seed8.neutral(), method=method,
                       position_tolerance=tol, timeout=2.0, seed=k)
        assert res.success, (k, res)
        assert res.method == method
        assert np.linalg.norm(_tip(seed8, res.q) - p) <= tol * 1.0001
        assert seed8.within_limits(res.q)


@pytest.mark.parametrize("method", METHODS)
def test_every_method_handles_a_prismatic_joint(method):
    robot = slide_arm()
    for k, p in enumerate(_reachable(robot, 3, seed=2, frame="tool")):
        res = ik.solve(robot, [ik.Position("tool", p)], method=method, position_tolerance=TOL[method],
                       timeout=2.0, seed=k)
        assert res.success, (k, res)
        assert robot.within_limits(res.q)


@pytest.mark.parametrize("method", METHODS)
def test_two_position_goals_stack_their_rows(seed8, method):
    q_true = np.array([0.3, -0.4, 0.2, 0.5, 0.3, -0.2, 0.4, 0.6])
    goals = [ik.Position("link4", _tip(seed8, q_true, "link4")), ik.Position("effector", _tip(seed8, q_true))]
    res = ik.solve(seed8, goals, method=method, position_tolerance=TOL[method], timeout=2.0)
    assert res.success, res
    for g in goals:
        assert np.linalg.norm(_tip(seed8, res.q, g.frame) - g.p) <= TOL[method] * 1.0001


@pytest.mark.parametrize("method", METHODS)
def test_pose_goal_on_a_ball_joint_tentacle(method):
    robot = ik.load_robot("tentacle", n=5, joint="ball")
    T = robot.fk(robot.sample(rng=np.random.default_rng(4)) * 0.5, "tip")
    res = ik.solve(robot, [ik.Pose("tip", T)], method=method, position_tolerance=TOL[method],
                   rotation_tolerance=TOL[method], timeout=2.0)
    assert res.success, res
    assert np.all(np.isfinite(res.q))


def test_gauss_seidel_solves_a_ball_joint_tentacle():
    robot = ik.load_robot("tentacle", n=8, joint="ball")  # reach 0.8 m
    for p in ([0.3, 0.2, 0.5], [-0.4, 0.1, 0.3], [0.0, 0.5, -0.2]):
        res = ik.solve(robot, [ik.Position("tip", p)], method="gauss-seidel", timeout=2.0)
        assert res.success, (p, res)
        assert np.linalg.norm(_tip(robot, res.q, "tip") - p) <= 1e-6


@pytest.mark.parametrize("method", ["pinv", "dls"])
def test_posture_goal_is_a_nullspace_task_for_pinv_and_dls(seed8, method):
    p = _reachable(seed8, 1, seed=6)[0]
    q_rest = np.full(seed8.dof, 0.3)
    plain = ik.solve(seed8, [ik.Position("effector", p)], method=method, timeout=2.0)
    biased = ik.solve(seed8, [ik.Position("effector", p), ik.Posture(q_rest, weight=0.05)], method=method,
                      timeout=2.0)
    assert plain.success and biased.success, (plain, biased)  # the goal is still met to 1e-6
    assert np.linalg.norm(biased.q - q_rest) < np.linalg.norm(plain.q - q_rest)


@pytest.mark.parametrize("method", ["transpose", "gauss-seidel"])
def test_posture_goal_is_a_weighted_term_for_transpose_and_gauss_seidel(seed8, method):
    # the posture rows join the least-squares cost until the attempt settles on the compromise, a
    # little off the target; then the posture yields and the goal is met, nearer the rest posture
    # (the attempt ended 'stalled' there: 0-2 of 20 Panda targets met with any Posture weight)
    p = _reachable(seed8, 1, seed=6)[0]
    q_rest = np.full(seed8.dof, 0.3)
    # start bent: from the straight (singular) neutral pose gauss-seidel without restarts may stall
    kw = dict(method=method, position_tolerance=1e-8, timeout=2.0, restarts=False, q0=np.full(seed8.dof, 0.1))
    plain = ik.solve(seed8, [ik.Position("effector", p)], **kw)
    biased = ik.solve(seed8, [ik.Position("effector", p), ik.Posture(q_rest, weight=0.05)], **kw)
    assert plain.success and biased.success, (plain, biased)
    assert np.linalg.norm(biased.q - q_rest) < np.linalg.norm(plain.q - q_rest)


@pytest.mark.parametrize("method", ["transpose", "gauss-seidel"])
def test_a_posture_goal_never_costs_transpose_or_gauss_seidel_their_goals(method):
    robot = ik.load_robot("panda")
    met = 0
    for k in range(10):
        p = robot.fk(robot.sample(rng=k), "panda_hand")[:3, 3]
        goals = [ik.Position("panda_hand", p), ik.Posture(robot.sample(rng=100 + k), weight=0.05)]
        met += ik.solve(robot, goals, method=method, q0=robot.neutral(), seed=k, timeout=0.2).success
    assert met >= 8


# --------------------------------------------------------------------------- limits, NaN, unreachable


@settings(max_examples=12, deadline=None)
@given(method=st.sampled_from(METHODS),
       target=st.tuples(*[st.floats(-4.5, 4.5, allow_nan=False)] * 3),
       seed=st.integers(0, 2**16))
def test_solutions_never_leave_the_joint_limits_nor_turn_nan(method, target, seed):
    robot = limited_seed8()
    res = ik.solve(robot, [ik.Position("effector", target)], method=method, timeout=0.004, seed=seed)
    assert np.all(np.isfinite(res.q))
    assert robot.within_limits(res.q)
    assert np.isfinite(res.position_error)


def limited_seed8():
    """The seed8dof geometry with tight, asymmetric limits [-1, 0.5] rad on every joint."""
    X, Y, Z = (1.0, 0.0, 0.0), (0.0, 1.0, 0.0), (0.0, 0.0, 1.0)
    up, zero = (0.0, 0.0, 1.0), (0.0, 0.0, 0.0)
    axes = [(zero, X), (zero, Y), (zero, Z), (up, X), (zero, Y), (zero, Z), (up, X), (zero, Y)]
    steps = [ik.Step(off, "revolute", ax, -1.0, 0.5, f"joint{k}") for k, (off, ax) in enumerate(axes)]
    return ik.chain_from_steps(steps, name="limited8", tip_offset=up, tip="effector")


@pytest.mark.parametrize("method", METHODS)
def test_unreachable_target_stretches_toward_it(seed8, method):
    res = ik.solve(seed8, [ik.Position("effector", [0.0, 0.0, 5.0])], q0=seed8.neutral(), method=method,
                   timeout=1.0)
    assert not res.success
    assert res.status == ik.Status.UNREACHABLE
    assert np.all(np.isfinite(res.q))
    assert np.allclose(_tip(seed8, res.q), [0.0, 0.0, 3.0], atol=1e-6)


@pytest.mark.parametrize("method", METHODS)
def test_unreachable_off_axis_target_comes_back_nearly_stretched(seed8, method):
    target = np.array([4.0, 0.0, 1.0])
    best = np.linalg.norm(target) - 3.0  # the fully stretched arm's distance
    res = ik.solve(seed8, [ik.Position("effector", target)], method=method, timeout=1.0)
    assert np.all(np.isfinite(res.q))
    # pinv (no damping) and dls (damping only near singularities) oscillate about the stretched
    # pose by design; the descent methods settle on it
    slack = 0.05 if method in ("pinv", "dls") else 1e-3
    assert best - 1e-9 <= np.linalg.norm(_tip(seed8, res.q) - target) <= best + slack


def test_transpose_stalls_when_the_pull_is_along_a_singular_direction(seed8):
    # straight arm, target straight above: Jᵀe = 0 (Welman 4.1.1)
    res = ik.solve(seed8, [ik.Position("effector", [0.0, 0.0, 2.0])], q0=seed8.neutral(), method="transpose",
                   restarts=False, timeout=1.0)
    assert res.status == ik.Status.STALLED
    assert res.iterations <= 1


# --------------------------------------------------------------------------- pinv / dls specifics


def test_pinv_nullspace_term_does_not_move_the_effector(seed8):
    rng = np.random.default_rng(3)
    for _ in range(10):
        q = seed8.sample(rng=rng)
        J = seed8.jacobian(q, "effector")[:3]
        e = rng.normal(size=3) * 0.1
        eta = rng.normal(size=seed8.dof)
        w = rng.uniform(0.5, 3.0, seed8.dof)
        for weights in (None, w):
            dq_task, dq_null = pinv_step(J, e, eta, joint_weights=weights)
            assert np.linalg.norm(J @ dq_null) <= 1e-8 * np.linalg.norm(eta)
            assert np.allclose(J @ dq_task, e, atol=1e-8)
            assert np.linalg.norm(dq_null) > 0.1  # it does move the joints


def test_pinv_weights_make_a_stiff_joint_move_less(seed8):
    q = seed8.sample(rng=np.random.default_rng(8))
    J = seed8.jacobian(q, "effector")[:3]
    e = np.array([0.05, -0.02, 0.03])
    w = np.ones(seed8.dof)
    w[1] = 100.0
    plain, _ = pinv_step(J, e)
    stiff, _ = pinv_step(J, e, joint_weights=w)
    assert abs(stiff[1]) < 0.2 * abs(plain[1])
    assert np.allclose(J @ stiff, e, atol=1e-8)


def test_sym_eigvals_matches_numpy():
    rng = np.random.default_rng(0)
    for n in (1, 3, 6, 8):
        A = rng.normal(size=(n, n))
        A = A @ A.T
        ev = np.empty(n)
        sym_eigvals(A.copy(), n, ev)
        assert np.allclose(np.sort(ev), np.linalg.eigvalsh(A), atol=1e-10)


REDUNDANT_CASES = [  # (q0 near the limits, target) on seed8dof
    (np.array([2.9, -2.9, 2.8, -2.9, 2.9, -2.8, 2.9, -2.9]), np.array([1.0, 1.2, 1.5])),
    (np.array([-2.9, 2.8, -2.9, 2.9, -2.8, 2.9, -2.9, 2.8]), np.array([-1.4, 0.5, 1.8])),
]


@pytest.mark.parametrize("method", ["pinv", "dls"])
def test_joint_limits_objective_keeps_joints_further_from_their_limits(seed8, method):
    for q0, p in REDUNDANT_CASES:
        goal = [ik.Position("effector", p)]
        plain = ik.solve(seed8, goal, q0=q0, method=method, timeout=2.0)
        kept = ik.solve(seed8, goal, q0=q0, method=method, timeout=2.0, nullspace="joint_limits")
        assert plain.success and kept.success, (plain, kept)
        assert _margin(seed8, kept.q) > _margin(seed8, plain.q) + 0.03
        assert np.mean(np.abs(kept.q)) < np.mean(np.abs(plain.q))  # mid-range is 0 on seed8dof


@pytest.mark.parametrize("method", ["pinv", "dls"])
def test_every_nullspace_objective_still_reaches_the_goal(seed8, method):
    q0, p = REDUNDANT_CASES[0]
    for ns in (None, "joint_limits", "posture", "manipulability", lambda q: -q):
        res = ik.solve(seed8, [ik.Position("effector", p)], q0=q0, method=method, timeout=2.0, nullspace=ns,
                       nullspace_gain=0.2)
        assert res.success, (ns, res)


def test_manipulability_objective_raises_manipulability(seed8):
    def w(q):
        J = seed8.jacobian(q, "effector")[:3]
        return np.sqrt(np.linalg.det(J @ J.T))

    q0, p = REDUNDANT_CASES[1]
    goal = [ik.Position("effector", p)]
    plain = ik.solve(seed8, goal, q0=q0, method="pinv", timeout=2.0)
    manip = ik.solve(seed8, goal, q0=q0, method="pinv", timeout=2.0, nullspace="manipulability",
                     nullspace_gain=0.3)
    assert plain.success and manip.success
    assert w(manip.q) > w(plain.q)


def test_callable_nullspace_pulls_toward_what_it_asks(seed8):
    q0, p = REDUNDANT_CASES[0]
    goal = [ik.Position("effector", p)]
    target_q = np.zeros(seed8.dof)
    plain = ik.solve(seed8, goal, q0=q0, method="pinv", timeout=2.0)
    pulled = ik.solve(seed8, goal, q0=q0, method="pinv", timeout=2.0, nullspace=lambda q: target_q - q)
    assert pulled.success
    assert np.linalg.norm(pulled.q) < np.linalg.norm(plain.q)


def test_bad_callable_nullspace_is_a_solver_error(seed8):
    goal = [ik.Position("effector", [1.0, 1.0, 1.0])]
    with pytest.raises(ik.SolverError, match="eta"):
        ik.solve(seed8, goal, method="pinv", nullspace=lambda q: np.zeros(3))


# --------------------------------------------------------------------------- Gauss–Seidel specifics


@settings(max_examples=50, deadline=None)
@given(st.tuples(*[st.floats(-10, 10, allow_nan=False)] * 3).filter(lambda r: np.linalg.norm(r) > 1e-6))
def test_springhead_ball_block_is_orthogonal_to_r_and_spans_its_plane(r):
    r = np.array(r)
    B = springhead_ball_position_block(r)
    assert B.shape == (3, 2)
    n = np.linalg.norm(r)
    assert np.allclose(r @ B, 0.0, atol=1e-9 * n * n)
    # two orthogonal columns of length |r|: a basis of the plane ⟂ r
    assert np.allclose(B.T @ B, n * n * np.eye(2), atol=1e-9 * n * n)


def test_springhead_ball_block_special_cases():
    B = springhead_ball_position_block([2.0, 0.0, 0.0])  # e0 = e_x: e1'' switches to e_y
    assert np.allclose(np.array([1.0, 0, 0]) @ B, 0.0)
    assert np.linalg.matrix_rank(B) == 2
    assert np.allclose(springhead_ball_position_block([0.0, 0.0, 0.0]), 0.0)
    with pytest.raises(ik.SolverError):
        springhead_ball_position_block([1.0, np.nan, 0.0])


def test_gauss_seidel_sets_follow_the_tree(seed8):
    # a goal on link4 (moved by joints 0-2) and one on the effector (moved by all 8)
    problem = compile_problem(seed8, [ik.Position("link4", [0, 0, 1.0]), ik.Position("effector", [1.0, 0, 1.0])],
                              1e-6, 1e-6)
    var_kind, var_col, _, _, _, cp_ptr, cp_idx, nbr_ptr, nbr_idx = build_tables(problem)
    link4 = seed8.frame_index("link4")
    ancestors_of_link4 = {int(seed8.qidx[i]) for i in seed8.ancestors(link4) if seed8.qidx[i] >= 0}
    for i, c in enumerate(var_col):
        cp = set(cp_idx[cp_ptr[i]:cp_ptr[i + 1]].tolist())
        nd = set(var_col[nbr_idx[nbr_ptr[i]:nbr_ptr[i + 1]]].tolist())
        if c in ancestors_of_link4:
            assert cp == {0, 1} and nd == set(range(8)) - {c}
        else:
            assert cp == {1} and nd == set(range(8)) - {c}
    assert np.all(var_kind == 0)


def test_gauss_seidel_ball_unknowns_are_two_for_one_position_goal_three_otherwise():
    robot = ik.load_robot("tentacle", n=3, joint="ball")
    pos = compile_problem(robot, [ik.Position("tip", [0.1, 0, 0.2])], 1e-6, 1e-6)
    pose = compile_problem(robot, [ik.Pose("tip", np.eye(4))], 1e-6, 1e-6)
    assert len(build_tables(pos)[0]) == 3 * 2
    assert len(build_tables(pose)[0]) == 3 * 3


# --------------------------------------------------------------------------- options, determinism


@pytest.mark.parametrize("method", METHODS)
def test_same_seed_gives_the_same_answer(seed8, method):
    p = _reachable(seed8, 1, seed=9)[0]
    kw = dict(method=method, position_tolerance=TOL[method], timeout=None, max_iterations=3000, seed=5)
    a = ik.solve(seed8, [ik.Position("effector", p)], **kw)
    b = ik.solve(seed8, [ik.Position("effector", p)], **kw)
    assert np.array_equal(a.q, b.q)
    assert a.iterations == b.iterations and a.restarts == b.restarts


@pytest.mark.parametrize("method", METHODS)
def test_unknown_option_is_a_solver_error(seed8, method):
    with pytest.raises(ik.SolverError, match="no option"):
        ik.solve(seed8, [ik.Position("effector", [1.0, 1.0, 1.0])], method=method, bogus=1)


@pytest.mark.parametrize("method, options", [
    ("transpose", dict(max_step=0.0)),
    ("pinv", dict(nullspace="elbow_up")),
    ("pinv", dict(nullspace_gain=-1.0)),
    ("pinv", dict(regularization=float("nan"))),
    ("dls", dict(damping=-0.1)),
    ("dls", dict(singular_threshold=0.0)),
    ("gauss-seidel", dict(sweeps=0)),
    ("gauss-seidel", dict(gain=3.0)),
])
def test_bad_option_values_are_solver_errors(seed8, method, options):
    with pytest.raises(ik.SolverError):
        ik.solve(seed8, [ik.Position("effector", [1.0, 1.0, 1.0])], method=method, **options)


def test_methods_are_registered():
    assert set(METHODS) <= set(ik.methods())


def test_gauss_seidel_refuses_joint_weights_it_would_not_use(seed8):
    # Gauss–Seidel takes the same step whatever the scale of each unknown: the weights changed nothing
    p = _reachable(seed8, 1, seed=9)[0]
    with pytest.raises(ik.SolverError, match="joint_weights: method 'gauss-seidel' does not use them"):
        ik.solve(seed8, [ik.Position("effector", p)], method="gauss-seidel", joint_weights=np.arange(1.0, 9.0))
    # mode="distance" picks among restarts by the weighted distance to q0: there they count
    res = ik.solve(seed8, [ik.Position("effector", p)], method="gauss-seidel", joint_weights=np.arange(1.0, 9.0),
                   mode="distance", timeout=0.02)
    assert res.success


@pytest.mark.parametrize("options", [dict(p_orig=5.0), dict(p_ik=3.0), dict(p_orig="x"), dict(p_ik=-1.0)])
def test_gauss_seidel_springs_without_theta_orig_are_solver_errors(seed8, options):
    # they were accepted, bad values included, and did nothing
    name = next(iter(options))
    with pytest.raises(ik.SolverError, match=name):
        ik.solve(seed8, [ik.Position("effector", [1.0, 1.0, 1.0])], method="gauss-seidel", **options)


def test_rest_with_a_misspelt_key_is_a_goal_error(seed8):
    rest = dict(theta_orig=seed8.neutral(), p_orig=1.0, p_ik=1.0, mdoe="blend")
    with pytest.raises(ik.GoalError, match="unknown key.*'mdoe'"):
        ik.solve(seed8, [ik.Position("effector", [1.0, 1.0, 1.0])], method="gauss-seidel", rest=rest)


@pytest.mark.parametrize("kw, words", [(dict(mode=np.array(["speed", "distance"])), "mode"),
                                       (dict(method=np.array(["lm", "dls"])), "method"),
                                       (dict(nullspace=np.array([1.0, 2.0])), "null-space objective")])
def test_array_valued_names_are_invkin_errors_not_numpys_ambiguous_truth(seed8, kw, words):
    with pytest.raises(ik.InvkinError, match=words):
        ik.solve(seed8, [ik.Position("effector", [1.0, 1.0, 1.0])], **kw)


@pytest.mark.parametrize("kw", [dict(method="lm", nullspace_iterations="x"), dict(method="ccd", nullspace_iterations=-5),
                                dict(method="lm", nullspace="joint_limits", nullspace_iterations=2.5)])
def test_bad_nullspace_iterations_are_goal_errors_with_or_without_a_refinement(seed8, kw):
    # without nullspace=... they went unchecked ('x', -5); with it the message said "iterations"
    with pytest.raises(ik.GoalError, match="nullspace_iterations: expected an integer"):
        ik.solve(seed8, [ik.Position("effector", _reachable(seed8, 1, seed=9)[0])], **kw)


def test_nullspace_gain_scales_a_posture_goal_for_pinv_and_dls(seed8):
    p = _reachable(seed8, 1, seed=9)[0]
    goals = [ik.Position("effector", p), ik.Posture(seed8.neutral() + 0.3, weight=1.0)]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # (the gain scales the posture here: no "does nothing" warning)
        a = ik.solve(seed8, goals, method="pinv", nullspace_gain=0.02, timeout=None, max_iterations=300)
        b = ik.solve(seed8, goals, method="pinv", nullspace_gain=0.3, timeout=None, max_iterations=300)
    assert a.success and b.success and not np.allclose(a.q, b.q)


@pytest.mark.parametrize("method", ["pinv", "dls", "gauss-seidel"])
def test_a_solve_cut_off_while_running_returns_the_best_point_of_its_attempt(method):
    # these methods take every step and keep the attempt's best point; cut off by max_iterations (or the
    # clock) the driver returned the last step's q, worse than the start on Panda (pinv: 1.10 m from 0.84 m)
    robot = ik.load_robot("panda")
    rng = np.random.default_rng(0)
    for _ in range(40):
        q0 = robot.sample(rng=rng)
        p = robot.fk(robot.sample(rng=rng), "panda_hand")[:3, 3]
        start = np.linalg.norm(robot.fk(q0, "panda_hand")[:3, 3] - p)
        for n in (3, 8, 23):
            res = ik.solve(robot, [ik.Position("panda_hand", p)], q0=q0, method=method, restarts=False, timeout=None,
                           max_iterations=n)
            assert res.position_error <= start * (1 + 1e-12), (n, start, res)


def test_a_costly_iteration_does_not_run_a_hundred_times_past_the_timeout():
    # the driver ran 100 iterations before its first look at the clock: dls with the manipulability
    # objective on G1 (~10 ms per iteration) took 750-900 ms under timeout=0.01
    robot = ik.load_robot("g1")
    q = robot.sample(rng=1)
    goals = [ik.Pose(f, robot.fk(q, f)) for f in ("left_wrist_yaw_link", "right_wrist_yaw_link",
                                                   "left_ankle_roll_link", "right_ankle_roll_link")]
    kw = dict(method="dls", nullspace="manipulability", position_tolerance=1e-12, rotation_tolerance=1e-12)
    ik.solve(robot, goals, timeout=None, max_iterations=1, **kw)  # (compiled, or loaded, outside the timing)
    res = ik.solve(robot, goals, timeout=0.01, **kw)
    assert res.status == ik.Status.TIME_LIMIT and res.time < 0.15, res


@pytest.mark.parametrize("kw, words", [
    (dict(e=np.ones(4)), "e must be"), (dict(e=np.ones(3), eta=np.ones(4)), "eta must be"),
    (dict(e=np.ones(3), joint_weights=np.ones(4)), "joint_weights must be"),
    (dict(e=np.ones(3), joint_weights=-np.ones(5)), "joint_weights must be > 0"),
    (dict(e=np.ones(3), damping=-1.0), "damping"), (dict(e=[np.nan, 1.0, 1.0]), "NaN"),
    (dict(e="abc"), "e must be"),
])
def test_pinv_step_bad_inputs_are_solver_errors(kw, words):
    # they were numpy's reshape ValueError, a ZeroDivisionError, or NaN steps (weights <= 0, damping NaN)
    with pytest.raises(ik.SolverError, match=words):
        pinv_step(np.ones((3, 5)), **kw)


def test_rest_and_the_spring_options_together_are_a_solver_error(seed8):
    # rest's springs replaced the options theta_orig / p_orig / p_ik without a word
    rest = dict(theta_orig=seed8.neutral(), p_orig=1.0, p_ik=1.0)
    with pytest.raises(ik.SolverError, match="rest and the option.*p_orig"):
        ik.solve(seed8, [ik.Position("effector", [1.0, 1.0, 1.0])], method="gauss-seidel", rest=rest, p_orig=5.0)


def test_the_first_calls_setup_does_not_shrink_the_chunks_of_a_timed_solve(monkeypatch):
    # under a timeout the driver's first kernel call runs one iteration and also builds the method's tables
    # (gauss-seidel's Cp/Nd sets: 0.1-0.2 ms on Panda, ~100 of its iterations); averaged into the time per
    # iteration, that setup halved from call to call and the chunks only doubled (1, 7, 14, 28, 52, 97, ...):
    # a 200-iteration solve took 6 kernel calls instead of 3, +15-20 % median time on the suite's targets.
    # A fake clock makes the count independent of the machine: 0.2 ms of setup, 10 us a call, 1 us an iteration.
    import dataclasses
    import importlib
    import types

    from invkin import solvers

    solve_mod = importlib.import_module("invkin.solve")  # (invkin.solve, the attribute, is the function)
    robot = ik.load_robot("panda")
    goals = [ik.Pose("panda_hand", robot.fk(robot.sample(rng=np.random.default_rng(3)), "panda_hand"))]
    kw = dict(q0=robot.neutral(), method="gauss-seidel", restarts=False, seed=0)
    free = ik.solve(robot, goals, timeout=None, max_iterations=3000, **kw)  # (compiled outside the fake clock)
    assert free.success and 100 < free.iterations < 1000, free
    now = [0.0]
    chunks = []
    m = solvers.get_method("gauss-seidel")

    def iterate(problem, q, max_iter, state, opts):
        it0 = state[1]
        code = m.iterate(problem, q, max_iter, state, opts)
        now[0] += (2e-4 if not chunks else 0.0) + 1e-5 + 1e-6 * (state[1] - it0)
        chunks.append(max_iter)
        return code

    monkeypatch.setitem(solvers._REGISTRY, "gauss-seidel", dataclasses.replace(m, iterate=iterate))
    monkeypatch.setattr(solve_mod, "time", types.SimpleNamespace(perf_counter=lambda: now[0]))
    res = ik.solve(robot, goals, timeout=0.005, **kw)
    assert res.success and res.iterations == free.iterations and np.array_equal(res.q, free.q), (res, free)
    assert chunks[0] == 1 and len(chunks) <= 3, chunks


def test_gauss_seidel_builds_its_tables_once_per_robot_and_goal_frames(monkeypatch):
    # the Cp/Nd tables depend only on the robot and the goals' frames and kinds; built in Python on every
    # solve they took 30-35 us (Panda), with the default springs' checks (20 us) half of the driver's first
    # kernel call, whose time per iteration sizes the next chunks
    from invkin.solvers import gauss_seidel

    built = []
    real = gauss_seidel.build_tables
    monkeypatch.setattr(gauss_seidel, "build_tables", lambda problem: built.append(1) or real(problem))
    robot = ik.load_robot("panda")
    targets = robot.fk(robot.sample(3, rng=np.random.default_rng(4)), "panda_hand")
    kw = dict(method="gauss-seidel", timeout=None, max_iterations=300, seed=0)
    first = [ik.solve(robot, [ik.Pose("panda_hand", T)], **kw) for T in targets]
    assert len(built) == 1
    ik.solve(robot, [ik.Position("panda_hand", targets[0][:3, 3])], **kw)  # other kinds: other tables
    assert len(built) == 2
    tables = robot.cache["gauss_seidel_tables"]
    assert len(tables) == 2 and not any(a.flags.writeable for t in tables.values() for a in t)
    again = [ik.solve(robot, [ik.Pose("panda_hand", T)], **kw) for T in targets]
    assert len(built) == 2
    assert all(np.array_equal(a.q, b.q) and a.iterations == b.iterations for a, b in zip(first, again))
