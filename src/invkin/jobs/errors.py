"""The jobs' error, and optional dependencies that say which extra installs them."""
from __future__ import annotations

from ..errors import InvkinError


class JobError(InvkinError):
    """Bad job input: a targets file, an output folder, a scheduler address, a missing extra."""


def _require(module: str, extra: str = "distributed"):
    """Import an optional dependency, or say which extra installs it."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError:
        raise JobError(f"this feature needs the optional package {module.split('.')[0]!r}: "
                       f"pip install invkin[{extra}]") from None


def _arrow():
    """(pyarrow, pyarrow.parquet), or a JobError naming the extra."""
    return _require("pyarrow"), _require("pyarrow.parquet")
