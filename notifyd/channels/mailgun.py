"""The mailgun channel: email through Mailgun's messages API, one form-encoded
POST /v3/{domain}/messages per step, to the US or the EU base.

render freezes the form fields: from, to, subject, text, html, h:Reply-To and the List-Unsubscribe
headers (h:), the kind as o:tag, and the step key as the user variable v:notifyd_key, which
Mailgun's webhooks hand back in event-data.user-variables (receipts/mailgun.py reads it) even
when the send's answer was lost. send posts the same bytes each time. Mailgun takes no
idempotency key: a retry after an Unknown may send the email twice. The id Mailgun answers is
the message's Message-ID; without its angle brackets it is recorded as the provider_ref, which is
what an event's message.headers.message-id says.

Wire facts relied on (checked with the search tool):
- POST {base}/v3/{domain_name}/messages, HTTP basic auth api:<key>, parameters from, to, subject,
  text, html, o:tag (ASCII, at most 128 characters, 3 per message), h:<header>, v:<name> (user
  variables); the bases https://api.mailgun.net (US) and https://api.eu.mailgun.net (EU), a
  domain living in one: https://documentation.mailgun.com/docs/mailgun/api-reference/api-overview,
  https://documentation.mailgun.com/docs/mailgun/user-manual/sending-messages/send-http. 200
  answers {"id": "<...@domain>", "message": "Queued. Thank you."}.
- Errors: 400 {"message": ...}, "'to' parameter is not a valid address" for a recipient that
  fails its syntax checks; 401 a wrong key (a plain "Forbidden"); 403 what the account may not
  do (a sandbox domain's unauthorised recipient); 404 a domain not in this region; 429 rate
  limits; 5xx. An address on Mailgun's suppression lists is accepted and then fails
  (suppress-bounce, ...): that comes back as a receipt, not as the answer.

Outcomes: 2xx Sent(id). A 400 whose message says the to parameter is not a valid address
Rejected (the message is read, never recorded: it may quote the address). 401 and 403 Failed
(our key or account). 404 Failed (the domain or region). 429 and 5xx Failed with Retry-After.
Every other answer Failed. Timeouts and connections lost after sending Unknown; refused
connections Failed.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote, urlencode

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
from notifyd.channels.http import basic_auth, parse_json, parse_retry_after, post
from notifyd.channels.mailapi import KEY_NAME, ApiChannel, blames, email_of, kind_tag
from notifyd.channels.types.mailgun import TYPE as TYPE
from notifyd.channels.types.mailgun import MailgunSettings, base_of

TAG_RE = re.compile(r"^[\x20-\x7e]{1,128}$")
BAD_RECIPIENT_RE = re.compile(r"'?to'? parameter is not a valid address", re.IGNORECASE)
ID_RE = re.compile(r"^<?([^<>\s]{1,998})>?$")


class MailgunChannel(ApiChannel):
    def __init__(self, name: str, settings: MailgunSettings, timeout_sec: float,
                 max_connections: int = 100, egress: Egress = DIRECT) -> None:
        endpoint = f"{base_of(settings).rstrip('/')}/v3/{quote(settings.domain, safe='')}/messages"
        super().__init__(name, endpoint, timeout_sec, max_connections, egress)
        self.settings = settings
        self.authorization = basic_auth("api", settings.api_key)

    def render(self, step: RenderInput) -> Rendered:
        email = email_of(step)
        s = self.settings
        fields: dict[str, Any] = {"from": s.from_address, "to": email.to,
                                  "subject": email.subject,
                                  f"v:{KEY_NAME}": f"{step.notification_id}:{step.step_no}"}
        if email.text:
            fields["text"] = email.text
        if email.html:
            fields["html"] = email.html
        if s.reply_to:
            fields["h:Reply-To"] = s.reply_to
        fields |= {f"h:{n}": v for n, v in email.headers.items()}
        if kind_tag(step.kind, TAG_RE):
            fields["o:tag"] = step.kind
        return Rendered(email.to, fields)

    async def send(self, message: Message) -> Outcome:
        body = urlencode(sorted((k, str(v)) for k, v in message.payload.items())).encode()
        headers = {"Authorization": self.authorization, "Accept": "application/json",
                   "Content-Type": "application/x-www-form-urlencoded"}
        return await post(self.http, self.endpoint, body, headers, classify, "Mailgun")


def classify(status: int, headers: Mapping[str, str], body: bytes) -> Outcome:
    data = parse_json(body)
    if 200 <= status < 300:
        found = data.get("id") if isinstance(data, dict) else None
        m = ID_RE.match(found.strip()) if isinstance(found, str) else None
        return Sent(m.group(1) if m else None)
    reason = f"HTTP {status}"
    if status in (401, 403):
        return Failed(f"{reason}: Mailgun refused our API key, or the account may not send "
                      "this")
    if status == 404:
        return Failed(f"{reason}: Mailgun has no such domain in this region; check domain and "
                      "region")
    if status == 429 or status >= 500:
        return Failed(reason, parse_retry_after(headers.get("Retry-After")))
    message = data.get("message") if isinstance(data, dict) else None
    if status == 400 and blames(message, BAD_RECIPIENT_RE):
        return Rejected(f"{reason}: Mailgun refused the recipient address")
    return Failed(f"{reason}: Mailgun refused the request; check the channel's settings")


def build(name: str, settings: MailgunSettings, limits: Limits) -> MailgunChannel:
    return MailgunChannel(name, settings, limits.timeout_sec, limits.max_connections,
                          limits.egress)
