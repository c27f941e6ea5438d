"""The webpush channel against a real Web Push service on 127.0.0.1 (tests/fake_push.py), which
checks the VAPID token and the headers and decrypts every body with the browser's private key."""

from __future__ import annotations

import json
import socket
from collections.abc import AsyncIterator
from dataclasses import replace
from typing import Any

import aiohttp
import pytest
from fake_push import FakePushService

from notifyd.channels.base import (
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
from notifyd.channels.webpush import (
    KNOWN_PUSH_HOSTS,
    MAX_PLAINTEXT,
    TYPE,
    WebPushChannel,
    WebPushSettings,
    generate_vapid_keys,
    topic_for,
    vapid_public_key,
)
from notifyd.core.text import iso

PRIVATE, PUBLIC = generate_vapid_keys()
START = 1_800_000_000_000
SUBJECT = "mailto:ops@example.com"


def settings(**kw: Any) -> WebPushSettings:
    base: dict[str, Any] = {"vapid_private_key": PRIVATE, "vapid_subject": SUBJECT,
                            "allowed_hosts": ("127.0.0.1",), "http_hosts": ("127.0.0.1",)}
    return WebPushSettings(**{**base, **kw})


def build(timeout: float = 5.0, connections: int = 8, **kw: Any) -> WebPushChannel:
    ch = TYPE.build("push", settings(**kw), Limits(timeout_sec=timeout, max_connections=connections))
    assert isinstance(ch, WebPushChannel)
    return ch


def step(*devices: Device, **kw: Any) -> RenderInput:
    base: dict[str, Any] = {
        "notification_id": "n1", "step_no": 2, "channel": "push", "kind": "order_shipped",
        "user_id": "u1", "params": {"order": 7}, "created_at": START,
        "expires_at": START + 3_600_000, "address": None, "locale": None, "now": START + 1_000,
        "content": {"title": "Shipped", "body": "Your order is on its way"},
        "devices": devices}
    return RenderInput(**{**base, **kw})


def freeze(ch: WebPushChannel, s: RenderInput) -> Message:
    """What the sender does: render once, freeze as sorted JSON, send what it reads back."""
    r = ch.render(s)
    return Message(f"{s.notification_id}:{s.step_no}", r.destination,
                   json.loads(json.dumps(r.payload, sort_keys=True)))


def answers(outcome: object) -> dict[str, Any]:
    assert isinstance(outcome, Fanout)
    return dict(outcome.results)


@pytest.fixture
async def fake() -> AsyncIterator[FakePushService]:
    async with FakePushService(PUBLIC) as f:
        yield f


@pytest.fixture
async def channel() -> AsyncIterator[WebPushChannel]:
    ch = build()
    yield ch
    await ch.close()


# render: what is frozen

async def test_render_freezes_devices_data_ttl_urgency_and_topic(
        fake: FakePushService, channel: WebPushChannel) -> None:
    d1, d2 = fake.subscribe("d1"), fake.subscribe("d2")
    r = channel.render(step(d1, d2, urgent=True, collapse_key="order7"))
    p = r.payload
    assert r.destination == "d1,d2"
    assert p["devices"] == [{"id": d.device_id, "endpoint": d.endpoint, "p256dh": d.p256dh,
                             "auth": d.auth} for d in (d1, d2)]
    assert p["skipped"] == []
    assert p["data"] == {"title": "Shipped", "body": "Your order is on its way",
                         "notification_id": "n1", "step_no": 2, "kind": "order_shipped",
                         "expires_at": iso(START + 3_600_000), "tag": "order7"}
    assert (p["ttl"], p["urgency"], p["topic"]) == (3599, "high", "order7")
    assert len(p["seed"]) == 43  # 32 random bytes, base64url
    assert json.loads(json.dumps(p, sort_keys=True)) == p
    plain = channel.render(step(d1))
    assert (plain.payload["urgency"], plain.payload["topic"]) == ("normal", None)
    assert plain.payload["seed"] != p["seed"]


@pytest.mark.parametrize(("expires_in_ms", "ttl_max", "ttl"), [
    (3_600_000, 28 * 86400, 3599),  # the step's remaining life, from render time
    (40 * 86400_000, 28 * 86400, 28 * 86400),  # capped
    (500, 28 * 86400, 0),  # already past: 0, never negative
    (3_600_000, 60, 60),
])
async def test_ttl_is_the_steps_remaining_life_capped(fake: FakePushService, expires_in_ms: int,
                                                      ttl_max: int, ttl: int) -> None:
    ch = build(ttl_max_sec=ttl_max)
    r = ch.render(step(fake.subscribe("d1"), expires_at=START + expires_in_ms))
    assert r.payload["ttl"] == ttl
    await ch.close()


def test_topic_is_the_collapse_key_or_a_stable_digest() -> None:
    assert topic_for(None) is None and topic_for("") is None
    assert topic_for("A" * 32) == "A" * 32
    for key in ("A" * 33, "order:7", "order-7", "ümlaut"):
        t = topic_for(key)
        assert t is not None and len(t) == 32 and t.isalnum() and t == topic_for(key)
    assert topic_for("order:7") != topic_for("order:8")


async def test_render_skips_devices_it_may_not_send_to(fake: FakePushService) -> None:
    ok = fake.subscribe("ok")
    ch = build()
    devices = (
        ok,
        replace(ok, device_id="evil", endpoint="https://evil.example/wp/1"),
        replace(ok, device_id="plain", endpoint=f"http://localhost:{fake.port}/wp/ok"),
        replace(ok, device_id="ftp", endpoint="ftp://127.0.0.1/wp/x"),
        replace(ok, device_id="creds", endpoint="https://u:p@127.0.0.1/wp/x"),
        replace(ok, device_id="badkey", endpoint=f"{fake.origin}/wp/k", p256dh="AAAA"),
        replace(ok, device_id="noauth", endpoint=f"{fake.origin}/wp/a", auth=None),
        replace(ok, device_id="twin"),  # the same subscription under another id
        replace(ok, device_id="fcm", kind="fcm", endpoint="token"),  # not this channel's
    )
    p = ch.render(step(*devices)).payload
    assert [d["id"] for d in p["devices"]] == ["ok"]
    assert p["skipped"] == [
        {"id": "evil", "why": "push service host evil.example is not in allowed_hosts"},
        {"id": "plain", "why": "endpoint is not https"},
        {"id": "ftp", "why": "endpoint is not https"},
        {"id": "creds", "why": "endpoint is not an absolute URL without credentials"},
        {"id": "badkey", "why": "subscription keys missing or invalid"},
        {"id": "noauth", "why": "subscription keys missing or invalid"},
        {"id": "twin", "why": "same endpoint as another device"},
    ]
    with pytest.raises(RenderError) as e:
        ch.render(step(*devices[1:7], devices[8]))
    assert e.value.template == "devices" and "evil" not in str(e.value.error)
    with pytest.raises(RenderError):
        ch.render(step())
    await ch.close()


@pytest.mark.parametrize(("endpoint", "allowed"), [
    ("https://fcm.googleapis.com/fcm/send/abc", True),
    ("https://fcm.googleapis.com/wp/abc", True),
    ("https://updates.push.services.mozilla.com/wpush/v2/abc", True),
    ("https://wns2-par02p.notify.windows.com/w/?token=abc", True),
    ("https://web.push.apple.com/abc", True),
    ("https://notify.windows.com/w/abc", False),  # *.domain is its subdomains only
    ("https://fcm.googleapis.com.evil.example/abc", False),
    ("https://evilfcm.googleapis.com/abc", False),
    ("http://fcm.googleapis.com/fcm/send/abc", False),  # never plain http by default
    ("https://127.0.0.1/abc", False),
])
def test_default_hosts_are_the_known_push_services(endpoint: str, allowed: bool) -> None:
    ch = WebPushChannel("push", WebPushSettings(PRIVATE, SUBJECT), 1.0)
    assert ch.settings.allowed_hosts == KNOWN_PUSH_HOSTS
    assert (ch.endpoint_problem(endpoint) is None) is allowed


def test_allow_any_host_still_needs_https() -> None:
    ch = WebPushChannel("push", WebPushSettings(PRIVATE, SUBJECT, allow_any_host=True), 1.0)
    assert ch.endpoint_problem("https://push.self-hosted.example/up/abc") is None
    assert ch.endpoint_problem("http://push.self-hosted.example/up/abc") == \
        "endpoint is not https"


@pytest.mark.parametrize(("title", "body", "cut"), [
    ("T" * 100, "é" * 5000, "body"),  # two bytes a character
    ("T" * 100, '"\\' * 3000, "body"),  # two bytes each once escaped in JSON
    ("🚚" * 2000, "b" * 10, "title"),  # the body goes first, then the title
])
async def test_a_long_text_is_cut_to_fit_one_push_message(
        fake: FakePushService, channel: WebPushChannel, title: str, body: str, cut: str) -> None:
    d = fake.subscribe("d1")
    m = freeze(channel, step(d, content={"title": title, "body": body}))
    data = m.payload["data"]
    assert data["truncated"] is True and data[cut].endswith("…")
    assert data["title"] == title if cut == "body" else data["body"] == ""
    await channel.send(m)
    [push] = fake.pushes
    assert fake.problems == []
    assert push.plaintext is not None
    assert MAX_PLAINTEXT - 16 < len(push.plaintext) <= MAX_PLAINTEXT
    assert len(push.body) <= 4096
    with pytest.raises(RenderError):
        channel.render(step(d, content={"title": "T", "body": "b", "x": "y" * 5000}))


async def test_render_needs_a_title(fake: FakePushService, channel: WebPushChannel) -> None:
    with pytest.raises(RenderError) as e:
        channel.render(step(fake.subscribe("d1"), content={"body": "no title"}))
    assert e.value.template == "push"


# send: the exact request on the wire

async def test_the_browser_decrypts_what_was_frozen(
        fake: FakePushService, channel: WebPushChannel) -> None:
    d = fake.subscribe("d1")
    m = freeze(channel, step(d, urgent=True, collapse_key="order:7"))
    outcome = await channel.send(m)
    assert answers(outcome) == {"d1": Sent(f"{fake.origin}/m/1")}
    [push] = fake.pushes
    assert fake.problems == []
    assert push.payload == {**m.payload["data"], "key": "n1:2:d1"}
    assert push.headers["TTL"] == "3599"
    assert push.headers["Urgency"] == "high"
    assert push.headers["Topic"] == topic_for("order:7")
    assert push.headers["Content-Encoding"] == "aes128gcm"
    assert push.vapid_key == PUBLIC
    assert push.claims is not None
    assert push.claims["aud"] == fake.origin and push.claims["sub"] == SUBJECT
    assert push.claims["exp"] - fake.clock() <= 86400
    assert "Topic" not in (await _one_push(fake, channel, step(d))).headers


async def _one_push(fake: FakePushService, ch: WebPushChannel, s: RenderInput) -> Any:
    await ch.send(freeze(ch, s))
    return fake.pushes[-1]


async def test_two_devices_one_gone_one_taken(fake: FakePushService,
                                               channel: WebPushChannel) -> None:
    gone, live = fake.subscribe("gone"), fake.subscribe("live")
    fake.answer("wp/gone", 410)
    outcome = await channel.send(freeze(channel, step(gone, live)))
    assert isinstance(outcome, Fanout)
    assert [device for device, _ in outcome.results] == ["gone", "live"]
    got = dict(outcome.results)
    assert got["gone"] == Rejected("HTTP 410 103: the subscription is gone")
    assert isinstance(got["live"], Sent) and got["live"].provider_ref is not None
    assert {p.path for p in fake.pushes} == {"wp/gone", "wp/live"}
    assert fake.problems == []


async def test_a_retry_sends_the_same_bytes(fake: FakePushService,
                                           channel: WebPushChannel) -> None:
    d1, d2 = fake.subscribe("d1"), fake.subscribe("d2")
    m = freeze(channel, step(d1, d2, collapse_key="c"))
    await channel.send(m)
    again = Message(m.idempotency_key, m.destination, json.loads(json.dumps(m.payload)))
    await channel.send(again)
    first = {p.path: p for p in fake.pushes[:2]}
    second = {p.path: p for p in fake.pushes[2:]}
    for path in ("wp/d1", "wp/d2"):
        assert first[path].body == second[path].body
        assert first[path].headers["Authorization"] == second[path].headers["Authorization"]
    assert first["wp/d1"].body != first["wp/d2"].body  # each device its own keys
    assert fake.problems == []


async def test_a_host_not_allowed_is_never_contacted(fake: FakePushService) -> None:
    d = fake.subscribe("d1")
    tls = replace(d, device_id="tls", endpoint=d.endpoint.replace("http://", "https://"))
    permissive = build()
    m = freeze(permissive, step(d, tls))
    await permissive.close()
    strict = build(allowed_hosts=("push.example",), http_hosts=())  # the config changed since
    assert answers(await strict.send(m)) == {
        "d1": Failed("not sent: endpoint is not https"),
        "tls": Failed("not sent: push service host 127.0.0.1 is not in allowed_hosts")}
    assert fake.pushes == []
    await strict.close()


# every answer, mapped

@pytest.mark.parametrize(("status", "headers", "expected"), [
    (200, {}, Sent(None)),
    (202, {"Location": "https://x/m/9"}, Sent("https://x/m/9")),
    (404, {}, Rejected("HTTP 404 102: the subscription is gone")),
    (410, {}, Rejected("HTTP 410 103: the subscription is gone")),
    (413, {}, Failed("HTTP 413 104: payload too large for this push service")),
    (400, {}, Failed("HTTP 400 110: the push service refused the request (headers, "
                     "encryption or VAPID)")),
    (401, {}, Failed("HTTP 401 109: VAPID refused; check vapid_private_key and "
                     "vapid_subject, and the key the browser subscribed with")),
    (403, {}, Failed("HTTP 403 109: VAPID refused; check vapid_private_key and "
                     "vapid_subject, and the key the browser subscribed with")),
    (429, {"Retry-After": "7"}, Failed("HTTP 429 201", 7.0)),
    (500, {}, Failed("HTTP 500 999")),
    (503, {"Retry-After": "30"}, Failed("HTTP 503 201", 30.0)),
    (301, {"Location": "https://elsewhere/"},
     Failed("HTTP 301 999: the push service redirects; not followed")),
    (405, {}, Failed("HTTP 405 999")),
])
async def test_every_answer_is_mapped(fake: FakePushService, channel: WebPushChannel,
                                      status: int, headers: dict[str, str],
                                      expected: object) -> None:
    d = fake.subscribe("d1")
    fake.answer("wp/d1", status, headers=headers)
    assert answers(await channel.send(freeze(channel, step(d)))) == {"d1": expected}


@pytest.mark.parametrize("body", [b"\xff\xfe not utf-8", b"<html>busy</html>",
                                  b'{"reason": "has spaces in it"}', b"x" * 200_000,
                                  b'{"reason": "BadJwtToken"}'])
async def test_bodies_it_cannot_read_never_fail_it(fake: FakePushService,
                                                   channel: WebPushChannel, body: bytes) -> None:
    d = fake.subscribe("d1")
    fake.answer("wp/d1", 403, body=body)
    got = answers(await channel.send(freeze(channel, step(d))))["d1"]
    assert isinstance(got, Failed)
    code = " BadJwtToken" if b"BadJwtToken" in body else ""
    assert got.reason.startswith(f"HTTP 403{code}: VAPID refused")


async def test_a_held_answer_is_unknown_and_a_refused_connection_failed(
        fake: FakePushService) -> None:
    held, dropped = fake.subscribe("held"), fake.subscribe("dropped")
    fake.hold("wp/held")
    fake.drop("wp/dropped")
    with socket.socket() as s:  # a port with nobody listening
        s.bind(("127.0.0.1", 0))
        closed = s.getsockname()[1]
    refused = replace(fake.subscribe("refused"),
                      endpoint=f"http://127.0.0.1:{closed}/wp/refused")
    ch = build(timeout=0.3)
    got = answers(await ch.send(freeze(ch, step(held, dropped, refused))))
    assert got == {
        "held": Unknown("timeout: the push service may have the message"),
        "dropped": Unknown("connection lost after sending: closed by the peer"),
        "refused": Failed("connect failed: ConnectionRefusedError")}
    await ch.close()


async def test_devices_waiting_for_a_connection_never_outlast_the_timeout(
        fake: FakePushService) -> None:
    a, b = fake.subscribe("a"), fake.subscribe("b")
    fake.hold("wp/a")
    fake.hold("wp/b")
    ch = build(timeout=0.3, connections=1)
    got = answers(await ch.send(freeze(ch, step(a, b))))
    # One went out and timed out; the other never found a connection: it never left us.
    assert sorted(type(x).__name__ for x in got.values()) == ["Failed", "Unknown"]
    assert len(fake.pushes) == 1
    await ch.close()


async def test_secrets_and_endpoints_never_appear_in_reasons(fake: FakePushService) -> None:
    ch = build(timeout=0.3)
    devices = [fake.subscribe(f"d{s}") for s in (400, 401, 403, 404, 410, 413, 429, 500)]
    for d in devices:  # error bodies that echo what they were sent, in free text
        fake.answer(f"wp/{d.device_id}", int(d.device_id[1:]), body=json.dumps(
            {"errno": 1, "message": f"{d.endpoint} {d.auth} {d.p256dh}"}).encode())
    held, broken = fake.subscribe("held"), fake.subscribe("broken")
    fake.hold("wp/held")
    m = freeze(ch, step(*devices, held, broken))
    m.payload["devices"][-1]["auth"] = "!!"  # a corrupt row: sealing it fails
    got = answers(await ch.send(m))
    assert got["broken"] == Failed("not sent: could not seal (ValueError)")
    reasons = [a.reason for a in got.values() if not isinstance(a, Sent)]
    assert len(reasons) == 10
    secrets = [PRIVATE, "/wp/", str(fake.port)]
    secrets += [x for d in (*devices, held, broken) for x in (d.auth, d.p256dh)]
    for reason in reasons:
        assert not any(s in reason for s in secrets), reason
    await ch.close()


# keys, tokens, settings

async def test_vapid_token_is_reused_for_half_its_life(fake: FakePushService) -> None:
    ch = build(vapid_token_sec=3600)
    now = [fake.clock()]
    ch.clock = lambda: now[0]
    d = fake.subscribe("d1")
    m = freeze(ch, step(d))
    for t in (0, 1799, 1801):
        now[0] = fake.clock() + t
        await ch.send(m)
    tokens = [p.headers["Authorization"] for p in fake.pushes]
    assert tokens[0] == tokens[1] != tokens[2]
    claims = [p.claims for p in fake.pushes]
    assert claims[2] is not None and claims[0] is not None
    assert claims[2]["exp"] - claims[0]["exp"] >= 1801
    assert fake.problems == []
    await ch.close()


def test_generate_vapid_keys() -> None:
    private, public = generate_vapid_keys()
    assert len(private) == 43 and len(public) == 87 and "=" not in private + public
    assert vapid_public_key(private) == public
    assert generate_vapid_keys() != (private, public)


@pytest.mark.parametrize(("change", "key"), [
    ({"vapid_private_key": ""}, "vapid_private_key"),
    ({"vapid_private_key": "not-a-key"}, "vapid_private_key"),
    ({"vapid_private_key": "A" * 43}, "vapid_private_key"),  # zero is no key
    ({"vapid_subject": ""}, "vapid_subject"),
    ({"vapid_subject": "mailto: <ops@example.com>"}, "vapid_subject"),
    ({"vapid_subject": "mailto:admin@localhost"}, "vapid_subject"),
    ({"vapid_subject": "http://example.com"}, "vapid_subject"),
    ({"allowed_hosts": ("https://fcm.googleapis.com",)}, "allowed_hosts"),
    ({"allowed_hosts": ("*.",)}, "allowed_hosts"),
    ({"allowed_hosts": (), "http_hosts": ()}, "allowed_hosts"),
    ({"http_hosts": ("*.example.com",)}, "http_hosts"),
    ({"ttl_max_sec": -1}, "ttl_max_sec"),
    ({"vapid_token_sec": 90000}, "vapid_token_sec"),
])
def test_settings_problems_name_the_key_never_the_value(change: dict[str, Any],
                                                        key: str) -> None:
    assert settings().problems() == []
    assert WebPushSettings(PRIVATE, "https://example.com/contact").problems() == []
    problems = settings(**change).problems()
    assert [k for k, _ in problems] == [key]
    assert PRIVATE not in problems[0][1] and "not-a-key" not in problems[0][1]


async def test_the_fake_speaks_web_push_as_pywebpush_does(fake: FakePushService) -> None:
    """An independent client (pywebpush) is taken by the fake: it checks the real protocol."""
    from pywebpush import webpush_async  # type: ignore[import-untyped]

    d = fake.subscribe("d1")
    async with aiohttp.ClientSession() as session:
        resp = await webpush_async(
            {"endpoint": d.endpoint, "keys": {"p256dh": d.p256dh, "auth": d.auth}},
            data=json.dumps({"hello": "browser"}), vapid_private_key=PRIVATE,
            vapid_claims={"sub": SUBJECT}, ttl=60, aiohttp_session=session)
        assert resp.status == 201
    assert fake.problems == []
    assert fake.pushes[0].payload == {"hello": "browser"}
