"""The source documents' methods, checked against independent transcriptions of the documents.

Each transcription below is written from SEEDS.md in plain NumPy (no invkin kernel), so a test
compares the product with what the document says, not with itself.
"""
from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

import invkin as ik

X, Y, Z = np.eye(3)


# ----------------------------------------------------------------------------- transcriptions


def _rot(axis, th):
    """Rotation matrix about a unit axis (Rodrigues)."""
    a = np.asarray(axis, dtype=float)
    K = np.array([[0, -a[2], a[1]], [a[2], 0, -a[0]], [-a[1], a[0], 0]])
    return np.eye(3) + math.sin(th) * K + (1 - math.cos(th)) * K @ K


SEED_AXES = [X, Y, Z, X, Y, Z, X, Y]       # SEEDS.md §1's test model, from the base
SEED_LINK_BEFORE = [0, 0, 0, 1, 0, 0, 1, 0]  # a link of length 1 along +Z before joints 3 and 6


def seed_joint_frames(q):
    """(positions (8, 3), world axes (8, 3), tip position (3,), tip rotation (3, 3)) of the seed model."""
    R = np.eye(3)
    p = np.zeros(3)
    pos, axes = [], []
    for k in range(8):
        if SEED_LINK_BEFORE[k]:
            p = p + R @ Z
        pos.append(p.copy())
        axes.append(R @ SEED_AXES[k])
        R = R @ _rot(SEED_AXES[k], q[k])
    return np.array(pos), np.array(axes), p + R @ Z, R


def welman_sweep(q, p_d, R_d, w, k=1.0, W=3.0):
    """One sweep of Welman's CCD (SEEDS.md §5) on the seed model, transcribed from the document.

    At joint i (tip to root) with world axis a: P_ic, P_id from the joint to the current tip and
    to the goal; w_p = α(1 + ρ), α = k/W, ρ = min(|P_id|, |P_ic|)/max(|P_id|, |P_ic|), w_o = 1;
    k1 = w_p (P_id·a)(P_ic·a) + w_o Σ_j (u_jd·a)(u_jc·a), k2 = w_p P_id·P_ic + w_o Σ_j u_jd·u_jc,
    k3 = a · [w_p P_ic × P_id + w_o Σ_j u_jc × u_jd]; Φ_c = atan(k3/(k2 − k1)), Φ_c ± π kept in
    (−π, π] when g'' < 0, the best by g wins; q_i ← q_i + w_i Φ; the tip frame is updated before
    joint i − 1. ``R_d`` None: a position goal only (w_o terms dropped).
    """
    q = np.array(q, dtype=float)
    for i in range(7, -1, -1):
        pos, axes, p_c, R_c = seed_joint_frames(q)
        a = axes[i]
        P_ic = p_c - pos[i]
        P_id = p_d - pos[i]
        rho = min(np.linalg.norm(P_id), np.linalg.norm(P_ic)) / max(np.linalg.norm(P_id), np.linalg.norm(P_ic))
        w_p = k / W * (1 + rho)
        k1 = w_p * (P_id @ a) * (P_ic @ a)
        k2 = w_p * (P_id @ P_ic)
        k3v = w_p * np.cross(P_ic, P_id)
        if R_d is not None:
            for j in range(3):
                u_jc, u_jd = R_c[:, j], R_d[:, j]  # rows of Welman's row-vector matrices
                k1 += (u_jd @ a) * (u_jc @ a)
                k2 += u_jd @ u_jc
                k3v = k3v + np.cross(u_jc, u_jd)
        k3 = a @ k3v

        def g(phi, k1=k1, k2=k2, k3=k3):
            return k1 * (1 - math.cos(phi)) + k2 * math.cos(phi) + k3 * math.sin(phi)

        phi_c = math.atan(k3 / (k2 - k1))
        cands = [p for p in (phi_c, phi_c + math.pi, phi_c - math.pi) if -math.pi < p <= math.pi
                 and (k1 - k2) * math.cos(p) - k3 * math.sin(p) < 0]
        q[i] += w[i] * max(cands, key=g)
    return q


# ----------------------------------------------------------------------------- item 1: CCD flat joints


def test_welman_ccd_leaves_a_joint_whose_axis_passes_through_the_goal_frame_alone():
    """panda_hand lies on joint 7's axis: a position goal there gives a flat g for joint 7."""
    robot = ik.load_robot("panda")
    rng = np.random.default_rng(0)
    moved = []
    for _ in range(20):
        q0 = robot.sample(1, rng=rng)[0]
        p = robot.fk(robot.sample(1, rng=rng)[0], "panda_hand")[:3, 3]
        res = ik.solve(robot, [ik.Position("panda_hand", p)], q0=q0, method="ccd", restarts=False, timeout=None,
                       max_iterations=300, position_tolerance=1e-5)
        moved.append(abs(res.q[6] - q0[6]))
        assert np.all(np.isfinite(res.q))
    assert max(moved) < 1e-9, moved


# ----------------------------------------------------------------------------- item 5: CCD stiffness


@pytest.mark.parametrize("orientation", [False, True], ids=["position", "pose"])
def test_welman_ccd_with_uniform_stiffness_reproduces_the_documents_sweep(orientation):
    robot = ik.load_robot("seed8dof")
    rng = np.random.default_rng(3)
    for _ in range(5):
        q0 = rng.uniform(-0.3, 0.3, 8)
        T = robot.fk(rng.uniform(-1.0, 1.0, 8), "effector")
        goal = ik.Pose("effector", T) if orientation else ik.Position("effector", T[:3, 3])
        res = ik.solve(robot, [goal], q0=q0, method="ccd", stiffness=0.5, restarts=False, timeout=None,
                       max_iterations=1)
        ref = welman_sweep(q0, T[:3, 3], T[:3, :3] if orientation else None, [0.5] * 8)
        np.testing.assert_allclose(res.q, ref, atol=1e-12)


def test_welman_ccd_stiffness_zero_freezes_a_joint_and_one_moves_it_fully():
    robot = ik.load_robot("seed8dof")
    q0 = np.full(8, 0.2)
    goal = [ik.Position("effector", [1.0, 1.2, 1.5])]
    w = [1.0, 1.0, 1.0, 0.0, 1.0, 1.0, 0.0, 1.0]
    res = ik.solve(robot, goal, q0=q0, method="ccd", stiffness=w, restarts=False, timeout=None,
                   max_iterations=200, position_tolerance=1e-6)
    assert res.q[3] == q0[3] and res.q[6] == q0[6]
    assert res.success, res
    one = ik.solve(robot, goal, q0=q0, method="ccd", stiffness=1.0, restarts=False, timeout=None, max_iterations=1)
    np.testing.assert_allclose(one.q, welman_sweep(q0, np.array([1.0, 1.2, 1.5]), None, [1.0] * 8), atol=1e-12)


def test_ccd_stiffness_is_validated():
    robot = ik.load_robot("seed8dof")
    goal = [ik.Position("effector", [1, 1, 1])]
    with pytest.raises(ik.SolverError, match=r"stiffness must be in \[0, 1\]"):
        ik.solve(robot, goal, method="ccd", stiffness=1.5)
    with pytest.raises(ik.SolverError, match="stiffness must be one number or 8 numbers"):
        ik.solve(robot, goal, method="ccd", stiffness=[0.5, 0.5])
    with pytest.raises(ik.SolverError, match="not both"):
        ik.solve(robot, goal, method="ccd", stiffness=0.5, joint_weights=[2.0] * 8)


# ----------------------------------------------------------------------------- item 5: the article's CCD


def test_simple_ccd_takes_the_articles_threshold_by_name():
    """threshold='article' is the article's 0.001 rad: the tip stops within ~0.001 · reach."""
    robot = ik.load_robot("tentacle", n=12)
    p = robot.fk(robot.sample(1, rng=np.random.default_rng(2))[0] * 0.5, "tip")[:3, 3]
    kw = dict(method="ccd", variant="simple", restarts=False, timeout=None, max_iterations=500,
              position_tolerance=1e-9)
    article = ik.solve(robot, [ik.Position("tip", p)], threshold="article", **kw)
    explicit = ik.solve(robot, [ik.Position("tip", p)], threshold=0.001, **kw)
    np.testing.assert_array_equal(article.q, explicit.q)
    fine = ik.solve(robot, [ik.Position("tip", p)], **kw)
    assert fine.position_error < 0.1 * article.position_error
    with pytest.raises(ik.SolverError, match="'article'"):
        ik.solve(robot, [ik.Position("tip", p)], method="ccd", variant="simple", threshold="paper")


def test_tentacle_demo_can_follow_its_target_with_the_articles_ccd():
    pytest.importorskip("viser", reason="the viewer needs the [viewer] extra (viser)")
    from invkin.viewer import demo_app

    app = demo_app("tentacle", port=0, article_ccd=True)
    app.start()
    app.timeout = 5.0  # ample: the solve ends by converging or stalling, never by the clock
    try:
        q_before = app.current_q.copy()
        res = app.move_target(-0.05, 0.0, 0.03)
        goal = [ik.Position("tip", app.target_position("tip"))]
        ref = ik.solve(app.robot, goal, q0=q_before, method="ccd", variant="simple", threshold="article",
                       position_tolerance=app.position_tolerance, timeout=app.timeout, seed=0,
                       restarts=app.restarts)
        np.testing.assert_array_equal(res.q, ref.q)
        assert res.position_error < 0.01  # the article's 0.001 rad: within ~1 mm per metre of reach
    finally:
        app.stop()


# ----------------------------------------------------------------------------- item 5: Jacobian methods


def _seed_jacobian(q):
    """Position Jacobian (3, 8) of the seed model, column j = a_j × (p_tip − p_j) (transcription)."""
    pos, axes, tip, _ = seed_joint_frames(q)
    return np.stack([np.cross(axes[j], tip - pos[j]) for j in range(8)], axis=1), tip


def test_jacobian_transpose_with_welmans_fixed_alpha_takes_the_documents_steps():
    """Welman 4.1.1: δq = α Jᵀ e, every step, α fixed."""
    robot = ik.load_robot("seed8dof")
    rng = np.random.default_rng(5)
    q0 = rng.uniform(-0.5, 0.5, 8)
    target = robot.fk(rng.uniform(-1.0, 1.0, 8), "effector")[:3, 3]
    alpha = 0.05
    q = q0.copy()
    for n in range(1, 6):
        J, tip = _seed_jacobian(q)
        q = q + alpha * J.T @ (target - tip)
        res = ik.solve(robot, [ik.Position("effector", target)], q0=q0, method="transpose", alpha=alpha,
                       max_step=10.0, restarts=False, timeout=None, max_iterations=n)
        np.testing.assert_allclose(res.q, q, atol=1e-12)
    adaptive = ik.solve(robot, [ik.Position("effector", target)], q0=q0, method="transpose", max_step=10.0,
                        restarts=False, timeout=None, max_iterations=1)
    assert np.linalg.norm(adaptive.q - (q0 + alpha * _seed_jacobian(q0)[0].T @ (target - _seed_jacobian(q0)[1]))) > 1e-3


def test_weighted_pseudo_inverse_accepts_a_full_symmetric_positive_definite_w():
    """SEEDS.md §1: J⁺_W = W⁻¹Jᵀ(J W⁻¹ Jᵀ)⁻¹ minimises δqᵀ W δq, W any n×n SPD matrix."""
    from invkin.solvers.jacobian import pinv_step

    robot = ik.load_robot("seed8dof")
    rng = np.random.default_rng(6)
    A = rng.normal(size=(8, 8))
    W = A @ A.T + 0.5 * np.eye(8)
    Wi = np.linalg.inv(W)
    q0 = rng.uniform(-0.5, 0.5, 8)
    J, tip = _seed_jacobian(q0)
    target = tip + np.array([0.01, -0.02, 0.015])
    e = target - tip
    dq_doc = Wi @ J.T @ np.linalg.solve(J @ Wi @ J.T, e)
    res = ik.solve(robot, [ik.Position("effector", target)], q0=q0, method="pinv", weight_matrix=W,
                   restarts=False, timeout=None, max_iterations=1)
    np.testing.assert_allclose(res.q - q0, dq_doc, atol=1e-9)
    dq_task, dq_null = pinv_step(J, e, eta=rng.normal(size=8), joint_weights=W)
    np.testing.assert_allclose(dq_task, dq_doc, atol=1e-9)
    np.testing.assert_allclose(J @ dq_null, 0.0, atol=1e-9)
    # a diagonal W given as a matrix is the same as joint_weights
    d = rng.uniform(0.5, 3.0, 8)
    as_matrix = ik.solve(robot, [ik.Position("effector", target)], q0=q0, method="dls", weight_matrix=np.diag(d),
                         timeout=None, max_iterations=20)
    as_vector = ik.solve(robot, [ik.Position("effector", target)], q0=q0, method="dls", joint_weights=d,
                         timeout=None, max_iterations=20)
    np.testing.assert_allclose(as_matrix.q, as_vector.q, atol=1e-9)
    assert as_matrix.success
    with pytest.raises(ik.SolverError, match="positive definite"):
        ik.solve(robot, [ik.Position("effector", target)], method="pinv", weight_matrix=-np.eye(8))
    with pytest.raises(ik.SolverError, match="symmetric"):
        ik.solve(robot, [ik.Position("effector", target)], method="pinv", weight_matrix=np.triu(np.ones((8, 8))))
    with pytest.raises(ik.SolverError, match=r"\(8, 8\)"):
        ik.solve(robot, [ik.Position("effector", target)], method="pinv", weight_matrix=np.eye(3))


def test_two_bone_lengths_is_exported():
    assert "two_bone_lengths" in ik.__all__
    l1, l2 = ik.two_bone_lengths([[0.0, 0.0, 0.0], [0.3, 0.4, 0.0], [0.3, 0.4, 1.2]])
    assert (l1, l2) == pytest.approx((0.5, 1.2))


# ----------------------------------------------------------------------------- item 3: straight-line reach


def document_reach(q0, target, step):
    """SEEDS.md §1's main loop on the seed model (transcription): e = x_d − x; stop if |e| < Δ/2;
    δx = Δ e/|e|; δθ = J⁺ δx (J⁺ = Jᵀ(JJᵀ)⁻¹); θ ← θ + δθ. Returns (iterations, θ)."""
    q = np.array(q0, dtype=float)
    for n in range(100000):
        J, tip = _seed_jacobian(q)
        e = target - tip
        if np.linalg.norm(e) < step / 2:
            return n, q
        q = q + J.T @ np.linalg.solve(J @ J.T, step * e / np.linalg.norm(e))
    raise AssertionError("the document's loop did not end")


@pytest.mark.parametrize("z", [2.0, 1.0, 0.25, -1.0, -2.0, 2.995])
def test_reach_from_the_straight_default_start_gets_out_along_the_axis(z):
    robot = ik.load_robot("seed8dof")
    res = ik.reach(robot, "effector", [0.0, 0.0, z])
    assert res.status == ik.Status.CONVERGED, res
    assert res.position_error < 0.005
    assert res.max_deviation < 0.01
    np.testing.assert_allclose(res.qs[0], robot.neutral())  # it started straight
    assert len(res) - 1 == round((3.0 - z) / 0.01)  # one step of Δ per frame, as in the document


def test_reach_stops_at_half_a_step_in_the_same_frame_as_the_documents_loop():
    robot = ik.load_robot("seed8dof")
    rng = np.random.default_rng(8)
    for f in (0.2, 0.3, 0.7, 0.8):  # L = (k + f)Δ: the last step is short or long
        target = np.full(3, 9.0)
        while np.linalg.norm(target) > 2.6:  # well inside the reach radius 3
            q0 = rng.uniform(-0.6, 0.6, 8)
            x0 = _seed_jacobian(q0)[1]
            u = rng.normal(size=3)
            u /= np.linalg.norm(u)
            target = x0 + (37 + f) * 0.01 * u
        n_doc, _ = document_reach(q0, target, 0.01)
        res = ik.reach(robot, "effector", target, q0=q0)
        assert res.status == ik.Status.CONVERGED
        assert len(res) - 1 == n_doc, (f, len(res) - 1, n_doc)


def test_reach_rejects_a_target_at_the_reach_radius_as_the_sample_does():
    robot = ik.load_robot("seed8dof")
    for target in ([3.0, 0.0, 0.0], [0.0, 0.0, -3.0], [0.0, 3.2, 0.0]):
        res = ik.reach(robot, "effector", target, q0=np.full(8, 0.1))
        assert res.status == ik.Status.OUT_OF_WORKSPACE and len(res) == 1
    assert ik.reach(robot, "effector", [2.9, 0.0, 0.0], q0=np.full(8, 0.1)).success


# ----------------------------------------------------------------------------- item 2: Springhead's springs


def springhead_loop(q_orig, target, ratio, lower, upper, tol, iterations=3000, sweeps=5):
    """Springhead2's IK loop with the rest springs (SEEDS.md §3, transcription) on the seed model:
    (1) J at the joint angles θ; (2) v = x_d − x; (3) ω by Gauss–Seidel sweeps on (JᵀJ)ω = Jᵀv from
    ω = 0 (eq. 17); (4) IK moves the spring reference, θ_ik ← θ_ik + ω (inside the joint range),
    and the joint settles between the springs, θ = (p_orig θ_orig + p_ik θ_ik)/(p_orig + p_ik)
    (eq. 24). Returns (reached, θ)."""
    theta = np.array(q_orig, dtype=float)
    theta_ik = theta.copy()
    for _ in range(iterations):
        J, tip = _seed_jacobian(theta)
        v = target - tip
        if np.linalg.norm(v) <= tol:
            return True, theta
        A, b = J.T @ J, J.T @ v
        omega = np.zeros(8)
        for _s in range(sweeps):
            for i in range(8):
                omega[i] = (b[i] - A[i] @ omega + A[i, i] * omega[i]) / A[i, i]
        theta_ik = np.clip(theta_ik + omega, lower, upper)
        theta = (ratio * q_orig + theta_ik) / (ratio + 1.0)
    return False, theta


def test_springhead_rest_springs_act_inside_the_loop_and_a_lost_goal_is_reported():
    robot = ik.load_robot("seed8dof")
    rng = np.random.default_rng(11)
    q_orig = rng.uniform(-0.3, 0.3, 8)
    target = robot.fk(q_orig + rng.uniform(-0.5, 0.5, 8), "effector")[:3, 3]
    goal = [ik.Position("effector", target)]
    outcome = {}
    for ratio in (0.01, 0.1, 1.0, 10.0, 100.0):
        ref_reached, ref_q = springhead_loop(q_orig, target, ratio, robot.lower, robot.upper, 1e-6)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            res = ik.solve_with_rest(robot, goal, q_orig, ratio, 1.0, max_step=100.0, restarts=False, timeout=None,
                                     max_iterations=3000)
        assert res.mode == "loop" and res.goal_reached == ref_reached, (ratio, res, ref_reached)
        if ref_reached:
            np.testing.assert_allclose(res.q, ref_q, atol=1e-6)
        assert res.goal_lost == (not ref_reached)
        assert any(issubclass(w.category, ik.RestPoseWarning) for w in caught) == res.goal_lost
        outcome[ratio] = res.goal_reached
    assert outcome[0.01] and outcome[0.1] and outcome[1.0]  # reached while p_orig/p_ik <= 1
    assert not outcome[100.0]  # p_orig >> p_ik: the target is lost, and said so
    # solve(rest=...) with Springhead's method runs the same loop
    res = ik.solve(robot, goal, q0=q_orig, method="gauss-seidel", max_step=100.0, restarts=False, timeout=None,
                   max_iterations=3000, rest=dict(theta_orig=q_orig, p_orig=1.0, p_ik=1.0, d_orig=0.5))
    assert res.success and res.info["rest"]["goal_reached"]
    np.testing.assert_allclose(res.info["rest"]["stiffness"], 2.0)
    np.testing.assert_allclose(res.info["rest"]["damping"], 0.5)
    with pytest.raises(ik.SolverError, match="gauss-seidel"):
        ik.solve_with_rest(robot, goal, q_orig, 1.0, 1.0, method="lm")
