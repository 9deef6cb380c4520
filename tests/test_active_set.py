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


def _reduced_step(J, e, soft, hard, jw, mu, mu_h, hold):
    """The constrained damped step with the held joints' columns removed (what core_step solved
    before held joints joined the hard rows), by NumPy on the KKT system of the free joints."""
    free = np.isnan(hold)
    h = np.where(free, 0.0, hold)
    r = e - J @ h
    Js, As = J[soft][:, free], J[hard][:, free]
    n, mh = int(free.sum()), len(hard)
    K = np.zeros((n + mh, n + mh))
    K[:n, :n] = Js.T @ Js + mu * np.diag(jw[free])
    K[:n, n:] = As.T
    K[n:, :n] = As
    K[n:, n:] = -mu_h * np.eye(mh)
    x = np.linalg.solve(K, np.concatenate([Js.T @ r[soft], r[hard]]))
    dq = h.copy()
    dq[free] = x[:n]
    return dq, x[n:]  # H dq - g + A^T lam = 0 (core_step's convention)


def test_held_joints_as_equality_rows_give_the_step_without_their_columns():
    """core_step holds a joint as a row e_k dq = hold[k] beside the hard rows of the factored step
    (lm_core._held_solve); the step and the hard rows' multipliers equal those of the problem with
    the held columns removed (NumPy's solve of its KKT system), and without held joints and hard
    rows the plain damped least squares."""
    from invkin.solvers.lm_core import core_step

    rng = np.random.default_rng(7)
    for trial in range(40):
        dof = int(rng.integers(4, 12))
        m = int(rng.integers(3, 10))
        J = rng.standard_normal((m, dof))
        J[:, rng.random(dof) < 0.2] = 0.0  # joints no row moves (a humanoid's legs under hand rows)
        e = rng.standard_normal(m)
        nh = int(rng.integers(0, min(3, m - 1) + 1))
        rows = rng.permutation(m)
        hard, soft = np.sort(rows[:nh]), np.sort(rows[nh:])
        J[hard] += rng.standard_normal((nh, dof))  # the hard rows keep full rank on the free joints
        hold = np.full(dof, np.nan)
        held = rng.choice(dof, size=int(rng.integers(0, dof - nh)), replace=False)
        hold[held] = rng.uniform(-0.1, 0.1, held.size)
        jw = rng.uniform(0.5, 2.0, dof)
        mu, mu_h = 10.0 ** rng.uniform(-4, 0), 10.0 ** rng.uniform(-8, -2)
        dq = np.empty(dof)
        scratch = core_step_scratch(m, dof, max(m, 1))
        assert core_step(J, e, soft.astype(np.int64), hard.astype(np.int64), jw, mu, mu_h, np.zeros(dof), hold,
                         *scratch, dq), trial
        want, lam = _reduced_step(J, e, soft, hard, jw, mu, mu_h, hold)
        scale = 1.0 + np.abs(want).max()
        np.testing.assert_allclose(dq, want, rtol=0, atol=1e-9 * scale, err_msg=str(trial))
        np.testing.assert_array_equal(dq[held], hold[held])  # held joints move exactly by hold
        if nh:
            np.testing.assert_allclose(scratch[5][:nh], lam, rtol=1e-6, atol=1e-9 * (1 + np.abs(lam).max()))
