"""Writing files atomically: a reader sees the old file or the new one, never half of one."""
from __future__ import annotations

import os
import tempfile
from contextlib import contextmanager

__all__ = ["atomic_path"]


@contextmanager
def atomic_path(dst, suffix: str = ""):
    """Yield a temporary path beside ``dst``; on success it replaces ``dst`` (``os.replace``).

    On any exception the temporary file is removed and ``dst`` is left as it was.
    """
    dst = os.fspath(dst)
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=suffix, dir=os.path.dirname(os.path.abspath(dst)))
    os.close(fd)
    try:
        yield tmp
        os.replace(tmp, dst)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
