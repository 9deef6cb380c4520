"""BVH reader/writer: the bundled real clips, an FK written here from scratch, round trips, errors."""
from __future__ import annotations

import dataclasses
import hashlib
import re
from pathlib import Path

import numpy as np
import pytest

import invkin as ik
from invkin.model import bvh as bvh_mod
from invkin.model.bvh import Clip, read_bvh, write_bvh

MOCAP = Path(ik.__file__).parent / "data" / "mocap"
CLIPS = sorted(MOCAP.glob("*.bvh"))

# (joints incl. ROOT, End Sites, channels, frames) as listed in ../shared/mocap/SOURCES.md
EXPECTED = {
    "cmu_02_01_walk.bvh": (31, 7, 96, 344),
    "cmu_49_04_run_leap.bvh": (31, 7, 96, 252),
    "cmu_02_03_run_dazfriendly.bvh": (43, 14, 132, 174),
    "cmu_131_01_walk_crouch_3dsmaxfriendly.bvh": (31, 7, 96, 994),
    "fair1_wave_hello.bvh": (27, 7, 84, 839),
    "eyesjapan_mocapdata_sample_6ch.bvh": (19, 5, 114, 743),
}

SMALL = (Path(__file__).parent / "data" / "two_joints.bvh").read_text()  # a root and one joint, two frames


@pytest.fixture(scope="module", params=CLIPS, ids=[p.name for p in CLIPS])
def clip_file(request):
    path = request.param
    robot, clip = read_bvh(path)
    return path, robot, clip


def sha(path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


# ---------------------------------------------------------------- an FK written here from scratch
def rot(axis: str, deg: float) -> np.ndarray:
    c, s = np.cos(np.radians(deg)), np.sin(np.radians(deg))
    if axis == "X":
        return np.array([[1, 0, 0], [0, c, -s], [0, s, c]])
    if axis == "Y":
        return np.array([[c, 0, s], [0, 1, 0], [-s, 0, c]])
    return np.array([[c, -s, 0], [s, c, 0], [0, 0, 1]])


def raw_motion(path) -> np.ndarray:
    """The motion numbers straight from the file text (degrees), without the library."""
    text = Path(path).read_bytes().decode()
    body = re.split(r"Frame Time:[^\n]*\n", text, maxsplit=1)[1]
    rows = [ln.split() for ln in body.splitlines() if ln.strip()]
    return np.array(rows, dtype=float)


def scratch_fk(clip: Clip, values: np.ndarray) -> dict:
    """World position and rotation of every BVH node for one motion row (file values)."""
    out = {}
    col = 0
    for i, name in enumerate(clip.names):
        chs = clip.channels[i]
        vals = dict(zip(chs, values[col:col + len(chs)]))
        col += len(chs)
        p = np.array(clip.offsets[i], dtype=float)
        for k, ax in enumerate("XYZ"):
            if f"{ax}position" in vals:  # position channels replace the offset
                p[k] = vals[f"{ax}position"]
        R = np.eye(3)
        for c in chs:
            if c.endswith("rotation"):
                R = R @ rot(c[0], vals[c])
        if clip.parents[i] < 0:
            out[name] = (p, R)
        else:
            pp, pR = out[clip.names[clip.parents[i]]]
            out[name] = (pp + pR @ p, pR @ R)
    return out


# ---------------------------------------------------------------- the bundled clips
def test_every_bundled_clip_is_listed():
    assert {p.name for p in CLIPS} == set(EXPECTED)


def test_clip_loads_with_the_counts_of_its_header(clip_file):
    path, robot, clip = clip_file
    joints, ends, channels, frames = EXPECTED[path.name]
    text = path.read_bytes().decode()
    assert len(re.findall(r"^\s*(?:ROOT|JOINT)\s", text, re.M)) == joints
    assert sum(int(n) for n in re.findall(r"CHANNELS\s+(\d+)", text)) == channels
    assert len(clip.joint_names) == joints and sum(clip.end_site) == ends
    assert robot.dof == clip.dof == channels
    assert clip.frames.shape == (frames, channels)
    assert not clip.frames.flags.writeable and not clip.offsets.flags.writeable
    assert robot.joint_names == clip.channel_names
    assert set(robot.frame_names) == set(clip.names)
    assert len(robot.frame_names) == joints + ends


def test_fk_matches_an_independent_euler_fk(clip_file):
    path, robot, clip = clip_file
    raw = raw_motion(path)
    assert raw.shape == clip.frames.shape
    F = clip.n_frames
    for f in sorted({0, F // 3, F // 2, F - 1}):
        ref = scratch_fk(clip, raw[f])
        Ts = robot.fk_all(clip.frames[f])
        for name in clip.names:
            p, R = ref[name]
            np.testing.assert_allclose(Ts[name][:3, 3], p, atol=1e-9 * max(1.0, np.abs(p).max()))
            np.testing.assert_allclose(Ts[name][:3, :3], R, atol=1e-9)
    # single-frame fk on a named foot, batched fk over all frames
    foot = next(n for n in ("LeftFoot", "LeftAnkle", "lFoot") if n in clip.names)
    T_batch = robot.fk(clip.frames, foot)
    assert T_batch.shape == (F, 4, 4)
    np.testing.assert_allclose(T_batch[F // 2], robot.fk(clip.frames[F // 2], foot), atol=1e-12)


def test_round_trip_reproduces_hierarchy_and_frames(clip_file, tmp_path):
    path, robot, clip = clip_file
    before = sha(path)
    out = tmp_path / path.name
    write_bvh(out, robot, clip)
    robot2, clip2 = read_bvh(out)
    assert sha(path) == before  # the input file is never modified
    assert clip2.names == clip.names and clip2.parents == clip.parents
    assert clip2.channels == clip.channels and clip2.end_site == clip.end_site
    np.testing.assert_array_equal(clip2.offsets, clip.offsets)
    assert clip2.frame_time == clip.frame_time
    assert robot2.joint_names == robot.joint_names and robot2.node_names == robot.node_names
    rot = clip.rotation_mask
    d = np.abs(clip2.frames - clip.frames)
    assert np.degrees(d[:, rot]).max(initial=0.0) < 1e-6
    assert d[:, ~rot].max(initial=0.0) < 1e-6
    np.testing.assert_array_equal(robot2.origin, robot.origin)
    assert list(tmp_path.iterdir()) == [out]  # no temporary file left behind


def test_input_file_is_unchanged_by_reading():
    src = CLIPS[0]
    before = sha(src)
    read_bvh(src)
    ik.load_robot(src)
    assert sha(src) == before


def test_non_root_position_channels_replace_the_offset():
    robot, clip = read_bvh(MOCAP / "eyesjapan_mocapdata_sample_6ch.bvh")
    Ts = robot.fk_all(clip.frames[0])  # frame 0 is a T-pose
    height = Ts["Head"][1, 3] - Ts["LeftAnkle"][1, 3]
    assert 54.0 < height < 57.0  # adding the channels to the offsets would give about 110
    np.testing.assert_allclose(Ts["Hips"][:3, 3], clip.frames[0, :3])  # root: channels are absolute


def test_load_robot_reads_bvh_paths():
    robot = ik.load_robot(MOCAP / "cmu_02_01_walk.bvh")
    assert robot.dof == 96 and "LeftFoot" in robot.frame_names
    assert "Hips.Xposition" in robot.joint_names and "Hips.Zrotation" in robot.joint_names


def test_channel_nodes_are_internal_and_the_named_node_has_the_full_rotation(tmp_path):
    p = tmp_path / "small.bvh"
    p.write_text(SMALL)
    robot, clip = read_bvh(p)
    assert robot.frame_names == ("Hips", "Spine", "Spine_End")
    assert robot.joint_names == ("Hips.Xposition", "Hips.Yposition", "Hips.Zposition", "Hips.Zrotation",
                                 "Hips.Xrotation", "Hips.Yrotation", "Spine.Zrotation", "Spine.Xrotation",
                                 "Spine.Yrotation")
    q = clip.frames[1]
    np.testing.assert_allclose(q[3:], np.radians([10, 20, 30, 40, 50, 60]))
    T = robot.fk(q, "Hips")
    np.testing.assert_allclose(T[:3, :3], rot("Z", 10) @ rot("X", 20) @ rot("Y", 30), atol=1e-12)
    np.testing.assert_allclose(T[:3, 3], [1, 2, 3])
    Ts = robot.fk(q, "Spine")
    np.testing.assert_allclose(Ts[:3, 3], [1, 2, 3] + T[:3, :3] @ [0, 1, 0], atol=1e-12)


def test_position_channels_listed_after_rotations_still_move_along_the_parent_axes(tmp_path):
    text = SMALL.replace("CHANNELS 6 Xposition Yposition Zposition Zrotation Xrotation Yrotation",
                         "CHANNELS 6 Zrotation Xrotation Yrotation Xposition Yposition Zposition")
    p = tmp_path / "late_pos.bvh"
    p.write_text(text.replace("1 2 3 10 20 30 40", "90 0 0 1 2 3 40"))
    robot, clip = read_bvh(p)
    assert robot.joint_names[:4] == ("Hips.Zrotation", "Hips.Xrotation", "Hips.Yrotation", "Hips.Xposition")
    T = robot.fk(clip.frames[1], "Hips")
    np.testing.assert_allclose(T[:3, 3], [1, 2, 3], atol=1e-12)
    np.testing.assert_allclose(T[:3, :3], rot("Z", 90), atol=1e-12)


@pytest.mark.parametrize("variant", ["crlf", "cr", "mixed", "tabs", "no_indent", "trailing", "leading",
                                     "frames_tab", "exp3", "no_leading_zero", "blank_tail"])
def test_format_variants_parse_to_the_same_clip(tmp_path, variant):
    ref = read_bvh(_write(tmp_path / "ref.bvh", SMALL))[1]
    lines = SMALL.split("\n")
    if variant == "crlf":
        text = SMALL.replace("\n", "\r\n")
    elif variant == "cr":
        text = SMALL.replace("\n", "\r")
    elif variant == "mixed":
        text = "".join(ln + ("\r\n" if k % 3 else "\n") for k, ln in enumerate(lines[:-1]))
    elif variant == "tabs":
        text = SMALL.replace("  ", "\t")
    elif variant == "no_indent":
        text = "\n".join(ln.strip() for ln in lines)
    elif variant == "trailing":
        text = "\n".join(ln + " \t" for ln in lines)
    elif variant == "leading":
        text = "\n".join(" " + ln for ln in lines)
    elif variant == "frames_tab":
        text = SMALL.replace("Frames: 2", "Frames:\t2").replace("Frame Time: 0", "Frame Time:\t0")
    elif variant == "exp3":
        text = SMALL.replace("1 2 3 10", "1e+000 2.0E0 300e-002 1.0e001")
    elif variant == "no_leading_zero":
        text = SMALL.replace("0.0333333", ".0333333")
    else:
        text = SMALL + "\n\n  \n"
    clip = read_bvh(_write(tmp_path / "v.bvh", text))[1]
    assert clip.names == ref.names and clip.channels == ref.channels
    np.testing.assert_allclose(clip.frames, ref.frames, rtol=1e-15)
    assert clip.frame_time == pytest.approx(ref.frame_time)


def _write(path: Path, text: str) -> Path:
    path.write_bytes(text.encode())
    return path


# ---------------------------------------------------------------- malformed files
def _lines_replaced(old: str, new: str) -> str:
    assert old in SMALL
    return SMALL.replace(old, new, 1)


MALFORMED = {
    # name: (text, line number the message must name, fragment of the message)
    "missing_close_brace": (_lines_replaced("    }\n  }\n}\n", "    }\n  }\n"), 15, "'}'"),
    "extra_close_brace": (_lines_replaced("}\nMOTION", "}\n}\nMOTION"), 16, "brace"),
    "missing_open_brace": (_lines_replaced("JOINT Spine\n  {\n", "JOINT Spine\n"), 7, "'{'"),
    "unknown_channel": (_lines_replaced("Zrotation Xrotation Yrotation\n    End",
                                        "Zrotation Wrotation Yrotation\n    End"), 9, "Wrotation"),
    "channel_count_above_names": (_lines_replaced("CHANNELS 3 Zrotation", "CHANNELS 4 Zrotation"), 9,
                                  "CHANNELS 4 in 'Spine' but the line lists 3 channel names (Zrotation Xrotation "
                                  "Yrotation); the count and the names disagree"),
    "channel_count_below_names": (_lines_replaced("CHANNELS 3 Zrotation", "CHANNELS 2 Zrotation"), 9,
                                  "CHANNELS 2 in 'Spine' but the line lists 3 channel names"),
    "bad_channel_count": (_lines_replaced("CHANNELS 3 Zrotation", "CHANNELS three Zrotation"), 9, "count"),
    "short_motion_line": (_lines_replaced("1 2 3 10 20 30 40 50 60", "1 2 3 10 20 30 40 50"), 20,
                          "8 numbers"),
    "long_motion_line": (_lines_replaced("0 0 0 0 0 0 0 0 0", "0 0 0 0 0 0 0 0 0 0"), 19, "10 numbers"),
    "frames_two_above_lines": (_lines_replaced("Frames: 2", "Frames: 4"), 17, "truncated"),
    "frames_not_ascii_digits": (_lines_replaced("Frames: 2", "Frames: \u00b2"), 17, "frame count"),
    "frames_exponent": (_lines_replaced("Frames: 2", "Frames: 1e30"), 17, "frame count"),
    "frames_below_lines": (_lines_replaced("Frames: 2", "Frames: 1"), 17, "Frames"),
    "non_numeric_motion": (_lines_replaced("1 2 3 10", "1 2 abc 10"), 20, "abc"),
    "nan_in_motion": (_lines_replaced("1 2 3 10", "1 2 nan 10"), 20, "nan"),
    "malformed_number": (_lines_replaced("1 2 3 10", "1 2 3.4.5 10"), 20, "3.4.5"),
    "non_numeric_offset": (_lines_replaced("OFFSET 0 1 0\n    CHANNELS", "OFFSET 0 x 0\n    CHANNELS"), 8, "x"),
    "short_offset": (_lines_replaced("OFFSET 0 1 0\n    CHANNELS", "OFFSET 0 1\n    CHANNELS"), 9, "OFFSET"),
    "missing_motion": (SMALL.split("MOTION")[0], 16, "MOTION"),
    "truncated_in_hierarchy": ("\n".join(SMALL.split("\n")[:8]), 8, "MOTION"),
    "truncated_in_motion": (SMALL[:-6], 20, "numbers"),
    "missing_frames_line": (_lines_replaced("Frames: 2\n", ""), 17, "Frames"),
    "bad_frame_time": (_lines_replaced("Frame Time: 0.0333333", "Frame Time: fast"), 18, "Frame Time"),
    "no_hierarchy_keyword": (_lines_replaced("HIERARCHY\n", ""), 1, "HIERARCHY"),
    "duplicate_joint": (_lines_replaced("JOINT Spine", "JOINT Hips"), 6, "duplicate"),
    "end_site_with_channels": (_lines_replaced("OFFSET 0 1 0\n    }", "OFFSET 0 1 0\n CHANNELS 1 Xrotation\n    }"),
                               13, "End Site"),
    "garbage_keyword": (_lines_replaced("JOINT Spine", "BONE Spine"), 6, "BONE"),
}


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_malformed_file_raises_model_error_with_file_and_line(tmp_path, case):
    text, line, fragment = MALFORMED[case]
    path = _write(tmp_path / f"{case}.bvh", text)
    with pytest.raises(ik.ModelError) as e:
        read_bvh(path)
    msg = str(e.value)
    assert f"{case}.bvh" in msg
    assert f"line {line}:" in msg, msg
    assert fragment.lower() in msg.lower(), msg


@pytest.mark.parametrize("kw, fragment", [
    ({"scale": "abc"}, "read_bvh: scale: expected a finite number > 0, got 'abc'"),
    ({"scale": 0}, "read_bvh: scale: expected a finite number > 0, got 0"),
    ({"scale": None}, "read_bvh: scale: expected a finite number > 0, got None"),
    ({"up": "abc"}, "read_bvh: up: up axis must be one of x, y, z, -x, -y, -z, got 'abc'"),
    ({"file_up": 3}, "read_bvh: file_up: up axis must be one of"),
])
def test_bad_scale_or_up_names_the_argument(tmp_path, kw, fragment):
    path = _write(tmp_path / "s.bvh", SMALL)
    with pytest.raises(ik.ModelError) as e:
        read_bvh(path, **kw)
    assert fragment in str(e.value)
    robot, clip = read_bvh(path)
    with pytest.raises(ik.ModelError) as e:
        write_bvh(tmp_path / "o.bvh", robot, clip, **kw)
    assert fragment.replace("read_bvh", "write_bvh") in str(e.value)
    assert not (tmp_path / "o.bvh").exists()


def test_frames_count_one_above_the_lines_reads_the_lines_with_a_warning(tmp_path):
    # Blender reads every motion line whatever Frames: says; exporters that count one too many exist
    path = _write(tmp_path / "plus_one.bvh", _lines_replaced("Frames: 2", "Frames: 3"))
    with pytest.warns(ik.InvkinWarning, match="Frames: 3, but the file has 2"):
        robot, clip = read_bvh(path)
    ref = read_bvh(_write(tmp_path / "exact.bvh", SMALL))[1]
    assert clip.n_frames == 2
    np.testing.assert_array_equal(clip.frames, ref.frames)


def test_a_name_after_end_site_is_ignored_as_blender_does(tmp_path):
    path = _write(tmp_path / "named_end.bvh", _lines_replaced("    End Site\n", "    End Site HeadTop\n"))
    robot, clip = read_bvh(path)
    ref_robot, ref = read_bvh(_write(tmp_path / "plain.bvh", SMALL))
    assert clip.names == ref.names and "Spine_End" in robot.frame_names
    np.testing.assert_array_equal(robot.fk(clip.frames[1], "Spine_End"), ref_robot.fk(ref.frames[1], "Spine_End"))


def test_files_over_the_size_cap_are_refused(tmp_path, monkeypatch):
    path = _write(tmp_path / "big.bvh", SMALL)
    monkeypatch.setattr(bvh_mod, "MAX_BVH_BYTES", 100)
    with pytest.raises(ik.ModelError, match="limit"):
        read_bvh(path)


def test_missing_file_is_a_model_error(tmp_path):
    with pytest.raises(ik.ModelError, match="nope.bvh"):
        read_bvh(tmp_path / "nope.bvh")


# ---------------------------------------------------------------- Clip and write_bvh
def test_clip_replace_checks_the_frame_shape(tmp_path):
    robot, clip = read_bvh(_write(tmp_path / "s.bvh", SMALL))
    new = dataclasses.replace(clip, frames=np.zeros((5, clip.dof)))
    assert new.n_frames == 5 and not new.frames.flags.writeable
    with pytest.raises(ik.ModelError, match="shape"):
        dataclasses.replace(clip, frames=np.zeros((5, clip.dof + 1)))
    with pytest.raises(ik.ModelError, match="finite"):
        dataclasses.replace(clip, frames=np.full((1, clip.dof), np.nan))


def test_write_bvh_refuses_a_robot_of_another_skeleton(tmp_path):
    robot, clip = read_bvh(_write(tmp_path / "s.bvh", SMALL))
    with pytest.raises(ik.ModelError, match="does not match"):
        write_bvh(tmp_path / "o.bvh", ik.load_robot("planar2"), clip)
    assert not (tmp_path / "o.bvh").exists()


def test_write_bvh_of_edited_frames_reads_back(tmp_path):
    robot, clip = read_bvh(_write(tmp_path / "s.bvh", SMALL))
    q = np.random.default_rng(0).uniform(-3, 3, size=(4, clip.dof))
    write_bvh(tmp_path / "o.bvh", robot, dataclasses.replace(clip, frames=q))
    robot2, clip2 = read_bvh(tmp_path / "o.bvh")
    np.testing.assert_allclose(clip2.frames, q, rtol=1e-13, atol=1e-13)
    np.testing.assert_allclose(robot2.fk(clip2.frames, "Spine_End"), robot.fk(q, "Spine_End"), atol=1e-12)


@pytest.mark.parametrize("name", ["x\ny", "", " lead", "Left  Hand", "tab\tname", "a { b", "Hips"])
def test_write_refuses_joint_names_that_would_not_read_back(tmp_path, name):
    """write_bvh wrote a name with a line break or an empty name into a file that did not read back
    ("line 7: expected '{'"), and a name with a run of spaces or a leading space came back as another
    name; a name used twice wrote a file the reader refuses. Now a ModelError names it, nothing written."""
    robot, clip = read_bvh(_write(tmp_path / "s.bvh", SMALL))
    bad = dataclasses.replace(clip, names=(clip.names[0], name) + clip.names[2:])
    with pytest.raises(ik.ModelError, match="write_bvh: joint name"):
        write_bvh(tmp_path / "out.bvh", None, bad)
    assert not (tmp_path / "out.bvh").exists()
    ok = dataclasses.replace(clip, names=(clip.names[0], "a{b c}") + clip.names[2:])
    write_bvh(tmp_path / "ok.bvh", None, ok)
    assert read_bvh(tmp_path / "ok.bvh")[1].names[1] == "a{b c}"


def test_channels_after_the_children_are_refused_not_misread(tmp_path):
    """A CHANNELS line after a joint's children put the motion columns in another order than the
    file's: the parent took the first value on each line although the child's CHANNELS came first in
    the file (Blender reads them in file order). The reader refuses OFFSET there already; CHANNELS too."""
    text = ("HIERARCHY\nROOT a\n{\nOFFSET 0 0 0\nJOINT b\n{\nOFFSET 0 1 0\nCHANNELS 1 Xrotation\nEnd Site\n{\n"
            "OFFSET 0 1 0\n}\n}\nCHANNELS 1 Zrotation\n}\nMOTION\nFrames: 1\nFrame Time: 0.1\n10 20\n")
    with pytest.raises(ik.ModelError, match=r"line 14: CHANNELS of 'a' after its children"):
        read_bvh(_write(tmp_path / "late.bvh", text))
