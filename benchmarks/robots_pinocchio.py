"""Every URDF of example-robot-data through Pinocchio and invkin: what loads, and FK of every frame.

Run in the peers' environment (Pinocchio and example-robot-data installed there), with invkin
from this checkout::

    PYTHONPATH=$PWD/src ~/.cache/invkin-peers-env/bin/python benchmarks/robots_pinocchio.py

For each ``*.urdf`` under example-robot-data's ``robots/`` folder: Pinocchio's
``buildModelFromUrdf`` in its fixed-base form (no free flyer, ``mimic=False``: followers are
independent joints there) and :func:`invkin.load_robot`. Where both load, ``--samples`` random
configurations inside invkin's limits are mapped to Pinocchio's ``q`` (a follower gets
``multiplier * q[leader] + offset``; a continuous joint's (cos, sin) pair; a free joint's
position and x y z w quaternion) and every link frame of invkin is compared with Pinocchio's
``BODY`` frame of the same name (``data.oMf``): the error is the largest absolute difference of
any entry of the 4x4 transforms. The goals: as many files loaded as Pinocchio, and a largest
error <= 1e-12 m. Exit code 0 when both hold.
"""
from __future__ import annotations

import argparse
import glob
import os
import sys
import sysconfig
import warnings

import numpy as np

os.environ.setdefault("INVKIN_COMPILE", "wait")  # time machine code, not first calls on the interpreter (invkin._tiers)


def _default_dir() -> str:
    return os.path.join(sysconfig.get_paths()["purelib"], "cmeel.prefix", "share", "example-robot-data", "robots")


def _pin_q(pin, model, robot, q):
    """Pinocchio's q of invkin's q (see the module docstring)."""
    from invkin.spatial import matrix_to_quat, so3_exp

    by_joint = {nm: i for i, nm in enumerate(robot.node_joint_names)}
    qp = pin.neutral(model)
    for jid in range(1, model.njoints):
        name = model.names[jid]
        jm = model.joints[jid]
        iq = jm.idx_q
        node = by_joint.get(name)
        if node is None or robot.qidx[node] < 0:
            continue  # fixed in invkin (e.g. a <mimic> ignored on a fixed joint): Pinocchio's neutral
        c = int(robot.qidx[node])
        if jm.nq == 7:  # free flyer: x y z qx qy qz qw
            qp[iq:iq + 3] = q[c:c + 3]
            qp[iq + 3:iq + 7] = matrix_to_quat(so3_exp(q[c + 3:c + 6]), "xyzw")
            continue
        if jm.nq == 4:  # spherical: qx qy qz qw
            qp[iq:iq + 4] = matrix_to_quat(so3_exp(q[c:c + 3]), "xyzw")
            continue
        theta = robot.multiplier[node] * q[c] + robot.offset[node]
        if jm.nq == 2:  # continuous: (cos, sin)
            qp[iq:iq + 2] = (np.cos(theta), np.sin(theta))
        else:
            qp[iq] = theta
    return qp


def compare(pin, path, samples, rng):
    """(frames compared, largest FK difference, missing frame names) of one file."""
    import invkin as ik

    model = pin.buildModelFromUrdf(path)
    data = model.createData()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ik.ModelWarning)
        robot = ik.load_robot(path)
    pin_frames = {f.name: k for k, f in enumerate(model.frames) if f.type == pin.FrameType.BODY}
    names = [n for n in robot.frame_names if n in pin_frames]
    missing = [n for n in robot.frame_names if n not in pin_frames]
    err = 0.0
    for _ in range(samples):
        q = robot.sample(rng=rng)
        pin.framesForwardKinematics(model, data, _pin_q(pin, model, robot, q))
        Ts = robot.fk_all(q)
        for n in names:
            err = max(err, float(np.abs(data.oMf[pin_frames[n]].homogeneous - Ts[n]).max()))
    return len(names), err, missing


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--robots-dir", default=_default_dir(), help="example-robot-data's robots/ folder")
    ap.add_argument("--samples", type=int, default=20, help="random configurations per file (default 20)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--markdown", action="store_true", help="print the table as Markdown")
    args = ap.parse_args(argv)
    import pinocchio as pin

    import invkin as ik

    files = sorted(glob.glob(os.path.join(args.robots_dir, "**", "*.urdf"), recursive=True))
    if not files:
        print(f"no .urdf files under {args.robots_dir}", file=sys.stderr)
        return 2
    rng = np.random.default_rng(args.seed)
    rows = []
    n_pin = n_ik = 0
    worst = 0.0
    for f in files:
        rel = os.path.relpath(f, args.robots_dir)
        try:
            pin.buildModelFromUrdf(f)
            p_ok, p_why = True, ""
        except Exception as e:  # noqa: BLE001  (a table of what each library refuses)
            p_ok, p_why = False, str(e).strip().splitlines()[0][:60]
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always", ik.ModelWarning)
            try:
                robot = ik.load_robot(f)
                i_ok, i_why = True, f"dof {robot.dof}" + (f", {len(w)} warnings" if w else "")
            except ik.InvkinError as e:
                i_ok, i_why = False, str(e).split(": ", 1)[-1][:60]
        n_pin += p_ok
        n_ik += i_ok
        frames, err, missing = ("-", float("nan"), [])
        if p_ok and i_ok:
            frames, err, missing = compare(pin, f, args.samples, rng)
            worst = max(worst, err)
        rows.append((rel, "yes" if p_ok else f"no: {p_why}", "yes" if i_ok else f"no: {i_why}",
                     i_why if i_ok else "", frames, err, len(missing)))
    if args.markdown:
        print("| file | Pinocchio | invkin | invkin model | frames | max FK error |")
        print("|---|---|---|---|---|---|")
        for rel, p, i, note, fr, err, _ in rows:
            e = "-" if err != err else f"{err:.1e}"
            print(f"| {rel} | {p if p == 'yes' else p[:40]} | {i if i == 'yes' else i[:50]} | {note} | {fr} | {e} |")
    else:
        w = max(len(r[0]) for r in rows)
        print(f"{'file':<{w}}  {'pinocchio':<10} {'invkin':<10} {'frames':>6} {'max err':>9}  invkin model")
        for rel, p, i, note, fr, err, _ in rows:
            e = "-" if err != err else f"{err:.1e}"
            print(f"{rel:<{w}}  {p[:10]:<10} {i[:10]:<10} {fr!s:>6} {e:>9}  {note if i == 'yes' else i}")
    total_frames = sum(r[4] for r in rows if r[4] != "-")
    unmatched = sum(r[6] for r in rows)
    print(f"\nfiles: {len(files)}; loaded by Pinocchio {n_pin}, by invkin {n_ik}; frames compared {total_frames} "
          f"x {args.samples} configurations ({unmatched} invkin frames without a Pinocchio BODY frame); "
          f"max FK error {worst:.2e}")
    ok = n_ik >= n_pin and worst <= 1e-12 and all(r[2] == "yes" for r in rows if r[1] == "yes")
    print("goal (invkin loads every file Pinocchio loads, max error <= 1e-12): " + ("met" if ok else "NOT met"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
