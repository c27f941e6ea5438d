"""Plain helpers the tests share: the test config, an in-process API client, direct row reads.

Fixtures that build these live in conftest.py; anything a test imports by name lives here.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import threading
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager, closing
from pathlib import Path
from typing import Any

from aiohttp.test_utils import TestClient

from notifyd.config import (
    ChannelConfig,
    Config,
    KindConfig,
    LadderStep,
    ServerConfig,
    StoreConfig,
    validate,
)
from notifyd.core.clock import FakeClock
from notifyd.core.models import SCOPES
from notifyd.http.auth import hash_key, new_key
from notifyd.store import Notification
from notifyd.store.core.store import CoreStore
from notifyd.store.sqlite.settings import SqliteSettings

START_MS = 1_790_000_000_000  # 2026-09-21T14:13:20Z; FakeClock's own default, named here
ALERT_STEPS = 3  # the "alert" kind's ladder length


def make_config(db_path: str | Path, synchronous: str = "FULL",
                kinds: dict[str, KindConfig] | None = None) -> Config:
    """Three log-type channels and three kinds that cover override, fixed and urgent ladders."""
    channels = {"log": ChannelConfig(), "sms": ChannelConfig(), "email": ChannelConfig()}
    if kinds is None:
        kinds = {
            "alert": KindConfig(ladder=(LadderStep("log", timeout_sec=30),
                                        LadderStep("sms", timeout_sec=60),
                                        LadderStep("email")), allow_override=True),
            "fixed": KindConfig(ladder=(LadderStep("email"),)),
            "page": KindConfig(ladder=(LadderStep("sms", timeout_sec=30), LadderStep("email")),
                               urgency="urgent"),
        }
    return validate(Config(server=ServerConfig(port=0),
                           store=StoreConfig(url=str(db_path),
                                             sqlite=SqliteSettings(synchronous=synchronous)),
                           channels=channels, kinds=kinds))


def query(db_path: str | Path, sql: str, *args: Any) -> list[tuple[Any, ...]]:
    """Rows read on a connection of our own, as any other process would see them."""
    with closing(sqlite3.connect(db_path)) as conn:
        return conn.execute(sql, args).fetchall()


def count(db_path: str | Path, table: str) -> int:
    return int(query(db_path, f"SELECT count(*) FROM {table}")[0][0])


class Api:
    """An in-process client of the real app with a bearer key; answers are (status, json)."""

    def __init__(self, client: TestClient[Any, Any], store: CoreStore, clock: FakeClock,
                 db_path: Path) -> None:
        self.client = client
        self.store = store
        self.clock = clock
        self.db_path = db_path
        self.key = ""
        self._keys = 0

    async def new_key(self, tenant: str = "acme", kinds: tuple[str, ...] = (),
                      scopes: frozenset[str] = SCOPES) -> str:
        self._keys += 1
        key = new_key()
        await self.store.create_key(hash_key(key), f"k{self._keys}", tenant, kinds, scopes)
        return key

    async def call(self, method: str, path: str, body: Any = None, *, key: str | None = None,
                   headers: dict[str, str] | None = None,
                   raw: bytes | None = None) -> tuple[int, Any]:
        sent = dict(headers or {})
        key = self.key if key is None else key
        if key:
            sent["Authorization"] = f"Bearer {key}"
        data = raw if raw is not None else (None if body is None else json.dumps(body))
        if data is not None:
            sent.setdefault("Content-Type", "application/json")
        async with self.client.request(method, path, data=data, headers=sent) as resp:
            return resp.status, None if resp.status == 204 else await resp.json()

    async def post(self, body: Any, **kw: Any) -> tuple[int, Any]:
        return await self.call("POST", "/v1/notifications", body, **kw)

    async def get(self, path: str, **kw: Any) -> tuple[int, Any]:
        return await self.call("GET", path, **kw)

    async def record(self, nid: str) -> Notification:
        """The notification as the store reads it (any backend)."""
        n = await self.store.get_notification(nid)
        assert n is not None, nid
        return n

    def count(self, table: str) -> int:
        return count(self.db_path, table)


@asynccontextmanager
async def holding_the_writer(store: CoreStore) -> AsyncIterator[Callable[[], None]]:
    """The SQLite writer busy with a write of our own until the test calls what this yields:
    writes queued meanwhile then go in the writer's next batch together."""
    entered, gate = threading.Event(), threading.Event()

    def hold(_: Any) -> None:
        entered.set()
        gate.wait(30)

    blocker = asyncio.ensure_future(store.backend.write(hold))
    await asyncio.to_thread(entered.wait, 30)
    try:
        yield gate.set
    finally:
        gate.set()
        await blocker


async def queued(store: CoreStore, n: int) -> None:
    """Until `n` writes wait in the SQLite writer's queue (bounded)."""
    writer = store.backend.writer
    deadline = time.monotonic() + 30
    while writer._ops.qsize() < n:
        assert time.monotonic() < deadline, "the writes never queued"
        await asyncio.sleep(0.001)
