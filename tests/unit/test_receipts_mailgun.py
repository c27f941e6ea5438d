"""Mailgun's webhook parser: requests signed here as Mailgun's "Securing Webhooks" page documents
(hex HMAC-SHA256 of timestamp + token under the webhook signing key, computed plainly with hmac:
Mailgun ships no verifier), bodies shaped as its "Webhook Payloads" page shows them.

Mailgun's signature does not cover event-data, so each verified request names its token (the
provider's `nonce`) for the store to refuse a second time: tests/engine/test_webhooks.py replays
tokens through the store, and tests/process/test_webhook_replay.py across a restart.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
from typing import Any

import pytest
from multidict import CIMultiDict

from notifyd.receipts import mailgun
from notifyd.receipts.base import (
    BadReceipt,
    BadSignature,
    Event,
    Nonce,
    RawRequest,
    Receipt,
    message_key,
)
from notifyd.receipts.mailgun import PROVIDER, MailgunSettings, nonce, parse

NOW_SEC = 1_790_000_000
NOW = NOW_SEC * 1000
SIGNING_KEY = "d3c1f0a9b8e7d6c5b4a39281706f5e4d"
OTHER_KEY = "0f1e2d3c4b5a69788796a5b4c3d2e1f0"
SETTINGS = MailgunSettings(signing_key=SIGNING_KEY)
ADDRESS = "ada.lovelace@example.org"
OUR_MESSAGE_ID = "n_01k9zq3x7c2m4v6b8n.2@mail.acme.test"
KEY = "n_01k9zq3x7c2m4v6b8n:2"


def signature_block(key: str = SIGNING_KEY, timestamp: int = NOW_SEC,
                    token: str | None = None) -> dict[str, str]:
    token = token or secrets.token_hex(25)  # Mailgun's tokens: 50 random characters
    ts = str(timestamp)
    digest = hmac.new(key.encode(), (ts + token).encode(), hashlib.sha256).hexdigest()
    return {"token": token, "timestamp": ts, "signature": digest}


def event_data(kind: str, **extra: Any) -> dict[str, Any]:
    data: dict[str, Any] = {
        "id": f"CCXMjJ7nQi2N3BPigGOdgQ-{kind}",
        "timestamp": NOW_SEC - 30.375,
        "log-level": "info",
        "event": kind,
        "recipient": ADDRESS,
        "recipient-domain": "example.org",
        "envelope": {"sender": "alerts@mail.acme.test", "transport": "smtp", "targets": ADDRESS},
        "flags": {"is-authenticated": True, "is-test-mode": False},
        "message": {"headers": {"to": ADDRESS, "message-id": OUR_MESSAGE_ID,
                                "from": "Acme Alerts <alerts@mail.acme.test>",
                                "subject": "Disk almost full"}, "size": 341},
        "tags": [],
        "user-variables": {},
    }
    data.update(extra)
    return data


def failed(severity: str, reason: str, code: int | None = None,
           enhanced: str | None = None) -> dict[str, Any]:
    status: dict[str, Any] = {"attempt-no": 1, "message": f"{code} no such user {ADDRESS}",
                              "description": "", "session-seconds": 0.4}
    if code is not None:
        status["code"] = code
    if enhanced is not None:
        status["enhanced-code"] = enhanced
    return event_data("failed", severity=severity, reason=reason, **{"delivery-status": status,
                                                                     "log-level": "error"})


def request(data: Any, block: dict[str, str] | None = None, *, indent: int | None = 4) -> RawRequest:
    body = json.dumps({"signature": block or signature_block(), "event-data": data},
                      indent=indent).encode()
    return raw(body)


def raw(body: bytes) -> RawRequest:
    return RawRequest("POST", "https://notify.acme.test/v1/webhooks/mailgun",
                      CIMultiDict({"Content-Type": "application/json"}), body, {})


async def no_fetch(url: str) -> bytes:
    raise AssertionError("the mailgun parser fetches nothing")


async def parse_ok(req: RawRequest, settings: MailgunSettings = SETTINGS) -> list[Receipt]:
    return await parse(req, settings, NOW, no_fetch)


# -- valid requests: the mapping, table-driven --

MAPPING = [
    (event_data("accepted", method="smtp"), Event.ACCEPTED, None),
    (event_data("delivered", **{"delivery-status": {"code": 250, "message": "OK"}}),
     Event.DELIVERED, None),
    (failed("temporary", "generic", 452, "4.2.2"), Event.DEFERRED, "generic:4.2.2"),
    (failed("temporary", "espblock", 421), Event.DEFERRED, "espblock:421"),
    (failed("permanent", "bounce", 550, "5.1.1"), Event.BOUNCED, "bounce:5.1.1"),
    (failed("permanent", "suppress-bounce", 605), Event.BOUNCED, "suppress-bounce:605"),
    (failed("permanent", "suppress-unsubscribe", 606), Event.UNSUBSCRIBED,
     "suppress-unsubscribe:606"),
    (failed("permanent", "suppress-complaint", 607), Event.COMPLAINED, "suppress-complaint:607"),
    (failed("permanent", "generic", 554), Event.FAILED, "generic:554"),
    (failed("permanent", "old", 421), Event.FAILED, "old:421"),
    (failed("permanent", "Some Text With Spaces"), Event.FAILED, "failed"),
    (failed("sometimes", "bounce", 550, "5.1.1"), Event.FAILED, "bounce:5.1.1"),
    (event_data("complained"), Event.COMPLAINED, None),
    (event_data("unsubscribed"), Event.UNSUBSCRIBED, None),
    (event_data("opened", **{"client-info": {"client-name": "Gmail"}}), Event.OPENED, None),
]


@pytest.mark.parametrize(("data", "expected", "detail"), MAPPING,
                         ids=[f"{m[0]['event']}-{i}" for i, m in enumerate(MAPPING)])
async def test_each_event_maps(data: dict[str, Any], expected: Event, detail: str | None) -> None:
    [receipt] = await parse_ok(request(data))
    assert receipt.event is expected
    assert receipt.detail == detail
    assert receipt.provider == "mailgun" and receipt.channel_type == "email"


@pytest.mark.parametrize("kind", ["clicked", "stored", "rejected", "list_member_uploaded", "new"])
async def test_skipped_events(kind: str) -> None:
    assert await parse_ok(request(event_data(kind, url="https://acme.test/x"))) == []


async def test_fields_of_a_receipt() -> None:
    data = event_data("delivered", **{"user-variables": {"notifyd_key": KEY, "other": 1}})
    [r] = await parse_ok(request(data))
    assert r.event_id == "CCXMjJ7nQi2N3BPigGOdgQ-delivered"
    assert r.occurred_at == NOW_SEC * 1000 - 30375
    assert r.provider_ref == r.message_id == OUR_MESSAGE_ID
    assert message_key(r.message_id) == KEY
    assert r.key == KEY
    assert r.address == ADDRESS


async def test_angle_brackets_and_missing_fields() -> None:
    data = {"event": "delivered", "message": {"headers": {"message-id": f"<{OUR_MESSAGE_ID}>"}},
            "user-variables": "not an object", "timestamp": "later"}
    [r] = await parse_ok(request(data))
    assert r.message_id == OUR_MESSAGE_ID
    assert (r.key, r.address, r.occurred_at) == (None, None, None)
    assert r.event_id.startswith("sha256:")


async def test_integer_timestamp_and_parent_signature() -> None:
    block: dict[str, Any] = signature_block(key=OTHER_KEY)  # a subaccount's own key...
    parent = signature_block(token=block["token"])  # ...and the parent's, which we hold
    block["parent-signature"] = parent["signature"]
    block["timestamp"] = int(block["timestamp"])
    [r] = await parse_ok(request(event_data("delivered"), block))
    assert r.event is Event.DELIVERED


async def test_tolerance_boundaries_are_accepted() -> None:
    for ts in (NOW_SEC - 300, NOW_SEC + 300):
        assert len(await parse_ok(request(event_data("delivered"), signature_block(timestamp=ts)))) == 1


# -- refused: BadSignature --


async def refused(req: RawRequest, settings: MailgunSettings = SETTINGS, now: int = NOW) -> str:
    with pytest.raises(BadSignature) as info:
        await parse(req, settings, now, no_fetch)
    message = str(info.value)
    assert ADDRESS not in message and SIGNING_KEY not in message
    return message


async def test_forged_signature() -> None:
    block = signature_block()
    block["signature"] = hashlib.sha256(b"forged").hexdigest()
    await refused(request(event_data("delivered"), block))


async def test_wrong_key() -> None:
    await refused(request(event_data("delivered"), signature_block(key=OTHER_KEY)))
    await refused(request(event_data("delivered")), MailgunSettings(signing_key=OTHER_KEY))


async def test_no_key_configured() -> None:
    await refused(request(event_data("delivered")), MailgunSettings())


@pytest.mark.parametrize("field", ["signature", "timestamp", "token"])
async def test_missing_signature_field(field: str) -> None:
    block = signature_block()
    del block[field]
    await refused(request(event_data("delivered"), block))


@pytest.mark.parametrize("body", [{"event-data": {"event": "delivered"}},
                                  {"signature": "abc", "event-data": {}}, [1, 2]])
async def test_missing_signature_block(body: Any) -> None:
    await refused(raw(json.dumps(body).encode()))


@pytest.mark.parametrize(("field", "value"), [("timestamp", "2026-09-21"), ("timestamp", True),
                                              ("token", ""), ("token", "has space"),
                                              ("signature", "zz"), ("signature", 12)])
async def test_malformed_signature_fields(field: str, value: Any) -> None:
    block: dict[str, Any] = signature_block()
    block[field] = value
    await refused(request(event_data("delivered"), block))


@pytest.mark.parametrize("timestamp", [NOW_SEC - 301, NOW_SEC + 301, NOW_SEC - 8 * 3600])
async def test_stale_and_future_timestamps(timestamp: int) -> None:
    await refused(request(event_data("delivered"), signature_block(timestamp=timestamp)))


async def test_each_request_names_its_token_until_its_window_ends() -> None:
    block = signature_block()
    req = request(event_data("delivered"), block)
    assert len(await parse_ok(req)) == 1
    until = (NOW_SEC + 300) * 1000  # the signed time plus the tolerance: then the clock refuses
    assert nonce(req, SETTINGS) == Nonce("mailgun", block["token"], until)
    # The same block with other event data, or the body written out again, names the same token.
    forged = request(failed("permanent", "suppress-complaint", 607), block, indent=None)
    assert nonce(forged, SETTINGS) == nonce(req, SETTINGS)
    assert nonce(req, MailgunSettings(SIGNING_KEY, tolerance_sec=60)).until == (NOW_SEC + 60) * 1000
    assert PROVIDER.nonce is nonce


async def test_truncated_body() -> None:
    body = request(event_data("delivered")).body
    await refused(raw(body[: len(body) // 2]))
    await refused(raw(b""))


async def test_legacy_form_encoded_webhook() -> None:
    block = signature_block()
    await refused(raw(f"timestamp={block['timestamp']}&token={block['token']}"
                      f"&signature={block['signature']}&event=delivered".encode()))


# -- verified but unreadable: BadReceipt --


@pytest.mark.parametrize("data", [None, "delivered", {"id": "x"}, {"event": 7}])
async def test_verified_but_unreadable(data: Any) -> None:
    with pytest.raises(BadReceipt):
        await parse_ok(request(data))


# -- settings --


def test_settings() -> None:
    assert not MailgunSettings().enabled()
    assert SETTINGS.enabled() and SETTINGS.problems() == []
    problems = MailgunSettings(signing_key="ключ").problems()
    assert [k for k, _ in problems] == ["signing_key"] and "ключ" not in problems[0][1]
    assert [k for k, _ in MailgunSettings(SIGNING_KEY, tolerance_sec=0).problems()] == [
        "tolerance_sec"]
    assert PROVIDER.name == "mailgun" and PROVIDER.parse is mailgun.parse
