"""The retention loop over a real store: every class walked to its end in short batches, the
freed pages given back, the figures counted for /metrics at most every few minutes."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import engine_support
import pytest
from store_support import BACKENDS, NOW, RULES, accept, claim, opened

from notifyd.config import RetentionConfig
from notifyd.core.clock import FakeClock
from notifyd.core.models import Completion, Outcome, StepState, new_id
from notifyd.core.records import Aged, InboxEntry
from notifyd.engine.metrics import Metrics
from notifyd.engine.retention import COUNT_EVERY_MS, Retention, windows
from notifyd.store import Store

DAY = 86_400_000


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(NOW)


@pytest.fixture
async def store(tmp_path: Path, clock: FakeClock) -> AsyncIterator[Store]:
    async with opened(BACKENDS[engine_support.BACKEND](tmp_path, "r.db"), clock) as s:
        yield s


async def finished(store: Store, clock: FakeClock, n: int) -> list[str]:
    """`n` notifications, each with an inbox item and one step sent."""
    nids = []
    for _ in range(n):
        nids.append(await accept(store, new_id("n_", clock.ms), "a", gap=0,
                                 inbox=InboxEntry("t", "x" * 2000)))
    for c in await claim(store, n=n):
        await store.complete(c, Completion(Outcome.SENT, StepState.SENT), RULES)
    return nids


async def test_a_pass_walks_each_class_in_batches_and_gives_the_space_back(
        store: Store, clock: FakeClock) -> None:
    cfg = RetentionConfig(history_sec=1, identity_sec=86400, inbox_read_sec=1, inbox_sec=2,
                          batch=3)
    metrics = Metrics()
    retention = Retention(cfg, store, clock, metrics)
    await finished(store, clock, 10)
    clock.ms += 5_000
    young = await finished(store, clock, 1)
    removed = await retention.run_once()
    assert removed == {Aged.HISTORY: 10, Aged.IDENTITIES: 0, Aged.RECEIPTS: 0,
                       Aged.INBOX_DONE: 0, Aged.INBOX_OLD: 10, Aged.EVENTS: 0, Aged.MEMBERS: 0}
    assert metrics.pruned.labels("history")._value.get() == 10
    assert (await store.storage()).free_bytes == 0  # given back as it went
    n = await store.get_notification(young[0])
    assert n is not None and n.pruned_at is None
    clock.ms += DAY
    assert (await retention.run_once())[Aged.IDENTITIES] == 10
    assert await retention.run_once() == {what: 0 for what, _ in windows(cfg)}


async def test_figures_are_counted_at_most_every_few_minutes(store: Store,
                                                            clock: FakeClock) -> None:
    metrics = Metrics()
    retention = Retention(RetentionConfig(), store, clock, metrics)
    await retention.count()
    assert metrics.db_rows.labels("notifications")._value.get() == 0
    await finished(store, clock, 2)
    await retention.count()  # too soon: the figures stand
    assert metrics.db_rows.labels("notifications")._value.get() == 0
    clock.ms += COUNT_EVERY_MS
    await retention.count()
    assert metrics.db_rows.labels("notifications")._value.get() == 2
    assert metrics.db_bytes._value.get() > 0
    metrics.age_rows(clock.ms)
    assert metrics.db_oldest.labels("notifications")._value.get() == COUNT_EVERY_MS / 1000


def test_a_class_kept_forever_is_not_walked() -> None:
    cfg = RetentionConfig(identity_sec=0, receipts_sec=0)
    assert [what for what, _ in windows(cfg)] == [Aged.HISTORY, Aged.INBOX_DONE, Aged.INBOX_OLD,
                                                  Aged.MEMBERS]
