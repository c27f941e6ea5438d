"""A local server that speaks Twilio's Messages resource (POST
/2010-04-01/Accounts/{AccountSid}/Messages.json), moved here from tests/unit/test_channel_twilio.py so
that the end-to-end tests can run it too.

It checks what Twilio checks (basic auth with the Auth Token or an API key, the account in the
path, a form body, To in E.164, Body, exactly one sender) and answers the recipients of Twilio's
magic test numbers as Twilio's test credentials do (+15005550001 invalid, +15005550002
unroutable, +15005550003 no geo permission, +15005550004 opted out, +15005550009 not a mobile:
https://www.twilio.com/docs/messaging/tutorials/automate-testing), with Twilio's
{code, message, more_info, status} error bodies, messages that quote the number included.
"""

from __future__ import annotations

import asyncio
import base64
import uuid
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl

from aiohttp import web

ACCOUNT = "AC" + "3f" * 16
TOKEN = "9c1e5a7b3d2f4e6a8b0c1d2e3f4a5b6c"
API_KEY = "SK" + "a1" * 16
API_SECRET = "kS3cr3tV4lu3xyzkS3cr3tV4lu3xyz00"

MAGIC = {  # Twilio's magic To numbers for test credentials -> (code, message)
    "+15005550001": (21211, "The 'To' number {to} is not a valid phone number."),
    "+15005550002": (21612, "The 'To' phone number: {to}, is not currently reachable using "
                            "the 'From' phone number: {frm} via SMS."),
    "+15005550003": (21408, "Permission to send an SMS has not been enabled for the region "
                            "indicated by the 'To' number: {to}."),
    "+15005550004": (21610, "Attempt to send to unsubscribed recipient"),
    "+15005550009": (21614, "'To' number {to} is not a valid mobile number"),
}


def twilio_error(status: int, code: int, message: str,
                 headers: dict[str, str] | None = None) -> web.Response:
    return web.json_response({"code": code, "message": message,
                              "more_info": f"https://www.twilio.com/docs/errors/{code}",
                              "status": status}, status=status, headers=headers)


@dataclass
class Seen:
    headers: dict[str, str]
    body: bytes
    path: str

    @property
    def form(self) -> dict[str, str]:
        return dict(parse_qsl(self.body.decode(), strict_parsing=True))


@dataclass
class FakeTwilio:
    """POST /2010-04-01/Accounts/{sid}/Messages.json as Twilio answers it."""

    seen: list[Seen] = field(default_factory=list)
    created: dict[str, dict[str, str]] = field(default_factory=dict)  # sid -> the form
    canned: web.Response | None = None
    gate: asyncio.Event | None = None
    drop: bool = False
    port: int = 0

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def handle(self, request: web.Request) -> web.StreamResponse:
        body = await request.read()
        self.seen.append(Seen(dict(request.headers), body, request.path))
        if self.gate is not None:
            await self.gate.wait()
        if self.drop:
            assert request.transport is not None
            request.transport.abort()
            raise asyncio.CancelledError
        if self.canned is not None:
            return self.canned
        return self.answer(request, body)

    def answer(self, request: web.Request, body: bytes) -> web.Response:
        account = request.match_info["account"]
        if not authenticated(request.headers.get("Authorization", ""), account):
            return twilio_error(401, 20003, "Authenticate")
        if request.content_type != "application/x-www-form-urlencoded":
            return twilio_error(400, 20422, "Invalid Parameter")
        form = dict(parse_qsl(body.decode(), strict_parsing=True))
        to, frm = form.get("To", ""), form.get("From", "")
        if not to:
            return twilio_error(400, 21604, "A 'To' phone number is required.")
        if not form.get("Body"):
            return twilio_error(400, 21602, "Message body is required.")
        if bool(frm) == bool(form.get("MessagingServiceSid")):
            return twilio_error(400, 21603, "A 'From' or 'MessagingServiceSid' parameter is "
                                "required to send a message.")
        if to in MAGIC:
            code, message = MAGIC[to]
            return twilio_error(400, code, message.format(to=to, frm=frm))
        sid = "SM" + uuid.uuid4().hex
        self.created[sid] = form
        return web.json_response(message_resource(account, sid, form), status=201)


def authenticated(header: str, account: str) -> bool:
    if not header.startswith("Basic "):
        return False
    user, _, password = base64.b64decode(header[6:]).decode().partition(":")
    return account == ACCOUNT and (user, password) in ((ACCOUNT, TOKEN), (API_KEY, API_SECRET))


def message_resource(account: str, sid: str, form: dict[str, str]) -> dict[str, Any]:
    """The 201 body of a created Message, as Twilio returns it."""
    service = form.get("MessagingServiceSid")
    n = len(form["Body"])  # GSM-7: 160 characters alone, 153 a part once concatenated
    segments = 0 if service else 1 if n <= 160 else -(-n // 153)
    uri = f"/2010-04-01/Accounts/{account}/Messages/{sid}"
    return {
        "account_sid": account, "api_version": "2010-04-01", "body": form["Body"],
        "date_created": "Thu, 24 Aug 2026 05:01:45 +0000", "date_sent": None,
        "date_updated": "Thu, 24 Aug 2026 05:01:45 +0000", "direction": "outbound-api",
        "error_code": None, "error_message": None, "from": form.get("From"),
        "messaging_service_sid": service, "num_media": "0", "num_segments": str(segments),
        "price": None, "price_unit": "USD", "sid": sid,
        "status": "accepted" if service else "queued",
        "subresource_uris": {"media": f"{uri}/Media.json"}, "to": form["To"],
        "uri": f"{uri}.json"}


def twilio_app(fake: FakeTwilio) -> web.Application:
    """The fake's routes, for a runner on whichever event loop serves it."""
    app = web.Application()
    app.router.add_post("/2010-04-01/Accounts/{account}/Messages.json", fake.handle)
    return app
