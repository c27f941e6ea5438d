"""The slack adapter against a chat.postMessage server on 127.0.0.1 that speaks Slack's format.

The fake serves POST /api/chat.postMessage, checks the bearer token the way Slack does (not_authed,
invalid_auth, both with HTTP 200), checks the JSON body, opens a DM for a user id, and answers
{ok: true, channel, ts} or {ok: false, error}; rate limits are HTTP 429 with Retry-After. Each
test says what is frozen at render, what goes on the wire, and how each answer maps to Sent /
Rejected / Failed / Unknown, with the token in no reason.
"""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
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
from notifyd.channels.slack import TYPE, SlackChannel, SlackSettings
from notifyd.core.contacts import SLACK

TOKEN = "xoxb-1234567890-0987654321-SecretTokenValueAbCdEf"
SECRET_PART = "SecretTokenValueAbCdEf"
USER = "U012AB3CD"
DM = "D024BE91L"
KEY = "n-1:2"


@dataclass
class Seen:
    path: str
    headers: dict[str, str]
    body: bytes


Reply = Callable[[Seen], Awaitable[web.StreamResponse | None]]


def slack_error(error: str, status: int = 200, **headers: str) -> Reply:
    async def reply(_: Seen) -> web.StreamResponse:
        return web.json_response({"ok": False, "error": error}, status=status, headers=headers)

    return reply


def slack_ok(ts: str = "1503435956.000247", channel: str = DM) -> Reply:
    async def reply(seen: Seen) -> web.StreamResponse:
        sent = json.loads(seen.body)
        return web.json_response({"ok": True, "channel": channel, "ts": ts, "message": {
            "type": "message", "subtype": "bot_message", "text": sent["text"], "ts": ts,
            "bot_id": "B123ABC456", "metadata": sent.get("metadata")}})

    return reply


def raw(status: int, body: bytes, content_type: str = "application/json") -> Reply:
    async def reply(_: Seen) -> web.StreamResponse:
        return web.Response(status=status, body=body, content_type=content_type)

    return reply


class FakeSlack:
    """chat.postMessage on 127.0.0.1:<free port>, recording every request it reads."""

    def __init__(self) -> None:
        self.reply: Reply = slack_ok()
        self.seen: list[Seen] = []
        self.gates: list[asyncio.Event] = []
        self.runner: web.AppRunner | None = None
        self.port = 0

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def hold(self) -> Reply:
        gate = asyncio.Event()
        self.gates.append(gate)

        async def reply(seen: Seen) -> web.StreamResponse:
            await gate.wait()
            return await slack_ok()(seen)

        return reply

    def drop(self) -> Reply:
        async def reply(_: Seen) -> None:
            return None

        return reply

    async def handle(self, request: web.Request) -> web.StreamResponse:
        seen = Seen(request.path, dict(request.headers), await request.read())
        self.seen.append(seen)
        auth = request.headers.get("Authorization", "")
        if not auth:
            return await slack_error("not_authed")(seen)
        if auth != f"Bearer {TOKEN}":
            return await slack_error("invalid_auth")(seen)
        if request.content_type != "application/json":
            return await slack_error("invalid_post_type")(seen)
        body = json.loads(seen.body)
        if not body.get("text"):
            return await slack_error("no_text")(seen)
        if not str(body.get("channel", "")).startswith(("U", "W")):
            return await slack_error("channel_not_found")(seen)
        out = await self.reply(seen)
        if out is None:
            assert request.transport is not None
            request.transport.abort()
            raise asyncio.CancelledError
        return out

    async def start(self) -> FakeSlack:
        app = web.Application()
        app.router.add_post("/api/chat.postMessage", self.handle)
        self.runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.5,
                                    handle_signals=False)
        await self.runner.setup()
        site = web.TCPSite(self.runner, "127.0.0.1", 0)
        await site.start()
        self.port = self.runner.addresses[0][1]
        return self

    async def stop(self) -> None:
        for gate in self.gates:
            gate.set()
        if self.runner is not None:
            await self.runner.cleanup()


@pytest.fixture
async def fake() -> AsyncIterator[FakeSlack]:
    f = await FakeSlack().start()
    yield f
    await f.stop()


def build(base_url: str, timeout: float = 2.0, **settings: Any) -> SlackChannel:
    ch = TYPE.build("slack", SlackSettings(**{"bot_token": TOKEN, "base_url": base_url,
                                              **settings}),
                    Limits(timeout_sec=timeout, max_connections=8, public_url=""))
    assert isinstance(ch, SlackChannel)
    return ch


@pytest.fixture
async def channel(fake: FakeSlack) -> AsyncIterator[SlackChannel]:
    ch = build(fake.base_url)
    yield ch
    await ch.close()


def step(address: str | None = USER, text: str | None = "Deploy *failed* on web-1",
         **kw: Any) -> RenderInput:
    content = {} if text is None else {"text": text}
    return RenderInput(notification_id="n-1", step_no=2, channel="slack", kind="deploy_failed",
                       user_id="u-1", params={"host": "web-1"}, created_at=0,
                       expires_at=600_000, address=address, locale=None, now=1_000,
                       content=content, **kw)


def message(ch: SlackChannel, s: RenderInput | None = None) -> Message:
    rendered = ch.render(s or step())
    return Message(KEY, rendered.destination, json.loads(json.dumps(rendered.payload)))


def assert_no_secret(outcome: Outcome) -> None:
    text = repr(outcome)
    assert TOKEN not in text and SECRET_PART not in text


# --- render ------------------------------------------------------------------------------------


def test_render_freezes_the_user_id_as_the_channel_and_the_text() -> None:
    ch = build("https://slack.com")
    rendered = ch.render(step())
    assert rendered.destination == USER
    assert rendered.payload == {"channel": USER, "text": "Deploy *failed* on web-1",
                                "unfurl_links": False, "unfurl_media": False}


def test_render_with_unfurl_on_freezes_it() -> None:
    ch = build("https://slack.com", unfurl=True)
    assert ch.render(step("W0123ABCD")).payload == {
        "channel": "W0123ABCD", "text": "Deploy *failed* on web-1", "unfurl_links": True,
        "unfurl_media": True}


@pytest.mark.parametrize(("text", "sent"), [
    ("a < b & c > d", "a &lt; b &amp; c &gt; d"),
    ("<!channel> wake up", "&lt;!channel&gt; wake up"),            # no @channel from a param
    ("<https://evil.example|Your bank>", "&lt;https://evil.example|Your bank&gt;"),  # no masked link
    ("<@U999> was here", "&lt;@U999&gt; was here"),                # no mention
    ("&amp; stays literal", "&amp;amp; stays literal"),
    ("*bold* _italic_ ~strike~ `code` https://example.com", "*bold* _italic_ ~strike~ `code` "
     "https://example.com"),                                      # mrkdwn and bare URLs still work
])
def test_slacks_control_characters_are_escaped(text: str, sent: str) -> None:
    assert build("https://slack.com").render(step(text=text)).payload["text"] == sent


@pytest.mark.parametrize(("address", "text"), [
    (None, "hi"),
    ("", "hi"),
    ("C024BE91L", "hi"),          # a channel, not a person
    ("D024BE91L", "hi"),
    ("u012ab3cd", "hi"),
    ("alice@example.com", "hi"),
    ("U012AB3CD\n", "hi"),
    (USER, None),
    (USER, ""),
    (USER, "  \n"),
    (USER, "x" * 40_001),
    (USER, "<" * 10_001),         # 40,004 characters once escaped
], ids=["no address", "empty", "channel id", "dm id", "lowercase", "email", "newline", "no text",
        "empty text", "blank text", "too long", "too long escaped"])
def test_render_refuses_what_slack_would_never_deliver(address: str | None,
                                                       text: str | None) -> None:
    with pytest.raises(RenderError):
        build("https://slack.com").render(step(address, text))


# --- settings ----------------------------------------------------------------------------------


@pytest.mark.parametrize(("settings", "keys"), [
    ({"bot_token": TOKEN}, []),
    ({}, ["bot_token"]),
    ({"bot_token": "xoxp-1234567890-user-token"}, ["bot_token"]),   # a user token posts as a person
    ({"bot_token": TOKEN + "\r\nX-Evil: 1"}, ["bot_token"]),        # it goes in a header
    ({"bot_token": TOKEN + "\n"}, ["bot_token"]),
    ({"bot_token": TOKEN, "base_url": "slack.com"}, ["base_url"]),
    ({"bot_token": TOKEN, "base_url": "https://slack.com/#x"}, ["base_url"]),
    ({"bot_token": TOKEN, "base_url": "https://slack.com:70000"}, ["base_url"]),
    ({"bot_token": TOKEN, "base_url": "http://127.0.0.1:9000/slack"}, []),
])
def test_settings_problems_name_the_key_and_never_the_value(settings: dict[str, Any],
                                                            keys: list[str]) -> None:
    problems = SlackSettings(**settings).problems()
    assert [k for k, _ in problems] == keys
    assert all(SECRET_PART not in m and "xoxp" not in m for _, m in problems)


def test_the_token_is_not_in_the_settings_or_channel_repr() -> None:
    assert SECRET_PART not in repr(SlackSettings(bot_token=TOKEN))
    assert SECRET_PART not in repr(build("https://slack.com"))


def test_the_type_declares_its_contact_and_medium() -> None:
    assert (TYPE.name, TYPE.contact, TYPE.medium) == ("slack", SLACK, "chat")


# --- the wire ----------------------------------------------------------------------------------


async def test_the_request_is_a_bearer_json_post_with_the_key_in_metadata(
        fake: FakeSlack, channel: SlackChannel) -> None:
    msg = message(channel)
    outcome = await channel.send(msg)
    assert outcome == Sent("1503435956.000247", f"channel {DM}")
    [seen] = fake.seen
    assert seen.path == "/api/chat.postMessage"
    assert seen.headers["Authorization"] == f"Bearer {TOKEN}"
    assert seen.headers["Content-Type"] == "application/json; charset=utf-8"
    sent = json.loads(seen.body)
    assert sent == {"channel": USER, "text": "Deploy *failed* on web-1", "unfurl_links": False,
                    "unfurl_media": False,
                    "metadata": {"event_type": "notifyd_step", "event_payload": {"key": KEY}}}
    assert seen.body == json.dumps(sent, sort_keys=True).encode()


async def test_metadata_can_be_left_off(fake: FakeSlack) -> None:
    ch = build(fake.base_url, metadata=False)
    try:
        msg = message(ch)
        assert isinstance(await ch.send(msg), Sent)
    finally:
        await ch.close()
    assert fake.seen[0].body == json.dumps(msg.payload, sort_keys=True).encode()


async def test_a_retry_after_unknown_sends_the_same_bytes(fake: FakeSlack,
                                                          channel: SlackChannel) -> None:
    msg = message(channel, step(text="Ünïcode ✓ <and> \"quotes\""))
    fake.reply = fake.drop()
    assert isinstance(await channel.send(msg), Unknown)
    fake.reply = slack_ok("1503435957.000001")
    assert await channel.send(msg) == Sent("1503435957.000001", f"channel {DM}")
    assert len(fake.seen) == 2 and fake.seen[0].body == fake.seen[1].body  # same key in metadata


async def test_a_wrong_token_is_our_fault_never_the_contacts(fake: FakeSlack) -> None:
    ch = build(fake.base_url, bot_token="xoxb-0000000000-0000000000-WrongWrongWrong")
    try:
        outcome = await ch.send(message(ch))
    finally:
        await ch.close()
    assert outcome == Failed(
        "slack 200 invalid_auth: check the channel's bot_token and the Slack app's setup")


OURS = "check the channel's bot_token and the Slack app's setup"
ANSWERS: list[tuple[str, Reply, Outcome]] = [
    ("ok", slack_ok("1700000000.123456", "D0ABCDEF1"), Sent("1700000000.123456",
                                                          "channel D0ABCDEF1")),
    ("ok odd channel", slack_ok("1.2", "not a channel"), Sent("1.2")),
    # the person cannot be messaged: the contact is dead
    *[(code, slack_error(code), Rejected(f"slack 200 {code}")) for code in (
        "channel_not_found", "user_not_found", "user_disabled", "cannot_dm_bot", "is_archived")],
    # Slack may have posted it
    *[(code, slack_error(code), Unknown(f"slack 200 {code}: Slack may have posted it"))
      for code in ("internal_error", "fatal_error")],
    # our token or the app's setup: never the contact's fault
    *[(code, slack_error(code), Failed(f"slack 200 {code}: {OURS}")) for code in (
        "not_authed", "invalid_auth", "account_inactive", "token_revoked", "token_expired",
        "no_permission", "missing_scope", "not_allowed_token_type", "team_access_not_granted",
        "ekm_access_denied", "access_denied", "accesslimited", "enterprise_is_restricted",
        "org_login_required", "two_factor_setup_required", "messages_tab_disabled",
        "not_in_channel", "restricted_action", "restricted_action_read_only_channel",
        "metadata_must_be_sent_from_app", "user_not_visible")],
    # our payload, or Slack busy: retried, never the contact's fault
    *[(code, slack_error(code), Failed(f"slack 200 {code}")) for code in (
        "msg_too_long", "no_text", "invalid_arguments", "invalid_metadata_format",
        "invalid_metadata_schema", "metadata_too_large", "too_many_attachments",
        "invalid_blocks", "invalid_post_type", "invalid_charset", "request_timeout",
        "service_unavailable", "team_added_to_org", "rate_limited", "message_limit_exceeded",
        "some_code_slack_adds_next_year")],
    ("ratelimited 429", slack_error("ratelimited", 429, **{"Retry-After": "30"}),
     Failed("slack 429 ratelimited", 30.0)),
    ("429 bare", raw(429, b"", "text/plain"), Failed("slack 429")),
    ("500", raw(500, b"<html>oops</html>", "text/html"), Failed("slack 500")),
    ("503 retry-after", slack_error("service_unavailable", 503, **{"Retry-After": "5"}),
     Failed("slack 503 service_unavailable", 5.0)),
    ("404", raw(404, b"Not Found", "text/plain"), Failed("slack 404")),
    ("404 dead code", slack_error("channel_not_found", 404),
     Failed("slack 404 channel_not_found")),  # only Slack's own 200 answers reject a contact
    ("200 not JSON", raw(200, b"<html>ok?</html>", "text/html"),
     Unknown("slack 200: unreadable answer, the message may be posted")),
    ("200 not UTF-8", raw(200, b"\xff\xfe{"),
     Unknown("slack 200: unreadable answer, the message may be posted")),
    ("200 without ok", raw(200, b'{"channel": "D1"}'),
     Unknown("slack 200: unreadable answer, the message may be posted")),
    ("free text error", raw(200, b'{"ok": false, "error": "user U012AB3CD is gone"}'),
     Failed("slack 200")),  # not a short code: neither echoed nor trusted
    ("token echoed", raw(200, json.dumps({"ok": False, "error": TOKEN}).encode()),
     Failed("slack 200")),  # an xoxb- token is no Slack error code: never written in a reason
]


@pytest.mark.parametrize(("reply", "expected"), [a[1:] for a in ANSWERS],
                         ids=[a[0] for a in ANSWERS])
async def test_each_answer_maps_to_one_outcome(fake: FakeSlack, channel: SlackChannel,
                                               reply: Reply, expected: Outcome) -> None:
    fake.reply = reply
    outcome = await channel.send(message(channel))
    assert outcome == expected
    assert_no_secret(outcome)


# --- transport ---------------------------------------------------------------------------------


async def test_an_answer_that_never_comes_is_unknown(fake: FakeSlack) -> None:
    ch = build(fake.base_url, timeout=0.3)
    fake.reply = fake.hold()
    try:
        outcome = await ch.send(message(ch))
    finally:
        await ch.close()
    assert outcome == Unknown("timeout: Slack may have the message")
    assert len(fake.seen) == 1


async def test_a_connection_dropped_after_the_request_is_unknown(fake: FakeSlack,
                                                                 channel: SlackChannel) -> None:
    fake.reply = fake.drop()
    outcome = await channel.send(message(channel))
    assert isinstance(outcome, Unknown)
    assert outcome.reason.startswith("connection lost after sending")
    assert_no_secret(outcome)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def test_a_refused_connection_never_left_so_it_failed() -> None:
    ch = build(f"http://127.0.0.1:{free_port()}")
    try:
        outcome = await ch.send(message(ch))
    finally:
        await ch.close()
    assert outcome == Failed("connect failed: ConnectionRefusedError")


async def test_a_tls_handshake_that_never_ends_is_a_connect_timeout() -> None:
    silent: list[asyncio.StreamWriter] = []

    async def accept(_: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        silent.append(writer)

    server = await asyncio.start_server(accept, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    ch = build(f"https://127.0.0.1:{port}", timeout=0.3)
    try:
        outcome = await ch.send(message(ch))
    finally:
        await ch.close()
        for w in silent:
            w.close()
        server.close()
        await server.wait_closed()
    assert outcome == Failed("connect timed out")


async def test_a_base_url_aiohttp_cannot_use_fails_without_naming_it() -> None:
    ch = build("http://127.0.0.1:99999")
    try:
        outcome = await ch.send(Message(KEY, USER, {"channel": USER, "text": "x"}))
    finally:
        await ch.close()
    assert outcome == Failed("not sent: the URL is not valid")


async def test_close_ends_the_session_and_a_later_send_opens_another(
        fake: FakeSlack, channel: SlackChannel) -> None:
    assert isinstance(await channel.send(message(channel)), Sent)
    await channel.close()
    await channel.close()
    assert isinstance(await channel.send(message(channel)), Sent)
