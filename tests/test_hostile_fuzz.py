"""Seeded, bounded fuzzing of the readers (URDF, BVH) and of ``solve`` (issue 19).

Properties, for every generated input: only an :class:`InvkinError` escapes; a result holds no
NaN or inf; ``success`` implies the error recomputed from FK is within the tolerance; no call
runs past its bound (iterations within ``max_iterations``; wall time within a generous limit that
a hang would break). Hypothesis runs derandomized (the same examples every run) with few
examples, so the suite stays fast.
"""
from __future__ import annotations

import time
import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

import invkin as ik
from invkin.model.bvh import read_bvh
from invkin.model.urdf import parse_urdf

FUZZ = settings(max_examples=50, deadline=None, derandomize=True, database=None,
                suppress_health_check=list(HealthCheck))
WALL = 30.0  # [s] per call once compiled: far above any legitimate call, far below a hang

URDF = """<?xml version="1.0"?>
<robot name="fuzz">
  <link name="base"/>
  <link name="upper"/>
  <link name="lower"/>
  <link name="hand"/>
  <joint name="shoulder" type="revolute">
    <parent link="base"/><child link="upper"/>
    <origin xyz="0 0 0.1" rpy="0 0 0"/><axis xyz="0 0 1"/>
    <limit lower="-2" upper="2" effort="1" velocity="1"/>
  </joint>
  <joint name="elbow" type="revolute">
    <parent link="upper"/><child link="lower"/>
    <origin xyz="0.5 0 0" rpy="0 0.1 0"/><axis xyz="0 1 0"/>
    <limit lower="-2.5" upper="2.5" effort="1" velocity="1"/>
  </joint>
  <joint name="slide" type="prismatic">
    <parent link="lower"/><child link="hand"/>
    <origin xyz="0.4 0 0"/><axis xyz="1 0 0"/>
    <limit lower="0" upper="0.2" effort="1" velocity="1"/>
  </joint>
</robot>
"""

BVH = """HIERARCHY
ROOT Hips
{
  OFFSET 0 0 0
  CHANNELS 6 Xposition Yposition Zposition Zrotation Xrotation Yrotation
  JOINT Spine
  {
    OFFSET 0 1 0
    CHANNELS 3 Zrotation Xrotation Yrotation
    End Site
    {
      OFFSET 0 1 0
    }
  }
  JOINT Leg
  {
    OFFSET 0.5 -1 0
    CHANNELS 1 Xrotation
    End Site
    {
      OFFSET 0 -1 0
    }
  }
}
MOTION
Frames: 2
Frame Time: 0.0333333
0 0 0 0 0 0 0 0 0 0
1 2 3 10 20 30 40 50 60 70
"""

# pieces a careless or hostile file is made of
NASTY = ["", " ", "nan", "inf", "-inf", "1e308", "-1e308", "1e400", "0", "-0", "²", "1e30", "99999999999999999999",
         "abc", "{", "}", "<", ">", "&amp;", "&#0;", '"', "\t", "\r", "\r\n", "\n", "1.2.3", "0x10", "1_0",
         "JOINT", "End Site", "ROOT", "MOTION", "CHANNELS 3", "Frames:", "OFFSET", "<joint", "</robot>",
         '<?xml version="1.0" encoding="bogus"?>', "\x00", "\ufeff", "é"]


def _mutations(base: str):
    tokens = st.sampled_from(NASTY) | st.text(max_size=8) | st.floats(allow_nan=True).map(repr)
    return st.lists(st.tuples(st.sampled_from(["replace", "delete", "insert", "duplicate"]),
                              st.integers(0, len(base)), st.integers(0, 40), tokens), min_size=1, max_size=4)


def _mutate(base: str, ops) -> str:
    s = base
    for op, pos, n, tok in ops:
        pos = min(pos, len(s))
        if op == "replace":
            s = s[:pos] + tok + s[pos + n:]
        elif op == "delete":
            s = s[:pos] + s[pos + n:]
        elif op == "insert":
            s = s[:pos] + tok + s[pos:]
        else:
            s = s[:pos] + s[pos:pos + n] + s[pos:]
    return s


def _check_robot(robot):
    q = robot.neutral()
    assert np.all(np.isfinite(q))
    for f in robot.frame_names:
        assert np.all(np.isfinite(robot.fk(q, f)))


@FUZZ
@given(_mutations(URDF), st.booleans())
def test_fuzzed_urdf_is_a_robot_or_an_invkin_error(ops, as_bytes):
    text = _mutate(URDF, ops)
    doc = text.encode("utf-8", "surrogatepass") if as_bytes else text
    t0 = time.monotonic()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ik.InvkinWarning)
        try:
            robot = parse_urdf(doc)
        except ik.InvkinError:
            return
        finally:
            assert time.monotonic() - t0 < WALL
    _check_robot(robot)


@FUZZ
@given(_mutations(BVH))
def test_fuzzed_bvh_is_a_clip_or_an_invkin_error(tmp_path_factory, ops):
    path = tmp_path_factory.mktemp("fuzz") / "f.bvh"
    path.write_bytes(_mutate(BVH, ops).encode("utf-8", "surrogatepass"))
    t0 = time.monotonic()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ik.InvkinWarning)
        try:
            robot, clip = read_bvh(path)
        except ik.InvkinError:
            return
        finally:
            assert time.monotonic() - t0 < WALL
    assert np.all(np.isfinite(clip.frames)) and clip.frames.shape[1] == robot.dof
    _check_robot(robot)
    for q in clip.frames[:3]:
        assert np.all(np.isfinite(robot.fk(q, robot.frame_names[-1])))


# ------------------------------------------------------------------------------------ solve
ROBOTS = {}


def _robot(name):
    if name not in ROBOTS:
        ROBOTS[name] = {"planar2": lambda: ik.load_robot("planar2"), "seed8dof": lambda: ik.load_robot("seed8dof"),
                        "ball": lambda: ik.load_robot("tentacle", n=3, joint="ball")}[name]()
    return ROBOTS[name]


HOSTILE_NUMBERS = st.sampled_from([0.0, -0.0, 1e-300, 1e9, 1e10, 1e154, 1e300, -1e300, float("nan"), float("inf")])


def _maybe(valid, hostile):
    """Mostly valid values, sometimes hostile ones (so most examples reach the solver)."""
    return st.one_of(valid, valid, valid, hostile)


COORD = _maybe(st.floats(-3.0, 3.0), HOSTILE_NUMBERS)


@pytest.fixture(scope="module", autouse=True)
def _compiled():
    """Compile every method once, so the fuzz examples time solving, not compiling."""
    robot = _robot("seed8dof")
    goal = ik.Position(robot.frame_names[-1], robot.fk(robot.neutral(), robot.frame_names[-1])[:3, 3])
    for m in ik.methods():
        try:
            ik.solve(robot, goal, method=m, timeout=None, max_iterations=5)
        except ik.InvkinError:
            pass


def _fk_error(robot, goal, q):
    T = robot.fk(q, goal.frame)
    if isinstance(goal, ik.Position):
        return float(np.linalg.norm(T[:3, 3] - goal.p)), 0.0
    pe = float(np.linalg.norm(T[:3, 3] - goal.T[:3, 3]))
    c = (np.trace(T[:3, :3].T @ goal.T[:3, :3]) - 1.0) / 2.0
    return pe, float(np.arccos(np.clip(c, -1.0, 1.0)))


def _solve_checked(robot_name, method, kind, xyz, rotvec, weight, timeout, max_iterations, mode, seed, from_q=None):
    robot = _robot(robot_name)
    frame = robot.frame_names[-1]
    tol = 1e-6
    t0 = time.monotonic()
    try:
        if from_q is not None:  # a reachable target: FK of a random configuration
            T = robot.fk(robot.sample(rng=from_q), frame)
            goal = ik.Position(frame, T[:3, 3], weight=weight) if kind == "position" else ik.Pose(frame, T, weight=weight)
        elif kind == "position":
            goal = ik.Position(frame, xyz, weight=weight)
        else:
            T = np.eye(4)
            T[:3, :3] = ik.spatial.so3_exp(np.array(rotvec))
            T[:3, 3] = xyz
            goal = ik.Pose(frame, T, weight=weight)
        res = ik.solve(robot, goal, method=method, timeout=timeout, max_iterations=max_iterations, mode=mode,
                       seed=seed, position_tolerance=tol, rotation_tolerance=tol)
    except ik.InvkinError as e:
        event(f"refused: {type(e).__name__}")
        return e
    finally:
        assert time.monotonic() - t0 < WALL
    event(f"solved: {res.status.value}")
    assert np.all(np.isfinite(res.q)) and res.q.shape == (robot.dof,)
    assert np.isfinite(res.position_error) and np.isfinite(res.rotation_error)
    assert np.all(res.q >= robot.lower - 1e-9) and np.all(res.q <= robot.upper + 1e-9)
    bound = max_iterations if max_iterations is not None else (1000 if timeout is None else None)
    if bound is not None:
        assert res.iterations <= bound
    if res.success:
        pe, re_ = _fk_error(robot, goal, res.q)
        assert pe <= tol * (1 + 1e-6) + 1e-12 and re_ <= tol * (1 + 1e-6) + 1e-9, (pe, re_, res)
    return res


METHODS = ["lm", "pinv", "dls", "transpose", "ccd", "fabrik", "gauss-seidel"]
VALID = {"robot_name": st.sampled_from(["planar2", "seed8dof", "ball"]), "method": st.sampled_from(METHODS),
         "kind": st.sampled_from(["position", "pose"]),
         "xyz": st.tuples(st.floats(-3.0, 3.0), st.floats(-3.0, 3.0), st.floats(-3.0, 3.0)),
         "rotvec": st.tuples(st.floats(-3, 3), st.floats(-3, 3), st.floats(-3, 3)),
         "weight": st.sampled_from([1.0, 0.5, 2.0]), "timeout": st.sampled_from([None, 0.02]),
         "max_iterations": st.sampled_from([None, 1, 50, 200]), "mode": st.sampled_from(["speed", "distance"]),
         "seed": st.sampled_from([0, 7, 2**63 - 1, None]), "from_q": st.none() | st.integers(0, 10**6)}


@FUZZ
@given(**VALID)
def test_fuzzed_valid_solve_returns_a_truthful_result(**kw):
    """Valid input: no error but a method's stated limits (a SolverError: FABRIK takes no
    orientation goals), never NaN, success only when FK agrees, iterations bounded."""
    out = _solve_checked(**kw)
    assert not isinstance(out, ik.InvkinError) or type(out) is ik.SolverError, out


@FUZZ
@given(**{**VALID, "method": st.sampled_from(METHODS + ["analytic", "nope", None, 3]),
          "xyz": st.tuples(COORD, COORD, COORD),
          "weight": st.sampled_from([1.0, 0.0, -1.0, 1e300, float("nan"), "1", 1j]),
          "timeout": st.sampled_from([None, 0.02, 0.0, -1.0, float("inf"), "1"]),
          "max_iterations": st.sampled_from([None, 50, 0, -5, 2.5, True]),
          "mode": st.sampled_from(["speed", "distance", "fast", None]),
          "seed": st.sampled_from([0, None, -1, 1.5, "x", 2**64, float("inf"), True])})
def test_fuzzed_hostile_solve_is_a_truthful_result_or_an_invkin_error(**kw):
    """Hostile input: only InvkinError escapes; whatever returns obeys the same contract."""
    _solve_checked(**kw)
