#!/usr/bin/env python3
"""A humanoid on a floating base stands on both feet, keeps its balance and reaches with one hand.

    python examples/humanoid_reach.py [OUT_DIR]

Loads the bundled Unitree G1 (29 joints on a free joint ``root_joint``: q starts with the pelvis
position [m] and rotation vector [rad] in the world) in a relaxed stance (knees bent: straight
knees are a singular start, where no first-order step can lower the hips). Three hard goals and
one soft one, solved by the default ``lm``:

* both feet held where they stand (``Pose(..., hard=True)``);
* the centre of mass over the point between the feet (``CenterOfMass(p, axes="xy", hard=True)``):
  the robot must not tip over while it leans;
* the right hand reaching for targets ever further forward and down, up to 30 cm forward and
  50 cm down from where it hangs (a soft ``Position``): out of reach of the arm alone, so the
  pelvis comes down, the legs bend and the hips go back to keep the centre of mass in place;
* a light ``Posture`` toward the stance (weight 0.05), a regulariser: joints that no goal needs
  stay near the stance, and a solve whose goals are met and whose posture has settled is
  ``converged``.

Each solve starts from the previous answer (``q0``), so the motion is continuous. A last target
1 m in front of the hand is out of reach with the feet and the balance kept: the result says
``unreachable``, ``Result.goals_met`` says which goals were met (the feet and the balance), and
the hand stops as close as it can.

Writes ``humanoid_reach.npz`` (the targets, the configurations, the centre of mass) and
``humanoid_reach.png`` (side views of the poses) into OUT_DIR (default: the current folder), and
prints, per target, the status, the goals met, the hand, feet and balance errors and the pelvis
height.
"""
from __future__ import annotations

import sys
import time
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

import invkin as ik  # noqa: E402

FEET = ("left_ankle_roll_link", "right_ankle_roll_link")
HAND = "right_rubber_hand"
STEPS = 8                                  # targets from the hand's place to the farthest one
REACH = np.array([0.30, 0.0, -0.50])       # [m] farthest target, relative to the hanging hand
TOO_FAR = np.array([1.0, 0.0, 0.0])        # [m] the last target, relative to the hanging hand
POSTURE = 0.05                             # weight of the pull toward the stance (a regulariser)
STANCE = {"hip_pitch": -0.2, "knee": 0.4, "ankle_pitch": -0.2, "elbow": 0.8}  # [rad]


def stance(robot):
    q = robot.clamp(np.zeros(robot.dof))   # pelvis at the world origin
    for i, name in enumerate(robot.joint_names):
        for key, v in STANCE.items():
            if key in name:
                q[i] = v
    return q


LIMBS = {"right arm": ("right_shoulder", "right_elbow", "right_wrist", "right_rubber"),
         "left arm": ("left_shoulder", "left_elbow", "left_wrist", "left_rubber"),
         "right leg": ("right_hip", "right_knee", "right_ankle"),
         "left leg": ("left_hip", "left_knee", "left_ankle")}
COLOURS = {"right arm": "#d62728", "left arm": "#ff9896", "right leg": "#1f77b4", "left leg": "#aec7e8",
           "trunk": "#444444"}
SENSORS = ("imu", "d435", "mid360", "logo", "contour")  # frames that are not part of the body


def side_view(robot, poses, titles, targets, support, path):
    """Stick figures seen from the robot's right (x forward, z up) over the stance in grey: the
    limbs in colours (a bone takes its parent's: the hips and shoulders are the trunk's), the hand's target, the centre of mass and the point it is held over."""
    names, fp = robot.node_names, robot.frame_parent

    def limb(name):
        return next((k for k, keys in LIMBS.items() if name.startswith(keys)), "trunk")

    bones = [(i, fp[i], limb(names[fp[i]])) for i in range(robot.n_nodes)
             if robot.is_frame[i] and fp[i] > 0 and not any(k in names[i] for k in SENSORS)]
    fig, axes = plt.subplots(1, len(poses), figsize=(3.2 * len(poses), 3.9), sharey=True)
    ground = support[2]
    T0 = robot.fk_all_array(poses[0])
    for n, (ax, q, title, target) in enumerate(zip(axes, poses, titles, targets)):
        Ts = robot.fk_all_array(q)
        for a, b, part in bones:
            if n:
                ax.plot([T0[a, 0, 3], T0[b, 0, 3]], [T0[a, 2, 3], T0[b, 2, 3]], color="0.85", lw=2, zorder=1)
            ax.plot([Ts[a, 0, 3], Ts[b, 0, 3]], [Ts[a, 2, 3], Ts[b, 2, 3]], color=COLOURS[part], lw=2.5,
                    label=part if n == 0 and a == next(x for x, _, p in bones if p == part) else None)
        c = robot.center_of_mass(q)
        ax.plot(c[0], c[2], "o", color="k", ms=7, label="centre of mass" if n == 0 else None)
        ax.plot([c[0], c[0]], [c[2], ground], ":", color="k", lw=1)
        ax.plot(support[0], ground, "^", color="#2ca02c", ms=10, label="held over" if n == 0 else None)
        if target is not None:
            ax.plot(target[0], target[2], "x", color="#9467bd", ms=10, mew=2.5)
        ax.axhline(ground, color="0.6", lw=1)
        ax.set_title(title, fontsize=10)
        ax.set_xlim(-0.45, 1.35)
        ax.set_ylim(ground - 0.05, 0.6)
        ax.set_aspect("equal")
        ax.set_xlabel("forward [m]")
    axes[0].set_ylabel("height [m]")
    axes[0].legend(loc="upper right", fontsize=7)
    fig.suptitle("G1 seen from its right: feet and balance held (hard goals), the right hand reaching for x (soft)",
                 fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(out_dir: Path) -> int:
    robot = ik.load_robot("g1")            # floating base: a free joint above the pelvis
    q = stance(robot)
    q_stance = q
    T_feet = {f: robot.fk(q, f) for f in FEET}
    support = 0.5 * (T_feet[FEET[0]][:3, 3] + T_feet[FEET[1]][:3, 3])  # between the ankles
    p_hand = robot.fk(q, HAND)[:3, 3]
    z_pelvis0 = robot.fk(q, "pelvis")[2, 3]
    held = [ik.Pose(f, T_feet[f], hard=True) for f in FEET] + [ik.CenterOfMass(support, axes="xy", hard=True)]
    posture = ik.Posture(q_stance, weight=POSTURE)
    print(f"{robot!r}; method lm; feet and centre of mass held (hard), right hand soft")
    targets, qs, statuses = [], [], []
    for k in range(1, STEPS + 2):
        target = p_hand + (REACH * k / STEPS if k <= STEPS else TOO_FAR)
        t = time.perf_counter()
        res = ik.solve(robot, held + [ik.Position(HAND, target), posture], q0=q)
        ms = 1e3 * (time.perf_counter() - t)
        feet_err = max(np.linalg.norm(robot.fk(res.q, f)[:3, 3] - T_feet[f][:3, 3]) for f in FEET)
        com_err = np.linalg.norm(robot.center_of_mass(res.q)[:2] - support[:2])
        hand_err = np.linalg.norm(robot.fk(res.q, HAND)[:3, 3] - target)
        dz = robot.fk(res.q, "pelvis")[2, 3] - z_pelvis0
        met = " ".join("yes" if m else "no" for m in res.goals_met)
        print(f"target {k}: {res.status}, goals met (feet, feet, balance, hand): {met}; hand error "
              f"{hand_err:.2e} m, feet error {feet_err:.2e} m, balance error {com_err:.2e} m, pelvis "
              f"{100 * dz:+.1f} cm, within limits: {bool(robot.within_limits(res.q))}; {ms:.2f} ms")
        targets.append(target)
        qs.append(res.q)
        statuses.append(str(res.status))
        q = res.q  # the next solve starts here
    print(f"final pelvis drop: {100 * (z_pelvis0 - robot.fk(qs[STEPS - 1], 'pelvis')[2, 3]):.1f} cm")
    qs = np.array(qs)
    np.savez(out_dir / "humanoid_reach.npz", targets=np.array(targets), q=qs, status=np.array(statuses),
             com=robot.center_of_mass(qs), support=support, q_stance=q_stance,
             joint_names=np.array(robot.joint_names))
    half = STEPS // 2
    side_view(robot, [q_stance, qs[half - 1], qs[STEPS - 1], qs[STEPS]],
              ["the stance", f"target {half}", f"target {STEPS}", f"target {STEPS + 1}: {statuses[STEPS]}"],
              [None, targets[half - 1], targets[STEPS - 1], targets[STEPS]], support,
              out_dir / "humanoid_reach.png")
    print(f"wrote {out_dir / 'humanoid_reach.npz'} and {out_dir / 'humanoid_reach.png'}")
    return 0


if __name__ == "__main__":
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(".")
    out.mkdir(parents=True, exist_ok=True)
    sys.exit(main(out))
