#!/usr/bin/env python3
"""A hand follows a moving target: the right hand of a waving figure draws circles, by IK.

    python examples/hand_reach.py [OUT_DIR]

Reads the bundled ``fair1_wave_hello.bvh`` (Z-up, 120 fps), and for frames 300–539 (2 s) makes the
right hand follow a target that runs around a circle (radius 2.5 units, one turn per second) in
front of the shoulder, with :func:`invkin.correct_clip` and a :class:`invkin.Reach` goal: only the
shoulder and elbow move, the rest of the body keeps its captured motion, and the hand eases in to
the circle over the 60 frames before frame 300 and back to its own motion over the 60 after frame
539 (``blend``). Writes into
OUT_DIR (default: the current folder):

* ``wave_reach.bvh`` — the corrected clip;
* ``hand_reach.png`` — the circle and the hand's path before and after (in the circle's plane),
  and the tracking error per frame.

Prints the tracking error (distance from the hand to the target) over the frame range: max, mean,
median, and the per-frame status counts.
"""
from __future__ import annotations

import math
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

import invkin as ik  # noqa: E402

CLIP = Path(ik.__file__).parent / "data" / "mocap" / "fair1_wave_hello.bvh"
START, STOP = 300, 540  # the frames where the hand follows the circle
RADIUS = 2.5            # [file units]
TURN = 120              # frames per turn (1 s at 120 fps)


def main(out_dir: Path) -> int:
    out_dir.mkdir(parents=True, exist_ok=True)
    robot, clip = ik.read_bvh(CLIP)
    frames = range(START, STOP)

    # the circle: centred at 75 % of the arm's length from the shoulder, toward the hand at START,
    # in the plane perpendicular to that direction
    S0 = robot.fk(clip.frames[START], "RightArm")[:3, 3]
    H0 = robot.fk(clip.frames[START], "RightHand")[:3, 3]
    arm = float(sum(np.linalg.norm(clip.offsets[clip.names.index(j)]) for j in ("RightForeArm", "RightHand")))
    u = (H0 - S0) / np.linalg.norm(H0 - S0)
    e1 = np.cross(u, [0.0, 0.0, 1.0])
    e1 /= np.linalg.norm(e1)
    e2 = np.cross(u, e1)
    centre = S0 + 0.75 * arm * u

    def target(i):
        a = 2.0 * math.pi * (i - START) / TURN
        return centre + RADIUS * (math.cos(a) * e1 + math.sin(a) * e2)

    fixed, rep = ik.correct_clip(robot, clip, [ik.Reach("RightHand", target, frames=frames, blend=60)])
    ik.write_bvh(out_dir / "wave_reach.bvh", robot, fixed)

    T = np.array([target(i) for i in frames])
    H_before = robot.fk(clip.frames, "RightHand")[:, :3, 3]
    H_after = robot.fk(fixed.frames, "RightHand")[:, :3, 3]
    shoulder = robot.fk(clip.frames[START:STOP], "RightArm")[:, :3, 3]
    err = np.linalg.norm(H_after[START:STOP] - T, axis=1)
    reach = np.linalg.norm(T - shoulder, axis=1)
    print(f"clip: {CLIP.name}, {clip.n_frames} frames at {clip.fps:.0f} fps; right arm length {arm:.3f} units")
    print(f"target: circle of radius {RADIUS} units, one turn per {TURN} frames, frames {START}-{STOP - 1}; "
          f"shoulder-to-target distance {reach.min():.3f}..{reach.max():.3f} units (reachable: < {arm:.3f})")
    print(rep.summary())
    st = [rep.status[i] for i in frames]
    print(f"status over the range: {st.count('ok')} ok, {st.count('clipped')} clipped, {st.count('missed')} missed "
          f"of {len(st)}")
    print(f"tracking error over frames {START}-{STOP - 1}: max {err.max():.3e} mean {err.mean():.3e} "
          f"median {np.median(err):.3e} units")
    before = np.linalg.norm(H_before[START:STOP] - T, axis=1)
    print(f"(the captured hand, for comparison: max {before.max():.3f} mean {before.mean():.3f} units from the "
          f"target)")
    others = np.setdiff1d(np.arange(clip.dof), [c for c, nm in enumerate(clip.channel_names)
                                                 if nm.split(".")[0] in ("RightArm", "RightForeArm")])
    print(f"channels other than the right shoulder and elbow unchanged: "
          f"{bool(np.array_equal(fixed.frames[:, others], clip.frames[:, others]))}")

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(12, 5))
    lo, hi = START - 90, STOP + 90

    def plane(P):
        d = P - centre
        return d @ e1, d @ e2

    ax1.plot(*plane(T), color="0.5", lw=6, alpha=0.35, label="target circle")
    ax1.plot(*plane(H_before[lo:hi]), color="tab:red", lw=1.0, label=f"hand before (frames {lo}-{hi - 1})")
    ax1.plot(*plane(H_after[lo:hi]), color="tab:blue", lw=1.2, label="hand after")
    ax1.set_aspect("equal")
    ax1.set_xlabel("e1 [units]")
    ax1.set_ylabel("e2 [units]")
    ax1.set_title("Right hand in the circle's plane")
    ax1.legend(fontsize=8, loc="upper right")
    f = np.arange(lo, hi)
    e_all = np.full(f.size, np.nan)
    valid = ~np.isnan(rep.error[lo:hi])
    e_all[valid] = rep.error[lo:hi][valid]
    ax2.semilogy(f, np.maximum(e_all, 1e-12), color="tab:blue", lw=1.0, label="|hand - target| (after)")
    ax2.axvspan(START, STOP - 1, color="0.92", lw=0, label="Reach frames")
    ax2.axhline(1e-3, color="0.4", ls=":", lw=0.8, label="1e-3 units")
    ax2.set_xlabel("frame")
    ax2.set_ylabel("error [units]")
    ax2.set_title("Tracking error (eases in before the range, out after it)")
    ax2.legend(fontsize=8, loc="upper right")
    fig.suptitle("invkin.correct_clip + Reach: the right hand of fair1_wave_hello follows a circle")
    fig.tight_layout()
    fig.savefig(out_dir / "hand_reach.png", dpi=100)
    plt.close(fig)
    print(f"wrote {out_dir / 'wave_reach.bvh'} and {out_dir / 'hand_reach.png'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path(".")))
