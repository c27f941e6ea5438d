"""The PostgreSQL write path: SQLite's writer (one thread, group commit, a failing script
replayed alone in a savepoint) on a psycopg connection, with two things SQLite never needs:
a batch PostgreSQL ended to break a deadlock with another process runs again, and a lost
connection is made again for the next batch."""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable
from typing import Any

import psycopg
from psycopg import errors

from notifyd.core.clock import Clock
from notifyd.store.core.queries import Queries
from notifyd.store.postgres.tx import PgTx
from notifyd.store.sqlite.writer import Op, Writer

log = logging.getLogger("notifyd.store")
RETRIES = 8  # a batch ended by a deadlock or a serialization failure runs again this often


def retryable(e: BaseException) -> bool:
    """A transaction PostgreSQL ended to let another go on: running it again succeeds."""
    return isinstance(e, errors.DeadlockDetected | errors.SerializationFailure)


def lost(e: BaseException) -> bool:
    """The connection or the server failed, not the statement."""
    return isinstance(e, psycopg.OperationalError) and not retryable(e)


class PgWriter(Writer):
    def __init__(self, url: str, connect: Callable[[], Any], clock: Clock, q: Queries,
                 max_queue: int = 0) -> None:
        super().__init__(url, connect, clock, max_queue)
        self.q = q
        self.retried = 0  # batches run again after a deadlock, for tests and benchmarks

    def _remember_file(self) -> None:
        """No file: a database server."""

    def _run(self, ops: list[Op], sheds: bool = False) -> list[tuple[bool, Any]]:
        for attempt in range(RETRIES):
            try:
                outcomes = self._batch(ops)
            except Exception as e:  # noqa: BLE001 - each op is answered with it
                if retryable(e) and attempt < RETRIES - 1:  # a deadlock: the batch runs again
                    self.retried += 1
                    time.sleep(random.uniform(0, 0.002 * (attempt + 1)))
                    continue
                if lost(e):
                    self._drop()
                return [(False, self._storage(e))] * len(ops)
            if sheds and all(ok for ok, _ in outcomes):
                self._fault = None
            return outcomes
        raise AssertionError("unreachable")

    def _batch(self, ops: list[Op]) -> list[tuple[bool, Any]]:
        """Every op in one transaction; if one raises, all again, each in a savepoint of its
        own, so that only that one fails."""
        conn = self._connection()
        try:
            with conn.transaction():
                return [(True, op(self._tx(conn))) for op in ops]
        except Exception as e:
            if retryable(e) or lost(e):
                raise
        with conn.transaction():
            return [self._alone(conn, op) for op in ops]

    def _alone(self, conn: psycopg.Connection[Any], op: Op) -> tuple[bool, Any]:
        try:
            with conn.transaction():
                return True, op(self._tx(conn))
        except Exception as e:  # noqa: BLE001 - the op fails alone; the batch goes on
            if retryable(e) or lost(e):
                raise
            return False, e

    def _connection(self) -> psycopg.Connection[Any]:
        conn: Any = self._conn  # the base class's is a sqlite3 connection
        if conn is None or conn.closed:
            conn = self._conn = self._connect()
        return conn  # type: ignore[no-any-return]

    def _drop(self) -> None:
        """Close a broken connection; the next batch connects again."""
        if self._conn is not None:
            self._conn.close()

    def _tx(self, conn: Any) -> PgTx:  # type: ignore[override]
        now = self.clock.now_ms()
        self._last_now = now if now > self._last_now else self._last_now
        return PgTx(conn, self.q, self._last_now)

    def _fault_of(self, e: BaseException) -> str | None:
        if not lost(e):
            return None
        why = (str(e).strip().splitlines() or [type(e).__name__])[0]
        return f"the database is unreachable ({self.path}): {why}"
