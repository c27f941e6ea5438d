"""Events over HTTP: POST /v1/events (202 once the event and its routing job are committed;
the same input again 200 with the event as it stands) and GET /v1/events/{event_id}, the
event as support reads it. What a key may address is decided by domain/events.py.
"""

from __future__ import annotations

from aiohttp import web

from notifyd.core.models import ApiKey
from notifyd.domain.events import accepted_view, check_event_id, event_view
from notifyd.engine import events
from notifyd.http.errors import ApiError
from notifyd.http.kit import CTX, Handler, answer, authorise, read_body


async def _key(request: web.Request) -> ApiKey:
    """The request's key; which scope it needs depends on the audience the body names."""
    key = await request.app[CTX].keys.find(request.headers.get("Authorization"))
    if key is None:
        raise ApiError("unauthorized")
    return key


async def post_event(request: web.Request) -> web.Response:
    ctx = request.app[CTX]
    ingest = ctx.ingest  # one config for the whole request, should a reload swap it meanwhile
    if ctx.draining:
        raise ApiError("shutting_down")
    key = await _key(request)
    inp = events.parse(ingest, await read_body(request), key)
    done = await events.accept(ingest, inp)
    assert done.event is not None
    return answer(accepted_view(done.event, done.created), status=202 if done.created else 200)


async def get_event(request: web.Request) -> web.Response:
    """The event, its frozen audience, how far routing has got and how its notifications
    stand; an event of another tenant, or with a kind the key may not read, is not found."""
    ctx = request.app[CTX]
    key = await authorise(request, "read")
    event_id = check_event_id(request.match_info["event_id"])
    e = await ctx.store.get_event(key.tenant, event_id)
    if e is None or not events.readable(key, e):
        raise ApiError("not_found", f"no event {event_id!r}", "event_id")
    counts = await ctx.store.event_counts(key.tenant, event_id)
    return answer(event_view(e, counts, ctx.clock.now_ms()))


ROUTES: list[tuple[str, str, Handler]] = [
    ("POST", "/v1/events", post_event),
    ("GET", "/v1/events/{event_id}", get_event),
]
