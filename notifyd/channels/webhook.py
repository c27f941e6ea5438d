"""The webhook channel: POST the notification as JSON to a producer's URL, with an Idempotency-Key.

A producer's webhook is not a person's contact: whatever it answers, nothing is disabled for a
user. 2xx is Sent (provider_ref from the body's "id", else the X-Request-Id header). Every other
answer is Failed: retried with backoff (honouring Retry-After), counted by the breaker, and dead
with the reason once the retry budget is spent (notifyd dead-letters, notifyd replay). A refused
connection never left us: Failed. A timeout or a connection lost after the request was written:
Unknown. Reasons keep the status and a short provider error code, never the provider's free text.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
from typing import Any

from notifyd.channels.base import (
    Failed,
    Limits,
    Message,
    Outcome,
    Rendered,
    RenderInput,
    Sent,
    standard_payload,
)
from notifyd.channels.egress import DIRECT, Egress
from notifyd.channels.http import parse_json, parse_retry_after, post, provider_code
from notifyd.channels.types.webhook import TYPE as TYPE
from notifyd.channels.types.webhook import WebhookSettings, signing_key
from notifyd.channels.wire import Client


def sign(keys: list[bytes], msg_id: str, timestamp: int, body: bytes) -> str:
    """webhook-signature: "v1,<base64 HMAC-SHA256 of id.timestamp.body>" per key, space-separated
    (https://www.standardwebhooks.com, the spec's "Signature scheme")."""
    signed = f"{msg_id}.{timestamp}.".encode() + body
    return " ".join("v1," + base64.b64encode(hmac.new(k, signed, hashlib.sha256).digest()
                                             ).decode() for k in keys)


class WebhookChannel:
    def __init__(self, name: str, url: str, timeout_sec: float, max_connections: int = 100,
                 secrets: tuple[str, ...] = (), egress: Egress = DIRECT) -> None:
        self.name = name
        self.url = url
        self.keys = [k for k in map(signing_key, secrets) if k is not None]
        # As many connections as the lanes may send at once: a send must never wait for a
        # pooled connection, or that wait would eat its timeout and end as a false unknown.
        self.http = Client(max_connections, timeout_sec, egress)

    def render(self, step: RenderInput) -> Rendered:
        return Rendered(self.url, standard_payload(step))

    async def send(self, message: Message) -> Outcome:
        body = json.dumps(message.payload, sort_keys=True).encode()
        headers = {"Content-Type": "application/json",
                   "Idempotency-Key": message.idempotency_key}
        if self.keys:  # the id is the step key: the same for every retry of one message
            now = int(time.time())
            headers.update({"webhook-id": message.idempotency_key,
                            "webhook-timestamp": str(now),
                            "webhook-signature": sign(self.keys, message.idempotency_key, now,
                                                      body)})
        return await post(self.http, message.destination, body, headers, classify)

    async def close(self) -> None:
        await self.http.close()


def classify(status: int, headers: Any, body: bytes) -> Outcome:
    data = parse_json(body)
    if 200 <= status < 300:
        ref = data.get("id") if isinstance(data, dict) else None
        return Sent(str(ref) if ref is not None else headers.get("X-Request-Id"))
    reason = f"HTTP {status}{provider_code(data)}"
    if 300 <= status < 400:
        return Failed(f"{reason}: the webhook URL redirects; configure where it leads")
    if status in (401, 403):
        return Failed(f"{reason}: the endpoint refused our credentials")
    if status in (404, 405):
        return Failed(f"{reason}: the endpoint has no such resource; check the channel's url")
    return Failed(reason, parse_retry_after(headers.get("Retry-After")))


def build(name: str, settings: WebhookSettings, limits: Limits) -> WebhookChannel:
    return WebhookChannel(name, settings.url, limits.timeout_sec, limits.max_connections,
                          (settings.secret, settings.previous_secret), limits.egress)

