"""The general core's active set on the joint box (solvers/lm_core.py, _active_step): cold (every
joint free, then the ones the step pushes out held) and warm (the joints at a bound start held,
released by the sign of their multiplier)."""
import numpy as np

from invkin.solvers.lm import limits_table
from invkin.solvers.lm_core import _active_step, core_step_scratch

DOF = 4


def _step(J, e, soft, hard, q, lo, hi, warm, mu=1e-3, mu_h=1e-12):
    m, dof = J.shape
    mh = max(len(hard), m, 1)
    lims = limits_table(lo, hi, lo, hi - lo, np.zeros(dof), np.ones(dof), np.zeros(0, np.int64))
    hold, dq = np.empty(dof), np.empty(dof)
    ok = _active_step(J, e, np.asarray(soft, np.int64), np.asarray(hard, np.int64), lims, lo, hi, q, mu, mu_h,
                      np.zeros(dof), hold, *core_step_scratch(m, dof, mh), dq, bool(warm))
    assert ok
    return dq


def _box():
    lo, hi = np.full(DOF, -1.0), np.full(DOF, 1.0)
    q = np.array([-1.0, 1.0, -1.0, 0.2])  # joints 0 and 2 at their lower bound, 1 at its upper
    return q, lo, hi


def test_warm_active_set_keeps_the_joints_pushed_outward_and_releases_the_one_pulled_inside():
    rng = np.random.default_rng(3)
    q, lo, hi = _box()
    for _ in range(20):
        J = np.eye(DOF) + 0.05 * rng.standard_normal((DOF, DOF))
        want = np.array([-0.5, 0.5, 0.3, 0.1])  # 0 and 1 outward, 2 inward
        e = J @ want
        cold = _step(J, e, range(DOF), [], q, lo, hi, False)
        warm = _step(J, e, range(DOF), [], q, lo, hi, True)
        assert cold[0] == 0.0 and cold[1] == 0.0 and cold[2] > 0.1
        np.testing.assert_array_equal(warm, cold)  # the same final set: the same solve, the same bits


def test_warm_active_set_releases_a_joint_that_a_hard_row_needs_inside():
    # the soft rows ask joint 2 to stay at its bound, a hard row moves it by +0.2: only the hard
    # row's multiplier in nu says to release it
    q, lo, hi = _box()
    J = np.vstack([np.eye(DOF), [[0.0, 0.0, 1.0, 0.0]]])
    e = np.array([0.0, 0.0, 0.0, 0.1, 0.2])
    cold = _step(J, e, range(DOF), [DOF], q, lo, hi, False)
    warm = _step(J, e, range(DOF), [DOF], q, lo, hi, True)
    assert abs(warm[2] - 0.2) < 1e-9 and abs(cold[2] - 0.2) < 1e-9
    np.testing.assert_allclose(warm, cold, atol=1e-12)


def test_warm_active_set_holds_a_joint_at_its_bound_that_the_free_step_pushes_out():
    q, lo, hi = _box()
    J = np.eye(DOF)
    e = np.array([-0.4, 0.4, -0.4, 0.0])  # every bounded joint pushed outward
    warm = _step(J, e, range(DOF), [], q, lo, hi, True)
    assert np.all(q + warm >= lo) and np.all(q + warm <= hi)
    np.testing.assert_array_equal(warm[:3], 0.0)
