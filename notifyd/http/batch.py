"""The batch calls: up to 1,000 notifications, or resolutions, in one request and one write.

Each item is the body of the single call and gets the answer that call would give, in its place:
{"status", ...that call's body} or {"status", "error"}; a bad item never fails the others, and the
batch answers 200. The batch as a whole is refused, nothing of it written, only for what is wrong
with all of it: the key, the envelope, the size, a store that sheds or fails, a daemon stopping.
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from notifyd.core.errors import DomainError
from notifyd.core.models import AcceptInput, AcceptResult, ApiKey
from notifyd.domain.validate import check_fields, get_str, parse_items
from notifyd.domain.views import accepted_view, resolved_view
from notifyd.engine import resolution
from notifyd.engine.ingest import Ingest
from notifyd.engine.resolution import Ref
from notifyd.http.errors import ApiError, body_of, status_of
from notifyd.http.kit import (
    CTX,
    authorise,
    json_response,
    no_notification,
    read_body,
    resolved,
)
from notifyd.store import Overloaded, StorageError

MAX_ITEMS = 1000
RESOLUTION_FIELDS = frozenset({"user_id", "dedup_key", "resolution"})
Key = tuple[str, str, str]  # (user_id, dedup_key, resolution)


async def read_items(request: web.Request) -> list[Any]:
    """The envelope's items, read within server.max_batch_body_bytes instead of the single
    calls' server.max_body_bytes."""
    limit = request.app[CTX].cfg.server.max_batch_body_bytes
    try:
        body = await read_body(request.clone(client_max_size=limit))
    except web.HTTPRequestEntityTooLarge:
        raise ApiError("body_too_large", f"the request body is larger than "
                       f"server.max_batch_body_bytes ({limit} bytes); send fewer items per "
                       "batch") from None
    return parse_items(body, MAX_ITEMS)


def refused(e: DomainError) -> dict[str, Any]:
    return {"status": status_of(e), **body_of(e)}


def _not_object(call: str) -> DomainError:
    return DomainError("body_not_object", f"each item must be a JSON object: the body of {call}")


async def post_notifications(request: web.Request) -> web.Response:
    ctx = request.app[CTX]
    ingest = ctx.ingest  # one config for the whole request, should a reload swap it meanwhile
    if ctx.draining:
        raise ApiError("shutting_down")
    key = await authorise(request, "post")
    if "Idempotency-Key" in request.headers:
        raise ApiError("invalid_field", "Idempotency-Key names one notification: give each "
                       "item its dedup_key instead", "Idempotency-Key")
    parsed = [_parse(ingest, key, item) for item in await read_items(request)]
    inputs = [p for p in parsed if isinstance(p, AcceptInput)]
    try:
        answers = iter(await ingest.accept_many(inputs) if inputs else [])
    except (Overloaded, StorageError):
        ctx.metrics.accepts.labels("unavailable").inc(len(parsed))
        raise
    results = []
    for p in parsed:
        outcome = next(answers) if isinstance(p, AcceptInput) else p
        if isinstance(outcome, AcceptResult):
            ctx.metrics.accepts.labels("created" if outcome.created else "retry").inc()
            results.append({"status": 202 if outcome.created else 200,
                            **accepted_view(outcome)})
        else:
            ctx.metrics.accepts.labels("conflict" if outcome.code == "dedup_conflict"
                                       else "refused").inc()
            results.append(refused(outcome))
    return json_response({"results": results})


def _parse(ingest: Ingest, key: ApiKey, item: Any) -> AcceptInput | DomainError:
    if not isinstance(item, dict):
        return _not_object("POST /v1/notifications")
    try:
        return ingest.parse_item(item, key)
    except DomainError as e:
        return e


async def post_resolutions(request: web.Request) -> web.Response:
    ctx = request.app[CTX]
    key = await authorise(request, "resolve")
    parsed = [_resolution(item) for item in await read_items(request)]
    keys = [p for p in parsed if isinstance(p, tuple)]
    found = iter(await resolution.resolve_keys(
        ctx.store, key.tenant, keys, f"key:{key.name}", key.kinds,
        ctx.cfg.catalog.read_on_resolve) if keys else [])
    results = []
    for p in parsed:
        if isinstance(p, DomainError):
            results.append(refused(p))
            continue
        r = next(found)
        if r is None:
            results.append(refused(no_notification(Ref(user_id=p[0], dedup_key=p[1]))))
            continue
        resolved(ctx, r)
        results.append({"status": 200, **resolved_view(r)})
    return json_response({"results": results})


def _resolution(item: Any) -> Key | DomainError:
    """One item of a resolution batch, checked as POST /v1/resolutions checks its body."""
    if not isinstance(item, dict):
        return _not_object("POST /v1/resolutions")
    try:
        check_fields(item, RESOLUTION_FIELDS)
        user_id, dedup_key = get_str(item, "user_id"), get_str(item, "dedup_key")
        what = get_str(item, "resolution", required=False, max_len=200)
    except DomainError as e:
        return e
    assert user_id is not None and dedup_key is not None
    return user_id, dedup_key, what or resolution.DEFAULT_RESOLUTION
