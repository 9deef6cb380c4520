"""Blender (the ``bpy`` package, headless) against invkin: joint positions after a BVH and a glTF round trip.

    PYTHONPATH=src:/path/to/bpy-site python benchmarks/blender_check.py

(``pip install --target DIR "bpy>=4.1,<4.3"`` gives a bpy for Python 3.11; it is not a dependency
of invkin.) Three files written by invkin are imported by Blender's own BVH and glTF importers, and
every bone's head (world, after Blender's Y-up → Z-up conversion ``(x, y, z) → (x, −z, y)``) is
compared, frame by frame, with invkin's FK of the clip it wrote:

* BVH round trip: the bundled CMU walk, ``read_bvh`` → ``write_bvh``;
* glTF write-back: ``tests/data/gltf/walker.glb`` read, every rotation perturbed (a corrected clip),
  ``write_gltf`` into the same file structure;
* BVH → new skeleton GLB: the CMU walk written by ``write_gltf`` (scale 0.056444, metres).

Prints the largest position difference per file, relative to the skeleton's size.
"""
from __future__ import annotations

import dataclasses
import os
import sys
import tempfile
from pathlib import Path

import numpy as np

import bpy  # noqa: E402 - the optional Blender module
import invkin as ik

os.environ.setdefault("INVKIN_COMPILE", "wait")  # time machine code, not first calls on the interpreter (invkin._tiers)

ROOT = Path(__file__).resolve().parent.parent
P = np.array([[1.0, 0, 0], [0, 0, -1.0], [0, 1.0, 0]])


def blender_heads(path: str, kind: str, frames, fps: float) -> dict:
    bpy.ops.wm.read_factory_settings(use_empty=True)
    scene = bpy.context.scene
    scene.render.fps = int(round(fps))
    if kind == "bvh":
        bpy.ops.import_anim.bvh(filepath=path, global_scale=1.0, frame_start=1, use_fps_scale=False,
                                rotate_mode="NATIVE", axis_forward="-Z", axis_up="Y")
    else:
        bpy.ops.import_scene.gltf(filepath=path)
    arm = next(o for o in scene.objects if o.type == "ARMATURE")
    out = {}
    for f in frames:
        if kind == "bvh":
            scene.frame_set(f + 1)
        else:
            t = f / fps * scene.render.fps  # the importer keys time s at frame s x render.fps
            scene.frame_set(int(t), subframe=t - int(t))
        for pb in arm.pose.bones:
            out.setdefault(pb.name, []).append(np.array(arm.matrix_world @ pb.head))
    return {k: np.array(v) for k, v in out.items()}


def compare(name, robot, clip, path, kind, frames, scale=1.0):
    heads = blender_heads(path, kind, frames, clip.fps)
    worst, n = 0.0, 0
    for bone, H in heads.items():
        if bone not in robot.frame_names:
            continue
        mine = robot.fk(np.ascontiguousarray(clip.frames[frames]), bone)[:, :3, 3] * scale @ P.T
        worst = max(worst, float(np.max(np.linalg.norm(H - mine, axis=1))))
        n += 1
    size = float(np.ptp(robot.fk(clip.frames[0], robot.frame_names[-1])[:3, 3])) or 1.0
    lens = [np.linalg.norm(o) for o in clip.offsets]
    size = sum(sorted(lens)[-6:]) * scale
    print(f"{name:<34} bones {n:>3}  frames {len(frames):>3}  max |Blender - invkin| {worst:.3g} "
          f"(x skeleton size {worst / size:.2g})")
    return worst / size


def main():
    tmp = tempfile.mkdtemp()
    walk = ROOT / "src/invkin/data/mocap/cmu_02_01_walk.bvh"
    rb, cb = ik.read_bvh(walk)
    p1 = os.path.join(tmp, "walk.bvh")
    ik.write_bvh(p1, rb, cb)
    r1, c1 = ik.read_bvh(p1)
    frames = list(range(0, c1.n_frames, 17))
    rel = [compare("BVH round trip (CMU walk)", r1, c1, p1, "bvh", frames)]

    rw, cw = ik.read_gltf(ROOT / "tests/data/gltf/walker.glb")
    rng = np.random.default_rng(0)
    f = np.array(cw.frames)
    f[:, cw.rotation_mask] += rng.normal(0, 0.1, (cw.n_frames, int(cw.rotation_mask.sum())))
    corrected = dataclasses.replace(cw, frames=f)
    p2 = os.path.join(tmp, "walker_corrected.glb")
    ik.write_gltf(p2, rw, corrected)
    rel.append(compare("glTF write-back (walker.glb)", rw, corrected, p2, "gltf", list(range(0, cw.n_frames, 3))))

    p3 = os.path.join(tmp, "walk.glb")
    ik.write_gltf(p3, rb, cb, scale=0.056444)
    rel.append(compare("BVH -> new glTF (CMU walk, metres)", rb, cb, p3, "gltf", list(range(0, cb.n_frames, 4))[:60],
                       scale=0.056444))
    print(f"bpy {bpy.app.version_string}; worst relative difference {max(rel):.2g}")
    return 0 if max(rel) < 1e-5 else 1


if __name__ == "__main__":
    sys.exit(main())
