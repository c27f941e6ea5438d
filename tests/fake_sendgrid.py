"""A local server that speaks SendGrid's v3 Mail Send API (POST /v3/mail/send), for the sendgrid
channel's tests.

It checks what SendGrid checks: the bearer key (401 for an unknown one, 403 for a key without
the Mail Send permission), a JSON body with one personalization, a verified sender (403 field
"from"), content with text/plain before text/html, custom_args whose values are strings, at most
10 categories of at most 255 characters, no reserved headers; a recipient whose local part is not
ASCII is refused as SendGrid refuses an invalid address (400, field
personalizations.0.to.0.email). It answers as SendGrid does: 202 with an empty body and the
message's id in X-Message-Id; errors as {"errors": [{"message", "field", "help"}]}; 429 with
X-RateLimit-Reset while `throttled`; 500 while `down`.
"""

from __future__ import annotations

import base64
import json
import time
import uuid
from dataclasses import dataclass, field
from email.utils import parseaddr
from typing import Any

from aiohttp import web
from fake_api import FakeApi

API_KEY = "SG.c2VuZGdyaWQ.dGVzdC1rZXktZm9yLW5vdGlmeWQtY2hhbm5lbA"
READ_ONLY_KEY = "SG.cmVhZG9ubHk.bm8tbWFpbC1zZW5kLXBlcm1pc3Npb24tMDAwMQ"
SENDER = "alerts@mail.acme.test"
HELP = "http://sendgrid.com/docs/API_Reference/Web_API_v3/Mail/errors.html"
RESERVED = {"x-sg-id", "x-sg-eid", "received", "dkim-signature", "content-type",
            "content-transfer-encoding", "to", "from", "subject", "reply-to", "cc", "bcc"}


def sendgrid_error(status: int, message: str, field_name: str | None = None,
                   headers: dict[str, str] | None = None) -> web.Response:
    return web.json_response({"errors": [{"message": message, "field": field_name,
                                          "help": f"{HELP}#message.{field_name}"
                                          if field_name else None}]},
                             status=status, headers=headers)


@dataclass
class FakeSendgrid(FakeApi):
    verified: set[str] = field(default_factory=lambda: {SENDER})

    def routes(self, app: web.Application) -> None:
        app.router.add_post("/v3/mail/send", self.handle)

    async def answer(self, request: web.Request, body: bytes) -> web.StreamResponse:
        auth = request.headers.get("Authorization", "")
        if auth not in (f"Bearer {API_KEY}", f"Bearer {READ_ONLY_KEY}"):
            return sendgrid_error(401, "The provided authorization grant is invalid, expired, "
                                  "or revoked")
        if auth == f"Bearer {READ_ONLY_KEY}":
            return sendgrid_error(403, "access forbidden")
        if self.down:
            return sendgrid_error(500, "Internal server error")
        if self.throttled:
            return sendgrid_error(429, "too many requests", headers={
                "X-RateLimit-Limit": "600", "X-RateLimit-Remaining": "0",
                "X-RateLimit-Reset": str(int(time.time()) + 2)})
        if request.content_type != "application/json":
            return sendgrid_error(415, "Content-Type should be application/json.")
        try:
            mail = json.loads(body)
        except ValueError:
            return sendgrid_error(400, "Bad Request", None)
        refused = self.validate(mail)
        if refused is not None:
            return refused
        message_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        self.sent[message_id] = mail
        return web.Response(status=202, headers={"X-Message-Id": message_id})

    def validate(self, mail: dict[str, Any]) -> web.Response | None:
        sender = mail.get("from", {}).get("email", "")
        if sender not in self.verified:
            return sendgrid_error(403, "The from address does not match a verified Sender "
                                  "Identity. Mail cannot be sent until this error is "
                                  "resolved.", "from")
        people = mail.get("personalizations", [])
        if len(people) != 1 or len(people[0].get("to", [])) != 1:
            return sendgrid_error(400, "You must have at least one personalization.",
                                  "personalizations")
        to = people[0]["to"][0].get("email", "")
        local, at, domain = to.rpartition("@")
        if not (at and local.isascii() and "." in domain) or parseaddr(to)[1] != to:
            return sendgrid_error(400, "Does not contain a valid address.",
                                  "personalizations.0.to.0.email")
        types = [c.get("type") for c in mail.get("content", [])]
        if not types or ("text/html" in types and types[0] != "text/plain"):
            return sendgrid_error(400, "If present, text/plain and text/html may only be "
                                  "provided once, in that order.", "content")
        if any(not isinstance(v, str) for v in mail.get("custom_args", {}).values()):
            return sendgrid_error(400, "Invalid type. Expected: string.", "custom_args")
        categories = mail.get("categories", [])
        if len(categories) > 10 or any(len(c) > 255 for c in categories):
            return sendgrid_error(400, "Too many categories.", "categories")
        if RESERVED & {h.lower() for h in mail.get("headers", {})}:
            return sendgrid_error(400, "The header is reserved.", "headers")
        return None
