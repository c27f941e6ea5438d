"""The discord adapter against Execute Webhook's stand-in (tests/fake_discord.py).

Covered: an embed (under the chat.title template) and a plain message, no mention pinging
anyone, wait=true; the answers for success, rate limiting (retry_after from the body, which is
finer than Retry-After), a wrong token and a deleted webhook (Failed and final: nothing of a
person's to disable, and Discord bans IPs that keep sending refused requests), a refused body
and an outage. No reason or destination carries the webhook's token.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp import web
from channel_support import render_input
from fake_discord import FakeDiscord, discord_error

from notifyd.channels.base import Failed, Limits, Message, Outcome, RenderError, RenderInput, Sent
from notifyd.channels.discord import TYPE, DiscordChannel
from notifyd.channels.types.discord import DiscordSettings

HOOK_ID, TOKEN = "1122334455667788990", "nLq3-Secret_WebhookToken_7Xv"
LIMITS = Limits(timeout_sec=2.0, max_connections=4)


def step(**over: Any) -> RenderInput:
    return render_input(**{"channel": "ops", "kind": "server_down", "user_id": "oncall",
                           "content": {"title": "web-1 is down",
                                       "text": "disk 91% full @everyone"}} | over)


async def send(fake: FakeDiscord, s: RenderInput, **settings: Any) -> Outcome:
    channel = DiscordChannel("ops", DiscordSettings(webhook_url=settings.pop("url", fake.url),
                                                    **settings), LIMITS)
    try:
        rendered = channel.render(s)
        assert TOKEN not in rendered.destination and "discord webhook " in rendered.destination
        answer = await channel.send(Message("n_01k9zq3x7c2m4v6b8n:0", rendered.destination,
                                            rendered.payload))
    finally:
        await channel.close()
    assert TOKEN not in (answer.reason if isinstance(answer, Failed) else "")
    return answer


@pytest.fixture
async def fake() -> AsyncIterator[FakeDiscord]:
    async with FakeDiscord(HOOK_ID, TOKEN) as f:
        yield f
    assert f.problems == []


async def test_an_embed_reaches_the_channel_and_pings_nobody(fake: FakeDiscord) -> None:
    answer = await send(fake, step(), username="notifyd alerts")
    [posted] = fake.posted
    assert posted == {"embeds": [{"title": "web-1 is down",
                                  "description": "disk 91% full @everyone"}],
                      "allowed_mentions": {"parse": []}, "username": "notifyd alerts"}
    assert fake.queries == ["wait=true"]
    assert isinstance(answer, Sent) and answer.provider_ref and answer.provider_ref.isdigit()


async def test_content_style_posts_the_text_alone(fake: FakeDiscord) -> None:
    await send(fake, step(content={"text": "disk full"}), style="content")
    assert fake.posted == [{"content": "disk full", "allowed_mentions": {"parse": []}}]


async def test_rate_limited_waits_what_the_body_says(fake: FakeDiscord) -> None:
    fake.limit = 0
    answer = await send(fake, step())
    assert isinstance(answer, Failed) and not answer.final and answer.retry_after == 1.25


@pytest.mark.parametrize(("url", "canned", "reason", "final"), [
    ("token", None, "HTTP 401 50027: the webhook is gone or its token is wrong", True),
    ("id", None, "HTTP 404 10015: the webhook is gone or its token is wrong", True),
    (None, lambda: discord_error(400, 50035, "Invalid Form Body"),
     "HTTP 400 50035: Discord refused the message", True),
    (None, lambda: web.Response(status=503, text="upstream connect error"), "HTTP 503", False),
])
async def test_refusals_and_outages_are_failed_never_rejected(
        fake: FakeDiscord, url: str | None, canned: Any, reason: str, final: bool) -> None:
    target = fake.url
    if url == "token":
        target = target.replace(TOKEN, "Wrong_Token_123")
    elif url == "id":
        target = target.replace(HOOK_ID, "9988776655443322110")
    if canned is not None:
        fake.canned = canned()
    answer = await send(fake, step(), url=target)
    assert isinstance(answer, Failed) and answer.reason.startswith(reason)
    assert answer.final is final
    assert TYPE.contact is None  # the channel's webhook, not a person's address


def test_render_and_settings_refuse_what_discord_would(fake: FakeDiscord) -> None:
    channel = DiscordChannel("ops", DiscordSettings(webhook_url=fake.url, style="content"),
                             LIMITS)
    with pytest.raises(RenderError):
        channel.render(step(content={"text": "x" * 2001}))
    problems = dict(DiscordSettings(webhook_url="https://discord.com/api/channels/1").problems())
    assert problems["webhook_url"].startswith("must be the webhook's URL as Discord shows it")
