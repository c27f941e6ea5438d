"""The SQLite backend: schema snapshot, migrations, pragmas, group commit, the due-scan index.

Its writes are scripts of a transaction; these take the sqlite3 connection under it (`tx.c`)."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from contextlib import closing
from pathlib import Path

import pytest

from notifyd.store import StoreClosed
from notifyd.store.core.store import CoreStore
from notifyd.store.sqlite.backend import SqliteBackend
from notifyd.store.sqlite.migrate import migrate, migrations, schema_sql
from notifyd.store.sqlite.settings import SqliteSettings
from notifyd.store.sqlite.tx import SqliteTx

SNAPSHOT = Path(__file__).resolve().parents[2] / "notifyd" / "store" / "sqlite" / "schema.sql"
REGENERATE = ("python -c 'import sqlite3; from notifyd.store.sqlite.migrate import migrate, schema_sql; "
              "c = sqlite3.connect(\":memory:\"); migrate(c); print(schema_sql(c), end=\"\")' "
              "> notifyd/store/sqlite/schema.sql")
DUE_SCAN = """SELECT notification_id, step_no FROM steps
WHERE channel = ? AND lane = ? AND state IN ('pending', 'unknown') AND send_after <= ?
ORDER BY send_after LIMIT 10"""


def test_migrations_build_the_committed_schema(tmp_path: Path) -> None:
    with closing(sqlite3.connect(tmp_path / "fresh.db")) as conn:
        migrate(conn)
        assert schema_sql(conn) == SNAPSHOT.read_text(), f"schema changed; run: {REGENERATE}"


def test_two_processes_migrating_a_new_file_at_once_both_succeed(tmp_path: Path) -> None:
    # The daemon and a CLI command (or a second process) may open a new file together: each
    # reads the version, then waits for the write lock while the other migrates. The one that
    # waited must see the version the other committed, not apply the migrations again.
    path = tmp_path / "race.db"
    latest = migrations()[-1][0]
    waiting = threading.Event()
    outcome: list[object] = []

    def second() -> None:
        conn = sqlite3.connect(path, timeout=30, check_same_thread=False)
        conn.set_trace_callback(lambda sql: waiting.set() if "IMMEDIATE" in sql else None)
        try:
            outcome.append(migrate(conn))
        except sqlite3.Error as e:
            outcome.append(e)
        finally:
            conn.close()

    with closing(sqlite3.connect(path, timeout=30)) as first:
        first.execute("BEGIN IMMEDIATE")  # holds the write lock before the second starts
        thread = threading.Thread(target=second)
        thread.start()
        assert waiting.wait(30)  # the second has read version 0 and asks for the lock
        first.execute("ROLLBACK")
        assert migrate(first) == latest
    thread.join(30)
    assert outcome == [latest]


def test_migrating_twice_is_a_no_op(tmp_path: Path) -> None:
    latest = migrations()[-1][0]
    with closing(sqlite3.connect(tmp_path / "twice.db")) as conn:
        assert migrate(conn) == latest
        before = schema_sql(conn)
        assert migrate(conn) == latest
        assert schema_sql(conn) == before
        assert conn.execute("PRAGMA user_version").fetchone()[0] == latest


async def test_the_store_opens_on_the_committed_schema(store: CoreStore, db_path: Path) -> None:
    with closing(sqlite3.connect(db_path)) as conn:
        assert schema_sql(conn) == SNAPSHOT.read_text()


async def test_wal_and_synchronous_full_by_default(store: CoreStore, db_path: Path) -> None:
    with closing(sqlite3.connect(db_path)) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    # synchronous is per connection: ask the writer's own connection.
    assert await store.backend.write(lambda tx: tx.value("PRAGMA synchronous")) == 2


async def test_synchronous_normal_when_configured(tmp_path: Path) -> None:
    s = SqliteBackend(tmp_path / "normal.db", settings=SqliteSettings(synchronous="NORMAL"))
    await s.open()
    try:
        assert await s.write(lambda tx: tx.value("PRAGMA synchronous")) == 1
    finally:
        await s.close()


def _insert_key(name: str):  # noqa: ANN202 - a store op
    def op(tx: SqliteTx) -> str:
        tx.c.execute("INSERT INTO api_keys (key_hash, name, tenant, kinds, created_at) "
                     "VALUES (?, ?, 't', '', 0)", (f"h-{name}", name))
        return name
    return op


async def test_concurrent_writes_share_commits(store: CoreStore, db_path: Path) -> None:
    before = store.backend.commits
    names = await asyncio.gather(*(store.backend.write(_insert_key(f"k{i}")) for i in range(200)))
    assert names == [f"k{i}" for i in range(200)]
    assert store.backend.commits - before < 10, "200 concurrent writes should share a few commits"
    assert query_names(db_path) == {f"k{i}" for i in range(200)}


def query_names(db_path: Path) -> set[str]:
    with closing(sqlite3.connect(db_path)) as conn:
        return {r[0] for r in conn.execute("SELECT name FROM api_keys")}


async def test_a_failing_op_fails_alone_in_its_batch(store: CoreStore, db_path: Path) -> None:
    def broken(tx: SqliteTx) -> None:
        _insert_key("broken")(tx)  # written, then undone with its savepoint
        raise ValueError("boom")

    write = store.backend.write
    before = store.backend.commits
    results = await asyncio.gather(
        write(_insert_key("a")), write(broken), write(_insert_key("b")),
        write(_insert_key("a")),  # a duplicate: an sqlite3 error, also alone
        write(_insert_key("c")), return_exceptions=True)
    assert store.backend.commits - before == 1, "precondition: all five ran in one batch"
    assert results[0] == "a" and results[2] == "b" and results[4] == "c"
    assert isinstance(results[1], ValueError)
    assert isinstance(results[3], sqlite3.IntegrityError)
    assert query_names(db_path) == {"a", "b", "c"}


async def test_ops_before_a_failure_are_applied_exactly_once(store: CoreStore,
                                                             db_path: Path) -> None:
    # A batch that hits a failure may be rolled back and replayed; nothing may count twice.
    await store.backend.write(_insert_key("counter"))

    def bump(tx: SqliteTx) -> None:
        tx.c.execute("UPDATE api_keys SET created_at = created_at + 1 WHERE name = 'counter'")

    def fail(tx: SqliteTx) -> None:
        bump(tx)
        raise RuntimeError("after a write")

    write = store.backend.write
    results = await asyncio.gather(write(bump), write(bump), write(fail), write(bump),
                                   return_exceptions=True)
    assert [isinstance(r, RuntimeError) for r in results] == [False, False, True, False]
    with closing(sqlite3.connect(db_path)) as conn:
        assert conn.execute("SELECT created_at FROM api_keys WHERE name = 'counter'"
                            ).fetchone()[0] == 3


async def test_writes_after_close_are_refused(tmp_path: Path) -> None:
    s = SqliteBackend(tmp_path / "closed.db")
    await s.open()
    await s.close()
    with pytest.raises(StoreClosed):
        await s.write(_insert_key("late"))


async def test_close_answers_the_batch_in_flight(tmp_path: Path) -> None:
    s = SqliteBackend(tmp_path / "inflight.db")
    await s.open()
    started, release = threading.Event(), threading.Event()

    def slow(tx: SqliteTx) -> str:
        started.set()
        release.wait(10)
        return _insert_key("slow")(tx)

    write = asyncio.create_task(s.write(slow))
    await asyncio.get_running_loop().run_in_executor(None, started.wait, 10)
    closing_task = asyncio.create_task(s.close())
    await asyncio.sleep(0)  # close() has cancelled the writer task and waits on the thread
    release.set()
    await closing_task
    await asyncio.sleep(0)
    try:
        # The batch committed before the connection closed; its caller must hear so (or be
        # told StoreClosed), not hang.
        assert write.done()
    finally:
        write.cancel()
        await asyncio.gather(write, return_exceptions=True)


async def test_due_scan_uses_the_partial_index(store: CoreStore) -> None:
    plan = await store.backend.write(lambda tx: [r["detail"] for r in tx.all(
        f"EXPLAIN QUERY PLAN {DUE_SCAN}", ("log", "bulk", 0))])
    assert len(plan) == 1 and "USING INDEX steps_due" in plan[0], plan
    assert "TEMP B-TREE" not in " ".join(plan), "ORDER BY must come from the index"


async def test_a_file_from_before_incremental_vacuum_is_converted_once(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    with closing(sqlite3.connect(path)) as conn:  # as earlier versions made them
        migrate(conn)
        assert conn.execute("PRAGMA auto_vacuum").fetchone()[0] == 0
    store = CoreStore(SqliteBackend(path))
    await store.open()
    try:
        took = await store.tune_space()
        assert took is not None and took >= 0
        assert await store.tune_space() is None
    finally:
        await store.close()
    with closing(sqlite3.connect(path)) as conn:
        assert conn.execute("PRAGMA auto_vacuum").fetchone()[0] == 2  # incremental
        assert schema_sql(conn) == SNAPSHOT.read_text()
