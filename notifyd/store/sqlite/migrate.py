"""Schema migrations: numbered SQL files applied in order, tracked by PRAGMA user_version."""

from __future__ import annotations

import secrets
import sqlite3
import time
from importlib import resources

from notifyd.core.contacts import SUPPRESSION_KEY, UNKEYED, rehashed

KEY_SUPPRESSIONS = 20  # the migration whose step below makes the suppressions' key


def migrations() -> list[tuple[int, str]]:
    folder = resources.files("notifyd.store.sqlite") / "migrations"
    found = []
    for entry in folder.iterdir():
        if entry.name.endswith(".sql"):
            found.append((int(entry.name.split("_", 1)[0]), entry.read_text()))
    return sorted(found)


def migrate(conn: sqlite3.Connection) -> int:
    """Apply every migration newer than PRAGMA user_version, each in its own transaction.
    The version is read again under the write lock, so two processes opening a new file at
    once apply each migration once between them."""
    version: int = conn.execute("PRAGMA user_version").fetchone()[0]
    for number, sql in migrations():
        if number <= version:
            continue
        conn.execute("BEGIN IMMEDIATE")
        try:
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            if number <= version:
                conn.execute("COMMIT")
                continue
            for statement in _statements(sql):
                conn.execute(statement)
            if number == KEY_SUPPRESSIONS:
                key_suppressions(conn)
            conn.execute(f"PRAGMA user_version = {number}")
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        version = number
    return version


def key_suppressions(conn: sqlite3.Connection) -> None:
    """The installation's key for one-way suppressions, made unless there is one, and every
    hash kept before it rewritten under it (core/contacts.rehashed)."""
    conn.execute("INSERT OR IGNORE INTO signing_keys (name, secret, created_at) VALUES (?, ?, ?)",
                 (SUPPRESSION_KEY, secrets.token_bytes(32), int(time.time() * 1000)))
    key = bytes(conn.execute("SELECT secret FROM signing_keys WHERE name = ?",
                             (SUPPRESSION_KEY,)).fetchone()[0])
    old = conn.execute("SELECT tenant, channel_type, address FROM suppressions "
                       "WHERE address LIKE ?", (UNKEYED + "%",)).fetchall()
    conn.executemany("UPDATE suppressions SET address = ? WHERE tenant = ? AND channel_type = ? "
                     "AND address = ?", [(rehashed(a, key), t, c, a) for t, c, a in old])


def _statements(sql: str) -> list[str]:
    out, buf = [], ""
    for line in sql.splitlines(keepends=True):
        buf += line
        if sqlite3.complete_statement(buf):
            out.append(buf.strip())
            buf = ""
    return [s for s in out if s and not all(
        ln.strip().startswith("--") or not ln.strip() for ln in s.splitlines())]


def schema_sql(conn: sqlite3.Connection) -> str:
    """The schema as SQLite holds it, for the committed snapshot test."""
    rows = conn.execute("SELECT sql FROM sqlite_master WHERE sql IS NOT NULL "
                        "ORDER BY type DESC, name").fetchall()
    version = conn.execute("PRAGMA user_version").fetchone()[0]
    return f"-- user_version = {version}\n" + "".join(f"{r[0]};\n" for r in rows)
