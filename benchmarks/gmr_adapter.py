"""Run GMR (General Motion Retargeting, github.com/YanjieZe/GMR, MIT) on one of our BVH clips.

Called by ``benchmarks/retarget.py --gmr DIR`` in an environment with mink, mujoco, scipy and daqp
(the peers environment), with invkin's ``src`` on PYTHONPATH::

    python benchmarks/gmr_adapter.py GMR_DIR CLIP.bvh OUT.npz

GMR_DIR: a checkout of the GMR repository (its package and assets; nothing of it is copied here).
The clip is read with invkin (any up axis, any length unit) and handed to GMR in the form its own
LAFAN1 loader produces: per frame ``{body: (position [m, Z-up], quaternion wxyz)}`` with the
Y-up → Z-up turn applied to the global joint rotations as that loader does, the skeleton scaled so
the hips stand 0.93 m above the feet at rest (LAFAN1's proportion; GMR's scale table then applies),
the feet as ``LeftFootMod`` (the ankle's position, the toe's rotation). Our skeletons' joints are
named after GMR's through the bundled invkin maps (same G1 links). Writes qpos (F, 7 + 29), the
MuJoCo joint names and the wall time of GMR's per-frame ``retarget`` calls.
"""
from __future__ import annotations

import sys
import time
import types

import numpy as np

# G1 link of the bundled invkin maps -> GMR's body name (GMR's bvh_to_g1.json)
GMR_NAME = {"pelvis": "Hips", "torso_link": "Spine2", "left_hip_roll_link": "LeftUpLeg",
            "left_knee_link": "LeftLeg", "left_ankle_roll_link": "LeftFootMod",
            "right_hip_roll_link": "RightUpLeg", "right_knee_link": "RightLeg",
            "right_ankle_roll_link": "RightFootMod", "left_shoulder_roll_link": "LeftArm",
            "left_elbow_link": "LeftForeArm", "left_wrist_yaw_link": "LeftHand",
            "right_shoulder_roll_link": "RightArm", "right_elbow_link": "RightForeArm",
            "right_wrist_yaw_link": "RightHand"}
A = np.array([[1.0, 0.0, 0.0], [0.0, 0.0, -1.0], [0.0, 1.0, 0.0]])  # GMR's LAFAN1 loader: Y-up -> Z-up


def human_frames(clip_path):
    import invkin as ik
    from invkin.animation.contacts import detect_up_axis
    from invkin.retarget.mapping import bundled_mapping

    sk, clip = ik.read_bvh(clip_path)
    g1 = ik.load_robot("g1")
    m = bundled_mapping(clip, g1)
    feet = [b.source for b in m.bodies if b.role == "foot"]
    if detect_up_axis(sk, clip, feet) == "z":
        sk, clip = ik.read_bvh(clip_path, up="y", file_up="z")
    names = {GMR_NAME[b.link]: b.source for b in m.bodies}
    q0 = np.where(clip.rotation_mask, 0.0, clip.frames[0])
    root = names["Hips"]
    h = sk.fk(q0, root)[1, 3] - np.mean([sk.fk(q0, f)[1, 3] for f in feet])
    s = 0.93 / h
    T = {k: sk.fk(clip.frames, v) for k, v in names.items()}
    for side in ("Left", "Right"):
        foot = names[f"{side}FootMod"]
        i = clip.names.index(foot)
        kids = [j for j, p in enumerate(clip.parents) if p == i and not clip.end_site[j]]
        toe = clip.names[kids[0]] if kids else foot
        Tt = sk.fk(clip.frames, toe)
        T[f"{side}FootMod"] = np.concatenate([Tt[:, :, :3], T[f"{side}FootMod"][:, :, 3:]], axis=2)
    from scipy.spatial.transform import Rotation as R

    frames = []
    for f in range(clip.n_frames):
        d = {}
        for k, Tk in T.items():
            quat = R.from_matrix(A @ Tk[f, :3, :3]).as_quat(scalar_first=True)
            d[k] = (A @ Tk[f, :3, 3] * s, quat)
        frames.append(d)
    return frames, clip.fps


def main(gmr_dir, clip_path, out):
    import os

    # the package's __init__ imports its viewer (imageio, opencv...): load the retargeting module only
    pkg = types.ModuleType("general_motion_retargeting")
    pkg.__path__ = [os.path.join(gmr_dir, "general_motion_retargeting")]
    sys.modules["general_motion_retargeting"] = pkg
    if "rich" not in sys.modules:  # GMR prints through rich; not needed here
        rich = types.ModuleType("rich")
        rich.print = print
        sys.modules["rich"] = rich
    from general_motion_retargeting.motion_retarget import GeneralMotionRetargeting

    frames, fps = human_frames(clip_path)
    gmr = GeneralMotionRetargeting(src_human="bvh", tgt_robot="unitree_g1", actual_human_height=1.75)
    qs = []
    t0 = time.perf_counter()
    for fr in frames:
        qs.append(gmr.retarget(fr))
    seconds = time.perf_counter() - t0
    import mujoco

    model = gmr.model
    names = [mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_JOINT, j) for j in range(model.njnt)]
    np.savez(out, qpos=np.array(qs), joint_names=np.array(names), seconds=seconds, fps=fps)


if __name__ == "__main__":
    main(*sys.argv[1:4])
