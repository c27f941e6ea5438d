"""Events in: POST /v1/events checked (domain/events.py), authorised for the posting key, and
accepted with its routing job (the frozen audience and a cursor) in one write; the answer comes
after that commit, and the fan-out (engine/fanout.py) takes it from there.
"""

from __future__ import annotations

from typing import Protocol

from notifyd.config import Config
from notifyd.core.errors import DomainError
from notifyd.core.events import EventAccepted, EventInput, EventRecord
from notifyd.core.models import AcceptInput, ApiKey
from notifyd.domain.events import parse_event
from notifyd.engine.ingest import Ingest, IngestStore
from notifyd.shapes.decode import decode
from notifyd.shapes.events import EventRequest
from notifyd.store import EventStore


class EventIntakeStore(IngestStore, EventStore, Protocol):
    """What accepting an event uses, through ingest: the event's write beside ingest's own."""


def types(cfg: Config) -> dict[str, tuple[str, ...]]:
    """Each configured event type with its kinds."""
    return {name: t.kinds for name, t in cfg.events.items()}


def parse(ingest: Ingest[IngestStore], body: bytes, key: ApiKey) -> EventInput:
    cfg = ingest.cfg
    data = decode(body, EventRequest)
    send_at = None
    for kind in types(cfg).get(data.type, ()):  # as for one notification of each kind: no
        send_at = ingest.send_at_of(kind, data.send_at)  # inbox kind, not too far ahead
    return parse_event(data, key, types(cfg), cfg.fanout.max_inline_users, send_at)


async def check_inbox(ingest: Ingest[IngestStore], inp: EventInput) -> None:
    """Params an inbox kind's template cannot render are the request's fault: 422 before
    anything is written, as for one notification (rendered here in the default locale)."""
    for kind in inp.kinds:
        if ingest.cfg.kinds[kind].inbox:
            one = AcceptInput(inp.tenant, "", kind, inp.params, None, None, None,
                              inp.request_hash, inp.key_name)
            await ingest.inbox_item(one, "n_check", ingest.cfg.templates.default_locale)


async def accept(ingest: Ingest[EventIntakeStore], inp: EventInput) -> EventAccepted:
    """The event accepted (or what holds its id: the same input again is answered with it);
    its fan-out is told at once."""
    await check_inbox(ingest, inp)
    quotas, cfg = ingest.quotas, ingest.cfg
    done = await ingest.store.accept_event(
        inp, quotas.recipients_left(cfg, inp.tenant, ingest.clock.now_ms()))
    if done.over is not None:
        raise quotas.recipients_refused(cfg, inp.tenant, done.over, ingest.clock.now_ms())
    if done.event is None:
        raise DomainError("unknown_topic", f"no topic {inp.topic!r}: make it with PUT "
                          f"/v1/topics/{inp.topic}", "audience.topic")
    if done.conflict:
        raise DomainError("event_conflict", f"event {inp.event_id!r} was already accepted with "
                          "different input (type, audience, params, subject or send_at)", "event_id")
    if done.created:
        quotas.spend_recipients(cfg, inp.tenant, done.event.size, ingest.clock.now_ms())
        ingest.routing.set()
    return done


def readable(key: ApiKey, e: EventRecord) -> bool:
    """A key sees an event of its tenant whose every kind it may read."""
    return e.tenant == key.tenant and all(key.allows(k) for k in e.kinds)
