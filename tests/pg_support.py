"""A PostgreSQL database for this test run, and a schema in it for each test that asks.

The run (each test process: pytest-xdist's workers have one each) makes one database with a
random name on the server NOTIFYD_TEST_PG names (the local one by default; "off" leaves
PostgreSQL out) and drops it when the run ends; each URL it hands out names a schema of its own
(search_path), so tests never see each other's rows. `fresh_url` hands out a new, empty schema
(for the tests of the migrations themselves); `migrated_url` one as the store's migrations leave
a new database, and that is what the store's suites run on.

Migrating a schema is 60-140 ms of DDL, more than most tests that use it. So a migrated schema
is made once and then used over: when the test that had it ends (`release`), the next one to
ask gets it renamed, every table emptied and refilled from a template schema migrated once
per run, and every sequence set back as the template's: the same rows, sequences and schema as
a new one, for ~3 ms. One whose tables, columns, constraints, triggers or functions a test
changed is dropped instead, and a new one made.
"""

from __future__ import annotations

import atexit
import os
import re
import secrets
from pathlib import Path
from typing import Any
from urllib.parse import quote

SERVER = os.environ.get("NOTIFYD_TEST_PG", "postgresql://root@127.0.0.1:5432/postgres")
TEMPLATE = "notifyd_template"
_database: str | None = None


def _admin(sql: str, url: str = SERVER) -> None:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(sql)


def database() -> str:
    """This run's database, made on first use and dropped at exit."""
    global _database
    if _database is None:
        _database = f"notifyd_test_{secrets.token_hex(4)}"
        _admin(f"CREATE DATABASE {_database}")
        atexit.register(_admin, f"DROP DATABASE IF EXISTS {_database} WITH (FORCE)")
    return _database


def server_url(db: str) -> str:
    return SERVER.rsplit("/", 1)[0] + "/" + db


def _schema_url(schema: str) -> str:
    return server_url(database()) + "?options=" + quote(f"-csearch_path={_quoted(schema)}")


def _quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def fresh_url(folder: Path | None = None, name: str = "") -> str:
    """The URL of a new, empty schema in this run's database; the same one again for the same
    folder and name (a test that opens its database twice, as a restart would)."""
    if folder is not None and (folder, name) in _made:
        return _made[(folder, name)][0]
    schema = f"t_{secrets.token_hex(6)}"
    _admin(f"CREATE SCHEMA {schema}", server_url(database()))
    url = _schema_url(schema)
    if folder is not None:
        _made[(folder, name)] = url, None
    return url


def migrated_url(folder: Path | None = None, name: str = "") -> str:
    """The URL of a schema holding a new, migrated database; the same one again for the same
    folder and name. The schema is named after `name` (t_<random>_<name>), as a SQLite file
    is: a URL with another name in it names a database no one made."""
    if folder is not None and (folder, name) in _made:
        return _made[(folder, name)][0]
    if not re.fullmatch(r"[\w.-]*", name):
        raise ValueError(f"a database name of letters, digits, '_', '.' and '-': {name!r}")
    schema = f"t_{secrets.token_hex(6)}_{name}"
    conn = _pool()
    with conn.transaction():
        used = _free.pop() if _free else None
        if used is not None and _shape(conn, used) != _template_shape(conn):
            conn.execute(f"DROP SCHEMA {_quoted(used)} CASCADE")  # its test changed its tables
            used = None
        if used is None:
            _make_migrated(conn, schema)
        else:  # a test that left a transaction open fails here, not its next user
            conn.execute("SET LOCAL lock_timeout = '10s'")
            conn.execute(f"ALTER SCHEMA {_quoted(used)} RENAME TO {_quoted(schema)}")
            conn.execute(f"SET LOCAL search_path = {_quoted(schema)}")
            conn.execute(_refill(conn))
    url = _schema_url(schema)
    if folder is not None:
        _made[(folder, name)] = url, schema
    return url


def release(folder: Path) -> None:
    """The test whose folder this is has ended: the migrated schemas handed out for it, or for
    a folder inside it, may be handed out again."""
    for key, (_, schema) in list(_made.items()):
        if key[0] is not None and key[0].is_relative_to(folder):
            del _made[key]
            if schema is not None:
                _free.append(schema)


# Handed out: (folder, name) -> (URL, the schema if migrated_url made it). Free to hand out again.
_made: dict[tuple[Path | None, str], tuple[str, str | None]] = {}
_free: list[str] = []
_conn: Any = None
_script: str | None = None
_shape_made: tuple[int, ...] | None = None


def _pool() -> Any:
    """This process's own connection for making and refilling schemas. Its commits need not
    wait for the disk: a database lost in a crash of the server is this run's, made anew."""
    global _conn
    if _conn is None:
        import psycopg

        _conn = psycopg.connect(server_url(database()), autocommit=True)
        _conn.execute("SET synchronous_commit = off")
        with _conn.transaction():
            _make_migrated(_conn, TEMPLATE)
    return _conn


def _make_migrated(conn: Any, schema: str) -> None:
    """A new schema and every migration, in the caller's transaction: as the store makes one."""
    from notifyd.store.postgres.migrate import migrate

    conn.execute(f"CREATE SCHEMA {_quoted(schema)}")
    conn.execute(f"SET LOCAL search_path = {_quoted(schema)}")
    migrate(conn)


def _shape(conn: Any, schema: str) -> tuple[int, ...]:
    """What a test's DDL would change in a schema: its relations (tables, indexes, sequences),
    their columns with types and nullability, constraints, triggers and functions, counted."""
    row = conn.execute(
        "WITH s AS (SELECT oid FROM pg_namespace WHERE nspname = %s), "
        "c AS (SELECT * FROM pg_class WHERE relnamespace = (SELECT oid FROM s)), "
        "a AS (SELECT * FROM pg_attribute WHERE attrelid IN (SELECT oid FROM c) "
        "AND attnum > 0 AND NOT attisdropped) "
        "SELECT (SELECT count(*) FROM c), (SELECT count(*) FROM a), "
        "(SELECT coalesce(sum(atttypid::int + atttypmod + attnotnull::int), 0) FROM a), "
        "(SELECT count(*) FROM pg_constraint WHERE connamespace = (SELECT oid FROM s)), "
        "(SELECT count(*) FROM pg_trigger WHERE tgrelid IN (SELECT oid FROM c)), "
        "(SELECT count(*) FROM pg_proc WHERE pronamespace = (SELECT oid FROM s))",
        (schema,)).fetchone()
    return tuple(int(n) for n in row)


def _template_shape(conn: Any) -> tuple[int, ...]:
    global _shape_made
    if _shape_made is None:
        _shape_made = _shape(conn, TEMPLATE)
    return _shape_made


def _refill(conn: Any) -> str:
    """One script that puts the schema first on the search_path back as the template is: each
    table emptied (a table before those it references) and given the template's rows (in the
    other order), each sequence set as the template's. Written once, from the template."""
    global _script
    if _script is None:
        tables = [r[0] for r in conn.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = %s ORDER BY 1", (TEMPLATE,))]
        refs = conn.execute(
            "SELECT c.relname, p.relname FROM pg_constraint f JOIN pg_class c ON c.oid = "
            "f.conrelid JOIN pg_class p ON p.oid = f.confrelid WHERE f.contype = 'f' "
            "AND f.connamespace = %s::regnamespace", (TEMPLATE,)).fetchall()
        order = _referencing_first(tables, refs)
        kept = [t for t in reversed(order)
                if conn.execute(f"SELECT EXISTS (SELECT FROM {TEMPLATE}.{t})").fetchone()[0]]
        sequences = [r[0] for r in conn.execute(
            "SELECT sequencename FROM pg_sequences WHERE schemaname = %s ORDER BY 1",
            (TEMPLATE,))]
        _script = "".join(
            [f"DELETE FROM {t};" for t in order]
            + [f"INSERT INTO {t} SELECT * FROM {TEMPLATE}.{t};" for t in kept]
            + [f"SELECT setval('{s}', last_value, is_called) FROM {TEMPLATE}.{s};"
               for s in sequences])
    return _script


def _referencing_first(tables: list[str], refs: list[tuple[str, str]]) -> list[str]:
    """The tables, each before every table its foreign keys reference."""
    order: list[str] = []
    left = set(tables)
    while left:
        ready = sorted(t for t in left
                       if not any(p == t and c != t and c in left for c, p in refs))
        assert ready, f"foreign keys in a cycle among {sorted(left)}"
        order += ready
        left -= set(ready)
    return order
