"""Promise 3: a step claimed after its notification's resolution commits is never sent; the only
window left is a provider call already in flight.

The race: 1,000 two-step ladders have sent step 0; the clock moves to step 1's due time; then due
scans and resolutions run interleaved on one event loop, in an order a seeded rng shuffles. Every
write takes a logical timestamp from one counter at the instant it is queued on the store's single
writer, and the writer runs operations in queue order, so `attempts.started_at` versus
`notifications.resolved_at` says which committed first. The provider, a real HTTP server, records
what reached it.
"""

from __future__ import annotations

import asyncio
import itertools
import random
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from engine_support import (
    FINAL_STATES,
    Engine,
    Provider,
    accepted,
    answer,
    engine,
    execute,
    hold,
    provider,
    two_step,
    webhook,
)

from notifyd.config import ScannerConfig
from notifyd.store.sql import RESOLVE

N = 1000
BATCH = 50  # claims per scan, so step 1's claims spread over about twenty scans
PASSES = N // BATCH + 4
WINDOW_SEC = 60


@pytest.fixture
async def prov() -> AsyncIterator[Provider]:
    async with provider() as p:
        yield p


async def _yields(n: int) -> None:
    for _ in range(n):
        await asyncio.sleep(0)


async def _resolve_without_sweep(e: Engine, nid: str, now: int) -> None:
    """Only the resolution row, through the store's own writer: the sweep that cancels pending
    steps is lost, so the claim's own check is all that stands between the step and the wire."""
    await e.store.write(lambda c: c.execute(RESOLVE, (now, "done", "test", nid)))


async def _race(e: Engine, victims: list[str], rng: random.Random, sweep: bool) -> None:
    """Scans and resolutions interleaved. Each takes its timestamp in the same synchronous step in
    which it queues its write, so timestamp order is commit order."""
    ticks = itertools.count(e.now)
    started = [asyncio.Event() for _ in range(PASSES)]

    def stamp() -> int:
        e.clock.ms = next(ticks)
        return e.clock.ms

    async def resolver(nid: str, at_pass: int, pause: int) -> None:
        await started[at_pass].wait()
        await _yields(pause)
        if sweep:
            await e.store.resolve(nid, "done", "test", stamp())
        else:
            await _resolve_without_sweep(e, nid, stamp())

    async def scanner() -> None:
        for i in range(PASSES):
            started[i].set()
            await _yields(rng.randrange(4))
            await e.tick(stamp())

    plan = [(nid, rng.randrange(PASSES), rng.randrange(4)) for nid in victims]
    await asyncio.gather(scanner(), *(resolver(*p) for p in plan))
    await e.settle()
    stamp()
    await e.run_dry()


@pytest.mark.parametrize(("seed", "share", "sweep"), [
    (1, 0.5, True), (2, 1.0, True), (3, 0.5, False), (4, 1.0, False), (5, 0.5, True)])
async def test_no_step_claimed_after_its_resolution_commits_reaches_the_provider(
        tmp_path: Path, prov: Provider, seed: int, share: float, sweep: bool) -> None:
    rng = random.Random(seed)
    channel = webhook(prov.url, bulk_concurrency=2 * N)
    async with engine(tmp_path, {"hook": channel}, {"k": two_step(window_sec=WINDOW_SEC)},
                      seed=seed, scanner=ScannerConfig(claim_batch=BATCH)) as e:
        ids = await e.accept_many(N)
        await e.run_dry()
        assert e.state_counts() == {"sent": N, "pending": N}
        e.clock.advance(WINDOW_SEC)  # every step 1 is due now
        victims = rng.sample(ids, int(N * share))
        await _race(e, victims, rng, sweep)

        reached = Counter(prov.keys_seen())
        rows = e.rows("""SELECT n.id, n.resolved_at, s.state, s.reason,
                (SELECT min(a.started_at) FROM attempts a
                 WHERE a.notification_id = n.id AND a.step_no = 1)
            FROM notifications n JOIN steps s ON s.notification_id = n.id AND s.step_no = 1""")
        assert len(rows) == N
        assert sum(1 for r in rows if r[1] is not None) == len(victims)
        late_claims, resolved_first, in_window = [], 0, 0
        for nid, resolved_at, state, reason, claimed_at in rows:
            key = f"{nid}:1"
            if resolved_at is not None and (claimed_at is None or claimed_at > resolved_at):
                resolved_first += 1
                if claimed_at is not None:
                    late_claims.append(nid)
                assert (state, reason) == ("cancelled", "resolved: done"), nid  # sweep or claim
                assert reached[key] == 0, f"{key} reached the provider after its resolution"
            else:  # still open, or claimed while open: the in-flight window
                in_window += resolved_at is not None
                assert state == "sent" and reached[key] == 1, (nid, state)
        assert late_claims == [], "steps claimed after their resolution committed"
        assert resolved_first > 0 and in_window > 0, "the rounds must interleave both ways"
        print(f"\nseed {seed} sweep={sweep}: {resolved_first} cancelled at or before claim, "
              f"{in_window} resolved while in flight (sent), {N - len(victims)} unresolved")

        assert {s: c for s, c in e.state_counts().items() if s not in FINAL_STATES} == {}
        assert e.rows("SELECT count(*) FROM steps WHERE state != 'sent' AND reason IS NULL") == [(0,)]
        assert all(reached[f"{nid}:0"] == 1 for nid in ids)
        assert sum(reached.values()) == N + sum(1 for r in rows if r[2] == "sent")


async def test_a_resolution_written_without_the_sweep_is_still_caught_at_claim(
        tmp_path: Path, prov: Provider) -> None:
    async with engine(tmp_path, {"hook": webhook(prov.url)}, {"k": two_step()}) as e:
        nid = await e.accept()
        await e.run_dry()
        # another writer resolved it and its cancellation sweep was lost
        assert execute(e.db, "UPDATE notifications SET resolved_at = ?, resolution = 'confirmed' "
                             "WHERE id = ?", e.now, nid) == 1
        e.clock.advance(WINDOW_SEC)
        assert await e.cycle() == 0
        s1 = await e.step(nid, 1)
        assert (s1["state"], s1["reason"], s1["attempt_log"]) == (
            "cancelled", "resolved: confirmed", [])
        assert prov.keys_seen() == [f"{nid}:0"]


async def test_resolve_then_scan_cancels_with_the_resolution_as_reason(
        tmp_path: Path, prov: Provider) -> None:
    async with engine(tmp_path, {"hook": webhook(prov.url)}, {"k": two_step()}) as e:
        nid = await e.accept()
        r = await e.store.resolve(nid, "confirmed", "test", e.now)
        assert r is not None and r.changed and r.cancelled_steps == 2
        assert await e.cycle() == 0
        e.clock.advance(WINDOW_SEC)
        assert await e.cycle() == 0
        steps = (await e.notification(nid))["steps"]
        assert [(s["state"], s["reason"]) for s in steps] == [("cancelled", "resolved: confirmed")] * 2
        assert prov.seen == []


async def test_a_resolution_during_the_call_lets_that_call_finish_and_stops_the_rest(
        tmp_path: Path, prov: Provider) -> None:
    gate = prov.gate()
    prov.reply = hold(gate, accepted())
    async with engine(tmp_path, {"hook": webhook(prov.url)}, {"k": two_step()}) as e:
        nid = await e.accept()
        assert await e.tick() == 1
        await prov.next_request()
        r = await e.store.resolve(nid, "done", "test", e.now)
        assert r is not None and r.cancelled_steps == 1  # step 1; step 0 is on the wire
        gate.set()
        await e.settle()
        e.clock.advance(WINDOW_SEC)
        assert await e.cycle() == 0
        steps = (await e.notification(nid))["steps"]
        assert [s["state"] for s in steps] == ["sent", "cancelled"]
        assert prov.keys_seen() == [f"{nid}:0"]


async def test_a_failure_answered_after_the_resolution_is_not_retried(
        tmp_path: Path, prov: Provider) -> None:
    gate = prov.gate()
    prov.reply = hold(gate, answer(503, "busy"))
    async with engine(tmp_path, {"hook": webhook(prov.url)}, {"k": two_step()}) as e:
        nid = await e.accept()
        assert await e.tick() == 1
        await prov.next_request()
        await e.store.resolve(nid, "done", "test", e.now)
        gate.set()
        await e.settle()
        s0 = await e.step(nid, 0)
        assert s0["state"] == "pending"  # the completion records the failure and its retry time
        e.clock.ms = s0["send_after"]
        assert await e.cycle() == 0  # ... and the claim discards the retry
        s0 = await e.step(nid, 0)
        assert (s0["state"], s0["reason"]) == ("cancelled", "resolved: done")
        assert prov.keys_seen() == [f"{nid}:0"]
