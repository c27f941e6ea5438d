"""Scheduled sends in the engine: a ladder with send_at is claimed at send_at and never before,
a resolution before send_at leaves nothing to send, and the scanner is not woken for it early."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from engine_support import KEY, Engine, engine, provider, two_step, webhook

from notifyd.core.text import iso
from notifyd.engine import resolution
from notifyd.engine.dueindex import DueIndex
from notifyd.engine.resolution import Ref

HOUR_MS = 3_600_000


async def schedule(eng: Engine, send_at: int | None, **fields: Any) -> str:
    body = {"user_id": "u1", "kind": "k", **fields}
    if send_at is not None:
        body["send_at"] = iso(send_at)
    result = await eng.ingest.accept(eng.ingest.parse(json.dumps(body).encode(), KEY, None))
    return result.notification_id


async def test_a_scheduled_ladder_goes_at_send_at_and_not_before(tmp_path: Path) -> None:
    async with provider() as prov, engine(tmp_path, {"hook": webhook(prov.url)},
                                          {"k": two_step(window_sec=60)}) as eng:
        send_at = eng.now + HOUR_MS
        nid = await schedule(eng, send_at)
        assert await eng.cycle() == 0
        assert await eng.cycle(send_at - 1) == 0
        assert prov.seen == []
        eng.clock.ms = send_at
        assert await eng.cycle() == 1
        assert await eng.cycle(send_at + 59_999) == 0  # step 1's window counts from send_at
        eng.clock.ms = send_at + 60_000
        assert await eng.cycle() == 1
        assert len(prov.seen) == 2
        n = await eng.record(nid)
        assert [(s.state, s.attempt_log[0].started_at) for s in n.steps] == [
            ("sent", send_at), ("sent", send_at + 60_000)]


async def test_a_resolution_before_send_at_cancels_every_step(tmp_path: Path) -> None:
    async with provider() as prov, engine(tmp_path, {"hook": webhook(prov.url)},
                                          {"k": two_step()}) as eng:
        send_at = eng.now + HOUR_MS
        nid = await schedule(eng, send_at, dedup_key="invoice-7")
        eng.clock.advance(60)
        r = await resolution.resolve(eng.store, Ref(user_id="u1", dedup_key="invoice-7"),
                                     "paid", "key:k", "default")
        assert r is not None and (r.changed, r.cancelled_steps) == (True, 2)
        eng.clock.ms = send_at + HOUR_MS
        assert await eng.cycle() == 0
        assert prov.seen == []
        n = await eng.record(nid)
        assert n.state == "resolved"
        assert {(s.state, s.reason) for s in n.steps} == {("cancelled", "resolved: paid")}


async def test_the_scanner_is_not_woken_early_for_a_scheduled_send(tmp_path: Path) -> None:
    async with provider() as prov, engine(tmp_path, {"hook": webhook(prov.url)},
                                          {"k": two_step()}) as eng:
        wakeups = eng.scanner.wakeups
        wakeups.sleep_until = eng.now + 1_000  # asleep until its next poll
        await schedule(eng, eng.now + HOUR_MS)
        assert not wakeups.wake.is_set()
        await schedule(eng, None)  # one due now does wake it
        assert wakeups.wake.is_set()
        wakeups.wake.clear()
        wakeups.sleep_until = None  # mid-scan: the due time is kept in the index for the alarm
        wakeups.index = DueIndex()
        await schedule(eng, eng.now + HOUR_MS)
        assert wakeups.index.first(("hook", "bulk")) == eng.now + HOUR_MS
        assert not wakeups.wake.is_set()
