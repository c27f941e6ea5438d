"""The postmark channel: email through Postmark's email API, one POST /email per step, on a
message stream.

render freezes the whole JSON body: sender, recipient, subject, text and html bodies, reply-to,
the List-Unsubscribe headers of mail that is not transactional (which goes through the broadcast
stream when one is set), the kind as its Tag, and the step key as the Metadata field notifyd_key,
which Postmark's webhooks hand back (receipts/postmark.py reads it) even when the send's answer
was lost. send posts the same bytes each time. Postmark states that it has no idempotency key: a
retry after an Unknown may send the email twice. The MessageID Postmark answers is recorded as
the provider_ref, which is every webhook record's MessageID.

Wire facts relied on (checked with the search tool):
- POST https://api.postmarkapp.com/email, headers X-Postmark-Server-Token, Accept and
  Content-Type application/json; body {From, To, Subject, TextBody, HtmlBody, ReplyTo, Headers
  [{Name, Value}], Tag, Metadata {name: value}, MessageStream}; 200 answers {To, SubmittedAt,
  MessageID, ErrorCode: 0, Message: "OK"}:
  https://postmarkapp.com/developer/api/email-api, https://postmarkapp.com/message-streams.
- Errors: 401 a missing or wrong token (ErrorCode 10); 422 with ErrorCode: 300 invalid email
  request (an illegal To is "Error parsing 'To': Illegal email address ..."), 400/401 sender
  signature not found or not confirmed, 405 not allowed to send, 406 inactive recipient (a hard
  bounce, a spam complaint or a manual suppression: suppressed at Postmark), 412 account pending,
  413 account may not send; 429 rate limit; 500 and 503:
  https://postmarkapp.com/developer/api/overview#error-codes,
  https://postmarkapp.com/support/article/1180-what-does-errorcode-300-mean.

Outcomes: 2xx with ErrorCode 0 Sent(MessageID). ErrorCode 406, or 300 about the To address:
Rejected (the address is dead or suppressed at Postmark; the message is read, never recorded).
401 and ErrorCode 10 Failed (our token). 429 and 5xx Failed with Retry-After. Every other answer
Failed: our sender, account, stream or request. Timeouts and connections lost after sending
Unknown; refused connections Failed. Reasons carry ErrorCode, never the message.
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
from notifyd.channels.http import parse_json, parse_retry_after, post
from notifyd.channels.mailapi import KEY_NAME, ApiChannel, ascii_headers, blames, email_of, kind_tag
from notifyd.channels.types.postmark import TYPE as TYPE
from notifyd.channels.types.postmark import PostmarkSettings

TAG_RE = re.compile(r"^[^\x00-\x1f\x7f]{1,1000}$")
BAD_TO_RE = re.compile(r"(?:parsing|invalid) '?to'?(?:\W|$)", re.IGNORECASE)
INACTIVE_RECIPIENT = 406
INVALID_REQUEST = 300
BAD_TOKEN = 10
OURS = {
    400: "the sender signature was not found",
    401: "the sender signature is not confirmed",
    405: "the account may not send (credits)",
    412: "the account is pending approval",
    413: "the account may not send",
}


class PostmarkChannel(ApiChannel):
    def __init__(self, name: str, settings: PostmarkSettings, timeout_sec: float,
                 max_connections: int = 100, egress: Egress = DIRECT) -> None:
        super().__init__(name, settings.base_url.rstrip("/") + "/email", timeout_sec,
                         max_connections, egress)
        self.settings = settings

    def render(self, step: RenderInput) -> Rendered:
        email = email_of(step)
        s = self.settings
        stream = s.message_stream
        if not step.transactional and s.broadcast_stream:
            stream = s.broadcast_stream
        body: dict[str, Any] = {
            "From": s.from_address, "To": email.to, "Subject": email.subject,
            "Metadata": {KEY_NAME: f"{step.notification_id}:{step.step_no}"},
            "MessageStream": stream}
        if email.text:
            body["TextBody"] = email.text
        if email.html:
            body["HtmlBody"] = email.html
        if s.reply_to:
            body["ReplyTo"] = s.reply_to
        if email.headers:
            body["Headers"] = [{"Name": n, "Value": v}
                               for n, v in ascii_headers(email.headers).items()]
        if kind_tag(step.kind, TAG_RE):
            body["Tag"] = step.kind
        return Rendered(email.to, body)

    async def send(self, message: Message) -> Outcome:
        body = json.dumps(message.payload, sort_keys=True).encode()
        headers = {"X-Postmark-Server-Token": self.settings.server_token,
                   "Accept": "application/json", "Content-Type": "application/json"}
        return await post(self.http, self.endpoint, body, headers, classify, "Postmark")


def error_code(data: object) -> int | None:
    code = data.get("ErrorCode") if isinstance(data, dict) else None
    return code if isinstance(code, int) and not isinstance(code, bool) else None


def classify(status: int, headers: Mapping[str, str], body: bytes) -> Outcome:
    data = parse_json(body)
    code = error_code(data)
    if 200 <= status < 300 and not code:
        ref = data.get("MessageID") if isinstance(data, dict) else None
        return Sent(ref if isinstance(ref, str) and ref else None)
    reason = f"HTTP {status}" + (f" Postmark {code}" if code is not None else "")
    message = data.get("Message") if isinstance(data, dict) else None
    if status == 401 or code == BAD_TOKEN:
        return Failed(f"{reason}: Postmark refused our server token")
    if status == 429 or status >= 500:
        return Failed(reason, parse_retry_after(headers.get("Retry-After")))
    if code == INACTIVE_RECIPIENT:
        return Rejected(f"{reason}: Postmark holds the recipient inactive (a bounce, a "
                        "complaint or a suppression)")
    if code == INVALID_REQUEST and blames(message, BAD_TO_RE):
        return Rejected(f"{reason}: Postmark refused the recipient address")
    if code in OURS:
        return Failed(f"{reason}: {OURS[code]}")
    return Failed(f"{reason}: Postmark refused the request; check the channel's settings")


def build(name: str, settings: PostmarkSettings, limits: Limits) -> PostmarkChannel:
    return PostmarkChannel(name, settings, limits.timeout_sec, limits.max_connections,
                           limits.egress)
