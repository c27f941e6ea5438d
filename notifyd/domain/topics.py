"""Topics, named audiences per tenant: the requests that manage them and how they look. Pure.

A topic's membership is versioned: each change bumps its version, and an event pins the version
it was accepted at, so members added later get nothing of it and members removed later still do.
"""

from __future__ import annotations

from typing import Any

from notifyd.core.errors import DomainError
from notifyd.core.events import Following, Member, MembersChanged, Topic
from notifyd.core.text import iso
from notifyd.domain.events import user_list
from notifyd.domain.validate import check_fields

MAX_CHANGE = 1000  # user ids added, and removed, in one change


def parse_topic(data: dict[str, Any]) -> bool | None:
    """PUT /v1/topics/{topic}: whether people may follow and leave it themselves (None: as it
    is, or false for a new topic)."""
    check_fields(data, frozenset({"self_service"}))
    value = data.get("self_service")
    if value is not None and not isinstance(value, bool):
        raise DomainError("invalid_field", "self_service must be true or false", "self_service")
    return value


def parse_change(data: dict[str, Any]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """POST /v1/topics/{topic}/members: (add, remove), each up to MAX_CHANGE user ids; a user
    in both is refused (which would win is not the caller's to guess)."""
    check_fields(data, frozenset({"add", "remove"}))
    add = user_list(data["add"], "add", MAX_CHANGE) if data.get("add") else ()
    remove = user_list(data["remove"], "remove", MAX_CHANGE) if data.get("remove") else ()
    if not add and not remove:
        raise DomainError("missing_field", "send add or remove: a list of user ids", "add")
    both = sorted(set(add) & set(remove))
    if both:
        raise DomainError("invalid_field", f"user {both[0]!r} is both added and removed; send "
                          "one change per user", "remove")
    return add, remove


def topic_view(t: Topic) -> dict[str, Any]:
    return {"topic": t.name, "self_service": t.self_service, "members": t.members,
            "version": t.version, "created_at": iso(t.created_at),
            "updated_at": iso(t.updated_at)}


def change_view(c: MembersChanged) -> dict[str, Any]:
    return {**topic_view(c.topic), "added": c.added, "removed": c.removed}


def member_view(m: Member) -> dict[str, Any]:
    return {"user_id": m.user_id, "since": iso(m.since)}


def following_view(f: Following) -> dict[str, Any]:
    return {"topic": f.topic, "self_service": f.self_service, "since": iso(f.since)}
