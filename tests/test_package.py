"""The package surface: ``__all__``, lazy imports, the kernel cache folder and ``warmup``."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import invkin as ik
from invkin import cache


def _python(code: str, **env) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env={**os.environ, **env}, check=True)


def test_every_name_in_all_resolves_to_a_public_object():
    for name in ik.__all__:
        assert getattr(ik, name) is not None, name
    assert sorted(set(ik.__all__)) == sorted(ik.__all__)  # no duplicates
    assert set(ik.__all__) <= set(dir(ik))


def test_every_public_function_and_class_has_a_docstring():
    """help(ik.bundled_names) said nothing: every callable of ``__all__`` says what it does."""
    bare = [n for n in ik.__all__ if callable(getattr(ik, n)) and not (getattr(ik, n).__doc__ or "").strip()]
    assert not bare, f"public names without a docstring: {bare}"


def test_star_import_gives_exactly_all():
    ns: dict = {}
    exec("from invkin import *", ns)
    assert set(ns) - {"__builtins__"} == set(ik.__all__)


def test_docstring_examples_run_or_are_marked_skip():
    """Every ``>>>`` example in the package runs as written (doctest), or says ``+SKIP``: the second
    line of invkin.collision.reference's example ran without its first and failed (NameError)."""
    import doctest
    import importlib

    pkg = Path(ik.__file__).parent
    ran = []
    for py in sorted(pkg.rglob("*.py")):
        if ">>>" not in py.read_text(encoding="utf-8"):
            continue
        parts = py.relative_to(pkg.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        try:
            module = importlib.import_module(name)
        except ImportError:  # an optional extra that is not installed
            continue
        res = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
        assert res.failed == 0, name
        ran.append(name)
    assert "invkin" in ran


def test_unknown_attribute_is_an_attribute_error():
    with pytest.raises(AttributeError, match="no attribute 'sovle'"):
        ik.sovle  # noqa: B018 - the lookup is the test


def test_solve_stays_the_function_after_its_module_is_imported():
    import invkin.solve  # noqa: F401 - importing the submodule must not rebind ik.solve

    assert callable(ik.solve) and ik.solve.__module__ == "invkin.solve"


def test_import_loads_neither_numpy_nor_numba():
    out = _python("import sys, invkin; print(sorted(m for m in ('numba', 'numpy', 'scipy', "
                  "'matplotlib', 'viser', 'dask', 'pyarrow') if m in sys.modules))")
    assert out.stdout.strip() == "[]"


def test_cli_help_does_not_load_numba():
    out = _python("import sys; sys.argv = ['invkin', '--help']\n"
                  "from invkin import cli\n"
                  "try:\n    cli.main()\nexcept SystemExit:\n    pass\n"
                  "print('numba' in sys.modules)")
    assert out.stdout.strip().splitlines()[-1] == "False"


def test_cache_dir_follows_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("INVKIN_CACHE_DIR", str(tmp_path / "a"))
    assert cache.cache_dir() == tmp_path / "a"
    monkeypatch.delenv("INVKIN_CACHE_DIR")
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path / "n"))
    assert cache.cache_dir() == tmp_path / "n" / "invkin"
    monkeypatch.delenv("NUMBA_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "x"))
    assert cache.cache_dir() == tmp_path / "x" / "invkin" / "numba"



def test_readme_and_warmup_help_name_every_variable_that_moves_the_cache(capsys):
    """A user who sets NUMBA_CACHE_DIR (a Docker image, CI) finds the kernels under it: the README's
    "First use" and ``invkin warmup --help`` said only INVKIN_CACHE_DIR / XDG_CACHE_HOME."""
    import inspect
    import re

    from invkin.cli import main

    read = set(re.findall(r'os\.environ\.get\("(\w+)"\)', inspect.getsource(cache.cache_dir)))
    assert read == {"INVKIN_CACHE_DIR", "NUMBA_CACHE_DIR", "XDG_CACHE_HOME"}
    first_use = (Path(__file__).resolve().parents[1] / "README.md").read_text().split("**First use.**")[1]
    first_use = first_use.split("\n\n")[0]
    assert main(["warmup", "--help"]) == 0
    help_text = " ".join(capsys.readouterr().out.split())
    for name in read:
        assert f"${name}" in first_use, name
        assert f"${name}" in help_text, name

def test_source_digest_covers_the_modules_a_kernel_imports():
    pkg = Path(ik.__file__).parent
    ccd = pkg / "solvers" / "ccd.py"
    closure = cache._imports(ccd, ccd.read_text())
    assert pkg / "kinematics" / "kernels.py" in closure
    assert pkg / "solvers" / "_common.py" in closure
    # a module that imports nothing of invkin has a digest of itself only, and digests differ
    assert cache.source_digest(pkg / "kinematics" / "kernels.py") != cache.source_digest(ccd)


@pytest.mark.slow  # compiles kernels in fresh subprocesses
def test_kernels_are_cached_in_the_user_folder_and_reused_from_a_second_install(tmp_path):
    """A copy of the package in another folder (a reinstall) loads the first copy's kernels."""
    import shutil

    code = ("import invkin as ik, numpy as np\n"
            "from invkin.spatial import so3_exp_nb\n"
            "R = np.empty((3, 3))\n"
            "so3_exp_nb(0.1, 0.2, 0.3, R)\n"
            "print(so3_exp_nb.stats.cache_hits.get(so3_exp_nb.signatures[0], 0), repr(R.tobytes()))")
    env = {"INVKIN_CACHE_DIR": str(tmp_path / "cache"), "INVKIN_QUIET": "1"}
    src = Path(ik.__file__).parents[1]
    first = _python(code, PYTHONPATH=str(src), **env)
    assert first.stdout.split()[0] == "0"  # compiled
    assert any((tmp_path / "cache").rglob("spatial.so3_exp_nb-*.nbi"))
    shutil.copytree(src / "invkin", tmp_path / "copy" / "invkin",
                    ignore=shutil.ignore_patterns("__pycache__", "data"))
    second = _python(code, PYTHONPATH=str(tmp_path / "copy"), **env)
    assert second.stdout.split()[0] == "1"  # loaded from the cache
    assert second.stdout.split(maxsplit=1)[1] == first.stdout.split(maxsplit=1)[1]  # same bits
    # an edited source gets its own entry: compiled again, never the stale code
    spatial = tmp_path / "copy" / "invkin" / "spatial.py"
    spatial.write_text(spatial.read_text() + "\n# edited\n")
    third = _python(code, PYTHONPATH=str(tmp_path / "copy"), **env)
    assert third.stdout.split()[0] == "0"


@pytest.mark.slow  # compiles kernels in fresh subprocesses
def test_first_compile_prints_one_line_on_stderr(tmp_path):
    code = ("import invkin, numpy as np\nfrom invkin.spatial import so3_exp_nb\n"
            "so3_exp_nb(0.1, 0.2, 0.3, np.empty((3, 3)))")
    env = {"INVKIN_CACHE_DIR": str(tmp_path / "c"), "INVKIN_QUIET": ""}
    cold = _python(code, **env)
    assert cold.stderr.count("invkin: compiling the solver kernels once") == 1
    warm = _python(code, **env)
    assert "compiling" not in warm.stderr


def test_warmup_rejects_an_unknown_step_with_the_valid_ones():
    with pytest.raises(ik.InvkinError, match="'dls'.*choose from: lm, dls"):
        cache.warmup(["dsl"])


def test_no_import_cycles_between_invkin_modules():
    """Module-level or inside a function, no two invkin modules import each other (even indirectly)."""
    pkg = Path(ik.__file__).parent
    graph = {f: cache._imports(f, f.read_text(encoding="utf-8")) for f in pkg.rglob("*.py")}
    # strongly connected components (iterative Tarjan): every one with two or more modules is a cycle
    index, low, on, stack, sccs, counter = {}, {}, set(), [], [], [0]
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(graph[root]))]
        index[root] = low[root] = counter[0]
        counter[0] += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(graph.get(w, ()))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = set()
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.add(str(w.relative_to(pkg)))
                    if w == v:
                        break
                if len(comp) > 1:
                    sccs.append(frozenset(comp))
    assert [sorted(c) for c in sccs] == []


def test_warmup_command_lists_its_steps_and_runs_one(capsys):
    from invkin.cli import main

    assert main(["warmup", "--list"]) == 0
    assert capsys.readouterr().out.split() == list(cache.WARMUP_STEPS)
    assert main(["warmup", "analytic"]) == 0
    err = capsys.readouterr().err
    assert "[1/1] analytic" in err and "ready in" in err


def test_warmup_prints_no_warning_about_its_own_clip(capsys):
    """`invkin warmup` printed "warning: FootPlant('LeftFoot'): no contact found ... Raise the
    thresholds" about the 20 frames its correct_clip step runs on, not anything of the user's."""
    from invkin.cli import main

    assert main(["warmup", "correct_clip"]) == 0
    err = capsys.readouterr().err
    assert "ready in" in err and "warning" not in err.lower(), err


@pytest.mark.slow  # loads (or compiles) kernels in a fresh subprocess
def test_warmup_covers_whole_body_solves_and_the_tracker():
    """`invkin warmup` ("compile every kernel now") left a first whole-body solve (a list of goals:
    the general LM core, ~100 s of compile) and a first Tracker update (~40 s) to compile later."""
    out = _python("from invkin import cache\n"
                  "cache.warmup(['whole_body', 'tracker'], progress=False)\n"
                  "from invkin import tracking\n"
                  "from invkin.solvers import lm_core\n"
                  "print(bool(lm_core.core_attempts.signatures), bool(lm_core.core_attempts_packed.signatures),\n"
                  "      bool(tracking.track_update.signatures))", INVKIN_COMPILE="wait")
    assert out.stdout.split() == ["True", "True", "True"], out


def test_parallel_kernels_from_several_threads_on_numbas_workqueue_layer():
    """With Numba's workqueue threading layer (where neither TBB nor OpenMP is installed: macOS
    without libomp), solve_many or a batched fk from a thread pool aborted the process ("Concurrent
    access has been detected", exit 134)."""
    code = ("import numpy as np, numba\n"
            "from concurrent.futures import ThreadPoolExecutor\n"
            "import invkin as ik\n"
            "r = ik.load_robot('panda')\n"
            "Ts = r.fk(r.sample(64, rng=7), 'panda_hand')\n"
            "one = ik.solve_many(r, 'panda_hand', Ts, seed=1, max_restarts=5)\n"
            "with ThreadPoolExecutor(4) as ex:\n"
            "    many = list(ex.map(lambda _: ik.solve_many(r, 'panda_hand', Ts, seed=1, max_restarts=5), range(8)))\n"
            "    Q = r.sample(4000, rng=1)\n"
            "    fks = list(ex.map(lambda _: r.fk(Q, 'panda_hand'), range(8)))\n"
            "    jacs = list(ex.map(lambda _: r.jacobian(Q, 'panda_hand'), range(8)))\n"
            "assert all(np.array_equal(one.q, b.q) for b in many)\n"
            "assert all(np.array_equal(fks[0], f) for f in fks) and all(np.array_equal(jacs[0], j) for j in jacs)\n"
            "print(numba.threading_layer())")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600,
                         env={**os.environ, "NUMBA_THREADING_LAYER": "workqueue", "INVKIN_COMPILE": "wait"})
    assert out.returncode == 0, (out.returncode, out.stderr[-2000:])
    assert out.stdout.strip() == "workqueue"


def test_robot_memo_builds_once_and_reach_bound_is_cached():
    robot = ik.load_robot("planar2")
    calls = []
    first = robot.memo(("test", 1), lambda: calls.append(1) or [1, 2])
    assert robot.memo(("test", 1), lambda: calls.append(1) or [3]) is first and calls == [1]
    anchor, radius = robot.reach_bound(robot.frame_names[-1])
    assert robot.reach_bound(robot.frame_names[-1]) == (anchor, radius)
    assert radius == pytest.approx(1.8)  # planar2: bones of 1 m and 0.8 m


def test_every_module_is_on_the_architecture_pages_map():
    """docs/architecture.md's layout ("keep it true") had lost model/euler.py and solvers/_chain.py:
    a reader looking for where Euler angles or the ccd/fabrik chain helpers live found no entry."""
    import re

    root = Path(ik.__file__).resolve().parent
    page = (root.parents[1] / "docs" / "architecture.md").read_text()
    layout = page.split("```")[1]  # the first code block: the layer map
    words = set(re.findall(r"[\w.]+", layout))
    missing = [str(f.relative_to(root)) for f in sorted(root.rglob("*.py"))
               if f.name not in ("__main__.py", "__init__.py") and f.name not in words and f.stem not in words]
    assert not missing, f"modules the architecture page's layout does not name: {missing}"


def test_the_bundled_robots_sources_page_says_what_the_files_hold():
    """data/robots/SOURCES.md said the chain URDFs had their <visual> removed and listed the Panda as
    panda_link0 → panda_link8, while panda.urdf names its visual meshes and ends in the panda_hand
    frame (the one the README's examples solve for)."""
    import re

    from invkin.model.catalog import URDF_MODELS

    folder = Path(ik.__file__).resolve().parent / "data" / "robots"
    page = (folder / "SOURCES.md").read_text()
    header = " ".join(page.split("|", 1)[0].split())
    for name, (fname, base, tip) in URDF_MODELS.items():
        text = (folder / fname).read_text()
        row = next(line for line in page.splitlines() if line.startswith(f"| {name} |"))
        assert f"`{base}` → `{tip}`" in row, name
        robot = ik.load_robot(name)
        beyond = robot.frame_names[robot.frame_names.index(tip) + 1:]
        assert all(f"`{f}`" in row for f in beyond), (name, beyond)
        if "<visual" in text:
            assert re.search(rf"`<visual>` removed but for the {name}'s", header, re.I), name
        else:
            assert "`<visual>` removed" in header, name
