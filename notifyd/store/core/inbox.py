"""The inbox's writes: reads, archives and the unread badge kept beside the items, and the kinds
that stop when read resolved in the same transaction."""

from __future__ import annotations

import json
from collections.abc import Callable

from notifyd.core.models import ItemRead
from notifyd.core.records import InboxChange
from notifyd.store.core.tx import Row, Tx


def bump_badge(tx: Tx, tenant: str, user_id: str, by: int) -> int:
    """The badge moved by `by`; one that would go below zero has drifted: rebuilt from rows."""
    return bump_later(tx, tenant, user_id, by)()


def bump_later(tx: Tx, tenant: str, user_id: str, by: int) -> Callable[[], int]:
    """bump_badge, its count read when asked: a badge is never below zero, so one moved up is
    moved at once, unread."""
    if by >= 0:
        bumped = tx.later(tx.q.BUMP_BADGE, (tenant, user_id, by, by))
        return lambda: int(bumped.rows()[0][0])
    count = _bump_down(tx, tenant, user_id, by)
    return lambda: count


def _bump_down(tx: Tx, tenant: str, user_id: str, by: int) -> int:
    kept = badge(tx, tenant, user_id)
    if kept + by < 0:
        actual = int(tx.value(tx.q.COUNT_UNREAD, (tenant, user_id)))
        tx.run(tx.q.SET_BADGE, (tenant, user_id, actual))
        return actual
    return int(tx.value(tx.q.BUMP_BADGE, (tenant, user_id, by, by)))


def badge(tx: Tx, tenant: str, user_id: str) -> int:
    return int(tx.value(tx.q.SELECT_BADGE, (tenant, user_id)) or 0)


def resolve_read(tx: Tx, items: list[tuple[str, str]], stop_on_read: frozenset[str]
                 ) -> tuple[str, ...]:
    """Resolve, as "read", the notifications of kinds that stop when read."""
    done = []
    for nid, kind in items:
        if kind in stop_on_read and tx.run(tx.q.RESOLVE, (tx.now, "read", "inbox", nid)):
            tx.run(tx.q.CANCEL_PENDING, ("resolved: read", tx.now, nid))
            done.append(nid)
    return tuple(done)


def read_resolved(tx: Tx, notification_id: str) -> ItemRead | None:
    """The notification's item marked read as its resolution commits (a kind with
    read_on_resolve); None when it has none, or it was read already."""
    row = tx.one(tx.q.READ_ITEM_OF, (tx.now, notification_id))
    if row is None:
        return None
    tenant, user_id = row["tenant"], row["user_id"]
    count = bump_badge(tx, tenant, user_id, -1) if row["counted"] else badge(tx, tenant, user_id)
    return ItemRead(tenant, user_id, count)


def of_kinds(kinds: tuple[str, ...]) -> tuple[bool, str]:
    """The two parameters of queries.OF_KINDS: every kind when none are named."""
    return not kinds, json.dumps(kinds)


def _item(tx: Tx, tenant: str, user_id: str, item_id: str, kinds: tuple[str, ...]) -> Row | None:
    """The person's item, if it is of one of the kinds (any, when none are named)."""
    item = tx.one(tx.q.SELECT_INBOX_ITEM, (tenant, user_id, item_id))
    return item if item is not None and (not kinds or item["kind"] in kinds) else None


def read_item(tx: Tx, tenant: str, user_id: str, item_id: str,
              stop_on_read: frozenset[str], kinds: tuple[str, ...] = ()) -> InboxChange | None:
    item = _item(tx, tenant, user_id, item_id, kinds)
    if item is None:
        return None
    locks = tx.features.row_locks
    if locks and item["kind"] in stop_on_read:  # it may resolve: locked before the time is read
        tx.run(locks.LOCK_NOTIFICATION, (item_id,))
    row = tx.one(tx.q.READ_ITEM, (tx.now, tenant, user_id, item_id))
    unread = bool(row and row[0])  # it counted in the badge: unread and not archived
    count = bump_badge(tx, tenant, user_id, -1) if unread else badge(tx, tenant, user_id)
    done = resolve_read(tx, [(item_id, item["kind"])], stop_on_read) if row else ()
    return InboxChange(row is not None, count, done)


def read_all(tx: Tx, tenant: str, user_id: str, stop_on_read: frozenset[str],
             kinds: tuple[str, ...] = ()) -> InboxChange:
    locks = tx.features.row_locks
    if locks and stop_on_read:  # it may resolve: locked before the time is read
        tx.send(locks.LOCK_UNREAD, (tenant, user_id, *of_kinds(kinds),
                                    json.dumps(sorted(stop_on_read))))
    rows = tx.all(tx.q.READ_ALL, (tx.now, tenant, user_id, *of_kinds(kinds)))
    if kinds:  # the other kinds' unread items still count
        count = bump_badge(tx, tenant, user_id, -sum(bool(r["counted"]) for r in rows))
    else:
        tx.run(tx.q.SET_BADGE, (tenant, user_id, 0))
        count = 0
    done = resolve_read(tx, [(r["notification_id"], r["kind"]) for r in rows], stop_on_read)
    return InboxChange(bool(rows), count, done)


def archive_item(tx: Tx, tenant: str, user_id: str, item_id: str,
                 kinds: tuple[str, ...] = ()) -> InboxChange | None:
    if _item(tx, tenant, user_id, item_id, kinds) is None:
        return None
    row = tx.one(tx.q.ARCHIVE_ITEM, (tx.now, tenant, user_id, item_id))
    unread = bool(row and row[0])
    count = bump_badge(tx, tenant, user_id, -1) if unread else badge(tx, tenant, user_id)
    return InboxChange(row is not None, count)


def rebuild_badges(tx: Tx) -> int:
    """Every badge recomputed from the rows; how many had drifted."""
    wrong = [(r["tenant"], r["user_id"], r["actual"]) for r in tx.all(tx.q.DRIFTED_BADGES)
             if r["unread"] != r["actual"]]
    tx.many(tx.q.SET_BADGE, wrong)
    return len(wrong)
