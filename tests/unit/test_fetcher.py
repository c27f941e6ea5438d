"""The fetch a receipt's signature needs (engine/evidence.Fetcher: the SNS signing certificate)
against a real HTTPS server: through the egress proxy like every provider call, bounded in size,
only a 200 taken, only https asked for."""

from __future__ import annotations

import ssl
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from aiohttp import web
from fake_proxy import FakeProxy
from fake_smtp import self_signed, server_context

from notifyd.channels.egress import Egress
from notifyd.engine.evidence import FETCH_MAX_BYTES, Fetcher, FetchFailed

HOST = "sns.us-east-1.amazonaws.test"  # resolved by the proxy alone
CERT = b"-----BEGIN CERTIFICATE-----\nMIIB...\n-----END CERTIFICATE-----\n"


@pytest.fixture
async def sns(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[int]:
    """An HTTPS server for HOST: /cert.pem, /big (one byte too many), anything else 404."""
    cert, key = self_signed(tmp_path, HOST)
    monkeypatch.setattr("notifyd.channels.wire._TLS",
                        ssl.create_default_context(cafile=str(cert)))

    async def handle(request: web.Request) -> web.Response:
        if request.path == "/cert.pem":
            return web.Response(body=CERT)
        if request.path == "/big":
            return web.Response(body=b"x" * (FETCH_MAX_BYTES + 1))
        return web.Response(status=404)

    app = web.Application()
    app.router.add_get("/{tail:.*}", handle)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0, ssl_context=server_context(cert, key)).start()
    yield runner.addresses[0][1]
    await runner.cleanup()


async def test_the_certificate_is_fetched_through_the_egress_proxy(sns: int) -> None:
    proxy = await FakeProxy({HOST: "127.0.0.1"}, ("egress", "pw")).start()
    fetch = Fetcher(Egress.of(proxy.url, "", ()))
    try:
        got = await fetch(f"https://{HOST}:{sns}/cert.pem")
        with pytest.raises(FetchFailed, match=r"^HTTP 404$"):
            await fetch(f"https://{HOST}:{sns}/missing.pem")
        with pytest.raises(FetchFailed, match=rf"^larger than {FETCH_MAX_BYTES} bytes$"):
            await fetch(f"https://{HOST}:{sns}/big")
        with pytest.raises(FetchFailed, match=r"^only https URLs are fetched$"):
            await fetch(f"http://{HOST}:{sns}/cert.pem")
    finally:
        await fetch.close()
        await proxy.stop()
    assert got == CERT
    assert proxy.tunnels and set(proxy.tunnels) == {f"{HOST}:{sns}"}


async def test_without_a_proxy_it_goes_straight_out(sns: int) -> None:
    fetch = Fetcher()
    try:
        assert await fetch(f"https://127.0.0.1:{sns}/cert.pem") == CERT
    finally:
        await fetch.close()
