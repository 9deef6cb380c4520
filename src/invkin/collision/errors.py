"""Errors and warnings of the collision package."""
from __future__ import annotations

from ..errors import InvkinError

__all__ = ["CollisionError", "CollisionWarning"]


class CollisionError(InvkinError, ValueError):
    """A malformed obstacle or collision option: NaN, a zero or negative size, a negative margin,
    or a mesh that needs the missing ``trimesh`` (``pip install "invkin[collision]"``)."""


class CollisionWarning(UserWarning):
    """A collision shape was left out or approximated; the message names it (a missing mesh file:
    the link keeps its other shapes)."""
