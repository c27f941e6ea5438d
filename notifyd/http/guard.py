"""The listening socket's guard: a bounded number of connections, none of them held idle.

Every connection must start a request within server.header_timeout_sec of opening, and of its
previous request ending (that is also the keep-alive idle timeout): a connection that dribbles its
headers (slowloris) or sits idle is closed. At server.max_connections, a new connection takes the
place of the one idle longest whose socket holds no unread bytes, so a flood of half-open sockets
cannot keep a healthy client out; if every connection is busy with a request, or has its next one
waiting to be read, the new one is closed at once.
Bodies have their own timeout (web.read_body). A malformed request is answered in the API's
error shape, and accept() running out of file descriptors is one rate-limited line, not a
traceback a second.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import itertools
import logging
import socket
import typing
from collections.abc import Awaitable, Callable
from typing import Any

import orjson
from aiohttp import web
from aiohttp.web_protocol import RequestHandler

from notifyd.core.clock import Clock
from notifyd.core.logs import RateLimit
from notifyd.engine.metrics import Metrics
from notifyd.http.errors import CATALOG

log = logging.getLogger("notifyd.http")
SWEEP_SEC = 1.0
# Idle connections looked at for one that may give its place to a newcomer. A keep-alive client
# in a flood idles between requests with its next one often already in the socket: evicting it
# threw that request away (measured: 38 accepts/s with 3x more clients than places).
EVICT_CANDIDATES = 16
BACKLOG = 1024  # connections the kernel may queue while accept() waits
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class Guarded(asyncio.Protocol):
    """One connection: aiohttp's handler inside, with the time it last started idling."""

    def __init__(self, guard: ConnectionGuard, inner: RequestHandler) -> None:
        self.guard, self.inner = guard, inner
        self.transport: asyncio.Transport | None = None
        self.admitted = False
        self.idle_since: int | None = None  # None while a request is being handled
        self.lost = asyncio.Event()  # set when the peer is gone (a stream's handler waits on it)
        inner.__class__ = JsonErrors  # the same object, answering parse errors in our shape

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports are not asyncio.Transport subclasses; they have its methods.
        self.transport = typing.cast(asyncio.Transport, transport)
        if not self.guard.admit(self):
            self.transport.abort()
            return
        self.admitted = True
        self.inner.connection_made(transport)

    def data_received(self, data: bytes) -> None:
        self.inner.data_received(data)

    def eof_received(self) -> bool | None:
        self.inner.eof_received()
        return None

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost.set()
        self.guard.forget(self)
        if self.admitted:
            self.inner.connection_lost(exc)

    def pause_writing(self) -> None:
        self.inner.pause_writing()

    def resume_writing(self) -> None:
        self.inner.resume_writing()


class ConnectionGuard:
    def __init__(self, clock: Clock, max_connections: int, header_timeout_sec: float,
                 backlog: int = BACKLOG, metrics: Metrics | None = None) -> None:
        self.clock = clock
        self.metrics = metrics or Metrics()
        self.backlog = backlog
        self.max_connections = max_connections
        self.timeout_ms = int(header_timeout_sec * 1000)
        self.open: dict[asyncio.BaseTransport, Guarded] = {}  # in the order they went idle
        self.refused = self.evicted = self.timed_out = 0

    def resize(self, max_connections: int, header_timeout_sec: float) -> None:
        """New bounds (a reload's): connections over a lower ceiling stay until they go idle
        and a newcomer takes the place of one; the next sweep times out by the new timeout."""
        self.max_connections = max_connections
        self.timeout_ms = int(header_timeout_sec * 1000)

    def protocol(self, inner: RequestHandler) -> Guarded:
        return Guarded(self, inner)

    def admit(self, conn: Guarded) -> bool:
        if len(self.open) >= self.max_connections:
            oldest = itertools.islice((c for c in self.open.values() if c.idle_since is not None),
                                      EVICT_CANDIDATES)
            idle = next((c for c in oldest if not _unread(c)), None)
            if idle is None:  # every connection busy, or about to be: the newcomer waits its turn
                self.refused += 1
                self.metrics.connections_closed.labels("refused").inc()
                return False
            self.evicted += 1
            self.metrics.connections_closed.labels("evicted").inc()
            self._close(idle)
        assert conn.transport is not None
        conn.idle_since = self.clock.now_ms()
        self.open[conn.transport] = conn
        return True

    def release(self, transport: asyncio.BaseTransport) -> asyncio.Event | None:
        """A connection that became a long-lived stream leaves the count and the guard: it is
        neither evicted nor timed out (server.max_streams bounds those). What is returned is
        set when the peer goes, so the stream ends then, not at its next write."""
        conn = self.open.pop(transport, None)
        return conn.lost if conn is not None else None

    def forget(self, conn: Guarded) -> None:
        if conn.transport is not None:
            self.open.pop(conn.transport, None)

    def _close(self, conn: Guarded) -> None:
        self.forget(conn)
        if conn.transport is not None:
            conn.transport.abort()

    @web.middleware
    async def middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        """Marks the connection busy while its request runs and its answer goes out, idle (and
        last in line) after: a connection is never evicted with an answer still unsent."""
        conn = self.open.get(request.transport) if request.transport else None
        if conn is not None:
            conn.idle_since = None
        try:
            response = await handler(request)
            with contextlib.suppress(ConnectionResetError):  # the client left: nothing to send
                await response.prepare(request)  # aiohttp's own prepare and write_eof are then
                await response.write_eof()  # no-ops
            return response
        finally:
            if conn is not None and request.transport in self.open:
                del self.open[request.transport]  # re-inserted: idle the shortest now
                self.open[request.transport] = conn
                conn.idle_since = self.clock.now_ms()

    def sweep(self) -> int:
        """Close connections idle past the timeout (no request started in time)."""
        cutoff = self.clock.now_ms() - self.timeout_ms
        stale = [c for c in self.open.values()
                 if c.idle_since is not None and c.idle_since <= cutoff]
        for conn in stale:
            self._close(conn)
        self.timed_out += len(stale)
        self.metrics.connections_closed.labels("timed_out").inc(len(stale))
        self.metrics.connections_open.set(len(self.open))
        return len(stale)

    async def run(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            self.sweep()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), SWEEP_SEC)


def _unread(conn: Guarded) -> bool:
    """Whether the connection still has bytes in flight: its next request unread in the socket,
    or an answer not yet written out."""
    transport = conn.transport
    fd = transport.get_extra_info("socket").fileno() if transport is not None else -1
    if fd < 0 or transport is None:
        return False
    if transport.get_write_buffer_size():
        return True
    peek = socket.socket(fileno=fd)  # borrowed, never closed here: detached below
    try:
        return bool(peek.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT))
    except OSError:  # nothing to read (EAGAIN), or the socket is already broken
        return False
    finally:
        peek.detach()


class GuardedSite(web.SockSite):
    """A SockSite whose connections go through the guard."""

    def __init__(self, runner: web.BaseRunner, sock: socket.socket,
                 guard: ConnectionGuard) -> None:
        super().__init__(runner, sock, backlog=guard.backlog)
        self.guard = guard

    async def start(self) -> None:
        await web.BaseSite.start(self)  # registers the site with its runner
        server = self._runner.server
        assert server is not None
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(
            lambda: self.guard.protocol(server()), sock=self._sock, backlog=self._backlog)


class JsonErrors(RequestHandler):
    """aiohttp's handler, answering a request it cannot parse in the API's error shape rather
    than in plain text (no new state: it only overrides handle_error)."""

    __slots__ = ()

    def handle_error(self, request: Any, status: int = 500, exc: BaseException | None = None,
                     message: str | None = None) -> web.StreamResponse:
        super().handle_error(request, status, exc, message)  # its logging: one line for a 400
        code = {400: "invalid_request", 413: "body_too_large"}.get(status, "internal")
        status = status if status in (400, 413) else 500
        body = orjson.dumps({"error": {"code": code, "message": CATALOG[code].message,
                                       "field": None}})
        resp = web.Response(status=status, body=body, content_type="application/json")
        resp.force_close()
        return resp


def loop_errors(clock: Clock) -> Callable[[asyncio.AbstractEventLoop, dict[str, Any]], None]:
    """The loop's exception handler: out of file descriptors in accept() is one line per 10 s
    (asyncio pauses accepting for a second each time); anything else as asyncio reports it."""
    limit = RateLimit(clock, 10_000)

    def handler(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        exc = context.get("exception")
        if isinstance(exc, ValueError) and "_start_serving" in repr(context.get("handle")):
            # asyncio resumes accepting a second after EMFILE; if the server closed in the
            # meantime its socket is gone: nothing to resume, nothing to report.
            return
        if isinstance(exc, OSError) and exc.errno in (errno.EMFILE, errno.ENFILE):
            held = limit.allow()
            if held is not None:
                log.warning("out of file descriptors: new connections wait (%d more times "
                            "since the last line); raise LimitNOFILE or lower "
                            "server.max_connections", held)
            return
        loop.default_exception_handler(context)

    return handler
