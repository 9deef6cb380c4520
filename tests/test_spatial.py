"""Property tests for the rotation maths (exp/log near 0 and near pi, rpy, quaternions)."""
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from invkin import GoalError, spatial

finite = st.floats(-1.0, 1.0, allow_nan=False)
unit_vectors = st.tuples(finite, finite, finite).map(np.array).filter(lambda v: np.linalg.norm(v) > 1e-3).map(
    lambda v: v / np.linalg.norm(v))


def rodrigues(axis, angle):
    """Independent reference: R = I + sin(t) K + (1 - cos(t)) K^2."""
    K = np.array([[0, -axis[2], axis[1]], [axis[2], 0, -axis[0]], [-axis[1], axis[0], 0]])
    return np.eye(3) + math.sin(angle) * K + (1 - math.cos(angle)) * K @ K


@settings(max_examples=200, deadline=None)
@given(unit_vectors, st.floats(0.0, math.pi, allow_nan=False))
def test_exp_matches_rodrigues_and_is_a_rotation(axis, angle):
    R = spatial.so3_exp(axis * angle)
    assert np.allclose(R, rodrigues(axis, angle), atol=1e-14)
    assert np.allclose(R.T @ R, np.eye(3), atol=1e-14)
    assert np.linalg.det(R) == pytest.approx(1.0, abs=1e-14)


@settings(max_examples=200, deadline=None)
@given(unit_vectors, st.sampled_from([0.0, 1e-14, 1e-10, 1e-7, 1e-4, 0.3, 1.0, 2.0, 3.0]))
def test_log_inverts_exp_from_zero_to_large_angles(axis, angle):
    r = axis * angle
    assert np.allclose(spatial.so3_log(spatial.so3_exp(r)), r, atol=1e-13)


@settings(max_examples=200, deadline=None)
@given(unit_vectors, st.sampled_from([math.pi - 1e-3, math.pi - 1e-6, math.pi - 1e-9, math.pi]))
def test_log_near_pi_returns_the_same_rotation(axis, angle):
    R = spatial.so3_exp(axis * angle)
    r = spatial.so3_log(R)
    assert np.linalg.norm(r) == pytest.approx(angle, abs=1e-7)
    assert np.allclose(spatial.so3_exp(r), R, atol=1e-12)


@settings(max_examples=200, deadline=None)
@given(st.floats(-math.pi, math.pi), st.floats(-math.pi / 2 + 1e-6, math.pi / 2 - 1e-6), st.floats(-math.pi, math.pi))
def test_rpy_round_trip_is_fixed_axis_xyz(roll, pitch, yaw):
    R = spatial.rpy_to_matrix([roll, pitch, yaw])
    Rx = rodrigues(np.array([1.0, 0, 0]), roll)
    Ry = rodrigues(np.array([0, 1.0, 0]), pitch)
    Rz = rodrigues(np.array([0, 0, 1.0]), yaw)
    assert np.allclose(R, Rz @ Ry @ Rx, atol=1e-14)
    assert np.allclose(spatial.rpy_to_matrix(spatial.matrix_to_rpy(R)), R, atol=1e-12)


def test_rpy_at_gimbal_lock_gives_the_same_rotation():
    R = spatial.rpy_to_matrix([0.3, math.pi / 2, -0.4])
    assert np.allclose(spatial.rpy_to_matrix(spatial.matrix_to_rpy(R)), R, atol=1e-12)


@settings(max_examples=200, deadline=None)
@given(st.tuples(finite, finite, finite, finite).filter(lambda q: np.linalg.norm(q) > 1e-3))
def test_quaternion_round_trip_up_to_sign(q):
    q = np.array(q) / np.linalg.norm(q)
    R = spatial.quat_wxyz_to_matrix(q)
    q2 = spatial.matrix_to_quat_wxyz(R)
    assert np.allclose(q2, q, atol=1e-12) or np.allclose(q2, -q, atol=1e-12)
    assert np.allclose(spatial.quat_wxyz_to_matrix(q2), R, atol=1e-13)


def test_quaternion_is_scalar_first():
    # 90 degrees about z: w = cos 45, z = sin 45
    R = spatial.quat_wxyz_to_matrix([math.cos(math.pi / 4), 0, 0, math.sin(math.pi / 4)])
    assert np.allclose(R, rodrigues(np.array([0, 0, 1.0]), math.pi / 2), atol=1e-15)


@settings(max_examples=100, deadline=None)
@given(unit_vectors, st.floats(0, math.pi), unit_vectors, st.floats(0, math.pi))
def test_rotation_angle_is_the_angle_of_the_relative_rotation(a1, t1, a2, t2):
    Ra = spatial.so3_exp(a1 * t1)
    Rb = spatial.so3_exp(a2 * t2)
    assert spatial.rotation_angle(Ra, Rb) == pytest.approx(np.linalg.norm(spatial.so3_log(Ra.T @ Rb)), abs=1e-9)


def test_slightly_drifted_rotation_is_reorthonormalised():
    R = spatial.so3_exp([0.1, 0.2, 0.3]) + 1e-5
    R2 = spatial.as_rotation(R)
    assert np.allclose(R2.T @ R2, np.eye(3), atol=1e-14)
    assert np.allclose(R2, R, atol=1e-4)


@pytest.mark.parametrize("bad, message", [
    (np.ones((3, 3)), "expected a rotation matrix"),
    (np.diag([1.0, 1.0, -1.0]), "det"),
    (np.full((3, 3), np.nan), "finite"),
    (np.eye(4), "shape"),
    ("abc", "rotation matrix"),
])
def test_garbage_rotations_are_rejected(bad, message):
    with pytest.raises(GoalError, match=message):
        spatial.as_rotation(bad)


def test_transform_inverse_composes_to_identity():
    T = spatial.make_transform(spatial.so3_exp([0.3, -0.2, 1.0]), [1.0, 2.0, 3.0])
    assert np.allclose(spatial.transform_inverse(T) @ T, np.eye(4), atol=1e-15)
