"""PostgreSQL's own: its migrations build the committed schema, two processes starting on a new
database migrate it once, the claim's locks as the database holds them, and the writer's batch
sent as one pipeline (a statement failing unread, a time read after the batch's locks, a lock
waited for too long)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pg_support
import psycopg
import pytest
from store_support import NOW, accept, opened

from notifyd.core.clock import FakeClock
from notifyd.core.records import InboxEntry
from notifyd.store import StorageError, Store, open_store
from notifyd.store.core.tx import Tx
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


async def test_a_server_with_autovacuum_off_is_named_at_start_once(
        caplog: pytest.LogCaptureFixture) -> None:
    """Without autovacuum the due index fills with the entries of claimed steps: said once
    at start, and only when the server's setting is off."""
    url = pg_support.migrated_url()
    with connect(url) as conn:
        off = not conn.execute("SELECT current_setting('autovacuum')::boolean").fetchone()[0]
    with caplog.at_level("WARNING", logger="notifyd.store"):
        async with opened(url, FakeClock(NOW)) as s:
            backend = s.backend  # type: ignore[attr-defined]
            backend._check_autovacuum(backend.writer._connection())  # a connection made again
    said = [r.getMessage() for r in caplog.records if "autovacuum is off" in r.getMessage()]
    assert len(said) == (1 if off else 0), said
    assert all("notifyd vacuum" in m and "password" not in m for m in said)


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


# --- the writer's batch, sent as one pipeline ------------------------------------------------

def _key(name: str, unread: bool = True) -> Callable[[Tx], str]:
    """A script writing an API key named `name` (its hash the name: the same name twice is a
    unique violation), its statement's answer never read, or read."""
    def script(tx: Tx) -> str:
        row = (name, name, "acme", "", tx.now, "send")
        if unread:
            tx.send(tx.q.INSERT_KEY, row)
        else:
            tx.run(tx.q.INSERT_KEY, row)
        return name
    return script


async def _one_batch(backend: Any, *scripts: Callable[[Tx], Any]) -> list[Any]:
    """`scripts` committed as one batch: queued while the writer is held by a script of its
    own, then let go together. The results (or errors) in order."""
    gate, taken = threading.Event(), threading.Event()

    def hold(tx: Tx) -> None:
        taken.set()
        gate.wait(10)

    held = asyncio.ensure_future(backend.write(hold))
    assert await asyncio.to_thread(taken.wait, 10)
    before = backend.writer.commits
    writes = [asyncio.ensure_future(backend.write(s)) for s in scripts]
    while backend.writer._ops.qsize() < len(scripts):
        await asyncio.sleep(0)
    gate.set()
    await held
    results = await asyncio.gather(*writes, return_exceptions=True)
    assert backend.writer.commits - before == 2, "precondition: the scripts ran in one batch"
    return results


async def test_a_statement_that_fails_unread_fails_its_own_script_alone() -> None:
    """A script's statement whose answer it never reads fails after the script returned (at
    a later read, or the commit): the batch is run again, each script in a savepoint, and
    only that script fails; a script that raises fails alone too; none is applied twice."""
    async with opened(pg_support.migrated_url(), FakeClock(NOW)) as s:
        backend = s.backend  # type: ignore[attr-defined]

        def raises(tx: Tx) -> None:
            _key("raised")(tx)
            raise ValueError("boom")

        results = await _one_batch(backend, _key("a"), _key("a"), _key("b", unread=False),
                                   raises, _key("c"))
        assert results[0] == "a" and results[2] == "b" and results[4] == "c"
        assert isinstance(results[1], psycopg.errors.UniqueViolation)
        assert isinstance(results[3], ValueError)
        names = [r["name"] for r in await backend.fetch("SELECT name FROM api_keys")]
        assert sorted(names) == ["a", "b", "c"]


async def test_a_script_reads_its_time_after_the_locks_its_batch_waited_for() -> None:
    """A script's time is read only once every statement sent before it has run: here the
    script before it in the batch waits for a row another transaction holds, and the time read
    is the clock's after that transaction ended, not before."""
    clock = FakeClock(NOW)
    url = pg_support.migrated_url()
    async with opened(url, clock) as s:
        backend = s.backend  # type: ignore[attr-defined]
        await backend.write(_key("held"))

        def waits(tx: Tx) -> None:
            tx.send("SET LOCAL lock_timeout = '10s'")  # the batch's own 50 ms would end it
            tx.send("UPDATE api_keys SET last_used_at = 1 WHERE name = 'held'")

        with connect(url) as other:
            other.execute("BEGIN")
            other.execute("SELECT 1 FROM api_keys WHERE name = 'held' FOR UPDATE")
            batch = asyncio.ensure_future(_one_batch(backend, waits, lambda tx: tx.now))
            while not other.execute(
                    "SELECT count(*) FROM pg_stat_activity WHERE pid = $1 "
                    "AND wait_event_type = 'Lock'", (backend.writer_pid,)).fetchone()[0]:
                await asyncio.sleep(0.005)
            clock.ms += 1000
            other.execute("COMMIT")
            assert (await batch)[1] == NOW + 1000


async def test_a_batch_that_waits_too_long_for_a_lock_runs_each_script_alone() -> None:
    """A batch whose statement, sent unread, waits past the batch's lock wait is rolled back
    and each script runs alone, waiting as long as it must: both commit once."""
    url = pg_support.migrated_url()
    async with opened(url, FakeClock(NOW)) as s:
        backend = s.backend  # type: ignore[attr-defined]
        await backend.write(_key("held"))

        def waits(tx: Tx) -> str:
            tx.send("UPDATE api_keys SET last_used_at = coalesce(last_used_at, 0) + 1 "
                    "WHERE name = 'held'")
            return "waited"

        with connect(url) as other:
            other.execute("BEGIN")
            other.execute("SELECT 1 FROM api_keys WHERE name = 'held' FOR UPDATE")
            batch = asyncio.ensure_future(_one_batch(backend, waits, _key("d")))
            while not backend.writer.retried:
                await asyncio.sleep(0.005)
            other.execute("COMMIT")
            assert await batch == ["waited", "d"]
        used = await backend.fetch("SELECT last_used_at FROM api_keys WHERE name = 'held'")
        assert used[0][0] == 1
