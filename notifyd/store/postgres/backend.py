"""PostgreSQL's lifecycle under the store core: one database that several notifyd processes share.

Writes go through one writer thread per process (store/core/writer's group commit: every
script queued while the last commit ran, in one transaction), on a connection of its own at READ
COMMITTED; what a script decides on is locked by the statement that reads it (postgres/
queries.py), so scripts of several processes interleave safely. A batch that deadlocks with
another process's is run again. Reads use their own connections: a pool of reader threads, each
with its connection ([store.postgres] pool_size), and for `watch` an asynchronous one that
the event loop awaits. Every connection but the listener's has the configured
statement_timeout. No round trip to the server
ever runs on the event loop's thread: a slow network would stall every request it serves.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

import psycopg

from notifyd.core.clock import Clock, SystemClock
from notifyd.core.logs import Outage
from notifyd.core.text import redact_in, redact_url
from notifyd.store.base import StorageError, StoreMissing, StoreUnavailable
from notifyd.store.core.sql import Features, Queries
from notifyd.store.core.tx import Args, Script
from notifyd.store.postgres import queries
from notifyd.store.postgres.migrate import migrate
from notifyd.store.postgres.settings import PostgresSettings
from notifyd.store.postgres.tx import PgTx, row_factory, run
from notifyd.store.postgres.writer import BATCH_LOCK_WAIT, PgWriter

T = TypeVar("T")
log = logging.getLogger("notifyd.store")
QUERIES: Queries = queries  # type-checked: the module names every statement the core uses
# Several processes write at once: each feature's statements are in queries.py (type-checked).
FEATURES = Features(row_locks=queries, shared_buckets=queries, notifies=queries,
                    joined_writes=queries)
WATCH_TICK_SEC = 1.0  # how often the listener looks at its stop event


def first_line(e: BaseException) -> str:
    """An error's first line, for a log line or a message (psycopg's may run to several)."""
    return (str(e).strip().splitlines() or [type(e).__name__])[0]


def connect(url: str) -> psycopg.Connection[Any]:
    """A connection in autocommit mode (transactions are explicit), `$n` placeholders."""
    try:
        return psycopg.connect(url, autocommit=True, cursor_factory=psycopg.RawCursor,
                               row_factory=row_factory)
    except psycopg.Error as e:  # an unreadable URL too: the driver quotes the piece it refused
        reason = redact_in(str(e).strip().splitlines()[-1] if str(e).strip()
                           else type(e).__name__, url)
        if "does not exist" in reason:
            raise StoreMissing(f"{redact_url(url)}: {reason}; create it (createdb NAME) and "
                               "grant notifyd's user the right to create tables in it") from None
        raise StoreUnavailable(f"cannot connect to {redact_url(url)}: {reason}") from None


class PostgresBackend:
    """One PostgreSQL database, shared by every process given the same URL."""

    q = QUERIES

    def __init__(self, url: str, clock: Clock | None = None, max_queue: int = 0,
                 settings: PostgresSettings | None = None) -> None:
        self.dsn = url
        self.url = redact_url(url)
        self.clock = clock or SystemClock()
        self.settings = settings or PostgresSettings()
        self.writer = PgWriter(self.url, self._connect_writer, self.clock, self.q, FEATURES,
                               max_queue)
        self._reads = ThreadPoolExecutor(max_workers=self.settings.pool_size,
                                         thread_name_prefix="notifyd-pg-read")
        self._local = threading.local()  # each reader thread's connection
        self._readers: set[psycopg.Connection[Any]] = set()  # all of them, to close
        self._create = True
        self._warned_autovacuum = False
        self.writer_pid = 0

    shared = True  # every process given the same URL writes it

    async def watch(self, due: Callable[[int], None], inbox: Callable[[str, str], None],
                    stop: asyncio.Event) -> None:
        """LISTEN on a connection of its own until `stop`; lost, it connects again a second
        later (what was signalled meanwhile is found by the scanner's poll and the streams'
        next read). This process's own signals are skipped: it told itself already."""
        outage = Outage(log, "listening for other processes' signals")
        while not stop.is_set():
            try:
                conn = await psycopg.AsyncConnection.connect(self.dsn, autocommit=True)
                async with conn:
                    await conn.execute("LISTEN notifyd_due")
                    await conn.execute("LISTEN notifyd_inbox")
                    outage.goes_on()
                    while not stop.is_set():
                        async for n in conn.notifies(timeout=WATCH_TICK_SEC):
                            if n.pid != self.writer_pid:
                                _signal(n.channel, n.payload, due, inbox)
            except psycopg.OperationalError as e:
                outage.waits(f"{self._said(e)}; trying again every second")
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), 1.0)

    @property
    def commits(self) -> int:
        return self.writer.commits

    @property
    def fault(self) -> str | None:
        return self.writer.fault

    async def open(self, create: bool = True, check: bool = False) -> None:
        """Connect and migrate; with create=False a database notifyd never set up is an
        error (a command that only reads never makes the tables)."""
        self._create = create
        await self.writer.open()

    def _connect_writer(self) -> psycopg.Connection[Any]:
        conn = connect(self.dsn)
        try:
            if not self._create:
                made = conn.execute("SELECT to_regclass('notifyd_migrations') IS NOT NULL")
                row = made.fetchone()
                if not (row and row[0]):
                    raise StoreMissing(f"no notifyd tables in {self.url}; check --config / "
                                       "--db (notifyd serve or notifyd keys create makes them)")
            migrate(conn)
            self._check_autovacuum(conn)
            conn.execute(f"SET lock_timeout = '{BATCH_LOCK_WAIT}'")  # a script alone: none
            conn.execute(self._timeout())
            self.writer_pid = conn.info.backend_pid  # its signals are this process's own
        except BaseException:
            conn.close()
            raise
        return conn

    def _check_autovacuum(self, conn: psycopg.Connection[Any]) -> None:
        """Say so, once, when the server's autovacuum is off: a claimed, sent or cancelled
        step leaves its entry in the index the claims read in due order until VACUUM clears
        it, so without it every claim walks more of them and the due lag grows with the
        hours."""
        row = conn.execute("SELECT current_setting('autovacuum')::boolean").fetchone()
        if row is not None and not row[0] and not self._warned_autovacuum:
            self._warned_autovacuum = True
            log.warning("autovacuum is off on %s: the steps that were claimed stay in the "
                        "due index until VACUUM clears them, and each claim reads past more of "
                        "them; turn autovacuum on (autovacuum = on in postgresql.conf), or run "
                        "notifyd vacuum every few minutes", self.url)

    def _timeout(self) -> str:
        return f"SET statement_timeout = {int(self.settings.statement_timeout_ms)}"

    async def close(self) -> None:
        await self.writer.close()
        await asyncio.to_thread(self._reads.shutdown, wait=True)
        await asyncio.to_thread(self._close_readers)

    def _close_readers(self) -> None:
        for conn in list(self._readers):
            conn.close()
        self._readers.clear()

    async def write(self, script: Script[T], shed: bool = False) -> T:
        return await self.writer.write(script, shed)

    def _read(self) -> psycopg.Connection[Any]:
        """This reader thread's connection: a statement alone is its own transaction; a
        snapshot's BEGIN starts a REPEATABLE READ one (the session's default, a round trip
        saved)."""
        conn: psycopg.Connection[Any] | None = getattr(self._local, "conn", None)
        if conn is None or conn.closed:
            conn = self._local.conn = connect(self.dsn)
            self._readers.add(conn)
            conn.execute("SET default_transaction_isolation = 'repeatable read'")
            conn.execute(self._timeout())
        return conn

    def _drop_read(self) -> None:
        """This reader thread's connection failed: closed, and made again for the next read."""
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            self._readers.discard(conn)
            conn.close()
            self._local.conn = None

    async def fetch(self, sql: str, values: Args = ()) -> list[Any]:
        """One statement on the reader's connection (autocommit: it sees every commit that
        returned before it)."""
        def read() -> list[Any]:
            return run(self._read(), sql, values).fetchall()

        found: list[Any] = await self._on_reader(read)
        return found

    def _said(self, e: BaseException) -> str:
        """What an error of the driver says, on one line and without the URL's password."""
        return redact_in(first_line(e), self.dsn)

    async def snapshot(self, script: Script[T]) -> T:
        """`script`'s reads in one REPEATABLE READ transaction: one snapshot for them all (a
        script here only reads)."""
        def in_snapshot() -> T:
            conn = self._read()
            with conn.transaction():
                return script(PgTx(conn, self.q, FEATURES, self.clock.now_ms))

        result: T = await self._on_reader(in_snapshot)
        return result

    async def _on_reader(self, fn: Callable[[], T]) -> T:
        def on_thread() -> T:
            try:
                return fn()
            except psycopg.OperationalError:
                self._drop_read()
                raise

        try:
            return await asyncio.get_running_loop().run_in_executor(self._reads, on_thread)
        except StoreUnavailable as e:  # connecting again failed: an outage, as below
            raise StorageError(f"the database is unreachable: {e}") from None
        except psycopg.errors.QueryCanceled as e:
            raise StorageError(f"a read ran past store.postgres.statement_timeout_ms "
                               f"({self.url}): {self._said(e)}") from None
        except psycopg.OperationalError as e:
            raise StorageError(f"the database is unreachable ({self.url}): {self._said(e)}"
                               ) from None

    async def backup(self, dest: str) -> None:
        raise StoreUnavailable("notifyd backup copies a SQLite file; back a PostgreSQL "
                               "database up with pg_dump (pg_dump -Fc -f FILE DBNAME)")

    # --- space: PostgreSQL's autovacuum gives space back to the tables on its own ----------

    async def size(self) -> tuple[int, int]:
        rows = await self.fetch("SELECT pg_database_size(current_database())")
        return int(rows[0][0]), 0

    async def reclaim(self, max_bytes: int) -> int:
        return 0

    async def compact(self) -> None:
        def vacuum() -> None:  # as long as it takes: it runs with no daemon on the database
            conn = self._read()
            conn.execute("SET statement_timeout = 0")
            try:
                conn.execute("VACUUM (ANALYZE)")
            finally:
                conn.execute(self._timeout())

        await self._on_reader(vacuum)

    async def tune_space(self) -> float | None:
        return None

    async def forget(self) -> None:
        """Nothing: dead row versions are VACUUM's (autovacuum, or notifyd vacuum --full)."""


def _signal(channel: str, payload: str, due: Callable[[int], None],
            inbox: Callable[[str, str], None]) -> None:
    try:
        if channel == "notifyd_due":
            due(int(payload))
        elif channel == "notifyd_inbox":
            tenant, user_id, _ = json.loads(payload)
            inbox(str(tenant), str(user_id))
    except (ValueError, TypeError):
        log.warning("a signal on %s that is not notifyd's: ignored", channel)
