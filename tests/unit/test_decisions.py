"""The decisions feed (notifyd tail): a follower sees its tenant's entries of its key's kinds,
narrowed by its filter; one too slow loses the newest, counted, and never holds memory; the
stream refuses what it cannot follow."""

from __future__ import annotations

import asyncio

import pytest
from support import Api

from notifyd.engine.decisions import FOLLOWERS_MAX, QUEUE_MAX, Entry, Feed, Filter


def _entry(n: int = 0, tenant: str = "acme", kind: str = "alert", channel: str | None = "sms",
           user_id: str = "ada") -> Entry:
    return Entry(1_790_000_000_000 + n, "sent", f"n_{n}", 0, channel, tenant, user_id, kind)


async def test_a_follower_sees_its_tenants_entries_that_its_filter_picks() -> None:
    feed = Feed()
    everything = feed.follow(Filter("acme"))
    narrow = feed.follow(Filter("acme", ("alert", "page"), kind="alert", channel="sms",
                                user_id="ada"))
    assert everything is not None and narrow is not None
    feed.publish(_entry(1), _entry(2, tenant="globex"), _entry(3, kind="page"),
                 _entry(4, channel="email"), _entry(5, user_id="bo"), _entry(6, kind="other"))
    assert [e.notification_id for e in _drain(everything)] == ["n_1", "n_3", "n_4", "n_5", "n_6"]
    assert [e.notification_id for e in _drain(narrow)] == ["n_1"]
    limited = feed.follow(Filter("acme", ("page",)))  # a key for some kinds sees only those
    assert limited is not None
    feed.publish(_entry(7), _entry(8, kind="page"))
    assert [e.notification_id for e in _drain(limited)] == ["n_8"]


def _drain(follower: object) -> list[Entry]:
    queue = follower.queue  # type: ignore[attr-defined]
    return [queue.get_nowait() for _ in range(queue.qsize())]


async def test_a_slow_follower_loses_the_newest_and_is_told_how_many() -> None:
    feed = Feed()
    follower = feed.follow(Filter("acme"))
    assert follower is not None
    feed.publish(*(_entry(n) for n in range(QUEUE_MAX + 25)))
    assert follower.queue.qsize() == QUEUE_MAX and follower.take_lost() == 25
    assert follower.take_lost() == 0
    first = await follower.next(1.0)
    assert first is not None and first.notification_id == "n_0"


async def test_next_ends_on_a_stop_and_on_quiet() -> None:
    feed = Feed()
    follower = feed.follow(Filter("acme"))
    assert follower is not None
    stop = asyncio.Event()
    waiting = asyncio.create_task(follower.next(60.0, stop))
    await asyncio.sleep(0)
    stop.set()
    assert await waiting is None
    assert await follower.next(0.001) is None
    feed.leave(follower)
    feed.publish(_entry())
    assert follower.queue.empty()


def test_at_most_so_many_follow_at_once() -> None:
    feed = Feed()
    followers = [feed.follow(Filter("acme")) for _ in range(FOLLOWERS_MAX)]
    assert None not in followers and feed.follow(Filter("acme")) is None


@pytest.mark.parametrize(("query", "status", "code"), [
    ("?kind=nope", 422, "unknown_kind"),
    ("?channel=nope", 422, "invalid_field"),
    ("?user=ada", 422, "unknown_field"),
])
async def test_the_stream_refuses_what_it_cannot_follow(api: Api, query: str, status: int,
                                                        code: str) -> None:
    got, body = await api.get(f"/v1/decisions/stream{query}")
    assert (got, body["error"]["code"]) == (status, code)


async def test_the_stream_needs_a_key_that_may_read(api: Api) -> None:
    assert (await api.get("/v1/decisions/stream", key="nfy_nobody"))[0] == 401
    poster = await api.new_key(scopes=frozenset({"post"}))
    got, body = await api.get("/v1/decisions/stream", key=poster)
    assert (got, body["error"]["code"]) == (403, "scope_not_allowed")
