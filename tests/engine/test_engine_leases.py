"""Leases and claim tokens: a stale sender never overwrites newer evidence, a lapsed lease (also one
left by a process that died) becomes unknown and is resent under the same key and bytes, at most one
attempt per notification is active, and a step past its time to live ends expired.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from aiohttp import web
from engine_support import (
    Provider,
    Seen,
    accepted,
    answer,
    body_of,
    engine,
    hold,
    provider,
    two_step,
    webhook,
)

from notifyd.core.clock import FakeClock
from notifyd.core.models import Completion, Lane, Leases, Route, StepState

LEASE_MS = 60_000  # ScannerConfig's default lease
HOUR = 3600  # a window long enough that step 1 stays out of the way


@pytest.fixture
async def prov() -> AsyncIterator[Provider]:
    async with provider() as p:
        yield p


async def test_a_stale_claim_cannot_overwrite_newer_state(tmp_path: Path, prov: Provider) -> None:
    gate = prov.gate()
    prov.reply = hold(gate, accepted())
    async with engine(tmp_path, {"hook": webhook(prov.url)}, {"k": two_step(window_sec=HOUR)}) as e:
        nid = await e.accept()
        [old] = await e.claim()  # a sender that took the step and went quiet
        assert old.key == f"{nid}:0"

        e.clock.advance(LEASE_MS / 1000 + 1)
        assert await e.tick() == 1  # the lapsed lease: unknown, then claimed with a new token
        s = await e.step(nid, 0)
        assert (s["state"], s["attempts"]) == ("sending", 2)
        assert s["claim_token"] != old.claim_token
        first = s["attempt_log"][0]
        assert (first["outcome"], first["reason"]) == (
            "unknown", "lease expired: the send may have reached the provider")

        late = Completion("rejected", StepState.REJECTED, reason="HTTP 400: stale",
                          disable_contact=True, pull_next=True)
        assert await e.store.complete(old, late, e.pool.rules) is False
        after = await e.step(nid, 0)
        assert (after["state"], after["claim_token"]) == ("sending", s["claim_token"])
        assert await e.suppressed() == []
        assert (await e.step(nid, 1))["note"] is None  # nothing pulled forward

        gate.set()
        await e.settle()
        s = await e.step(nid, 0)
        assert (s["state"], s["provider_ref"]) == ("sent", f"prov-{nid}:0")
        failed = Completion("failed", StepState.PENDING, reason="HTTP 500", retry_at=e.now + 5)
        assert await e.store.complete(old, failed, e.pool.rules) is False
        s = await e.step(nid, 0)
        assert (s["state"], s["provider_ref"], s["reason"]) == ("sent", f"prov-{nid}:0", None)
        # the stale sender's evidence is kept on its own attempt row, and only there
        assert [a["outcome"] for a in s["attempt_log"]] == ["failed", "sent"]


async def test_a_sender_outliving_its_lease_is_ignored_and_the_new_claim_wins(
        tmp_path: Path, prov: Provider) -> None:
    gates = [prov.gate(), prov.gate()]
    calls: list[Seen] = []

    async def reply(seen: Seen) -> web.StreamResponse | None:
        calls.append(seen)
        nth = len(calls)
        await gates[nth - 1].wait()
        return await (answer(500, "late failure") if nth == 1 else accepted())(seen)

    prov.reply = reply
    async with engine(tmp_path, {"hook": webhook(prov.url)}, {"k": two_step(window_sec=HOUR)}) as e:
        nid = await e.accept()
        assert await e.tick() == 1
        await prov.next_request()
        e.clock.advance(LEASE_MS / 1000 + 1)
        prov.arrived.clear()
        assert await e.tick() == 1  # taken over while the first call is still out
        await prov.next_request()
        gates[1].set()
        gates[0].set()
        await e.settle()
        s = await e.step(nid, 0)
        assert (s["state"], s["attempts"]) == ("sent", 2)
        assert [a["outcome"] for a in s["attempt_log"]] == ["failed", "sent"]
        assert prov.keys_seen() == [f"{nid}:0", f"{nid}:0"]
        assert set(prov.bodies_by_key()[f"{nid}:0"]) == {body_of(s["payload"])}


async def test_a_step_left_sending_at_start_up_waits_out_its_lease_then_is_resent(
        tmp_path: Path, prov: Provider) -> None:
    """The process that claimed it died, or another process is still sending it: the store
    cannot tell, so the step is taken over only when its lease has run out."""
    clock = FakeClock()
    channels, kinds = {"hook": webhook(prov.url)}, {"k": two_step()}
    async with engine(tmp_path, channels, kinds, clock=clock) as e:
        nid = await e.accept()
        [claim] = await e.claim()  # the process dies before the provider call returns
    clock.advance(5)
    async with engine(tmp_path, channels, kinds, clock=clock) as e:
        assert await e.store.lapse_leases() == 0
        assert await e.store.leased() == Leases(1, (await e.step(nid, 0))["lease_until"])
        assert await e.cycle() == 0  # still within its lease: left alone
        assert (await e.step(nid, 0))["state"] == "sending"

        e.clock.advance(LEASE_MS / 1000 - 5)
        assert await e.store.lapse_leases() == 1
        assert await e.store.lapse_leases() == 0
        s = await e.step(nid, 0)
        assert (s["state"], s["send_after"]) == ("unknown", e.now)
        assert s["reason"] == "lease expired: the send may have reached the provider"
        assert [(a["outcome"], a["ended_at"]) for a in s["attempt_log"]] == [("unknown", e.now)]

        assert await e.cycle() == 1
        s = await e.step(nid, 0)
        assert (s["state"], s["attempts"]) == ("sent", 2)
        assert prov.keys_seen() == [claim.key]
        assert prov.seen[0].body == body_of(claim.payload)  # frozen before the first call


async def test_the_scanner_loop_retries_a_lapsed_step_on_start(
        tmp_path: Path, prov: Provider) -> None:
    clock = FakeClock()
    channels, kinds = {"hook": webhook(prov.url)}, {"k": two_step()}
    async with engine(tmp_path, channels, kinds, clock=clock) as e:
        nid = await e.accept()
        [claim] = await e.claim()
    clock.advance(LEASE_MS / 1000)
    async with engine(tmp_path, channels, kinds, clock=clock) as e:
        stop = asyncio.Event()
        loop = asyncio.create_task(e.scanner.run(stop))
        try:
            await prov.next_request(timeout=30)
        finally:
            stop.set()
            await asyncio.wait_for(loop, 30)
        await e.settle()
        assert (await e.step(nid, 0))["state"] == "sent"
        assert prov.keys_seen() == [claim.key]
        assert prov.seen[0].body == body_of(claim.payload)


async def test_at_most_one_attempt_per_notification_is_active(
        tmp_path: Path, prov: Provider) -> None:
    gate = prov.gate()
    prov.reply = hold(gate, accepted())
    async with engine(tmp_path, {"hook": webhook(prov.url)}, {"k": two_step(window_sec=1)}) as e:
        nid = await e.accept()
        assert await e.tick() == 1
        planned = (await e.step(nid, 1))["send_after"]
        e.clock.advance(2)  # step 1 is due while step 0 is still out
        assert await e.tick() == 0
        s1 = await e.step(nid, 1)
        # It waits where it is: not moved behind later work (issue 14), and not due again, so
        # the scanner does not spin on it: a claim from the due index finds nothing and its time
        # goes from the index; the next look is the lease's end, or step 0's completion.
        assert (s1["state"], s1["reason"], s1["send_after"]) == ("pending", None, planned)
        leases = await e.store.leased()
        assert leases.count == 1  # step 0, still out
        assert not await e.scanner.claim_indexed(e.now)
        assert e.scanner.wakeups.index.due(e.now) == []
        read = await e.store.due_times([Route("hook", Lane.BULK)], 10)
        assert read.first_lease_end == leases.last_end

        gate.set()
        await e.settle()
        e.clock.advance(1)
        assert await e.cycle() == 1
        assert [s["state"] for s in (await e.notification(nid))["steps"]] == ["sent", "sent"]
        assert prov.keys_seen() == [f"{nid}:0", f"{nid}:1"]


async def test_a_step_due_after_its_time_to_live_ends_expired(tmp_path: Path, prov: Provider) -> None:
    kinds = {"k": two_step(window_sec=120, ttl_sec=60)}
    async with engine(tmp_path, {"hook": webhook(prov.url)}, kinds) as e:
        nid = await e.accept()
        s1 = await e.step(nid, 1)  # planned past the time to live: expired from the start
        assert (s1["state"], s1["reason"]) == ("expired", "due after the time to live ends")
        await e.run_dry()
        e.clock.advance(120)
        assert await e.cycle() == 0
        assert prov.keys_seen() == [f"{nid}:0"]


async def test_a_step_not_sent_before_its_time_to_live_ends_expired_at_claim(
        tmp_path: Path, prov: Provider) -> None:
    kinds = {"k": two_step(window_sec=10, ttl_sec=60)}
    async with engine(tmp_path, {"hook": webhook(prov.url)}, kinds) as e:
        nid = await e.accept()
        e.clock.advance(61)  # nothing ran in time (a backlog, an open breaker)
        assert await e.cycle() == 0
        for no in (0, 1):
            step = await e.step(nid, no)
            assert (step["state"], step["reason"]) == (
                "expired", "time to live passed before it could be sent")
        assert prov.keys_seen() == []
