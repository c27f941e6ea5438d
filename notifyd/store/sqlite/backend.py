"""SQLite's lifecycle under the store core: the file (made readable by its owner alone, checked
for damage, migrated), the writer thread that commits many scripts together, a reader connection
for single statements and a kept snapshot connection for reads that must agree.

Reads use their own connections, so in WAL mode a slow reader never waits behind the writer.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sqlite3
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar, cast

import aiosqlite

from notifyd.core.clock import Clock, SystemClock
from notifyd.store.base import StorageError, StoreMissing, StoreUnavailable
from notifyd.store.core.tx import Args, Script, Tx
from notifyd.store.sqlite.migrate import migrate
from notifyd.store.sqlite.settings import SqliteSettings
from notifyd.store.sqlite.tx import QUERIES, SqliteTx
from notifyd.store.sqlite.writer import SqliteWriter, storage_fault

T = TypeVar("T")
log = logging.getLogger("notifyd.store")
RESTORE = ("; to restore: stop notifyd, move the damaged file and its -wal and -shm files "
           "away, copy the backup to its path, start notifyd")


class SqliteBackend:
    """One WAL-mode SQLite file."""

    q = QUERIES

    def __init__(self, path: str | Path, clock: Clock | None = None,
                 settings: SqliteSettings | None = None, max_queue: int = 0) -> None:
        self.path = str(path)
        self.url = f"sqlite:///{Path(path).resolve()}"
        self.clock = clock or SystemClock()
        settings = settings or SqliteSettings()
        self.synchronous = settings.synchronous
        self.busy_timeout_ms = settings.busy_timeout_ms
        self.writer = SqliteWriter(self.path, self._connect, self.clock, max_queue)
        self._reader: aiosqlite.Connection | None = None
        # Snapshot reads (a notification with its steps, attempts, events and receipts in one
        # transaction) on one thread and one connection kept open: a fresh connection per read
        # cost ~0.75 ms of CPU (connect, pragma, begin, close).
        self._snapshots = ThreadPoolExecutor(max_workers=1, thread_name_prefix="notifyd-snapshot")
        self._snapshot: sqlite3.Connection | None = None
        self._check = False

    shared = False  # one daemon per file (its lock file)

    async def watch(self, due: Callable[[int], None], inbox: Callable[[str, str], None],
                    stop: asyncio.Event) -> None:
        """Nothing to hear: no other process writes this file."""

    @property
    def commits(self) -> int:
        """Batches committed, for benchmarks and tests of group commit."""
        return self.writer.commits

    @property
    def fault(self) -> str | None:
        """What is wrong with the storage right now, if anything (for /readyz)."""
        return self.writer.fault

    async def open(self, create: bool = True, check: bool = False) -> None:
        """Open (and migrate) the file; with create=False a missing file is an error, so that a
        command that only reads never leaves a fresh database behind. A new file is made
        readable by its owner alone, whatever the umask: it holds contacts and params."""
        where = Path(self.path).resolve()
        if not where.parent.is_dir():
            raise StoreUnavailable(f"the database folder {where.parent} does not exist; create "
                                   "it, or point store.url (or --db) elsewhere")
        if not where.exists():
            if not create:
                raise StoreMissing(f"no database at {where}; check --config / --db (notifyd "
                                   "serve or notifyd keys create makes one)")
            os.close(os.open(where, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
        elif where.stat().st_mode & 0o077:
            log.warning(
                "%s can be read by other users (mode %o); it holds contacts and params: chmod "
                "600 it and its -wal and -shm files", where, where.stat().st_mode & 0o777)
        self._check = check
        try:
            await self.writer.open()
        except sqlite3.DatabaseError as e:
            raise StoreUnavailable(f"{where} is not a notifyd database or is damaged ({e}); "
                                   f"restore it from a copy (notifyd backup makes one){RESTORE}"
                                   ) from None
        self._reader = await aiosqlite.connect(self.path)
        self._reader.row_factory = aiosqlite.Row
        await self._reader.execute(f"PRAGMA busy_timeout = {self.busy_timeout_ms}")

    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        try:
            return self._setup(conn)
        except BaseException:
            conn.close()
            raise

    def _setup(self, conn: sqlite3.Connection) -> sqlite3.Connection:
        conn.row_factory = sqlite3.Row
        if self._check:  # damage found now, not by the scanner after "listening"
            problems = [" ".join(r[0].split()) for r in conn.execute("PRAGMA quick_check(3)")]
            if problems != ["ok"]:
                raise sqlite3.DatabaseError("damaged: " + "; ".join(problems))
        conn.execute(f"PRAGMA busy_timeout = {self.busy_timeout_ms}")
        if conn.execute("PRAGMA page_count").fetchone()[0] == 0:  # a new file gives space back
            conn.execute("PRAGMA auto_vacuum = INCREMENTAL")
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute(f"PRAGMA synchronous = {self.synchronous}")
        conn.execute("PRAGMA foreign_keys = ON")
        # Deleted and overwritten content is zeroed, not left in free space: an erased
        # person's rows are gone from the file's bytes, not only from its tables.
        conn.execute("PRAGMA secure_delete = ON")
        migrate(conn)
        return conn

    async def close(self) -> None:
        await self.writer.close()
        if self._reader is not None:
            await self._reader.close()
            self._reader = None
        await asyncio.get_running_loop().run_in_executor(self._snapshots, self._close_snapshot)
        self._snapshots.shutdown(wait=True)

    def _close_snapshot(self) -> None:
        if self._snapshot is not None:
            self._snapshot.close()
            self._snapshot = None

    async def write(self, script: Script[T], shed: bool = False) -> T:
        """Run `script` on the writer inside a transaction; return once its commit is durable."""
        return await self.writer.write(script, shed)

    async def fetch(self, sql: str, args: Args = ()) -> list[Any]:
        """One statement run to its end in one call on the reader's thread. A cursor held open
        across an await would keep a read transaction open on the shared connection, and a
        read issued meanwhile (after a write that had committed) would see the older snapshot:
        PUT a user, then read it back, and find nothing. One call is also one thread hop."""
        assert self._reader is not None
        try:
            return list(await self._reader.execute_fetchall(sql, args))
        except sqlite3.Error as e:
            raise _read_fault(e) from None

    async def snapshot(self, script: Script[T]) -> T:
        """`script`'s reads in one snapshot, on a connection of its own: a transaction on the
        shared reader would hold every other read back in time."""
        try:
            return await asyncio.get_running_loop().run_in_executor(
                self._snapshots, self._in_snapshot, script)
        except sqlite3.Error as e:
            raise _read_fault(e) from None

    def _in_snapshot(self, script: Script[T]) -> T:
        if self._snapshot is None:
            self._snapshot = sqlite3.connect(self.path, isolation_level=None)
            self._snapshot.row_factory = sqlite3.Row
            self._snapshot.execute(f"PRAGMA busy_timeout = {self.busy_timeout_ms}")
        conn = self._snapshot
        conn.execute("BEGIN")
        try:
            return script(SqliteTx(conn, self.clock.now_ms()))
        finally:
            conn.execute("COMMIT")

    async def backup(self, dest: str) -> None:
        """A consistent copy of the database at `dest` (VACUUM INTO: compact, and safe beside
        the running daemon), readable by its owner alone."""
        os.close(os.open(dest, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))

        def copy() -> None:
            conn = sqlite3.connect(self.path, isolation_level=None)
            try:
                conn.execute(f"PRAGMA busy_timeout = {self.busy_timeout_ms}")
                conn.execute("VACUUM INTO ?", (dest,))
            finally:
                conn.close()

        try:
            await asyncio.to_thread(copy)
        except BaseException:
            os.unlink(dest)
            raise


    # --- space ----------------------------------------------------------------------------

    async def size(self) -> tuple[int, int]:
        """Bytes on disk (the file and its write-ahead log), and bytes free inside the file."""
        page = (await self.fetch("PRAGMA page_size"))[0][0]
        pages = (await self.fetch("PRAGMA page_count"))[0][0]
        free = (await self.fetch("PRAGMA freelist_count"))[0][0]
        wal = Path(self.path + "-wal")
        return pages * page + (wal.stat().st_size if wal.exists() else 0), free * page

    async def reclaim(self, max_bytes: int) -> int:
        """Give up to `max_bytes` of the file's free pages back to the file system, in one
        short write; the bytes given back."""
        def script(tx: Tx) -> int:
            c = cast(SqliteTx, tx).c
            page = int(c.execute("PRAGMA page_size").fetchone()[0])
            before = c.execute("PRAGMA freelist_count").fetchone()[0]
            # Each run of the pragma frees one page in Python's sqlite3 (it steps it once).
            for _ in range(min(before, max(1, max_bytes // page))):
                c.execute("PRAGMA incremental_vacuum")
            return int(before - c.execute("PRAGMA freelist_count").fetchone()[0]) * page

        return int(await self.writer.write(script))

    async def compact(self) -> None:
        """Rebuild the whole file (VACUUM): every free page back, the rows packed. It needs
        as much free disk as the file, and holds the database while it runs."""
        await asyncio.to_thread(self._vacuum, None)

    async def tune_space(self) -> float | None:
        """Make a file from before incremental auto-vacuum give its free pages back as rows
        go (once: a VACUUM); the seconds it took, or None when there was nothing to do."""
        return await asyncio.to_thread(self._vacuum, "INCREMENTAL")

    async def forget(self) -> None:
        """The WAL, whose frames still hold pages as they were before the erasure, copied into
        the file (where secure_delete zeroed what went) and truncated to nothing."""
        await asyncio.to_thread(self._checkpoint)

    def _checkpoint(self) -> None:
        conn = sqlite3.connect(self.path, isolation_level=None)
        try:
            conn.execute(f"PRAGMA busy_timeout = {self.busy_timeout_ms}")
            busy = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0]
        finally:
            conn.close()
        if busy:
            log.warning("the WAL could not be truncated after an erasure (a reader held it); "
                        "the next checkpoint finishes it")

    def _vacuum(self, auto_vacuum: str | None) -> float | None:
        began = time.monotonic()
        # A connection of its own: one kept open still reads the mode it first saw.
        conn = sqlite3.connect(self.path, isolation_level=None)
        try:
            conn.execute(f"PRAGMA busy_timeout = {self.busy_timeout_ms}")
            if auto_vacuum:
                if conn.execute("PRAGMA auto_vacuum").fetchone()[0] == 2:
                    return None
                conn.execute(f"PRAGMA auto_vacuum = {auto_vacuum}")
            conn.execute("VACUUM")
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        finally:
            conn.close()
        return time.monotonic() - began


def _read_fault(e: sqlite3.Error) -> Exception:
    """A read that failed because of the storage (no file descriptors left, the disk) as
    StorageError; any other error as it is."""
    fault = storage_fault(e)
    return StorageError(f"{fault} (a read)") if fault else e
