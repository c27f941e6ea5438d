"""Digest windows on the recipient's wall clock (across DST changes), and the inbox badge
against its rows under any mix of writes, reads, read-alls and archives (hypothesis)."""

from __future__ import annotations

import asyncio
import tempfile
from datetime import datetime
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from notifyd.core.clock import FakeClock
from notifyd.core.models import AcceptInput, Lane, PlannedStep, StepState
from notifyd.core.records import InboxEntry
from notifyd.domain.ladder import window_end
from notifyd.store import open_store
from notifyd.store.core.store import CoreStore
from notifyd.store.sqlite.settings import SqliteSettings

PARIS = ZoneInfo("Europe/Paris")


def ms(text: str, tz: ZoneInfo = PARIS) -> int:
    return int(datetime.fromisoformat(text).replace(tzinfo=tz).timestamp() * 1000)


def local(at_ms: int, tz: ZoneInfo = PARIS) -> str:
    return datetime.fromtimestamp(at_ms / 1000, tz).isoformat()


@pytest.mark.parametrize(("held", "closes"), [
    # Spring forward (2026-03-29 02:00 -> 03:00): the window that spans it is 23 hours long.
    ("2026-03-28T10:00:00", "2026-03-29T09:00:00+02:00"),
    ("2026-03-29T08:59:59", "2026-03-29T09:00:00+02:00"),
    ("2026-03-29T09:00:00", "2026-03-30T09:00:00+02:00"),
    # Fall back (2026-10-25 03:00 -> 02:00): 25 hours, and still 09:00 on the clock.
    ("2026-10-24T09:30:00", "2026-10-25T09:00:00+01:00"),
    ("2026-10-25T02:30:00", "2026-10-25T09:00:00+01:00"),
])
def test_a_daily_digest_closes_at_nine_on_the_recipients_clock(held: str, closes: str) -> None:
    assert local(window_end("daily 09:00", ms(held), "Europe/Paris")) == closes


def test_the_windows_around_a_dst_change_are_23_and_25_hours_long() -> None:
    spring = window_end("daily 09:00", ms("2026-03-28T09:00:00"), "Europe/Paris")
    assert spring - ms("2026-03-28T09:00:00") == 23 * 3600_000
    autumn = window_end("daily 09:00", ms("2026-10-24T09:00:00"), "Europe/Paris")
    assert autumn - ms("2026-10-24T09:00:00") == 25 * 3600_000


def test_hourly_and_weekly_windows_and_an_unknown_zone() -> None:
    assert local(window_end("hourly", ms("2026-03-29T01:30:00"), "Europe/Paris")) == \
        "2026-03-29T03:00:00+02:00"  # the next top of the hour, past the skipped one
    assert local(window_end("weekly mon 08:00", ms("2026-11-30T08:00:00"), "Europe/Paris")) == \
        "2026-12-07T08:00:00+01:00"  # a Monday at 08:00 closes the next Monday's window
    assert local(window_end("weekly mon 08:00", ms("2026-12-02T12:00:00"), "Europe/Paris")) == \
        "2026-12-07T08:00:00+01:00"
    utc = ZoneInfo("UTC")
    assert local(window_end("daily 09:00", ms("2026-06-01T10:00:00", utc), "Mars/Olympus"),
                 utc) == "2026-06-02T09:00:00+00:00"


# --- the badge is the count of unread rows, whatever happens ---------------------------------

OPS = st.lists(st.one_of(
    st.tuples(st.just("write"), st.sampled_from(["ada", "bob"])),
    st.tuples(st.just("read"), st.integers(0, 40)),
    st.tuples(st.just("archive"), st.integers(0, 40)),
    st.tuples(st.just("read_all"), st.sampled_from(["ada", "bob"])),
), max_size=40)


async def _run(store: CoreStore, clock: FakeClock, ops: list[tuple[str, object]]) -> None:
    made: list[tuple[str, str]] = []
    for op, arg in ops:
        clock.advance(0.001)
        if op == "write":
            user = str(arg)
            nid = f"n_{len(made):018d}"
            inp = AcceptInput("t", user, "k", {}, None, None, None, "h", "key")
            await store.accept(inp, nid, lambda _, now: (
                [PlannedStep(0, "log", now, StepState.CANCELLED)], Lane.BULK), 60,
                InboxEntry("title", None))
            made.append((user, nid))
        elif op in ("read", "archive") and made:
            user, nid = made[int(str(arg)) % len(made)]
            if op == "read":
                await store.read_item("t", user, nid, frozenset())
            else:
                await store.archive_item("t", user, nid)
        elif op == "read_all":
            await store.read_all("t", str(arg), frozenset())
    for user in ("ada", "bob"):
        unread = sum(1 for item in await store.inbox_page("t", user, None, 1000, archived=True)
                     if item.read_at is None and item.archived_at is None)
        assert await store.badge("t", user) == unread, (user, ops)


@settings(max_examples=60, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(ops=OPS)
def test_the_badge_equals_the_unread_rows_after_any_mix(ops: list[tuple[str, object]]) -> None:
    async def scenario() -> None:
        with tempfile.TemporaryDirectory() as folder:
            clock = FakeClock()
            store = await open_store(str(Path(folder) / "n.db"), clock,
                                     sqlite=SqliteSettings(synchronous="NORMAL"))
            assert isinstance(store, CoreStore)
            try:
                await _run(store, clock, ops)
            finally:
                await store.close()

    asyncio.run(scenario())
