"""The webhook adapter against a real HTTP server: how each answer is classified, what the step
becomes, and that the request carries the stable key and the frozen body.

2xx Sent (provider_ref from the body's "id", else X-Request-Id); 408, 429 and 5xx Failed; other 4xx
Rejected; a refused connection Failed (it never left); a timeout or a connection dropped after the
request was read Unknown, retried under the same key with the same bytes.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import dataclasses
import json
import socket
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from aiohttp import web
from engine_support import (
    Provider,
    Reply,
    Seen,
    accepted,
    answer,
    body_of,
    drop,
    engine,
    hold,
    provider,
    two_step,
    webhook,
)

from notifyd.channels.base import Failed, Message, Sent, Unknown
from notifyd.channels.webhook import WebhookChannel, WebhookSettings
from notifyd.config import KindConfig, LadderStep


@pytest.fixture
async def prov() -> AsyncIterator[Provider]:
    async with provider() as p:
        yield p


def raw(status: int, body: bytes) -> Reply:
    async def reply(_: Seen) -> web.StreamResponse:
        return web.Response(status=status, body=body, content_type="application/json")

    return reply


CASES: list[tuple[str, Reply, str, str, str | None]] = [
    # (case, reply, step state, attempt outcome, provider_ref or reason prefix)
    ("200 with id", answer(200, {"id": "msg-1"}), "sent", "sent", "msg-1"),
    ("202 with id", answer(202, {"id": 42}), "sent", "sent", "42"),
    ("201 X-Request-Id", answer(201, "", {"X-Request-Id": "req-9"}), "sent", "sent", "req-9"),
    ("204 bare", answer(204), "sent", "sent", None),
    ("200 not UTF-8", raw(200, b"\xff\xfe{"), "sent", "sent", None),  # bytes, never decoded
    ("500 not UTF-8", raw(500, b"\xff\xfe"), "pending", "failed", "HTTP 500"),
    ("408", answer(408, "timeout"), "pending", "failed", "HTTP 408"),
    ("429", answer(429, "slow"), "pending", "failed", "HTTP 429"),
    ("500", answer(500, "oops"), "pending", "failed", "HTTP 500"),
    ("502", answer(502, "bad gw"), "pending", "failed", "HTTP 502"),
    ("503", answer(503, "later"), "pending", "failed", "HTTP 503"),
    # A producer's webhook is no person's contact: nothing it says is a rejection of one.
    ("400", answer(400, "bad"), "pending", "failed", "HTTP 400"),
    ("404", answer(404, "nope"), "pending", "failed", "HTTP 404"),  # our URL is wrong, not theirs
    ("405", answer(405, "nope"), "pending", "failed", "HTTP 405"),
    ("410", answer(410, "gone"), "pending", "failed", "HTTP 410"),
    ("422", answer(422, "invalid"), "pending", "failed", "HTTP 422"),
    ("dropped", drop(), "unknown", "unknown", "connection lost after sending"),
]


@pytest.mark.parametrize(("reply", "state", "outcome", "detail"), [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])
async def test_each_answer_is_classified_and_recorded(
        tmp_path: Path, prov: Provider, reply: Reply, state: str, outcome: str,
        detail: str | None) -> None:
    prov.reply = reply
    async with engine(tmp_path, {"hook": webhook(prov.url)}, {"k": two_step()}) as e:
        nid = await e.accept()
        assert await e.cycle() == 1
        s = await e.step(nid, 0)
        assert s["state"] == state
        assert [a["outcome"] for a in s["attempt_log"]] == [outcome]
        if outcome == "sent":
            assert s["provider_ref"] == detail and s["attempt_log"][0]["provider_ref"] == detail
        else:
            assert detail is not None and s["reason"].startswith(detail), s["reason"]
        assert prov.keys_seen() == [f"{nid}:0"]


async def test_a_refused_connection_is_failed_and_retried(tmp_path: Path) -> None:
    with socket.socket() as s:  # a port nobody listens on once this closes
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"http://127.0.0.1:{port}/hook"
    async with engine(tmp_path, {"hook": webhook(url)}, {"k": two_step()}) as e:
        nid = await e.accept()
        assert await e.cycle() == 1
        s0 = await e.step(nid, 0)
        assert s0["state"] == "pending"
        assert s0["reason"].startswith("connect failed")
        assert [a["outcome"] for a in s0["attempt_log"]] == ["failed"]


async def test_the_request_carries_the_stable_key_and_the_frozen_body(
        tmp_path: Path, prov: Provider) -> None:
    async with engine(tmp_path, {"hook": webhook(prov.url)}, {"k": two_step(window_sec=5)}) as e:
        nid = await e.accept(user="u-7", params={"code": "1234", "nested": {"a": [1, 2]}})
        await e.run_dry()
        e.clock.advance(5)
        await e.run_dry()
        n = await e.notification(nid)
        assert [s["state"] for s in n["steps"]] == ["sent", "sent"]
        assert [s.key for s in prov.seen] == [f"{nid}:0", f"{nid}:1"]
        for seen, step in zip(prov.seen, n["steps"], strict=True):
            assert seen.body == body_of(step["payload"])
            assert seen.headers["Content-Type"] == "application/json"
            assert seen.path == "/hook"
            assert step["destination"] == prov.url
            assert step["provider_ref"] == f"prov-{seen.key}"
        first = json.loads(prov.seen[0].body)
        assert first == {
            "notification_id": nid, "step_no": 0, "channel": "hook", "kind": "k",
            "user_id": "u-7", "params": {"code": "1234", "nested": {"a": [1, 2]}},
            "created_at": "2026-09-21T14:13:20.000+00:00",
            "expires_at": "2026-09-22T14:13:20.000+00:00"}


async def test_a_timeout_is_unknown_and_retried_under_the_same_key_with_the_same_body(
        tmp_path: Path, prov: Provider) -> None:
    prov.reply = hold(prov.gate(), accepted())  # answers only after the test ends
    channel = webhook(prov.url, timeout_sec=0.2, backoff_base_sec=2.0)
    async with engine(tmp_path, {"hook": channel}, {"k": two_step()}) as e:
        nid = await e.accept()
        assert await e.cycle() == 1
        s = await e.step(nid, 0)
        assert s["state"] == "unknown"
        assert s["reason"] == "timeout: the provider may have the message; retry 2"
        assert e.now <= s["send_after"] <= e.now + 2000
        assert [a["outcome"] for a in s["attempt_log"]] == ["unknown"]

        prov.reply = accepted()
        e.clock.ms = s["send_after"]
        assert await e.cycle() == 1
        s = await e.step(nid, 0)
        assert (s["state"], s["attempts"]) == ("sent", 2)
        assert [a["outcome"] for a in s["attempt_log"]] == ["unknown", "sent"]
        assert prov.keys_seen() == [f"{nid}:0", f"{nid}:0"]
        assert set(prov.bodies_by_key()[f"{nid}:0"]) == {body_of(s["payload"])}


async def test_a_dropped_connection_is_retried_under_the_same_key_with_the_same_body(
        tmp_path: Path, prov: Provider) -> None:
    prov.reply = drop()
    async with engine(tmp_path, {"hook": webhook(prov.url)}, {"k": two_step()}) as e:
        nid = await e.accept()
        await e.cycle()
        s = await e.step(nid, 0)
        assert s["state"] == "unknown"
        prov.reply = accepted()
        e.clock.ms = s["send_after"]
        await e.cycle()
        s = await e.step(nid, 0)
        assert s["state"] == "sent"
        assert prov.keys_seen() == [f"{nid}:0", f"{nid}:0"]
        assert len(set(prov.bodies_by_key()[f"{nid}:0"])) == 1


async def test_the_resent_body_is_byte_identical_for_awkward_params(
        tmp_path: Path, prov: Provider) -> None:
    """The first call sends the freshly frozen dict, a retry the dict read back from the row:
    floats, big integers, non-ASCII text and nesting must come out as the same bytes."""
    params = {"amount": 12.5, "tiny": 1e-7, "big": 2**60, "name": "Zoë ✓ 東京", "neg": -0.0,
              "list": [1, 2.25, None, True, {"z": 1, "a": "x"}], "empty": {}}
    prov.reply = drop()
    async with engine(tmp_path, {"hook": webhook(prov.url)}, {"k": two_step()}) as e:
        nid = await e.accept(params=params)
        await e.cycle()
        for _ in range(2):
            prov.reply = drop() if len(prov.seen) < 2 else accepted()
            e.clock.ms = (await e.step(nid, 0))["send_after"]
            await e.cycle()
        s = await e.step(nid, 0)
        assert s["state"] == "sent" and s["attempts"] == 3
        bodies = prov.bodies_by_key()[f"{nid}:0"]
        assert len(bodies) == 3 and len(set(bodies)) == 1
        assert json.loads(bodies[0])["params"] == params


async def test_the_adapter_alone(prov: Provider) -> None:
    """The adapter's contract without the engine: outcomes, Retry-After, the key header."""
    ch = WebhookChannel("hook", prov.url, 0.5)
    msg = Message("n_abc:3", prov.url, {"b": 1, "a": [1]})
    try:
        prov.reply = answer(202, {"id": "p-1"})
        assert await ch.send(msg) == Sent("p-1")
        assert prov.seen[-1].key == "n_abc:3" and prov.seen[-1].body == b'{"a": [1], "b": 1}'
        prov.reply = answer(429, "slow", {"Retry-After": "30"})
        assert await ch.send(msg) == Failed("HTTP 429", 30.0)
        prov.reply = answer(503, "x", {"Retry-After": "Wed, 21 Oct 2015 07:28:00 GMT"})
        assert await ch.send(msg) == Failed("HTTP 503", 0.0)  # a date in the past: now
        prov.reply = answer(401, "who")
        assert await ch.send(msg) == Failed("HTTP 401: the endpoint refused our credentials")
        prov.reply = answer(403, "no")
        assert await ch.send(msg) == Failed("HTTP 403: the endpoint refused our credentials")
        prov.reply = answer(302, "", {"Location": "/elsewhere"})
        assert await ch.send(msg) == Failed(
            "HTTP 302: the webhook URL redirects; configure where it leads")
        assert prov.seen[-1].key == "n_abc:3"  # the redirect was not followed as a GET
        prov.reply = answer(400, {"code": "invalid_recipient", "message": "code 482913 is bad"})
        assert await ch.send(msg) == Failed("HTTP 400 invalid_recipient")  # no free text
        prov.reply = drop()
        assert isinstance(await ch.send(msg), Unknown)
        prov.reply = hold(prov.gate(), accepted())
        assert await ch.send(msg) == Unknown("timeout: the provider may have the message")
    finally:
        await ch.close()


async def test_a_channel_configured_for_more_than_100_concurrent_sends_gets_them(
        tmp_path: Path, prov: Provider) -> None:
    wide = 101
    gate = prov.gate()
    prov.reply = hold(gate, accepted())
    channel = webhook(prov.url, bulk_concurrency=wide, timeout_sec=5.0)
    kinds = {"k": KindConfig(ladder=(LadderStep("hook"),))}
    async with engine(tmp_path, {"hook": channel}, kinds) as e:
        try:
            await e.accept_many(wide)
            assert await e.tick() == wide
            deadline = asyncio.get_running_loop().time() + 2.0  # well inside timeout_sec
            while len(prov.seen) < wide and (left := deadline - asyncio.get_running_loop().time()) > 0:
                prov.arrived.clear()
                with contextlib.suppress(TimeoutError):
                    await prov.next_request(timeout=left)
            assert len(prov.seen) == wide
        finally:
            gate.set()


async def test_a_signed_webhook_verifies_with_the_standard_webhooks_library(
        tmp_path: Path, prov: Provider) -> None:
    from standardwebhooks.webhooks import Webhook, WebhookVerificationError

    secret = "whsec_" + base64.b64encode(b"0123456789abcdef0123").decode()
    old = "whsec_" + base64.b64encode(b"an older secret, rotating").decode()
    hook = webhook(prov.url)
    signed = dataclasses.replace(hook, settings=WebhookSettings(prov.url, secret, old))
    async with engine(tmp_path, {"hook": signed}, {"k": two_step()}) as e:
        nid = await e.accept()
        await e.cycle()
    [seen] = prov.seen
    headers = {k.lower(): v for k, v in seen.headers.items()}
    assert headers["webhook-id"] == f"{nid}:0" == seen.key
    assert len(headers["webhook-signature"].split()) == 2  # the current and the old
    for key in (secret, old):
        assert Webhook(key).verify(seen.body, headers) == json.loads(seen.body)
    with pytest.raises(WebhookVerificationError):
        Webhook("whsec_" + base64.b64encode(b"somebody else's key!").decode()).verify(
            seen.body, headers)


def test_a_webhook_secret_that_is_not_whsec_base64_is_a_config_error() -> None:
    assert WebhookSettings("https://x/h", "whsec_not base64!").problems() == [
        ("secret", "must be whsec_ followed by base64 (at least 16 bytes)")]
