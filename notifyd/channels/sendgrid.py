"""The sendgrid channel: email through SendGrid's v3 Mail Send API, one POST /v3/mail/send per
step.

render freezes the whole JSON body: one personalization to the recipient, the sender, subject,
text and html content, List-Unsubscribe headers for mail that is not transactional, the kind as
its category, and the step key as the custom arg notifyd_key, which SendGrid's Event Webhook
hands back on every event (receipts/sendgrid.py reads it) even when the send's answer was lost.
send posts the same bytes each time. SendGrid takes no idempotency key: a retry after an Unknown
may send the email twice. The X-Message-Id SendGrid answers is recorded as the provider_ref: an
event's sg_message_id starts with it.

Wire facts relied on (checked with the search tool):
- POST https://api.sendgrid.com/v3/mail/send (https://api.eu.sendgrid.com for EU regional
  subusers), `Authorization: Bearer <key>`, JSON {personalizations [{to [{email}],
  custom_args}], from {email, name}, reply_to, subject, content [{type text/plain, value},
  {type text/html, value}] (text/plain first), headers {name: value}, categories [...] (at
  most 10, 255 characters each), custom_args {name: string}}; 202 with an empty body and the
  message's id in X-Message-Id:
  https://www.twilio.com/docs/sendgrid/api-reference/mail-send/mail-send,
  sendgrid/sendgrid-nodejs docs/use-cases/kitchen-sink.md (custom args must be strings).
- Errors are {"errors": [{"message", "field", "help"}]}, 400 for the request's faults: an
  invalid recipient is field personalizations.N.to.N.email, "Does not contain a valid address."
  (https://www.twilio.com/docs/sendgrid/api-reference/mail-send/errors); 401 a key that is
  invalid, expired or revoked; 403 a key without the Mail Send permission or a sender that is no
  verified Sender Identity; 413 too large; 429 with X-RateLimit-Reset (epoch seconds); 5xx
  (https://support.sendgrid.com/hc/en-us/articles/18322114821403).
- An address on one of SendGrid's suppression lists is accepted and then dropped ("Bounced
  Address", "Unsubscribed Address", ...): that comes back as a receipt, not as the answer.

Outcomes: 2xx Sent(X-Message-Id). A 400 about the recipient's address field Rejected. 401 and
403 Failed (our key or sender). 429 and 5xx Failed with Retry-After (or X-RateLimit-Reset). Every
other answer Failed. Timeouts and connections lost after sending Unknown; refused connections
Failed. Reasons carry the error's field, never its message.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Mapping
from email.utils import parseaddr
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
from notifyd.channels.mailapi import KEY_NAME, ApiChannel, email_of, kind_tag
from notifyd.channels.types.sendgrid import TYPE as TYPE
from notifyd.channels.types.sendgrid import SendgridSettings

CATEGORY_RE = re.compile(r"^[\x20-\x7e]{1,255}$")
RECIPIENT_FIELD_RE = re.compile(r"^personalizations\.\d+\.to(?:\.\d+(?:\.email)?)?$")
MESSAGE_ID_RE = re.compile(r"^[A-Za-z0-9_.-]{1,128}$")


class SendgridChannel(ApiChannel):
    def __init__(self, name: str, settings: SendgridSettings, timeout_sec: float,
                 max_connections: int = 100, egress: Egress = DIRECT) -> None:
        super().__init__(name, settings.base_url.rstrip("/") + "/v3/mail/send", timeout_sec,
                         max_connections, egress)
        self.settings = settings

    def render(self, step: RenderInput) -> Rendered:
        email = email_of(step)
        s = self.settings
        key = f"{step.notification_id}:{step.step_no}"
        body: dict[str, Any] = {
            "personalizations": [{"to": [{"email": email.to}]}],
            "from": party(s.from_address), "subject": email.subject,
            "content": [{"type": t, "value": v} for t, v in (("text/plain", email.text),
                                                            ("text/html", email.html)) if v],
            "custom_args": {KEY_NAME: key}}
        if s.reply_to:
            body["reply_to"] = party(s.reply_to)
        if email.headers:
            body["headers"] = email.headers
        if kind_tag(step.kind, CATEGORY_RE):
            body["categories"] = [step.kind]
        return Rendered(email.to, body)

    async def send(self, message: Message) -> Outcome:
        body = json.dumps(message.payload, sort_keys=True).encode()
        headers = {"Authorization": f"Bearer {self.settings.api_key}",
                   "Content-Type": "application/json"}
        return await post(self.http, self.endpoint, body, headers, classify, "SendGrid")


def party(value: str) -> dict[str, str]:
    """A "Name <address>" setting as SendGrid's {email, name}."""
    name, address = parseaddr(value)
    return {"email": address, "name": name} if name else {"email": address}


def first_error(data: object) -> dict[str, Any]:
    errors = data.get("errors") if isinstance(data, dict) else None
    first = errors[0] if isinstance(errors, list) and errors else None
    return first if isinstance(first, dict) else {}


def retry_after(headers: Mapping[str, str]) -> float | None:
    """Retry-After, else X-RateLimit-Reset: the epoch second the limit resets."""
    after = parse_retry_after(headers.get("Retry-After"))
    reset = headers.get("X-RateLimit-Reset", "")
    if after is None and reset.isascii() and reset.isdigit():
        return max(0.0, int(reset) - time.time())
    return after


def classify(status: int, headers: Mapping[str, str], body: bytes) -> Outcome:
    if 200 <= status < 300:
        ref = headers.get("X-Message-Id", "").strip()
        return Sent(ref if MESSAGE_ID_RE.match(ref) else None)
    error = first_error(parse_json(body))
    field = error.get("field")
    reason = f"HTTP {status}{provider_code(error, ('field',))}"
    if status in (401, 403):
        return Failed(f"{reason}: SendGrid refused our API key, its permissions or the sender")
    if status == 429 or status >= 500:
        return Failed(reason, retry_after(headers))
    if status == 400 and isinstance(field, str) and RECIPIENT_FIELD_RE.match(field):
        return Rejected(f"{reason}: SendGrid refused the recipient address")
    return Failed(f"{reason}: SendGrid refused the request; check the channel's settings")


def build(name: str, settings: SendgridSettings, limits: Limits) -> SendgridChannel:
    return SendgridChannel(name, settings, limits.timeout_sec, limits.max_connections,
                           limits.egress)
