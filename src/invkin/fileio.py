"""Writing files atomically: a reader sees the old file or the new one, never half of one.

The implementation and its rules (regular files only, symlinks written through, the mode kept,
temporary files removed on failure) live in :mod:`invkin._io`; this module keeps the name
``atomic_path`` where the glTF writer imports it.
"""
from __future__ import annotations

from ._io import atomic_path

__all__ = ["atomic_path"]
