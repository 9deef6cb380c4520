"""Hostile and careless input (issue 19): no hang, no false success, no raw exception.

Each test is one finding of the issue, written so that it failed on the code the issue describes.
Calls that used to hang run under :func:`bounded` (a watchdog thread): a hang fails the test
instead of stalling the suite.
"""
from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

import invkin as ik
from invkin import _checks
from invkin.solve import DEFAULT_MAX_ITERATIONS, MAX_RESTARTS

import support

WATCHDOG = 300.0  # [s] generous: the first call of a method compiles its kernels on a busy machine


def bounded(fn, seconds=WATCHDOG):
    """fn() under the shared watchdog (tests/support.py)."""
    return support.bounded(fn, seconds)


def _fk_errors(robot, goals, q):
    """(position, rotation) error recomputed from FK, independent of the solver's bookkeeping."""
    pe = re_ = 0.0
    for g in goals:
        T = robot.fk(q, g.frame)
        if isinstance(g, (ik.Position, ik.Pose)):
            p = g.p if isinstance(g, ik.Position) else g.T[:3, 3]
            pe = max(pe, float(np.linalg.norm(T[:3, 3] - p)))
        if isinstance(g, ik.Pose):
            R = T[:3, :3].T @ g.T[:3, :3]
            re_ = max(re_, float(np.linalg.norm(ik.spatial.so3_log(R))))
    return pe, re_


@pytest.fixture(scope="module")
def planar():
    return ik.load_robot("planar2")


# ---------------------------------------------------------------------------------------- 1. hangs
def _out_of_plane_pose(robot):
    T = np.eye(4)
    T[:3, :3] = ik.spatial.so3_exp(np.array([1.0, 0.0, 0.0]))  # a planar arm cannot tilt its hand
    T[:3, 3] = [0.5, 0.5, 0.0]
    return ik.Pose("hand", T)


def test_solve_without_timeout_is_bounded_by_max_iterations_when_the_goal_cannot_be_met(planar):
    res = bounded(lambda: ik.solve(planar, _out_of_plane_pose(planar), timeout=None))
    assert not res.success
    assert res.iterations <= DEFAULT_MAX_ITERATIONS
    res = bounded(lambda: ik.solve(planar, _out_of_plane_pose(planar), timeout=None, max_iterations=50))
    assert not res.success and res.iterations <= 50


@pytest.mark.parametrize("method", ["lm", "pinv", "dls", "transpose", "ccd", "fabrik", "gauss-seidel"])
def test_distance_mode_without_timeout_ends_when_every_attempt_starts_converged(planar, method):
    # the base never moves: every restart meets the goal at once and spends no iteration
    goal = ik.Position("base", planar.fk(planar.neutral(), "base")[:3, 3])
    try:
        res = bounded(lambda: ik.solve(planar, goal, method=method, mode="distance", timeout=None,
                                       max_iterations=200))
    except ik.SolverError:
        pytest.skip(f"{method} does not take this goal")
    assert res.success and np.all(np.isfinite(res.q))


def test_gauss_seidel_sweeps_are_bounded(planar):
    goal = ik.Position("hand", [0.5, 0.5, 0.0])
    with pytest.raises(ik.SolverError, match="sweeps"):
        ik.solve(planar, goal, method="gauss-seidel", sweeps=10**12)


def test_solve_many_max_restarts_is_bounded(planar):
    with pytest.raises(ik.GoalError, match="max_restarts"):
        ik.solve_many(planar, "hand", np.array([[0.5, 0.5, 0.0]]), max_restarts=10**12)
    res = bounded(lambda: ik.solve_many(planar, "hand", np.array([[5.0, 5.0, 0.0]]), max_restarts=MAX_RESTARTS))
    assert not res.success[0]


# --------------------------------------------------------------------- 3. wrong answers as right
def test_weight_zero_is_refused_for_every_task_goal():
    T = np.eye(4)
    for make in (lambda: ik.Position("hand", [1, 0, 0], weight=0), lambda: ik.Pose("hand", T, weight=0.0),
                 lambda: ik.Pose("hand", T, rotation_weight=0), lambda: ik.Orientation("hand", np.eye(3), weight=0),
                 lambda: ik.Aim("hand", [1, 0, 0], [1, 1, 1], weight=0)):
        with pytest.raises(ik.GoalError, match="> 0"):
            make()
    assert ik.Posture(np.zeros(2), weight=0).weight == 0.0  # a posture never decides success


def test_huge_axis_components_are_normalised_without_overflow():
    aim = ik.Aim("hand", [1e300, 0.0, 0.0], [1, 1, 1])
    np.testing.assert_allclose(aim.axis, [1.0, 0.0, 0.0])
    b = ik.RobotBuilder("big_axis")
    b.add_frame("base")
    b.add_joint("j", parent="base", child="tip", type="revolute", axis=(1e200, 1e200, 0.0))
    robot = b.build()
    np.testing.assert_allclose(robot.axis[robot.frame_index("tip")], [2**-0.5, 2**-0.5, 0.0])
    with pytest.raises(ik.GoalError, match="non-zero"):
        ik.Aim("hand", [0.0, 0.0, 0.0], [1, 1, 1])


def _huge_limit_robot():
    b = ik.RobotBuilder("huge_limits")
    b.add_frame("base")
    b.add_joint("j1", parent="base", child="l1", type="revolute", axis=(0, 0, 1), lower=-1e308, upper=1e308)
    T = np.eye(4)
    T[0, 3] = 1.0
    b.add_joint("j2", parent="l1", child="tip", type="revolute", axis=(0, 0, 1), origin=T, lower=-1e308, upper=1e308)
    return b


@pytest.mark.parametrize("method", ["lm", "pinv", "dls", "transpose", "ccd", "fabrik", "gauss-seidel"])
def test_limits_beyond_the_bound_read_as_unlimited_and_every_method_stays_finite(method):
    with pytest.warns(ik.InvkinWarning, match="unlimited"):
        robot = _huge_limit_robot().build()
    assert np.all(np.isinf(robot.lower)) and np.all(np.isinf(robot.upper))
    assert np.all(np.isfinite(robot.neutral()))
    goal = ik.Position("tip", [0.3, 0.6, 0.0])
    res = bounded(lambda: ik.solve(robot, goal, method=method, timeout=None))
    assert np.all(np.isfinite(res.q))
    if res.success:
        assert _fk_errors(robot, [goal], res.q)[0] <= 1e-6


def test_a_limit_range_entirely_beyond_the_bound_is_refused():
    b = ik.RobotBuilder("far")
    b.add_frame("base")
    b.add_joint("j", parent="base", child="tip", type="prismatic", lower=2e9, upper=3e9)
    with pytest.raises(ik.ModelError, match="beyond the bound"):
        b.build()


def test_tracker_refuses_an_overflowing_target_and_recovers():
    robot = ik.load_robot("tentacle", n=4, joint="ball")
    tr = ik.Tracker(robot, "tip", method="dls")
    target = robot.fk(0.3 * robot.sample(rng=1), "tip")[:3, 3]  # reachable, near the start
    with pytest.raises(ik.GoalError, match="finite values within"):
        tr.update(np.array([1e154, 0.0, 0.0]))
    assert np.all(np.isfinite(tr.q))
    for _ in range(50):
        step = tr.update(target)
        assert np.all(np.isfinite(step.q))
        if step.status == ik.Status.CONVERGED:
            assert _fk_errors(robot, [ik.Position("tip", target)], step.q)[0] <= 1e-5
            break
    assert step.status == ik.Status.CONVERGED


def test_complex_targets_are_refused_not_truncated():
    robot = ik.load_robot("planar2")
    z = np.array([0.5 + 1j, 0.5, 0.0])
    tr = ik.Tracker(robot, "hand")
    with pytest.raises(ik.GoalError, match="complex"):
        tr.update(z)
    with pytest.raises(ik.GoalError, match="complex"):
        ik.Position("hand", z)
    T = np.eye(4, dtype=complex)
    with pytest.raises(ik.GoalError):
        ik.Pose("hand", T)
    with pytest.raises(ik.GoalError):
        ik.solve_many(robot, "hand", z.reshape(1, 3))


def test_solve_many_refuses_targets_beyond_the_length_bound(planar):
    with pytest.raises(ik.GoalError, match="within"):
        ik.solve_many(planar, "hand", np.array([[1e300, 0.0, 0.0]]))
    with pytest.raises(ik.GoalError, match="within"):
        ik.Position("hand", [1e300, 0.0, 0.0])


@pytest.mark.parametrize("value", [1e12, 1e20, 1e300, -1e100])
def test_fk_and_jacobian_refuse_joint_values_beyond_the_length_bound(value):
    """FK of a q entry of 1e20 rad was not a rotation and of 1e100 NaN, returned without a word
    (`invkin fk panda --q 1e300 0 0 0 0 0 0` printed NaN and exited 0)."""
    robot = ik.load_robot("panda")
    q = robot.neutral()
    q[6] = value
    for call in (lambda x: robot.fk(x, "panda_hand"), lambda x: robot.jacobian(x, "panda_hand"),
                 lambda x: robot.fk(list(x), "panda_hand"), lambda x: robot.fk(x[None], "panda_hand"),
                 lambda x: robot.jacobian(np.stack([robot.neutral(), x]), "panda_hand")):
        with pytest.raises(ik.ConfigurationError, match=r"q: expected values within .*index \((\d, )?6,?\)"):
            call(q)
    q[6] = 1e9  # the bound itself is a value
    assert np.all(np.isfinite(robot.fk(q, "panda_hand")))


def test_solve_and_solve_many_refuse_a_floating_base_q0_beyond_the_length_bound():
    """A G1 q0 with its base at x = 1e300 ran the whole timeout and returned time_limit with an
    infinite position error (solve), or failed every target (solve_many), instead of naming q0."""
    g1 = ik.load_robot("g1")
    frame = g1.frame_names[-1]
    T = g1.fk(g1.neutral(), frame)
    q0 = g1.neutral()
    q0[0] = 1e300
    with pytest.raises(ik.ConfigurationError, match="q0: expected values within"):
        ik.solve(g1, ik.Pose(frame, T), q0=q0)
    with pytest.raises(ik.ConfigurationError, match="q0: expected values within"):
        ik.solve(g1, [ik.Pose(frame, T)], q0=q0)
    with pytest.raises(ik.ConfigurationError, match="q0: expected values within"):
        ik.solve_many(g1, frame, T[None], q0=q0)


def test_two_bone_3d_refuses_lengths_near_the_float_maximum():
    with pytest.raises(ik.GoalError, match="within"):
        ik.two_bone_3d([0, 0, 0], 1e308, 1e308, [1, 0, 0], [0, 1, 0])
    e, h = ik.two_bone_3d([0, 0, 0], 1e300, 1e300, [1e300, 0, 0], [0, 1, 0])
    assert np.all(np.isfinite(e)) and np.all(np.isfinite(h))


# ------------------------------------------------------------------------------ 4. raw exceptions
@pytest.mark.parametrize("bad", [math.inf, "abc", -1, 2**64, 1.7, 2.0, True, [1]])
def test_seeds_must_be_integers_in_range(planar, bad):
    goal = ik.Position("hand", [0.5, 0.5, 0.0])
    with pytest.raises(ik.GoalError, match="seed"):
        ik.solve(planar, goal, seed=bad)
    with pytest.raises(ik.GoalError, match="seed"):
        ik.solve(planar, goal, seed=bad, method="dls")
    with pytest.raises(ik.GoalError, match="seed"):
        ik.solve_many(planar, "hand", np.array([[0.5, 0.5, 0.0]]), seed=bad)


def test_valid_seeds_are_accepted(planar):
    goal = ik.Position("hand", [0.5, 0.5, 0.0])
    for s in (0, 2**63 - 1, np.int64(5), np.random.default_rng(1), None):
        assert ik.solve(planar, goal, seed=s).success


def test_unknown_keyword_arguments_raise(tmp_path):
    with pytest.raises(ik.ModelError, match="unknown keyword"):
        ik.load_robot("planar2", nope=True)
    with pytest.raises(ik.ModelError, match="unknown keyword"):
        ik.load_robot("panda", some_flag=True)
    path = tmp_path / "r.urdf"
    path.write_text('<robot name="r"><link name="a"/></robot>')
    with pytest.raises(ik.ModelError, match="unknown keyword"):
        ik.load_robot(str(path), flating_base=True)
    assert ik.load_robot("tentacle", n=3).dof == 3


def test_non_numeric_arguments_are_invkin_errors(planar):
    for bad in ("x", None, object(), [1, "a", 2]):
        with pytest.raises(ik.InvkinError):
            ik.Position("hand", bad)
        with pytest.raises(ik.InvkinError):
            ik.solve_many(planar, "hand", bad)
        with pytest.raises(ik.InvkinError):
            ik.two_bone_3d(bad, 1.0, 1.0, [1, 0, 0], [0, 1, 0])


def test_a_goal_class_in_a_list_of_goals_is_named_not_a_traceback(planar):
    """A goal class where an instance belongs (ik.Pose instead of ik.Pose(...)), in a list of
    several goals (the whole-body lean route reads each goal's structure id): a GoalError naming
    it, as for any other non-goal; it was a TypeError from Goal.structure()."""
    g = ik.Position(planar.frame_names[-1], [0.5, 0.2, 0.0])
    for goals in ([g, ik.Pose], [ik.Posture, g]):
        with pytest.raises(ik.GoalError, match="expected Position/.*got <class"):
            ik.solve(planar, goals)


def test_checks_seed_helper_contract():
    assert _checks.seed("s", 2**63 - 1) == 2**63 - 1
    with pytest.raises(ik.GoalError):
        _checks.seed("s", 2**63)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(ik.GoalError, match="complex"):
            _checks.real_array("x", np.array([1j]))


@pytest.mark.parametrize("case", ["finite", "nan", "inf", "-inf", "beyond-bound", "at-bound", "empty", "matrix"])
def test_a_small_float_array_is_checked_as_the_general_path_checks_its_list(case):
    """real_array reads a small float64 array (a goal's point) in Python floats: it returns the
    array itself or raises the same GoalError, word for word, as the general path gives for the
    same values passed as a list."""
    values = {"finite": [0.1, -2.5, 3e8], "nan": [0.1, math.nan, 2.0], "inf": [math.inf, 0.0, 0.0],
              "-inf": [0.0, -math.inf, 1.0], "beyond-bound": [0.0, -2e9, 1.0], "at-bound": [1e9, -1e9, 0.0],
              "empty": [], "matrix": [[1.0, 2.0], [3.0, -4.0]]}[case]
    a = np.array(values, dtype=np.float64)
    outcomes = []
    for x in (a, values):
        try:
            got = _checks.real_array("Position('hand').p", x, bound=_checks.MAX_LENGTH, unit=" [m]")
            outcomes.append(("ok", got.tolist()))
        except ik.GoalError as e:
            outcomes.append(("error", str(e).replace(repr(x)[:200], "<x>")))
    assert outcomes[0] == outcomes[1], outcomes
    if outcomes[0][0] == "ok":
        assert _checks.real_array("p", a) is a  # (no copy, as np.asarray of a float64 array)
    assert (outcomes[0][0] == "ok") == (case in ("finite", "at-bound", "empty", "matrix"))
