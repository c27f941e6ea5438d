"""Promise 3: a step claimed after its notification's resolution commits is never sent; the only
window left is a provider call already in flight. And promise 9: the times the rows record agree
with the order their transactions committed in.

The race: 1,000 two-step ladders have sent step 0; the clock moves to step 1's due time; then due
scans and resolutions (by id, or by user and dedup key, which reads before it writes) run
interleaved on one event loop, in an order a seeded rng shuffles. The clock moves one millisecond
at every read, so no two transactions record the same time, and each records the time it read
inside itself: `attempts.started_at` against `notifications.resolved_at` says which committed
first. The provider, a real HTTP server, records what reached it.
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
    hold,
    provider,
    two_step,
    webhook,
)

from notifyd.config import ScannerConfig
from notifyd.core.clock import FakeClock
from notifyd.engine import resolution

N = 1000
BATCH = 50  # claims per scan, so step 1's claims spread over about twenty scans
PASSES = N // BATCH + 4
WINDOW_SEC = 60


class Ticking(FakeClock):
    """A clock that moves one millisecond at every read (from any thread: next() on a count is
    one step under the GIL), so every transaction records a time of its own."""

    def __init__(self) -> None:
        super().__init__()
        self._ticks = itertools.count(self.ms)

    def now_ms(self) -> int:
        self.ms = next(self._ticks)
        return self.ms

    def advance(self, seconds: float) -> None:
        self._ticks = itertools.count(self.ms + int(seconds * 1000))


@pytest.fixture
async def prov() -> AsyncIterator[Provider]:
    async with provider() as p:
        yield p


async def _yields(n: int) -> None:
    for _ in range(n):
        await asyncio.sleep(0)


async def _race(e: Engine, victims: list[str], rng: random.Random, how: str) -> None:
    """Scans and resolutions interleaved: by id, by user and dedup key, or the resolution row
    alone, written through the store's own writer with the sweep that cancels pending steps
    lost, so that the claim's own check is all that stands between the step and the wire."""
    started = [asyncio.Event() for _ in range(PASSES)]
    refs = {nid: await e.record(nid) for nid in victims}

    async def resolver(nid: str, at_pass: int, pause: int) -> None:
        await started[at_pass].wait()
        await _yields(pause)
        if how == "id":
            await e.store.resolve(nid, "done", "test")
        elif how == "key":
            n = refs[nid]
            ref = resolution.Ref(user_id=n.user_id, dedup_key=n.dedup_key)
            assert await resolution.resolve(e.store, ref, "done", "test", "default")
        else:
            await e.store.backend.write(lambda tx: tx.run(tx.q.RESOLVE, (
                tx.now, "done", "test", nid)))

    async def scanner() -> None:
        for i in range(PASSES):
            started[i].set()
            await _yields(rng.randrange(4))
            await e.tick()

    plan = [(nid, rng.randrange(PASSES), rng.randrange(4)) for nid in victims]
    await asyncio.gather(scanner(), *(resolver(*p) for p in plan))
    await e.settle()
    await e.run_dry()


@pytest.mark.parametrize(("seed", "share", "how"), [
    (1, 0.5, "id"), (2, 1.0, "id"), (3, 0.5, "row"), (4, 1.0, "row"), (5, 0.5, "key"),
    (6, 1.0, "key")])
async def test_no_step_claimed_after_its_resolution_commits_reaches_the_provider(
        tmp_path: Path, prov: Provider, seed: int, share: float, how: str) -> None:
    rng = random.Random(seed)
    channel = webhook(prov.url, bulk_concurrency=2 * N)
    async with engine(tmp_path, {"hook": channel}, {"k": two_step(window_sec=WINDOW_SEC)},
                      seed=seed, scanner=ScannerConfig(claim_batch=BATCH),
                      clock=Ticking()) as e:
        ids = await e.accept_many(N, keyed=True)
        await e.run_dry()
        assert await e.state_counts() == {"sent": N, "pending": N}
        e.clock.advance(WINDOW_SEC)  # every step 1 is due now
        victims = rng.sample(ids, int(N * share))
        await _race(e, victims, rng, how)

        reached = Counter(prov.keys_seen())
        records = [await e.record(nid) for nid in ids]
        assert sum(1 for n in records if n.resolved_at is not None) == len(victims)
        late_claims, resolved_first, in_window = [], 0, 0
        for n in records:
            s1, key = n.steps[1], f"{n.id}:1"
            claimed_at = s1.attempt_log[0].started_at if s1.attempt_log else None
            assert n.resolved_at is None or claimed_at != n.resolved_at, "a shared time"
            if n.resolved_at is not None and (claimed_at is None or claimed_at > n.resolved_at):
                resolved_first += 1
                if claimed_at is not None:
                    late_claims.append(n.id)
                assert (s1.state, s1.reason) == ("cancelled", "resolved: done"), n.id
                assert reached[key] == 0, f"{key} reached the provider after its resolution"
            else:  # still open, or claimed while open (before the resolution): in flight
                in_window += n.resolved_at is not None
                assert s1.state == "sent" and reached[key] == 1, (n.id, s1.state)
        assert late_claims == [], "steps claimed after their resolution committed"
        assert resolved_first > 0 and in_window > 0, "the rounds must interleave both ways"
        print(f"\nseed {seed} by {how}: {resolved_first} cancelled at or before claim, "
              f"{in_window} resolved while in flight (sent), {N - len(victims)} unresolved")

        assert {s: c for s, c in (await e.state_counts()).items() if s not in FINAL_STATES} == {}
        assert [s for n in records for s in n.steps if s.state != "sent" and s.reason is None] == []
        assert all(reached[f"{nid}:0"] == 1 for nid in ids)
        sent = sum(1 for n in records if n.steps[1].state == "sent")
        assert sum(reached.values()) == N + sent


async def test_a_resolution_written_without_the_sweep_is_still_caught_at_claim(
        tmp_path: Path, prov: Provider) -> None:
    async with engine(tmp_path, {"hook": webhook(prov.url)}, {"k": two_step()}) as e:
        nid = await e.accept()
        await e.run_dry()
        # another writer resolved it and its cancellation sweep was lost
        assert await e.store.backend.write(lambda tx: tx.run(tx.q.RESOLVE, (
            tx.now, "confirmed", "test", nid))) == 1
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
        r = await e.store.resolve(nid, "confirmed", "test")
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
        r = await e.store.resolve(nid, "done", "test")
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
        await e.store.resolve(nid, "done", "test")
        gate.set()
        await e.settle()
        s0 = await e.step(nid, 0)
        assert s0["state"] == "pending"  # the completion records the failure and its retry time
        e.clock.ms = s0["send_after"]
        assert await e.cycle() == 0  # ... and the claim discards the retry
        s0 = await e.step(nid, 0)
        assert (s0["state"], s0["reason"]) == ("cancelled", "resolved: done")
        assert prov.keys_seen() == [f"{nid}:0"]
