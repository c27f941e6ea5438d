"""The resend receipt parser against requests signed by Svix's own library (svix.webhooks.Webhook
.sign, what Resend's sender uses) and, for the webhook-* header names, by standardwebhooks; the
bodies shaped as Resend's event reference shows them."""

from __future__ import annotations

import base64
import json
from datetime import UTC, datetime
from typing import Any

import pytest
from multidict import CIMultiDict
from standardwebhooks import Webhook as StandardWebhook
from svix.webhooks import Webhook

from notifyd.receipts.base import BadReceipt, BadSignature, Event, RawRequest, Receipt
from notifyd.receipts.resend import PROVIDER, Settings, parse, step_key

SECRET = "whsec_" + base64.b64encode(b"resend-webhook-test-key!").decode()  # 24 bytes, as Svix's
SETTINGS = Settings(secret=SECRET)
NOW = 1_790_000_000_000
MSG_ID = "msg_2mYvLq8NwJ4r1xZkT3cB9pQe"
EMAIL_ID = "4ef9a417-02e9-4d39-ad75-9611e0fcc33c"
NID = "n_0kx7c3v9q2m4r8t1w6"
TO = "jane.doe@example.org"
URL = "https://notifyd.example.com/v1/webhooks/resend"


async def no_fetch(url: str) -> bytes:
    raise AssertionError("the resend parser never fetches")


def event(kind: str, **extra: Any) -> dict[str, Any]:
    """An email event as https://resend.com/docs/webhooks/event-types shows one."""
    return {"type": kind, "created_at": "2026-09-21T14:13:19.500Z",
            "data": {"created_at": "2026-09-21T14:13:00.000Z", "email_id": EMAIL_ID,
                     "from": "Acme <alerts@acme.example>", "to": [TO],
                     "subject": "Your code", "message_id": "<0102019a.a1b2@email.amazonses.com>",
                     "tags": {"notifyd_notification": NID, "notifyd_step": "1"}, **extra}}


def request(payload: dict[str, Any] | None = None, *, body: bytes | None = None,
            msg_id: str = MSG_ID, at_ms: int = NOW, secret: str = SECRET, family: str = "svix",
            headers: dict[str, str] | None = None) -> RawRequest:
    raw = json.dumps(payload, separators=(",", ":")).encode() if body is None else body
    when = datetime.fromtimestamp(at_ms // 1000, tz=UTC)
    signer = Webhook(secret) if family == "svix" else StandardWebhook(secret)
    h = CIMultiDict({"Content-Type": "application/json", f"{family}-id": msg_id,
                     f"{family}-timestamp": str(at_ms // 1000),
                     f"{family}-signature": signer.sign(msg_id, when, raw.decode())})
    h.update(headers or {})
    return RawRequest("POST", URL, h, raw, {})


async def run(req: RawRequest, settings: Settings = SETTINGS, now: int = NOW) -> list[Receipt]:
    return await parse(req, settings, now, no_fetch)


async def refused(exc: type[Exception], req: RawRequest, settings: Settings = SETTINGS,
                  now: int = NOW) -> str:
    with pytest.raises(exc) as info:
        await run(req, settings, now)
    message = str(info.value)
    assert message and SECRET[6:] not in message and TO not in message
    return message


def receipt(ev: Event, detail: str | None = None) -> Receipt:
    return Receipt("resend", MSG_ID, ev, NOW - 500, provider_ref=EMAIL_ID, key=f"{NID}:1",
                   message_id="0102019a.a1b2@email.amazonses.com", address=TO,
                   channel_type="email", detail=detail)


@pytest.mark.parametrize(("kind", "extra", "ev", "detail"), [
    ("email.sent", {}, Event.ACCEPTED, None),
    ("email.delivered", {}, Event.DELIVERED, None),
    ("email.delivery_delayed", {}, Event.DEFERRED, None),
    ("email.complained", {}, Event.COMPLAINED, None),
    ("email.opened", {}, Event.OPENED, None),
    ("email.clicked", {"click": {"ipAddress": "192.0.2.1", "link": "https://acme.example/x",
                                 "timestamp": "2026-09-21T14:13:19.500Z", "userAgent": "Mozilla"}},
     Event.OPENED, "click"),
    ("email.bounced", {"bounce": {"message": f"550 5.1.1 <{TO}>: user unknown",
                                  "subType": "General", "type": "Permanent"}},
     Event.BOUNCED, "Permanent:General"),
    ("email.bounced", {"bounce": {"message": "The recipient is suppressed", "subType": "Suppressed",
                                  "type": "Permanent"}}, Event.BOUNCED, "Permanent:Suppressed"),
    ("email.bounced", {"bounce": {"message": "mailbox full", "subType": "MailboxFull",
                                  "type": "Transient"}}, Event.FAILED, "Transient:MailboxFull"),
    ("email.bounced", {"bounce": {"message": "?", "subType": "Undetermined",
                                  "type": "Undetermined"}}, Event.FAILED, "Undetermined:Undetermined"),
    ("email.bounced", {"bounce": {"message": "?", "type": "Something New"}}, Event.FAILED, None),
    ("email.bounced", {}, Event.BOUNCED, None),  # the type itself says permanent
    ("email.failed", {"failed": {"reason": "reached_daily_quota"}}, Event.FAILED,
     "reached_daily_quota"),
    ("email.failed", {"failed": {"reason": f"Invalid recipient {TO}"}}, Event.FAILED, None),
    ("email.suppressed", {"suppressed": {"message": f"{TO} bounced before", "type": "bounce"}},
     Event.BOUNCED, "suppressed:bounce"),
    ("email.suppressed", {}, Event.BOUNCED, "suppressed"),
])
async def test_email_events(kind: str, extra: dict[str, Any], ev: Event, detail: str | None) -> None:
    assert await run(request(event(kind, **extra))) == [receipt(ev, detail)]


@pytest.mark.parametrize("kind", ["email.scheduled", "email.received", "email.new_in_2027",
                                  "contact.created", "domain.updated", "suppression.added",
                                  "inbox.thread.created"])
async def test_other_types_are_skipped(kind: str) -> None:
    assert await run(request(event(kind))) == []
    assert await run(request({"type": kind, "created_at": "2026-09-21T14:13:19Z"})) == []


async def test_the_webhook_header_names_verify_too() -> None:
    assert await run(request(event("email.delivered"), family="webhook")) == [
        receipt(Event.DELIVERED)]


async def test_several_signatures_any_one_will_do() -> None:
    good = request(event("email.delivered"))
    rotated = "v1,Zm9yZ2VkLXNpZ25hdHVyZS1vZi10aGlydHktdHdvISE= " + good.headers["svix-signature"]
    assert await run(request(event("email.delivered"), headers={"svix-signature": rotated}))


async def test_a_retry_or_a_replay_in_the_window_is_the_same_event() -> None:
    first = await run(request(event("email.bounced")))
    assert await run(request(event("email.bounced")), now=NOW + 299_000) == first


@pytest.mark.parametrize(("tags", "key"), [
    ({"notifyd_notification": NID, "notifyd_step": "1", "campaign": "x"}, f"{NID}:1"),
    ([{"name": "notifyd_notification", "value": NID}, {"name": "notifyd_step", "value": "12"}],
     f"{NID}:12"),
    ({"notifyd_notification": NID}, None),
    ({"notifyd_notification": "n_bad", "notifyd_step": "1"}, None),
    ({"notifyd_notification": NID, "notifyd_step": "one"}, None),
    ({"notifyd_notification": NID, "notifyd_step": 1}, None),
    ([{"name": "notifyd_step"}, "junk"], None),
    (None, None),
    ("tags", None),
])
async def test_the_step_key_from_tags(tags: Any, key: str | None) -> None:
    assert step_key(tags) == key
    payload = event("email.delivered")
    payload["data"]["tags"] = tags
    [r] = await run(request(payload))
    assert (r.key, r.provider_ref) == (key, EMAIL_ID)


async def test_fields_that_are_absent_or_odd_are_left_out() -> None:
    payload = event("email.delivered")
    payload["created_at"] = "sometime"
    payload["data"]["to"] = "not an address"
    del payload["data"]["message_id"]
    [r] = await run(request(payload))
    assert (r.occurred_at, r.address, r.channel_type, r.message_id) == (None, None, None, None)
    payload["data"]["to"] = TO  # a bare string
    [r] = await run(request(payload))
    assert r.address == TO


@pytest.mark.parametrize(("payload", "says"), [
    ({"created_at": "2026-09-21T14:13:19Z", "data": {}}, "type"),
    ({"type": "email.delivered", "data": []}, "data"),
    ({"type": "email.delivered"}, "data"),
    ({"type": "email.delivered", "data": {"to": [TO]}}, "email_id"),
    ({"type": "email.delivered", "data": {"email_id": ""}}, "email_id"),
])
async def test_a_verified_body_notifyd_cannot_read(payload: dict[str, Any], says: str) -> None:
    assert says in await refused(BadReceipt, request(payload))


@pytest.mark.parametrize("body", [b"", b"{", b"[]", b"null"])
async def test_a_verified_body_that_is_not_an_object(body: bytes) -> None:
    await refused(BadReceipt, request(body=body))


@pytest.mark.parametrize("header", ["svix-id", "svix-timestamp", "svix-signature"])
async def test_each_missing_header_is_refused(header: str) -> None:
    req = request(event("email.delivered"))
    headers = CIMultiDict(req.headers)
    del headers[header]
    await refused(BadSignature, RawRequest("POST", URL, headers, req.body, {}))


async def test_headers_of_two_families_are_not_mixed() -> None:
    req = request(event("email.delivered"))
    headers = CIMultiDict(req.headers)
    headers["webhook-signature"] = headers.pop("svix-signature")
    assert "svix-signature" in await refused(BadSignature,
                                             RawRequest("POST", URL, headers, req.body, {}))


@pytest.mark.parametrize(("at_ms", "says"), [(NOW - 300_001 - 999, "old"),
                                              (NOW + 301_000, "ahead")])
async def test_stale_and_future_timestamps_are_refused(at_ms: int, says: str) -> None:
    assert says in await refused(BadSignature, request(event("email.delivered"), at_ms=at_ms))


async def test_forged_and_changed_requests_are_refused() -> None:
    payload = event("email.bounced", bounce={"message": "x", "subType": "General",
                                             "type": "Permanent"})
    good = request(payload)
    other = "whsec_" + base64.b64encode(b"not-resends-secret-at-all").decode()
    await refused(BadSignature, request(payload, secret=other))
    await refused(BadSignature, request(payload, headers={"svix-signature": "v1,AAAA"}))
    await refused(BadSignature, request(payload, headers={"svix-id": "msg_replayed_as_new"}))
    pretty = json.dumps(payload, indent=2).encode()
    for body in (good.body[:-1], pretty, good.body.replace(b"Permanent", b"Transient")):
        await refused(BadSignature, RawRequest("POST", URL, good.headers, body, {}))


async def test_without_a_secret_everything_is_refused() -> None:
    await refused(BadSignature, request(event("email.delivered")), Settings())


def test_settings() -> None:
    assert PROVIDER.name == "resend"
    assert not Settings().enabled() and Settings().problems() == []
    assert SETTINGS.enabled() and SETTINGS.problems() == []
    problems = Settings(secret="whsec_!!notbase64!!").problems()
    assert [k for k, _ in problems] == ["secret"]
    assert "notbase64" not in problems[0][1]
