"""A person erased in one write, and the one-way trace it leaves.

Their profile (contacts, preferences), devices, inbox and topic memberships go (a topic they
were in moves on a version, one member fewer); notifications still open are resolved "erased",
so no step of them goes out again (the claim re-checks, promise 3); every notification of
theirs keeps its identity and timeline but loses its params, its steps' frozen messages and
destinations, and its receipts' addresses; so does a receipt no step matched that names one of
their addresses. An event whose params or subject name their email or phone (as the profile held
it, any case) has it replaced by ERASED there, and in what it made for anyone: the notifications'
params, their inbox items, the frozen messages of steps that are done (a step still to be sent
or retried keeps its frozen message: promise 5). A suppression of one of their addresses is
kept as hashed_address (an HMAC under the installation's key, `suppression_key`) unless
another person of the tenant still has the address: the list no longer holds it, yet a profile
that names it again brings the suppression back in the same write (`restore_hashed`), before
any claim can read the profile, so an erased address stays suppressed. The erasure's time is
kept: user tokens made before it are refused. What the rows no longer hold may still be in the
database's free space: the backend's `forget` runs after the commit (SQLite: secure_delete and
a WAL checkpoint).
"""

from __future__ import annotations

import json
import re
import secrets
from typing import Any

from notifyd.core.contacts import BY_FIELD, SUPPRESSION_KEY, hashed_address
from notifyd.core.records import Erased
from notifyd.store.core import topics
from notifyd.store.core.rows import load_recipient
from notifyd.store.core.tx import Row, Tx

RESOLUTION = "erased"
ERASED = "[erased]"  # what stands where an erased address was in an event's text
TEXT_FIELDS = ("email", "phone")  # looked for in events' text (a chat id is a bare number)


def erase_user(tx: Tx, tenant: str, user_id: str, by: str) -> Erased:
    q, locks = tx.q, tx.features.row_locks
    if locks:  # no change of the profile slips between this read and the delete; and the
        tx.value(locks.LOCK_PROFILE, (tenant, user_id))  # notifications it resolves are
        tx.all(q.SELECT_OPEN_OF_USER, (tenant, user_id))  # locked before it reads the time
    r = load_recipient(tx, tenant, user_id)
    addresses = [a for f, a in (r.contacts.items() if r else ()) if f in BY_FIELD]
    hashed = kept = 0
    key = suppression_key(tx)
    for row in tx.all(q.SELECT_LISTED, (tenant, json.dumps(addresses))) if addresses else ():
        if _held_elsewhere(tx, row, tenant, user_id):
            kept += 1
            continue
        _move(tx, row, hashed_address(row["address"], key))
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
    if addresses:
        receipts += tx.run(q.SCRUB_ORPHAN_RECEIPTS, (json.dumps(addresses),))
    events = _scrub_events(tx, tenant, [a for f, a in (r.contacts.items() if r else ())
                                        if f in TEXT_FIELDS])
    memberships = _leave_topics(tx, tenant, user_id)
    tx.run(q.RECORD_ERASURE, (tenant, user_id, tx.now))
    return Erased(tx.now, removed is not None, bool(removed and removed[0]), devices, items,
                  cancelled, steps, params, payloads, receipts, hashed, kept, events,
                  memberships)


def suppression_key(tx: Tx) -> bytes:
    """The installation's key for one-way suppressions (a migration makes it; one made here
    only if that row was lost)."""
    row = tx.one(tx.q.SELECT_SIGNING_KEY, (SUPPRESSION_KEY,))
    if row is None:
        tx.run(tx.q.INSERT_SIGNING_KEY, (SUPPRESSION_KEY, secrets.token_bytes(32), tx.now))
        row = tx.one(tx.q.SELECT_SIGNING_KEY, (SUPPRESSION_KEY,))
        assert row is not None
    return bytes(row["secret"])


def _leave_topics(tx: Tx, tenant: str, user_id: str) -> int:
    """Out of every topic (one change each, as a removal), then no row names them."""
    for row in tx.all(tx.q.SELECT_MEMBERSHIPS, (tenant, user_id)):
        topics.change(tx, tenant, row["topic"], (), (user_id,))
    return tx.run(tx.q.DELETE_MEMBERSHIPS, (tenant, user_id))


def _scrub_events(tx: Tx, tenant: str, addresses: list[str]) -> int:
    """Each event of the tenant whose params or subject name one of `addresses` (any case),
    with ERASED in its place, there and in what the event made; how many events."""
    if not addresses:
        return 0
    q, erase = tx.q, _eraser(addresses)
    seen: dict[int, Row] = {}
    for a in addresses:
        like = "%" + re.sub(r"([\\%_])", r"\\\1", a.lower()) + "%"
        seen.update((r["seq"], r) for r in tx.all(q.SELECT_EVENTS_NAMING, (tenant, like, like)))
    for r in seen.values():
        tx.run(q.SET_EVENT_TEXT, (erase(r["params"]), erase(r["subject"]), r["seq"]))
        for n in tx.all(q.SELECT_EVENT_MADE, (tenant, r["event_id"])):
            _scrub_text(tx, q.SET_PARAMS, n["params"], erase, n["id"])
            for step in tx.all(q.SELECT_DONE_PAYLOADS, (n["id"],)):
                _scrub_text(tx, q.SET_PAYLOAD, step["payload"], erase, n["id"], step["step_no"])
            for item in tx.all(q.SELECT_ITEM_TEXT, (n["id"],)):
                if (erase(item["title"]), erase(item["body"])) != (item["title"], item["body"]):
                    tx.run(q.SET_ITEM_TEXT, (erase(item["title"]), erase(item["body"]),
                                             item["seq"]))
    return len(seen)


def _scrub_text(tx: Tx, sql: str, text: str, erase: Any, *where: Any) -> None:
    if (scrubbed := erase(text)) != text:
        tx.run(sql, (scrubbed, *where))


def _eraser(addresses: list[str]) -> Any:
    """text -> text with every address (any case) replaced by ERASED; None stays None. An
    address holds no quote or backslash, so JSON text stays JSON."""
    pattern = re.compile("|".join(re.escape(a) for a in sorted(addresses, key=len,
                                                                 reverse=True)), re.IGNORECASE)

    def erase(text: str | None) -> str | None:
        return None if text is None else pattern.sub(ERASED, text)

    return erase


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
    named = [str(a) for f, a in contacts.items() if f in BY_FIELD]
    if not named:
        return
    key = suppression_key(tx)
    addresses = {hashed_address(a, key): a for a in named}
    for row in tx.all(tx.q.SELECT_LISTED, (tenant, json.dumps(list(addresses)))):
        _move(tx, row, addresses[row["address"]])


def _move(tx: Tx, row: Row, address: str) -> None:
    """The suppression keyed by `address` instead, all else as it was."""
    tx.run(tx.q.SUPPRESS, (row["tenant"], row["channel_type"], address, row["reason"],
                           row["source"], row["evidence"], row["created_at"]))
    tx.run(tx.q.UNSUPPRESS, (row["tenant"], row["channel_type"], row["address"]))
