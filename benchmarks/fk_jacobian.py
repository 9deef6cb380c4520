#!/usr/bin/env python3
"""FK and Jacobian micro-benchmark: invkin's public API beside Pinocchio and Robotics Toolbox.

Run it with the peers' venv (it holds Pinocchio and roboticstoolbox; see
``../shared/peers/README.md``; invkin installed there with ``pip install --no-deps -e .``):

    ~/.cache/invkin-peers-env/bin/python benchmarks/fk_jacobian.py [--robots panda,g1_left_arm]

What is timed (µs per call, from Python, q cycling through 1000 random in-limit configurations,
median of ``--repeats`` repeats of ``--k`` calls, best repeat in brackets; the same protocol as
``../shared/peers/fk_jac_micro.py``):

* invkin: ``robot.fk(q, tip)`` (4, 4) and ``robot.jacobian(q, tip)`` (6, dof), rows
  vx vy vz wx wy wz at the tip origin in the base frame;
* Pinocchio: ``forwardKinematics`` + ``updateFramePlacement`` / ``computeFrameJacobian(...,
  LOCAL_WORLD_ALIGNED)`` (which runs its own FK);
* roboticstoolbox: ``ETS.eval`` / ``ETS.jacob0`` (C++ fknm) on the ETS of the same URDF chain.

Batch: one call on (B, dof) configurations, B = ``--batch`` (10,000), µs per item (median of
``--repeats`` calls, best in brackets): invkin ``robot.fk(Q, tip)`` / ``robot.jacobian(Q, tip)``
(Numba ``prange``: with the default thread count and with one thread), roboticstoolbox
``ETS.eval(Q)`` (its ``jacob0`` has no batch form; Pinocchio's Python API has none at all).

Before timing, invkin's FK and Jacobian are compared with Pinocchio's at 20 configurations
(criterion 1e-12 max abs difference) and the batch results with the single calls.
If Pinocchio or roboticstoolbox cannot be imported, only invkin is measured (and said so).
"""
from __future__ import annotations

import os

os.environ.setdefault("INVKIN_COMPILE", "wait")  # time machine code, not first calls on the interpreter (invkin._tiers)

for _v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_v, "1")  # single-threaded BLAS, as the peers' harness

import argparse
import json
import platform
import sys
import time
import warnings
from pathlib import Path

import numpy as np

import invkin as ik
from _repo import git_state  # noqa: E402 - benchmarks/_repo.py, beside this script
from invkin.model.catalog import URDF_MODELS

REPO = Path(__file__).resolve().parent.parent
PEERS = REPO.parent / "shared" / "peers"  # the repository root's parent holds shared/
CHECK_TOL = 1e-12
GOAL_SINGLE_RATIO = 1.5  # single calls within 1.5x Pinocchio
GOAL_BATCH_US = 0.3      # batch: <= 0.3 µs per item


def tip_of(name: str) -> str:
    return URDF_MODELS[name][2] if name in URDF_MODELS else "effector"


def time_interleaved(entries, Q, k: int, repeats: int):
    """{key: (median, best)} µs per call of f(Q[i % len(Q)]) for every (key, f) in entries.

    The repeats are interleaved (round r times every entry once), so that a load spike on the
    shared machine hits every library alike instead of whichever happened to be running.
    """
    nq = len(Q)
    for _, f in entries:
        for i in range(min(200, k)):
            f(Q[i % nq])
    res = {key: [] for key, _ in entries}
    perf = time.perf_counter
    for _ in range(repeats):
        for key, f in entries:
            t0 = perf()
            for i in range(k):
                f(Q[i % nq])
            res[key].append((perf() - t0) / k * 1e6)
    return {key: (float(np.median(v)), float(np.min(v))) for key, v in res.items()}


def time_batch_interleaved(entries, QB, repeats: int):
    """{key: (median, best)} µs per item of one call f(QB); entries are (key, f, numba threads)."""
    import numba

    nthreads = numba.get_num_threads()
    res = {key: [] for key, _, _ in entries}
    try:
        for r in range(repeats + 1):  # round 0: compilation and first-call costs, not recorded
            for key, f, th in entries:
                numba.set_num_threads(th)
                if r == 0:
                    f(QB[:16])
                t0 = time.perf_counter()
                f(QB)
                if r:
                    res[key].append((time.perf_counter() - t0) / len(QB) * 1e6)
    finally:
        numba.set_num_threads(nthreads)
    return {key: (float(np.median(v)), float(np.min(v))) for key, v in res.items()}


def load_peers():
    """(robots module or None, pinocchio or None, rtb pieces or None, notes)."""
    notes = []
    robots = pin = rtb = None
    if PEERS.is_dir():
        sys.path.insert(0, str(PEERS))
        try:
            import robots  # noqa: F401  (the peers' robot table and URDF chains)
        except Exception as e:  # noqa: BLE001  (report any import failure, measure invkin anyway)
            notes.append(f"../shared/peers/robots.py not importable ({type(e).__name__}: {e})")
            robots = None
    else:
        notes.append("../shared/peers not found: no peer URDFs")
    try:
        import pinocchio as pin
    except ImportError as e:
        notes.append(f"pinocchio not installed ({e}): invkin only, no 1e-12 cross-check")
    try:
        from roboticstoolbox import Robot as RTBRobot
        from roboticstoolbox.models.URDF.URDFRobot import URDF_file

        rtb = (RTBRobot, URDF_file)
    except ImportError as e:
        notes.append(f"roboticstoolbox not installed ({e})")
    if robots is None:
        pin = rtb = None
    return robots, pin, rtb, notes


def bench_robot(name, args, robots, pin, rtb):
    robot = ik.load_robot(name)
    tip = tip_of(name)
    rng = np.random.default_rng(7)
    Q = robot.sample(1000, rng=rng)          # timing configurations (rows are C-contiguous)
    Qc = robot.sample(20, rng=np.random.default_rng(8))  # cross-check configurations
    QB = robot.sample(args.batch, rng=np.random.default_rng(9))
    out = {"robot": name, "dof": robot.dof, "tip": tip, "rows": [], "batch_rows": [], "check": {}}

    # ---------------------------------------------------------------- peers' models
    pin_fk = pin_jac = None
    ets = None
    if robots is not None:
        spec = robots.load_robot(name)
        if tuple(spec.joint_names) != tuple(robot.joint_names):
            raise RuntimeError(f"{name}: joint order differs: {spec.joint_names} vs {robot.joint_names}")
        if pin is not None:
            m = pin.buildModelFromUrdf(spec.urdf)
            d = m.createData()
            fid = m.getFrameId(spec.tip)
            LWA = pin.LOCAL_WORLD_ALIGNED

            def pin_fk(q):
                pin.forwardKinematics(m, d, q)
                return pin.updateFramePlacement(m, d, fid)

            def pin_jac(q):
                return pin.computeFrameJacobian(m, d, q, fid, LWA)

        if rtb is not None:
            RTBRobot, URDF_file = rtb
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                elinks, rname, _ = URDF_file(spec.urdf)
                rr = RTBRobot(elinks, name=rname)
            ets = rr.ets(start=spec.base, end=spec.tip)

    # ---------------------------------------------------------------- correctness first
    ik_fk = lambda q: robot.fk(q, tip)  # noqa: E731
    ik_jac = lambda q: robot.jacobian(q, tip)  # noqa: E731
    chk = out["check"]
    if pin_fk is not None:
        chk["fk_maxabs_vs_pinocchio"] = max(float(np.abs(ik_fk(q) - pin_fk(q).homogeneous).max()) for q in Qc)
        chk["jac_maxabs_vs_pinocchio"] = max(float(np.abs(ik_jac(q) - pin_jac(q)).max()) for q in Qc)
        chk["pass"] = chk["fk_maxabs_vs_pinocchio"] <= CHECK_TOL and chk["jac_maxabs_vs_pinocchio"] <= CHECK_TOL
    if ets is not None:
        chk["rtb_fk_maxabs_vs_invkin"] = max(float(np.abs(ets.eval(q) - ik_fk(q)).max()) for q in Qc)
        chk["rtb_jac_maxabs_vs_invkin"] = max(float(np.abs(ets.jacob0(q) - ik_jac(q)).max()) for q in Qc)
    Tb, Jb = robot.fk(Qc, tip), robot.jacobian(Qc, tip)
    chk["batch_vs_single_maxabs"] = max(
        max(float(np.abs(Tb[i] - ik_fk(q)).max()), float(np.abs(Jb[i] - ik_jac(q)).max())) for i, q in enumerate(Qc))
    print(f"[{name}] check: " + ", ".join(f"{k} {v:.1e}" if isinstance(v, float) else f"{k} {v}"
                                           for k, v in chk.items()), file=sys.stderr, flush=True)

    # ---------------------------------------------------------------- single calls
    rows = [("invkin", ik_fk, ik_jac, "robot.fk(q, tip) / robot.jacobian(q, tip)")]
    if pin_fk is not None:
        rows.append(("pinocchio", pin_fk, pin_jac,
                     "forwardKinematics+updateFramePlacement / computeFrameJacobian(LOCAL_WORLD_ALIGNED)"))
    if ets is not None:
        rows.append(("roboticstoolbox", lambda q: ets.eval(q), lambda q: ets.jacob0(q),
                     "ETS.eval / ETS.jacob0 (C++ fknm)"))
    rows.append(("invkin (frame=None: last node)", lambda q: robot.fk(q), lambda q: robot.jacobian(q),
                 "robot.fk(q) / robot.jacobian(q): no frame-name lookup"))
    rows.append(("invkin fk_jacobian (T and J)", None, lambda q: robot.fk_jacobian(q, tip),
                 "robot.fk_jacobian(q, tip): both in one kernel call"))
    entries = []
    for impl, fk, jac, _ in rows:
        if fk is not None:
            entries.append(((impl, "fk"), fk))
        entries.append(((impl, "jac"), jac))
    t = time_interleaved(entries, Q, args.k, args.repeats)
    for impl, fk, jac, note in rows:
        r = {"impl": impl, "note": note, "fk_us": t.get((impl, "fk")), "jac_us": t.get((impl, "jac"))}
        out["rows"].append(r)
        print(f"[{name}] {impl:34s} FK {fmt(r['fk_us']):>15s} µs   J {fmt(r['jac_us']):>15s} µs",
              file=sys.stderr, flush=True)

    # ---------------------------------------------------------------- batch
    import numba

    nthreads = numba.get_num_threads()
    brows = [("invkin", ik_fk, ik_jac, nthreads, "robot.fk(Q, tip) / robot.jacobian(Q, tip), Numba prange"),
             ("invkin (1 thread)", ik_fk, ik_jac, 1, "same, numba.set_num_threads(1)")]
    if ets is not None:
        brows.append(("roboticstoolbox", lambda QQ: ets.eval(QQ), None, 1, "ETS.eval(Q) (B, 4, 4); jacob0 has no batch form"))
    entries = []
    for impl, fk, jac, th, _ in brows:
        entries.append(((impl, "fk"), fk, th))
        if jac is not None:
            entries.append(((impl, "jac"), jac, th))
    t = time_batch_interleaved(entries, QB, args.repeats)
    for impl, fk, jac, th, note in brows:
        r = {"impl": impl, "threads": th, "note": note, "B": len(QB),
             "fk_us": t.get((impl, "fk")), "jac_us": t.get((impl, "jac"))}
        out["batch_rows"].append(r)
        print(f"[{name}] batch {impl:28s} FK {fmt(r['fk_us']):>15s} µs/item   J {fmt(r['jac_us']):>15s} µs/item",
              file=sys.stderr, flush=True)
    return out


def fmt(t):
    return "n/a" if t is None else f"{t[0]:.2f} ({t[1]:.2f})"


def ratio(a, b):
    if a is None or b is None:
        return "n/a"
    return f"{a[0] / b[0]:.2f}× ({a[1] / b[1]:.2f}×)"


def markdown(results, meta) -> str:
    L = []
    L.append(f"µs per call (median of {meta['repeats']} repeats of {meta['k']} calls, best repeat in brackets); "
             "ratio = invkin / Pinocchio (median (best)).\n")
    L.append("| robot | implementation | FK µs | Jacobian µs | FK ratio | Jacobian ratio |")
    L.append("|---|---|---|---|---|---|")
    for res in results:
        pin_row = next((r for r in res["rows"] if r["impl"] == "pinocchio"), None)
        for r in res["rows"]:
            is_ik = r["impl"].startswith("invkin")
            fr = ratio(r["fk_us"], pin_row["fk_us"]) if (pin_row and is_ik) else ""
            jr = ratio(r["jac_us"], pin_row["jac_us"]) if (pin_row and is_ik) else ""
            L.append(f"| {res['robot']} ({res['dof']} DOF) | {r['impl']} | {fmt(r['fk_us'])} | {fmt(r['jac_us'])} "
                     f"| {fr} | {jr} |")
    L.append("")
    B = results[0]["batch_rows"][0]["B"] if results and results[0]["batch_rows"] else 0
    L.append(f"Batch of {B:,} configurations in one call, µs per item (median of {meta['repeats']} calls, best in "
             "brackets). Pinocchio has no batch call in Python: its single-call time is the loop reference.\n")
    L.append("| robot | implementation | threads | FK µs/item | Jacobian µs/item |")
    L.append("|---|---|---|---|---|")
    for res in results:
        for r in res["batch_rows"]:
            L.append(f"| {res['robot']} | {r['impl']} | {r['threads']} | {fmt(r['fk_us'])} | {fmt(r['jac_us'])} |")
    L.append("")
    L.append("Cross-check at 20 configurations (max abs difference; criterion 1e-12 vs Pinocchio):\n")
    for res in results:
        c = res["check"]
        parts = [f"{k} {v:.1e}" for k, v in c.items() if isinstance(v, float)]
        verdict = "" if "pass" not in c else (" — PASS" if c["pass"] else " — FAIL")
        L.append(f"- {res['robot']}: " + ", ".join(parts) + verdict)
    L.append("")
    L.append("Goals (issue): single calls within 1.5× Pinocchio (median ratio), batch ≤ 0.3 µs per item "
             "(median, default threads):\n")
    for res in results:
        pin_row = next((r for r in res["rows"] if r["impl"] == "pinocchio"), None)
        ikr = res["rows"][0]
        if pin_row is not None:
            for what in ("fk_us", "jac_us"):
                rt = ikr[what][0] / pin_row[what][0]
                L.append(f"- {res['robot']} single {what[:-3].upper()}: {rt:.2f}× Pinocchio — "
                         f"{'meets' if rt <= GOAL_SINGLE_RATIO else 'MISSES'} the 1.5× goal")
        b = res["batch_rows"][0]
        for what in ("fk_us", "jac_us"):
            v = b[what][0]
            L.append(f"- {res['robot']} batch {what[:-3].upper()}: {v:.3f} µs/item ({b['threads']} threads) — "
                     f"{'meets' if v <= GOAL_BATCH_US else 'MISSES'} the 0.3 µs goal")
    if meta["notes"]:
        L.append("")
        L.extend(f"Note: {n}" for n in meta["notes"])
    return "\n".join(L)


def versions():
    import importlib.metadata as md

    out = {}
    for p in ("invkin", "numpy", "numba", "pin", "roboticstoolbox-python"):
        try:
            out[p] = md.version(p)
        except md.PackageNotFoundError:
            out[p] = None
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--robots", default="panda,g1_left_arm", help="comma list of bundled robots")
    ap.add_argument("--k", type=int, default=2000, help="calls per repeat (single calls)")
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--batch", type=int, default=10_000, help="batch size B")
    ap.add_argument("--json", default=None, help="write every number to this JSON file")
    args = ap.parse_args(argv)

    robots, pin, rtb, notes = load_peers()
    if pin is None or rtb is None:
        print("peers missing -> " + "; ".join(notes), file=sys.stderr)
    import numba

    meta = {
        "date_utc": time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime()), "invkin_commit": git_state(),
        "python": sys.version.split()[0], "platform": platform.platform(), "cpu_count": os.cpu_count(),
        "numba_threads": numba.get_num_threads(), "versions": versions(), "k": args.k,
        "repeats": args.repeats, "batch": args.batch, "notes": notes, "loadavg_start": os.getloadavg(),
    }
    results = [bench_robot(n, args, robots, pin, rtb) for n in args.robots.split(",") if n]
    meta["loadavg_end"] = os.getloadavg()
    print(f"<!-- fk_jacobian.py {meta['date_utc']} UTC, invkin {meta['invkin_commit']}, Python {meta['python']}, {meta['cpu_count']} cores, numba "
          f"{meta['versions']['numba']} ({meta['numba_threads']} threads), pinocchio {meta['versions']['pin']}, "
          f"roboticstoolbox {meta['versions']['roboticstoolbox-python']}, load average "
          f"{meta['loadavg_start'][0]:.2f} -> {meta['loadavg_end'][0]:.2f} -->\n")
    print(markdown(results, meta))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"meta": meta, "robots": results}, f, indent=1)
    failed = any(r["check"].get("pass") is False for r in results)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
