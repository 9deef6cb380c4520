"""Collision-aware IK: success, time and the fraction of answers that collide, checked by coal on the
robots' ORIGINAL collision meshes, for invkin with ``world=`` / ``self_collision=True`` beside plain
invkin (which ignores the obstacles) and mink's ``CollisionAvoidanceLimit`` on MuJoCo geoms, in one
run.

Scenes: Panda (example-robot-data, collision meshes, fingers locked closed; SRDF pairs) in front of
a shelf, a table with objects, a clutter of 20 boxes, and a 5,000-point cloud (the table scene's
surfaces sampled); the G1 humanoid (floating base held by a hard Pose goal; both hands Pose goals;
self-collision) at a table. Targets come from sampled configurations that are collision-free (every
pair some joint moves at least 1 cm apart, capsules; G1: 7 mm, its hips are 9 mm from its pelvis
at rest, and only its waist and arms are sampled): each has a collision-free solution. Every
method starts from the neutral configuration.

Columns: success = the method says it met the goals (invkin: ``res.success``; mink: pose error
≤ tolerance within the budget); in coll. = successes whose q collides by coal on the original meshes
(goal: 0); ok = success and collision-free; mean / p95 time [ms]; x plain = mean time over plain
invkin's on the same targets. invkin's time of a target is the fastest of ``--best-of`` (3) identical
calls, plain and collision-aware alike (each is deterministic): on this shared 2-core machine one
pause of a few ms moves a 100-target mean by its length / 100.

    PYTHONPATH=src .venv/bin/python benchmarks/collision_ik.py [--n 100] [--peers PYTHON | --no-mink] [--best-of 1]

mink runs in the peers' environment (``~/.cache/invkin-peers-env``, see ../shared/peers) as a
worker process of this script (``--mink-worker``), on the same targets; its answers are checked
here.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np

os.environ.setdefault("INVKIN_COMPILE", "wait")  # time machine code, not first calls on the interpreter (invkin._tiers)

ROOT = Path(__file__).resolve().parents[1]
ERD = ROOT / "tests" / "data" / "erd"
PANDA = ERD / "panda_fingers.urdf"
PANDA_SRDF = ERD / "panda.srdf"
TOL = 1e-5          # [m], [rad] success tolerances of every method
TIMEOUT = 0.05      # [s] per target, every method
MARGIN = 0.005      # [m]
CLEAR = 0.01        # [m] sampled configurations kept as targets are this far from everything
FINGERS = ("panda_finger_joint1", "panda_finger_joint2")


# --------------------------------------------------------------------------- scenes

def _box(c, size, yaw=0.0):
    T = np.eye(4)
    T[:3, :3] = [[np.cos(yaw), -np.sin(yaw), 0], [np.sin(yaw), np.cos(yaw), 0], [0, 0, 1]]
    T[:3, 3] = c
    return ("box", T, np.asarray(size, dtype=float))


def shelf_obstacles(x=0.45, depth=0.3, width=0.8, boards=(0.0, 0.3, 0.6, 0.9), t=0.02):
    mid, h = (boards[0] + boards[-1]) / 2, boards[-1] - boards[0]
    obs = [_box((x + depth / 2, 0, z), (depth, width, t)) for z in boards]
    obs.append(_box((x + depth + t / 2, 0, mid), (t, width, h)))
    obs += [_box((x + depth / 2, s * (width / 2 + t / 2), mid), (depth, t, h)) for s in (-1, 1)]
    return obs + [("floor", 0.0)]


def table_obstacles():
    return [_box((0.55, 0.0, 0.15), (0.5, 1.0, 0.02)), _box((0.5, -0.25, 0.22), (0.08, 0.08, 0.12), 0.4),
            _box((0.6, 0.2, 0.25), (0.1, 0.06, 0.18), -0.3), _box((0.45, 0.05, 0.19), (0.06, 0.06, 0.06)),
            ("floor", 0.0)]


def clutter_obstacles(seed=7):
    rng = np.random.default_rng(seed)
    obs = []
    while len(obs) < 20:
        c = rng.uniform((0.25, -0.6, 0.05), (0.8, 0.6, 0.9))
        if np.linalg.norm(c[:2]) < 0.3:      # keep the robot's own column free
            continue
        obs.append(_box(c, rng.uniform(0.03, 0.1, 3), rng.uniform(-np.pi, np.pi)))
    return obs + [("floor", 0.0)]


def cloud_obstacles(n=5000, seed=3):
    """n points on the surfaces of the table scene's boxes (a depth-camera scan of it)."""
    rng = np.random.default_rng(seed)
    boxes = [o for o in table_obstacles() if o[0] == "box"]
    area = np.array([2 * (s[0] * s[1] + s[1] * s[2] + s[0] * s[2]) for _, _, s in boxes])
    pts = []
    for k in rng.choice(len(boxes), n, p=area / area.sum()):
        _, T, s = boxes[k]
        p = rng.uniform(-0.5, 0.5, 3) * s
        ax = rng.integers(3)
        p[ax] = s[ax] / 2 * rng.choice((-1, 1))
        pts.append(T[:3, :3] @ p + T[:3, 3])
    return [("points", np.array(pts), 0.005), ("floor", 0.0)]


def g1_obstacles():
    """A table in front of the pelvis (the floating base sits at the origin)."""
    return [_box((0.45, 0.0, -0.15), (0.4, 1.2, 0.04))]


def to_world(obstacles):
    import invkin as ik

    out = []
    for o in obstacles:
        if o[0] == "box":
            out.append(ik.Box(o[1], o[2]))
        elif o[0] == "points":
            out.append(ik.Points(o[1], o[2]))
        else:
            out.append(ik.HalfSpace((0, 0, 1), o[1]))
    return ik.World(out)


# --------------------------------------------------------------------------- robots and targets

def panda():
    import invkin as ik
    return ik.load_robot(str(PANDA), srdf=str(PANDA_SRDF)).lock({FINGERS[0]: 0.0})


def g1():
    import invkin as ik
    return ik.load_robot("g1")


def panda_goals(robot, q):
    import invkin as ik
    return [ik.Pose("panda_hand", robot.fk(q, "panda_hand"))]


def g1_goals(robot, q):
    import invkin as ik
    return [ik.Pose("pelvis", robot.fk(q, "pelvis"), hard=True), ik.Pose("left_rubber_hand", robot.fk(q, "left_rubber_hand")),
            ik.Pose("right_rubber_hand", robot.fk(q, "right_rubber_hand"))]


def targets(robot, world, n, seed, region=None, upper_body=False, max_samples=400_000):
    """n configurations sampled in the limits that are collision-free by CLEAR (capsules; pairs some
    joint moves), optionally with the hand inside ``region`` (lo, hi); ``upper_body``: only the
    waist and arm joints sampled, the rest neutral (a humanoid standing)."""
    from invkin.collision.rows import final_check

    rng = np.random.default_rng(seed)
    out = []
    tried = 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        while len(out) < n and tried < max_samples:
            qs = robot.sample(2000, rng=rng)
            if upper_body:
                keep = np.array([any(k in n for k in ("waist", "shoulder", "elbow", "wrist")) for n in robot.joint_names])
                qs = np.where(keep, qs, robot.neutral())
            tried += len(qs)
            for q in qs:
                if region is not None:
                    p = robot.fk(q, region[0])[:3, 3]
                    if np.any(p < region[1]) or np.any(p > region[2]):
                        continue
                if final_check(robot, q, world, True, MARGIN + 0.002 if upper_body else CLEAR)["collision_free"]:
                    out.append(q)
                    if len(out) == n:
                        break
    return out


# --------------------------------------------------------------------------- invkin runs

def run_invkin(robot, goals_of, qs, world, collide, best_of=1):
    """Each target solved ``best_of`` times (the same seed: the same answer), its fastest time kept:
    with 1, one call per target, as the records before session 6; more takes out the machine's hiccups
    (a 4 ms pause in one call moves a 100-target mean by 0.04 ms, 4x the plain solve)."""
    import invkin as ik

    res = []
    kw = dict(world=world, self_collision=True, margin=MARGIN) if collide else {}
    for i, q in enumerate(qs):
        goals = goals_of(robot, q)
        best = np.inf
        for _ in range(best_of):
            t = time.perf_counter()
            r = ik.solve(robot, goals, seed=i, position_tolerance=TOL, rotation_tolerance=TOL, timeout=TIMEOUT, **kw)
            best = min(best, time.perf_counter() - t)
        res.append((r.q.copy(), bool(r.success), best))
    return res


def profile(robot, goals_of, qs, world):
    """Where the time of a collision solve goes: the check of one configuration (collision/rows.py:
    Check.closest, what a solve whose first answer is clear adds to the plain solve), the share of
    plain answers already clear, the collision rows' kernel timed alone per evaluation (rows /
    evaluation, µs) and the iterations of the collision solves."""
    import invkin as ik
    from invkin.collision import kernels as CK
    from invkin.collision.rows import check_for

    check = check_for(robot, world, True, MARGIN)
    coll = check.coll
    tables, par = coll[0], coll[1]
    m = coll[2].shape[0]
    d, J = np.empty(m), np.empty((m, robot.dof))
    t_rows, n_rows, t_check = [], [], []
    CK.collision_rows(robot.node_table, robot.node_params, robot.fk_all_array(qs[0]), tables, par[0], d, J, coll[2],
                      coll[3])  # (a first Python-level call may load the kernel: not timed)
    for q in qs[:30]:
        Tall = robot.fk_all_array(q)
        t = time.perf_counter()
        for _ in range(20):
            k = CK.collision_rows(robot.node_table, robot.node_params, Tall, tables, par[0], d, J, coll[2], coll[3])
        t_rows.append((time.perf_counter() - t) / 20)
        n_rows.append(k)
        t = time.perf_counter()
        for _ in range(20):
            check.closest(q)
        t_check.append((time.perf_counter() - t) / 20)
    iters, clear = [], []
    for i, q in enumerate(qs):
        goals = goals_of(robot, q)
        plain = ik.solve(robot, goals, seed=i, position_tolerance=TOL, rotation_tolerance=TOL, timeout=TIMEOUT)
        clear.append(plain.success and check.clear(plain.q))
        r = ik.solve(robot, goals, seed=i, position_tolerance=TOL, rotation_tolerance=TOL, timeout=TIMEOUT,
                     world=world, self_collision=True, margin=MARGIN)
        iters.append(r.iterations)
    return {"rows_us": 1e6 * float(np.mean(t_rows)), "rows": float(np.mean(n_rows)),
            "check_us": 1e6 * float(np.mean(t_check)), "first_clear": 100 * float(np.mean(clear)),
            "iterations": float(np.mean(iters))}


# --------------------------------------------------------------------------- mink (peers' environment)

def mujoco_xml():
    """The Panda URDF for MuJoCo: collision meshes only, by absolute path, fingers fixed (closed)."""
    import xml.etree.ElementTree as ET

    root = ET.parse(PANDA).getroot()
    for link in root.findall("link"):
        for v in link.findall("visual"):
            link.remove(v)
        if link.find("inertial") is None:
            i = ET.SubElement(link, "inertial")
            ET.SubElement(i, "mass", {"value": "1"})
            ET.SubElement(i, "inertia", {k: ("0.01" if k in ("ixx", "iyy", "izz") else "0")
                                         for k in ("ixx", "ixy", "ixz", "iyy", "iyz", "izz")})
    for m in root.iter("mesh"):
        m.set("filename", str(ERD / m.get("filename").replace("package://", "")))
    for j in root.findall("joint"):
        if j.get("name") in FINGERS:
            j.set("type", "fixed")
            for c in list(j):
                if c.tag in ("limit", "mimic", "axis", "dynamics"):
                    j.remove(c)
    mj = ET.SubElement(root, "mujoco")
    ET.SubElement(mj, "compiler", {"fusestatic": "false", "discardvisual": "false", "balanceinertia": "true"})
    return ET.tostring(root, encoding="unicode")


def mink_worker(inp, out):
    """Runs in the peers' environment: mink.solve_ik with FrameTask + ConfigurationLimit +
    CollisionAvoidanceLimit (robot geoms × obstacle geoms, and the SRDF self pairs), iterated
    (dt = 1) until the pose error is within TOL or TIMEOUT is spent."""
    import mink
    import mujoco

    data = np.load(inp, allow_pickle=True)
    spec = mujoco.MjSpec.from_string(mujoco_xml())
    robot_geoms = [g.name or f"g{k}" for k, g in enumerate(spec.geoms)]
    for k, g in enumerate(spec.geoms):
        g.name = robot_geoms[k]
    obs = []
    for k, o in enumerate(json.loads(str(data["obstacles"]))):
        if o[0] == "box":
            T = np.asarray(o[1])
            q = np.empty(4)
            mujoco.mju_mat2Quat(q, T[:3, :3].ravel())
            g = spec.worldbody.add_geom(name=f"obs{k}", type=mujoco.mjtGeom.mjGEOM_BOX, size=np.asarray(o[2]) / 2,
                                        pos=T[:3, 3], quat=q)
            obs.append(g.name)
        elif o[0] == "points":
            for i, p in enumerate(np.asarray(o[1])):
                spec.worldbody.add_geom(name=f"obs{k}_{i}", type=mujoco.mjtGeom.mjGEOM_SPHERE, size=(o[2], 0, 0), pos=p)
                obs.append(f"obs{k}_{i}")
        else:
            spec.worldbody.add_geom(name=f"obs{k}", type=mujoco.mjtGeom.mjGEOM_PLANE, size=(0, 0, 1), pos=(0, 0, o[1]))
            obs.append(f"obs{k}")
    model = spec.compile()
    link_geoms = [model.geom(i).name for i in range(model.ngeom) if model.geom(i).name not in obs
                  and model.geom_bodyid[i] > 1]     # the base link0 stands on the floor
    cfg = mink.Configuration(model)
    task = mink.FrameTask(frame_name="panda_hand", frame_type="body", position_cost=1.0, orientation_cost=1.0,
                          lm_damping=1.0)
    limits = [mink.ConfigurationLimit(model),
              mink.CollisionAvoidanceLimit(model, [(link_geoms, obs)], minimum_distance_from_collisions=MARGIN,
                                           collision_detection_distance=MARGIN + 0.05)]
    q0 = data["q0"]
    qs, oks, ts = [], [], []
    for T in data["targets"]:
        t0 = time.perf_counter()
        cfg.update(q0)
        task.set_target(mink.SE3.from_matrix(T))
        ok = False
        while True:
            vel = mink.solve_ik(cfg, [task], 1.0, "daqp", damping=1e-12, limits=limits)
            cfg.integrate_inplace(vel, 1.0)
            err = task.compute_error(cfg)
            if np.all(np.abs(err[:3]) < TOL) and np.all(np.abs(err[3:]) < TOL):
                ok = True
                break
            if time.perf_counter() - t0 > TIMEOUT:
                break
        ts.append(time.perf_counter() - t0)
        qs.append(cfg.q.copy())
        oks.append(ok)
    names = [model.joint(i).name for i in range(model.njnt)]
    np.savez(out, q=np.array(qs), ok=np.array(oks), t=np.array(ts), names=np.array(names))


def run_mink(python, robot, qs, obstacles):
    """mink on the Panda targets in the peers' environment; (q, success, time) per target."""
    with tempfile.TemporaryDirectory() as tmp:
        inp, out = os.path.join(tmp, "in.npz"), os.path.join(tmp, "out.npz")
        ser = [[o[0], o[1].tolist(), o[2].tolist()] if o[0] == "box" else
               ([o[0], o[1].tolist(), o[2]] if o[0] == "points" else list(o)) for o in obstacles]
        np.savez(inp, targets=np.array([robot.fk(q, "panda_hand") for q in qs]), q0=robot.neutral(),
                 obstacles=json.dumps(ser))
        env = {**os.environ, "PYTHONPATH": ""}
        subprocess.run([python, __file__, "--mink-worker", inp, out], check=True, env=env)
        r = np.load(out)
        names = list(r["names"])
        idx = [names.index(n) for n in robot.joint_names]
        return [(q[idx], bool(ok), float(t)) for q, ok, t in zip(r["q"], r["ok"], r["t"])]


# --------------------------------------------------------------------------- report

def check(ref, results):
    """(success %, successes in collision %, ok %, mean ms, p95 ms) with coal on the meshes."""
    succ = np.array([s for _, s, _ in results], dtype=bool)
    coll = np.array([s and ref.min_distance(q) < 0.0 for q, s, _ in results], dtype=bool)
    t = np.array([t for _, _, t in results]) * 1e3
    n = len(results)
    return dict(success=100 * succ.mean(), in_collision=100 * coll.sum() / max(succ.sum(), 1),
                ok=100 * (succ & ~coll).sum() / n, mean=t.mean(), p95=np.percentile(t, 95))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=100, help="targets per scene")
    ap.add_argument("--peers", default=os.path.expanduser("~/.cache/invkin-peers-env/bin/python"))
    ap.add_argument("--no-mink", action="store_true")
    ap.add_argument("--scenes", default="", help="comma-separated words: run only the scenes whose name holds one "
                    "(e.g. cloud,shelf)")
    ap.add_argument("--best-of", type=int, default=3, help="invkin: time each target this many times and keep the "
                    "fastest (default 3, as whole_body.py's REPEAT; 1: one call per target, as the records "
                    "before session 6)")
    ap.add_argument("--mink-worker", nargs=2, help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.mink_worker:
        return mink_worker(*a.mink_worker)
    from invkin.collision.reference import CoalReference

    warnings.simplefilter("ignore")  # the base on the floor: a pair no joint moves
    mink_ok = not a.no_mink and os.path.exists(a.peers)
    scenes = [("panda", "shelf", panda, panda_goals, shelf_obstacles(), ("panda_hand", (0.5, -0.35, 0.0), (0.72, 0.35, 0.9))),
              ("panda", "table", panda, panda_goals, table_obstacles(), ("panda_hand", (0.3, -0.5, 0.16), (0.8, 0.5, 0.5))),
              ("panda", "clutter 20 boxes", panda, panda_goals, clutter_obstacles(), None),
              ("panda", "cloud 5000 points", panda, panda_goals, cloud_obstacles(), ("panda_hand", (0.3, -0.5, 0.16), (0.8, 0.5, 0.5))),
              ("g1", "table + self", g1, g1_goals, g1_obstacles(), None)]
    if a.scenes:
        scenes = [sc for sc in scenes if any(w.strip() in sc[1] for w in a.scenes.split(","))]
    rows = []
    print(f"collision-aware IK, {a.n} targets per scene, tolerance {TOL:g}, timeout {TIMEOUT * 1e3:g} ms, "
          f"margin {MARGIN * 1e3:g} mm; coal on the original meshes"
          + (f"; invkin's times best of {a.best_of} per target" if a.best_of > 1 else ""), flush=True)
    for rname, sname, make, goals_of, obstacles, region in scenes:
        robot = make()
        world = to_world(obstacles)
        t0 = time.perf_counter()
        qs = targets(robot, world, a.n, seed=1, region=region, upper_body=rname == "g1")
        ref = CoalReference(robot, world)
        print(f"# {rname} / {sname}: {len(qs)} targets ({time.perf_counter() - t0:.0f} s to sample)", flush=True)
        # compile / load the kernels outside the clock: every target once, so the retry kernels that only
        # a colliding plain answer reaches are loaded too
        run_invkin(robot, goals_of, qs, world, True)
        run_invkin(robot, goals_of, qs[:2], world, False)
        res = {"invkin plain (no obstacles)": run_invkin(robot, goals_of, qs, world, False, a.best_of),
               "invkin world + self_collision": run_invkin(robot, goals_of, qs, world, True, a.best_of)}
        if mink_ok and rname == "panda":
            qm = qs if "cloud" not in sname else qs[:10]
            res["mink CollisionAvoidanceLimit" + (" (10 targets)" if len(qm) < len(qs) else "")] = \
                run_mink(a.peers, robot, qm, obstacles)
        plain_mean = None
        for method, r in res.items():
            c = check(ref, r)
            plain_mean = plain_mean or c["mean"]
            rows.append((rname, sname, method, c, c["mean"] / plain_mean))
        prof = profile(robot, goals_of, qs, world)
        rows.append((rname, sname, "profile", prof, None))
        for row in rows[-len(res) - 1:]:
            _print(row)
    return rows


def _print(row):
    rname, sname, method, c, ratio = row
    if method == "profile":
        print(f"  where the time goes: check {c['check_us']:.1f} us per configuration, plain answer clear "
              f"{c['first_clear']:.0f} %; {c['rows']:.1f} rows per evaluation, {c['rows_us']:.1f} us per rows "
              f"kernel call; {c['iterations']:.0f} iterations per collision solve (plain retries included)",
              flush=True)
        return
    print(f"  {rname:6s} {sname:18s} {method:40s} success {c['success']:5.1f} %  in coll. {c['in_collision']:5.1f} %  "
          f"ok {c['ok']:5.1f} %  mean {c['mean']:7.3f} ms  p95 {c['p95']:7.3f} ms  x plain {ratio:6.1f}", flush=True)


if __name__ == "__main__":
    main()
