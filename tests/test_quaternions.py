"""Quaternions in both orders, named: round trips, the orders told apart, unit norm enforced."""
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import invkin as ik
from invkin import GoalError, spatial

finite = st.floats(-1.0, 1.0, allow_nan=False)
quats = st.tuples(finite, finite, finite, finite).filter(lambda q: np.linalg.norm(q) > 1e-3).map(
    lambda q: np.array(q) / np.linalg.norm(q))


def rodrigues(axis, angle):
    """Independent reference: R = I + sin(t) K + (1 - cos(t)) K^2."""
    K = np.array([[0, -axis[2], axis[1]], [axis[2], 0, -axis[0]], [-axis[1], axis[0], 0]])
    return np.eye(3) + math.sin(angle) * K + (1 - math.cos(angle)) * K @ K


@settings(max_examples=200, deadline=None)
@given(quats)
def test_wxyz_and_xyzw_round_trip_through_the_matrix_up_to_sign(q_wxyz):
    q_xyzw = q_wxyz[[1, 2, 3, 0]]
    R = spatial.quat_to_matrix(quat_wxyz=q_wxyz)
    assert np.allclose(spatial.quat_to_matrix(quat_xyzw=q_xyzw), R, atol=1e-15)
    assert np.allclose(R, spatial.quat_wxyz_to_matrix(q_wxyz), atol=1e-15)  # the old name agrees
    for order, q in (("wxyz", q_wxyz), ("xyzw", q_xyzw)):
        back = spatial.matrix_to_quat(R, order=order)
        assert np.allclose(back, q, atol=1e-12) or np.allclose(back, -q, atol=1e-12)
        assert back[0 if order == "wxyz" else 3] >= 0
    assert np.allclose(R @ R.T, np.eye(3), atol=1e-13) and np.linalg.det(R) > 0


@settings(max_examples=100, deadline=None)
@given(st.tuples(finite, finite, finite).filter(lambda v: np.linalg.norm(v) > 1e-3), st.floats(0.0, math.pi))
def test_both_orders_equal_rodrigues_for_axis_and_angle(axis, angle):
    a = np.array(axis) / np.linalg.norm(axis)
    s, c = math.sin(angle / 2), math.cos(angle / 2)
    ref = rodrigues(a, angle)
    assert np.allclose(spatial.quat_to_matrix(quat_wxyz=[c, *(s * a)]), ref, atol=1e-13)
    assert np.allclose(spatial.quat_to_matrix(quat_xyzw=[*(s * a), c]), ref, atol=1e-13)


def test_the_ros_identity_is_the_identity_not_a_half_turn():
    assert np.array_equal(spatial.quat_to_matrix(quat_xyzw=(0, 0, 0, 1)), np.eye(3))
    # read as scalar-first, the same four numbers are a half turn about z
    assert np.allclose(spatial.quat_to_matrix(quat_wxyz=(0, 0, 0, 1)), np.diag([-1.0, -1.0, 1.0]))


def test_batches_of_quaternions_give_batches_of_matrices():
    qs = np.random.default_rng(0).normal(size=(5, 3, 4))
    qs /= np.linalg.norm(qs, axis=-1, keepdims=True)
    Rs = spatial.quat_to_matrix(quat_wxyz=qs)
    assert Rs.shape == (5, 3, 3, 3)
    assert np.allclose(Rs[2, 1], spatial.quat_wxyz_to_matrix(qs[2, 1]), atol=1e-15)


@pytest.mark.parametrize("q, norm", [((0, 0, 0, 2), "2"), ((1, 0, 0, 0.05), "1.00124922"), ((0, 0, 0, 0), "0"),
                                     ((0, 0, 0.7, 0.7), "0.989949494")])
def test_a_non_unit_quaternion_is_an_error_naming_its_norm(q, norm):
    with pytest.raises(GoalError, match=rf"quat_xyzw: expected a unit quaternion.*norm {norm}"):
        spatial.quat_to_matrix(quat_xyzw=q)


def test_a_quaternion_within_the_tolerance_is_normalised():
    R = spatial.quat_to_matrix(quat_wxyz=(1 + 5e-7, 0, 0, 0))
    assert np.allclose(R, np.eye(3), atol=1e-15)


def test_quaternions_and_matrices_share_one_repair_tolerance():
    assert spatial.QUAT_NORM_TOL == spatial.ORTHONORMAL_REPAIR_TOL == 1e-3
    # four rounded decimals are repaired in either form: a quarter turn about z as a quaternion
    # (norm 0.99999041), an eighth of a turn as a matrix (drift 1.9e-5)
    Rz = np.array([[0.0, -1.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, 1.0]])
    assert np.allclose(spatial.quat_to_matrix(quat_xyzw=(0, 0, 0.7071, 0.7071)), Rz, atol=1e-15)
    h = math.sqrt(0.5)
    assert np.allclose(spatial.as_rotation([[0.7071, -0.7071, 0], [0.7071, 0.7071, 0], [0, 0, 1]]),
                       [[h, -h, 0], [h, h, 0], [0, 0, 1]], atol=1e-12)
    for off in (0.999e-3, -0.999e-3):  # just inside the bound either way
        q = np.array([0.0, 0.0, 1.0, 1.0]) / math.sqrt(2.0) * (1.0 + off)
        assert np.allclose(spatial.quat_to_matrix(quat_xyzw=q), Rz, atol=1e-15)
    with pytest.raises(GoalError, match=r"norm 1\.0011"):  # just outside
        spatial.quat_to_matrix(quat_xyzw=np.array([0.0, 0.0, 1.0, 1.0]) / math.sqrt(2.0) * 1.0011)


def test_a_pose_from_a_rounded_ros_quaternion_is_accepted():
    goal = ik.Pose.from_position_quaternion("tool0", (0.4, 0.1, 0.5), quat_xyzw=(0, 0, 0.7071, 0.7071))
    assert np.allclose(goal.T[:3, :3], [[0, -1, 0], [1, 0, 0], [0, 0, 1]], atol=1e-15)
    assert np.array_equal(goal.T[:3, 3], [0.4, 0.1, 0.5])
    with pytest.raises(GoalError, match=r"quat_xyzw: expected a unit quaternion.*norm 0\.98994949"):
        ik.Pose.from_position_quaternion("tool0", (0.4, 0.1, 0.5), quat_xyzw=(0, 0, 0.7, 0.7))


@pytest.mark.parametrize("kw", [{}, {"quat_wxyz": (1, 0, 0, 0), "quat_xyzw": (0, 0, 0, 1)}])
def test_exactly_one_order_must_be_named(kw):
    with pytest.raises(GoalError, match="exactly one of quat_wxyz"):
        spatial.quat_to_matrix(**kw)


@pytest.mark.parametrize("bad, message", [((1, 0, 0), r"shape \(4,\)"), ((1, 0, math.nan, 0), "finite"),
                                          ("abcd", "4 numbers")])
def test_malformed_quaternions_are_refused(bad, message):
    with pytest.raises(GoalError, match=message):
        spatial.quat_to_matrix(quat_wxyz=bad)


def test_matrix_to_quat_refuses_an_unknown_order():
    with pytest.raises(GoalError, match=r"order must be one of 'wxyz', 'xyzw', got 'xyz'"):
        spatial.matrix_to_quat(np.eye(3), order="xyz")


@settings(max_examples=50, deadline=None)
@given(quats, st.tuples(finite, finite, finite))
def test_pose_from_position_quaternion_equals_pose_of_the_matrix(q_wxyz, p):
    a = ik.Pose.from_position_quaternion("hand", p, quat_wxyz=q_wxyz, weight=2.0)
    b = ik.Pose.from_position_quaternion("hand", p, quat_xyzw=q_wxyz[[1, 2, 3, 0]], weight=2.0)
    assert np.allclose(a.T, b.T, atol=1e-15) and a.weight == b.weight == 2.0
    assert np.allclose(a.T[:3, 3], p) and np.allclose(a.T[:3, :3], spatial.quat_wxyz_to_matrix(q_wxyz), atol=1e-13)


def test_pose_from_position_quaternion_needs_exactly_one_unit_quaternion():
    with pytest.raises(GoalError, match="exactly one"):
        ik.Pose.from_position_quaternion("hand", (0, 0, 0))
    with pytest.raises(GoalError, match="norm 1.41421356"):
        ik.Pose.from_position_quaternion("hand", (0, 0, 0), quat_xyzw=(1, 0, 0, 1))
    with pytest.raises(GoalError, match=r"expected one quaternion \(4,\)"):
        ik.Pose.from_position_quaternion("hand", (0, 0, 0), quat_xyzw=np.tile([0, 0, 0, 1.0], (2, 1)))
