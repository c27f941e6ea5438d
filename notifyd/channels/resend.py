"""The resend channel: email through Resend's HTTP API, one POST /emails per step.

render freezes the JSON body (from, to, subject, text/html, reply_to, List-Unsubscribe headers);
send adds the step key twice, both derived from Message.idempotency_key alone so a retry sends the
same bytes: as the `Idempotency-Key` header (Resend answers the same key and body with the first
result for 24 h) and as two tags that Resend hands back in its webhooks, so a receipt can be
matched even when the send's answer was lost.

Wire facts relied on (checked with the search tool):
- POST https://api.resend.com/emails, `Authorization: Bearer <key>`, JSON body with from, to
  (string or array), subject, html, text, reply_to, headers (object), tags ([{name, value}]); 200
  answers {"id": ...}: https://resend.com/docs/api-reference/emails/send-email
- Tag names and values: ASCII letters, digits, `_` and `-` only, at most 256 characters
  (resend/resend-python resend/emails/_tag.py).
- Idempotency-Key: 1-256 characters, kept 24 h; same key and same body returns the first answer;
  a changed body under the same key gets 409 `invalid_idempotent_request`, one overlapping an
  attempt still in progress 409 `concurrent_idempotent_requests`:
  https://resend.com/docs/dashboard/emails/idempotency-keys,
  https://resend.com/docs/api-reference/errors
- Error bodies are {"statusCode", "message", "name"}; names and statuses: missing_api_key 401,
  invalid_api_key / validation_error / invalid_from_address 403, validation_error 400/422 (a
  field of the request; "Invalid `to` field..." names the recipient), missing_required_field,
  invalid_parameter, invalid_access 422, rate_limit_exceeded / daily_quota_exceeded /
  monthly_quota_exceeded 429 with `retry-after`, application_error / internal_server_error 500:
  https://resend.com/docs/api-reference/errors, resend/resend-node src/interfaces.ts,
  https://resend.com/docs/api-reference/rate-limit
- One-click unsubscribe: List-Unsubscribe with one HTTPS URI plus
  `List-Unsubscribe-Post: List-Unsubscribe=One-Click` (RFC 8058).

Outcomes: 2xx Sent(id). A 400/422 `validation_error` whose message names the `to` field Rejected
(the address is dead; render already refused malformed ones, so this is Resend's stricter view).
401/403 Failed (our key or sending domain, never the recipient's fault). 409
`concurrent_idempotent_requests` Failed after a short wait. 409 `invalid_idempotent_request`
Failed, final: Resend already holds another body under this step's key, which only drift in our
own serialisation can cause, so the email most likely went out; a retry would get the same 409 for
24 h and a later one could send it twice; it is our fault, so the contact stays enabled; the step
ends dead and the ladder moves on. 429 and 5xx Failed with
Retry-After. Every other answer Failed: the request or the settings are wrong. Timeouts and
connections lost after sending Unknown; refused connections Failed.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from notifyd.channels.base import (
    Failed,
    Limits,
    Message,
    Outcome,
    Rejected,
    Rendered,
    RenderInput,
    Sent,
)
from notifyd.channels.egress import DIRECT, Egress
from notifyd.channels.http import parse_json, parse_retry_after, post, provider_code
from notifyd.channels.mailapi import blames, email_of
from notifyd.channels.types.resend import TYPE as TYPE
from notifyd.channels.types.resend import ResendSettings
from notifyd.channels.wire import Client

SHORT_RETRY_SEC = 1.0  # an overlapping attempt under the same key: wait for it, then ask again
TAG_VALUE_RE = re.compile(r"^[A-Za-z0-9_-]{1,256}$")
NAMES_RECIPIENT_RE = re.compile(r"\binvalid `?to`? field", re.IGNORECASE)


class ResendChannel:
    def __init__(self, name: str, settings: ResendSettings, timeout_sec: float,
                 max_connections: int = 100, egress: Egress = DIRECT) -> None:
        self.name = name
        self.settings = settings
        self.endpoint = settings.base_url.rstrip("/") + "/emails"
        # As many connections as the lanes may send at once, so no send waits for a pooled one.
        self.http = Client(max_connections, timeout_sec, egress)

    def render(self, step: RenderInput) -> Rendered:
        email = email_of(step)
        payload: dict[str, Any] = {"from": self.settings.from_address, "to": [email.to],
                                   "subject": email.subject}
        if email.text:
            payload["text"] = email.text
        if email.html:
            payload["html"] = email.html
        if self.settings.reply_to:
            payload["reply_to"] = self.settings.reply_to
        if email.headers:
            payload["headers"] = email.headers
        return Rendered(email.to, payload)

    async def send(self, message: Message) -> Outcome:
        tags = key_tags(message.idempotency_key)
        body = json.dumps({**message.payload, **({"tags": tags} if tags else {})},
                          sort_keys=True).encode()
        headers = {"Authorization": f"Bearer {self.settings.api_key}",
                   "Content-Type": "application/json",
                   "Idempotency-Key": message.idempotency_key}
        return await post(self.http, self.endpoint, body, headers, classify, "Resend")

    async def close(self) -> None:
        await self.http.close()


def key_tags(key: str) -> list[dict[str, str]]:
    """The step key "{notification_id}:{step_no}" as Resend tags (":" is not allowed there),
    handed back in Resend's webhooks. Omitted when a part does not fit the tag alphabet: the
    receipt then matches on the email id alone."""
    notification_id, _, step_no = key.rpartition(":")
    if not (TAG_VALUE_RE.fullmatch(notification_id) and TAG_VALUE_RE.fullmatch(step_no)):
        return []
    return [{"name": "notifyd_notification", "value": notification_id},
            {"name": "notifyd_step", "value": step_no}]


def classify(status: int, headers: Mapping[str, str], body: bytes) -> Outcome:
    data = parse_json(body)
    if 200 <= status < 300:
        ref = data.get("id") if isinstance(data, dict) else None
        return Sent(str(ref) if ref is not None else None)
    name = data.get("name") if isinstance(data, dict) else None
    reason = f"HTTP {status}{provider_code(data, ('name',))}"
    retry_after = parse_retry_after(headers.get("Retry-After"))
    if status in (401, 403):
        return Failed(f"{reason}: Resend refused our API key or sending domain")
    if status == 409:
        return _conflict(name, reason, retry_after)
    if status == 429 or status >= 500:
        return Failed(reason, retry_after)
    message = data.get("message") if isinstance(data, dict) else None
    if status in (400, 422) and name == "validation_error" and blames(message, NAMES_RECIPIENT_RE):
        return Rejected(f"{reason}: Resend refused the recipient address")
    return Failed(f"{reason}: Resend refused the request; check the channel's settings")


def _conflict(name: object, reason: str, retry_after: float | None) -> Failed:
    if name == "concurrent_idempotent_requests":
        return Failed(f"{reason}: an earlier attempt under this key is still in progress",
                      retry_after or SHORT_RETRY_SEC)
    if name == "invalid_idempotent_request":
        return Failed(f"{reason}: Resend holds a different request under this key", final=True)
    return Failed(reason, retry_after)


def build(name: str, settings: ResendSettings, limits: Limits) -> ResendChannel:
    return ResendChannel(name, settings, limits.timeout_sec, limits.max_connections,
                         limits.egress)

