"""Two-bone IK on skeleton limbs: joint rotations on BVH and glTF legs, pole, stretch, soft reach,
and the ``analytic`` method on a BVH leg."""
from pathlib import Path

import numpy as np
import pytest

import invkin as ik
from invkin.solvers.two_bone_limb import limb_joints

MOCAP = Path(ik.__file__).parent / "data" / "mocap"
WALKER = Path(__file__).parent / "data" / "gltf" / "walker.glb"


@pytest.fixture(scope="module")
def walk():
    return ik.read_bvh(MOCAP / "cmu_02_01_walk.bvh")


def _pos(robot, q, name):
    return robot.fk(q, name)[:3, 3]


def test_limb_of_a_bvh_foot_is_hip_knee_foot(walk):
    robot, _ = walk
    assert limb_joints(robot, "LeftFoot") == ("LeftUpLeg", "LeftLeg", "LeftFoot")
    assert limb_joints(robot, "RightHand") == ("RightArm", "RightForeArm", "RightHand")


def test_subchain_from_a_bvh_hip_moves_hip_and_knee(walk):
    robot, _ = walk
    leg = robot.subchain("LeftUpLeg", "LeftFoot")
    assert leg.joint_names[:6] == tuple(f"{j}.{c}rotation" for j in ("LeftUpLeg", "LeftLeg") for c in "ZYX")


@pytest.mark.parametrize("frame", [10, 120, 300])
def test_reachable_target_is_hit_and_only_hip_and_knee_turn(walk, frame):
    robot, clip = walk
    q = clip.frames[frame]
    rng = np.random.default_rng(frame)
    hip = _pos(robot, q, "LeftUpLeg")
    L = np.linalg.norm(_pos(robot, q, "LeftLeg") - hip) + np.linalg.norm(_pos(robot, q, "LeftFoot") - _pos(robot, q, "LeftLeg"))
    d = rng.normal(size=3)
    t = hip + 0.8 * L * d / np.linalg.norm(d)
    sol = ik.two_bone_3d(robot, q, "LeftFoot", t)
    assert sol.reached and np.linalg.norm(_pos(robot, sol.q, "LeftFoot") - t) < 1e-9
    changed = {robot.joint_names[i].split(".")[0] for i in np.flatnonzero(sol.q != q)}
    assert changed <= {"LeftUpLeg", "LeftLeg"}
    # bone lengths are untouched (rigid rotations) and the returned rotations are the joints' world ones
    np.testing.assert_allclose(robot.fk(sol.q, "LeftLeg")[:3, :3], sol.rotations["LeftLeg"], atol=1e-9)
    np.testing.assert_allclose(robot.fk(sol.q, "LeftUpLeg")[:3, :3], sol.rotations["LeftUpLeg"], atol=1e-9)


def test_pole_point_chooses_the_knee_side_and_pole_angle_turns_it(walk):
    robot, clip = walk
    q = clip.frames[0]
    hip, foot = _pos(robot, q, "LeftUpLeg"), _pos(robot, q, "LeftFoot")
    t = hip + 0.85 * (foot - hip)
    fwd = np.cross(foot - hip, [1.0, 0.0, 0.0])
    for sign in (1, -1):
        sol = ik.two_bone_3d(robot, q, "LeftFoot", t, pole=hip + sign * 50 * fwd)
        knee = _pos(robot, sol.q, "LeftLeg")
        u = (t - hip) / np.linalg.norm(t - hip)
        side = (knee - hip) - ((knee - hip) @ u) * u
        assert sign * side @ fwd > 0 and sol.reached
    a = ik.two_bone_3d(robot, q, "LeftFoot", t, pole=hip + 50 * fwd)
    b = ik.two_bone_3d(robot, q, "LeftFoot", t, pole=hip + 50 * fwd, pole_angle=np.pi / 2)
    ka, kb = _pos(robot, a.q, "LeftLeg") - hip, _pos(robot, b.q, "LeftLeg") - hip
    u = (t - hip) / np.linalg.norm(t - hip)
    pa, pb = ka - (ka @ u) * u, kb - (kb @ u) * u
    assert abs(np.degrees(np.arccos(pa @ pb / np.linalg.norm(pa) / np.linalg.norm(pb))) - 90) < 1e-6


def test_out_of_reach_stretches_or_straightens_and_soft_reach_is_smooth(walk):
    robot, clip = walk
    q = clip.frames[0]
    hip = _pos(robot, q, "LeftUpLeg")
    far = hip + np.array([0.0, -100.0, 0.0])
    hard = ik.two_bone_3d(robot, q, "LeftFoot", far)
    assert not hard.reached and hard.stretch == 1.0
    knee = _pos(robot, hard.q, "LeftLeg")
    foot = _pos(robot, hard.q, "LeftFoot")
    assert np.linalg.norm(np.cross(knee - hip, foot - knee)) < 1e-6 * np.linalg.norm(knee - hip) ** 2  # straight
    st = ik.two_bone_3d(robot, q, "LeftFoot", far, stretch=True, max_stretch=1.1)
    assert st.stretch == pytest.approx(1.1)
    # soft reach: tip distance along a ray grows smoothly (no kink at full extension)
    dist = np.linspace(0.8, 1.2, 41) * (np.linalg.norm(knee - hip) + np.linalg.norm(foot - knee))
    reach = [np.linalg.norm(_pos(robot, ik.two_bone_3d(robot, q, "LeftFoot", hip + [0, -d, 0], soft=2.0).q,
                                 "LeftFoot") - hip) for d in dist]
    slope = np.diff(reach) / np.diff(dist)
    assert np.all(slope > 0) and np.max(np.abs(np.diff(slope))) < 0.1


def test_two_bone_on_a_gltf_leg():
    pytest.importorskip("pygltflib")
    robot, clip = ik.read_gltf(WALKER)
    q = clip.frames[20]
    t = _pos(robot, q, "RightFoot") + [0.05, 0.1, -0.05]
    sol = ik.two_bone_3d(robot, q, "RightFoot", t)
    assert sol.reached and np.linalg.norm(_pos(robot, sol.q, "RightFoot") - t) < 1e-9


def test_analytic_method_solves_a_bvh_leg(walk):
    robot, clip = walk
    leg = robot.subchain("LeftUpLeg", "LeftFoot")
    q = np.array([clip.frames[50][robot.joint_index(n)] for n in leg.joint_names])
    t = _pos(leg, q, "LeftFoot") + [2.0, 1.0, 3.0]
    res = ik.solve(leg, [ik.Position("LeftFoot", t)], q0=q, method="analytic")
    assert res.status == ik.Status.CONVERGED and res.iterations == 1
    with pytest.raises(ik.SolverError, match="subchain"):
        ik.solve(robot, [ik.Position("LeftFoot", t)], q0=clip.frames[50], method="analytic")


def test_tentacle_is_exported():
    assert ik.tentacle(5, "ball").dof == 15 and "tentacle" in ik.__all__


def _target_with(robot, q, entry, deg, tip="LeftFoot"):
    """The tip's position after turning q's ``entry`` by ``deg`` (a target the free limb reaches)."""
    q2 = np.array(q)
    q2[robot.joint_names.index(entry)] += np.radians(deg)
    return _pos(robot, q2, tip)


def test_zero_length_bone_is_named_with_its_limb_and_no_runtime_warning(walk):
    robot, clip = walk  # CMU: LHipJoint sits on Hips (zero OFFSET)
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(ik.SolverError, match=r"limb \('Hips', 'LHipJoint', 'LeftUpLeg'\): the bone 'Hips' -> "
                                                 r"'LHipJoint' has zero length"):
            ik.two_bone_3d(robot, clip.frames[100], "LeftUpLeg", _pos(robot, clip.frames[100], "LeftUpLeg") + 0.5)


def test_cone_and_twist_limits_bind_the_limb_and_it_says_so(walk):
    from invkin.model.limits import limit_violation

    robot, clip = walk
    q = clip.frames[100]
    limited = robot.with_limits({"LeftLeg": {"swing": 30, "twist": [-10, 10]}, "LeftUpLeg.Xrotation": [-20, 20]})
    target = _target_with(robot, q, "LeftLeg.Xrotation", 70)
    free = ik.two_bone_3d(robot, q, "LeftFoot", target)
    assert free.reached and not free.limited and limit_violation(limited, free.q) > 1.0  # 1.8 rad outside
    s = ik.two_bone_3d(limited, q, "LeftFoot", target)
    assert limit_violation(limited, s.q) <= 1e-9
    i = robot.joint_names.index("LeftUpLeg.Xrotation")
    assert -np.radians(20) <= s.q[i] <= np.radians(20)
    assert s.limited and not s.reached and s.stretch == 1.0
    tip = _pos(robot, s.q, "LeftFoot")
    assert s.error == pytest.approx(np.linalg.norm(tip - target), abs=1e-12) and s.error > 1.0  # 11.5 units
    np.testing.assert_allclose(s.positions, [_pos(robot, s.q, n) for n in ("LeftUpLeg", "LeftLeg", "LeftFoot")],
                               atol=1e-12)
    np.testing.assert_allclose(s.rotations["LeftLeg"], robot.fk(s.q, "LeftLeg")[:3, :3], atol=1e-12)
    moved = np.flatnonzero(s.q != q)
    assert {robot.joint_names[k].split(".")[0] for k in moved} <= {"LeftUpLeg", "LeftLeg"}


def test_box_limit_binds_the_hip_and_idle_limits_change_nothing(walk):
    robot, clip = walk
    q = clip.frames[100]
    i = robot.joint_names.index("LeftUpLeg.Xrotation")
    box = robot.with_limits({"LeftUpLeg.Xrotation": [-20, 20]})  # no cone: the box alone
    target = _target_with(robot, q, "LeftUpLeg.Xrotation", -60)
    assert abs(ik.two_bone_3d(robot, q, "LeftFoot", target).q[i]) > np.radians(40)
    s = ik.two_bone_3d(box, q, "LeftFoot", target)
    assert s.q[i] == pytest.approx(-np.radians(20), abs=1e-12) and s.limited and not s.reached
    # limits that do not bind: the same bits as without them
    wide = robot.with_limits({"LeftLeg": {"swing": 180, "twist": [-180, 180]}, "LeftUpLeg.Xrotation": [-90, 90]})
    near = _pos(robot, q, "LeftFoot") + np.array([0.5, 0.3, -0.2])
    a, b = ik.two_bone_3d(robot, q, "LeftFoot", near), ik.two_bone_3d(wide, q, "LeftFoot", near)
    assert a.reached and b.reached and not b.limited
    np.testing.assert_array_equal(a.q, b.q)
    assert a.error == b.error
