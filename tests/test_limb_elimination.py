"""The general core's step with each hard goal's private limb eliminated (solvers/lm_core.py,
_reduced_step, split by limb_partition): the same step as the Schur-complement step (core_step,
_active_step) and as NumPy's solve of the regularised KKT system, and False (the general step)
wherever it cannot apply."""
import numpy as np
import pytest

from invkin.solvers.lm import limits_table
from invkin.solvers.lm_core import (_active_step, _limb_positions, _reduced_step, core_step, core_step_scratch,
                                    limb_partition)


def _problem(rng, nb=6, legs=(6, 6), extra=(0, 0), nr=8, ms=9):
    """J (m, dof), e and the row/column split of a floating robot: B (the base, nb joints) first,
    then one limb per hard block (legs[f] rows on the base and legs[f] + extra[f] private joints),
    then nr joints that only the soft rows move (arms)."""
    cols, hard_rows, blk = [], [], []
    o = nb
    for f, (n, x) in enumerate(zip(legs, extra)):
        cols.append(np.arange(o, o + n + x))
        o += n + x
        blk += [10 + f] * n
    dof = o + nr
    mh = sum(legs)
    m = mh + ms
    J = np.zeros((m, dof))
    r = 0
    for f, n in enumerate(legs):
        J[r:r + n, :nb] = rng.standard_normal((n, nb))
        J[r:r + n, cols[f]] = rng.standard_normal((n, cols[f].size)) + 2.0 * np.eye(n, cols[f].size)
        hard_rows += list(range(r, r + n))
        r += n
    J[mh:, :nb] = rng.standard_normal((ms, nb))
    J[mh:, o:] = rng.standard_normal((ms, nr)) * (rng.random((ms, nr)) < 0.7)
    e = rng.standard_normal(m)
    return J, e, np.arange(mh, m), np.array(hard_rows, np.int64), np.array(blk, np.int64), cols


def _marks(dof, nb, cols, blk):
    """The block marks the tree gives (limb_partition): the base moves every block's rows (-2),
    limb f only block f's (its node), the other joints none (-1)."""
    own = np.full(dof, -1, np.int64)
    own[:nb] = -2
    for node, c in zip(np.unique(blk), cols):
        own[c] = node
    return own


def _kkt(J, e, soft, hard, jw, mu, mu_h):
    """The regularised constrained step min |J_s dq - e_s|^2 + mu |dq|_W^2 + |A dq - b|^2 / mu_h by
    NumPy's solve of its KKT system [H A^T; A -mu_h I] (the Schur step's system, lm_core's top)."""
    Js, A = J[soft], J[hard]
    n, mh = J.shape[1], len(hard)
    K = np.zeros((n + mh, n + mh))
    K[:n, :n] = Js.T @ Js + mu * np.diag(jw)
    K[:n, n:] = A.T
    K[n:, :n] = A
    K[n:, n:] = -mu_h * np.eye(mh)
    return np.linalg.solve(K, np.concatenate([Js.T @ e[soft], e[hard]]))[:n]


def _run(J, e, soft, hard, blk, own, part, jw, mu, mu_h, q, lo, hi):
    m, dof = J.shape
    H, Jm, Z, S, r, lam, col = core_step_scratch(m, dof, max(m, len(hard), 1))
    dq = np.empty(dof)
    lims = limits_table(lo, hi, lo, hi - lo, np.zeros(dof), jw, np.zeros(0, np.int64))
    ok = _reduced_step(J, e, soft, hard, blk, own, part, np.empty(max(m, 1), np.int64), lims, lo, hi, q, mu, mu_h,
                       np.empty(dof), H, Jm, Z, S, lam, col, dq, np.empty(dof))
    return ok, dq


def _reduced(J, e, soft, hard, blk, jw, mu, mu_h, q, lo, hi, own):
    own = own.copy()
    ok, part = _limb_positions(own, blk)
    assert ok
    return _run(J, e, soft, hard, blk, own, part, jw, mu, mu_h, q, lo, hi)


def _general(J, e, soft, hard, jw, mu, mu_h, q, lo, hi):
    m, dof = J.shape
    lims = limits_table(lo, hi, lo, hi - lo, np.zeros(dof), jw, np.zeros(0, np.int64))
    hold, dq = np.empty(dof), np.empty(dof)
    assert _active_step(J, e, soft, hard, lims, lo, hi, q, mu, mu_h, np.zeros(dof), hold,
                        *core_step_scratch(m, dof, max(m, len(hard), 1)), dq, True)
    return dq


def _free(dof):
    return np.zeros(dof), np.full(dof, -1e3), np.full(dof, 1e3)


@pytest.mark.parametrize("legs,extra,nb", [((6, 6), (0, 0), 6), ((3, 3, 3), (0, 0, 0), 6), ((6, 6), (1, 0), 6),
                                           ((3, 6), (0, 0), 3)], ids=["humanoid", "quadruped", "7-dof-leg", "mixed"])
def test_eliminating_the_private_limbs_gives_the_kkt_step_of_the_regularised_hard_rows(legs, extra, nb):
    """Over random problems with limb blocks, every mu_h from exact (1e-14) to a plain LM step on
    the hard rows (1): the reduced step equals NumPy's KKT solve and core_step's Schur step. (mu
    from 1e-4: below it H's condition ~1/mu costs both steps digits alike, ~6e-16/mu relative.)"""
    rng = np.random.default_rng(11)
    for trial in range(60):
        J, e, soft, hard, blk, cols = _problem(rng, nb=nb, legs=legs, extra=extra)
        dof = J.shape[1]
        own = _marks(dof, nb, cols, blk)
        jw = rng.uniform(0.5, 2.0, dof)
        mu, mu_h = 10.0 ** rng.uniform(-4, 0), 10.0 ** rng.uniform(-14, 0)
        q, lo, hi = _free(dof)
        ok, dq = _reduced(J, e, soft, hard, blk, jw, mu, mu_h, q, lo, hi, own)
        assert ok, trial
        want = _kkt(J, e, soft, hard, jw, mu, mu_h)
        scale = np.abs(want).max()
        np.testing.assert_allclose(dq, want, rtol=0, atol=1e-10 * scale, err_msg=str(trial))
        schur = np.empty(dof)
        assert core_step(J, e, soft, hard, jw, mu, mu_h, np.zeros(dof), np.full(dof, np.nan),
                         *core_step_scratch(J.shape[0], dof, J.shape[0]), schur)
        np.testing.assert_allclose(dq, schur, rtol=0, atol=1e-10 * scale, err_msg=str(trial))
        if mu_h < 1e-12:  # the hard rows hold to first order
            np.testing.assert_allclose(J[hard] @ dq, e[hard], rtol=0, atol=1e-8 * (1 + scale))


def test_the_step_is_the_general_active_set_step_at_and_past_the_bounds():
    """The reduced step runs _active_step's active set (warm: the joints at a bound of q start held;
    joints a pass would push past a bound are held there; the warm-held whose multiplier points
    inside are released): wherever a joint is at a bound or would leave the box it equals
    _active_step's step, and a step that needs no bound is the KKT step itself."""
    rng = np.random.default_rng(5)
    for trial in range(80):
        J, e, soft, hard, blk, cols = _problem(rng)
        dof = J.shape[1]
        own = _marks(dof, 6, cols, blk)
        jw = rng.uniform(0.5, 2.0, dof)
        mu, mu_h = 10.0 ** rng.uniform(-4, -1), 10.0 ** rng.uniform(-14, -6)
        q, lo, hi = _free(dof)
        free = _kkt(J, e, soft, hard, jw, mu, mu_h)
        k = int(rng.integers(dof))
        if trial % 2:  # joint k's bound just past (or just short of) its free step
            edge = free[k] * (1.0 + (0.01 if trial % 4 == 1 else -0.01))
            lo[k], hi[k] = min(edge, -1e-3), max(edge, 1e-3)
        else:  # joint k at a bound
            lo[k] = q[k] = -0.5
        ok, dq = _reduced(J, e, soft, hard, blk, jw, mu, mu_h, q, lo, hi, own)
        want = _general(J, e, soft, hard, jw, mu, mu_h, q, lo, hi)
        assert ok, trial
        np.testing.assert_allclose(dq, want, rtol=0, atol=1e-9 * np.abs(want).max(), err_msg=str(trial))
        if np.all(q + free > lo) and np.all(q + free < hi) and np.all(q > lo) and np.all(q < hi):
            np.testing.assert_allclose(dq, free, rtol=0, atol=1e-9 * np.abs(free).max(), err_msg=str(trial))


@pytest.mark.parametrize("where", ["legs", "base", "arms", "everywhere"])
def test_held_joints_are_equality_rows_on_the_factored_step_and_it_stays_the_general_one(where):
    """Joints at their bounds or pushed past them (a crouch's ankle rolls: a foot's 6 rows left with
    5 free leg joints) are held as equality rows on the reduced step's factors (_reduced_apply) and
    the step still equals _active_step's, over random boxes that hold 1-8 joints at once, every mu_h
    from exact to a plain LM step (the step's box is _active_step's: ACTIVE_SET_PASSES passes, then the
    caller clamps)."""
    rng = np.random.default_rng(17)
    legs_held = refused = 0
    for trial in range(120):
        J, e, soft, hard, blk, cols = _problem(rng)
        dof = J.shape[1]
        own = _marks(dof, 6, cols, blk)
        jw = rng.uniform(0.5, 2.0, dof)
        mu, mu_h = 10.0 ** rng.uniform(-4, -1), 10.0 ** rng.uniform(-14, 0)
        q, lo, hi = _free(dof)
        free = _kkt(J, e, soft, hard, jw, mu, mu_h)
        pool = {"legs": np.concatenate(cols), "base": np.arange(6), "arms": np.arange(18, dof),
                "everywhere": np.arange(dof)}[where]
        at = rng.choice(pool, size=int(rng.integers(1, min(8, pool.size) + 1)), replace=False)
        for k in at:
            if rng.random() < 0.5:  # at a bound on the side the free step goes
                (lo if free[k] < 0 else hi)[k] = q[k] = rng.uniform(-0.5, 0.5)
                lo[k], hi[k] = min(lo[k], q[k]), max(hi[k], q[k])
            else:  # a bound halfway along the free step
                (lo if free[k] < 0 else hi)[k] = q[k] + 0.5 * free[k]
        ok, dq = _reduced(J, e, soft, hard, blk, jw, mu, mu_h, q, lo, hi, own)
        want = _general(J, e, soft, hard, jw, mu, mu_h, q, lo, hi)
        if not ok:  # the held joints and the feet pin more than the base's 6 joints (HOLD_PIVOT)
            refused += 1
            continue
        scale = np.abs(want).max()
        # (mu_h down to 1e-14: the held joints' columns K^-1 e_k pass through K's 1/mu_h directions,
        # which costs the reduced step up to ~4e-7 of the step where the Schur step keeps ~1e-8)
        np.testing.assert_allclose(dq, want, rtol=0, atol=1e-6 * scale, err_msg=str(trial))
        legs_held += any(np.any((np.abs(q + dq - lo) < 1e-12)[c] | (np.abs(q + dq - hi) < 1e-12)[c]) for c in cols)
    assert refused < 20, refused
    if where in ("legs", "everywhere"):  # (base and arm holds leave the legs free)
        assert legs_held > 30, legs_held


def test_a_block_it_cannot_eliminate_gives_the_general_step():
    """False (the caller then takes core_step's path) for a singular limb (two private columns
    alike: a straight knee); no split at all for a block with fewer private joints than rows. A
    leg joint at its bound (a crouch's ankle) is held: the general step's."""
    rng = np.random.default_rng(2)
    J, e, soft, hard, blk, cols = _problem(rng)
    dof = J.shape[1]
    own = _marks(dof, 6, cols, blk)
    jw = np.ones(dof)
    q, lo, hi = _free(dof)
    assert _reduced(J, e, soft, hard, blk, jw, 1e-3, 1e-14, q, lo, hi, own)[0]
    bent = J.copy()
    bent[hard[:6], cols[0][1]] = bent[hard[:6], cols[0][0]]  # rank 5 on the limb
    assert not _reduced(bent, e, soft, hard, blk, jw, 1e-3, 1e-14, q, lo, hi, own)[0]
    at = q.copy()
    at[cols[1][3]] = lo[cols[1][3]]
    ok, dq = _reduced(J, e, soft, hard, blk, jw, 1e-3, 1e-14, at, lo, hi, own)
    want = _general(J, e, soft, hard, jw, 1e-3, 1e-14, at, lo, hi)
    assert ok
    np.testing.assert_allclose(dq, want, rtol=0, atol=1e-9 * np.abs(want).max())
    short = own.copy()
    short[cols[0][0]] = -2  # 5 private joints for 6 rows
    assert not _limb_positions(short, blk)[0]


def test_limb_positions_keep_the_joint_order_and_bracket_the_shared_joints():
    own = np.array([-1, -2, -2, 7, 7, -1, -2, 9, -1], np.int64)
    ok, (nr, b0, b1, p0, p1) = _limb_positions(own, np.array([7, 7, 9], np.int64))
    assert ok and nr == 6 and (b0, b1, p0, p1) == (1, 7, 1, 5)
    assert list(own) == [0, 1, 2, -10, -10, 3, 4, -12, 5]


def test_on_a_humanoid_the_legs_are_eliminated_for_hand_goals_and_not_for_a_centre_of_mass():
    """The toy humanoid with hard feet (tests/test_whole_body.py): with a soft hand goal the legs
    are the feet's private joints (limb_partition, from the tree) and the reduced step is the
    general one's; a soft CenterOfMass row moves the legs, a hard one every limb, a Relative hard
    row two: nothing is eliminated."""
    import invkin as ik
    from invkin.solve import core_args
    from invkin.solvers._common import compile_problem
    from test_whole_body import _eval, _humanoid, _stance

    robot = _humanoid()
    q0 = _stance(robot)
    feet = [ik.Pose(f, robot.fk(q0, f), hard=True) for f in ("l_foot", "r_foot")]
    hand = ik.Pose("l_hand", robot.fk(q0, "l_hand") @ _t([0.1, 0.05, -0.1]))
    com = ik.CenterOfMass([0.05, 0.0, 0.0], axes="xy")
    cases = ((feet + [hand], 12), (feet + [com], 0), (feet[:1] + [ik.CenterOfMass([0, 0, 0], hard=True), hand], 0),
             (feet + [ik.Relative("l_hand", "r_hand", np.eye(4), hard=True), hand], 0))
    legs = [robot.joint_names.index(f"{s}_{j}") for s in "lr"
            for j in ("hip_z", "hip_x", "hip_y", "knee", "ankle_y", "ankle_x")]
    for goals, expect in cases:
        p = compile_problem(robot, goals, 1e-6, 1e-6)
        model, table, lims, lo, hi = core_args(p)
        soft, hard = p.layout.soft, p.layout.hard
        blk, own = np.empty(hard.shape[0], np.int64), np.empty(robot.dof, np.int64)
        nelim, part = limb_partition(model[0], table[0], table[1], table[2], hard, soft, blk, own)
        assert nelim == expect, goals
        if not nelim:
            continue
        assert sorted(np.flatnonzero(own < 0)) == legs and part[0] == robot.dof - 12
        e, J = _eval(robot, goals, q0)
        jw = np.ones(robot.dof)
        ok, dq = _run(J, e, soft, hard, blk, own, part, jw, 1e-3, 1e-12, q0, lo, hi)
        assert ok
        want = _general(J, e, soft, hard, jw, 1e-3, 1e-12, q0, lo, hi)
        np.testing.assert_allclose(dq, want, rtol=0, atol=1e-10 * np.abs(want).max())
        assert np.all(dq[legs] != 0.0)  # the legs move with the base, solved in closed form


def _t(p):
    T = np.eye(4)
    T[:3, 3] = p
    return T
