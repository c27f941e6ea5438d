"""What a key limited to some kinds reaches, through the HTTP API over the real engine and store:
its kinds' notifications (posted, read, resolved, their inbox items, their events to a list or a
topic), and nothing of a person's, a device's, the suppression list's or a topic's that every kind
shares. Each refusal of the probe's attacks is a 403 `kind_not_allowed`, and the attack's goal (a
one-time code of another kind sent to the attacker's number) fails.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

import pytest
from stack_support import ADDRESS, PHONE, Stack, stack
from test_console import sign_in
from test_events import call

from notifyd.core.models import SCOPES
from notifyd.http.auth import hash_key, new_key

SETTINGS: dict[str, Any] = {
    "kinds": {
        "news": {"category": "news", "transactional": False, "inbox": True,
                 "ladder": [{"channel": "email"}]},
        "otp": {"category": "security", "urgency": "urgent", "ladder": [{"channel": "sms"}]},
    },
    "categories": {"security": {"optional": False}},
    "events": {"news": {"kinds": ["news"]}},
}
ATTACKER = "+14155559999"
# Every call whose reach is beyond any kind's notifications: (method, path, body).
EVERY_KIND_CALLS: list[tuple[str, str, Any]] = [
    ("GET", "/v1/users/ada", None),
    ("PATCH", "/v1/users/ada", {"phone": ATTACKER}),
    ("PUT", "/v1/users/ada", {"phone": ATTACKER}),
    ("DELETE", "/v1/users/ada", None),
    ("POST", "/v1/users/ada/devices", {"type": "fcm", "token": "attacker-device"}),
    ("GET", "/v1/users/ada/devices", None),
    ("DELETE", "/v1/users/ada/devices/d1", None),
    ("GET", "/v1/suppressions", None),
    ("POST", "/v1/suppressions", {"channel_type": "sms", "address": PHONE}),
    ("DELETE", f"/v1/suppressions/sms/{PHONE}", None),
    ("GET", "/v1/users/ada/preferences", None),
    ("PATCH", "/v1/users/ada/preferences", {"opt_out": True}),
    ("POST", "/v1/users/ada/tokens", {}),
    ("GET", "/v1/users/ada/inbox/stream", None),
    ("PUT", "/v1/topics/everyone-news", {}),
    ("GET", "/v1/topics/readers", None),
    ("DELETE", "/v1/topics/readers", None),
    ("GET", "/v1/topics/readers/members", None),
    ("POST", "/v1/topics/readers/members", {"remove": ["ada"]}),
    ("GET", "/v1/users/ada/topics", None),
    ("PUT", "/v1/users/ada/topics/readers", None),
    ("DELETE", "/v1/users/ada/topics/readers", None),
]


@asynccontextmanager
async def reach(tmp_path: Path) -> AsyncIterator[Stack]:
    async with stack(tmp_path, SETTINGS) as s:
        s.key = await key(s, "full", SCOPES | {"everyone"})
        await s.user("ada", email=ADDRESS, phone=PHONE)
        assert (await call(s, "PUT", "/v1/topics/readers", {}))[0] == 201
        assert (await call(s, "POST", "/v1/topics/readers/members", {"add": ["ada"]}))[0] == 200
        yield s


async def key(s: Stack, name: str, scopes: frozenset[str], kinds: tuple[str, ...] = ()) -> str:
    made = new_key()
    await s.e.store.create_key(hash_key(made), name, "default", kinds, scopes)
    return made


@pytest.mark.parametrize("scopes", [
    SCOPES | {"everyone"},  # as a key made with --kinds before this rule: users included
    SCOPES - {"users"} | {"admin"},
], ids=["made-with-users", "made-now"])
async def test_a_kind_limited_key_reaches_nothing_every_kind_shares(
        tmp_path: Path, scopes: frozenset[str]) -> None:
    async with reach(tmp_path) as s:
        news = await key(s, "news", scopes, ("news",))
        for method, path, body in EVERY_KIND_CALLS:
            status, answer = await call(s, method, path, body, news)
            assert (status, answer["error"]["code"]) == (403, "kind_not_allowed"), (method, path)
            assert "news" in answer["error"]["message"]
            assert "every kind" in answer["error"]["message"]
        ada = await s.e.store.get_recipient("default", "ada")
        assert ada is not None and (ada.contacts.get("phone"), ada.devices) == (PHONE, ())
        assert await s.e.store.suppressions("default") == []
        assert [m.user_id for m in await s.e.store.topic_members("default", "readers", "", 10)
                ] == ["ada"]
        assert await s.e.store.get_topic("default", "everyone-news") is None
        # The attack's goal: the next one-time code still goes to Ada's own number.
        otp = await post(s, "otp")
        await s.e.run_dry()
        assert (await s.status(otp))["steps"][0]["status"] == "sent"
        [sms] = s.twilio.seen
        assert parse_qs(sms.body.decode())["To"] == [PHONE]


async def test_a_kind_limited_key_still_does_everything_with_its_kinds(tmp_path: Path) -> None:
    """Posting, reading, resolving its kinds' notifications; their inbox items (read, and
    resolve to change them), and its kinds' events to a list, a topic and everyone."""
    async with reach(tmp_path) as s:
        news = await key(s, "news", SCOPES - {"users"} | {"everyone"}, ("news",))
        nid = await post(s, "news", news)
        await post(s, "otp")
        assert (await call(s, "GET", f"/v1/notifications/{nid}", token=news))[0] == 200
        status, inbox = await call(s, "GET", "/v1/users/ada/inbox", token=news)
        assert status == 200 and [i["kind"] for i in inbox["items"]] == ["news"]
        assert (await call(s, "GET", "/v1/users/ada/inbox/badge", token=news))[1] == {
            "unread": 1}
        status, read = await call(s, "POST", f"/v1/users/ada/inbox/{nid}/read", token=news)
        assert status == 200 and read["unread"] == 0
        assert (await call(s, "POST", f"/v1/notifications/{nid}/resolve", {}, news))[0] == 200
        for audience in ({"user_ids": ["ada"]}, {"topic": "readers"}, {"everyone": True}):
            status, body = await call(s, "POST", "/v1/events", {
                "event_id": f"e-{len(str(audience))}", "type": "news", "audience": audience,
                "params": {"what": "x"}}, news)
            assert status == 202, body


async def test_a_kind_limited_key_needs_read_and_resolve_for_its_inbox_items(
        tmp_path: Path) -> None:
    """Without `users` (which such a key never holds), its kinds' inbox items are its kinds'
    notifications: seen with `read`, changed (read, archived) with `resolve`."""
    async with reach(tmp_path) as s:
        nid = await post(s, "news")
        post_only = await key(s, "post-only", frozenset({"post", "users"}), ("news",))
        reader = await key(s, "reader", frozenset({"read"}), ("news",))
        for token, method, path, scope in (
                (post_only, "GET", "/v1/users/ada/inbox", "read"),
                (post_only, "GET", "/v1/users/ada/inbox/badge", "read"),
                (reader, "POST", f"/v1/users/ada/inbox/{nid}/read", "resolve"),
                (reader, "POST", f"/v1/users/ada/inbox/{nid}/archive", "resolve"),
                (reader, "POST", "/v1/users/ada/inbox/read-all", "resolve")):
            status, answer = await call(s, method, path, {}, token)
            assert (status, answer["error"]["code"]) == (403, "scope_not_allowed"), path
            assert f"may not {scope}" in answer["error"]["message"]
            assert "users" not in answer["error"]["message"]  # it never holds it
        assert (await call(s, "GET", "/v1/users/ada/inbox", token=reader))[0] == 200


async def test_a_key_for_every_kind_keeps_what_its_scopes_allow(tmp_path: Path) -> None:
    async with reach(tmp_path) as s:
        status, shown = await call(s, "PATCH", "/v1/users/ada", {"email": "new@example.org"})
        assert status == 200 and shown["email"] == "new@example.org"
        assert (await call(s, "POST", "/v1/users/ada/devices",
                           {"type": "fcm", "token": "t1"}))[0] == 201
        assert (await call(s, "GET", "/v1/suppressions"))[0] == 200
        assert (await call(s, "GET", "/v1/topics/readers/members"))[0] == 200
        no_users = await key(s, "no-users", SCOPES - {"users"})
        status, answer = await call(s, "GET", "/v1/users/ada", token=no_users)
        assert (status, answer["error"]["code"]) == (403, "scope_not_allowed")


async def test_a_kind_limited_admin_key_does_not_open_the_console(tmp_path: Path) -> None:
    """The console shows and changes every kind's notifications, people and the suppression
    list: a key limited to some kinds never opens it, even one made with admin."""
    async with reach(tmp_path) as s:
        news = await key(s, "news", frozenset({"admin", "read"}), ("news",))
        r = await sign_in(s, news)
        assert r.status == 401 and "notifyd_console" not in r.cookies
        assert "every kind" in await r.text()


async def post(s: Stack, kind: str, token: str | None = None) -> str:
    status, body = await call(s, "POST", "/v1/notifications", {
        "user_id": "ada", "kind": kind, "params": {"what": "x"}}, token)
    assert status == 202, body
    return str(body["notification_id"])
