#!/usr/bin/env python3
"""Foot planting on a real walk: remove the foot sliding of CMU 02_01 with IK.

    python examples/foot_planting.py [OUT_DIR]

Reads the bundled walk (``cmu_02_01_walk.bvh``: Y-up, 120 fps, about two gait cycles), detects
when each foot touches the floor, pins it there with IK on the hip and knee (the root and the rest
of the pose stay as captured), and writes into OUT_DIR (default: the current folder):

* ``walk_planted.bvh`` — the corrected clip;
* ``foot_planting.png`` — foot height and horizontal foot speed, before and after, with the
  detected contacts shaded: while a foot is in contact its speed is its sliding.

It prints the contacts and the sliding (mean horizontal foot speed over the contact frames)
before and after, per foot and overall, in the file's units per second and in cm/s (a CMU BVH
unit is 0.056444 m).
"""
from __future__ import annotations

import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

import invkin as ik  # noqa: E402

CLIP = Path(ik.__file__).parent / "data" / "mocap" / "cmu_02_01_walk.bvh"
UNIT_M = 0.056444  # one CMU BVH length unit [m]
FEET = ("LeftFoot", "RightFoot")


def horizontal_speed(P, frame_time, up=1):
    hz = [k for k in range(3) if k != up]
    v = np.linalg.norm(np.diff(P[:, hz], axis=0), axis=1) / frame_time
    return np.concatenate([v, v[-1:]])


def main(out_dir: Path) -> int:
    out_dir.mkdir(parents=True, exist_ok=True)
    robot, clip = ik.read_bvh(CLIP)
    fixed, rep = ik.correct_clip(robot, clip, [ik.FootPlant(f) for f in FEET])
    ik.write_bvh(out_dir / "walk_planted.bvh", robot, fixed)

    print(f"clip: {CLIP.name}, {clip.n_frames} frames at {clip.fps:.0f} fps, up axis {rep.up}")
    print(rep.summary())
    up = "xyz".index(rep.up)
    t = np.arange(clip.n_frames) * clip.frame_time
    fig, axes = plt.subplots(2, 2, figsize=(12, 6.5), sharex=True)
    for col, foot in enumerate(FEET):
        P0 = robot.fk(clip.frames, foot)[:, :3, 3]
        P1 = robot.fk(fixed.frames, foot)[:, :3, 3]
        cs = rep.contacts[foot]
        print(f"{foot}: contacts (frames) {[(c.start, c.stop) for c in cs]}; floor {rep.floor[foot]:.3f} units")
        b, a = rep.sliding_before[foot], rep.sliding_after[foot]
        print(f"{foot}: sliding before {b:.4f} units/s ({100 * b * UNIT_M:.2f} cm/s), after {a:.6f} units/s "
              f"({100 * a * UNIT_M:.4f} cm/s); pin error max {rep.pin_error[foot]:.2e} units")
        ax_h, ax_v = axes[0, col], axes[1, col]
        for ax in (ax_h, ax_v):
            for c in cs:
                ax.axvspan(c.start * clip.frame_time, (c.stop - 1) * clip.frame_time, color="0.9", lw=0)
        ax_h.plot(t, P0[:, up], label="before", color="tab:red", lw=1.2)
        ax_h.plot(t, P1[:, up], label="after", color="tab:blue", lw=1.0, ls="--")
        ax_h.axhline(rep.floor[foot], color="0.4", lw=0.8, ls=":", label="floor (estimated)")
        ax_h.set_title(f"{foot}: height (contacts shaded)")
        ax_h.set_ylabel("height [units]")
        v0 = horizontal_speed(P0, clip.frame_time, up)
        v1 = horizontal_speed(P1, clip.frame_time, up)
        ax_v.plot(t, v0, color="tab:red", lw=1.2, label=f"before (sliding {b:.2f} units/s)")
        ax_v.plot(t, v1, color="tab:blue", lw=1.0, ls="--", label=f"after (sliding {a:.2g} units/s)")
        ax_v.set_ylim(0, 12)
        ax_v.set_title(f"{foot}: horizontal speed (sliding inside the shaded contacts)")
        ax_v.set_ylabel("speed [units/s]")
        ax_v.set_xlabel("time [s]")
        ax_h.legend(loc="upper right", fontsize=8)
        ax_v.legend(loc="upper right", fontsize=8)
    fig.suptitle("Foot planting on CMU 02_01 walk (invkin.correct_clip): hip and knee by IK, root untouched")
    fig.tight_layout()
    fig.savefig(out_dir / "foot_planting.png", dpi=100)
    plt.close(fig)

    before = float(np.mean([rep.sliding_before[f] for f in FEET]))
    after = float(np.mean([rep.sliding_after[f] for f in FEET]))
    print(f"sliding overall: before {before:.4f} after {after:.6f} units/s "
          f"({100 * (1 - after / before):.1f}% less)")
    print(f"wrote {out_dir / 'walk_planted.bvh'} and {out_dir / 'foot_planting.png'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path(".")))
