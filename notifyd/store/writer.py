"""The SQLite write path: one thread, one connection, group commit, and storage faults named.

Writes are functions run on the writer thread's connection; the writer takes every operation
queued while the last commit ran, runs them inside one BEGIN IMMEDIATE, and commits once (group
commit). A failing operation makes the batch replay with a SAVEPOINT around each op, so it fails
alone; every caller is answered only after the commit that holds its rows.

Storage faults (disk full, I/O error, read-only, the file deleted or replaced under us) fail the
ops as StorageError, logged once per 10 s, and the writer recovers by itself when the disk does,
except for a file that is gone: that needs a restart, and says so. Ops that may be shed (accepts)
are refused with Overloaded once `max_queue` of them wait, instead of queueing without bound.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sqlite3
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from notifyd.clock import SystemClock
from notifyd.logs import RateLimit
from notifyd.store.base import Overloaded, StorageError, StoreClosed

T = TypeVar("T")
Op = Callable[[sqlite3.Connection], Any]
log = logging.getLogger("notifyd.store")
BATCH_MAX = 1024
FAULT_WINDOW_SEC = 30.0
# SQLite primary result codes that mean the storage, not the statement, is at fault.
STORAGE_FAULTS = {8: "the database is read-only", 10: "disk I/O error",
                  13: "the disk is full", 14: "the database file cannot be opened"}


def storage_fault(e: BaseException) -> str | None:
    """What is wrong with the storage, if `e` says so."""
    code = getattr(e, "sqlite_errorcode", None)
    return STORAGE_FAULTS.get(code & 0xFF) if isinstance(code, int) else None


class Writer:
    def __init__(self, path: str, connect: Callable[[], sqlite3.Connection],
                 max_queue: int = 0) -> None:
        self.path = path
        self.max_queue = max_queue  # 0: no limit
        self._connect = connect
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="notifyd-writer")
        self._conn: sqlite3.Connection | None = None
        self._queue: asyncio.Queue[tuple[Op, asyncio.Future[Any], bool]] = asyncio.Queue()
        self._task: asyncio.Task[None] | None = None
        self._identity: tuple[int, int] | None = None
        self.sheddable = 0  # queued ops that may be shed
        self._fault: str | None = None  # the last storage fault (see `fault`)
        self._fault_at = 0.0
        self.lost: str | None = None  # the file is gone: writes stop until a restart
        self._warn = RateLimit(SystemClock(), 10_000)
        self.commits = 0  # batches committed, for benchmarks and tests of group commit
        self.writes = 0  # operations committed or failed

    async def open(self) -> None:
        self._conn = await asyncio.get_running_loop().run_in_executor(self._pool, self._connect)
        st = os.stat(self.path)
        self._identity = (st.st_dev, st.st_ino)
        self._task = asyncio.create_task(self._loop(), name="store-writer")

    def shutdown_pool(self) -> None:
        self._pool.shutdown(wait=False)

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None
        while not self._queue.empty():
            _, fut, _ = self._queue.get_nowait()
            if not fut.done():
                fut.set_exception(StoreClosed("store closed"))
        if self._conn is not None:
            conn, self._conn = self._conn, None
            await asyncio.get_running_loop().run_in_executor(self._pool, conn.close)
        self._pool.shutdown(wait=True)

    async def write(self, op: Callable[[sqlite3.Connection], T], shed: bool = False) -> T:
        """Run `op` inside a transaction; return once its commit is durable. With shed=True the
        op is refused at once (Overloaded) when max_queue sheddable ops already wait."""
        if self._task is None:
            raise StoreClosed("store is not open")
        if self.lost:
            raise StorageError(self.lost)
        if shed and self.max_queue and self.sheddable >= self.max_queue:
            raise Overloaded(f"{self.sheddable} writes are waiting")
        fut: asyncio.Future[T] = asyncio.get_running_loop().create_future()
        self.sheddable += shed
        self._queue.put_nowait((op, fut, shed))
        return await fut

    async def _loop(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            batch = [await self._queue.get()]
            while not self._queue.empty() and len(batch) < BATCH_MAX:
                batch.append(self._queue.get_nowait())
            self.sheddable -= sum(shed for _, _, shed in batch)
            sheds = any(shed for _, _, shed in batch)
            running = loop.run_in_executor(self._pool, self._run, [op for op, _, _ in batch],
                                           sheds)
            try:
                outcomes = await asyncio.shield(running)
            except asyncio.CancelledError:
                # Closing: the batch in the thread will commit regardless; answer its callers.
                _answer(batch, await running)
                raise
            _answer(batch, outcomes)
            self.commits += 1
            self.writes += len(batch)

    @property
    def fault(self) -> str | None:
        """A storage fault of the last FAULT_WINDOW_SEC, until an accept commits again: a full
        disk may still take a tiny write, so only real traffic says it has recovered."""
        if self.lost:
            return self.lost
        if self._fault and time.monotonic() - self._fault_at < FAULT_WINDOW_SEC:
            return self._fault
        return None

    def _run(self, ops: list[Op], sheds: bool = False) -> list[tuple[bool, Any]]:
        """Commit all of `ops` together: the fast path runs them bare; if one raises, the batch
        is rolled back and replayed with a SAVEPOINT around each op, so only that op fails."""
        conn = self._conn
        assert conn is not None
        if self.lost or self._replaced():
            return [(False, StorageError(self.lost or ""))] * len(ops)
        try:
            conn.execute("BEGIN IMMEDIATE")
            try:
                outcomes: list[tuple[bool, Any]] = [(True, op(conn)) for op in ops]
            except Exception:  # noqa: BLE001 - replayed one by one below
                conn.execute("ROLLBACK")
                conn.execute("BEGIN IMMEDIATE")
                outcomes = [self._isolated(conn, op) for op in ops]
            conn.execute("COMMIT")
        except sqlite3.Error as e:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            return [(False, self._storage(e))] * len(ops)
        if sheds and all(ok for ok, _ in outcomes):
            self._fault = None
        return outcomes

    def _isolated(self, conn: sqlite3.Connection, op: Op) -> tuple[bool, Any]:
        conn.execute("SAVEPOINT op")
        try:
            result = op(conn)
        except Exception as e:  # noqa: BLE001 - the op fails alone; the batch goes on
            conn.execute("ROLLBACK TO op")
            conn.execute("RELEASE op")
            return False, self._storage(e)
        conn.execute("RELEASE op")
        return True, result

    def _storage(self, e: BaseException) -> BaseException:
        """A storage fault as StorageError (logged, rate-limited); any other error as it is."""
        fault = storage_fault(e)
        if fault is None:
            return e
        self._fault, self._fault_at = f"{fault} ({self.path})", time.monotonic()
        held = self._warn.allow()
        if held is not None:
            more = f"; {held} more failed writes since the last line" if held else ""
            log.error("storage unavailable: %s; answering 503 until it recovers%s",
                      self._fault, more)
        return StorageError(self._fault)

    def _replaced(self) -> bool:
        """The file we write is no longer the one at our path (deleted, or replaced)."""
        try:
            st = os.stat(self.path)
            same = (st.st_dev, st.st_ino) == self._identity
        except OSError:
            same = False
        if not same:
            self.lost = (f"the database file {self.path} was deleted or replaced while notifyd "
                         "ran; nothing more is accepted: restore it (notifyd backup keeps "
                         "copies) and restart notifyd")
            log.critical("%s", self.lost)
        return not same


def _answer(batch: list[tuple[Op, asyncio.Future[Any], bool]],
            outcomes: list[tuple[bool, Any]]) -> None:
    for (_, fut, _), (ok, value) in zip(batch, outcomes, strict=True):
        if fut.done():
            continue
        if ok:
            fut.set_result(value)
        else:
            fut.set_exception(value)
