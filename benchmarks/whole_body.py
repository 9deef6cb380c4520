#!/usr/bin/env python3
"""Whole-body IK beside placo and mink: floating humanoids (G1, Talos) and a quadruped (Solo12).

Run it with the peers' venv (``bash ../shared/peers/install.sh``), from the repository root:

    PYTHONPATH=$PWD/src ~/.cache/invkin-peers-env/bin/python benchmarks/whole_body.py
    PYTHONPATH=$PWD/src ~/.cache/invkin-peers-env/bin/python benchmarks/whole_body.py --robots g1 --n 10

Models: example-robot-data's URDFs (G1 29-DOF, Talos reduced, Solo12), each on a floating base
(invkin: ``Robot.with_floating_base()`` where the model layer has it, else x, y, z prismatic +
a ball joint, the same R3 x SO(3) increments; placo: its own floating base; mink: a MuJoCo free
joint). Every robot starts from a standing configuration ``q0`` (knees bent).

Scenarios (supports: both feet of a humanoid as Pose goals, three feet of the quadruped as
Position goals; effectors: both hands as Pose goals, the quadruped's front-left foot as a Position
goal):

* ``reach``: supports fixed where they are, effectors at a reachable target (FK of q0 with the
  effector chains' own joints moved at random, so a solution with the supports fixed exists);
* ``crouch``: humanoids: supports fixed, hands 20 cm forward and 40 cm down (position goals);
  quadruped: all four feet fixed, the trunk 8 cm lower (Pose goal on the base link);
* ``random``: N reachable sets as in ``reach`` (default 30);
* ``unreachable``: the first effector 2 m away, the others reachable.

invkin: supports ``hard=True``, effectors soft, tolerances 1e-6, default timeout (50 ms). placo:
supports as "hard" tasks, effectors "soft" (weight 1), joint limits on; solve(True) iterated until
every effector is within 1e-6 or 200 ms. mink: supports as FrameTasks of cost 100 (mink has no
hard tasks), effectors cost 1, ConfigurationLimit, daqp; iterated the same way.

Timing: ``time.perf_counter()`` around the solve (invkin: ``ik.solve`` with goal construction
outside; peers: their iteration loop after the tasks are set up), the fastest of REPEAT = 3 runs
of each problem from the same start (each library is deterministic from a start).

A peer has no "solve to tolerance" call: its loop needs a convergence test, and this script's test
(``errors``: the frames read back and compared in NumPy) costs about as much as placo's own
iteration (G1: ~18 us an iteration of placo's ~37). So a peer is timed twice: "checked", the loop
with that test after each iteration until it passes, and the reported time, exactly as many
iterations as the checked loop needed and no test (``peer_loop``): the peer's own solver time, as if
it knew in advance when to stop. That is the peer's lower bound, and the ratios use it. The
unreachable scenario has no count to know in advance: it keeps the checked loop.

Success: every effector within 1e-5 m / rad of its target and every support within 1e-5 m of
where it was; in the unreachable scenario, the supports within 1e-5 m and the far effector nearer
its target than at q0 (the reachable effector shares the least-squares compromise of the soft
goals in every library, so it is not required to be met). Reported per
robot, scenario and library: success, mean and p95 time per solve, largest support drift, max
|Δq| from q0 (the actuated joints).
"""
from __future__ import annotations

import os

os.environ.setdefault("INVKIN_COMPILE", "wait")  # time machine code, not first calls on the interpreter (invkin._tiers)

for _v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_v, "1")

import argparse
import glob
import math
import sys
import time
import warnings
import xml.etree.ElementTree as ET

import numpy as np

import invkin as ik
from invkin.spatial import so3_log

TOL = 1e-5
PEER_BUDGET = 0.2
REPEAT = 3  # each problem is solved REPEAT times from the same start; its time is the fastest
            # (the 2-core machine is shared: one solve can lose a time slice to another process)


def _robots_dir():
    # this interpreter's packages, then the repository's own .venv (make test installs it there)
    for base in (sys.prefix, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), ".venv")):
        hits = glob.glob(os.path.join(base, "lib", "python3*", "site-packages", "cmeel.prefix", "share",
                                      "example-robot-data", "robots"))
        if hits:
            return hits[0]
    raise SystemExit("example-robot-data not found: pip install example-robot-data")


SPECS = {
    "g1": dict(path="g1_description/urdf/g1_29dof_rev_1_0.urdf", kind="humanoid",
               supports=("left_ankle_roll_link", "right_ankle_roll_link"),
               effectors=("left_rubber_hand", "right_rubber_hand"),
               stance={"hip_pitch": -0.2, "knee": 0.4, "ankle_pitch": -0.2, "elbow": 0.8}),
    "talos": dict(path="talos_data/robots/talos_reduced.urdf", kind="humanoid",
                  supports=("left_sole_link", "right_sole_link"),
                  effectors=("gripper_left_base_link", "gripper_right_base_link"),
                  stance={"leg_left_3": -0.411, "leg_left_4": 0.859, "leg_left_5": -0.448,
                          "leg_right_3": -0.411, "leg_right_4": 0.859, "leg_right_5": -0.448,
                          "arm_left_4": -0.5, "arm_right_4": -0.5}),
    "solo12": dict(path="solo_description/robots/solo12.urdf", kind="quadruped",
                   supports=("FR_FOOT", "HL_FOOT", "HR_FOOT"), effectors=("FL_FOOT",),
                   stance={"FL_HFE": 0.8, "FR_HFE": 0.8, "HL_HFE": -0.8, "HR_HFE": -0.8,
                           "FL_KFE": -1.6, "FR_KFE": -1.6, "HL_KFE": 1.6, "HR_KFE": 1.6}),
}


# --------------------------------------------------------------------------- invkin side


def floating(robot):
    """robot on a floating base: Robot.with_floating_base() when the model layer has it, else a
    rebuild with x, y, z prismatic joints and a ball joint above the root."""
    if hasattr(robot, "with_floating_base"):
        return robot.with_floating_base()
    names = {0: "fixed", 2: "prismatic", 3: "ball"}
    b = ik.RobotBuilder(name=robot.name)
    b.add_root("world")
    b.add_joint("base_x", "world", "_bx", type="prismatic", axis=(1, 0, 0), frame=False)
    b.add_joint("base_y", "_bx", "_by", type="prismatic", axis=(0, 1, 0), frame=False)
    b.add_joint("base_z", "_by", "_bz", type="prismatic", axis=(0, 0, 1), frame=False)
    b.add_joint("base_rot", "_bz", robot.node_names[0], type="ball")
    for i in range(1, robot.n_nodes):
        jt = int(robot.joint_type[i])
        c = int(robot.qidx[i])
        t = names.get(jt) or ("continuous" if not np.isfinite(robot.lower[c]) else "revolute")
        kw = {}
        if t in ("revolute", "prismatic"):
            kw = dict(lower=robot.lower[c], upper=robot.upper[c])
        b.add_joint(robot.node_joint_names[i] or f"_j{i}", robot.node_names[int(robot.parent[i])],
                    robot.node_names[i], type=t, origin=robot.origin[i],
                    axis=robot.axis[i] if t != "fixed" else (0, 0, 1), frame=bool(robot.is_frame[i]), **kw)
    return b.build().with_extras(**dict(robot.extras))


def actuated(robot):
    """Indices of the q entries of the robot's own joints (not the floating base)."""
    base = {"base_x", "base_y", "base_z", "base_rot.x", "base_rot.y", "base_rot.z"}
    return np.array([i for i, n in enumerate(robot.joint_names) if n not in base and not n.startswith("root_joint")])


def stance(robot, spec):
    q = robot.neutral()
    for i, n in enumerate(robot.joint_names):
        for key, v in spec["stance"].items():
            if key in n:
                q[i] = min(max(v, robot.lower[i]), robot.upper[i])
    return q


def chain_dofs(robot, frame, exclude):
    """q entries on the path to frame that do not move any frame of ``exclude``."""
    def dofs(f):
        out = set()
        for i in robot.ancestors(robot.frame_index(f)):
            c = int(robot.qidx[i])
            if c >= 0:
                out.update(range(c, c + (3 if robot.joint_type[i] == 3 else 1)))
        return out
    shared = set().union(*(dofs(f) for f in exclude))
    return sorted(dofs(frame) - shared)


def make_sets(robot, spec, q0, n, rng):
    """(name, support goals, effector targets) per problem: list of dicts."""
    sup_T = {f: robot.fk(q0, f) for f in spec["supports"]}
    eff = spec["effectors"]
    pose_eff = spec["kind"] == "humanoid"

    def reachable():
        q = q0.copy()
        for f in eff:
            for c in chain_dofs(robot, f, spec["supports"]):
                lo = max(robot.lower[c], q0[c] - 0.5)
                hi = min(robot.upper[c], q0[c] + 0.5)
                q[c] = rng.uniform(lo, hi)
        return {f: robot.fk(q, f) for f in eff}

    sets = [("reach", sup_T, reachable(), pose_eff, None)]
    if spec["kind"] == "humanoid":
        crouch = {f: robot.fk(q0, f) @ np.eye(4) for f in eff}
        for f in eff:
            crouch[f] = crouch[f].copy()
            crouch[f][:3, 3] += [0.2, 0.0, -0.4]
        sets.append(("crouch", sup_T, crouch, False, None))
    else:
        feet = {f: robot.fk(q0, f) for f in spec["supports"] + eff}
        T_base = robot.fk(q0, robot.node_names[robot.frame_index(robot.root) if False else 0])
        trunk = robot.fk(q0, _trunk(robot)).copy()
        trunk[2, 3] -= 0.08
        sets.append(("crouch", feet, {}, False, (_trunk(robot), trunk)))
        del T_base
    for _ in range(n):
        sets.append(("random", sup_T, reachable(), pose_eff, None))
    far = reachable()
    f0 = eff[0]
    far[f0] = far[f0].copy()
    far[f0][:3, 3] += [2.0, 0.5, 0.0]
    sets.append(("unreachable", sup_T, far, pose_eff, None))
    return sets


def _trunk(robot):
    """The floating body: the first frame below the base joints."""
    for nm in robot.node_names:
        if robot.is_frame[robot.frame_index(nm)] and nm not in ("world",) and not nm.startswith("_b"):
            return nm
    return robot.node_names[0]


def invkin_goals(robot, spec, sup, eff, pose_eff, trunk):
    point_feet = spec["kind"] == "quadruped"
    goals = [ik.Position(f, T[:3, 3], hard=True) if point_feet else ik.Pose(f, T, hard=True) for f, T in sup.items()]
    for f, T in eff.items():
        goals.append(ik.Pose(f, T) if pose_eff else ik.Position(f, T[:3, 3]))
    if trunk is not None:
        goals.append(ik.Pose(trunk[0], trunk[1]))
    return goals


def closer(fk, fk0, eff):
    """True when the first effector is nearer its target than at q0."""
    f, T = next(iter(eff.items()))
    return float(np.linalg.norm(fk(f)[:3, 3] - T[:3, 3])) < float(np.linalg.norm(fk0(f)[:3, 3] - T[:3, 3])) - 1e-3


def errors(fk, sup, eff, pose_eff, trunk, unreachable_first):
    """(effector error, support drift) [m or rad] from a callable fk(frame) -> (4, 4)."""
    drift = 0.0
    for f, T in sup.items():
        Tc = fk(f)
        drift = max(drift, float(np.linalg.norm(Tc[:3, 3] - T[:3, 3])))
    err = 0.0
    for k, (f, T) in enumerate(eff.items()):
        if unreachable_first and k == 0:
            continue
        Tc = fk(f)
        err = max(err, float(np.linalg.norm(Tc[:3, 3] - T[:3, 3])))
        if pose_eff:
            err = max(err, float(np.linalg.norm(so3_log(T[:3, :3] @ Tc[:3, :3].T))))
    if trunk is not None:
        Tc = fk(trunk[0])
        err = max(err, float(np.linalg.norm(Tc[:3, 3] - trunk[1][:3, 3])),
                  float(np.linalg.norm(so3_log(trunk[1][:3, :3] @ Tc[:3, :3].T))))
    return err, drift


def run_invkin(robot, spec, q0, sets):
    out = []
    act = actuated(robot)
    for name, sup, eff, pose_eff, trunk in sets[:2]:  # compile before timing
        ik.solve(robot, invkin_goals(robot, spec, sup, eff, pose_eff, trunk), q0=q0)
    for name, sup, eff, pose_eff, trunk in sets:
        goals = invkin_goals(robot, spec, sup, eff, pose_eff, trunk)
        dt = math.inf
        for _ in range(REPEAT):
            t = time.perf_counter()
            res = ik.solve(robot, goals, q0=q0)
            dt = min(dt, time.perf_counter() - t)
        err, drift = errors(lambda f, qr=res.q: robot.fk(qr, f), sup, eff, pose_eff, trunk, name == "unreachable")
        qr = res.q
        near = bool(eff) and closer(lambda f, qr=qr: robot.fk(qr, f), lambda f: robot.fk(q0, f), eff)
        out.append(dict(scenario=name, time=dt, err=err, drift=drift, dq=float(np.abs(res.q - q0)[act].max()),
                        status=str(res.status), restarts=res.restarts, closer=near, iters=res.iterations,
                        checked=math.nan))
    return out


# --------------------------------------------------------------------------- peers


def peer_loop(step, check, iters):
    """(seconds, iterations) of a peer's loop. iters None: step(), then check() (True: done), until
    done or PEER_BUDGET; an int: exactly that many step() calls and no check (see the docstring)."""
    if iters is not None:
        t = time.perf_counter()
        for _ in range(iters):
            step()
        return time.perf_counter() - t, iters
    t_end = time.perf_counter() + PEER_BUDGET
    t = time.perf_counter()
    k = 0
    while True:
        step()
        k += 1
        if check() or time.perf_counter() > t_end:
            return time.perf_counter() - t, k


class PlacoRunner:
    name = "placo"

    def __init__(self, urdf_path, robot, q0):
        import placo

        import tempfile

        root = ET.parse(urdf_path).getroot()
        for l in root.findall("link"):  # kinematics and inertials only: no meshes to resolve
            for tag in ("visual", "collision"):
                for e in l.findall(tag):
                    l.remove(e)
        self.tmp = tempfile.NamedTemporaryFile("w", suffix=".urdf", delete=False)
        self.tmp.write(ET.tostring(root, encoding="unicode"))
        self.tmp.close()
        self.r = placo.RobotWrapper(self.tmp.name, placo.Flags.ignore_collisions)
        self.names = [n for n in self.r.joint_names()]
        self.q0 = {n: q0[robot.joint_names.index(n)] for n in self.names}
        self.T_base0 = robot.fk(q0, _trunk(robot))
        self.placo = placo

    def solve(self, spec, sup, eff, pose_eff, trunk, unreachable, iters=None):
        placo = self.placo
        r = self.r
        for n, v in self.q0.items():
            r.set_joint(n, v)
        r.set_T_world_fbase(self.T_base0)
        r.update_kinematics()
        solver = placo.KinematicsSolver(r)
        solver.mask_fbase(False)
        solver.enable_joint_limits(True)
        solver.enable_velocity_limits(False)
        point_feet = spec["kind"] == "quadruped"
        for f, T in sup.items():
            if point_feet:
                solver.add_position_task(f, T[:3, 3]).configure(f, "hard", 1.0)
            else:
                solver.add_frame_task(f, T).configure(f, "hard", 1.0, 1.0)
        for f, T in eff.items():
            if pose_eff:
                solver.add_frame_task(f, T).configure(f, "soft", 1.0, 1.0)
            else:
                solver.add_position_task(f, T[:3, 3]).configure(f, "soft", 1.0)
        if trunk is not None:
            solver.add_frame_task(trunk[0], trunk[1]).configure(trunk[0], "soft", 1.0, 1.0)
        def step():
            solver.solve(True)
            r.update_kinematics()

        def check():
            return errors(r.get_T_world_frame, sup, eff, pose_eff, trunk, unreachable)[0] < 1e-6 and not unreachable

        dt, k = peer_loop(step, check, iters)
        err, drift = errors(r.get_T_world_frame, sup, eff, pose_eff, trunk, unreachable)
        dq = max(abs(r.get_joint(n) - v) for n, v in self.q0.items())
        return dt, k, err, drift, dq, r.get_T_world_frame


class MinkRunner:
    name = "mink"
    SUPPORT_COST = 100.0

    def __init__(self, urdf_path, robot, q0):
        import mink
        import mujoco

        root = ET.parse(urdf_path).getroot()
        mj = ET.SubElement(root, "mujoco")
        ET.SubElement(mj, "compiler", {"fusestatic": "false", "discardvisual": "true", "balanceinertia": "true"})
        for l in root.findall("link"):
            for tag in ("visual", "collision"):
                for e in l.findall(tag):
                    l.remove(e)
            if l.find("inertial") is None:
                i = ET.SubElement(l, "inertial")
                ET.SubElement(i, "mass", {"value": "0.01"})
                ET.SubElement(i, "inertia", {k: ("1e-5" if k in ("ixx", "iyy", "izz") else "0")
                                             for k in ("ixx", "ixy", "ixz", "iyy", "iyz", "izz")})
        spec = mujoco.MjSpec.from_string(ET.tostring(root, encoding="unicode"))
        spec.worldbody.first_body().add_freejoint()
        self.model = spec.compile()
        self.mink = mink
        self.cfg = mink.Configuration(self.model)
        q = self.model.qpos0.copy()
        T = robot.fk(q0, _trunk(robot))
        q[:3] = T[:3, 3]
        q[3:7] = _quat_wxyz(T[:3, :3])
        self.idx = {}
        for j in range(1, self.model.njnt):
            nm = self.model.joint(j).name
            if nm in robot.joint_names:
                q[self.model.jnt_qposadr[j]] = q0[robot.joint_names.index(nm)]
                self.idx[nm] = self.model.jnt_qposadr[j]
        self.q0 = q
        self.limits = [mink.ConfigurationLimit(self.model)]

    def solve(self, spec, sup, eff, pose_eff, trunk, unreachable, iters=None):
        mink = self.mink
        cfg = self.cfg
        cfg.update(self.q0)
        tasks = []
        point_feet = spec["kind"] == "quadruped"
        for f, T in sup.items():
            tk = mink.FrameTask(f, "body", position_cost=self.SUPPORT_COST,
                                orientation_cost=0.0 if point_feet else self.SUPPORT_COST, lm_damping=1.0)
            tk.set_target(mink.SE3.from_matrix(T))
            tasks.append(tk)
        for f, T in eff.items():
            tk = mink.FrameTask(f, "body", position_cost=1.0, orientation_cost=1.0 if pose_eff else 0.0, lm_damping=1.0)
            tk.set_target(mink.SE3.from_matrix(T))
            tasks.append(tk)
        if trunk is not None:
            tk = mink.FrameTask(trunk[0], "body", position_cost=1.0, orientation_cost=1.0, lm_damping=1.0)
            tk.set_target(mink.SE3.from_matrix(trunk[1]))
            tasks.append(tk)
        fk = lambda f: cfg.get_transform_frame_to_world(f, "body").as_matrix()  # noqa: E731 - local reader

        def step():
            cfg.integrate_inplace(mink.solve_ik(cfg, tasks, 1.0, "daqp", damping=1e-12, limits=self.limits), 1.0)

        def check():
            return errors(fk, sup, eff, pose_eff, trunk, unreachable)[0] < 1e-6 and not unreachable

        dt, k = peer_loop(step, check, iters)
        err, drift = errors(fk, sup, eff, pose_eff, trunk, unreachable)
        dq = max(abs(cfg.q[a] - self.q0[a]) for a in self.idx.values())
        return dt, k, err, drift, dq, fk


def _quat_wxyz(R):
    r = so3_log(R)
    th = float(np.linalg.norm(r))
    if th < 1e-12:
        return np.array([1.0, 0.0, 0.0, 0.0])
    return np.concatenate([[math.cos(th / 2)], math.sin(th / 2) * r / th])


def run_peer(cls, path, robot, spec, q0, sets):
    fk0 = lambda f: robot.fk(q0, f)  # noqa: E731 - the start, for "closer"
    try:
        runner = cls(path, robot, q0)
    except Exception as exc:  # a peer that cannot load the model is reported, not fatal
        print(f"  {cls.name}: cannot load {os.path.basename(path)}: {type(exc).__name__}: {exc}")
        return None
    out = []
    for name, sup, eff, pose_eff, trunk in sets:
        far = name == "unreachable"
        try:
            checked = math.inf
            for _ in range(REPEAT if not far else 1):  # unreachable: the budget every time
                t, k, err, drift, dq, fk = runner.solve(spec, sup, eff, pose_eff, trunk, far)
                checked = min(checked, t)
            near = bool(eff) and closer(fk, fk0, eff)
            dt = checked
            if not far:  # the same k iterations without the test: the peer's own time (see the docstring)
                dt = min(runner.solve(spec, sup, eff, pose_eff, trunk, far, iters=k)[0] for _ in range(REPEAT))
        except Exception as exc:
            print(f"  {cls.name} {name}: {type(exc).__name__}: {exc}")
            dt, checked, err, drift, dq, near, k = math.nan, math.nan, math.inf, math.inf, math.nan, False, 0
        out.append(dict(scenario=name, time=dt, checked=checked, iters=k, err=err, drift=drift, dq=dq, status="",
                        restarts=0, closer=near))
    return out


# --------------------------------------------------------------------------- report


def summarize(rows):
    table = {}
    for sc in ("reach", "crouch", "random", "unreachable"):
        rs = [r for r in rows if r["scenario"] == sc]
        if not rs:
            continue
        if sc == "unreachable":  # supports held and the far effector stretched toward its target
            ok = [r["drift"] <= TOL and r["closer"] for r in rs]
        else:
            ok = [r["err"] <= TOL and r["drift"] <= TOL for r in rs]
        t = np.array([r["time"] for r in rs]) * 1e3
        table[sc] = dict(n=len(rs), success=100.0 * np.mean(ok), mean=float(np.nanmean(t)),
                         p95=float(np.nanpercentile(t, 95)), drift=max(r["drift"] for r in rs),
                         dq=float(np.nanmax([r["dq"] for r in rs])), restarts=max(r["restarts"] for r in rs),
                         iters=float(np.mean([r["iters"] for r in rs])),
                         checked=1e3 * float(np.nanmean([r["checked"] for r in rs])) if any(
                             r["checked"] == r["checked"] for r in rs) else math.nan)
    return table


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--robots", default="g1,talos,solo12")
    ap.add_argument("--n", type=int, default=30, help="random reachable sets per robot (default 30)")
    ap.add_argument("--peers", default="placo,mink")
    args = ap.parse_args(argv)
    warnings.simplefilter("ignore")
    rd = _robots_dir()
    peers = [c for c in (PlacoRunner, MinkRunner) if c.name in args.peers.split(",")]
    print(f"invkin whole-body benchmark; python {sys.version.split()[0]}, numpy {np.__version__}; "
          f"load average {os.getloadavg()[0]:.2f}")
    print("| robot | scenario | library | n | success | mean ms | p95 ms | support drift m | max abs dq rad |"
          " iterations (mean) | invkin restarts (max) | peer ms with the test |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for name in args.robots.split(","):
        spec = SPECS[name]
        path = os.path.join(rd, spec["path"])
        robot = floating(ik.load_robot(path))
        q0 = stance(robot, spec)
        sets = make_sets(robot, spec, q0, args.n, np.random.default_rng(0))
        results = {"invkin": run_invkin(robot, spec, q0, sets)}
        for cls in peers:
            r = run_peer(cls, path, robot, spec, q0, sets)
            if r is not None:
                results[cls.name] = r
        summ = {lib: summarize(rows) for lib, rows in results.items()}
        for sc in summ["invkin"]:
            for lib, s in summ.items():
                v = s.get(sc)
                if v is None:
                    continue
                ratio = ""
                if lib != "invkin" and summ["invkin"][sc]["mean"] > 0:
                    ratio = f" ({v['mean'] / summ['invkin'][sc]['mean']:.2f}x invkin)"
                print(f"| {name} ({robot.dof} dof) | {sc} | {lib} | {v['n']} | {v['success']:.0f} % | "
                      f"{v['mean']:.3f}{ratio} | {v['p95']:.3f} | {v['drift']:.1e} | {v['dq']:.2f} | "
                      f"{v['iters']:.1f} | {v['restarts'] if lib == 'invkin' else ''} | "
                      f"{'' if lib == 'invkin' else format(v['checked'], '.3f')} |")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
