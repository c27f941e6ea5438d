"""The store: everything above it speaks the `Store` interface (store/base.py), each caller
through the roles it uses; only store/ speaks SQL, and only a dialect's folder (store/sqlite/)
holds it.

`open_store` picks the backend from a URL, importing only that backend: `sqlite:///path` or a
bare path is the SQLite file; `postgresql://user@host/db` (or `postgres://`) a PostgreSQL
database that several notifyd processes may share.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from notifyd.core.clock import Clock
from notifyd.core.records import (
    Attempt,
    DeadLetter,
    DeadMatch,
    DeadStep,
    DigestDue,
    DigestMember,
    Event,
    Hours,
    InboxChange,
    InboxItem,
    KeyRecord,
    Listed,
    Notification,
    Proof,
    Step,
    Stuck,
    Suppression,
    TenantRecord,
)
from notifyd.store.base import (
    ClaimStore,
    DeadLetterStore,
    DeliveryStore,
    DigestStore,
    EventStore,
    InboxStore,
    IntakeStore,
    KeyStore,
    LookupStore,
    MonitorStore,
    OperationsStore,
    Overloaded,
    ProfileStore,
    ReceiptStore,
    RecipientStore,
    ReplayStore,
    ResolveStore,
    RetentionStore,
    SendStore,
    StorageError,
    Store,
    StoreClosed,
    StoreLocked,
    StoreMissing,
    StoreUnavailable,
    SuppressionStore,
    TopicStore,
)

if TYPE_CHECKING:
    from notifyd.store.postgres.settings import PostgresSettings
    from notifyd.store.sqlite.settings import SqliteSettings

SQLITE_PREFIX = "sqlite:///"
POSTGRES_SCHEMES = ("postgresql://", "postgres://")


def is_postgres(url: str) -> bool:
    return url.startswith(POSTGRES_SCHEMES)


class Held(Protocol):
    """A database held for one daemon (`hold`)."""

    def release(self, undo: bool = False) -> None: ...


def sqlite_path(url: str) -> str | None:
    """The file a SQLite URL or bare path names (as SQLAlchemy reads them: sqlite:///rel.db,
    sqlite:////abs/path.db); None for another backend's URL."""
    if url.startswith(SQLITE_PREFIX):
        return url[len(SQLITE_PREFIX):]
    if "://" in url:
        return None
    return url


def _unsupported(url: str) -> StoreUnavailable:
    scheme = url.split("://", 1)[0]
    return StoreUnavailable(f"store URL scheme {scheme!r} is not supported (a path, "
                            "sqlite:///path or postgresql://user@host/database)")


def hold(url: str) -> Held | None:
    """Take the database for one daemon where its backend allows only one (a SQLite file: its
    lock file); StoreLocked when another holds it. None where several may share it."""
    if is_postgres(url):
        return None
    path = sqlite_path(url)
    if path is None:
        raise _unsupported(url)
    from notifyd.store.sqlite.lock import FileLock

    return FileLock(path)


async def open_store(url: str, clock: Clock | None = None, *, sqlite: SqliteSettings | None = None,
                     postgres: PostgresSettings | None = None, create: bool = True,
                     max_pending_writes: int = 0, check: bool = False) -> Store:
    """Open the store that `url` names, migrating it, and creating it unless create=False.
    `clock` dates what it records (the system clock when None); `sqlite` is a SQLite file's
    settings ([store.sqlite]), `postgres` a PostgreSQL database's ([store.postgres]); past
    `max_pending_writes` waiting accepts are refused (Overloaded); with `check`, a damaged
    database is refused."""
    from notifyd.store.core.store import CoreStore

    if is_postgres(url):
        from notifyd.store.postgres.backend import PostgresBackend

        pg = CoreStore(PostgresBackend(url, clock, max_pending_writes, postgres))
        await pg.open(create, check)
        return pg
    path = sqlite_path(url)
    if path is None:
        raise _unsupported(url)
    from notifyd.store.sqlite.backend import SqliteBackend

    store = CoreStore(SqliteBackend(path, clock, sqlite, max_pending_writes))
    await store.open(create, check)
    return store


def restore(url: str, backup: str) -> tuple[int, str | None]:
    """Put the backup file at `backup` in place of the database `url` names, after checking
    it whole: the notifications it holds, and where the replaced database was moved (None:
    there was none). The caller holds the database (`hold`): no daemon may run on it."""
    if is_postgres(url):
        raise StoreUnavailable("notifyd restore puts a SQLite file back; restore a PostgreSQL "
                               "database with pg_restore (pg_restore -d DBNAME FILE)")
    path = sqlite_path(url)
    if path is None:
        raise _unsupported(url)
    from pathlib import Path

    from notifyd.store.sqlite.restore import check_backup
    from notifyd.store.sqlite.restore import restore as put_back

    count = check_backup(Path(backup))
    return count, put_back(path, Path(backup))


__all__ = ["Attempt", "DeadLetter", "DeadMatch", "DeadStep", "DigestDue", "DigestMember",
           "Event", "Held", "Hours", "InboxChange", "InboxItem", "KeyRecord", "Listed",
           "Notification", "Overloaded", "Proof", "Step",
           "StorageError", "Store", "StoreClosed", "StoreLocked", "StoreMissing",
           "StoreUnavailable", "Stuck", "Suppression", "TenantRecord", "hold", "is_postgres",
           "open_store", "restore", "sqlite_path",
           # the roles callers hold (store/base.py)
           "ClaimStore", "DeadLetterStore", "DeliveryStore", "DigestStore", "EventStore",
           "InboxStore", "IntakeStore", "KeyStore", "LookupStore", "MonitorStore",
           "OperationsStore", "ProfileStore", "ReceiptStore", "RecipientStore", "ReplayStore",
           "ResolveStore", "RetentionStore", "SendStore", "SuppressionStore", "TopicStore"]
