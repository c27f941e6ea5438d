"""Resolution: the one way to find a notification and to mark it as no longer needed.

The API, the CLI and (later) inbox reads and delivery receipts all come through here. The first
resolution wins; the claim re-checks it, so a step claimed after it commits is never sent.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Protocol

from notifyd.core.models import ResolveResult
from notifyd.store import LookupStore, Notification, ResolveStore

DEFAULT_RESOLUTION = "resolved"


class ResolverStore(LookupStore, ResolveStore, Protocol):
    """What resolving by reference uses: the dedup key's lookup, then the resolution."""


@dataclass(frozen=True)
class Ref:
    """A notification named by its id, or by the user and dedup key its producer knows."""

    notification_id: str | None = None
    user_id: str | None = None
    dedup_key: str | None = None

    def __str__(self) -> str:
        return self.notification_id or f"{self.user_id}:{self.dedup_key}"


FORMS = "a notification id (n_ and 18 letters or digits) or user_id:dedup_key"
ID_RE = re.compile(r"n_[0-9a-z]{18}")


class BadRef(ValueError):
    pass


def parse_ref(text: str) -> Ref:
    """A notification id, or `user_id:dedup_key` split on the last colon (user ids may hold
    colons: `tenant:42:invoice-7` is user `tenant:42`, key `invoice-7`)."""
    if ID_RE.fullmatch(text):
        return Ref(notification_id=text)
    user_id, sep, dedup_key = text.rpartition(":")
    if not sep or not user_id or not dedup_key:
        raise BadRef(f"{text!r} is not {FORMS}")
    return Ref(user_id=user_id, dedup_key=dedup_key)


async def find(store: LookupStore, ref: Ref, tenant: str | None) -> Notification | None:
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


async def resolve(store: ResolverStore, ref: Ref, resolution: str, by: str,
                  tenant: str | None = None, kinds: tuple[str, ...] = (),
                  read_kinds: frozenset[str] = frozenset()) -> ResolveResult | None:
    """Resolve once; a later call reports the first resolution unchanged. With `tenant` (and
    `kinds`), what lies outside them is not found (None). By id this is one write, the scope
    checked inside it (the hot path: producers resolve as often as they post); a user and
    dedup key are looked up first, within the tenant (operators: "default"). The resolution
    is dated by its own transaction, after the lookup: a claim that committed before it never
    shows a later time. A kind in `read_kinds` has its inbox item marked read by it."""
    nid = ref.notification_id
    if nid is None:
        assert ref.user_id is not None and ref.dedup_key is not None
        nid = await store.find_by_dedup(tenant or "default", ref.user_id, ref.dedup_key)
        if nid is None:
            return None
    return await store.resolve(nid, resolution, by, tenant, kinds, read_kinds)


async def resolve_keys(store: ResolveStore, tenant: str, keys: list[tuple[str, str, str]], by: str,
                       kinds: tuple[str, ...] = (), read_kinds: frozenset[str] = frozenset()
                       ) -> list[ResolveResult | None]:
    """Resolve each (user_id, dedup_key, resolution) of `tenant` as `resolve` would, all in one
    write, the lookups inside it; None for a key naming nothing of the tenant's (and kinds')."""
    return await store.resolve_keys(tenant, keys, by, kinds, read_kinds)
