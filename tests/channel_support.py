"""What the channels' tests share: the HTTP/1.1 stand-ins' aiohttp app on 127.0.0.1 (it starts,
stops and serves as an async context manager; a stand-in adds its routes in `routes`), and a
step as the sender hands it to render."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Self

from aiohttp import web
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa

from notifyd.channels.base import RenderInput

NOW_MS = 1_790_000_000_000


def pem(key: ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey) -> str:
    """A private key as the PEM text a provider hands out (PKCS#8, unencrypted)."""
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption()).decode()


def render_input(**over: Any) -> RenderInput:
    """A step of notification n_01k9zq3x7c2m4v6b8n, an hour to live from NOW_MS, with `over`."""
    fields: dict[str, Any] = {
        "notification_id": "n_01k9zq3x7c2m4v6b8n", "step_no": 0, "channel": "c",
        "kind": "alert", "user_id": "u1", "params": {}, "created_at": NOW_MS,
        "expires_at": NOW_MS + 3_600_000, "address": None, "locale": "en", "now": NOW_MS,
        "content": {}} | over
    return RenderInput(**fields)


@dataclass
class AppPeer:
    port: int = field(default=0, init=False)
    _runner: web.AppRunner | None = field(default=None, init=False, repr=False)

    def routes(self, app: web.Application) -> None:
        raise NotImplementedError

    async def start(self) -> Self:
        app = web.Application()
        self.routes(app)
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.5,
                                     handle_signals=False)
        await self._runner.setup()
        await web.TCPSite(self._runner, "127.0.0.1", 0).start()
        self.port = self._runner.addresses[0][1]
        return self

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    async def __aenter__(self) -> Self:
        return await self.start()

    async def __aexit__(self, *_: object) -> None:
        await self.stop()
