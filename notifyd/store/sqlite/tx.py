"""The transaction contract (store/core/tx.py) on a sqlite3 connection."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterable
from typing import Any

from notifyd.core.models import Due
from notifyd.store.core.sql import Features, Queries
from notifyd.store.core.tx import Args
from notifyd.store.sqlite import queries

QUERIES: Queries = queries  # type-checked: the module names every statement the core uses
FEATURES = Features()  # one writer, in one process: no locks, shared buckets or signals


class SqliteTx:
    __slots__ = ("c", "dues", "features", "many", "now", "q")

    def __init__(self, c: sqlite3.Connection, now: int) -> None:
        self.c, self.now = c, now
        self.q, self.features = QUERIES, FEATURES
        self.dues: list[Due] = []
        # The connection's own: no call of ours in between, on every accept's steps.
        self.many: Callable[[str, Iterable[Args]], object] = c.executemany

    def one(self, sql: str, args: Args = ()) -> Any:
        return self.c.execute(sql, args).fetchone()

    def all(self, sql: str, args: Args = ()) -> list[Any]:
        return self.c.execute(sql, args).fetchall()

    def value(self, sql: str, args: Args = ()) -> Any:
        row = self.c.execute(sql, args).fetchone()
        return None if row is None else row[0]

    def run(self, sql: str, args: Args = ()) -> int:
        return self.c.execute(sql, args).rowcount

    def send(self, sql: str, args: Args = ()) -> None:
        self.c.execute(sql, args)

    def later(self, sql: str, args: Args = ()) -> Done:
        return Done(self.c.execute(sql, args))

    def due_rows(self, sql: str, args: Args = ()) -> None:
        self.dues += [(r[0], r[1], r[2]) for r in self.c.execute(sql, args)]


class Done:
    """A statement already run to its end (the file answers at once, and a statement run
    after it must not change what it read): its result as Tx.later gives it."""

    __slots__ = ("_count", "_rows")

    def __init__(self, cur: sqlite3.Cursor) -> None:
        self._rows = cur.fetchall()
        self._count = cur.rowcount

    def count(self) -> int:
        return self._count

    def rows(self) -> list[Any]:
        return self._rows

    def one(self) -> Any:
        return self._rows[0] if self._rows else None
