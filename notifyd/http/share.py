"""Whose connections hold the places: a producer's or a stranger's, known once a request's head has
arrived (http/guard.py counts the places; this says who may keep one).

A connection is a producer's from its first request that carries an API key the daemon knows or
a console session (app.vouched), for as long as it stays open. Any other connection is a
stranger's: a provider's webhook, an unsubscribe link, a person's pages, the console's sign-in,
a health check, anyone at all. Strangers hold at most server.max_connections less the
producers' share (server.producer_share) at once, so the places a stranger cannot take stay for
producers, whatever the strangers do with theirs: on loopback, where a producer and a stranger
share an address, only this tells them apart. A stranger's connection over that is answered
and closed: a health check (GET /healthz, /readyz) as usual, since an orchestrator that cannot
reach it would restart a daemon that is only busy; anything else with 503
too_many_connections and Retry-After, which a provider's webhook retries.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Awaitable, Callable

import msgspec
from aiohttp import web

from notifyd.core.logs import Throttled
from notifyd.engine.metrics import Metrics
from notifyd.http.errors import ApiError, body_of, status_of

log = logging.getLogger("notifyd.http")
HEALTH = frozenset({"/healthz", "/readyz"})  # answered even over the strangers' share
RETRY_SEC = "1"  # a place frees as soon as a stranger's request ends or times out
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
Vouch = Callable[[web.Request], Awaitable[bool]]  # the request carries a known key or session
Key = object  # a connection's transport


class Share:
    """The strangers' connections, counted against their share of the places."""

    def __init__(self, vouch: Vouch, metrics: Metrics, lines: Throttled) -> None:
        self.vouch, self.metrics, self.lines = vouch, metrics, lines
        self.producers: set[Key] = set()
        self.strangers: set[Key] = set()
        self.most = 0

    def resize(self, max_connections: int, producer_share: float) -> None:
        """Strangers' most: the places less the producers' share (at least one: a health check
        must always find one); a reload's lower most closes no connection already open."""
        kept = math.ceil(max_connections * producer_share)
        self.most = max(1, max_connections - kept)

    def forget(self, transport: Key) -> None:
        """The connection ended, or became an inbox stream (counted by server.max_streams)."""
        self.producers.discard(transport)
        if transport in self.strangers:
            self.strangers.discard(transport)
            self.metrics.connections_strangers.set(len(self.strangers))

    async def admit(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        """Run a request of a connection not yet known as a producer's (the guard's middleware
        calls this), counting it against the strangers' share."""
        transport = request.transport
        if transport is None or transport in self.producers:
            return await handler(request)
        vouched = await self.vouch(request)
        if transport.is_closing():  # lost meanwhile: forgotten already, or about to be
            return await handler(request)
        if vouched:
            self.forget(transport)
            self.producers.add(transport)
            return await handler(request)
        if transport in self.strangers or len(self.strangers) < self.most:
            self.strangers.add(transport)
            self.metrics.connections_strangers.set(len(self.strangers))
            return await handler(request)
        return await self._over(request, handler)

    async def _over(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        """A stranger's request while strangers hold their whole share: answered (a health
        check) or refused, and its connection closed after the answer."""
        self.metrics.connections_closed.labels("over_share").inc()
        self.lines.log("over share", logging.WARNING, "strangers hold all %d of their places "
                       "(connections with no API key or console session); more are answered "
                       "503 and closed (see server.producer_share)", self.most)
        if request.method == "GET" and request.path in HEALTH:
            response = await handler(request)
        else:
            err = ApiError("too_many_connections")
            response = web.Response(body=msgspec.json.encode(body_of(err)),
                                    status=status_of(err), content_type="application/json",
                                    headers={"Retry-After": RETRY_SEC})
        response.force_close()
        return response
