#!/usr/bin/env python3
"""Motion retargeting: the bundled CMU walk onto the bundled Unitree G1.

    python examples/retarget_g1.py [OUT_DIR]

Reads ``cmu_02_01_walk.bvh`` (CMU units, Y-up, 120 fps), retargets it onto G1 with the bundled
map (``ik.retarget``: limb lengths scaled per segment, feet held flat where the walker stands,
joint limits and velocity bounds hard, self-collision and the floor kept out) and writes into
OUT_DIR (default: the current folder):

* ``walk_g1.npz`` — the robot motion (root position, root_quat_wxyz, joint positions, names, fps);
* ``retarget_g1.png`` — source and robot side by side at five moments of the walk, the feet's
  contacts drawn as dots.

It prints the report: frames per second of the solve, foot sliding per contact, penetration,
self-collision frames, joint-limit violations and the largest joint step per frame.
"""
from __future__ import annotations

import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

import invkin as ik  # noqa: E402

out = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(".")
out.mkdir(parents=True, exist_ok=True)
clip_path = Path(ik.__file__).parent / "data" / "mocap" / "cmu_02_01_walk.bvh"
skeleton, clip = ik.read_bvh(clip_path, scale=0.056444, up="z")  # CMU units -> metres, Z-up
robot = ik.load_robot("g1")
motion = ik.retarget(skeleton, clip, robot)
motion.save(out / "walk_g1.npz")
rep = motion.report
print(f"{clip.n_frames} frames retargeted at {rep.frames_per_second:.0f} frames/s (one kernel call)")
for (link, s, e), slide in zip(rep.contacts, rep.foot_slide):
    print(f"  contact {link} frames {s}-{e}: slide {slide * 1000:.2f} mm")
print(f"max penetration {rep.max_penetration * 1000:.2f} mm, {rep.self_collision_frames} frames in self-collision, "
      f"{rep.limit_violations} limit violations, largest joint step {rep.max_joint_jump:.3f} rad/frame")

# the figure: stick figures of the source (left of each pair) and the robot (right), seen from the side
node = [skeleton.frame_index(n) for n in clip.names]  # clip joint -> skeleton node
src_bones = [(node[i], node[p]) for i, p in enumerate(clip.parents) if p >= 0]
Ts = skeleton.fk_all_array(clip.frames)  # (F, n, 4, 4)
rob_nodes = [i for i, nm in enumerate(robot.node_names) if robot.is_frame[i] and nm != "world"]
Tr = robot.fk_all_array(motion.q)
rob_bones = [(i, robot.frame_parent[i]) for i in rob_nodes if robot.frame_parent[i] > 0]
frames = np.linspace(40, clip.n_frames - 40, 5).astype(int)
fig, axes = plt.subplots(1, len(frames), figsize=(3.0 * len(frames), 4.2), sharey=True)
root_src = Ts[:, node[0], :3, 3]
root_rob = motion.q[:, :3]
for ax, f in zip(axes, frames):
    # side view: horizontal axis = the walking direction (world y here), vertical = z
    d = root_src[-1, :2] - root_src[0, :2]
    d = d / np.linalg.norm(d)
    for a, b in src_bones:
        pa, pb = Ts[f, a, :3, 3] - [*root_src[f, :2], 0], Ts[f, b, :3, 3] - [*root_src[f, :2], 0]
        ax.plot([pa[:2] @ d - 0.45, pb[:2] @ d - 0.45], [pa[2], pb[2]], color="#1f77b4", lw=2)
    for a, b in rob_bones:
        pa, pb = Tr[f, a, :3, 3] - [*root_rob[f, :2], 0], Tr[f, b, :3, 3] - [*root_rob[f, :2], 0]
        ax.plot([pa[:2] @ d + 0.45, pb[:2] @ d + 0.45], [pa[2], pb[2]], color="#d62728", lw=2.5)
    for (link, s, e) in rep.contacts:
        if s <= f < e:
            p = Tr[f, robot.frame_index(link), :3, 3] - [*root_rob[f, :2], 0]
            ax.plot(p[:2] @ d + 0.45, 0.0, "ko", ms=5)
    ax.axhline(0.0, color="0.6", lw=1)
    ax.set_title(f"frame {f}")
    ax.set_xlim(-1.1, 1.1)
    ax.set_ylim(-0.05, 1.85)
    ax.set_aspect("equal")
    ax.set_xticks([])
axes[0].set_ylabel("height [m]")
fig.suptitle("CMU 02_01 walk (blue, scaled to metres) retargeted onto Unitree G1 (red); dots: feet held in contact")
fig.tight_layout()
fig.savefig(out / "retarget_g1.png", dpi=110)
print(f"wrote {out / 'walk_g1.npz'} and {out / 'retarget_g1.png'}")
