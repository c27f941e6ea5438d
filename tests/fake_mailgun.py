"""A local server that speaks Mailgun's messages API (POST /v3/{domain}/messages), for the
mailgun channel's tests; one runs for each region's base.

It checks what Mailgun checks: HTTP basic auth as api:<key> (401, a plain "Forbidden"), a domain
of the account in this region (404 "Domain not found"), the form's from, to, subject and one of
text or html; a recipient whose local part is not ASCII fails its syntax check as Mailgun says
("'to' parameter is not a valid address"). It answers as Mailgun does: 200 {"id": "<...>",
"message": "Queued. Thank you."}; errors as {"message"}; 429 while `throttled`; 503 while
`down`. The h:, o: and v: parameters are kept as sent.
"""

from __future__ import annotations

import base64
import time
import uuid
from dataclasses import dataclass, field
from email.utils import parseaddr

from aiohttp import web
from fake_api import FakeApi

API_KEY = "key-3ax6xnjp29jd6fds4gc373sgvjxteol0"
DOMAIN = "mg.acme.test"


@dataclass
class FakeMailgun(FakeApi):
    domains: set[str] = field(default_factory=lambda: {DOMAIN})

    def routes(self, app: web.Application) -> None:
        app.router.add_post("/v3/{domain}/messages", self.handle)

    async def answer(self, request: web.Request, body: bytes) -> web.StreamResponse:
        expected = "Basic " + base64.b64encode(f"api:{API_KEY}".encode()).decode()
        if request.headers.get("Authorization") != expected:
            return web.Response(status=401, text="Forbidden")
        domain = request.match_info["domain"]
        if domain not in self.domains:
            return web.json_response({"message": f"Domain not found: {domain}"}, status=404)
        if self.down:
            return web.Response(status=503, text="Service Unavailable")
        if self.throttled:
            return web.json_response({"message": "Too many requests"}, status=429,
                                     headers={"Retry-After": "3"})
        form = {k: str(v) for k, v in (await request.post()).items()}
        to = form.get("to", "")
        if not form.get("from"):
            return web.json_response({"message": "from parameter is missing"}, status=400)
        local, at, host = parseaddr(to)[1].rpartition("@")
        if not (at and local.isascii() and "." in host):
            return web.json_response({"message": "'to' parameter is not a valid address. "
                                                 "please check documentation"}, status=400)
        if not form.get("subject"):
            return web.json_response({"message": "subject parameter is missing"}, status=400)
        if not (form.get("text") or form.get("html")):
            return web.json_response({"message": "Need at least one of 'text', 'html' or "
                                                 "'template' parameters specified"}, status=400)
        stamp = time.strftime("%Y%m%d%H%M%S", time.gmtime())
        message_id = f"{stamp}.{uuid.uuid4().hex[:16]}@{domain}"
        self.sent[message_id] = form
        return web.json_response({"id": f"<{message_id}>", "message": "Queued. Thank you."})
