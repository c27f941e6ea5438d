"""The SQLite write path: one thread, one connection, group commit, and storage faults named.

Writes are scripts (store/core) run on the writer thread's connection, each with its own `Tx`
whose `now` is read from the injected clock as the script starts, inside the transaction, and
never goes back; the writer takes every script queued while the last commit ran, runs them
inside one BEGIN IMMEDIATE, and commits once (group commit). A failing operation makes the
batch replay with a SAVEPOINT around each op, so it fails alone; every caller is answered only
after the commit that holds its rows.

Storage faults (disk full, I/O error, read-only, the file deleted or replaced under us) fail the
ops as StorageError, logged once per 10 s, and the writer recovers by itself when the disk does,
except for a file that is gone: that needs a restart, and says so. Ops that may be shed (accepts)
are refused with Overloaded once `max_queue` of them wait, instead of queueing without bound.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import queue
import sqlite3
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

from notifyd.core.clock import Clock, SystemClock
from notifyd.core.logs import RateLimit
from notifyd.store.base import Overloaded, StorageError, StoreClosed
from notifyd.store.core.tx import Script, Tx
from notifyd.store.sqlite.tx import SqliteTx

T = TypeVar("T")
Op = Script[Any]
_Item = tuple[Op, "asyncio.Future[Any]", bool]
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
    """One thread owns the connection and commits batch after batch on its own: how often it
    commits depends on the disk, never on how busy the event loop is (under a flood the loop's
    turns grow long, and a writer driven by them committed a few times a second)."""

    def __init__(self, path: str, connect: Callable[[], sqlite3.Connection], clock: Clock,
                 max_queue: int = 0) -> None:
        self.path = path
        self.clock = clock
        self._last_now = 0  # the latest time a script recorded: the next never records less
        self._txo: SqliteTx | None = None
        self.max_queue = max_queue  # 0: no limit
        self._connect = connect
        self._conn: sqlite3.Connection | None = None
        self._ops: queue.SimpleQueue[_Item | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._closing = False
        self._identity: tuple[int, int] | None = None
        self._queued = 0  # sheddable ops handed over (written on the event loop only)
        self._taken = 0  # sheddable ops taken into a batch (written on the writer thread only)
        self._fault: str | None = None  # the last storage fault (see `fault`)
        self._fault_at = 0.0
        self.lost: str | None = None  # the file is gone: writes stop until a restart
        self._warn = RateLimit(SystemClock(), 10_000)
        self.commits = 0  # batches committed, for benchmarks and tests of group commit
        self.writes = 0  # operations committed or failed

    @property
    def sheddable(self) -> int:
        """Sheddable ops (accepts) queued and not yet taken into a batch."""
        return self._queued - self._taken

    async def open(self) -> None:
        loop = self._loop = asyncio.get_running_loop()
        ready: asyncio.Future[None] = loop.create_future()
        self._thread = threading.Thread(target=self._serve, args=(ready,), name="notifyd-writer",
                                        daemon=True)
        self._thread.start()
        await ready
        self._remember_file()

    def _remember_file(self) -> None:
        """The file this writer opened, to tell it from one put in its place (`_replaced`)."""
        st = os.stat(self.path)
        self._identity = (st.st_dev, st.st_ino)

    async def close(self) -> None:
        """Commit what is queued, then close the connection and end the thread."""
        if self._thread is None or self._closing:
            return
        self._closing = True
        self._ops.put(None)
        await asyncio.to_thread(self._thread.join)

    async def write(self, op: Script[T], shed: bool = False) -> T:
        """Run `op` inside a transaction; return once its commit is durable. With shed=True the
        op is refused at once (Overloaded) when max_queue sheddable ops already wait."""
        if self._thread is None or self._closing or self._loop is None:
            raise StoreClosed("store is not open")
        if self.lost:
            raise StorageError(self.lost)
        if shed and self.max_queue and self.sheddable >= self.max_queue:
            raise Overloaded(f"{self.sheddable} writes are waiting")
        fut: asyncio.Future[T] = self._loop.create_future()
        self._queued += shed
        self._ops.put((op, fut, shed))
        return await fut

    def _serve(self, ready: asyncio.Future[None]) -> None:
        """The writer thread: connect, then take every op queued while the last batch ran and
        commit them together, until close() queues None."""
        try:
            self._conn = self._connect()
        except BaseException as e:  # noqa: BLE001 - open() raises it on the loop
            self._post(_settle, ready, (False, e))
            return
        self._post(_settle, ready, (True, None))
        try:
            done = False
            while not done:
                first = self._ops.get()
                if first is None:
                    break
                batch = [first]
                while len(batch) < BATCH_MAX:
                    try:
                        item = self._ops.get_nowait()
                    except queue.Empty:
                        break
                    if item is None:
                        done = True
                        break
                    batch.append(item)
                sheds = sum(shed for _, _, shed in batch)
                self._taken += sheds
                outcomes = self._run([op for op, _, _ in batch], sheds > 0)
                self.commits += 1
                self.writes += len(batch)
                self._post(_answer, batch, outcomes)
        finally:
            self._conn.close()
            self._conn = None
            self._answer_left()

    def _answer_left(self) -> None:
        """Ops queued after close() began (none, normally) are told the store closed."""
        left: list[_Item] = []
        while True:
            try:
                item = self._ops.get_nowait()
            except queue.Empty:
                break
            if item is not None:
                left.append(item)
        if left:
            self._post(_answer, left, [(False, StoreClosed("store closed"))] * len(left))

    def _post(self, fn: Callable[..., None], *args: Any) -> None:
        assert self._loop is not None
        with contextlib.suppress(RuntimeError):  # the loop closed: nobody waits any more
            self._loop.call_soon_threadsafe(fn, *args)

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
                outcomes: list[tuple[bool, Any]] = [(True, op(self._tx(conn))) for op in ops]
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
            result = op(self._tx(conn))
        except Exception as e:  # noqa: BLE001 - the op fails alone; the batch goes on
            conn.execute("ROLLBACK TO op")
            conn.execute("RELEASE op")
            return False, self._storage(e)
        conn.execute("RELEASE op")
        return True, result

    def _tx(self, conn: sqlite3.Connection) -> SqliteTx:
        """A script's transaction, at the clock's time now, or at the last one recorded if the
        clock went back (an NTP step): times in commit order, always. Scripts run one at a time
        on this thread, so one Tx serves them all, its `now` set for each."""
        tx = self._txo
        if tx is None or tx.c is not conn:
            tx = self._txo = SqliteTx(conn, 0)
        now = self.clock.now_ms()
        tx.now = self._last_now = now if now > self._last_now else self._last_now
        return tx

    def _fault_of(self, e: BaseException) -> str | None:
        """What `e` says is wrong with the storage (for /readyz and the log); None: `e` is the
        statement's own error."""
        fault = storage_fault(e)
        return None if fault is None else f"{fault} ({self.path})"

    def _storage(self, e: BaseException) -> BaseException:
        """A storage fault as StorageError (logged, rate-limited); any other error as it is."""
        fault = self._fault_of(e)
        if fault is None:
            return e
        self._fault, self._fault_at = fault, time.monotonic()
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


def _settle(fut: asyncio.Future[Any], outcome: tuple[bool, Any]) -> None:
    _answer([(_noop, fut, False)], [outcome])


def _noop(_: Tx) -> None:
    return None


def _answer(batch: list[_Item], outcomes: list[tuple[bool, Any]]) -> None:
    for (_, fut, _), (ok, value) in zip(batch, outcomes, strict=True):
        if fut.done():
            continue
        if ok:
            fut.set_result(value)
        else:
            fut.set_exception(value)
