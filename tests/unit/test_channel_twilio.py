"""The twilio adapter against a local server that speaks Twilio's Messages resource: what render
freezes, the exact form body on the wire, how every answer is classified.

The fake checks what Twilio checks (basic auth with the Auth Token or an API key, the account in
the path, a form body, To in E.164, Body, exactly one sender) and answers the recipients of
Twilio's magic test numbers as Twilio's test credentials do (+15005550001 invalid, +15005550002
unroutable, +15005550003 no geo permission, +15005550004 opted out, +15005550009 not a mobile:
https://www.twilio.com/docs/messaging/tutorials/automate-testing), with Twilio's
{code, message, more_info, status} error bodies, messages that quote the number included.
"""

from __future__ import annotations

import asyncio
import base64
import json
import socket
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import urlencode

import pytest
from aiohttp import web
from fake_twilio import ACCOUNT, API_KEY, API_SECRET, TOKEN, FakeTwilio

from notifyd.channels.base import (
    Failed,
    Limits,
    Message,
    Outcome,
    Rejected,
    RenderError,
    RenderInput,
    Sent,
    Unknown,
)
from notifyd.channels.twilio import TYPE, TwilioChannel, TwilioSettings
from notifyd.core.contacts import PHONE

SERVICE = "MG" + "0d" * 16
FROM = "+15005550006"
TO = "+14155550123"
KEY = "n_01k9zq3x7c2m4v6b8n:1"
PUBLIC = "https://notify.acme.test"
TEXT = "Your code is 482913"
NOW = 1_790_000_001_000


@pytest.fixture
async def fake() -> AsyncIterator[FakeTwilio]:
    f = FakeTwilio()
    app = web.Application()
    app.router.add_post("/2010-04-01/Accounts/{account}/Messages.json", f.handle)
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.5, handle_signals=False)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    f.port = runner.addresses[0][1]
    try:
        yield f
    finally:
        if f.gate is not None:
            f.gate.set()
        await runner.cleanup()


def settings(base_url: str, **kw: Any) -> TwilioSettings:
    base = {"account_sid": ACCOUNT, "auth_token": TOKEN, "from_number": FROM,
            "base_url": base_url}
    return TwilioSettings(**{**base, **kw})


def build(base_url: str, public_url: str = PUBLIC, **kw: Any) -> TwilioChannel:
    ch = TYPE.build("sms", settings(base_url, **kw),
                    Limits(timeout_sec=0.3, max_connections=8, public_url=public_url))
    assert isinstance(ch, TwilioChannel)
    return ch


@pytest.fixture
async def channel(fake: FakeTwilio) -> AsyncIterator[TwilioChannel]:
    ch = build(fake.base_url)
    try:
        yield ch
    finally:
        await ch.close()


def step(**kw: Any) -> RenderInput:
    base: dict[str, Any] = {
        "notification_id": "n_01k9zq3x7c2m4v6b8n", "step_no": 1, "channel": "sms",
        "kind": "login_code", "user_id": "u-7", "params": {}, "created_at": NOW - 1000,
        "expires_at": NOW + 600_000, "address": TO, "locale": "en", "now": NOW,
        "content": {"text": TEXT}}
    return RenderInput(**{**base, **kw})


def frozen(payload: dict[str, Any]) -> dict[str, Any]:
    thawed: dict[str, Any] = json.loads(json.dumps(payload, sort_keys=True))
    return thawed


# --- the type and its settings ---------------------------------------------------------------


def test_the_type_declares_its_contact_medium_and_settings() -> None:
    assert (TYPE.name, TYPE.contact, TYPE.medium) == ("twilio", PHONE, "sms")
    assert TYPE.settings is TwilioSettings
    assert TwilioSettings().base_url == "https://api.twilio.com"


def test_settings_problems_name_the_key_and_never_echo_the_value() -> None:
    good = "https://api.twilio.com"
    assert settings(good).problems() == []
    assert settings(good, from_number="", messaging_service_sid=SERVICE).problems() == []
    assert settings(good, auth_token="", api_key_sid=API_KEY,
                    api_key_secret=API_SECRET).problems() == []
    assert settings(good, from_number="ACME Alerts").problems() == []  # alphanumeric sender
    assert settings(good, from_number="24680").problems() == []  # short code
    assert {k for k, _ in TwilioSettings().problems()} == {"account_sid", "auth_token",
                                                          "from_number"}
    bad = TwilioSettings(account_sid="AC123", api_key_sid="SKnope", api_key_secret="",
                         from_number="+1555", messaging_service_sid=SERVICE,
                         base_url="api.twilio.com")
    problems = bad.problems()
    assert {k for k, _ in problems} == {"account_sid", "api_key_sid", "api_key_secret",
                                        "from_number", "base_url"}
    assert {k for k, _ in settings(good, from_number="+1 (555) 0100").problems()} == \
        {"from_number"}
    assert {k for k, _ in settings(good, from_number="", messaging_service_sid="MGx")
            .problems()} == {"messaging_service_sid"}
    for _, message in problems + settings(good, from_number="+1\n").problems():
        for value in ("AC123", "SKnope", "+1555", "api.twilio.com", "+1\n"):
            assert value not in message


# --- render: what is frozen --------------------------------------------------------------------


def test_render_freezes_the_form_fields(channel: TwilioChannel) -> None:
    rendered = channel.render(step())
    assert rendered.destination == TO
    assert rendered.payload == {"To": TO, "Body": TEXT, "From": FROM, "ValidityPeriod": "600"}
    assert frozen(rendered.payload) == rendered.payload


def test_a_messaging_service_replaces_from(fake: FakeTwilio) -> None:
    ch = build(fake.base_url, from_number="", messaging_service_sid=SERVICE)
    assert ch.render(step()).payload == {"To": TO, "Body": TEXT, "MessagingServiceSid": SERVICE,
                                         "ValidityPeriod": "600"}


@pytest.mark.parametrize(("expires_in_ms", "now", "validity"), [
    (600_000, NOW, "600"),
    (35_999_000, NOW, "35999"),
    (36_000_000, NOW, None),  # Twilio's default is its ceiling: nothing to say
    (86_400_000, NOW, None),
    (400, NOW, "1"),  # under a second left: the least Twilio takes
    (-5000, NOW, "1"),
    (600_000, 0, None),  # no render time given: no validity claimed
])
def test_validity_period_follows_the_time_left(channel: TwilioChannel, expires_in_ms: int,
                                               now: int, validity: str | None) -> None:
    payload = channel.render(step(expires_at=NOW + expires_in_ms, now=now)).payload
    assert payload.get("ValidityPeriod") == validity


@pytest.mark.parametrize(("kw", "what"), [
    ({"address": None}, "address"),
    ({"address": ""}, "address"),
    ({"address": "4155550123"}, "address"),
    ({"address": "+1 415 555 0123"}, "address"),
    ({"address": "+0415550123"}, "address"),
    ({"address": "+1234567890123456"}, "address"),
    ({"address": "+1415555O123"}, "address"),
    ({"address": "+١٤١٥٥٥٥٠١٢٣"}, "address"),  # Arabic-Indic digits are not E.164
    ({"content": {}}, "text"),
    ({"content": {"text": ""}}, "text"),
    ({"content": {"text": "x" * 1601}}, "text"),
], ids=lambda v: repr(v)[:40])
def test_render_refuses_what_must_never_be_sent(channel: TwilioChannel, kw: dict[str, Any],
                                                what: str) -> None:
    with pytest.raises(RenderError) as e:
        channel.render(step(**kw))
    assert e.value.template == what


def test_space_around_the_number_is_trimmed_not_sent(channel: TwilioChannel) -> None:
    rendered = channel.render(step(address=f" {TO}\n"))
    assert rendered.destination == rendered.payload["To"] == TO


def test_a_body_of_1600_characters_is_sendable(channel: TwilioChannel) -> None:
    assert channel.render(step(content={"text": "é" * 1600})).payload["Body"] == "é" * 1600


# --- the request on the wire -----------------------------------------------------------------


async def test_the_request_is_form_encoded_with_basic_auth_and_a_keyed_callback(
        fake: FakeTwilio, channel: TwilioChannel) -> None:
    payload = frozen(channel.render(step()).payload)
    outcome = await channel.send(Message(KEY, TO, payload))
    (sid,) = fake.created
    assert outcome == Sent(sid, "segments=1")
    (seen,) = fake.seen
    assert seen.path == f"/2010-04-01/Accounts/{ACCOUNT}/Messages.json"
    assert seen.headers["Content-Type"] == "application/x-www-form-urlencoded"
    assert seen.headers["Authorization"] == \
        "Basic " + base64.b64encode(f"{ACCOUNT}:{TOKEN}".encode()).decode()
    callback = f"{PUBLIC}/v1/webhooks/twilio?key=n_01k9zq3x7c2m4v6b8n%3A1"
    assert seen.form == {"To": TO, "Body": TEXT, "From": FROM, "ValidityPeriod": "600",
                         "StatusCallback": callback}
    assert seen.body == urlencode(sorted(seen.form.items())).encode()
    assert "Idempotency-Key" not in seen.headers  # Twilio takes none on Messages


async def test_an_api_key_authenticates_against_the_same_account(fake: FakeTwilio) -> None:
    ch = build(fake.base_url, auth_token="", api_key_sid=API_KEY, api_key_secret=API_SECRET)
    try:
        outcome = await ch.send(Message(KEY, TO, ch.render(step()).payload))
    finally:
        await ch.close()
    assert isinstance(outcome, Sent)
    assert fake.seen[0].headers["Authorization"] == \
        "Basic " + base64.b64encode(f"{API_KEY}:{API_SECRET}".encode()).decode()
    assert fake.seen[0].path == f"/2010-04-01/Accounts/{ACCOUNT}/Messages.json"


async def test_without_a_public_url_no_callback_is_asked(fake: FakeTwilio) -> None:
    ch = build(fake.base_url, public_url="")
    try:
        assert isinstance(await ch.send(Message(KEY, TO, ch.render(step()).payload)), Sent)
    finally:
        await ch.close()
    assert "StatusCallback" not in fake.seen[0].form


async def test_a_messaging_service_send_has_no_segment_count_yet(fake: FakeTwilio) -> None:
    ch = build(fake.base_url, from_number="", messaging_service_sid=SERVICE)
    try:
        outcome = await ch.send(Message(KEY, TO, ch.render(step()).payload))
    finally:
        await ch.close()
    (sid,) = fake.created
    assert outcome == Sent(sid)  # num_segments is "0" until Twilio picks a sender


async def test_a_long_body_reports_its_segments(fake: FakeTwilio, channel: TwilioChannel) -> None:
    outcome = await channel.send(Message(KEY, TO, channel.render(
        step(content={"text": "x" * 400})).payload))
    assert isinstance(outcome, Sent) and outcome.detail == "segments=3"


async def test_a_retry_sends_byte_identical_requests(fake: FakeTwilio,
                                                     channel: TwilioChannel) -> None:
    rendered = channel.render(step())
    await channel.send(Message(KEY, TO, rendered.payload))
    await channel.send(Message(KEY, TO, frozen(rendered.payload)))
    assert len(fake.seen) == 2 and fake.seen[0].body == fake.seen[1].body
    # Twilio keeps no idempotency record: each accepted request is a message of its own.
    assert len(fake.created) == 2


# --- every answer mapped ---------------------------------------------------------------------


@pytest.mark.parametrize(("to", "expected"), [
    ("+15005550001", Rejected("HTTP 400 Twilio 21211: not a valid phone number")),
    ("+15005550004", Rejected("HTTP 400 Twilio 21610: the recipient opted out (STOP)")),
    ("+15005550009", Rejected("HTTP 400 Twilio 21614: not a mobile number")),
    ("+15005550002", Failed("HTTP 400 Twilio 21612: this sender cannot reach this number")),
    ("+15005550003", Failed("HTTP 400 Twilio 21408: the account may not send to this region "
                            "(geo permissions)")),
], ids=lambda v: str(v)[:24])
async def test_twilios_magic_numbers(fake: FakeTwilio, channel: TwilioChannel, to: str,
                                     expected: Outcome) -> None:
    outcome = await channel.send(Message(KEY, to, channel.render(step(address=to)).payload))
    assert outcome == expected
    assert isinstance(outcome, Rejected | Failed) and to not in outcome.reason
    assert fake.created == {}


def err(status: int, code: Any, headers: dict[str, str] | None = None) -> Any:
    return (status, {"code": code, "message": f"The 'To' number {TO} said: {TEXT}",
                     "more_info": f"https://www.twilio.com/docs/errors/{code}",
                     "status": status}, headers)


SID = "SM" + "5e" * 16
CASES: list[tuple[str, Any, Outcome]] = [
    ("201", (201, {"sid": SID, "status": "queued", "num_segments": "2"}, None),
     Sent(SID, "segments=2")),
    ("201 int segments", (201, {"sid": SID, "num_segments": 1}, None), Sent(SID, "segments=1")),
    ("201 odd segments", (201, {"sid": SID, "num_segments": "²"}, None), Sent(SID)),
    ("201 no body", (201, b"", None), Sent(None)),
    ("201 not UTF-8", (201, b"\xff\xfe", None), Sent(None)),
    ("21211", err(400, 21211), Rejected("HTTP 400 Twilio 21211: not a valid phone number")),
    ("21610 as text", err(400, "21610"),
     Rejected("HTTP 400 Twilio 21610: the recipient opted out (STOP)")),
    ("21614", err(400, 21614), Rejected("HTTP 400 Twilio 21614: not a mobile number")),
    ("21635", err(400, 21635), Rejected("HTTP 400 Twilio 21635: a landline")),
    ("21408", err(400, 21408),
     Failed("HTTP 400 Twilio 21408: the account may not send to this region (geo permissions)")),
    ("21608", err(400, 21608),
     Failed("HTTP 400 Twilio 21608: a trial account may send only to verified numbers")),
    ("21612", err(400, 21612), Failed("HTTP 400 Twilio 21612: this sender cannot reach this "
                                      "number")),
    ("21606", err(400, 21606), Failed("HTTP 400 Twilio 21606: the sender is not a usable "
                                      "Twilio sender")),
    ("21617", err(400, 21617), Failed("HTTP 400 Twilio 21617: Twilio refused the request; "
                                      "check the channel's settings")),
    ("400 bool code", err(400, True), Failed("HTTP 400: Twilio refused the request; check the "
                                             "channel's settings")),
    ("400 not JSON", (400, b"<html>bad</html>", None),
     Failed("HTTP 400: Twilio refused the request; check the channel's settings")),
    ("401", err(401, 20003), Failed("HTTP 401 Twilio 20003: Twilio refused our credentials")),
    ("403", err(403, 20005), Failed("HTTP 403 Twilio 20005: Twilio refused our credentials")),
    ("404", err(404, 20404), Failed("HTTP 404 Twilio 20404: no such account or resource; check "
                                    "account_sid and base_url")),
    ("429", err(429, 20429, {"Retry-After": "7"}), Failed("HTTP 429 Twilio 20429", 7.0)),
    ("500", err(500, 20500), Failed("HTTP 500 Twilio 20500")),
    ("503 text", (503, b"Service Unavailable", {"Retry-After": "4"}), Failed("HTTP 503", 4.0)),
    ("301", (301, b"", {"Location": "https://elsewhere.test/"}),
     Failed("HTTP 301: Twilio refused the request; check the channel's settings")),
]


def canned(status: int, body: Any, headers: dict[str, str] | None) -> web.Response:
    if isinstance(body, dict):
        return web.json_response(body, status=status, headers=headers)
    return web.Response(status=status, body=body, headers=headers,
                        content_type="application/json")


@pytest.mark.parametrize(("reply", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
async def test_each_answer_is_classified(fake: FakeTwilio, channel: TwilioChannel, reply: Any,
                                         expected: Outcome) -> None:
    fake.canned = canned(*reply)
    outcome = await channel.send(Message(KEY, TO, channel.render(step()).payload))
    assert outcome == expected
    if not isinstance(outcome, Sent):  # no secret, no number, no text, no provider free text
        for leak in (TOKEN, ACCOUNT, TO, TO[1:], TEXT, "482913", "said"):
            assert leak not in outcome.reason


async def test_a_wrong_token_is_failed_not_rejected(fake: FakeTwilio) -> None:
    ch = build(fake.base_url, auth_token="0" * 32)
    try:
        outcome = await ch.send(Message(KEY, TO, ch.render(step()).payload))
    finally:
        await ch.close()
    assert outcome == Failed("HTTP 401 Twilio 20003: Twilio refused our credentials")


# --- the connection --------------------------------------------------------------------------


async def test_a_timeout_is_unknown(fake: FakeTwilio, channel: TwilioChannel) -> None:
    fake.gate = asyncio.Event()  # released at teardown: the answer never comes in time
    outcome = await channel.send(Message(KEY, TO, channel.render(step()).payload))
    assert outcome == Unknown("timeout: Twilio may have the message")


async def test_a_connection_dropped_after_sending_is_unknown(
        fake: FakeTwilio, channel: TwilioChannel) -> None:
    fake.drop = True
    outcome = await channel.send(Message(KEY, TO, channel.render(step()).payload))
    assert isinstance(outcome, Unknown)
    assert outcome.reason.startswith("connection lost after sending")


async def test_a_refused_connection_is_failed() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ch = build(f"http://127.0.0.1:{port}")
    try:
        outcome = await ch.send(Message(KEY, TO, ch.render(step()).payload))
    finally:
        await ch.close()
    assert isinstance(outcome, Failed) and outcome.reason.startswith("connect failed")
    assert TOKEN not in outcome.reason and TO not in outcome.reason
