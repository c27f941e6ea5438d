"""Erasing a person through DELETE /v1/users/{user_id}, over the real engine, store and
providers: what goes, what is cancelled (nothing more reaches them), what is scrubbed, the
suppression that stays as a hash and still holds, and the user tokens that die with them."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from stack_support import ADDRESS, PHONE, Stack, stack

from notifyd.core.contacts import SUPPRESSION_KEY, hashed_address
from notifyd.engine.stream import CLOSE
from notifyd.http.auth import hash_key, new_key

SETTINGS: dict[str, Any] = {
    "kinds": {
        "alert": {"inbox": True, "ladder": [{"channel": "sms", "timeout_sec": 60},
                                            {"channel": "email"}]},
    },
}


@asynccontextmanager
async def erasing(tmp_path: Path) -> AsyncIterator[Stack]:
    async with stack(tmp_path, SETTINGS) as s:
        await s.user("ada")
        yield s


def auth(s: Stack, token: str | None = None) -> dict[str, str]:
    return {"Authorization": f"Bearer {token or s.key}"}


async def post(s: Stack, dedup: str) -> str:
    r = await s.client.post("/v1/notifications", headers=auth(s), json={
        "user_id": "ada", "kind": "alert", "params": {"what": "secret plan"},
        "dedup_key": dedup})
    assert r.status == 202, await r.text()
    return str((await r.json())["notification_id"])


async def mint(s: Stack) -> str:
    r = await s.client.post("/v1/users/ada/tokens", headers=auth(s))
    return str((await r.json())["token"])


def signed_by_backend(secret: bytes, exp: int, iat: int | None = None) -> str:
    """A user token as the docs' recipe makes it (with iat, or without as older backends do)."""
    def b64(data: bytes) -> str:
        return base64.urlsafe_b64encode(data).rstrip(b"=").decode()
    body = {"t": "default", "u": "ada", "exp": exp, **({"iat": iat} if iat is not None else {})}
    payload = b64(json.dumps(body).encode())
    sig = b64(hmac.new(secret, f"nut1.{payload}".encode(), hashlib.sha256).digest())
    return f"nut1.{payload}.{sig}"


async def test_erasing_a_person_reports_what_went_and_nothing_more_reaches_them(
        tmp_path: Path) -> None:
    async with erasing(tmp_path) as s:
        r = await s.client.put("/v1/users/ada/preferences", headers=auth(s),
                               json={"opt_out": False})
        assert r.status == 200
        r = await s.client.post("/v1/users/ada/devices", headers=auth(s),
                                json={"type": "fcm", "token": "tok-1"})
        assert r.status == 201
        went = await post(s, "d1")
        await s.e.run_dry()  # its SMS goes; its email waits for step 0's window
        assert len(s.twilio.created) == 1
        waiting = await post(s, "d2")  # its SMS is due now: claimed after the erasure, or never
        r = await s.client.post("/v1/suppressions", headers=auth(s), json={
            "channel_type": "email", "address": ADDRESS, "reason": "bounced"})
        assert r.status == 201
        queue = s.ctx.hub.subscribe("default", "ada")

        r = await s.client.delete("/v1/users/ada", headers=auth(s))
        assert r.status == 200
        report = await r.json()
        assert report.pop("erased_at")
        assert report == {
            "user_id": "ada",
            "removed": {"profile": True, "preferences": True, "devices": 1, "inbox_items": 2,
                        "memberships": 0},
            "cancelled": {"notifications": 2, "steps": 3},
            "scrubbed": {"params": 2, "payloads": 1, "receipts": 0, "events": 0},
            "suppressions": {"hashed": 1, "kept": 0}}
        assert queue is not None and queue.queue.get_nowait() is CLOSE  # their stream ends
        assert queue.closed == "erased"

        s.e.clock.advance(3600)
        await s.e.run_dry()
        assert len(s.twilio.created) == 1 and s.smtp.received == []  # nothing more went
        for nid in (went, waiting):
            n = await s.e.record(nid)
            assert n.params == {} and all(st.payload is None and st.destination is None
                                          for st in n.steps)
            assert n.resolution == "erased"
            assert {st.reason for st in n.steps if st.state == "cancelled"} == {
                "resolved: erased"}
        r = await s.client.get("/v1/users/ada", headers=auth(s))
        assert r.status == 404
        r = await s.client.get("/v1/users/ada/inbox", headers=auth(s))
        assert (await r.json())["items"] == []
        key = await s.e.store.find_signing_key(SUPPRESSION_KEY)
        assert key is not None
        r = await s.client.get("/v1/suppressions", headers=auth(s))
        assert [x["address"] for x in (await r.json())["suppressions"]] == [
            hashed_address(ADDRESS, key.secret)]  # the address is gone; the suppression is not

        await s.user("bob", email=ADDRESS, phone=PHONE)  # the same address, someone else's
        r = await s.client.get("/v1/users/bob", headers=auth(s))
        assert (await r.json())["disabled_contacts"] == {"email": "bounced"}


async def test_user_tokens_made_before_the_erasure_are_refused(tmp_path: Path) -> None:
    async with erasing(tmp_path) as s:
        minted = await mint(s)
        secret = await s.e.store.signing_key("tokens:default")
        now = s.e.now // 1000
        own, older = signed_by_backend(secret, now + 600, now), signed_by_backend(secret, now + 600)
        for token in (minted, own, older):
            r = await s.client.get("/v1/users/ada/inbox", headers=auth(s, token))
            assert r.status == 200
        assert (await s.client.delete("/v1/users/ada", headers=auth(s))).status == 200
        for token in (minted, own, older):
            r = await s.client.put("/v1/users/ada/preferences", headers=auth(s, token),
                                   json={"opt_out": True})  # would make them again
            assert (r.status, (await r.json())["error"]["message"]) == (
                401, "user token: it was made before its user was erased")
        assert await s.e.store.get_recipient("default", "ada") is None
        s.e.clock.advance(1)
        fresh = await mint(s)  # a person of that id again, from now on
        r = await s.client.get("/v1/users/ada/inbox", headers=auth(s, fresh))
        assert r.status == 200
        now = s.e.now // 1000
        r = await s.client.get("/v1/users/ada/inbox", headers=auth(
            s, signed_by_backend(secret, now + 600, now)))
        assert r.status == 200
        r = await s.client.get("/v1/users/ada/inbox", headers=auth(
            s, signed_by_backend(secret, now + 600)))  # no iat: it may be older than that
        assert r.status == 401


async def test_erasing_needs_a_key_for_every_kind_with_the_users_scope(tmp_path: Path) -> None:
    async with erasing(tmp_path) as s:
        for name, kinds, scopes in (("few", ("alert",), {"users"}), ("post", (), {"post"})):
            key = new_key()
            await s.e.store.create_key(hash_key(key), name, "default", kinds,
                                       frozenset(scopes))
            r = await s.client.delete("/v1/users/ada", headers=auth(s, key))
            assert r.status == 403
        assert await s.e.store.get_recipient("default", "ada") is not None
