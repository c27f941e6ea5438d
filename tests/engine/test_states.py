"""States say what happened, end to end through the HTTP API over the real engine and store: a
ladder the person's own choice stopped is `opted_out`, not a fault; a kind that always digests
answers `held`; `delivered_via` names only what a receipt proved (`sent_via` where it went); an
inbox item is marked read when its notification is resolved elsewhere, for a kind that asks.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from stack_support import Stack, stack

from notifyd.core.models import Evidence, Receipt, current_state
from notifyd.domain import policy

SETTINGS: dict[str, Any] = {
    "kinds": {
        "report": {"category": "reports", "transactional": False,
                   "ladder": [{"channel": "sms", "timeout_sec": 60}, {"channel": "email"}]},
        "news": {"category": "news", "transactional": False, "always_digest": True,
                 "digest": "news_digest", "ladder": [{"channel": "email"}]},
        "news_digest": {"category": "news", "transactional": False,
                        "schedule": "daily 09:00", "ladder": [{"channel": "email"}]},
        "ticket": {"inbox": True, "read_on_resolve": True, "stop": "delivered",
                   "ladder": [{"channel": "sms", "timeout_sec": 60}, {"channel": "email"}]},
        "plain": {"inbox": True, "ladder": [{"channel": "sms"}]},
    },
}


@asynccontextmanager
async def states(tmp_path: Path) -> AsyncIterator[Stack]:
    async with stack(tmp_path, SETTINGS) as s:
        await s.user("ada")
        yield s


def auth(s: Stack) -> dict[str, str]:
    return {"Authorization": f"Bearer {s.key}"}


async def post(s: Stack, kind: str, dedup: str = "d1") -> dict[str, Any]:
    r = await s.client.post("/v1/notifications", headers=auth(s), json={
        "user_id": "ada", "kind": kind, "params": {"what": "x"}, "dedup_key": dedup})
    assert r.status == 202, await r.text()
    return dict(await r.json())


async def badge(s: Stack) -> int:
    r = await s.client.get("/v1/users/ada/inbox/badge", headers=auth(s))
    return int((await r.json())["unread"])


@pytest.mark.parametrize(("steps", "chosen", "state"), [
    ([("sms", "suppressed"), ("email", "suppressed")], True, "opted_out"),
    ([("sms", "suppressed"), ("email", "suppressed")], False, "undeliverable"),
    ([("sms", "dead"), ("email", "suppressed")], True, "undeliverable"),  # a fault too
    ([("sms", "suppressed"), ("email", "expired")], True, "expired"),
    ([("sms", "suppressed"), ("email", "sent")], True, "sent"),
])
def test_a_ladder_the_persons_choice_stopped_is_opted_out_not_a_fault(
        steps: list[tuple[str, str]], chosen: bool, state: str) -> None:
    assert current_state(False, steps, chosen=chosen) == state


async def test_opting_out_of_every_medium_reads_opted_out(tmp_path: Path) -> None:
    async with states(tmp_path) as s:
        r = await s.client.put("/v1/users/ada/preferences", headers=auth(s), json={
            "categories": {"reports": {"sms": False, "email": False}}})
        assert r.status == 200
        nid = (await post(s, "report"))["notification_id"]
        await s.e.run_dry()
        doc = await s.status(nid)
        assert [st["status"] for st in doc["steps"]] == ["suppressed", "suppressed"]
        assert doc["current_state"] == "opted_out"
        r = await s.client.post("/v1/notifications", headers=auth(s), json={
            "user_id": "ada", "kind": "report", "params": {"what": "x"}, "dedup_key": "d1"})
        assert (r.status, (await r.json())["state"]) == (200, "opted_out")  # a retry says so


@pytest.mark.time_of_day
async def test_an_always_digest_kind_answers_held(tmp_path: Path) -> None:
    async with states(tmp_path) as s:
        accepted = await post(s, "news")
        assert (accepted["state"], accepted["created"]) == ("held", True)
        await s.e.run_dry()
        assert (await s.status(accepted["notification_id"]))["current_state"] == "held"
        assert (await post(s, "report", "d2"))["state"] == "sms_pending"  # others as before


async def test_delivered_via_names_only_what_a_receipt_proved(tmp_path: Path) -> None:
    async with states(tmp_path) as s:
        nid = (await post(s, "report"))["notification_id"]
        await s.e.run_dry()
        doc = await s.status(nid)
        assert (doc["current_state"], doc["delivered_via"], doc["sent_via"]) == (
            "email_pending", None, ["sms"])


async def test_resolving_a_read_on_resolve_kind_marks_its_inbox_item_read(
        tmp_path: Path) -> None:
    async with states(tmp_path) as s:
        ticket = (await post(s, "ticket"))["notification_id"]
        plain = (await post(s, "plain", "d2"))["notification_id"]
        assert await badge(s) == 2
        stream = s.ctx.hub.subscribe("default", "ada")
        assert stream is not None
        queue = stream.queue
        r = await s.client.post(f"/v1/notifications/{ticket}/resolve", headers=auth(s))
        assert r.status == 200
        r = await s.client.post(f"/v1/notifications/{plain}/resolve", headers=auth(s))
        assert r.status == 200
        assert await badge(s) == 1  # the plain kind's item is left for the person
        items = {i.notification_id: i for i in await s.e.store.inbox_page(
            "default", "ada", None, 10)}
        assert items[ticket].read_at is not None and items[plain].read_at is None
        events = [queue.get_nowait() for _ in range(queue.qsize())]
        assert [(e.name, e.data) for e in events] == [("read", {"id": ticket}),
                                                      ("badge", {"unread": 1})]


async def test_a_batch_resolution_and_a_delivery_receipt_mark_the_item_read_too(
        tmp_path: Path) -> None:
    async with states(tmp_path) as s:
        first = (await post(s, "ticket"))["notification_id"]
        second = (await post(s, "ticket", "d2"))["notification_id"]
        r = await s.client.post("/v1/resolutions/batch", headers=auth(s), json={
            "items": [{"user_id": "ada", "dedup_key": "d1"}]})
        assert [x["status"] for x in (await r.json())["results"]] == [200]
        assert await badge(s) == 1
        await s.e.run_dry()  # the second's SMS goes; its receipt proves delivery
        [recorded] = await s.e.store.record_receipts([Receipt(
            "delivery-receipt", "e1", Evidence.DELIVERED, None, key=f"{second}:0")],
            policy.rules(s.e.cfg.catalog))
        assert recorded == "applied"
        assert (await s.status(second))["resolution"]["resolution"] == "delivered"
        assert await badge(s) == 0
        assert all(i.read_at is not None for i in await s.e.store.inbox_page(
            "default", "ada", None, 10) if i.notification_id in (first, second))
