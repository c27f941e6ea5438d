"""Resend's webhook (POST /v1/webhooks/resend): what became of the emails the resend channel sent,
matched by the email id of the send answer or, when that answer was lost, by the two tags the
channel adds (notifyd_notification, notifyd_step).

Wire facts relied on (checked with the search tool):
- Resend signs through Svix, i.e. Standard Webhooks: headers svix-id, svix-timestamp,
  svix-signature (the webhook-* names are the same scheme), HMAC-SHA256 over `id.timestamp.body`
  keyed with the base64 part of the whsec_ secret, space-separated `v1,<sig>` entries, 5 minutes'
  tolerance either way; the svix-id is the same on every retry: resend/resend-node
  src/webhooks/webhooks.ts (verify() hands the three headers to standardwebhooks),
  svix/webhooks.py, https://docs.svix.com (receiving, "dedupe on svix-id"). Verified by
  receipt.verify_standard.
- Payload {"type", "created_at" (ISO 8601), "data": {email_id, message_id, from, to: [..],
  subject, created_at, tags: {name: value}, bounce: {type, subType, message} for email.bounced,
  failed: {reason} for email.failed, suppressed: {type, message} for email.suppressed, click
  for email.clicked}}: resend/resend-node src/webhooks/interfaces/webhook-event.interface.ts
  (tags typed Record<string, string>; a list of {name, value} is read too, as sent).
- Event types: email.sent, email.scheduled, email.delivered, email.delivery_delayed,
  email.complained, email.bounced, email.opened, email.clicked, email.received, email.failed,
  email.suppressed, then contact.*, domain.*, suppression.*, inbox.*: same file and
  https://resend.com/docs/webhooks/event-types
- Bounce types: Permanent (General, NoEmail): never deliverable; Transient (General,
  MailboxFull, MessageTooLarge, ContentRejected, AttachmentRejected): might be later;
  Undetermined: https://resend.com/docs/dashboard/emails/email-bounces
- email.suppressed: Resend refused to send because earlier mail to the address bounced or was
  marked as spam: https://resend.com/changelog/email-suppression-visibility

Mapping: sent ACCEPTED; delivered DELIVERED; delivery_delayed DEFERRED (Resend retries);
bounced with type Permanent (or no bounce object) BOUNCED, any other type FAILED (Resend does
not retry a bounced email, so a transient bounce is this message's end, not the address's);
complained COMPLAINED; failed FAILED (detail: the reason when it is a code); suppressed BOUNCED
(Resend will refuse every later email to it too); opened OPENED; clicked OPENED, detail "click"
(a click proves the opening that a blocked tracking pixel may have hidden); every other type is
skipped. occurred_at is the event's created_at; detail never holds the bounce message.
"""

from __future__ import annotations

import re
from typing import Any

from notifyd.channels.types.webhook import signing_key
from notifyd.receipts.base import (
    BadReceipt,
    Event,
    Fetch,
    RawRequest,
    Receipt,
)
from notifyd.receipts.providers.resend import NAME
from notifyd.receipts.providers.resend import PROVIDER as PROVIDER
from notifyd.receipts.providers.resend import Settings as Settings
from notifyd.receipts.receipt import NOTIFICATION_ID_RE, iso_ms, read_json, verify_standard

HEADER_FAMILIES = ("svix", "webhook")
TOKEN_RE = re.compile(r"[A-Za-z0-9_.-]{1,64}")
STEP_RE = re.compile(r"[0-9]{1,6}")
REF_RE = re.compile(r"[\x21-\x7e]{1,256}")
ADDRESS_RE = re.compile(r"[^\s@<>]{1,64}@[^\s@<>]{1,253}")

SIMPLE = {"email.sent": Event.ACCEPTED, "email.delivered": Event.DELIVERED,
          "email.delivery_delayed": Event.DEFERRED, "email.complained": Event.COMPLAINED,
          "email.opened": Event.OPENED}
REPORTED = frozenset({*SIMPLE, "email.bounced", "email.failed", "email.suppressed",
                      "email.clicked"})


async def parse(request: RawRequest, settings: Settings, now: int, fetch: Fetch) -> list[Receipt]:
    key = signing_key(settings.secret) if settings.secret else None
    event_id = verify_standard(request, [key] if key else [], now, HEADER_FAMILIES)
    payload = read_json(request.body)
    kind = payload.get("type")
    if not isinstance(kind, str):
        raise BadReceipt("type is missing")
    if kind not in REPORTED:
        return []  # email.scheduled, email.received, contact.*, domain.*, ...: nothing to tell
    data = payload.get("data")
    if not isinstance(data, dict):
        raise BadReceipt("data is not an object")
    event, detail = classify(kind, data)
    email_id = data.get("email_id")
    if not (isinstance(email_id, str) and REF_RE.fullmatch(email_id)):
        raise BadReceipt("data.email_id is missing or malformed")
    created = payload.get("created_at")
    address = _address(data.get("to"))
    return [Receipt(NAME, event_id, event, iso_ms(created) if isinstance(created, str) else None,
                    provider_ref=email_id, key=step_key(data.get("tags")),
                    message_id=_message_id(data.get("message_id")), address=address,
                    channel_type="email" if address else None, detail=detail)]


def classify(kind: str, data: dict[str, Any]) -> tuple[Event, str | None]:
    """The Event and detail of one of the REPORTED types."""
    if kind in SIMPLE:
        return SIMPLE[kind], None
    if kind == "email.bounced":
        bounce = data.get("bounce")
        if not isinstance(bounce, dict):
            return Event.BOUNCED, None
        kind_of, sub = _token(bounce.get("type")), _token(bounce.get("subType"))
        detail = ":".join(p for p in (kind_of, sub) if p) or None
        return (Event.BOUNCED if kind_of == "Permanent" else Event.FAILED), detail
    if kind == "email.failed":
        return Event.FAILED, _token(_field(data, "failed", "reason"))
    if kind == "email.suppressed":
        why = _token(_field(data, "suppressed", "type"))
        return Event.BOUNCED, f"suppressed:{why}" if why else "suppressed"
    return Event.OPENED, "click"  # email.clicked


def step_key(tags: Any) -> str | None:
    """notifyd's step key from its tags, sent as [{name, value}] and handed back as an object
    (a list is read too); None when either tag is absent or not notifyd's shape."""
    if isinstance(tags, list):
        tags = {t.get("name"): t.get("value") for t in tags if isinstance(t, dict)}
    if not isinstance(tags, dict):
        return None
    nid, step = tags.get("notifyd_notification"), tags.get("notifyd_step")
    if (isinstance(nid, str) and NOTIFICATION_ID_RE.fullmatch(nid) and isinstance(step, str)
            and STEP_RE.fullmatch(step)):
        return f"{nid}:{int(step)}"
    return None


def _field(data: dict[str, Any], outer: str, inner: str) -> Any:
    obj = data.get(outer)
    return obj.get(inner) if isinstance(obj, dict) else None


def _token(value: Any) -> str | None:
    """A short code (a bounce type, a failure reason); None for free text, which may quote an
    address."""
    return value if isinstance(value, str) and TOKEN_RE.fullmatch(value) else None


def _address(to: Any) -> str | None:
    first = to[0] if isinstance(to, list) and to else to
    return first if isinstance(first, str) and ADDRESS_RE.fullmatch(first) else None


def _message_id(value: Any) -> str | None:
    if not isinstance(value, str):
        return None
    bare = value.strip().strip("<>")
    return bare if REF_RE.fullmatch(bare) else None

