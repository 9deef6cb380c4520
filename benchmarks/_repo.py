"""What the benchmark scripts record about the code they measure."""
from __future__ import annotations

import subprocess
from pathlib import Path


def git_state() -> str:
    """Commit of the checkout whose ``invkin`` is imported (not necessarily this script's: a
    before/after run imports another tree's ``src``), '+dirty' when its src/ has uncommitted
    changes; '?' outside a git checkout."""
    import invkin

    where = str(Path(invkin.__file__).resolve().parent)
    try:
        head = subprocess.run(["git", "-C", where, "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "-C", where, "status", "--porcelain", "--", "."], capture_output=True,
                               text=True, timeout=10).stdout.strip()
        return (head or "?") + ("+dirty" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        return "?"
