"""The aiohttp app: HTTP in, domain calls, HTTP out. Errors come from the one catalog in errors.py."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

import orjson
from aiohttp import web

from notifyd.auth import KeyCache
from notifyd.clock import Clock
from notifyd.config import Config
from notifyd.errors import ApiError
from notifyd.ingest import Ingest, check_fields, get_str, parse_object
from notifyd.ladder import parse_hhmm, valid_timezone
from notifyd.models import ApiKey, Recipient, ResolveResult, iso
from notifyd.openapi import spec
from notifyd.views import status_view

log = logging.getLogger("notifyd.web")
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
USER_FIELDS = frozenset({"email", "phone", "chat", "timezone", "locale", "quiet_hours"})
CTX: web.AppKey[Context] = web.AppKey("ctx")


class Context:
    def __init__(self, cfg: Config, ingest: Ingest, keys: KeyCache, clock: Clock) -> None:
        self.cfg = cfg
        self.ingest = ingest
        self.store = ingest.store
        self.keys = keys
        self.clock = clock
        self.draining = False  # set at shutdown: answer 503 instead of accepting


def error_response(err: ApiError) -> web.Response:
    return web.json_response(err.body(), status=err.status)


@web.middleware
async def errors_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    try:
        return await handler(request)
    except ApiError as e:
        return error_response(e)
    except web.HTTPRequestEntityTooLarge:
        return error_response(ApiError("body_too_large"))
    except web.HTTPNotFound:
        return error_response(ApiError("not_found", f"no route for {request.path}"))
    except web.HTTPMethodNotAllowed:
        return error_response(ApiError("method_not_allowed", f"{request.method} is not allowed "
                                       f"on {request.path}"))
    except Exception:
        log.exception("unhandled error on %s %s", request.method, request.path)
        return error_response(ApiError("internal"))


async def authorise(request: web.Request) -> ApiKey:
    key = await request.app[CTX].keys.find(request.headers.get("Authorization"))
    if key is None:
        raise ApiError("unauthorized")
    return key


async def read_object(request: web.Request) -> dict[str, Any]:
    body = await request.read()
    return parse_object(body) if body else {}


async def post_notification(request: web.Request) -> web.Response:
    ctx = request.app[CTX]
    if ctx.draining:
        raise ApiError("shutting_down")
    key = await authorise(request)
    inp = ctx.ingest.parse(await request.read(), key, request.headers.get("Idempotency-Key"))
    result = await ctx.ingest.accept(inp)
    body = orjson.dumps({"notification_id": result.notification_id, "state": result.state,
                         "created": result.created})
    return web.Response(body=body, status=202 if result.created else 200,
                        content_type="application/json")


async def _owned(request: web.Request, key: ApiKey, nid: str | None = None) -> dict[str, Any]:
    """The notification, if this key may see it: its tenant, and one of its kinds. Anything
    else is simply not found, so ids of others are not confirmed to exist."""
    nid = nid or request.match_info["id"]
    n = await request.app[CTX].store.get_notification(nid)
    if n is None or n["tenant"] != key.tenant or not key.allows(n["kind"]):
        raise ApiError("not_found", f"no notification {nid!r}", "id")
    return n


async def get_notification(request: web.Request) -> web.Response:
    key = await authorise(request)
    return web.json_response(status_view(await _owned(request, key)))


def _resolution_of(data: dict[str, Any]) -> str:
    return get_str(data, "resolution", required=False, max_len=200) or "resolved"


def _resolved(r: ResolveResult) -> web.Response:
    return web.json_response({"notification_id": r.notification_id, "resolution": r.resolution,
                              "resolved_at": iso(r.resolved_at), "changed": r.changed,
                              "cancelled_steps": r.cancelled_steps})


async def resolve_notification(request: web.Request) -> web.Response:
    ctx = request.app[CTX]
    key = await authorise(request)
    data = await read_object(request)
    check_fields(data, frozenset({"resolution"}))
    n = await _owned(request, key)
    r = await ctx.store.resolve(n["id"], _resolution_of(data), f"key:{key.name}",
                                ctx.clock.now_ms())
    assert r is not None
    return _resolved(r)


async def post_resolution(request: web.Request) -> web.Response:
    ctx = request.app[CTX]
    key = await authorise(request)
    data = await read_object(request)
    check_fields(data, frozenset({"user_id", "dedup_key", "resolution"}))
    user_id, dedup_key = get_str(data, "user_id"), get_str(data, "dedup_key")
    assert user_id is not None and dedup_key is not None
    nid = await ctx.store.find_by_dedup(key.tenant, user_id, dedup_key)
    if nid is None:
        raise ApiError("not_found", f"no notification for user {user_id!r} with dedup key "
                       f"{dedup_key!r}", "dedup_key")
    await _owned(request, key, nid)
    r = await ctx.store.resolve(nid, _resolution_of(data), f"key:{key.name}", ctx.clock.now_ms())
    assert r is not None
    return _resolved(r)


def parse_recipient(tenant: str, user_id: str, data: dict[str, Any]) -> Recipient:
    check_fields(data, USER_FIELDS)
    contacts: dict[str, Any] = {}
    for name in ("email", "phone"):
        value = get_str(data, name, required=False)
        if value is not None:
            contacts[name] = value
    chat = data.get("chat")
    if chat is not None:
        if not isinstance(chat, dict) or not all(
                isinstance(k, str) and isinstance(v, str) and v for k, v in chat.items()):
            raise ApiError("invalid_field", "chat must map a chat service to an id", "chat")
        contacts["chat"] = chat
    tz = get_str(data, "timezone", required=False, max_len=64)
    if tz is not None and not valid_timezone(tz):
        raise ApiError("invalid_field", f"unknown timezone {tz!r} (use an IANA name such as "
                       "Europe/Paris)", "timezone")
    quiet = data.get("quiet_hours")
    start = end = None
    if quiet is not None:
        if not isinstance(quiet, dict) or set(quiet) != {"start", "end"}:
            raise ApiError("invalid_field", "quiet_hours must be {start: 'HH:MM', end: 'HH:MM'} "
                           "or null", "quiet_hours")
        try:
            parse_hhmm(quiet["start"])
            parse_hhmm(quiet["end"])
        except (ValueError, TypeError, AttributeError) as e:
            raise ApiError("invalid_field", f"quiet_hours: {e}", "quiet_hours") from None
        start, end = quiet["start"], quiet["end"]
    locale = get_str(data, "locale", required=False, max_len=35)
    return Recipient(tenant, user_id, tz, locale, start, end, contacts)


def recipient_view(r: Recipient) -> dict[str, Any]:
    quiet = {"start": r.quiet_start, "end": r.quiet_end} if r.quiet_start else None
    return {"user_id": r.user_id, **r.contacts, "timezone": r.timezone, "locale": r.locale,
            "quiet_hours": quiet, "disabled_contacts": r.disabled}


async def put_user(request: web.Request) -> web.Response:
    ctx = request.app[CTX]
    key = await authorise(request)
    user_id = request.match_info["user_id"]
    recipient = parse_recipient(key.tenant, user_id, await read_object(request))
    await ctx.store.put_recipient(recipient, ctx.clock.now_ms())
    stored = await ctx.store.get_recipient(key.tenant, user_id)
    assert stored is not None
    return web.json_response(recipient_view(stored))


async def get_user(request: web.Request) -> web.Response:
    ctx = request.app[CTX]
    key = await authorise(request)
    r = await ctx.store.get_recipient(key.tenant, request.match_info["user_id"])
    if r is None:
        raise ApiError("not_found", f"no user {request.match_info['user_id']!r}", "user_id")
    return web.json_response(recipient_view(r))


async def get_openapi(request: web.Request) -> web.Response:
    return web.json_response(spec())


async def get_health(request: web.Request) -> web.Response:
    return web.json_response({"status": "draining" if request.app[CTX].draining else "ok"})


ROUTES: list[tuple[str, str, Handler]] = [
    ("POST", "/v1/notifications", post_notification),
    ("GET", "/v1/notifications/{id}", get_notification),
    ("POST", "/v1/notifications/{id}/resolve", resolve_notification),
    ("POST", "/v1/resolutions", post_resolution),
    ("PUT", "/v1/users/{user_id}", put_user),
    ("GET", "/v1/users/{user_id}", get_user),
    ("GET", "/v1/openapi.json", get_openapi),
    ("GET", "/healthz", get_health),
]


def make_app(ctx: Context) -> web.Application:
    app = web.Application(middlewares=[errors_middleware],
                          client_max_size=ctx.cfg.server.max_body_bytes)
    app[CTX] = ctx
    for method, path, handler in ROUTES:
        app.router.add_route(method, path, handler)
    return app
