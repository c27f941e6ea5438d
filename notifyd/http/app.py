"""The aiohttp app: HTTP in, domain calls, HTTP out. Errors come from the one catalog in errors.py."""

from __future__ import annotations

import logging
import time
from typing import Any

from aiohttp import web

from notifyd.channels import webpush
from notifyd.core.errors import DomainError
from notifyd.core.models import ApiKey, ResolveResult
from notifyd.core.text import whole_number
from notifyd.domain import suppressions
from notifyd.domain.recipients import (
    device_view,
    erased_view,
    parse_device,
    parse_recipient,
    patch_recipient,
    recipient_view,
)
from notifyd.domain.views import accepted_view, resolved_view, status_view
from notifyd.engine import evidence, resolution
from notifyd.engine.digests import carriers
from notifyd.engine.metrics import CONTENT_TYPE
from notifyd.engine.resolution import Ref
from notifyd.http import batch, decisions, events, people, topics, unsubscribe, widget
from notifyd.http.console.routes import ROUTES as CONSOLE_ROUTES
from notifyd.http.console.signins import SIGN_INS, SignIns
from notifyd.http.errors import ApiError, status_of
from notifyd.http.kit import (
    CTX,
    ENCODE,
    Context,
    Handler,
    answer,
    answered,
    authorise,
    authorise_every_kind,
    error_response,
    no_notification,
    read_as,
    read_body,
    resolved,
    user_id_of,
)
from notifyd.http.openapi import encoded
from notifyd.shapes.decode import decode
from notifyd.shapes.notifications import Health, Ready, ResolutionRequest, ResolveRequest
from notifyd.shapes.people import (
    DEVICES_BY_TYPE,
    Devices,
    DeviceType,
    SuppressionRequest,
    Suppressions,
    User,
    UserPatch,
)
from notifyd.store import Notification, Overloaded, StorageError


async def post_notification(request: web.Request) -> web.Response:
    ctx = request.app[CTX]
    ingest = ctx.ingest  # one config for the whole request, should a reload swap it meanwhile
    started, outcome = time.perf_counter(), "refused"
    try:
        if ctx.draining:
            raise ApiError("shutting_down")
        key = await authorise(request, "post")
        inp = ingest.parse(await read_body(request), key, request.headers.get("Idempotency-Key"))
        result = await ingest.accept(inp)
        outcome = "created" if result.created else "retry"
    except DomainError as e:
        outcome = {409: "conflict", 503: "unavailable"}.get(status_of(e), "refused")
        raise
    except (Overloaded, StorageError):
        outcome = "unavailable"
        raise
    finally:
        ctx.accepted(outcome)
        ctx.metrics.accept_seconds.observe(time.perf_counter() - started)
    return web.Response(body=ENCODE(accepted_view(result)),
                        status=202 if result.created else 200, content_type="application/json")


async def _owned(request: web.Request, key: ApiKey, ref: Ref) -> Notification:
    """The notification, if this key may see it: its tenant, and one of its kinds. Anything
    else is simply not found, so ids of others are not confirmed to exist."""
    n = await resolution.find(request.app[CTX].store, ref, key.tenant)
    if n is None or not key.allows(n.kind):
        raise no_notification(ref)
    return n


async def get_notification(request: web.Request) -> web.Response:
    key = await authorise(request, "read")
    n = await _owned(request, key, Ref(notification_id=request.match_info["id"]))
    ctx = request.app[CTX]
    return answer(status_view(n, ctx.clock.now_ms(), await carriers(ctx.store, n)))


async def resolve_notification(request: web.Request) -> web.Response:
    ctx = request.app[CTX]
    key = await authorise(request, "resolve")
    req = await read_as(request, ResolveRequest)
    ref = Ref(notification_id=request.match_info["id"])
    r = await resolution.resolve(ctx.store, ref, req.resolution or resolution.DEFAULT_RESOLUTION,
                                 f"key:{key.name}", key.tenant, key.kinds,
                                 ctx.cfg.catalog.read_on_resolve)
    return _resolved(ctx, r, ref)


async def post_resolution(request: web.Request) -> web.Response:
    """By user and dedup key: looked up and resolved in one write (as each key of a batch is),
    not a read and then a write."""
    ctx = request.app[CTX]
    key = await authorise(request, "resolve")
    req = await read_as(request, ResolutionRequest)
    [r] = await resolution.resolve_keys(
        ctx.store, key.tenant,
        [(req.user_id, req.dedup_key, req.resolution or resolution.DEFAULT_RESOLUTION)],
        f"key:{key.name}", key.kinds, ctx.cfg.catalog.read_on_resolve)
    return _resolved(ctx, r, Ref(user_id=req.user_id, dedup_key=req.dedup_key))


def _resolved(ctx: Context, r: ResolveResult | None, ref: Ref) -> web.Response:
    if r is None:
        raise no_notification(ref)
    resolved(ctx, r)
    return answer(resolved_view(r))


# What a key limited to some kinds may not reach (http/kit.authorise_every_kind): a person's
# contacts decide where every kind goes (a one-time code too), and the suppression list and
# devices serve every kind alike.
PROFILE = "a person's profile and contacts"
DEVICES = "a person's devices"
SUPPRESSIONS = "the suppression list"


async def put_user(request: web.Request) -> web.Response:
    """The whole profile replaced: a field the body leaves out is cleared."""
    return await _change_user(request, patch=False)


async def patch_user(request: web.Request) -> web.Response:
    """A JSON merge patch (RFC 7396) of the profile: the fields it names change (null clears
    one), the others stay; applied to the profile as its own write reads it."""
    return await _change_user(request, patch=True)


async def _change_user(request: web.Request, patch: bool) -> web.Response:
    ctx = request.app[CTX]
    key = await authorise_every_kind(request, "users", PROFILE)
    tenant, user_id = key.tenant, user_id_of(request)
    body = await read_body(request)
    if not body:
        raise ApiError("body_not_object", "send the profile as a JSON object ({} " + (
            "changes nothing)" if patch else "clears it)"))
    if patch:
        changes = decode(body, UserPatch)
        await ctx.store.edit_recipient(tenant, user_id, lambda current: patch_recipient(
            tenant, user_id, current, changes))
    else:
        await ctx.store.put_recipient(parse_recipient(tenant, user_id, decode(body, User)))
    stored = await ctx.store.get_recipient(tenant, user_id)
    assert stored is not None
    return answer(recipient_view(stored))


async def delete_user(request: web.Request) -> web.Response:
    """Erase the person: what goes, what is cancelled, scrubbed and kept one-way, counted (see
    store/core/erasure.py). Their open inbox streams end; their user tokens are refused."""
    ctx = request.app[CTX]
    key = await authorise_every_kind(request, "users", "erasing a person")
    user_id = user_id_of(request)
    erased = await ctx.store.erase_user(key.tenant, user_id, f"key:{key.name}")
    ctx.hub.close_person(key.tenant, user_id, "erased")
    return answer(erased_view(user_id, erased))


async def get_user(request: web.Request) -> web.Response:
    ctx = request.app[CTX]
    key = await authorise_every_kind(request, "users", PROFILE)
    user_id = user_id_of(request)
    r = await ctx.store.get_recipient(key.tenant, user_id)
    if r is None:
        raise ApiError("not_found", f"no user {user_id!r}", "user_id")
    return answer(recipient_view(r))


async def post_device(request: web.Request) -> web.Response:
    ctx = request.app[CTX]
    key = await authorise_every_kind(request, "users", DEVICES)
    user_id = user_id_of(request)
    body = await read_body(request) or b"{}"
    device = parse_device(decode(body, DEVICES_BY_TYPE[decode(body, DeviceType).type]))
    if device.kind == "webpush":
        pushers = {name: c.settings for name, c in ctx.cfg.channels.items()
                   if c.type == "webpush"}
        why = webpush.registration_problem(pushers, device.endpoint)
        if why is not None:
            raise ApiError("invalid_field", why, "endpoint")
    await ctx.store.put_device(key.tenant, user_id, device)
    stored = await ctx.store.get_recipient(key.tenant, user_id)
    shown = next(d for d in (stored.devices if stored else ()) if d.device_id == device.device_id)
    return answer(device_view(shown), status=201)


async def get_devices(request: web.Request) -> web.Response:
    ctx = request.app[CTX]
    key = await authorise_every_kind(request, "users", DEVICES)
    r = await ctx.store.get_recipient(key.tenant, user_id_of(request))
    return answer(Devices(devices=[device_view(d) for d in (r.devices if r else ())]))


async def delete_device(request: web.Request) -> web.Response:
    ctx = request.app[CTX]
    key = await authorise_every_kind(request, "users", DEVICES)
    device_id = request.match_info["device_id"]
    if not await ctx.store.delete_device(key.tenant, user_id_of(request), device_id):
        raise ApiError("not_found", f"no device {device_id!r}", "device_id")
    return web.Response(status=204)


async def get_suppressions(request: web.Request) -> web.Response:
    ctx = request.app[CTX]
    key = await authorise_every_kind(request, "users", SUPPRESSIONS)
    unknown = sorted(set(request.query) - {"address", "limit"})
    if unknown:
        raise ApiError("unknown_field", f"unknown query parameter {unknown[0]!r} (known: "
                       "address, limit)", unknown[0])
    address = request.query.get("address")
    limit = _limit(request.query.get("limit"))
    found = await ctx.store.suppressions(key.tenant, address, limit)
    return answer(Suppressions(suppressions=[suppressions.view(s) for s in found]))


def _limit(text: str | None, most: int = 1000) -> int:
    if text is None:
        return most
    limit = whole_number(text, most, 1)
    if limit is None:
        raise ApiError("invalid_field", f"limit must be 1..{most}", "limit")
    return limit


async def post_suppression(request: web.Request) -> web.Response:
    ctx = request.app[CTX]
    key = await authorise_every_kind(request, "users", SUPPRESSIONS)
    channel_type, address, reason = suppressions.parse(
        await read_as(request, SuppressionRequest))
    created = await ctx.store.suppress(key.tenant, channel_type, address, reason,
                                       f"key:{key.name}")
    shown = next((s for s in await ctx.store.suppressions(key.tenant, address, 1000)
                  if s.channel_type == channel_type), None)
    if shown is None:  # a push device that is not the tenant's
        raise ApiError("not_found", f"no device {address!r}", "address")
    return answer(suppressions.view(shown, created), status=201 if created else 200)


async def delete_suppression(request: web.Request) -> web.Response:
    ctx = request.app[CTX]
    key = await authorise_every_kind(request, "users", SUPPRESSIONS)
    channel_type = request.match_info["channel_type"]
    address = suppressions.check_address(channel_type, request.match_info["address"])
    if await ctx.store.unsuppress(key.tenant, channel_type, address):
        return web.Response(status=204)
    wide = [s for s in await ctx.store.suppressions(key.tenant, address, 1000)
            if s.channel_type == channel_type and s.tenant == "*"]
    raise ApiError("not_found", f"{address} is not on this tenant's {channel_type} list" + (
        f"; it is suppressed for all tenants ({wide[0].reason} from {wide[0].source}), which "
        "only an operator lifts: notifyd suppressions remove --tenant '*'" if wide else ""),
        "address")


def public_url(request: web.Request) -> str:
    """The URL the provider called, as it signed it: server.public_url (behind a proxy) with the
    path and query exactly as received, or the URL this request was seen at when it is unset."""
    base = request.app[CTX].cfg.server.public_url.rstrip("/") or (
        f"{request.scheme}://{request.host}")
    return f"{base}{request.raw_path}"  # the request target as sent: path and query, unaltered


async def post_webhook(request: web.Request) -> web.Response:
    """A provider's delivery receipts: verified over the raw body, stored and applied before the
    2xx. A refusal is a log line naming the provider and why, never the body: at most one per
    provider every few seconds, counting those held back (anyone can post here)."""
    ctx = request.app[CTX]
    name, tenant = request.match_info["provider"], request.match_info.get("tenant")
    provider, settings = evidence.PROVIDERS.get(name), ctx.cfg.webhook(name)
    if provider is None or settings is None:
        on = [p for p in evidence.PROVIDERS if ctx.cfg.webhook(p) is not None]
        raise ApiError("not_found", f"no webhook {name!r} is configured (on: "
                       f"{', '.join(on) or 'none'}; see [webhooks.NAME] in the config)")
    if tenant is not None and not provider.per_tenant:
        raise ApiError("not_found", f"the {name} webhook has one URL: /v1/webhooks/{name}")
    raw = evidence.RawRequest(request.method, public_url(request), request.headers,
                              await read_body(request), request.query, tenant)
    count = ctx.metrics.receipts

    def say(msg: str, *args: object) -> None:
        ctx.lines.log(f"webhook {name}", logging.WARNING, msg, name, *args)

    try:
        taken = await evidence.take(ctx.store, provider, settings, raw, ctx.clock.now_ms(),
                                    ctx.fetch, ctx.rules)
    except evidence.BadSignature as e:
        count.labels(name, "bad_signature").inc()
        say("webhook %s refused from %s: %s", request.remote, e)
        return _refusal(ApiError("bad_signature", f"{name}: {e}"), provider.bad_signature_status)
    except evidence.BadReceipt as e:
        count.labels(name, "bad_receipt").inc()
        say("webhook %s unreadable from %s: %s", request.remote, e)
        return _refusal(ApiError("bad_receipt", f"{name}: {e}"), provider.bad_receipt_status)
    except evidence.FetchFailed as e:
        count.labels(name, "unavailable").inc()
        say("webhook %s: could not fetch what verification needs: %s", e)
        raise ApiError("provider_unreachable") from None
    except (Overloaded, StorageError):
        count.labels(name, "unavailable").inc()
        raise
    for outcome, n in taken.items():
        count.labels(name, outcome).inc(n)
    reply = provider.reply
    return web.Response(body=reply.body, status=reply.status, content_type=reply.content_type)


async def get_webhook(request: web.Request) -> web.Response:
    """A provider's check of the webhook's URL (Meta's subscription check): its challenge
    answered when it names our token; nothing is stored."""
    ctx = request.app[CTX]
    name = request.match_info["provider"]
    provider, settings = evidence.PROVIDERS.get(name), ctx.cfg.webhook(name)
    challenge = provider.challenge if provider is not None else None
    if challenge is None or settings is None:
        raise ApiError("not_found", f"no webhook {name!r} answers a GET (only a configured "
                       "provider that checks its URL first does)")
    raw = evidence.RawRequest(request.method, public_url(request), request.headers, b"",
                              request.query)
    try:
        answer = challenge(raw, settings)
    except evidence.BadSignature as e:
        ctx.lines.log(f"webhook {name}", logging.WARNING, "webhook %s check refused from %s: %s",
                      name, request.remote, e)
        return _refusal(ApiError("bad_signature", f"{name}: {e}"), 403)
    except evidence.BadReceipt as e:
        return _refusal(ApiError("bad_receipt", f"{name}: {e}"), 400)
    return web.Response(body=answer, content_type="text/plain")


def _refusal(err: ApiError, status: int) -> web.Response:
    response = error_response(err)
    response.set_status(status)
    return response


async def get_openapi(request: web.Request) -> web.Response:
    cfg = request.app[CTX].cfg
    return web.Response(body=encoded(tuple(sorted(cfg.kinds)), tuple(sorted(cfg.channels)),
                                     cfg.tokens.max_ttl_sec, cfg.fanout.max_inline_users),
                        content_type="application/json")


async def get_health(request: web.Request) -> web.Response:
    """Liveness: the process answers. It touches nothing."""
    return answer(Health(status="draining" if request.app[CTX].draining else "ok"))


async def get_ready(request: web.Request) -> web.Response:
    """Readiness of the daemon itself: the store takes writes, the scanner loops, the event
    loop keeps time. A provider's outage is not ours: it shows on /metrics, never here."""
    ctx = request.app[CTX]
    if ctx.health is not None:
        checks = await ctx.health.ready()
    else:
        await ctx.store.ping()
        checks = {"store": "ok"}
    if ctx.draining:
        checks["draining"] = "shutting down"
    ok = all(v == "ok" for v in checks.values())
    return answer(Ready(status="ready" if ok else "not_ready", checks=checks),
                  status=200 if ok else 503)


async def get_metrics(request: web.Request) -> web.Response:
    ctx = request.app[CTX]
    text = await ctx.health.scrape() if ctx.health else ctx.metrics.text()
    return web.Response(body=text, headers={"Content-Type": CONTENT_TYPE})


ROUTES: list[tuple[str, str, Handler]] = [
    ("POST", "/v1/notifications", post_notification),
    ("POST", "/v1/notifications/batch", batch.post_notifications),
    ("GET", "/v1/notifications/{id:(?!batch$)[^/]+}", get_notification),  # batch is no id
    ("POST", "/v1/notifications/{id}/resolve", resolve_notification),
    ("POST", "/v1/resolutions", post_resolution),
    ("POST", "/v1/resolutions/batch", batch.post_resolutions),
    ("PUT", "/v1/users/{user_id}", put_user),
    ("PATCH", "/v1/users/{user_id}", patch_user),
    ("DELETE", "/v1/users/{user_id}", delete_user),
    ("GET", "/v1/users/{user_id}", get_user),
    ("POST", "/v1/users/{user_id}/devices", post_device),
    ("GET", "/v1/users/{user_id}/devices", get_devices),
    ("DELETE", "/v1/users/{user_id}/devices/{device_id}", delete_device),
    ("GET", "/v1/suppressions", get_suppressions),
    ("POST", "/v1/suppressions", post_suppression),
    ("DELETE", "/v1/suppressions/{channel_type}/{address}", delete_suppression),
    ("POST", "/v1/webhooks/{provider}", post_webhook),
    ("GET", "/v1/webhooks/{provider}", get_webhook),
    ("POST", "/v1/webhooks/{provider}/{tenant}", post_webhook),
    ("GET", "/v1/decisions/stream", decisions.get_stream),
    ("GET", "/v1/openapi.json", get_openapi),
    ("GET", "/healthz", get_health),
    ("GET", "/readyz", get_ready),
    ("GET", "/metrics", get_metrics),
]
ROUTES += events.ROUTES + topics.ROUTES  # http/events.py, http/topics.py
EVERY_ROUTE = [*ROUTES, *people.ROUTES, *unsubscribe.ROUTES, *widget.ROUTES, *CONSOLE_ROUTES]


@web.middleware
async def api_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Every answer the error catalog's shape (kit.answered), and CORS on a browser page's call
    of a person's own paths (people.with_cors): one middleware, since aiohttp runs a layer of
    calls per middleware on every request."""
    if people.cross_origin(request):
        return await people.with_cors(request, handler)
    return await answered(request, handler)


def make_app(ctx: Context, outer: list[Any] | None = None) -> web.Application:
    """The app; `outer` middlewares (the connection guard's, which holds the strangers' share)
    run before the API's own."""
    app = web.Application(middlewares=[*(outer or []), api_middleware],
                          client_max_size=ctx.cfg.server.max_body_bytes)
    app[CTX] = ctx
    app[SIGN_INS] = SignIns(ctx.clock)
    for method, path, handler in EVERY_ROUTE:
        app.router.add_route(method, path, handler)
    return app
