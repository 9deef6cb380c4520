"""Files written by write_bvh / write_gltf read by an independent reader: Blender's own BVH and glTF
importers (``bpy``), joint positions compared with invkin's FK at every frame Blender shows.

Optional: set ``INVKIN_BPY_PYTHON`` to a Python with Blender's module (``python3 -m venv bpyenv &&
bpyenv/bin/pip install bpy``); without it the tests skip. Blender runs in that interpreter (its NumPy
need not be ours); positions come back as JSON.
"""
from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import textwrap
import warnings
from pathlib import Path

import numpy as np
import pytest

import invkin as ik

BPY_PYTHON = os.environ.get("INVKIN_BPY_PYTHON")
MOCAP = Path(ik.__file__).parent / "data" / "mocap"
WALKER = Path(__file__).parent / "data" / "gltf" / "walker.glb"

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not BPY_PYTHON, reason="INVKIN_BPY_PYTHON (a Python with bpy) is not set")]

_SCRIPT = textwrap.dedent('''
    import bpy, json, sys
    kind, path, out = sys.argv[1:4]
    bpy.ops.wm.read_factory_settings(use_empty=True)
    if kind == "bvh":  # the file's axes as they are (forward y, up z: no conversion)
        bpy.ops.import_anim.bvh(filepath=path, axis_forward="Y", axis_up="Z", update_scene_fps=False,
                                update_scene_duration=True)
    else:
        bpy.ops.import_scene.gltf(filepath=path)
    sc = bpy.context.scene
    arm = [o for o in sc.objects if o.type == "ARMATURE"][0]
    first, last = (int(round(v)) for v in arm.animation_data.action.frame_range)
    res = {"fps": sc.render.fps, "frames": list(range(first, last + 1)), "pos": {},
           "vertex_groups": sorted(len(o.vertex_groups) for o in sc.objects if o.type == "MESH")}
    for f in res["frames"]:
        sc.frame_set(f)
        for pb in arm.pose.bones:
            res["pos"].setdefault(pb.name, []).append(list(arm.matrix_world @ pb.head))
    json.dump(res, open(out, "w"))
''')


def _blender(tmp_path, kind, path):
    script = tmp_path / "read.py"
    script.write_text(_SCRIPT)
    out = tmp_path / "blender.json"
    r = subprocess.run([BPY_PYTHON, str(script), kind, str(path), str(out)], capture_output=True, text=True,
                       timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    return json.loads(out.read_text())


def test_a_planted_bvh_reads_the_same_in_blender(tmp_path):
    robot, clip = ik.read_bvh(MOCAP / "eyesjapan_mocapdata_sample_6ch.bvh")  # position channels on every joint
    clip = dataclasses.replace(clip, frames=clip.frames[:120])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ik.NoContactWarning)
        new, _ = ik.correct_clip(robot, clip, [ik.FootPlant("LeftAnkle"), ik.FootPlant("RightAnkle")])
    ik.write_bvh(tmp_path / "planted.bvh", robot, new)
    b = _blender(tmp_path, "bvh", tmp_path / "planted.bvh")
    assert len(b["frames"]) == new.n_frames
    for k, f in enumerate(b["frames"]):
        T = robot.fk_all(new.frames[f - b["frames"][0]])
        for name, P in b["pos"].items():
            np.testing.assert_allclose(P[k], T[name][:3, 3], atol=1e-4)


def test_a_gltf_written_into_its_source_and_a_new_one_read_the_same_in_blender(tmp_path):
    pytest.importorskip("pygltflib")
    robot, clip = ik.read_gltf(WALKER)
    new, _ = ik.correct_clip(robot, clip, [ik.FootPlant("LeftFoot"), ik.FootPlant("RightFoot")])
    placed, _ = ik.make_in_place(robot, new, remove_heading=True)
    ik.write_gltf(tmp_path / "planted.glb", robot, placed)
    rb, cb = ik.read_bvh(MOCAP / "fair1_wave_hello.bvh")  # Z-up, like Blender
    wave = dataclasses.replace(cb, frames=cb.frames[:100])
    ik.write_gltf(tmp_path / "wave.glb", rb, wave, up="z")
    # (file, robot, frames, their times, Blender's axes to the robot's, a skin with a mesh)
    cases = ((tmp_path / "planted.glb", robot, placed.frames, placed.times, lambda x, y, z: (x, z, -y), True),
             (tmp_path / "wave.glb", rb, wave.frames, np.arange(wave.n_frames) * wave.frame_time,
              lambda x, y, z: (x, y, z), False))
    for path, rob, frames, times, axes, skinned in cases:
        b = _blender(tmp_path, "gltf", path)
        if skinned:
            assert b["vertex_groups"][-1] == len(ik.read_gltf(path)[1].skin_joints)  # the skin's weights survived
        n = 0
        for k, f in enumerate(b["frames"]):
            i = int(np.argmin(np.abs(times - f / b["fps"])))
            if abs(times[i] - f / b["fps"]) > 1e-4:
                continue  # Blender's frame falls between two keys
            T = rob.fk_all(frames[i])
            size = max(float(np.linalg.norm(M[:3, 3])) for M in T.values())
            for name, P in b["pos"].items():  # glTF holds float32: a few 1e-5 of the figure's size
                np.testing.assert_allclose(axes(*P[k]), T[name][:3, 3], rtol=0, atol=1e-5 + 2e-5 * size)
                n += 1
        assert n > 100
