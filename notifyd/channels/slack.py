"""The slack channel: a chat step sent as a direct message by an app's bot with chat.postMessage.

POST {base_url}/api/chat.postMessage, Authorization: Bearer xoxb-..., a JSON body {channel: the
user's id, text, unfurl_links, unfurl_media, metadata?}: given a user id, Slack opens the bot's
DM with that user. Slack answers HTTP 200 {ok: true, channel, ts} or HTTP 200 {ok: false, error:
"<code>"}; rate limits come as HTTP 429 with Retry-After. Sources:
https://docs.slack.dev/reference/methods/chat.postMessage (arguments, "Post to a direct message
channel", the error table), https://docs.slack.dev/reference/methods/conversations.open
(user_not_found, user_disabled, cannot_dm_bot), https://docs.slack.dev/apis/web-api/rate-limits,
https://docs.slack.dev/messaging/message-metadata and
https://api.slack.com/reference/surfaces/formatting#escaping.

Outcomes: ok -> Sent(ts). An error that says this user cannot be messaged (channel_not_found,
user_not_found, user_disabled, cannot_dm_bot, is_archived) -> Rejected. internal_error and
fatal_error -> Unknown: Slack says part of the operation may have succeeded. Every other error
-> Failed: our token or app setup (invalid_auth, account_inactive: the *bot's* account, ...), our
payload (msg_too_long, invalid_metadata_*, ...), a rate limit (ratelimited, rate_limited, HTTP 429
with Retry-After) or Slack's trouble (5xx, service_unavailable); an unrecognised code is never
taken to mean the contact is dead. A 200 whose body cannot be read -> Unknown (Slack answers
errors with 200 too, so the post may have happened). A refused connection or connect timeout ->
Failed; a timeout or a connection lost after sending -> Unknown. Reasons carry the status and
Slack's short error code, never the token.

Slack has no idempotency key: a retry after Unknown may post twice. The step key goes in the
message's metadata (event_type "notifyd_step", event_payload {key}) so that a posted message can
be matched to its step later. Every retry sends the same bytes.

Text: &, < and > are Slack's control characters (links, mentions, @channel); the adapter escapes
them in the rendered text, so no parameter can inject a link or a mention. mrkdwn (*bold*,
_italic_) still works; templates cannot write <url|label> links.
"""

from __future__ import annotations

import json
import re
from typing import Any

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
    Unknown,
)
from notifyd.channels.egress import DIRECT, Egress
from notifyd.channels.http import parse_json, parse_retry_after, post
from notifyd.channels.types.slack import TYPE as TYPE
from notifyd.channels.types.slack import SlackSettings
from notifyd.channels.wire import Client

MAX_TEXT_CHARS = 40_000  # Slack truncates longer messages (chat.postMessage "Truncating content")
USER_ID_RE = re.compile(r"[UW][A-Z0-9]{2,30}")  # U... or W... (Enterprise Grid)
CHANNEL_RE = re.compile(r"[CDG][A-Z0-9]{2,30}")
CODE_RE = re.compile(r"[a-z][a-z0-9_]{0,63}")  # channel_not_found, ratelimited, ...
EVENT_TYPE = "notifyd_step"

# This user cannot be messaged by this app: the contact is dead.
DEAD_USER = frozenset({"channel_not_found", "user_not_found", "user_disabled", "cannot_dm_bot",
                       "is_archived"})
# "It's possible some aspect of the operation succeeded before the error was raised."
MAYBE_POSTED = frozenset({"internal_error", "fatal_error"})
# Our token or the app's setup: a person has to fix the channel's config, not the contact.
OURS = frozenset({"not_authed", "invalid_auth", "account_inactive", "token_revoked",
                  "token_expired", "no_permission", "missing_scope", "not_allowed_token_type",
                  "team_access_not_granted", "ekm_access_denied", "access_denied",
                  "accesslimited", "enterprise_is_restricted", "org_login_required",
                  "two_factor_setup_required", "messages_tab_disabled", "not_in_channel",
                  "restricted_action", "metadata_must_be_sent_from_app", "user_not_visible"})



def escape(text: str) -> str:
    """Slack's three control characters as entities; nothing else is encoded."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


class SlackChannel:
    def __init__(self, name: str, settings: SlackSettings, timeout_sec: float,
                 max_connections: int = 100, egress: Egress = DIRECT) -> None:
        self.name = name
        self.settings = settings
        self._url = f"{settings.base_url.rstrip('/')}/api/chat.postMessage"
        self._auth = f"Bearer {settings.bot_token}"
        self.http = Client(max_connections, timeout_sec, egress)  # a send never waits for a connection

    def __repr__(self) -> str:
        return f"SlackChannel({self.name!r})"

    def render(self, step: RenderInput) -> Rendered:
        user_id = step.address or ""
        if not USER_ID_RE.fullmatch(user_id):
            raise RenderError("slack_user_id", ValueError("not a Slack user id (U... or W...)"))
        text = step.content.get("text")
        if not isinstance(text, str):
            raise RenderError("chat.text", KeyError("text"))
        text = escape(text)
        if not text.strip() or len(text) > MAX_TEXT_CHARS:
            raise RenderError("chat.text", ValueError(f"text must be 1-{MAX_TEXT_CHARS} chars"))
        unfurl = self.settings.unfurl
        return Rendered(user_id, {"channel": user_id, "text": text, "unfurl_links": unfurl,
                                  "unfurl_media": unfurl})

    async def send(self, message: Message) -> Outcome:
        payload = dict(message.payload)
        if self.settings.metadata:
            payload["metadata"] = {"event_type": EVENT_TYPE,
                                   "event_payload": {"key": message.idempotency_key}}
        body = json.dumps(payload, sort_keys=True).encode()
        headers = {"Content-Type": "application/json; charset=utf-8",
                   "Authorization": self._auth}
        return await post(self.http, self._url, body, headers, classify, "Slack")

    async def close(self) -> None:
        await self.http.close()


def classify(status: int, headers: Any, body: bytes) -> Outcome:
    data = parse_json(body)
    error = data.get("error") if isinstance(data, dict) else None
    # Slack's codes are lower snake_case; anything else (free text, an echoed xoxb- token) is
    # neither trusted nor written into the reason.
    error = error if isinstance(error, str) and CODE_RE.fullmatch(error) else ""
    reason = f"slack {status} {error}".rstrip()
    wait = parse_retry_after(headers.get("Retry-After"))
    if 200 <= status < 300:  # Slack's own answer, errors included
        if not isinstance(data, dict) or not isinstance(data.get("ok"), bool):
            return Unknown(f"{reason}: unreadable answer, the message may be posted")
        if data["ok"]:
            ts, channel = data.get("ts"), data.get("channel")
            detail = f"channel {channel}" if isinstance(channel, str) and CHANNEL_RE.fullmatch(
                channel) else None
            return Sent(ts if isinstance(ts, str) else None, detail)
        if error in DEAD_USER:
            return Rejected(reason)
        if error in MAYBE_POSTED:
            return Unknown(f"{reason}: Slack may have posted it")
        if error in OURS or error.startswith("restricted_action"):
            return Failed(f"{reason}: check the channel's bot_token and the Slack app's setup")
        return Failed(reason, wait)
    return Failed(reason, wait)  # 429 (Retry-After), 5xx, and anything else that is not Slack's


def build(name: str, settings: SlackSettings, limits: Limits) -> SlackChannel:
    return SlackChannel(name, settings, limits.timeout_sec, limits.max_connections,
                        limits.egress)

