"""The fcm adapter against a fake Google on 127.0.0.1 (tests/fake_fcm.py): the token endpoint
verifies our RS256 JWT with the throwaway key's public half, FCM checks our bearer token and
message and answers with FCM v1 success and error bodies per registration token.

Covered: what render freezes, the exact request, one token fetch for many concurrent sends and a
refresh shortly before expiry (a FakeClock, no sleeping), a 401 dropping the token, a fan-out with
one dead token, every answer's mapping, token-endpoint trouble (Failed: FCM never saw it),
timeouts and dropped connections (Unknown), refused connections (Failed), and secrets (the key,
the access token, the registration token) never in a reason.
"""

from __future__ import annotations

import asyncio
import base64
import json
import socket
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from fake_fcm import (
    FakeGoogle,
    Reply,
    answer,
    bad_request,
    drop,
    fcm_error,
    hold,
    ok,
)

from notifyd.channels.base import (
    Answer,
    Device,
    Failed,
    Fanout,
    Limits,
    Message,
    Outcome,
    Rejected,
    RenderError,
    RenderInput,
    Sent,
    Unknown,
)
from notifyd.channels.fcm import TYPE, FcmChannel, FcmSettings
from notifyd.core.clock import FakeClock
from notifyd.engine.sender import aggregate

START_MS = 1_790_000_000_000
EMAIL = "notifyd@demo-project.iam.gserviceaccount.com"
TOKEN_A = "fA1:APA91bHUNTtokenA_x-y"  # registration tokens: never in a reason
TOKEN_B = "fB2:APA91bHUNTtokenB_x-y"
KEY = "ntf_01:1"
LIMITS = Limits(timeout_sec=2.0, max_connections=8, public_url="https://notifyd.example")


@pytest.fixture(scope="module")
def rsa_key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def pem(key: rsa.RSAPrivateKey) -> str:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption()).decode()


def key_file(tmp_path: Path, key: rsa.RSAPrivateKey, token_uri: str | None,
             **over: Any) -> Path:
    data = {"type": "service_account", "project_id": "demo-project", "private_key_id": "kid1",
            "private_key": pem(key), "client_email": EMAIL, "token_uri": token_uri} | over
    path = tmp_path / "sa.json"
    path.write_text(json.dumps({k: v for k, v in data.items() if v is not None}))
    return path


@pytest.fixture
async def google(rsa_key: rsa.RSAPrivateKey) -> AsyncIterator[FakeGoogle]:
    g = await FakeGoogle(rsa_key.public_key(), EMAIL).start()
    yield g
    await g.stop()
    assert not g.problems  # nothing the adapter sent was malformed


@pytest.fixture
def settings(tmp_path: Path, rsa_key: rsa.RSAPrivateKey, google: FakeGoogle) -> FcmSettings:
    return FcmSettings(service_account_file=str(key_file(tmp_path, rsa_key, google.token_url)),
                       base_url=google.base_url)


def build(settings: FcmSettings, limits: Limits = LIMITS) -> FcmChannel:
    ch = TYPE.build("push", settings, limits)
    assert isinstance(ch, FcmChannel)
    return ch


@pytest.fixture
async def channel(settings: FcmSettings) -> AsyncIterator[FcmChannel]:
    ch = build(settings)
    yield ch
    await ch.close()


def step(*tokens: str, **over: Any) -> RenderInput:
    devices = tuple(Device(f"dev{i}", "fcm", t) for i, t in enumerate(tokens))
    base = RenderInput("ntf_01", 1, "push", "payment_failed", "u1", {"code": "123456"},
                       START_MS, START_MS + 3_600_000, None, "en", now=START_MS,
                       content={"title": "Payment failed", "body": "Your card was declined"},
                       devices=devices)
    return replace(base, **over)


def message(ch: FcmChannel, s: RenderInput) -> Message:
    r = ch.render(s)
    # What the sender stores and hands back: the payload frozen as JSON.
    return Message(f"{s.notification_id}:{s.step_no}", r.destination,
                   json.loads(json.dumps(r.payload, sort_keys=True)))


def answers(outcome: Outcome) -> list[Answer]:
    assert isinstance(outcome, Fanout)
    return [a for _, a in outcome.results]


# --- render --------------------------------------------------------------------------------


def test_render_freezes_one_message_and_the_fcm_devices(channel: FcmChannel,
                                                         google: FakeGoogle) -> None:
    s = step(TOKEN_A, collapse_key="card")
    s = replace(s, devices=(*s.devices, Device("web1", "webpush", "https://push.example/x")))
    r = channel.render(s)
    assert r.destination == f"{google.base_url}/v1/projects/demo-project/messages:send"
    assert r.payload == {
        "devices": [{"device_id": "dev0", "token": TOKEN_A}],  # the webpush device is not ours
        "message": {
            "notification": {"title": "Payment failed", "body": "Your card was declined"},
            "data": {"notifyd_kind": "payment_failed"},
            "android": {"ttl": "3600s", "priority": "normal", "collapse_key": "card"},
            "apns": {"headers": {"apns-expiration": str((START_MS + 3_600_000) // 1000),
                                 "apns-priority": "5", "apns-collapse-id": "card"}},
            "webpush": {"headers": {"TTL": "3600", "Urgency": "normal"}},
        },
    }
    assert json.loads(json.dumps(r.payload)) == r.payload  # JSON-able as is


def test_render_urgent_expired_and_far_off(channel: FcmChannel) -> None:
    urgent = channel.render(step(TOKEN_A, urgent=True)).payload["message"]
    assert urgent["android"]["priority"] == "high"
    assert urgent["apns"]["headers"]["apns-priority"] == "10"
    assert urgent["webpush"]["headers"]["Urgency"] == "high"
    late = channel.render(step(TOKEN_A, now=START_MS + 4_000_000)).payload["message"]
    assert late["android"]["ttl"] == "0s" and late["apns"]["headers"]["apns-expiration"] == "0"
    far = channel.render(step(TOKEN_A, expires_at=START_MS + 90 * 86_400_000)).payload["message"]
    assert far["android"]["ttl"] == f"{28 * 86400}s"  # FCM keeps a message at most 4 weeks


@pytest.mark.parametrize(("over", "template"), [
    ({"content": {"body": "no title"}}, "push.title"),
    ({"content": {"title": "no body"}}, "push.body"),
    ({"collapse_key": "k" * 65}, "collapse_key"),
    ({"content": {"title": "t", "body": "x" * 4100}}, "push"),
], ids=["no title", "no body", "collapse key over 64 bytes", "over 4096 bytes"])
def test_render_refuses_what_fcm_would_refuse(channel: FcmChannel, over: dict[str, Any],
                                              template: str) -> None:
    with pytest.raises(RenderError) as e:
        channel.render(step(TOKEN_A, **over))
    assert e.value.template == template


# --- the request ---------------------------------------------------------------------------


async def test_the_request_on_the_wire(channel: FcmChannel, google: FakeGoogle) -> None:
    msg = message(channel, step(TOKEN_A))
    out = await channel.send(msg)
    assert isinstance(out, Fanout) and len(google.seen) == 1
    seen = google.seen[0]
    assert seen.path == "/v1/projects/demo-project/messages:send"
    assert seen.headers["Authorization"] == f"Bearer {google.issued[0]}"
    assert seen.headers["Content-Type"] == "application/json; charset=UTF-8"
    want = {**msg.payload["message"], "token": TOKEN_A,
            "data": {"notifyd_kind": "payment_failed", "notifyd_key": f"{KEY}:dev0"}}
    assert seen.json == {"message": want}
    assert out.results == (("dev0", Sent(f"projects/demo-project/messages/0:{len(seen.body)}")),)


async def test_a_retry_sends_the_same_bytes_under_the_same_key(channel: FcmChannel,
                                                               google: FakeGoogle) -> None:
    msg = message(channel, step(TOKEN_A, TOKEN_B))
    await channel.send(msg)
    google.revoke_all()  # a new access token in between must not change the body
    await channel.send(msg)
    await channel.send(msg)
    for token in (TOKEN_A, TOKEN_B):
        bodies = google.bodies_for(token)
        assert len(bodies) == 2 and bodies[0] == bodies[1]
    assert len(google.issued) == 2


async def test_no_fcm_device_sends_nothing(channel: FcmChannel, google: FakeGoogle) -> None:
    out = await channel.send(message(channel, step()))
    assert out == Fanout(())
    assert google.token_requests == 0 and not google.seen


async def test_fanout_with_one_dead_token(channel: FcmChannel, google: FakeGoogle) -> None:
    google.replies[TOKEN_B] = fcm_error(404, "NOT_FOUND", "UNREGISTERED",
                                        "Requested entity was not found.")
    out = await channel.send(message(channel, step(TOKEN_A, TOKEN_B)))
    assert isinstance(out, Fanout)
    (a, sent), (b, rejected) = out.results
    assert (a, b) == ("dev0", "dev1")
    assert isinstance(sent, Sent) and sent.provider_ref
    assert rejected == Rejected("HTTP 404 UNREGISTERED: the registration token is no longer valid")
    assert isinstance(aggregate(out), Sent)  # the step is sent; dev1 gets disabled
    assert {s.message["data"]["notifyd_key"] for s in google.seen} == {f"{KEY}:dev0",
                                                                        f"{KEY}:dev1"}


async def test_a_malformed_registration_token_is_rejected_without_a_call(
        channel: FcmChannel, google: FakeGoogle) -> None:
    out = await channel.send(message(channel, step("", "has space", TOKEN_A)))
    bad = Rejected("malformed registration token (never sent)")
    assert answers(out)[:2] == [bad, bad] and isinstance(answers(out)[2], Sent)
    assert len(google.seen) == 1


# --- the access token ----------------------------------------------------------------------


async def test_one_token_fetch_for_many_concurrent_sends(channel: FcmChannel,
                                                         google: FakeGoogle) -> None:
    msgs = [message(channel, step(TOKEN_A, TOKEN_B, notification_id=f"ntf_{i}"))
            for i in range(20)]
    outs = await asyncio.gather(*(channel.send(m) for m in msgs))
    assert all(isinstance(a, Sent) for out in outs for a in answers(out))
    assert google.token_requests == 1 and len(google.seen) == 40
    assert {s.headers["Authorization"] for s in google.seen} == {f"Bearer {google.issued[0]}"}


async def test_the_token_is_refreshed_shortly_before_it_expires(settings: FcmSettings,
                                                                google: FakeGoogle) -> None:
    clock = FakeClock(START_MS)
    google.now = lambda: clock.now_ms() / 1000  # the fake checks iat against the same clock
    ch = FcmChannel("push", settings, LIMITS, clock=clock)
    msg = message(ch, step(TOKEN_A))
    try:
        await ch.send(msg)
        clock.advance(3600 - 225 - 1)  # google-auth's margin: 3 min 45 s before expiry
        await ch.send(msg)
        assert google.token_requests == 1
        clock.advance(2)
        await asyncio.gather(ch.send(msg), ch.send(msg))
        assert google.token_requests == 2
        assert [s.headers["Authorization"] for s in google.seen] == [
            f"Bearer {google.issued[0]}"] * 2 + [f"Bearer {google.issued[1]}"] * 2
        claims = json.loads(_unb64(google.assertions[1].split(".")[1]))
        assert claims["iat"] == START_MS // 1000 + 3600 - 225 + 1
        assert claims["exp"] - claims["iat"] == 3600
    finally:
        await ch.close()


def _unb64(part: str) -> bytes:
    return base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))


async def test_a_short_lived_token_is_refreshed_halfway(settings: FcmSettings,
                                                        google: FakeGoogle) -> None:
    clock = FakeClock(START_MS)
    google.now = lambda: clock.now_ms() / 1000
    google.expires_in = 60
    ch = FcmChannel("push", settings, LIMITS, clock=clock)
    try:
        await ch.send(message(ch, step(TOKEN_A)))
        clock.advance(29)
        await ch.send(message(ch, step(TOKEN_A)))
        clock.advance(2)
        await ch.send(message(ch, step(TOKEN_A)))
        assert google.token_requests == 2
    finally:
        await ch.close()


async def test_a_401_drops_the_token_and_the_next_send_fetches_a_new_one(
        channel: FcmChannel, google: FakeGoogle) -> None:
    await channel.send(message(channel, step(TOKEN_A)))
    google.revoke_all()
    out = await channel.send(message(channel, step(TOKEN_A)))
    assert answers(out) == [Failed("HTTP 401 UNAUTHENTICATED: FCM refused our access token; "
                                   "the next try fetches a new one")]
    out = await channel.send(message(channel, step(TOKEN_A)))
    assert isinstance(answers(out)[0], Sent) and google.token_requests == 2


async def test_third_party_auth_error_keeps_the_access_token(channel: FcmChannel,
                                                             google: FakeGoogle) -> None:
    google.replies[TOKEN_A] = fcm_error(401, "UNAUTHENTICATED", "THIRD_PARTY_AUTH_ERROR")
    out = await channel.send(message(channel, step(TOKEN_A)))
    assert isinstance(answers(out)[0], Failed)
    await channel.send(message(channel, step(TOKEN_B)))
    assert google.token_requests == 1  # the APNs credential is wrong, not our token


TOKEN_ENDPOINT_CASES: list[tuple[str, Reply, str]] = [
    ("invalid_grant", answer(400, {"error": "invalid_grant",
                                   "error_description": "Invalid JWT Signature."}),
     "access token: HTTP 400 invalid_grant"),
    ("500", answer(500, raw=b"\xff\xfe oops"), "access token: HTTP 500"),
    ("200 not JSON", answer(200, raw=b"<html>"), "access token: HTTP 200"),
    ("200 no token", answer(200, {"token_type": "Bearer"}),
     "access token: HTTP 200 without a usable access_token"),
    ("200 token with CRLF", answer(200, {"access_token": "a\r\nX-Evil: 1", "expires_in": 60}),
     "access token: HTTP 200 without a usable access_token"),
    ("dropped", drop(), "access token: connection lost after sending: closed by the peer"),
]


@pytest.mark.parametrize(("reply", "reason"), [c[1:] for c in TOKEN_ENDPOINT_CASES],
                         ids=[c[0] for c in TOKEN_ENDPOINT_CASES])
async def test_token_endpoint_trouble_is_failed_and_fcm_never_sees_it(
        channel: FcmChannel, google: FakeGoogle, reply: Reply, reason: str) -> None:
    google.token_reply = reply
    out = await channel.send(message(channel, step(TOKEN_A)))
    assert answers(out) == [Failed(reason)]
    assert not google.seen


async def test_a_token_endpoint_timeout_is_failed_not_unknown(settings: FcmSettings,
                                                              google: FakeGoogle) -> None:
    google.token_reply = hold(google.gate(), ok())
    ch = build(settings, replace(LIMITS, timeout_sec=0.3))
    try:
        out = await ch.send(message(ch, step(TOKEN_A)))
        assert answers(out) == [Failed("access token: the token endpoint timed out")]
    finally:
        await ch.close()


async def test_sends_waiting_on_a_failed_fetch_share_its_failure(channel: FcmChannel,
                                                                 google: FakeGoogle) -> None:
    google.token_reply = answer(503, {"error": "temporarily_unavailable"})
    msgs = [message(channel, step(TOKEN_A, notification_id=f"ntf_{i}")) for i in range(10)]
    outs = await asyncio.gather(*(channel.send(m) for m in msgs))
    assert {a for out in outs for a in answers(out)} == {
        Failed("access token: HTTP 503 temporarily_unavailable")}
    assert google.token_requests == 1
    google.token_reply = None
    out = await channel.send(msgs[0])  # a later send tries again
    assert isinstance(answers(out)[0], Sent) and google.token_requests == 2


# --- every answer --------------------------------------------------------------------------

R = "Retry-After"
CASES: list[tuple[str, Reply, type, str, float | None]] = [
    # (case, FCM's reply, outcome, reason (or provider_ref for Sent), retry_after)
    ("200", answer(200, {"name": "projects/demo-project/messages/0:1"}), Sent,
     "projects/demo-project/messages/0:1", None),
    ("200 not UTF-8", answer(200, raw=b"\xff\xfe{"), Sent, "", None),
    ("UNREGISTERED", fcm_error(404, "NOT_FOUND", "UNREGISTERED"), Rejected,
     "HTTP 404 UNREGISTERED: the registration token is no longer valid", None),
    ("SENDER_ID_MISMATCH", fcm_error(403, "PERMISSION_DENIED", "SENDER_ID_MISMATCH"), Failed,
     "HTTP 403 SENDER_ID_MISMATCH: the token belongs to another Firebase project than the "
     "service account's", None),
    ("INVALID_ARGUMENT bad token (documented)", fcm_error(
        400, "INVALID_ARGUMENT", "INVALID_ARGUMENT",
        "The registration token is not a valid FCM registration token"), Rejected,
     "HTTP 400 INVALID_ARGUMENT: the registration token is malformed", None),
    ("INVALID_ARGUMENT field message.token", fcm_error(
        400, "INVALID_ARGUMENT", "INVALID_ARGUMENT", "Request contains an invalid argument.",
        (bad_request("message.token", "Invalid registration token"),)), Rejected,
     "HTTP 400 INVALID_ARGUMENT: the registration token is malformed", None),
    ("INVALID_ARGUMENT bad data value", fcm_error(
        400, "INVALID_ARGUMENT", None, "Invalid value at 'message.data[0].value' (TYPE_STRING)",
        (bad_request("message.data[0].value", "Invalid value"),)), Failed,
     "HTTP 400 INVALID_ARGUMENT at message.data[0].value: FCM refused the message itself; "
     "the device is kept", None),
    ("INVALID_ARGUMENT too big", fcm_error(
        400, "INVALID_ARGUMENT", "INVALID_ARGUMENT", "Android message is too big"), Failed,
     "HTTP 400 INVALID_ARGUMENT: FCM refused the message itself; the device is kept", None),
    ("INVALID_ARGUMENT unknown field", fcm_error(
        400, "INVALID_ARGUMENT", None, "Invalid JSON payload received. Unknown name \"x\"",
        (bad_request("message", "Unknown name"),)), Failed,
     "HTTP 400 INVALID_ARGUMENT at message: FCM refused the message itself; the device is kept",
     None),
    ("THIRD_PARTY_AUTH_ERROR", fcm_error(401, "UNAUTHENTICATED", "THIRD_PARTY_AUTH_ERROR"),
     Failed, "HTTP 401 THIRD_PARTY_AUTH_ERROR: the project's APNs or web push credential is "
     "invalid or missing", None),
    ("APNS_AUTH_ERROR", fcm_error(401, "UNAUTHENTICATED", "APNS_AUTH_ERROR"), Failed,
     "HTTP 401 APNS_AUTH_ERROR: the project's APNs or web push credential is invalid or "
     "missing", None),
    ("QUOTA_EXCEEDED Retry-After", fcm_error(429, "RESOURCE_EXHAUSTED", "QUOTA_EXCEEDED",
                                             headers={R: "30"}),
     Failed, "HTTP 429 QUOTA_EXCEEDED", 30.0),
    ("QUOTA_EXCEEDED bare", fcm_error(429, "RESOURCE_EXHAUSTED", "QUOTA_EXCEEDED"), Failed,
     "HTTP 429 QUOTA_EXCEEDED", 60.0),
    ("UNAVAILABLE", fcm_error(503, "UNAVAILABLE", "UNAVAILABLE", headers={R: "7"}), Failed,
     "HTTP 503 UNAVAILABLE", 7.0),
    ("INTERNAL", fcm_error(500, "INTERNAL", "INTERNAL"), Failed, "HTTP 500 INTERNAL", None),
    ("502 HTML", answer(502, raw=b"<html>bad gateway</html>"), Failed, "HTTP 502", None),
    ("500 not UTF-8", answer(500, raw=b"\xff\xfe\xfd"), Failed, "HTTP 500", None),
    ("403 no permission", fcm_error(403, "PERMISSION_DENIED"), Failed,
     "HTTP 403 PERMISSION_DENIED: the service account may not send for this project", None),
    ("404 no FcmError", fcm_error(404, "NOT_FOUND"), Failed,
     "HTTP 404 NOT_FOUND: no such project or endpoint; check project_id and base_url", None),
    ("302", answer(302, headers={"Location": "https://elsewhere.example/"}), Failed,
     "HTTP 302: redirected; check base_url", None),
    ("408 bare", answer(408), Failed, "HTTP 408", None),
    ("dropped", drop(), Unknown, "connection lost after sending: closed by the peer", None),
]


@pytest.mark.parametrize(("reply", "kind", "detail", "retry_after"), [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])
async def test_each_fcm_answer(channel: FcmChannel, google: FakeGoogle, rsa_key: rsa.RSAPrivateKey,
                               reply: Reply, kind: type, detail: str,
                               retry_after: float | None) -> None:
    google.replies[TOKEN_A] = reply
    out = await channel.send(message(channel, step(TOKEN_A)))
    (got,) = answers(out)
    assert type(got) is kind
    if isinstance(got, Sent):
        assert got.provider_ref == (detail or None)
        return
    assert isinstance(got, Rejected | Failed | Unknown) and got.reason == detail
    if isinstance(got, Failed):
        assert got.retry_after == retry_after
    assert_no_secret(got.reason, google, rsa_key)


def assert_no_secret(reason: str, google: FakeGoogle, key: rsa.RSAPrivateKey) -> None:
    secrets = [TOKEN_A, TOKEN_B, *google.issued, *google.assertions,
               *pem(key).splitlines()[1:-1]]
    assert not [s for s in secrets if s and s in reason]


async def test_provider_text_echoing_secrets_stays_out_of_reasons(
        channel: FcmChannel, google: FakeGoogle, rsa_key: rsa.RSAPrivateKey) -> None:
    await channel.send(message(channel, step(TOKEN_B)))
    echo = f"token {TOKEN_A} bearer {google.issued[0]}"
    google.replies[TOKEN_A] = fcm_error(500, echo, echo, echo, (bad_request(echo, echo),))
    (got,) = answers(await channel.send(message(channel, step(TOKEN_A))))
    assert got == Failed("HTTP 500")
    google.token_reply = answer(400, {"error": echo, "error_description": echo})
    google.revoke_all()
    await channel.send(message(channel, step(TOKEN_A)))  # a 401 drops the access token
    (got,) = answers(await channel.send(message(channel, step(TOKEN_A))))
    assert got == Failed("access token: HTTP 400")
    assert_no_secret(got.reason, google, rsa_key)


# --- timeouts and connections --------------------------------------------------------------


async def test_an_fcm_timeout_is_unknown(settings: FcmSettings, google: FakeGoogle) -> None:
    ch = build(settings, replace(LIMITS, timeout_sec=0.3))
    try:
        await ch.send(message(ch, step(TOKEN_A)))  # the access token is at hand: 0.3 s is FCM's
        msg = message(ch, step(TOKEN_A, TOKEN_B))
        google.replies[TOKEN_B] = hold(google.gate(), ok())
        out = await ch.send(msg)
        assert isinstance(out, Fanout)
        assert isinstance(answers(out)[0], Sent)
        assert answers(out)[1] == Unknown("timeout: FCM may have the message")
        assert isinstance(aggregate(out), Sent)
    finally:
        await ch.close()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


async def test_a_refused_fcm_connection_is_failed(settings: FcmSettings,
                                                  google: FakeGoogle) -> None:
    ch = build(replace(settings, base_url=f"http://127.0.0.1:{free_port()}"))
    try:
        out = await ch.send(message(ch, step(TOKEN_A)))
        assert answers(out) == [Failed("connect failed: ConnectionRefusedError")]
        assert google.token_requests == 1  # the token came; FCM was not there
    finally:
        await ch.close()


async def test_a_refused_token_endpoint_is_failed(settings: FcmSettings) -> None:
    ch = build(replace(settings, token_url=f"http://127.0.0.1:{free_port()}/t"))
    try:
        out = await ch.send(message(ch, step(TOKEN_A)))
        assert answers(out) == [Failed("access token: connect failed")]
    finally:
        await ch.close()


async def test_close_closes_the_connections_and_a_later_send_opens_more(
        channel: FcmChannel) -> None:
    await channel.send(message(channel, step(TOKEN_A)))
    kept = [c for idle in channel.http._idle.values() for c in idle]
    assert kept
    await channel.close()
    assert all(c.closed for c in kept) and not channel.http._idle
    await channel.close()  # twice is harmless
    assert isinstance(answers(await channel.send(message(channel, step(TOKEN_A))))[0], Sent)


# --- settings ------------------------------------------------------------------------------

SECRET = "SUPERSECRETVALUE"


@pytest.mark.parametrize(("content", "key", "says"), [
    (None, "service_account_file", "cannot read the key file (FileNotFoundError)"),
    (f"not json {SECRET}", "service_account_file", "the key file is not a JSON object"),
    ({"client_email": EMAIL}, "service_account_file", "the key file has no private_key"),
    ({"private_key": SECRET}, "service_account_file", "the key file has no client_email"),
    ({"client_email": EMAIL, "private_key": f"-----BEGIN PRIVATE KEY-----\n{SECRET}\n"
      "-----END PRIVATE KEY-----\n"}, "service_account_file",
     "the key file's private_key is not an RSA private key in PEM"),
    ({"type": "authorized_user", "client_secret": SECRET}, "service_account_file",
     "the key file is not a service account key"),
], ids=["missing", "not JSON", "no private_key", "no client_email", "bad key", "user creds"])
def test_problems_name_the_fault_never_the_content(tmp_path: Path, content: Any, key: str,
                                                   says: str) -> None:
    path = tmp_path / "sa.json"
    if content is not None:
        path.write_text(content if isinstance(content, str) else json.dumps(content))
    problems = FcmSettings(service_account_file=str(path)).problems()
    assert problems == [(key, says)]
    assert SECRET not in repr(problems)
    with pytest.raises(ValueError) as e:
        TYPE.build("push", FcmSettings(service_account_file=str(path)), LIMITS)
    assert says in str(e.value) and SECRET not in str(e.value)


def test_problems_of_the_other_settings(tmp_path: Path, rsa_key: rsa.RSAPrivateKey) -> None:
    assert FcmSettings().problems() == [
        ("service_account_file",
         "an fcm channel needs the path to a Google service account JSON key")]
    good = str(key_file(tmp_path, rsa_key, "https://oauth2.googleapis.com/token"))
    assert FcmSettings(service_account_file=good).problems() == []
    assert FcmSettings(service_account_file=good, base_url="ftp://x",
                       project_id="bad project").problems() == [
        ("project_id", "is not a Firebase project id"),
        ("base_url", "must be an http(s) URL with a host")]
    bare = str(key_file(tmp_path, rsa_key, None, project_id=None))
    assert FcmSettings(service_account_file=bare).problems() == [
        ("project_id", "not set, and the key file names no project_id")]
    ok_settings = FcmSettings(service_account_file=bare, project_id="other-project")
    assert ok_settings.problems() == []
    ch = build(ok_settings)
    assert isinstance(ch, FcmChannel)
    assert ch.url == "https://fcm.googleapis.com/v1/projects/other-project/messages:send"
    assert ch.tokens.token_url == "https://oauth2.googleapis.com/token"
    assert "PRIVATE" not in repr(ch.tokens.account)
