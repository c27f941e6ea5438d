"""Mailgun's webhooks: verify the signature block inside the JSON body, refuse a reused token, then
one Receipt for the event (web -> receipts -> store).

Wire facts relied on (checked with the search tool):
- The JSON body is {"signature": {"timestamp", "token", "signature"}, "event-data": {...}}; the
  signature is the hex HMAC-SHA256 of timestamp + token (no separator) under the HTTP webhook
  signing key; events of a subaccount also carry `parent-signature`, the same HMAC under the
  parent account's key, so either may match ours:
  https://documentation.mailgun.com/docs/mailgun/user-manual/webhooks/securing-webhooks
- The signature does not cover `event-data`: a captured signature block could carry any event.
  So a token is accepted once: `nonce` names it, and the store keeps it until its timestamp leaves
  the tolerance window (after which the timestamp check refuses it anyway), in the transaction
  that stores the receipt. It is in the database, so a restart forgets nothing, and processes
  sharing the database share it.
- Retries: 200 done; 406 "rejected, do not retry"; anything else is retried after 5, 10, 15 min,
  1, 2 and 4 h: https://documentation.mailgun.com/docs/mailgun/user-manual/webhooks/webhook-retries.
  A retry is reported to carry the original signature block (hookdeck/webhook-skills
  mailgun-webhooks references/verification.md; Mailgun's docs do not say), so with the default
  300 s tolerance a retry arrives stale: the handler should answer 406 to BadSignature and
  BadReceipt, and store before answering 200.
- event-data: `id` (the event's id, the same on a retry), `event` (accepted, delivered, failed,
  opened, clicked, unsubscribed, complained), `timestamp` (epoch seconds, fractional), `recipient`,
  `severity` (failed: permanent or temporary), `reason` (failed: bounce, suppress-bounce,
  suppress-unsubscribe, suppress-complaint, generic, old, espblock, ...), `delivery-status`
  ({code, enhanced-code, message, ...}), `message.headers.message-id` (without angle brackets; the
  Message-ID the message carried, ours when relayed over SMTP), `user-variables` (from `v:` send
  parameters or the X-Mailgun-Variables header):
  https://documentation.mailgun.com/docs/mailgun/user-manual/webhooks/webhook-payloads,
  https://documentation.mailgun.com/docs/mailgun/user-manual/events/event-types.

Mapping: accepted ACCEPTED; delivered DELIVERED; failed/temporary DEFERRED; failed/permanent by
reason: bounce (the recipient's server refused the address; Mailgun lists it as bounced) and
suppress-bounce BOUNCED, suppress-unsubscribe UNSUBSCRIBED, suppress-complaint COMPLAINED, and every
other reason (generic, old = retries ran out, espblock, ...) FAILED: not proven to be the
address's fault; complained COMPLAINED; unsubscribed UNSUBSCRIBED; opened OPENED; clicked and
unknown events are skipped. Legacy form-encoded webhooks are not supported (BadSignature).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
from typing import Any

from notifyd.receipts.base import (
    BadReceipt,
    BadSignature,
    Event,
    Fetch,
    Nonce,
    RawRequest,
    Receipt,
    json_of,
)
from notifyd.receipts.providers.mailgun import NAME, MailgunSettings
from notifyd.receipts.providers.mailgun import PROVIDER as PROVIDER

KEY_VARIABLE = "notifyd_key"  # v:notifyd_key / X-Mailgun-Variables {"notifyd_key": ...}

SIMPLE = {
    "accepted": Event.ACCEPTED,
    "delivered": Event.DELIVERED,
    "complained": Event.COMPLAINED,
    "unsubscribed": Event.UNSUBSCRIBED,
    "opened": Event.OPENED,
}
PERMANENT = {
    "bounce": Event.BOUNCED,
    "delayed-bounce": Event.BOUNCED,
    "suppress-bounce": Event.BOUNCED,
    "suppress-unsubscribe": Event.UNSUBSCRIBED,
    "suppress-complaint": Event.COMPLAINED,
}
TIMESTAMP_RE = re.compile(r"^[0-9]{1,12}$")
TOKEN_RE = re.compile(r"^[\x21-\x7e]{1,256}$")
HEX_RE = re.compile(r"^[0-9a-fA-F]{1,128}$")
ENHANCED_RE = re.compile(r"^[245]\.[0-9]{1,3}\.[0-9]{1,3}$")
WORD_RE = re.compile(r"^[a-z0-9-]{1,40}$")
KEY_RE = re.compile(r"^[A-Za-z0-9_.:-]{1,200}$")


def verify(body: Any, settings: MailgunSettings, now: int) -> None:
    if not settings.signing_key:
        raise BadSignature("mailgun: no signing key configured")
    block = body.get("signature") if isinstance(body, dict) else None
    if not isinstance(block, dict):
        raise BadSignature("mailgun: no signature block")
    timestamp, token = block.get("timestamp"), block.get("token")
    if isinstance(timestamp, int) and not isinstance(timestamp, bool):
        timestamp = str(timestamp)
    if not isinstance(timestamp, str) or not TIMESTAMP_RE.match(timestamp):
        raise BadSignature("mailgun: timestamp missing or not epoch seconds")
    if not isinstance(token, str) or not TOKEN_RE.match(token):
        raise BadSignature("mailgun: token missing or malformed")
    expected = hmac.new(settings.signing_key.encode(), (timestamp + token).encode(),
                        hashlib.sha256).hexdigest().encode()
    offered = [s.encode() for s in (block.get("signature"), block.get("parent-signature"))
               if isinstance(s, str) and HEX_RE.match(s)]
    if not offered:
        raise BadSignature("mailgun: signature missing or not hex")
    matched = [hmac.compare_digest(expected, s) for s in offered]  # every one, in constant time
    if not any(matched):
        raise BadSignature("mailgun: signature does not match")
    signed_at = int(timestamp) * 1000
    window = settings.tolerance_sec * 1000
    if abs(now - signed_at) > window:
        raise BadSignature("mailgun: timestamp outside the tolerance")


def nonce(request: RawRequest, settings: MailgunSettings) -> Nonce:
    """The token of a request parse has verified, kept until its timestamp leaves the window."""
    block = json.loads(request.body)["signature"]
    until = (int(block["timestamp"]) + settings.tolerance_sec) * 1000
    return Nonce(NAME, block["token"], until)


async def parse(request: RawRequest, settings: MailgunSettings, now: int,
                fetch: Fetch) -> list[Receipt]:
    # The signature travels inside the body: without it nothing can be verified.
    body = json_of(request.body, BadSignature, "mailgun: body")
    verify(body, settings, now)
    data = body.get("event-data")
    if not isinstance(data, dict) or not isinstance(data.get("event"), str):
        raise BadReceipt("mailgun: no event-data with an event")
    receipt = to_receipt(data)
    return [receipt] if receipt is not None else []


def classify(data: dict[str, Any]) -> tuple[Event, str | None] | None:
    kind = data["event"]
    if kind in SIMPLE:
        return SIMPLE[kind], None
    if kind != "failed":
        return None  # clicked, stored, rejected, list events, unknown
    reason = data.get("reason")
    reason = reason if isinstance(reason, str) and WORD_RE.match(reason) else None
    detail = join(reason or "failed", status_code(data.get("delivery-status")))
    severity = data.get("severity")
    if severity == "temporary":
        return Event.DEFERRED, detail
    if severity == "permanent" and reason in PERMANENT:
        return PERMANENT[reason], detail
    return Event.FAILED, detail


def to_receipt(data: dict[str, Any]) -> Receipt | None:
    found = classify(data)
    if found is None:
        return None
    event, detail = found
    message_id = clean_message_id(dig(data, "message", "headers", "message-id"))
    return Receipt(
        provider=NAME,
        event_id=event_id(data),
        event=event,
        occurred_at=epoch_ms(data.get("timestamp")),
        provider_ref=message_id,
        key=clean_key(dig(data, "user-variables", KEY_VARIABLE)),
        message_id=message_id,
        address=clean_address(data.get("recipient")),
        channel_type="email",
        detail=detail,
    )


def dig(data: Any, *path: str) -> Any:
    for name in path:
        if not isinstance(data, dict):
            return None
        data = data.get(name)
    return data


def event_id(data: dict[str, Any]) -> str:
    value = data.get("id")
    if isinstance(value, str) and value.strip():
        return value.strip()
    canonical = json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return "sha256:" + hashlib.sha256(canonical.encode()).hexdigest()[:32]


def status_code(status: Any) -> str | None:
    """The enhanced status code (5.1.1), else the reply code (550, or Mailgun's own 605): never
    the server's text, which echoes addresses."""
    if not isinstance(status, dict):
        return None
    enhanced = status.get("enhanced-code")
    if isinstance(enhanced, str) and ENHANCED_RE.match(enhanced):
        return enhanced
    code = status.get("code")
    if isinstance(code, int) and not isinstance(code, bool) and 100 <= code <= 999:
        return str(code)
    return None


def join(label: str, code: str | None) -> str:
    return f"{label}:{code}" if code else label


def epoch_ms(value: Any) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return int(value * 1000) if 0 < value < 1e11 else None


def clean_key(value: Any) -> str | None:
    return value if isinstance(value, str) and KEY_RE.match(value) else None


def clean_message_id(value: Any) -> str | None:
    if not isinstance(value, str):
        return None
    text = value.strip().strip("<>").strip()
    return text if 0 < len(text) <= 998 and not any(c.isspace() for c in text) else None


def clean_address(value: Any) -> str | None:
    if not isinstance(value, str):
        return None
    text = value.strip()
    return text if "@" in text and len(text) <= 320 else None

