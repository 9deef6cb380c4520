"""The viewer's front door: the port the user asked for, where every HTTP request gets a reply.

viser serves its page and its websocket through the ``websockets`` library, whose HTTP parser
takes only ``GET ... HTTP/1.1`` without a body. Anything else (HEAD, POST, DELETE, OPTIONS, an
HTTP/1.0 request, a GET with a body) was read, refused inside the parser, and the connection
closed without a status line: ``curl -X POST`` printed "Empty reply from server". Its 404 had no
body, Content-Type or Content-Length, and no reply said ``Connection: close`` although each
closed the connection.

So viser listens on a loopback port of its own, and this server owns the public one:

* a websocket upgrade (``GET`` + ``Upgrade: websocket``, HTTP/1.1) goes to viser unchanged and the
  two connections are spliced byte for byte, both ways, until either side closes;
* ``GET`` and ``HEAD`` of a page are fetched from viser as a plain GET and answered with its status
  and body, Content-Type (text with ``charset=utf-8``), Content-Length and ``Connection: close``;
  HEAD sends the same headers and no body; a body-less error from viser (its 404) gets a
  one-line ``text/plain`` body naming the status and the path;
* ``OPTIONS`` answers 204 with ``Allow``; any other method answers 405 with
  ``Allow: GET, HEAD, OPTIONS`` (404 where the path does not exist, whatever the method);
* a malformed request line answers 400, a version other than HTTP/1.x 505, a head over 64 KiB
  431, a head not complete within 10 s 408; viser not answering 502.

A request body is never read as data: after the reply the server shuts its sending side and drops
what the client still sends (for at most 2 s) before closing, so the client reads the whole reply
rather than a reset. Everything runs in one asyncio loop in a daemon thread; a client that goes
away mid-request is no error, and nothing a client sends makes a traceback.
"""
from __future__ import annotations

import asyncio
import email.utils
import errno
import http
import threading
from urllib.parse import unquote, urlsplit

ALLOW = "GET, HEAD, OPTIONS"
MAX_HEAD = 64 * 1024          # request line + headers [bytes]
HEAD_TIMEOUT = 10.0           # to receive a complete request head [s]
UPSTREAM_TIMEOUT = 30.0       # for viser's reply to a page request [s]
MAX_UPSTREAM = 256 * 1024 ** 2  # largest page read from viser [bytes] (its client is ~0.8 MB)
LINGER = 2.0                  # draining a client's unread body after the reply [s]
_ADDR_IN_USE = (errno.EADDRINUSE, 48, 10048)  # Linux, macOS, Windows


class FrontDoor:
    """Listen on ``host:port`` (0: a free port) and answer there for a viser server on
    ``127.0.0.1:upstream_port``. :meth:`start` raises OSError when the address cannot be bound."""

    def __init__(self, host: str, port: int, upstream_port: int):
        self.host, self.requested_port, self.upstream_port = host, int(port), int(upstream_port)
        self.sockets: list = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server = None
        self._thread: threading.Thread | None = None
        self._tasks: set = set()

    @property
    def port(self) -> int:
        return self.sockets[0].getsockname()[1] if self.sockets else self.requested_port

    def start(self) -> "FrontDoor":
        ready = threading.Event()
        failure: list = []

        def run():
            loop = asyncio.new_event_loop()
            asyncio.set_event_loop(loop)
            self._loop = loop
            try:
                self._server = loop.run_until_complete(self._bind())
                self.sockets = list(self._server.sockets)
            except BaseException as exc:  # noqa: BLE001 - handed to start(), which raises it
                failure.append(exc)
                ready.set()
                loop.close()
                return
            ready.set()
            try:
                loop.run_forever()
            finally:
                loop.close()

        self._thread = threading.Thread(target=run, name="invkin-viewer-http", daemon=True)
        self._thread.start()
        ready.wait()
        if failure:
            self._thread.join()
            self._thread = None
            raise failure[0]
        return self

    async def _bind(self):
        server = await asyncio.start_server(self._connection, self.host, self.requested_port,
                                            limit=MAX_HEAD)
        if self.requested_port == 0 and len({s.getsockname()[1] for s in server.sockets}) > 1:
            # a name with several addresses (localhost: 127.0.0.1 and ::1) got one free port
            # per address: bind them all again on the first one
            port = server.sockets[0].getsockname()[1]
            server.close()
            await server.wait_closed()
            server = await asyncio.start_server(self._connection, self.host, port, limit=MAX_HEAD)
        return server

    def stop(self) -> None:
        """Close the port and every open connection (idempotent)."""
        loop, thread = self._loop, self._thread
        self._thread = None
        if loop is None or thread is None:
            return

        async def shut():
            self._server.close()
            for task in list(self._tasks):
                task.cancel()
            await asyncio.gather(*self._tasks, return_exceptions=True)

        try:
            asyncio.run_coroutine_threadsafe(shut(), loop).result(timeout=5.0)
        except Exception:  # noqa: BLE001 - stopping: a straggler must not keep the port open
            pass
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=5.0)
        self.sockets = []

    # ------------------------------------------------------------------ one connection

    async def _connection(self, reader, writer) -> None:
        task = asyncio.current_task()
        self._tasks.add(task)
        try:
            await self._serve(reader, writer)
        except (asyncio.CancelledError, ConnectionError, OSError, asyncio.IncompleteReadError):
            pass  # the client or the server went away
        except Exception:  # noqa: BLE001 - a bug here must cost one connection, not the server
            try:
                await _reply(writer, 500, "the viewer failed to answer this request")
            except Exception:  # noqa: BLE001 - the client is already gone
                pass
        finally:
            self._tasks.discard(task)
            writer.close()

    async def _serve(self, reader, writer) -> None:
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), HEAD_TIMEOUT)
        except asyncio.TimeoutError:
            return await _reply(writer, 408, "the request head did not arrive within "
                                             f"{HEAD_TIMEOUT:g} s", reader)
        except (asyncio.LimitOverrunError, ValueError):
            return await _reply(writer, 431, f"the request head is over {MAX_HEAD} bytes", reader)
        except asyncio.IncompleteReadError:
            return None  # closed before a complete head: nobody to answer
        request = _parse_head(head)
        if len(request) == 2:
            status, text = request
            return await _reply(writer, status, text, reader)
        method, path, version, headers = request
        if (method == "GET" and version == "HTTP/1.1"
                and "websocket" in headers.get("upgrade", "").lower()):
            return await self._splice(head, reader, writer)
        upstream = await self._fetch(path, headers.get("accept-encoding", ""))
        if upstream is None:
            return await _reply(writer, 502, "the viewer's page server did not answer", reader)
        status, up_headers, body = upstream
        if status == 404 or method in ("GET", "HEAD"):
            if not body and status >= 400:
                return await _reply(writer, status, f"{path}", reader, head_only=method == "HEAD")
            extra = {"Vary": "Accept-Encoding"}
            if up_headers.get("content-encoding", "identity") != "identity":
                extra["Content-Encoding"] = up_headers["content-encoding"]
            ctype = up_headers.get("content-type", "application/octet-stream")
            if ctype.startswith("text/") and "charset" not in ctype:
                ctype += "; charset=utf-8"  # viser's page is UTF-8
            return await _send(writer, status, ctype, body, reader, head_only=method == "HEAD", extra=extra)
        if method == "OPTIONS":
            return await _send(writer, 204, None, b"", reader, extra={"Allow": ALLOW})
        return await _reply(writer, 405, f"{method} is not allowed here; use one of: {ALLOW}",
                            reader, extra={"Allow": ALLOW})

    async def _fetch(self, path: str, accept_encoding: str):
        """(status, headers, body) of viser's reply to ``GET path``; None when it does not answer."""
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.upstream_port)
        except OSError:
            return None
        try:
            request = f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{self.upstream_port}\r\n"
            if accept_encoding:
                request += f"Accept-Encoding: {accept_encoding}\r\n"
            up_writer.write((request + "Connection: close\r\n\r\n").encode("latin-1"))
            await up_writer.drain()
            raw = await asyncio.wait_for(_read_all(up_reader, MAX_UPSTREAM), UPSTREAM_TIMEOUT)
        except (OSError, asyncio.TimeoutError, ValueError):
            return None
        finally:
            up_writer.close()
        head, sep, body = raw.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        parts = lines[0].split(" ", 2)
        if not sep or len(parts) < 2 or not parts[1].isdigit():
            return None
        headers = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        if "content-length" in headers and headers["content-length"].isdigit():
            body = body[: int(headers["content-length"])]
        return int(parts[1]), headers, body

    async def _splice(self, head: bytes, reader, writer) -> None:
        """Hand a websocket upgrade to viser and copy bytes both ways until either side closes."""
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.upstream_port)
        except OSError:
            return await _reply(writer, 502, "the viewer's websocket server did not answer", reader)
        try:
            up_writer.write(head)
            await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))
        finally:
            up_writer.close()


def _parse_head(head: bytes):
    """(method, path, version, headers) of a request head, or (status, text) to refuse it."""
    lines = head.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ")
    if len(parts) != 3 or not parts[0].isalpha() or not parts[2].startswith("HTTP/"):
        return 400, f"malformed request line {lines[0][:200]!r}"
    method, target, version = parts
    if version not in ("HTTP/1.0", "HTTP/1.1"):
        return 505, f"{version[:20]} is not supported; use HTTP/1.1"
    if method.upper() != method:
        return 400, f"malformed method {method[:20]!r} (methods are upper case)"
    if target.startswith(("http://", "https://")):  # absolute form, as sent to a proxy
        target = urlsplit(target).path or "/"
    if method == "OPTIONS" and target == "*":
        target = "/"
    if not target.startswith("/"):
        return 400, f"malformed request target {target[:200]!r}"
    if any(c in target for c in "\x00\r\n") or any(c in unquote(target) for c in "\x00\r\n"):
        return 400, "control characters in the request target"
    headers = {}
    for line in lines[1:]:
        if not line:
            continue
        name, sep, value = line.partition(":")
        if not sep or not name or name != name.strip():
            return 400, f"malformed header line {line[:200]!r}"
        headers[name.lower()] = value.strip()
    return method, target, version, headers


async def _read_all(reader, limit: int) -> bytes:
    chunks, size = [], 0
    while data := await reader.read(1 << 16):
        chunks.append(data)
        size += len(data)
        if size > limit:
            raise ValueError("reply too large")
    return b"".join(chunks)


async def _pipe(reader, writer) -> None:
    try:
        while data := await reader.read(1 << 16):
            writer.write(data)
            await writer.drain()
    except (ConnectionError, OSError):
        pass
    finally:
        writer.close()


async def _reply(writer, status: int, text: str, reader=None, *, head_only: bool = False,
                 extra: dict | None = None) -> None:
    """A plain-text reply: ``'<code> <phrase>: <text>'``, one line."""
    phrase = http.HTTPStatus(status).phrase
    body = f"{status} {phrase}: {text}\n".encode("utf-8", "replace")
    await _send(writer, status, "text/plain; charset=utf-8", body, reader, head_only=head_only, extra=extra)


async def _send(writer, status: int, ctype: str | None, body: bytes, reader=None, *,
                head_only: bool = False, extra: dict | None = None) -> None:
    """Write one complete reply and close; drop what the client still sends first (its body)."""
    lines = [f"HTTP/1.1 {status} {http.HTTPStatus(status).phrase}",
             f"Date: {email.utils.formatdate(usegmt=True)}"]
    if ctype is not None:
        lines.append(f"Content-Type: {ctype}")
    if status != 204:
        lines.append(f"Content-Length: {len(body)}")
    lines += [f"{k}: {v}" for k, v in (extra or {}).items()]
    lines.append("Connection: close")
    writer.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))
    if not head_only and status != 204:
        writer.write(body)
    await writer.drain()
    if reader is not None and writer.can_write_eof():
        writer.write_eof()
        try:  # closing with unread data would send a reset, which can destroy the reply in flight
            await asyncio.wait_for(_discard(reader), LINGER)
        except (asyncio.TimeoutError, ConnectionError, OSError):
            pass


async def _discard(reader) -> None:
    while await reader.read(1 << 16):
        pass
