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
    """The row type of a result, by its column names: read from the result itself, not from
    `cursor.description` (an object per column, per statement, on the writer's hot path)."""
    res = cursor.pgresult
    if res is None or not res.nfields:
        return _row_type(())
    return _row_type(tuple((res.fname(i) or b"?").decode() for i in range(res.nfields)))


class Cursors:
    """The writer connection's cursors, made once and used again batch after batch: a cursor
    made for each statement was most of the client's time per statement (its adapters set up
    again each time). `cur` takes every statement whose result is read at once or never;
    `spare` lends one to each statement read later (Tx.later), back when its batch ends."""

    __slots__ = ("conn", "cur", "spare")

    def __init__(self, conn: psycopg.Connection[Any]) -> None:
        self.conn, self.cur = conn, conn.cursor()
        self.spare: list[psycopg.Cursor[Any]] = []


class Pipe:
    """The writer's batch sent as one pipeline (psycopg's pipeline mode): a statement whose
    result a script does not read yet goes out with those after it, and the writer waits for
    the server only when a script reads a result, reads its time, or the batch commits.
    `pending`: something was sent since the last wait. `settle`: what the scripts marked due
    from statements read with the commit's round trip (PgTx.due_rows)."""

    __slots__ = ("cursors", "lent", "p", "pending", "settle")

    def __init__(self, p: psycopg.Pipeline, cursors: Cursors) -> None:
        self.p, self.cursors, self.pending = p, cursors, False
        self.settle: list[tuple[psycopg.Cursor[Any], list[Due]]] = []
        self.lent: list[psycopg.Cursor[Any]] = []

    def wait(self, anyway: bool = False) -> None:
        """Every statement sent so far has run (its locks are held): one round trip."""
        if self.pending or anyway:
            self.p.sync()
            self.pending = False

    def lend(self) -> psycopg.Cursor[Any]:
        spare = self.cursors.spare
        cur = spare.pop() if spare else self.cursors.conn.cursor()
        self.lent.append(cur)
        return cur

    def settled(self) -> None:
        """Once the batch's last round trip is in: the due rows each script asked for, and the
        cursors lent back."""
        for cur, dues in self.settle:
            dues += [(r[0], r[1], r[2]) for r in cur.fetchall()]
        self.settle.clear()
        self.cursors.spare += self.lent
        self.lent.clear()


class PgTx:
    """Its time is read from `clock` (the writer's, which never goes back) when the script
    first asks for it: several processes write at once, so a time read before a lock the
    script then waits for could be earlier than that of the transaction that held it, which
    commits first. A script takes the locks it may wait for before it reads `now`; in a
    pipeline, `now` is read only once every statement sent before it has run (the batch's
    earlier scripts' too), so a lock any of them waited for is held by then.

    In the writer's pipeline (`pipe`), `send`, `later` and `many` do not wait for the server;
    a read does, once, for everything sent before it. Elsewhere each statement is a round trip
    of its own, as it comes."""

    __slots__ = ("_clock", "_now", "c", "cur", "dues", "features", "many", "pipe", "q")

    def __init__(self, c: psycopg.Connection[Any], q: Queries, features: Features,
                 clock: Callable[[], int], pipe: Pipe | None = None) -> None:
        self.c, self.q, self.features, self._clock = c, q, features, clock
        self.pipe = pipe
        self.cur = c.cursor() if pipe is None else pipe.cursors.cur
        self._now: int | None = None
        self.dues: list[Due] = []  # the writer's: due times this script made (store/core/dues)
        self.many: Callable[[str, Iterable[Args]], object] = self._many

    @property
    def now(self) -> int:
        if self._now is None:
            if self.pipe is not None:
                self.pipe.wait()
            self._now = self._clock()
        return self._now

    def _many(self, sql: str, rows: Iterable[Args]) -> None:
        sql = number(sql)
        self.cur.executemany(sql, [args(sql, r) for r in rows])
        if self.pipe is not None:
            self.pipe.pending = True

    def _on(self, cur: psycopg.Cursor[Any], sql: str, values: Args) -> psycopg.Cursor[Any]:
        sql = number(sql)
        cur.execute(sql, args(sql, values))
        if self.pipe is not None:
            self.pipe.pending = True
        return cur

    def _read(self, sql: str, values: Args) -> psycopg.Cursor[Any]:
        """A statement whose result is read now: in a pipeline, once every answer is in (the
        shared cursor's last is then its own)."""
        cur = self._on(self.cur, sql, values)
        if self.pipe is not None:
            self.pipe.wait()
        return cur

    def one(self, sql: str, values: Args = ()) -> Any:
        return self._read(sql, values).fetchone()

    def all(self, sql: str, values: Args = ()) -> list[Any]:
        return self._read(sql, values).fetchall()

    def value(self, sql: str, values: Args = ()) -> Any:
        row = self._read(sql, values).fetchone()
        return None if row is None else row[0]

    def run(self, sql: str, values: Args = ()) -> int:
        return self._read(sql, values).rowcount

    def send(self, sql: str, values: Args = ()) -> None:
        self._on(self.cur, sql, values)

    def later(self, sql: str, values: Args = ()) -> Later:
        return Later(self._on(self._lend(), sql, values), self.pipe)

    def due_rows(self, sql: str, values: Args = ()) -> None:
        cur = self._on(self._lend(), sql, values)
        if self.pipe is None:
            self.dues += [(r[0], r[1], r[2]) for r in cur.fetchall()]
        else:
            self.pipe.settle.append((cur, self.dues))

    def _lend(self) -> psycopg.Cursor[Any]:
        return self.c.cursor() if self.pipe is None else self.pipe.lend()


class Later:
    """A statement sent; its result waited for when first read (store/core/tx.Later)."""

    __slots__ = ("cur", "pipe")

    def __init__(self, cur: psycopg.Cursor[Any], pipe: Pipe | None) -> None:
        self.cur, self.pipe = cur, pipe

    def _arrived(self) -> psycopg.Cursor[Any]:
        if self.pipe is not None and self.cur.pgresult is None:
            self.pipe.wait(anyway=True)
        return self.cur

    def count(self) -> int:
        return self._arrived().rowcount

    def rows(self) -> list[Any]:
        return self._arrived().fetchall()

    def one(self) -> Any:
        return self._arrived().fetchone()
