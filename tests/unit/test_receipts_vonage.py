"""Vonage's status webhook parser: requests signed with PyJWT as Vonage signs them (HS256 under
the signature secret, the body's SHA-256 as payload_hash; Vonage's own verifier is PyJWT),
bodies shaped as the Messages API's status callbacks.

Covered: each status's evidence and what finds the step (client_ref, message_uuid); a bounce
for a dead number, a failure for anything else; every way a request fails verification (no
token, another secret, another algorithm, "none", a changed body, a stale or future iat, another
account's api_key) and that the provider answers those 503 (Vonage signs its retries).
"""

from __future__ import annotations

import base64
import json
from datetime import UTC, datetime
from typing import Any

import jwt
import pytest
from fake_vonage import signed, status_body
from multidict import CIMultiDict

from notifyd.receipts.base import BadReceipt, BadSignature, Event, RawRequest, Receipt
from notifyd.receipts.vonage import PROVIDER, Settings, parse

NOW_SEC = 1_790_000_000
NOW = NOW_SEC * 1000
SECRET = "vonage-signature-secret-0123456789abcdef"
SETTINGS = Settings(signature_secret=SECRET, api_key="abcd1234")
REF = "aaaaaaaa-bbbb-4ccc-8ddd-0123456789ab"
KEY = "n_01k9zq3x7c2m4v6b8n:1"


def request(body: bytes, headers: dict[str, str]) -> RawRequest:
    return RawRequest("POST", "https://notify.example.com/v1/webhooks/vonage",
                      CIMultiDict(headers), body, {})


async def receipts(body: bytes, headers: dict[str, str] | None = None,
                   settings: Settings = SETTINGS) -> list[Receipt]:
    sent = signed(body, SECRET, NOW_SEC) if headers is None else headers
    return await parse(request(body, sent), settings, NOW, _no_fetch)


async def _no_fetch(url: str) -> bytes:
    raise AssertionError("vonage needs nothing fetched")


@pytest.mark.parametrize(("status", "error", "event", "detail"), [
    ("submitted", None, Event.ACCEPTED, None),
    ("delivered", None, Event.DELIVERED, None),
    ("read", None, Event.OPENED, None),
    ("rejected", "1050", Event.BOUNCED, "1050"),  # number barred: the address is dead
    ("undeliverable", "1170", Event.BOUNCED, "1170"),
    ("rejected", "1000", Event.FAILED, "1000"),  # throttled: not the number's fault
    ("undeliverable", None, Event.FAILED, "undeliverable"),
])
async def test_each_status_says_what_happened_and_finds_its_step(
        status: str, error: str | None, event: Event, detail: str | None) -> None:
    body = status_body(REF, status, "+14155550123", KEY, error)
    [r] = await receipts(body)
    assert (r.provider, r.event_id, r.event, r.provider_ref, r.key, r.detail) == (
        "vonage", f"{REF}:{status}", event, REF, KEY, detail)
    assert r.occurred_at == int(datetime(2026, 9, 21, 14, tzinfo=UTC).timestamp() * 1000)
    assert r.address is None  # the step's own number is suppressed, not Vonage's spelling


async def test_a_status_without_our_key_is_found_by_its_message_uuid() -> None:
    [r] = await receipts(status_body(REF, "delivered", "+14155550123"))
    assert (r.key, r.provider_ref) == (None, REF)


async def test_a_status_notifyd_has_no_word_for_reports_nothing() -> None:
    assert await receipts(status_body(REF, "clicked", "+14155550123", KEY)) == []


def _tampered(body: bytes) -> dict[str, str]:
    return signed(body.replace(b"delivered", b"rejected"), SECRET, NOW_SEC)


def _none_alg(body: bytes) -> dict[str, str]:
    claims = jwt.decode(signed(body, SECRET, NOW_SEC)["Authorization"][7:], SECRET,
                        algorithms=["HS256"], options={"verify_iat": False})
    head = base64.urlsafe_b64encode(b'{"alg":"none","typ":"JWT"}').rstrip(b"=").decode()
    part = base64.urlsafe_b64encode(json.dumps(claims).encode()).rstrip(b"=").decode()
    return {"Authorization": f"Bearer {head}.{part}."}


@pytest.mark.parametrize(("headers", "why"), [
    (lambda b: {}, "missing the Authorization"),
    (lambda b: signed(b, "another-secret-0123456789abcdef0123", NOW_SEC), "signature does not"),
    (lambda b: {"Authorization": "Bearer " + jwt.encode({"iat": NOW_SEC}, SECRET * 2,
                                                          algorithm="HS512")}, "not HS256"),
    (_none_alg, "not HS256"),
    (_tampered, "payload_hash does not match"),
    (lambda b: signed(b, SECRET, NOW_SEC - 301), "older than tolerance_sec"),
    (lambda b: signed(b, SECRET, NOW_SEC + 301), "ahead of our clock"),
    (lambda b: signed(b, SECRET, NOW_SEC, api_key="zzzz9999"), "another account's api_key"),
    (lambda b: signed(b, SECRET, NOW_SEC, payload_hash=None), "no payload_hash"),
])
async def test_a_request_that_fails_verification_is_refused(headers: Any, why: str) -> None:
    body = status_body(REF, "delivered", "+14155550123", KEY)
    with pytest.raises(BadSignature, match=why):
        await receipts(body, headers(body))


async def test_a_verified_body_notifyd_cannot_read_is_a_bad_receipt() -> None:
    for body in (b"[1, 2]", json.dumps({"status": "delivered"}).encode()):
        with pytest.raises(BadReceipt):
            await receipts(body)


def test_an_unverified_request_is_answered_503_so_vonage_signs_its_retry() -> None:
    assert PROVIDER.bad_signature_status == 503
    assert not Settings().enabled() and SETTINGS.enabled()
    assert "vonage-signature" not in repr(SETTINGS) and "abcd1234" not in repr(SETTINGS)
