"""The vonage channel: SMS through Vonage's Messages API, one JSON POST per step, authenticated
with the application's JWT.

Why the Messages API and not the SMS API: its status webhooks are signed JWTs (HS256 with the
account's signature secret) whose payload_hash claim covers the raw body, with iat to judge
their age, so a receipt is verified over the exact bytes as every other provider's here; the SMS
API's delivery receipts are form or query parameters, signed only when the account turns
signatures on, with an MD5 or HMAC over sorted parameters. The Messages API also carries our
step key both ways (client_ref, up to 100 characters, comes back in every status) and sends
each message's statuses where webhook_url says. Basic auth (key and secret) cannot have webhooks
on the Messages API, so the application's JWT it is.

render freezes {message_type: text, channel: sms, to, from, text, ttl?}; send adds client_ref =
the step key and webhook_url = server.public_url + /v1/webhooks/vonage (when public_url is set
and [webhooks.vonage] is on: sender.adapter_limits hands the URL over only then), so a retry
sends the same bytes and a status finds its step even when the send's answer (and the
message_uuid with it) was lost. The Messages API takes no idempotency key: a retry after an
Unknown may send the SMS twice.

Wire facts relied on (checked with the search tool):
- POST {base}/v1/messages, Authorization: Bearer <JWT>, a JSON body; 202 {"message_uuid"}:
  https://developer.vonage.com/en/api/messages ; the Vonage Python SDK's Sms model
  (Vonage/vonage-python-sdk messages/src/vonage_messages/models/sms.py, base_message.py): to
  and from in E.164 without a leading +, text at most 1000 characters, ttl in seconds (Vonage
  recommends at least 30 minutes), client_ref at most 100 characters, webhook_url.
- The application JWT: RS256 with the application's private key, claims application_id, iat,
  jti, exp (the SDK's JwtClient gives it 15 minutes): Vonage/vonage-python-sdk
  jwt/src/vonage_jwt/jwt.py; https://developer.vonage.com/en/getting-started/concepts/authentication
  ("basic authentication does not support webhooks" on Messages).
- Errors are RFC 7807 {type, title, detail, instance, invalid_parameters?}; the code is the
  type's fragment (#1150, #low-balance, #unauthorized): https://developer.vonage.com/en/api-errors
  and .../api-errors/messages (1000 throttled, 1020 invalid params, 1050 number barred, 1120
  illegal sender, 1160 destination not whitelisted, ...). Titles and details may quote the
  number: only the code is kept.

Outcomes: 2xx Sent(message_uuid). Rejected: a 422 whose invalid_parameters names `to`, or a
code of DEAD_NUMBER (the declaration's). Every other answer Failed: 401/403 (our application
or key), 402 (low balance), 404 (base_url), the other 4xx final (our request), 429 and 5xx
retried with Retry-After. Timeouts and connections lost after sending Unknown.
"""

from __future__ import annotations

import json
import re
import time
import uuid
from collections.abc import Callable
from typing import Any

from notifyd.channels import jws
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
)
from notifyd.channels.http import parse_json, parse_retry_after, post
from notifyd.channels.types.vonage import DEAD_NUMBER, VonageSettings, load_key
from notifyd.channels.types.vonage import TYPE as TYPE
from notifyd.channels.wire import Client
from notifyd.core.contacts import E164

WEBHOOK_PATH = "/v1/webhooks/vonage"
MAX_TEXT_CHARS = 1000
TOKEN_LIFE_SEC = 15 * 60  # as Vonage's SDKs make them
TOKEN_REUSE_SEC = 10 * 60  # a token is made again at this age, well before it expires
MIN_TTL_SEC = 1800  # Vonage: keep ttl at its default (72 h) or at least 30 minutes
MAX_TTL_SEC = 72 * 3600
CODE_RE = re.compile(r"[A-Za-z0-9_-]{1,40}")
UUID_RE = re.compile(r"[0-9a-fA-F-]{36}")

# Codes worth a word: (what to do, final). Credentials and balance get fixed and the retries
# go; a sender or destination the account may not use stays refused.
OURS = {"unauthorized": ("check application_id and private_key", False),
        "jwt-expired": ("check this host's clock", False),
        "low-balance": ("the account's balance is low", False),
        "1120": ("the sender is not allowed for this destination", True),
        "1160": ("the destination is not on the account's allowed list", True)}


class AppToken:
    """The application's JWT, made again every TOKEN_REUSE_SEC (a signature per send would be
    a millisecond of CPU each)."""

    def __init__(self, settings: VonageSettings, clock: Callable[[], float]) -> None:
        self.key = load_key(settings.private_key)
        self.application_id = settings.application_id
        self.clock = clock
        self._token, self._made = "", 0.0

    def get(self) -> str:
        now = self.clock()
        if not self._token or not 0 <= now - self._made < TOKEN_REUSE_SEC:
            iat = int(now)
            self._token = jws.rs256(self.key, {"typ": "JWT"}, {
                "application_id": self.application_id, "iat": iat, "exp": iat + TOKEN_LIFE_SEC,
                "jti": str(uuid.uuid4())})
            self._made = now
        return self._token


class VonageChannel:
    def __init__(self, name: str, settings: VonageSettings, limits: Limits,
                 clock: Callable[[], float] = time.time) -> None:
        self.name = name
        self.settings = settings
        try:
            self.token = AppToken(settings, clock)
        except ValueError as e:
            raise ValueError(f"channel {name}: private_key {e}") from None
        self.url = f"{settings.base_url.rstrip('/')}/v1/messages"
        self.callback = limits.public_url.rstrip("/") + WEBHOOK_PATH if limits.public_url else ""
        self.http = Client(limits.max_connections, limits.timeout_sec, limits.egress)

    def __repr__(self) -> str:
        return f"VonageChannel({self.name!r})"

    def render(self, step: RenderInput) -> Rendered:
        number = (step.address or "").strip()
        if not E164.fullmatch(number):
            raise RenderError("address", ValueError("not an E.164 phone number"))
        text = step.content.get("text")
        if not text:
            raise RenderError("text", LookupError("the SMS has no text"))
        if len(text) > MAX_TEXT_CHARS:
            raise RenderError("text", ValueError(f"longer than {MAX_TEXT_CHARS} characters"))
        payload: dict[str, Any] = {"message_type": "text", "channel": "sms", "to": number[1:],
                                   "from": self.settings.from_number.removeprefix("+"),
                                   "text": text}
        left = (step.expires_at - step.now) // 1000
        if step.now > 0 and left < MAX_TTL_SEC:  # an SMS after its step expired is noise
            payload["ttl"] = max(MIN_TTL_SEC, left)
        return Rendered(number, payload)

    async def send(self, message: Message) -> Outcome:
        fields = {**message.payload, "client_ref": message.idempotency_key}
        if self.callback:
            fields["webhook_url"] = self.callback
        body = json.dumps(fields, sort_keys=True, separators=(",", ":"),
                          ensure_ascii=False).encode()
        headers = {"Authorization": f"Bearer {self.token.get()}",
                   "Content-Type": "application/json", "Accept": "application/json"}
        return await post(self.http, self.url, body, headers, classify, "Vonage")

    async def close(self) -> None:
        await self.http.close()


def vonage_code(data: object) -> str:
    """The error's code: the fragment of its `type` URL (1150, low-balance), or ''."""
    kind = data.get("type") if isinstance(data, dict) else None
    code = kind.rpartition("#")[2] if isinstance(kind, str) else ""
    return code if CODE_RE.fullmatch(code) else ""


def names_to(data: object) -> bool:
    """Whether a 422's invalid_parameters names the `to` number."""
    params = data.get("invalid_parameters") if isinstance(data, dict) else None
    return isinstance(params, list) and any(
        isinstance(p, dict) and p.get("name") == "to" for p in params)


def classify(status: int, headers: Any, body: bytes) -> Outcome:
    data = parse_json(body)
    if 200 <= status < 300:
        ref = data.get("message_uuid") if isinstance(data, dict) else None
        return Sent(ref if isinstance(ref, str) and UUID_RE.fullmatch(ref) else None)
    code = vonage_code(data)
    reason = f"HTTP {status}" + (f" Vonage {code}" if code else "")
    if code in DEAD_NUMBER:
        return Rejected(f"{reason}: {DEAD_NUMBER[code]}")
    if status == 422 and names_to(data):
        return Rejected(f"{reason}: not a valid phone number")
    if status == 429 or status >= 500:
        return Failed(reason, parse_retry_after(headers.get("Retry-After")))
    if code in OURS:
        what, final = OURS[code]
        return Failed(f"{reason}: {what}", final=final)
    if status in (401, 403):
        return Failed(f"{reason}: Vonage refused our application token; check application_id "
                      "and private_key")
    if status in (402, 404) or 300 <= status < 400:
        return Failed(f"{reason}: check the account and base_url")
    return Failed(f"{reason}: Vonage refused the request", final=True)


def build(name: str, settings: VonageSettings, limits: Limits) -> VonageChannel:
    return VonageChannel(name, settings, limits)
