"""The resend adapter against a local server that speaks Resend's API: what render freezes, the
exact request on the wire, how every answer is classified, and Resend's idempotency records.

The fake checks what Resend checks (the bearer key, JSON, the required fields, the tag alphabet,
the Idempotency-Key's length) and keeps idempotency records as Resend documents them: the same key
and the same body get the first answer again, a changed body under a used key gets 409
invalid_idempotent_request, and a key whose first request is still in progress gets 409
concurrent_idempotent_requests. Error bodies are Resend's {"statusCode", "message", "name"}.
"""

from __future__ import annotations

import asyncio
import json
import re
import socket
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from aiohttp import web

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
from notifyd.channels.resend import TYPE, ResendChannel, ResendSettings
from notifyd.core.contacts import EMAIL

API_KEY = "re_test_3b1c9f0e7d6a5b4c"
FROM = "Acme Alerts <alerts@mail.acme.test>"
TO = "ada.lovelace@example.org"
KEY = "n_01k9zq3x7c2m4v6b8n:2"
TAG_RE = re.compile(r"^[A-Za-z0-9_-]{1,256}$")


def resend_error(status: int, name: str, message: str) -> web.Response:
    return web.json_response({"statusCode": status, "message": message, "name": name},
                             status=status)


@dataclass
class Seen:
    headers: dict[str, str]
    body: bytes
    path: str


@dataclass
class FakeResend:
    """POST /emails as Resend answers it; `canned` replaces the answer for the mapping tests."""

    seen: list[Seen] = field(default_factory=list)
    sent: dict[str, dict[str, Any]] = field(default_factory=dict)  # email id -> the email
    records: dict[str, tuple[bytes, str]] = field(default_factory=dict)  # key -> (body, id)
    in_progress: set[str] = field(default_factory=set)
    canned: web.Response | None = None
    gate: asyncio.Event | None = None  # while set and clear, answers wait (a slow Resend)
    drop: bool = False
    port: int = 0
    idle: asyncio.Condition = field(default_factory=asyncio.Condition)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def handle(self, request: web.Request) -> web.StreamResponse:
        body = await request.read()
        self.seen.append(Seen(dict(request.headers), body, request.path))
        if self.drop:
            assert request.transport is not None
            request.transport.abort()
            raise asyncio.CancelledError
        if self.canned is not None:
            return self.canned
        return await self.answer(request, body)

    async def answer(self, request: web.Request, body: bytes) -> web.StreamResponse:
        auth = request.headers.get("Authorization")
        if auth is None:
            return resend_error(401, "missing_api_key", "Missing API key in the authorization "
                                "header.")
        if auth != f"Bearer {API_KEY}":
            return resend_error(403, "invalid_api_key", "API key is invalid.")
        if request.content_type != "application/json":
            return resend_error(422, "validation_error", "Invalid content type.")
        try:
            email = json.loads(body)
        except ValueError:
            return resend_error(422, "validation_error", "Invalid JSON body.")
        if problem := validate(email):
            return problem
        key = request.headers.get("Idempotency-Key")
        if key is None:
            return web.json_response({"id": self.store(email)})
        if not 1 <= len(key) <= 256:
            return resend_error(400, "invalid_idempotency_key",
                                "The key must be between 1-256 chars.")
        return await self.idempotent(key, body, email)

    async def idempotent(self, key: str, body: bytes, email: dict[str, Any]) -> web.Response:
        if key in self.in_progress:
            return resend_error(409, "concurrent_idempotent_requests", "Same idempotency key "
                                "used while original request is still in progress.")
        if key in self.records:
            first_body, email_id = self.records[key]
            if first_body != body:
                return resend_error(409, "invalid_idempotent_request", "Same idempotency key "
                                    "used with a different request payload.")
            return web.json_response({"id": email_id})
        self.in_progress.add(key)
        try:
            if self.gate is not None:
                await self.gate.wait()
            email_id = self.store(email)
            self.records[key] = (body, email_id)
        finally:
            self.in_progress.discard(key)
            async with self.idle:
                self.idle.notify_all()
        return web.json_response({"id": email_id})

    def store(self, email: dict[str, Any]) -> str:
        email_id = str(uuid.uuid4())
        self.sent[email_id] = email
        return email_id

    async def settled(self) -> None:
        async with self.idle:
            await asyncio.wait_for(self.idle.wait_for(lambda: not self.in_progress), 5)


def validate(email: Any) -> web.Response | None:
    if not isinstance(email, dict):
        return resend_error(422, "validation_error", "Invalid body.")
    for name in ("from", "to", "subject"):
        if not email.get(name):
            return resend_error(422, "missing_required_field",
                                f"Missing `{name}` field.")
    to = email["to"] if isinstance(email["to"], list) else [email["to"]]
    for address in to:
        if "@" not in address or address.endswith("@example.com"):
            return resend_error(422, "validation_error",
                                f"Invalid `to` field. Please use our testing email address "
                                f"instead of domains like `example.com`. ({address})")
    for tag in email.get("tags", []):
        if not (TAG_RE.match(tag.get("name", "")) and TAG_RE.match(tag.get("value", ""))):
            return resend_error(422, "validation_error", "Tags should only contain ASCII "
                                "letters, numbers, underscores, or dashes.")
    return None


@pytest.fixture
async def fake() -> AsyncIterator[FakeResend]:
    f = FakeResend()
    app = web.Application()
    app.router.add_post("/emails", f.handle)
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


def settings(base_url: str, **kw: Any) -> ResendSettings:
    return ResendSettings(**{"api_key": API_KEY, "from_address": FROM, "base_url": base_url,
                             **kw})


@pytest.fixture
async def channel(fake: FakeResend) -> AsyncIterator[ResendChannel]:
    ch = TYPE.build("mail", settings(fake.base_url), Limits(timeout_sec=0.3, max_connections=8))
    assert isinstance(ch, ResendChannel)
    try:
        yield ch
    finally:
        await ch.close()


def step(**kw: Any) -> RenderInput:
    base: dict[str, Any] = {
        "notification_id": "n_01k9zq3x7c2m4v6b8n", "step_no": 2, "channel": "mail",
        "kind": "digest", "user_id": "u-7", "params": {}, "created_at": 1_790_000_000_000,
        "expires_at": 1_790_086_400_000, "address": TO, "locale": "en",
        "now": 1_790_000_001_000,
        "content": {"subject": "Your weekly digest", "text": "3 new items",
                    "html": "<p>3 new items</p>"}}
    return RenderInput(**{**base, **kw})


def frozen(payload: dict[str, Any]) -> dict[str, Any]:
    """What a retry reads back: the payload as the store freezes it (JSON, sorted keys)."""
    thawed: dict[str, Any] = json.loads(json.dumps(payload, sort_keys=True))
    return thawed


# --- the type and its settings ---------------------------------------------------------------


def test_the_type_declares_its_contact_medium_and_settings() -> None:
    assert (TYPE.name, TYPE.contact, TYPE.medium) == ("resend", EMAIL, "email")
    assert TYPE.settings is ResendSettings
    assert ResendSettings().base_url == "https://api.resend.com"


def test_settings_problems_name_the_key_and_never_echo_the_value() -> None:
    assert settings("https://api.resend.com").problems() == []
    assert settings("https://api.resend.com", reply_to="support@acme.test").problems() == []
    assert {k for k, _ in ResendSettings().problems()} == {"api_key", "from_address"}
    bad = ResendSettings(api_key="re_x y\n", from_address="no-at-sign\r\nBcc: evil@x.test",
                         reply_to="Support <not an address>", base_url="ftp://api.resend.com")
    problems = bad.problems()
    assert {k for k, _ in problems} == {"api_key", "from_address", "reply_to", "base_url"}
    for _, message in problems:
        for value in (bad.api_key, "no-at-sign", "not an address", "ftp://"):
            assert value.strip() not in message


# --- render: what is frozen --------------------------------------------------------------------


def test_render_freezes_the_exact_request_body(channel: ResendChannel) -> None:
    rendered = channel.render(step())
    assert rendered.destination == TO
    assert rendered.payload == {"from": FROM, "to": [TO], "subject": "Your weekly digest",
                                "text": "3 new items", "html": "<p>3 new items</p>"}
    assert frozen(rendered.payload) == rendered.payload  # JSON-able as it stands


def test_render_adds_list_unsubscribe_only_to_mail_that_is_not_transactional(
        fake: FakeResend) -> None:
    ch = ResendChannel("mail", settings(fake.base_url, reply_to="help@acme.test"), 0.3)
    url = "https://acme.test/u/Zm9vYmFy?c=digest"
    assert "headers" not in ch.render(step(unsubscribe_url=url)).payload  # transactional
    assert "headers" not in ch.render(step(transactional=False)).payload  # no URL to offer
    payload = ch.render(step(transactional=False, unsubscribe_url=url)).payload
    assert payload["headers"] == {"List-Unsubscribe": f"<{url}>",
                                  "List-Unsubscribe-Post": "List-Unsubscribe=One-Click"}
    assert payload["reply_to"] == "help@acme.test"
    # One-click needs HTTPS (RFC 8058); a plain http link is still offered, without the POST.
    plain = ch.render(step(transactional=False, unsubscribe_url="http://acme.test/u/1")).payload
    assert plain["headers"] == {"List-Unsubscribe": "<http://acme.test/u/1>"}


def test_html_alone_or_text_alone_is_enough(channel: ResendChannel) -> None:
    assert "text" not in channel.render(step(content={"subject": "s", "html": "<b>x</b>"})).payload
    assert "html" not in channel.render(step(content={"subject": "s", "text": "x"})).payload


@pytest.mark.parametrize(("kw", "what"), [
    ({"address": None}, "address"),
    ({"address": "  "}, "address"),
    ({"address": "ada.lovelace"}, "address"),
    ({"address": "ada@@example.org"}, "address"),
    ({"address": "ada lovelace@example.org"}, "address"),
    ({"address": "ada@example.org\r\nBcc: all@example.org"}, "address"),
    ({"address": "Ada <ada@example.org>"}, "address"),
    ({"address": "ada@localhost"}, "address"),
    ({"address": "ada@-example.org"}, "address"),
    ({"content": {"text": "no subject"}}, "subject"),
    ({"content": {"subject": "Hi\r\nBcc: all@example.org", "text": "x"}}, "subject"),
    ({"content": {"subject": "no body"}}, "text"),
    ({"transactional": False, "unsubscribe_url": "https://a.test/u\r\nBcc: x@y.test"},
     "unsubscribe_url"),
    ({"transactional": False, "unsubscribe_url": "https://a.test/u>, <mailto:x@y.test"},
     "unsubscribe_url"),
], ids=lambda v: repr(v)[:40])
def test_render_refuses_what_must_never_be_sent(channel: ResendChannel, kw: dict[str, Any],
                                                what: str) -> None:
    with pytest.raises(RenderError) as e:
        channel.render(step(**kw))
    assert e.value.template == what


def test_render_accepts_ordinary_and_international_addresses(channel: ResendChannel) -> None:
    for address in ("a+tag@sub.example.org", "o'brien@example.ie", "zoë@bücher.example",
                    "x_y-z.1@xn--bcher-kva.example"):
        assert channel.render(step(address=address)).payload["to"] == [address]


# --- the request on the wire -----------------------------------------------------------------


async def test_the_request_carries_key_auth_json_and_tags(
        fake: FakeResend, channel: ResendChannel) -> None:
    payload = channel.render(step(transactional=False, unsubscribe_url="https://acme.test/u/1"))
    outcome = await channel.send(Message(KEY, TO, frozen(payload.payload)))
    assert isinstance(outcome, Sent) and outcome.provider_ref in fake.sent
    (seen,) = fake.seen
    assert seen.path == "/emails"
    assert seen.headers["Authorization"] == f"Bearer {API_KEY}"
    assert seen.headers["Content-Type"] == "application/json"
    assert seen.headers["Idempotency-Key"] == KEY
    expected = {**payload.payload, "tags": [
        {"name": "notifyd_notification", "value": "n_01k9zq3x7c2m4v6b8n"},
        {"name": "notifyd_step", "value": "2"}]}
    assert seen.body == json.dumps(expected, sort_keys=True).encode()
    assert fake.sent[outcome.provider_ref]["headers"]["List-Unsubscribe-Post"] == \
        "List-Unsubscribe=One-Click"


async def test_a_key_outside_the_tag_alphabet_sends_without_tags(
        fake: FakeResend, channel: ResendChannel) -> None:
    outcome = await channel.send(Message("n.odd/id:0", TO, channel.render(step()).payload))
    assert isinstance(outcome, Sent)
    assert "tags" not in json.loads(fake.seen[0].body)


# --- idempotency: a retry of the frozen payload is the same message --------------------------


async def test_a_retry_of_the_frozen_payload_is_accepted_as_the_same_message(
        fake: FakeResend, channel: ResendChannel) -> None:
    rendered = channel.render(step())
    first = await channel.send(Message(KEY, TO, rendered.payload))  # the dict render returned
    again = await channel.send(Message(KEY, TO, frozen(rendered.payload)))  # read back
    assert isinstance(first, Sent) and again == first
    assert len(fake.seen) == 2 and fake.seen[0].body == fake.seen[1].body
    assert len(fake.sent) == 1  # one email, however many attempts

    other = await channel.send(Message("n_01k9zq3x7c2m4v6b8n:3", TO, rendered.payload))
    assert isinstance(other, Sent) and other.provider_ref != first.provider_ref


async def test_a_changed_body_under_a_used_key_is_terminal_and_never_blames_the_recipient(
        fake: FakeResend, channel: ResendChannel) -> None:
    await channel.send(Message(KEY, TO, channel.render(step()).payload))
    drifted = channel.render(step(content={"subject": "Your weekly digest!", "text": "3"}))
    outcome = await channel.send(Message(KEY, TO, drifted.payload))
    assert outcome == Failed("HTTP 409 invalid_idempotent_request: Resend holds a different "
                             "request under this key", final=True)
    assert len(fake.sent) == 1


async def test_a_timeout_is_unknown_and_an_overlapping_retry_waits_for_the_first(
        fake: FakeResend, channel: ResendChannel) -> None:
    fake.gate = asyncio.Event()  # Resend is slow with the first request
    payload = channel.render(step()).payload
    assert await channel.send(Message(KEY, TO, payload)) == \
        Unknown("timeout: Resend may have the message")
    overlapping = await channel.send(Message(KEY, TO, frozen(payload)))
    assert isinstance(overlapping, Failed) and overlapping.retry_after == 1.0
    assert overlapping.reason.startswith("HTTP 409 concurrent_idempotent_requests")

    fake.gate.set()  # the first request completes at Resend, its answer lost
    await fake.settled()
    (email_id,) = fake.sent
    assert await channel.send(Message(KEY, TO, frozen(payload))) == Sent(email_id)
    assert len(fake.sent) == 1 and len({s.body for s in fake.seen}) == 1


# --- every answer mapped ---------------------------------------------------------------------


def err(status: int, name: str, message: str, headers: dict[str, str] | None = None) -> Any:
    return (status, {"statusCode": status, "message": message, "name": name}, headers)


OK_ID = "49a3999c-0ce1-4ea6-ab68-afcd6dc2e794"
CASES: list[tuple[str, Any, Outcome]] = [
    ("200 id", (200, {"id": OK_ID}, None), Sent(OK_ID)),
    ("200 empty", (200, b"", None), Sent(None)),
    ("200 not UTF-8", (200, b"\xff\xfe{", None), Sent(None)),
    ("401 missing key", err(401, "missing_api_key", "Missing API key"),
     Failed("HTTP 401 missing_api_key: Resend refused our API key or sending domain")),
    ("403 invalid key", err(403, "invalid_api_key", "API key is invalid."),
     Failed("HTTP 403 invalid_api_key: Resend refused our API key or sending domain")),
    ("403 testing only", err(403, "validation_error", f"You can only send testing emails to "
                             f"your own email address ({TO})."),
     Failed("HTTP 403 validation_error: Resend refused our API key or sending domain")),
    ("403 from domain", err(403, "invalid_from_address", "The acme.test domain is not "
                            "verified."),
     Failed("HTTP 403 invalid_from_address: Resend refused our API key or sending domain")),
    ("422 invalid to", err(422, "validation_error", f"Invalid `to` field. The email address "
                           f"needs to follow the `email@example.com` format. ({TO})"),
     Rejected("HTTP 422 validation_error: Resend refused the recipient address")),
    ("400 invalid to", err(400, "validation_error", "Invalid `to` field."),
     Rejected("HTTP 400 validation_error: Resend refused the recipient address")),
    ("422 invalid from", err(422, "validation_error", "Invalid `from` field."),
     Failed("HTTP 422 validation_error: Resend refused the request; check the channel's "
            "settings")),
    ("422 missing field", err(422, "missing_required_field", "Missing `subject` field."),
     Failed("HTTP 422 missing_required_field: Resend refused the request; check the channel's "
            "settings")),
    ("422 invalid parameter", err(422, "invalid_parameter", "Invalid parameter."),
     Failed("HTTP 422 invalid_parameter: Resend refused the request; check the channel's "
            "settings")),
    ("400 bad key", err(400, "invalid_idempotency_key", "The key must be between 1-256 chars."),
     Failed("HTTP 400 invalid_idempotency_key: Resend refused the request; check the channel's "
            "settings")),
    ("409 changed body", err(409, "invalid_idempotent_request", "..."),
     Failed("HTTP 409 invalid_idempotent_request: Resend holds a different request under this "
            "key", final=True)),
    ("409 in progress", err(409, "concurrent_idempotent_requests", "...", {"Retry-After": "3"}),
     Failed("HTTP 409 concurrent_idempotent_requests: an earlier attempt under this key is "
            "still in progress", 3.0)),
    ("409 other", err(409, "conflict", "..."), Failed("HTTP 409 conflict")),
    ("429 rate", err(429, "rate_limit_exceeded", "Too many requests.", {"Retry-After": "2"}),
     Failed("HTTP 429 rate_limit_exceeded", 2.0)),
    ("429 quota", err(429, "daily_quota_exceeded", "Daily quota.", {"Retry-After": "3600"}),
     Failed("HTTP 429 daily_quota_exceeded", 3600.0)),
    ("500", err(500, "application_error", "Something went wrong."),
     Failed("HTTP 500 application_error")),
    ("503 text", (503, b"upstream connect error", {"Retry-After": "5"}),
     Failed("HTTP 503", 5.0)),
    ("502 not UTF-8", (502, b"\xff\xfe", None), Failed("HTTP 502")),
    ("404", err(404, "not_found", "Route not found."),
     Failed("HTTP 404 not_found: Resend refused the request; check the channel's settings")),
    ("302", (302, b"", {"Location": "https://elsewhere.test/emails"}),
     Failed("HTTP 302: Resend refused the request; check the channel's settings")),
    ("name is free text", err(422, f"bad value {TO}", "x"),
     Failed("HTTP 422: Resend refused the request; check the channel's settings")),
]


def canned(status: int, body: Any, headers: dict[str, str] | None) -> web.Response:
    if isinstance(body, dict):
        return web.json_response(body, status=status, headers=headers)
    return web.Response(status=status, body=body, headers=headers,
                        content_type="application/json")


@pytest.mark.parametrize(("reply", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
async def test_each_answer_is_classified(fake: FakeResend, channel: ResendChannel, reply: Any,
                                         expected: Outcome) -> None:
    fake.canned = canned(*reply)
    outcome = await channel.send(Message(KEY, TO, channel.render(step()).payload))
    assert outcome == expected
    if not isinstance(outcome, Sent):  # no secret, no address, no provider free text
        for leak in (API_KEY, TO, "ada", "domain is not", "Invalid", "..."):
            assert leak not in outcome.reason


async def test_the_real_fake_refuses_a_wrong_key_and_an_example_domain(
        fake: FakeResend) -> None:
    wrong = ResendChannel("mail", ResendSettings(api_key="re_wrong", from_address=FROM,
                                                 base_url=fake.base_url), 0.3)
    right = ResendChannel("mail", settings(fake.base_url), 0.3)
    try:
        out = await wrong.send(Message(KEY, TO, wrong.render(step()).payload))
        assert isinstance(out, Failed) and "re_wrong" not in out.reason
        assert out.reason.startswith("HTTP 403 invalid_api_key")
        dead = await right.send(Message(KEY, "x", right.render(step(address="a@example.com"))
                                        .payload))
        assert dead == Rejected("HTTP 422 validation_error: Resend refused the recipient address")
    finally:
        await wrong.close()
        await right.close()


# --- the connection --------------------------------------------------------------------------


async def test_a_connection_dropped_after_sending_is_unknown(
        fake: FakeResend, channel: ResendChannel) -> None:
    fake.drop = True
    outcome = await channel.send(Message(KEY, TO, channel.render(step()).payload))
    assert isinstance(outcome, Unknown)
    assert outcome.reason.startswith("connection lost after sending")


async def test_a_refused_connection_is_failed() -> None:
    with socket.socket() as s:  # a port nobody listens on once this closes
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ch = ResendChannel("mail", settings(f"http://127.0.0.1:{port}"), 0.3)
    try:
        outcome = await ch.send(Message(KEY, TO, ch.render(step()).payload))
    finally:
        await ch.close()
    assert isinstance(outcome, Failed) and outcome.reason.startswith("connect failed")
    assert API_KEY not in outcome.reason


async def test_close_is_idempotent(channel: ResendChannel) -> None:
    await channel.send(Message(KEY, TO, channel.render(step()).payload))
    await channel.close()
    await channel.close()
