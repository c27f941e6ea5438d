"""Meta's WhatsApp webhook (POST /v1/webhooks/whatsapp): the statuses of the template messages
the whatsapp channel sent; and its subscription check (GET /v1/webhooks/whatsapp), which Meta
makes once, when the callback URL is saved.

Verification, over the raw bytes before anything is parsed: X-Hub-Signature-256 is "sha256="
and the hex HMAC-SHA256 of the body, keyed with the app secret, compared in constant time. The
check: hub.mode=subscribe and hub.verify_token equal (in constant time) to ours is answered with
hub.challenge as text; anything else is refused.

Wire facts relied on (checked with the search tool):
- https://developers.facebook.com/docs/graph-api/webhooks/getting-started (the GET with
  hub.mode, hub.verify_token and hub.challenge, echoed back; X-Hub-Signature-256 over the
  payload with the App Secret; Meta retries a delivery that is not answered 200).
- https://developers.facebook.com/docs/whatsapp/cloud-api/webhooks/components (the body: object
  whatsapp_business_account, entry[].changes[] with field "messages" and value.statuses[]: id
  (the wamid), status sent | delivered | read | failed, timestamp (Unix seconds, as a string),
  recipient_id, biz_opaque_callback_data, errors[] with a numeric code); inbound messages come in
  value.messages and are not receipts.
- https://developers.facebook.com/docs/whatsapp/cloud-api/support/error-codes (131026 message
  undeliverable: not on WhatsApp, an old app, terms not accepted; 131050 the person stopped
  marketing messages).

Choices. event_id = "wamid:status" (Meta resends a status it was not thanked for with the same
id). sent is ACCEPTED, delivered DELIVERED, read OPENED (a kind with stop = "delivered" ends at
either); failed with 131026 is BOUNCED (the whatsapp address is suppressed: that number takes
no WhatsApp), with 131050 UNSUBSCRIBED, else FAILED, the code as detail. The step is found by
biz_opaque_callback_data (our step key) or the wamid. The address is the step's own: Meta's
recipient_id is a WhatsApp id, which may differ from the number given (Brazil's ninth digit).
"""

from __future__ import annotations

import hashlib
import hmac
import re
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
from notifyd.receipts.providers.whatsapp import NAME
from notifyd.receipts.providers.whatsapp import PROVIDER as PROVIDER
from notifyd.receipts.providers.whatsapp import WhatsAppSettings as Settings

SIGNATURE_HEADER = "X-Hub-Signature-256"
WAMID_RE = re.compile(r"wamid\.[A-Za-z0-9_=+/-]{1,200}")
KEY_RE = re.compile(r"n_[0-9a-z]{18}:[0-9]{1,6}")
STAMP_RE = re.compile(r"[1-9][0-9]{0,11}")
MAX_CHALLENGE = 256
STATUS = {"sent": Event.ACCEPTED, "delivered": Event.DELIVERED, "read": Event.OPENED}
FAILED = {131026: Event.BOUNCED, 131050: Event.UNSUBSCRIBED}


def challenge(request: RawRequest, settings: Settings) -> bytes:
    """hub.challenge, when the check names our verify token."""
    token = request.query.get("hub.verify_token") or ""
    if request.query.get("hub.mode") != "subscribe" or not settings.verify_token:
        raise BadSignature("not a subscription check (hub.mode=subscribe)")
    if not hmac.compare_digest(token.encode(), settings.verify_token.encode()):
        raise BadSignature("hub.verify_token is not ours")
    answer = request.query.get("hub.challenge") or ""
    if not answer or len(answer) > MAX_CHALLENGE or not answer.isprintable():
        raise BadReceipt("hub.challenge is missing or not a short text")
    return answer.encode()


def verify(request: RawRequest, app_secret: str) -> None:
    if not app_secret:
        raise BadSignature("no app_secret is configured")
    header = request.headers.get(SIGNATURE_HEADER) or ""
    if not header.startswith("sha256="):
        raise BadSignature(f"missing the {SIGNATURE_HEADER} header")
    expected = hmac.new(app_secret.encode(), request.body, hashlib.sha256).hexdigest()
    if not hmac.compare_digest(header.removeprefix("sha256=").strip().lower().encode(),
                               expected.encode()):
        raise BadSignature("the signature does not match")


async def parse(request: RawRequest, settings: Settings, now: int, fetch: Fetch) -> list[Receipt]:
    verify(request, settings.app_secret)
    data = json_of(request.body, BadReceipt)
    if not isinstance(data, dict) or data.get("object") != "whatsapp_business_account":
        raise BadReceipt("not a whatsapp_business_account notification")
    out: list[Receipt] = []
    for value in _values(data):
        statuses = value.get("statuses")
        for status in statuses if isinstance(statuses, list) else ():
            if isinstance(status, dict) and (r := _receipt(status)) is not None:
                out.append(r)
    return out


def _values(data: dict[str, Any]) -> list[dict[str, Any]]:
    """Each change's value of the field "messages" (statuses and inbound messages)."""
    entries = data.get("entry")
    changes = [c for e in entries if isinstance(e, dict) and isinstance(e.get("changes"), list)
               for c in e["changes"]] if isinstance(entries, list) else []
    return [c["value"] for c in changes if isinstance(c, dict) and c.get("field") == "messages"
            and isinstance(c.get("value"), dict)]


def _receipt(status: dict[str, Any]) -> Receipt | None:
    wamid, word = status.get("id"), status.get("status")
    if not (isinstance(wamid, str) and WAMID_RE.fullmatch(wamid)) or not isinstance(word, str):
        raise BadReceipt("a status without a message id (wamid) or a status")
    detail = None
    if word in STATUS:
        event = STATUS[word]
    elif word == "failed":
        code = _error_code(status.get("errors"))
        event = FAILED.get(code, Event.FAILED) if code is not None else Event.FAILED
        detail = str(code) if code is not None else None
    else:
        return None  # deleted, warning, ...: nothing a step needs
    stamp = status.get("timestamp")
    key = status.get("biz_opaque_callback_data")
    return Receipt(NAME, f"{wamid}:{word}", event,
                   int(stamp) * 1000 if isinstance(stamp, str) and STAMP_RE.fullmatch(stamp)
                   else None, provider_ref=wamid,
                   key=key if isinstance(key, str) and KEY_RE.fullmatch(key) else None,
                   detail=detail)


def _error_code(errors: object) -> int | None:
    first = errors[0] if isinstance(errors, list) and errors else None
    code = first.get("code") if isinstance(first, dict) else None
    return code if isinstance(code, int) and not isinstance(code, bool) else None
