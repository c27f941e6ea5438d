"""The discord channel: a chat step posted to a Discord channel through its incoming webhook
("Execute Webhook").

POST {webhook_url}?wait=true with a JSON body {content} or {embeds: [{title?, description}]},
username if set, and allowed_mentions {parse: []}: nothing a parameter holds (@everyone, a
role, a user) pings anyone. wait=true makes Discord answer with the message it saved (200, its
id the provider_ref) or the error; without it a message that is not saved answers 204 all the
same. Sources: https://discord.com/developers/docs/resources/webhook#execute-webhook (wait,
content up to 2000 characters, embeds, allowed_mentions, username),
https://discord.com/developers/docs/resources/message#embed-object-embed-limits (title 256,
description 4096), https://discord.com/developers/docs/topics/rate-limits (429 with a JSON body
{message, retry_after: seconds as a float, global} and a Retry-After header; too many 401, 403
and 429 answers in ten minutes get an IP banned for a while),
https://discord.com/developers/docs/topics/opcodes-and-status-codes#json (10015 Unknown
Webhook, 50027 Invalid Webhook Token, 50035 Invalid Form Body).

Outcomes: 2xx Sent(message id). 429 and 5xx Failed, retried after retry_after (or
Retry-After). 401, 403 and 404 (a deleted webhook, a bad token) and 400 (our body) Failed
final: no retry will change them, and retries of refused requests count towards Discord's ban.
The webhook is the channel's, not the person's: nothing is Rejected, nothing disabled. Refused
connections Failed; timeouts and connections lost after sending Unknown. Discord takes no
idempotency key: a retry after Unknown may post twice. The webhook's token is in its URL: no
reason, log line or destination holds the URL.
"""

from __future__ import annotations

import json
from typing import Any

from notifyd.channels.base import (
    Failed,
    Limits,
    Message,
    Outcome,
    Rendered,
    RenderError,
    RenderInput,
    Sent,
    chat_text,
)
from notifyd.channels.http import parse_json, parse_retry_after, post, provider_code
from notifyd.channels.types.discord import TYPE as TYPE
from notifyd.channels.types.discord import DiscordSettings, webhook_id
from notifyd.channels.wire import Client

MAX_CONTENT = 2000
MAX_TITLE = 256
MAX_DESCRIPTION = 4096
SNOWFLAKE_DIGITS = 20


class DiscordChannel:
    def __init__(self, name: str, settings: DiscordSettings, limits: Limits) -> None:
        self.name = name
        self.settings = settings
        self._url = settings.webhook_url + ("&" if "?" in settings.webhook_url else "?") \
            + "wait=true"
        self.destination = f"discord webhook {webhook_id(settings.webhook_url)}"
        self.http = Client(limits.max_connections, limits.timeout_sec, limits.egress)

    def __repr__(self) -> str:  # the URL holds the token
        return f"DiscordChannel({self.name!r})"

    def render(self, step: RenderInput) -> Rendered:
        plain = self.settings.style == "content"
        text, title = chat_text(step, MAX_CONTENT if plain else MAX_DESCRIPTION)
        payload: dict[str, Any] = {"allowed_mentions": {"parse": []}}
        if plain:
            payload["content"] = text
        else:
            embed = {"description": text}
            if title is not None:
                if len(title) > MAX_TITLE:
                    raise RenderError("chat.title", ValueError(f"over {MAX_TITLE} characters"))
                embed["title"] = title
            payload["embeds"] = [embed]
        if self.settings.username:
            payload["username"] = self.settings.username
        return Rendered(self.destination, payload)

    async def send(self, message: Message) -> Outcome:
        body = json.dumps(message.payload, sort_keys=True, separators=(",", ":"),
                          ensure_ascii=False).encode()
        return await post(self.http, self._url, body, {"Content-Type": "application/json"},
                          classify, "Discord")

    async def close(self) -> None:
        await self.http.close()


def classify(status: int, headers: Any, body: bytes) -> Outcome:
    data = parse_json(body)
    if 200 <= status < 300:
        ref = data.get("id") if isinstance(data, dict) else None
        ok = isinstance(ref, str) and ref.isdigit() and len(ref) <= SNOWFLAKE_DIGITS
        return Sent(ref if ok else None)
    reason = f"HTTP {status}{provider_code(data, ('code',))}"
    if status == 429 or status >= 500:
        return Failed(reason, retry_after(data, headers))
    if status in (401, 403, 404):
        return Failed(f"{reason}: the webhook is gone or its token is wrong; check webhook_url",
                      final=True)
    if 300 <= status < 400:
        return Failed(f"{reason}: redirected; check webhook_url", final=True)
    return Failed(f"{reason}: Discord refused the message", final=True)


def retry_after(data: object, headers: Any) -> float | None:
    value = data.get("retry_after") if isinstance(data, dict) else None
    if isinstance(value, int | float) and not isinstance(value, bool) and value >= 0:
        return float(value)
    return parse_retry_after(headers.get("Retry-After"))


def build(name: str, settings: DiscordSettings, limits: Limits) -> DiscordChannel:
    return DiscordChannel(name, settings, limits)
