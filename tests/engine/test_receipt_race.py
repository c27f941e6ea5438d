"""The delivery receipt against the timer that would escalate (seed 001's compare-and-set), run
1,000 times: a stop = "delivered" kind whose step 0 went out, step 1 due now, and the receipt for
step 0 arriving at the same moment, through a second connection to the same file as another
process would. Whichever commits first wins and the other is a recorded no-op: never a double
escalation, never a step claimed after the resolution."""

from __future__ import annotations

import asyncio
import random
from pathlib import Path

from engine_support import accepted, engine, provider, two_step, webhook

from notifyd.config import ScannerConfig
from notifyd.core.models import Evidence, Receipt
from notifyd.domain import policy
from notifyd.store import open_store

RUNS = 1000


async def test_receipt_versus_timer_1000_times_never_escalates_twice(tmp_path: Path) -> None:
    async with provider(accepted()) as p, engine(
            tmp_path, {"hook": webhook(p.url)},
            {"k": two_step("hook", window_sec=30, stop="delivered")},
            scanner=ScannerConfig(claim_batch=25)) as e:  # many small claims among the receipts
        ids = await e.accept_many(RUNS)
        await e.run_dry()  # every step 0 sent
        assert await e.state_counts() == {"sent": RUNS, "pending": RUNS}  # every step 0 out
        e.clock.advance(30)  # every step 1 due now
        other = await open_store(e.cfg.store.url, e.clock, sqlite=e.cfg.store.sqlite)
        rules = policy.rules(e.cfg.catalog)
        rng = random.Random(7)
        try:
            async def receipt(nid: str) -> None:
                await asyncio.sleep(rng.random() / 5)  # each lands somewhere among the scans
                await other.record_receipts([Receipt(
                    "delivery-receipt", f"r-{nid}", Evidence.DELIVERED, None,
                    key=f"{nid}:0")], rules)

            async def timer() -> None:
                for _ in range(100):
                    await e.tick()
                    await asyncio.sleep(0.002)

            await asyncio.gather(timer(), *(receipt(nid) for nid in ids))
            await e.settle()
            await e.run_dry()
        finally:
            await other.close()

        won_by_receipt = won_by_timer = 0
        for nid in ids:
            n = await e.record(nid)
            assert (n.resolution, n.resolved_by) == ("delivered", "receipt:delivery-receipt")
            s1 = n.steps[1]
            assert s1.attempts <= 1, f"{nid}: step 1 claimed {s1.attempts} times"
            if s1.state.value == "cancelled":  # the receipt committed first
                assert s1.attempts == 0 and s1.reason == "resolved: delivered"
                won_by_receipt += 1
            else:  # the claim committed first: it went, and the receipt still resolved it
                assert s1.state.value == "sent", f"{nid}: step 1 {s1.state}"
                assert s1.attempt_log[0].started_at <= n.resolved_at  # type: ignore[operator]
                won_by_timer += 1
        sent_step_1 = [s.key for s in p.seen if s.key and s.key.endswith(":1")]
        assert len(sent_step_1) == len(set(sent_step_1)) == won_by_timer  # one send each, no more
        assert won_by_receipt + won_by_timer == RUNS
        assert won_by_receipt > 0 and won_by_timer > 0, (won_by_receipt, won_by_timer)
