"""The HTTP/1.1 client every HTTP channel posts through: one request at a time per connection,
connections kept for the next call, the answer read up to a bound, httptools (llhttp) parsing it.

Why not aiohttp's client: a provider call is one POST of a few hundred bytes and a short answer,
and aiohttp's client spent 170-200 us of event-loop CPU on each (cookie jar, tracing, request
and response objects, a task for the payload writer); this spends about 50. In the soak at
1,157 notifications/s (benchmarks/soak.py), sending was a third of the event loop's time.

What it does: POST (and GET, for the files a receipt's signature needs), http and https (the
system's trust store, SNI, hostname checked), an egress proxy (channels/egress.py: a CONNECT
tunnel with TLS to the origin through it, or an http:// request handed to the proxy whole), a
connection limit per client (callers are sized so a send never waits for one), idle connections
dropped after KEEPALIVE_SEC or when the server closes them, Content-Length, chunked and
read-to-close answers, 1xx answers skipped. What it does not: redirects (providers' APIs do not
redirect; a redirect is an answer the adapter classifies), compression, cookies, HTTP/2.

Errors say what happened to the request: NotSent (nothing left us: a bad URL or header, the
connection refused, DNS, TLS, a connect timeout) or Lost (the connection ended after the request
was written, before a whole answer: the provider may have it). A timeout after the request was
written raises TimeoutError. No error text holds the URL, which may carry a secret.
"""

from __future__ import annotations

import asyncio
import ssl
import time
import typing
from dataclasses import dataclass, field
from functools import lru_cache
from urllib.parse import urlsplit

import httptools
from multidict import CIMultiDict, CIMultiDictProxy

from notifyd import __version__
from notifyd.channels.egress import DIRECT, Egress, Proxy

KEEPALIVE_SEC = 15.0  # an idle connection older than this is closed, not reused
MAX_HEADERS = 128
MAX_TUNNEL_HEAD = 16 * 1024  # a proxy's answer to CONNECT is a status line and a few headers
USER_AGENT = f"notifyd/{__version__}"
_TLS: ssl.SSLContext | None = None


class WireError(Exception):
    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class NotSent(WireError):
    """Nothing of the request left us."""


class Lost(WireError):
    """The connection ended after the request was written, before a whole answer."""


@dataclass(frozen=True)
class Answer:
    status: int
    headers: CIMultiDictProxy[str]
    body: bytes  # at most the limit asked for; the connection is dropped if there was more


@dataclass(frozen=True)
class Target:
    """Where a URL points: the connection's origin and the request line's target."""

    tls: bool
    host: str
    port: int
    path: str  # path and query, as written
    host_header: str


@lru_cache(maxsize=256)
def target(url: str) -> Target:
    """The URL's origin and request target; NotSent for anything that is not http(s) with a
    host, a valid port and no control characters or credentials."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        raise NotSent("not sent: the URL is not valid") from None
    host = parts.hostname
    if (parts.scheme not in ("http", "https") or not host or parts.username is not None
            or any(ord(c) <= 32 or ord(c) == 127 for c in url)):
        raise NotSent("not sent: the URL is not valid")
    tls = parts.scheme == "https"
    default = 443 if tls else 80
    port = port or default
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    bracketed = f"[{host}]" if ":" in host else host
    return Target(tls, host, port, path, bracketed if port == default else f"{bracketed}:{port}")


def _tls() -> ssl.SSLContext:
    global _TLS  # noqa: PLW0603 - one context for the process: loading the trust store costs ms
    if _TLS is None:
        _TLS = ssl.create_default_context()
    return _TLS


@dataclass
class _Exchange:
    """What one answer has brought so far."""

    limit: int
    waiter: asyncio.Future[Answer]
    headers: list[tuple[str, str]] = field(default_factory=list)
    body: list[bytes] = field(default_factory=list)
    size: int = 0
    status: int = 0  # set once the head is complete
    framed: bool = False  # Content-Length or chunked: the end is known without a close
    informational: bool = False
    truncated: bool = False


class _Connection(asyncio.Protocol):
    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self.reusable = False
        self.idle_since = 0.0
        self.parser = httptools.HttpResponseParser(self)
        self.ex: _Exchange | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports are not asyncio.Transport subclasses; they have its methods.
        self.transport = typing.cast(asyncio.Transport, transport)

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        ex, self.ex = self.ex, None
        if ex is None or ex.waiter.done():
            return
        if ex.status and not ex.framed and not ex.informational:  # read to close: complete
            self._finish(ex, keep=False)
        else:
            ex.waiter.set_exception(Lost(f"connection lost after sending: "
                                         f"{type(exc).__name__ if exc else 'closed by the peer'}"))

    def data_received(self, data: bytes) -> None:
        if self.ex is None:  # bytes nobody asked for: this connection cannot be trusted
            self.close()
            return
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            self._fail(Lost("connection lost after sending: the server switched protocols"))
        except httptools.HttpParserError as e:
            self._fail(Lost(f"connection lost after sending: unreadable answer "
                            f"({type(e).__name__})"))

    # httptools' callbacks, while feed_data runs

    def on_header(self, name: bytes, value: bytes) -> None:
        ex = self.ex
        if ex is None:
            return
        if len(ex.headers) >= MAX_HEADERS:
            raise httptools.HttpParserError("too many headers")
        ex.headers.append((name.decode("latin-1"), value.decode("latin-1")))

    def on_headers_complete(self) -> None:
        ex = self.ex
        if ex is None:
            return
        ex.status = self.parser.get_status_code()
        ex.informational = 100 <= ex.status < 200
        names = {n.lower() for n, _ in ex.headers}
        ex.framed = "content-length" in names or "transfer-encoding" in names

    def on_body(self, chunk: bytes) -> None:
        ex = self.ex
        if ex is None or ex.truncated:
            return
        room = ex.limit - ex.size
        ex.body.append(chunk[:room])
        ex.size += min(len(chunk), room)
        if len(chunk) >= room:  # enough: answer now, the rest is never read
            ex.truncated = True
            self._finish(ex, keep=False)

    def on_message_complete(self) -> None:
        ex = self.ex
        if ex is None:
            return
        if ex.informational:  # 100 Continue, 103 Early Hints: the answer follows
            ex.headers, ex.status, ex.informational = [], 0, False
            return
        self._finish(ex, keep=self.parser.should_keep_alive())

    def _finish(self, ex: _Exchange, keep: bool) -> None:
        self.ex = None
        self.reusable = keep and not self.closed
        if not ex.waiter.done():
            ex.waiter.set_result(Answer(ex.status, CIMultiDictProxy(CIMultiDict(ex.headers)),
                                        b"".join(ex.body)))

    def _fail(self, error: Exception) -> None:
        ex, self.ex = self.ex, None
        if ex is not None and not ex.waiter.done():
            ex.waiter.set_exception(error)
        self.close()

    async def exchange(self, request: bytes, limit: int) -> Answer:
        assert self.transport is not None and self.ex is None
        waiter: asyncio.Future[Answer] = asyncio.get_running_loop().create_future()
        self.ex = _Exchange(limit, waiter)
        self.reusable = False
        self.parser = httptools.HttpResponseParser(self)
        self.transport.write(request)
        return await waiter

    def close(self) -> None:
        self.closed = True
        self.reusable = False
        if self.transport is not None:
            self.transport.close()


class _Tunnel(asyncio.Protocol):
    """A proxy's answer to CONNECT: its status once the head is in; nothing may follow it
    before the TLS handshake, which then runs on the same connection."""

    def __init__(self) -> None:
        self.head = bytearray()
        self.status: asyncio.Future[int] = asyncio.get_running_loop().create_future()

    def data_received(self, data: bytes) -> None:
        if self.status.done():
            return
        self.head += data
        end = self.head.find(b"\r\n\r\n")
        if end < 0 and len(self.head) <= MAX_TUNNEL_HEAD:
            return
        line = self.head.split(b"\r\n", 1)[0].split(b" ", 2)
        if end < 0 or end + 4 != len(self.head) or len(line) < 2 or not line[0].startswith(
                b"HTTP/1.") or not line[1].isdigit():
            self.status.set_exception(NotSent("not sent: the proxy's answer to CONNECT is not "
                                              "HTTP"))
            return
        self.status.set_result(int(line[1]))

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.status.done():
            self.status.set_exception(NotSent("not sent: the proxy closed the connection"))


class Client:
    """Keep-alive connections to the origins one channel calls (through `egress`'s proxy where
    it says so), at most `max_connections`."""

    def __init__(self, max_connections: int = 100, timeout_sec: float = 10.0,
                 egress: Egress = DIRECT) -> None:
        self.timeout_sec = timeout_sec
        self.egress = egress  # may be replaced: connections are kept by the proxy they use
        self._slots = asyncio.Semaphore(max(1, max_connections))
        self._idle: dict[tuple[bool, str, int, Proxy | None], list[_Connection]] = {}
        self._busy: set[_Connection] = set()

    async def post(self, url: str, body: bytes, headers: dict[str, str],
                   timeout: float | None = None, limit: int = 64 * 1024) -> Answer:
        """POST `body` and read the answer (its body up to `limit` bytes). NotSent, Lost or
        TimeoutError (the whole call took longer than `timeout`, default the client's)."""
        return await self.request("POST", url, body, headers, timeout, limit)

    async def get(self, url: str, headers: dict[str, str], timeout: float | None = None,
                  limit: int = 64 * 1024) -> Answer:
        """GET `url`, as post does."""
        return await self.request("GET", url, b"", headers, timeout, limit)

    async def request(self, method: str, url: str, body: bytes, headers: dict[str, str],
                      timeout: float | None, limit: int) -> Answer:
        where = target(url)
        proxy = self.egress.route(where.tls, where.host)
        request = _request(method, where, body, headers, None if where.tls else proxy)
        key = (where.tls, where.host, where.port, proxy)
        sent = False
        try:
            async with asyncio.timeout(self.timeout_sec if timeout is None else timeout), \
                    self._slots:
                conn = self._reuse(key) or await self._connect(where, proxy)
                self._busy.add(conn)
                try:
                    sent = True
                    answer = await conn.exchange(request, limit)
                except BaseException:
                    conn.close()  # cancelled or failed mid-answer: its state is unknown
                    raise
                finally:
                    self._busy.discard(conn)
        except TimeoutError:
            if not sent:  # waiting for a connection slot, connecting, the tunnel, TLS
                raise NotSent("connect timed out") from None
            raise
        if conn.reusable:
            conn.idle_since = time.monotonic()
            self._idle.setdefault(key, []).append(conn)
        else:
            conn.close()
        return answer

    def _reuse(self, key: tuple[bool, str, int, Proxy | None]) -> _Connection | None:
        idle = self._idle.get(key)
        now = time.monotonic()
        while idle:
            conn = idle.pop()  # the most recently used: the least likely to be closed
            if not conn.closed and now - conn.idle_since < KEEPALIVE_SEC:
                return conn
            conn.close()
        return None

    async def _connect(self, where: Target, proxy: Proxy | None) -> _Connection:
        loop = asyncio.get_running_loop()
        if proxy is not None and where.tls:
            return await self._tunnel(where, proxy)
        host, port = (where.host, where.port) if proxy is None else (proxy.host, proxy.port)
        try:
            _, conn = await loop.create_connection(
                _Connection, host, port, ssl=_tls() if where.tls else None,
                server_hostname=where.host if where.tls else None)
        except OSError as e:  # refused, unreachable, DNS (gaierror), TLS (SSLError)
            raise NotSent(f"{'proxy ' if proxy else ''}connect failed: "
                          f"{type(e).__name__}") from None
        return conn

    async def _tunnel(self, where: Target, proxy: Proxy) -> _Connection:
        """A connection to an https origin through the proxy: CONNECT, then TLS with the origin
        (its name checked, as without a proxy) over the tunnel."""
        loop = asyncio.get_running_loop()
        try:
            transport, opener = await loop.create_connection(_Tunnel, proxy.host, proxy.port)
        except OSError as e:
            raise NotSent(f"proxy connect failed: {type(e).__name__}") from None
        try:
            authority = f"[{where.host}]:{where.port}" if ":" in where.host \
                else f"{where.host}:{where.port}"
            auth = f"Proxy-Authorization: {proxy.authorization}\r\n" if proxy.authorization \
                else ""
            transport.write(f"CONNECT {authority} HTTP/1.1\r\nHost: {authority}\r\n{auth}"
                            f"User-Agent: {USER_AGENT}\r\n\r\n".encode("latin-1"))
            status = await opener.status
            if not 200 <= status < 300:
                raise NotSent(f"not sent: the proxy refused the tunnel (HTTP {status})")
            conn = _Connection()
            try:
                tls = await loop.start_tls(transport, conn, _tls(), server_hostname=where.host)
            except OSError as e:  # the origin's certificate, or the tunnel closed mid-handshake
                raise NotSent(f"connect failed: {type(e).__name__}") from None
        except BaseException:
            transport.close()
            raise
        if tls is None:  # the tunnel closed during the handshake
            raise NotSent("connect failed: the proxy closed the tunnel")
        conn.connection_made(tls)
        return conn

    async def close(self) -> None:
        """Close every connection; the client may be used again afterwards."""
        for idle in self._idle.values():
            for conn in idle:
                conn.close()
        self._idle.clear()
        for conn in list(self._busy):
            conn.close()
        await asyncio.sleep(0)  # let the transports' closes run


def _request(method: str, where: Target, body: bytes, headers: dict[str, str],
             proxy: Proxy | None) -> bytes:
    """The request's bytes; to an http:// origin through `proxy`, its target is the whole URL
    (RFC 9112 section 3.2.2) and the proxy's credentials go with it."""
    path = where.path if proxy is None else f"http://{where.host_header}{where.path}"
    lines = [f"{method} {path} HTTP/1.1\r\nHost: {where.host_header}\r\n"
             f"User-Agent: {USER_AGENT}\r\n"]
    if body or method == "POST":
        lines.append(f"Content-Length: {len(body)}\r\n")
    if proxy is not None and proxy.authorization:
        lines.append(f"Proxy-Authorization: {proxy.authorization}\r\n")
    for name, value in headers.items():
        if any(c in name or c in value for c in "\r\n\0") or ":" in name:
            raise NotSent(f"not sent: the header {name.split(':')[0][:40]!r} is malformed")
        lines.append(f"{name}: {value}\r\n")
    lines.append("\r\n")
    try:
        return "".join(lines).encode("latin-1") + body
    except UnicodeEncodeError:
        raise NotSent("not sent: a header is not Latin-1 text") from None
