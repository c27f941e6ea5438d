"""Accepting a notification: the dedup key claimed and the whole ladder written, with its inbox item
and badge, in one transaction; and a digest, the same write with its held items marked carried."""

from __future__ import annotations

from notifyd.core.models import AcceptInput, AcceptResult, PlanFn, StepState, current_state
from notifyd.core.records import DigestDue
from notifyd.core.steps import StepKey
from notifyd.store.base import Inbox
from notifyd.store.core import inbox as inbox_rows
from notifyd.store.core.rows import chosen, profile
from notifyd.store.core.tx import Tx


def accept(tx: Tx, inp: AcceptInput, notification_id: str, params: str, plan: PlanFn,
           ttl_sec: int, inbox: Inbox) -> AcceptResult:
    """Write the notification unless its dedup key is taken; a retry (same request) or a
    conflict (different request) answers with what holds the key. The ladder is planned here,
    on the recipient as this transaction reads it, from this transaction's time, or from the
    request's send_at when that is later; the time to live counts from the same start."""
    q = tx.q
    found = tx.later(q.SELECT_RECIPIENT, (inp.tenant, inp.user_id))  # read with the time
    now = tx.now
    start = now if inp.send_at is None else max(inp.send_at, now)
    inserted = tx.run(q.INSERT_NOTIFICATION, (
        notification_id, inp.tenant, inp.user_id, inp.kind, inp.dedup_key,
        inp.request_hash, params, inp.key_name, now, start + ttl_sec * 1000,
        None if inp.send_at is None else start))
    if not inserted:
        hit = tx.one(q.SELECT_DEDUP, (inp.tenant, inp.user_id, inp.dedup_key))
        assert hit is not None
        resolution = tx.one(q.SELECT_RESOLUTION, (hit["id"],))
        resolved = resolution is not None and resolution["resolved_at"] is not None
        had = tx.all(q.SELECT_STEP_STATES, (hit["id"],))
        state = hit["outcome"] or current_state(  # pruned: how it ended
            resolved, ((r["channel"], r["state"]) for r in had), chosen=chosen(had))
        return AcceptResult(hit["id"], created=False, state=state,
                            conflict=hit["request_hash"] != inp.request_hash,
                            existing_kind=hit["kind"])
    steps, lane = plan(profile(tx, inp.tenant, inp.user_id, found.one()), start)
    tx.many(q.INSERT_STEP, [
        (notification_id, s.step_no, s.channel, lane, s.send_after, s.state, s.reason, s.note,
         now, s.send_after, s.cause.text if s.cause else None, s.note) for s in steps])
    due = [s.send_after for s in steps if s.state == StepState.PENDING]
    route_lane = str(lane)
    tx.dues += [(s.send_after, s.channel, route_lane) for s in steps
                if s.state == StepState.PENDING]
    signals, locks = tx.features.notifies, tx.features.row_locks
    if due and signals:
        tx.send(signals.NOTIFY_DUE, (min(due),))
    state = current_state(False, ((s.channel, s.state) for s in steps))
    seq = badge = None
    if inbox is not None:  # the person's history, whatever the preferences say of the sends
        if locks:
            tx.send(locks.LOCK_INBOX, (inp.tenant, inp.user_id))
        item = tx.later(q.INSERT_INBOX, (inp.tenant, inp.user_id, notification_id, inp.kind,
                                         inbox.title, inbox.body, now))
        bumped = inbox_rows.bump_later(tx, inp.tenant, inp.user_id, 1)
        row = item.one()
        seq = None if row is None else row[0]
        if seq is not None and signals:
            tx.send(signals.NOTIFY_INBOX, (inp.tenant, inp.user_id, seq))
        badge = bumped()
    return AcceptResult(notification_id, True, state, first_due=min(due, default=None),
                        inbox_seq=seq, badge=badge, created_at=now)


def make_digest(tx: Tx, due: DigestDue, inp: AcceptInput, notification_id: str, params: str,
                plan: PlanFn, ttl_sec: int, inbox: Inbox, members: list[StepKey],
                rollover: int) -> AcceptResult:
    """The digest accepted as any notification, and the held items it carries marked so in the
    same transaction (the item, and its step `digested`); items held for the window after
    `members` were read roll to the next."""
    result = accept(tx, inp, notification_id, params, plan, ttl_sec, inbox)
    if result.created:
        tx.many(tx.q.MARK_DIGESTED_ITEM, [(notification_id, m.notification_id, m.step_no)
                                          for m in members])
        tx.many(tx.q.MARK_DIGESTED_STEP, [(tx.now, m.notification_id, m.step_no)
                                          for m in members])
    tx.run(tx.q.ROLL_DIGEST, (rollover, due.tenant, due.user_id, due.digest_kind,
                              due.window_end))
    return result
