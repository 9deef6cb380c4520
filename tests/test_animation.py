"""Clip correction (foot planting, reaching) on the bundled mocap clips; the ``invkin clip`` command."""
from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import invkin as ik
from invkin.animation.correct import _wrap

MOCAP = Path(ik.__file__).parent / "data" / "mocap"
WALK = MOCAP / "cmu_02_01_walk.bvh"
WAVE = MOCAP / "fair1_wave_hello.bvh"
CMU_UNIT_M = 0.056444  # CMU BVH length unit [m] (inches / 0.45)
FEET = ("LeftFoot", "RightFoot")


def sha(path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def track(robot, frames, frame):
    return robot.fk(np.ascontiguousarray(frames), frame)[:, :3, 3]


def chain_columns(clip, joints):
    cols = []
    col = 0
    for nm, ch in zip(clip.names, clip.channels):
        for c in ch:
            if nm in joints and c.endswith("rotation"):
                cols.append(col)
            col += 1
    return cols


@pytest.fixture(scope="module")
def walk():
    return ik.read_bvh(WALK)


@pytest.fixture(scope="module")
def walk_fixed(walk):
    robot, clip = walk
    before = clip.frames.copy()
    new, rep = ik.correct_clip(robot, clip, [ik.FootPlant(f) for f in FEET])
    assert np.array_equal(clip.frames, before)  # the input clip is not modified
    return robot, clip, new, rep


@pytest.fixture(scope="module")
def wave():
    return ik.read_bvh(WAVE)


# ------------------------------------------------------------------------------ foot planting
def test_up_axis_is_detected(walk, wave):
    assert ik.detect_up_axis(*walk) == "y"
    assert ik.detect_up_axis(*wave) == "z"


def test_contacts_on_the_walk_alternate_and_cover_the_stances(walk):
    robot, clip = walk
    left = ik.detect_contacts(robot, clip, "LeftFoot")
    right = ik.detect_contacts(robot, clip, "RightFoot")
    # about two gait cycles: three left stances, two right ones
    assert len(left) == 3 and len(right) == 2
    for c in left + right:
        assert len(c) * clip.frame_time >= 0.3  # a stance lasts a few tenths of a second at 120 fps
        assert 0 <= c.start < c.stop <= clip.n_frames
    # stances alternate: each right stance lies between the starts of two left ones
    for r, (a, b) in zip(right, zip(left, left[1:])):
        assert a.start < r.start < b.start
    # the contact frames are slow and low, the swing is not
    P = track(robot, clip.frames, "LeftFoot")
    v = np.linalg.norm(np.diff(P, axis=0), axis=1) / clip.frame_time
    inside = np.zeros(clip.n_frames - 1, dtype=bool)
    for c in left:
        inside[c.start:c.stop - 1] = True
    assert np.median(v[inside]) < 3.0 < np.median(v[~inside][5:])  # [units/s]


def test_foot_planting_on_the_walk_removes_sliding(walk_fixed):
    robot, clip, new, rep = walk_fixed
    assert rep.up == "y"
    for foot in FEET:
        cs = rep.contacts[foot]
        before = ik.foot_sliding(track(robot, clip.frames, foot), cs, clip.frame_time, "y")
        after = ik.foot_sliding(track(robot, new.frames, foot), cs, clip.frame_time, "y")
        assert before == pytest.approx(rep.sliding_before[foot]) and after == pytest.approx(rep.sliding_after[foot])
        assert before > 1.0  # [units/s] the mocap feet do slide
        assert after <= 0.5 * before  # the bar: at least halved
        assert after <= 0.01 * before  # what it actually does: the pinned feet stand still


def test_pinned_feet_stay_on_their_pins(walk_fixed):
    robot, clip, new, rep = walk_fixed
    few_mm = 0.003 / CMU_UNIT_M  # 3 mm in the file's units
    for foot in FEET:
        P = track(robot, new.frames, foot)
        P0 = track(robot, clip.frames, foot)
        for c, pin in zip(rep.contacts[foot], rep.pins[foot]):
            seg = P[c.start:c.stop]
            # held horizontally at the pin ...
            assert np.linalg.norm(seg[:, [0, 2]] - pin[[0, 2]], axis=1).max() <= few_mm, (foot, c)
            # ... at the pin's height, or the original's where the heel lifts above it (lift=True)
            want = np.maximum(pin[1], P0[c.start:c.stop, 1])
            assert np.abs(seg[:, 1] - want).max() <= few_mm
            assert all(rep.status[i] == "ok" for i in c.frames)
            # the pin is the contact's start, moved (1-3 cm here) only to stay within the leg's reach
            assert np.linalg.norm(pin - P0[c.start]) <= 0.05 / CMU_UNIT_M
            # moved horizontally: the foot keeps its height (raised to the floor if it was below)
            assert pin[1] == pytest.approx(max(P0[c.start, 1], rep.floor[foot]), abs=1e-9)
        assert rep.pin_error[foot] <= few_mm


def test_lift_false_holds_the_height_too(walk):
    robot, clip = walk
    short = dataclasses.replace(clip, frames=clip.frames[:100])
    new, rep = ik.correct_clip(robot, short, [ik.FootPlant("LeftFoot", lift=False)], up="y")
    (c,), (pin,) = rep.contacts["LeftFoot"], rep.pins["LeftFoot"]
    P = track(robot, new.frames[c.start:c.stop], "LeftFoot")
    assert np.linalg.norm(P - pin, axis=1).max() <= 1e-3
    assert rep.sliding_after["LeftFoot"] <= 0.01 * rep.sliding_before["LeftFoot"]


def test_feet_stay_above_the_floor(walk_fixed):
    robot, clip, new, rep = walk_fixed
    for foot in FEET:
        floor = rep.floor[foot]
        h0 = track(robot, clip.frames, foot)[:, 1]
        h1 = track(robot, new.frames, foot)[:, 1]
        assert np.all(h1 >= np.minimum(h0, floor) - 1e-6)  # the correction never sinks a foot
        for c in rep.contacts[foot]:
            assert np.all(h1[c.start:c.stop] >= floor - 1e-6)
        # the floor estimate is the foot's standing height, well below its swing
        assert np.percentile(h0, 5) == pytest.approx(floor) and floor < h0.max() - 2.0


def test_joint_steps_are_bounded_and_the_root_is_unchanged(walk_fixed):
    robot, clip, new, rep = walk_fixed
    rot = clip.rotation_mask
    corr = new.frames - clip.frames
    corr[:, rot] = _wrap(corr[:, rot])
    steps = np.abs(np.diff(np.vstack([np.zeros(clip.dof), corr]), axis=0))
    steps[:, rot] = np.abs(_wrap(steps[:, rot]))
    assert steps.max() <= rep.max_step * (1 + 1e-9)
    assert rep.max_step == pytest.approx(math.radians(5.0), rel=1e-4)  # 600 deg/s at 120 fps
    np.testing.assert_allclose(rep.step, steps.max(axis=1), atol=1e-12)
    # the corrected clip never jumps more than the original plus the bound
    jump = np.abs(_wrap(np.diff(new.frames[:, rot], axis=0)))
    jump0 = np.abs(_wrap(np.diff(clip.frames[:, rot], axis=0)))
    assert np.all(jump <= jump0 + rep.max_step + 1e-9)
    assert rep.max_joint_jump <= rep.max_joint_jump_original + rep.max_step
    # root translation and every channel outside the legs (hip, knee, ankle) are the original, bit for bit
    legs = chain_columns(clip, {"LeftUpLeg", "LeftLeg", "LeftFoot", "RightUpLeg", "RightLeg", "RightFoot"})
    others = np.setdiff1d(np.arange(clip.dof), legs)
    assert np.array_equal(new.frames[:, others], clip.frames[:, others])
    assert np.array_equal(new.frames[:, :3], clip.frames[:, :3])
    assert np.abs(corr[:, legs]).max() > math.radians(1.0)  # and the legs did move


def test_report_counts_and_summary(walk_fixed):
    robot, clip, new, rep = walk_fixed
    assert rep.n_frames == clip.n_frames == new.n_frames
    assert rep.count("missed") == 0 and rep.count("ok") > 0.9 * clip.n_frames
    ok = np.array([s == "ok" for s in rep.status])
    assert np.all(rep.error[ok] <= rep.tolerance * (1 + 1e-9))
    assert len(rep.discontinuities) == rep.count("clipped")
    text = rep.summary()
    assert "LeftFoot" in text and "sliding" in text and "->" in text


def test_corrected_clip_writes_and_reads_back(walk_fixed, tmp_path):
    robot, clip, new, rep = walk_fixed
    out = tmp_path / "fixed.bvh"
    ik.write_bvh(out, robot, new)
    robot2, back = ik.read_bvh(out)
    assert back.n_frames == clip.n_frames and back.channel_names == clip.channel_names
    np.testing.assert_allclose(back.frames, new.frames, atol=1e-9)


def test_pin_mean_and_explicit_contacts(walk):
    robot, clip = walk
    short = dataclasses.replace(clip, frames=clip.frames[:120])
    new, rep = ik.correct_clip(robot, short, [ik.FootPlant("LeftFoot", pin="mean", contacts=[(20, 60)])], up="y")
    assert rep.contacts["LeftFoot"] == (ik.Contact("LeftFoot", 20, 60),)
    P = track(robot, new.frames, "LeftFoot")
    P0 = track(robot, short.frames, "LeftFoot")
    pin = rep.pins["LeftFoot"][0]
    assert np.linalg.norm(P[20:60][:, [0, 2]] - pin[[0, 2]], axis=1).max() <= 1e-3
    assert np.abs(P[20:60, 1] - np.maximum(pin[1], P0[20:60, 1])).max() <= 1e-3
    # the mean of the contact, moved (if at all) only to stay reachable
    assert np.linalg.norm(rep.pins["LeftFoot"][0] - P0[20:60].mean(axis=0)) < 0.3
    assert rep.status[0] == "free" and rep.status[119] == "free"  # far from the contact: untouched
    assert np.array_equal(new.frames[:5], short.frames[:5])


def test_a_tight_step_bound_binds_and_is_reported(walk):
    robot, clip = walk
    short = dataclasses.replace(clip, frames=clip.frames[:100])
    bound = math.radians(0.05)
    new, rep = ik.correct_clip(robot, short, [ik.FootPlant("LeftFoot", contacts=[(10, 40)], pin="mean", blend=0)],
                               up="y", max_step=bound)
    assert rep.count("clipped") > 0 and rep.discontinuities
    f, raw = rep.discontinuities[0]
    assert rep.status[f] == "clipped" and raw > bound
    corr = _wrap(new.frames - short.frames)
    assert np.abs(np.diff(np.vstack([np.zeros(short.dof), corr]), axis=0)).max() <= bound * (1 + 1e-9)
    # the clipped frames are a delay: a frame with the pin met ends their run
    run_end = rep.status.index("ok", f)
    assert set(rep.status[f:run_end]) == {"clipped"} and run_end < 40


def test_a_bound_too_tight_to_reach_the_pin_before_the_contact_ends_is_missed(walk):
    """'clipped' promises the goal a few frames later; a bound that never gets there is 'missed'
    (and the CLI's exit code 1), not 'clipped' with the foot off its pin for the whole contact."""
    robot, clip = walk
    short = dataclasses.replace(clip, frames=clip.frames[:100])
    new, rep = ik.correct_clip(robot, short, [ik.FootPlant("LeftFoot", contacts=[(10, 40)], pin="mean", blend=0)],
                               up="y", max_step=math.radians(0.005))
    assert rep.status[10:40] == ("missed",) * 30
    assert np.all(rep.error[10:40] > rep.tolerance) and rep.pin_error["LeftFoot"] > 0.1
    assert rep.discontinuities  # the bound did bind
    assert set(rep.status[40:]) <= {"clipped", "free"}  # the release: no goal left to miss


def test_z_up_clip_feet(wave):
    robot, clip = wave
    short = dataclasses.replace(clip, frames=clip.frames[:240])
    new, rep = ik.correct_clip(robot, short, [ik.FootPlant(f) for f in FEET])
    assert rep.up == "z"
    for foot in FEET:
        assert rep.contacts[foot]  # a standing figure: the feet are down
        assert rep.sliding_after[foot] <= 0.5 * rep.sliding_before[foot]
        h = track(robot, new.frames, foot)[:, 2]
        assert np.all(h >= np.minimum(track(robot, short.frames, foot)[:, 2], rep.floor[foot]) - 1e-6)


# ------------------------------------------------------------------------------ reaching
def _circle(robot, clip, start, period=100, radius=3.0):
    hand = track(robot, clip.frames[start:start + 1], "RightHand")[0]
    centre = hand + np.array([0.0, -radius, 0.0])

    def target(i):
        a = 2 * math.pi * (i - start) / period
        return centre + radius * np.array([0.0, math.cos(a), math.sin(a)])

    return target


def test_reach_follows_a_moving_target(wave):
    robot, clip = wave
    short = dataclasses.replace(clip, frames=clip.frames[:520])
    frames = range(300, 420)
    target = _circle(robot, short, 300)
    new, rep = ik.correct_clip(robot, short, [ik.Reach("RightHand", target, frames=frames)])
    T = np.array([target(i) for i in frames])
    shoulder = track(robot, short.frames[300:420], "RightArm")
    arm = 5.92485 + 6.63013  # RightForeArm + RightHand offsets
    assert np.linalg.norm(T - shoulder, axis=1).max() < arm  # reachable
    H = track(robot, new.frames[300:420], "RightHand")
    err = np.linalg.norm(H - T, axis=1)
    assert err.max() <= 1e-3
    assert all(rep.status[i] == "ok" for i in frames)
    # blended in before the range (no jump), untouched far from it
    assert rep.status[0] == "free" and np.array_equal(new.frames[:200], short.frames[:200])
    # after the blend (30 frames) and the release of the arm's correction (30 more): the original again
    assert np.array_equal(new.frames[480:], short.frames[480:]) and rep.status[-1] == "free"
    assert rep.count("clipped") == 0
    corr = _wrap(new.frames - short.frames)
    assert np.abs(np.diff(corr, axis=0)).max() <= rep.max_step * (1 + 1e-9)
    # the rest of the body is the original
    arm_cols = chain_columns(short, {"RightArm", "RightForeArm"})
    others = np.setdiff1d(np.arange(short.dof), arm_cols)
    assert np.array_equal(new.frames[:, others], short.frames[:, others])


def test_reach_targets_as_arrays(wave):
    robot, clip = wave
    short = dataclasses.replace(clip, frames=clip.frames[:200])
    frames = range(120, 170)
    target = _circle(robot, short, 120, period=50, radius=2.0)
    T = np.array([target(i) for i in frames])
    a, _ = ik.correct_clip(robot, short, ik.Reach("RightHand", T, frames=frames))
    full = np.zeros((short.n_frames, 3))
    full[120:170] = T
    b, _ = ik.correct_clip(robot, short, ik.Reach("RightHand", full, frames=frames))
    c, _ = ik.correct_clip(robot, short, ik.Reach("RightHand", target, frames=frames))
    assert np.array_equal(a.frames, b.frames) and np.array_equal(a.frames, c.frames)


def test_unreachable_reach_is_reported_not_raised(wave):
    robot, clip = wave
    short = dataclasses.replace(clip, frames=clip.frames[:60])
    far = np.array([200.0, 0.0, 30.0])
    new, rep = ik.correct_clip(robot, short, ik.Reach("RightHand", lambda i: far, frames=range(20, 60), blend=0),
                               max_step=math.radians(30))
    assert rep.count("missed") > 0
    assert all(s in ("clipped", "missed") for s in rep.status[20:60])
    H = track(robot, new.frames[59:60], "RightHand")[0]
    S = track(robot, new.frames[59:60], "RightArm")[0]
    # stretched toward the target
    assert np.dot((H - S) / np.linalg.norm(H - S), (far - S) / np.linalg.norm(far - S)) > 0.999


# ------------------------------------------------------------------------------ detection details
def _foot_clip(y, x=None, frame_time=1 / 60):
    """A one-joint clip whose ROOT 'Foot' moves along (x, y, 0)."""
    F = len(y)
    x = np.zeros(F) if x is None else x
    frames = np.stack([x, y, np.zeros(F)], axis=1)
    return ik.Clip(frames=frames, frame_time=frame_time, names=("Foot", "Foot_End"), parents=(-1, 0),
                   offsets=np.array([[0.0, 0.0, 0.0], [0.0, 0.0, 1.0]]),
                   channels=(("Xposition", "Yposition", "Zposition"), ()), end_site=(False, True))


def test_detection_thresholds_hysteresis_and_min_duration():
    t = np.arange(180)
    y = np.where((t >= 60) & (t < 120), 1.0 - np.cos(2 * math.pi * (t - 60) / 60), 0.0)  # a step in the middle
    clip = _foot_clip(y)
    cs = ik.detect_contacts(None, clip, "Foot", up="y", height_threshold=0.1, speed_threshold=2.0, floor=0.0)
    assert len(cs) == 2
    assert cs[0].start == 0 and 55 <= cs[0].stop <= 66 and 114 <= cs[1].start <= 125 and cs[1].stop == 180
    # a slow creep whose speed wobbles around the threshold: one contact thanks to the hysteresis
    v = 1.0 + 0.3 * np.sin(t)  # [units/s] around a 1.1 threshold
    x = np.cumsum(v) / 60
    one = ik.detect_contacts(None, _foot_clip(np.zeros(180), x), "Foot", up="y", height_threshold=0.1,
                             speed_threshold=1.1, floor=0.0, hysteresis=1.5)
    many = ik.detect_contacts(None, _foot_clip(np.zeros(180), x), "Foot", up="y", height_threshold=0.1,
                              speed_threshold=1.1, floor=0.0, hysteresis=1.0, min_duration=0.0)
    assert len(one) == 1 and len(many) >= 1 and sum(len(c) for c in many) <= sum(len(c) for c in one)
    # a touch shorter than min_duration is dropped
    y2 = np.where((t >= 80) & (t < 83), 0.0, 1.0)
    assert ik.detect_contacts(None, _foot_clip(y2), "Foot", up="y", height_threshold=0.1, speed_threshold=100.0,
                              floor=0.0, min_duration=0.1) == []


def test_foot_sliding_helper():
    P = np.zeros((10, 3))
    P[:, 0] = np.arange(10) * 0.5  # 0.5 units per frame horizontally
    P[:, 1] = np.arange(10) * 10.0  # vertical motion does not count
    assert ik.foot_sliding(P, [(0, 10)], 0.1, "y") == pytest.approx(5.0)
    assert ik.foot_sliding(P, [ik.Contact("f", 2, 3)], 0.1, "y") == 0.0


# ------------------------------------------------------------------------------ bad input
def test_bad_goals_raise_clear_errors(walk, wave):
    robot, clip = walk
    short = dataclasses.replace(clip, frames=clip.frames[:30])
    with pytest.raises(ik.FrameError, match="LeftFoot"):
        ik.correct_clip(robot, short, [ik.FootPlant("LeftFot")])
    with pytest.raises(ik.FrameError, match="RightHand"):
        ik.correct_clip(robot, short, [ik.Reach("RightHnd", np.zeros((30, 3)))])
    with pytest.raises(ik.GoalError, match="finite"):
        ik.Reach("RightHand", np.full((30, 3), np.nan))
    with pytest.raises(ik.GoalError, match=r"\(N, 3\)"):
        ik.Reach("RightHand", np.zeros((30, 2)))
    with pytest.raises(ik.GoalError, match="10 rows"):
        ik.correct_clip(robot, short, [ik.Reach("RightHand", np.zeros((7, 3)), frames=range(0, 10))])
    with pytest.raises(ik.GoalError, match=r"targets\(3\)"):
        ik.correct_clip(robot, short, [ik.Reach("RightHand", lambda i: [0, 0, math.inf if i == 3 else 0])])
    with pytest.raises(ik.GoalError, match="past the clip"):
        ik.correct_clip(robot, short, [ik.Reach("RightHand", np.zeros((40, 3)), frames=range(0, 40))])
    with pytest.raises(ik.GoalError, match="range"):
        ik.Reach("RightHand", np.zeros((3, 3)), frames=[1, 2, 3])
    with pytest.raises(ik.GoalError, match="pin"):
        ik.FootPlant("LeftFoot", pin="end")
    with pytest.raises(ik.GoalError, match="overlap"):
        ik.FootPlant("LeftFoot", contacts=[(0, 10), (5, 12)])
    with pytest.raises(ik.ModelError, match="does not move"):
        ik.correct_clip(robot, short, [ik.FootPlant("LeftFoot", chain=("RightLeg",))])
    with pytest.raises(ik.GoalError, match="up"):
        ik.correct_clip(robot, short, [ik.FootPlant("LeftFoot")], up="w")
    with pytest.raises(ik.GoalError, match="max_step"):
        ik.correct_clip(robot, short, [ik.FootPlant("LeftFoot")], max_step=0.0)
    with pytest.raises(ik.GoalError, match="FootPlant or Reach"):
        ik.correct_clip(robot, short, [ik.Position("LeftFoot", [0, 0, 0])])
    with pytest.raises(ik.ModelError, match="skeleton"):
        ik.correct_clip(wave[0], short, [ik.FootPlant("LeftFoot")])


# ------------------------------------------------------------------------------ command line
def run_cli(*args, timeout=120):
    return subprocess.run([sys.executable, "-m", "invkin.cli", *map(str, args)], capture_output=True, text=True,
                          timeout=timeout)


@pytest.fixture(scope="module")
def short_walk(tmp_path_factory):
    """The walk's first 180 frames (1.5 s, one left and one right stance) as a file."""
    robot, clip = ik.read_bvh(WALK)
    path = tmp_path_factory.mktemp("clip") / "walk_short.bvh"
    ik.write_bvh(path, robot, dataclasses.replace(clip, frames=clip.frames[:180]))
    return path


@pytest.mark.slow  # subprocess
def test_cli_fix_feet_writes_a_clip_that_reads_back(short_walk, tmp_path):
    out = tmp_path / "fixed.bvh"
    h = sha(short_walk)
    r = run_cli("clip", "fix-feet", short_walk, out, "--feet", "LeftFoot", "RightFoot", "--up", "y",
                "--max-step", "5")
    assert r.returncode == 0, r.stderr
    assert sha(short_walk) == h  # the input is never modified
    line = r.stdout.strip().splitlines()[-1]
    assert line.startswith("fix-feet: sliding") and "->" in line and str(out) in line
    before, after = (float(v) for v in line.split("sliding ")[1].split(" units/s")[0].split(" -> "))
    assert after <= 0.5 * before
    assert "frame" in r.stderr  # the progress bar (tqdm on stderr)
    robot, clip = ik.read_bvh(out)
    _, orig = ik.read_bvh(short_walk)
    assert clip.n_frames == 180 and clip.channel_names == orig.channel_names
    np.testing.assert_array_equal(clip.frames[:, :3], orig.frames[:, :3])  # root translation
    assert not list(tmp_path.glob(".tmp-*"))  # atomic write left nothing behind


@pytest.mark.slow  # subprocess
def test_cli_fix_feet_json_and_defaults(short_walk, tmp_path):
    out = tmp_path / "fixed.bvh"
    r = run_cli("clip", "fix-feet", short_walk, out, "--no-progress", "--json", "--pin", "mean")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["feet"] == ["LeftFoot", "RightFoot"] and d["up"] == "y" and d["missed"] == 0
    for f in d["feet"]:
        assert d["sliding_after"][f] <= 0.5 * d["sliding_before"][f]
    assert r.stderr == ""


@pytest.mark.slow  # subprocess
def test_cli_clip_info(short_walk):
    r = run_cli("clip", "info", short_walk)
    assert r.returncode == 0, r.stderr
    assert "180 frames" in r.stdout and "120 fps" in r.stdout and "31 joints" in r.stdout and "96 channels" in r.stdout
    r = run_cli("clip", "info", WAVE, "--json")
    d = json.loads(r.stdout)
    assert d["frames"] == 839 and d["channels"] == 84 and d["joints"] == 27
    assert d["joint_list"][0] == {"name": "Hips", "parent": None,
                                  "channels": ["Xposition", "Yposition", "Zposition", "Xrotation", "Yrotation",
                                               "Zrotation"]}


def run_main(capsys, *args):
    """The command in this process (faster than a subprocess): (exit code, stdout, stderr)."""
    from invkin.cli import main

    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.slow  # the CLI
def test_cli_fix_feet_exits_1_when_the_bound_keeps_the_feet_off_their_pins(short_walk, tmp_path, capsys):
    out = tmp_path / "fixed.bvh"
    code, text, err = run_main(capsys, "clip", "fix-feet", short_walk, out, "--no-progress", "--max-step", "0.05")
    assert code == 1, err
    missed = int(text.split(" missed")[0].rsplit(" ", 1)[1])
    assert missed > 100 and out.exists()


@pytest.mark.slow  # the CLI
def test_cli_fix_feet_writes_bvh_only(short_walk, tmp_path, capsys):
    for name in ("fixed.glb", "fixed.txt", "fixed"):
        code, _, err = run_main(capsys, "clip", "fix-feet", short_walk, tmp_path / name, "--no-progress")
        assert code == 2 and "expected a .bvh path" in err and not (tmp_path / name).exists()


@pytest.mark.slow  # subprocess
def test_cli_malformed_bvh_exit_code_2(short_walk, tmp_path):
    bad = tmp_path / "bad.bvh"
    bad.write_text(short_walk.read_text().replace("OFFSET", "OFFSTE", 1))
    h = sha(bad)
    r = run_cli("clip", "fix-feet", bad, tmp_path / "o.bvh", "--no-progress")
    assert r.returncode == 2
    assert r.stderr.startswith("invkin: error:") and "line" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    assert sha(bad) == h and not (tmp_path / "o.bvh").exists()


@pytest.mark.slow  # subprocess
def test_cli_bad_input(short_walk, tmp_path, capsys):
    text = short_walk.read_text()
    trunc = tmp_path / "trunc.bvh"  # motion lines missing
    trunc.write_text("\n".join(text.splitlines()[:-20]) + "\n")
    code, _, err = run_main(capsys, "clip", "fix-feet", trunc, tmp_path / "o.bvh", "--no-progress")
    assert code == 2 and "truncated" in err and "line" in err
    code, _, err = run_main(capsys, "clip", "info", trunc)
    assert code == 2 and "line" in err
    # an unknown foot names the close ones
    code, _, err = run_main(capsys, "clip", "fix-feet", short_walk, tmp_path / "o.bvh", "--feet", "LeftFot",
                            "--no-progress")
    assert code == 2 and "'LeftFoot'" in err
    # OUT = IN is refused and leaves IN alone
    h = sha(short_walk)
    code, _, err = run_main(capsys, "clip", "fix-feet", short_walk, short_walk, "--no-progress")
    assert code == 2 and "input" in err and sha(short_walk) == h
    # missing file, bad option values, no subcommand
    assert run_main(capsys, "clip", "info", tmp_path / "none.bvh")[0] == 2
    assert run_main(capsys, "clip", "fix-feet", short_walk, tmp_path / "o.bvh", "--max-step", "-1")[0] == 2
    assert run_main(capsys, "clip", "fix-feet", short_walk, tmp_path / "o.bvh", "--up", "w")[0] == 2
    assert run_main(capsys, "clip")[0] == 2
    assert not (tmp_path / "o.bvh").exists()


def test_cli_clip_refuses_a_gltf_or_npz_file_by_name(tmp_path, capsys):
    # `invkin clip info x.glb` said "line 1: no MOTION section (truncated or not a BVH file?)"
    from invkin.cli import main

    for name in ("x.glb", "x.gltf", "x.npz"):
        p = tmp_path / name
        p.write_bytes(b"glTF")
        assert main(["clip", "info", str(p)]) == 2
        err = capsys.readouterr().err
        assert "invkin clip reads BVH files" in err and "MOTION" not in err
    assert main(["clip", "fix-feet", str(tmp_path / "x.glb"), str(tmp_path / "out.bvh")]) == 2
    assert "invkin clip reads BVH files" in capsys.readouterr().err


@pytest.mark.slow  # the CLI
def test_cli_fix_feet_summary_accounts_for_every_frame(tmp_path, capsys):
    """The summary line counted ok, clipped and missed frames only: on the Daz run it said
    "140 ok, 0 clipped, 0 missed of 174", leaving 34 frames (no foot in contact) unaccounted for."""
    code, text, err = run_main(capsys, "clip", "fix-feet", MOCAP / "cmu_02_03_run_dazfriendly.bvh",
                               tmp_path / "run.bvh", "--no-progress")
    assert code == 0, err
    counts = {w: int(text.split(f" {w}")[0].rsplit(" ", 1)[1]) for w in ("ok", "clipped", "missed", "free")}
    total = int(text.split(" of ")[-1].split(";")[0])
    assert counts["free"] > 0 and sum(counts.values()) == total == 174
