"""First calls answered at once: a kernel that is not compiled yet runs on the Python interpreter
while a background process compiles it.

Numba compiles a kernel on its first call, and invkin's solver kernels take 10-20 s of CPU
each to compile. Every ``@njit`` kernel is also an ordinary Python function (``py_func``), so
the same code can run on the interpreter at once, 100-1000× slower per iteration: a first
solve of a 7-DOF arm that compiled for 18 s answers in a few milliseconds that way. This module
makes that the first tier:

1. A Python-level call of an invkin kernel with argument types it has no machine code for
   reaches Numba's ``_compile_for_args`` (patched by :func:`install`, called from
   :mod:`invkin.cache` when Numba is imported). If the kernel is in the on-disk cache, it is
   loaded and runs compiled, as before.
2. Otherwise, when its arrays are small (at most :data:`MAX_INTERPRETED_ELEMENTS` elements in
   all: one solve, not a batch of thousands), the kernel's Python function runs, with every kernel
   it calls replaced by that kernel's Python function too (:func:`interpreted`), and the
   kernel's name and argument types go to one background process per Python process
   (``python -m invkin._compile_worker``), which compiles them into the shared cache (one at a time per
   cache folder, under a file lock) and exits when its parent has gone and its queue is empty.
   Large calls compile in the calling process as before.
3. Later calls look at the cache again (at most every :data:`RECHECK_S` seconds per kernel) and
   switch to the machine code as soon as it is there; a kernel whose worker has exited without it,
   or that is still missing GIVE_UP_S after its request, is compiled in the calling process.

The interpreted tier computes what the compiled one does with the same arithmetic (IEEE
doubles; ``fma`` becomes ``a * b + c``, which may differ in the last bit). The solve drivers keep
interpreted time out of ``timeout`` like compile time, up to :data:`invkin._compile_clock.INTERPRETED_GRACE_S` seconds
per solve (:class:`invkin._compile_clock.Budget`), so a first solve does the iterations a compiled
one would do in its timeout.

``INVKIN_COMPILE=wait`` (the tests, the background process itself) compiles in the calling
process instead, as Numba does by default.
"""
from __future__ import annotations

import base64
import os
import pickle
import subprocess
import sys
import threading
import time
import types as pytypes
from pathlib import Path

__all__ = ["install", "interpreted", "vectorized", "entry_point", "ready", "mode", "pending", "wait", "MAX_INTERPRETED_ELEMENTS"]

#: Largest total number of array elements of a call that runs interpreted (larger calls compile).
MAX_INTERPRETED_ELEMENTS = 50_000
#: Seconds between two looks at the on-disk cache for a kernel that still runs interpreted.
RECHECK_S = 0.25
#: A kernel still not in the cache this long after its request (a worker that hangs or failed on
#: it) is compiled in the calling process; at once when the worker has exited.
GIVE_UP_S = 600.0

_PACKAGE = "invkin."
_lock = threading.Lock()
_funcs: dict = {}          # dispatcher -> interpreted function
_module_globals: dict = {}  # id(module globals) -> converted globals
_last_check: dict = {}     # (dispatcher, argtypes) -> perf_counter of the last cache look
_requested: dict = {}      # (dispatcher, argtypes) sent to the worker -> perf_counter of the request
_worker = [None]
_owner = [os.getpid()]  # the process whose worker _worker[0] is
_announced = [False]
_cache_dir = [None]  # invkin.cache.cache_dir, given by install()


def mode() -> str:
    """``INVKIN_COMPILE``: "background" (default), "wait" (compile in the calling process, as Numba
    does) or "interpret" (never compile what may run interpreted: for tests and debugging)."""
    m = os.environ.get("INVKIN_COMPILE", "background").strip().lower()
    return m if m in ("wait", "interpret") else "background"


# ------------------------------------------------------------------ the interpreted tier


def _fma(a, b, c):
    """kinematics.kernels.fma on the interpreter (two roundings instead of one)."""
    return a * b + c


class _Lazy:
    """A kernel seen from interpreted code: its interpreted function, made on the first call."""

    __slots__ = ("_d", "_f")

    def __init__(self, dispatcher):
        self._d = dispatcher
        self._f = None

    def __call__(self, *args):
        f = self._f
        if f is None:
            f = self._f = interpreted(self._d)
        return f(*args)


def _converted(g: dict) -> dict:
    """A copy of the module globals ``g`` whose kernels are interpreted (shared per module)."""
    from numba.core.dispatcher import Dispatcher
    from numba.core.extending import _Intrinsic

    out = _module_globals.get(id(g))
    if out is None:
        out = dict(g)
        _module_globals[id(g)] = out  # first: modules whose functions refer to each other
        for k, v in g.items():
            if isinstance(v, Dispatcher):
                out[k] = _Lazy(v)
            elif isinstance(v, _Intrinsic):
                if v._name != "fma":
                    raise NotImplementedError(f"intrinsic {v._name!r} has no interpreted form")
                out[k] = _fma
            elif isinstance(v, pytypes.FunctionType) and (v.__module__ or "").startswith(_PACKAGE) \
                    and v.__globals__ is not g:
                out[k] = _rebind(v)  # a plain function (an @overload's Python form) of another module
        for k, v in g.items():
            if isinstance(v, pytypes.FunctionType) and v.__globals__ is g:
                out[k] = _rebind(v, out)
    return out


def _rebind(f, g=None):
    return pytypes.FunctionType(f.__code__, _converted(f.__globals__) if g is None else g, f.__name__,
                                f.__defaults__, f.__closure__)


def interpreted(dispatcher):
    """``dispatcher``'s Python function with every kernel it reaches interpreted too."""
    f = _funcs.get(dispatcher)
    if f is None:
        with _lock:
            f = _funcs.get(dispatcher)
            if f is None:
                py = dispatcher.py_func
                f = _rebind(py)
                _funcs[dispatcher] = f
    return f


def vectorized(dispatcher):
    """``dispatcher``'s Python function with ``math`` read as NumPy, so that its arithmetic runs
    elementwise: a kernel whose branches depend only on its tables (not on the values it
    computes), called with a trailing axis of B samples on its varying arrays, computes all B at
    once (kinematics.kernels.fk_upto_into with q (dof, B) and out (n, 4, 4, B): collision.pairs
    samples 10 000 configurations without a compile). The kernels it calls run as in
    :func:`interpreted` (scalar ``math``): they too must be branch-free in the values, or not
    reached."""
    import numpy as np

    py = dispatcher.py_func
    g = dict(_converted(py.__globals__))
    g["math"] = np
    return pytypes.FunctionType(py.__code__, g, py.__name__, py.__defaults__, py.__closure__)


def _run_interpreted(dispatcher, args):
    import numpy as np

    from ._compile_clock import add_interpreted_seconds

    t0 = time.perf_counter()
    try:
        with np.errstate(over="ignore"):  # the restart hash wraps uint64 products, as compiled code does
            return interpreted(dispatcher)(*args)
    finally:
        add_interpreted_seconds(time.perf_counter() - t0)


# ------------------------------------------------------------------ the compiled tier and the cache


def _from_cache(dispatcher, argtypes) -> bool:
    """Load the machine code for ``argtypes`` from the on-disk cache into ``dispatcher`` (what
    Numba's ``Dispatcher.compile`` does before it compiles); False when it is not there."""
    from numba.core.compiler_lock import global_compiler_lock

    if tuple(argtypes) in dispatcher.overloads:
        return True
    with global_compiler_lock:
        cres = dispatcher._cache.load_overload(_signature(argtypes), dispatcher.targetctx)
        if cres is None:
            return False
        if not cres.objectmode:
            dispatcher.targetctx.insert_user_function(cres.entry_point, cres.fndesc, [cres.library])
        dispatcher.add_overload(cres)
    return True


def _signature(argtypes):
    from numba.core import sigutils

    args, _ = sigutils.normalize_signature(tuple(argtypes))
    return tuple(args)


def _array_elements(args) -> int:
    n = 0
    for a in args:
        size = getattr(a, "size", None)
        if isinstance(size, int):
            n += size
        elif isinstance(a, tuple):
            n += _array_elements(a)
    return n


def _interpretable(dispatcher, args) -> bool:
    if mode() == "wait":
        return False
    py = dispatcher.py_func
    if not (py.__module__ or "").startswith(_PACKAGE) or "<locals>" in py.__qualname__:
        return False
    if getattr(py, "compiled_only", False):  # e.g. it builds a structref (collision.kernels.HeldTables)
        return False
    limit = MAX_INTERPRETED_ELEMENTS // 10 if dispatcher.targetoptions.get("parallel") else MAX_INTERPRETED_ELEMENTS
    return _array_elements(args) <= limit  # a batch kernel (prange) runs its items one by one here


def _compiled_now(dispatcher, argtypes) -> bool:
    """True when ``dispatcher`` has machine code for ``argtypes`` (in memory or loaded from the
    cache now); looks at the cache at most every RECHECK_S seconds per signature."""
    key = (dispatcher, argtypes)
    if argtypes in dispatcher.overloads:
        return True
    now = time.perf_counter()
    last = _last_check.get(key)
    if last is not None and now - last < RECHECK_S:
        return False
    _last_check[key] = now
    return _from_cache(dispatcher, argtypes)


def first_call(dispatcher, compile_for_args, args, kws):
    """Numba's ``_compile_for_args`` for invkin's kernels (see the module docstring): the entry
    point of the machine code when it is in memory or in the cache, else (a small call in
    background mode) the interpreted function, after sending the compile to the worker."""
    from numba.core.dispatcher import OmittedArg
    from numba.core import types

    if kws or not _interpretable(dispatcher, args):
        return compile_for_args(*args, **kws)
    t_enter = time.perf_counter()
    argtypes = tuple(types.Omitted(a.value) if isinstance(a, OmittedArg) else dispatcher.typeof_pyval(a)
                     for a in args)
    try:
        if _compiled_now(dispatcher, argtypes):
            return dispatcher.overloads[argtypes].entry_point
    except Exception:  # an unreadable cache entry: compile here, as Numba would
        return compile_for_args(*args)
    if not _request(dispatcher, argtypes):
        return compile_for_args(*args)
    values = tuple(a.value if isinstance(a, OmittedArg) else a for a in args)
    from ._compile_clock import add_interpreted_seconds

    add_interpreted_seconds(time.perf_counter() - t_enter)  # (typing the arguments: ~0.5 ms for the core's)
    return lambda *_: _run_interpreted(dispatcher, values)


def ready(dispatcher, args) -> bool:
    """Whether a call of ``dispatcher`` with ``args`` runs machine code (compiled, in the cache, or
    compiled on the spot because it may not run interpreted); False while it would run interpreted.
    For callers that split large work into small interpreted pieces until the compile is done
    (solve_many)."""
    if not _interpretable(dispatcher, args):
        return True
    argtypes = tuple(dispatcher.typeof_pyval(a) for a in args)
    try:
        return _compiled_now(dispatcher, argtypes)
    except Exception:
        return True


def entry_point(dispatcher, argtypes):
    """The machine code's entry point for ``argtypes`` (compiling, loading it from the cache, or
    — in background mode — None after sending the compile to the worker: the caller then calls
    ``interpreted(dispatcher)`` this time and asks again next time). For the call sites that
    bypass Numba's dispatch (Robot.fk's and the LM fast path's entry points)."""
    argtypes = tuple(argtypes)
    ov = dispatcher.overloads.get(argtypes)
    if ov is not None:
        return ov.entry_point
    if mode() == "wait":
        return dispatcher.compile(argtypes)
    try:
        if _compiled_now(dispatcher, argtypes):
            return dispatcher.overloads[argtypes].entry_point
    except Exception:
        return dispatcher.compile(argtypes)
    if not _request(dispatcher, argtypes):
        return dispatcher.compile(argtypes)
    return None


def pending() -> list[str]:
    """Kernels sent to the background worker that are not in the cache yet ("module.name")."""
    out = []
    for (d, argtypes) in list(_requested):
        if argtypes not in d.overloads and not _from_cache(d, argtypes):
            out.append(f"{d.py_func.__module__}.{d.py_func.__qualname__}")
    return out


def wait(timeout: float | None = None) -> bool:
    """Block until every kernel sent to the background worker is compiled and loaded (True), or
    ``timeout`` seconds have passed (False)."""
    t0 = time.perf_counter()
    while pending():
        if timeout is not None and time.perf_counter() - t0 > timeout:
            return False
        w = _worker[0]
        if w is not None and w.poll() is not None:
            return not pending()
        time.sleep(RECHECK_S)
    return True


def call_interpreted(dispatcher, *args):
    """Run ``dispatcher`` on the interpreter (counted as interpreted time)."""
    return _run_interpreted(dispatcher, args)


# ------------------------------------------------------------------ the background worker


def _request(dispatcher, argtypes) -> bool:
    """Send (module, name, argtypes) to this process's worker; False if there is no worker."""
    key = (dispatcher, argtypes)
    if mode() == "interpret":
        return True
    if _owner[0] != os.getpid():  # a forked child: the parent's worker and requests are not its own
        _owner[0] = os.getpid()
        _worker[0] = None
        _requested.clear()
    sent = _requested.get(key)
    if sent is not None:
        w = _worker[0]
        return w is not None and w.poll() is None and time.perf_counter() - sent < GIVE_UP_S
    py = dispatcher.py_func
    try:
        line = base64.b64encode(pickle.dumps((py.__module__, py.__qualname__, argtypes))) + b"\n"
    except Exception:  # a type that does not pickle: compile here
        return False
    with _lock:
        w = _worker[0]
        if w is None or w.poll() is not None:
            w = _start_worker()
            if w is None:
                return False
        try:
            w.stdin.write(line)
            w.stdin.flush()
        except OSError:
            _worker[0] = None
            return False
        _requested[key] = time.perf_counter()
    _announce()
    return True


def _log_path() -> Path:
    return _cache_dir[0]() / "background-compile.log"


def _start_worker():
    if not sys.executable or "python" not in Path(sys.executable).name.lower():
        return None  # an embedding application (Blender, ...): its executable is not a Python to run -m with
    env = dict(os.environ)
    env["INVKIN_COMPILE"] = "wait"
    env["INVKIN_QUIET"] = "1"
    package_root = str(Path(__file__).resolve().parent.parent)
    env["PYTHONPATH"] = package_root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    try:
        log = _log_path()
        log.parent.mkdir(parents=True, exist_ok=True)
        out = open(log, "ab")
    except OSError:
        out = subprocess.DEVNULL
    try:
        w = subprocess.Popen([sys.executable, "-m", "invkin._compile_worker"], stdin=subprocess.PIPE, stdout=out,
                             stderr=subprocess.STDOUT, env=env, start_new_session=True, close_fds=True)
    except OSError:
        return None
    finally:
        if out is not subprocess.DEVNULL:
            out.close()
    _worker[0] = w
    return w


def _announce():
    if _announced[0] or os.environ.get("INVKIN_QUIET"):
        return
    _announced[0] = True
    print(f"invkin: compiling the solver kernels in a background process (once; later runs load them from "
          f"{_log_path().parent}); until they are ready these calls run on the Python interpreter "
          f"(same iterations, slower). INVKIN_COMPILE=wait compiles in this process instead.",
          file=sys.stderr, flush=True)


def install(dispatcher_class, cache_dir) -> None:
    """Route the first Python-level call of invkin's kernels through :func:`first_call`
    (``cache_dir``: invkin.cache.cache_dir, where the worker's log goes)."""
    _cache_dir[0] = cache_dir
    original = dispatcher_class._compile_for_args
    if getattr(original, "_invkin_tiers", False):
        return

    def _compile_for_args(self, *args, **kws):
        if (self.py_func.__module__ or "").startswith(_PACKAGE):
            return first_call(self, lambda *a, **k: original(self, *a, **k), args, kws)
        return original(self, *args, **kws)

    _compile_for_args._invkin_tiers = True
    dispatcher_class._compile_for_args = _compile_for_args
