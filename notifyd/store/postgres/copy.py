"""A SQLite file copied whole into an empty PostgreSQL database (`notifyd migrate-store`): every
table row by row in one snapshot of the file, opened read-only, then counted and checksummed on
both sides. The file is never written."""

from __future__ import annotations

import hashlib
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import psycopg

from notifyd.store.base import StoreUnavailable
from notifyd.store.postgres.backend import connect
from notifyd.store.postgres.migrate import migrate
from notifyd.store.sqlite.migrate import migrations as sqlite_migrations

CHUNK = 5_000  # rows read and written at a time
# Tables in an order their references allow; each with the order its rows are copied in.
TABLES: dict[str, str] = {
    "api_keys": "key_hash", "signing_keys": "name", "recipients": "tenant, user_id",
    "devices": "tenant, user_id, device_id", "suppressions": "tenant, channel_type, address",
    "notifications": "id", "steps": "notification_id, step_no",
    "attempts": "notification_id, step_no, attempt_no",
    "events": "rowid", "receipts": "provider, event_id",
    "digest_items": "notification_id, step_no", "inbox_items": "seq",
    "inbox_badges": "tenant, user_id", "webhook_tokens": "provider, token",
    "topics": "tenant, name", "topic_members": "tenant, topic, user_id, added_version",
    "fanout_events": "seq", "probe": "id", "tenants": "name", "erasures": "tenant, user_id",
}
# Columns only PostgreSQL has: made from the others after the copy.
DERIVED = {("events", "id"), ("notifications", "sending")}
# Rows the migrations make in an empty database, by table: the default tenant, and the
# installation's suppression key (the file's own replaces it: its hashes are under that key).
SEEDED = {"tenants": "TRUE", "signing_keys": "name = 'suppressions'"}
SEQUENCES = {"inbox_items": "seq", "fanout_events": "seq", "events": "id"}


@dataclass(frozen=True)
class Copied:
    table: str
    rows: int
    checksum: str  # the same on both sides, or the copy failed


def copy_store(source: str, target: str) -> list[Copied]:
    """Copy the SQLite file at `source` into the database at `target` (empty, or made by
    notifyd and holding no rows), then verify each table; StoreUnavailable names what is
    wrong, and nothing is left half-copied."""
    src = sqlite3.connect(f"file:{source}?mode=ro", uri=True)
    try:
        _check_source(src, source)
        dst = connect(target)
        try:
            migrate(dst)
            _check_empty(dst)
            with dst.transaction():
                src.execute("BEGIN")  # one snapshot of the file for every table
                for table, made in SEEDED.items():  # the file's own replace them
                    dst.execute(f"DELETE FROM {table} WHERE {made}")
                for table in TABLES:
                    _copy(src, dst, table)
                dst.execute("UPDATE notifications n SET sending = (SELECT count(*) FROM steps s "
                            "WHERE s.notification_id = n.id AND s.state = 'sending')")
                for table, column in SEQUENCES.items():
                    dst.execute(f"SELECT setval(pg_get_serial_sequence('{table}', '{column}'), "
                                f"coalesce((SELECT max({column}) FROM {table}), 0) + 1, false)")
                done = [_verify(src, dst, table) for table in TABLES]
                src.execute("COMMIT")
            return done
        finally:
            dst.close()
    finally:
        src.close()


def _check_source(src: sqlite3.Connection, source: str) -> None:
    version = src.execute("PRAGMA user_version").fetchone()[0]
    latest = max(n for n, _ in sqlite_migrations())
    if version == 0:
        raise StoreUnavailable(f"{source} is not a notifyd database")
    if version != latest:
        raise StoreUnavailable(
            f"{source} is at schema {version} and this notifyd's is {latest}: start this "
            "notifyd on it once (it migrates the file), stop it, then copy")


def _check_empty(dst: psycopg.Connection[Any]) -> None:
    for table in TABLES:
        made = SEEDED.get(table, "FALSE")
        row = dst.execute(f"SELECT EXISTS (SELECT 1 FROM {table} WHERE NOT ({made}))").fetchone()
        if row and row[0]:
            raise StoreUnavailable(f"the target database already holds {table}: copy into an "
                                   "empty database only")


def _columns(dst: psycopg.Connection[Any], table: str) -> list[tuple[str, str]]:
    return [(r[0], r[1]) for r in dst.execute(
        "SELECT column_name, data_type FROM information_schema.columns "
        "WHERE table_schema = current_schema() AND table_name = $1 ORDER BY ordinal_position",
        (table,)).fetchall() if (table, r[0]) not in DERIVED]


def _copy(src: sqlite3.Connection, dst: psycopg.Connection[Any], table: str) -> None:
    cols = _columns(dst, table)
    names = ", ".join(c for c, _ in cols)
    order = TABLES[table]  # events: the order written, which their new ids keep
    with dst.cursor() as cur, cur.copy(f"COPY {table} ({names}) FROM STDIN") as copy:
        for row in _rows(src, f"SELECT {names} FROM {table} ORDER BY {order}"):
            copy.write_row([_value(v, t) for v, (_, t) in zip(row, cols, strict=True)])


def _rows(src: sqlite3.Connection, sql: str) -> Iterator[tuple[Any, ...]]:
    cur = src.execute(sql)
    while chunk := cur.fetchmany(CHUNK):
        yield from chunk


def _value(v: Any, kind: str) -> Any:
    if v is not None and kind == "boolean":
        return bool(v)
    return v


def _verify(src: sqlite3.Connection, dst: psycopg.Connection[Any], table: str) -> Copied:
    """Both sides' rows hashed alike (a sum of each row's hash: the order the two databases
    sort text in does not matter); a difference is an error, and the copy is rolled back."""
    sql = f"SELECT {', '.join(c for c, _ in _columns(dst, table))} FROM {table}"
    theirs, n = _digest(_rows(src, sql))
    with dst.cursor() as cur:
        cur.execute(sql)
        ours, m = _digest(row for chunk in iter(lambda: cur.fetchmany(CHUNK), []) for row in chunk)
    if (theirs, n) != (ours, m):
        raise StoreUnavailable(f"{table}: {n} rows in the file, {m} copied, and their checksums "
                               "differ: nothing was kept")
    return Copied(table, n, f"{ours:032x}")


def _digest(rows: Iterator[Any]) -> tuple[int, int]:
    total, n = 0, 0
    for row in rows:
        one = hashlib.sha256(repr([_plain(v) for v in row]).encode()).digest()
        total = (total + int.from_bytes(one[:16], "big")) % (1 << 128)
        n += 1
    return total, n


def _plain(v: Any) -> Any:
    """A value as both drivers give it: a flag as 0/1, bytes as hex."""
    if isinstance(v, bool):
        return int(v)
    if isinstance(v, bytes | memoryview):
        return bytes(v).hex()
    return v
