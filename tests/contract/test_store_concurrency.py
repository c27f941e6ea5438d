"""The store contract's concurrency section: two store instances over one database, racing as two
processes would, each on its own connections. The promises must hold whatever the backend's
writers do at once: a resolution beats every claim that commits after it (promise 3), one
attempt in flight per notification (promise 4), a send limit counts every committed send, and a
stream resuming after an inbox seq misses no item. SQLite gets this from its one write lock; a
backend with concurrent writers must lock what it reads before it decides. The clock moves one
millisecond at every read, so every transaction records a time of its own and the rows' times
say which committed first; each test judges from the rows alone.
"""

from __future__ import annotations

import asyncio
import itertools
import random
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from store_support import BACKENDS, NOW, RULES, accept, claim, opened, plan

from notifyd.core.clock import FakeClock
from notifyd.core.events import Audience, EventInput, KindRoute
from notifyd.core.models import (
    Budget,
    Claim,
    Completion,
    Evidence,
    Lane,
    Outcome,
    PreferencesEdit,
    Receipt,
    Recipient,
    StepState,
    Want,
)
from notifyd.core.records import InboxEntry, Notification
from notifyd.store import Store

N = 200
ROUTES = {"k": KindRoute(plan("a"), 3600)}


class Ticking(FakeClock):
    """One millisecond later at every read, from any thread (next() on a count is atomic)."""

    def __init__(self) -> None:
        super().__init__(NOW)
        self._ticks = itertools.count(NOW)

    def now_ms(self) -> int:
        self.ms = next(self._ticks)
        return self.ms

    def advance(self, seconds: float) -> None:
        self._ticks = itertools.count(self.ms + int(seconds * 1000))


class Dawdling(FakeClock):
    """Another view of a Ticking clock whose reader is held up a little after each read (as a
    process is descheduled): the time a transaction read goes stale while others move on."""

    def __init__(self, clock: Ticking, pause: float) -> None:
        super().__init__(clock.ms)
        self.clock, self.pause = clock, pause

    def now_ms(self) -> int:
        self.ms = self.clock.now_ms()
        time.sleep(self.pause)
        return self.ms


@pytest.fixture
def clock() -> Ticking:
    return Ticking()


@pytest.fixture(params=sorted(BACKENDS))
async def pair(request: pytest.FixtureRequest, tmp_path: Path,
               clock: Ticking) -> AsyncIterator[tuple[Store, Store]]:
    url = BACKENDS[request.param](tmp_path, "contract.db")
    async with opened(url, clock) as a, opened(url, clock) as b:
        yield a, b


@pytest.fixture(params=sorted(BACKENDS))
async def dawdling_pair(request: pytest.FixtureRequest, tmp_path: Path,
                        clock: Ticking) -> AsyncIterator[tuple[Store, Store]]:
    """As `pair`, with the second store's writer held up a moment after each read of the
    clock: a write that read its time before a lock it then waited for shows in the rows."""
    url = BACKENDS[request.param](tmp_path, "contract.db")
    async with opened(url, clock) as a, opened(url, Dawdling(clock, 0.002)) as b:
        yield a, b


async def _yields(n: int) -> None:
    for _ in range(n):
        await asyncio.sleep(0)


async def test_a_resolution_beats_every_claim_that_commits_after_it(
        pair: tuple[Store, Store]) -> None:
    """Each round queues a claim on one store and resolutions on the other at once: which
    commits first is the backend's to decide, and the rows must agree with the promise either
    way. One notification is resolved before any claim and the first claims come before any
    resolution, so both outcomes are always there."""
    a, b = pair
    ids = [await accept(a, f"n_{i:03d}", "a") for i in range(N)]
    rng = random.Random(3)
    order = rng.sample(ids[:-1], N - 1)
    assert await b.resolve(ids[-1], "done", "race") is not None  # before any claim
    claims = await claim(a, n=7)  # before any resolution
    while order:
        batch, order = order[:8], order[8:]
        results = await asyncio.gather(claim(a, n=7),
                                       *(b.resolve(nid, "done", "race") for nid in batch))
        claims += results[0]
    claims += await claim(a, n=N)
    sent_first = cancelled = 0
    for nid in ids:
        n = await a.get_notification(nid)
        assert n is not None and n.resolved_at is not None
        s0 = n.steps[0]
        if s0.attempt_log:  # claimed: the claim committed before the resolution did
            assert s0.attempt_log[0].started_at < n.resolved_at, nid
            assert s0.state is StepState.SENDING, nid  # in flight, left alone
            sent_first += 1
        else:
            assert (s0.state, s0.reason) == (StepState.CANCELLED, "resolved: done"), nid
            cancelled += 1
    assert len(claims) == sent_first and len({c.notification_id for c in claims}) == sent_first
    assert sent_first >= 7 and cancelled >= 1


async def test_a_resolution_records_its_time_after_the_claims_it_waited_for(
        request: pytest.FixtureRequest, tmp_path: Path, clock: Ticking) -> None:
    """Resolutions by id and by key on one store, claims on the other, at once. The resolver
    is held up for a moment after each read of the clock: a resolution that read its time
    before waiting for the notification a claim holds would record a time earlier than that
    claim's, and commit after it. The rows must say: every step claimed was claimed before its
    notification's resolution; every other was cancelled by it."""
    for name, make in sorted(BACKENDS.items()):
        url = make(tmp_path, f"times-{name}.db")
        async with opened(url, Dawdling(clock, 0.002)) as a, opened(url, clock) as b:
            ids = [await accept(a, f"n_{name}{i:03d}", "a") for i in range(N // 2)]
            order = list(ids)  # the order the claim takes them in: each round races for 3
            claims: list[Claim] = []
            while order:
                batch, order = order[:3], order[3:]
                results = await asyncio.gather(
                    claim(b, n=3), *(a.resolve(nid, "done", "race") for nid in batch[:2]),
                    a.resolve_keys("acme", [("u1", nid, "done") for nid in batch[2:]], "race"))
                claims += results[0]
            for nid in ids:
                n = await b.get_notification(nid)
                assert n is not None and n.resolved_at is not None
                s0 = n.steps[0]
                if s0.attempt_log:
                    assert s0.attempt_log[0].started_at < n.resolved_at, (name, nid)
                else:
                    assert s0.state is StepState.CANCELLED, (name, nid)
            assert len(claims) >= 1


async def test_two_claimers_never_have_two_steps_of_one_notification_in_flight(
        pair: tuple[Store, Store], clock: Ticking) -> None:
    a, b = pair
    ids = [await accept(a, f"n_{i:03d}", "a", "a", gap=0) for i in range(N // 2)]
    in_flight: dict[str, Claim] = {}
    leased = 0  # claimed and not yet completed: the clock must not run out their leases
    sent: set[tuple[str, int]] = set()
    rng = random.Random(4)

    async def claimer(store: Store) -> None:
        nonlocal leased
        for _ in range(1000):
            if len(sent) == len(ids) * 2:
                return
            got = await claim(store, n=9)
            leased += len(got)
            if not got and not leased:  # the rest wait a second behind their sibling
                clock.advance(1)  # (never while a lease is out: it would lapse)
            for c in got:
                assert c.notification_id not in in_flight, (c, in_flight[c.notification_id])
                in_flight[c.notification_id] = c
            await _yields(rng.randrange(3))
            for c in got:
                del in_flight[c.notification_id]  # before the commit: never a false alarm
                assert await store.complete(c, Completion(Outcome.SENT, StepState.SENT), RULES)
                leased -= 1
                sent.add((c.notification_id, c.step_no))

    await asyncio.gather(claimer(a), claimer(b))
    for nid in ids:
        n = await b.get_notification(nid)
        assert n is not None and [s.state for s in n.steps] == [StepState.SENT] * 2, nid
        first, second = (s.attempt_log for s in n.steps)
        assert [x.attempt_no for x in first + second] == [1, 1], nid  # each leased once
        ended = first[0].ended_at
        assert ended is not None and second[0].started_at > ended, nid  # one at a time


async def test_the_send_limit_counts_every_committed_send(pair: tuple[Store, Store]) -> None:
    a, b = pair
    await a.put_recipient(Recipient("acme", "u1", contacts={"email": "u1@x"}))
    ids = [await accept(a, f"n_{i:03d}", "b", kind="limited") for i in range(40)]

    async def claimer(store: Store) -> list[Claim]:
        got: list[Claim] = []
        for _ in range(10):
            got += await claim(store, "b", n=3)
            await asyncio.sleep(0)
        return got

    won = [c for got in await asyncio.gather(claimer(a), claimer(b)) for c in got]
    assert len(won) == 1, "1 email an hour: one claim in all, whichever store made it"
    states = [(await a.get_notification(nid)).steps[0] for nid in ids]  # type: ignore[union-attr]
    assert sum(s.state is StepState.SENDING for s in states) == 1
    assert {s.reason for s in states if s.state is StepState.SUPPRESSED} == {
        "rate_limited: over the limit of 1 email per 3600 s of limited"}


async def test_a_stream_resuming_after_a_seq_misses_no_item(pair: tuple[Store, Store]) -> None:
    a, b = pair
    made: list[str] = []
    seen: list[tuple[int, str]] = []
    done = asyncio.Event()

    async def writer(store: Store, tag: str) -> None:
        for lo in range(0, N, 20):  # chunks gathered: each a batch on its writer
            made.extend(await asyncio.gather(*(
                accept(store, f"n_{tag}{i:03d}", "a", inbox=InboxEntry(f"item {i}", None))
                for i in range(lo, lo + 20))))

    async def stream() -> None:
        last = 0
        while True:
            finished = done.is_set()
            for item in await a.inbox_since("acme", "u1", last, 1000):
                seen.append((item.seq, item.notification_id))
                last = item.seq
            if finished:
                return
            await asyncio.sleep(0)

    reader = asyncio.create_task(stream())
    await asyncio.gather(writer(a, "a"), writer(b, "b"))
    done.set()
    await reader
    assert sorted(nid for _, nid in seen) == sorted(made)  # each once, none missed
    assert [seq for seq, _ in seen] == sorted(seq for seq, _ in seen)
    assert await b.badge("acme", "u1") == 2 * N


async def test_a_channels_rate_is_a_ceiling_for_every_process_together(
        pair: tuple[Store, Store], clock: Ticking) -> None:
    """Both processes claim as fast as they can from one channel of rate 10/s and burst 5: what
    they claim together stays within the one bucket (where one process owns the database, its
    own bucket is the deployment's, kept by the sender pool)."""
    a, b = pair
    if not a.shared:
        pytest.skip("one process sends: its own bucket is the whole deployment's")
    for i in range(60):
        await accept(a, f"n_{i:03d}", "a")
    start = clock.ms

    async def claims(s: Store) -> int:
        got = 0
        for _ in range(20):
            budget = Budget(rates={"a": (10.0, 5)})
            claimed = await s.claim_due([Want("a", Lane.BULK, 50)], 60_000, RULES, budget)
            assert set(claimed.tokens) <= {"a"} and all(t >= 0 for t in claimed.tokens.values())
            got += len(claimed.claims)
        return got

    total = sum(await asyncio.gather(claims(a), claims(b)))
    assert 5 <= total <= 5 + (clock.ms - start) * 10 // 1000 + 1


async def test_two_edits_of_one_profile_at_once_both_hold(pair: tuple[Store, Store]) -> None:
    """Each process adds its own field to the same person's preferences, many times at once:
    every write reads the row as the last one committed it (the profile's lock where writers
    run at once), so none is lost and each version is taken once."""
    a, b = pair
    n = 25

    def add(key: str) -> PreferencesEdit:
        return lambda r: {**(r.preferences if r is not None else {}), key: True}

    results = await asyncio.gather(*(s.edit_preferences("acme", "u1", add(f"{s_i}{i}"))
                                     for i in range(n) for s_i, s in (("a", a), ("b", b))))
    assert sorted(v for v, _ in results) == list(range(1, 2 * n + 1))
    person = await a.get_recipient("acme", "u1")
    assert person is not None and len(person.preferences or {}) == 2 * n


# --- the other pairs the store's docs say are serialized, raced across the two stores -------


def _claimed_before_or_cancelled(n: Notification | None, resolution: str) -> bool:
    """A claimed step was claimed before the resolution committed; any other was cancelled."""
    assert n is not None and n.resolution == resolution and n.resolved_at is not None, n
    s0 = n.steps[0]
    if s0.attempt_log:
        return bool(s0.attempt_log[0].started_at < n.resolved_at)
    return s0.state is StepState.CANCELLED


async def test_an_erasure_beats_every_claim_that_commits_after_it(
        dawdling_pair: tuple[Store, Store]) -> None:
    """Erasures of people on one store, claims of their notifications on the other, at once:
    an erasure resolves what is open of theirs, so a claim after it never sends."""
    a, b = dawdling_pair
    users = [f"u{i:03d}" for i in range(60)]
    for u in users:
        await a.put_recipient(Recipient("acme", u, contacts={"email": f"{u}@x"}))
        await accept(a, f"n_{u}", "a", user=u)
    claims: list[Claim] = []
    for i in range(0, len(users), 3):
        got = await asyncio.gather(claim(a, n=2), *(b.erase_user("acme", u, "race")
                                                    for u in users[i:i + 3]))
        claims += got[0]
    claims += await claim(a, n=len(users))
    for u in users:
        n = await a.get_notification(f"n_{u}")
        assert _claimed_before_or_cancelled(n, "erased"), n
    assert len(claims) >= 1


async def _each_resolved_and_claimed_before_or_cancelled(store: Store, ids: list[str]) -> None:
    """Every notification resolved, and its step claimed before the resolution or cancelled."""
    for nid in ids:
        n = await store.get_notification(nid)
        assert n is not None and n.resolution is not None, nid
        assert _claimed_before_or_cancelled(n, n.resolution), n


async def test_an_inbox_read_that_stops_beats_every_claim_after_it(
        dawdling_pair: tuple[Store, Store]) -> None:
    """Items read on one store (their kind stops when read: the read resolves), claims on the
    other, at once."""
    a, b = dawdling_pair
    ids = [await accept(a, f"n_{i:03d}", "a", inbox=InboxEntry(f"item {i}", None))
           for i in range(60)]
    for i in range(0, len(ids), 3):
        await asyncio.gather(claim(a, n=2), *(b.read_item("acme", "u1", nid, frozenset({"k"}))
                                              for nid in ids[i:i + 3]))
    await claim(a, n=len(ids))
    await _each_resolved_and_claimed_before_or_cancelled(a, ids)


async def test_reading_all_that_stops_beats_every_claim_after_it(
        dawdling_pair: tuple[Store, Store]) -> None:
    """Each person's items all read at once on one store (their kind stops when read), claims
    on the other, at once: the read resolves, so a claim after it never sends."""
    a, b = dawdling_pair
    users = [f"u{i:03d}" for i in range(30)]
    ids = [await accept(a, f"n_{u}_{j}", "a", user=u, inbox=InboxEntry(f"item {j}", None))
           for u in users for j in range(2)]
    for i in range(0, len(users), 3):
        await asyncio.gather(claim(a, n=6), *(b.read_all("acme", u, frozenset({"k"}))
                                              for u in users[i:i + 3]))
    await claim(a, n=len(ids))
    await _each_resolved_and_claimed_before_or_cancelled(a, ids)


async def test_a_receipt_and_its_steps_completion_at_once_always_meet(
        pair: tuple[Store, Store]) -> None:
    """The provider's delivery receipt on one store, the send's answer naming the same message
    on the other, at once: whichever commits first, the step ends with the evidence and no
    receipt is left an orphan."""
    a, b = pair
    ids = [await accept(a, f"n_{i:03d}", "a") for i in range(40)]
    claims = await claim(a, n=len(ids))
    assert len(claims) == len(ids)
    for c in claims:
        ref = f"p_{c.notification_id}"
        receipt = Receipt("resend", f"e_{c.notification_id}", Evidence.DELIVERED, None,
                          provider_ref=ref)
        await asyncio.gather(
            a.complete(c, Completion(Outcome.SENT, StepState.SENT, provider_ref=ref), RULES),
            b.record_receipts([receipt], RULES))
    for nid in ids:
        n = await b.get_notification(nid)
        assert n is not None and n.steps[0].evidence == "delivered", n
    assert await a.orphan_count() == 0


async def test_a_preference_change_is_read_by_every_claim_that_commits_after_it(
        pair: tuple[Store, Store]) -> None:
    """A person's preferences changed again and again on one store while the other claims
    their steps: in commit order (the rows' times), the versions the claims recorded never go
    back."""
    a, b = pair
    await a.put_recipient(Recipient("acme", "u1", contacts={"email": "u1@x"}))
    ids = [await accept(a, f"n_{i:03d}", "a") for i in range(60)]
    for i in range(20):
        await asyncio.gather(claim(a, n=3), b.put_preferences("acme", "u1", {"round": i}))
    seen: list[tuple[int, int]] = []
    for nid in ids:
        n = await a.get_notification(nid)
        assert n is not None
        s0 = n.steps[0]
        if s0.attempt_log:
            assert s0.pref_version is not None, nid
            seen.append((s0.attempt_log[0].started_at, s0.pref_version))
    versions = [v for _, v in sorted(seen)]
    assert len(versions) >= 20 and versions == sorted(versions), versions
    assert versions[-1] > versions[0]


async def test_an_event_reaches_the_members_of_the_version_it_froze(
        pair: tuple[Store, Store]) -> None:
    """Members added to a topic one at a time on one store while events to it are accepted on
    the other: each event freezes one version and reaches exactly who was a member at it."""
    a, b = pair
    await a.put_topic("acme", "t")
    added: dict[str, int] = {}
    events: list[EventInput] = []

    async def add(u: str) -> None:
        changed = await a.change_members("acme", "t", (u,), ())
        assert changed is not None
        added[u] = changed.topic.version

    for i in range(20):
        e = EventInput("acme", f"e{i}", "news", ("k",), Audience.TOPIC, {"n": 1}, None, "h",
                       "key", "t", ())
        events.append(e)
        await asyncio.gather(add(f"m{i:02d}"), b.accept_event(e))
    for e in events:
        while not (await b.route_chunk("acme", e.event_id, ROUTES, 7)).done:
            pass
        record = await a.get_event("acme", e.event_id)
        assert record is not None and record.version is not None
        reached = {n.user_id for n in await a.event_notifications("acme", e.event_id, ("", ""),
                                                                  100)}
        assert reached == {u for u, v in added.items() if v <= record.version}, e.event_id
        assert record.size == len(reached)
