"""The transaction contract (store/core/tx.py) on a psycopg connection.

The statements keep SQLite's placeholders where they can (`?`, `?N`, `:name`); `number` turns
them into PostgreSQL's `$n` once, at import, and remembers the order of named ones, so a script
passes a dict as it does to SQLite. Rows read by name and by position, as sqlite3.Row does.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterable
from typing import Any

import psycopg
from psycopg.rows import RowMaker

from notifyd.core.models import Due
from notifyd.store.core.sql import Features, Queries
from notifyd.store.core.tx import Args

# `?`, `?8` or `:name` outside quotes; `::type` casts are not names.
_PLACEHOLDER = re.compile(r"'(?:[^']|'')*'|\?(\d*)|(?<!:):([a-z_]+)\b")
NAMED: dict[str, tuple[str, ...]] = {}  # a numbered statement -> the names of its $1, $2 ...


@functools.lru_cache(maxsize=1024)
def number(sql: str) -> str:
    """`sql` with its placeholders as `$n`: `?` takes the next number, `?N` is `$N`, and each
    distinct `:name` a number of its own (recorded in NAMED for `args`)."""
    count = 0
    names: list[str] = []

    def place(m: re.Match[str]) -> str:
        nonlocal count
        if m.group(0).startswith("'"):
            return m.group(0)
        if m.group(2):
            if m.group(2) not in names:
                names.append(m.group(2))
            return f"${names.index(m.group(2)) + 1}"
        count = int(m.group(1)) if m.group(1) else count + 1
        return f"${count}"

    out = _PLACEHOLDER.sub(place, sql)
    if names:
        NAMED[out] = tuple(names)
    return out


def args(sql: str, values: Args) -> Any:
    """The positional parameters of a numbered statement."""
    if isinstance(values, dict):
        return [values[n] for n in NAMED[sql]]
    return values


def run(c: psycopg.Connection[Any], sql: str, values: Args) -> psycopg.Cursor[Any]:
    """One statement, numbered first if it was not (a statement written by hand for a
    script, as a test or an operator's tool does; each is numbered once)."""
    sql = number(sql)
    return c.execute(sql, args(sql, values))


@functools.lru_cache(maxsize=512)
def _row_type(names: tuple[str, ...]) -> type[tuple[Any, ...]]:
    index = {n: i for i, n in enumerate(names)}
    get = tuple.__getitem__

    class PgRow(tuple[Any, ...]):
        __slots__ = ()

        def __getitem__(self, key: Any) -> Any:
            return get(self, index[key] if isinstance(key, str) else key)

        def keys(self) -> tuple[str, ...]:
            return names

    return PgRow


def row_factory(cursor: psycopg.Cursor[Any]) -> RowMaker[Any]:
    return _row_type(tuple(c.name for c in cursor.description or ()))


class PgTx:
    """Its time is read from `clock` (the writer's, which never goes back) when the script
    first asks for it: several processes write at once, so a time read before a lock the
    script then waits for could be earlier than that of the transaction that held it, which
    commits first. A script takes the locks it may wait for before it reads `now`."""

    __slots__ = ("_clock", "_now", "c", "dues", "features", "many", "q")

    def __init__(self, c: psycopg.Connection[Any], q: Queries, features: Features,
                 clock: Callable[[], int]) -> None:
        self.c, self.q, self.features, self._clock = c, q, features, clock
        self._now: int | None = None
        self.dues: list[Due] = []  # the writer's: due times this script made (store/core/dues)
        self.many: Callable[[str, Iterable[Args]], object] = self._many

    @property
    def now(self) -> int:
        if self._now is None:
            self._now = self._clock()
        return self._now

    def _many(self, sql: str, rows: Iterable[Args]) -> None:
        sql = number(sql)
        with self.c.cursor() as cur:
            cur.executemany(sql, [args(sql, r) for r in rows])

    def one(self, sql: str, values: Args = ()) -> Any:
        return run(self.c, sql, values).fetchone()

    def all(self, sql: str, values: Args = ()) -> list[Any]:
        return run(self.c, sql, values).fetchall()

    def value(self, sql: str, values: Args = ()) -> Any:
        row = run(self.c, sql, values).fetchone()
        return None if row is None else row[0]

    def run(self, sql: str, values: Args = ()) -> int:
        return run(self.c, sql, values).rowcount
