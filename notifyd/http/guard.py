"""The connections' guard: a bounded number of them, none held idle or unread, none closed for a
newcomer with a request on it, and strangers within their share (http/share.py).

Every connection must start a request within server.header_timeout_sec of opening, and of its
previous request ending (that is also the keep-alive idle timeout): a connection that dribbles its
headers (slowloris) or sits idle is closed. At server.max_connections nothing more is accepted
(http/listener.py): newcomers wait in the kernel's backlog, at no cost, until a place frees; while
one waits, a connection that has been open a quarter of a second without sending a whole request
head (a slowloris socket, a client that connected and said nothing) gives up its place. A connection that
has sent a request is never closed for a newcomer: its request may be running, its answer on its
way, its next request in flight (closing those lost answers whose requests were committed). A
request whose client has already gone is not run: its answer could not arrive.
An answer the client does not read is bounded too: once its unsent bytes fill the socket's and
the transport's buffers (pause_writing), they must all go within server.write_timeout_sec or the
connection is closed, so a client that pipelines requests and never reads the answers loses its
place. A connection that became an inbox stream leaves the count; the bytes it may hold unsent
are bounded: a stream that stays past the bound (its page reads nothing) for header_timeout_sec
is closed, and resumes from the rows when its page comes back.
Bodies have their own timeout: handlers read them under it (kit.bounded), and the rest of a body
that a handler answered without reading (aiohttp reads it, to keep the connection) must arrive
within server.body_timeout_sec of the answer, or the connection is closed. A malformed request
is answered in the API's error shape.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import socket
import typing
from collections.abc import Awaitable, Callable
from typing import Any

import orjson
from aiohttp import web
from aiohttp.streams import StreamReader
from aiohttp.web_protocol import RequestHandler

from notifyd.config import ServerConfig
from notifyd.core.clock import Clock
from notifyd.core.logs import Throttled
from notifyd.engine.metrics import Metrics
from notifyd.http.errors import CATALOG
from notifyd.http.share import Share, Vouch

log = logging.getLogger("notifyd.http")
SWEEP_SEC = 1.0  # the sweep's period, or a quarter of the shortest timeout when that is less
SWEEP_MIN_SEC = 0.02
# A connection may give its place to a waiting newcomer once it has been open this long without
# sending a whole request head (or having one unread in its socket): a client sends its request
# as its connect completes, a slowloris never finishes one. The shorter, the sooner newcomers
# get in under a slowloris (each place turns over this often).
EVICT_AFTER_MS = 250
EVICT_CANDIDATES = 16  # the oldest such connections looked at for one with nothing unread
HEAD_GRACE_MS = 1000  # a request head this recent keeps its connection from the idle sweep
HEAD_END = b"\r\n\r\n"
# An inbox stream's unsent bytes: the kernel's share (SO_SNDBUF; Linux doubles it), then the
# transport's, past which its handler waits for the page to read (and the hub, not waiting,
# closes the stream once its queue is full).
STREAM_SNDBUF = 64 * 1024
STREAM_BUFFER_MAX = 256 * 1024
CLIENT_GONE = 499  # the access log's status for a request not run: its client had left
REQUEST_TIMEOUT = 408  # a body past server.body_timeout_sec (kit.bounded)
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class Guarded(asyncio.Protocol):
    """One connection: aiohttp's handler inside (made once the guard admits it), with when it
    last started idling and when a request head last arrived on it."""

    def __init__(self, guard: ConnectionGuard, make: Callable[[], RequestHandler]) -> None:
        self.guard, self.make = guard, make
        self.inner: RequestHandler | None = None
        self.transport: asyncio.Transport | None = None
        self.opened = 0  # when admitted (ms)
        self.idle_since: int | None = None  # None while a request is being handled
        self.head_at: int | None = None  # the last request head's arrival; None: none yet
        self.stream = False  # an inbox stream now: out of the count, its unsent bytes bounded
        self.on_lost: Callable[[], None] | None = None  # a stream's: its page is gone
        self.behind_since = 0  # a stream's: when its unsent bytes passed the bound (ms)
        self.unread_since: int | None = None  # when its answer's bytes last filled the buffers
        self.body: StreamReader | None = None  # an answered request's body still arriving
        self._tail = b""  # the last bytes received, for a head's end split across reads

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports are not asyncio.Transport subclasses; they have its methods.
        self.transport = typing.cast(asyncio.Transport, transport)
        self.guard.admit(self)
        self.inner = self.make()
        self.inner.__class__ = JsonErrors  # the same object, answering parse errors in our shape
        self.inner.connection_made(transport)

    def data_received(self, data: bytes) -> None:
        if self.inner is None:
            return
        if HEAD_END in data or HEAD_END in self._tail + data[:3]:
            self.guard.heard(self)
        self._tail = data[-3:]
        self.inner.data_received(data)

    def eof_received(self) -> bool | None:
        if self.inner is not None:
            self.inner.eof_received()
        return None  # the transport closes

    def connection_lost(self, exc: Exception | None) -> None:
        if self.on_lost is not None:
            self.on_lost()
        self.guard.forget(self)
        if self.inner is not None:
            self.inner.connection_lost(exc)

    def pause_writing(self) -> None:
        if self.stream:
            self.guard.behind(self, True)
        else:
            self.guard.filled(self)
        if self.inner is not None:
            self.inner.pause_writing()

    def resume_writing(self) -> None:
        if self.stream:
            self.guard.behind(self, False)
        if self.inner is not None:
            self.inner.resume_writing()


class ConnectionGuard:
    def __init__(self, clock: Clock, max_connections: int, server: ServerConfig, vouch: Vouch,
                 metrics: Metrics | None = None) -> None:
        self.clock = clock
        self.metrics = metrics or Metrics()
        self.share = Share(vouch, self.metrics, Throttled(log, clock))
        self.open: dict[asyncio.BaseTransport, Guarded] = {}
        # Admitted and no request head yet, oldest first: the only ones a newcomer may replace.
        self.fresh: dict[asyncio.BaseTransport, Guarded] = {}
        self.arriving = 0  # accepted, not yet admitted
        self.slow: dict[asyncio.BaseTransport, Guarded] = {}  # streams past their bound
        # Connections whose answers filled the buffers, since the last sweep that saw them empty.
        self.unsent: dict[asyncio.BaseTransport, Guarded] = {}
        self.freed = asyncio.Event()  # set when a place frees (the listener waits on it)
        self.evicted = self.timed_out = 0
        self.resize(max_connections, server)

    def resize(self, max_connections: int, server: ServerConfig) -> None:
        """New bounds (a reload's): connections over a lower ceiling stay until they end; the
        next sweep times out by the new timeouts."""
        self.max_connections = max_connections
        self.timeout_ms = int(server.header_timeout_sec * 1000)
        self.body_ms = int(server.body_timeout_sec * 1000)
        self.write_ms = int(server.write_timeout_sec * 1000)
        self.share.resize(max_connections, server.producer_share)
        self.freed.set()

    @property
    def period(self) -> float:
        """How often the sweep runs: often enough for the shortest timeout to hold."""
        shortest = min(self.timeout_ms, self.body_ms, self.write_ms) / 1000
        return max(SWEEP_MIN_SEC, min(SWEEP_SEC, shortest / 4))

    def protocol(self, make: Callable[[], RequestHandler]) -> Guarded:
        return Guarded(self, make)

    def full(self) -> bool:
        return len(self.open) + self.arriving >= self.max_connections

    def admit(self, conn: Guarded) -> None:
        assert conn.transport is not None
        self.arriving = max(0, self.arriving - 1)
        conn.opened = conn.idle_since = self.clock.now_ms()
        self.open[conn.transport] = conn
        self.fresh[conn.transport] = conn

    def make_room(self) -> bool:
        """For a newcomer waiting while full: close the oldest connection that has sent no
        request head for EVICT_AFTER_MS and has nothing unread; whether there was one."""
        now = self.clock.now_ms()
        for conn in itertools.islice(self.fresh.values(), EVICT_CANDIDATES):
            if conn.opened > now - EVICT_AFTER_MS:
                return False  # the rest are younger still
            if not _unread(conn):
                self.evicted += 1
                self.metrics.connections_closed.labels("evicted").inc()
                self._close(conn)
                return True
        return False

    def heard(self, conn: Guarded) -> None:
        """A request head arrived: the connection holds a request from now on."""
        conn.head_at = self.clock.now_ms()
        if conn.transport is not None:
            self.fresh.pop(conn.transport, None)

    def release(self, transport: asyncio.BaseTransport, on_lost: Callable[[], None]) -> None:
        """A connection that became a long-lived stream leaves the count and the guard: it is
        neither evicted nor timed out (server.max_streams bounds those), but its unsent bytes
        are: past STREAM_BUFFER_MAX for the header timeout, it is closed. `on_lost` is called
        when the peer goes (or is closed), so the stream ends then, not at its next write."""
        conn = self.open.pop(transport, None)
        if conn is None:
            return
        self.fresh.pop(transport, None)
        self.unsent.pop(transport, None)
        self.share.forget(transport)
        self.freed.set()
        conn.stream = True
        sock = transport.get_extra_info("socket")
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, STREAM_SNDBUF)
        conn.on_lost = on_lost
        typing.cast(asyncio.WriteTransport, transport).set_write_buffer_limits(
            high=STREAM_BUFFER_MAX)

    def behind(self, conn: Guarded, past: bool) -> None:
        """A stream's unsent bytes passed the bound (`past`), or fell back under it."""
        assert conn.transport is not None
        if past:
            conn.behind_since = self.clock.now_ms()
            self.slow[conn.transport] = conn
        else:
            self.slow.pop(conn.transport, None)

    def filled(self, conn: Guarded) -> None:
        """An answer's unsent bytes filled the socket's and the transport's buffers: from now
        the client has server.write_timeout_sec to read them all."""
        if conn.transport is not None and conn.transport not in self.unsent:
            conn.unread_since = self.clock.now_ms()
            self.unsent[conn.transport] = conn
            self.metrics.connections_unread.set(len(self.unsent))

    def forget(self, conn: Guarded) -> None:
        if conn.transport is None:
            return
        self.slow.pop(conn.transport, None)
        if self.unsent.pop(conn.transport, None) is not None:
            self.metrics.connections_unread.set(len(self.unsent))
        self.share.forget(conn.transport)
        if self.open.pop(conn.transport, None) is not None:
            self.fresh.pop(conn.transport, None)
            self.freed.set()

    def _close(self, conn: Guarded) -> None:
        self.forget(conn)
        if conn.transport is not None:
            conn.transport.abort()

    @web.middleware
    async def middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        """Marks the connection busy while its request runs and its answer goes out, idle
        after: the idle sweep never closes a connection with an answer still unsent. A
        connection not yet known as a producer's goes through the strangers' share first
        (one middleware, not two: aiohttp wraps each one anew on every request)."""
        transport = request.transport
        if transport is None or transport.is_closing():
            return web.Response(status=CLIENT_GONE)  # not run: its answer could not arrive
        conn = self.open.get(transport)
        if conn is not None:
            self.heard(conn)  # a head this guard did not see end (bare LF line ends)
            conn.idle_since, conn.body = None, None
        try:
            if transport in self.share.producers:  # the common case: one lookup
                response = await handler(request)
            else:
                response = await self.share.admit(request, handler)
            if response.status == REQUEST_TIMEOUT and not response.prepared:
                response.force_close()  # its body came too slowly: no waiting for the rest
            try:
                await response.prepare(request)  # aiohttp's own prepare and write_eof are then
                await response.write_eof()  # no-ops
            except ConnectionError:  # the client left, or was closed
                pass
            if not response.keep_alive and not request.content.is_eof():
                request.protocol.force_close()  # it ends here: the rest of its body is not read
            return response
        finally:
            if conn is not None:
                conn.idle_since = self.clock.now_ms()
                if not request.content.is_eof():  # answered unread: aiohttp reads the rest
                    conn.body = request.content

    def sweep(self) -> int:
        """Close connections idle past the timeout (no request started in time; one whose
        request head just arrived is about to start it, and is left alone), streams past
        their bound for as long, answers left unread past the write timeout and unread bodies
        past the body timeout."""
        now = self.clock.now_ms()
        cutoff = now - self.timeout_ms
        stale = [c for c in self.open.values()
                 if c.idle_since is not None and c.idle_since <= cutoff
                 and (c.head_at is None or c.head_at <= now - HEAD_GRACE_MS)]
        self._close_all(stale, "timed_out")
        slow = [c for c in self.slow.values() if c.behind_since <= cutoff]
        for conn in slow:  # its page has read nothing for the timeout: it resumes from the rows
            self._close(conn)
        self.metrics.streams_closed.labels("slow").inc(len(slow))
        self._close_all(self._unread_too_long(now), "unread")
        self._close_all([c for c in self.open.values() if c.body is not None
                         and c.idle_since is not None and c.idle_since <= now - self.body_ms
                         and not c.body.is_eof()], "body")
        self.timed_out += len(stale)
        self.metrics.connections_open.set(len(self.open))
        self.metrics.connections_unread.set(len(self.unsent))
        return len(stale)

    def _unread_too_long(self, now: int) -> list[Guarded]:
        """Connections whose answers stayed unsent past the write timeout; those whose buffers
        emptied since are no longer watched."""
        late = []
        for transport, conn in list(self.unsent.items()):
            if not transport.get_write_buffer_size():  # type: ignore[attr-defined]
                del self.unsent[transport]
            elif conn.unread_since is not None and conn.unread_since <= now - self.write_ms:
                late.append(conn)
        return late

    def _close_all(self, conns: list[Guarded], why: str) -> None:
        for conn in conns:
            self._close(conn)
        self.metrics.connections_closed.labels(why).inc(len(conns))

    async def run(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            self.sweep()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), self.period)


def _unread(conn: Guarded) -> bool:
    """Whether the connection still has bytes in flight: a request unread in the socket, or an
    answer not yet written out."""
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
