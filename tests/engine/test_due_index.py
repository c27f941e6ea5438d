"""The scanner's due index (engine/dueindex.py): it claims on the lanes the commits told it of, at
the times they told, and only ever says when to look: the claim decides from the rows."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from aiohttp import web
from engine_support import KEY, Provider, Seen, answer, engine, hold, provider, webhook

from notifyd.config import KindConfig, LadderStep, ScannerConfig
from notifyd.engine.dueindex import EVERY, DueIndex
from notifyd.engine.ingest import Ingest
from notifyd.store import open_store

ONE_STEP = {"k": KindConfig(ladder=(LadderStep("hook"),))}
ROUTE = ("hook", "bulk")
SCANNER = ScannerConfig(poll_interval_sec=60, lease_sec=30)


@pytest.fixture
async def prov() -> AsyncIterator[Provider]:
    async with provider() as p:
        yield p


async def test_a_step_moved_by_a_retry_is_claimed_at_its_new_time_and_not_before(
        tmp_path: Path, prov: Provider) -> None:
    replies = iter([answer(503, "busy"), answer(202)])

    async def reply(seen: Seen) -> web.StreamResponse | None:
        return await next(replies)(seen)

    prov.reply = reply
    async with engine(tmp_path, {"hook": webhook(prov.url)}, ONE_STEP, scanner=SCANNER) as e:
        index = e.scanner.wakeups.index
        nid = await e.accept()
        assert index.first(ROUTE) == e.now  # told by the accept's commit
        await e.scanner.claim_indexed(e.now)
        await e.settle()
        retry_at = (await e.step(nid, 0))["send_after"]
        assert (await e.step(nid, 0))["state"] == "pending" and retry_at > e.now
        await e.scanner.claim_indexed(e.now)  # what is due now: nothing of this step
        assert index.first(ROUTE) == retry_at and index.first(EVERY) is None
        await e.scanner.claim_indexed(retry_at - 1)
        await e.settle()
        assert len(prov.seen) == 1
        e.clock.ms = retry_at
        await e.scanner.claim_indexed(retry_at)
        await e.settle()
        assert (await e.step(nid, 0))["state"] == "sent" and len(prov.seen) == 2
        assert index.first(ROUTE) is None


async def test_the_index_read_again_after_a_restart_finds_a_lapsed_lease(
        tmp_path: Path, prov: Provider) -> None:
    gate = prov.gate()
    prov.reply = hold(gate, answer(202))
    async with engine(tmp_path, {"hook": webhook(prov.url, timeout_sec=5)}, ONE_STEP,
                      scanner=SCANNER) as e:
        nid = await e.accept()
        assert await e.tick() == 1  # in flight, and never answered before the lease ends
        lease_end = e.now + e.scanner.lease_ms
        e.scanner.wakeups.index = index = DueIndex()  # what a restarted process knows: nothing
        await e.scanner.rebuild(e.now)
        await e.scanner.claim_indexed(e.now)  # the read's own look at every lane: nothing due
        assert index.first(EVERY) == lease_end and index.first(ROUTE) is None
        e.clock.ms = lease_end
        await e.scanner.claim_indexed(lease_end)  # lapsed, then claimed again in one write
        step = await e.step(nid, 0)
        assert (step["state"], step["attempts"]) == ("sending", 2)
        gate.set()
        await e.settle()


async def test_a_step_the_index_holds_is_judged_by_the_claim_a_resolution_cancels_it(
        tmp_path: Path, prov: Provider) -> None:
    kinds = {"k": KindConfig(ladder=(LadderStep("hook"), LadderStep("hook", after_sec=60)))}
    async with engine(tmp_path, {"hook": webhook(prov.url)}, kinds, scanner=SCANNER) as e:
        index = e.scanner.wakeups.index
        nid = await e.accept()
        await e.scanner.claim_indexed(e.now)
        await e.settle()
        later = (await e.step(nid, 1))["send_after"]
        assert index.first(ROUTE) == later
        await e.store.resolve(nid, "done", "test")
        e.clock.ms = later
        await e.scanner.claim_indexed(later)
        await e.settle()
        assert [s.key for s in prov.seen] == [f"{nid}:0"]
        assert (await e.step(nid, 1))["state"] == "cancelled"
        assert index.first(ROUTE) is None


async def test_another_processs_accept_is_claimed_on_its_signal(
        tmp_path: Path, prov: Provider) -> None:
    """On a shared database the index hears nothing of another process's commits but its
    signal (store.watch): that claims every lane."""
    async with engine(tmp_path, {"hook": webhook(prov.url)}, ONE_STEP, scanner=SCANNER) as e:
        if not e.store.shared:
            pytest.skip("one process per database: no other process to hear")
        stop = asyncio.Event()
        wakeups = e.scanner.wakeups
        watching = asyncio.create_task(e.store.watch(wakeups.signal, lambda t, u: None, stop))
        other = await open_store(e.url, e.clock)
        try:
            await asyncio.sleep(0.2)  # LISTEN is in place
            body = json.dumps({"user_id": "u1", "kind": "k", "params": {}}).encode()
            theirs = Ingest(e.cfg, other, e.clock)
            result = await theirs.accept(theirs.parse(body, KEY, None))
            async with asyncio.timeout(5):
                while wakeups.index.first(EVERY) is None:
                    await asyncio.sleep(0.01)
            assert wakeups.index.first(ROUTE) is None  # the commit was not ours
            assert await e.scanner.claim_indexed(e.now) is False
            await e.settle()
            assert [s.key for s in prov.seen] == [f"{result.notification_id}:0"]
        finally:
            stop.set()
            await asyncio.wait_for(watching, 5)
            await other.close()
