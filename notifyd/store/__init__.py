"""The store interface: everything above it speaks these methods; only store/ speaks SQL.

SQLite is the backend today (store/sqlite.py); a PostgreSQL backend implements the same Protocol,
and the shared test suite will run against both. Times are epoch milliseconds.
"""

from __future__ import annotations

from typing import Any, Protocol

from notifyd.config import Config
from notifyd.models import (
    AcceptInput,
    AcceptResult,
    ApiKey,
    Budget,
    Claim,
    Completion,
    FreezeFn,
    PlanFn,
    Recipient,
    ResolveResult,
)
from notifyd.store.sqlite import SqliteStore, StoreClosed


class Store(Protocol):
    async def open(self) -> None: ...
    async def close(self) -> None: ...

    # keys and recipients
    async def create_key(self, key_hash: str, name: str, tenant: str, kinds: tuple[str, ...],
                         now: int) -> None: ...
    async def find_key(self, key_hash: str) -> ApiKey | None: ...
    async def list_keys(self) -> list[dict[str, Any]]: ...
    async def revoke_key(self, name: str, now: int) -> bool: ...
    async def put_recipient(self, r: Recipient, now: int) -> None: ...
    async def get_recipient(self, tenant: str, user_id: str) -> Recipient | None: ...

    # accept, resolve, read
    async def accept(self, inp: AcceptInput, notification_id: str, plan: PlanFn,
                     ttl_sec: int, now: int) -> AcceptResult: ...
    async def resolve(self, notification_id: str, resolution: str, by: str,
                      now: int) -> ResolveResult | None: ...
    async def find_by_dedup(self, tenant: str, user_id: str, dedup_key: str) -> str | None: ...
    async def get_notification(self, notification_id: str) -> dict[str, Any] | None: ...

    # the delivery engine
    async def claim_due(self, now: int, wants: list[tuple[str, str, int]], lease_ms: int,
                        contact_of: dict[str, str], freeze: FreezeFn,
                        budget: Budget | None = None) -> list[Claim]: ...
    async def complete(self, claim: Claim, done: Completion, now: int) -> bool: ...
    async def recover_interrupted(self, now: int) -> int: ...
    async def next_due(self, pairs: list[tuple[str, str]]) -> int | None: ...
    async def replay(self, notification_id: str, step_no: int | None, now: int) -> int: ...
    async def end_unconfigured(self, channels: list[str], now: int) -> int: ...
    async def dead_letters(self, limit: int) -> list[dict[str, Any]]: ...


__all__ = ["FreezeFn", "PlanFn", "SqliteStore", "Store", "StoreClosed", "open_store"]


async def open_store(cfg: Config) -> Store:
    store = SqliteStore(cfg.store.path, cfg.store.synchronous, cfg.store.busy_timeout_ms)
    await store.open()
    return store
