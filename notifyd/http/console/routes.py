"""The console's routes: pages under /console, each for a signed-in operator of one tenant."""

from __future__ import annotations

import functools

from aiohttp import web

from notifyd.http.console import handlers, overview, preview
from notifyd.http.console.pages import get_static
from notifyd.http.kit import CTX, Handler


def _when_enabled(handler: Handler) -> Handler:
    """Not found at all while console.enabled is false."""

    @functools.wraps(handler)
    async def wrapped(request: web.Request) -> web.StreamResponse:
        if not request.app[CTX].cfg.console.enabled:
            raise web.HTTPNotFound()
        return await handler(request)

    return wrapped


ROUTES: list[tuple[str, str, Handler]] = [(method, path, _when_enabled(handler)) for
                                          method, path, handler in [
    ("GET", "/console", overview.get_overview),
    ("GET", "/console/overview/stream", overview.get_overview_stream),
    ("GET", "/console/sign-in", handlers.get_sign_in),
    ("POST", "/console/sign-in", handlers.post_sign_in),
    ("POST", "/console/sign-out", handlers.post_sign_out),
    ("GET", "/console/search", handlers.get_search),
    ("GET", "/console/notifications/{id}", handlers.get_notification),
    ("POST", "/console/notifications/{id}/replay", handlers.post_replay),
    ("POST", "/console/notifications/{id}/resolve", handlers.post_resolve),
    ("GET", "/console/dead", handlers.get_dead),
    ("POST", "/console/dead/replay", handlers.post_dead_replay),
    ("GET", "/console/suppressions", handlers.get_suppressions),
    ("POST", "/console/suppressions", handlers.post_suppression),
    ("POST", "/console/suppressions/remove", handlers.post_unsuppress),
    ("GET", "/console/people/{user_id}", handlers.get_person),
    ("GET", "/console/events/{event_id}", handlers.get_event),
    ("GET", "/console/templates", preview.get_preview),
    ("POST", "/console/templates", preview.post_preview),
]] + [("GET", "/static/{name}", get_static)]
