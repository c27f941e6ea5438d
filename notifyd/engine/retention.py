"""The retention loop: a daemon peer like the digest scheduler (`run_once`, then `run`).

Each pass walks every class of rows that ages out ([retention]), one short write per batch of
at most `retention.batch` rows, and pauses between batches as long as the batch took, so the
writer is never held by retention for more than half its time and an accept waits behind one
batch at most. Then it gives the freed pages back to the file system, a few megabytes per
write, and, every few minutes, counts the rows for /metrics and `notifyd stats`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time

from notifyd.config import RetentionConfig
from notifyd.core.clock import Clock
from notifyd.core.logs import Outage
from notifyd.core.records import Aged
from notifyd.engine.metrics import Metrics
from notifyd.store import RetentionStore, StorageError

log = logging.getLogger("notifyd.retention")
RECLAIM_BYTES = 2 << 20  # given back per write: a few ms of the writer's time
COUNT_EVERY_MS = 300_000  # rows are counted at most this often: counting reads every row
NAMES = {Aged.HISTORY: ("history", "histories"), Aged.IDENTITIES: ("identity", "identities"),
         Aged.RECEIPTS: ("receipt", "receipts"),
         Aged.INBOX_DONE: ("read inbox item", "read inbox items"),
         Aged.INBOX_OLD: ("old inbox item", "old inbox items"),
         Aged.EVENTS: ("routed event", "routed events"),
         Aged.MEMBERS: ("ended topic membership", "ended topic memberships")}


def windows(cfg: RetentionConfig) -> list[tuple[Aged, int]]:
    """Each class with its window in ms, oldest data first; a class kept forever is left out.
    A routed event is kept as long as the identities of its notifications, so a producer's
    retry within that time is answered with it; an ended membership as long as a history."""
    by_class = [(Aged.HISTORY, cfg.history_sec), (Aged.IDENTITIES, cfg.identity_sec),
                (Aged.RECEIPTS, cfg.receipts_sec), (Aged.INBOX_DONE, cfg.inbox_read_sec),
                (Aged.INBOX_OLD, cfg.inbox_sec), (Aged.EVENTS, cfg.identity_sec),
                (Aged.MEMBERS, cfg.history_sec)]
    return [(what, sec * 1000) for what, sec in by_class if sec > 0]


class Retention:
    def __init__(self, cfg: RetentionConfig, store: RetentionStore, clock: Clock,
                 metrics: Metrics | None = None) -> None:
        self.cfg, self.store, self.clock = cfg, store, clock
        self.metrics = metrics or Metrics()
        self.counted_at: int | None = None
        self.stop: asyncio.Event | None = None  # run()'s: a pass ends at the next batch

    async def run_once(self) -> dict[Aged, int]:
        """One pass over every class; how many of each went."""
        removed = {}
        for what, window_ms in windows(self.cfg):
            removed[what] = n = await self._walk(what, window_ms)
            self.metrics.pruned.labels(what.value).inc(n)
        freed = await self.reclaim()
        if any(removed.values()) or freed:
            log.info("retention removed %s; gave %.1f MiB back to the file system",
                     ", ".join(f"{n:,} {NAMES[w][n != 1]}" for w, n in removed.items() if n)
                     or "nothing",
                     freed / 2**20)
        return removed

    async def _walk(self, what: Aged, window_ms: int) -> int:
        total, after = 0, ""
        while True:
            began = time.perf_counter()
            batch = await self.store.prune(what, window_ms, after, self.cfg.batch)
            total += batch.removed
            if not batch.after or (self.stop is not None and self.stop.is_set()):
                return total
            after = batch.after
            await asyncio.sleep(time.perf_counter() - began)  # the writer's other half

    async def reclaim(self) -> int:
        """Free pages back to the file system, a short write at a time; the bytes given."""
        total = 0
        while True:
            began = time.perf_counter()
            freed = await self.store.reclaim(RECLAIM_BYTES)
            total += freed
            if freed < RECLAIM_BYTES or (self.stop is not None and self.stop.is_set()):
                return total
            await asyncio.sleep(time.perf_counter() - began)  # the writer's other half

    async def count(self) -> None:
        """The database's figures for /metrics, at most every few minutes."""
        now = self.clock.now_ms()
        if self.counted_at is not None and now - self.counted_at < COUNT_EVERY_MS:
            return
        self.metrics.storage(await self.store.storage())
        self.counted_at = now

    async def run(self, stop: asyncio.Event) -> None:
        """A pass every retention.interval_sec until `stop`; a storage fault waits a pass."""
        self.stop = stop
        outage = Outage(log, "retention")
        while not stop.is_set():
            try:
                await self.run_once()
                await self.count()
                outage.goes_on()
            except StorageError as e:
                outage.waits(e)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), self.cfg.interval_sec)
