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


def _resolve(host: str, port: int = 0) -> list:
    """getaddrinfo of host (a ViewerError at once for a name that does not resolve)."""
    if not isinstance(host, str) or not host or len(host) > 253:
        raise ViewerError(f"host must be a host name or address, got {host!r:.100}")
    try:
        return socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError, ValueError) as exc:
        raise ViewerError(f"cannot bind the viewer to host {host!r}: {getattr(exc, 'strerror', None) or exc}") from None


def check_host(host: str, allow_remote: bool = False):
    """The start-up check of the address a viewer listens on: None for a loopback host (only this
    machine can connect), else the warning to print when ``allow_remote`` is set; without it a
    non-loopback host (0.0.0.0, ::, a LAN address) is a ViewerError: the viewer has no
    authentication, so anyone who reaches the port can see and drive it."""
    import ipaddress

    addrs = sorted({info[4][0] for info in _resolve(host)})
    remote = [a for a in addrs if not ipaddress.ip_address(a.split("%")[0]).is_loopback]
    if not remote:
        return None
    where = "every network interface" if any(a in ("0.0.0.0", "::") for a in remote) else ", ".join(remote)
    if not allow_remote:
        raise ViewerError(f"host {host!r} listens on {where}, not only this machine; the viewer has no "
                          f"authentication. Use --host 127.0.0.1, or pass --allow-remote to expose it")
    return (f"WARNING: the viewer listens on {host} ({where}) without authentication: anyone who can "
            f"reach this machine on its port can watch and drive it")


def _check_port_free(host: str, port: int) -> None:
    """Raise PortInUseError when something already listens on host:port (port 0: any port), and
    ViewerError at once for a host that does not resolve (whatever the port)."""
    infos = _resolve(host, port)
    if port == 0:
        return
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


class _OneLineClientErrors:
    """A logging filter for websockets' server logger: a page that sends a message viser cannot
    decode (malformed msgpack, an unknown message type, a text frame) is dropped by the server,
    which logs "connection handler failed" with a traceback; this turns that record into one line
    naming the error."""

    def filter(self, record) -> bool:
        if record.getMessage() == "connection handler failed" and record.exc_info:
            exc = record.exc_info[1]
            if isinstance(exc, AssertionError) and not str(exc):  # viser asserts a binary frame
                what = "a text frame, not a binary msgpack message"
            else:
                what = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
            record.msg = "invkin viewer: dropped a client that sent a message the viewer cannot read (%s)"
            record.args = (what[:300],)
            record.exc_info = record.exc_text = None
        return True


_CLIENT_FILTER = _OneLineClientErrors()


def _quiet_client_errors() -> None:
    """Install the one-line filter on websockets' server logger (once per process)."""
    import logging

    logger = logging.getLogger("websockets.server")
    if _CLIENT_FILTER not in logger.filters:
        logger.addFilter(_CLIENT_FILTER)
