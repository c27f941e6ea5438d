"""The store: everything above it speaks the `Store` interface (store/base.py); only store/ speaks SQL.

`open_store` picks the backend from a URL: `sqlite:///path` or a bare path is the SQLite store.
"""

from __future__ import annotations

from notifyd.core.records import (
    Attempt,
    DeadLetter,
    DigestDue,
    DigestMember,
    Event,
    InboxChange,
    InboxItem,
    KeyRecord,
    Notification,
    Proof,
    Step,
    Suppression,
)
from notifyd.store.base import (
    Overloaded,
    StorageError,
    Store,
    StoreClosed,
    StoreMissing,
    StoreUnavailable,
)
from notifyd.store.sqlite import SqliteStore

SQLITE_PREFIX = "sqlite:///"


def sqlite_path(url: str) -> str | None:
    """The file a SQLite URL or bare path names (as SQLAlchemy reads them: sqlite:///rel.db,
    sqlite:////abs/path.db); None for another backend's URL."""
    if url.startswith(SQLITE_PREFIX):
        return url[len(SQLITE_PREFIX):]
    if "://" in url:
        return None
    return url


async def open_store(url: str, synchronous: str = "FULL", busy_timeout_ms: int = 5000,
                     create: bool = True, max_pending_writes: int = 0,
                     check: bool = False) -> Store:
    """Open the store that `url` names, migrating it, and creating it unless create=False."""
    path = sqlite_path(url)
    if path is None:
        scheme = url.split("://", 1)[0]
        raise StoreUnavailable(f"store URL scheme {scheme!r} is not supported (a path, or "
                               "sqlite:///path)")
    store = SqliteStore(path, synchronous, busy_timeout_ms, max_pending_writes)
    await store.open(create, check)
    return store


__all__ = ["Attempt", "DeadLetter", "DigestDue", "DigestMember", "Event", "InboxChange",
           "InboxItem", "KeyRecord", "Notification", "Overloaded", "Proof",
           "SqliteStore", "Step", "StorageError", "Store", "StoreClosed", "StoreMissing",
           "StoreUnavailable", "Suppression", "open_store", "sqlite_path"]
