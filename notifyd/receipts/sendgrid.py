"""SendGrid's Event Webhook: verify the ECDSA signature over the raw batch, then one Receipt per
event (web -> receipts -> store).

Wire facts relied on (checked with the search tool):
- Signed Event Webhook: headers `X-Twilio-Email-Event-Webhook-Signature` (base64 of a DER ECDSA
  signature) and `X-Twilio-Email-Event-Webhook-Timestamp`; the signed bytes are the timestamp
  followed by the raw body; ECDSA P-256 with SHA-256; the verification key is the base64 DER
  SubjectPublicKeyInfo shown under Mail Settings:
  https://www.twilio.com/docs/sendgrid/for-developers/tracking-events/getting-started-event-webhook-security-features,
  sendgrid/sendgrid-python sendgrid/helpers/eventwebhook/__init__.py (which wraps the key in PEM
  armour and verifies `(timestamp + payload)` with ec.ECDSA(SHA256)).
- SendGrid documents no timestamp tolerance: we allow `tolerance_sec` (300 s) both ways.
- The body is a JSON array of events (separated by CRLF on the wire): verify over the exact bytes.
  Each event has `event`, `email`, `timestamp` (epoch seconds), `sg_event_id` (for dedupe; SendGrid
  warns duplicates happen), `sg_message_id` (its prefix up to the first "." is the X-Message-Id the
  send returned), `smtp-id` (the Message-ID, ours when relayed over SMTP), custom args at the top
  level; bounce has `type` "bounce" or "blocked" and `status` (an enhanced code); dropped has a
  `reason` ("Bounced Address", "Unsubscribed Address", "Spam Reporting Address", "Invalid",
  "Spam Content", "Invalid SMTPAPI header"); open may carry `sg_machine_open` (Apple Mail Privacy
  Protection's prefetch): https://www.twilio.com/docs/sendgrid/for-developers/tracking-events/event,
  https://docs.sendgrid.com/glossary/drops.

Mapping: processed ACCEPTED; delivered DELIVERED; deferred DEFERRED; bounce/bounce BOUNCED;
bounce/blocked (and any other bounce type) FAILED; dropped FAILED, except a drop because the
address is already on one of SendGrid's suppression lists: "Bounced Address" and "Invalid" BOUNCED,
"Unsubscribed Address" UNSUBSCRIBED, "Spam Reporting Address" COMPLAINED; spamreport COMPLAINED;
unsubscribe and group_unsubscribe UNSUBSCRIBED; open OPENED unless it is a machine open (not the
person); click, group_resubscribe, account events and unknown ones are skipped.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import re
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec

from notifyd.receipts.base import (
    BadReceipt,
    BadSignature,
    Event,
    Fetch,
    RawRequest,
    Receipt,
    json_of,
)
from notifyd.receipts.providers.sendgrid import NAME, SendgridSettings, load_key
from notifyd.receipts.providers.sendgrid import PROVIDER as PROVIDER

SIGNATURE_HEADER = "X-Twilio-Email-Event-Webhook-Signature"
TIMESTAMP_HEADER = "X-Twilio-Email-Event-Webhook-Timestamp"
MAX_SIGNATURE_CHARS = 200  # a DER P-256 signature is at most 72 bytes: 96 base64 characters
KEY_ARG = "notifyd_key"  # the custom arg (custom_args / X-SMTPAPI unique_args) holding the step key

SIMPLE = {
    "processed": Event.ACCEPTED,
    "delivered": Event.DELIVERED,
    "deferred": Event.DEFERRED,
    "spamreport": Event.COMPLAINED,
    "unsubscribe": Event.UNSUBSCRIBED,
    "group_unsubscribe": Event.UNSUBSCRIBED,
}
# Drops because the address is already suppressed at SendGrid: the address's fault, as a bounce,
# complaint or unsubscribe of its own would have been (SendGrid's glossary, "Drops").
SUPPRESSED_DROPS = {
    "bounced address": Event.BOUNCED,
    "invalid": Event.BOUNCED,  # on the Invalid Emails list: malformed or no such domain
    "unsubscribed address": Event.UNSUBSCRIBED,
    "spam reporting address": Event.COMPLAINED,
}
TIMESTAMP_RE = re.compile(r"^[0-9]{1,12}$")
ENHANCED_RE = re.compile(r"^[245]\.[0-9]{1,3}\.[0-9]{1,3}$")
SMTP_CODE_RE = re.compile(r"^([245][0-9]{2})\b")
CODE_WORDS_RE = re.compile(r"^[A-Za-z0-9 ._-]{1,40}$")  # SendGrid's own short reason phrases
KEY_RE = re.compile(r"^[A-Za-z0-9_.:-]{1,200}$")


def verify(request: RawRequest, settings: SendgridSettings, now: int) -> None:
    key = load_key(settings.public_key) if settings.public_key else None
    if key is None:
        raise BadSignature("sendgrid: no usable public key configured")
    signature = request.headers.get(SIGNATURE_HEADER)
    timestamp = request.headers.get(TIMESTAMP_HEADER)
    if not signature or not timestamp:
        raise BadSignature("sendgrid: signature or timestamp header missing")
    if not TIMESTAMP_RE.match(timestamp):
        raise BadSignature("sendgrid: timestamp is not epoch seconds")
    if abs(now - int(timestamp) * 1000) > settings.tolerance_sec * 1000:
        raise BadSignature("sendgrid: timestamp outside the tolerance")
    if len(signature) > MAX_SIGNATURE_CHARS:
        raise BadSignature("sendgrid: signature too long")
    try:
        der = base64.b64decode(signature.strip(), validate=True)
    except (ValueError, binascii.Error):
        raise BadSignature("sendgrid: signature is not base64") from None
    try:
        key.verify(der, timestamp.encode("ascii") + request.body, ec.ECDSA(hashes.SHA256()))
    except InvalidSignature:
        raise BadSignature("sendgrid: signature does not match") from None


async def parse(request: RawRequest, settings: SendgridSettings, now: int,
                fetch: Fetch) -> list[Receipt]:
    verify(request, settings, now)
    events = json_of(request.body, BadReceipt, "sendgrid: body")
    if not isinstance(events, list):
        raise BadReceipt("sendgrid: body is not a JSON array of events")
    out = []
    for item in events:
        receipt = to_receipt(item) if isinstance(item, dict) else None
        if receipt is not None:
            out.append(receipt)
    return out


def classify(item: dict[str, Any]) -> tuple[Event, str | None] | None:
    """(event, detail) for one SendGrid event, or None to skip it."""
    kind = item.get("event")
    if kind in SIMPLE:
        detail = smtp_code(item.get("response")) if kind == "deferred" else None
        return SIMPLE[kind], detail
    if kind == "bounce":
        bounce_type = item.get("type")
        status = item.get("status")
        code = status if isinstance(status, str) and ENHANCED_RE.match(status) else None
        if bounce_type == "bounce":
            return Event.BOUNCED, join("bounce", code)
        label = bounce_type if isinstance(bounce_type, str) and KEY_RE.match(bounce_type) else None
        return Event.FAILED, join(label or "bounce", code)
    if kind == "dropped":
        reason = item.get("reason")
        words = reason.strip() if isinstance(reason, str) else ""
        event = SUPPRESSED_DROPS.get(words.lower(), Event.FAILED)
        return event, join("dropped", words if CODE_WORDS_RE.match(words) else None)
    if kind == "open" and item.get("sg_machine_open") is not True:
        return Event.OPENED, None
    return None  # click, machine opens, group_resubscribe, account events, unknown


def to_receipt(item: dict[str, Any]) -> Receipt | None:
    found = classify(item)
    if found is None:
        return None
    event, detail = found
    return Receipt(
        provider=NAME,
        event_id=event_id(item),
        event=event,
        occurred_at=epoch_ms(item.get("timestamp")),
        provider_ref=provider_ref(item.get("sg_message_id")),
        key=clean_key(item.get(KEY_ARG)),
        message_id=clean_message_id(item.get("smtp-id")),
        address=clean_address(item.get("email")),
        channel_type="email",
        detail=detail,
    )


def event_id(item: dict[str, Any]) -> str:
    """sg_event_id; an event without one (old drops) gets a digest of its content, which a
    redelivery repeats."""
    value = item.get("sg_event_id")
    if isinstance(value, str) and value.strip():
        return value.strip()
    canonical = json.dumps(item, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return "sha256:" + hashlib.sha256(canonical.encode()).hexdigest()[:32]


def provider_ref(value: Any) -> str | None:
    if not isinstance(value, str) or not value.strip():
        return None
    return value.strip().partition(".")[0] or None


def join(label: str, code: str | None) -> str:
    return f"{label}:{code}" if code else label


def smtp_code(text: Any) -> str | None:
    """The leading 3-digit reply code of a server's answer, never its text."""
    if not isinstance(text, str):
        return None
    m = SMTP_CODE_RE.match(text.strip())
    return m.group(1) if m else None


def epoch_ms(value: Any) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if not 0 < value < 1e11:
        return None
    return int(value * 1000)


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

