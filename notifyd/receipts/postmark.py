"""Postmark's webhooks: check the credentials Postmark was given (it signs nothing), then one
Receipt for the record (web -> receipts -> store).

Wire facts relied on (checked with the search tool):
- Postmark does not sign webhooks. A webhook is protected by basic HTTP auth written into its URL
  (https://user:pass@host/path, sent as `Authorization: Basic ...`) and/or custom HTTP headers
  set on the webhook (`HttpAuth`, `HttpHeaders` in the Webhooks API):
  https://postmarkapp.com/developer/webhooks/webhooks-overview, ActiveCampaign postmark.js
  dist/client/models/webhooks/Webhook.d.ts. Nothing covers the body: TLS is its only integrity.
- Postmark retries a webhook that does not get 200, and a 403 stops its retries:
  https://postmarkapp.com/support/article/understanding-inbound-webhook-retries-in-postmark
  (written for inbound; the same rule is the one PROVIDERS.md records for all webhooks).
- Records, one per POST, with `RecordType`: Delivery (MessageID, Recipient, DeliveredAt, Metadata),
  Bounce (ID, Type, TypeCode, MessageID, Email, BouncedAt, Inactive, Metadata), SpamComplaint (a
  bounce record: ID, Type "SpamComplaint", Email, BouncedAt), Open (MessageID, Recipient,
  ReceivedAt, FirstOpen), Click, SubscriptionChange (MessageID, null for a manual suppression;
  Recipient, ChangedAt, SuppressSending, SuppressionReason HardBounce / SpamComplaint /
  ManualSuppression). `MessageID` is Postmark's id for the message; the original Message-ID
  header is not echoed, so message_id is never set. `Metadata` echoes the send's metadata
  (`X-PM-Metadata-<name>` headers over SMTP). Dates are ISO 8601 with an offset:
  https://postmarkapp.com/developer/webhooks/bounce-webhook,
  https://postmarkapp.com/developer/webhooks/subscription-change-webhook,
  https://postmarkapp.com/email-webhooks.
- Bounce types: ActiveCampaign postmark.js dist/client/models/bounces/Bounce.d.ts (BounceType);
  a Soft Bounce or Undeliverable means Postmark has stopped trying that message:
  https://postmarkapp.com/support/article/1159-how-to-fix-soft-bounces.

Event ids: a Bounce or SpamComplaint record has its own `ID`; the others have none, so their id is
the record type, the MessageID and a digest of what makes each record unique (the recipient, its
timestamp, and for a subscription change whether sending was suppressed); a redelivery repeats
all of them.

Mapping: Delivery DELIVERED; Open OPENED; SpamComplaint COMPLAINED; Bounce by Type: HardBounce and
BadEmailAddress BOUNCED, Unsubscribe UNSUBSCRIBED, SpamComplaint COMPLAINED, Transient and DnsError
DEFERRED, SoftBounce (Postmark gave up), SpamNotification (a filter, not a person), Blocked,
DMARCPolicy, VirusNotification, ManuallyDeactivated, Unconfirmed, SMTPApiError,
TemplateRenderingFailed and Unknown FAILED; AutoResponder, AddressChange, ChallengeVerification,
Subscribe, OpenRelayTest and InboundError skipped (they say nothing of this delivery);
SubscriptionChange with SuppressSending true by SuppressionReason: HardBounce BOUNCED,
SpamComplaint COMPLAINED, otherwise UNSUBSCRIBED (a reactivation is skipped); Click and unknown
records skipped.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import re
from datetime import UTC, datetime
from typing import Any

from notifyd.receipts.base import (
    BadReceipt,
    BadSignature,
    Event,
    Fetch,
    RawRequest,
    Receipt,
    json_of,
)
from notifyd.receipts.providers.postmark import NAME, PostmarkSettings
from notifyd.receipts.providers.postmark import PROVIDER as PROVIDER

KEY_FIELD = "notifyd_key"  # Metadata {"notifyd_key": ...}; X-PM-Metadata-notifyd_key over SMTP

BOUNCE_TYPES = {
    "HardBounce": Event.BOUNCED,
    "BadEmailAddress": Event.BOUNCED,
    "Unsubscribe": Event.UNSUBSCRIBED,
    "SpamComplaint": Event.COMPLAINED,
    "Transient": Event.DEFERRED,
    "DnsError": Event.DEFERRED,
    "SoftBounce": Event.FAILED,
    "SpamNotification": Event.FAILED,
    "Blocked": Event.FAILED,
    "DMARCPolicy": Event.FAILED,
    "VirusNotification": Event.FAILED,
    "ManuallyDeactivated": Event.FAILED,
    "Unconfirmed": Event.FAILED,
    "SMTPApiError": Event.FAILED,
    "TemplateRenderingFailed": Event.FAILED,
    "Unknown": Event.FAILED,
}
SUPPRESSION_REASONS = {"HardBounce": Event.BOUNCED, "SpamComplaint": Event.COMPLAINED}
WHEN = {"Delivery": "DeliveredAt", "Bounce": "BouncedAt", "SpamComplaint": "BouncedAt",
        "Open": "ReceivedAt", "SubscriptionChange": "ChangedAt"}
WORD_RE = re.compile(r"^[A-Za-z0-9]{1,40}$")
KEY_RE = re.compile(r"^[A-Za-z0-9_.:-]{1,200}$")


def same(presented: bytes, expected: str) -> bool:
    return hmac.compare_digest(presented, expected.encode())


def basic_matches(header: str | None, settings: PostmarkSettings) -> bool:
    scheme, _, credentials = (header or "").strip().partition(" ")
    if scheme.lower() != "basic":
        return False
    try:
        decoded = base64.b64decode(credentials.strip(), validate=True)
    except (ValueError, binascii.Error):
        return False
    user, colon, password = decoded.partition(b":")
    user_ok = same(user, settings.username)  # both compared, whatever the first says
    password_ok = same(password, settings.password)
    return bool(colon) and user_ok and password_ok


def verify(request: RawRequest, settings: PostmarkSettings) -> None:
    if not settings.enabled():
        raise BadSignature("postmark: no credentials configured")
    if settings.basic() and not basic_matches(request.headers.get("Authorization"), settings):
        raise BadSignature("postmark: basic auth missing or wrong")
    if settings.header():
        presented = request.headers.get(settings.header_name)
        if presented is None or not same(presented.strip().encode("utf-8", "replace"),
                                         settings.header_value):
            raise BadSignature("postmark: secret header missing or wrong")


async def parse(request: RawRequest, settings: PostmarkSettings, now: int,
                fetch: Fetch) -> list[Receipt]:
    verify(request, settings)
    record = json_of(request.body, BadReceipt, "postmark: body")
    if not isinstance(record, dict) or not isinstance(record.get("RecordType"), str):
        raise BadReceipt("postmark: not a record with a RecordType")
    receipt = to_receipt(record)
    return [receipt] if receipt is not None else []


def classify(record: dict[str, Any]) -> tuple[Event, str | None] | None:
    kind = record["RecordType"]
    if kind == "Delivery":
        return Event.DELIVERED, None
    if kind == "Open":
        return Event.OPENED, None
    if kind in ("Bounce", "SpamComplaint"):
        bounce_type = record.get("Type")
        if kind == "SpamComplaint" and bounce_type is None:
            bounce_type = "SpamComplaint"
        if not isinstance(bounce_type, str) or bounce_type not in BOUNCE_TYPES:
            return None  # AutoResponder, Subscribe, ... and types Postmark may add
        return BOUNCE_TYPES[bounce_type], bounce_type
    if kind == "SubscriptionChange" and record.get("SuppressSending") is True:
        reason = record.get("SuppressionReason")
        detail = reason if isinstance(reason, str) and WORD_RE.match(reason) else None
        return SUPPRESSION_REASONS.get(detail or "", Event.UNSUBSCRIBED), detail
    return None  # Click, reactivations, unknown record types


def to_receipt(record: dict[str, Any]) -> Receipt | None:
    found = classify(record)
    if found is None:
        return None
    event, detail = found
    message_ref = record.get("MessageID")
    provider_ref = (message_ref.strip() or None) if isinstance(message_ref, str) else None
    address = clean_address(record.get("Recipient")) or clean_address(record.get("Email"))
    metadata = record.get("Metadata")
    key = metadata.get(KEY_FIELD) if isinstance(metadata, dict) else None
    when = record.get(WHEN.get(record["RecordType"], ""))
    return Receipt(
        provider=NAME,
        event_id=event_id(record, provider_ref, address, when),
        event=event,
        occurred_at=iso_ms(when),
        provider_ref=provider_ref,
        key=key if isinstance(key, str) and KEY_RE.match(key) else None,
        message_id=None,  # Postmark does not echo the Message-ID header
        address=address,
        channel_type="email",
        detail=detail,
    )


def event_id(record: dict[str, Any], provider_ref: str | None, address: str | None,
             when: Any) -> str:
    kind = record["RecordType"]
    record_id = record.get("ID")
    if isinstance(record_id, int | str) and not isinstance(record_id, bool) and str(record_id):
        return f"{kind}:{record_id}"
    unique = [address, when, record.get("SuppressSending")]
    digest = hashlib.sha256(json.dumps(unique, default=str).encode()).hexdigest()[:24]
    return f"{kind}:{provider_ref or '-'}:{digest}"


def iso_ms(value: Any) -> int | None:
    if not isinstance(value, str):
        return None
    try:
        when = datetime.fromisoformat(value.strip())
    except ValueError:
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return int(when.timestamp() * 1000)


def clean_address(value: Any) -> str | None:
    if not isinstance(value, str):
        return None
    text = value.strip()
    return text if "@" in text and len(text) <= 320 else None

