"""Vonage's webhook (POST /v1/webhooks/vonage): the Messages API's status of each message the
vonage channel sent (it names this URL as the message's webhook_url once this webhook is on
and server.public_url is set; or make it the application's Status URL).

Verification, over the raw bytes before anything is parsed: `Authorization: Bearer <JWT>`, the
JWT HS256 with the signature secret (its header must say HS256: nothing else is accepted, "none"
least of all), the HMAC compared in constant time; its iat within tolerance_sec of our clock (and
exp, if it has one, not past); its payload_hash the hex SHA-256 of the body as received, so the
body is covered too; its api_key the configured one, when one is.

Wire facts relied on (checked with the search tool):
- https://developer.vonage.com/en/messages/concepts/signed-webhooks (the JWT in the
  Authorization header, signed with the signature secret, SHA-256 whatever the dashboard's
  signature method says; the api_key claim names the account; payload_hash = SHA-256 of the
  payload; "in the rare case of an internal error ... an unsigned callback. By returning an HTTP
  5xx response, a retry will be triggered"); Vonage's own verifier is PyJWT's decode with HS256
  (Vonage/vonage-python-sdk jwt/src/vonage_jwt/verify_jwt.py), which the tests sign with;
  https://developer.vonage.com/en/blog/validating-inbound-messages-from-the-vonage-messages-api-dr
  (payload_hash against the SHA-256 of the body; iat to tell a stale token).
- https://developer.vonage.com/en/messages/concepts/messages-status-callbacks (message_uuid, to,
  from, timestamp, status: submitted, delivered, read, rejected, undeliverable; error {type,
  title, detail}; client_ref; channel).

Choices. event_id = "message_uuid:status" (the body has no event id; the JWT's jti is the
delivery's, and a retry may carry another). submitted is ACCEPTED, delivered DELIVERED, read
OPENED; rejected and undeliverable are BOUNCED when the error's code says the number is dead
(the channel's DEAD_NUMBER: barred, invalid, permanently absent, illegal), else FAILED, the code
as detail. The step is found by client_ref (our step key) or message_uuid. The address is the
step's own (the status's `to` has no +).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
from typing import Any

from notifyd.channels.types.vonage import DEAD_NUMBER
from notifyd.receipts.base import (
    BadReceipt,
    BadSignature,
    Event,
    Fetch,
    RawRequest,
    Receipt,
    json_of,
)
from notifyd.receipts.providers.vonage import NAME
from notifyd.receipts.providers.vonage import PROVIDER as PROVIDER
from notifyd.receipts.providers.vonage import VonageSettings as Settings
from notifyd.receipts.receipt import iso_ms

MAX_TOKEN_CHARS = 4096
UUID_RE = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
KEY_RE = re.compile(r"n_[0-9a-z]{18}:[0-9]{1,6}")
CODE_RE = re.compile(r"[A-Za-z0-9_-]{1,40}")
HEX64_RE = re.compile(r"[0-9a-fA-F]{64}")
STATUS = {"submitted": Event.ACCEPTED, "delivered": Event.DELIVERED, "read": Event.OPENED}
FAILED = frozenset({"rejected", "undeliverable"})


async def parse(request: RawRequest, settings: Settings, now: int, fetch: Fetch) -> list[Receipt]:
    verify(request, settings, now)
    data = json_of(request.body, BadReceipt)
    if not isinstance(data, dict):
        raise BadReceipt("the body is not a JSON object")
    ref = data.get("message_uuid")
    if not (isinstance(ref, str) and UUID_RE.fullmatch(ref)):
        raise BadReceipt("message_uuid is missing or not a UUID")
    status = data.get("status")
    if not isinstance(status, str):
        raise BadReceipt("status is missing")
    if status in STATUS:
        event, detail = STATUS[status], None
    elif status in FAILED:
        detail = error_code(data.get("error")) or status
        event = Event.BOUNCED if detail in DEAD_NUMBER else Event.FAILED
    else:
        return []  # a status notifyd has no word for: nothing to report
    key = data.get("client_ref")
    stamp = data.get("timestamp")
    return [Receipt(NAME, f"{ref}:{status}", event,
                    iso_ms(stamp) if isinstance(stamp, str) else None, provider_ref=ref,
                    key=key if isinstance(key, str) and KEY_RE.fullmatch(key) else None,
                    detail=detail)]


def error_code(error: object) -> str | None:
    """The code at the end of the error's type URL (…/messages#1050), never its free text."""
    kind = error.get("type") if isinstance(error, dict) else None
    code = kind.rpartition("#")[2] if isinstance(kind, str) else ""
    return code if CODE_RE.fullmatch(code) else None


def verify(request: RawRequest, settings: Settings, now: int) -> dict[str, Any]:
    """The JWT's claims once its signature, age, payload_hash and api_key check out."""
    secret = settings.signature_secret
    if not secret:
        raise BadSignature("no signature_secret is configured")
    header = request.headers.get("Authorization") or ""
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token or len(token) > MAX_TOKEN_CHARS:
        raise BadSignature("missing the Authorization: Bearer JWT")
    parts = token.strip().split(".")
    if len(parts) != 3:
        raise BadSignature("the Authorization token is not a JWT")
    head = _part(parts[0], "header")
    if head.get("alg") != "HS256":
        raise BadSignature("the JWT is not HS256")
    mac = hmac.new(secret.encode(), f"{parts[0]}.{parts[1]}".encode(), hashlib.sha256).digest()
    if not hmac.compare_digest(mac, _unb64(parts[2])):
        raise BadSignature("the JWT's signature does not match")
    claims = _part(parts[1], "claims")
    _check_time(claims, settings.tolerance_sec * 1000, now)
    digest = claims.get("payload_hash")
    if not (isinstance(digest, str) and HEX64_RE.fullmatch(digest)):
        raise BadSignature("the JWT carries no payload_hash")
    if not hmac.compare_digest(hashlib.sha256(request.body).hexdigest(), digest.lower()):
        raise BadSignature("payload_hash does not match the body")
    if settings.api_key and not hmac.compare_digest(str(claims.get("api_key", "")).encode(),
                                                    settings.api_key.encode()):
        raise BadSignature("the JWT names another account's api_key")
    return claims


def _check_time(claims: dict[str, Any], tolerance_ms: int, now: int) -> None:
    iat, exp = claims.get("iat"), claims.get("exp")
    if isinstance(iat, bool) or not isinstance(iat, int | float):
        raise BadSignature("the JWT has no iat")
    if now - iat * 1000 > tolerance_ms:
        raise BadSignature("the JWT is older than tolerance_sec")
    if iat * 1000 - now > tolerance_ms:
        raise BadSignature("the JWT is dated ahead of our clock")
    if exp is not None and (isinstance(exp, bool) or not isinstance(exp, int | float)
                            or exp * 1000 < now - tolerance_ms):
        raise BadSignature("the JWT has expired")


def _unb64(part: str) -> bytes:
    try:
        return base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))
    except ValueError:  # binascii.Error
        raise BadSignature("the JWT is not base64url") from None


def _part(part: str, what: str) -> dict[str, Any]:
    """A JWT's header or claims: read before the signature is checked (the header) only within
    the API's JSON limits."""
    data = json_of(_unb64(part), BadSignature, f"the JWT's {what}")
    if not isinstance(data, dict):
        raise BadSignature(f"the JWT's {what} is not a JSON object")
    return data
