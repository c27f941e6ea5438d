"""The postmark channel: the body it freezes, the message streams (transactional mail on
message_stream, the rest on broadcast_stream), a recipient Postmark holds inactive (rejected: it
is suppressed there), the settings' checks, and every Postmark answer mapped."""

from __future__ import annotations

import json
from typing import Any

import pytest
from fake_postmark import SENDER, TOKEN, FakePostmark

from notifyd.channels.base import Failed, Message, Outcome, Rejected, RenderInput, Sent
from notifyd.channels.postmark import PostmarkChannel, classify
from notifyd.channels.types.postmark import PostmarkSettings

TO = "ada.lovelace@example.org"


def settings(base_url: str = "http://127.0.0.1:9", **kw: Any) -> PostmarkSettings:
    return PostmarkSettings(**{"server_token": TOKEN, "from_address": f"Acme <{SENDER}>",
                               "base_url": base_url, **kw})


def step(**kw: Any) -> RenderInput:
    base: dict[str, Any] = {
        "notification_id": "n_01k9zq3x7c2m4v6b8n", "step_no": 3, "channel": "mail",
        "kind": "digest", "user_id": "u-7", "params": {}, "created_at": 1, "expires_at": 2,
        "address": TO, "locale": "en", "content": {"subject": "Hi", "text": "Hello"}}
    return RenderInput(**{**base, **kw})


def test_the_body_and_the_stream_for_each_kind_of_mail() -> None:
    ch = PostmarkChannel("mail", settings(broadcast_stream="notices-broadcast"), 1.0)
    assert ch.render(step()).payload == {
        "From": f"Acme <{SENDER}>", "To": TO, "Subject": "Hi", "TextBody": "Hello",
        "Metadata": {"notifyd_key": "n_01k9zq3x7c2m4v6b8n:3"}, "MessageStream": "outbound",
        "Tag": "digest"}
    bulk = ch.render(step(transactional=False, unsubscribe_url="https://a.test/u/1")).payload
    assert bulk["MessageStream"] == "notices-broadcast"
    assert bulk["Headers"] == [
        {"Name": "List-Unsubscribe", "Value": "<https://a.test/u/1>"},
        {"Name": "List-Unsubscribe-Post", "Value": "List-Unsubscribe=One-Click"}]
    one = PostmarkChannel("mail", settings(), 1.0)
    assert one.render(step(transactional=False)).payload["MessageStream"] == "outbound"


async def test_postmarks_own_refusals() -> None:
    fake = await FakePostmark(inactive={"gone@example.org"}).start()
    try:
        async def send(address: str = TO, **kw: Any) -> Outcome:
            ch = PostmarkChannel("mail", settings(fake.base_url, **kw), 1.0)
            rendered = ch.render(step(address=address))
            try:
                return await ch.send(Message("n_01k9zq3x7c2m4v6b8n:3", address,
                                             rendered.payload))
            finally:
                await ch.close()

        sent = await send()
        assert isinstance(sent, Sent) and sent.provider_ref in fake.sent
        assert fake.seen[0].headers["X-Postmark-Server-Token"] == TOKEN
        assert json.loads(fake.seen[0].body)["Metadata"] == {
            "notifyd_key": "n_01k9zq3x7c2m4v6b8n:3"}
        assert await send("gone@example.org") == Rejected(
            "HTTP 422 Postmark 406: Postmark holds the recipient inactive (a bounce, a "
            "complaint or a suppression)")
        assert await send(message_stream="nope") == Failed(
            "HTTP 422 Postmark 1235: Postmark refused the request; check the channel's "
            "settings")
        assert await send(from_address="other@acme.test") == Failed(
            "HTTP 422 Postmark 400: the sender signature was not found")
    finally:
        await fake.stop()


def test_settings_name_the_key() -> None:
    assert settings().problems() == []
    problems = dict(PostmarkSettings(server_token="", from_address="x", message_stream="",
                                     broadcast_stream="a b").problems())
    assert set(problems) == {"server_token", "from_address", "message_stream",
                             "broadcast_stream"}
    assert TOKEN not in repr(settings())


def err(code: int, message: str) -> bytes:
    return json.dumps({"ErrorCode": code, "Message": message}).encode()


CASES: list[tuple[str, int, dict[str, str], bytes, Outcome]] = [
    ("200", 200, {}, json.dumps({"To": TO, "SubmittedAt": "2026-09-21T14:13:20Z",
                                 "MessageID": "b7bc2f4a-e38e-4336-af7d-e6c392c2f817",
                                 "ErrorCode": 0, "Message": "OK"}).encode(),
     Sent("b7bc2f4a-e38e-4336-af7d-e6c392c2f817")),
    ("bad to", 422, {}, err(300, f"Error parsing 'To': Illegal email address '{TO}'."),
     Rejected("HTTP 422 Postmark 300: Postmark refused the recipient address")),
    ("bad from", 422, {}, err(300, "Error parsing 'From': Illegal email address"),
     Failed("HTTP 422 Postmark 300: Postmark refused the request; check the channel's "
            "settings")),
    ("inactive", 422, {}, err(406, f"Found inactive addresses: {TO}."),
     Rejected("HTTP 422 Postmark 406: Postmark holds the recipient inactive (a bounce, a "
              "complaint or a suppression)")),
    ("token", 401, {}, err(10, "The Server Token you provided was invalid."),
     Failed("HTTP 401 Postmark 10: Postmark refused our server token")),
    ("pending", 422, {}, err(412, "Account pending"),
     Failed("HTTP 422 Postmark 412: the account is pending approval")),
    ("429", 429, {"Retry-After": "2"}, err(429, "Rate limit exceeded."),
     Failed("HTTP 429 Postmark 429", 2.0)),
    ("maintenance", 503, {}, err(100, "Maintenance"), Failed("HTTP 503 Postmark 100")),
    ("500 html", 500, {}, b"<html></html>", Failed("HTTP 500")),
]


@pytest.mark.parametrize(("status", "headers", "body", "expected"),
                         [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_every_answer_is_classified(status: int, headers: dict[str, str], body: bytes,
                                    expected: Outcome) -> None:
    assert classify(status, headers, body) == expected
