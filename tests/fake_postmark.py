"""A local server that speaks Postmark's email API (POST /email), for the postmark channel's
tests.

It checks what Postmark checks: the X-Postmark-Server-Token (401, ErrorCode 10), JSON in and
out, a From that is a sender signature (ErrorCode 400), a message stream of the server
(ErrorCode 1235), a To it can parse (ErrorCode 300, "Error parsing 'To'", for a local part that
is not ASCII), a recipient not marked inactive (ErrorCode 406, `inactive`), a text or html body,
Headers as [{Name, Value}], Metadata of at most 10 fields (names of at most 20 characters, values
of at most 80). It answers as Postmark does: 200 {To, SubmittedAt, MessageID, ErrorCode 0,
Message "OK"}; errors 422 {ErrorCode, Message}; 429 while `throttled`; 503 ErrorCode 100
(maintenance) while `down`.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from email.utils import parseaddr
from typing import Any

from aiohttp import web
from fake_api import FakeApi

TOKEN = "3c4f8d2e-8a1b-4c6d-9e0f-postmark00001"
SENDER = "alerts@mail.acme.test"
STREAMS = {"outbound", "notices-broadcast"}


def postmark_error(status: int, code: int, message: str) -> web.Response:
    return web.json_response({"ErrorCode": code, "Message": message}, status=status)


@dataclass
class FakePostmark(FakeApi):
    inactive: set[str] = field(default_factory=set)
    streams: set[str] = field(default_factory=lambda: set(STREAMS))

    def routes(self, app: web.Application) -> None:
        app.router.add_post("/email", self.handle)

    async def answer(self, request: web.Request, body: bytes) -> web.StreamResponse:
        if request.headers.get("X-Postmark-Server-Token") != TOKEN:
            return postmark_error(401, 10, "The Server Token you provided in the "
                                  "X-Postmark-Server-Token request header was invalid. Please "
                                  "verify that you are using a valid token.")
        if self.down:
            return postmark_error(503, 100, "Postmark is down for maintenance.")
        if self.throttled:
            return postmark_error(429, 429, "Rate limit exceeded.")
        if request.content_type != "application/json" or \
                request.headers.get("Accept") != "application/json":
            return postmark_error(422, 409, "JSON required.")
        try:
            mail = json.loads(body)
        except ValueError:
            return postmark_error(422, 402, "Invalid JSON.")
        refused = self.validate(mail)
        if refused is not None:
            return refused
        message_id = str(uuid.uuid4())
        self.sent[message_id] = mail
        return web.json_response({"To": mail["To"],
                                  "SubmittedAt": datetime.now(UTC).isoformat(),
                                  "MessageID": message_id, "ErrorCode": 0, "Message": "OK"})

    def validate(self, mail: dict[str, Any]) -> web.Response | None:
        sender = parseaddr(mail.get("From", ""))[1]
        if sender != SENDER:
            return postmark_error(422, 400, f"The 'From' address you supplied ({sender}) is not "
                                  "a Sender Signature on your account.")
        if mail.get("MessageStream", "outbound") not in self.streams:
            return postmark_error(422, 1235, "The message stream for the provided 'ID' was "
                                  "not found.")
        to = mail.get("To", "")
        local, at, domain = to.rpartition("@")
        if not (at and local.isascii() and "." in domain):
            return postmark_error(422, 300, f"Error parsing 'To': Illegal email address '{to}'. "
                                  "It must contain the '@' symbol.")
        if to in self.inactive:
            return postmark_error(422, 406, "You tried to send to recipient(s) that have been "
                                  f"marked as inactive. Found inactive addresses: {to}. Inactive "
                                  "recipients are ones that have generated a hard bounce, a spam "
                                  "complaint, or a manual suppression.")
        if not (mail.get("TextBody") or mail.get("HtmlBody")):
            return postmark_error(422, 300, "Provide either email TextBody or HtmlBody or both.")
        metadata = mail.get("Metadata", {})
        if len(metadata) > 10 or any(len(k) > 20 or len(str(v)) > 80
                                     for k, v in metadata.items()):
            return postmark_error(422, 300, "Invalid metadata.")
        if any(set(h) != {"Name", "Value"} for h in mail.get("Headers", [])):
            return postmark_error(422, 300, "Invalid 'Headers'.")
        return None
