"""Resolution: the one way to find a notification and to mark it as no longer needed.

The API, the CLI and (later) inbox reads and delivery receipts all come through here. The first
resolution wins; the claim re-checks it, so a step claimed after it commits is never sent.
"""

from __future__ import annotations

from dataclasses import dataclass

from notifyd.models import ResolveResult
from notifyd.store import Notification, Store

DEFAULT_RESOLUTION = "resolved"


@dataclass(frozen=True)
class Ref:
    """A notification named by its id, or by the user and dedup key its producer knows."""

    notification_id: str | None = None
    user_id: str | None = None
    dedup_key: str | None = None

    def __str__(self) -> str:
        return self.notification_id or f"{self.user_id}:{self.dedup_key}"


def parse_ref(text: str) -> Ref:
    """`n_...` is an id (ids hold no colon); anything else is `user_id:dedup_key`."""
    if ":" not in text:
        return Ref(notification_id=text)
    user_id, _, dedup_key = text.partition(":")
    return Ref(user_id=user_id, dedup_key=dedup_key)


async def find(store: Store, ref: Ref, tenant: str | None) -> Notification | None:
    """The notification `ref` names, if it is in `tenant` (None: any tenant, for operators).
    A user and dedup key are looked up within the tenant given."""
    nid = ref.notification_id
    if nid is None:
        assert ref.user_id is not None and ref.dedup_key is not None
        nid = await store.find_by_dedup(tenant or "default", ref.user_id, ref.dedup_key)
    n = await store.get_notification(nid) if nid else None
    if n is None or (tenant is not None and n.tenant != tenant):
        return None
    return n


async def resolve(store: Store, n: Notification, resolution: str, by: str,
                  now: int) -> ResolveResult:
    """Resolve once; a later call reports the first resolution unchanged."""
    r = await store.resolve(n.id, resolution, by, now)
    assert r is not None  # n was read from this store, and notifications are never deleted
    return r
