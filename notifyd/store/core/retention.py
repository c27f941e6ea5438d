"""Retention's writes: each one batch of one class, walked oldest first, measured back from the
transaction's own time. A notification's history goes only once nothing of it is still open
(no step pending, in flight or unknown; no item still held for a digest); what it leaves is its
identity, so a producer's late retry still finds its dedup key."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable

from notifyd.core.models import current_state, id_floor
from notifyd.core.records import Aged, Pruned
from notifyd.store.core import inbox
from notifyd.store.core.tx import Row, Tx

PROVEN = ("delivered", "shown", "opened")


def prune(tx: Tx, what: Aged, window_ms: int, after: str, limit: int) -> Pruned:
    return _BY_CLASS[what](tx, tx.now - window_ms, after, limit)


def _history(tx: Tx, before: int, after: str, limit: int) -> Pruned:
    q = tx.q
    seen = tx.all(q.SELECT_AGED_LIVE, (after, id_floor("n_", before), limit))
    done = [r for r in seen if not r["open"] and not r["held"]]
    if done:
        steps: dict[str, list[tuple[str, str, str | None]]] = {r["id"]: [] for r in done}
        for s in tx.all(q.SELECT_STEPS_OF, (json.dumps(list(steps)),)):
            steps[s["notification_id"]].append((s["channel"], s["state"], s["evidence"]))
        ids = [(r["id"],) for r in done]
        for sql in (q.DELETE_ATTEMPTS, q.DELETE_EVENTS, q.DELETE_DIGEST_ITEMS, q.BLANK_RECEIPTS,
                    q.DELETE_STEPS):
            tx.many(sql, ids)
        tx.many(q.KEEP_IDENTITY, [(tx.now, _outcome(r, steps[r["id"]], tx.now), r["id"])
                                  for r in done])
    return Pruned(len(done), seen[-1]["id"] if len(seen) == limit else "")


def _outcome(n: Row, steps: list[tuple[str, str, str | None]], now: int) -> str:
    """The state the notification ended in, as the API would have shown it."""
    return current_state(n["resolved_at"] is not None, ((c, s) for c, s, _ in steps),
                         n["resolution"], proven=any(e in PROVEN for _, _, e in steps),
                         expired=now >= n["expires_at"])


def _identities(tx: Tx, before: int, after: str, limit: int) -> Pruned:
    seen = tx.all(tx.q.SELECT_AGED_IDS, (after, id_floor("n_", before), limit))
    gone = [(r["id"],) for r in seen if r["pruned_at"] is not None]
    tx.many(tx.q.DELETE_IDENTITY, gone)
    return Pruned(len(gone), seen[-1]["id"] if len(seen) == limit else "")


def _receipts(tx: Tx, before: int, after: str, limit: int) -> Pruned:
    removed = tx.run(tx.q.DELETE_AGED_RECEIPTS, (before, limit))
    return Pruned(removed, "more" if removed == limit else "")


def _inbox_done(tx: Tx, before: int, after: str, limit: int) -> Pruned:
    seqs = [(r["seq"],) for r in tx.all(tx.q.SELECT_AGED_DONE_INBOX, (before, limit))]
    tx.many(tx.q.DELETE_INBOX_ITEM, seqs)  # read or archived: none counts in a badge
    return Pruned(len(seqs), "more" if len(seqs) == limit else "")


def _inbox_old(tx: Tx, before: int, after: str, limit: int) -> Pruned:
    rows = tx.all(tx.q.SELECT_OLDEST_INBOX, (limit,))
    old = [r for r in rows if r["created_at"] < before]  # by seq is by time: a prefix
    tx.many(tx.q.DELETE_INBOX_ITEM, [(r["seq"],) for r in old])
    for (tenant, user_id), n in Counter((r["tenant"], r["user_id"]) for r in old
                                        if r["unread"]).items():
        inbox.bump_badge(tx, tenant, user_id, -n)
    return Pruned(len(old), "more" if len(old) == limit else "")


def _events(tx: Tx, before: int, after: str, limit: int) -> Pruned:
    """Routed events accepted before `before`: their notifications keep their own keys."""
    seqs = [(r["seq"],) for r in tx.all(tx.q.SELECT_AGED_EVENTS, (before, limit))]
    tx.many(tx.q.DELETE_FANOUT_EVENT, seqs)
    return Pruned(len(seqs), "more" if len(seqs) == limit else "")


def _members(tx: Tx, before: int, after: str, limit: int) -> Pruned:
    """Memberships that ended before `before`, unless an event still routing pinned a version
    they were open at."""
    keys = [(r["tenant"], r["topic"], r["user_id"], r["added_version"])
            for r in tx.all(tx.q.SELECT_AGED_MEMBERS, (before, limit))]
    tx.many(tx.q.DELETE_MEMBER_ROW, keys)
    return Pruned(len(keys), "more" if len(keys) == limit else "")


def prunable(tx: Tx, what: Aged, window_ms: int) -> int:
    """How many of `what` would go now (the history: notifications; the rest: rows)."""
    q, before = tx.q, tx.now - window_ms
    sql, arg = {Aged.HISTORY: (q.COUNT_AGED_LIVE, id_floor("n_", before)),
                Aged.IDENTITIES: (q.COUNT_AGED_IDS, id_floor("n_", before)),
                Aged.RECEIPTS: (q.COUNT_AGED_RECEIPTS, before),
                Aged.INBOX_DONE: (q.COUNT_AGED_DONE_INBOX, before),
                Aged.INBOX_OLD: (q.COUNT_OLD_INBOX, before),
                Aged.EVENTS: (q.COUNT_AGED_EVENTS, before),
                Aged.MEMBERS: (q.COUNT_AGED_MEMBERS, before)}[what]
    return int(tx.value(sql, (arg,)))


_BY_CLASS: dict[Aged, Callable[[Tx, int, str, int], Pruned]] = {
    Aged.HISTORY: _history, Aged.IDENTITIES: _identities, Aged.RECEIPTS: _receipts,
    Aged.INBOX_DONE: _inbox_done, Aged.INBOX_OLD: _inbox_old, Aged.EVENTS: _events,
    Aged.MEMBERS: _members}
