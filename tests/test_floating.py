"""Free and planar joints (a floating or mobile base): FK and Jacobians against finite
differences through Robot.integrate, the manifold maths, every solver, sampling near q0."""
from __future__ import annotations

import math

import numpy as np
import pytest

import invkin as ik
from invkin.errors import InvkinError, ModelError
from invkin.kinematics import kernels as K
from invkin.model.build import RobotBuilder
from invkin.spatial import make_transform, so3_exp, so3_log


def _T(p=(0.0, 0.0, 0.0), r=(0.0, 0.0, 0.0)):
    return make_transform(so3_exp(np.asarray(r, dtype=float)), p)


def floating_arm(kind: str = "free") -> ik.Robot:
    """A two-joint arm on a free (or planar, normal (0.3, 0.2, 1)) base joint with a non-trivial
    origin, so that the joint frame differs from the world."""
    b = RobotBuilder(f"arm_on_{kind}")
    b.add_root("world")
    b.add_joint("base", "world", "body", kind, _T((0.5, -0.2, 0.1), (0.1, 0.2, -0.3)),
                axis=(0.3, 0.2, 1.0))
    b.add_joint("j1", "body", "l1", "revolute", _T((0.1, 0.2, 0.3)), (0, 1, 0), -2.0, 2.0)
    b.add_joint("j2", "l1", "l2", "continuous", _T((0.3, 0.0, 0.0)), (1, 0, 0))
    b.add_joint("tip_joint", "l2", "tip", "fixed", _T((0.0, 0.0, 0.25)))
    return b.build()


def _numeric_jacobian(robot, q, frame, h=1e-7):
    """Central differences of the frame pose along each increment of Robot.integrate: position
    change [m] and rotation log(R1 R0^T) [rad] (world-aligned, as the geometric Jacobian)."""
    J = np.zeros((6, robot.dof))
    for k in range(robot.dof):
        d = np.zeros(robot.dof)
        d[k] = h
        Tp = robot.fk(robot.integrate(q, d), frame)
        Tm = robot.fk(robot.integrate(q, -d), frame)
        J[:3, k] = (Tp[:3, 3] - Tm[:3, 3]) / (2 * h)
        J[3:, k] = so3_log(Tp[:3, :3] @ Tm[:3, :3].T) / (2 * h)
    return J


@pytest.mark.parametrize("kind", ["free", "planar"])
def test_joint_names_types_and_limits_of_composite_joints(kind):
    r = floating_arm(kind)
    names = {"free": ("base.x", "base.y", "base.z", "base.rx", "base.ry", "base.rz"),
             "planar": ("base.x", "base.y", "base.yaw")}[kind]
    assert r.joint_names[:len(names)] == names
    assert r.joint_types_per_dof[:len(names)] == (kind,) * len(names)
    assert np.all(np.isinf(r.lower[:len(names)])) and np.all(np.isinf(r.upper[:len(names)]))
    assert r.free_joints == ("base",) and r.floating
    assert "base.x" not in r.frame_names and "body" in r.frame_names
    assert r.joint_index("base") == 0
    assert K.FREE != K.PLANAR and K.FREE not in r.joint_type and K.PLANAR not in r.joint_type


def test_free_joint_q_is_position_and_rotation_vector_in_the_joint_frame():
    r = floating_arm("free")
    q = np.zeros(r.dof)
    q[:3] = (0.3, -0.4, 1.2)
    q[3:6] = (0.5, -0.2, 0.7)
    T_joint = _T((0.5, -0.2, 0.1), (0.1, 0.2, -0.3))
    np.testing.assert_allclose(r.fk(q, "body"), T_joint @ _T(q[:3], q[3:6]), atol=1e-14)


def test_planar_joint_moves_in_the_plane_normal_to_its_axis():
    r = floating_arm("planar")
    n = np.array([0.3, 0.2, 1.0]) / np.linalg.norm([0.3, 0.2, 1.0])
    rng = np.random.default_rng(1)
    T_joint = _T((0.5, -0.2, 0.1), (0.1, 0.2, -0.3))
    for _ in range(5):
        q = r.sample(rng=rng, around=rng.normal(size=r.dof))
        T = np.linalg.inv(T_joint) @ r.fk(q, "body")
        assert abs(T[:3, 3] @ n) < 1e-14  # translation stays in the plane
        np.testing.assert_allclose(T[:3, :3] @ n, n, atol=1e-14)  # rotation about the normal
        np.testing.assert_allclose(so3_log(T[:3, :3]) @ n, q[2], atol=1e-12)
    q = np.zeros(r.dof)
    q[:2] = (0.3, 0.4)
    assert np.linalg.norm((np.linalg.inv(T_joint) @ r.fk(q, "body"))[:3, 3]) == pytest.approx(0.5)


@pytest.mark.parametrize("kind", ["free", "planar"])
@pytest.mark.parametrize("frame", ["body", "l1", "tip"])
def test_jacobian_matches_finite_differences_through_integrate(kind, frame):
    r = floating_arm(kind)
    rng = np.random.default_rng(7)
    for _ in range(6):
        q = r.sample(rng=rng, around=rng.normal(size=r.dof) * 2.0)
        J = r.jacobian(q, frame)
        np.testing.assert_allclose(J, _numeric_jacobian(r, q, frame), atol=2e-7)
        T, J2 = r.fk_jacobian(q, frame)
        np.testing.assert_allclose(J2, J, atol=1e-14)
        np.testing.assert_allclose(T, r.fk(q, frame), atol=1e-14)


@pytest.mark.parametrize("kind", ["free", "planar"])
def test_batch_fk_and_jacobian_equal_single_calls(kind):
    r = floating_arm(kind)
    rng = np.random.default_rng(3)
    qs = r.sample(16, rng=rng, around=rng.normal(size=r.dof))
    Ts = r.fk(qs, "tip")
    Js = r.jacobian(qs, "tip")
    all_ = r.fk_all(qs)
    for b in range(16):
        np.testing.assert_allclose(Ts[b], r.fk(qs[b], "tip"), atol=1e-14)
        np.testing.assert_allclose(Js[b], r.jacobian(qs[b], "tip"), atol=1e-14)
        np.testing.assert_allclose(all_["tip"][b], Ts[b], atol=1e-14)
        np.testing.assert_allclose(Js[b], _numeric_jacobian(r, qs[b], "tip"), atol=2e-7)


def test_free_joint_integrate_and_difference_round_trip_near_zero_and_pi():
    r = floating_arm("free")
    rng = np.random.default_rng(11)
    for scale in (1e-9, 0.5, math.pi - 1e-4):
        q0 = r.sample(rng=rng, around=rng.normal(size=r.dof))
        d = rng.normal(size=r.dof)
        d[3:6] *= scale / np.linalg.norm(d[3:6])
        q1 = r.integrate(q0, d)
        np.testing.assert_allclose(r.difference(q0, q1), d, atol=1e-9)
        # the convention: p + dp (joint frame), R exp(dr) (local)
        np.testing.assert_allclose(q1[:3], q0[:3] + d[:3], atol=1e-15)
        np.testing.assert_allclose(so3_exp(q1[3:6]), so3_exp(q0[3:6]) @ so3_exp(d[3:6]), atol=1e-12)


def test_neutral_of_a_floating_robot_is_at_the_origin():
    r = ik.load_robot("panda", floating_base=True)
    q = r.neutral()
    assert np.all(q[:6] == 0.0)
    np.testing.assert_allclose(r.fk(q, "panda_link0"), np.eye(4), atol=0)
    np.testing.assert_allclose(r.fk(q, "panda_hand"), ik.load_robot("panda").fk(q[6:], "panda_hand"), atol=1e-14)


def test_samples_keep_the_base_near_q0():
    r = ik.load_robot("panda", floating_base=True)
    rng = np.random.default_rng(0)
    q0 = r.neutral()
    q0[:3] = (5.0, -3.0, 0.7)
    q0[3:6] = (0.0, 0.0, 2.0)
    qs = r.sample(500, rng=rng, around=q0)
    assert np.all(np.abs(qs[:, :3] - q0[:3]) <= 0.1 + 1e-12)
    ang = [np.linalg.norm(so3_log(so3_exp(q0[3:6]).T @ so3_exp(q[3:6]))) for q in qs]
    assert max(ang) <= math.sqrt(3) * 0.3 + 1e-9
    assert np.all(r.within_limits(qs))
    plain = r.sample(200, rng=rng)  # default: around the origin
    assert np.all(np.abs(plain[:, :3]) <= 0.1 + 1e-12)
    assert np.all(np.isfinite(plain))


def test_restart_bounds_never_span_the_infinite_base_range():
    from invkin.solve import _lm_tables, _sampler

    r = ik.load_robot("panda", floating_base=True)
    q0 = r.neutral()
    q0[:3] = (2.0, 1.0, 0.0)
    lo, span = _sampler(r, q0)
    assert np.all(np.isfinite(lo)) and np.all(np.isfinite(span))
    np.testing.assert_allclose(lo[:3] + 0.5 * span[:3], q0[:3])
    assert np.all(span[:6] <= 0.6 + 1e-12)
    lims = _lm_tables(r, None, q0)[0]
    assert np.all(np.isfinite(lims[2:4]))


def test_floating_base_twice_is_an_error_naming_the_joint():
    r = ik.load_robot("panda", floating_base=True)
    with pytest.raises(ModelError, match="root_joint"):
        r.with_floating_base()
    with pytest.raises(InvkinError, match="already has a floating joint"):
        ik.load_robot(r, floating_base=True)


def test_free_joint_cannot_lead_a_mimic():
    b = RobotBuilder("m")
    b.add_root("w")
    b.add_joint("base", "w", "body", "free")
    b.add_joint("f", "body", "finger", "revolute", None, (0, 0, 1), -1, 1, mimic=("base", 1.0, 0.0))
    with pytest.raises(ModelError, match="free joint"):
        b.build()


URDF_FLOATING = """<robot name="flo">
  <link name="world"/><link name="body"/><link name="arm"/><link name="cart"/><link name="top"/>
  <joint name="float" type="floating"><parent link="world"/><child link="body"/>
    <origin xyz="0 0 1"/></joint>
  <joint name="a" type="revolute"><parent link="body"/><child link="arm"/><axis xyz="0 1 0"/>
    <origin xyz="0.2 0 0"/><limit lower="-1" upper="1"/></joint>
  <joint name="slide" type="planar"><parent link="world"/><child link="cart"/><axis xyz="0 0 1"/></joint>
  <joint name="t" type="fixed"><parent link="cart"/><child link="top"/><origin xyz="0 0 0.5"/></joint>
</robot>"""


def test_urdf_floating_and_planar_joints_load(tmp_path):
    p = tmp_path / "flo.urdf"
    p.write_text(URDF_FLOATING)
    r = ik.load_robot(p)
    assert r.joint_types_per_dof == ("free",) * 6 + ("revolute", "planar", "planar", "planar")
    q = r.neutral()
    q[:3] = (1.0, 2.0, 3.0)
    q[7:10] = (0.5, -0.5, math.pi / 2)
    np.testing.assert_allclose(r.fk(q, "body")[:3, 3], (1.0, 2.0, 4.0))
    np.testing.assert_allclose(r.fk(q, "top"), _T((0.5, -0.5, 0.5), (0, 0, math.pi / 2)), atol=1e-15)
    assert r.subchain("body", "arm").dof == 1  # base= below the floating joint drops it


GOAL_POSE = _T((0.6, 0.3, 0.4), (0.3, -0.5, 0.2))


@pytest.mark.parametrize("method", ["lm", "dls", "pinv", "transpose", "gauss-seidel"])
def test_solvers_move_the_free_base_to_reach_a_pose(method):
    """A 2-joint arm cannot reach a general pose alone: the free base must move."""
    r = floating_arm("free")
    opts = dict(timeout=2.0 if method != "transpose" else 5.0)
    tol = 1e-6 if method != "transpose" else 1e-3
    res = ik.solve(r, [ik.Pose("tip", GOAL_POSE)], method=method, position_tolerance=tol,
                   rotation_tolerance=tol, seed=1, **opts)
    assert res.success, res
    np.testing.assert_allclose(r.fk(res.q, "tip"), GOAL_POSE, atol=5 * tol)
    assert np.all(r.within_limits(res.q))


def test_solve_many_and_tracker_on_a_free_base():
    r = floating_arm("free")
    Ts = np.stack([GOAL_POSE, _T((0.2, -0.4, 0.8), (0.0, 0.4, 0.1))])
    batch = ik.solve_many(r, "tip", Ts)
    assert batch.success.all()
    for b in range(2):
        np.testing.assert_allclose(r.fk(batch.q[b], "tip"), Ts[b], atol=1e-5)
    tr = ik.Tracker(r, ["tip"], max_joint_step=0.05)
    T0 = r.fk(r.neutral(), "tip")
    for k in range(1, 30):
        T = T0.copy()
        T[:3, 3] += (0.004 * k, -0.002 * k, 0.003 * k)
        step = tr.update({"tip": T[:3, 3]})
    np.testing.assert_allclose(r.fk(tr.q, "tip")[:3, 3], T[:3, 3], atol=1e-4)
    assert step is not None


@pytest.mark.parametrize("method", ["ccd", "fabrik", "analytic"])
def test_methods_without_free_joint_support_either_solve_or_say_so(method):
    r = floating_arm("free")
    goal = ik.Position("tip", GOAL_POSE[:3, 3])
    try:
        res = ik.solve(r, [goal], method=method, timeout=1.0, position_tolerance=1e-4)
    except InvkinError as exc:
        assert "free" in str(exc) or "joint" in str(exc)
        return
    assert np.all(np.isfinite(res.q))
    if res.success:
        np.testing.assert_allclose(r.fk(res.q, "tip")[:3, 3], GOAL_POSE[:3, 3], atol=2e-4)
