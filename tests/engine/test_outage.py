"""A provider down for a while, with the defaults a user gets: steps retry until their deadline
and go when it returns; the ladder still escalates on its windows; a resolution stops the
retries; an open breaker holds steps without spending their attempts and, once a probe closes
it, lets them go in due order at the channel's rate; an SMTP relay that refuses connections for
a while gets exactly one message when it is back.

The engine is the real Scanner/SenderPool/CoreStore on a file in tmp_path; time is a FakeClock and
the engine moves only when a test calls `tick()` / `settle()`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from engine_support import (
    Engine,
    Provider,
    accepted,
    answer,
    engine,
    hold,
    provider,
    webhook,
)

from notifyd.config import KindConfig, LadderStep

MINUTE = 60
ONE_STEP = KindConfig(ladder=(LadderStep("hook"),))
# A breaker that opens after four calls of which half failed; the bucket refills 10 a second.
BREAKER = {"breaker_min_calls": 4, "breaker_error_rate": 0.5, "breaker_window_sec": 30.0,
           "breaker_cooldown_sec": 30.0, "rate_per_sec": 10.0, "burst": 100,
           "backoff_max_sec": 300.0}


@pytest.fixture
async def prov() -> AsyncIterator[Provider]:
    async with provider() as p:
        yield p


async def _retry(e: Engine, nid: str, no: int = 0) -> int:
    """Move the clock to the step's retry time and run one scan; how many it claimed."""
    s = await e.step(nid, no)
    assert s["state"] == "pending", s
    e.clock.ms = max(e.now, s["send_after"])
    return await e.cycle()


# --- the breaker ------------------------------------------------------------------------------


async def test_an_open_breaker_holds_steps_without_spending_their_attempts(
        tmp_path: Path, prov: Provider) -> None:
    prov.reply = answer(503, "down")
    channel = webhook(prov.url, **{**BREAKER, "max_attempts": 2})
    async with engine(tmp_path, {"hook": channel}, {"k": ONE_STEP}) as e:
        breaker = e.pool.channels["hook"].breaker
        first = await e.accept_many(4)
        assert await e.cycle() == 4
        assert breaker.state == "open"
        held = [await e.accept() for _ in range(5)]
        for _ in range(5):  # 25 s of scans while it cools down: every step is due, none goes
            e.clock.advance(5)
            assert await e.cycle() == 0
        assert len(prov.seen) == 4
        for nid in held:
            s = await e.step(nid, 0)
            assert (s["state"], s["attempts"], s["attempt_log"]) == ("pending", 0, [])
        for nid in first:  # one attempt each, the one that failed; the count cap is not reached
            s = await e.step(nid, 0)
            assert (s["state"], s["attempts"]) == ("pending", 1)

        prov.reply = accepted()
        e.clock.advance(5)  # the cooldown is over: one probe, then the rest at the rate
        await e.cycle()
        assert breaker.state == "closed"
        for _ in range(20):
            e.clock.advance(1)
            await e.cycle()
        assert await e.state_counts() == {"sent": 9}
        # a held step's first call was its first attempt: waiting spent nothing
        assert {(await e.step(nid, 0))["attempts"] for nid in held} == {1}


async def test_a_closing_breaker_releases_held_steps_in_due_order_at_the_channels_rate(
        tmp_path: Path, prov: Provider) -> None:
    prov.reply = answer(503, "down")
    async with engine(tmp_path, {"hook": webhook(prov.url, **BREAKER)}, {"k": ONE_STEP}) as e:
        breaker = e.pool.channels["hook"].breaker
        await e.accept_many(4)
        assert await e.cycle() == 4
        assert breaker.state == "open"
        opened = e.now
        for _ in range(40):  # steps keep coming while it is open, each due a moment later
            e.clock.advance(0.5)
            await e.accept()
        assert await e.cycle() == 0
        due = sorted([(s.send_after, f"{nid}:0") for nid in e.ids
                      for s in (await e.record(nid)).steps if s.state == "pending"])
        assert len(due) == 44

        e.clock.ms = opened + 30_000  # the cooldown is over; the bucket has filled meanwhile
        assert e.pool.channels["hook"].bucket.available(e.now) == 100
        gate = prov.gate()
        prov.reply = hold(gate, accepted())
        assert await e.tick() == 1  # the probe
        gate.set()
        await e.settle()
        assert breaker.state == "closed"
        before = len(prov.seen)

        assert await e.cycle() == 0  # not a burst of 100: the bucket starts empty
        e.clock.advance(0.1)
        assert await e.cycle() == 1  # 10 a second
        e.clock.advance(1)
        assert await e.cycle() == 10
        e.clock.advance(2)
        assert await e.cycle() == 20
        e.clock.advance(2)
        assert await e.cycle() == 12  # the rest
        assert await e.state_counts() == {"sent": 44}
        # the probe and everything after it, in the order the steps fell due
        assert [s.key for s in prov.seen[before - 1:]] == [key for _, key in due]
