"""Accepts that share one group commit: each gets the answer and the rows it would get alone,
through the edge cases of a shared transaction: a dedup key taken before the batch, a key used
twice in one batch, different input on one key, and a failing op in the same batch."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from typing import Any

import pytest
from support import START_MS, holding_the_writer, query, queued

from notifyd.config import Config
from notifyd.core.clock import FakeClock
from notifyd.core.errors import DomainError
from notifyd.core.models import AcceptResult, ApiKey, Recipient
from notifyd.engine.ingest import Ingest
from notifyd.store.core.store import CoreStore

KEY = ApiKey("test", "acme", (), "hash")


@pytest.fixture
def ingest(cfg: Config, store: CoreStore) -> Ingest:
    return Ingest(cfg, store, FakeClock(START_MS))


def post(ingest: Ingest, user: str, dedup_key: str | None, **params: Any) -> Any:
    body = {"user_id": user, "kind": "alert", "params": params}
    if dedup_key is not None:
        body["dedup_key"] = dedup_key
    return ingest.accept(ingest.parse(json.dumps(body).encode(), KEY, None))


def steps(db_path: Any, nid: str) -> list[tuple[Any, ...]]:
    return query(db_path, "SELECT step_no, channel, lane, send_after, state, reason, note "
                 "FROM steps WHERE notification_id = ? ORDER BY step_no", nid)


async def in_one_batch(store: CoreStore, *calls: Any) -> list[Any]:
    """Run `calls` as one group commit, whatever the machine's load: the writer is held by a
    write of its own until every call's write waits in its queue, then they go together."""
    async with holding_the_writer(store) as release:
        tasks = [asyncio.ensure_future(c) for c in calls]
        await queued(store, len(calls))  # each call parses, then queues its write
        before = store.backend.commits
        release()
    results = await asyncio.gather(*tasks, return_exceptions=True)
    assert store.backend.commits - before == 2, "precondition: the blocker, then one batch"
    return results


async def test_a_batch_writes_the_rows_an_accept_alone_writes(
        ingest: Ingest, store: CoreStore, db_path: Any) -> None:
    alone = await post(ingest, "u1", "alone")  # a batch of one
    many = await in_one_batch(store, *(post(ingest, f"u{1 + i % 2}", f"k{i}", n=i)
                                       for i in range(40)))
    assert all(isinstance(r, AcceptResult) and r.created for r in many)
    assert len({r.notification_id for r in many}) == 40
    assert many[0].state == alone.state and many[0].first_due == alone.first_due
    for r in many:
        assert steps(db_path, r.notification_id) == steps(db_path, alone.notification_id)
    assert query(db_path, "SELECT params FROM notifications WHERE id = ?",
                 many[7].notification_id) == [('{"n":7}',)]


async def test_one_key_twice_in_a_batch_makes_one_notification(
        ingest: Ingest, store: CoreStore, db_path: Any) -> None:
    a, b, other = await in_one_batch(store, post(ingest, "u1", "twice"),
                                     post(ingest, "u1", "twice"), post(ingest, "u1", "other"))
    assert a.notification_id == b.notification_id
    assert sorted([a.created, b.created]) == [False, True]
    assert other.created
    assert query(db_path, "SELECT count(*) FROM notifications WHERE dedup_key = 'twice'") == [(1,)]
    assert len(steps(db_path, a.notification_id)) == 3
    assert query(db_path, "SELECT count(*) FROM steps s WHERE NOT EXISTS (SELECT 1 FROM "
                 "notifications n WHERE n.id = s.notification_id)") == [(0,)]


async def test_a_retry_in_a_batch_of_new_accepts_gets_the_first_id(
        ingest: Ingest, store: CoreStore, db_path: Any) -> None:
    first = await post(ingest, "u1", "retried")
    results = await in_one_batch(store, post(ingest, "u1", "new-1"), post(ingest, "u1", "retried"),
                                 post(ingest, "u1", "new-2"))
    assert [r.created for r in results] == [True, False, True]
    assert results[1].notification_id == first.notification_id
    assert results[1].state == first.state
    for r in results:
        assert len(steps(db_path, r.notification_id)) == 3


async def test_different_input_on_a_taken_key_is_a_conflict_in_a_batch(
        ingest: Ingest, store: CoreStore, db_path: Any) -> None:
    first = await post(ingest, "u1", "key", amount=1)
    fine, clash = await in_one_batch(store, post(ingest, "u1", "fine"),
                                     post(ingest, "u1", "key", amount=2))
    assert fine.created
    assert isinstance(clash, DomainError) and clash.code == "dedup_conflict"
    assert first.notification_id in clash.message
    assert query(db_path, "SELECT count(*) FROM notifications WHERE dedup_key = 'key'") == [(1,)]


async def test_accepts_without_a_dedup_key_are_all_written(
        ingest: Ingest, store: CoreStore, db_path: Any) -> None:
    results = await in_one_batch(store, *(post(ingest, "u1", None) for _ in range(5)))
    assert all(r.created for r in results)
    assert query(db_path, "SELECT count(*) FROM notifications WHERE dedup_key IS NULL") == [(5,)]


async def test_a_failing_op_in_a_batch_of_accepts_fails_alone(
        ingest: Ingest, store: CoreStore, db_path: Any) -> None:

    def broken(c: sqlite3.Connection) -> None:
        raise ValueError("boom")

    results = await in_one_batch(store, post(ingest, "u1", "a"), store.backend.write(broken),
                                 post(ingest, "u1", "b"))
    assert isinstance(results[1], ValueError)
    assert results[0].created and results[2].created
    for r in (results[0], results[2]):
        assert len(steps(db_path, r.notification_id)) == 3


async def test_a_saved_profile_plans_the_next_accept(
        ingest: Ingest, store: CoreStore, db_path: Any) -> None:
    await store.put_recipient(Recipient("acme", "u1", "UTC", None, "14:00", "15:00"))
    moved = await post(ingest, "u1", "in-quiet-hours")
    first = steps(db_path, moved.notification_id)[0]
    assert first[3] == START_MS - START_MS % 3_600_000 + 3_600_000  # 15:00 UTC, the window's end
    assert first[6].startswith("quiet hours 14:00-15:00 UTC")
