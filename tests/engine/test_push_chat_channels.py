"""The apns, vonage, whatsapp, discord and teams channels end to end: a ladder started over HTTP
(the real app, engine and store) reaches each provider's stand-in in its own wire format
(tests/fake_apns.py over HTTP/2 and TLS, fake_vonage, fake_whatsapp, fake_discord, fake_teams),
and the providers' receipts come back through POST /v1/webhooks/{vonage,whatsapp}, signed as
the providers sign them (PyJWT for Vonage, hmac as Meta documents for WhatsApp).

The delivery table of docs/concepts.md, for each: sent; rejected -> a dead device or a
suppressed address and the next step pulled forward; failed -> retried (throttling, an outage).
Time is the engine's FakeClock, moved by hand; every wait is a scan run to completion.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import tomli_w
from aiohttp import web
from aiohttp.test_utils import TestClient
from channel_support import pem
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from engine_support import Engine, OverHttp, served, store_url
from fake_apns import FakeApns, Reply
from fake_discord import FakeDiscord
from fake_smtp import self_signed
from fake_teams import FakeTeams
from fake_vonage import FakeVonage
from fake_vonage import signed as vonage_signed
from fake_vonage import status_body as vonage_status
from fake_whatsapp import FakeWhatsApp
from fake_whatsapp import signed as meta_signed
from fake_whatsapp import status_body as whatsapp_status

PUBLIC = "https://notify.example.com"
TEAM, KEY_ID, TOPIC = "TEAM4X7Q2Z", "KEYAB12CD3", "com.acme.alerts"
APP = "6f1c2d3e-4a5b-4c6d-8e7f-0a1b2c3d4e5f"
WA_PHONE_ID, WA_TOKEN = "106540352242922", "EAAGm0PX4ZCpsBAKZCq3secretSystemUserToken"
VONAGE_SECRET = "vonage-signature-secret-0123456789abcdef"
META_SECRET, VERIFY = "3f9c1a7be24d5f60a8c9e1b2d3f4a5b6", "notifyd-verify-7Qx"
DEVICE = "a0" * 32
PHONE, WHATSAPP = "+14155550123", "+14155550199"
WINDOW = 600
FAST = {"rate_per_sec": 1_000_000.0, "burst": 1_000_000, "backoff_base_sec": 1.0,
        "backoff_max_sec": 5.0}
TEMPLATES = {"push.title.j2": "{{ host }} is down", "push.body.j2": "{{ what }}",
             "sms.text.j2": "ALERT {{ host }}: {{ what }}", "chat.text.j2": "{{ what }}",
             "chat.title.j2": "{{ host }} is down"}
LADDER = [{"channel": c, "timeout_sec": WINDOW} for c in ("ios", "sms", "wa", "discord")] + [
    {"channel": "teams"}]


@dataclass
class Stack(OverHttp):
    e: Engine
    client: TestClient[Any, Any]
    apns: FakeApns
    vonage: FakeVonage
    whatsapp: FakeWhatsApp
    discord: FakeDiscord
    teams: FakeTeams
    key: str = ""

    async def person(self, user: str, phone: str = PHONE, device: str | None = DEVICE) -> None:
        await self.call("PUT", f"/v1/users/{user}", {"phone": phone, "whatsapp": WHATSAPP})
        if device is not None:
            made = await self.call("POST", f"/v1/users/{user}/devices",
                                   {"type": "apns", "token": device.upper()}, status=201)
            assert (made["type"], made["state"]) == ("apns", "live")

    async def post(self, user: str, kind: str = "alert") -> str:
        made = await self.call("POST", "/v1/notifications", {
            "user_id": user, "kind": kind, "dedup_key": uuid.uuid4().hex,
            "params": {"host": "web-1", "what": "disk 91% full"}}, status=202)
        nid: str = made["notification_id"]
        self.e.ids.append(nid)
        return nid


def write_config(tmp_path: Path, apns: FakeApns, apns_key: ec.EllipticCurvePrivateKey,
                 vonage: FakeVonage, vonage_key: rsa.RSAPrivateKey, whatsapp: FakeWhatsApp,
                 discord: FakeDiscord, teams: FakeTeams) -> Path:
    kinds = {"alert": {"stop": "delivered", "ladder": LADDER},
             "chain": {"ladder": LADDER}}
    for kind in kinds:
        for name, text in TEMPLATES.items():
            path = tmp_path / "templates" / kind / "en" / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
    wa_templates = [{"kind": k, "name": "server_down", "parameters": ["host"]} for k in kinds]
    config = tmp_path / "notifyd.toml"
    config.write_text(tomli_w.dumps({
        "server": {"public_url": PUBLIC},
        "store": {"url": store_url(tmp_path), "sqlite": {"synchronous": "NORMAL"}},
        "templates": {"folder": "templates"},
        "channels": {
            "ios": {"type": "apns", "team_id": TEAM, "key_id": KEY_ID,
                    "private_key": pem(apns_key), "topic": TOPIC, "base_url": apns.base_url,
                    **FAST},
            "sms": {"type": "vonage", "application_id": APP, "private_key": pem(vonage_key),
                    "from_number": "+15005550006", "base_url": vonage.base_url, **FAST},
            "wa": {"type": "whatsapp", "phone_number_id": WA_PHONE_ID, "access_token": WA_TOKEN,
                   "base_url": whatsapp.base_url, "templates": wa_templates, **FAST},
            "discord": {"type": "discord", "webhook_url": discord.url, **FAST},
            "teams": {"type": "teams", "webhook_url": teams.url, **FAST},
        },
        "kinds": kinds,
        "webhooks": {"vonage": {"signature_secret": VONAGE_SECRET, "api_key": "abcd1234"},
                     "whatsapp": {"app_secret": META_SECRET, "verify_token": VERIFY}},
    }))
    return config


async def apns_and_vonage(peers: AsyncExitStack, tmp_path: Path,
                          monkeypatch: pytest.MonkeyPatch) -> tuple[
        FakeApns, ec.EllipticCurvePrivateKey, FakeVonage, rsa.RSAPrivateKey]:
    """APNs' stand-in (HTTP/2 over TLS, its certificate trusted as a CA's would be) and
    Vonage's, each with the private key its channel signs with; stopped with `peers`."""
    cert, cert_key = self_signed(tmp_path)
    monkeypatch.setenv("SSL_CERT_FILE", str(cert))
    apns_key = ec.generate_private_key(ec.SECP256R1())
    vonage_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    apns = await peers.enter_async_context(
        FakeApns(TEAM, KEY_ID, apns_key.public_key(), TOPIC, cert, cert_key))
    vonage = await peers.enter_async_context(FakeVonage(APP, vonage_key.public_key()))
    return apns, apns_key, vonage, vonage_key


@asynccontextmanager
async def stack(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Stack]:
    async with AsyncExitStack() as peers:
        apns, apns_key, vonage, vonage_key = await apns_and_vonage(peers, tmp_path, monkeypatch)
        whatsapp = await peers.enter_async_context(
            FakeWhatsApp(WA_PHONE_ID, WA_TOKEN, {"server_down": (("en_US",), 1)}))
        discord = await peers.enter_async_context(
            FakeDiscord("1122334455667788990", "nLq3-Secret_WebhookToken_7Xv"))
        teams = await peers.enter_async_context(FakeTeams("b7c2d4e6f80a4c1e", "Zk3vSig_q8mP"))
        config = write_config(tmp_path, apns, apns_key, vonage, vonage_key, whatsapp, discord,
                              teams)
        async with served(config, frozenset({"post", "read", "users"})) as (e, _, client, key):
            yield Stack(e, client, apns, vonage, whatsapp, discord, teams, key)
        assert apns.problems == [] and vonage.problems == [] and discord.problems == []


async def test_an_alert_posted_over_http_climbs_apns_vonage_whatsapp_discord_and_teams(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    async with stack(tmp_path, monkeypatch) as s:
        await s.person("ada")
        nid = await s.post("ada")
        assert await s.e.cycle() == 1
        [push] = s.apns.seen
        assert push.alpn == "h2" and push.token == DEVICE
        assert push.json["aps"]["alert"] == {"title": "web-1 is down", "body": "disk 91% full"}
        assert push.json["notifyd_key"].startswith(f"{nid}:0:d_")

        assert await s.advance(WINDOW + 1) == 1
        [sms] = s.vonage.sent
        assert (sms["to"], sms["text"], sms["client_ref"]) == (
            PHONE[1:], "ALERT web-1: disk 91% full", f"{nid}:1")
        assert sms["webhook_url"] == f"{PUBLIC}/v1/webhooks/vonage"

        assert await s.advance(WINDOW + 1) == 1
        [wa] = s.whatsapp.sent
        assert (wa["to"], wa["template"]["name"], wa["biz_opaque_callback_data"]) == (
            WHATSAPP, "server_down", f"{nid}:2")

        assert await s.advance(WINDOW + 1) == 1
        assert s.discord.posted == [{"embeds": [{"title": "web-1 is down",
                                                 "description": "disk 91% full"}],
                                     "allowed_mentions": {"parse": []}}]
        assert await s.advance(WINDOW + 1) == 1
        [card] = s.teams.cards
        assert [b["text"] for b in card["body"]] == ["web-1 is down", "disk 91% full"]

        doc = await s.status(nid)
        assert doc["sent_via"] == ["ios", "sms", "wa", "discord", "teams"]
        assert [st["status"] for st in doc["steps"]] == ["sent"] * 5
        assert doc["steps"][2]["provider_ref"] == s.whatsapp.wamids[0]


async def test_a_vonage_delivery_receipt_ends_the_ladder(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    async with stack(tmp_path, monkeypatch) as s:
        await s.person("ada")
        nid = await s.post("ada")
        await s.e.cycle()
        await s.advance(WINDOW + 1)
        ref = (await s.status(nid))["steps"][1]["provider_ref"]
        body = vonage_status(ref, "delivered", PHONE, f"{nid}:1")
        # Vonage may retry an unsigned status; a 5xx asks it to sign the retry: nothing stored.
        r = await s.client.post("/v1/webhooks/vonage", data=body)
        assert r.status == 503 and (await r.json())["error"]["code"] == "bad_signature"
        forged = vonage_signed(body, "not-the-secret-0123456789abcdef0123", s.e.now // 1000)
        assert (await s.client.post("/v1/webhooks/vonage", data=body, headers=forged)).status \
            == 503
        assert await s.e.receipts_stored() == 0
        headers = vonage_signed(body, VONAGE_SECRET, s.e.now // 1000)
        r = await s.client.post("/v1/webhooks/vonage", data=body, headers=headers)
        assert r.status == 200, await r.text()
        doc = await s.status(nid)
        assert doc["current_state"] == "delivered" and doc["delivered_via"] == "sms"
        assert doc["resolution"]["resolved_by"] == "receipt:vonage"
        assert [st["status"] for st in doc["steps"]] == ["sent", "sent"] + ["cancelled"] * 3
        assert await s.advance(WINDOW + 1) == 0 and s.whatsapp.sent == []


async def test_a_whatsapp_read_status_ends_the_ladder_after_meta_checked_the_url(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    async with stack(tmp_path, monkeypatch) as s:
        check = {"hub.mode": "subscribe", "hub.verify_token": VERIFY, "hub.challenge": "98765"}
        r = await s.client.get("/v1/webhooks/whatsapp", params=check)
        assert (r.status, await r.text()) == (200, "98765")
        r = await s.client.get("/v1/webhooks/whatsapp", params={**check,
                                                                 "hub.verify_token": "guess"})
        assert r.status == 403
        assert (await s.client.get("/v1/webhooks/vonage", params=check)).status == 404

        await s.person("ada", device=None)  # no device: the push step is suppressed at once
        nid = await s.post("ada")
        await s.e.run_dry()  # no contact for ios: the ladder moves on to the SMS at once
        assert await s.states(nid) == ["suppressed", "sent", "pending", "pending", "pending"]
        await s.advance(2 * WINDOW + 1)  # windows only ever move later: WhatsApp's, as planned
        assert await s.states(nid) == ["suppressed", "sent", "sent", "pending", "pending"]
        [wamid] = s.whatsapp.wamids
        body = whatsapp_status(wamid, "read", WHATSAPP, f"{nid}:2")
        assert (await s.client.post("/v1/webhooks/whatsapp", data=body,
                                    headers=meta_signed(body, "0" * 32))).status == 401
        r = await s.client.post("/v1/webhooks/whatsapp", data=body,
                                headers=meta_signed(body, META_SECRET))
        assert r.status == 200, await r.text()
        doc = await s.status(nid)
        assert doc["current_state"] == "delivered" and doc["delivered_via"] == "wa"
        assert doc["resolution"]["resolved_by"] == "receipt:whatsapp"
        assert doc["steps"][2]["evidence"] == "opened"
        assert await s.advance(WINDOW + 1) == 0 and s.discord.posted == []


async def test_the_failure_table_holds_for_each_channel(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    async with stack(tmp_path, monkeypatch) as s:
        await s.person("bob", phone="+15550000001")  # Vonage refuses this number
        s.apns.replies[DEVICE] = Reply(410, "Unregistered", timestamp=s.e.now)
        s.discord.limit = 0  # rate limited
        s.teams.canned = web.Response(status=503, text="Service Unavailable")
        nid = await s.post("bob", "chain")

        # Rejected: the device is dead, the number suppressed, each pulling the next step now.
        await s.e.run_dry()
        assert await s.states(nid) == ["rejected", "rejected", "sent", "pending", "pending"]
        devices = (await s.call("GET", "/v1/users/bob/devices"))["devices"]
        assert [(d["type"], d["state"]) for d in devices] == [("apns", "dead")]
        assert "Unregistered" in devices[0]["reason"]
        listed = (await s.call("GET", "/v1/suppressions"))["suppressions"]
        assert {(x["channel_type"], x["address"]) for x in listed} == {
            ("push", devices[0]["device_id"]), ("sms", "+15550000001")}

        # Failed: Discord's 429 and Teams' outage are retried, and go once the provider does.
        assert await s.advance(3 * WINDOW + 1) == 1  # Discord's step, as planned
        steps = (await s.status(nid))["steps"]
        assert steps[3]["status"] == "pending" and len(steps[3]["attempt_log"]) == 1
        assert "HTTP 429" in steps[3]["attempt_log"][0]["reason"]
        s.discord.limit = 1000
        await s.advance(10)  # past retry_after (1.25 s) and the backoff
        steps = (await s.status(nid))["steps"]
        assert steps[3]["status"] == "sent" and len(steps[3]["attempt_log"]) == 2
        await s.advance(WINDOW + 1)  # Teams' window, from Discord's send
        steps = (await s.status(nid))["steps"]
        assert steps[4]["status"] == "pending" and "HTTP 503" in steps[4]["attempt_log"][0][
            "reason"]
        s.teams.canned = None
        await s.advance(10)
        assert await s.states(nid) == ["rejected", "rejected", "sent", "sent", "sent"]
        assert len(s.discord.posted) == 1 and len(s.teams.cards) == 1

        # WhatsApp's own rejection comes later, as a status: the whatsapp number is suppressed,
        # never the phone's.
        body = whatsapp_status(s.whatsapp.wamids[0], "failed", WHATSAPP, f"{nid}:2", 131026)
        r = await s.client.post("/v1/webhooks/whatsapp", data=body,
                                headers=meta_signed(body, META_SECRET))
        assert r.status == 200, await r.text()
        listed = (await s.call("GET", "/v1/suppressions"))["suppressions"]
        assert ("whatsapp", WHATSAPP, "bounced") in {
            (x["channel_type"], x["address"], x["reason"]) for x in listed}
        later = await s.post("bob", "chain")
        await s.e.run_dry()
        assert (await s.states(later))[:3] == ["suppressed", "suppressed", "suppressed"]
        assert [st["reason"] for st in (await s.status(later))["steps"][:3]] == [
            "no_contact: the user has no live apns device",
            "suppression_list: HTTP 422 Vonage 1020: not a valid phone number",
            "suppression_list: bounced"]
