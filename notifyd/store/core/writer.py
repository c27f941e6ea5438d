"""The write path every dialect runs: one thread, one connection, group commit, storage faults
named, accepts shed when too many wait.

Writes are scripts (store/core) queued from the event loop; the writer thread takes every script
queued while the last commit ran and hands them to its dialect as one batch (`_run`: one
transaction, or what the dialect must do instead), then answers every caller, each only after
the commit that holds its rows. Each script's `Tx` records a `now` read from the injected clock
as the script starts, inside the transaction, that never goes back (`_now`).

What a dialect brings, as hooks: `_run` (the batch's transactions), `_fault_of` (an error that
says the storage, not the statement, failed: logged once per 10 s, and answered as
StorageError), and `_opened` (anything to note once connected). Ops that may be shed (accepts)
are refused with Overloaded once `max_queue` of them wait, instead of queueing without bound.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import queue
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any, Generic, Protocol, TypeVar

from notifyd.core.clock import Clock, SystemClock
from notifyd.core.logs import RateLimit
from notifyd.core.models import Due
from notifyd.store.base import Overloaded, StorageError, StoreClosed
from notifyd.store.core.tx import Script, Tx

T = TypeVar("T")
Op = Script[Any]
Outcome = tuple[bool, Any]  # (True, the script's result) or (False, what it raised)
_Item = tuple[Op, "asyncio.Future[Any]", bool]
log = logging.getLogger("notifyd.store")
BATCH_MAX = 1024
LINGER_SEC = 0.002  # the longest a batch waits for more while ops keep arriving
LINGER_GAP_SEC = 0.001  # a nap of the linger: one that brings no op ends the batch
FAULT_WINDOW_SEC = 30.0


class Connection(Protocol):
    def close(self) -> None: ...


C = TypeVar("C", bound=Connection)


class Writer(ABC, Generic[C]):
    """One thread owns the connection and commits batch after batch on its own: how often it
    commits depends on the disk, never on how busy the event loop is (under a flood the loop's
    turns grow long, and a writer driven by them committed a few times a second)."""

    def __init__(self, where: str, connect: Callable[[], C], clock: Clock,
                 max_queue: int = 0) -> None:
        self.path = where  # the file or the database, for messages (never a secret)
        self.clock = clock
        self._last_now = 0  # the latest time a script recorded: the next never records less
        self.max_queue = max_queue  # 0: no limit
        self._connect = connect
        self._conn: C | None = None
        self._ops: queue.SimpleQueue[_Item | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._closing = False
        self._queued = 0  # sheddable ops handed over (written on the event loop only)
        self._taken = 0  # sheddable ops taken into a batch (written on the writer thread only)
        self._fault: str | None = None  # the last storage fault (see `fault`)
        self._fault_at = 0.0
        self.lost: str | None = None  # the storage is gone for good: writes stop until a restart
        self._warn = RateLimit(SystemClock(), 10_000)
        # Who hears the due times a batch's scripts made (the engine's due index): called on
        # the event loop, once per batch, before any of its callers is answered.
        self.on_due: Callable[[list[Due]], None] | None = None
        self.commits = 0  # batches committed, for benchmarks and tests of group commit
        self.writes = 0  # operations committed or failed

    # --- what a dialect brings ---------------------------------------------------------------

    @abstractmethod
    def _run(self, ops: list[Op]) -> list[Outcome]:
        """Commit all of `ops`, each with its own Tx (see `_now`), on the writer's connection;
        an op that raises fails alone. The outcomes in order; a storage fault as `_storage`
        names it."""

    @abstractmethod
    def _fault_of(self, e: BaseException) -> str | None:
        """What `e` says is wrong with the storage (for /readyz and the log); None: `e` is the
        statement's own error."""

    def _opened(self) -> None:
        """Once the connection is made, on the event loop: anything the dialect notes then."""

    # --- the loop's side ---------------------------------------------------------------------

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
        self._opened()

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

    @property
    def fault(self) -> str | None:
        """A storage fault of the last FAULT_WINDOW_SEC, until an accept commits again: a full
        disk may still take a tiny write, so only real traffic says it has recovered."""
        if self.lost:
            return self.lost
        if self._fault and time.monotonic() - self._fault_at < FAULT_WINDOW_SEC:
            return self._fault
        return None

    # --- the writer thread -------------------------------------------------------------------

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
                batch, done = self._take(first)
                sheds = sum(shed for _, _, shed in batch)
                self._taken += sheds
                outcomes, dues = _unmarked(self._run([_marked(op) for op, _, _ in batch]))
                if sheds and all(ok for ok, _ in outcomes):
                    self._fault = None  # an accept committed: the storage is back
                self.commits += 1
                self.writes += len(batch)
                self._post(_answer, batch, outcomes, dues, self.on_due)
        finally:
            if self._conn is not None:
                self._conn.close()
                self._conn = None
            self._answer_left()

    def _take(self, first: _Item) -> tuple[list[_Item], bool]:
        """`first` and every op queued behind it (at most BATCH_MAX); True if close() came.
        When more than `first` was waiting, work is arriving: the batch lingers for what comes
        next, a LINGER_GAP_SEC nap at a time for as long as each nap brings more, and for
        LINGER_SEC in all, so one commit (and one fsync, one wake-up of the loop) answers them
        together. An op arriving alone is committed at once: a quiet daemon pays no linger.
        The naps are sleeps, not timed waits on the queue: a timed wait's deadline is an
        absolute time, which a clock moved under the process (libfaketime, as the
        time-of-day tests run) would put hours away."""
        batch = [first]
        deadline = None
        while len(batch) < BATCH_MAX:
            try:
                item = self._ops.get_nowait()
            except queue.Empty:
                if len(batch) < 2:
                    break
                now = time.monotonic()
                if deadline is None:
                    deadline = now + LINGER_SEC
                elif now >= deadline:
                    break
                before = len(batch)
                time.sleep(min(LINGER_GAP_SEC, deadline - now))
                batch, closed = self._drain(batch)
                if closed:
                    return batch, True
                if len(batch) == before:  # a nap brought nothing: the burst is over
                    break
                continue
            if item is None:
                return batch, True
            batch.append(item)
        return batch, False

    def _drain(self, batch: list[_Item]) -> tuple[list[_Item], bool]:
        """What is queued now, onto `batch` (at most BATCH_MAX); True if close() came."""
        while len(batch) < BATCH_MAX:
            try:
                item = self._ops.get_nowait()
            except queue.Empty:
                break
            if item is None:
                return batch, True
            batch.append(item)
        return batch, False

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

    def _now(self) -> int:
        """The time of the script about to run: the clock's now, or the last one recorded if
        the clock went back (an NTP step): times in commit order, always."""
        now = self.clock.now_ms()
        self._last_now = now if now > self._last_now else self._last_now
        return self._last_now

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


def _settle(fut: asyncio.Future[Any], outcome: Outcome) -> None:
    _answer([(_noop, fut, False)], [outcome])


def _noop(_: Tx) -> None:
    return None


def _marked(op: Op) -> Op:
    """`op` answering what it made due beside its result (each script's own list)."""
    def run(tx: Tx) -> tuple[Any, list[Due]]:
        tx.dues = []
        return op(tx), tx.dues
    return run


def _unmarked(outcomes: list[Outcome]) -> tuple[list[Outcome], list[Due]]:
    """The scripts' outcomes as they answered them, and the due times the committed ones made."""
    dues: list[Due] = []
    plain: list[Outcome] = []
    for ok, value in outcomes:
        if ok:
            value, made = value
            dues += made
        plain.append((ok, value))
    return plain, dues


def _answer(batch: list[_Item], outcomes: list[Outcome], dues: list[Due] | None = None,
            on_due: Callable[[list[Due]], None] | None = None) -> None:
    if dues and on_due is not None:
        try:
            on_due(dues)
        except Exception:  # noqa: BLE001 - the callers are answered whatever the index does
            log.exception("the due index refused a batch's due times")
    for (_, fut, _), (ok, value) in zip(batch, outcomes, strict=True):
        if fut.done():
            continue
        if ok:
            fut.set_result(value)
        else:
            fut.set_exception(value)
