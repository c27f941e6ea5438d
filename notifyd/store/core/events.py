"""Events: accepted with their routing job in one transaction, then routed a chunk per
transaction. A chunk reads the next recipients after the cursor under the audience frozen at
acceptance, accepts one notification per (recipient, kind) through the accept script, and moves
the cursor on, all in one commit: a crash loses a whole chunk or none of it, and the chunk routed
again finds each dedup key taken, so nobody gets two."""

from __future__ import annotations

import bisect
import json
from collections.abc import Mapping
from typing import Any

import orjson

from notifyd.core.events import (
    Audience,
    Counts,
    EventAccepted,
    EventInput,
    EventRecord,
    KindRoute,
    Made,
    Routed,
    event_key,
)
from notifyd.core.models import AcceptInput, new_id
from notifyd.core.records import Notification
from notifyd.store.core import rows
from notifyd.store.core.accept import accept
from notifyd.store.core.tx import Row, Tx


def record(r: Row) -> EventRecord:
    return EventRecord(r["tenant"], r["event_id"], r["type"], rows.split(r["kinds"]),
                       Audience(r["audience"]), orjson.loads(r["params"]), r["subject"],
                       r["request_hash"], r["key_name"], r["topic"], r["version"], r["cutoff"],
                       r["size"], r["cursor"], r["routed"], r["accepted_at"], r["routed_at"],
                       r["send_at"])


def accept_event(tx: Tx, inp: EventInput, most: int | None = None) -> EventAccepted:
    """The event and its frozen audience, unless its id is taken (then what holds it: a retry,
    or a conflict); nothing at all if it names a topic that does not exist, or if its audience
    is larger than `most` (its size in `over`)."""
    q, now = tx.q, tx.now
    hit = tx.one(q.SELECT_FANOUT_EVENT, (inp.tenant, inp.event_id))
    if hit is not None:
        return EventAccepted(record(hit), False, hit["request_hash"] != inp.request_hash)
    version = cutoff = users = None
    if inp.audience is Audience.TOPIC:
        topic = tx.one(q.SELECT_TOPIC, (inp.tenant, inp.topic))
        if topic is None or topic["deleted_at"] is not None:
            return EventAccepted(None, False)
        version, size = topic["version"], topic["members"]
    elif inp.audience is Audience.EVERYONE:
        # Everyone made before this transaction's time, and those made at the same millisecond
        # by transactions that committed before it: any made later records a later time or,
        # at this same millisecond, is not in the list.
        cutoff = now
        edge = sorted(r["user_id"] for r in tx.all(q.SELECT_MADE_AT, (inp.tenant, now)))
        users = json.dumps(edge)
        size = int(tx.value(q.COUNT_EVERYONE, (inp.tenant, now))) + len(edge)
    else:
        users, size = json.dumps(list(inp.user_ids)), len(inp.user_ids)
    if most is not None and size > most:
        return EventAccepted(None, False, over=size)
    inserted = tx.run(q.INSERT_FANOUT_EVENT, (
        inp.tenant, inp.event_id, inp.type, inp.subject, orjson.dumps(inp.params).decode(),
        ",".join(inp.kinds), inp.request_hash, inp.key_name, inp.audience.value, inp.topic,
        version, cutoff, users, size, now, inp.send_at))
    if not inserted:  # a backend with concurrent writers: another took the id meanwhile
        return accept_event(tx, inp, most)
    made = tx.one(q.SELECT_FANOUT_EVENT, (inp.tenant, inp.event_id))
    assert made is not None
    return EventAccepted(record(made), True)


def _next(tx: Tx, r: Row, limit: int) -> list[str]:
    """Up to `limit` recipients after the cursor, by user_id, under the frozen audience."""
    q, after = tx.q, r["cursor"]
    if r["audience"] == Audience.TOPIC:
        return [m["user_id"] for m in tx.all(q.SELECT_TOPIC_AUDIENCE, (
            r["tenant"], r["topic"], after, r["version"], r["version"], limit))]
    if r["audience"] == Audience.EVERYONE:
        return [m["user_id"] for m in tx.all(q.SELECT_EVERYONE, (
            r["tenant"], after, r["cutoff"], r["cutoff"], r["users"], limit))]
    listed: list[str] = json.loads(r["users"])  # sorted at acceptance
    start = bisect.bisect_right(listed, after)
    return listed[start:start + limit]


def route_chunk(tx: Tx, tenant: str, event_id: str, routes: Mapping[str, KindRoute],
                limit: int) -> Routed:
    """One chunk: the next `limit` recipients, a notification per kind in `routes` for each
    (the event's other kinds are not configured now, and are skipped), the cursor moved past
    them; the event is routed once a chunk finds fewer than `limit`."""
    q, now = tx.q, tx.now
    r = tx.one(q.SELECT_FANOUT_EVENT, (tenant, event_id))
    if r is None or r["routed_at"] is not None:
        return Routed(0, True)
    recipients = _next(tx, r, limit)
    params: dict[str, Any] = orjson.loads(r["params"])
    kinds = [k for k in rows.split(r["kinds"]) if k in routes]
    made = [m for user in recipients for kind in kinds
            if (m := _notify(tx, r, user, kind, params, routes[kind])) is not None]
    if made:
        tx.send(q.MARK_EVENT, (event_id, json.dumps([m.result.notification_id for m in made])))
    done = len(recipients) < limit
    tx.send(q.ADVANCE_EVENT, (recipients[-1] if recipients else r["cursor"], len(recipients),
                              now if done else None, tenant, event_id))
    return Routed(len(recipients), done, made)


def _notify(tx: Tx, r: Row, user: str, kind: str, params: dict[str, Any],
            route: KindRoute) -> Made | None:
    """One recipient's notification of one kind, as the accept path writes any; None if its
    key is taken already (this chunk was routed before a crash, or an earlier event run)."""
    nid = new_id("n_", tx.now)
    inp = AcceptInput(tenant=r["tenant"], user_id=user, kind=kind, params=params,
                      dedup_key=event_key(r["event_id"], kind), fallback_chain=None,
                      max_ttl_sec=None, request_hash=r["request_hash"], key_name=r["key_name"],
                      send_at=r["send_at"])
    inbox = None
    if route.inbox is not None:
        locale = tx.value(tx.q.SELECT_LOCALE, (r["tenant"], user))
        inbox = route.inbox(user, nid, locale)
    result = accept(tx, inp, nid, r["params"], route.plan, route.ttl_sec, inbox)
    return Made(inp, result, inbox) if result.created else None


def counts(tx: Tx, tenant: str, event_id: str) -> Counts:
    return {(c["state"], c["reason"]): int(c["n"])
            for c in tx.all(tx.q.COUNT_EVENT_STATES, (tenant, event_id))}


def page(tx: Tx, tenant: str, event_id: str, after: tuple[str, str],
         limit: int) -> list[Notification]:
    """The event's notifications after (user_id, id), each with its steps (not its attempts,
    moves or receipts: `get_notification` reads those)."""
    found = tx.all(tx.q.SELECT_EVENT_PAGE, (tenant, event_id, *after, limit))
    steps: dict[str, list[Row]] = {n["id"]: [] for n in found}
    if found:
        for s in tx.all(tx.q.SELECT_STEPS_OF_MANY, (json.dumps(list(steps)),)):
            steps[s["notification_id"]].append(s)
    return [rows.notification(n, steps[n["id"]], (), (), ()) for n in found]
