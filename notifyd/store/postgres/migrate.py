"""Schema migrations: numbered SQL files applied in order, tracked in notifyd_migrations; two
processes starting at once apply each once (an advisory lock held while they run)."""

from __future__ import annotations

import secrets
import time
from importlib import resources
from typing import Any

import psycopg

from notifyd.core.contacts import SUPPRESSION_KEY, UNKEYED, rehashed

MIGRATIONS_LOCK = 0x6E6F7469  # pg_advisory_lock key: migrations run one process at a time
KEY_SUPPRESSIONS = 6  # the migration whose step below makes the suppressions' key


def migrations() -> list[tuple[int, str]]:
    folder = resources.files("notifyd.store.postgres") / "migrations"
    found = [(int(e.name.split("_", 1)[0]), e.read_text()) for e in folder.iterdir()
             if e.name.endswith(".sql")]
    return sorted(found)


def migrate(conn: psycopg.Connection[Any]) -> int:
    """Apply every migration newer than the database's version, each in its own transaction;
    the version it is at now."""
    conn.execute(f"SELECT pg_advisory_lock({MIGRATIONS_LOCK})")
    try:
        conn.execute("CREATE TABLE IF NOT EXISTS notifyd_migrations "
                     "(version integer PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())")
        row = conn.execute("SELECT coalesce(max(version), 0) FROM notifyd_migrations").fetchone()
        version = int(row[0]) if row else 0
        for number, sql in migrations():
            if number <= version:
                continue
            with conn.transaction():
                conn.execute(sql.encode())
                if number == KEY_SUPPRESSIONS:
                    key_suppressions(conn)
                conn.execute(f"INSERT INTO notifyd_migrations (version) VALUES ({number})")
            version = number
        return version
    finally:
        conn.execute(f"SELECT pg_advisory_unlock({MIGRATIONS_LOCK})")


def key_suppressions(conn: psycopg.Connection[Any]) -> None:
    """The installation's key for one-way suppressions, made unless there is one, and every
    hash kept before it rewritten under it (core/contacts.rehashed). $n placeholders on any
    connection (a test's migrates with its own)."""
    cur = psycopg.RawCursor(conn)
    cur.execute("INSERT INTO signing_keys (name, secret, created_at) VALUES ($1, $2, $3) "
                 "ON CONFLICT DO NOTHING",
                 (SUPPRESSION_KEY, secrets.token_bytes(32), int(time.time() * 1000)))
    row = cur.execute("SELECT secret FROM signing_keys WHERE name = $1",
                      (SUPPRESSION_KEY,)).fetchone()
    assert row is not None  # made just now, or before
    key = bytes(row[0])
    old = cur.execute("SELECT tenant, channel_type, address FROM suppressions "
                      "WHERE address LIKE $1", (UNKEYED + "%",)).fetchall()
    for tenant, channel_type, address in old:
        cur.execute("UPDATE suppressions SET address = $1 WHERE tenant = $2 "
                     "AND channel_type = $3 AND address = $4",
                     (rehashed(address, key), tenant, channel_type, address))


def schema_sql(conn: psycopg.Connection[Any]) -> str:
    """The schema as PostgreSQL holds it (tables with their columns, indexes, triggers), for
    the committed snapshot test."""
    out = []
    version = conn.execute("SELECT max(version) FROM notifyd_migrations").fetchone()
    out.append(f"-- version = {version[0] if version else 0}")
    tables = conn.execute("SELECT table_name FROM information_schema.tables "
                          "WHERE table_schema = current_schema() ORDER BY 1").fetchall()
    for (table,) in tables:
        cols = conn.execute(
            "SELECT column_name, data_type, is_nullable, column_default "
            "FROM information_schema.columns WHERE table_schema = current_schema() "
            "AND table_name = $1 ORDER BY ordinal_position", (table,)).fetchall()
        out.append(f"TABLE {table} (")
        out += [f"    {c} {t}{'' if n == 'YES' else ' NOT NULL'}"
                f"{'' if d is None else ' DEFAULT ' + d}" for c, t, n, d in cols]
        out.append(")")
    out += [f"{r[0]};" for r in conn.execute(
        "SELECT indexdef FROM pg_indexes WHERE schemaname = current_schema() "
        "ORDER BY indexname").fetchall()]
    out += [f"{r[0]};" for r in conn.execute(
        "SELECT pg_get_triggerdef(t.oid) FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid "
        "WHERE c.relnamespace = current_schema()::regnamespace AND NOT t.tgisinternal "
        "ORDER BY t.tgname").fetchall()]
    row = conn.execute("SELECT current_schema()").fetchone()
    schema = f"{row[0]}." if row else ""
    return "\n".join(out).replace(schema, "") + "\n"  # the same in any schema
