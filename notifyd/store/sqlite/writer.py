"""SQLite's side of the write path (store/core/writer.py: one thread, group commit): a batch in
one BEGIN IMMEDIATE, replayed with a SAVEPOINT around each op when one fails, so it fails alone;
and the storage faults SQLite names.

Storage faults (disk full, I/O error, read-only, the file deleted or replaced under us) fail the
ops as StorageError, and the writer recovers by itself when the disk does, except for a file
that is gone: that needs a restart, and says so.
"""

from __future__ import annotations

import logging
import os
import sqlite3

from notifyd.store.base import StorageError
from notifyd.store.core.writer import Op, Outcome, Writer
from notifyd.store.sqlite.tx import SqliteTx

log = logging.getLogger("notifyd.store")
# SQLite primary result codes that mean the storage, not the statement, is at fault.
STORAGE_FAULTS = {8: "the database is read-only", 10: "disk I/O error",
                  13: "the disk is full", 14: "the database file cannot be opened"}


def storage_fault(e: BaseException) -> str | None:
    """What is wrong with the storage, if `e` says so."""
    code = getattr(e, "sqlite_errorcode", None)
    return STORAGE_FAULTS.get(code & 0xFF) if isinstance(code, int) else None


class SqliteWriter(Writer[sqlite3.Connection]):
    _txo: SqliteTx | None = None
    _identity: tuple[int, int] | None = None

    def _opened(self) -> None:
        """The file this writer opened, to tell it from one put in its place (`_replaced`)."""
        st = os.stat(self.path)
        self._identity = (st.st_dev, st.st_ino)

    def _run(self, ops: list[Op]) -> list[Outcome]:
        """Commit all of `ops` together: the fast path runs them bare; if one raises, the batch
        is rolled back and replayed with a SAVEPOINT around each op, so only that op fails."""
        conn = self._conn
        assert conn is not None
        if self.lost or self._replaced():
            return [(False, StorageError(self.lost or ""))] * len(ops)
        try:
            conn.execute("BEGIN IMMEDIATE")
            try:
                outcomes: list[Outcome] = [(True, op(self._tx(conn))) for op in ops]
            except Exception:  # noqa: BLE001 - replayed one by one below
                conn.execute("ROLLBACK")
                conn.execute("BEGIN IMMEDIATE")
                outcomes = [self._isolated(conn, op) for op in ops]
            conn.execute("COMMIT")
        except sqlite3.Error as e:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            return [(False, self._storage(e))] * len(ops)
        return outcomes

    def _isolated(self, conn: sqlite3.Connection, op: Op) -> Outcome:
        conn.execute("SAVEPOINT op")
        try:
            result = op(self._tx(conn))
        except Exception as e:  # noqa: BLE001 - the op fails alone; the batch goes on
            conn.execute("ROLLBACK TO op")
            conn.execute("RELEASE op")
            return False, self._storage(e)
        conn.execute("RELEASE op")
        return True, result

    def _tx(self, conn: sqlite3.Connection) -> SqliteTx:
        """A script's transaction at `_now`. Scripts run one at a time on this thread, so one
        Tx serves them all, its `now` set for each."""
        tx = self._txo
        if tx is None or tx.c is not conn:
            tx = self._txo = SqliteTx(conn, 0)
        tx.now = self._now()
        return tx

    def _fault_of(self, e: BaseException) -> str | None:
        fault = storage_fault(e)
        return None if fault is None else f"{fault} ({self.path})"

    def _replaced(self) -> bool:
        """The file we write is no longer the one at our path (deleted, or replaced)."""
        try:
            st = os.stat(self.path)
            same = (st.st_dev, st.st_ino) == self._identity
        except OSError:
            same = False
        if not same:
            self.lost = (f"the database file {self.path} was deleted or replaced while notifyd "
                         "ran; nothing more is accepted: restore it (notifyd backup keeps "
                         "copies) and restart notifyd")
            log.critical("%s", self.lost)
        return not same
