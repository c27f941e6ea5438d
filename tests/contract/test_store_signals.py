"""Signals between processes on one database: an accept in one process wakes the scanner of
another, and an inbox item committed in one reaches the streams of another (store.watch). A
backend no other process writes (SQLite) has nothing to hear: watch returns at once."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from store_support import BACKENDS, NOW, accept, opened

from notifyd.core.clock import FakeClock
from notifyd.core.records import InboxEntry
from notifyd.store import Store


@pytest.fixture(params=sorted(BACKENDS))
async def pair(request: pytest.FixtureRequest,
               tmp_path: Path) -> AsyncIterator[tuple[Store, Store]]:
    url = BACKENDS[request.param](tmp_path, "signals.db")
    clock = FakeClock(NOW)
    async with opened(url, clock) as a, opened(url, clock) as b:
        yield a, b


async def test_an_accept_in_one_process_wakes_another(pair: tuple[Store, Store]) -> None:
    a, b = pair
    due: asyncio.Queue[int] = asyncio.Queue()
    items: asyncio.Queue[tuple[str, str]] = asyncio.Queue()
    stop = asyncio.Event()
    watching = asyncio.create_task(a.watch(due.put_nowait, lambda t, u: items.put_nowait((t, u)),
                                           stop))
    if not a.shared:
        await asyncio.wait_for(watching, 5)  # one process: nothing to hear
        return
    try:
        await asyncio.sleep(0.2)  # LISTEN is in place (a signal before it is the poll's)
        await accept(a, "n_own", "a")  # a's own accept: it told itself already
        await accept(b, "n_1", "a", gap=5_000)
        assert await asyncio.wait_for(due.get(), 5) == NOW
        await accept(b, "n_2", "a", user="u2", inbox=InboxEntry("t", "b"))
        assert await asyncio.wait_for(items.get(), 5) == ("acme", "u2")
        assert await asyncio.wait_for(due.get(), 5) == NOW
        assert due.empty() and items.empty()
    finally:
        stop.set()
        await asyncio.wait_for(watching, 5)
