"""What the email API stand-ins (tests/fake_ses.py, fake_sendgrid.py, fake_mailgun.py,
fake_postmark.py) share: an aiohttp server on 127.0.0.1 in the test's own event loop that records
every request, and can answer late (gate), drop the connection (drop) or give one canned answer
(canned) instead of the provider's own; each stand-in answers the rest as its provider does.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web


@dataclass
class Seen:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes


@dataclass
class FakeApi:
    seen: list[Seen] = field(default_factory=list)
    sent: dict[str, Any] = field(default_factory=dict)  # the provider's message id -> the email
    canned: web.Response | None = None
    gate: asyncio.Event | None = None  # while set and clear, answers wait (a slow provider)
    drop: bool = False  # the connection is cut once the request is read
    down: bool = False  # an outage: the provider answers as it does when it is down
    throttled: bool = False  # the provider answers that we send too fast
    port: int = 0
    _runner: web.AppRunner | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def routes(self, app: web.Application) -> None:
        raise NotImplementedError

    async def answer(self, request: web.Request, body: bytes) -> web.StreamResponse:
        raise NotImplementedError

    async def handle(self, request: web.Request) -> web.StreamResponse:
        body = await request.read()
        self.seen.append(Seen(request.method, request.path_qs, dict(request.headers), body))
        if self.gate is not None:
            await self.gate.wait()
        if self.drop:
            assert request.transport is not None
            request.transport.abort()
            raise asyncio.CancelledError
        if self.canned is not None:
            return self.canned
        return await self.answer(request, body)

    async def start(self) -> Any:
        app = web.Application()
        self.routes(app)
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.5,
                                     handle_signals=False)
        await self._runner.setup()
        await web.TCPSite(self._runner, "127.0.0.1", 0).start()
        self.port = self._runner.addresses[0][1]
        return self

    async def stop(self) -> None:
        if self.gate is not None:
            self.gate.set()
        if self._runner is not None:
            await self._runner.cleanup()
