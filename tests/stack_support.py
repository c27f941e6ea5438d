"""A whole notifyd in one test: the real engine, app and store over a config file and a templates
folder, a Twilio stand-in and a real SMTP server, a producer's API key. Tests of the person's side
and of delivery evidence drive it through the HTTP API as clients would.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import tomli_w
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer
from engine_support import Engine, engine_for, store_url
from fake_smtp import FakeSmtp
from fake_twilio import ACCOUNT, TOKEN, FakeTwilio, twilio_app

from notifyd.config import load_config
from notifyd.core.clock import FakeClock
from notifyd.engine.render import load_templates
from notifyd.http.app import make_app
from notifyd.http.auth import KeyCache, hash_key, new_key
from notifyd.http.kit import Context

PUBLIC = "https://notify.example.com/base"
FROM = "+15005550006"
PHONE = "+14155550123"
ADDRESS = "ada@example.org"
TEMPLATES = {"sms.text.j2": "{{ what }}", "email.subject.j2": "About {{ what }}",
             "email.text.j2": "Hello,\n{{ what }}\n", "inbox.title.j2": "{{ what }}"}
FAST = {"rate_per_sec": 1_000_000.0, "burst": 1_000_000, "backoff_base_sec": 1.0}


@dataclass
class Stack:
    e: Engine
    client: TestClient[Any, Any]
    ctx: Context
    twilio: FakeTwilio
    smtp: FakeSmtp

    async def user(self, user_id: str = "ada", **contacts: str) -> None:
        r = await self.client.put(f"/v1/users/{user_id}", json=contacts or {
            "email": ADDRESS, "phone": PHONE}, headers={"Authorization": f"Bearer {self.key}"})
        assert r.status == 200, await r.text()

    key: str = ""

    async def status(self, nid: str) -> dict[str, Any]:
        return await self.e.status(nid)



@asynccontextmanager
async def stack(tmp_path: Path, settings: dict[str, Any],
                templates: dict[str, dict[str, str]] | None = None) -> AsyncIterator[Stack]:
    """`settings`: the config's kinds (and any other table) over an sms (twilio) and an email
    (smtp, relay mailgun) channel and a public URL; each kind gets TEMPLATES unless
    `templates` names its own."""
    twilio, smtp = FakeTwilio(), await FakeSmtp().start()
    runner = web.AppRunner(twilio_app(twilio), access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    twilio.port = runner.addresses[0][1]
    for kind in settings.get("kinds", {}):
        for name, text in (templates or {}).get(kind, TEMPLATES).items():
            path = tmp_path / "templates" / kind / "en" / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
    config = tmp_path / "notifyd.toml"
    config.write_text(tomli_w.dumps({
        "server": {"public_url": PUBLIC},
        "store": {"url": store_url(tmp_path), "sqlite": {"synchronous": "NORMAL"}},
        "templates": {"folder": "templates"},
        "channels": {
            "sms": {"type": "twilio", "account_sid": ACCOUNT, "auth_token": TOKEN,
                    "from_number": FROM, "base_url": twilio.base_url, **FAST},
            "email": {"type": "smtp", "host": "127.0.0.1", "port": smtp.port, "tls": "none",
                      "from_address": "Acme <alerts@acme.example>", "relay": "mailgun",
                      **FAST},
        },
        **settings,
    }))
    cfg = load_config(config)
    templates, problems = load_templates(cfg)
    assert problems == []
    try:
        # The fake clock starts at the wall clock: providers' signed timestamps are checked
        # against it.
        clock = FakeClock(int(time.time() * 1000))
        async with engine_for(cfg, templates=templates, clock=clock) as e:
            ctx = Context(cfg, e.ingest, KeyCache(e.store, e.clock), e.clock,
                          link_key=e.pool.renderer.link_key)
            async with TestClient(TestServer(make_app(ctx))) as client:
                s = Stack(e, client, ctx, twilio, smtp)
                s.key = await _key(e)
                yield s
            await ctx.fetch.close()
    finally:
        await runner.cleanup()
        await smtp.stop()


async def _key(e: Engine) -> str:
    key = new_key()
    await e.store.create_key(hash_key(key), "t", "default", (),
                             frozenset({"post", "read", "resolve", "users"}))
    return key
