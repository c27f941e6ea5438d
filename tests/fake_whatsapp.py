"""Meta's WhatsApp Cloud API on 127.0.0.1 (POST /{version}/{phone_number_id}/messages), and its
signed webhooks.

The API checks what the Cloud API checks: the bearer token (190 OAuthException, 401, else), the
phone number id (100, 400), a template message (messaging_product whatsapp, type template,
to), the template approved in that language (132001) with as many body parameters as it has
variables (132000), biz_opaque_callback_data at most 512 characters. It answers 200 {contacts,
messages: [{id: wamid...}]}, or Graph API errors {"error": {message, type, code, error_data,
fbtrace_id}} that quote the number as Meta's do: a number not on WhatsApp (NOT_ON_WHATSAPP:
131026), throttling (130429, with HTTP 400 as Meta sends it), an outage (131000 with 500), or
what a test sets. Webhooks are signed as Meta documents it: X-Hub-Signature-256 = sha256= and
the hex HMAC-SHA256 of the body under the app secret, computed here with hmac.

Sources: https://developers.facebook.com/docs/whatsapp/cloud-api/reference/messages,
.../cloud-api/support/error-codes, .../cloud-api/webhooks/components,
https://developers.facebook.com/docs/graph-api/webhooks/getting-started.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web
from channel_support import AppPeer

NOT_ON_WHATSAPP = "+15550000026"


def graph_error(status: int, code: int, message: str, details: str = "",
                kind: str = "OAuthException") -> web.Response:
    body: dict[str, Any] = {"message": message, "type": kind, "code": code,
                            "fbtrace_id": "A" + base64.b64encode(os.urandom(9)).decode()}
    if details:
        body["error_data"] = {"messaging_product": "whatsapp", "details": details}
    return web.json_response({"error": body}, status=status)


@dataclass
class FakeWhatsApp(AppPeer):
    phone_number_id: str
    token: str
    templates: dict[str, tuple[tuple[str, ...], int]]  # name -> (languages, body variables)
    sent: list[dict[str, Any]] = field(default_factory=list)  # each accepted body
    wamids: list[str] = field(default_factory=list)
    canned: web.Response | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def _messages(self, request: web.Request) -> web.StreamResponse:
        if request.headers.get("Authorization") != f"Bearer {self.token}":
            return graph_error(401, 190, "Error validating access token: Session has expired")
        if request.match_info["phone"] != self.phone_number_id:
            return graph_error(400, 100, "Unsupported post request. Object with ID does not "
                                         "exist", kind="GraphMethodException")
        if self.canned is not None:
            return self.canned
        body = json.loads(await request.read())
        wrong = self._check(body)
        if wrong is not None:
            return wrong
        if body["to"] == NOT_ON_WHATSAPP:
            return graph_error(400, 131026, "Message undeliverable",
                               f"Message failed to send to {body['to']}")
        wamid = "wamid." + base64.b64encode(os.urandom(24)).decode()
        self.sent.append(body)
        self.wamids.append(wamid)
        return web.json_response({"messaging_product": "whatsapp",
                                  "contacts": [{"input": body["to"],
                                                "wa_id": body["to"].removeprefix("+")}],
                                  "messages": [{"id": wamid, "message_status": "accepted"}]})

    def _check(self, body: dict[str, Any]) -> web.Response | None:
        if body.get("messaging_product") != "whatsapp" or body.get("type") != "template":
            return graph_error(400, 100, "Invalid parameter")
        if len(body.get("biz_opaque_callback_data", "")) > 512:
            return graph_error(400, 100, "Invalid parameter", "biz_opaque_callback_data")
        template = body.get("template", {})
        approved = self.templates.get(template.get("name"))
        language = template.get("language", {}).get("code")
        if approved is None or language not in approved[0]:
            return graph_error(404, 132001, "Template name does not exist in the translation",
                               f"template name ({template.get('name')}) does not exist in "
                               f"{language}")
        params = [p for c in template.get("components", []) if c.get("type") == "body"
                  for p in c.get("parameters", [])]
        if len(params) != approved[1] or any(not p.get("text") for p in params):
            return graph_error(400, 132000, "Number of parameters does not match the expected "
                                            "number of params")
        return None

    def routes(self, app: web.Application) -> None:
        app.router.add_post("/{version}/{phone}/messages", self._messages)


def status_body(wamid: str, status: str, recipient: str, key: str | None = None,
                error: int | None = None, timestamp: int = 1_790_000_000) -> bytes:
    """A messages webhook carrying one status, as the Cloud API posts it."""
    item: dict[str, Any] = {"id": wamid, "status": status, "timestamp": str(timestamp),
                            "recipient_id": recipient.removeprefix("+")}
    if key is not None:
        item["biz_opaque_callback_data"] = key
    if status in ("sent", "delivered"):
        item["conversation"] = {"id": "a75d17ad06104c51166f948319b03c6a",
                                "origin": {"type": "utility"}}
        item["pricing"] = {"billable": True, "pricing_model": "PMP", "category": "utility"}
    if error is not None:
        item["errors"] = [{"code": error, "title": "Message undeliverable",
                           "message": "Message undeliverable",
                           "error_data": {"details": f"Message failed to send to {recipient}"}}]
    doc = {"object": "whatsapp_business_account", "entry": [{"id": "102290129340398", "changes": [
        {"value": {"messaging_product": "whatsapp",
                   "metadata": {"display_phone_number": "15550783881",
                                "phone_number_id": "106540352242922"},
                   "statuses": [item]}, "field": "messages"}]}]}
    return json.dumps(doc, separators=(",", ":")).encode()


def signed(body: bytes, app_secret: str) -> dict[str, str]:
    """The headers Meta sends with `body`."""
    digest = hmac.new(app_secret.encode(), body, hashlib.sha256).hexdigest()
    return {"X-Hub-Signature-256": f"sha256={digest}", "Content-Type": "application/json"}
