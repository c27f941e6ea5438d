"""An HTTP egress proxy on 127.0.0.1, as Squid or a corporate proxy takes requests: CONNECT opens
a tunnel (the client's TLS runs through it, end to end); an absolute-form request (POST
http://host/path) is sent on to the origin. It resolves names itself (`hosts`: a name to the
address it stands for), as the proxy of a host that cannot resolve outside names does, and
records what it was asked: each tunnel's authority, each request it sent on, each
Proxy-Authorization. With `credentials`, a request without them is answered 407.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
from urllib.parse import urlsplit


class FakeProxy:
    def __init__(self, hosts: dict[str, str] | None = None,
                 credentials: tuple[str, str] | None = None) -> None:
        self.hosts = hosts or {}
        self.credentials = credentials
        self.expected = None if credentials is None else "Basic " + base64.b64encode(
            ":".join(credentials).encode()).decode()
        self.tunnels: list[str] = []  # "provider.test:443", as CONNECT named them
        self.forwarded: list[str] = []  # "POST http://provider.test:8080/hook", as asked
        self.authorizations: list[str | None] = []
        self.refused = 0
        self.port = 0
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()

    @property
    def url(self) -> str:
        """The proxy's URL, with its credentials when it wants them."""
        user = "" if self.credentials is None else f"{self.credentials[0]}:{self.credentials[1]}@"
        return f"http://{user}127.0.0.1:{self.port}"

    async def start(self) -> FakeProxy:
        self._server = await asyncio.start_server(self._session, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
        for writer in list(self._writers):
            writer.close()

    async def __aenter__(self) -> FakeProxy:
        return await self.start()

    async def __aexit__(self, *_: object) -> None:
        await self.stop()

    async def _session(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._writers.add(writer)
        try:
            await self._serve(reader, writer)
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
            pass
        finally:
            self._writers.discard(writer)
            writer.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1")
        line, *fields = head.split("\r\n")
        method, target, _ = line.split(" ", 2)
        headers = [(name.strip(), value.strip()) for name, _, value in
                   (f.partition(":") for f in fields if f)]
        auth = next((v for n, v in headers if n.lower() == "proxy-authorization"), None)
        self.authorizations.append(auth)
        if self.expected is not None and auth != self.expected:
            self.refused += 1
            writer.write(b"HTTP/1.1 407 Proxy Authentication Required\r\n"
                         b"Proxy-Authenticate: Basic realm=\"egress\"\r\nContent-Length: 0\r\n"
                         b"Connection: close\r\n\r\n")
            await writer.drain()
            return
        if method == "CONNECT":
            self.tunnels.append(target)
            host, _, port = target.rpartition(":")
            upstream = await self._open(host.strip("[]"), int(port), writer)
            if upstream is not None:
                writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
                await _pipe(reader, writer, *upstream)
            return
        self.forwarded.append(f"{method} {target}")
        url = urlsplit(target)
        length = next((int(v) for n, v in headers if n.lower() == "content-length"), 0)
        body = await reader.readexactly(length)
        upstream = await self._open(url.hostname or "", url.port or 80, writer)
        if upstream is None:
            return
        kept = "".join(f"{n}: {v}\r\n" for n, v in headers
                       if n.lower() not in ("proxy-authorization", "connection"))
        path = (url.path or "/") + (f"?{url.query}" if url.query else "")
        upstream[1].write(f"{method} {path} HTTP/1.1\r\n{kept}Connection: close\r\n\r\n"
                          .encode("latin-1") + body)
        await _pipe(reader, writer, *upstream)

    async def _open(self, host: str, port: int, writer: asyncio.StreamWriter
                    ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter] | None:
        try:
            upstream = await asyncio.open_connection(self.hosts.get(host, host), port)
        except OSError:
            writer.write(b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n")
            await writer.drain()
            return None
        self._writers.add(upstream[1])
        return upstream


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                up_reader: asyncio.StreamReader, up_writer: asyncio.StreamWriter) -> None:
    """Bytes both ways until either side closes."""
    async def copy(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
        with contextlib.suppress(ConnectionError):
            while data := await src.read(65536):
                dst.write(data)
                await dst.drain()
        dst.close()

    await asyncio.gather(copy(reader, up_writer), copy(up_reader, writer))
