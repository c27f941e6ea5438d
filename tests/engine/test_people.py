"""The person's side, end to end through the HTTP API over the real engine and store: preferences
read at the claim (seed 002's Cy and Ada), categories that may not be turned off, limits that hold
a mention storm for one digest, the inbox with its badge and cursor, reads that resolve, user
tokens, CORS, the live stream, one-click unsubscribe.
"""

from __future__ import annotations

import asyncio
import base64
import email
import hashlib
import hmac
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from stack_support import ADDRESS, PHONE, PUBLIC, TEMPLATES, Stack, stack

from notifyd.cli import main
from notifyd.core.models import AcceptInput, Lane, PlanFn
from notifyd.core.records import InboxEntry
from notifyd.core.text import iso
from notifyd.domain.views import timeline
from notifyd.engine.digests import Digester
from notifyd.http.auth import CACHE_MS, hash_key, new_key
from notifyd.store import Store, open_store

DIGEST_TEMPLATES = {
    "email.subject.j2": "{{ count }} new mentions",
    "email.text.j2": "{% for i in items %}{{ i.params.what }}\n{% endfor %}"}
REPORT_TEMPLATES = {**TEMPLATES, "email.text.j2": "{{ what }}\nStop: {{ unsubscribe_url }}\n"}
SETTINGS: dict[str, Any] = {
    "categories": {"security": {"optional": False}},
    "limits": [{"kind": "mention", "medium": "sms", "count": 1, "per_sec": 3600}],
    "tenants": {"default": {"cors_origins": ["https://app.example.com"]}},
    "kinds": {
        "report": {"category": "reports", "transactional": False, "inbox": True,
                   "ladder": [{"channel": "email"}]},
        "otp": {"category": "security", "urgency": "urgent", "ladder": [{"channel": "sms"}]},
        "mention": {"category": "social", "transactional": False, "inbox": True,
                    "digest": "social_digest", "ladder": [{"channel": "sms"}]},
        "social_digest": {"category": "social", "transactional": False,
                          "schedule": "daily 09:00", "ladder": [{"channel": "email"}]},
        "task": {"inbox": True, "stop": "read",
                 "ladder": [{"channel": "sms", "timeout_sec": 60}, {"channel": "email"}]},
    },
}


@asynccontextmanager
async def people(tmp_path: Path) -> AsyncIterator[Stack]:
    async with stack(tmp_path, SETTINGS, {"social_digest": DIGEST_TEMPLATES,
                                          "report": REPORT_TEMPLATES}) as s:
        yield s


def auth(s: Stack, token: str | None = None) -> dict[str, str]:
    return {"Authorization": f"Bearer {token or s.key}"}


async def post(s: Stack, kind: str, user: str = "ada", what: str = "x",
               dedup: str | None = None) -> str:
    r = await s.client.post("/v1/notifications", headers=auth(s), json={
        "user_id": user, "kind": kind, "params": {"what": what},
        **({"dedup_key": dedup} if dedup else {})})
    assert r.status == 202, await r.text()
    return str((await r.json())["notification_id"])


async def put_prefs(s: Stack, user: str, body: dict[str, Any],
                    token: str | None = None) -> tuple[int, dict[str, Any]]:
    r = await s.client.put(f"/v1/users/{user}/preferences", json=body, headers=auth(s, token))
    return r.status, await r.json()


# --- preferences at the claim -----------------------------------------------------------------


async def test_an_opt_out_before_the_claim_suppresses_and_one_after_does_not(
        tmp_path: Path) -> None:
    """Seed 002: Cy opts out after routing, before dispatch: suppressed, and his version-one
    preference says why. Ada opts out while her email is at the provider: it is not recalled."""
    async with people(tmp_path) as s:
        await s.user("ada")
        await s.user("cy", email="cy@example.org")
        ada, cy = await post(s, "report", "ada"), await post(s, "report", "cy")
        status, shown = await put_prefs(s, "cy", {"categories": {"reports": {"email": False}}})
        assert status == 200 and shown["version"] == 1
        assert shown["categories"]["reports"] == {"optional": True, "email": False, "sms": True,
                                                  "push": True, "chat": True,
                                                  "title": "Reports", "description": None,
                                                  "media": ["email"]}
        s.smtp.hold = asyncio.Event()  # Ada's email sits at the provider
        assert await s.e.tick() == 1
        await put_prefs(s, "ada", {"categories": {"reports": {"email": False}}})
        s.smtp.hold.set()
        await s.e.settle()

        a = (await s.status(ada))["steps"][0]
        c = (await s.status(cy))["steps"][0]
        assert (a["status"], a["pref_version"]) == ("sent", 0)  # decided under version 0
        assert (c["status"], c["pref_version"]) == ("suppressed", 1)
        assert c["reason"] == "preference: reports by email is off (preferences v1)"
        assert len(s.smtp.received) == 1
        shown_ada = "\n".join(timeline(await s.e.record(ada), s.e.now))
        assert "step 0 email: attempt 1 started; message from template report/en/email@" in \
            shown_ada and "; preferences v0" in shown_ada
        # Zero sends by the person's own choice is a recorded outcome of its own, not a fault.
        assert (await s.status(cy))["current_state"] == "opted_out"


async def test_security_messages_cannot_be_turned_off_and_a_global_opt_out_spares_them(
        tmp_path: Path) -> None:
    async with people(tmp_path) as s:
        await s.user("ada")
        status, body = await put_prefs(s, "ada", {"categories": {"security": {"sms": False}}})
        assert status == 422 and body["error"]["field"] == "categories.security"
        status, body = await put_prefs(s, "ada", {"categories": {"news": {"sms": False}}})
        assert status == 422 and "unknown category 'news'" in body["error"]["message"]
        status, body = await put_prefs(s, "ada", {"opt_out": True})
        assert status == 200 and body["opt_out"] is True
        assert body["categories"]["security"]["optional"] is False
        code, report = await post(s, "otp", what="123456"), await post(s, "report")
        await s.e.run_dry()
        assert (await s.status(code))["steps"][0]["status"] == "sent"  # transactional
        step = (await s.status(report))["steps"][0]
        assert step["status"] == "suppressed" and step["reason"].startswith("opted_out:")


# --- attention: a mention storm -----------------------------------------------------------------


@pytest.mark.time_of_day
async def test_a_mention_storm_makes_200_inbox_rows_one_sms_and_one_digest(
        tmp_path: Path) -> None:
    async with people(tmp_path) as s:
        await s.user("ada")
        await s.client.put("/v1/users/ada", headers=auth(s), json={
            "email": ADDRESS, "phone": PHONE, "timezone": "Europe/Paris"})
        ids = [await post(s, "mention", what=f"m{i}") for i in range(200)]
        await s.e.run_dry()
        assert len(s.twilio.created) == 1  # one push of attention, the rest held
        window_end = await s.e.store.next_digest_at()
        assert window_end is not None
        [held] = await s.e.store.due_digests(window_end, 10)  # one window holds them all
        assert (held.count, held.window_end, held.digest_kind) == (199, window_end,
                                                                  "social_digest")
        # Which one went is the claim's order among equal due times (ids made in one ms sort
        # by their random part): any other is held.
        [sent] = [i for i in ids if (await s.status(i))["steps"][0]["status"] == "sent"]
        step = (await s.status(ids[1] if sent != ids[1] else ids[0]))["steps"][0]
        assert step["status"] == "held" and "over the limit of 1 sms per 3600 s" in step["reason"]
        r = await s.client.get("/v1/users/ada/inbox/badge", headers=auth(s))
        assert (await r.json())["unread"] == 200
        assert len(await s.e.store.inbox_page("default", "ada", None, 1000, True)) == 200

        digester = Digester(s.e.cfg, s.e.store, s.e.ingest, s.e.clock)
        assert await digester.run_once(s.e.now) == 0  # its window has not closed
        s.e.clock.advance((window_end - s.e.now) / 1000)
        assert await digester.run_once(s.e.now) == 1
        assert await digester.run_once(s.e.now) == 0  # rebuilding notifies nothing again
        await s.e.run_dry()
        [mail] = s.smtp.received
        message = email.message_from_bytes(mail.data)
        assert message["Subject"] == "199 new mentions"
        assert await s.e.store.next_digest_at() is None  # every held item carried
        digest_id = await s.e.store.find_by_dedup("default", "ada",
                                                  f"digest:social_digest:{window_end}")
        assert digest_id is not None
        assert (await s.status(digest_id))["kind"] == "social_digest"
        assert len(s.twilio.created) == 1


async def carried_mention(s: Stack) -> tuple[str, str, int]:
    """Two mentions: one goes by SMS, the other (over the limit) is held, and its window's
    digest is made (not yet sent). The held one's id, the digest's, and the window's end."""
    await s.user("ada")
    ids = [await post(s, "mention", what=f"m{i}") for i in range(2)]
    await s.e.run_dry()
    held = [i for i in ids if (await s.status(i))["steps"][0]["status"] == "held"]
    window_end = await s.e.store.next_digest_at()
    assert len(held) == 1 and window_end is not None
    s.e.clock.advance((window_end - s.e.now) / 1000)
    assert await Digester(s.e.cfg, s.e.store, s.e.ingest, s.e.clock).run_once(s.e.now) == 1
    digest_id = await s.e.store.find_by_dedup("default", "ada",
                                              f"digest:social_digest:{window_end}")
    assert digest_id is not None
    return held[0], digest_id, window_end


@pytest.mark.time_of_day
async def test_an_item_its_digest_carried_says_which_digest_and_whether_it_went_out(
        tmp_path: Path) -> None:
    """Not `held` forever: the status document, inspect's timeline and the event counts say
    which digest carried the item, and tell a digest not sent yet from one that went out."""
    async with people(tmp_path) as s:
        nid, digest_id, window_end = await carried_mention(s)
        carried_at = s.e.now

        async def doc() -> dict[str, Any]:
            r = await s.client.get(f"/v1/notifications/{nid}", headers=auth(s))
            assert r.status == 200
            return dict(await r.json())

        async def inspected() -> list[str]:
            shown = await asyncio.to_thread(CliRunner().invoke, main, ["inspect", nid], env={
                "NOTIFYD_DB": str(s.e.url), "NOTIFYD_CONFIG": None})
            assert shown.exit_code == 0, shown.output
            return [line.strip() for line in shown.stdout.splitlines()]

        before = await doc()
        [step] = before["steps"]
        assert (before["current_state"], step["status"]) == ("digested", "digested")
        assert step["reason"].startswith(f"held for the social_digest digest of "
                                         f"{iso(window_end)}: over the limit of 1 sms")
        assert step["digest"] == {"notification_id": digest_id,
                                  "current_state": "email_pending", "sent_via": []}
        lines = await inspected()
        assert f"{iso(carried_at)}  step 0 sms: digested: carried in digest {digest_id}, not " \
               "sent yet (email_pending)" in lines
        held = [ln for ln in lines if "step 0 sms: held for the social_digest digest" in ln]
        assert len(held) == 1 and "held: held" not in "\n".join(lines)
        assert lines[-1] == "state now: digested"

        await s.e.run_dry()  # the digest goes by email
        after = await doc()
        assert after["steps"][0]["digest"] == {"notification_id": digest_id,
                                               "current_state": "sent", "sent_via": ["email"]}
        assert f"{iso(carried_at)}  step 0 sms: digested: went out in digest {digest_id} by " \
               "email (sent)" in await inspected()
        assert [s.state for s in (await s.e.record(nid)).steps] == ["digested"]  # the rows


@pytest.mark.time_of_day
async def test_a_retry_does_not_spend_another_allowance(tmp_path: Path) -> None:
    """The held decision is recorded: scanning again never reconsiders it."""
    async with people(tmp_path) as s:
        await s.user("ada")
        first, second = await post(s, "mention"), await post(s, "mention")
        await s.e.run_dry()
        await s.e.run_dry()
        states = [(await s.status(n))["steps"][0]["status"] for n in (first, second)]
        assert sorted(states) == ["held", "sent"]  # due together: either may go first
        window_end = await s.e.store.next_digest_at()
        assert window_end is not None
        assert [d.count for d in await s.e.store.due_digests(window_end, 10)] == [1]


# --- the inbox --------------------------------------------------------------------------------


async def test_a_batch_writes_each_inbox_item_with_its_notification(tmp_path: Path) -> None:
    """Inbox items rendered per item: one whose params the template cannot render is refused
    in its place; a send_at is refused for an inbox kind; the rest land with the badge."""
    async with people(tmp_path) as s:
        await s.user("ada")
        r = await s.client.post("/v1/notifications/batch", headers=auth(s), json={"items": [
            {"user_id": "ada", "kind": "report", "params": {"what": "one"}},
            {"user_id": "ada", "kind": "report", "params": {}},
            {"user_id": "ada", "kind": "report", "params": {"what": "later"},
             "send_at": "2099-01-01T00:00:00Z"},
            {"user_id": "ada", "kind": "report", "params": {"what": "two"}}]})
        results = (await r.json())["results"]
        assert [(x["status"], x.get("error", {}).get("field")) for x in results] == [
            (202, None), (422, "params"), (422, "send_at"), (202, None)]
        inbox = await (await s.client.get("/v1/users/ada/inbox", headers=auth(s))).json()
        assert sorted(i["title"] for i in inbox["items"]) == ["one", "two"]  # one ms: any order
        badge = await (await s.client.get("/v1/users/ada/inbox/badge", headers=auth(s))).json()
        assert badge == {"unread": 2}


async def test_the_inbox_pages_by_cursor_and_keeps_its_badge(tmp_path: Path) -> None:
    async with people(tmp_path) as s:
        await s.user("ada")
        ids = []
        for i in range(120):
            ids.append(await post(s, "report", what=f"r{i}"))
            s.e.clock.advance(0.001 * (i % 2))  # some share a millisecond: the id breaks ties
        pages, before = [], None
        while True:
            q = f"?limit=50{'&before=' + before if before else ''}"
            body = await (await s.client.get(f"/v1/users/ada/inbox{q}", headers=auth(s))).json()
            pages.append([item["id"] for item in body["items"]])
            before = body["next"]
            if before is None:
                break
        assert [len(p) for p in pages] == [50, 50, 20]
        seen = [i for p in pages for i in p]
        newest_first = [i.notification_id for i in sorted(
            await s.e.store.inbox_page("default", "ada", None, 1000),
            key=lambda i: (i.created_at, i.notification_id), reverse=True)]
        assert seen == newest_first and sorted(seen) == sorted(ids)

        r = await s.client.post(f"/v1/users/ada/inbox/{ids[0]}/read", headers=auth(s))
        assert (await r.json())["unread"] == 119
        r = await s.client.post(f"/v1/users/ada/inbox/{ids[0]}/read", headers=auth(s))
        assert (await r.json())["unread"] == 119  # reading twice counts once
        r = await s.client.post(f"/v1/users/ada/inbox/{ids[1]}/archive", headers=auth(s))
        assert (await r.json())["unread"] == 118
        body = await (await s.client.get("/v1/users/ada/inbox?limit=100",
                                         headers=auth(s))).json()
        assert ids[1] not in [item["id"] for item in body["items"]]
        r = await s.client.post("/v1/users/ada/inbox/read-all", headers=auth(s))
        assert (await r.json())["unread"] == 0
        r = await s.client.post("/v1/users/ada/inbox/n_nope/read", headers=auth(s))
        assert r.status == 404


async def test_reading_an_item_resolves_a_stop_read_kind(tmp_path: Path) -> None:
    async with people(tmp_path) as s:
        await s.user("ada")
        nid = await post(s, "task")
        await s.e.run_dry()
        r = await s.client.post(f"/v1/users/ada/inbox/{nid}/read", headers=auth(s))
        assert (await r.json())["resolved"] is True
        doc = await s.status(nid)
        assert doc["resolution"]["resolution"] == "read"
        assert [st["status"] for st in doc["steps"]] == ["sent", "cancelled"]


async def test_a_badge_that_drifted_is_rebuilt(tmp_path: Path) -> None:
    async with people(tmp_path) as s:
        await s.user("ada")
        for _ in range(3):
            await post(s, "report")
        await s.e.store.backend.write(lambda tx: tx.run(tx.q.SET_BADGE, ("default", "ada", 40)))
        assert await s.e.store.rebuild_badges() == 1
        assert await s.e.store.badge("default", "ada") == 3
        await s.e.store.backend.write(lambda tx: tx.run(tx.q.SET_BADGE, ("default", "ada", 0)))
        nid = (await s.e.store.inbox_page("default", "ada", None, 1))[0].notification_id
        r = await s.client.post(f"/v1/users/ada/inbox/{nid}/read", headers=auth(s))
        assert (await r.json())["unread"] == 2  # below zero: recounted from the rows


async def test_an_inbox_template_that_cannot_render_the_params_is_a_422(tmp_path: Path) -> None:
    async with people(tmp_path) as s:
        r = await s.client.post("/v1/notifications", headers=auth(s), json={
            "user_id": "ada", "kind": "report", "params": {}})
        body = await r.json()
        assert r.status == 422 and body["error"]["field"] == "params"
        assert "'what' is undefined" in body["error"]["message"]
        assert await s.e.store.inbox_page("default", "ada", None, 1) == []
        assert await s.e.store.get_recipient("default", "ada") is None  # nothing was written


# --- user tokens and CORS ---------------------------------------------------------------------


async def test_a_user_token_reads_only_its_own_users_inbox(tmp_path: Path) -> None:
    async with people(tmp_path) as s:
        await post(s, "report", "ada")
        await post(s, "report", "bob")
        r = await s.client.post("/v1/users/ada/tokens", headers=auth(s), json={"ttl_sec": 600})
        assert r.status == 201
        token = (await r.json())["token"]
        r = await s.client.get("/v1/users/ada/inbox", headers=auth(s, token))
        assert r.status == 200 and len((await r.json())["items"]) == 1
        r = await s.client.get("/v1/users/bob/inbox", headers=auth(s, token))
        assert r.status == 403 and (await r.json())["error"]["code"] == "wrong_user"
        r = await s.client.post("/v1/users/bob/inbox/read-all", headers=auth(s, token))
        assert r.status == 403
        r = await s.client.put("/v1/users/bob/preferences", headers=auth(s, token),
                               json={"opt_out": True})
        assert r.status == 403
        r = await s.client.post("/v1/users/ada/tokens", headers=auth(s, token))
        assert r.status == 401  # a user token mints nothing
        forged = token[:-2] + ("A" if token[-2] != "A" else "B") + token[-1]
        r = await s.client.get("/v1/users/ada/inbox", headers=auth(s, forged))
        assert r.status == 401
        s.e.clock.advance(601)
        r = await s.client.get("/v1/users/ada/inbox", headers=auth(s, token))
        assert r.status == 401 and "expired" in (await r.json())["error"]["message"]


async def test_a_key_limited_to_some_kinds_sees_and_changes_only_their_items(
        tmp_path: Path) -> None:
    """A `kinds = report` key lists, counts, reads and archives report items only (with read
    and resolve: it holds no users scope): another kind's item is not found (a read would
    resolve its stop = "read" ladder), and the calls that cover every kind (preferences, the
    stream, a user token) are refused."""
    async with people(tmp_path) as s:
        news = new_key()
        await s.e.store.create_key(hash_key(news), "news", "default", ("report",),
                                   frozenset({"post", "read", "resolve"}))
        report, task = await post(s, "report"), await post(s, "task")
        await post(s, "report")
        inbox = await (await s.client.get("/v1/users/ada/inbox", headers=auth(s, news))).json()
        assert {i["kind"] for i in inbox["items"]} == {"report"} and len(inbox["items"]) == 2
        badge = await s.client.get("/v1/users/ada/inbox/badge", headers=auth(s, news))
        assert (await badge.json())["unread"] == 2
        for action in ("read", "archive"):
            r = await s.client.post(f"/v1/users/ada/inbox/{task}/{action}", headers=auth(s, news))
            assert r.status == 404, action
        r = await s.client.post(f"/v1/users/ada/inbox/{report}/read", headers=auth(s, news))
        assert (await r.json())["unread"] == 1  # of its kinds; the task still counts for Ada
        r = await s.client.post("/v1/users/ada/inbox/read-all", headers=auth(s, news))
        assert (await r.json())["unread"] == 0
        assert await s.e.store.badge("default", "ada") == 1  # the task, unread
        assert (await s.status(task))["current_state"] != "resolved"
        for method, path in (("GET", "preferences"), ("PUT", "preferences"),
                             ("GET", "inbox/stream"), ("POST", "tokens")):
            r = await s.client.request(method, f"/v1/users/ada/{path}", headers=auth(s, news),
                                       json={})
            body = await r.json()
            assert (r.status, body["error"]["code"]) == (403, "kind_not_allowed"), path
            assert "report" in body["error"]["message"]
        full = await (await s.client.get("/v1/users/ada/inbox", headers=auth(s))).json()
        assert {i["kind"]: i["read"] for i in full["items"]} == {"report": True, "task": False}


async def test_a_backend_signs_a_user_token_itself(tmp_path: Path) -> None:
    """The docs' recipe, in a few lines of hmac: the tenant's key, then the token."""
    async with people(tmp_path) as s:
        from notifyd.domain import signed
        secret = await s.e.store.signing_key(signed.tenant_key_name("default"))

        def b64(data: bytes) -> str:
            return base64.urlsafe_b64encode(data).rstrip(b"=").decode()

        payload = b64(json.dumps({"t": "default", "u": "ada",
                                  "exp": s.e.now // 1000 + 300}).encode())
        sig = b64(hmac.new(secret, f"nut1.{payload}".encode(), hashlib.sha256).digest())
        r = await s.client.get("/v1/users/ada/inbox/badge",
                               headers=auth(s, f"nut1.{payload}.{sig}"))
        assert r.status == 200


def self_signed(secret: bytes, exp: int, user: str = "ada", **extra: Any) -> str:
    """A token as a producer's backend makes one (docs/people.md: "User tokens")."""
    def b64(data: bytes) -> str:
        return base64.urlsafe_b64encode(data).rstrip(b"=").decode()

    payload = b64(json.dumps({"t": "default", "u": user, "exp": exp, **extra}).encode())
    return f"nut1.{payload}." + b64(hmac.new(secret, f"nut1.{payload}".encode(),
                                             hashlib.sha256).digest())


async def mint(s: Stack, key: str | None = None, **body: Any) -> str:
    r = await s.client.post("/v1/users/ada/tokens", headers=auth(s, key), json=body)
    assert r.status == 201, await r.text()
    return str((await r.json())["token"])


async def inbox_status(s: Stack, token: str) -> tuple[int, str]:
    r = await s.client.get("/v1/users/ada/inbox/badge", headers=auth(s, token))
    return r.status, "" if r.status == 200 else (await r.json())["error"]["message"]


async def test_a_token_dies_with_the_api_key_that_had_it_made(tmp_path: Path) -> None:
    async with people(tmp_path) as s:
        other = new_key()
        await s.e.store.create_key(hash_key(other), "other", "default", (), frozenset({"users"}))
        doomed, kept = await mint(s), await mint(s, other)
        assert (await inbox_status(s, doomed))[0] == 200
        await s.e.store.revoke_key("t")  # the key that made `doomed`
        s.e.clock.advance(CACHE_MS / 1000)  # a running daemon learns of it within seconds
        assert await inbox_status(s, doomed) == (
            401, "user token: the API key that made it was revoked")
        r = await s.client.put("/v1/users/ada/preferences", headers=auth(s, doomed),
                               json={"opt_out": True})
        assert r.status == 401
        assert (await inbox_status(s, kept))[0] == 200  # another key's tokens live on


async def test_no_token_lives_longer_than_tokens_max_ttl_sec(tmp_path: Path) -> None:
    async with people(tmp_path) as s:
        from notifyd.domain import signed
        secret = await s.e.store.signing_key(signed.tenant_key_name("default"))
        now = s.e.now // 1000
        for exp in (now + 86400 + 61, 2**63):
            status, message = await inbox_status(s, self_signed(secret, exp))
            assert (status, message) == (401, "user token: expires more than 86400 s from now "
                                              "(tokens.max_ttl_sec)")
        # past 64 bits the payload is not JSON notifyd reads at all
        assert await inbox_status(s, self_signed(secret, now + 10**400)) == (
            401, "user token: malformed")
        assert (await inbox_status(s, self_signed(secret, now + 86400 + 60)))[0] == 200
        r = await s.client.post("/v1/users/ada/tokens", headers=auth(s), json={"ttl_sec": 86401})
        assert r.status == 422 and (await r.json())["error"]["field"] == "ttl_sec"
        assert (await inbox_status(s, await mint(s, ttl_sec=86400)))[0] == 200


async def test_a_shorter_max_ttl_bounds_what_notifyd_mints(tmp_path: Path) -> None:
    async with stack(tmp_path, {**SETTINGS, "tokens": {"max_ttl_sec": 600}}) as s:
        r = await s.client.post("/v1/users/ada/tokens", headers=auth(s), json={"ttl_sec": 601})
        assert r.status == 422 and "60..600" in (await r.json())["error"]["message"]
        r = await s.client.post("/v1/users/ada/tokens", headers=auth(s))
        assert r.status == 201
        assert (await r.json())["expires_at"] == iso((s.e.now // 1000 + 600) * 1000)
        doc = await (await s.client.get("/v1/openapi.json")).json()
        assert doc["components"]["schemas"]["TokenRequest"]["properties"]["ttl_sec"][
            "maximum"] == 600


async def test_a_rotated_key_verifies_its_tokens_for_the_overlap_only(tmp_path: Path) -> None:
    async with people(tmp_path) as s:
        from notifyd.domain import signed
        name = signed.tenant_key_name("default")
        minted = await mint(s, ttl_sec=3600)
        own = self_signed(await s.e.store.signing_key(name), s.e.now // 1000 + 3600)
        assert (await inbox_status(s, minted))[0] == 200  # the daemon holds the key it read
        await s.e.store.rotate_signing_key(name, 60_000)
        s.e.clock.advance(CACHE_MS / 1000)
        fresh = await mint(s, ttl_sec=3600)  # signed with the new key
        for token in (minted, own, fresh):
            assert (await inbox_status(s, token))[0] == 200
        s.e.clock.advance(60)  # the overlap is over: the old key is gone
        for token in (minted, own):
            assert await inbox_status(s, token) == (401, "user token: signature does not match")
        assert (await inbox_status(s, fresh))[0] == 200


async def test_cors_answers_by_the_tokens_tenant(tmp_path: Path) -> None:
    async with people(tmp_path) as s:
        ok, other = "https://app.example.com", "https://evil.example.net"
        pre = await s.client.options("/v1/users/ada/inbox", headers={
            "Origin": ok, "Access-Control-Request-Method": "GET"})
        assert pre.status == 204 and pre.headers["Access-Control-Allow-Origin"] == ok
        assert "Authorization" in pre.headers["Access-Control-Allow-Headers"]
        assert "If-Match" in pre.headers["Access-Control-Allow-Headers"]  # a page's PATCH
        assert "PATCH" in pre.headers["Access-Control-Allow-Methods"]
        bad = await s.client.options("/v1/users/ada/inbox", headers={"Origin": other})
        assert bad.status == 403
        token = (await (await s.client.post("/v1/users/ada/tokens",
                                            headers=auth(s))).json())["token"]
        r = await s.client.get("/v1/users/ada/inbox", headers={**auth(s, token), "Origin": ok})
        assert r.headers.get("Access-Control-Allow-Origin") == ok
        r = await s.client.get("/v1/users/ada/preferences", headers={**auth(s, token),
                                                                     "Origin": ok})
        assert (r.headers["ETag"], r.headers["Access-Control-Expose-Headers"]) == ('"0"', "ETag")
        r = await s.client.get("/v1/users/ada/inbox", headers={**auth(s, token),
                                                               "Origin": other})
        assert "Access-Control-Allow-Origin" not in r.headers


# --- the live stream ---------------------------------------------------------------------------


async def read_events(resp: Any, n: int) -> list[tuple[str | None, str, dict[str, Any]]]:
    """The next `n` events (id, name, data), comments skipped; bounded in time."""
    out: list[tuple[str | None, str, dict[str, Any]]] = []
    fields: dict[str, str] = {}
    async with asyncio.timeout(10):
        while len(out) < n:
            line = (await resp.content.readline()).decode().rstrip("\n")
            if line == "":
                if "event" in fields:
                    out.append((fields.get("id"), fields["event"], json.loads(fields["data"])))
                fields = {}
            elif not line.startswith(":"):
                name, _, value = line.partition(": ")
                fields[name] = value
    return out


async def test_the_stream_pushes_new_items_and_resumes_after_the_last_event(
        tmp_path: Path) -> None:
    async with people(tmp_path) as s:
        token = (await (await s.client.post("/v1/users/ada/tokens",
                                            headers=auth(s))).json())["token"]
        first = await post(s, "report", what="one")
        resp = await s.client.get(f"/v1/users/ada/inbox/stream?token={token}")
        assert resp.status == 200 and resp.headers["Content-Type"] == "text/event-stream"
        [(_, name, badge)] = await read_events(resp, 1)
        assert (name, badge) == ("badge", {"unread": 1})
        second = await post(s, "report", what="two")
        (seq, name, item), (_, _, badge) = await read_events(resp, 2)
        assert name == "item" and item["id"] == second and item["title"] == "two"
        assert badge == {"unread": 2}
        await s.client.post(f"/v1/users/ada/inbox/{first}/read", headers=auth(s))
        (_, name, read), (_, _, badge) = await read_events(resp, 2)
        assert (name, read, badge) == ("read", {"id": first}, {"unread": 1})
        resp.close()

        third = await post(s, "report", what="three")  # while no page listens
        again = await s.client.get("/v1/users/ada/inbox/stream",
                                   headers={**auth(s, token), "Last-Event-ID": str(seq)})
        (_, name, item), (_, _, badge) = await read_events(again, 2)
        assert (name, item["id"], badge) == ("item", third, {"unread": 2})
        again.close()
        assert s.ctx.hub.open <= 1  # closed streams leave (the last one on its next write)


async def test_a_stream_hears_items_another_process_commits_in_their_order(
        tmp_path: Path) -> None:
    """Several processes on one database: an item committed by another reaches the stream (the
    store's watch), read from the rows after the last item sent, so one that committed in
    between is never skipped."""
    async with people(tmp_path) as s:
        if not s.e.store.shared:
            pytest.skip("one process writes the database: its streams hear it directly")
        s.ctx.hub.shared = True  # as the daemon makes it for a shared store
        stop = asyncio.Event()
        watching = asyncio.create_task(s.e.store.watch(lambda at: None, s.ctx.hub.poke, stop))
        other = await open_store(s.e.cfg.store.url, s.e.clock)
        try:
            token = (await (await s.client.post("/v1/users/ada/tokens",
                                                headers=auth(s))).json())["token"]
            resp = await s.client.get(f"/v1/users/ada/inbox/stream?token={token}")
            [(_, name, _)] = await read_events(resp, 1)
            assert name == "badge"
            await asyncio.sleep(0.2)  # LISTEN in place
            theirs = [await other_item(other, i) for i in range(3)]
            ours = await post(s, "report", what="ours")
            seen: list[str] = []
            while len(seen) < 4:
                seen += [d["id"] for _, n, d in await read_events(resp, 1) if n == "item"]
            assert seen == [*theirs, ours]  # in seq order, none skipped
            resp.close()
        finally:
            stop.set()
            await other.close()
            await watching


async def other_item(store: Store, i: int) -> str:
    nid = f"n_other_{i}"
    inp = AcceptInput("default", "ada", "report", {"what": str(i)}, f"o{i}", None, None,
                      f"h{i}", "t")
    plan: PlanFn = lambda r, now: ([], Lane.BULK)  # noqa: E731 - the inbox item alone
    assert (await store.accept(inp, nid, plan, 60, InboxEntry(f"theirs {i}", None))).created
    return nid


# --- one-click unsubscribe ----------------------------------------------------------------------


async def test_one_click_unsubscribe_turns_the_category_off(tmp_path: Path) -> None:
    async with people(tmp_path) as s:
        await s.user("ada")
        await post(s, "report")
        await s.e.run_dry()
        [mail] = s.smtp.received
        message = email.message_from_bytes(mail.data)
        header = message["List-Unsubscribe"]
        assert header.startswith(f"<{PUBLIC}/v1/unsubscribe/unsub1.")
        assert message["List-Unsubscribe-Post"] == "List-Unsubscribe=One-Click"
        link = header.strip("<>")
        assert link in message.get_payload(decode=True).decode()  # {{ unsubscribe_url }}
        path = link[len(PUBLIC):]

        page = await s.client.get(path)
        assert page.status == 200 and "Unsubscribe from “Reports”?" in await page.text()
        ada = await s.e.store.get_recipient("default", "ada")
        assert ada is not None and ada.pref_version == 0  # a GET changes nothing
        r = await s.client.post(path, data="List-Unsubscribe=One-Click",
                                headers={"Content-Type": "application/x-www-form-urlencoded"})
        assert r.status == 200 and "unsubscribed" in await r.text()
        prefs = await (await s.client.get("/v1/users/ada/preferences", headers=auth(s))).json()
        assert prefs["version"] == 1 and prefs["categories"]["reports"]["email"] is False
        later = await post(s, "report")
        await s.e.run_dry()
        assert (await s.status(later))["steps"][0]["status"] == "suppressed"
        assert (await s.client.get(path[:-3] + "xyz")).status == 404  # a changed link


async def test_the_unsubscribe_page_may_not_be_framed(tmp_path: Path) -> None:
    """Its button turns a category off: another site framing it could have a visitor click it
    unawares. It says so as every other page of notifyd's does, the broken link's page too."""
    async with people(tmp_path) as s:
        from notifyd.domain import signed

        link = signed.make_unsubscribe(s.ctx.link_key or b"", "default", "ada", "reports")
        for path in (f"/v1/unsubscribe/{link}", "/v1/unsubscribe/unsub1.broken"):
            for method in ("GET", "POST"):
                r = await s.client.request(method, path)
                assert r.headers["X-Frame-Options"] == "DENY", (method, path)
                assert "frame-ancestors 'none'" in r.headers["Content-Security-Policy"]
                assert r.headers["Referrer-Policy"] == "no-referrer"


@pytest.mark.parametrize(("table", "message"), [
    ({"t": {"stop": "read", "ladder": [{"channel": "log"}]}}, "set inbox = true"),
    ({"t": {"digest": "x", "ladder": [{"channel": "log"}]}}, "'x' is not a digest kind"),
    ({"t": {"always_digest": True, "ladder": [{"channel": "log"}]}}, "needs digest"),
    ({"t": {"schedule": "daily 9am", "ladder": [{"channel": "log"}]}}, "must be \"hourly\""),
])
def test_the_config_refuses_a_kind_it_cannot_serve(tmp_path: Path, table: dict[str, Any],
                                                   message: str) -> None:
    import tomli_w

    from notifyd.config import load_config
    from notifyd.core.errors import ConfigError

    path = tmp_path / "c.toml"
    path.write_text(tomli_w.dumps({"kinds": table}))
    with pytest.raises(ConfigError, match=message):
        load_config(path)


async def test_a_retry_goes_under_its_first_decision(tmp_path: Path) -> None:
    """Seed 002: an intent already in flight keeps the decision that let it go. Ada's email
    times out at the provider (unknown), she opts out, and the retry under the same key still
    goes; a step not yet tried reads the new preferences."""
    async with people(tmp_path) as s:
        await s.user("ada")
        first = await post(s, "report", what="one")
        s.smtp.drop_at = "DATA"  # the message arrives; the answer is lost
        await s.e.run_dry()
        assert (await s.status(first))["steps"][0]["status"] == "unknown"
        await put_prefs(s, "ada", {"categories": {"reports": {"email": False}}})
        second = await post(s, "report", what="two")
        s.smtp.drop_at = None
        s.e.clock.advance(600)
        await s.e.run_dry()
        step = (await s.status(first))["steps"][0]
        assert (step["status"], step["attempts"], step["pref_version"]) == ("sent", 2, 0)
        later = (await s.status(second))["steps"][0]
        assert (later["status"], later["pref_version"]) == ("suppressed", 1)


async def test_a_stream_resuming_after_many_items_gets_them_all_in_pages(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from notifyd.http import people as people_module

    monkeypatch.setattr(people_module, "BACKLOG_PAGE", 3)
    async with people(tmp_path) as s:
        first = await post(s, "report", what="zero")
        [item] = await s.e.store.inbox_page("default", "ada", None, 10)
        assert item.notification_id == first
        seq = item.seq
        later = [await post(s, "report", what=f"r{i}") for i in range(7)]
        resp = await s.client.get("/v1/users/ada/inbox/stream",
                                  headers={**auth(s), "Last-Event-ID": str(seq)})
        events = await read_events(resp, 8)
        assert [data["id"] for _, name, data in events if name == "item"] == later
        assert events[-1][1:] == ("badge", {"unread": 8})
        resp.close()


@pytest.mark.parametrize(("path", "header"), [
    ("/v1/users/ada/inbox?limit=²", {}),
    ("/v1/users/ada/inbox/stream", {"Last-Event-ID": "²"}),
])
async def test_digits_that_are_not_ascii_are_refused_before_anything_starts(
        tmp_path: Path, path: str, header: dict[str, str]) -> None:
    async with people(tmp_path) as s:
        r = await s.client.get(path, headers={**auth(s), **header})
        assert r.status == 422 and r.headers["Content-Type"].startswith("application/json")
