"""One tenant's batches cannot hold another tenant's accept behind them at the one writer: while
tenant A has its share of batch items in flight, A's next batch waits, and tenant B's accept,
arriving after it, commits before it (never in the same commit behind its items). Order only:
nothing here measures time."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from support import START_MS, holding_the_writer, queued

from notifyd.config import Config
from notifyd.core.clock import FakeClock
from notifyd.core.models import AcceptResult, ApiKey
from notifyd.engine.fair import Turns
from notifyd.engine.ingest import Ingest
from notifyd.store.core.store import CoreStore

A = ApiKey("a", "tenant-a", (), "hash-a")
B = ApiKey("b", "tenant-b", (), "hash-b")


@pytest.fixture
def ingest(cfg: Config, store: CoreStore) -> Ingest:
    return Ingest(cfg, store, FakeClock(START_MS), turns=Turns(items=2))


def item(ingest: Ingest, key: ApiKey, n: int) -> Any:
    body = {"user_id": f"u{n}", "kind": "alert", "params": {}, "dedup_key": f"{key.name}-{n}"}
    return ingest.parse(json.dumps(body).encode(), key, None)


async def test_another_tenants_accept_passes_a_batch_waiting_for_its_share(
        ingest: Ingest, store: CoreStore) -> None:
    finished: list[str] = []

    async def run(name: str, call: Any) -> Any:
        result = await call
        finished.append(name)
        return result

    async with holding_the_writer(store) as release:
        first = asyncio.ensure_future(run("a1", ingest.accept_many(
            [item(ingest, A, 1), item(ingest, A, 2)])))
        second = asyncio.ensure_future(run("a2", ingest.accept_many(
            [item(ingest, A, 3), item(ingest, A, 4)])))
        single = asyncio.ensure_future(run("b", ingest.accept(item(ingest, B, 1))))
        await queued(store, 2)  # A's first batch and B's accept; A's second waits its turn
        assert ingest.turns.in_flight("tenant-a") == 2
        release()
    results = await asyncio.gather(first, second, single)
    assert finished.index("b") < finished.index("a2")
    assert all(isinstance(r, AcceptResult) and r.created for r in [*results[0], *results[1]])
    assert ingest.turns.in_flight("tenant-a") == 0


async def test_a_batch_waits_only_for_writes_admitted_before_it() -> None:
    turns, order = Turns(items=10), []
    first, second = asyncio.Event(), asyncio.Event()

    async def single(tenant: str, name: str, gate: asyncio.Event) -> None:
        ticket = turns.enter(tenant)  # as Ingest.accept admits one
        try:
            await gate.wait()
            order.append(name)
        finally:
            turns.leave(ticket)

    async def batch(tenant: str, name: str) -> None:
        async with turns.batch(tenant, 5):
            order.append(name)

    early = asyncio.ensure_future(single("b", "b-early", first))
    await asyncio.sleep(0)  # b's write is admitted
    big = asyncio.ensure_future(batch("a", "a-batch"))
    await asyncio.sleep(0)
    late = asyncio.ensure_future(single("b", "b-late", second))
    for _ in range(5):
        await asyncio.sleep(0)
    assert order == []  # a's batch waits for b's earlier write
    first.set()
    await big  # and not for b's later one, still open
    assert order == ["b-early", "a-batch"]
    second.set()
    await asyncio.gather(early, late)


async def test_a_batch_bigger_than_the_share_goes_alone() -> None:
    turns = Turns(items=2)
    async with turns.batch("a", 5):
        assert turns.in_flight("a") == 5
        waiting = asyncio.ensure_future(turns.batch("a", 1).__aenter__())
        for _ in range(3):
            await asyncio.sleep(0)
        assert not waiting.done()
        assert turns.in_flight("b") == 0  # another tenant's share is its own
    await waiting
    assert turns.in_flight("a") == 1
