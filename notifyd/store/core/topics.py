"""Topics: named audiences whose membership is versioned. Each change that adds or removes
anyone is one transaction and one new version: rows added open at it, rows removed close at it.
An event pins the version it was accepted at, so its audience is the rows open at that version,
whatever changes after."""

from __future__ import annotations

from notifyd.core.events import MembersChanged, Topic, TopicGone
from notifyd.store.core.tx import Row, Tx


def topic(r: Row) -> Topic:
    return Topic(r["tenant"], r["name"], r["version"], r["members"], bool(r["self_service"]),
                 r["created_at"], r["updated_at"])


def find(tx: Tx, tenant: str, name: str) -> Row | None:
    """The topic's row, unless there is none or it was deleted."""
    r = tx.one(tx.q.SELECT_TOPIC, (tenant, name))
    return r if r is not None and r["deleted_at"] is None else None


def put(tx: Tx, tenant: str, name: str, self_service: bool | None) -> tuple[Topic, bool]:
    """Made (True) or changed; `self_service` None keeps it (false for a new topic)."""
    q, now = tx.q, tx.now
    r = tx.one(q.SELECT_TOPIC, (tenant, name))
    if r is None:
        tx.run(q.INSERT_TOPIC, (tenant, name, bool(self_service), now, now))
    else:
        keep = bool(r["self_service"]) if r["deleted_at"] is None else False
        tx.run(q.UPDATE_TOPIC, (keep if self_service is None else self_service, now, now,
                                tenant, name))
    made = tx.one(q.SELECT_TOPIC, (tenant, name))
    assert made is not None
    return topic(made), r is None or r["deleted_at"] is not None


def change(tx: Tx, tenant: str, name: str, add: tuple[str, ...], remove: tuple[str, ...],
           only_self_service: bool = False) -> MembersChanged | None:
    """Add and remove members as one change: a new version if anyone came or went. None: no
    such topic. With `only_self_service`, a topic that is not self-service is left alone."""
    q, now = tx.q, tx.now
    r = find(tx, tenant, name)
    if r is None:
        return None
    if only_self_service and not r["self_service"]:
        return MembersChanged(topic(r), 0, 0, refused=True)
    version = r["version"] + 1
    added = sum(tx.run(q.ADD_MEMBER, (tenant, name, user, version, now)) for user in add)
    removed = sum(tx.run(q.REMOVE_MEMBER, (version, now, tenant, name, user)) for user in remove)
    if added or removed:
        tx.run(q.SET_TOPIC_VERSION, (version, added - removed, now, tenant, name))
        r = tx.one(q.SELECT_TOPIC, (tenant, name))
        assert r is not None
    return MembersChanged(topic(r), added, removed)


def delete(tx: Tx, tenant: str, name: str) -> TopicGone:
    if find(tx, tenant, name) is None:
        return TopicGone.MISSING
    if tx.run(tx.q.DELETE_TOPIC, (tx.now, tx.now, tenant, name)):
        return TopicGone.DELETED
    return TopicGone.NOT_EMPTY
