#!/usr/bin/env python3
"""A humanoid on a floating base stands on both feet and reaches with one hand.

    python examples/humanoid_reach.py [OUT_DIR]

Loads the bundled Unitree G1 (29 joints on a free joint ``root_joint``: q starts with the pelvis
position [m] and rotation vector [rad] in the world). Both feet are held where they stand by
:class:`invkin.Pose` goals; the right hand reaches for targets ever further forward and down, up to
20 cm forward and 40 cm down from where it hangs — out of reach of the arm alone, so the pelvis
comes down and the legs bend. Each solve starts from the previous answer (``q0``), so the motion is
continuous. Writes ``humanoid_reach.npz`` (the targets and the configurations) into OUT_DIR (default:
the current folder) and prints, per target, the status, the hand and feet errors and the pelvis
height.
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

import invkin as ik

FEET = ("left_ankle_roll_link", "right_ankle_roll_link")
HAND = "right_rubber_hand"
STEPS = 8                                  # targets from the hand's place to the farthest one
REACH = np.array([0.20, 0.0, -0.40])       # [m] farthest target, relative to the standing hand


def main(out_dir: Path) -> int:
    robot = ik.load_robot("g1")            # floating base: a free joint above the pelvis
    q = robot.clamp(np.zeros(robot.dof))   # standing straight, pelvis at the world origin
    T_feet = {f: robot.fk(q, f) for f in FEET}
    p_hand = robot.fk(q, HAND)[:3, 3]
    z_pelvis0 = robot.fk(q, "pelvis")[2, 3]
    targets, qs = [], []
    print(f"{robot!r}; method pinv, feet held by Pose goals")
    for k in range(1, STEPS + 1):
        target = p_hand + REACH * k / STEPS
        goals = [ik.Pose(f, T_feet[f]) for f in FEET] + [ik.Position(HAND, target)]
        res = ik.solve(robot, goals, q0=q, method="pinv", timeout=None, max_iterations=1000, seed=0)
        q = res.q
        feet_err = max(np.linalg.norm(robot.fk(q, f)[:3, 3] - T_feet[f][:3, 3]) for f in FEET)
        hand_err = np.linalg.norm(robot.fk(q, HAND)[:3, 3] - target)
        dz = robot.fk(q, "pelvis")[2, 3] - z_pelvis0
        print(f"target {k}: {res.status}, hand error {hand_err:.2e} m, feet error {feet_err:.2e} m, "
              f"pelvis {100 * dz:+.1f} cm, within limits: {bool(robot.within_limits(q))}")
        targets.append(target)
        qs.append(q)
    np.savez(out_dir / "humanoid_reach.npz", targets=np.array(targets), q=np.array(qs),
             joint_names=np.array(robot.joint_names))
    print(f"final pelvis drop: {100 * (z_pelvis0 - robot.fk(q, 'pelvis')[2, 3]):.1f} cm")
    return 0


if __name__ == "__main__":
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(".")
    out.mkdir(parents=True, exist_ok=True)
    sys.exit(main(out))
