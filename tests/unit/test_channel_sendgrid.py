"""The sendgrid channel: the Mail Send body it freezes, what the stand-in (tests/fake_sendgrid.py)
refuses as SendGrid does (a key without Mail Send, an unverified sender), the settings' checks,
and every SendGrid answer mapped."""

from __future__ import annotations

import json
from typing import Any

import pytest
from fake_sendgrid import API_KEY, READ_ONLY_KEY, SENDER, FakeSendgrid

from notifyd.channels.base import Failed, Message, Outcome, Rejected, RenderInput, Sent
from notifyd.channels.sendgrid import SendgridChannel, classify
from notifyd.channels.types.sendgrid import SendgridSettings

TO = "ada.lovelace@example.org"


def settings(base_url: str, **kw: Any) -> SendgridSettings:
    return SendgridSettings(**{"api_key": API_KEY, "from_address": f"Acme <{SENDER}>",
                               "base_url": base_url, **kw})


def step(**kw: Any) -> RenderInput:
    base: dict[str, Any] = {
        "notification_id": "n_01k9zq3x7c2m4v6b8n", "step_no": 0, "channel": "mail",
        "kind": "welcome", "user_id": "u-7", "params": {}, "created_at": 1, "expires_at": 2,
        "address": TO, "locale": "en", "content": {"subject": "Hi", "text": "Hello"}}
    return RenderInput(**{**base, **kw})


def test_the_body_is_one_personalization_with_the_key_as_a_custom_arg() -> None:
    ch = SendgridChannel("mail", settings("http://127.0.0.1:9", reply_to="help@acme.test"), 1.0)
    body = ch.render(step(content={"subject": "Hi", "text": "Hello", "html": "<b>Hello</b>"}))
    assert body.payload == {
        "personalizations": [{"to": [{"email": TO}]}],
        "from": {"email": SENDER, "name": "Acme"}, "reply_to": {"email": "help@acme.test"},
        "subject": "Hi", "content": [{"type": "text/plain", "value": "Hello"},
                                     {"type": "text/html", "value": "<b>Hello</b>"}],
        "custom_args": {"notifyd_key": "n_01k9zq3x7c2m4v6b8n:0"}, "categories": ["welcome"]}


async def test_the_request_and_sendgrids_refusals_of_our_key_and_sender() -> None:
    fake = await FakeSendgrid().start()
    try:
        async def send(**kw: Any) -> Outcome:
            ch = SendgridChannel("mail", settings(fake.base_url, **kw), 1.0)
            rendered = ch.render(step())
            try:
                return await ch.send(Message("n_01k9zq3x7c2m4v6b8n:0", TO, rendered.payload))
            finally:
                await ch.close()

        sent = await send()
        assert isinstance(sent, Sent) and sent.provider_ref in fake.sent
        assert fake.seen[0].path == "/v3/mail/send"
        assert fake.seen[0].headers["Authorization"] == f"Bearer {API_KEY}"
        assert json.loads(fake.seen[0].body) == fake.sent[sent.provider_ref or ""]
        assert await send(api_key=READ_ONLY_KEY) == Failed(
            "HTTP 403: SendGrid refused our API key, its permissions or the sender")
        assert await send(from_address="other@acme.test") == Failed(
            "HTTP 403 from: SendGrid refused our API key, its permissions or the sender")
    finally:
        await fake.stop()


def test_settings_name_the_key_and_never_echo_it() -> None:
    assert settings("https://api.eu.sendgrid.com").problems() == []
    problems = dict(SendgridSettings(api_key="SG.a b", from_address="", base_url="x").problems())
    assert set(problems) == {"api_key", "from_address", "base_url"}
    assert all("SG.a b" not in m for m in problems.values())
    assert API_KEY not in repr(settings(""))


def err(status: int, message: str, field: str | None = None) -> bytes:
    return json.dumps({"errors": [{"message": message, "field": field, "help": None}]}).encode()


CASES: list[tuple[str, int, dict[str, str], bytes, Outcome]] = [
    ("202", 202, {"X-Message-Id": "W86EgYT6SQKk0lRflfLRsA"}, b"",
     Sent("W86EgYT6SQKk0lRflfLRsA")),
    ("202 no id", 202, {}, b"", Sent(None)),
    ("bad to", 400, {}, err(400, f"Does not contain a valid address. {TO}",
                           "personalizations.0.to.0.email"),
     Rejected("HTTP 400 personalizations.0.to.0.email: SendGrid refused the recipient address")),
    ("bad from", 400, {}, err(400, "Does not contain a valid address.", "from.email"),
     Failed("HTTP 400 from.email: SendGrid refused the request; check the channel's settings")),
    ("401", 401, {}, err(401, "The provided authorization grant is invalid"),
     Failed("HTTP 401: SendGrid refused our API key, its permissions or the sender")),
    ("413", 413, {}, err(413, "too large"),
     Failed("HTTP 413: SendGrid refused the request; check the channel's settings")),
    ("429", 429, {"Retry-After": "4"}, err(429, "too many requests"),
     Failed("HTTP 429", 4.0)),
    ("500", 500, {}, b"", Failed("HTTP 500")),
]


@pytest.mark.parametrize(("status", "headers", "body", "expected"),
                         [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_every_answer_is_classified(status: int, headers: dict[str, str], body: bytes,
                                    expected: Outcome) -> None:
    assert classify(status, headers, body) == expected


def test_a_rate_limit_without_retry_after_waits_for_its_reset() -> None:
    outcome = classify(429, {"X-RateLimit-Reset": "99999999999"}, b"")
    assert isinstance(outcome, Failed) and outcome.retry_after is not None
    assert outcome.retry_after > 0
