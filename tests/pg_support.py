"""A PostgreSQL database for this test run, and a fresh schema in it for each test that asks.

The run makes one database with a random name on the server NOTIFYD_TEST_PG names (the local
one by default; "off" leaves PostgreSQL out) and drops it when the run ends; each URL it hands
out names a schema of its own (search_path), so tests never see each other's rows and making
one costs a CREATE SCHEMA, not a CREATE DATABASE.
"""

from __future__ import annotations

import atexit
import os
import secrets
from pathlib import Path
from urllib.parse import quote

SERVER = os.environ.get("NOTIFYD_TEST_PG", "postgresql://root@127.0.0.1:5432/postgres")
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


def fresh_url(folder: Path | None = None, name: str = "") -> str:
    """The URL of a new, empty schema in this run's database; the same one again for the same
    folder and name (a test that opens its database twice, as a restart would)."""
    if folder is not None and (folder, name) in _made:
        return _made[(folder, name)]
    db = database()
    schema = f"t_{secrets.token_hex(6)}"
    _admin(f"CREATE SCHEMA {schema}", server_url(db))
    url = server_url(db) + "?options=" + quote(f"-csearch_path={schema}")
    if folder is not None:
        _made[(folder, name)] = url
    return url


_made: dict[tuple[Path, str], str] = {}
