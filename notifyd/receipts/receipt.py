"""The delivery-receipt endpoint (POST /v1/webhooks/delivery-receipt): a producer's own backend
reports what its app or push client saw of one step ("delivered", "shown", "opened"), signed with
Standard Webhooks headers under a secret configured here. Also home of the Standard Webhooks
verifier that the resend parser shares (Resend signs through Svix, the same scheme).

Wire facts relied on (checked with the search tool):
- Standard Webhooks: headers webhook-id, webhook-timestamp (Unix seconds), webhook-signature;
  the signed content is `{id}.{timestamp}.{raw body}`, HMAC-SHA256 keyed with the base64-decoded
  part of `whsec_<base64>`; the signature header holds space-separated `v1,<base64>` entries
  (several during a key rotation; other versions such as `v1a` are skipped); refuse timestamps
  more than 5 minutes old or ahead: https://www.standardwebhooks.com (spec, "Signature scheme"),
  the reference implementation standardwebhooks/webhooks.py (python) and svix/webhooks.py, which
  reads svix-id / svix-timestamp / svix-signature and falls back to the webhook-* names.
- The scheme asks receivers to dedupe on the message id rather than to refuse a replay inside the
  window: the id is signed, so a replay arrives as the same event_id and the store drops it.

The body, one receipt per request:
  {"notification_id": "n_...", "step_no": 0, "device_id": "d_..." (optional),
   "status": "delivered" | "shown" | "opened", "timestamp": "<ISO 8601 with offset>" (optional)}
or the key form the push payloads carry (webpush `key` in the encrypted data, fcm
`data.notifyd_key`): {"key": "n_...:STEP[:d_...]", "status": ..., "timestamp": ...}.
An optional "provider" (a short word, e.g. "apns", naming what delivered it) is accepted and
ignored. Anything else is refused with BadReceipt naming the field, so a client's typo shows at
once. key = "n_...:STEP"; the device goes to detail ("device d_...").

The secret belongs on the producer's backend: a service worker or a mobile app cannot keep one,
so clients report to their backend, which signs and forwards. Each tenant may have its own
([webhooks.delivery-receipt.tenants.NAME]): a receipt signed with it names that tenant, matches
only its notifications, and its webhook-id is that tenant's alone (the event id is
"TENANT:ID"), so one tenant can neither move nor pre-empt another's steps. The shared secret
matches any tenant's, as a single-tenant install needs.

What a request nobody signed may cost is bounded: a tenant's backend posts to
/v1/webhooks/delivery-receipt/TENANT, where that tenant's own secret (two while rotating) is the
only one tried. The URL without a tenant tries every secret (an HMAC each, as a receiver holding
several endpoint secrets does) only while there are at most MAX_SECRETS_TRIED; past that, only
the shared one. A body larger than any receipt (MAX_BODY_BYTES) is refused before any HMAC.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
from collections.abc import Sequence
from datetime import datetime
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
from notifyd.receipts.providers.receipt import NAME
from notifyd.receipts.providers.receipt import PROVIDER as PROVIDER
from notifyd.receipts.providers.receipt import Settings as Settings
from notifyd.receipts.providers.receipt import TenantSecret as TenantSecret

TOLERANCE_MS = 5 * 60 * 1000  # Standard Webhooks: 5 minutes either way
MAX_SIGNATURES = 8  # entries read from one signature header; rotation needs two
MAX_SECRETS_TRIED = 8  # secrets one request to the URL without a tenant is tried against
MAX_BODY_BYTES = 4096  # a receipt is ~150 bytes: anything past this is refused unverified
EVENT_ID_RE = re.compile(r"[\x21-\x7e]{1,256}")  # printable ASCII, no spaces
TIMESTAMP_RE = re.compile(r"[1-9][0-9]{0,11}")
NOTIFICATION_ID_RE = re.compile(r"n_[0-9a-z]{18}")
DEVICE_ID_RE = re.compile(r"d_[0-9a-f]{16}")
MAX_STEP = 999_999
KEY_RE = re.compile(r"(n_[0-9a-z]{18}):([0-9]{1,6})(?::(d_[0-9a-f]{16}))?")
PROVIDER_RE = re.compile(r"[a-z0-9_-]{1,32}")
FIELD_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,31}")

STATUS = {"delivered": Event.DELIVERED, "shown": Event.SHOWN, "opened": Event.OPENED}
ID_FIELDS = frozenset({"notification_id", "step_no", "device_id"})
FIELDS = ID_FIELDS | {"key", "status", "timestamp", "provider"}


def verify_standard(request: RawRequest, keys: Sequence[bytes], now: int,
                    families: Sequence[str] = ("webhook",)) -> str:
    """Check a Standard Webhooks signature over the raw body; return the message id (signed, so
    a redelivery or a replay carries the same one). `families` are the header prefixes to look
    for, in order ("svix" for Resend); the three headers come from the first one present."""
    return verify_signer(request, keys, now, families)[0]


def verify_signer(request: RawRequest, keys: Sequence[bytes], now: int,
                  families: Sequence[str] = ("webhook",)) -> tuple[str, int]:
    """verify_standard, and which of `keys` signed (its index)."""
    if not keys:
        raise BadSignature("no signing secret is configured")
    family = next((f for f in families if request.headers.get(f"{f}-id") is not None), None)
    if family is None:
        raise BadSignature(f"missing the {families[0]}-id header")
    msg_id = request.headers.get(f"{family}-id") or ""
    stamp = request.headers.get(f"{family}-timestamp")
    signature = request.headers.get(f"{family}-signature")
    if not stamp:
        raise BadSignature(f"missing the {family}-timestamp header")
    if not signature:
        raise BadSignature(f"missing the {family}-signature header")
    if not EVENT_ID_RE.fullmatch(msg_id):
        raise BadSignature(f"{family}-id is not 1..256 printable characters")
    if not TIMESTAMP_RE.fullmatch(stamp):
        raise BadSignature(f"{family}-timestamp is not a Unix time in seconds")
    skew = now - int(stamp) * 1000
    if skew > TOLERANCE_MS:
        raise BadSignature(f"{family}-timestamp is more than 5 minutes old")
    if skew < -TOLERANCE_MS:
        raise BadSignature(f"{family}-timestamp is more than 5 minutes ahead")
    signed = f"{msg_id}.{stamp}.".encode() + request.body
    found = _matching(signature, [hmac.new(k, signed, hashlib.sha256).digest() for k in keys])
    if found is None:
        raise BadSignature("no signature matches")
    return msg_id, found


def _matching(header: str, expected: list[bytes]) -> int | None:
    """The index of the first expected MAC that a `v1,<base64>` entry of a signature header
    holds, or None."""
    for entry in header.split()[:MAX_SIGNATURES]:
        version, _, value = entry.partition(",")
        if version != "v1":
            continue
        try:
            got = base64.b64decode(value, validate=True)
        except ValueError:  # binascii.Error
            continue
        hits = [hmac.compare_digest(got, e) for e in expected]  # every one, in constant time
        if any(hits):
            return hits.index(True)
    return None


def read_json(body: bytes) -> dict[str, Any]:
    """The verified body as a JSON object, or BadReceipt."""
    data = json_of(body, BadReceipt)
    if not isinstance(data, dict):
        raise BadReceipt("the body is not a JSON object")
    return data


def iso_ms(value: str) -> int | None:
    """Epoch ms of an ISO 8601 date-time with an offset ("Z" included); None if it is not one."""
    try:
        when = datetime.fromisoformat(value)
    except ValueError:
        return None
    if when.tzinfo is None:
        return None
    return int(when.timestamp() * 1000)


async def parse(request: RawRequest, settings: Settings, now: int, fetch: Fetch) -> list[Receipt]:
    if len(request.body) > MAX_BODY_BYTES:
        raise BadSignature(f"the body is larger than {MAX_BODY_BYTES} bytes (no receipt is)")
    signers = settings.signers_of(request.tenant, MAX_SECRETS_TRIED)
    if not signers:
        raise BadSignature("no secret is configured for the tenant in the URL"
                           if request.tenant is not None else
                           "more tenant secrets than are tried here: post to "
                           "/v1/webhooks/delivery-receipt/TENANT")
    msg_id, found = verify_signer(request, [key for _, key in signers], now)
    tenant = signers[found][0]
    data = read_json(request.body)
    unknown = set(data) - FIELDS
    if unknown:
        name = min(unknown)
        shown = repr(name) if FIELD_NAME_RE.fullmatch(name) else "(a field name)"
        raise BadReceipt(f"unknown field {shown}")
    status = data.get("status")
    if not isinstance(status, str) or status not in STATUS:
        raise BadReceipt("status must be one of: delivered, shown, opened")
    nid, step, device = _step_of(data)
    occurred_at = None
    stamp = data.get("timestamp")
    if stamp is not None:
        occurred_at = iso_ms(stamp) if isinstance(stamp, str) else None
        if occurred_at is None:
            raise BadReceipt("timestamp must be an ISO 8601 date-time with a UTC offset")
    provider = data.get("provider")
    if provider is not None and not (isinstance(provider, str) and PROVIDER_RE.fullmatch(provider)):
        raise BadReceipt("provider must be a short lowercase word (1..32 of a-z 0-9 _ -)")
    key = f"{nid}:{step}:{device}" if device else f"{nid}:{step}"
    return [Receipt(NAME, msg_id if tenant is None else f"{tenant}:{msg_id}", STATUS[status],
                    occurred_at, key=key, channel_type="push" if device else None,
                    tenant=tenant)]


def _step_of(data: dict[str, Any]) -> tuple[str, int, str | None]:
    """(notification id, step number, device id or None) from either form of the body."""
    key = data.get("key")
    if key is not None:
        if ID_FIELDS & set(data):
            raise BadReceipt("key: give either key or notification_id and step_no, not both")
        m = KEY_RE.fullmatch(key) if isinstance(key, str) else None
        if m is None:
            raise BadReceipt("key must be n_<18 letters or digits>:<step>[:d_<16 hex digits>]")
        return m[1], int(m[2]), m[3]
    nid = data.get("notification_id")
    if nid is None:
        raise BadReceipt("notification_id (or key) is required")
    if not (isinstance(nid, str) and NOTIFICATION_ID_RE.fullmatch(nid)):
        raise BadReceipt("notification_id must be n_ and 18 letters or digits")
    step = data.get("step_no")
    if step is None:
        raise BadReceipt("step_no is required")
    if isinstance(step, bool) or not isinstance(step, int) or not 0 <= step <= MAX_STEP:
        raise BadReceipt(f"step_no must be an integer from 0 to {MAX_STEP}")
    device = data.get("device_id")
    if device is not None and not (isinstance(device, str) and DEVICE_ID_RE.fullmatch(device)):
        raise BadReceipt("device_id must be d_ and 16 hex digits")
    return nid, step, device

