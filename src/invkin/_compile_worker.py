"""The background compile process of :mod:`invkin._tiers` (``python -m invkin._compile_worker``).

It reads requests from stdin, one per line — a base64 pickle of (module, qualified name, Numba
argument types) — and compiles each into invkin's kernel cache (:func:`invkin.cache.cache_dir`),
one worker at a time per cache folder (a file lock), logging a line per kernel. It exits when its
parent has closed the pipe (exited) and the queue is done; ``INVKIN_COMPILE=wait`` (set by the
parent) keeps it from starting workers of its own.
"""
from __future__ import annotations

import base64
import importlib
import os
import pickle
import sys
import time

from .cache import cache_dir, install


def main() -> int:
    """Compile each request read from stdin (base64 pickles of (module, qualname, argtypes)), one
    worker at a time per cache folder; exit at end of input."""
    install()  # the cache locator, before the kernels' modules load
    lock = None
    try:
        import fcntl

        cache_dir().mkdir(parents=True, exist_ok=True)
        lock = open(cache_dir() / ".background-compile.lock", "a")
    except (ImportError, OSError):
        fcntl = None
    for raw in sys.stdin.buffer:
        raw = raw.strip()
        if not raw:
            continue
        try:
            module, qualname, argtypes = pickle.loads(base64.b64decode(raw))
            obj = importlib.import_module(module)
            for part in qualname.split("."):
                obj = getattr(obj, part)
        except Exception as exc:  # noqa: BLE001 - a request this worker cannot read: say so, go on
            print(f"{time.strftime('%H:%M:%S')} pid {os.getpid()}: bad request {raw[:80]!r}: {exc!r}", flush=True)
            continue
        t0 = time.perf_counter()
        if fcntl is not None and lock is not None:
            fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            obj.compile(argtypes)
        except Exception as exc:  # noqa: BLE001 - the parent compiles it itself when it needs it
            print(f"{time.strftime('%H:%M:%S')} pid {os.getpid()}: {module}.{qualname} failed: {exc!r}", flush=True)
            continue
        finally:
            if fcntl is not None and lock is not None:
                fcntl.flock(lock, fcntl.LOCK_UN)
        print(f"{time.strftime('%H:%M:%S')} pid {os.getpid()}: {module}.{qualname} ready "
              f"({time.perf_counter() - t0:.1f} s)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
