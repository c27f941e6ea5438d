"""An event's request, who may post it, and how it looks to people: pure checks and views.

A key addresses only what its scopes allow: an inline list of user ids needs `post`, a topic
`topics`, the whole user base `everyone` (never given by default); and every kind the event's
type makes must be one of the key's kinds.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from msgspec import UNSET

from notifyd.core.errors import DomainError
from notifyd.core.events import EVENT_KEY_PREFIX, Audience, Counts, EventInput, EventRecord
from notifyd.core.models import ApiKey
from notifyd.core.records import Notification
from notifyd.core.text import iso, plural
from notifyd.domain.validate import check_depth, request_hash
from notifyd.domain.views import unsaid
from notifyd.shapes import events as shapes
from notifyd.shapes.decode import convert

SCOPE_OF = {Audience.USERS: "post", Audience.TOPIC: "topics", Audience.EVERYONE: "everyone"}
WHOM = {Audience.USERS: "a list of users", Audience.TOPIC: "a topic",
        Audience.EVERYONE: "everyone (the whole user base)"}
AUDIENCE_SHAPES = shapes.AUDIENCE_SHAPES
STATES = shapes.STATES


def check_topic(name: str, where: str = "topic") -> str:
    """A topic's name from a path, checked as a body's is."""
    return str(convert(name, shapes.TopicName, where))


def check_event_id(event_id: str) -> str:
    """An event id from a path, checked as a body's is."""
    return str(convert(event_id, shapes.EventId, "event_id"))


def check_dedup_key(dedup_key: str | None) -> None:
    """A producer's dedup key may not take the form an event's notifications use."""
    if dedup_key is not None and dedup_key.startswith(EVENT_KEY_PREFIX):
        raise DomainError("invalid_field", f"dedup keys starting {EVENT_KEY_PREFIX!r} are kept "
                          "for the notifications of events (POST /v1/events)", "dedup_key")


def user_list(users: list[str], where: str, most: int) -> tuple[str, ...]:
    """1..`most` user ids (each checked by its Struct), sorted, each once."""
    if not 1 <= len(users) <= most:
        raise DomainError("invalid_field", f"{where} must be a list of 1..{most} user ids", where)
    return tuple(sorted(set(users)))


def _audience(raw: shapes.Audience, most: int) -> tuple[Audience, str | None, tuple[str, ...]]:
    named = [name for name in ("user_ids", "topic", "everyone")
             if getattr(raw, name) is not UNSET]
    if len(named) != 1:
        raise DomainError("invalid_field", f"audience must be one of {AUDIENCE_SHAPES}",
                          "audience")
    if raw.user_ids is not UNSET:
        return Audience.USERS, None, user_list(raw.user_ids, "audience.user_ids", most)
    if raw.topic is not UNSET:
        return Audience.TOPIC, raw.topic, ()
    return Audience.EVERYONE, None, ()


def parse_event(data: shapes.EventRequest, key: ApiKey, types: Mapping[str, tuple[str, ...]],
                max_users: int, send_at: int | None = None) -> EventInput:
    """The request (its shape checked by its Struct) checked and authorised for `key`: its
    type one of `types` (name -> its kinds), its audience one the key may address, every kind
    one the key may post. `send_at` is the request's, read and checked by the caller (it knows
    the time and the kinds)."""
    type_name = data.type
    if type_name not in types:
        raise DomainError("unknown_event_type", f"unknown event type {type_name!r}; known: "
                          f"{', '.join(sorted(types)) or 'none ([events.TYPE] in the config)'}",
                          "type")
    audience, topic, users = _audience(data.audience, max_users)
    check_depth(data.params, "params")
    kinds = types[type_name]
    authorise_event(key, audience, type_name, kinds)
    compared: list[Any] = [type_name, audience.value, topic, users, data.params, data.subject]
    if send_at is not None:  # appended only when given, as for one notification
        compared.append(send_at)
    params, digest = request_hash(compared, 4)
    return EventInput(key.tenant, data.event_id, type_name, kinds, audience, params,
                      data.subject, digest, key.name, topic, users, send_at)


def authorise_event(key: ApiKey, audience: Audience, type_name: str,
                    kinds: tuple[str, ...]) -> None:
    """Knowing a topic's name, or that "everyone" exists, gives no right to send to them: the
    key needs the audience's scope, and may post every kind the type makes."""
    scope = SCOPE_OF[audience]
    if not key.may(scope):
        raise DomainError("scope_not_allowed", f"this API key may not address {WHOM[audience]}: "
                          f"that needs the {scope} scope (its scopes: "
                          f"{', '.join(sorted(key.scopes)) or 'none'})", "audience")
    denied = [k for k in kinds if not key.allows(k)]
    if denied:
        raise DomainError("kind_not_allowed", f"events of type {type_name!r} make "
                          f"{', '.join(denied)} notifications, which this API key may not post",
                          "type")


def audience_view(e: EventRecord) -> shapes.UsersAudience | shapes.TopicAudience | \
        shapes.EveryoneAudience:
    """Whom it concerns, as frozen at acceptance."""
    if e.audience is Audience.TOPIC:
        return shapes.TopicAudience(topic=e.topic, version=e.version)
    if e.audience is Audience.EVERYONE:
        return shapes.EveryoneAudience(cutoff=iso(e.cutoff))
    return shapes.UsersAudience()


def counts_view(counts: Counts) -> dict[str, Any]:
    """Every state with its count (0 too), and the suppressed ones by reason."""
    view: dict[str, Any] = dict.fromkeys(STATES, 0)
    suppressed: dict[str, int] = {}
    for (state, reason), n in counts.items():
        if state == "suppressed":
            suppressed[reason or "unknown"] = suppressed.get(reason or "unknown", 0) + n
        else:
            state = "sent" if state == "presumed_delivered" else state
            view[state] = view.get(state, 0) + n
    view["suppressed"] = dict(sorted(suppressed.items()))
    return view


def event_view(e: EventRecord, counts: Counts, now: int) -> shapes.Event:
    """The event as support reads it: its input, its frozen audience, how far routing has got,
    and how its notifications stand."""
    return shapes.Event(
        event_id=e.event_id, type=e.type, subject=e.subject, params=e.params,
        kinds=list(e.kinds), audience=audience_view(e), audience_size=e.size,
        routed=e.routed, state=e.state,
        accepted_at=iso(e.accepted_at), routed_at=iso(e.routed_at), fanout_lag_ms=e.lag_ms(now),
        send_at=iso(e.send_at), notifications=counts_view(counts))


def summary(e: EventRecord, counts: Counts, now: int) -> list[str]:
    """The event in a few lines, for `notifyd inspect --event`."""
    view = counts_view(counts)
    whom = {Audience.TOPIC: f"topic {e.topic} at version {e.version}",
            Audience.EVERYONE: f"everyone made before {iso(e.cutoff)}",
            Audience.USERS: "a list of users"}[e.audience]
    states = [f"{n} {state}" for state, n in view.items() if state != "suppressed" and n]
    states += [f"{n} suppressed ({reason})" for reason, n in view["suppressed"].items()]
    routed = f"routed {iso(e.routed_at)}" if e.routed_at is not None else "routing"
    return [f"event {e.event_id}  tenant={e.tenant} type={e.type} subject={e.subject}",
            f"  audience: {whom}: {plural(e.size, 'recipient')}, {e.routed} routed "
            f"(cursor {e.cursor or '-'})",
            f"  accepted {iso(e.accepted_at)} from key {e.key_name!r}; {routed}; fan-out "
            f"{e.lag_ms(now) / 1000:.1f} s",
            f"  kinds: {', '.join(e.kinds)}; notifications: {', '.join(states) or 'none yet'}"
            + (f"; scheduled: their ladders start {iso(e.send_at)}" if e.send_at else "")]


def ladder_line(n: Notification, now: int) -> str:
    """One notification of an event: who, which kind, its state and each step of its ladder
    (a digested one names its digest)."""
    steps = "; ".join(f"{s.step_no} {s.channel} {s.state}"
                      + (f" in {s.digest_id}" if s.digest_id else "")
                      + (f" ({unsaid(s.state, s.reason)})" if s.reason else "")
                      for s in n.steps)
    return f"{n.user_id}  {n.kind}  {n.id}  {n.state_at(now)}  {steps or 'steps pruned'}"


def accepted_view(e: EventRecord, created: bool) -> shapes.EventAccepted:
    """The answer to POST /v1/events: 202 once the event and its routing job are committed."""
    return shapes.EventAccepted(event_id=e.event_id,
                                state=e.state, created=created, audience_size=e.size, routed=e.routed)
