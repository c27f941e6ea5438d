"""The email API channels end to end: a ladder started over the HTTP API sends through ses,
sendgrid, mailgun and postmark to stand-ins speaking each provider's wire format
(tests/fake_<provider>.py), and each provider's own webhook, signed as that provider signs it,
finds the step by the message id the send recorded (or by the step key in the metadata the
channel set) and applies what it says: a delivery ends a stop = "delivered" ladder, a bounce
puts the address on the suppression list. The failure table of docs/concepts.md holds for each: sent; an
address the provider refuses rejected, suppressed, the next step pulled forward; an outage
failed and retried until it goes.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import logging
import secrets
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import fake_mailgun
import fake_postmark
import fake_sendgrid
import fake_ses
import pytest
import tomli_w
from aiohttp.test_utils import TestClient
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa
from cryptography.x509.oid import NameOID
from engine_support import Engine, served, store_url
from fake_api import FakeApi

from notifyd.http.kit import Context

PUBLIC = "https://notify.example.com"
ADDRESS, REFUSED = "ada@example.org", "zoë@example.org"
MAILGUN_SIGNING = "key-" + "7a" * 16
POSTMARK_HOOK = ("hook", "p0stmark-hook-pw")
SENDGRID_EVENTS = ec.generate_private_key(ec.SECP256R1())
TOPIC = "arn:aws:sns:eu-west-1:123456789012:ses-events"
CERT_URL = "https://sns.eu-west-1.amazonaws.com/SimpleNotificationService-0123.pem"
SNS = rsa.generate_private_key(public_exponent=65537, key_size=2048)


def sns_certificate() -> bytes:
    """SNS's signing certificate, self-signed, valid around the wall clock the stack runs on."""
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "sns.amazonaws.com")])
    now = datetime.now(UTC)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
            .public_key(SNS.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - timedelta(days=1)).not_valid_after(now + timedelta(days=1))
            .sign(SNS, hashes.SHA256()))
    return cert.public_bytes(serialization.Encoding.PEM)


def serve_sns_certificate(ctx: Context) -> None:
    """The webhook's fetch of SNS's signing certificate answered here, never from AWS."""
    pem = sns_certificate()

    async def fetch(url: str) -> bytes:
        assert url == CERT_URL, url
        return pem

    ctx.fetch = fetch  # type: ignore[assignment]


FAST = {"rate_per_sec": 1_000_000.0, "burst": 1_000_000, "backoff_base_sec": 1.0}
TEMPLATES = {"email.subject.j2": "Digest: {{ what }}", "email.text.j2": "Hello,\n{{ what }}\n"}
PROVIDERS = ("ses", "sendgrid", "mailgun", "postmark")


def channel_settings(name: str, fake: FakeApi) -> dict[str, Any]:
    base = {"type": name, "base_url": fake.base_url, **FAST}
    if name == "ses":
        return {**base, "region": fake_ses.REGION, "access_key_id": fake_ses.ACCESS_KEY,
                "secret_access_key": fake_ses.SECRET_KEY, "from_address": fake_ses.SENDER,
                "configuration_set": fake_ses.CONFIGURATION_SET}
    if name == "sendgrid":
        return {**base, "api_key": fake_sendgrid.API_KEY, "from_address": fake_sendgrid.SENDER}
    if name == "mailgun":
        return {**base, "api_key": fake_mailgun.API_KEY, "domain": fake_mailgun.DOMAIN,
                "from_address": f"alerts@{fake_mailgun.DOMAIN}"}
    return {**base, "server_token": fake_postmark.TOKEN, "from_address": fake_postmark.SENDER}


def webhooks() -> dict[str, Any]:
    der = SENDGRID_EVENTS.public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    return {"ses": {"topic_arns": [TOPIC]},
            "sendgrid": {"public_key": base64.b64encode(der).decode()},
            "mailgun": {"signing_key": MAILGUN_SIGNING},
            "postmark": {"username": POSTMARK_HOOK[0], "password": POSTMARK_HOOK[1]}}


@dataclass
class Stack:
    e: Engine
    client: TestClient[Any, Any]
    fakes: dict[str, FakeApi]
    key: str

    async def call(self, method: str, path: str, body: Any = None) -> Any:
        r = await self.client.request(method, path, json=body,
                                      headers={"Authorization": f"Bearer {self.key}"})
        assert r.status < 300, await r.text()
        return await r.json() if r.status != 204 else None

    async def notify(self, provider: str, user: str = "ada") -> str:
        """A notification posted over HTTP whose ladder starts on `provider`'s channel."""
        done = await self.call("POST", "/v1/notifications", {
            "user_id": user, "kind": f"via_{provider}", "params": {"what": secrets.token_hex(3)},
            "dedup_key": secrets.token_hex(6)})
        nid: str = done["notification_id"]
        self.e.ids.append(nid)
        return nid

    async def status(self, nid: str) -> dict[str, Any]:
        return await self.e.status(nid)


@asynccontextmanager
async def stack(tmp_path: Path) -> AsyncIterator[Stack]:
    fakes: dict[str, FakeApi] = {
        "ses": await fake_ses.FakeSes().start(),
        "sendgrid": await fake_sendgrid.FakeSendgrid().start(),
        "mailgun": await fake_mailgun.FakeMailgun().start(),
        "postmark": await fake_postmark.FakePostmark().start()}
    kinds = {f"via_{p}": {"stop": "delivered", "transactional": False,
                          "ladder": [{"channel": p, "timeout_sec": 600}, {"channel": "log"}]}
             for p in PROVIDERS}
    for kind in kinds:
        for name, text in TEMPLATES.items():
            path = tmp_path / "templates" / kind / "en" / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
    config = tmp_path / "notifyd.toml"
    config.write_text(tomli_w.dumps({
        "server": {"public_url": PUBLIC},
        "store": {"url": store_url(tmp_path), "sqlite": {"synchronous": "NORMAL"}},
        "templates": {"folder": "templates"},
        "channels": {p: channel_settings(p, fakes[p]) for p in PROVIDERS},
        "kinds": kinds, "webhooks": webhooks()}))
    try:
        # served: SES checks the signing time, and the providers' webhooks are dated now.
        async with served(config, frozenset({"post", "read", "resolve", "users"})) as (
                e, ctx, client, key):
            serve_sns_certificate(ctx)
            s = Stack(e, client, fakes, key)
            await s.call("PUT", "/v1/users/ada", {"email": ADDRESS})
            yield s
    finally:
        for fake in fakes.values():
            await fake.stop()


# --- each provider's webhook, signed as it signs -------------------------------------------------


def iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="milliseconds").replace(
        "+00:00", "Z")


def ses_hook(s: Stack, event: str, ref: str | None, key: str | None) -> tuple[bytes, dict[str, str]]:
    """An SES event published to SNS: the Message JSON inside a notification signed with the
    test certificate (SignatureVersion 2)."""
    mail: dict[str, Any] = {"messageId": ref or "0102019unknown-00", "timestamp": iso(s.e.now),
                            "destination": [ADDRESS], "source": fake_ses.SENDER}
    if key:
        mail["tags"] = {"notifyd_key": [key.replace(":", "-")]}
    detail = ({"delivery": {"timestamp": iso(s.e.now), "recipients": [ADDRESS]}}
              if event == "delivered" else
              {"bounce": {"bounceType": "Permanent", "bounceSubType": "General",
                          "timestamp": iso(s.e.now), "bouncedRecipients": [
                              {"emailAddress": ADDRESS, "status": "5.1.1"}]}})
    message = json.dumps({"eventType": "Delivery" if event == "delivered" else "Bounce",
                          "mail": mail, **detail})
    env = {"Type": "Notification", "MessageId": secrets.token_hex(8), "TopicArn": TOPIC,
           "Message": message, "Timestamp": iso(s.e.now), "SignatureVersion": "2",
           "SigningCertURL": CERT_URL}
    text = "".join(f"{n}\n{env[n]}\n" for n in ("Message", "MessageId", "Timestamp", "TopicArn",
                                                 "Type"))
    signature = SNS.sign(text.encode(), padding.PKCS1v15(), hashes.SHA256())
    body = json.dumps({**env, "Signature": base64.b64encode(signature).decode()}).encode()
    return body, {"x-amz-sns-message-type": "Notification", "x-amz-sns-topic-arn": TOPIC}


def sendgrid_hook(s: Stack, event: str, ref: str | None,
                  key: str | None) -> tuple[bytes, dict[str, str]]:
    item: dict[str, Any] = {"email": ADDRESS, "timestamp": s.e.now // 1000,
                            "sg_event_id": secrets.token_hex(11), "category": ["via_sendgrid"]}
    if ref:
        item["sg_message_id"] = f"{ref}.recvd-5f8c7b9d6-2x4zq-1-65F1A3B2-7.0"
    if key:
        item["notifyd_key"] = key
    item |= ({"event": "delivered", "response": "250 2.0.0 OK"} if event == "delivered" else
             {"event": "bounce", "type": "bounce", "status": "5.1.1"})
    body = ("[" + json.dumps(item) + "]\r\n").encode()
    stamp = str(s.e.now // 1000)
    der = SENDGRID_EVENTS.sign(stamp.encode() + body, ec.ECDSA(hashes.SHA256()))
    return body, {"X-Twilio-Email-Event-Webhook-Signature": base64.b64encode(der).decode(),
                  "X-Twilio-Email-Event-Webhook-Timestamp": stamp}


def mailgun_hook(s: Stack, event: str, ref: str | None,
                 key: str | None) -> tuple[bytes, dict[str, str]]:
    data: dict[str, Any] = {"id": secrets.token_hex(11), "timestamp": s.e.now / 1000,
                            "recipient": ADDRESS, "tags": ["via_mailgun"],
                            "user-variables": {"notifyd_key": key} if key else {},
                            "message": {"headers": {"message-id": ref} if ref else {}}}
    data |= ({"event": "delivered"} if event == "delivered" else
             {"event": "failed", "severity": "permanent", "reason": "bounce",
              "delivery-status": {"code": 550, "enhanced-code": "5.1.1"}})
    token, stamp = secrets.token_hex(25), str(s.e.now // 1000)
    digest = hmac.new(MAILGUN_SIGNING.encode(), (stamp + token).encode(),
                      hashlib.sha256).hexdigest()
    return json.dumps({"signature": {"timestamp": stamp, "token": token, "signature": digest},
                       "event-data": data}).encode(), {"Content-Type": "application/json"}


def postmark_hook(s: Stack, event: str, ref: str | None,
                  key: str | None) -> tuple[bytes, dict[str, str]]:
    record: dict[str, Any] = {"MessageID": ref, "Tag": "via_postmark", "ServerID": 23,
                              "MessageStream": "outbound",
                              "Metadata": {"notifyd_key": key} if key else {}}
    record |= ({"RecordType": "Delivery", "Recipient": ADDRESS, "DeliveredAt": iso(s.e.now)}
               if event == "delivered" else
               {"RecordType": "Bounce", "ID": secrets.randbelow(10**9), "Type": "HardBounce",
                "Email": ADDRESS, "BouncedAt": iso(s.e.now)})
    auth = "Basic " + base64.b64encode(":".join(POSTMARK_HOOK).encode()).decode()
    return json.dumps(record).encode(), {"Authorization": auth}


HOOKS: dict[str, Callable[[Stack, str, str | None, str | None], tuple[bytes, dict[str, str]]]] = {
    "ses": ses_hook, "sendgrid": sendgrid_hook, "mailgun": mailgun_hook,
    "postmark": postmark_hook}


async def hook(s: Stack, provider: str, event: str, *, ref: str | None = None,
               key: str | None = None) -> None:
    body, headers = HOOKS[provider](s, event, ref, key)
    r = await s.client.post(f"/v1/webhooks/{provider}", data=body, headers=headers)
    assert r.status == 200, await r.text()


# --- the tests ---------------------------------------------------------------------------------


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_delivery_receipt_finds_the_step_by_the_recorded_message_id(
        provider: str, tmp_path: Path) -> None:
    async with stack(tmp_path) as s:
        nid = await s.notify(provider)
        assert await s.e.cycle() == 1
        fake = s.fakes[provider]
        [ref] = fake.sent
        doc = await s.status(nid)
        step = doc["steps"][0]
        assert (step["status"], step["provider_ref"]) == ("sent", ref)
        assert doc["current_state"] == "log_pending"  # sent, proved nothing yet: the ladder waits
        if provider == "ses":  # botocore recomputed the signature the stand-in received
            assert isinstance(fake, fake_ses.FakeSes) and fake.signatures_checked == 1

        await hook(s, provider, "delivered", ref=ref)  # the message id alone, no key
        doc = await s.status(nid)
        assert doc["current_state"] == "delivered" and doc["delivered_via"] == provider
        assert doc["resolution"]["resolved_by"] == f"receipt:{provider}"
        assert [st["status"] for st in doc["steps"]] == ["sent", "cancelled"]
        assert doc["steps"][0]["evidence"] == "delivered"
        assert await s.e.store.orphan_count() == 0


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_bounce_found_by_the_key_the_channel_set_suppresses_the_address(
        provider: str, tmp_path: Path) -> None:
    async with stack(tmp_path) as s:
        nid = await s.notify(provider)
        await s.e.cycle()
        # The key as the provider hands it back: read from what its stand-in was sent.
        [mail] = s.fakes[provider].sent.values()
        key = {"ses": lambda: {t["Name"]: t["Value"] for t in mail["EmailTags"]}["notifyd_key"],
               "sendgrid": lambda: mail["custom_args"]["notifyd_key"],
               "mailgun": lambda: mail["v:notifyd_key"],
               "postmark": lambda: mail["Metadata"]["notifyd_key"]}[provider]()
        assert key.replace("-", ":") == f"{nid}:0"
        await hook(s, provider, "bounced", key=f"{nid}:0")  # the key alone, no message id
        assert await s.e.suppressed() == [("default", "email", ADDRESS, "bounced", provider)]
        assert [p.step_no for p in (await s.e.record(nid)).proofs] == [0]  # matched, no orphan
        assert await s.e.store.orphan_count() == 0
        assert await s.e.cycle() == 1  # the bounce pulled the next step forward
        assert (await s.status(nid))["steps"][1]["status"] == "sent"


SECRETS = (fake_ses.SECRET_KEY, fake_sendgrid.API_KEY, fake_mailgun.API_KEY, fake_postmark.TOKEN,
           MAILGUN_SIGNING, POSTMARK_HOOK[1])


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_the_failure_table_holds(provider: str, tmp_path: Path,
                                       caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, "notifyd")
    async with stack(tmp_path) as s:
        fake = s.fakes[provider]
        # Rejected: the provider refuses the address; it goes on the suppression list and the
        # next step goes at once.
        await s.call("PUT", "/v1/users/zoe", {"email": REFUSED})
        refused = await s.notify(provider, user="zoe")
        assert await s.e.cycle() == 1
        doc = await s.status(refused)
        assert doc["steps"][0]["status"] == "rejected", doc["steps"][0]
        assert (await s.e.suppressed())[0][1:3] == ("email", REFUSED)
        assert await s.e.cycle() == 1
        assert (await s.status(refused))["steps"][1]["status"] == "sent"

        # Failed: an outage is retried, with the same bytes, until the provider takes it.
        fake.down = True
        nid = await s.notify(provider)
        assert await s.e.cycle() == 1
        step = (await s.status(nid))["steps"][0]
        assert step["status"] == "pending" and step["attempt_log"][0]["outcome"] == "failed"
        assert "HTTP 5" in step["attempt_log"][0]["reason"]
        fake.down = False
        s.e.clock.advance(5)
        assert await s.e.cycle() == 1
        doc = await s.status(nid)
        assert doc["steps"][0]["status"] == "sent" and doc["steps"][0]["provider_ref"] in fake.sent
        bodies = [seen.body for seen in fake.seen[-2:]]
        assert bodies[0] == bodies[1]

        # No key, token or webhook secret reached any log line on the way.
        assert caplog.records
        logged = caplog.text + "".join(str(r.args) for r in caplog.records)
        for secret in SECRETS:
            assert secret not in logged
