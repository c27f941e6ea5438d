"""The telegram adapter against a Bot API server on 127.0.0.1 that speaks Telegram's wire format.

The fake serves POST /bot<token>/sendMessage, refuses a wrong token the way Telegram does (401
Unauthorized), checks the JSON body, and answers {ok, result} or {ok: false, error_code,
description, parameters}. Each test says what is frozen at render, what goes on the wire, and how
each answer maps to Sent / Rejected / Failed / Unknown, with the bot token in no reason.
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
from notifyd.channels.telegram import TYPE, TelegramChannel, TelegramSettings
from notifyd.core.contacts import TELEGRAM

TOKEN = "123456789:AAH-secret_Token_value_0123456789ab"
SECRET_PART = TOKEN.split(":")[1]
KEY = "n-1:0"


@dataclass
class Seen:
    path: str
    headers: dict[str, str]
    body: bytes


Reply = Callable[[Seen], Awaitable[web.StreamResponse | None]]


def tg_error(status: int, description: str, **parameters: Any) -> Reply:
    """An error exactly as the Bot API writes it (HTTP status == error_code)."""
    body: dict[str, Any] = {"ok": False, "error_code": status, "description": description}
    if parameters:
        body["parameters"] = parameters

    async def reply(_: Seen) -> web.StreamResponse:
        return web.json_response(body, status=status)

    return reply


def tg_ok(message_id: int) -> Reply:
    async def reply(seen: Seen) -> web.StreamResponse:
        sent = json.loads(seen.body)
        return web.json_response({"ok": True, "result": {
            "message_id": message_id, "date": 1_790_000_000, "text": sent["text"],
            "chat": {"id": sent["chat_id"], "type": "private"},
            "from": {"id": 123456789, "is_bot": True, "first_name": "notifyd"}}})

    return reply


def raw(status: int, body: bytes, content_type: str = "application/json") -> Reply:
    async def reply(_: Seen) -> web.StreamResponse:
        return web.Response(status=status, body=body, content_type=content_type)

    return reply


DROP = object()


class FakeTelegram:
    """The Bot API's sendMessage on 127.0.0.1:<free port>, recording every request it reads."""

    def __init__(self) -> None:
        self.reply: Reply = tg_ok(77)
        self.seen: list[Seen] = []
        self.gates: list[asyncio.Event] = []  # set at stop, so no held handler outlives a test
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
            return await tg_ok(1)(seen)

        return reply

    def drop(self) -> Reply:
        async def reply(_: Seen) -> None:
            return None  # the request was read; the answer never comes

        return reply

    async def handle(self, request: web.Request) -> web.StreamResponse:
        seen = Seen(request.path, dict(request.headers), await request.read())
        self.seen.append(seen)
        if request.match_info["token"] != TOKEN:
            return await tg_error(401, "Unauthorized")(seen)
        if request.match_info["method"].lower() != "sendmessage":  # methods are case-insensitive
            return await tg_error(404, "Not Found")(seen)
        body = json.loads(seen.body) if request.content_type == "application/json" else {}
        if not isinstance(body.get("chat_id"), int | str):
            return await tg_error(400, "Bad Request: chat_id is empty")(seen)
        if not body.get("text"):
            return await tg_error(400, "Bad Request: message text is empty")(seen)
        out = await self.reply(seen)
        if out is None:
            assert request.transport is not None
            request.transport.abort()
            raise asyncio.CancelledError
        return out

    async def start(self) -> FakeTelegram:
        app = web.Application()
        app.router.add_post("/bot{token}/{method}", self.handle)
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
async def tg() -> AsyncIterator[FakeTelegram]:
    fake = await FakeTelegram().start()
    yield fake
    await fake.stop()


def build(base_url: str, timeout: float = 2.0, **settings: Any) -> TelegramChannel:
    ch = TYPE.build("tg", TelegramSettings(**{"bot_token": TOKEN, "base_url": base_url,
                                              **settings}),
                    Limits(timeout_sec=timeout, max_connections=8, public_url=""))
    assert isinstance(ch, TelegramChannel)
    return ch


@pytest.fixture
async def channel(tg: FakeTelegram) -> AsyncIterator[TelegramChannel]:
    ch = build(tg.base_url)
    yield ch
    await ch.close()


def step(address: str | None = "42", text: str | None = "Your code is 123456",
         **kw: Any) -> RenderInput:
    content = {} if text is None else {"text": text}
    return RenderInput(notification_id="n-1", step_no=0, channel="tg", kind="login_code",
                       user_id="u-1", params={"code": "123456"}, created_at=0,
                       expires_at=600_000, address=address, locale=None, now=1_000,
                       content=content, **kw)


def message(ch: TelegramChannel, s: RenderInput | None = None) -> Message:
    rendered = ch.render(s or step())
    # notifyd freezes the payload as JSON before the first call; send gets it back from there
    return Message(KEY, rendered.destination, json.loads(json.dumps(rendered.payload)))


def assert_no_secret(outcome: Outcome) -> None:
    text = repr(outcome)
    assert TOKEN not in text and SECRET_PART not in text


# --- render ------------------------------------------------------------------------------------


def test_render_freezes_the_chat_id_as_a_number_and_the_text_as_rendered() -> None:
    ch = build("https://api.telegram.org")
    rendered = ch.render(step("42", "Your code is 123456"))
    assert rendered.destination == "42"
    assert rendered.payload == {"chat_id": 42, "text": "Your code is 123456",
                                "link_preview_options": {"is_disabled": True}}


def test_render_with_html_and_previews_on_freezes_both_choices() -> None:
    ch = build("https://api.telegram.org", parse_mode="HTML", disable_link_preview=False)
    rendered = ch.render(step("-1001234567890", "<b>Alert</b> &amp; more"))
    assert rendered.destination == "-1001234567890"  # a group's id is negative
    assert rendered.payload == {"chat_id": -1001234567890, "text": "<b>Alert</b> &amp; more",
                                "parse_mode": "HTML"}


def test_plain_text_is_sent_as_written_whatever_it_contains() -> None:
    ch = build("https://api.telegram.org")
    text = "<b>not bold</b> & <a href='javascript:x'>x</a>"
    assert ch.render(step(text=text)).payload["text"] == text  # no parse_mode: shown literally
    assert "parse_mode" not in ch.render(step(text=text)).payload


@pytest.mark.parametrize(("address", "text"), [
    (None, "hi"),                 # no chat id for this person
    ("", "hi"),
    ("@alice", "hi"),             # bots cannot message a user by username
    ("42abc", "hi"),
    ("4" * 20, "hi"),
    ("42\r\n", "hi"),
    ("42\n", "hi"),
    ("42", None),                 # the kind has no chat template
    ("42", ""),
    ("42", " \n "),
    ("42", "x" * 4097),           # sendMessage takes 1-4096 characters
], ids=["no address", "empty address", "username", "not numeric", "too long id", "crlf", "newline", "no text",
        "empty text", "blank text", "4097 chars"])
def test_render_refuses_what_telegram_would_never_deliver(address: str | None,
                                                          text: str | None) -> None:
    ch = build("https://api.telegram.org")
    with pytest.raises(RenderError):
        ch.render(step(address, text))


def test_4096_characters_is_the_longest_text() -> None:
    ch = build("https://api.telegram.org")
    assert len(ch.render(step(text="x" * 4096)).payload["text"]) == 4096


HTML_GOOD = [
    "<b>bold</b> <strong>s</strong> <i>i</i> <em>e</em> <u>u</u> <ins>n</ins>",
    "<s>s</s> <strike>s</strike> <del>d</del> <tg-spoiler>x</tg-spoiler>",
    '<span class="tg-spoiler">hidden</span>',
    '<a href="https://example.com/reset?a=1&amp;b=2">reset</a>',
    "<code>x &lt; y</code> and <pre>block</pre>",
    '<pre><code class="language-python">print(1)</code></pre>',
    "<blockquote>q</blockquote> <blockquote expandable>long</blockquote>",
    "<b>bold <i>italic <u>under</u></i></b> &quot;q&quot; &#128512; &#x1F600;",
    "AT&amp;T says 2 &gt; 1",
]
HTML_BAD = [
    "a < b", "2 > 1", "AT&T", "&nbsp;", "<b>open", "</b>", "<b>x</i>", "<br/>", "<p>x</p>",
    '<b class="x">y</b>', '<a href="javascript:alert(1)">x</a>', '<a href="tg://user?id=1">x</a>',
    '<a href="https://x.org" target="_blank">x</a>', "<a>x</a>",
    '<a href="https://a.org"><a href="https://b.org">x</a></a>', "<code><b>x</b></code>",
    "<pre><b>x</b></pre>", '<code class="language-python">x</code>',
    "<blockquote><blockquote>x</blockquote></blockquote>", "<!-- note -->", "<script>x</script>",
    '<span class="other">x</span>', "<b>x</b", "<b>ok</b> &#12",
]


@pytest.mark.parametrize("text", HTML_GOOD)
def test_html_mode_takes_telegrams_tags(text: str) -> None:
    ch = build("https://api.telegram.org", parse_mode="HTML")
    assert ch.render(step(text=text)).payload["text"] == text


@pytest.mark.parametrize("text", HTML_BAD)
def test_html_mode_refuses_markup_telegram_would_not_parse(text: str) -> None:
    ch = build("https://api.telegram.org", parse_mode="HTML")
    with pytest.raises(RenderError) as e:
        ch.render(step(text=text))
    assert e.value.template == "chat.text"


def test_html_mode_counts_characters_after_parsing() -> None:
    ch = build("https://api.telegram.org", parse_mode="HTML")
    assert ch.render(step(text="<b>" + "&amp;" * 4096 + "</b>"))  # 4096 characters once parsed
    with pytest.raises(RenderError):
        ch.render(step(text="<b>" + "x" * 4097 + "</b>"))


# --- settings ----------------------------------------------------------------------------------


@pytest.mark.parametrize(("settings", "keys"), [
    ({"bot_token": TOKEN}, []),
    ({}, ["bot_token"]),
    ({"bot_token": "not-a-token"}, ["bot_token"]),
    ({"bot_token": TOKEN + "/../getMe"}, ["bot_token"]),  # it lands in the URL path
    ({"bot_token": TOKEN + "\n"}, ["bot_token"]),
    ({"bot_token": TOKEN, "base_url": "ftp://api.telegram.org"}, ["base_url"]),
    ({"bot_token": TOKEN, "base_url": "https://api.telegram.org?x=1"}, ["base_url"]),
    ({"bot_token": TOKEN, "base_url": "https://user:pw@api.telegram.org"}, ["base_url"]),
    ({"bot_token": TOKEN, "base_url": "http://127.0.0.1:99999"}, ["base_url"]),
    ({"bot_token": TOKEN, "base_url": "http://[::1"}, ["base_url"]),
    ({"bot_token": TOKEN, "base_url": "http://api telegram.org"}, ["base_url"]),
    ({"bot_token": TOKEN, "base_url": "http://127.0.0.1:8081/proxy/"}, []),
    ({"bot_token": TOKEN, "parse_mode": "HTML"}, []),
    ({"bot_token": TOKEN, "parse_mode": "MarkdownV2"}, ["parse_mode"]),
])
def test_settings_problems_name_the_key_and_never_the_value(settings: dict[str, Any],
                                                            keys: list[str]) -> None:
    problems = TelegramSettings(**settings).problems()
    assert [k for k, _ in problems] == keys
    assert all(TOKEN not in m and "not-a-token" not in m for _, m in problems)


def test_the_token_is_not_in_the_settings_or_channel_repr() -> None:
    ch = build("https://api.telegram.org")
    assert SECRET_PART not in repr(TelegramSettings(bot_token=TOKEN))
    assert SECRET_PART not in repr(ch)


def test_the_type_declares_its_contact_and_medium() -> None:
    assert (TYPE.name, TYPE.contact, TYPE.medium) == ("telegram", TELEGRAM, "chat")


# --- the wire ----------------------------------------------------------------------------------


async def test_the_request_is_a_json_post_to_the_bot_path(tg: FakeTelegram,
                                                          channel: TelegramChannel) -> None:
    msg = message(channel)
    outcome = await channel.send(msg)
    assert outcome == Sent("77")
    [seen] = tg.seen
    assert seen.path == f"/bot{TOKEN}/sendMessage"
    assert seen.headers["Content-Type"] == "application/json"
    assert seen.body == json.dumps(msg.payload, sort_keys=True).encode()
    assert json.loads(seen.body) == {"chat_id": 42, "text": "Your code is 123456",
                                     "link_preview_options": {"is_disabled": True}}


async def test_a_base_url_with_a_path_prefix_is_kept(tg: FakeTelegram) -> None:
    ch = build(tg.base_url + "/")
    try:
        assert await ch.send(message(ch)) == Sent("77")
    finally:
        await ch.close()
    assert tg.seen[0].path == f"/bot{TOKEN}/sendMessage"  # one slash, whatever the config ends in


async def test_a_retry_after_unknown_sends_the_same_bytes(tg: FakeTelegram,
                                                          channel: TelegramChannel) -> None:
    msg = message(channel, step(text="Ünïcode ✓ and \"quotes\""))
    tg.reply = tg.drop()
    first = await channel.send(msg)
    assert isinstance(first, Unknown)
    tg.reply = tg_ok(78)
    assert await channel.send(msg) == Sent("78")  # Telegram has no key: this may be a duplicate
    assert len(tg.seen) == 2 and tg.seen[0].body == tg.seen[1].body


async def test_a_wrong_token_is_our_fault_never_the_contacts(tg: FakeTelegram) -> None:
    ch = build(tg.base_url, bot_token="987654321:AAwrong_token_value_000000000000")
    try:
        outcome = await ch.send(message(ch))
    finally:
        await ch.close()
    assert outcome == Failed("telegram 401 unauthorized: check the channel's bot_token")


ANSWERS: list[tuple[str, Reply, Outcome]] = [
    ("ok", tg_ok(4242), Sent("4242")),
    ("blocked", tg_error(403, "Forbidden: bot was blocked by the user"),
     Rejected("telegram 403 blocked")),
    ("deactivated", tg_error(403, "Forbidden: user is deactivated"),
     Rejected("telegram 403 deactivated")),
    ("never started", tg_error(403, "Forbidden: bot can't initiate conversation with a user"),
     Rejected("telegram 403 not_started")),
    ("a bot", tg_error(403, "Forbidden: bot can't send messages to bots"),
     Rejected("telegram 403 peer_is_bot")),
    ("kicked", tg_error(403, "Forbidden: bot was kicked from the group chat"),
     Rejected("telegram 403 kicked")),
    ("group deleted", tg_error(403, "Forbidden: the group chat was deleted"),
     Rejected("telegram 403 chat_deleted")),
    ("chat not found", tg_error(400, "Bad Request: chat not found"),
     Rejected("telegram 400 chat_not_found")),
    ("migrated", tg_error(400, "Bad Request: group chat was upgraded to a supergroup chat",
                          migrate_to_chat_id=-1001234567890),
     Rejected("telegram 400 migrated")),
    ("other 403", tg_error(403, "Forbidden: not enough rights to send text messages"),
     Failed("telegram 403 forbidden")),
    ("blocked words on a 400", tg_error(400, "Bad Request: bot was blocked by the user"),
     Failed("telegram 400 bad_request")),  # a dead-chat text only counts with its status
    ("bad entities", tg_error(400, "Bad Request: can't parse entities: unsupported start tag"),
     Failed("telegram 400 bad_request")),
    ("too long", tg_error(400, "Bad Request: message is too long"),
     Failed("telegram 400 bad_request")),
    ("401", tg_error(401, "Unauthorized"),
     Failed("telegram 401 unauthorized: check the channel's bot_token")),
    ("404", tg_error(404, "Not Found"),
     Failed("telegram 404 not_found: check the channel's bot_token and base_url")),
    ("409", tg_error(409, "Conflict: terminated by other getUpdates request"),
     Failed("telegram 409 conflict")),
    ("429", tg_error(429, "Too Many Requests: retry after 7", retry_after=7),
     Failed("telegram 429 too_many_requests", 7.0)),
    ("429 no parameters", tg_error(429, "Too Many Requests"),
     Failed("telegram 429 too_many_requests")),
    ("500", tg_error(500, "Internal Server Error"), Failed("telegram 500 error")),
    ("502 html", raw(502, b"<html>Bad Gateway</html>", "text/html"), Failed("telegram 502 error")),
    ("200 not JSON", raw(200, b"<html>ok</html>", "text/html"), Sent(None)),
    ("200 not UTF-8", raw(200, b"\xff\xfe{"), Sent(None)),
    ("403 not UTF-8", raw(403, b"\xff\xfe bot was blocked by the user"),
     Failed("telegram 403 forbidden")),  # never reject on a body we cannot read
    ("400 truncated JSON", raw(400, b'{"ok":false,"description":"Bad Request: chat not fo'),
     Failed("telegram 400 bad_request")),
    ("token echoed", tg_error(400, f"Bad Request: bot{TOKEN} is odd"),
     Failed("telegram 400 bad_request")),
]


@pytest.mark.parametrize(("reply", "expected"), [a[1:] for a in ANSWERS],
                         ids=[a[0] for a in ANSWERS])
async def test_each_answer_maps_to_one_outcome(tg: FakeTelegram, channel: TelegramChannel,
                                               reply: Reply, expected: Outcome) -> None:
    tg.reply = reply
    outcome = await channel.send(message(channel))
    assert outcome == expected
    assert_no_secret(outcome)


async def test_retry_after_falls_back_to_the_header(tg: FakeTelegram,
                                                    channel: TelegramChannel) -> None:
    async def reply(_: Seen) -> web.StreamResponse:
        return web.json_response({"ok": False, "error_code": 429, "description": "Too Many"},
                                 status=429, headers={"Retry-After": "12"})

    tg.reply = reply
    assert await channel.send(message(channel)) == Failed("telegram 429 too_many_requests", 12.0)


# --- transport ---------------------------------------------------------------------------------


async def test_an_answer_that_never_comes_is_unknown(tg: FakeTelegram) -> None:
    ch = build(tg.base_url, timeout=0.3)
    tg.reply = tg.hold()
    try:
        outcome = await ch.send(message(ch))
    finally:
        await ch.close()
    assert outcome == Unknown("timeout: Telegram may have the message")
    assert len(tg.seen) == 1  # it was sent


async def test_a_connection_dropped_after_the_request_is_unknown(tg: FakeTelegram,
                                                                 channel: TelegramChannel) -> None:
    tg.reply = tg.drop()
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
    assert_no_secret(outcome)


async def test_a_tls_handshake_that_never_ends_is_a_connect_timeout() -> None:
    """The TCP connection opens but the TLS handshake is never answered: nothing was sent."""
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


@pytest.mark.parametrize("base_url", ["http://127.0.0.1:99999", "http://[::1"])
async def test_a_base_url_aiohttp_cannot_use_fails_without_naming_the_url(base_url: str) -> None:
    ch = build(base_url)  # problems() would have refused it; send must not echo it either
    try:
        outcome = await ch.send(Message(KEY, "42", {"chat_id": 42, "text": "x"}))
    finally:
        await ch.close()
    assert outcome == Failed("not sent: the URL is not valid")


async def test_close_ends_the_session_and_a_later_send_opens_another(
        tg: FakeTelegram, channel: TelegramChannel) -> None:
    assert await channel.send(message(channel)) == Sent("77")
    await channel.close()
    await channel.close()  # twice is harmless
    assert await channel.send(message(channel)) == Sent("77")
