"""The teams adapter against a Teams workflow trigger's stand-in (tests/fake_teams.py).

Covered: the Adaptive Card (a heading from chat.title, the text wrapping), 202 with the run id;
throttling (Retry-After), a wrong sig and a deleted workflow (Failed and final: the channel's
URL, not a person's address), a refused card and an outage. No reason or destination carries
the sig.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp import web
from channel_support import render_input
from fake_teams import FakeTeams, logic_error

from notifyd.channels.base import Failed, Limits, Message, Outcome, RenderInput, Sent
from notifyd.channels.teams import CARD, TYPE, TeamsChannel
from notifyd.channels.types.teams import TeamsSettings

SIG = "Zk3vSecretSig_q8mPzR1-aW"
LIMITS = Limits(timeout_sec=2.0, max_connections=4)


def step(**over: Any) -> RenderInput:
    return render_input(**{"channel": "ops", "kind": "server_down", "user_id": "oncall",
                           "content": {"title": "web-1 is down", "text": "disk 91% full"}}
                        | over)


async def send(url: str, s: RenderInput) -> Outcome:
    channel = TeamsChannel("ops", TeamsSettings(webhook_url=url), LIMITS)
    try:
        rendered = channel.render(s)
        assert SIG not in rendered.destination
        answer = await channel.send(Message("n_01k9zq3x7c2m4v6b8n:0", rendered.destination,
                                            rendered.payload))
    finally:
        await channel.close()
    assert SIG not in (answer.reason if isinstance(answer, Failed) else "")
    return answer


@pytest.fixture
async def fake() -> AsyncIterator[FakeTeams]:
    async with FakeTeams("b7c2d4e6f80a4c1e9d3f5a7b9c1e3f50", SIG) as f:
        yield f


async def test_an_adaptive_card_reaches_the_workflow(fake: FakeTeams) -> None:
    answer = await send(fake.url, step())
    assert fake.cards == [{
        "$schema": "http://adaptivecards.io/schemas/adaptive-card.json", "type": "AdaptiveCard",
        "version": "1.4", "body": [
            {"type": "TextBlock", "text": "web-1 is down", "weight": "Bolder", "size": "Medium",
             "wrap": True},
            {"type": "TextBlock", "text": "disk 91% full", "wrap": True}]}]
    assert isinstance(answer, Sent) and answer.provider_ref and answer.provider_ref.isdigit()
    assert CARD == "application/vnd.microsoft.card.adaptive"


async def test_a_card_without_a_title_has_the_text_alone(fake: FakeTeams) -> None:
    await send(fake.url, step(content={"text": "disk full"}))
    assert fake.cards[0]["body"] == [{"type": "TextBlock", "text": "disk full", "wrap": True}]


async def test_throttled_waits_retry_after(fake: FakeTeams) -> None:
    fake.limit = 0
    answer = await send(fake.url, step())
    assert isinstance(answer, Failed) and not answer.final and answer.retry_after == 20.0
    assert answer.reason == "HTTP 429 WorkflowRequestsThrottled"


@pytest.mark.parametrize(("wrong", "canned", "reason", "final"), [
    ("sig", None, "HTTP 401 DirectApiAuthorizationRequired: the workflow refused the URL", True),
    ("workflow", None, "HTTP 404 WorkflowNotFound: the workflow refused the URL", True),
    (None, lambda: logic_error(400, "InvalidRequestContent", "bad"),
     "HTTP 400 InvalidRequestContent: Teams refused the card", True),
    (None, lambda: web.Response(status=502, text="Bad Gateway"), "HTTP 502", False),
])
async def test_refusals_and_outages_are_failed_never_rejected(
        fake: FakeTeams, wrong: str | None, canned: Any, reason: str, final: bool) -> None:
    url = fake.url
    if wrong == "sig":
        url = url.replace(SIG, "NotTheSig")
    elif wrong == "workflow":
        url = url.replace(fake.workflow, "0" * 32)
    if canned is not None:
        fake.canned = canned()
    answer = await send(url, step())
    assert isinstance(answer, Failed) and answer.reason.startswith(reason)
    assert answer.final is final
    assert TYPE.contact is None
