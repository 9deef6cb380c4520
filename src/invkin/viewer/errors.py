"""What stops the viewer: its errors, and the checks before a server starts (viser installed, port free)."""
from __future__ import annotations

import socket

from ..errors import InvkinError


class ViewerError(InvkinError):
    """The viewer cannot start or was given a bad setting (viser missing, port in use, ...)."""


class PortInUseError(ViewerError):
    """The requested port is taken by another program."""


def _import_viser():
    try:
        import viser  # noqa: PLC0415 - optional dependency, imported when a viewer starts
    except ImportError as exc:
        raise ViewerError(f"the viewer needs viser, which is not installed ({exc}); install it with "
                          f"pip install 'invkin[viewer]'") from None
    return viser


def _check_port_free(host: str, port: int) -> None:
    """Raise PortInUseError when something already listens on host:port (port 0: any port)."""
    if port == 0:
        return
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        raise ViewerError(f"cannot bind the viewer to host {host!r}: {exc.strerror or exc}") from None
    for family, kind, proto, _, addr in infos:
        with socket.socket(family, kind, proto) as s:
            # the server sets SO_REUSEADDR too: only a listening socket makes the bind fail
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                s.bind(addr)
            except OSError as exc:
                if exc.errno in (98, 48, 10048):  # EADDRINUSE (Linux, macOS, Windows)
                    raise PortInUseError(f"port {port} is already in use on {host}; choose another "
                                         f"with --port") from None
                raise ViewerError(f"cannot bind the viewer to {host}:{port}: {exc.strerror or exc}") from None
