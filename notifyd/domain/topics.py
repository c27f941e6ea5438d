"""Topics, named audiences per tenant: the requests that manage them and how they look. Pure.

A topic's membership is versioned: each change bumps its version, and an event pins the version
it was accepted at, so members added later get nothing of it and members removed later still do.
"""

from __future__ import annotations

from msgspec import UNSET

from notifyd.core.errors import DomainError
from notifyd.core.events import Following, Member, MembersChanged, Topic
from notifyd.core.text import iso
from notifyd.shapes import events as shapes


def parse_change(data: shapes.MembersRequest) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """POST /v1/topics/{topic}/members: (add, remove), each up to MAX_CHANGE user ids (its
    Struct checks them); a user in both is refused (which would win is not the caller's to
    guess)."""
    add = tuple(sorted(set(data.add or ())))
    remove = tuple(sorted(set(data.remove or ())))
    if not add and not remove:
        raise DomainError("missing_field", "send add or remove: a list of user ids", "add")
    both = sorted(set(add) & set(remove))
    if both:
        raise DomainError("invalid_field", f"user {both[0]!r} is both added and removed; send "
                          "one change per user", "remove")
    return add, remove


def topic_view(t: Topic, change: MembersChanged | None = None) -> shapes.Topic:
    """A topic, and what a change of its members did."""
    return shapes.Topic(topic=t.name, self_service=t.self_service, members=t.members,
                        version=t.version, created_at=iso(t.created_at),
                        updated_at=iso(t.updated_at),
                        added=change.added if change else UNSET,
                        removed=change.removed if change else UNSET)


def change_view(c: MembersChanged) -> shapes.Topic:
    return topic_view(c.topic, c)


def member_view(m: Member) -> shapes.Member:
    return shapes.Member(user_id=m.user_id, since=iso(m.since))


def following_view(f: Following) -> shapes.FollowedTopic:
    return shapes.FollowedTopic(topic=f.topic, self_service=f.self_service, since=iso(f.since))
