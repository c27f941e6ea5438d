"""Events and topics as plain records: an event a producer posts for many people, its frozen
audience and routing cursor, and the named audiences (topics) it may address. No I/O.

An event becomes one notification per (recipient, kind of its type); each notification's dedup
key is derived from the event (`event_key`), so routing a chunk again creates nothing new.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Literal

from notifyd.core.models import AcceptInput, AcceptResult, PlanFn
from notifyd.core.records import InboxEntry

# Producers' own dedup keys may not start with this: it names an event's notifications.
EVENT_KEY_PREFIX = "event:"


def event_key(event_id: str, kind: str) -> str:
    """The dedup key of the notification of `kind` that event `event_id` makes for a person."""
    return f"{EVENT_KEY_PREFIX}{event_id}:{kind}"


class Audience(StrEnum):
    """Whom an event concerns."""

    USERS = "user_ids"  # a list given inline, de-duplicated
    TOPIC = "topic"  # a topic's members at the version the event pinned
    EVERYONE = "everyone"  # the tenant's recipients made before the event was accepted


@dataclass(frozen=True)
class EventInput:
    """A validated, authorised event, ready for the store."""

    tenant: str
    event_id: str
    type: str
    kinds: tuple[str, ...]  # the type's kinds as configured at acceptance
    audience: Audience
    params: dict[str, Any]
    subject: str | None
    request_hash: str  # tells a retry (same input) from a conflict
    key_name: str
    topic: str | None = None  # Audience.TOPIC
    user_ids: tuple[str, ...] = ()  # Audience.USERS: sorted, each once
    send_at: int | None = None  # when its notifications' ladders start, if not at routing


@dataclass(frozen=True)
class EventRecord:
    """An event as stored: its input, its frozen audience and how far routing has got."""

    tenant: str
    event_id: str
    type: str
    kinds: tuple[str, ...]
    audience: Audience
    params: dict[str, Any]
    subject: str | None
    request_hash: str
    key_name: str
    topic: str | None
    version: int | None  # the topic's membership version it pinned
    cutoff: int | None  # everyone: recipients made before this time (epoch ms)
    size: int  # recipients in the audience, counted at acceptance
    cursor: str  # the last recipient routed ("" before the first chunk)
    routed: int  # recipients routed so far
    accepted_at: int
    routed_at: int | None  # None while routing
    send_at: int | None = None  # when its notifications' ladders start (a past time: at once)

    @property
    def state(self) -> Literal["routing", "routed"]:
        return "routing" if self.routed_at is None else "routed"

    def lag_ms(self, now: int) -> int:
        """How long its fan-out took, or has taken so far."""
        return (now if self.routed_at is None else self.routed_at) - self.accepted_at


@dataclass(frozen=True)
class EventAccepted:
    """What accepting an event did: the event (new, or what already holds its id)."""

    event: EventRecord | None  # None: its topic does not exist (nothing was written)
    created: bool
    conflict: bool = False  # the id was taken by an event with other input
    over: int | None = None  # the audience's size, past the most it could be (nothing written)


# An inbox kind's item for one recipient: (user_id, notification_id, locale) -> the item.
InboxFn = Callable[[str, str, str | None], InboxEntry | None]


@dataclass(frozen=True)
class KindRoute:
    """How one kind's notifications are made while routing: its ladder planner (run inside the
    chunk's transaction, on each recipient as it reads them), time to live and inbox item."""

    plan: PlanFn
    ttl_sec: int
    inbox: InboxFn | None = None


@dataclass(frozen=True)
class Made:
    """A notification a chunk created, for what follows its commit (streams, the scanner)."""

    inp: AcceptInput
    result: AcceptResult
    inbox: InboxEntry | None


@dataclass(frozen=True)
class Routed:
    """One chunk routed: how many recipients it covered, whether the audience is done, and the
    notifications it created (a chunk replayed after a crash creates none twice)."""

    recipients: int
    done: bool
    made: list[Made] = field(default_factory=list)


@dataclass(frozen=True)
class Backlog:
    """Events still routing, and when the oldest of them was accepted."""

    events: int
    oldest_at: int | None


@dataclass(frozen=True)
class Topic:
    tenant: str
    name: str
    version: int  # bumped by each change of its membership
    members: int  # members now
    self_service: bool  # a person may follow or leave it with their own user token
    created_at: int
    updated_at: int


@dataclass(frozen=True)
class Member:
    user_id: str
    since: int  # when this membership began


@dataclass(frozen=True)
class Following:
    """A topic a person is a member of."""

    topic: str
    self_service: bool
    since: int


@dataclass(frozen=True)
class MembersChanged:
    """One change of a topic's membership, as committed."""

    topic: Topic
    added: int  # not members before
    removed: int  # members before
    refused: bool = False  # the change asked for self-service, and the topic is not


class TopicGone(StrEnum):
    """What deleting a topic came to."""

    DELETED = "deleted"
    MISSING = "missing"
    NOT_EMPTY = "not_empty"


# Notifications of an event by how they stand: (state, reason class or None) -> how many.
Counts = Mapping[tuple[str, str | None], int]
