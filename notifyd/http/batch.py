"""The batch calls: up to 1,000 notifications, or resolutions, in one request and one write.

Each item is the body of the single call and gets the answer that call would give, in its place:
{"status", ...that call's body} or {"status", "error"}; a bad item never fails the others, and the
batch answers 200. The batch as a whole is refused, nothing of it written, only for what is wrong
with all of it: the key, the envelope, the size, a store that sheds or fails, a daemon stopping.
"""

from __future__ import annotations

from typing import Any

from aiohttp import web
from msgspec import Raw

from notifyd.core.errors import DomainError
from notifyd.core.models import AcceptInput, AcceptResult, ApiKey
from notifyd.domain.views import accepted_item, resolved_item
from notifyd.engine import resolution
from notifyd.engine.ingest import Ingest, IngestStore
from notifyd.engine.resolution import Ref
from notifyd.http.errors import ApiError, body_of, status_of
from notifyd.http.kit import (
    CTX,
    answer,
    authorise,
    no_notification,
    read_body,
    resolved,
)
from notifyd.shapes.common import BATCH_MAX, AnyItems, Refused
from notifyd.shapes.decode import convert, decode
from notifyd.shapes.notifications import (
    AcceptBatch,
    AcceptedItem,
    AcceptRequest,
    AcceptResults,
    ResolutionBatch,
    ResolutionRequest,
    ResolutionResults,
    ResolvedItem,
)
from notifyd.store import Overloaded, StorageError

MAX_ITEMS = BATCH_MAX
Key = tuple[str, str, str]  # (user_id, dedup_key, resolution)


async def read_items(request: web.Request, envelope: type[AcceptBatch | ResolutionBatch]
                     ) -> list[Any]:
    """The envelope's items, read within server.max_batch_body_bytes instead of the single
    calls' server.max_body_bytes: each raw, to be decoded as the body of its call (as JSON,
    for a body nested past what msgspec reads raw)."""
    limit = request.app[CTX].cfg.server.max_batch_body_bytes
    try:
        body = await read_body(request.clone(client_max_size=limit))
    except web.HTTPRequestEntityTooLarge:
        raise ApiError("body_too_large", f"the request body is larger than "
                       f"server.max_batch_body_bytes ({limit} bytes); send fewer items per "
                       "batch") from None
    return decode(body, envelope, deep=AnyItems).items


def _item(item: Any, shape: type[Any], call: str) -> Any:
    """One item decoded as the body of `call`; a refusal is answered in its place, but for JSON
    orjson does not read (a number past a double's range): the whole body is not JSON."""
    try:
        return decode(item, shape) if isinstance(item, Raw) else convert(item, shape)
    except DomainError as e:
        if e.code == "invalid_json":
            raise
        if e.code == "body_not_object":
            return DomainError("body_not_object", f"each item must be a JSON object: the body "
                               f"of {call}")
        return e


def refused(e: DomainError) -> Refused:
    return Refused(status=status_of(e), error=body_of(e).error)


async def post_notifications(request: web.Request) -> web.Response:
    ctx = request.app[CTX]
    ingest = ctx.ingest  # one config for the whole request, should a reload swap it meanwhile
    if ctx.draining:
        raise ApiError("shutting_down")
    key = await authorise(request, "post")
    if "Idempotency-Key" in request.headers:
        raise ApiError("invalid_field", "Idempotency-Key names one notification: give each "
                       "item its dedup_key instead", "Idempotency-Key")
    parsed = [_parse(ingest, key, item) for item in await read_items(request, AcceptBatch)]
    inputs = [p for p in parsed if isinstance(p, AcceptInput)]
    try:
        answers = iter(await ingest.accept_many(inputs) if inputs else [])
    except (Overloaded, StorageError):
        ctx.accepted("unavailable", len(parsed))
        raise
    results: list[AcceptedItem | Refused] = []
    for p in parsed:
        outcome = next(answers) if isinstance(p, AcceptInput) else p
        if isinstance(outcome, AcceptResult):
            ctx.accepted("created" if outcome.created else "retry")
            results.append(accepted_item(outcome))
        else:
            ctx.accepted("conflict" if outcome.code == "dedup_conflict" else "refused")
            results.append(refused(outcome))
    return answer(AcceptResults(results=results))


def _parse(ingest: Ingest[IngestStore], key: ApiKey, item: Any) -> AcceptInput | DomainError:
    req = _item(item, AcceptRequest, "POST /v1/notifications")
    if isinstance(req, DomainError):
        return req
    try:
        return ingest.parse_item(req, key)
    except DomainError as e:
        return e


async def post_resolutions(request: web.Request) -> web.Response:
    ctx = request.app[CTX]
    key = await authorise(request, "resolve")
    parsed = [_resolution(item) for item in await read_items(request, ResolutionBatch)]
    keys = [p for p in parsed if isinstance(p, tuple)]
    found = iter(await resolution.resolve_keys(
        ctx.store, key.tenant, keys, f"key:{key.name}", key.kinds,
        ctx.cfg.catalog.read_on_resolve) if keys else [])
    results: list[ResolvedItem | Refused] = []
    for p in parsed:
        if isinstance(p, DomainError):
            results.append(refused(p))
            continue
        r = next(found)
        if r is None:
            results.append(refused(no_notification(Ref(user_id=p[0], dedup_key=p[1]))))
            continue
        resolved(ctx, r)
        results.append(resolved_item(r))
    return answer(ResolutionResults(results=results))


def _resolution(item: Any) -> Key | DomainError:
    """One item of a resolution batch, checked as POST /v1/resolutions checks its body."""
    req = _item(item, ResolutionRequest, "POST /v1/resolutions")
    if isinstance(req, DomainError):
        return req
    return req.user_id, req.dedup_key, req.resolution or resolution.DEFAULT_RESOLUTION
