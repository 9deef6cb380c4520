"""Analytic two-bone IK: property tests against a forward kinematics written here."""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import invkin as ik
from invkin.solvers.analytic import (_atan2_nb, two_bone_2d, two_bone_2d_scalar, two_bone_3d,
                                     two_bone_lengths)

lengths = st.floats(0.01, 10.0)
unit = st.floats(0.0, 1.0)
angle = st.floats(-math.pi, math.pi)
finite = st.floats(-1e300, 1e300, allow_nan=False, allow_infinity=False)
length_any = st.floats(0.0, 1e300, allow_nan=False, allow_infinity=False)
vec3 = st.tuples(st.floats(-10, 10), st.floats(-10, 10), st.floats(-10, 10))


def fk2(l1, l2, th1, th2):
    """Elbow and hand of the planar arm (shoulder at the origin)."""
    l1, l2, th1, th2 = np.broadcast_arrays(*map(np.asarray, (l1, l2, th1, th2)))
    elbow = np.stack([l1 * np.cos(th1), l1 * np.sin(th1)], axis=-1)
    hand = elbow + np.stack([l2 * np.cos(th1 + th2), l2 * np.sin(th1 + th2)], axis=-1)
    return elbow, hand


def cross2(a, b):
    return a[..., 0] * b[..., 1] - a[..., 1] * b[..., 0]


def reachable_target(l1, l2, u, phi, margin=0.0):
    lo, hi = abs(l1 - l2), l1 + l2
    b = lo + margin * (hi - lo) + u * (1 - 2 * margin) * (hi - lo)
    return np.array([b * math.cos(phi), b * math.sin(phi)])


# ---------------------------------------------------------------- 2-D
@settings(max_examples=300, deadline=None)
@given(lengths, lengths, unit, angle, st.booleans())
def test_reachable_targets_are_reached(l1, l2, u, phi, up):
    t = reachable_target(l1, l2, u, phi)
    th1, th2 = two_bone_2d(l1, l2, t, elbow_up=up)
    _, hand = fk2(l1, l2, th1, th2)
    assert np.linalg.norm(hand - t) <= 1e-9


@settings(max_examples=200, deadline=None)
@given(lengths, lengths, unit, angle)
def test_elbow_up_bends_counter_clockwise_and_elbow_down_clockwise(l1, l2, u, phi):
    t = reachable_target(l1, l2, u, phi, margin=0.01)
    up1, up2 = two_bone_2d(l1, l2, t, elbow_up=True)
    dn1, dn2 = two_bone_2d(l1, l2, t, elbow_up=False)
    e_up, _ = fk2(l1, l2, up1, up2)
    e_dn, _ = fk2(l1, l2, dn1, dn2)
    assert cross2(t, e_up) > 0 and up2 < 0  # left of shoulder→target
    assert cross2(t, e_dn) < 0 and dn2 > 0  # right of it; θ2 = π − β
    # the seed's formulas: θ1 = atan2 ∓ α, θ2 = ±(π − β)
    b = np.linalg.norm(t)
    alpha = math.acos(np.clip((b * b + l1 * l1 - l2 * l2) / (2 * b * l1), -1, 1))
    beta = math.acos(np.clip((l1 * l1 + l2 * l2 - b * b) / (2 * l1 * l2), -1, 1))
    wrap = lambda a: (a + math.pi) % (2 * math.pi) - math.pi  # noqa: E731 - tiny local helper
    assert abs(wrap(dn1 - (math.atan2(t[1], t[0]) - alpha))) < 1e-6
    assert abs(dn2 - (math.pi - beta)) < 1e-6


@settings(max_examples=200, deadline=None)
@given(lengths, lengths, st.floats(1.0 + 1e-9, 1e6), angle, st.booleans())
def test_unreachable_target_stretches_toward_it(l1, l2, f, phi, up):
    L = l1 + l2
    t = L * f * np.array([math.cos(phi), math.sin(phi)])
    th1, th2 = two_bone_2d(l1, l2, t, elbow_up=up)
    _, hand = fk2(l1, l2, th1, th2)
    assert abs(th2) <= 1e-12
    np.testing.assert_allclose(hand, L * t / np.linalg.norm(t), atol=1e-9 * L)


@settings(max_examples=200, deadline=None)
@given(lengths, lengths, unit, angle, st.booleans())
def test_too_close_target_folds_the_arm_toward_it(l1, l2, f, phi, up):
    lo = abs(l1 - l2)
    if lo < 1e-6:
        return
    t = lo * f * 0.999 * np.array([math.cos(phi), math.sin(phi)])
    th1, th2 = two_bone_2d(l1, l2, t, elbow_up=up)
    _, hand = fk2(l1, l2, th1, th2)
    assert abs(abs(th2) - math.pi) <= 1e-12
    assert abs(np.linalg.norm(hand) - lo) <= 1e-9
    if np.linalg.norm(t) > 1e-6:  # the hand as close to the target as the bones allow
        np.testing.assert_allclose(np.linalg.norm(hand - t), lo - np.linalg.norm(t), atol=1e-9)


@settings(max_examples=500, deadline=None)
@given(length_any, length_any, finite, finite, st.booleans(), st.one_of(st.none(), length_any))
def test_no_nan_for_any_finite_input(l1, l2, x, y, up, soft):
    th1, th2 = two_bone_2d(l1, l2, [x, y], elbow_up=up, soft=soft)
    assert np.isfinite(th1) and np.isfinite(th2)
    s1, s2 = two_bone_2d_scalar(l1, l2, x, y, up, soft or 0.0)
    assert math.isfinite(s1) and math.isfinite(s2)


@pytest.mark.parametrize("l1, l2, t", [(1, 1, (0, 0)), (1, 0.5, (0, 0)), (0.5, 1, (0, 0)), (0, 1, (0, 0)),
                                       (1, 0, (0, 0)), (0, 0, (0, 0)), (0, 0, (3, 4)), (0, 1, (3, 4)),
                                       (1, 0, (3, 4)), (1, 1, (1e-300, 0)), (1, 1, (-0.0, -0.0)),
                                       (1e-300, 1e-300, (1, 1))])
def test_degenerate_arms_are_finite_and_keep_bone_lengths(l1, l2, t):
    for up in (True, False):
        th1, th2 = two_bone_2d(l1, l2, t, elbow_up=up)
        elbow, hand = fk2(l1, l2, th1, th2)
        assert np.isfinite(th1) and np.isfinite(th2)
        assert np.linalg.norm(elbow) == pytest.approx(l1, abs=1e-12)
        b = np.hypot(*t)
        # the hand is as close to the target as the arm allows
        best = min(max(b, abs(l1 - l2)), l1 + l2)
        assert np.linalg.norm(hand - np.asarray(t, float)) == pytest.approx(abs(b - best), abs=1e-9)


def test_b_zero_uses_the_x_axis():
    th1, th2 = two_bone_2d(1.0, 1.0, [0.0, 0.0])
    assert th1 == 0.0 and abs(th2) == pytest.approx(math.pi)


def test_broadcasting_over_leading_dimensions():
    rng = np.random.default_rng(1)
    l1 = rng.uniform(0.5, 2.0, size=(3, 1))
    l2 = 1.2
    t = rng.normal(size=(4, 2))
    th1, th2 = two_bone_2d(l1, l2, t)
    assert th1.shape == th2.shape == (3, 4)
    for i in range(3):
        for j in range(4):
            s1, s2 = two_bone_2d_scalar(float(l1[i, 0]), l2, *t[j], True)
            assert th1[i, j] == pytest.approx(s1, abs=1e-12) and th2[i, j] == pytest.approx(s2, abs=1e-12)
    a, b = two_bone_2d(1.0, 1.0, [1.0, 1.0])
    assert a.shape == b.shape == ()
    a, b = two_bone_2d(np.ones((2, 5)), np.ones(5), np.zeros((1, 5, 2)), elbow_up=False)
    assert a.shape == (2, 5)
    a, b = two_bone_2d(1.0, 1.0, np.zeros((0, 2)))
    assert a.shape == (0,)
    a, b = two_bone_2d(1.0, 1.0, np.zeros((6, 2)), soft=np.linspace(0, 1, 6))
    assert a.shape == (6,)


def test_vectorised_and_scalar_forms_agree():
    rng = np.random.default_rng(2)
    n = 2000
    l1 = rng.uniform(0, 2, n)
    l2 = rng.uniform(0, 2, n)
    t = rng.normal(size=(n, 2)) * 2
    soft = rng.uniform(0, 0.5, n)
    for up in (True, False):
        th1, th2 = two_bone_2d(l1, l2, t, elbow_up=up, soft=soft)
        ref = np.array([two_bone_2d_scalar(l1[i], l2[i], t[i, 0], t[i, 1], up, soft[i]) for i in range(n)])
        _, h = fk2(l1, l2, th1, th2)
        _, h_ref = fk2(l1, l2, ref[:, 0], ref[:, 1])
        np.testing.assert_allclose(h, h_ref, atol=1e-12)


@pytest.mark.parametrize("bad, match", [
    (dict(l1=-1.0), "l1"), (dict(l2=np.nan), "l2"), (dict(target_xy=[1.0, 2.0, 3.0]), r"\(\.\.\., 2\)"),
    (dict(target_xy=[np.inf, 0.0]), "finite"), (dict(soft=-0.1), "soft"),
    (dict(elbow_up=np.array([True, False])), "elbow_up"), (dict(l1=np.ones(3), target_xy=np.ones((4, 2))),
                                                          "broadcast"),
])
def test_bad_inputs_raise_goal_error(bad, match):
    args = dict(l1=1.0, l2=1.0, target_xy=[1.0, 0.5])
    args.update(bad)
    with pytest.raises(ik.GoalError, match=match):
        two_bone_2d(**args)


# ---------------------------------------------------------------- soft reach
def soft_distance(b, L, s):
    d0 = L - s
    return b if b <= d0 else d0 + s * (1 - math.exp(-(b - d0) / s))


@settings(max_examples=200, deadline=None)
@given(lengths, lengths, st.floats(0.0, 3.0), st.floats(0.01, 1.0), angle)
def test_soft_reach_follows_its_formula_along_the_ray(l1, l2, f, frac, phi):
    L = l1 + l2
    s = frac * min(l1, l2)  # band inside the reachable range
    b = max(f * L, abs(l1 - l2) + 1e-6)
    t = b * np.array([math.cos(phi), math.sin(phi)])
    th1, th2 = two_bone_2d(l1, l2, t, soft=s)
    _, hand = fk2(l1, l2, th1, th2)
    d = soft_distance(b, L, s)
    np.testing.assert_allclose(hand, d * t / b, atol=1e-9)
    assert np.linalg.norm(hand) <= L * (1 + 1e-15)


def test_soft_reach_is_continuous_and_never_snaps_straight():
    b = np.linspace(1.0, 3.0, 20001)
    t = np.stack([b, np.zeros_like(b)], axis=-1)
    th1, th2 = two_bone_2d(1.0, 1.0, t, soft=0.2)
    hard1, hard2 = two_bone_2d(1.0, 1.0, t)
    assert np.all(th2 < 0)  # never fully straight, even far out of reach
    assert np.max(np.abs(np.diff(th2))) < 5 * np.median(np.abs(np.diff(th2[b < 1.7])))
    assert np.max(np.abs(np.diff(hard2))) > 20 * np.max(np.abs(np.diff(th2)))  # the hard arm pops
    np.testing.assert_array_equal(th2[b <= 1.8], hard2[b <= 1.8])


# ---------------------------------------------------------------- the fast atan2 of the kernel
def test_kernel_atan2_matches_libm_in_every_quadrant():
    rng = np.random.default_rng(3)
    pts = rng.normal(size=(3000, 2)) * 10.0 ** rng.uniform(-8, 8, size=(3000, 1))
    special = [(0.0, 0.0), (0.0, -0.0), (-0.0, 0.0), (-0.0, -0.0), (1.0, 0.0), (-1.0, 0.0), (0.0, 1.0),
               (0.0, -1.0), (1.0, 1.0), (-1.0, -1.0), (1e-300, 1.0), (1.0, 1e-300), (0.41421356, 1.0)]
    for y, x in list(map(tuple, pts)) + special:
        assert abs(_atan2_nb(y, x) - math.atan2(y, x)) <= 5e-16, (y, x)
        assert math.copysign(1.0, _atan2_nb(y, x)) == math.copysign(1.0, math.atan2(y, x))


# ---------------------------------------------------------------- 3-D
def assert_bone_lengths(S, l1, l2, elbow, hand):
    np.testing.assert_allclose(np.linalg.norm(elbow - np.asarray(S), axis=-1), l1, atol=1e-9)
    np.testing.assert_allclose(np.linalg.norm(hand - elbow, axis=-1), l2, atol=1e-9)


@settings(max_examples=300, deadline=None)
@given(vec3, lengths, lengths, unit, vec3, vec3)
def test_3d_reaches_reachable_targets_with_the_elbow_on_the_pole_side(S, l1, l2, u, D, P):
    S, D, P = map(np.array, (S, D, P))
    nD = np.linalg.norm(D)
    if nD < 1e-3:
        return
    D /= nD
    n = P - (P @ D) * D
    if np.linalg.norm(n) < 1e-3:
        return
    lo, hi = abs(l1 - l2), l1 + l2
    T = S + (lo + (0.01 + 0.98 * u) * (hi - lo)) * D
    elbow, hand = two_bone_3d(S, l1, l2, T, P)
    assert np.linalg.norm(hand - T) <= 1e-9
    assert_bone_lengths(S, l1, l2, elbow, hand)
    e = elbow - S
    assert e @ n > 0  # on the pole's side of the shoulder→target line
    assert abs(e @ np.cross(D, n / np.linalg.norm(n))) <= 1e-9  # in the plane of u and the pole


@settings(max_examples=200, deadline=None)
@given(vec3, lengths, lengths, st.floats(1.0 + 1e-9, 1e3), vec3, vec3)
def test_3d_unreachable_target_stretches_toward_it(S, l1, l2, f, D, P):
    S, D = np.array(S), np.array(D)
    if np.linalg.norm(D) < 1e-3:
        return
    D /= np.linalg.norm(D)
    T = S + f * (l1 + l2) * D
    elbow, hand = two_bone_3d(S, l1, l2, T, P)
    np.testing.assert_allclose(hand, S + (l1 + l2) * D, atol=1e-9)
    np.testing.assert_allclose(elbow, S + l1 * D, atol=1e-9)


@settings(max_examples=300, deadline=None)
@given(st.tuples(finite, finite, finite).map(lambda v: np.array(v) * 1e-200), length_any, length_any,
       st.tuples(finite, finite, finite).map(lambda v: np.array(v) * 1e-200),
       st.tuples(finite, finite, finite), st.one_of(st.none(), length_any))
def test_3d_no_nan_for_any_finite_input(S, l1, l2, T, P, soft):
    elbow, hand = two_bone_3d(S, l1, l2, T, P, soft=soft)
    assert np.all(np.isfinite(elbow)) and np.all(np.isfinite(hand))


@pytest.mark.parametrize("T, P", [((1, 0, 0), (1, 0, 0)), ((1, 0, 0), (-3, 0, 0)), ((1, 0, 0), (0, 0, 0)),
                                  ((0, 0, 0), (0, 1, 0)), ((0, 0, 0), (0, 0, 0)), ((0, 0, 1e-300), (0, 0, 1))])
def test_3d_degenerate_pole_or_target_stays_finite_and_keeps_bone_lengths(T, P):
    for l1, l2 in ((1.0, 1.0), (1.0, 0.6), (0.6, 1.0)):
        elbow, hand = two_bone_3d((0.0, 0.0, 0.0), l1, l2, T, P)
        assert np.all(np.isfinite(elbow)) and np.all(np.isfinite(hand))
        assert_bone_lengths((0, 0, 0), l1, l2, elbow, hand)
    if np.any(P) and not np.any(T):  # target at the shoulder: folds along the pole
        elbow, _ = two_bone_3d((0.0, 0.0, 0.0), 1.0, 1.0, T, P)
        np.testing.assert_allclose(elbow, np.asarray(P) / np.linalg.norm(P), atol=1e-12)


def test_3d_in_a_plane_agrees_with_2d_elbow_up():
    rng = np.random.default_rng(4)
    t2 = rng.normal(size=(500, 2))
    l1, l2 = 1.1, 0.7
    th1, th2 = two_bone_2d(l1, l2, t2, elbow_up=True)
    e2, h2 = fk2(l1, l2, th1, th2)
    T = np.concatenate([t2, np.zeros((500, 1))], axis=1)
    pole = np.concatenate([-t2[:, 1:], t2[:, :1], np.zeros((500, 1))], axis=1)  # +90°: the CCW side
    elbow, hand = two_bone_3d(np.zeros(3), l1, l2, T, pole)
    assert elbow.shape == hand.shape == (500, 3)
    np.testing.assert_allclose(elbow[:, :2], e2, atol=1e-12)
    np.testing.assert_allclose(hand[:, :2], h2, atol=1e-12)


def test_3d_broadcasts_and_validates():
    elbow, hand = two_bone_3d(np.zeros((2, 1, 3)), np.ones(4), 1.0, np.ones((4, 3)), [0, 0, 1])
    assert elbow.shape == hand.shape == (2, 4, 3)
    with pytest.raises(ik.GoalError, match="pole"):
        two_bone_3d(np.zeros(3), 1.0, 1.0, np.ones(3), [0, 1])
    with pytest.raises(ik.GoalError, match="shoulder"):
        two_bone_3d([np.nan, 0, 0], 1.0, 1.0, np.ones(3), [0, 1, 0])


# ---------------------------------------------------------------- on a real clip
def test_lengths_from_rest_pose_and_3d_ik_recovers_the_captured_elbow():
    """fair1 'wave hello': re-solve the right arm of every frame from its own hand and elbow."""
    path = Path(ik.__file__).parent / "data" / "mocap" / "fair1_wave_hello.bvh"
    robot, clip = ik.read_bvh(path)
    names = ("RightArm", "RightForeArm", "RightHand")
    rest = np.stack([robot.fk(np.zeros(robot.dof), f)[:3, 3] for f in names])
    l1, l2 = two_bone_lengths(rest)
    i = {n: k for k, n in enumerate(clip.names)}
    assert l1 == pytest.approx(np.linalg.norm(clip.offsets[i["RightForeArm"]]))
    assert l2 == pytest.approx(np.linalg.norm(clip.offsets[i["RightHand"]]))
    S, E, H = (robot.fk(clip.frames, f)[:, :3, 3] for f in names)
    elbow, hand = two_bone_3d(S, l1, l2, H, E - S)
    scale = l1 + l2
    np.testing.assert_allclose(hand, H, atol=1e-9 * scale)
    np.testing.assert_allclose(elbow, E, atol=1e-7 * scale)
    l1b, l2b = two_bone_lengths(np.stack([S, E, H], axis=-2))
    assert l1b.shape == (clip.n_frames,)
    np.testing.assert_allclose(l1b, l1, rtol=1e-12)
    with pytest.raises(ik.GoalError, match="shoulder, elbow"):
        two_bone_lengths(np.zeros((2, 3)))
