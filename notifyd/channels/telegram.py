"""The telegram channel: a chat step sent by a bot with the Bot API's sendMessage.

POST {base_url}/bot{token}/sendMessage with a JSON body {chat_id, text, parse_mode?,
link_preview_options?}. The answer is {ok, result: {message_id}} or {ok: false, error_code,
description, parameters: {retry_after?}}, with the HTTP status equal to error_code. Sources:
https://core.telegram.org/bots/api#making-requests and #sendmessage, the server's own error
mapping (tdlib/telegram-bot-api, telegram-bot-api/Client.cpp fail_query_with_error: "Forbidden:
bot was blocked by the user", "Forbidden: user is deactivated"; Query.cpp: 429 "Too Many
Requests: retry after N" with parameters.retry_after), and the Bot API 7.0 changelog
(link_preview_options replaced disable_web_page_preview).

Outcomes: ok -> Sent(message_id). A 400/403 whose description says the chat is dead for this bot
(blocked, deactivated, never started, kicked, chat not found, ...) -> Rejected, with a short code
("telegram 403 blocked"), never Telegram's free text. Every other 400/403, 401 (bad token), 404
(bad token or base_url), 429 (with parameters.retry_after) and 5xx -> Failed: our request or our
credentials, never the contact's fault. A refused connection or a connect timeout -> Failed; a
timeout or a connection lost after sending -> Unknown.

The bot token is a secret that travels in the URL path, so no reason, log line or exception text
here ever includes the URL; exception texts may, so only their class names are used.

Telegram has no idempotency key and no message metadata: a retry after Unknown may deliver the
message twice. Every retry sends the frozen payload byte for byte.

Formatting: parse_mode "" (the default) sends plain text, which nothing in it can change. With
"HTML", render() checks the rendered text against the tags Telegram supports (links only to
http(s) URLs) and ends the step rather than send markup Telegram would refuse; escaping the
parameters interpolated into an HTML template stays the template renderer's job.
"""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser
from typing import Any
from urllib.parse import urlsplit

from notifyd.channels.base import (
    Failed,
    Limits,
    Message,
    Outcome,
    Rejected,
    Rendered,
    RenderError,
    RenderInput,
    Sent,
)
from notifyd.channels.egress import DIRECT, Egress
from notifyd.channels.http import parse_json, parse_retry_after, post
from notifyd.channels.types.telegram import TYPE as TYPE
from notifyd.channels.types.telegram import TelegramSettings
from notifyd.channels.wire import Client

MAX_TEXT_CHARS = 4096  # sendMessage: "1-4096 characters after entities parsing"
CHAT_ID_RE = re.compile(r"-?[0-9]{1,19}")  # a numeric chat id; bots cannot DM an @username

# (status, words in the description, short code): this chat is dead for this bot, and no retry
# will change that until the person does something (unblocks, presses Start).
DEAD_CHAT: tuple[tuple[int, str, str], ...] = (
    (403, "bot was blocked by the user", "blocked"),
    (403, "user is deactivated", "deactivated"),
    (403, "bot can't initiate conversation with a user", "not_started"),
    (403, "bot can't send messages to bots", "peer_is_bot"),
    (403, "bot was kicked from", "kicked"),
    (403, "the group chat was deleted", "chat_deleted"),
    (400, "chat not found", "chat_not_found"),
    (400, "group chat was upgraded to a supergroup chat", "migrated"),
)
STATUS_CODES = {400: "bad_request", 401: "unauthorized", 403: "forbidden", 404: "not_found",
                409: "conflict", 429: "too_many_requests"}



class TelegramChannel:
    def __init__(self, name: str, settings: TelegramSettings, timeout_sec: float,
                 max_connections: int = 100, egress: Egress = DIRECT) -> None:
        self.name = name
        self.settings = settings
        self._url = f"{settings.base_url.rstrip('/')}/bot{settings.bot_token}/sendMessage"
        self.http = Client(max_connections, timeout_sec, egress)  # a send never waits for a connection

    def __repr__(self) -> str:  # the URL holds the token
        return f"TelegramChannel({self.name!r})"

    def render(self, step: RenderInput) -> Rendered:
        chat_id = step.address or ""
        if not CHAT_ID_RE.fullmatch(chat_id):
            raise RenderError("telegram_chat_id", ValueError("not a numeric Telegram chat id"))
        text = step.content.get("text")
        if not isinstance(text, str):
            raise RenderError("chat.text", KeyError("text"))
        mode = self.settings.parse_mode
        try:
            length = check_html(text) if mode == "HTML" else len(text)
        except ValueError as e:
            raise RenderError("chat.text", e) from None
        if not text.strip() or length > MAX_TEXT_CHARS:
            raise RenderError("chat.text", ValueError(f"text must be 1-{MAX_TEXT_CHARS} chars"))
        payload: dict[str, Any] = {"chat_id": int(chat_id), "text": text}
        if mode:
            payload["parse_mode"] = mode
        if self.settings.disable_link_preview:
            payload["link_preview_options"] = {"is_disabled": True}
        return Rendered(chat_id, payload)

    async def send(self, message: Message) -> Outcome:
        body = json.dumps(message.payload, sort_keys=True).encode()
        return await post(self.http, self._url, body,
                          {"Content-Type": "application/json"}, classify, "Telegram")

    async def close(self) -> None:
        await self.http.close()


def classify(status: int, headers: Any, body: bytes) -> Outcome:
    data = parse_json(body)
    data = data if isinstance(data, dict) else {}
    if 200 <= status < 300:  # Telegram answers 200 only with ok: the message is sent
        result = data.get("result")
        ref = result.get("message_id") if isinstance(result, dict) else None
        return Sent(str(ref) if isinstance(ref, int) else None)
    description = data.get("description")
    description = description.lower() if isinstance(description, str) else ""
    for dead_status, words, code in DEAD_CHAT:
        if status == dead_status and words in description:
            return Rejected(f"telegram {status} {code}")
    reason = f"telegram {status} {STATUS_CODES.get(status, 'error')}"
    if status == 401:
        return Failed(f"{reason}: check the channel's bot_token")
    if status == 404:
        return Failed(f"{reason}: check the channel's bot_token and base_url")
    return Failed(reason, retry_after(data, headers))


def retry_after(data: dict[str, Any], headers: Any) -> float | None:
    params = data.get("parameters")
    value = params.get("retry_after") if isinstance(params, dict) else None
    if isinstance(value, int | float) and not isinstance(value, bool) and value >= 0:
        return float(value)
    return parse_retry_after(headers.get("Retry-After"))


# --- HTML parse mode ----------------------------------------------------------------------------

# Telegram's HTML style (core.telegram.org/bots/api#html-style): only these tags, these named
# entities, and every other <, > and & escaped.
PLAIN_TAGS = frozenset({"b", "strong", "i", "em", "u", "ins", "s", "strike", "del", "tg-spoiler",
                        "code", "pre", "blockquote"})
ENTITIES = frozenset({"lt", "gt", "amp", "quot"})
BARE_AMP = re.compile(r"&(?!(?:lt|gt|amp|quot|#[0-9]{1,7}|#[xX][0-9a-fA-F]{1,6});)")


class _TelegramHTML(HTMLParser):
    """Checks a text against Telegram's HTML style and counts its characters after parsing."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=False)
        self.open: list[str] = []
        self.chars = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if "code" in self.open or ("pre" in self.open and tag != "code"):
            raise ValueError("no tags inside code or pre, but code directly in pre")
        if tag in self.open and tag in ("a", "blockquote"):
            raise ValueError(f"<{tag}> cannot nest")
        if not _allowed(tag, attrs, self.open):
            raise ValueError(f"<{tag}> with these attributes is not Telegram HTML")
        self.open.append(tag)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        raise ValueError("self-closing tags are not Telegram HTML")

    def handle_endtag(self, tag: str) -> None:
        if not self.open or self.open[-1] != tag:
            raise ValueError(f"</{tag}> closes nothing open")
        self.open.pop()

    def handle_data(self, data: str) -> None:
        if any(c in data for c in "<>&"):
            raise ValueError("<, > and & must be escaped")
        self.chars += len(data)

    def handle_entityref(self, name: str) -> None:
        if name not in ENTITIES:
            raise ValueError("only &lt; &gt; &amp; &quot; are named entities in Telegram HTML")
        self.chars += 1

    def handle_charref(self, name: str) -> None:
        self.chars += 1

    def handle_comment(self, data: str) -> None:
        raise ValueError("no comments in Telegram HTML")

    def handle_decl(self, decl: str) -> None:
        raise ValueError("no declarations in Telegram HTML")

    def handle_pi(self, data: str) -> None:
        raise ValueError("no processing instructions in Telegram HTML")

    def unknown_decl(self, data: str) -> None:
        raise ValueError("no declarations in Telegram HTML")


def _allowed(tag: str, attrs: list[tuple[str, str | None]], open_tags: list[str]) -> bool:
    if tag in PLAIN_TAGS:
        if tag == "code" and open_tags[-1:] == ["pre"]:
            return attrs == [] or (len(attrs) == 1 and attrs[0][0] == "class"
                                   and re.fullmatch(r"language-[A-Za-z0-9_+#.-]{1,32}",
                                                    attrs[0][1] or "") is not None)
        if tag == "blockquote":
            return attrs in ([], [("expandable", None)])
        return attrs == []
    if tag == "span":
        return attrs == [("class", "tg-spoiler")]
    if tag == "a":
        if len(attrs) != 1 or attrs[0][0] != "href" or not attrs[0][1]:
            return False
        href = urlsplit(attrs[0][1])
        return href.scheme in ("http", "https") and bool(href.hostname) and not any(
            c.isspace() or ord(c) < 32 for c in attrs[0][1])
    return False


def check_html(text: str) -> int:
    """The length Telegram counts for `text` in HTML parse mode; ValueError when it is not
    Telegram's HTML style (Telegram would answer 400 "can't parse entities")."""
    if BARE_AMP.search(text):  # the parser would guess at "AT&T"; Telegram wants "AT&amp;T"
        raise ValueError("<, > and & must be escaped")
    parser = _TelegramHTML()
    parser.feed(text)
    parser.close()
    if parser.open:
        raise ValueError(f"<{parser.open[-1]}> is never closed")
    return parser.chars


def build(name: str, settings: TelegramSettings, limits: Limits) -> TelegramChannel:
    return TelegramChannel(name, settings, limits.timeout_sec, limits.max_connections,
                           limits.egress)

