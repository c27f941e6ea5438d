"""An event's request, who may post it, and how it looks to people: pure checks and views.

A key addresses only what its scopes allow: an inline list of user ids needs `post`, a topic
`topics`, the whole user base `everyone` (never given by default); and every kind the event's
type makes must be one of the key's kinds.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from typing import Any

import orjson

from notifyd.core.errors import DomainError
from notifyd.core.events import EVENT_KEY_PREFIX, Audience, Counts, EventInput, EventRecord
from notifyd.core.models import ApiKey
from notifyd.core.records import Notification
from notifyd.core.text import iso, plural
from notifyd.domain.validate import check_depth, check_fields, get_str
from notifyd.domain.views import unsaid

EVENT_FIELDS = frozenset({"event_id", "type", "audience", "params", "subject", "send_at"})
MAX_SUBJECT = 256
TOPIC_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$")
# An event id goes in a URL path as it is (GET /v1/events/{event_id}): no slash, no space.
EVENT_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:@+=~-]{0,255}$")
SCOPE_OF = {Audience.USERS: "post", Audience.TOPIC: "topics", Audience.EVERYONE: "everyone"}
WHOM = {Audience.USERS: "a list of users", Audience.TOPIC: "a topic",
        Audience.EVERYONE: "everyone (the whole user base)"}
AUDIENCE_SHAPES = '{"user_ids": [...]}, {"topic": "name"} or {"everyone": true}'
# How an event's notifications stand, in the order the document lists them; suppressed ones
# are counted by the reason class of their step ("preference", "opted_out", "no_contact", ...).
STATES = ("pending", "held", "digested", "sent", "delivered", "resolved", "expired",
          "undeliverable")


def check_topic(name: Any, where: str = "topic") -> str:
    if not isinstance(name, str) or not TOPIC_RE.match(name):
        raise DomainError("invalid_field", f"{where} must be a topic name: 1..128 letters, "
                          "digits, _ . : - (starting with a letter or digit)", where)
    return name


def check_event_id(event_id: Any) -> str:
    if not isinstance(event_id, str) or not EVENT_ID_RE.match(event_id):
        raise DomainError("invalid_field", "event_id must be 1..256 letters, digits and "
                          "_ . : @ + = ~ - (starting with a letter or digit)", "event_id")
    return event_id


def check_dedup_key(dedup_key: str | None) -> None:
    """A producer's dedup key may not take the form an event's notifications use."""
    if dedup_key is not None and dedup_key.startswith(EVENT_KEY_PREFIX):
        raise DomainError("invalid_field", f"dedup keys starting {EVENT_KEY_PREFIX!r} are kept "
                          "for the notifications of events (POST /v1/events)", "dedup_key")


def user_list(raw: Any, where: str, most: int) -> tuple[str, ...]:
    """A list of 1..`most` user ids, each checked as a request's user_id; sorted, each once."""
    if not isinstance(raw, list) or not 1 <= len(raw) <= most:
        raise DomainError("invalid_field", f"{where} must be a list of 1..{most} user ids", where)
    for i, user in enumerate(raw):
        get_str({f"{where}[{i}]": user}, f"{where}[{i}]")
    return tuple(sorted(set(raw)))


def _audience(raw: Any, most: int) -> tuple[Audience, str | None, tuple[str, ...]]:
    if not isinstance(raw, dict) or len(raw) != 1:
        raise DomainError("invalid_field", f"audience must be one of {AUDIENCE_SHAPES}",
                          "audience")
    [(name, value)] = raw.items()
    if name == "user_ids":
        return Audience.USERS, None, user_list(value, "audience.user_ids", most)
    if name == "topic":
        return Audience.TOPIC, check_topic(value, "audience.topic"), ()
    if name == "everyone":
        if value is not True:
            raise DomainError("invalid_field", "audience.everyone must be true",
                              "audience.everyone")
        return Audience.EVERYONE, None, ()
    raise DomainError("unknown_field", f"unknown audience {name!r}; it is one of "
                      f"{AUDIENCE_SHAPES}", f"audience.{name}")


def parse_event(data: dict[str, Any], key: ApiKey, types: Mapping[str, tuple[str, ...]],
                max_users: int, send_at: int | None = None) -> EventInput:
    """The request checked and authorised for `key`: its type one of `types` (name -> its
    kinds), its audience one the key may address, every kind one the key may post. `send_at`
    is the request's, read and checked by the caller (it knows the time and the kinds)."""
    check_fields(data, EVENT_FIELDS)
    if data.get("event_id") is None:
        raise DomainError("missing_field", "event_id is required", "event_id")
    event_id, type_name = check_event_id(data["event_id"]), get_str(data, "type")
    assert type_name is not None
    if type_name not in types:
        raise DomainError("unknown_event_type", f"unknown event type {type_name!r}; known: "
                          f"{', '.join(sorted(types)) or 'none ([events.TYPE] in the config)'}",
                          "type")
    if "audience" not in data:
        raise DomainError("missing_field", f"audience is required: {AUDIENCE_SHAPES}",
                          "audience")
    audience, topic, users = _audience(data["audience"], max_users)
    params = data.get("params", {})
    if not isinstance(params, dict):
        raise DomainError("invalid_field", "params must be an object", "params")
    check_depth(params, "params")
    subject = get_str(data, "subject", required=False, max_len=MAX_SUBJECT)
    kinds = types[type_name]
    authorise_event(key, audience, type_name, kinds)
    compared: list[Any] = [type_name, audience.value, topic, users, params, subject]
    if send_at is not None:  # appended only when given, as for one notification
        compared.append(send_at)
    canonical = orjson.dumps(compared, option=orjson.OPT_SORT_KEYS)
    return EventInput(key.tenant, event_id, type_name, kinds, audience, params, subject,
                      hashlib.sha256(canonical).hexdigest(), key.name, topic, users, send_at)


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


def audience_view(e: EventRecord) -> dict[str, Any]:
    """Whom it concerns, as frozen at acceptance."""
    if e.audience is Audience.TOPIC:
        return {"kind": "topic", "topic": e.topic, "version": e.version}
    if e.audience is Audience.EVERYONE:
        return {"kind": "everyone", "cutoff": iso(e.cutoff)}
    return {"kind": "user_ids"}


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


def event_view(e: EventRecord, counts: Counts, now: int) -> dict[str, Any]:
    """The event as support reads it: its input, its frozen audience, how far routing has got,
    and how its notifications stand."""
    return {
        "event_id": e.event_id, "type": e.type, "subject": e.subject, "params": e.params,
        "kinds": list(e.kinds), "audience": audience_view(e), "audience_size": e.size,
        "routed": e.routed, "state": e.state, "accepted_at": iso(e.accepted_at),
        "routed_at": iso(e.routed_at), "fanout_lag_ms": e.lag_ms(now),
        "send_at": iso(e.send_at),
        "notifications": counts_view(counts),
    }


def summary(e: EventRecord, counts: Counts, now: int) -> list[str]:
    """The event in a few lines, for `notifyd inspect --event`."""
    view, aud = counts_view(counts), audience_view(e)
    whom = {"topic": f"topic {e.topic} at version {e.version}",
            "everyone": f"everyone made before {aud.get('cutoff')}",
            "user_ids": "a list of users"}[aud["kind"]]
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


def accepted_view(e: EventRecord, created: bool) -> dict[str, Any]:
    """The answer to POST /v1/events: 202 once the event and its routing job are committed."""
    return {"event_id": e.event_id, "state": e.state, "created": created,
            "audience_size": e.size, "routed": e.routed}
