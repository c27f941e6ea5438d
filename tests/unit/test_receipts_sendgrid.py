"""SendGrid's Event Webhook parser: requests signed here with `cryptography` exactly as SendGrid
documents (ECDSA P-256 / SHA-256 over timestamp + raw body), each one also checked with the official
`sendgrid` package's EventWebhook verifier, so the signer and the parser cannot share a mistake.
Bodies are shaped as SendGrid's Event Webhook reference shows them: a JSON array, CRLF between
events.
"""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from multidict import CIMultiDict
from sendgrid.helpers.eventwebhook import EventWebhook  # type: ignore[import-untyped]

from notifyd.receipts.base import BadReceipt, BadSignature, Event, RawRequest, Receipt, message_key
from notifyd.receipts.sendgrid import (
    PROVIDER,
    SIGNATURE_HEADER,
    TIMESTAMP_HEADER,
    SendgridSettings,
    parse,
)

NOW_SEC = 1_790_000_000
NOW = NOW_SEC * 1000
ADDRESS = "ada.lovelace@example.org"
OUR_MESSAGE_ID = "<n_01k9zq3x7c2m4v6b8n.2@mail.acme.test>"
SG_MESSAGE_ID = "euo2iKxdSayPF4YE4--I7A.recvd-5f54b5d587-pczjm-1-67BADEEA-6.0"
KEY = "n_01k9zq3x7c2m4v6b8n:2"


def new_key() -> tuple[ec.EllipticCurvePrivateKey, str]:
    private = ec.generate_private_key(ec.SECP256R1())
    der = private.public_key().public_bytes(serialization.Encoding.DER,
                                            serialization.PublicFormat.SubjectPublicKeyInfo)
    return private, base64.b64encode(der).decode()


PRIVATE, PUBLIC = new_key()
OTHER_PRIVATE, OTHER_PUBLIC = new_key()
SETTINGS = SendgridSettings(public_key=PUBLIC)


def sign(private: ec.EllipticCurvePrivateKey, timestamp: str, body: bytes) -> str:
    der = private.sign(timestamp.encode() + body, ec.ECDSA(hashes.SHA256()))
    return base64.b64encode(der).decode()


def batch(*events: dict[str, Any]) -> bytes:
    """As SendGrid posts it: a JSON array, one event per line, CRLF between them."""
    return ("[" + ",\r\n".join(json.dumps(e) for e in events) + "]\r\n").encode()


def request(body: bytes, *, timestamp: int = NOW_SEC, private: ec.EllipticCurvePrivateKey = PRIVATE,
            signature: str | None = None, drop: str | None = None) -> RawRequest:
    ts = str(timestamp)
    headers = CIMultiDict({SIGNATURE_HEADER.lower(): signature or sign(private, ts, body),
                           TIMESTAMP_HEADER: ts, "Content-Type": "application/json"})
    if drop:
        del headers[drop]
    return RawRequest("POST", "https://notify.acme.test/v1/webhooks/sendgrid", headers, body, {})


def oracle_accepts(req: RawRequest, public: str = PUBLIC) -> bool:
    """The official SendGrid helper's verdict on the same request."""
    hook = EventWebhook()
    return bool(hook.verify_signature(req.body.decode(), req.headers[SIGNATURE_HEADER],
                                      req.headers[TIMESTAMP_HEADER],
                                      hook.convert_public_key_to_ecdsa(public)))


def event(kind: str, **extra: Any) -> dict[str, Any]:
    base = {"email": ADDRESS, "timestamp": NOW_SEC - 60, "smtp-id": OUR_MESSAGE_ID,
            "event": kind, "category": ["alerts"], "sg_event_id": f"ev-{kind}-{len(extra)}",
            "sg_message_id": SG_MESSAGE_ID}
    base.update(extra)
    return base


async def parse_ok(body: bytes) -> list[Receipt]:
    req = request(body)
    assert oracle_accepts(req)
    return await parse(req, SETTINGS, NOW, no_fetch)


async def no_fetch(url: str) -> bytes:
    raise AssertionError("the sendgrid parser fetches nothing")


# -- valid requests: the mapping, table-driven --

MAPPING = [
    (event("processed"), Event.ACCEPTED, None),
    (event("delivered", response="250 2.0.0 OK 1513299569 q5si1234"), Event.DELIVERED, None),
    (event("deferred", response="400 try again later", attempt="5"), Event.DEFERRED, "400"),
    (event("deferred", response="try again later"), Event.DEFERRED, None),
    (event("bounce", type="bounce", status="5.1.1", reason="550 5.1.1 no such user " + ADDRESS,
           bounce_classification="Invalid Address"), Event.BOUNCED, "bounce:5.1.1"),
    (event("bounce", type="blocked", status="5.7.1", reason="550 5.7.1 blocked by policy"),
     Event.FAILED, "blocked:5.7.1"),
    (event("bounce", type="blocked", reason="unable to get mx info: failed to get IPs"),
     Event.FAILED, "blocked"),
    (event("bounce", type="expired", status="4.4.7"), Event.FAILED, "expired:4.4.7"),
    (event("dropped", reason="Bounced Address", status="5.0.0"), Event.BOUNCED,
     "dropped:Bounced Address"),
    (event("dropped", reason="Invalid"), Event.BOUNCED, "dropped:Invalid"),
    (event("dropped", reason="Unsubscribed Address"), Event.UNSUBSCRIBED,
     "dropped:Unsubscribed Address"),
    (event("dropped", reason="Spam Reporting Address"), Event.COMPLAINED,
     "dropped:Spam Reporting Address"),
    (event("dropped", reason="Spam Content"), Event.FAILED, "dropped:Spam Content"),
    (event("dropped", reason="Invalid SMTPAPI header"), Event.FAILED,
     "dropped:Invalid SMTPAPI header"),
    (event("dropped", reason="something SendGrid wrote about " + ADDRESS), Event.FAILED,
     "dropped"),
    (event("spamreport"), Event.COMPLAINED, None),
    (event("unsubscribe"), Event.UNSUBSCRIBED, None),
    (event("group_unsubscribe", asm_group_id=10), Event.UNSUBSCRIBED, None),
    (event("open", useragent="Mozilla/5.0", ip="255.255.255.255", sg_machine_open=False),
     Event.OPENED, None),
    (event("open", useragent="Mozilla/5.0"), Event.OPENED, None),
]


@pytest.mark.parametrize(("item", "expected", "detail"), MAPPING,
                         ids=[f"{m[0]['event']}-{i}" for i, m in enumerate(MAPPING)])
async def test_each_event_maps(item: dict[str, Any], expected: Event, detail: str | None) -> None:
    [receipt] = await parse_ok(batch(item))
    assert receipt.event is expected
    assert receipt.detail == detail
    assert receipt.provider == "sendgrid"
    assert receipt.channel_type == "email"


async def test_one_receipt_per_event_in_order_and_skips() -> None:
    body = batch(event("processed"), event("click", url="https://acme.test/x"),
                 event("open", sg_machine_open=True), event("group_resubscribe"),
                 {"event": "account_status_change", "type": "compliance_suspend",
                  "timestamp": NOW_SEC, "sg_event_id": "acct-1"},
                 event("some_future_event"), event("delivered"))
    receipts = await parse_ok(body)
    assert [r.event for r in receipts] == [Event.ACCEPTED, Event.DELIVERED]


async def test_fields_of_a_receipt() -> None:
    [r] = await parse_ok(batch(event("delivered", notifyd_key=KEY, sg_event_id="hqFbp3HH9WxIM0R")))
    assert r.event_id == "hqFbp3HH9WxIM0R"
    assert r.occurred_at == (NOW_SEC - 60) * 1000
    assert r.provider_ref == "euo2iKxdSayPF4YE4--I7A"  # the X-Message-Id of the send
    assert r.message_id == "n_01k9zq3x7c2m4v6b8n.2@mail.acme.test"
    assert message_key(r.message_id) == KEY
    assert r.key == KEY
    assert r.address == ADDRESS


async def test_missing_optional_fields_are_none() -> None:
    item = {"event": "delivered", "sg_event_id": "e1", "timestamp": "soon", "notifyd_key": "a b",
            "smtp-id": "<has space@x>"}
    [r] = await parse_ok(batch(item))
    assert (r.occurred_at, r.provider_ref, r.key, r.message_id, r.address) == (None,) * 5


async def test_event_without_sg_event_id_gets_a_stable_digest() -> None:
    old_drop = {"email": ADDRESS, "smtp-id": "<4FB29F5D.5080404@sendgrid.com>",
                "timestamp": NOW_SEC, "reason": "Invalid", "event": "dropped"}
    [first] = await parse_ok(batch(old_drop))
    [again] = await parse_ok(batch(dict(reversed(list(old_drop.items())))))
    assert first.event_id.startswith("sha256:") and first.event_id == again.event_id
    assert ADDRESS not in first.event_id


async def test_non_object_elements_are_skipped() -> None:
    assert [r.event for r in await parse_ok(batch(event("processed"))[:-3] + b',\r\n7]')] == [
        Event.ACCEPTED]


async def test_tolerance_boundaries_are_accepted() -> None:
    body = batch(event("processed"))
    for ts in (NOW_SEC - 300, NOW_SEC + 300):
        assert len(await parse(request(body, timestamp=ts), SETTINGS, NOW, no_fetch)) == 1


async def test_a_pem_armoured_key_is_accepted() -> None:
    pem = "-----BEGIN PUBLIC KEY-----\n" + PUBLIC[:64] + "\n" + PUBLIC[64:] + "\n-----END PUBLIC KEY-----"
    body = batch(event("processed"))
    assert len(await parse(request(body), SendgridSettings(public_key=pem), NOW, no_fetch)) == 1


# -- refused: BadSignature --

BODY = batch(event("delivered"), event("bounce", type="bounce", status="5.1.1"))


async def refused(req: RawRequest, settings: SendgridSettings = SETTINGS) -> str:
    with pytest.raises(BadSignature) as info:
        await parse(req, settings, NOW, no_fetch)
    message = str(info.value)
    assert ADDRESS not in message and PUBLIC[:20] not in message
    assert req.headers.get(SIGNATURE_HEADER, "#") not in message
    return message


async def test_forged_signature() -> None:
    forged = base64.b64encode(b"\x30\x06\x02\x01\x01\x02\x01\x01").decode()
    req = request(BODY, signature=forged)
    assert not oracle_accepts(req)
    await refused(req)


async def test_signed_by_another_key() -> None:
    req = request(BODY, private=OTHER_PRIVATE)
    assert oracle_accepts(req, OTHER_PUBLIC) and not oracle_accepts(req)
    await refused(req)


async def test_checked_against_another_key() -> None:
    await refused(request(BODY), SendgridSettings(public_key=OTHER_PUBLIC))


@pytest.mark.parametrize("header", [SIGNATURE_HEADER, TIMESTAMP_HEADER])
async def test_missing_header(header: str) -> None:
    await refused(request(BODY, drop=header))


@pytest.mark.parametrize("signature", ["not base64!", "QUJD", "A" * 400])
async def test_malformed_signature(signature: str) -> None:
    await refused(request(BODY, signature=signature))


@pytest.mark.parametrize("timestamp", [NOW_SEC - 301, NOW_SEC + 301, NOW_SEC - 86400])
async def test_stale_and_future_timestamps(timestamp: int) -> None:
    req = request(BODY, timestamp=timestamp)
    assert oracle_accepts(req)  # the signature is good: only the clock refuses it
    await refused(req)


async def test_timestamp_not_epoch_seconds() -> None:
    ts = "2026-09-21T12:00:00Z"
    body = BODY
    req = RawRequest("POST", "u", CIMultiDict({SIGNATURE_HEADER: sign(PRIVATE, ts, body),
                                               TIMESTAMP_HEADER: ts}), body, {})
    await refused(req)


async def test_the_timestamp_is_part_of_what_is_signed() -> None:
    good = request(BODY, timestamp=NOW_SEC - 10)
    moved = CIMultiDict(good.headers)
    moved[TIMESTAMP_HEADER] = str(NOW_SEC)
    await refused(RawRequest("POST", good.url, moved, BODY, {}))


async def test_truncated_body() -> None:
    good = request(BODY)
    await refused(RawRequest("POST", good.url, good.headers, BODY[:-10], {}))


async def test_reserialised_body() -> None:
    good = request(BODY)
    compact = json.dumps(json.loads(BODY)).encode()  # same events, CRLFs gone
    assert json.loads(compact) == json.loads(BODY)
    await refused(RawRequest("POST", good.url, good.headers, compact, {}))


async def test_no_key_configured() -> None:
    await refused(request(BODY), SendgridSettings())


# -- verified but unreadable: BadReceipt --

@pytest.mark.parametrize("body", [b"", b"not json", b'{"event": "delivered"}', b'"x"',
                                  b"\xff\xfe\x00"])
async def test_verified_but_unreadable(body: bytes) -> None:
    with pytest.raises(BadReceipt):
        await parse(request(body), SETTINGS, NOW, no_fetch)


# -- settings --

def test_settings() -> None:
    assert not SendgridSettings().enabled()
    assert SETTINGS.enabled() and SETTINGS.problems() == []
    rsa_der = rsa.generate_private_key(public_exponent=65537, key_size=1024).public_key(
    ).public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    p384 = ec.generate_private_key(ec.SECP384R1()).public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    for bad in ("not a key", base64.b64encode(rsa_der).decode(), base64.b64encode(p384).decode()):
        problems = SendgridSettings(public_key=bad).problems()
        assert [k for k, _ in problems] == ["public_key"]
        assert bad not in problems[0][1]
    assert [k for k, _ in SendgridSettings(PUBLIC, tolerance_sec=0).problems()] == ["tolerance_sec"]
    assert PROVIDER.name == "sendgrid" and PROVIDER.settings is SendgridSettings
