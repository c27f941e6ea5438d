"""PostgreSQL's side of the write path (store/core/writer.py: one thread, group commit): a batch
in one transaction, replayed with a savepoint around each op when one fails, so it fails alone;
and what SQLite never needs, since other processes lock rows too:

- a batch is sent as one pipeline (psycopg's pipeline mode, tx.Pipe): BEGIN, its scripts'
  statements and COMMIT go out without waiting, and the writer waits for the server only where
  a script reads a result or its time, and for the commit. Each statement is a round trip
  otherwise, and the one writer thread is bound by their latency, not by anyone's CPU. A
  statement that fails unread fails the batch at the next read or at the commit: then it is
  replayed with savepoints, one statement at a time, so only its script fails;

- a batch (one script or more) waits for a lock at most BATCH_LOCK_WAIT: a batch holds the
  locks of all its scripts, so two processes' batches can wait for each other (PostgreSQL finds
  that deadlock only after deadlock_timeout, a second by default). A batch that waited too
  long, or was ended to break a deadlock, is rolled back and its scripts run again one
  transaction each, waiting as long as they must (a script alone takes its locks in one order:
  notification, then step);
- a script alone that PostgreSQL ends to break a deadlock runs again (RETRIES);
- a lost connection fails the batch with StorageError and is made again for the next one (a
  server that cannot be reached fails each batch so, until it can).
"""

from __future__ import annotations

import contextlib
import logging
import random
import time
from collections.abc import Callable
from typing import Any

import psycopg
from psycopg import errors
from psycopg.pq import TransactionStatus

from notifyd.core.clock import Clock
from notifyd.store.base import StoreUnavailable
from notifyd.store.core.sql import Features, Queries
from notifyd.store.core.writer import Op, Outcome, Writer
from notifyd.store.postgres.tx import Cursors, PgTx, Pipe

log = logging.getLogger("notifyd.store")
RETRIES = 8  # a script alone ended by a deadlock or a serialization failure runs again this often
BATCH_LOCK_WAIT = "50ms"  # lock_timeout for a batch of several scripts (see above)


def retryable(e: BaseException) -> bool:
    """A transaction PostgreSQL ended to let another go on (or, for a batch, that waited too
    long for a lock): running it again succeeds."""
    return isinstance(e, errors.DeadlockDetected | errors.SerializationFailure
                      | errors.LockNotAvailable)


def lost(e: BaseException) -> bool:
    """The connection or the server failed, not the statement (a connection made again that
    fails is the same outage: StoreUnavailable only ends a start)."""
    return isinstance(e, StoreUnavailable) or (
        isinstance(e, psycopg.OperationalError) and not retryable(e))


class PgWriter(Writer[psycopg.Connection[Any]]):
    def __init__(self, url: str, connect: Callable[[], psycopg.Connection[Any]], clock: Clock,
                 q: Queries, features: Features, max_queue: int = 0) -> None:
        super().__init__(url, connect, clock, max_queue)
        self.q, self.features = q, features
        self.retried = 0  # batches run again after a deadlock, for tests and benchmarks
        self._cursors: Cursors | None = None  # the connection's, made again with it

    def _run(self, ops: list[Op]) -> list[Outcome]:
        try:
            try:
                outcomes = self._batch(ops)
            except Exception as e:
                if not retryable(e):
                    raise
                self.retried += 1  # waited on another process: each script alone
                outcomes = [self._single(op) for op in ops]
        except Exception as e:  # noqa: BLE001 - the connection is lost: each op is told
            if lost(e):
                self._drop()
            return [(False, self._storage(e))] * len(ops)
        return outcomes

    def _single(self, op: Op) -> Outcome:
        """One script in a transaction of its own, waiting for its locks as long as it must;
        run again if PostgreSQL ends it to break a deadlock."""
        conn = self._connection()
        for attempt in range(RETRIES):
            try:
                return self._pipelined(conn, [op], alone=True)[0]
            except Exception as e:  # noqa: BLE001 - the op's own error is its answer
                if lost(e):
                    raise
                if not retryable(e) or attempt == RETRIES - 1:
                    return False, e
                self.retried += 1
                time.sleep(random.uniform(0, 0.002 * (attempt + 1)))
        raise AssertionError("unreachable")

    def _batch(self, ops: list[Op]) -> list[Outcome]:
        """Every op in one transaction; if one raises, all again, each in a savepoint of its
        own, so that only that one fails. A lock waited for too long ends the batch."""
        conn = self._connection()
        try:
            return self._pipelined(conn, ops)
        except Exception as e:
            if retryable(e) or lost(e):
                raise
        with conn.transaction():
            return [self._alone(conn, op) for op in ops]

    def _pipelined(self, conn: psycopg.Connection[Any], ops: list[Op],
                   alone: bool = False) -> list[Outcome]:
        """Every op in one transaction, sent as one pipeline: BEGIN, the scripts' statements
        and COMMIT go out without waiting, except where a script reads a result or its time
        (PgTx), and the commit's answer is the batch's last round trip. Whatever any op or
        statement raised is raised, the transaction rolled back."""
        if self._cursors is None or self._cursors.conn is not conn:
            self._cursors = Cursors(conn)
        sending = conn.pipeline()
        pipe = Pipe(sending.__enter__(), self._cursors)
        try:
            tx = PgTx(conn, self.q, self.features, self._now, pipe)
            tx.send("BEGIN")
            if alone:  # a script alone waits for its locks as long as it must
                tx.send("SET LOCAL lock_timeout = 0")
            pipe.pending = False  # nothing sent yet that a script's time must wait for
            outcomes = [(True, op(self._tx(conn, pipe))) for op in ops]
            tx.send("COMMIT")
        except BaseException:
            with contextlib.suppress(Exception):  # its statements' errors: the op's is raised
                sending.__exit__(None, None, None)
            self._rollback(conn)
            raise
        try:
            sending.__exit__(None, None, None)  # synced: the commit's round trip
        except BaseException:
            self._rollback(conn)
            raise
        pipe.settled()
        return outcomes

    def _rollback(self, conn: psycopg.Connection[Any]) -> None:
        """A pipeline that failed, its answers read: its transaction rolled back, if open."""
        if conn.closed or conn.broken:
            return
        if conn.info.transaction_status != TransactionStatus.IDLE:
            with contextlib.suppress(psycopg.OperationalError):
                conn.execute("ROLLBACK")

    def _alone(self, conn: psycopg.Connection[Any], op: Op) -> Outcome:
        try:
            with conn.transaction():
                return True, op(self._tx(conn))
        except Exception as e:  # noqa: BLE001 - the op fails alone; the batch goes on
            if retryable(e) or lost(e):
                raise
            return False, e

    def _connection(self) -> psycopg.Connection[Any]:
        conn = self._conn
        if conn is None or conn.closed:
            conn = self._conn = self._connect()
        return conn

    def _drop(self) -> None:
        """Close a broken connection; the next batch connects again."""
        if self._conn is not None:
            self._conn.close()

    def _tx(self, conn: psycopg.Connection[Any], pipe: Pipe | None = None) -> PgTx:
        return PgTx(conn, self.q, self.features, self._now, pipe)

    def _fault_of(self, e: BaseException) -> str | None:
        if not lost(e):
            return None
        if isinstance(e, StoreUnavailable):
            return f"the database is unreachable: {e}"
        if isinstance(e, errors.QueryCanceled):
            return f"a write ran past store.postgres.statement_timeout_ms ({self.path})"
        why = (str(e).strip().splitlines() or [type(e).__name__])[0]
        return f"the database is unreachable ({self.path}): {why}"
