"""One ladder across three providers: an email through Amazon SES, then an SMS through Vonage,
then a push through APNs, each to its stand-in (tests/fake_ses.py, fake_vonage.py, fake_apns.py
over HTTP/2 and TLS), started over the HTTP API with the real engine and store. A kind with
stop = "delivered": SES's delivery event, published to SNS and signed as SNS signs it, arrives
before the SMS is due and ends the ladder, so neither Vonage nor APNs hears of it; without a
receipt the SMS and then the push go out, each when the step before it has had its window.
Time is the engine's FakeClock, moved by hand; each wait is a scan run to completion.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import fake_ses
import pytest
import tomli_w
from aiohttp.test_utils import TestClient
from channel_support import pem
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from engine_support import Engine, OverHttp, served, store_url
from fake_apns import FakeApns
from fake_vonage import FakeVonage
from test_email_api_channels import ADDRESS, channel_settings, serve_sns_certificate, ses_hook
from test_email_api_channels import webhooks as email_webhooks
from test_push_chat_channels import APP, DEVICE, KEY_ID, PHONE, TEAM, apns_and_vonage
from test_push_chat_channels import TOPIC as APNS_TOPIC

WINDOW = 900  # each rung's window: the next one is due this long after it went out
FAST = {"rate_per_sec": 1_000_000.0, "burst": 1_000_000, "backoff_base_sec": 1.0}
TEMPLATES = {"email.subject.j2": "{{ host }} is down", "email.text.j2": "{{ what }}\n",
             "sms.text.j2": "ALERT {{ host }}: {{ what }}",
             "push.title.j2": "{{ host }} is down", "push.body.j2": "{{ what }}"}


@dataclass
class Stack(OverHttp):
    e: Engine
    client: TestClient[Any, Any]
    ses: fake_ses.FakeSes
    vonage: FakeVonage
    apns: FakeApns
    key: str

    async def post(self) -> str:
        made = await self.call("POST", "/v1/notifications", {
            "user_id": "ada", "kind": "outage", "dedup_key": uuid.uuid4().hex,
            "params": {"host": "db-2", "what": "replica lag 40 s"}}, status=202)
        nid: str = made["notification_id"]
        self.e.ids.append(nid)
        return nid


def write_config(tmp_path: Path, ses: fake_ses.FakeSes, vonage: FakeVonage,
                 vonage_key: rsa.RSAPrivateKey, apns: FakeApns,
                 apns_key: ec.EllipticCurvePrivateKey) -> Path:
    for name, text in TEMPLATES.items():
        path = tmp_path / "templates" / "outage" / "en" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    config = tmp_path / "notifyd.toml"
    config.write_text(tomli_w.dumps({
        "server": {"public_url": "https://notify.example.com"},
        "store": {"url": store_url(tmp_path), "sqlite": {"synchronous": "NORMAL"}},
        "templates": {"folder": "templates"},
        "channels": {
            "email": channel_settings("ses", ses),
            "sms": {"type": "vonage", "application_id": APP, "private_key": pem(vonage_key),
                    "from_number": "+15005550006", "base_url": vonage.base_url, **FAST},
            "ios": {"type": "apns", "team_id": TEAM, "key_id": KEY_ID,
                    "private_key": pem(apns_key), "topic": APNS_TOPIC,
                    "base_url": apns.base_url, **FAST}},
        "kinds": {"outage": {"stop": "delivered", "ladder": [
            {"channel": "email", "timeout_sec": WINDOW},
            {"channel": "sms", "timeout_sec": WINDOW},
            {"channel": "ios"}]}},
        "webhooks": {"ses": email_webhooks()["ses"]}}))
    return config


@asynccontextmanager
async def stack(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Stack]:
    async with AsyncExitStack() as peers:
        ses = await fake_ses.FakeSes().start()
        peers.push_async_callback(ses.stop)
        apns, apns_key, vonage, vonage_key = await apns_and_vonage(peers, tmp_path, monkeypatch)
        async with served(write_config(tmp_path, ses, vonage, vonage_key, apns, apns_key),
                          frozenset({"post", "read", "users"})) as (e, ctx, client, key):
            serve_sns_certificate(ctx)
            s = Stack(e, client, ses, vonage, apns, key)
            await s.call("PUT", "/v1/users/ada", {"email": ADDRESS, "phone": PHONE})
            await s.call("POST", "/v1/users/ada/devices", {"type": "apns", "token": DEVICE},
                         status=201)
            yield s
        assert vonage.problems == [] and apns.problems == []


async def test_a_ses_delivery_receipt_ends_the_ladder_before_the_sms(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    async with stack(tmp_path, monkeypatch) as s:
        nid = await s.post()
        assert await s.e.cycle() == 1
        [ref] = s.ses.sent  # the email went; SES answered with its message id
        assert s.ses.signatures_checked == 1  # botocore recomputed the SigV4 signature
        assert await s.states(nid) == ["sent", "pending", "pending"]

        s.e.clock.advance(WINDOW / 3)  # the email is delivered well before the SMS is due
        body, headers = ses_hook(s, "delivered", ref, None)  # type: ignore[arg-type]
        r = await s.client.post("/v1/webhooks/ses", data=body, headers=headers)
        assert r.status == 200, await r.text()

        doc = await s.status(nid)
        assert doc["current_state"] == "delivered" and doc["delivered_via"] == "email"
        assert doc["resolution"]["resolved_by"] == "receipt:ses"
        assert doc["steps"][0]["evidence"] == "delivered"
        assert await s.states(nid) == ["sent", "cancelled", "cancelled"]
        assert await s.advance(2 * WINDOW + 1) == 0  # both windows over: nothing is due
        assert s.vonage.sent == [] and s.apns.seen == []


async def test_without_a_receipt_the_sms_then_the_push_go_out_in_order(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    async with stack(tmp_path, monkeypatch) as s:
        nid = await s.post()
        assert await s.e.cycle() == 1
        [ref] = s.ses.sent
        assert await s.advance(WINDOW - 1) == 0  # the email's window is not over yet
        assert s.vonage.sent == [] and s.apns.seen == []

        assert await s.advance(2) == 1  # the SMS, once the email's window ended
        [sms] = s.vonage.sent
        assert (sms["to"], sms["text"], sms["client_ref"]) == (
            PHONE[1:], "ALERT db-2: replica lag 40 s", f"{nid}:1")
        assert s.apns.seen == [] and await s.states(nid) == ["sent", "sent", "pending"]

        assert await s.advance(WINDOW + 1) == 1  # the push, once the SMS's window ended
        [push] = s.apns.seen
        assert push.token == DEVICE and push.json["aps"]["alert"] == {
            "title": "db-2 is down", "body": "replica lag 40 s"}
        doc = await s.status(nid)
        assert doc["sent_via"] == ["email", "sms", "ios"]
        assert [st["status"] for st in doc["steps"]] == ["sent", "sent", "sent"]
        assert doc["steps"][0]["provider_ref"] == ref
        assert len(s.ses.sent) == 1 and len(s.vonage.sent) == 1  # each rung once
