"""The vonage adapter against the Messages API's stand-in (tests/fake_vonage.py), which verifies
the application JWT with PyJWT against the application's public key.

Covered: the exact request (to and from without +, client_ref = the step key, webhook_url,
ttl from the step's deadline), the token's reuse, the answers for success, an invalid number
(Rejected: the address is suppressed), bad credentials, throttling, low balance, an illegal
sender and an outage (Failed, never Rejected), render's refusals. No reason carries the number,
the text or the key.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import jwt
import pytest
from aiohttp import web
from channel_support import pem, render_input
from cryptography.hazmat.primitives.asymmetric import rsa
from fake_vonage import FakeVonage, problem

from notifyd.channels.base import (
    Failed,
    Limits,
    Message,
    Outcome,
    Rejected,
    RenderError,
    RenderInput,
    Sent,
)
from notifyd.channels.types.vonage import VonageSettings
from notifyd.channels.vonage import TYPE, VonageChannel
from notifyd.core.contacts import PHONE

APP = "6f1c2d3e-4a5b-4c6d-8e7f-0a1b2c3d4e5f"
START = 1_790_000_000.0
NUMBER = "+14155550123"
LIMITS = Limits(timeout_sec=2.0, max_connections=4, public_url="https://notify.example.com/x")


@pytest.fixture(scope="module")
def rsa_key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


@dataclass
class Rig:
    fake: FakeVonage
    channel: VonageChannel
    now: list[float]

    def step(self, address: str = NUMBER, **over: Any) -> RenderInput:
        return render_input(**{"step_no": 1, "channel": "sms", "kind": "otp",
                               "expires_at": int(START * 1000) + 600_000, "address": address,
                               "content": {"text": "Your code is 482913"}} | over)

    async def send(self, step: RenderInput) -> Outcome:
        rendered = self.channel.render(step)
        answer = await self.channel.send(Message(f"{step.notification_id}:{step.step_no}",
                                                 rendered.destination, rendered.payload))
        said = answer.reason if isinstance(answer, Failed | Rejected) else ""
        for secret in (NUMBER, NUMBER[1:], "482913", "BEGIN"):
            assert secret not in said, answer
        return answer


@pytest.fixture
async def rig(rsa_key: rsa.RSAPrivateKey) -> AsyncIterator[Rig]:
    now = [START]
    async with FakeVonage(APP, rsa_key.public_key(), now=lambda: now[0]) as fake:
        settings = VonageSettings(application_id=APP, private_key=pem(rsa_key),
                                  from_number="+15005550006", base_url=fake.base_url)
        assert settings.problems() == []
        channel = VonageChannel("sms", settings, LIMITS, clock=lambda: now[0])
        try:
            yield Rig(fake, channel, now)
        finally:
            await channel.close()
    assert fake.problems == []


async def test_an_sms_reaches_vonage_with_the_step_key_and_a_jwt_pyjwt_verifies(
        rig: Rig, rsa_key: rsa.RSAPrivateKey) -> None:
    answer = await rig.send(rig.step())
    [body] = rig.fake.sent
    assert body == {"message_type": "text", "channel": "sms", "to": "14155550123",
                    "from": "15005550006", "text": "Your code is 482913",
                    "client_ref": "n_01k9zq3x7c2m4v6b8n:1", "ttl": 1800,  # Vonage's least
                    "webhook_url": "https://notify.example.com/x/v1/webhooks/vonage"}
    assert isinstance(answer, Sent) and answer.provider_ref and len(answer.provider_ref) == 36
    claims = jwt.decode(rig.fake.tokens[0], rsa_key.public_key(), algorithms=["RS256"],
                        options={"verify_exp": False, "verify_iat": False})  # the fake clock's
    assert claims["application_id"] == APP and claims["exp"] - claims["iat"] == 900
    assert jwt.get_unverified_header(rig.fake.tokens[0])["alg"] == "RS256"


async def test_the_application_token_is_reused_for_ten_minutes(rig: Rig) -> None:
    for _ in range(3):
        await rig.send(rig.step())
    rig.now[0] += 9 * 60
    await rig.send(rig.step())
    assert len(set(rig.fake.tokens)) == 1
    rig.now[0] += 61
    await rig.send(rig.step())
    assert len(set(rig.fake.tokens)) == 2 and len(rig.fake.sent) == 5


async def test_an_invalid_number_is_rejected_and_so_suppressed(rig: Rig) -> None:
    answer = await rig.send(rig.step("+15550000001"))
    assert isinstance(answer, Rejected)
    assert answer.reason == "HTTP 422 Vonage 1020: not a valid phone number"
    assert TYPE.contact is PHONE  # a rejected number goes on the sms suppression list


async def test_another_applications_key_is_failed_not_rejected(rig: Rig) -> None:
    other = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    settings = VonageSettings(application_id=APP, private_key=pem(other),
                              from_number="+15005550006", base_url=rig.fake.base_url)
    channel = VonageChannel("sms", settings, LIMITS, clock=lambda: rig.now[0])
    try:
        step = rig.step()
        rendered = channel.render(step)
        answer = await channel.send(Message("n_01k9zq3x7c2m4v6b8n:1", rendered.destination,
                                            rendered.payload))
    finally:
        await channel.close()
    assert isinstance(answer, Failed) and not answer.final
    assert answer.reason == "HTTP 401 Vonage unauthorized: check application_id and private_key"


@pytest.mark.parametrize(("canned", "reason", "final", "wait"), [
    (lambda: problem(429, "1000", "Throttled", "Slow down", headers={"Retry-After": "7"}),
     "HTTP 429 Vonage 1000", False, 7.0),
    (lambda: problem(500, "1030", "Internal error", "An error for +14155550123"),
     "HTTP 500 Vonage 1030", False, None),
    (lambda: web.Response(status=503, text="<html>upstream down</html>"), "HTTP 503", False, None),
    (lambda: problem(402, "low-balance", "Low balance", "Top up"),
     "HTTP 402 Vonage low-balance: the account's balance is low", False, None),
    (lambda: problem(422, "1120", "Illegal Sender Address - rejected", "for +14155550123"),
     "HTTP 422 Vonage 1120: the sender is not allowed for this destination", True, None),
])
async def test_throttling_outages_and_account_trouble_are_failed(
        rig: Rig, canned: Any, reason: str, final: bool, wait: float | None) -> None:
    rig.fake.canned = canned()
    answer = await rig.send(rig.step())
    assert isinstance(answer, Failed), answer
    assert (answer.reason, answer.final, answer.retry_after) == (reason, final, wait)


async def test_render_refuses_a_number_that_is_not_e164_and_a_text_over_1000(rig: Rig) -> None:
    for step, part in ((rig.step("0415555"), "address"),
                       (rig.step(content={"text": "x" * 1001}), "text")):
        with pytest.raises(RenderError) as refused:
            rig.channel.render(step)
        assert refused.value.template == part
    far = rig.channel.render(rig.step(expires_at=int(START * 1000) + 80 * 3600 * 1000))
    assert "ttl" not in far.payload  # beyond Vonage's 72 hours: its default
    assert json.loads(json.dumps(far.payload)) == far.payload
