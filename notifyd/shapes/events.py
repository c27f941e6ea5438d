"""Events and topics: what POST /v1/events and the topics' calls take, and how an event, a topic
and a person's topics look."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from msgspec import UNSET, Meta, UnsetType

from notifyd.shapes.common import Answer, Body, Count, Id, SendAt, Time

MAX_SUBJECT = 256
MAX_CHANGE = 1000  # user ids added, and removed, in one change
TOPIC_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$"
# An event id goes in a URL path as it is (GET /v1/events/{event_id}): no slash, no space.
EVENT_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.:@+=~-]{0,255}$"
AUDIENCE_SHAPES = '{"user_ids": [...]}, {"topic": "name"} or {"everyone": true}'
# How an event's notifications stand, in the order the document lists them; suppressed ones
# are counted by the reason class of their step ("preference", "opted_out", "no_contact", ...).
STATES = ("pending", "held", "digested", "sent", "delivered", "resolved", "expired",
          "undeliverable")

TopicName = Annotated[str, Meta(pattern=TOPIC_PATTERN, extra={
    "shape": "a topic name: 1..128 letters, digits, _ . : - (starting with a letter or digit)"})]
EventId = Annotated[str, Meta(pattern=EVENT_ID_PATTERN, extra={
    "shape": "1..256 letters, digits and _ . : @ + = ~ - (starting with a letter or digit)"})]
UserIds = Annotated[list[Id], Meta(max_length=MAX_CHANGE, extra={"noun": "user ids"})]


# --- what a producer sends ---------------------------------------------------------------------


class Audience(Body, kw_only=True):
    """Exactly one of: a list (needs the post scope), a topic's members now (the topics scope),
    every user of the tenant now (the everyone scope)."""

    user_ids: Annotated[list[Id], Meta(min_length=1, extra={"noun": "user ids"})] | \
        UnsetType = UNSET  # at most fanout.max_inline_users: the document says how many
    topic: TopicName | UnsetType = UNSET
    everyone: Literal[True] | UnsetType = UNSET


class EventRequest(Body, kw_only=True):
    """POST /v1/events: one notification per recipient and kind of its type."""

    event_id: Annotated[EventId, Meta(description=(
        "the producer's id: the same input again is answered with the event"))]
    type: Annotated[Id, Meta(description="an [events.TYPE] of the config")]
    audience: Annotated[Audience, Meta(extra={"shape": f"one of {AUDIENCE_SHAPES}"})]
    params: dict[str, Any] = {}
    subject: Annotated[str, Meta(min_length=1, max_length=MAX_SUBJECT, description=(
        "what it is about, e.g. thread:42"))] | None = None
    send_at: Annotated[SendAt, Meta(description=(
        "RFC 3339: the ladders of the notifications it makes start then (routing starts at "
        "once); as for one notification, at most server.max_schedule_sec ahead, refused for a "
        "type with an inbox kind"))] | None = None


class TopicRequest(Body, kw_only=True):
    """PUT /v1/topics/{topic}: make it, or change whether people may follow it themselves."""

    self_service: Annotated[bool, Meta(description=(
        "people may follow and leave it with their own user token"))] | None = None


class MembersRequest(Body, kw_only=True):
    """POST /v1/topics/{topic}/members: add and remove members as one change (a user in both
    is refused)."""

    add: UserIds | None = None
    remove: UserIds | None = None


# --- what notifyd answers ----------------------------------------------------------------------


class EventAccepted(Answer, kw_only=True):
    event_id: str
    state: Literal["routing", "routed"]
    created: bool
    audience_size: Count
    routed: Count


class UsersAudience(Answer, kw_only=True, tag_field="kind", tag="user_ids"):
    """A list of users."""


class TopicAudience(Answer, kw_only=True, tag_field="kind", tag="topic"):
    topic: str | None
    version: Annotated[int | None, Meta(description="the membership version it pinned")]


class EveryoneAudience(Answer, kw_only=True, tag_field="kind", tag="everyone"):
    cutoff: Annotated[Time, Meta(description="recipients made before it")]


Counts = Annotated[dict[str, Any], Meta(
    description="its notifications (one per recipient and kind) by how they stand",
    extra_json_schema={"required": [*STATES, "suppressed"], "properties": {
        **dict.fromkeys(STATES, {"type": "integer", "minimum": 0}),
        "suppressed": {"type": "object", "additionalProperties": {
            "type": "integer", "minimum": 0}, "description": (
                "by reason: preference, opted_out, no_contact, suppression_list, ...")}}})]


class Event(Answer, kw_only=True):
    """An event as support reads it: its input, its frozen audience, how far routing has got,
    and how its notifications stand."""

    event_id: str
    type: str
    subject: str | None
    params: dict[str, Any]
    kinds: list[str]
    audience: UsersAudience | TopicAudience | EveryoneAudience
    audience_size: Annotated[int, Meta(ge=0, description="recipients, counted at acceptance")]
    routed: Annotated[int, Meta(ge=0, description="recipients routed so far")]
    state: Literal["routing", "routed"]
    accepted_at: Time
    routed_at: Time
    fanout_lag_ms: Annotated[int, Meta(ge=0, description=(
        "now - accepted_at while routing; routed_at - accepted_at after"))]
    send_at: Annotated[Time, Meta(description="when its notifications' ladders start, if "
                                              "scheduled")]
    notifications: Counts


class Topic(Answer, kw_only=True):
    topic: str
    self_service: bool
    members: Count
    version: Annotated[int, Meta(ge=0, description="bumped by each change of its members")]
    created_at: Time
    updated_at: Time
    added: Count | UnsetType = UNSET  # a change's answer: how many it added and removed
    removed: Count | UnsetType = UNSET


class Member(Answer, kw_only=True):
    user_id: str
    since: Time


class Members(Answer, kw_only=True):
    members: list[Member]
    next: Annotated[str | None, Meta(description="the after= of the next page")]


class Following(Answer, kw_only=True):
    topic: str
    following: bool
    changed: bool
    version: Count


class FollowedTopic(Answer, kw_only=True):
    topic: str
    self_service: bool
    since: Time


class Followed(Answer, kw_only=True):
    """The topics a person follows."""

    topics: list[FollowedTopic]
