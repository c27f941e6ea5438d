"""The store interface: everything above it speaks these methods; only store/ speaks SQL.

SQLite is the backend today; a PostgreSQL backend implements the same methods.
"""

from __future__ import annotations

from notifyd.config import Config
from notifyd.store.sqlite import SqliteStore, StoreClosed

Store = SqliteStore  # the interface, until a second backend makes a Protocol earn its keep

__all__ = ["Store", "SqliteStore", "StoreClosed", "open_store"]


async def open_store(cfg: Config) -> Store:
    store = SqliteStore(cfg.store.path, cfg.store.synchronous, cfg.store.busy_timeout_ms)
    await store.open()
    return store
