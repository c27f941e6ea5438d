"""PostgreSQL across a slow network: with 50 ms each way between the store and the server, the
event loop keeps turning while claims, accepts, the scanner's next-due read and an inbox stream
run, since no round trip to the server runs on the loop's thread."""

from __future__ import annotations

import asyncio
import time
from urllib.parse import urlsplit

import pg_support
import pytest
from fake_tcp import Process
from store_support import NOW, accept, claim, opened

from notifyd.core.clock import FakeClock
from notifyd.core.models import Lane, Route
from notifyd.core.records import InboxEntry
from notifyd.store import Store

pytestmark = pytest.mark.skipif(pg_support.SERVER == "off", reason="no PostgreSQL")
DELAY = 0.05  # seconds each way: a round trip on the loop's thread would hold it >= 100 ms
# The bound on the loop's worst lateness. A round trip held on the loop costs >= 100 ms here;
# what the loop does between awaits (encoding rows, a 2-core machine shared with other work)
# stays far below 40 ms, so the bound tells the two apart without ever flaking on a busy host.
LAG_BOUND = 0.040
TICK = 0.005


def server() -> tuple[str, int]:
    parts = urlsplit(pg_support.SERVER)
    return parts.hostname or "127.0.0.1", parts.port or 5432


async def worst_lag(stop: asyncio.Event) -> float:
    """How late the loop woke a task that sleeps TICK at a time, at worst, until `stop`."""
    worst = 0.0
    while not stop.is_set():
        start = time.monotonic()
        await asyncio.sleep(TICK)
        worst = max(worst, time.monotonic() - start - TICK)
    return worst


async def test_no_round_trip_holds_the_event_loop() -> None:
    url = pg_support.migrated_url()
    with Process(server(), DELAY) as proxy:
        async with opened(proxy.url(url), FakeClock(NOW)) as s:
            await work(s, "w", 1)  # connected and every module imported, before the watch
            stop = asyncio.Event()
            lag = asyncio.create_task(worst_lag(stop))
            started = time.monotonic()
            await work(s, "m", 2)
            took = time.monotonic() - started
            stop.set()
            worst = await lag
    assert took >= 2 * 2 * DELAY, "the proxy's delay did not apply"
    assert worst < LAG_BOUND, f"the event loop was held {worst * 1000:.0f} ms"


async def work(s: Store, tag: str, rounds: int) -> None:
    """Accepts with inbox items on two producers, claims with a read of the due times after
    each, and an inbox stream reading what came, all at once."""
    async def produce(who: str) -> None:
        for i in range(rounds):
            await accept(s, f"n_{tag}{who}{i}", "a", inbox=InboxEntry(f"item {i}", None))

    async def scan() -> None:
        for _ in range(rounds):
            await claim(s, n=5)
            await s.due_times([Route("a", Lane.BULK)], 100)

    async def stream() -> None:
        last = 0
        for _ in range(rounds):
            for item in await s.inbox_since("acme", "u1", last, 100):
                last = item.seq

    await asyncio.gather(produce("x"), produce("y"), scan(), stream())
