"""The delivery-receipt endpoint's parser against requests signed by the Standard Webhooks
reference library (standardwebhooks.Webhook.sign), in both body forms: the ids spelled out, and
the key a push payload carries."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from datetime import UTC, datetime
from typing import Any

import pytest
from multidict import CIMultiDict
from standardwebhooks import Webhook

from notifyd.receipts.base import BadReceipt, BadSignature, Event, RawRequest, Receipt
from notifyd.receipts.receipt import PROVIDER, Settings, TenantSecret, parse

SECRET = "whsec_" + base64.b64encode(b"delivery-receipt-test-key-32byte").decode()
OLD_SECRET = "whsec_" + base64.b64encode(b"the-previous-receipt-secret-0001").decode()
SETTINGS = Settings(secret=SECRET)
NOW = 1_790_000_000_000
NID = "n_0kx7c3v9q2m4r8t1w6"
DEVICE = "d_9f86d081884c7d65"
URL = "https://notifyd.example.com/v1/webhooks/delivery-receipt"


async def no_fetch(url: str) -> bytes:
    raise AssertionError("the delivery-receipt parser never fetches")


def request(payload: dict[str, Any] | None = None, *, body: bytes | None = None,
            msg_id: str = "msg_2mYvLq8N", at_ms: int = NOW, secret: str = SECRET,
            headers: dict[str, str] | None = None) -> RawRequest:
    raw = json.dumps(payload, separators=(",", ":")).encode() if body is None else body
    when = datetime.fromtimestamp(at_ms // 1000, tz=UTC)
    h = CIMultiDict({"Content-Type": "application/json", "webhook-id": msg_id,
                     "webhook-timestamp": str(at_ms // 1000),
                     "webhook-signature": Webhook(secret).sign(msg_id, when, raw.decode())})
    h.update(headers or {})
    return RawRequest("POST", URL, h, raw, {})


async def run(req: RawRequest, settings: Settings = SETTINGS, now: int = NOW) -> list[Receipt]:
    return await parse(req, settings, now, no_fetch)


async def refused(exc: type[Exception], req: RawRequest, settings: Settings = SETTINGS,
                  now: int = NOW) -> str:
    with pytest.raises(exc) as info:
        await run(req, settings, now)
    message = str(info.value)
    assert message and SECRET not in message and SECRET[6:] not in message
    return message


@pytest.mark.parametrize(("status", "event"), [("delivered", Event.DELIVERED),
                                               ("shown", Event.SHOWN), ("opened", Event.OPENED)])
async def test_each_status_in_the_ids_form(status: str, event: Event) -> None:
    [r] = await run(request({"notification_id": NID, "step_no": 2, "status": status}))
    assert r == Receipt("delivery-receipt", "msg_2mYvLq8N", event, None, key=f"{NID}:2")


async def test_a_device_and_a_timestamp() -> None:
    [r] = await run(request({"notification_id": NID, "step_no": 0, "device_id": DEVICE,
                             "status": "shown", "timestamp": "2026-09-21T14:13:19.250Z"}))
    assert r == Receipt("delivery-receipt", "msg_2mYvLq8N", Event.SHOWN, NOW - 750,
                        key=f"{NID}:0:{DEVICE}", channel_type="push")


@pytest.mark.parametrize(("key", "step_key", "detail"), [
    (f"{NID}:1", f"{NID}:1", None),
    (f"{NID}:1:{DEVICE}", f"{NID}:1:{DEVICE}", None),  # webpush `key`, fcm `notifyd_key`
])
async def test_the_key_form(key: str, step_key: str, detail: str | None) -> None:
    [r] = await run(request({"key": key, "status": "opened",
                             "timestamp": "2026-09-21T16:13:20+02:00"}))
    assert (r.event, r.key, r.detail, r.occurred_at) == (Event.OPENED, step_key, detail, NOW)


async def test_the_seed_example_with_a_provider_word() -> None:
    [r] = await run(request({"provider": "apns", "notification_id": NID, "step_no": 3,
                             "status": "delivered", "timestamp": "2026-09-21T14:13:20Z"}))
    assert (r.event, r.key, r.occurred_at) == (Event.DELIVERED, f"{NID}:3", NOW)


async def test_a_replay_inside_the_window_is_the_same_event() -> None:
    payload = {"notification_id": NID, "step_no": 2, "status": "opened"}
    first = await run(request(payload))
    again = await run(request(payload), now=NOW + 200_000)
    assert first == again  # the signed webhook-id: the store keeps one


async def test_a_rotation_accepts_either_secret_and_several_signatures() -> None:
    both = Settings(secret=SECRET, previous_secret=OLD_SECRET)
    payload = {"notification_id": NID, "step_no": 2, "status": "opened"}
    assert await run(request(payload, secret=OLD_SECRET), both)
    await refused(BadSignature, request(payload, secret=OLD_SECRET))
    good = request(payload)
    several = f"v1a,bm90LWVkMjU1MTk= v1,{base64.b64encode(b'x' * 32).decode()} " \
              f"{good.headers['webhook-signature']}"
    assert await run(request(payload, headers={"webhook-signature": several}))


@pytest.mark.parametrize(("field", "value", "says"), [
    ("status", "read", "status"),
    ("status", None, "status"),
    ("status", 1, "status"),
    ("notification_id", "n_short", "notification_id"),
    ("notification_id", "N_0KX7C3V9Q2M4R8T1W6", "notification_id"),
    ("notification_id", 7, "notification_id"),
    ("step_no", -1, "step_no"),
    ("step_no", "2", "step_no"),
    ("step_no", True, "step_no"),
    ("step_no", 1.5, "step_no"),
    ("step_no", 10**9, "step_no"),
    ("device_id", "d_XYZ", "device_id"),
    ("device_id", 5, "device_id"),
    ("timestamp", "yesterday", "timestamp"),
    ("timestamp", "2026-09-21T14:13:20", "timestamp"),  # no offset
    ("timestamp", 1790000000, "timestamp"),
    ("provider", "APNs Gateway!", "provider"),
    ("stauts", "opened", "'stauts'"),
])
async def test_each_bad_field_is_named(field: str, value: Any, says: str) -> None:
    payload = {"notification_id": NID, "step_no": 2, "status": "opened", field: value}
    assert says in await refused(BadReceipt, request(payload))


@pytest.mark.parametrize(("payload", "says"), [
    ({"key": f"{NID}", "status": "opened"}, "key"),
    ({"key": f"{NID}:1:d_nothex", "status": "opened"}, "key"),
    ({"key": f"{NID}:1:{DEVICE}:extra", "status": "opened"}, "key"),
    ({"key": 12, "status": "opened"}, "key"),
    ({"key": f"{NID}:1", "step_no": 1, "status": "opened"}, "not both"),
    ({"status": "opened"}, "notification_id"),
    ({"notification_id": NID, "status": "opened"}, "step_no"),
])
async def test_each_bad_shape_is_named(payload: dict[str, Any], says: str) -> None:
    assert says in await refused(BadReceipt, request(payload))


@pytest.mark.parametrize("body", [b"", b"not json", b"[]", b'"opened"', b"\xff\xfe{}"])
async def test_a_verified_body_that_is_not_an_object_is_a_bad_receipt(body: bytes) -> None:
    req = request(body=body) if body.isascii() else _signed_bytes(body)
    await refused(BadReceipt, req)


def _signed_bytes(body: bytes) -> RawRequest:
    """Signed over bytes that are not UTF-8 (the reference library signs text only)."""
    key = base64.b64decode(SECRET[6:])
    mac = hmac.new(key, b"msg_1." + str(NOW // 1000).encode() + b"." + body, hashlib.sha256)
    headers = CIMultiDict({"webhook-id": "msg_1", "webhook-timestamp": str(NOW // 1000),
                           "webhook-signature": "v1," + base64.b64encode(mac.digest()).decode()})
    return RawRequest("POST", URL, headers, body, {})


PAYLOAD = {"notification_id": NID, "step_no": 2, "status": "opened"}


@pytest.mark.parametrize("header", ["webhook-id", "webhook-timestamp", "webhook-signature"])
async def test_each_missing_header_is_refused_by_name(header: str) -> None:
    req = request(PAYLOAD)
    headers = CIMultiDict(req.headers)
    del headers[header]
    assert header in await refused(BadSignature, RawRequest("POST", URL, headers, req.body, {}))


@pytest.mark.parametrize(("at_ms", "says"), [(NOW - 301_000, "old"), (NOW + 301_000, "ahead")])
async def test_stale_and_future_timestamps_are_refused(at_ms: int, says: str) -> None:
    assert says in await refused(BadSignature, request(PAYLOAD, at_ms=at_ms))
    assert await run(request(PAYLOAD, at_ms=at_ms), now=at_ms)  # the same request in its time


@pytest.mark.parametrize("value", ["", "1790000000.5", "-1", "0x6A", "17900000000000000"])
async def test_a_malformed_timestamp_is_refused(value: str) -> None:
    await refused(BadSignature, request(PAYLOAD, headers={"webhook-timestamp": value}))


async def test_forged_and_changed_requests_are_refused() -> None:
    good = request(PAYLOAD)
    compact = good.body
    other = "whsec_" + base64.b64encode(b"someone-else-entirely-0123456789").decode()
    await refused(BadSignature, request(PAYLOAD, secret=other))
    await refused(BadSignature, request(PAYLOAD, headers={"webhook-signature": "v1,AAAA"}))
    await refused(BadSignature, request(PAYLOAD, headers={"webhook-signature": "v1,%%%"}))
    await refused(BadSignature, request(PAYLOAD, headers={"webhook-id": "msg_other"}))
    pretty = json.dumps(PAYLOAD, indent=2).encode()  # re-serialised: same JSON, other bytes
    for body in (compact[:-1], pretty, compact.replace(b"opened", b"shown")):
        await refused(BadSignature, RawRequest("POST", URL, good.headers, body, {}))


async def test_a_malformed_id_is_refused() -> None:
    await refused(BadSignature, request(PAYLOAD, msg_id="has space"))
    await refused(BadSignature, request(PAYLOAD, msg_id="x" * 257))


async def test_without_a_secret_everything_is_refused() -> None:
    await refused(BadSignature, request(PAYLOAD), Settings())


def test_settings() -> None:
    assert PROVIDER.name == "delivery-receipt"
    assert not Settings().enabled() and Settings().problems() == []
    assert SETTINGS.enabled() and SETTINGS.problems() == []
    bad = Settings(secret="whsec_not base64", previous_secret="whsec_c2hvcnQ=")
    problems = bad.problems()
    assert [k for k, _ in problems] == ["secret", "previous_secret"]
    assert not any("not base64" in m or "c2hvcnQ" in m for _, m in problems)
    assert [k for k, _ in Settings(previous_secret=OLD_SECRET).problems()] == ["previous_secret"]


ACME = "whsec_" + base64.b64encode(b"acme's-own-delivery-receipt-key").decode()
GLOBEX = "whsec_" + base64.b64encode(b"globex-own-delivery-receipt-key").decode()
TENANTS = Settings(tenants={"acme": TenantSecret(ACME, OLD_SECRET), "globex": TenantSecret(GLOBEX)})


async def test_a_tenants_secret_binds_its_receipts_to_that_tenant() -> None:
    payload = {"key": f"{NID}:1", "status": "delivered"}
    for secret, tenant in ((ACME, "acme"), (OLD_SECRET, "acme"), (GLOBEX, "globex")):
        [r] = await run(request(payload, secret=secret), TENANTS)
        assert (r.tenant, r.event_id) == (tenant, f"{tenant}:msg_2mYvLq8N")  # its own ids
    [shared] = await run(request(payload), Settings(secret=SECRET, tenants=TENANTS.tenants))
    assert (shared.tenant, shared.event_id) == (None, "msg_2mYvLq8N")  # any tenant's
    await refused(BadSignature, request(payload), TENANTS)


def test_tenants_secrets_are_checked_by_name_never_by_value() -> None:
    assert TENANTS.enabled() and TENANTS.problems() == []
    assert not Settings(tenants={"acme": TenantSecret()}).enabled()
    odd = Settings(secret=ACME, tenants={"acme": TenantSecret(ACME), "globex": TenantSecret(),
                                         "Acme Corp": TenantSecret(GLOBEX),
                                         "initech": TenantSecret(previous_secret=GLOBEX),
                                         "umbrella": TenantSecret("whsec_c2hvcnQ=")})
    problems = odd.problems()
    assert problems == [
        ("tenants", "tenant names are lower-case letters, digits, _ . -"),
        ("tenants.acme", "has the same secret as the shared secret: each tenant needs its own"),
        ("tenants.globex.secret", "set it, or remove the table"),
        ("tenants.initech.secret", "set it; previous_secret only helps a rotation"),
        ("tenants.umbrella.secret", "must be whsec_ followed by base64 (at least 16 bytes)")]


# --- what a request nobody signed may cost, with many tenants -----------------------------------

MANY = {f"t{i:04d}": TenantSecret("whsec_" + base64.b64encode(f"tenant {i:04d}".encode()
                                                                .ljust(24, b".")).decode())
        for i in range(1000)}


def for_tenant(req: RawRequest, tenant: str) -> RawRequest:
    return RawRequest(req.method, f"{URL}/{tenant}", req.headers, req.body, req.query, tenant)


@pytest.fixture
def hmacs(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts the HMACs computed (hmac.new calls), one entry per call."""
    made: list[int] = []
    real = hmac.new

    def counted(*args: Any, **kw: Any) -> Any:
        made.append(1)
        return real(*args, **kw)

    monkeypatch.setattr(hmac, "new", counted)
    return made


@pytest.mark.parametrize("shared", [None, SECRET])
async def test_with_a_thousand_tenants_a_forged_request_costs_a_few_hmacs_at_most(
        shared: str | None, hmacs: list[int]) -> None:
    settings = Settings(secret=shared or "", tenants=MANY)
    payload = {"key": f"{NID}:1", "status": "delivered"}
    big = json.dumps({**payload, "provider": "x" * 65_000}).encode()  # 64 KiB
    nobody = "whsec_" + base64.b64encode(b"nobody's-secret-at-all-32-bytes!").decode()
    forged = [request(payload, secret=nobody), request(body=big, secret=nobody),
              request(payload, secret=nobody, headers={"webhook-signature": "v1,AAAA"})]
    for req in forged:
        for sent in (req, for_tenant(req, "t0500"), for_tenant(req, "nobody")):
            hmacs.clear()
            await refused(BadSignature, sent, settings)
            assert len(hmacs) <= (2 if sent.tenant else 8), sent.url  # 8: MAX_SECRETS_TRIED
    hmacs.clear()
    await refused(BadSignature, forged[1], settings)
    assert hmacs == []  # larger than any receipt: refused before an HMAC


async def test_a_tenants_route_takes_its_own_secret_and_no_other(hmacs: list[int]) -> None:
    settings = Settings(tenants=MANY)
    payload = {"key": f"{NID}:1", "status": "delivered"}
    mine = request(payload, secret=MANY["t0007"].secret)
    hmacs.clear()
    [r] = await run(for_tenant(mine, "t0007"), settings)
    assert (r.tenant, r.event_id) == ("t0007", "t0007:msg_2mYvLq8N") and len(hmacs) == 1
    # Signed by t0007's backend, posted to t0008's URL: refused, not t0008's receipt.
    assert "no signature matches" in await refused(BadSignature, for_tenant(mine, "t0008"),
                                                   settings)
    # The URL without a tenant tries only the shared secret (none here) with this many.
    assert "/v1/webhooks/delivery-receipt/TENANT" in await refused(BadSignature, mine, settings)
