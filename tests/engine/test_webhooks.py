"""Delivery evidence end to end: providers' webhooks, signed by the providers' own packages (or
by their documented scheme in a few lines of hmac), into the real app over the real engine and
store, with a real SMTP server and a Twilio stand-in speaking its wire format.

A kind with stop = "delivered" ends at the first proof; a bounce suppresses the address for the
next send while the person's phone still works; a receipt that beats its send's answer is kept
and applied when the answer lands; forged, stale, truncated and replayed requests store nothing
or store once.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import json
import logging
import secrets
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlencode, urlsplit

import pytest
import standardwebhooks
import tomli_w
from aiohttp import web
from fake_twilio import ACCOUNT, TOKEN, message_resource
from stack_support import ADDRESS, FROM, PHONE, PUBLIC, Stack
from stack_support import stack as make_stack
from twilio.request_validator import RequestValidator
from yarl import URL

from notifyd.config import load_config
from notifyd.domain.views import timeline

MAILGUN_KEY = "key-" + "5f" * 16
RECEIPT_SECRET = "whsec_" + base64.b64encode(b"0123456789abcdef0123456789abcdef").decode()

WEBHOOK_SETTINGS: dict[str, Any] = {
    "kinds": {
        # push -> 30 s -> SMS in seed 001; here SMS -> 60 s -> email, ending on delivery
        "alert": {"stop": "delivered", "ladder": [{"channel": "sms", "timeout_sec": 60},
                                                  {"channel": "email"}]},
        "notice": {"ladder": [{"channel": "email", "timeout_sec": 600}, {"channel": "sms"}]},
    },
    "webhooks": {"twilio": {"auth_token": TOKEN}, "mailgun": {"signing_key": MAILGUN_KEY},
                 "delivery-receipt": {"secret": RECEIPT_SECRET}},
}


def stack(tmp_path: Path) -> Any:
    return make_stack(tmp_path, WEBHOOK_SETTINGS)


async def accept(s: Stack, kind: str, user: str = "ada", dedup: str | None = None) -> str:
    r = await s.client.post("/v1/notifications", json={
        "user_id": user, "kind": kind, "params": {"what": f"{kind} {dedup or ''}"},
        "dedup_key": dedup or secrets.token_hex(4)},
        headers={"Authorization": f"Bearer {s.key}"})
    assert r.status == 202, await r.text()
    nid = str((await r.json())["notification_id"])
    s.e.ids.append(nid)
    return nid


# --- Twilio: signed by twilio's own RequestValidator over the public URL --------------------


async def twilio_post(s: Stack, params: dict[str, str], query: str = "",
                      token: str = TOKEN, url: str | None = None,
                      body: bytes | None = None) -> tuple[int, str]:
    path = "/v1/webhooks/twilio" + (f"?{query}" if query else "")
    signed = url or f"{PUBLIC}{path}"
    signature = RequestValidator(token).compute_signature(signed, params)
    # encoded=True: the URL goes out byte for byte as Twilio calls it (%3A stays %3A).
    r = await s.client.post(URL(path, encoded=True), data=body if body is not None else urlencode(params),
                            headers={"X-Twilio-Signature": signature,
                                     "Content-Type": "application/x-www-form-urlencoded"})
    return r.status, await r.text()


def callback_of(s: Stack, sid: str) -> str:
    """The query of the StatusCallback the channel gave Twilio for message `sid`."""
    url = s.twilio.created[sid]["StatusCallback"]
    assert url.startswith(f"{PUBLIC}/v1/webhooks/twilio?key=")
    return urlsplit(url).query


def status_params(sid: str, status: str, **extra: str) -> dict[str, str]:
    return {"AccountSid": ACCOUNT, "MessageSid": sid, "SmsSid": sid, "MessageStatus": status,
            "SmsStatus": status, "To": PHONE, "From": FROM, "ApiVersion": "2010-04-01", **extra}


async def receipts(s: Stack) -> int:
    return await s.e.receipts_stored()


async def test_a_twilio_delivery_receipt_ends_a_stop_delivered_ladder(tmp_path: Path) -> None:
    async with stack(tmp_path) as s:
        await s.user()
        nid = await accept(s, "alert")
        assert await s.e.cycle() == 1
        [sid] = s.twilio.created
        query = callback_of(s, sid)
        assert await twilio_post(s, status_params(sid, "sent"), query) == (
            200, '<?xml version="1.0" encoding="UTF-8"?><Response></Response>')
        doc = await s.status(nid)
        assert doc["current_state"] == "email_pending"  # accepted is not proof
        assert (doc["delivered_via"], doc["sent_via"]) == (None, ["sms"])  # sent, not proved
        assert (await twilio_post(s, status_params(sid, "delivered"), query))[0] == 200

        doc = await s.status(nid)
        assert doc["current_state"] == "delivered" and doc["delivered_via"] == "sms"
        assert doc["sent_via"] == ["sms"]
        assert doc["resolution"]["resolution"] == "delivered"
        assert doc["resolution"]["resolved_by"] == "receipt:twilio"
        assert [st["status"] for st in doc["steps"]] == ["sent", "cancelled"]
        assert doc["steps"][0]["evidence"] == "delivered"
        s.e.clock.advance(61)  # the email's time comes: it was cancelled, nothing goes
        assert await s.e.cycle() == 0
        assert s.smtp.received == []
        shown = "\n".join(timeline(await s.e.record(nid), s.e.now))
        assert "step 0: twilio says accepted" in shown and "step 0: twilio says delivered" in shown
        assert "resolved 'delivered' by receipt:twilio" in shown


async def test_forged_misaddressed_truncated_and_unsigned_callbacks_store_nothing(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    async with stack(tmp_path) as s:
        await s.user()
        nid = await accept(s, "alert")
        await s.e.cycle()
        [sid] = s.twilio.created
        query = callback_of(s, sid)
        params = status_params(sid, "delivered")
        caplog.set_level(logging.WARNING, "notifyd.web")
        # Signed with another account's token; signed over the URL seen behind the proxy, not
        # the public one; the body cut short after signing; no signature at all.
        assert (await twilio_post(s, params, query, token="f" * 32))[0] == 401
        seen = f"http://127.0.0.1:{s.client.port}/v1/webhooks/twilio?{query}"
        assert (await twilio_post(s, params, query, url=seen))[0] == 401
        whole = urlencode(params).encode()
        assert (await twilio_post(s, params, query, body=whole[:-9]))[0] == 401
        r = await s.client.post(f"/v1/webhooks/twilio?{query}", data=params)
        assert r.status == 401
        assert (await r.json())["error"]["code"] == "bad_signature"
        assert await receipts(s) == 0
        assert (await s.status(nid))["current_state"] == "email_pending"
        # Anyone can post here: one line per provider now and then, counting the rest, never
        # the body.
        s.e.clock.advance(10)
        assert (await twilio_post(s, params, query, token="f" * 32))[0] == 401
        refused = [r.getMessage() for r in caplog.records if "webhook twilio" in r.getMessage()]
        assert len(refused) == 2 and refused[1].endswith("(3 more since the last such line)")
        assert not any(PHONE in line or sid in line for line in refused)
        # An unknown or unconfigured provider is not found, naming those that are on.
        r = await s.client.post("/v1/webhooks/resend", data=b"{}")
        assert r.status == 404
        assert "on: twilio, mailgun, delivery-receipt" in (await r.json())["error"]["message"]


async def test_the_same_event_twice_and_out_of_order_never_downgrade(tmp_path: Path) -> None:
    async with stack(tmp_path) as s:
        await s.user()
        nid = await accept(s, "notice")  # stop = resolved: delivery is evidence, not the end
        await s.e.cycle()  # step 0 is email; move on to the SMS at once
        s.e.clock.advance(601)
        assert await s.e.cycle() == 1
        [sid] = s.twilio.created
        query = callback_of(s, sid)
        for status in ("delivered", "delivered", "sent", "delivered"):  # replayed, reordered
            assert (await twilio_post(s, status_params(sid, status), query))[0] == 200
        assert await receipts(s) == 2  # (MessageSid, status) is the event: twice each, stored once
        doc = await s.status(nid)
        assert doc["steps"][1]["evidence"] == "delivered"  # not replaced by sent
        # Proven, though a stop = "resolved" kind is not resolved by it: the ladder ended there.
        assert doc["resolution"] is None and doc["current_state"] == "delivered"
        assert s.ctx.metrics.receipts.labels("twilio", "duplicate")._value.get() == 2


async def test_a_receipt_before_the_send_result_is_kept_and_applied_when_it_lands(
        tmp_path: Path) -> None:
    async with stack(tmp_path) as s:
        await s.user()
        nid = await accept(s, "alert")
        sid = "SM" + "ab" * 16
        s.twilio.canned = web.json_response(message_resource(
            ACCOUNT, sid, {"To": PHONE, "From": FROM, "Body": "x"}), status=201)
        gate = s.twilio.gate = asyncio.Event()
        assert await s.e.tick() == 1  # the send is out; Twilio has not answered
        while not s.twilio.seen:
            await asyncio.sleep(0.005)
        # A status callback configured on the Twilio number carries no key: only the sid.
        assert (await twilio_post(s, status_params(sid, "delivered")))[0] == 200
        assert await s.e.store.orphan_count() == 1  # kept, an orphan
        assert (await s.status(nid))["current_state"] == "sms_sending"
        gate.set()
        await s.e.settle()
        doc = await s.status(nid)
        assert doc["current_state"] == "delivered" and doc["steps"][1]["status"] == "cancelled"
        assert await s.e.store.orphan_count() == 0
        assert [p.step_no for p in (await s.e.record(nid)).proofs] == [0]


# --- Mailgun over the SMTP relay: the bounce suppresses, the phone still works ---------------


def mailgun_body(event: dict[str, Any], key: str = MAILGUN_KEY,
                 timestamp: int | None = None, token: str | None = None) -> bytes:
    """Mailgun's webhook body: its signature block is HMAC-SHA256(key, timestamp + token)."""
    ts = str(timestamp if timestamp is not None else int(time.time()))
    token = token or secrets.token_hex(25)
    signature = hmac.new(key.encode(), (ts + token).encode(), hashlib.sha256).hexdigest()
    return json.dumps({"signature": {"timestamp": ts, "token": token, "signature": signature},
                       "event-data": event}).encode()


def bounce(message_id: str, variables: dict[str, str] | None = None) -> dict[str, Any]:
    return {"id": secrets.token_hex(8), "event": "failed", "severity": "permanent",
            "reason": "bounce", "timestamp": time.time(), "recipient": ADDRESS,
            "delivery-status": {"code": 550, "enhanced-code": "5.1.1",
                                "message": f"550 5.1.1 {ADDRESS}: no such user"},
            "message": {"headers": {"message-id": message_id, "to": ADDRESS}},
            "user-variables": variables or {}}


async def test_a_bounce_suppresses_the_address_and_the_users_phone_still_works(
        tmp_path: Path) -> None:
    async with stack(tmp_path) as s:
        await s.user()
        first = await accept(s, "notice")
        assert await s.e.cycle() == 1
        [mail] = s.smtp.received
        message_id = next(line.split(":", 1)[1].strip() for line in
                          mail.data.decode().splitlines() if line.startswith("Message-ID:"))
        relay = next(line for line in mail.data.decode().splitlines()
                     if line.startswith("X-Mailgun-Variables:"))
        assert f'"notifyd_key": "{first}:0"' in relay

        r = await s.client.post("/v1/webhooks/mailgun", data=mailgun_body(bounce(message_id)))
        assert r.status == 200, await r.text()
        assert await s.e.suppressed() == [("default", "email", ADDRESS, "bounced", "mailgun")]
        assert await s.e.cycle() == 1  # the bounce pulled the SMS forward: it goes now
        assert len(s.twilio.created) == 1

        later = await accept(s, "notice")  # the next notification skips the email ...
        assert await s.e.cycle() == 1
        doc = await s.status(later)
        assert doc["steps"][0]["status"] == "suppressed" and "bounced" in doc["steps"][0]["reason"]
        assert doc["steps"][1]["status"] == "sent"  # ... and reaches the phone at once
        assert len(s.smtp.received) == 1 and len(s.twilio.created) == 2

        auth = {"Authorization": f"Bearer {s.key}"}
        listed = await (await s.client.get("/v1/suppressions", headers=auth)).json()
        assert [(x["channel_type"], x["address"], x["source"]) for x in listed["suppressions"]] \
            == [("email", ADDRESS, "mailgun")]
        r = await s.client.delete(f"/v1/suppressions/email/{ADDRESS}", headers=auth)
        assert r.status == 204
        third = await accept(s, "notice")
        assert await s.e.cycle() == 1 and len(s.smtp.received) == 2  # email works again
        assert (await s.status(third))["steps"][0]["status"] == "sent"


async def test_a_stale_or_replayed_mailgun_signature_is_refused(tmp_path: Path) -> None:
    async with stack(tmp_path) as s:
        now = s.e.now // 1000
        stale = mailgun_body(bounce("<x@y>"), timestamp=now - 301)
        assert (await s.client.post("/v1/webhooks/mailgun", data=stale)).status == 401
        fresh = mailgun_body(bounce("<x@y>"))
        assert (await s.client.post("/v1/webhooks/mailgun", data=fresh)).status == 200
        # The same signature block with another event in the body: a replayed token.
        forged = json.loads(fresh)
        forged["event-data"]["recipient"] = "someone@else.example"
        again = await s.client.post("/v1/webhooks/mailgun", data=json.dumps(forged).encode())
        assert again.status == 401
        assert await receipts(s) == 1 and await s.e.suppressed() == []
        # Signed, but no event in it: a body notifyd can never read, refused so Mailgun stops.
        odd = json.loads(mailgun_body(bounce("<x@y>")))
        del odd["event-data"]
        r = await s.client.post("/v1/webhooks/mailgun", data=json.dumps(odd).encode())
        assert r.status == 406 and (await r.json())["error"]["code"] == "bad_receipt"


async def test_a_mailgun_token_goes_with_its_first_verified_request_whatever_it_carried(
        tmp_path: Path) -> None:
    async with stack(tmp_path) as s:
        token = secrets.token_hex(25)
        wrong = mailgun_body(bounce("<x@y>"), key="key-" + "0e" * 16, token=token)
        assert (await s.client.post("/v1/webhooks/mailgun", data=wrong)).status == 401
        click = {"id": "c1", "event": "clicked", "timestamp": time.time(), "recipient": ADDRESS}
        clicked = mailgun_body(click, token=token)  # a refusal burnt nothing: this one is in
        assert (await s.client.post("/v1/webhooks/mailgun", data=clicked)).status == 200
        assert await receipts(s) == 0  # a click is not evidence: nothing stored but the token
        forged = json.loads(clicked)
        forged["event-data"] = bounce("<x@y>")  # its captured block, now with a bounce
        for body in (json.dumps(forged), json.dumps(forged, indent=2)):
            r = await s.client.post("/v1/webhooks/mailgun", data=body.encode())
            assert r.status == 401 and "a replay" in (await r.json())["error"]["message"]
        assert await receipts(s) == 0 and await s.e.suppressed() == []


# --- delivery receipts from a push client, signed with standardwebhooks -----------------------


def whsec(seed: bytes) -> str:
    return "whsec_" + base64.b64encode(seed.ljust(32, b".")).decode()


async def post_receipt(s: Stack, secret: str, body: dict[str, Any], msg_id: str,
                       path: str = "/v1/webhooks/delivery-receipt") -> int:
    raw = json.dumps(body)
    now = int(time.time())
    sig = standardwebhooks.Webhook(secret).sign(msg_id, datetime.fromtimestamp(now, UTC), raw)
    r = await s.client.post(path, data=raw.encode(), headers={
        "webhook-id": msg_id, "webhook-timestamp": str(now), "webhook-signature": sig,
        "Content-Type": "application/json"})
    return r.status


async def test_a_tenants_receipt_secret_reaches_only_that_tenants_notifications(
        tmp_path: Path) -> None:
    ours, old, theirs = whsec(b"default's own"), whsec(b"default's old"), whsec(b"another's")
    settings = {**WEBHOOK_SETTINGS, "webhooks": {"delivery-receipt": {"tenants": {
        "default": {"secret": ours, "previous_secret": old}, "other": {"secret": theirs}}}}}
    async with make_stack(tmp_path, settings) as s:
        await s.user()
        nid = await accept(s, "alert")  # the stack's key is tenant default's
        await s.e.cycle()
        # Another tenant's backend names default's step, first with the id default will use.
        assert await post_receipt(s, theirs, {"key": f"{nid}:0", "status": "opened"},
                                  "msg_1") == 200
        doc = await s.status(nid)
        assert doc["resolution"] is None and doc["steps"][0]["evidence"] != "opened"
        assert await s.e.store.orphan_count() == 1  # kept as unmatched, never applied
        # Default's own backend, signing with the secret it is rotating away from: applied.
        assert await post_receipt(s, old, {"key": f"{nid}:0", "status": "opened"},
                                  "msg_1") == 200
        doc = await s.status(nid)
        assert doc["current_state"] == "delivered" and doc["steps"][0]["evidence"] == "opened"
        assert await post_receipt(s, whsec(b"nobody's"), {"key": f"{nid}:0",
                                                          "status": "shown"}, "msg_2") == 401



async def test_a_tenants_backend_posts_to_its_own_url(tmp_path: Path) -> None:
    ours, theirs = whsec(b"default's own"), whsec(b"another's")
    settings = {**WEBHOOK_SETTINGS, "webhooks": {"delivery-receipt": {"tenants": {
        "default": {"secret": ours}, "other": {"secret": theirs}}}}}
    mine, other = "/v1/webhooks/delivery-receipt/default", "/v1/webhooks/delivery-receipt/other"
    async with make_stack(tmp_path, settings) as s:
        await s.user()
        nid = await accept(s, "alert")  # the stack's key is tenant default's
        await s.e.cycle()
        opened = {"key": f"{nid}:0", "status": "opened"}
        # Signed by another tenant, posted to default's URL: refused, nothing kept.
        assert await post_receipt(s, theirs, opened, "msg_1", mine) == 401
        assert await post_receipt(s, ours, opened, "msg_1", "/v1/webhooks/delivery-receipt/x") \
            == 401
        # Default's secret on the other tenant's URL: refused too.
        assert await post_receipt(s, ours, opened, "msg_1", other) == 401
        assert await receipts(s) == 0
        assert await post_receipt(s, ours, opened, "msg_1", mine) == 200
        doc = await s.status(nid)
        assert doc["current_state"] == "delivered" and doc["steps"][0]["evidence"] == "opened"
        # Only a provider with a secret per tenant has such URLs.
        r = await s.client.post("/v1/webhooks/twilio/default", data=b"")
        assert r.status == 404


async def test_a_delivery_receipt_from_the_producers_backend(tmp_path: Path) -> None:
    async with stack(tmp_path) as s:
        await s.user()
        nid = await accept(s, "alert")
        await s.e.cycle()
        signer = standardwebhooks.Webhook(RECEIPT_SECRET)

        async def post(body: dict[str, Any], at: float | None = None,
                       msg_id: str = "msg_1") -> int:
            raw = json.dumps(body)
            when = at if at is not None else time.time()
            sig = signer.sign(msg_id, datetime.fromtimestamp(when, UTC), raw)
            r = await s.client.post("/v1/webhooks/delivery-receipt", data=raw.encode(), headers={
                "webhook-id": msg_id, "webhook-timestamp": str(int(when)),
                "webhook-signature": sig, "Content-Type": "application/json"})
            return r.status

        assert await post({"key": f"{nid}:0", "status": "opened"}, at=time.time() - 600) == 401
        assert await post({"key": f"{nid}:0", "status": "seen"}) == 400  # signed, unreadable
        assert await receipts(s) == 0
        assert await post({"key": f"{nid}:0", "status": "opened"}) == 200
        doc = await s.status(nid)
        assert doc["current_state"] == "delivered"
        assert doc["resolution"]["resolved_by"] == "receipt:delivery-receipt"
        assert doc["steps"][0]["evidence"] == "opened"


async def test_an_inbound_stop_suppresses_the_number_for_every_tenant(tmp_path: Path) -> None:
    async with stack(tmp_path) as s:
        await s.user()
        stop = {"AccountSid": ACCOUNT, "MessageSid": "SM" + "cd" * 16, "From": PHONE, "To": FROM,
                "Body": " stop ", "OptOutType": "STOP", "ApiVersion": "2010-04-01"}
        assert (await twilio_post(s, stop))[0] == 200
        assert await s.e.suppressed() == [("*", "sms", PHONE, "unsubscribed", "twilio")]
        nid = await accept(s, "alert")  # SMS first: suppressed; the email goes at once instead
        assert await s.e.cycle() == 1
        doc = await s.status(nid)
        assert doc["steps"][0]["status"] == "suppressed" and doc["steps"][1]["status"] == "sent"
        assert s.twilio.created == {}
        # A tenant cannot lift an account-wide STOP; an operator can.
        auth = {"Authorization": f"Bearer {s.key}"}
        r = await s.client.delete(f"/v1/suppressions/sms/{PHONE}", headers=auth)
        assert r.status == 404
        assert "suppressed for all tenants" in (await r.json())["error"]["message"]
        listed = await (await s.client.get("/v1/suppressions", headers=auth)).json()
        assert [x["scope"] for x in listed["suppressions"]] == ["all tenants"]


async def test_the_ladders_end_shows_what_is_known(tmp_path: Path) -> None:
    """Sent and never confirmed: 'sent', then 'presumed_delivered' past the time to live; the
    step the ladder moved past unproven is 'timed out'; every step refused: 'undeliverable'."""
    async with stack(tmp_path) as s:
        await s.user()
        nid = await accept(s, "alert")
        await s.e.cycle()
        s.e.clock.advance(60)
        assert await s.e.cycle() == 1  # no receipt for the SMS: the email goes
        doc = await s.status(nid)
        assert doc["current_state"] == "sent"
        assert [st["timed_out"] for st in doc["steps"]] == [True, False]
        assert "step 0 sms: timed out" in "\n".join(timeline(await s.e.record(nid), s.e.now))
        s.e.clock.advance(86_400)  # past the kind's time to live
        assert (await s.status(nid))["current_state"] == "presumed_delivered"

        await s.user("bob", email="bob@example.org", phone="+15005550004")  # 21610: STOP'd
        gone = await accept(s, "alert", user="bob")
        await s.e.cycle()  # the SMS is refused for good: the email is pulled forward ...
        r = await s.client.post("/v1/suppressions", json={
            "channel_type": "email", "address": "BOB@example.org", "reason": "asked us"},
            headers={"Authorization": f"Bearer {s.key}"})
        assert r.status == 201 and (await r.json())["address"] == "bob@example.org"
        await s.e.cycle()  # ... and suppressed at its claim
        doc = await s.status(gone)
        assert [st["status"] for st in doc["steps"]] == ["rejected", "suppressed"]
        assert doc["current_state"] == "undeliverable"


def test_the_signed_url_keeps_the_path_and_query_as_received(tmp_path: Path) -> None:
    """Twilio signs the URL exactly as it called it: %3A stays %3A, behind a proxy or not."""
    from types import SimpleNamespace

    from aiohttp.test_utils import make_mocked_request

    from notifyd.http.app import public_url
    from notifyd.http.kit import CTX

    config = tmp_path / "n.toml"
    for base, expected in (("", "http://notify.internal:7726"), (PUBLIC + "/", PUBLIC)):
        config.write_text(tomli_w.dumps({"server": {"public_url": base}}))
        app = web.Application()
        app[CTX] = SimpleNamespace(cfg=load_config(config))  # type: ignore[assignment]
        request = make_mocked_request(
            "POST", "/v1/webhooks/twilio?key=n_01%3A2&x=a+b", app=app,
            headers={"Host": "notify.internal:7726"})
        assert public_url(request) == f"{expected}/v1/webhooks/twilio?key=n_01%3A2&x=a+b"
