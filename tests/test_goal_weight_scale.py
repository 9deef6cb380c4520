"""Only the ratios of the soft goals' weights count (goals.relative_weights): a common scale far from 1
solves as weight 1 does; and the Tracker's repr with dt."""
import numpy as np
import pytest

import invkin as ik
from invkin import Status
from test_whole_body import _humanoid, _stance

FEET = ("l_foot", "r_foot")


@pytest.fixture(scope="module")
def hum():
    return _humanoid()


@pytest.mark.parametrize("w", [1e-8, 1e-300, 1e160])
def test_the_scale_of_a_lone_soft_goals_weight_does_not_change_the_solve(w):
    # a reachable Panda Pose ended 'unreachable' 0.59 m off at weight 1e-8 or 1e160 (4 mm off at
    # 1e-6): LM's damping floor and the cost's overflow do not scale with the weights. Only the
    # soft weights' ratios count, so the lone goal solves as at weight 1, on every route
    panda = ik.load_robot("panda")
    T = panda.fk(panda.sample(rng=1), "panda_hand")
    for kw in (dict(), dict(timeout=None, max_iterations=1000)):  # the fast path, the general driver
        one = ik.solve(panda, [ik.Pose("panda_hand", T)], **kw)
        res = ik.solve(panda, [ik.Pose("panda_hand", T, weight=w)], **kw)
        assert one.success and res.status == Status.CONVERGED and np.array_equal(res.q, one.q)


@pytest.mark.parametrize("w", [1e-9, 1e200])
def test_soft_goals_beside_hard_feet_solve_alike_at_any_common_weight_scale(hum, w):
    # G1, hard feet and a soft hand of weight <= 1e-8 (or both hands at 1e-8 each) ended time_limit
    # after hundreds of restarts; >= ~1e154 overflowed the cost. Scaled so the largest soft weight
    # is 1, they are the weight-1 solves, on the whole-body fast path and in the general driver
    q0 = _stance(hum)
    feet = [ik.Pose(f, hum.fk(q0, f), hard=True) for f in FEET]
    p_l = hum.fk(q0, "l_hand")[:3, 3] + [0.1, 0.0, -0.1]
    p_r = hum.fk(q0, "r_hand")[:3, 3] + [0.1, 0.0, -0.1]
    for kw in (dict(), dict(timeout=None, max_iterations=2000)):
        for hands in (lambda v: [ik.Position("l_hand", p_l, weight=v)],
                      lambda v: [ik.Position("l_hand", p_l, weight=v), ik.Position("r_hand", p_r, weight=v)],
                      lambda v: [ik.Position("l_hand", p_l, weight=v), ik.Position("r_hand", p_r, weight=v / 2)]):
            one = ik.solve(hum, feet + hands(1.0), q0=q0, **kw)
            res = ik.solve(hum, feet + hands(w), q0=q0, **kw)
            assert one.success and res.success and all(res.goals_met)
            assert np.array_equal(res.q, one.q)


def test_a_soft_weight_ratio_that_underflows_still_decides_success(hum):
    # 1e-300 beside 1e100: the ratio underflows to 0, and a row of weight 0 no longer counts in the
    # convergence test: floored at the smallest normal number, the goal still decides success
    q0 = _stance(hum)
    far = hum.fk(q0, "r_hand")[:3, 3] + [0.0, 0.0, 0.3]
    goals = [ik.Position("l_hand", hum.fk(q0, "l_hand")[:3, 3], weight=1e100), ik.Position("r_hand", far, weight=1e-300)]
    res = ik.solve(hum, goals, q0=q0, timeout=0.01)
    err = np.linalg.norm(hum.fk(res.q, "r_hand")[:3, 3] - far)
    assert res.goals_met[1] == (err <= 1e-6) and res.success == all(res.goals_met)


def test_a_trackers_repr_says_dt_bounds_it_not_an_infinite_step():
    # with dt=0.01 on G1 it read "max_joint_step=inf" (the floating base has no velocity limit)
    g1 = ik.load_robot("g1")
    q0 = g1.neutral()
    feet = [ik.Pose(f, g1.fk(q0, f), hard=True) for f in ("left_ankle_roll_link", "right_ankle_roll_link")]
    tr = ik.Tracker(g1, feet + [ik.Position("right_rubber_hand", g1.fk(q0, "right_rubber_hand")[:3, 3])],
                    method="lm", q0=q0, dt=0.01)
    assert "dt=0.01" in repr(tr) and "inf" not in repr(tr)
    assert "max_joint_step=0.1," in repr(ik.Tracker(g1, ["right_rubber_hand"], q0=q0))
