"""The transaction contract the core's scripts are written against, and what a backend brings.

A script is a plain function of one `Tx`: it reads and writes through the dialect's named queries
(`tx.q`; a feature's, where the dialect has it, through `tx.features`) and records `tx.now`, the
time of its own transaction, taken from the injected clock inside it: at its start where one
writer runs at a time (SQLite), at the script's first read of it where writers of several
processes run at once (PostgreSQL), so a script takes the row locks it may wait for before it
reads `now`. So every recorded time agrees with the commit order: a script that commits later
never records an earlier time (a backend keeps `now` from going back).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Protocol, TypeVar

from notifyd.core.models import Due
from notifyd.store.core.sql import Features, Queries

T = TypeVar("T")
Args = Sequence[Any] | dict[str, Any]


class Row(Protocol):
    """A result row, read by column name (or position)."""

    def __getitem__(self, key: str | int) -> Any: ...


class Later(Protocol):
    """A statement's result, read when asked (Tx.later)."""

    def count(self) -> int:
        """How many rows it changed."""
        ...

    def rows(self) -> list[Row]: ...

    def one(self) -> Row | None: ...


class Tx(Protocol):
    """One transaction, as a script sees it.

    A dialect may send statements ahead and wait for the server only when a result is read
    (PostgreSQL's pipeline: one round trip for all sent before it). So a script sends what it
    will not read with `send` (or `many`), asks for what it reads after more statements with
    `later`, and reads last what it can; the statements still run in the order it gave them.
    An error in a statement not yet read fails the transaction when it is, or at the commit.
"""

    q: Queries  # the dialect's statements, by name
    features: Features  # what the dialect can do beyond them, with their statements
    # The due times this script created or moved (store/core/dues.py), told to the engine's
    # due index after the commit (Writer.on_due); the writer empties it for each script.
    dues: list[Due]

    @property
    def now(self) -> int:
        """Epoch ms: the time this transaction records, taken inside it (see above)."""
        ...

    def one(self, sql: str, args: Args = ()) -> Row | None:
        """The first row, or None."""
        ...

    def all(self, sql: str, args: Args = ()) -> list[Row]: ...

    def value(self, sql: str, args: Args = ()) -> Any:
        """The first column of the first row, or None."""
        ...

    def run(self, sql: str, args: Args = ()) -> int:
        """Execute; how many rows it changed."""
        ...

    def send(self, sql: str, args: Args = ()) -> None:
        """Execute; what it returns is not used (the dialect need not wait for it)."""
        ...

    def later(self, sql: str, args: Args = ()) -> Later:
        """Execute; its result read when asked (waited for then, with those sent before)."""
        ...

    def due_rows(self, sql: str, args: Args = ()) -> None:
        """Mark due (`dues`) each (at, channel, lane) row this statement reads, as the
        transaction stands at that point; the dialect may read them with the commit."""
        ...

    # Execute once per row of args (what it returns is not used).
    many: Callable[[str, Iterable[Args]], object]


Script = Callable[[Tx], T]


class DueSource(Protocol):
    # Called on the event loop once per committed batch, before its callers are answered,
    # with every due time its scripts made (store/core/writer.py).
    on_due: Callable[[list[Due]], None] | None


class Backend(Protocol):
    """What a dialect brings: its queries, its lifecycle, and three ways to run a script."""

    url: str  # where it keeps its data, for log lines (never a secret)
    q: Queries

    @property
    def writer(self) -> DueSource:
        """The writer thread: who hears the due times its commits made."""
        ...

    async def open(self, create: bool = True, check: bool = False) -> None: ...

    async def close(self) -> None: ...

    async def write(self, script: Script[T], shed: bool = False) -> T:
        """Run `script` in a write transaction and return once its commit is durable. With
        shed=True it may be refused at once (store.Overloaded) when too many writes wait."""
        ...

    async def fetch(self, sql: str, args: Args = ()) -> list[Row]:
        """One statement, read on its own (it sees every commit that returned before it)."""
        ...

    async def snapshot(self, script: Script[T]) -> T:
        """Run `script`'s reads in one consistent snapshot."""
        ...

    async def backup(self, dest: str) -> None: ...

    async def size(self) -> tuple[int, int]:
        """Bytes the database takes on disk, and bytes free inside it."""
        ...

    async def reclaim(self, max_bytes: int) -> int:
        """Give up to `max_bytes` of free space back to the file system, in one short write."""
        ...

    async def compact(self) -> None:
        """Rebuild the whole database; only where no daemon uses it."""
        ...

    async def tune_space(self) -> float | None:
        """Make the database give space back as rows go, once; seconds it took, or None."""
        ...

    async def forget(self) -> None:
        """After an erasure commits: what the rows no longer hold, out of the database's files
        where the backend can see to it (SQLite: the WAL checkpointed and truncated; deleted
        content is zeroed as it goes, secure_delete), else nothing (PostgreSQL: VACUUM's)."""
        ...

    @property
    def fault(self) -> str | None: ...

    shared: bool  # other processes may write the same database

    async def watch(self, due: Callable[[int], None], inbox: Callable[[str, str], None],
                    stop: asyncio.Event) -> None:
        """Signals from the other processes until `stop` (store/base.py OperationsStore)."""
        ...
