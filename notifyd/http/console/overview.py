"""The console's overview: the daemon breathing. Due lag per channel and lane, sends per outcome
since start, breakers, events fanning out, the database's size: one snapshot, rendered into the
page and then sent again every console.overview_every_sec over Server-Sent Events while it is
open. Read from what /metrics reads (Health, the counters) and the store, never a new count."""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import asdict, dataclass
from typing import Any
from urllib.parse import quote

import orjson
from aiohttp import web

from notifyd.http.console import session
from notifyd.http.console.pages import page, render
from notifyd.http.kit import CTX, Context


@dataclass(frozen=True)
class Fanout:
    """An event being routed to its audience: how far it has got."""

    event_id: str
    routed: int
    size: int

    @property
    def percent(self) -> int:
        return 100 if not self.size else min(100, 100 * self.routed // self.size)


FANOUTS_SHOWN = 20  # events still routing, oldest first, in the panel


async def fanouts(ctx: Context, tenant: str) -> list[Fanout]:
    """Events of the tenant still fanning out to their audience, with their progress (the
    routing cursor's count of the audience frozen at acceptance)."""
    routing = await ctx.store.routing_events(FANOUTS_SHOWN)
    return [Fanout(e.event_id, e.routed, e.size) for e in routing if e.tenant == tenant]


async def find_event(ctx: Context, tenant: str, text: str) -> str | None:
    """The console page of the tenant's event named `text`, for search; None: no such event."""
    if await ctx.store.get_event(tenant, text) is None:
        return None
    return f"/console/events/{quote(text, safe='')}"


async def snapshot(ctx: Context, tenant: str) -> dict[str, Any]:
    lag: dict[str, float] = {}
    breakers: dict[str, str] = {}
    if ctx.health is not None:
        lag = {f"{ch} {lane}": ms / 1000 for (ch, lane), ms in
               sorted((await ctx.health.due_lag_ms()).items())}
        breakers = {name: sender.breaker.state for name, sender in
                    sorted(ctx.health.pool.channels.items())}
    sends: dict[str, float] = {}
    for family in ctx.metrics.sends.collect():
        for sample in family.samples:
            if sample.name.endswith("_total") and sample.value:
                label = f"{sample.labels['channel']} {sample.labels['outcome']}"
                sends[label] = sends.get(label, 0) + sample.value
    space = await ctx.store.storage(count=False)
    return {"lag": lag, "sends": dict(sorted(sends.items())), "breakers": breakers,
            "fanouts": [{**asdict(f), "percent": f.percent} for f in await fanouts(ctx, tenant)],
            "db_bytes": space.bytes, "db_free_bytes": space.free_bytes,
            "at": ctx.clock.now_ms()}


@page
async def get_overview(request: web.Request) -> web.StreamResponse:
    s = await session.required(request)
    op = session.Operator(s.tenant, s.operator, session.csrf(request, s))
    return render("overview.html.j2", operator=op,
                  figures=await snapshot(request.app[CTX], s.tenant))


async def get_overview_stream(request: web.Request) -> web.StreamResponse:
    """The snapshot as an `overview` event now and every console.overview_every_sec, until the
    page goes, the session ends or the daemon stops."""
    ctx = request.app[CTX]
    s = await session.current(request)
    if s is None:
        return web.Response(status=401, text="sign in to the console first")
    response = web.StreamResponse(headers={
        "Content-Type": "text/event-stream", "Cache-Control": "no-cache",
        "X-Accel-Buffering": "no"})
    response.force_close()
    await response.prepare(request)
    every = ctx.cfg.console.overview_every_sec
    with contextlib.suppress(ConnectionResetError):
        await response.write(b"retry: 3000\n\n")
        while not ctx.closing.is_set() and s.expires_at > ctx.clock.now_ms() // 1000:
            figures = orjson.dumps(await snapshot(ctx, s.tenant))
            await response.write(b"event: overview\ndata: " + figures + b"\n\n")
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(every):
                    await ctx.closing.wait()
    return response
