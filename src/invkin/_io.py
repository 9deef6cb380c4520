"""Files in and out, safely: the one home of invkin's atomic writes and guarded reads.

Writing (:func:`atomic_write`, :func:`atomic_open`, :func:`atomic_path`): the data goes to a temporary file in the
destination's own folder, which is then renamed over the destination (``os.replace``: readers see
the old file or the new one, never a half-written one). Rules:

* only a regular file is ever replaced: a folder, a FIFO, a socket or a device node (``/dev/null``)
  at the destination is refused with :class:`~invkin.errors.FileError` naming the path, and left
  as it was;
* a symlink is written *through*: its target is replaced and the link stays a link (a dangling
  link creates its target);
* the destination keeps its permission bits; a new file gets ``0o666`` less the umask (``0644``
  under the usual umask 022), as ``open(path, "w")`` would create it;
* on any failure (a full disk, an exception while writing, Ctrl-C) the temporary file is removed
  and the destination is untouched.

Reading (:func:`open_regular`): a path that is not a regular file (a FIFO named ``x.urdf``, a
folder, ``/dev/zero``) is refused before anything blocks on it: the file is opened non-blocking
and checked with ``fstat``, so a FIFO without a writer cannot hang the reader.
"""
from __future__ import annotations

import contextlib
import os
import stat
import uuid

from .errors import FileError

__all__ = ["TMP_MARK", "atomic_open", "atomic_path", "atomic_write", "open_regular", "path_str"]

#: Temporary files are named ``.<name>.tmp-<pid>-<random>`` beside the destination.
TMP_MARK = ".tmp-"


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device")):
        if test(mode):
            return name
    return "not a regular file"


def path_str(path, error=FileError, expected: str = "a file path") -> str:
    """``path`` (str, bytes or os.PathLike) as a str; anything else raises ``error`` naming it."""
    try:
        p = os.fspath(path)
    except TypeError:
        raise error(f"expected {expected}, got {path!r:.200}") from None
    return os.fsdecode(p) if isinstance(p, bytes) else p


def _target(path) -> tuple[str, int | None]:
    """(the path to replace, its permission bits or None if it does not exist yet): symlinks are
    followed to their target; anything but a regular file is refused."""
    p = path_str(path)
    if not p:
        raise FileError("expected a file path, got ''")
    real = os.path.realpath(p)
    try:
        st = os.stat(real)
    except FileNotFoundError:
        return real, None
    except OSError as e:
        raise FileError(f"{p}: cannot write: {e.strerror or e}") from None
    if not stat.S_ISREG(st.st_mode):
        where = p if real == os.path.abspath(p) else f"{p} (-> {real})"
        raise FileError(f"{where}: is {_kind(st.st_mode)}, not a regular file; refusing to replace it")
    return real, stat.S_IMODE(st.st_mode)


@contextlib.contextmanager
def atomic_path(path, suffix: str = ""):
    """A temporary path beside ``path`` (ending in ``suffix``, for libraries that want one), which
    replaces ``path`` when the block ends without an exception: for writers that take a file name
    (pygltflib, ``numpy.savez``). The rules of the module docstring hold; the temporary file
    exists (empty, with the destination's mode) when the block starts."""
    dst, keep_mode = _target(path)
    folder, name = os.path.split(dst)
    tmp = os.path.join(folder, f".{name}{TMP_MARK}{os.getpid()}-{uuid.uuid4().hex[:8]}{suffix}")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)  # the umask applies
    except OSError as e:
        raise FileError(f"{os.fspath(path)}: cannot write in {folder}: {e.strerror or e}") from None
    try:
        try:
            if keep_mode is not None:
                os.fchmod(fd, keep_mode)
        finally:
            os.close(fd)
        yield tmp
        if not stat.S_ISREG(os.lstat(tmp).st_mode):  # a writer replaced it by something else
            raise FileError(f"{tmp}: the temporary file is no longer a regular file")
        os.replace(tmp, dst)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


@contextlib.contextmanager
def atomic_open(path, mode: str = "wb", durable: bool = False, encoding: str | None = None, newline=None):
    """A file object on a temporary file beside ``path``, renamed over ``path`` when the block ends
    without an exception (see the module docstring for the rules). ``mode``: "wb" or "w".
    ``durable``: fsync the file and its folder (a power cut leaves the old or the new file)."""
    if mode not in ("wb", "w"):
        raise ValueError(f"atomic_open: mode must be 'wb' or 'w', got {mode!r}")
    text = {} if mode == "wb" else {"encoding": encoding or "utf-8", "newline": newline}
    with atomic_path(path) as tmp:
        with open(tmp, mode, **text) as f:
            yield f
            f.flush()
            if durable:
                os.fsync(f.fileno())
    if durable:
        _fsync_dir(os.path.dirname(os.path.realpath(os.fspath(path))))


def atomic_write(path, data, durable: bool = False, encoding: str = "utf-8") -> None:
    """Write ``data`` (bytes, or str encoded with ``encoding``) to ``path`` atomically (see the
    module docstring). Raises FileError for a destination that is not a regular file or a folder
    that cannot be written."""
    if isinstance(data, str):
        data = data.encode(encoding)
    with atomic_open(path, "wb", durable=durable) as f:
        f.write(data)


def _fsync_dir(path: str) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:  # pragma: no cover - platforms without directory fds
        return
    try:
        os.fsync(fd)
    except OSError:  # pragma: no cover
        pass
    finally:
        os.close(fd)


def open_regular(path, what: str = "file", error=FileError, max_bytes: int | None = None):
    """Open ``path`` for binary reading if it is a regular file, else raise ``error`` naming it.

    The open is non-blocking (a FIFO without a writer returns at once and is then refused by
    fstat); the returned file object blocks normally. ``max_bytes``: a file larger than this is
    refused from its size before any byte is read."""
    p = path_str(path, error, f"a path to a {what}")
    try:
        fd = os.open(p, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise error(f"{p}: no such {what}") from None
    except IsADirectoryError:
        raise error(f"{p}: is a directory; expected a {what}") from None
    except OSError as e:
        raise error(f"{p}: cannot read the {what}: {e.strerror or e}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise error(f"{p}: is {_kind(st.st_mode)}; expected a regular {what}")
        if max_bytes is not None and st.st_size > max_bytes:
            raise error(f"{p}: file is {st.st_size} bytes, over the {max_bytes}-byte limit")
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
        f = os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise
    return f


def read_npz(path, what: str = ".npz archive", error=FileError, data: bytes | None = None) -> dict:
    """Every member of the .npz archive at ``path`` (``data``: its bytes, already read), read now so
    that a damaged member fails here, or ``error`` naming the file and ``what`` it should be: not a
    regular file, one .npy array under a .npz name, not a zip archive (numpy's own message would
    advise loading it with pickle), a damaged archive."""
    import io
    import zipfile
    import zlib

    import numpy as np

    if data is None:
        with open_regular(path, what, error) as f:
            data = f.read()
    p = path_str(path, error)
    if data.startswith(b"\x93NUMPY"):  # np.load would return the one array, which has no members
        raise error(f"{p}: not a {what}: a single .npy array (a .npz is a zip archive of arrays)")
    if not data.startswith((b"PK\x03\x04", b"PK\x05\x06")):
        raise error(f"{p}: not a {what}: not a zip archive (it starts with {data[:8]!r}; a .npz starts "
                    f"with b'PK')")
    try:
        with np.load(io.BytesIO(data), allow_pickle=False) as z:
            return {k: z[k] for k in z.files}
    except (ValueError, OSError, EOFError, zipfile.BadZipFile, zlib.error, KeyError) as e:
        raise error(f"{p}: not a {what}: a damaged zip archive ({type(e).__name__}: {e})") from None
