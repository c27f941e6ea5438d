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
