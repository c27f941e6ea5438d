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
from stack_support import stack

from notifyd.config import KindConfig, LadderStep
from notifyd.core.models import Route

MINUTE = 60_000  # ms
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


# --- the ladder during an outage ----------------------------------------------------------------

ESCALATING = KindConfig(ladder=(LadderStep("push", timeout_sec=120), LadderStep("sms")),
                        ttl_sec=86400)


async def _run_until(e: Engine, until_ms: int) -> None:
    """Scan whenever the scanner's alarm would ring, up to `until_ms`: the next due step on a
    lane that can take it, or a token for one that cannot (a breaker's cooldown included)."""
    for _ in range(100_000):
        ready = [Route(w.channel, w.lane) for w in e.pool.wants(e.now)]
        read = await e.store.due_times(ready, 1)
        due = min((times[0] for times in read.times.values() if times), default=None)
        refill = e.pool.ms_until_capacity(e.now)
        alarms = [at for at in (due, read.first_lease_end,
                                None if refill is None else e.now + refill) if at is not None]
        if not alarms or min(alarms) > until_ms:
            e.clock.ms = max(e.now, until_ms)
            return
        e.clock.ms = max(e.now, min(alarms))
        if not await e.cycle() and min(alarms) <= e.now:
            e.clock.ms += 1  # what is due could not go (a sibling in flight): look a moment on
    raise AssertionError("the engine kept scanning")


async def test_a_retrying_step_does_not_hold_the_next_past_its_window_and_a_resolution_ends_it(
        tmp_path: Path, prov: Provider) -> None:
    async with provider(answer(503, "down")) as push:
        channels = {"push": webhook(push.url, backoff_max_sec=300.0), "sms": webhook(prov.url)}
        async with engine(tmp_path, channels, {"k": ESCALATING}) as e:
            nid = await e.accept()
            start = e.now
            await _run_until(e, start + 2 * MINUTE - 1)
            s0, s1 = (await e.notification(nid))["steps"]
            assert s0["state"] == "pending" and s0["attempts"] > 3  # retrying, not dead
            assert (s1["state"], s1["send_after"]) == ("pending", start + 2 * MINUTE)
            assert prov.seen == []

            await _run_until(e, start + 3 * MINUTE)
            s0, s1 = (await e.notification(nid))["steps"]
            assert s1["state"] == "sent"  # on its window, a second at most behind a retry
            started = s1["attempt_log"][0]["started_at"]
            assert start + 120_000 <= started <= start + 121_000
            assert s0["state"] == "pending"  # the push step keeps trying
            tried = s0["attempts"]

            await _run_until(e, start + 30 * MINUTE)
            assert (await e.step(nid, 0))["attempts"] > tried
            calls = len(push.seen)
            result = await e.store.resolve(nid, "confirmed", "api")
            assert result is not None and result.cancelled_steps == 1
            await _run_until(e, start + 120 * MINUTE)
            s0 = await e.step(nid, 0)
            assert (s0["state"], s0["reason"]) == ("cancelled", "resolved: confirmed")
            assert len(push.seen) == calls  # no retry after the resolution
            assert set(push.keys_seen()) == {f"{nid}:0"} and prov.keys_seen() == [f"{nid}:1"]


async def test_a_kind_whose_push_provider_is_down_reaches_sms_on_time(
        tmp_path: Path, prov: Provider) -> None:
    async with provider(answer(503, "down")) as push:
        channels = {"push": webhook(push.url, **{**BREAKER, "rate_per_sec": 1000.0}),
                    "sms": webhook(prov.url)}
        async with engine(tmp_path, channels, {"k": ESCALATING}) as e:
            ids = await e.accept_many(6)
            start = e.now
            await _run_until(e, start + 5 * MINUTE)
            assert e.pool.channels["push"].breaker.state == "open"  # holding push steps
            for nid in ids:
                s0, s1 = (await e.notification(nid))["steps"]
                assert s0["state"] == "pending"
                assert s1["state"] == "sent"
                assert start + 120_000 <= s1["attempt_log"][0]["started_at"] <= start + 121_000


# --- a real SMTP relay, down and back -----------------------------------------------------------


async def test_an_email_posted_while_the_relay_is_down_is_sent_once_when_it_returns(
        tmp_path: Path) -> None:
    """The user's report: with the defaults, a relay refusing connections left the email dead
    4.4 s after accept. Now it waits, retrying, and goes once when the relay is back."""
    kinds = {"kinds": {"alert": {"ladder": [{"channel": "email"}]}}}
    async with stack(tmp_path, kinds) as s:
        await s.user("ada", email="ada@example.org")
        port = s.smtp.port
        await s.smtp.stop(keep_port=True)  # connection refused from here on, port kept
        posted = await s.client.post("/v1/notifications", json={
            "user_id": "ada", "kind": "alert", "params": {"what": "disk full"}},
            headers={"Authorization": f"Bearer {s.key}"})
        assert posted.status == 202, await posted.text()
        nid = (await posted.json())["notification_id"]
        start = s.e.now

        for attempt in range(1, 9):  # eight refused connections; five used to be the end
            assert await s.e.cycle() == 1
            step = await s.e.step(nid, 0)
            assert step["state"] == "pending", step
            assert step["reason"] == (f"connect failed: ConnectionRefusedError; retry "
                                      f"{attempt + 1}")
            s.e.clock.ms = step["send_after"]
        assert s.smtp.received == []
        assert s.e.now - start < 300_000  # minutes, well inside the day it may wait

        await s.smtp.start(port=port)  # the relay is back, where the channel expects it
        assert await s.e.cycle() == 1
        step = await s.e.step(nid, 0)
        assert (step["state"], step["attempts"]) == ("sent", 9)
        s.e.clock.advance(3600)
        await s.e.run_dry()
        assert len(s.smtp.received) == 1  # exactly one message
        [mail] = s.smtp.received
        assert mail.rcpt_tos == ["ada@example.org"] and b"disk full" in mail.data
        assert (await s.status(nid))["current_state"] == "sent"
