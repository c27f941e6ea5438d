"""Retention, through the `Store` interface on every backend: what ages out goes a batch at a
time, oldest first; a notification with anything open keeps its history; what a producer's late
retry needs (the identity) outlives the history; badges follow the inbox items that go."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from store_support import BACKENDS, NOW, RULES, accept, claim, inp, opened, plan

from notifyd.core.clock import FakeClock
from notifyd.core.models import Completion, Decision, Evidence, Outcome, Receipt, StepState, Verdict, new_id
from notifyd.core.records import Aged, InboxEntry
from notifyd.store import Store, is_postgres

DAY = 86_400_000


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(NOW)


@pytest.fixture(params=sorted(BACKENDS))
async def store(request: pytest.FixtureRequest, tmp_path: Path,
                clock: FakeClock) -> AsyncIterator[Store]:
    async with opened(BACKENDS[request.param](tmp_path, "retention.db"), clock) as s:
        yield s


async def sent(store: Store, clock: FakeClock, *channels: str, user: str = "u1",
               inbox: InboxEntry | None = None) -> str:
    """A notification accepted now whose steps are all sent at once."""
    nid = await accept(store, new_id("n_", clock.ms), *channels, user=user, gap=0, inbox=inbox)
    for c in await claim(store):
        await store.complete(c, Completion(Outcome.SENT, StepState.SENT,
                                           provider_ref=f"p-{c.key}"), RULES)
    return nid


async def prune_all(store: Store, what: Aged, window_ms: int, limit: int = 2) -> int:
    """Walk a class to its end in batches of `limit`, as the retention loop does."""
    removed, after = 0, ""
    while True:
        batch = await store.prune(what, window_ms, after, limit)
        removed += batch.removed
        if not batch.after:
            return removed
        after = batch.after


async def test_a_finished_history_leaves_its_identity_and_a_retry_still_finds_it(
        store: Store, clock: FakeClock) -> None:
    nids = [await sent(store, clock, "a", "a") for _ in range(3)]
    clock.ms += 10 * DAY
    young = await sent(store, clock, "a")
    assert await store.prunable(Aged.HISTORY, 7 * DAY) == 3
    assert await prune_all(store, Aged.HISTORY, 7 * DAY) == 3
    assert await store.prunable(Aged.HISTORY, 7 * DAY) == 0
    n = await store.get_notification(nids[0])
    assert n is not None and (n.steps, n.events, n.params, n.pruned_at, n.state) == (
        (), (), {}, clock.ms, "presumed_delivered")
    assert (n.tenant, n.user_id, n.dedup_key) == ("acme", "u1", nids[0])
    kept = await store.get_notification(young)
    assert kept is not None and len(kept.steps) == 1 and kept.pruned_at is None
    # A producer retrying the first request, days later: the same id, never a second one.
    again = await store.accept(inp("u1", nids[0]), new_id("n_", clock.ms), plan("a"), 3600, None)
    assert (again.notification_id, again.created, again.state, again.conflict) == (
        nids[0], False, "presumed_delivered", False)
    other = await store.accept(inp("u1", nids[0], digest="other"), new_id("n_", clock.ms),
                               plan("a"), 3600, None)
    assert (other.notification_id, other.conflict) == (nids[0], True)


async def test_a_history_the_persons_choice_ended_keeps_opted_out(store: Store,
                                                                  clock: FakeClock) -> None:
    off = dataclasses.replace(RULES, decide=lambda ctx, now: Decision(
        Verdict.SUPPRESS, "preference: k by email is off (preferences v1)"))
    nid = await accept(store, new_id("n_", clock.ms), "a", gap=0)
    assert await claim(store, rules=off) == []
    assert (await store.get_notification(nid)).state == "opted_out"  # type: ignore[union-attr]
    clock.ms += 10 * DAY
    assert await prune_all(store, Aged.HISTORY, 7 * DAY) == 1
    n = await store.get_notification(nid)
    assert n is not None and (n.steps, n.state) == ((), "opted_out")


async def test_anything_open_keeps_the_history(store: Store, clock: FakeClock) -> None:
    done = await sent(store, clock, "a")
    hold = Decision(Verdict.HOLD, "held", until=NOW + 30 * DAY, digest="daily")
    held = await accept(store, new_id("n_", clock.ms), "a", dedup="h", gap=0)
    assert await claim(store, rules=dataclasses.replace(RULES, decide=lambda c, n: hold)) == []
    pending = await accept(store, new_id("n_", clock.ms), "a", dedup="p", gap=0)
    clock.ms += 10 * DAY
    assert await prune_all(store, Aged.HISTORY, DAY) == 1
    for nid, left in ((pending, 1), (held, 1), (done, 0)):
        n = await store.get_notification(nid)
        assert n is not None and len(n.steps) == left, nid


async def test_a_replay_committed_first_keeps_the_history(store: Store, clock: FakeClock
                                                         ) -> None:
    nid = await accept(store, new_id("n_", clock.ms), "a", gap=0)
    [c] = await claim(store)
    await store.complete(c, Completion(Outcome.FAILED, StepState.DEAD, reason="x"), RULES)
    clock.ms += 10 * DAY
    assert await store.replay(nid, 0) == 1
    assert await prune_all(store, Aged.HISTORY, DAY) == 0
    n = await store.get_notification(nid)
    assert n is not None and n.steps[0].state == "pending"


async def test_identities_go_after_their_own_window_and_free_the_key(
        store: Store, clock: FakeClock) -> None:
    old = await sent(store, clock, "a")
    live = await accept(store, new_id("n_", clock.ms), "a", dedup="live", gap=DAY * 100)
    clock.ms += 40 * DAY
    assert await prune_all(store, Aged.IDENTITIES, 30 * DAY) == 0  # history first
    await prune_all(store, Aged.HISTORY, 7 * DAY)
    assert await store.prunable(Aged.IDENTITIES, 30 * DAY) == 1
    assert await prune_all(store, Aged.IDENTITIES, 30 * DAY) == 1
    assert await store.get_notification(old) is None
    assert await store.get_notification(live) is not None  # open: neither pruned nor gone
    fresh = await store.accept(inp("u1", old), new_id("n_", clock.ms), plan("a"), 3600, None)
    assert fresh.created and fresh.notification_id != old


async def test_receipts_go_by_arrival_and_their_bodies_with_the_history(
        store: Store, clock: FakeClock) -> None:
    nid = await sent(store, clock, "a")
    n = await store.get_notification(nid)
    assert n is not None
    ref = n.steps[0].provider_ref
    await store.record_receipts([Receipt("resend", "e1", Evidence.DELIVERED, None,
                                         provider_ref=ref, address="ada@example.com",
                                         detail="250 ok")], RULES)
    clock.ms += 10 * DAY
    await store.record_receipts([Receipt("resend", "e2", Evidence.BOUNCED, None,
                                         provider_ref="nobody")], RULES)
    await prune_all(store, Aged.HISTORY, 7 * DAY)
    pruned = await store.get_notification(nid)
    assert pruned is not None and [(p.event, p.detail) for p in pruned.proofs] == [
        ("delivered", None)]
    assert await store.prunable(Aged.RECEIPTS, 7 * DAY) == 1
    assert await prune_all(store, Aged.RECEIPTS, 7 * DAY, limit=1) == 1
    pruned = await store.get_notification(nid)
    assert pruned is not None and pruned.proofs == ()
    # The receipt that stays still answers a provider's replay as a duplicate.
    assert await store.record_receipts([Receipt("resend", "e2", Evidence.BOUNCED, None,
                                                provider_ref="nobody")], RULES) == ["duplicate"]


async def test_inbox_items_go_by_their_windows_and_the_badge_follows(
        store: Store, clock: FakeClock) -> None:
    entry = InboxEntry("t", "b")
    first = await sent(store, clock, "a", inbox=entry)
    second = await sent(store, clock, "a", inbox=entry)
    await sent(store, clock, "a", inbox=entry)
    await store.read_item("acme", "u1", first, frozenset())
    await store.archive_item("acme", "u1", second)
    clock.ms += 10 * DAY
    young = await sent(store, clock, "a", inbox=entry)
    assert await store.badge("acme", "u1") == 2
    assert await store.prunable(Aged.INBOX_DONE, 7 * DAY) == 2
    assert await prune_all(store, Aged.INBOX_DONE, 7 * DAY, limit=1) == 2
    assert await store.badge("acme", "u1") == 2
    assert await store.prunable(Aged.INBOX_OLD, 7 * DAY) == 1
    assert await prune_all(store, Aged.INBOX_OLD, 7 * DAY, limit=1) == 1
    assert await store.badge("acme", "u1") == 1
    page = await store.inbox_page("acme", "u1", None, 10, archived=True)
    assert [i.notification_id for i in page] == [young]


async def test_storage_counts_rows_per_class_with_the_oldest(store: Store,
                                                            clock: FakeClock) -> None:
    began = clock.ms
    await sent(store, clock, "a", "a")
    clock.ms += 10 * DAY
    await sent(store, clock, "a")
    await prune_all(store, Aged.HISTORY, 7 * DAY)
    s = await store.storage()
    assert s.bytes > 0 and s.free_bytes >= 0
    assert (s.rows["notifications"], s.rows["identities"], s.rows["steps"]) == (1, 1, 1)
    assert s.oldest["notifications"] == began + 10 * DAY and s.oldest["identities"] == began
    assert s.rows["receipts"] == 0 and s.oldest["receipts"] is None
    assert await store.reclaim(1 << 20) >= 0


async def test_space_goes_back_to_the_file_system(store: Store, clock: FakeClock) -> None:
    if is_postgres(store.url):
        pytest.skip("a file's space: PostgreSQL's autovacuum gives space back on its own")
    assert await store.tune_space() is None  # a new database gives space back from the start
    entry = InboxEntry("t", "x" * 4000)
    for _ in range(200):
        await sent(store, clock, "a", inbox=entry)
    clock.ms += 10 * DAY
    await prune_all(store, Aged.INBOX_OLD, DAY, limit=100)
    freed = (await store.storage(count=False)).free_bytes
    assert freed > 0
    assert await store.reclaim(freed // 2) > 0
    await store.compact()
    sized = await store.storage(count=False)
    assert sized.free_bytes == 0 and sized.bytes > 0 and sized.rows == {} == sized.oldest
