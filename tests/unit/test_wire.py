"""The HTTP/1.1 client under every HTTP channel (notifyd/channels/wire.py), against raw servers on
127.0.0.1 that write exactly the bytes each case needs: framing (length, chunked, to close),
the body bound, 1xx, keep-alive and its failures, timeouts before and after the request left,
malformed answers and headers, TLS verification."""

from __future__ import annotations

import asyncio
import base64
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest
from fake_proxy import FakeProxy
from fake_smtp import self_signed

from notifyd.channels import wire
from notifyd.channels.egress import Egress
from notifyd.channels.wire import Client, Lost, NotSent, target

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


class Server:
    """A raw TCP server: each connection runs `handler`; connections and requests counted."""

    def __init__(self, handler: Handler, tls: ssl.SSLContext | None = None) -> None:
        self.handler, self.tls = handler, tls
        self.connections = 0
        self.requests: list[bytes] = []
        self.server: asyncio.Server | None = None

    async def __aenter__(self) -> Server:
        async def run(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            self.connections += 1
            try:
                await self.handler(reader, writer)
            except (ConnectionError, asyncio.IncompleteReadError):
                pass
            finally:
                writer.close()

        self.server = await asyncio.start_server(run, "127.0.0.1", 0, ssl=self.tls)
        return self

    async def __aexit__(self, *_: object) -> None:
        assert self.server is not None
        self.server.close()

    @property
    def url(self) -> str:
        assert self.server is not None
        port = self.server.sockets[0].getsockname()[1]
        return f"{'https' if self.tls else 'http'}://127.0.0.1:{port}/hook?x=1"

    async def read_request(self, reader: asyncio.StreamReader) -> bytes:
        head = await reader.readuntil(b"\r\n\r\n")
        length = next(int(line.split(b":")[1]) for line in head.split(b"\r\n")
                      if line.lower().startswith(b"content-length:"))
        request = head + await reader.readexactly(length)
        self.requests.append(request)
        return request


def answering(*answers: bytes, close: bool = False) -> Callable[[Server], Handler]:
    """Each request on a connection gets the next answer; then the connection stays open
    (or is closed with close=True)."""
    def make(server: Server) -> Handler:
        async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            for answer in answers:
                await server.read_request(reader)
                writer.write(answer)
                await writer.drain()
            if not close:
                await reader.read()  # until the client closes
        return handler
    return make


async def serve(make: Callable[[Server], Handler], tls: ssl.SSLContext | None = None
                ) -> Server:
    server = Server(lambda r, w: asyncio.sleep(0), tls)
    server.handler = make(server)
    return await server.__aenter__()


@pytest.fixture
async def client() -> AsyncIterator[Client]:
    c = Client(max_connections=4, timeout_sec=5)
    yield c
    await c.close()


OK = b"HTTP/1.1 200 OK\r\nContent-Length: 11\r\nX-Request-Id: r1\r\n\r\n{\"id\":\"p1\"}"


async def test_a_post_carries_the_body_and_reads_a_length_framed_answer(client: Client) -> None:
    server = await serve(answering(OK))
    try:
        answer = await client.post(server.url, b'{"a":1}', {"Idempotency-Key": "n_1:0"})
    finally:
        await server.__aexit__()
    assert (answer.status, answer.body, answer.headers["x-request-id"]) == (200, b'{"id":"p1"}',
                                                                            "r1")
    request = server.requests[0]
    assert request.startswith(b"POST /hook?x=1 HTTP/1.1\r\n")
    assert b"\r\nHost: 127.0.0.1:" in request and b"\r\nIdempotency-Key: n_1:0\r\n" in request
    assert request.endswith(b'\r\n\r\n{"a":1}')


async def test_chunked_and_read_to_close_answers_are_whole(client: Client) -> None:
    chunked = (b"HTTP/1.1 202 Accepted\r\nTransfer-Encoding: chunked\r\n\r\n"
               b"4\r\nabcd\r\n3\r\nefg\r\n0\r\n\r\n")
    to_close = b"HTTP/1.1 500 Oops\r\nConnection: close\r\n\r\nall of it"
    server = await serve(answering(chunked, to_close, close=True))
    try:
        first = await client.post(server.url, b"", {})
        second = await client.post(server.url, b"", {})
    finally:
        await server.__aexit__()
    assert (first.status, first.body) == (202, b"abcdefg")
    assert (second.status, second.body) == (500, b"all of it")
    assert server.connections == 1  # the chunked answer left the connection reusable


async def test_keep_alive_reuses_one_connection_and_connection_close_does_not(
        client: Client) -> None:
    closing = b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
    server = await serve(answering(OK, OK, closing, close=True))
    try:
        for _ in range(3):
            assert (await client.post(server.url, b"x", {})).status == 200
        assert server.connections == 1
        server.handler = answering(OK)(server)
        assert (await client.post(server.url, b"x", {})).status == 200
    finally:
        await server.__aexit__()
    assert server.connections == 2


async def test_a_connection_the_server_closed_while_idle_is_not_used_again(
        client: Client) -> None:
    server = await serve(answering(OK, close=True))
    try:
        assert (await client.post(server.url, b"x", {})).status == 200
        [kept] = [c for idle in client._idle.values() for c in idle]
        async with asyncio.timeout(10):  # until the server's FIN has reached the connection
            while not kept.closed:
                await asyncio.sleep(0.01)
        assert (await client.post(server.url, b"x", {})).status == 200
    finally:
        await server.__aexit__()
    assert server.connections == 2


async def test_the_body_is_read_up_to_the_limit_and_the_connection_dropped(
        client: Client) -> None:
    big = b"HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n" + b"x" * 100_000
    server = await serve(answering(big, OK))
    try:
        answer = await client.post(server.url, b"", {}, limit=1000)
        assert (await client.post(server.url, b"", {})).status == 200
    finally:
        await server.__aexit__()
    assert answer.body == b"x" * 1000
    assert server.connections == 2


async def test_informational_answers_are_skipped(client: Client) -> None:
    server = await serve(answering(b"HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n" + OK))
    try:
        answer = await client.post(server.url, b"", {})
    finally:
        await server.__aexit__()
    assert (answer.status, "link" in answer.headers) == (200, False)


async def test_a_connection_dropped_before_the_answer_is_lost(client: Client) -> None:
    server = await serve(answering(b"HTTP/1.1 200 OK\r\nContent-Length: 50\r\n\r\nshort",
                                   close=True))
    try:
        with pytest.raises(Lost) as lost:
            await client.post(server.url, b"", {})
    finally:
        await server.__aexit__()
    assert lost.value.reason == "connection lost after sending: closed by the peer"


async def test_garbage_for_an_answer_is_lost_and_names_no_text(client: Client) -> None:
    server = await serve(answering(b"SMTP ready, secret-token-123\r\n\r\n"))
    try:
        with pytest.raises(Lost) as lost:
            await client.post(server.url, b"", {})
    finally:
        await server.__aexit__()
    assert lost.value.reason.startswith("connection lost after sending: unreadable answer")
    assert "secret" not in lost.value.reason


async def test_a_silent_server_times_out_after_the_request_left(client: Client) -> None:
    async def silent(reader: asyncio.StreamReader, _: asyncio.StreamWriter) -> None:
        await reader.read()

    server = await serve(lambda s: silent)
    try:
        with pytest.raises(TimeoutError):
            await client.post(server.url, b"x", {}, timeout=0.2)
    finally:
        await server.__aexit__()


async def test_a_closed_port_and_a_handshake_that_never_ends_were_never_sent(
        client: Client) -> None:
    async def silent(reader: asyncio.StreamReader, _: asyncio.StreamWriter) -> None:
        await reader.read()

    server = await serve(lambda s: silent)
    url = server.url
    try:
        with pytest.raises(NotSent) as timed_out:
            await client.post(url.replace("http:", "https:"), b"x", {}, timeout=0.2)
    finally:
        await server.__aexit__()
    with pytest.raises(NotSent) as refused:
        await client.post(url, b"x", {})
    assert timed_out.value.reason == "connect timed out"
    assert refused.value.reason == "connect failed: ConnectionRefusedError"


@pytest.mark.parametrize("url", ["ftp://127.0.0.1/x", "http:///x", "http://127.0.0.1:99999/",
                                 "http://u:p@127.0.0.1/", "http://127.0.0.1/a b",
                                 "http://127.0.0.1/\r\nX: y"])
async def test_a_url_that_is_not_a_plain_http_origin_is_not_sent(client: Client, url: str
                                                                  ) -> None:
    with pytest.raises(NotSent) as e:
        await client.post(url, b"", {})
    assert e.value.reason == "not sent: the URL is not valid"


@pytest.mark.parametrize("headers", [{"X-A": "1\r\nX-Injected: 2"}, {"X-A\r\nB": "1"},
                                     {"X-A": "caf\u00e9 \u2603"}])
async def test_a_header_that_would_break_the_request_is_not_sent(
        client: Client, headers: dict[str, str]) -> None:
    server = await serve(answering(OK))
    try:
        with pytest.raises(NotSent):
            await client.post(server.url, b"", headers)
    finally:
        await server.__aexit__()
    assert server.requests == []


def test_the_target_keeps_path_and_query_and_names_the_host() -> None:
    t = target("https://api.example.com/v1/x?a=%3A")
    assert (t.tls, t.host, t.port, t.path, t.host_header) == (
        True, "api.example.com", 443, "/v1/x?a=%3A", "api.example.com")
    assert target("http://[::1]:8080").host_header == "[::1]:8080"


async def test_tls_is_verified_against_the_trust_store(tmp_path: Path, client: Client) -> None:
    cert, key = self_signed(tmp_path)
    tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    tls.load_cert_chain(cert, key)
    server = await serve(answering(OK), tls=tls)
    try:
        with pytest.raises(NotSent) as e:
            await client.post(server.url, b"", {})
    finally:
        await server.__aexit__()
    assert e.value.reason == "connect failed: SSLCertVerificationError"


async def test_close_ends_idle_connections_and_the_client_works_after(client: Client) -> None:
    server = await serve(answering(OK))
    try:
        assert (await client.post(server.url, b"", {})).status == 200
        await client.close()
        server.handler = answering(OK)(server)
        assert (await client.post(server.url, b"", {})).status == 200
    finally:
        await server.__aexit__()
    assert server.connections == 2


# --- through an egress proxy (channels/egress.py) ---------------------------------------------

PROVIDER = "provider.test"  # resolved by the proxy alone, as behind a mandatory egress proxy


@pytest.fixture
def provider_tls(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> ssl.SSLContext:
    """The provider's TLS, with a certificate for PROVIDER that the client's trust store holds."""
    cert, key = self_signed(tmp_path, PROVIDER)
    monkeypatch.setattr(wire, "_TLS", ssl.create_default_context(cafile=str(cert)))
    tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    tls.load_cert_chain(cert, key)
    return tls


def via(proxy: FakeProxy, no_proxy: tuple[str, ...] = ()) -> Client:
    return Client(4, 5, Egress.of(proxy.url, proxy.url, no_proxy))


def at(server: Server, scheme: str = "https") -> str:
    assert server.server is not None
    return f"{scheme}://{PROVIDER}:{server.server.sockets[0].getsockname()[1]}/hook?x=1"


async def test_https_goes_through_a_connect_tunnel_with_tls_to_the_provider(
        provider_tls: ssl.SSLContext) -> None:
    server = await serve(answering(OK, OK), tls=provider_tls)
    proxy = await FakeProxy({PROVIDER: "127.0.0.1"}, ("egress", "p@ss:word")).start()
    client, url = via(proxy), at(server)
    try:
        first = await client.post(url, b'{"a":1}', {"Idempotency-Key": "n_1:0"})
        second = await client.post(url, b'{"a":2}', {})
    finally:
        await client.close()
        await proxy.stop()
        await server.__aexit__()
    assert (first.status, first.body, second.status) == (200, b'{"id":"p1"}', 200)
    assert proxy.tunnels == [url.split("/")[2]]  # one tunnel, kept alive for the second call
    assert proxy.authorizations == ["Basic " + base64.b64encode(b"egress:p@ss:word").decode()]
    assert server.requests[0].startswith(b"POST /hook?x=1 HTTP/1.1\r\nHost: provider.test:")
    assert b"Proxy-Authorization" not in server.requests[0]  # inside the tunnel: ours alone


async def test_http_is_handed_to_the_proxy_whole() -> None:
    server = await serve(answering(OK, close=True))
    proxy = await FakeProxy({PROVIDER: "127.0.0.1"}, ("egress", "pw")).start()
    client, url = via(proxy), at(server, "http")
    try:
        answer = await client.post(url, b"x", {})
    finally:
        await client.close()
        await proxy.stop()
        await server.__aexit__()
    assert answer.status == 200
    assert proxy.forwarded == [f"POST {url}"]
    assert proxy.authorizations == ["Basic " + base64.b64encode(b"egress:pw").decode()]
    assert server.requests[0].startswith(b"POST /hook?x=1 HTTP/1.1\r\n")


async def test_no_proxy_hosts_go_straight_out(provider_tls: ssl.SSLContext) -> None:
    server = await serve(answering(OK, OK), tls=provider_tls)
    proxy = await FakeProxy().start()
    proxied = via(proxy, no_proxy=("10.0.0.0/8", ".0.1", "127.0.0.2"))  # none is 127.0.0.1
    direct = via(proxy, no_proxy=("example.com", "127.0.0.0/8"))
    url = at(server).replace(PROVIDER, "127.0.0.1")
    try:
        assert (await direct.post(url, b"", {})).status == 200
        assert proxy.tunnels == []
        assert (await proxied.post(url, b"", {})).status == 200
    finally:
        await proxied.close()
        await direct.close()
        await proxy.stop()
        await server.__aexit__()
    assert len(server.requests) == 2 and proxy.tunnels == [url.split("/")[2]]


async def test_a_proxy_that_refuses_or_is_down_means_not_sent_and_names_no_secret(
        provider_tls: ssl.SSLContext) -> None:
    server = await serve(answering(OK), tls=provider_tls)
    proxy = await FakeProxy({PROVIDER: "127.0.0.1"}, ("egress", "right")).start()
    wrong = Client(4, 5, Egress.of(proxy.url.replace("right", "wrong-s3cret"), "", ()))
    url = at(server)
    try:
        refused = await not_sent(wrong, url)
    finally:
        await proxy.stop()
    try:  # nothing listens at the proxy's address now
        unreachable = await not_sent(Client(4, 5, Egress.of(proxy.url, "", ())), url)
    finally:
        await server.__aexit__()
    assert refused == "not sent: the proxy refused the tunnel (HTTP 407)"
    assert unreachable == "proxy connect failed: ConnectionRefusedError"
    assert proxy.refused == 1 and server.requests == []


async def not_sent(client: Client, url: str) -> str:
    """Why `client` sent nothing to `url` (it must not); the client closed afterwards."""
    try:
        with pytest.raises(NotSent) as e:
            await client.post(url, b"", {})
    finally:
        await client.close()
    return e.value.reason


async def test_through_the_tunnel_the_providers_certificate_is_still_checked(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cert, key = self_signed(tmp_path, "someone-else.test")  # not PROVIDER's
    monkeypatch.setattr(wire, "_TLS", ssl.create_default_context(cafile=str(cert)))
    tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    tls.load_cert_chain(cert, key)
    server = await serve(answering(OK), tls=tls)
    proxy = await FakeProxy({PROVIDER: "127.0.0.1"}).start()
    try:
        reason = await not_sent(via(proxy), at(server))
    finally:
        await proxy.stop()
        await server.__aexit__()
    assert reason == "connect failed: SSLCertVerificationError"
    assert server.requests == []


async def test_a_get_carries_no_body() -> None:
    server = await serve(get_answering)
    client = Client(4, 5)
    try:
        answer = await client.get(server.url, {})
    finally:
        await client.close()
        await server.__aexit__()
    assert answer.status == 200
    assert server.requests[0].startswith(b"GET /hook?x=1 HTTP/1.1\r\n")
    assert b"Content-Length" not in server.requests[0]


def get_answering(server: Server) -> Handler:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        server.requests.append(await reader.readuntil(b"\r\n\r\n"))
        writer.write(OK)
        await writer.drain()
        await reader.read()
    return handler
