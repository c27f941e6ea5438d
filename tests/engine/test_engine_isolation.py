"""Lanes: with 10,000 bulk steps queued on a channel, an urgent step on it goes out in the very next
due scan, ahead of the backlog, whether the bulk lane is saturated or idle.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from aiohttp import web
from engine_support import Provider, Seen, accepted, engine, hold, provider, webhook

from notifyd.config import KindConfig, LadderStep, ScannerConfig

BULK = 3_000  # a backlog of twelve claim batches (claim_batch = 256 below)
BULK_CONCURRENCY = 4


@pytest.fixture
async def prov() -> AsyncIterator[Provider]:
    async with provider() as p:
        yield p


KINDS = {"digest": KindConfig(ladder=(LadderStep("hook"),)),
         "otp": KindConfig(ladder=(LadderStep("hook"),), urgency="urgent")}


async def test_an_urgent_step_is_sent_in_the_next_scan_despite_a_bulk_backlog(
        tmp_path: Path, prov: Provider) -> None:
    # The held bulk calls must outlast what the test does while they are held: they time out
    # past timeout_sec.
    channel = webhook(prov.url, bulk_concurrency=BULK_CONCURRENCY, urgent_concurrency=4,
                      timeout_sec=40.0)
    async with engine(tmp_path, {"hook": channel}, KINDS,
                      scanner=ScannerConfig(claim_batch=256)) as e:
        await e.accept_many(BULK, kind="digest")
        # every digest is bulk by its kind: a sample says so without reading them all
        # (each read a snapshot, over the network on PostgreSQL: 30 s of the suite)
        sample = e.ids[::BULK // 20] + e.ids[-1:]
        lanes = {s.lane for nid in sample for s in (await e.record(nid)).steps}
        assert lanes == {"bulk"} and len(e.ids) == BULK

        # the bulk lane saturated: its calls are out and held, the backlog waits behind them
        gate = prov.gate()
        held = hold(gate, accepted())
        urgent: set[str] = set()

        async def reply(seen: Seen) -> web.StreamResponse | None:
            return await (accepted() if seen.key in urgent else held)(seen)

        prov.reply = reply
        assert await e.tick() == BULK_CONCURRENCY
        assert await e.tick() == 0
        otp = await e.accept("otp")
        urgent.add(f"{otp}:0")
        assert (await e.step(otp, 0))["lane"] == "urgent"
        bulk_calls = set(e.pool.tasks)
        assert await e.tick() == 1  # the very next scan takes the urgent step
        [urgent_call] = e.pool.tasks - bulk_calls
        assert len((await e.step(otp, 0))["attempt_log"]) == 1  # claimed in that scan
        await asyncio.wait_for(urgent_call, 30)  # and it completes while the bulk calls are held
        assert (await e.step(otp, 0))["state"] == "sent"
        assert (await e.state_counts())["sending"] == BULK_CONCURRENCY  # bulk calls still held
        assert prov.keys_seen()[-1] == f"{otp}:0"
        gate.set()
        await e.settle()

        # the bulk lane idle again: urgent and bulk due together, one scan takes both lanes
        prov.reply = accepted()
        otp2 = await e.accept("otp")
        seen_before = len(prov.seen)
        assert await e.tick() == 1 + BULK_CONCURRENCY
        assert len((await e.step(otp2, 0))["attempt_log"]) == 1
        await e.settle()
        assert (await e.step(otp2, 0))["state"] == "sent"
        assert f"{otp2}:0" in [s.key for s in prov.seen[seen_before:]]
        counts = await e.state_counts()
        assert counts == {"sent": 2 + 2 * BULK_CONCURRENCY, "pending": BULK - 2 * BULK_CONCURRENCY}
