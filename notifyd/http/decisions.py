"""GET /v1/decisions/stream: the engine's decisions as they happen (engine/decisions.py), as
Server-Sent Events, for an operator's terminal (`notifyd tail`) or a dashboard. A key with the
read scope sees its tenant's, of its kinds; `kind`, `channel` and `user_id` narrow them.

A stream leaves the connection guard's count, like an inbox stream; at most
decisions.FOLLOWERS_MAX are open. A follower too slow for the entries is told how many it lost
(`event: lost`) and goes on with the newest, never holding the engine up.
"""

from __future__ import annotations

import asyncio

from aiohttp import web

from notifyd.engine.decisions import FOLLOWERS_MAX, Filter
from notifyd.engine.stream import Event
from notifyd.http.errors import ApiError
from notifyd.http.kit import CTX, authorise
from notifyd.shapes.common import Id
from notifyd.shapes.decode import convert

KEEPALIVE_SEC = 25.0  # a comment on an idle stream, so proxies keep it open
QUERY = ("kind", "channel", "user_id")


def _filter(request: web.Request, tenant: str, key_kinds: tuple[str, ...]) -> Filter:
    cfg = request.app[CTX].cfg
    unknown = sorted(set(request.query) - set(QUERY))
    if unknown:
        raise ApiError("unknown_field", f"unknown query parameter {unknown[0]!r} (known: "
                       f"{', '.join(QUERY)})", unknown[0])
    picked = {name: None if request.query.get(name) is None else
              str(convert(request.query[name], Id, name)) for name in QUERY}
    kind, channel = picked["kind"], picked["channel"]
    if kind is not None and kind not in cfg.kinds:
        raise ApiError("unknown_kind", f"unknown kind {kind!r}; known: "
                       f"{', '.join(sorted(cfg.kinds))}", "kind")
    if channel is not None and channel not in cfg.channels:
        raise ApiError("invalid_field", f"unknown channel {channel!r}; known: "
                       f"{', '.join(sorted(cfg.channels))}", "channel")
    return Filter(tenant, key_kinds, kind, channel, picked["user_id"])


async def get_stream(request: web.Request) -> web.StreamResponse:
    """`event: open` first (the filter: from here on, every decision it picks comes),
    `event: decision` per entry (data: its JSON), `event: lost` ({"count"}) when some were
    dropped for a slow reader, a comment every KEEPALIVE_SEC of quiet."""
    ctx = request.app[CTX]
    key = await authorise(request, "read")
    picks = _filter(request, key.tenant, key.kinds)
    lost = asyncio.Event()  # the reader went away (the guard tells)
    stops = [ctx.closing, lost]
    follower = ctx.feed.follow(picks, ctx.cfg.quotas.stream_share)
    if follower is None:
        raise ApiError("overloaded", f"{FOLLOWERS_MAX} decision streams are open")
    response = web.StreamResponse(headers={
        "Content-Type": "text/event-stream", "Cache-Control": "no-cache",
        "X-Accel-Buffering": "no"})
    response.force_close()  # a stream's connection ends with it, never back to keep-alive
    try:
        if ctx.guard is not None and request.transport is not None:
            ctx.guard.release(request.transport, lost.set)
        await response.prepare(request)
        # The head goes now, with what is followed: a reader knows it sees what comes next.
        await response.write(Event("open", {"kind": picks.kind, "channel": picks.channel,
                                            "user_id": picks.user_id}).wire)
        while True:
            entry = await follower.next(KEEPALIVE_SEC, *stops)
            if entry is None and any(s.is_set() for s in stops):
                break
            dropped = follower.take_lost()
            if dropped:
                await response.write(Event("lost", {"count": dropped}).wire)
            if entry is not None:
                await response.write(Event("decision", entry.view()).wire)
            elif not dropped:
                await response.write(b": keepalive\n\n")
    except ConnectionResetError:  # the reader went away: nothing to answer
        pass
    finally:
        ctx.feed.leave(follower)
    return response
