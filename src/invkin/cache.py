"""Where invkin's compiled kernels live, what a first compile tells the user, and ``warmup``.

Numba compiles each ``@njit(cache=True)`` kernel on its first call and stores the machine code.
Left to itself it stores it in ``__pycache__`` beside the source, so every reinstall (a new
virtual environment, a new container, a CI run, a Dask worker on a fresh node) pays the whole
compile again. For invkin's own modules this module installs a cache locator (placed first in
Numba's list, so it answers only for files inside this package and leaves every other
library's functions to Numba's own locators; ``NUMBA_CACHE_DIR``, which is process-global, is
not touched) that stores them in a user cache directory instead:

    $INVKIN_CACHE_DIR, else $NUMBA_CACHE_DIR/invkin when NUMBA_CACHE_DIR is set,
    else $XDG_CACHE_HOME/invkin/numba, else ~/.cache/invkin/numba

under ``<package-relative folder>/<digest>/``. The digest is a SHA-256 of the kernel's source
file *and of every invkin module it imports at module level, transitively*: Numba itself stamps a cache entry
with the content of the kernel's own file only, so an edit in a module a kernel calls (or whose
constants it freezes) would otherwise load stale machine code. Same sources give the same
digest wherever the package is installed, so the cache survives reinstalls and is shared by
virtual environments; different versions side by side get different folders. Numba still
checks its own version, the Python version and the CPU in each entry.

The cached code is the code a fresh compile makes (no value-changing fast-math: the kernels
give the same bits fresh or cached, which the jobs' local-versus-Dask identity relies on).

Importing numba stays lazy: :func:`install` (called by ``import invkin``) only registers an
import hook that adds the locator once ``numba`` has finished importing (at once if it already
has). The same hook registers a listener on Numba's compile event that prints one line on
stderr the first time an invkin kernel is really compiled in a process (a cache miss), so a
long first call is never silent (``INVKIN_QUIET=1`` silences it), and that adds up the compile
time in :mod:`invkin._compile_clock` (the solve driver keeps it out of the timeout), with the
loads from the on-disk cache as first-call setup.
:func:`warmup` compiles the kernels ahead of time with a progress line per step (``invkin warmup``).
"""
from __future__ import annotations

import hashlib
import os
import re
import sys
import time
import warnings
from pathlib import Path

__all__ = ["cache_dir", "install", "warmup", "WARMUP_STEPS", "clear"]

_PACKAGE_DIR = Path(__file__).resolve().parent
_installed = False
_announced = False
_quiet = False  # set by warmup, which prints its own progress


def cache_dir() -> Path:
    """The folder holding invkin's compiled kernels (see the module docstring for the order)."""
    env = os.environ.get("INVKIN_CACHE_DIR")
    if env:
        return Path(env).expanduser()
    numba_dir = os.environ.get("NUMBA_CACHE_DIR")
    if numba_dir:
        return Path(numba_dir).expanduser() / "invkin"
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "invkin" / "numba"


def clear() -> Path:
    """Delete every cached kernel (the next call of each kernel compiles it again)."""
    import shutil

    root = cache_dir()
    shutil.rmtree(root, ignore_errors=True)
    return root


# ------------------------------------------------------------------ source digests

_IMPORT_RE = re.compile(r"^([ \t]*)(?:from\s+(\.+)([\w.]*)\s+import\s+(\([^)]*\)|[^#\n]+)|import\s+(invkin[\w.]*))",
                        re.MULTILINE)
_digests: dict[Path, str] = {}


def _module_file(dotted: list[str]) -> Path | None:
    base = _PACKAGE_DIR.joinpath(*dotted)
    if base.with_suffix(".py").is_file():
        return base.with_suffix(".py")
    if (base / "__init__.py").is_file():
        return base / "__init__.py"
    return None


def _imports(path: Path, text: str, module_level: bool = False) -> set[Path]:
    """invkin modules that ``path`` imports (inside functions too, unless ``module_level``)."""
    rel = list(path.relative_to(_PACKAGE_DIR).with_suffix("").parts)
    package = rel[:-1]  # the package a relative import starts from (for __init__ too)
    found = set()
    for m in _IMPORT_RE.finditer(text):
        if module_level and m.group(1):
            continue
        if m.group(5):  # import invkin.x.y
            parts = m.group(5).split(".")[1:]
            names = []
        else:
            level = len(m.group(2))
            up = package[:len(package) - (level - 1)] if level > 1 else package
            parts = up + [p for p in m.group(3).split(".") if p]
            names = [n.split(" as ")[0].strip("()\\ \n") for n in m.group(4).split(",")]
        for cand in [parts] + [parts + [n] for n in names if n.isidentifier()]:
            f = _module_file(cand)
            if f is not None:
                found.add(f)
    found.discard(path)
    return found


def source_digest(path) -> str:
    """SHA-256 over the file and every invkin module it imports at module level, transitively.

    What a kernel can reach (other kernels, frozen global constants) comes in through
    module-level imports; imports inside Python functions cannot feed a kernel, so they are left
    out and an edit in such a module does not recompile the kernels.
    """
    path = Path(path).resolve()
    if path in _digests:
        return _digests[path]
    seen, todo = set(), [path]
    while todo:
        f = todo.pop()
        if f in seen:
            continue
        seen.add(f)
        todo.extend(_imports(f, f.read_text(encoding="utf-8"), module_level=True))
    h = hashlib.sha256()
    for f in sorted(seen):
        h.update(str(f.relative_to(_PACKAGE_DIR)).encode())
        h.update(b"\0")
        h.update(f.read_bytes())
    _digests[path] = h.hexdigest()
    return _digests[path]


# ------------------------------------------------------------------ the numba hook


def _make_locator(caching):
    class InvkinCacheLocator(caching._CacheLocator):
        """Numba cache locator for invkin's own modules (see :mod:`invkin.cache`)."""

        def __init__(self, py_func, py_file):
            self._py_file = py_file
            self._lineno = py_func.__code__.co_firstlineno
            digest = source_digest(py_file)
            rel = Path(py_file).resolve().parent.relative_to(_PACKAGE_DIR)
            self._stamp = digest
            self._cache_path = str(cache_dir().joinpath(*rel.parts, digest[:16]))

        def get_cache_path(self):
            return self._cache_path

        def get_source_stamp(self):
            return self._stamp

        def get_disambiguator(self):
            return str(self._lineno)

        @classmethod
        def from_function(cls, py_func, py_file):
            try:
                Path(py_file).resolve().relative_to(_PACKAGE_DIR)
            except (ValueError, OSError):
                return None  # not invkin's: Numba's own locators decide
            try:
                self = cls(py_func, py_file)
                self.ensure_cache_path()
            except OSError:
                return None  # cache folder not writable: fall back to __pycache__
            return self

    return InvkinCacheLocator


def _on_numba_loaded():
    global _installed
    if _installed:
        return
    _installed = True
    from numba.core import caching, event

    impl = getattr(caching, "CacheImpl", None) or caching._CacheImpl  # the name before numba 0.61
    impl._locator_classes.insert(0, _make_locator(caching))
    from numba.core.dispatcher import Dispatcher

    from ._tiers import install as install_tiers

    install_tiers(Dispatcher, cache_dir)

    from ._compile_clock import add_compile_seconds

    starts = []  # perf_counter of the open compile events (a kernel's callees nest inside it)

    class _FirstCompileNotice(event.Listener):
        def on_start(self, ev):
            global _announced
            starts.append(time.perf_counter())
            if _announced or _quiet or os.environ.get("INVKIN_QUIET"):
                return
            disp = ev.data.get("dispatcher") if isinstance(ev.data, dict) else None
            mod = getattr(getattr(disp, "py_func", None), "__module__", "") or ""
            if mod.startswith("invkin."):
                _announced = True
                print(f"invkin: compiling the solver kernels once (10-60 s per method on first use); "
                      f"later runs load them from {cache_dir()} (`invkin warmup` does it ahead of time)",
                      file=sys.stderr, flush=True)

        def on_end(self, ev):
            t0 = starts.pop() if starts else time.perf_counter()
            if not starts:
                add_compile_seconds(time.perf_counter() - t0)

    event.register("numba:compile", _FirstCompileNotice())

    # a load from the on-disk cache happens outside Numba's compile event: first-call setup
    # (invkin._compile_clock.setup; the solve drivers keep it out of the timeout)
    from ._compile_clock import setup

    load = caching.Cache.load_overload
    if not getattr(load, "_invkin_timed", False):
        def load_overload(self, sig, target_context):
            with setup():
                return load(self, sig, target_context)

        load_overload._invkin_timed = True
        caching.Cache.load_overload = load_overload


class _NumbaImportHook:
    """A meta-path finder that runs :func:`_on_numba_loaded` right after ``numba`` is imported."""

    def find_spec(self, name, path=None, target=None):
        if name != "numba":
            return None
        import importlib.machinery

        sys.meta_path.remove(self)
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None:
            return spec
        exec_module = spec.loader.exec_module

        def exec_then_install(module):
            exec_module(module)
            _on_numba_loaded()

        spec.loader.exec_module = exec_then_install
        return spec


def install() -> None:
    """Send invkin's kernels to :func:`cache_dir` (now if numba is loaded, else when it is)."""
    if _installed:
        return
    if "numba" in sys.modules:
        _on_numba_loaded()
    elif not any(isinstance(f, _NumbaImportHook) for f in sys.meta_path):
        sys.meta_path.insert(0, _NumbaImportHook())


# ------------------------------------------------------------------ warmup


def _panda_pose(method):
    from .goals import Pose, Position
    from .model import load_robot
    from .solve import solve

    robot = load_robot("panda")
    T = robot.fk(robot.neutral() + 0.3, "panda_hand")
    goal = Position("panda_hand", T[:3, 3]) if method == "fabrik" else Pose("panda_hand", T)
    solve(robot, [goal], method=method, timeout=0.05)


def _analytic():
    from .goals import Position
    from .model import load_robot
    from .solve import solve

    robot = load_robot("planar2")
    solve(robot, [Position(robot.frame_names[-1], [1.0, 0.5, 0.0])], method="analytic")


def _solve_many():
    from .model import load_robot
    from .solve import solve_many

    robot = load_robot("panda")
    solve_many(robot, "panda_hand", robot.fk(robot.sample(4, 0), "panda_hand"))


def _correct_clip():
    import dataclasses

    from .animation import FootPlant, correct_clip
    from .model.bvh import read_bvh

    robot, clip = read_bvh(_PACKAGE_DIR / "data" / "mocap" / "cmu_02_01_walk.bvh")
    clip = dataclasses.replace(clip, frames=clip.frames[:20])
    with warnings.catch_warnings():  # (20 frames: "no contact found" for a foot, about warmup's clip, not the user's)
        warnings.simplefilter("ignore")
        correct_clip(robot, clip, [FootPlant("LeftFoot"), FootPlant("RightFoot")])


def _whole_body():
    """Several goals in one solve (the general LM core): one met on the first kernel call (its packed
    entry point), one out of reach (the driver's core loop after it)."""
    from .goals import Pose, Position
    from .model import load_robot
    from .solve import solve

    robot = load_robot("panda")
    q = robot.neutral() + 0.3
    solve(robot, [Pose("panda_hand", robot.fk(q, "panda_hand"), hard=True),
                  Position("panda_link4", robot.fk(q, "panda_link4")[:3, 3])], timeout=0.05)
    solve(robot, [Position("panda_hand", [2.0, 0.0, 0.5]), Position("panda_link4", [0.0, 0.3, 0.3])], timeout=0.05)


def _tracker():
    from .model import load_robot
    from .tracking import Tracker

    robot = load_robot("panda")
    q = robot.neutral() + 0.3
    for method in ("dls", "lm"):
        Tracker(robot, "panda_hand", q0=q, method=method).update(robot.fk(q, "panda_hand")[:3, 3] + 0.01)


# step name -> what it runs; each is one first call as a user makes it
WARMUP_STEPS = {
    **{m: (lambda m=m: _panda_pose(m))
       for m in ("lm", "dls", "pinv", "transpose", "gauss-seidel", "ccd", "fabrik")},
    "analytic": _analytic,
    "whole_body": _whole_body,
    "tracker": _tracker,
    "solve_many": _solve_many,
    "correct_clip": _correct_clip,
}


def warmup(steps=None, progress=True) -> dict:
    """Compile (or load from the cache) the kernels that ``steps`` need; ``{step: seconds}``.

    Args:
        steps: names from :data:`WARMUP_STEPS` (methods, ``solve_many``, ``correct_clip``);
            default every step.
        progress: print ``[i/n] step ... s`` lines on stderr.
    """
    global _quiet
    from .errors import InvkinError, closest_names

    names = list(WARMUP_STEPS) if steps is None else list(steps)
    for s in names:
        if s not in WARMUP_STEPS:
            raise InvkinError(f"warmup: unknown step {s!r} (closest: {closest_names(s, WARMUP_STEPS)}); "
                              f"choose from: {', '.join(WARMUP_STEPS)}")
    times = {}
    _quiet = True
    before = os.environ.get("INVKIN_COMPILE")
    os.environ["INVKIN_COMPILE"] = "wait"  # compile here, not on the interpreter with a background process
    try:
        if progress:
            print(f"invkin: compiling {len(names)} step(s) into {cache_dir()}", file=sys.stderr, flush=True)
        for i, s in enumerate(names, 1):
            if progress:
                print(f"[{i}/{len(names)}] {s:<13}", end=" ", file=sys.stderr, flush=True)
            t0 = time.perf_counter()
            WARMUP_STEPS[s]()
            times[s] = time.perf_counter() - t0
            if progress:
                print(f"{times[s]:6.1f} s", file=sys.stderr, flush=True)
    finally:
        _quiet = False
        if before is None:
            os.environ.pop("INVKIN_COMPILE", None)
        else:
            os.environ["INVKIN_COMPILE"] = before
    return times


# ------------------------------------------------------------------ `invkin warmup`


def _cmd_warmup(args) -> int:
    if args.clear:
        print(f"removed {clear()}", file=sys.stderr)
        if not args.steps:
            return 0
    if args.list:
        print("\n".join(WARMUP_STEPS))
        return 0
    times = warmup(args.steps or None, progress=True)
    print(f"invkin: {len(times)} step(s) ready in {sum(times.values()):.1f} s; kernels cached in {cache_dir()}",
          file=sys.stderr)
    return 0


def register(sub) -> None:
    p = sub.add_parser("warmup", help="compile the solver kernels now (once per install), with progress",
                       description="Compile (or load) the kernels each step needs, so that later first "
                                   "calls are fast. Kernels are cached in $INVKIN_CACHE_DIR, else "
                                   "$NUMBA_CACHE_DIR/invkin, else ~/.cache/invkin/numba ($XDG_CACHE_HOME "
                                   "for ~/.cache), and survive reinstalls.")
    p.add_argument("steps", nargs="*", metavar="STEP",
                   help="what to compile (default all): " + ", ".join(WARMUP_STEPS))
    p.add_argument("--list", action="store_true", help="list the steps and exit")
    p.add_argument("--clear", action="store_true", help="delete the cached kernels first")
    p.set_defaults(func=_cmd_warmup)
