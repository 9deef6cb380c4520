"""lm's status when every restart ends without a better answer: unreachable, early.

A target that no configuration reaches and that the reach radius does not rule out (a planar arm
asked for a point nearer its base than |l1 - l2|, or off its plane; a 6-dof arm asked for a point
just inside the radius bound, beyond its true reach) ran ~4,000-40,000 identical restarts to the
50 ms timeout and said ``time_limit`` ("give me more time"). The chain kernel now counts, per
attempt, the attempts in a row that found nothing better than the best answer by more than
``lm.AGREE``, and ends ``unreachable`` after ``lm.CHAIN_AGREEMENTS`` of them, whatever the limits.
"""
import numpy as np
import pytest

import invkin as ik
from invkin import Status
from invkin.solvers.lm import CHAIN_AGREEMENTS

# the verdict came from the rule, not from a limit: far fewer restarts than a 50 ms solve runs
# (~36,000 on planar2, ~4,000 on the panda before the rule)
EARLY = 3 * CHAIN_AGREEMENTS


@pytest.fixture(scope="module")
def planar2():
    return ik.load_robot("planar2")  # links 1.0 m and 0.8 m in the xy plane, joints within ±pi


@pytest.fixture(scope="module")
def panda():
    return ik.load_robot("panda")


def test_planar_arm_asked_for_a_point_inside_its_inner_radius_is_unreachable_early(planar2):
    target = np.array([0.05, 0.0, 0.0])  # no configuration brings the hand within 0.2 m of the base
    res = ik.solve(planar2, ik.Position("hand", target), seed=3)
    assert res.status is Status.UNREACHABLE and not res.success and res.goals_met == (False,)
    assert res.restarts < EARLY, res
    hand = planar2.fk(res.q, "hand")[:3, 3]
    assert np.linalg.norm(hand) == pytest.approx(0.2, abs=1e-9)  # folded: the closest the hand comes
    assert res.position_error == pytest.approx(np.linalg.norm(hand - target), abs=1e-12)
    assert res.position_error <= 0.15 * 1.01  # the closest answer, 0.15 m, within lm.AGREE
    assert planar2.within_limits(res.q)


def test_planar_arm_asked_for_a_point_off_its_plane_returns_the_point_below_it(planar2):
    target = np.array([0.3, 0.2, 0.25])
    res = ik.solve(planar2, ik.Position("hand", target), seed=3)
    assert res.status is Status.UNREACHABLE and not res.success
    assert res.restarts < EARLY, res
    assert np.allclose(planar2.fk(res.q, "hand")[:3, 3], [0.3, 0.2, 0.0], atol=1e-6)
    assert res.position_error == pytest.approx(0.25, abs=1e-6)


def test_panda_asked_for_a_point_beyond_its_reach_inside_the_radius_bound_is_unreachable_early(panda):
    # straight above the shoulder (0, 0, 0.333) at 0.956 m: inside the reach bound (0.986 m), beyond
    # what the stretched arm reaches (0.858 m), so no early reach verdict: the restarts decide
    target = np.array([0.0, 0.0, 1.2897])
    res = ik.solve(panda, ik.Position("panda_hand", target), seed=0)
    assert res.status is Status.UNREACHABLE and not res.success
    assert res.restarts < EARLY, res
    hand = panda.fk(res.q, "panda_hand")[:3, 3]
    assert np.linalg.norm(hand[:2]) < 0.01 and hand[2] > 1.18  # stretched straight up toward it
    assert res.position_error == pytest.approx(np.linalg.norm(hand - target), abs=1e-12)
    T = np.eye(4)
    T[:3, 3] = target
    res = ik.solve(panda, ik.Pose("panda_hand", T), seed=0)
    assert res.status is Status.UNREACHABLE and res.restarts < EARLY, res


LIMITS = [{"timeout": None}, {"timeout": None, "max_iterations": 10**6}, {"timeout": 10.0},
          {"max_iterations": 5000}, {"timeout": 10.0, "max_iterations": 10**6}]


@pytest.mark.parametrize("kw", LIMITS)
def test_the_verdict_is_the_same_under_any_time_or_iteration_limit_that_leaves_room_for_it(planar2, panda, kw):
    # counted per attempt in the kernel: the fast path's clock-sized chunks, the general driver's and
    # one long call end at the same attempt with the same answer (a count kept by the driver between
    # chunks could not say this)
    for robot, goal in ((planar2, ik.Position("hand", [0.05, 0.0, 0.0])),
                        (panda, ik.Position("panda_hand", [0.0, 0.0, 1.2897]))):
        ref = ik.solve(robot, goal, seed=3)
        res = ik.solve(robot, goal, seed=3, **kw)
        assert res.status is Status.UNREACHABLE, (kw, res)
        assert (res.restarts, res.iterations) == (ref.restarts, ref.iterations)
        assert np.array_equal(res.q, ref.q)


def test_the_general_drivers_chain_route_gives_the_verdict_too(planar2):
    # joint weights take _solve_lm's chain route (not the fast path)
    res = ik.solve(planar2, ik.Position("hand", [0.05, 0.0, 0.0]), seed=3, joint_weights=[1.0, 2.0])
    assert res.status is Status.UNREACHABLE and res.restarts < EARLY, res


def test_a_limit_before_enough_attempts_keeps_its_own_status(planar2):
    goal = ik.Position("hand", [0.05, 0.0, 0.0])
    res = ik.solve(planar2, goal, seed=3, max_iterations=100)  # ~12 attempts: no verdict yet
    assert res.status is Status.ITERATION_LIMIT and res.restarts < CHAIN_AGREEMENTS
    res = ik.solve(planar2, goal, seed=3, restarts=False)
    assert res.status is Status.STALLED and res.restarts == 0


def test_solve_many_says_unreachable_for_the_same_attempts_as_solve(planar2):
    P = np.array([[0.05, 0.0, 0.0], [1.2, 0.9, 0.0], [0.3, 0.2, 0.25]])
    batch = ik.solve_many(planar2, "hand", P, max_restarts=1000, seed=7)
    assert batch.status == [Status.UNREACHABLE, Status.CONVERGED, Status.UNREACHABLE]
    for b in (0, 2):
        one = ik.solve(planar2, ik.Position("hand", P[b]), seed=7 + b)
        assert batch.restarts[b] == one.restarts < EARLY
        assert np.array_equal(batch.q[b], one.q)


def test_a_reachable_target_after_19_attempts_without_a_better_answer_still_converges(panda):
    # the benchmark's longest such run (../shared/peers/results/targets_panda.npz, target 932, seed =
    # index, q0 mid-range): converges at restart 23 in 309 iterations, as before the rule
    T = np.array([[-0.8487942222625418, -0.285230586723325, 0.44518746686221355, -0.13619706165955453],
                  [-0.5264735368235165, 0.37835751581468946, -0.7613614156568969, -0.19762868108549383],
                  [0.04872353926249645, -0.8806185908916553, -0.47131402917559256, 0.31613902237824365],
                  [0.0, 0.0, 0.0, 1.0]])
    q0 = 0.5 * (panda.lower + panda.upper)
    res = ik.solve(panda, ik.Pose("panda_link8", T), q0=q0, seed=932)
    assert res.status is Status.CONVERGED
    assert (res.restarts, res.iterations) == (23, 309)
