"""Events and topics end to end through the HTTP API over the real engine, store and SMTP
server: an event to a topic reaches each member once per kind, and the person's preferences
decide at the claim, as for any notification; a key addresses only what its scopes allow; a
person follows and leaves self-service topics with their own user token, and only for
themselves.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from stack_support import ADDRESS, Stack, stack

from notifyd.core.events import event_key
from notifyd.core.text import iso
from notifyd.domain.views import timeline
from notifyd.engine.fanout import Fanout
from notifyd.http.auth import hash_key, new_key
from notifyd.http.health import Health

SETTINGS: dict[str, Any] = {
    "kinds": {
        "reply": {"category": "social", "transactional": False, "inbox": True,
                  "ladder": [{"channel": "email"}]},
        "summary": {"category": "social", "ladder": [{"channel": "email"}]},
        "otp": {"ladder": [{"channel": "sms"}]},
    },
    "events": {"comment": {"kinds": ["reply"]}, "two": {"kinds": ["reply", "summary"]},
               "weekly": {"kinds": ["summary"]}},
    "fanout": {"chunk": 2},
    "tenants": {"default": {"cors_origins": ["https://app.example.com"]}},
}


@asynccontextmanager
async def events_stack(tmp_path: Path) -> AsyncIterator[tuple[Stack, Fanout]]:
    async with stack(tmp_path, SETTINGS) as s:
        yield s, Fanout(s.e.cfg, s.e.store, s.e.ingest, s.e.clock)


async def key(s: Stack, scopes: str = "post,read,topics,users", kinds: tuple[str, ...] = (),
              tenant: str = "default") -> str:
    made = new_key()
    await s.e.store.create_key(hash_key(made), f"k-{scopes}-{kinds}-{tenant}", tenant, kinds,
                               frozenset(scopes.split(",")))
    return made


async def call(s: Stack, method: str, path: str, body: Any = None,
               token: str | None = None) -> tuple[int, Any]:
    headers = {"Authorization": f"Bearer {token or s.key}"}
    async with s.client.request(method, path, json=body, headers=headers) as r:
        return r.status, None if r.status == 204 else await r.json()


def news(event_id: str = "c-1", audience: Any = None, what: str = "a reply",
         kind: str = "comment") -> dict[str, Any]:
    return {"event_id": event_id, "type": kind, "audience": audience or {"topic": "thread-42"},
            "params": {"what": what}, "subject": "thread:42"}


async def test_an_event_reaches_each_member_once_and_preferences_decide_at_the_claim(
        tmp_path: Path) -> None:
    async with events_stack(tmp_path) as (s, fanout):
        k = await key(s)
        for user in ("ada", "bo", "cy"):
            await s.user(user, email=f"{user}@example.org")
        assert (await call(s, "PUT", "/v1/topics/thread-42", {}, k))[0] == 201
        status, body = await call(s, "POST", "/v1/topics/thread-42/members",
                                  {"add": ["ada", "bo", "cy", "nobody"]}, k)
        assert status == 200 and (body["members"], body["version"], body["added"]) == (4, 1, 4)
        status, accepted = await call(s, "POST", "/v1/events", news(), k)
        assert status == 202 and accepted == {"event_id": "c-1", "state": "routing",
                                              "created": True, "audience_size": 4, "routed": 0}
        # Cy opts out before the fan-out, Bo after it: both are decided at the claim.
        await call(s, "PUT", "/v1/users/cy/preferences", {"opt_out": True})
        # A member added after the event was accepted gets nothing of it.
        await call(s, "POST", "/v1/topics/thread-42/members", {"add": ["late"]}, k)
        assert await fanout.run_once() == 4
        await call(s, "PUT", "/v1/users/bo/preferences",
                   {"categories": {"social": {"email": False}}})
        await s.e.run_dry()
        assert [r.rcpt_tos for r in s.smtp.received] == [["ada@example.org"]]

        status, doc = await call(s, "GET", "/v1/events/c-1", token=k)
        assert status == 200
        assert {f: doc[f] for f in ("state", "audience_size", "routed", "kinds", "subject",
                                    "audience")} == {
            "state": "routed", "audience_size": 4, "routed": 4, "kinds": ["reply"],
            "subject": "thread:42", "audience": {"kind": "topic", "topic": "thread-42",
                                                 "version": 1}}
        assert doc["notifications"] == {
            "pending": 0, "held": 0, "digested": 0, "sent": 1, "delivered": 0, "resolved": 0,
            "expired": 0, "undeliverable": 0, "suppressed": {"no_contact": 1, "opted_out": 1,
                                               "preference": 1}}
        # Everyone has the item in their inbox, whatever the preferences say of the sends.
        for user in ("ada", "bo", "cy", "nobody"):
            [item] = await s.e.store.inbox_page("default", user, None, 10)
            assert item.title == "a reply"
        assert await s.e.store.inbox_page("default", "late", None, 10) == []
        nid = await s.e.store.find_by_dedup("default", "ada", event_key("c-1", "reply"))
        assert nid is not None
        n = await s.e.record(nid)
        assert n.event_id == "c-1" and "event=c-1" in timeline(n, s.e.now)[0]
        assert (await s.status(nid))["event_id"] == "c-1"


async def test_the_same_event_again_is_its_answer_and_other_input_a_conflict(
        tmp_path: Path) -> None:
    async with events_stack(tmp_path) as (s, fanout):
        k = await key(s)
        await call(s, "PUT", "/v1/topics/thread-42", {}, k)
        await call(s, "POST", "/v1/topics/thread-42/members", {"add": ["ada"]}, k)
        assert (await call(s, "POST", "/v1/events", news(), k))[0] == 202
        await fanout.run_once()
        status, again = await call(s, "POST", "/v1/events", news(), k)
        assert status == 200 and (again["created"], again["state"], again["routed"]) == (
            False, "routed", 1)
        status, body = await call(s, "POST", "/v1/events", news(what="other"), k)
        assert status == 409 and body["error"]["code"] == "event_conflict"
        status, body = await call(s, "POST", "/v1/events", news(
            audience={"user_ids": ["ada"]}), k)
        assert status == 409 and body["error"]["field"] == "event_id"
        assert await fanout.run_once() == 0  # nothing new to route
        assert len(await s.e.store.event_notifications("default", "c-1", ("", ""), 10)) == 1


async def test_an_events_send_at_starts_every_ladder_it_routes_then(tmp_path: Path) -> None:
    """Routed now, sent then: each notification's ladder starts at the event's send_at, a
    different send_at under the same id is other input, and support sees the schedule."""
    async with events_stack(tmp_path) as (s, fanout):
        k = await key(s)
        await s.user("ada")
        at = s.e.now + 3_600_000
        body = {**news(kind="weekly", audience={"user_ids": ["ada"]}), "send_at": iso(at)}
        assert (await call(s, "POST", "/v1/events", body, k))[0] == 202
        assert await fanout.run_once() == 1
        await s.e.run_dry()
        assert s.smtp.received == []  # not before its time
        nid = await s.e.store.find_by_dedup("default", "ada", event_key("c-1", "summary"))
        assert nid is not None
        assert (await s.status(nid))["send_at"] == iso(at)
        status, doc = await call(s, "GET", "/v1/events/c-1", token=k)
        assert status == 200 and doc["send_at"] == iso(at)
        later = {**body, "send_at": iso(at + 1000)}
        status, answer = await call(s, "POST", "/v1/events", later, k)
        assert (status, answer["error"]["code"]) == (409, "event_conflict")
        s.e.clock.advance(3600)
        await s.e.run_dry()
        assert [r.rcpt_tos for r in s.smtp.received] == [[ADDRESS]]


async def test_a_key_addresses_only_what_its_scopes_and_kinds_allow(tmp_path: Path) -> None:
    async with events_stack(tmp_path) as (s, _):
        full = await key(s)
        await call(s, "PUT", "/v1/topics/thread-42", {}, full)
        plain = await key(s, "post,read")
        status, body = await call(s, "POST", "/v1/events", news(), plain)
        assert status == 403 and body["error"]["code"] == "scope_not_allowed"
        assert "topics scope" in body["error"]["message"]
        status, body = await call(s, "POST", "/v1/events", news(audience={"everyone": True}),
                                  full)
        assert status == 403 and "everyone scope" in body["error"]["message"]
        anyone = await key(s, "post,read,everyone")
        assert (await call(s, "POST", "/v1/events", news("all", {"everyone": True}),
                           anyone))[0] == 202
        status, body = await call(s, "POST", "/v1/events", news(
            "list", {"user_ids": ["ada", "ada", "bo"]}), await key(s, "topics"))
        assert status == 403 and "post scope" in body["error"]["message"]
        status, body = await call(s, "POST", "/v1/events", news(
            "list", {"user_ids": ["ada", "ada", "bo"]}), plain)
        assert status == 202 and body["audience_size"] == 2
        limited = await key(s, kinds=("reply",))
        status, body = await call(s, "POST", "/v1/events", news("two", kind="two"), limited)
        assert status == 403 and body["error"]["code"] == "kind_not_allowed"
        assert "summary" in body["error"]["message"]
        # A key that may not read every kind of an event does not see it; nor another tenant's.
        status, _ = await call(s, "POST", "/v1/events", news("two", kind="two"), full)
        assert status == 202
        assert (await call(s, "GET", "/v1/events/two", token=limited))[0] == 404
        assert (await call(s, "GET", "/v1/events/two", token=await key(s, tenant="b")))[0] == 404
        assert (await call(s, "GET", "/v1/events/two", token=full))[0] == 200


async def test_what_an_event_request_may_not_be(tmp_path: Path) -> None:
    async with events_stack(tmp_path) as (s, _):
        k = await key(s)
        cases: list[tuple[dict[str, Any], str, str | None]] = [
            (news(audience={"topic": "nope"}), "unknown_topic", "audience.topic"),
            (news(kind="nope"), "unknown_event_type", "type"),
            # the inbox item shows at routing: a type with an inbox kind is not scheduled
            ({**news(), "send_at": "2030-01-01T00:00:00Z"}, "invalid_field", "send_at"),
            ({**news(kind="weekly"), "send_at": "2099-01-01T00:00:00Z"}, "invalid_field",
             "send_at"),  # past server.max_schedule_sec
            ({**news(kind="weekly"), "send_at": "soon"}, "invalid_field", "send_at"),
            (news(audience={"topic": "a", "everyone": True}), "invalid_field", "audience"),
            (news(audience={"everyone": False}), "invalid_field", "audience.everyone"),
            (news(audience={"user_ids": []}), "invalid_field", "audience.user_ids"),
            (news(audience={"user_ids": ["a"] * 1001}), "invalid_field", "audience.user_ids"),
            (news(audience={"users": ["a"]}), "unknown_field", "audience.users"),
            (news("has/slash"), "invalid_field", "event_id"),
            ({**news(), "params": {}}, "invalid_field", "params"),  # the inbox cannot render
        ]
        for body, code, field in cases:
            status, answer = await call(s, "POST", "/v1/events", body, k)
            assert (answer["error"]["code"], answer["error"]["field"]) == (code, field), body
            assert status in (403, 409, 422)
        status, answer = await call(s, "POST", "/v1/notifications", {
            "user_id": "ada", "kind": "otp", "dedup_key": "event:c-1:otp"})
        assert status == 422 and answer["error"]["field"] == "dedup_key"


async def test_topics_are_made_described_changed_listed_and_deleted(tmp_path: Path) -> None:
    async with events_stack(tmp_path) as (s, _):
        k = await key(s)
        assert (await call(s, "PUT", "/v1/topics/t", {}))[0] == 403  # no topics scope
        status, made = await call(s, "PUT", "/v1/topics/t", {"self_service": True}, k)
        assert status == 201 and (made["members"], made["version"], made["self_service"]) == (
            0, 0, True)
        assert (await call(s, "PUT", "/v1/topics/t", {}, k))[1]["self_service"] is True
        users = [f"u{i:04}" for i in range(1500)]
        for i in range(0, 1500, 1000):
            await call(s, "POST", "/v1/topics/t/members", {"add": users[i:i + 1000]}, k)
        status, body = await call(s, "POST", "/v1/topics/t/members",
                                  {"add": ["x"], "remove": ["x"]}, k)
        assert status == 422 and body["error"]["field"] == "remove"
        status, shown = await call(s, "GET", "/v1/topics/t", token=k)
        assert (shown["members"], shown["version"]) == (1500, 2)
        listed, after = [], ""
        while True:
            status, page = await call(s, "GET", f"/v1/topics/t/members?limit=600&after={after}",
                                      token=k)
            listed += [m["user_id"] for m in page["members"]]
            if page["next"] is None:
                break
            after = page["next"]
        assert listed == users
        status, body = await call(s, "DELETE", "/v1/topics/t", token=k)
        assert status == 409 and body["error"]["code"] == "topic_not_empty"
        for i in range(0, 1500, 1000):
            await call(s, "POST", "/v1/topics/t/members", {"remove": users[i:i + 1000]}, k)
        assert (await call(s, "DELETE", "/v1/topics/t", token=k))[0] == 204
        assert (await call(s, "GET", "/v1/topics/t", token=k))[0] == 404
        assert (await call(s, "GET", "/v1/topics/t/members", token=k))[0] == 404
        assert (await call(s, "POST", "/v1/topics/t/members", {"add": ["a"]}, k))[0] == 404
        assert (await call(s, "GET", "/v1/topics/bad%20name", token=k))[0] == 422


async def test_a_person_follows_and_leaves_self_service_topics_only_for_themselves(
        tmp_path: Path) -> None:
    async with events_stack(tmp_path) as (s, fanout):
        k = await key(s)
        await call(s, "PUT", "/v1/topics/open", {"self_service": True}, k)
        await call(s, "PUT", "/v1/topics/closed", {}, k)
        r = await s.client.post("/v1/users/ada/tokens", headers={
            "Authorization": f"Bearer {s.key}"}, json={"ttl_sec": 600})
        ada = (await r.json())["token"]
        status, body = await call(s, "PUT", "/v1/users/ada/topics/open", token=ada)
        assert status == 200 and (body["following"], body["changed"], body["version"]) == (
            True, True, 1)
        status, body = await call(s, "PUT", "/v1/users/ada/topics/open", token=ada)
        assert (body["changed"], body["version"]) == (False, 1)
        status, body = await call(s, "PUT", "/v1/users/bo/topics/open", token=ada)
        assert status == 403 and body["error"]["code"] == "wrong_user"
        status, body = await call(s, "PUT", "/v1/users/ada/topics/closed", token=ada)
        assert status == 403 and body["error"]["code"] == "not_self_service"
        assert (await call(s, "PUT", "/v1/users/ada/topics/nope", token=ada))[0] == 404
        # The producer may put anyone in any topic; the person then cannot leave it alone.
        assert (await call(s, "PUT", "/v1/users/ada/topics/closed", token=k))[0] == 200
        assert (await call(s, "DELETE", "/v1/users/ada/topics/closed", token=ada))[0] == 403
        status, body = await call(s, "GET", "/v1/users/ada/topics", token=ada)
        assert [(t["topic"], t["self_service"]) for t in body["topics"]] == [
            ("closed", False), ("open", True)]
        assert (await call(s, "GET", "/v1/users/bo/topics", token=ada))[0] == 403
        status, body = await call(s, "DELETE", "/v1/users/ada/topics/open", token=ada)
        assert status == 200 and (body["following"], body["changed"]) == (False, True)
        assert (await call(s, "POST", "/v1/events", news(audience={"topic": "open"}), k))[0] \
            == 202
        assert await fanout.run_once() == 0  # nobody follows it now
        assert (await call(s, "GET", "/v1/users/ada/topics", token=s.key))[0] == 403


async def test_the_fan_out_loop_starts_when_an_event_is_accepted(tmp_path: Path) -> None:
    async with events_stack(tmp_path) as (s, fanout):
        k = await key(s)
        await s.user("ada", email=ADDRESS)
        stop = asyncio.Event()
        running = asyncio.create_task(fanout.run(stop))
        try:
            status, _ = await call(s, "POST", "/v1/events", news(
                audience={"user_ids": ["ada", "bo", "cy"]}), k)
            assert status == 202
            async with asyncio.timeout(30):
                while (e := await s.e.store.get_event("default", "c-1")) is None or \
                        e.routed_at is None:
                    await asyncio.sleep(0.01)
            assert e.routed == 3
        finally:
            stop.set()
            await running


async def test_a_page_of_the_tenants_origin_may_follow_and_leave_a_topic(tmp_path: Path) -> None:
    """The browser asks first (a preflight, no token) whether it may PUT and DELETE there."""
    async with events_stack(tmp_path) as (s, _):
        origin = {"Origin": "https://app.example.com"}
        r = await s.client.options("/v1/users/ada/topics/open", headers={
            **origin, "Access-Control-Request-Method": "DELETE"})
        assert r.status == 204
        assert "DELETE" in r.headers["Access-Control-Allow-Methods"].split(", ")
        assert r.headers["Access-Control-Allow-Origin"] == origin["Origin"]
        await call(s, "PUT", "/v1/topics/open", {"self_service": True}, await key(s))
        token = (await (await s.client.post("/v1/users/ada/tokens", headers={
            "Authorization": f"Bearer {s.key}"}, json={})).json())["token"]
        r = await s.client.put("/v1/users/ada/topics/open", headers={
            **origin, "Authorization": f"Bearer {token}"})
        assert r.status == 200 and r.headers["Access-Control-Allow-Origin"] == origin["Origin"]



async def test_a_small_event_is_not_held_behind_a_large_one(tmp_path: Path) -> None:
    """Events still routing take turns, a chunk each: the inbox items' seq, taken in commit
    order, shows the small event's one item written right after the large event's first chunk,
    not after all five."""
    async with events_stack(tmp_path) as (s, fanout):
        k = await key(s)
        large = [f"u{i:02}" for i in range(10)]
        await call(s, "POST", "/v1/events", news("large", {"user_ids": large}), k)
        await call(s, "POST", "/v1/events", news("small", {"user_ids": ["zz"]}), k)
        assert await fanout.run_once() == 11
        seq = {user: (await s.e.store.inbox_page("default", user, None, 1))[0].seq
               for user in [*large, "zz"]}
        assert sorted(seq, key=seq.__getitem__)[:4] == ["u00", "u01", "zz", "u02"]


async def test_metrics_say_what_is_routing_and_how_long_it_has_waited(tmp_path: Path) -> None:
    async with events_stack(tmp_path) as (s, _):
        health = Health(s.e.cfg, s.e.store, s.e.pool, s.e.scanner, s.e.clock)
        fanout = Fanout(s.e.cfg, s.e.store, s.e.ingest, s.e.clock, health.metrics)
        k = await key(s)
        await call(s, "POST", "/v1/events", news(audience={"user_ids": ["a", "b", "c"]}), k)
        s.e.clock.advance(7)
        text = (await health.scrape()).decode()
        assert "notifyd_events_routing 1.0" in text
        assert "notifyd_event_routing_lag_seconds 7.0" in text
        await fanout.run_once()
        text = (await health.scrape()).decode()
        assert "notifyd_events_routing 0.0" in text
        assert "notifyd_event_routing_lag_seconds 0.0" in text
        assert "notifyd_event_recipients_routed_total 3.0" in text


async def test_the_console_finds_an_event_and_draws_its_fan_out(tmp_path: Path) -> None:
    """An operator searches for an event id and reads its page; the overview's fan-out panel
    shows it while it routes."""
    from test_console import admin_key, session
    async with events_stack(tmp_path) as (s, fanout):
        k = await key(s)
        assert (await call(s, "POST", "/v1/events", news(audience={"user_ids": ["ada", "bo"]}),
                           k))[0] == 202
        cookie = await session(s, await admin_key(s))
        overview = await (await s.client.get("/console", headers=cookie)).text()
        assert "c-1" in overview and "0 of 2" in overview
        r = await s.client.get("/console/search", params={"q": "c-1"}, headers=cookie,
                               allow_redirects=False)
        assert r.headers["Location"] == "/console/events/c-1"
        await fanout.run_once()
        page = await (await s.client.get("/console/events/c-1", headers=cookie)).text()
        assert "2 of 2 recipients routed (routed)" in page
        assert "/console/people/ada" in page and "/console/people/bo" in page
        other = await s.client.get("/console/events/nope", headers=cookie)
        assert other.status == 404

