"""The apns adapter against APNs' stand-in (tests/fake_apns.py): HTTP/2 over TLS on a real
socket, the provider token verified with PyJWT against the key's public half.

Covered: the request a device gets (every apns-* header, the body, HTTP/2); the provider token,
one per team and key, reused across sends and devices, made again at 50 minutes and never within
20 (the stand-in answers TooManyProviderTokenUpdates if it were); ExpiredProviderToken; each
answer's mapping (410 Unregistered and 400 BadDeviceToken disable the device; throttling,
credentials and outages never do); a GOAWAY or a silent server (Unknown); the egress proxy (a
CONNECT tunnel with HTTP/2 inside); the settings' checks. Time is a FakeClock; nothing sleeps.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jwt
import pytest
from channel_support import pem, render_input
from cryptography.hazmat.primitives.asymmetric import ec
from fake_apns import FakeApns, Reply
from fake_proxy import FakeProxy
from fake_smtp import self_signed

from notifyd.channels.apns import APNS_ID, TYPE, ApnsChannel, ProviderToken
from notifyd.channels.base import (
    Answer,
    Device,
    Failed,
    Fanout,
    Limits,
    Message,
    Rejected,
    RenderError,
    RenderInput,
    Sent,
    Unknown,
)
from notifyd.channels.egress import Egress
from notifyd.channels.types.apns import ApnsSettings
from notifyd.core.clock import FakeClock

TEAM, KEY_ID, TOPIC = "TEAM4X7Q2Z", "KEYAB12CD3", "com.acme.alerts"
START_MS = 1_790_000_000_000
TOKEN_A = "a0" * 32  # device tokens: never in a reason
TOKEN_B = "b1" * 32
LIMITS = Limits(timeout_sec=2.0, max_connections=4)
FAKE_TIME: dict[str, Any] = {"verify_iat": False}  # iat is the FakeClock's, not the machine's


@dataclass
class Rig:
    fake: FakeApns
    channel: ApnsChannel
    clock: FakeClock
    key: ec.EllipticCurvePrivateKey

    def step(self, *tokens: str, **over: Any) -> RenderInput:
        devices = tuple(Device(f"d_{i:016x}", "apns", t) for i, t in enumerate(tokens))
        return render_input(**{"channel": "ios", "devices": devices, "content": {
            "title": "web-1 is down", "body": "disk 91% full"}} | over)

    async def send(self, step: RenderInput, channel: ApnsChannel | None = None
                   ) -> dict[str, Answer]:
        """Render and send `step` on `channel` (default the rig's): each device's answer."""
        channel = channel or self.channel
        rendered = channel.render(step)
        out = await channel.send(Message(f"{step.notification_id}:{step.step_no}",
                                         rendered.destination, rendered.payload))
        assert isinstance(out, Fanout)
        for _, answer in out.results:
            said = answer.reason if not isinstance(answer, Sent) else answer.detail or ""
            assert TOKEN_A not in said and TOKEN_B not in said and "BEGIN" not in said
        return dict(out.results)


def settings(key: ec.EllipticCurvePrivateKey, base_url: str, **over: Any) -> ApnsSettings:
    s = ApnsSettings(team_id=TEAM, key_id=KEY_ID, private_key=pem(key), topic=TOPIC,
                     base_url=base_url, **over)
    assert s.problems() == []
    return s


@pytest.fixture
async def rig(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Rig]:
    cert, cert_key = self_signed(tmp_path, "apns.test")
    monkeypatch.setenv("SSL_CERT_FILE", str(cert))  # the system's trust store, as a CA would be
    key = ec.generate_private_key(ec.SECP256R1())
    clock = FakeClock(START_MS)
    async with FakeApns(TEAM, KEY_ID, key.public_key(), TOPIC, cert, cert_key) as fake:
        fake.now = lambda: clock.now_ms() / 1000
        channel = ApnsChannel("ios", settings(key, fake.base_url), LIMITS, clock,
                              ProviderToken(TEAM, KEY_ID, key))
        try:
            yield Rig(fake, channel, clock, key)
        finally:
            await channel.close()
    assert fake.problems == []


async def test_a_push_reaches_apns_over_http2_with_its_headers_and_a_token_pyjwt_verifies(
        rig: Rig) -> None:
    step = rig.step(TOKEN_A, urgent=True, collapse_key="disk-web-1")
    answers = await rig.send(step)
    [seen] = rig.fake.seen
    assert seen.alpn == "h2" and seen.path == f"/3/device/{TOKEN_A}"
    h = seen.headers
    assert (h["apns-topic"], h["apns-push-type"], h["apns-priority"]) == (TOPIC, "alert", "10")
    assert h["apns-expiration"] == str((START_MS + 3_600_000) // 1000)  # the step's deadline
    assert h["apns-collapse-id"] == "disk-web-1"
    key = "n_01k9zq3x7c2m4v6b8n:0:d_0000000000000000"
    assert h["apns-id"] == str(uuid.uuid5(APNS_ID, key))  # the same on every retry
    assert seen.json == {"aps": {"alert": {"title": "web-1 is down", "body": "disk 91% full"}},
                         "notifyd_key": key}
    # The oracle: PyJWT verifies the provider token with the key's public half.
    token = h["authorization"].removeprefix("bearer ")
    assert jwt.get_unverified_header(token) == {"alg": "ES256", "kid": KEY_ID}
    claims = jwt.decode(token, rig.key.public_key(), algorithms=["ES256"], options=FAKE_TIME)
    assert claims == {"iss": TEAM, "iat": START_MS // 1000}
    assert answers == {"d_0000000000000000": Sent(h["apns-id"])}
    # A retry sends the same bytes under the same apns-id.
    await rig.send(step)
    assert rig.fake.seen[1].body == seen.body
    assert rig.fake.seen[1].headers["apns-id"] == h["apns-id"]


async def test_a_normal_kind_asks_for_priority_5_and_an_expired_step_for_no_storage(
        rig: Rig) -> None:
    await rig.send(rig.step(TOKEN_A))
    await rig.send(rig.step(TOKEN_A, step_no=1, now=START_MS + 3_600_000))
    first, late = (s.headers for s in rig.fake.seen)
    assert first["apns-priority"] == "5" and "apns-collapse-id" not in first
    assert late["apns-expiration"] == "0"  # nothing left of its time to live: do not store it


async def test_one_provider_token_serves_every_send_until_50_minutes_and_none_sooner_than_20(
        rig: Rig) -> None:
    await asyncio.gather(*(rig.send(rig.step(TOKEN_A, TOKEN_B, step_no=n)) for n in range(3)))
    assert len(rig.fake.seen) == 6 and len(rig.fake.tokens) == 1  # one token, six requests
    rig.clock.advance(49 * 60)
    await rig.send(rig.step(TOKEN_A))
    assert len(rig.fake.tokens) == 1
    rig.clock.advance(60)  # 50 minutes old: made again, well before APNs' hour
    await rig.send(rig.step(TOKEN_A))
    assert len(rig.fake.tokens) == 2
    claims = jwt.decode(rig.fake.tokens[1], rig.key.public_key(), algorithms=["ES256"],
                        options=FAKE_TIME)
    assert claims["iat"] == START_MS // 1000 + 50 * 60


async def test_an_expired_provider_token_is_remade_but_never_within_20_minutes(
        rig: Rig) -> None:
    await rig.send(rig.step(TOKEN_A))
    rig.fake.now = lambda: rig.clock.now_ms() / 1000 + 3 * 3600  # APNs' clock is ahead of ours
    rig.clock.advance(10 * 60)
    answer = (await rig.send(rig.step(TOKEN_A)))["d_0000000000000000"]
    assert isinstance(answer, Failed) and not answer.final
    assert answer.reason.startswith("HTTP 403 ExpiredProviderToken")
    assert "new provider token" not in answer.reason  # ten minutes old: kept
    rig.clock.advance(15 * 60)
    answer = (await rig.send(rig.step(TOKEN_A)))["d_0000000000000000"]
    assert isinstance(answer, Failed) and "the next try makes a new provider token" in answer.reason
    rig.fake.now = lambda: rig.clock.now_ms() / 1000
    assert isinstance((await rig.send(rig.step(TOKEN_A)))["d_0000000000000000"], Sent)
    assert len(rig.fake.tokens) == 2  # and never TooManyProviderTokenUpdates (problems: none)


@pytest.mark.parametrize(("reply", "kind", "final"), [
    (Reply(410, "Unregistered", timestamp=START_MS), Rejected, None),
    (Reply(400, "BadDeviceToken"), Rejected, None),
    (Reply(400, "DeviceTokenNotForTopic"), Failed, True),
    (Reply(429, "TooManyRequests"), Failed, False),
    (Reply(500, "InternalServerError"), Failed, False),
    (Reply(503, "ServiceUnavailable", headers={"retry-after": "30"}), Failed, False),
])
async def test_each_answer_for_one_device_leaves_the_other_device_sent(
        rig: Rig, reply: Reply, kind: type, final: bool | None) -> None:
    rig.fake.replies[TOKEN_A] = reply
    answers = await rig.send(rig.step(TOKEN_A, TOKEN_B))
    dead, live = answers["d_0000000000000000"], answers["d_0000000000000001"]
    assert isinstance(dead, kind) and isinstance(live, Sent), answers
    assert reply.reason is not None and reply.reason in dead.reason  # type: ignore[union-attr]
    if final is not None:
        assert isinstance(dead, Failed) and dead.final is final
    if reply.status == 503:
        assert isinstance(dead, Failed) and dead.retry_after == 30.0


async def test_another_teams_key_is_refused_as_credentials_never_as_a_dead_device(
        rig: Rig) -> None:
    other = ec.generate_private_key(ec.SECP256R1())
    channel = ApnsChannel("ios", settings(other, rig.fake.base_url), LIMITS, rig.clock,
                          ProviderToken(TEAM, KEY_ID, other))
    try:
        [answer] = (await rig.send(rig.step(TOKEN_A), channel)).values()
    finally:
        await channel.close()
    assert isinstance(answer, Failed) and answer.reason.startswith("HTTP 403 InvalidProviderToken")


async def test_a_goaway_or_silence_after_the_request_is_unknown(rig: Rig) -> None:
    rig.fake.replies[TOKEN_A] = Reply(goaway=True)
    rig.fake.replies[TOKEN_B] = Reply(hang=True)
    gone = (await rig.send(rig.step(TOKEN_A)))["d_0000000000000000"]
    assert isinstance(gone, Unknown) and gone.reason.startswith("connection lost after sending")
    quick = ApnsChannel("ios", settings(rig.key, rig.fake.base_url),
                        Limits(timeout_sec=0.3, max_connections=4), rig.clock, rig.channel.token)
    try:
        silent = (await rig.send(rig.step(TOKEN_B), quick))["d_0000000000000000"]
    finally:
        await quick.close()
    assert isinstance(silent, Unknown) and silent.reason.startswith("timeout")


async def test_apns_is_reached_through_the_egress_proxy_with_http2_in_the_tunnel(
        rig: Rig) -> None:
    async with FakeProxy({"apns.test": "127.0.0.1"}, ("egress", "s3cret")) as proxy:
        egress = Egress.of(proxy.url, "", [])
        channel = ApnsChannel("ios", settings(rig.key, f"https://apns.test:{rig.fake.port}"),
                              Limits(timeout_sec=2.0, max_connections=4, egress=egress),
                              rig.clock, rig.channel.token)
        try:
            [answer] = (await rig.send(rig.step(TOKEN_A), channel)).values()
        finally:
            await channel.close()
    assert isinstance(answer, Sent), answer
    assert proxy.tunnels == [f"apns.test:{rig.fake.port}"]
    assert proxy.authorizations == ["Basic ZWdyZXNzOnMzY3JldA=="]
    assert rig.fake.seen[-1].alpn == "h2"  # TLS and HTTP/2 end to end, through the tunnel


async def test_render_refuses_what_apns_would(rig: Rig) -> None:
    for step, why in ((rig.step(), "no live APNs device"),
                      (rig.step(TOKEN_A, collapse_key="x" * 65), "over 64 bytes"),
                      (rig.step(TOKEN_A, content={"title": "t", "body": "é" * 2100}),
                       "APNs takes 4096")):
        with pytest.raises(RenderError) as refused:
            rig.channel.render(step)
        assert why in str(refused.value.error)
    answers = await rig.send(rig.step("zz" * 32))  # not hex: never sent, the device is dead
    assert isinstance(answers["d_0000000000000000"], Rejected) and rig.fake.seen == []


def test_settings_refuse_a_wrong_key_plain_http_and_bad_ids() -> None:
    rsa_pem = "-----BEGIN PRIVATE KEY-----\nnot a key\n-----END PRIVATE KEY-----\n"
    bad = ApnsSettings(team_id="team", key_id=KEY_ID, private_key=rsa_pem, topic=TOPIC,
                       base_url="http://127.0.0.1:1")
    problems = dict(bad.problems())
    assert problems["team_id"] == "must be the ten-character Team ID"
    assert problems["private_key"].startswith("is not a PEM private key")
    assert "TLS only" in problems["base_url"]
    assert "not a key" not in str(problems)
    assert TYPE.contact is not None and str(TYPE.contact) == "live apns device"


def test_the_environment_picks_apples_host_unless_base_url_says_otherwise() -> None:
    key = ec.generate_private_key(ec.SECP256R1())
    assert settings(key, "").origin() == "https://api.push.apple.com"
    assert settings(key, "", environment="sandbox").origin() == \
        "https://api.sandbox.push.apple.com"
    assert settings(key, "https://gateway.example:8443/", environment="sandbox").origin() == \
        "https://gateway.example:8443"
