"""The databases the store's suites are handed are as good as new: a copy of the SQLite template
is the file the store makes on a new path, and a PostgreSQL schema handed out again is one the
migrations just made (store_support.fresh_sqlite, pg_support.migrated_url)."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

import pg_support
import pytest
from store_support import NOW, accept, fresh_sqlite, opened

from notifyd.core.clock import FakeClock
from notifyd.core.records import InboxEntry
from notifyd.store import StoreMissing, open_store
from notifyd.store.postgres.backend import connect
from notifyd.store.postgres.migrate import migrate, schema_sql
from notifyd.store.sqlite.migrate import schema_sql as sqlite_schema_sql

PRAGMAS = ("user_version", "auto_vacuum", "journal_mode", "page_size", "freelist_count")
# Columns a migration dates with the clock (the time it ran), or fills with a key of its own
# (the installation's suppression key): not part of what it made.
MIGRATION_TIMES = {("notifyd_migrations", "applied_at"), ("tenants", "created_at"),
                   ("signing_keys", "secret"), ("signing_keys", "created_at")}


def sqlite_state(path: Path) -> tuple[Any, ...]:
    with closing(sqlite3.connect(path)) as conn:
        tables = [r[0] for r in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")]
        columns = {t: [r[1] for r in conn.execute(f"PRAGMA table_info({t})")
                       if (t, r[1]) not in MIGRATION_TIMES] for t in tables}
        return (sqlite_schema_sql(conn),
                [conn.execute(f"PRAGMA {p}").fetchone()[0] for p in PRAGMAS],
                {t: conn.execute(f"SELECT {', '.join(c)} FROM {t} ORDER BY 1").fetchall()
                 for t, c in columns.items()})


async def test_a_sqlite_copy_is_the_file_the_store_makes(tmp_path: Path) -> None:
    made = tmp_path / "made.db"
    await (await open_store(f"sqlite:///{made}")).close()
    copy = Path(fresh_sqlite(tmp_path, "copy.db").removeprefix("sqlite:///"))
    assert copy.stat().st_mode & 0o777 == made.stat().st_mode & 0o777 == 0o600
    assert sqlite_state(copy) == sqlite_state(made)


async def test_a_sqlite_file_already_there_is_left_as_it_is(tmp_path: Path) -> None:
    url = fresh_sqlite(tmp_path, "n.db")
    async with opened(url, FakeClock(NOW)) as s:
        await accept(s, "n_1", "a")
    assert fresh_sqlite(tmp_path, "n.db") == url
    async with opened(url, FakeClock(NOW)) as s:
        assert await s.get_notification("n_1") is not None


def pg_state(url: str) -> tuple[Any, ...]:
    with connect(url) as conn:
        columns: dict[str, list[str]] = {}
        for r in conn.execute("SELECT table_name, column_name FROM information_schema.columns "
                              "WHERE table_schema = current_schema() "
                              "ORDER BY table_name, ordinal_position").fetchall():
            if (r[0], r[1]) not in MIGRATION_TIMES:
                columns.setdefault(r[0], []).append(r[1])
        rows = {t: [tuple(r) for r in conn.execute(f"SELECT {', '.join(c)} FROM {t} ORDER BY 1")]
                for t, c in columns.items()}
        sequences = [r[0] for r in conn.execute(
            "SELECT sequencename FROM pg_sequences WHERE schemaname = current_schema() "
            "ORDER BY 1").fetchall()]
        return (schema_sql(conn), rows,
                {s: tuple(conn.execute(f"SELECT nextval('{s}')").fetchall()) for s in sequences})


def schema_oid(url: str) -> int:
    with connect(url) as conn:
        return int(conn.execute("SELECT oid::int FROM pg_namespace "
                                "WHERE nspname = current_schema()").fetchall()[0][0])


@pytest.mark.skipif(pg_support.SERVER == "off", reason="no PostgreSQL for this run")
async def test_a_postgresql_schema_handed_out_again_is_as_new(tmp_path: Path) -> None:
    new = pg_support.fresh_url()
    with connect(new) as conn:
        migrate(conn)
    first = tmp_path / "first"
    first.mkdir()
    url = pg_support.migrated_url(first, "n")  # (schema_sql reads names without a dot)
    async with opened(url, FakeClock(NOW)) as s:  # rows in most tables, sequences moved on
        assert await s.create_tenant("other")
        await accept(s, "n_1", "a", "b", inbox=InboxEntry("Hi", None))
    used = schema_oid(url)
    pg_support.release(first)
    again = pg_support.migrated_url(tmp_path / "second", "n")
    assert again != url and schema_oid(again) == used  # the same schema, renamed
    assert pg_state(again) == pg_state(new)


@pytest.mark.skipif(pg_support.SERVER == "off", reason="no PostgreSQL for this run")
async def test_a_postgresql_url_with_another_name_names_no_database(tmp_path: Path) -> None:
    url = pg_support.migrated_url(tmp_path, "contract.db")
    assert pg_support.migrated_url(tmp_path, "contract.db") == url
    with pytest.raises(StoreMissing):
        await open_store(url.replace("contract.db", "missing.db"), FakeClock(NOW), create=False)
    await (await open_store(url, FakeClock(NOW), create=False)).close()


@pytest.mark.skipif(pg_support.SERVER == "off", reason="no PostgreSQL for this run")
async def test_a_postgresql_schema_whose_tables_a_test_changed_is_not_handed_out_again(
        tmp_path: Path) -> None:
    new = pg_support.fresh_url()
    with connect(new) as conn:
        migrate(conn)
    first = tmp_path / "first"
    first.mkdir()
    url = pg_support.migrated_url(first, "n")
    with connect(url) as conn:
        conn.execute("ALTER TABLE notifications ADD COLUMN extra text")
    changed = schema_oid(url)
    pg_support.release(first)
    again = pg_support.migrated_url(tmp_path / "second", "n")
    assert schema_oid(again) != changed
    assert pg_state(again) == pg_state(new)
