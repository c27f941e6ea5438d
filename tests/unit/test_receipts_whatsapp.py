"""Meta's WhatsApp webhook parser: posts signed here as Meta documents (X-Hub-Signature-256, the
hex HMAC-SHA256 of the body under the app secret, computed plainly with hmac: Meta ships no
Python verifier), bodies shaped as the Cloud API's status notifications; and the GET
subscription check.

Covered: each status's evidence and what finds the step (biz_opaque_callback_data, the wamid); a
number not on WhatsApp bounces, a marketing opt-out unsubscribes, anything else fails; several
statuses in one post; what is not a status (inbound messages) reports nothing; forged, unsigned
and changed bodies are refused; the check echoes hub.challenge only for our verify token.
"""

from __future__ import annotations

import json

import pytest
from fake_whatsapp import signed, status_body
from multidict import CIMultiDict

from notifyd.receipts.base import BadReceipt, BadSignature, Event, RawRequest, Receipt
from notifyd.receipts.whatsapp import PROVIDER, Settings, challenge, parse

SECRET = "3f9c1a7be24d5f60a8c9e1b2d3f4a5b6"
SETTINGS = Settings(app_secret=SECRET, verify_token="notifyd-verify-7Qx")
WAMID = "wamid.HBgLMTQxNTU1NTAxMjMVAgARGBI4QzU5RjE1QkQ4QjA3QkE0MzkA"
KEY = "n_01k9zq3x7c2m4v6b8n:2"
NUMBER = "+14155550123"


def request(body: bytes, headers: dict[str, str], query: dict[str, str] | None = None
            ) -> RawRequest:
    return RawRequest("POST", "https://notify.example.com/v1/webhooks/whatsapp",
                      CIMultiDict(headers), body, query or {})


async def receipts(body: bytes, headers: dict[str, str] | None = None) -> list[Receipt]:
    sent = signed(body, SECRET) if headers is None else headers
    return await parse(request(body, sent), SETTINGS, 1_790_000_000_000, _no_fetch)


async def _no_fetch(url: str) -> bytes:
    raise AssertionError("whatsapp needs nothing fetched")


@pytest.mark.parametrize(("status", "error", "event", "detail"), [
    ("sent", None, Event.ACCEPTED, None),
    ("delivered", None, Event.DELIVERED, None),
    ("read", None, Event.OPENED, None),
    ("failed", 131026, Event.BOUNCED, "131026"),  # no WhatsApp at this number
    ("failed", 131050, Event.UNSUBSCRIBED, "131050"),  # stopped marketing messages
    ("failed", 131049, Event.FAILED, "131049"),
    ("failed", None, Event.FAILED, None),
])
async def test_each_status_says_what_happened_and_finds_its_step(
        status: str, error: int | None, event: Event, detail: str | None) -> None:
    [r] = await receipts(status_body(WAMID, status, NUMBER, KEY, error))
    assert (r.provider, r.event_id, r.event, r.provider_ref, r.key, r.detail) == (
        "whatsapp", f"{WAMID}:{status}", event, WAMID, KEY, detail)
    assert r.occurred_at == 1_790_000_000_000 and r.address is None


async def test_several_statuses_in_one_post_and_inbound_messages_beside_them() -> None:
    doc = json.loads(status_body(WAMID, "delivered", NUMBER, KEY))
    value = doc["entry"][0]["changes"][0]["value"]
    value["statuses"].append({**value["statuses"][0], "status": "read"})
    value["messages"] = [{"from": "14155550123", "id": "wamid.in", "timestamp": "1790000001",
                          "type": "text", "text": {"body": "STOP"}}]
    doc["entry"].append({"id": "x", "changes": [{"field": "account_update", "value": {}}]})
    body = json.dumps(doc).encode()
    assert [(r.event, r.event_id) for r in await receipts(body)] == [
        (Event.DELIVERED, f"{WAMID}:delivered"), (Event.OPENED, f"{WAMID}:read")]


async def test_a_status_without_our_key_is_found_by_its_wamid() -> None:
    [r] = await receipts(status_body(WAMID, "delivered", NUMBER))
    assert (r.key, r.provider_ref) == (None, WAMID)


@pytest.mark.parametrize(("headers", "why"), [
    ({}, "missing the X-Hub-Signature-256"),
    ({"X-Hub-Signature-256": "sha1=0123"}, "missing the X-Hub-Signature-256"),
    ("other", "does not match"),
    ("changed", "does not match"),
])
async def test_forged_unsigned_and_changed_posts_are_refused(headers: object, why: str) -> None:
    body = status_body(WAMID, "delivered", NUMBER, KEY)
    if headers == "other":
        headers = signed(body, "a" * 32)
    elif headers == "changed":
        headers = signed(body, SECRET)
        body = body.replace(b"delivered", b"read")
    with pytest.raises(BadSignature, match=why):
        await receipts(body, headers)  # type: ignore[arg-type]


async def test_a_verified_post_notifyd_cannot_read_is_a_bad_receipt() -> None:
    for doc in ({"object": "page", "entry": []},
                {"object": "whatsapp_business_account", "entry": [{"changes": [
                    {"field": "messages", "value": {"statuses": [{"status": "read"}]}}]}]}):
        with pytest.raises(BadReceipt):
            await receipts(json.dumps(doc).encode())


def test_the_subscription_check_echoes_the_challenge_for_our_token_only() -> None:
    asked = {"hub.mode": "subscribe", "hub.verify_token": "notifyd-verify-7Qx",
             "hub.challenge": "1158201444"}
    assert challenge(request(b"", {}, asked), SETTINGS) == b"1158201444"
    for wrong in ({"hub.verify_token": "guess"}, {"hub.mode": "unsubscribe"},
                  {"hub.verify_token": ""}):
        with pytest.raises(BadSignature):
            challenge(request(b"", {}, {**asked, **wrong}), SETTINGS)
    with pytest.raises(BadReceipt):
        challenge(request(b"", {}, {**asked, "hub.challenge": ""}), SETTINGS)
    assert PROVIDER.handshake and PROVIDER.challenge is challenge


def test_the_app_secret_needs_its_verify_token() -> None:
    assert Settings(app_secret=SECRET).problems() == [
        ("verify_token", "set it too: Meta checks the URL with it before it posts")]
    assert SECRET not in repr(SETTINGS) and "notifyd-verify" not in repr(SETTINGS)
