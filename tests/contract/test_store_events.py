"""Events and topics, through the `Store` interface on every backend: versioned memberships, an
event accepted once with its audience frozen, and its fan-out a chunk per write: every member
once per kind, nobody added after the event, a member removed after it still reached, a chunk
that fails or is cut short routed again without a second notification."""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from store_support import BACKENDS, NOW, RULES, claim, inp, opened, plan

from notifyd.core.clock import FakeClock
from notifyd.core.events import Audience, EventInput, KindRoute, TopicGone, event_key
from notifyd.core.models import Completion, Decision, Outcome, Recipient, StepState, Verdict
from notifyd.core.records import Aged, InboxEntry
from notifyd.core.steps import StepKey
from notifyd.domain import events
from notifyd.store import Store

DAY = 86_400_000


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(NOW)


@pytest.fixture(params=sorted(BACKENDS))
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return BACKENDS[request.param](tmp_path, "events.db")


@pytest.fixture
async def store(url: str, clock: FakeClock) -> AsyncIterator[Store]:
    async with opened(url, clock) as s:
        yield s


def event(event_id: str = "e1", audience: Audience = Audience.TOPIC, topic: str | None = "t",
          users: tuple[str, ...] = (), digest: str = "h1", kinds: tuple[str, ...] = ("k",),
          tenant: str = "acme") -> EventInput:
    return EventInput(tenant, event_id, "news", kinds, audience, {"n": 1}, "thread:1", digest,
                      "key", topic if audience is Audience.TOPIC else None, users)


ROUTES = {"k": KindRoute(plan("a"), 3600), "j": KindRoute(plan("a"), 3600)}


async def route_all(store: Store, e: EventInput, limit: int = 2,
                    routes: dict[str, KindRoute] | None = None) -> int:
    """Chunks until the event is routed, as the fan-out does; how many chunks."""
    chunks = 0
    while True:
        chunks += 1
        done = await store.route_chunk(e.tenant, e.event_id, routes or ROUTES, limit)
        if done.done:
            return chunks


async def members_at(store: Store, topic: str = "t") -> list[str]:
    return [m.user_id for m in await store.topic_members("acme", topic, "", 1000)]


async def reached(store: Store, e: EventInput) -> Counter[tuple[str, str]]:
    """(user, kind) of every notification the event made, counted."""
    found: Counter[tuple[str, str]] = Counter()
    after = ("", "")
    while page := await store.event_notifications(e.tenant, e.event_id, after, 3):
        found.update((n.user_id, n.kind) for n in page)
        after = (page[-1].user_id, page[-1].id)
    return found


class TestTopics:
    async def test_each_change_is_one_version_and_a_re_add_is_a_membership_of_its_own(
            self, store: Store, clock: FakeClock) -> None:
        made, created = await store.put_topic("acme", "t")
        assert created and (made.version, made.members, made.self_service) == (0, 0, False)
        changed = await store.change_members("acme", "t", ("b", "a", "c"), ())
        assert changed is not None and (changed.added, changed.removed, changed.topic.version,
                                        changed.topic.members) == (3, 0, 1, 3)
        nothing = await store.change_members("acme", "t", ("a",), ("zz",))
        assert nothing is not None and (nothing.added, nothing.removed,
                                        nothing.topic.version) == (0, 0, 1)
        clock.ms += 1
        left = await store.change_members("acme", "t", (), ("b",))
        assert left is not None and (left.removed, left.topic.version, left.topic.members) == (
            1, 2, 2)
        e2 = await store.accept_event(event("at2"))  # pins version 2: a and c
        back = await store.change_members("acme", "t", ("b",), ())
        assert back is not None and (back.added, back.topic.version, back.topic.members) == (
            1, 3, 3)
        assert await members_at(store) == ["a", "b", "c"]
        assert e2.event is not None and (e2.event.version, e2.event.size) == (2, 2)
        await route_all(store, event("at2"))
        assert sorted(u for u, _ in await reached(store, event("at2"))) == ["a", "c"]
        assert await store.change_members("acme", "nope", ("a",), ()) is None
        assert await store.get_topic("acme", "nope") is None
        assert await store.get_topic("other", "t") is None

    async def test_members_are_listed_by_user_id_after_a_cursor(self, store: Store) -> None:
        await store.put_topic("acme", "t")
        await store.change_members("acme", "t", tuple(f"u{i:02}" for i in range(7)), ())
        pages, after = [], ""
        while page := await store.topic_members("acme", "t", after, 3):
            pages.append([m.user_id for m in page])
            after = page[-1].user_id
        assert pages == [["u00", "u01", "u02"], ["u03", "u04", "u05"], ["u06"]]
        assert [f.topic for f in await store.following("acme", "u03")] == ["t"]
        await store.change_members("acme", "t", (), ("u03",))
        assert await store.following("acme", "u03") == []

    async def test_self_service_is_read_in_the_change_and_kept_unless_given(
            self, store: Store) -> None:
        await store.put_topic("acme", "t")
        refused = await store.change_members("acme", "t", ("a",), (), only_self_service=True)
        assert refused is not None and refused.refused and await members_at(store) == []
        made, created = await store.put_topic("acme", "t", True)
        assert not created and made.self_service
        kept, _ = await store.put_topic("acme", "t")
        assert kept.self_service
        ok = await store.change_members("acme", "t", ("a",), (), only_self_service=True)
        assert ok is not None and not ok.refused and ok.added == 1
        assert [(f.topic, f.self_service) for f in await store.following("acme", "a")] == [
            ("t", True)]

    async def test_only_an_empty_topic_is_deleted_and_made_again_its_versions_go_on(
            self, store: Store) -> None:
        await store.put_topic("acme", "t")
        await store.change_members("acme", "t", ("a",), ())
        assert await store.delete_topic("acme", "t") is TopicGone.NOT_EMPTY
        await store.change_members("acme", "t", (), ("a",))
        assert await store.delete_topic("acme", "t") is TopicGone.DELETED
        assert await store.delete_topic("acme", "t") is TopicGone.MISSING
        assert await store.get_topic("acme", "t") is None
        gone = await store.accept_event(event())
        assert gone.event is None and not gone.created
        again, created = await store.put_topic("acme", "t")
        assert created and again.version == 2 and again.members == 0


class TestAcceptEvent:
    async def test_the_same_input_is_answered_with_the_event_other_input_is_a_conflict(
            self, store: Store, clock: FakeClock) -> None:
        await store.put_topic("acme", "t")
        await store.change_members("acme", "t", ("a", "b"), ())
        first = await store.accept_event(event())
        assert first.created and first.event is not None
        e = first.event
        assert (e.audience, e.topic, e.version, e.size, e.routed, e.cursor, e.accepted_at,
                e.state, e.subject, e.params) == (
            Audience.TOPIC, "t", 1, 2, 0, "", NOW, "routing", "thread:1", {"n": 1})
        clock.ms += 5
        again = await store.accept_event(event())
        assert (again.created, again.conflict, again.event) == (False, False, e)
        other = await store.accept_event(event(digest="h2"))
        assert (other.created, other.conflict) == (False, True)
        assert await store.get_event("acme", "e1") == e
        assert await store.get_event("other", "e1") is None
        elsewhere = await store.accept_event(event(tenant="other", topic="t"))
        assert elsewhere.event is None  # topics are per tenant

    async def test_an_inline_list_is_the_audience_as_given(self, store: Store) -> None:
        e = event("list", Audience.USERS, users=("a", "b", "c", "d", "e"))
        done = await store.accept_event(e)
        assert done.event is not None and done.event.size == 5
        assert await route_all(store, e, limit=2) == 3
        assert sorted(await reached(store, e)) == [(u, k) for u in "abcde" for k in ("j", "k")
                                                   if k in e.kinds]

    async def test_everyone_is_those_made_before_it_even_in_the_same_millisecond(
            self, store: Store, clock: FakeClock) -> None:
        await store.put_recipient(Recipient("acme", "old"))
        await store.put_preferences("acme", "prefs-only", {"opt_out": False})
        clock.ms += 10
        await store.put_recipient(Recipient("acme", "same-ms-before"))
        e = event("all", Audience.EVERYONE)
        done = await store.accept_event(e)  # the clock has not moved: the same millisecond
        assert done.event is not None and (done.event.cutoff, done.event.size) == (NOW + 10, 3)
        await store.put_recipient(Recipient("acme", "same-ms-after"))
        clock.ms += 1
        await store.put_recipient(Recipient("acme", "later"))
        await store.put_recipient(Recipient("other", "elsewhere"))
        await route_all(store, e, limit=1)
        assert sorted(u for u, _ in await reached(store, e)) == [
            "old", "prefs-only", "same-ms-before"]
        routed = await store.get_event("acme", "all")
        assert routed is not None and (routed.routed, routed.state) == (3, "routed")


class TestRouteChunk:
    async def test_every_member_once_per_kind_in_chunks_and_the_cursor_says_how_far(
            self, store: Store, clock: FakeClock) -> None:
        await store.put_topic("acme", "t")
        await store.change_members("acme", "t", ("a", "b", "c", "d", "e"), ())
        e = event(kinds=("k", "j"))
        await store.accept_event(e)
        first = await store.route_chunk("acme", "e1", ROUTES, 2)
        assert (first.recipients, first.done, len(first.made)) == (2, False, 4)
        assert {(m.inp.user_id, m.inp.kind, m.inp.dedup_key) for m in first.made} == {
            (u, k, event_key("e1", k)) for u in "ab" for k in "kj"}
        assert all(m.result.first_due == NOW for m in first.made)
        mid = await store.get_event("acme", "e1")
        assert mid is not None and (mid.cursor, mid.routed, mid.routed_at) == ("b", 2, None)
        assert [r.event_id for r in await store.routing_events(10)] == ["e1"]
        backlog = await store.routing_backlog()
        assert (backlog.events, backlog.oldest_at) == (1, NOW)
        clock.ms += 7
        assert await route_all(store, e, limit=2) == 2  # c, d; then e, done
        done = await store.get_event("acme", "e1")
        assert done is not None and (done.routed, done.routed_at, done.state) == (
            5, NOW + 7, "routed")
        assert await reached(store, e) == Counter({(u, k): 1 for u in "abcde" for k in "kj"})
        again = await store.route_chunk("acme", "e1", ROUTES, 2)
        assert (again.recipients, again.done, again.made) == (0, True, [])
        assert await store.routing_events(10) == []
        assert (await store.routing_backlog()).events == 0
        some = await store.event_notifications("acme", "e1", ("", ""), 1)
        n = await store.get_notification(some[0].id)
        assert n is not None and (n.event_id, n.dedup_key, n.user_id) == (
            "e1", event_key("e1", n.kind), "a")

    async def test_the_audience_is_frozen_at_acceptance(self, store: Store) -> None:
        await store.put_topic("acme", "t")
        await store.change_members("acme", "t", ("a", "b", "c"), ())
        e = event()
        await store.accept_event(e)
        await store.change_members("acme", "t", ("a2", "zz"), ("b",))  # after the event
        await route_all(store, e, limit=1)
        assert sorted(u for u, _ in await reached(store, e)) == ["a", "b", "c"]

    async def test_a_chunk_that_fails_is_routed_again_whole_and_nobody_gets_two(
            self, store: Store) -> None:
        await store.put_topic("acme", "t")
        await store.change_members("acme", "t", ("a", "b", "c", "d"), ())
        e = event()
        await store.accept_event(e)
        await store.route_chunk("acme", "e1", ROUTES, 2)  # a, b
        calls = []

        def broken(r: Recipient | None, now: int):  # type: ignore[no-untyped-def]
            calls.append(now)
            if len(calls) >= 2:  # from the chunk's second recipient on, the write fails
                raise RuntimeError("crash")
            return plan("a")(r, now)

        with pytest.raises(RuntimeError):
            await store.route_chunk("acme", "e1", {"k": KindRoute(broken, 3600)}, 2)
        mid = await store.get_event("acme", "e1")
        assert mid is not None and (mid.cursor, mid.routed) == ("b", 2)
        assert sorted(await reached(store, e)) == [("a", "k"), ("b", "k")]
        await route_all(store, e)
        assert await reached(store, e) == Counter({(u, "k"): 1 for u in "abcd"})

    async def test_a_reopened_store_resumes_at_the_cursor(self, url: str, clock: FakeClock
                                                          ) -> None:
        e = event("list", Audience.USERS, users=tuple("abcdefg"))
        async with opened(url, clock) as first:
            await first.accept_event(e)
            await first.route_chunk("acme", "list", ROUTES, 3)
        async with opened(url, clock) as second:
            assert [r.cursor for r in await second.routing_events(10)] == ["c"]
            assert await route_all(second, e, limit=3) == 2
            assert await reached(second, e) == Counter({(u, "k"): 1 for u in "abcdefg"})

    async def test_a_kind_not_routed_is_skipped_and_inbox_items_are_written(
            self, store: Store) -> None:
        await store.put_recipient(Recipient("acme", "a", locale="fr"))
        seen = []

        def item(user: str, nid: str, locale: str | None) -> InboxEntry:
            seen.append((user, locale))
            return InboxEntry(f"hello {user}", None)

        e = event("in", Audience.USERS, users=("a", "b"), kinds=("k", "gone"))
        await store.accept_event(e)
        await route_all(store, e, routes={"k": KindRoute(plan("a"), 3600, item)})
        assert sorted(await reached(store, e)) == [("a", "k"), ("b", "k")]
        assert sorted(seen) == [("a", "fr"), ("b", None)]
        [entry] = await store.inbox_page("acme", "a", None, 10)
        assert entry.title == "hello a"

    async def test_counts_say_how_the_notifications_stand(self, store: Store) -> None:
        await store.put_preferences("acme", "c", {"categories": {"limited": {"email": False}}})
        e = event("n", Audience.USERS, users=("a", "b", "c"), kinds=("limited",))
        await store.accept_event(e)
        await route_all(store, e, routes={"limited": KindRoute(plan("b"), 3600)})
        assert await store.event_counts("acme", "n") == {("pending", None): 3}
        await store.put_recipient(Recipient("acme", "a", contacts={"email": "a@x"}))
        claims = await claim(store, "b")
        assert [c.notification_id for c in claims] != []
        for c in claims:
            await store.complete(c, Completion(Outcome.SENT, StepState.SENT), RULES)
        assert await store.event_counts("acme", "n") == {
            ("sent", None): 1, ("suppressed", "no_contact"): 1, ("suppressed", "preference"): 1}
        assert await store.event_counts("acme", "nothing") == {}

    async def test_an_item_its_digest_carried_counts_digested_and_says_by_which(
            self, store: Store, clock: FakeClock) -> None:
        window = NOW + 3_600_000
        hold = Decision(Verdict.HOLD, "held for the daily digest", until=window, digest="daily")
        e = event("d", Audience.USERS, users=("a", "b"))
        await store.accept_event(e)
        await route_all(store, e)
        assert await claim(store, rules=dataclasses.replace(RULES, decide=lambda c, n: hold)) \
            == []
        due = [d for d in await store.due_digests(window, 10) if d.user_id == "a"]
        clock.ms = window
        members = await store.digest_members(due[0])
        assert (await store.make_digest(
            due[0], inp(user="a", dedup="digest:daily", kind="daily"), "n_d", plan("a"), 3600,
            None, [StepKey(m.notification_id, m.step_no) for m in members], 0)).created
        assert await store.event_counts("acme", "d") == {("digested", None): 1,
                                                         ("held", None): 1}
        page = await store.event_notifications("acme", "d", ("", ""), 10)
        assert [events.ladder_line(n, window).split("  ")[-1] for n in page] == [
            "0 a digested in n_d (held for the daily digest)",
            "0 a held (for the daily digest)"]


class TestRetention:
    async def test_routed_events_go_after_their_window_and_those_routing_stay(
            self, store: Store, clock: FakeClock) -> None:
        old = event("old", Audience.USERS, users=("a",))
        await store.accept_event(old)
        await route_all(store, old)
        await store.accept_event(event("stuck", Audience.USERS, users=("a",)))
        clock.ms += 10 * DAY
        await store.accept_event(event("young", Audience.USERS, users=("a",)))
        await route_all(store, event("young", Audience.USERS, users=("a",)))
        assert await store.prunable(Aged.EVENTS, 7 * DAY) == 1
        assert (await store.prune(Aged.EVENTS, 7 * DAY, "", 10)).removed == 1
        assert await store.get_event("acme", "old") is None
        assert await store.get_event("acme", "stuck") is not None
        assert await store.get_event("acme", "young") is not None
        assert await store.prunable(Aged.EVENTS, 7 * DAY) == 0

    async def test_an_ended_membership_goes_once_no_routing_event_pins_it(
            self, store: Store, clock: FakeClock) -> None:
        await store.put_topic("acme", "t")
        await store.change_members("acme", "t", ("a", "b", "c"), ())
        pinned = event("pinned")
        await store.accept_event(pinned)  # version 1: a, b, c
        await store.change_members("acme", "t", (), ("a", "b"))
        await store.change_members("acme", "t", ("b",), ())
        await store.change_members("acme", "t", (), ("b",))  # b's second membership ended too
        clock.ms += 10 * DAY
        assert await store.prunable(Aged.MEMBERS, 7 * DAY) == 1  # b's second: pinned by none
        assert (await store.prune(Aged.MEMBERS, 7 * DAY, "", 10)).removed == 1
        await route_all(store, pinned, limit=1)
        assert sorted(u for u, _ in await reached(store, pinned)) == ["a", "b", "c"]
        assert await store.prunable(Aged.MEMBERS, 7 * DAY) == 2  # routed: a's and b's first
        assert (await store.prune(Aged.MEMBERS, 7 * DAY, "", 1)).after == "more"
        assert (await store.prune(Aged.MEMBERS, 7 * DAY, "", 10)).removed == 1
        assert await members_at(store) == ["c"]
        fresh = event("fresh")
        await store.accept_event(fresh)
        await route_all(store, fresh)
        assert list(await reached(store, fresh)) == [("c", "k")]


def test_an_event_input_is_frozen() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        event().event_id = "x"  # type: ignore[misc]
