"""Rendering the console's pages: jinja2 templates (autoescaped) and static files from
notifyd/http/pages/, shipped in the package. A refusal on a page is a page, not JSON."""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from importlib import resources
from typing import Any

import jinja2
from aiohttp import web

from notifyd.core.errors import DomainError
from notifyd.core.text import iso
from notifyd.http.errors import body_of, status_of

PageHandler = Callable[[web.Request], Awaitable[web.StreamResponse]]
HEADERS = {"Cache-Control": "no-store", "X-Frame-Options": "DENY",
           "Referrer-Policy": "same-origin", "X-Content-Type-Options": "nosniff",
           # no inline script, no other origin: what the pages run is what notifyd ships
           "Content-Security-Policy": "default-src 'self'; img-src 'self' data:; "
                                      "style-src 'self' 'unsafe-inline'; "
                                      "frame-ancestors 'none'; form-action 'self'"}
STATIC_TYPES = {".css": "text/css", ".js": "text/javascript", ".svg": "image/svg+xml"}


@functools.cache
def environment() -> jinja2.Environment:
    env = jinja2.Environment(loader=jinja2.PackageLoader("notifyd.http", "pages"),
                             autoescape=True, undefined=jinja2.StrictUndefined,
                             trim_blocks=True, lstrip_blocks=True)
    env.filters["iso"] = iso
    return env


def render(name: str, code: int = 200, **context: Any) -> web.Response:
    text = environment().get_template(name).render(**context)
    return web.Response(text=text, status=code, content_type="text/html",
                        headers={**HEADERS, "Referrer-Policy": "no-referrer"}
                        if context.get("private") else HEADERS)


def page(handler: PageHandler) -> PageHandler:
    """A handler whose refusals (the catalog's codes) are an error page with their status."""

    @functools.wraps(handler)
    async def wrapped(request: web.Request) -> web.StreamResponse:
        try:
            return await handler(request)
        except DomainError as e:
            error = body_of(e).error
            return render("error.html.j2", status_of(e), error=error, operator=None)

    return wrapped


@functools.cache
def static_file(name: str) -> bytes | None:
    """A file of pages/static, read once; None if there is none of that name."""
    if "/" in name or name.startswith(".") or not any(name.endswith(s) for s in STATIC_TYPES):
        return None
    entry = resources.files("notifyd.http") / "pages" / "static" / name
    return entry.read_bytes() if entry.is_file() else None


def static_response(name: str) -> web.Response:
    body = static_file(name)
    if body is None:
        raise web.HTTPNotFound()
    kind = next(t for s, t in STATIC_TYPES.items() if name.endswith(s))
    return web.Response(body=body, content_type=kind, charset="utf-8",
                        headers={"Cache-Control": "public, max-age=300",
                                 "X-Content-Type-Options": "nosniff"})


async def get_static(request: web.Request) -> web.Response:
    return static_response(request.match_info["name"])
