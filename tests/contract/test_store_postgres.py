"""PostgreSQL's own: its migrations build the committed schema, two processes starting on a new
database migrate it once, and the claim's locks as the database holds them."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pg_support
import pytest
from store_support import NOW, accept, opened

from notifyd.core.clock import FakeClock
from notifyd.core.records import InboxEntry
from notifyd.store import StorageError, Store, open_store
from notifyd.store.postgres.backend import connect
from notifyd.store.postgres.migrate import migrate, migrations, schema_sql
from notifyd.store.postgres.settings import PostgresSettings

SNAPSHOT = Path(__file__).resolve().parents[2] / "notifyd" / "store" / "postgres" / "schema.sql"
REGENERATE = ("python -c 'import sys; sys.path.insert(0, \"tests\"); import pg_support; "
              "from notifyd.store.postgres.backend import connect; "
              "from notifyd.store.postgres.migrate import migrate, schema_sql; "
              "c = connect(pg_support.fresh_url()); migrate(c); print(schema_sql(c), end=\"\")' "
              "> notifyd/store/postgres/schema.sql")


def test_migrations_build_the_committed_schema() -> None:
    with connect(pg_support.fresh_url()) as conn:
        migrate(conn)
        assert schema_sql(conn) == SNAPSHOT.read_text(), f"schema changed; run: {REGENERATE}"


def test_two_processes_migrating_a_new_database_at_once_both_succeed() -> None:
    url, outcome = pg_support.fresh_url(), []

    def start() -> None:
        with connect(url) as conn:
            outcome.append(migrate(conn))

    both = [threading.Thread(target=start) for _ in range(2)]
    for t in both:
        t.start()
    for t in both:
        t.join(30)
    assert outcome == [migrations()[-1][0]] * 2


async def test_a_lost_connection_fails_that_write_alone_and_the_next_connects_again() -> None:
    """The server ends the writer's session (a restart, a failover, an idle timeout): the batch
    in flight fails as StorageError naming the database, /readyz's fault says so, and the next
    write connects again and commits."""
    url = pg_support.fresh_url()
    async with opened(url, FakeClock(NOW)) as s:
        await s.ping()
        backend = s.backend  # type: ignore[attr-defined]
        with connect(url) as admin:
            admin.execute("SELECT pg_terminate_backend($1)", (backend.writer_pid,))
        with pytest.raises(StorageError, match="unreachable"):
            await s.ping()
        assert s.fault is not None and "unreachable" in s.fault
        await s.ping()
        await accept(s, "n_1", "a")
        assert s.fault is None and await s.get_notification("n_1") is not None


async def test_reads_run_on_pool_size_connections_at_once() -> None:
    """Three reads at once on a pool of three: each on a connection of its own (a thread per
    connection: the executor starts one for each read that finds none idle)."""
    settings = PostgresSettings(pool_size=3)
    async with opened_pg(pg_support.migrated_url(), settings) as s:
        rows = await asyncio.gather(*(s.backend.fetch(  # type: ignore[attr-defined]
            "SELECT pg_backend_pid(), pg_sleep(0.2)") for _ in range(3)))
        assert len({r[0][0] for r in rows}) == 3


async def test_a_statement_past_the_timeout_is_a_storage_error_and_the_next_goes_on() -> None:
    settings = PostgresSettings(statement_timeout_ms=100)
    async with opened_pg(pg_support.migrated_url(), settings) as s:
        backend = s.backend  # type: ignore[attr-defined]
        with pytest.raises(StorageError, match="statement_timeout_ms"):
            await backend.fetch("SELECT pg_sleep(1)")
        with pytest.raises(StorageError, match="statement_timeout_ms"):
            await backend.write(lambda tx: tx.value("SELECT pg_sleep(1)"))
        assert (await backend.fetch("SELECT 1"))[0][0] == 1
        await s.ping()


class Counting(FakeClock):
    """One millisecond later at every read: whoever reads later records a later time."""

    def now_ms(self) -> int:
        self.ms += 1
        return self.ms


async def test_reading_all_takes_its_time_after_the_locks_it_waits_for() -> None:
    """Another process holds a person's notification (as its claim does) while they read all
    their items, of a kind that stops when read: the read waits, and the time it records for
    the resolution is later than the time the holder recorded and committed first."""
    clock = Counting(NOW)
    url = pg_support.migrated_url()
    async with opened(url, clock) as s:
        await accept(s, "n_1", "a", inbox=InboxEntry("item", None))
        with connect(url) as other:
            other.execute("BEGIN")
            other.execute("SELECT 1 FROM notifications WHERE id = 'n_1' FOR NO KEY UPDATE")
            reading = asyncio.ensure_future(s.read_all("acme", "u1", frozenset({"k"})))
            while not other.execute(  # the read is waiting on the server for that lock
                    "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
                    " AND wait_event_type = 'Lock'").fetchone()[0]:
                await asyncio.sleep(0.005)
            held_at = clock.now_ms()  # what the holder records, committing first
            other.execute("COMMIT")
        assert (await reading).resolved == ("n_1",)
        n = await s.get_notification("n_1")
    assert n is not None and n.resolved_at is not None and n.resolved_at > held_at, (
        n and n.resolved_at, held_at)


@asynccontextmanager
async def opened_pg(url: str, settings: PostgresSettings) -> AsyncIterator[Store]:
    store = await open_store(url, FakeClock(NOW), postgres=settings)
    try:
        yield store
    finally:
        await store.close()
