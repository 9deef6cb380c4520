"""Exception hierarchy.

Bad input raises a subclass of :class:`InvkinError` whose message names the value received and
what was expected. Not converging is never an error: solvers return a result with a status.
"""
from __future__ import annotations

import difflib
import os
import sys
import warnings

__all__ = [
    "InvkinError",
    "ModelError",
    "ConfigurationError",
    "FrameError",
    "GoalError",
    "SolverError",
    "ModelWarning",
    "FileError",
    "InvkinWarning",
    "closest_names",
]


class InvkinError(Exception):
    """Base class of every error raised by invkin for bad input."""


class ModelError(InvkinError):
    """A robot or skeleton description (URDF, BVH, builder call) is malformed or unsupported."""


class ConfigurationError(InvkinError, ValueError):
    """A joint configuration has the wrong shape or holds NaN/inf."""


class FrameError(InvkinError, KeyError):
    """A frame or joint name that the model does not have."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


class GoalError(InvkinError, ValueError):
    """A goal is malformed: non-finite values, wrong shapes, non-rotations."""


class SolverError(InvkinError, ValueError):
    """A solver was called with options it cannot honour (unknown method, unsupported joints)."""


class FileError(InvkinError):
    """A path cannot be read or written as asked: not a regular file (a FIFO, a device, a folder),
    a missing folder, no permission. The message names the path."""


class InvkinWarning(UserWarning):
    """Input that was accepted after a change the caller should know about (e.g. a joint limit
    beyond the documented bound read as unlimited, a BVH frame count one above the lines present)."""


class ModelWarning(InvkinWarning):
    """A model file was loaded with a repair that the message names (an ignored element, a mimic
    follower fixed or set free); the loaded model is usable."""


def closest_names(name: str, candidates, n: int = 3) -> str:
    """A human hint listing the candidate names closest to ``name`` (it follows "closest: "),
    ignoring case ('PANDA' is closest to 'panda'; case-sensitive, its closest were 'baxter_left',
    'g1', 'g1_left_arm'); when none is close, it says so and shows the first few, not as if they
    were near misses."""
    cands = list(candidates)
    folded = {}
    for c in cands:
        folded.setdefault(str(c).casefold(), c)
    close = [folded[c] for c in difflib.get_close_matches(str(name).casefold(), list(folded), n=n, cutoff=0.4)]
    if close:
        return ", ".join(repr(c) for c in close)
    if not cands:
        return "none (there are no names)"
    more = ", ..." if len(cands) > n else ""
    return f"none of the {len(cands)} names is close (they begin {', '.join(repr(c) for c in cands[:n])}{more})"


# the package's folder as its modules' code objects name it (relative when sys.path is), and absolute
_PACKAGE_DIRS = tuple({os.path.dirname(__file__) + os.sep, os.path.dirname(os.path.abspath(__file__)) + os.sep})


def warn_caller(message: str, category=InvkinWarning) -> None:
    """``warnings.warn(message, category)`` attributed to the first frame outside invkin: the
    caller's ``load_robot`` / ``load_urdf`` / ... line, however deep in the package the repair was
    found (what ``skip_file_prefixes`` does from Python 3.12; invkin supports 3.10)."""
    frame, level = sys._getframe(1), 2  # (stacklevel 1 is this function, 2 its caller: frame)
    while frame is not None and frame.f_code.co_filename.startswith(_PACKAGE_DIRS):
        frame, level = frame.f_back, level + 1
    warnings.warn(message, category, stacklevel=level)
