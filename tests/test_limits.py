"""Swing-cone and twist limits (swing-twist decomposition), Robot.with_limits from dicts and rig files,
and every solve method returning configurations within them."""
import json
import math

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import invkin as ik
from invkin.model.limits import clamp_swing_twist, limit_violation, project_limits, swing_twist
from invkin.spatial import so3_exp

rotvecs = st.tuples(*[st.floats(-3.1, 3.1)] * 3)
axes = st.tuples(*[st.floats(-1, 1)] * 3).filter(lambda a: np.linalg.norm(a) > 0.1)


@settings(max_examples=300, deadline=None)
@given(rotvecs, axes, st.floats(0.0, 3.0), st.floats(-3.0, 3.0), st.floats(0.0, 3.0))
def test_clamped_rotation_never_violates_the_cone_or_twist_and_is_idempotent(rv, axis, smax, tlo, span):
    R = so3_exp(np.array(rv))
    thi = min(tlo + span, math.pi)
    Rc = clamp_swing_twist(R, axis, smax, tlo, thi)
    np.testing.assert_allclose(Rc @ Rc.T, np.eye(3), atol=1e-12)
    s, t = swing_twist(Rc, axis)
    assert np.linalg.norm(s) <= smax + 1e-9 and tlo - 1e-9 <= t <= thi + 1e-9
    np.testing.assert_allclose(clamp_swing_twist(Rc, axis, smax, tlo, thi), Rc, atol=1e-9)


@settings(max_examples=200, deadline=None)
@given(rotvecs, axes)
def test_swing_twist_recomposes_and_swing_is_perpendicular(rv, axis):
    R = so3_exp(np.array(rv))
    a = np.array(axis) / np.linalg.norm(axis)
    s, t = swing_twist(R, a)
    assert abs(s @ a) <= 1e-9
    np.testing.assert_allclose(so3_exp(s) @ so3_exp(t * a), R, atol=1e-9)
    # a rotation within generous limits is left alone
    np.testing.assert_allclose(clamp_swing_twist(R, a, math.pi, -math.pi, math.pi), R, atol=1e-12)


def test_with_limits_from_a_dict_and_a_rig_file(tmp_path):
    robot = ik.load_robot("tentacle", n=4, joint="ball")
    lim = robot.with_limits({"seg1": {"swing": 30, "twist": [-10, 10], "axis": [0, 0, 1]}, "j1.x": [-20, 20]})
    assert lim.upper[lim.joint_names.index("j1.x")] == pytest.approx(math.radians(20))
    assert "seg1" in lim.extras["cone_limits"] and robot.extras.get("cone_limits") is None  # input kept
    rig = tmp_path / "rig.json"
    rig.write_text(json.dumps({"seg1": {"swing": 30, "twist": [-10, 10], "axis": [0, 0, 1]}}))
    assert ik.Robot.with_limits(robot, rig).extras["cone_limits"]["seg1"][1] == pytest.approx(math.radians(30))
    toml = tmp_path / "rig.toml"
    toml.write_text('units = "rad"\n[seg1]\nswing = 0.5\ntwist = [-0.1, 0.1]\n')
    assert robot.with_limits(toml).extras["cone_limits"]["seg1"][1] == 0.5
    with pytest.raises(ik.FrameError, match="closest"):
        robot.with_limits({"segg1": {"swing": 10}})
    with pytest.raises(ik.ModelError, match="swing"):
        robot.with_limits({"seg1": {"swig": 10}})
    bad = tmp_path / "bad.json"
    bad.write_text("{")
    with pytest.raises(ik.ModelError, match="JSON"):
        robot.with_limits(bad)


@pytest.mark.parametrize("method", ["lm", "ccd", "fabrik", "dls", "pinv"])
def test_every_method_returns_configurations_within_the_cone_limits(method):
    robot = ik.load_robot("tentacle", n=6, joint="ball").with_limits(
        {f"seg{i}": {"swing": 25, "twist": [-5, 5], "axis": [0, 0, 1]} for i in range(1, 7)})
    rng = np.random.default_rng(1)
    tip = robot.frame_names[-1]
    for _ in range(5):
        target = rng.uniform(-0.4, 0.4, 3) + [0, 0, 0.3]
        res = ik.solve(robot, [ik.Position(tip, target)], method=method, seed=0, timeout=0.5)
        assert limit_violation(robot, res.q) <= 1e-9, method
        assert np.allclose(project_limits(robot, res.q), res.q, atol=1e-9)


def test_bvh_three_channel_joint_limits_hold():
    robot, clip = ik.read_bvh(ik.model.bvh.__file__.replace("model/bvh.py", "data/mocap/cmu_02_01_walk.bvh"))
    leg = robot.subchain("LeftUpLeg", "LeftFoot").with_limits({"LeftUpLeg": {"swing": 40, "twist": [-15, 15]}})
    q0 = np.zeros(leg.dof)
    t = leg.fk(q0, "LeftFoot")[:3, 3] + [5.0, 3.0, 4.0]
    res = ik.solve(leg, [ik.Position("LeftFoot", t)], q0=q0, method="lm")
    assert limit_violation(leg, res.q) <= 1e-9
