"""The viewer's errors."""
from __future__ import annotations

from ..errors import InvkinError


class ViewerError(InvkinError):
    """The viewer cannot start or was given a bad setting (viser missing, port in use, ...)."""


class PortInUseError(ViewerError):
    """The requested port is taken by another program."""
