"""The store interface and the typed records that cross it. Only store/ speaks SQL.

Every backend implements `Store` and passes the one contract suite (tests/test_store_contract.py).
The store holds no policy: the claim policy comes in as a function (`DecideFn`) and the ladder
as a plan (`PlanFn`), so a backend only fetches, writes and keeps each in one transaction.
Times are epoch milliseconds.
"""

from __future__ import annotations

from typing import Any, Protocol

from notifyd.core.catalog import Catalog
from notifyd.core.models import (
    SCOPES,
    AcceptInput,
    AcceptResult,
    ApiKey,
    Budget,
    Claim,
    Completion,
    DecideFn,
    Device,
    Lane,
    PlanFn,
    Receipt,
    ReceiptRules,
    Recipient,
    ResolveResult,
)
from notifyd.core.records import (
    DeadLetter,
    DigestDue,
    DigestMember,
    InboxChange,
    InboxItem,
    KeyRecord,
    Notification,
    Suppression,
)


class StoreClosed(Exception):
    pass


class StoreUnavailable(Exception):
    """The store cannot be opened; the message names the file or URL and what to do."""


class StoreMissing(StoreUnavailable):
    """Opened without create, and there is no database there."""


class StorageError(Exception):
    """The storage cannot take writes now (disk full, I/O error, read-only, the file gone); the
    message says which. Nothing was written; the caller may retry later."""


class Overloaded(Exception):
    """Too many writes are waiting; this one was refused rather than queued. Retry shortly."""


class Store(Protocol):
    url: str  # where it keeps its data, for log lines (never holding a secret)

    async def open(self, create: bool = True, check: bool = False) -> None:
        """Open (creating unless create=False); with check=True, a damaged store is refused."""
        ...

    async def backup(self, dest: str) -> None:
        """A consistent copy at `dest`, made beside the running daemon."""
        ...
    async def close(self) -> None: ...

    # keys and recipients
    async def create_key(self, key_hash: str, name: str, tenant: str, kinds: tuple[str, ...],
                         now: int, scopes: frozenset[str] = SCOPES) -> None: ...
    async def find_key(self, key_hash: str) -> ApiKey | None: ...
    async def list_keys(self) -> list[KeyRecord]: ...
    async def revoke_key(self, name: str, now: int) -> bool: ...
    async def put_recipient(self, r: Recipient, now: int) -> None: ...
    async def get_recipient(self, tenant: str, user_id: str) -> Recipient | None:
        """The profile, disabled contacts and devices; None if the user has none of them."""
        ...

    async def put_device(self, tenant: str, user_id: str, device: Device, now: int) -> None: ...
    async def delete_device(self, tenant: str, user_id: str, device_id: str) -> bool: ...

    # accept, resolve, read
    async def accept(self, inp: AcceptInput, notification_id: str, plan: PlanFn,
                     ttl_sec: int, now: int, inbox: tuple[str, str | None] | None = None
                     ) -> AcceptResult:
        """Claim the dedup key and write the notification with its whole ladder, atomically;
        `plan` runs inside that transaction with the recipient as it is read there."""
        ...

    async def resolve(self, notification_id: str, resolution: str, by: str, now: int,
                      tenant: str | None = None, kinds: tuple[str, ...] = ()
                      ) -> ResolveResult | None: ...
    async def find_by_dedup(self, tenant: str, user_id: str, dedup_key: str) -> str | None: ...
    async def get_notification(self, notification_id: str) -> Notification | None: ...

    # the delivery engine
    async def claim_due(self, now: int, wants: list[tuple[str, Lane, int]], lease_ms: int,
                        rules: Catalog, decide: DecideFn,
                        budget: Budget | None = None) -> list[Claim]:
        """Up to n due steps per (channel, lane) within the shared budget: each judged by
        `decide` on what this same transaction reads, and leased when it says send. Lapsed
        leases become unknown first."""
        ...

    async def freeze(self, frozen: list[tuple[Claim, str, str, str | None]],
                     now: int) -> list[bool]:
        """Fix (claim, destination, payload, template) on each step while its claim token is
        still ours; True for each that was fixed. Nothing frozen is ever changed."""
        ...

    async def complete(self, claim: Claim, done: Completion, now: int,
                       rules: ReceiptRules | None = None) -> bool:
        """Record the attempt and apply `done` while the claim token is ours; with `rules`,
        apply the receipts that arrived before this answer named its message."""
        ...

    # provider evidence and the suppression list
    async def record_receipts(self, receipts: list[Receipt], now: int,
                              rules: ReceiptRules) -> list[str]:
        """Store and apply each receipt in one transaction: 'applied', 'duplicate', 'orphan'."""
        ...

    async def suppress(self, tenant: str, channel_type: str, address: str, reason: str,
                       source: str, now: int) -> bool: ...
    async def unsuppress(self, tenant: str, channel_type: str, address: str,
                         now: int) -> bool: ...
    async def suppressions(self, tenant: str, address: str | None = None,
                           limit: int = 1000) -> list[Suppression]: ...
    async def orphan_count(self) -> int: ...
    # the person's side
    async def put_preferences(self, tenant: str, user_id: str, preferences: dict[str, Any],
                              now: int) -> int: ...
    async def inbox_page(self, tenant: str, user_id: str, before: tuple[int, str] | None,
                         limit: int, archived: bool = False) -> list[InboxItem]: ...
    async def inbox_since(self, tenant: str, user_id: str, seq: int,
                          limit: int) -> list[InboxItem]: ...
    async def badge(self, tenant: str, user_id: str) -> int: ...
    async def read_item(self, tenant: str, user_id: str, item_id: str, now: int,
                        stop_on_read: frozenset[str]) -> InboxChange | None: ...
    async def read_all(self, tenant: str, user_id: str, now: int,
                       stop_on_read: frozenset[str]) -> InboxChange: ...
    async def archive_item(self, tenant: str, user_id: str, item_id: str,
                           now: int) -> InboxChange | None: ...
    async def rebuild_badges(self) -> int: ...
    async def signing_key(self, name: str, now: int) -> bytes: ...
    async def find_signing_key(self, name: str) -> bytes | None: ...
    async def locale_of(self, tenant: str, user_id: str) -> str | None: ...
    async def due_digests(self, now: int, limit: int) -> list[DigestDue]: ...
    async def digest_members(self, due: DigestDue) -> list[DigestMember]: ...
    async def make_digest(self, due: DigestDue, inp: AcceptInput, notification_id: str,
                          plan: PlanFn, ttl_sec: int, now: int,
                          inbox: tuple[str, str | None] | None, members: list[tuple[str, int]],
                          rollover: int) -> AcceptResult: ...
    async def next_digest_at(self) -> int | None: ...
    async def lapse_leases(self, now: int) -> int:
        """Steps whose lease has run out become unknown (retried under the same key)."""
        ...

    async def leased(self) -> tuple[int, int | None]:
        """How many steps are in flight under a lease, and when the last lease ends."""
        ...

    async def next_due(self, pairs: list[tuple[str, Lane]]) -> int | None: ...
    async def replay(self, notification_id: str, step_no: int | None, now: int) -> int: ...
    async def end_unconfigured(self, channels: list[str], decide: DecideFn, now: int) -> int: ...
    async def dead_letters(self, limit: int) -> list[DeadLetter]: ...

    # for health and metrics
    async def oldest_due(self, pairs: list[tuple[str, Lane]]) -> dict[tuple[str, Lane], int]:
        """The earliest send_after among open steps, per (channel, lane) that has any."""
        ...

    async def dead_count(self) -> int: ...

    @property
    def fault(self) -> str | None:
        """What recently went wrong with the storage (disk full, file gone), if anything."""
        ...
    async def ping(self) -> None:
        """Return once the store has committed a write transaction: it can take writes now."""
        ...
