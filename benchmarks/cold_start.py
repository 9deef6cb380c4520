"""Cold start: what a new user waits for on a fresh install.

Every step runs in its own fresh Python process with an *empty* Numba cache (a new temporary
folder per step, handed over through ``NUMBA_CACHE_DIR`` and ``INVKIN_CACHE_DIR``), so each
figure is the full first-use price of that call alone: ``import invkin`` (the "import" row
times only that) plus the first call of one method (compile included), the first ``solve_many``, the first ``correct_clip`` and one
``invkin solve`` on the command line. A second column runs the same step again on the cache
the first run left (what every later run pays).

The ``whole_body`` step is a floating G1 with both feet held by hard Pose goals and one hand
moved (the general LM core).

``--fresh-venv`` installs the package under test (non-editable, ``pip install --no-deps``; the
build backend comes from the package index, as pip does) into a new virtual environment whose
runtime dependencies come from the running interpreter's site-packages, and runs every step with
that interpreter: a fresh install as a user gets it.

    PYTHONPATH=$PWD/src python benchmarks/cold_start.py                # every step
    PYTHONPATH=$PWD/src python benchmarks/cold_start.py --fresh-venv --only import,dls
    PYTHONPATH=$PWD/src python benchmarks/cold_start.py --baseline /tmp/old/src   # before/after

``--cpu`` reports each step's CPU time (user + system of its process, interpreter start-up
included) instead of the wall clock: on a machine shared with other jobs the wall clock of a
compile grows with the load, its CPU time far less.

``--baseline SRC`` runs every step also with another checkout's ``src`` folder (e.g. ``git archive
<commit> src | tar -x -C /tmp/old``), alternating the two step by step so both see the same load,
and prints the ratio.

Timings are wall-clock seconds on the machine it runs on (compiles are single-threaded; a
busy machine inflates them). Results: benchmarks/RESULTS.md, "Cold start".
"""
from __future__ import annotations

import argparse
import os
import resource
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

_SETUP = """
import time, sys
t_start = time.perf_counter()
import invkin as ik
t_import = time.perf_counter() - t_start
import numpy as np
"""

# One snippet per step; each prints the time from before ``import invkin`` to the end of its first
# call: with lazy imports a call pays the modules it needs, so the import alone would flatter.
_PANDA = """
robot = ik.load_robot("panda")
q = robot.neutral() + 0.3
T = robot.fk(q, "panda_hand")
"""
STEPS = {
    "import": _SETUP + "print(t_import)",
}
for _m in ("lm", "dls", "pinv", "transpose", "gauss-seidel", "ccd", "fabrik"):
    _goal = "ik.Position('panda_hand', T[:3, 3])" if _m == "fabrik" else "ik.Pose('panda_hand', T)"
    STEPS[_m] = _SETUP + _PANDA + f"""
res = ik.solve(robot, [{_goal}], method={_m!r}, timeout=0.05)
print(time.perf_counter() - t_start)
"""
STEPS["analytic"] = _SETUP + """
robot = ik.load_robot("planar2")
res = ik.solve(robot, [ik.Position(robot.frame_names[-1], [1.0, 0.5, 0.0])], method="analytic")
print(time.perf_counter() - t_start)
"""
STEPS["solve_many"] = _SETUP + _PANDA + """
rng = np.random.default_rng(0)
Ts = robot.fk(robot.sample(64, rng), "panda_hand")
batch = ik.solve_many(robot, "panda_hand", Ts)
print(time.perf_counter() - t_start)
"""
STEPS["whole_body"] = _SETUP + """
robot = ik.load_robot("g1")
q0 = robot.neutral()
feet = [ik.Pose(f, robot.fk(q0, f), hard=True) for f in ("left_ankle_roll_link", "right_ankle_roll_link")]
hand = robot.fk(q0, "left_wrist_yaw_link")[:3, 3] + [0.1, 0.0, -0.1]
res = ik.solve(robot, feet + [ik.Position("left_wrist_yaw_link", hand)])
print(time.perf_counter() - t_start)
"""
STEPS["correct_clip"] = _SETUP + """
from pathlib import Path
robot, clip = ik.read_bvh(Path(ik.__file__).parent / "data" / "mocap" / "cmu_02_01_walk.bvh")
import dataclasses
clip = dataclasses.replace(clip, frames=clip.frames[:60])
new, rep = ik.correct_clip(robot, clip, [ik.FootPlant("LeftFoot"), ik.FootPlant("RightFoot")])
print(time.perf_counter() - t_start)
"""
# the command line: the whole process, interpreter start-up included
CLI = {"cli help": ["--help"],
       "cli solve": ["solve", "panda", "--frame", "panda_hand", "--xyz", "0.4", "0.1", "0.5"]}
STEPS.update(dict.fromkeys(CLI))


# after the first call: wait for the background compile (invkin._tiers) of every kernel the call
# ran interpreted, and print the time from before the import to machine code for all of them
_COMPILED = """
try:
    from invkin import _tiers
    _tiers.wait(900)
except ImportError:  # a tree from before session 4 (--baseline): it compiled during the call
    pass
print(time.perf_counter() - t_start)
"""


def _wait_workers(limit: float = 900.0) -> None:
    """Wait until no background compile process (``invkin._compile_worker``) is left: the cached
    run of a command-line step must find what the cold one sent to the background."""
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < limit:
        ps = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
        if "invkin._compile_worker" not in ps:
            return
        time.sleep(0.5)


def _children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def _run_step(python: str, name: str, cache: str, src: str | None = None, cpu: bool = False,
              mode: str = "background") -> tuple[float, float]:
    """(first answer, machine code) seconds of one step in a fresh process: the wall clock from
    before ``import invkin`` to the end of the first call, and to the moment every kernel it ran
    is compiled (the same as the first in ``wait`` mode; nan for command-line steps, whose
    process ends first); with ``cpu`` the process's whole CPU time (user + system, interpreter
    start-up included, the background compile process not), which a busy machine inflates far
    less than the wall clock."""
    env = dict(os.environ, NUMBA_CACHE_DIR=cache, INVKIN_CACHE_DIR=cache, INVKIN_QUIET="1", INVKIN_COMPILE=mode)
    if src is not None:
        env["PYTHONPATH"] = src
    c0 = _children_cpu()
    if name in CLI:
        t0 = time.perf_counter()
        subprocess.run([python, "-m", "invkin.cli", *CLI[name]], env=env, check=False, capture_output=True)
        took = _children_cpu() - c0 if cpu else time.perf_counter() - t0
        _wait_workers()
        return took, float("nan")
    out = subprocess.run([python, "-c", STEPS[name] + _COMPILED], env=env, capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(f"step {name} failed:\n{out.stderr[-2000:]}")
    lines = out.stdout.strip().splitlines()
    if cpu:
        return _children_cpu() - c0, float("nan")
    return float(lines[-2]), float(lines[-1])


def _fresh_venv(tmp: Path) -> str:
    """A new venv with invkin installed from ROOT (non-editable) and the current deps on a .pth."""
    venv = tmp / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    py = str(venv / "bin" / "python")
    site = subprocess.run([py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    # deps (numpy, numba, pip, setuptools ...) from this interpreter; appended after the venv's own
    # site-packages, and .pth files there are not processed, so an editable invkin in it stays invisible
    Path(site, "_deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    build = tmp / "src"
    shutil.copytree(ROOT, build, ignore=shutil.ignore_patterns(".venv", ".git", "__pycache__", "*.egg-info",
                                                             "build", "artifacts", "node_modules"))
    subprocess.run([py, "-m", "pip", "install", "-q", "--no-deps", str(build)],
                   check=True)
    where = subprocess.run([py, "-c", "import invkin; print(invkin.__file__)"], capture_output=True,
                           text=True, check=True, cwd=str(tmp), env={k: v for k, v in os.environ.items()
                                                                       if k != "PYTHONPATH"}).stdout.strip()
    print(f"fresh venv: {venv} (invkin at {where})")
    return py


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", help="comma-separated steps (default: all): " + ", ".join(STEPS))
    ap.add_argument("--fresh-venv", action="store_true", help="install into a new venv first")
    ap.add_argument("--no-warm", action="store_true", help="skip the second (cached) run of each step")
    ap.add_argument("--baseline", metavar="SRC", help="also run every step with this src folder (before/after)")
    ap.add_argument("--cpu", action="store_true",
                    help="report each step's CPU seconds (user + system of its process) instead of the wall clock")
    ap.add_argument("--mode", choices=("background", "wait"), default="background",
                    help="INVKIN_COMPILE of the steps: background (default: a first call runs interpreted while "
                         "a background process compiles) or wait (it compiles first, as before session 4)")
    args = ap.parse_args()
    names = list(STEPS) if not args.only else [s.strip() for s in args.only.split(",")]
    unknown = [n for n in names if n not in STEPS]
    if unknown:
        ap.error(f"unknown step(s) {unknown}; choose from {list(STEPS)}")
    with tempfile.TemporaryDirectory(prefix="invkin-cold-") as tmp:
        python = sys.executable
        if args.fresh_venv:
            python = _fresh_venv(Path(tmp))
            os.environ.pop("PYTHONPATH", None)
            os.chdir(tmp)
        base = None if args.baseline is None else str(Path(args.baseline).resolve())
        head = f"{'step':<14} {'cold [s]':>9} {'compiled [s]':>13} {'cached [s]':>11}"
        if args.cpu:
            head = f"{'step (CPU)':<14} {'cold [s]':>9} {'compiled [s]':>13} {'cached [s]':>11}"
        if base:
            head += f" {'baseline cold':>14} {'baseline cached':>16} {'cold ratio':>11}"
        print(head, flush=True)
        for name in names:
            row = []
            for src in ([base] if base else []) + [None]:  # the baseline first, then this tree
                cache = tempfile.mkdtemp(prefix="cache-", dir=tmp)
                cold, compiled = _run_step(python, name, cache, src, args.cpu, args.mode)
                warm = float("nan") if args.no_warm else _run_step(python, name, cache, src, args.cpu, args.mode)[0]
                row.append((cold, warm))
            cold, warm = row[-1]
            line = f"{name:<14} {cold:>9.2f} {compiled:>13.2f} {warm:>11.2f}"
            if base:
                line += f" {row[0][0]:>14.2f} {row[0][1]:>16.2f} {cold / row[0][0]:>10.2f}x"
            print(line, flush=True)


if __name__ == "__main__":
    main()
