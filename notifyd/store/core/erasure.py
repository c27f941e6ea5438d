"""A person erased in one write, and the one-way trace it leaves.

Their profile (contacts, preferences), devices and inbox go; notifications still open are
resolved "erased", so no step of them goes out again (the claim re-checks, promise 3); every
notification of theirs keeps its identity and timeline but loses its params, its steps' frozen
messages and destinations, and its receipts' addresses. A suppression of one of their addresses
is kept as `sha256:<hex>` of the address (core/contacts.hashed_address) unless another person of
the tenant still has the address: the list no longer holds it, yet a profile that names it again
brings the suppression back in the same write (`restore_hashed`), before any claim can read the
profile, so an erased address stays suppressed. The erasure's time is kept: user tokens made
before it are refused.
"""

from __future__ import annotations

import json
from typing import Any

from notifyd.core.contacts import BY_FIELD, hashed_address
from notifyd.core.records import Erased
from notifyd.store.core.rows import load_recipient
from notifyd.store.core.tx import Row, Tx

RESOLUTION = "erased"


def erase_user(tx: Tx, tenant: str, user_id: str, by: str) -> Erased:
    q, locks = tx.q, tx.features.row_locks
    if locks:  # no change of the profile slips between this read and the delete; and the
        tx.value(locks.LOCK_PROFILE, (tenant, user_id))  # notifications it resolves are
        tx.all(q.SELECT_OPEN_OF_USER, (tenant, user_id))  # locked before it reads the time
    r = load_recipient(tx, tenant, user_id)
    addresses = [a for f, a in (r.contacts.items() if r else ()) if f in BY_FIELD]
    hashed = kept = 0
    for row in tx.all(q.SELECT_LISTED, (tenant, json.dumps(addresses))) if addresses else ():
        if _held_elsewhere(tx, row, tenant, user_id):
            kept += 1
            continue
        _move(tx, row, hashed_address(row["address"]))
        hashed += 1
    removed = tx.one(q.DELETE_RECIPIENT, (tenant, user_id))
    devices = tx.run(q.DELETE_DEVICES, (tenant, user_id))
    items = tx.run(q.DELETE_INBOX, (tenant, user_id))
    tx.run(q.DELETE_BADGE, (tenant, user_id))
    cancelled, steps = _cancel_open(tx, tenant, user_id, by)
    tx.run(q.DELETE_HELD, (tenant, user_id))
    params = tx.run(q.SCRUB_PARAMS, (tenant, user_id))
    payloads = tx.run(q.SCRUB_PAYLOADS, (tenant, user_id))
    receipts = tx.run(q.SCRUB_RECEIPTS, (tenant, user_id))
    tx.run(q.RECORD_ERASURE, (tenant, user_id, tx.now))
    return Erased(tx.now, removed is not None, bool(removed and removed[0]), devices, items,
                  cancelled, steps, params, payloads, receipts, hashed, kept)


def _held_elsewhere(tx: Tx, row: Row, tenant: str, user_id: str) -> bool:
    return bool(tx.value(tx.q.ADDRESS_HELD, {
        "tenant": row["tenant"], "address": row["address"], "own_tenant": tenant,
        "user_id": user_id}))


def _cancel_open(tx: Tx, tenant: str, user_id: str, by: str) -> tuple[int, int]:
    """Resolve what is still open of theirs: its pending steps and held items cancelled."""
    q, why = tx.q, f"resolved: {RESOLUTION}"
    found = tx.all(q.SELECT_OPEN_OF_USER, (tenant, user_id))
    steps = 0
    for n in found:
        tx.run(q.RESOLVE, (tx.now, RESOLUTION, by, n["id"]))
        steps += tx.run(q.CANCEL_PENDING, (why, tx.now, n["id"]))
        steps += tx.run(q.CANCEL_HELD, (why, tx.now, n["id"]))
    return len(found), steps


def restore_hashed(tx: Tx, tenant: str, contacts: dict[str, Any]) -> None:
    """A profile names an address an erased person's suppression keeps one-way: the
    suppression is the address's again (in the profile's tenant, or '*')."""
    addresses = {hashed_address(str(a)): str(a) for f, a in contacts.items() if f in BY_FIELD}
    if not addresses:
        return
    for row in tx.all(tx.q.SELECT_LISTED, (tenant, json.dumps(list(addresses)))):
        _move(tx, row, addresses[row["address"]])


def _move(tx: Tx, row: Row, address: str) -> None:
    """The suppression keyed by `address` instead, all else as it was."""
    tx.run(tx.q.SUPPRESS, (row["tenant"], row["channel_type"], address, row["reason"],
                           row["source"], row["evidence"], row["created_at"]))
    tx.run(tx.q.UNSUPPRESS, (row["tenant"], row["channel_type"], row["address"]))
