"""What every HTTP handler shares: the app's context, the error catalog's answers, API-key and
user-token authorisation, bounded body reads. web.py assembles the app; api handlers live in
web.py (producers) and people.py (a person's own inbox and preferences)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any, Protocol, TypeVar

import msgspec
from aiohttp import web
from aiohttp.web_request import FileField
from multidict import MultiDictProxy

from notifyd.config import Config
from notifyd.core.clock import Clock
from notifyd.core.errors import DomainError, OverQuota
from notifyd.core.logs import Throttled, printable
from notifyd.core.models import ApiKey, ResolveResult, usable_scopes
from notifyd.domain import policy, signed
from notifyd.engine import evidence
from notifyd.engine.decisions import Feed
from notifyd.engine.ingest import Ingest, IngestStore
from notifyd.engine.metrics import Metrics
from notifyd.engine.resolution import Ref
from notifyd.engine.stream import Event, Hub
from notifyd.http.auth import KeyCache
from notifyd.http.errors import ApiError, body_of, status_of
from notifyd.http.guard import CLIENT_GONE, ConnectionGuard
from notifyd.http.health import Health
from notifyd.shapes.common import Id
from notifyd.shapes.decode import convert, decode
from notifyd.store import (
    DeadLetterStore,
    EventStore,
    InboxStore,
    KeyStore,
    LookupStore,
    MonitorStore,
    Overloaded,
    ReceiptStore,
    RecipientStore,
    ReplayStore,
    ResolveStore,
    RetentionStore,
    StorageError,
    SuppressionStore,
    TopicStore,
)

log = logging.getLogger("notifyd.web")
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
CTX: web.AppKey[Context] = web.AppKey("ctx")
T = TypeVar("T")
ENCODE = msgspec.json.Encoder().encode


class FaceStore(IngestStore, KeyStore, RecipientStore, LookupStore, ResolveStore, ReplayStore,
                DeadLetterStore, ReceiptStore, SuppressionStore, InboxStore, MonitorStore,
                RetentionStore, TopicStore, EventStore, Protocol):
    """What the HTTP face's handlers use of the store (ctx.store): never the claim, the sends,
    the digests or the database's lifecycle."""


class Context:
    def __init__(self, cfg: Config, ingest: Ingest[FaceStore], keys: KeyCache, clock: Clock,
                 health: Health | None = None, metrics: Metrics | None = None,
                 link_key: bytes | None = None, guard: ConnectionGuard | None = None) -> None:
        self.cfg = cfg
        self.ingest = ingest
        self.store: FaceStore = ingest.store  # the store the face's ingest writes to
        self.keys = keys
        self.clock = clock
        self.health = health  # None: an app without the delivery engine (API tests)
        self.metrics = health.metrics if health else metrics or Metrics()
        self.draining = False  # set at shutdown: answer 503 instead of accepting
        self.rules = policy.rules(cfg.catalog)  # what receipts are judged by
        self.fetch = evidence.Fetcher(cfg.egress.routes())  # the SNS certificate (ses)
        self.hub: Hub = ingest.hub  # open inbox streams, told of changes after they commit
        self.feed: Feed = ingest.feed  # who follows the engine's decisions (notifyd tail)
        self.link_key = link_key  # signs unsubscribe links (the daemon's, from the store)
        self.guard = guard  # the connection guard, when serving: streams leave its count
        self.closing = asyncio.Event()  # set at shutdown: open inbox streams end
        # Lines a client can provoke at will (an error, a refused webhook): a few, not a flood.
        self.lines = Throttled(log, clock)
        self._accepts: dict[str, Any] = {}  # notifyd_accepts_total's counter of each outcome

    def accepted(self, outcome: str, n: int = 1) -> None:
        """Count answers to accepts by outcome (the counter of each looked up once)."""
        counter = self._accepts.get(outcome)
        if counter is None:
            counter = self._accepts[outcome] = self.metrics.accepts.labels(outcome)
        counter.inc(n)

    def use(self, cfg: Config, ingest: Ingest[FaceStore], health: Health | None) -> None:
        """A reload's config and the peers made from it, for the requests from here on; a
        request already running goes on with what it read."""
        self.cfg, self.ingest, self.health = cfg, ingest, health
        self.rules = policy.rules(cfg.catalog)
        self.fetch.http.egress = cfg.egress.routes()


def answer(body: msgspec.Struct, status: int = 200) -> web.Response:
    """An answer's Struct (notifyd/shapes), encoded by msgspec."""
    return web.Response(body=ENCODE(body), status=status, content_type="application/json")


def error_response(err: DomainError) -> web.Response:
    """The catalog's answer to a refusal: its status, {error: {code, message, field}}."""
    response = answer(body_of(err), status_of(err))
    if isinstance(err, OverQuota):
        response.headers["Retry-After"] = str(err.retry_after_sec)
    elif err.code in RETRY_AFTER:
        response.headers["Retry-After"] = RETRY_AFTER[err.code]
    return response


RETRY_AFTER = {"overloaded": "1", "too_many_streams": "10", "storage_unavailable": "5", "shutting_down": "5"}


async def answered(request: web.Request, handler: Handler) -> web.StreamResponse:
    """The handler's answer, or the catalog's for what it raised (app.api_middleware)."""
    try:
        return await handler(request)
    except DomainError as e:
        return error_response(e)
    except ClientGone:  # nothing to answer: no one is there to read it
        if log.isEnabledFor(logging.DEBUG):  # the path made printable only for a line kept
            log.debug("%s %s: the client left before its body arrived", request.method,
                      printable(request.path))
        return web.Response(status=CLIENT_GONE)
    except Overloaded:
        return error_response(ApiError("overloaded"))
    except StorageError as e:
        return error_response(ApiError("storage_unavailable", f"the database cannot take "
                                       f"writes now: {e}"))
    except web.HTTPRequestEntityTooLarge:
        return error_response(ApiError("body_too_large"))
    except web.HTTPRedirection:  # a page sending the browser on (the console)
        raise
    except web.HTTPNotFound:
        return error_response(ApiError("not_found", f"no route for {request.path}"))
    except web.HTTPMethodNotAllowed as e:
        allowed = ", ".join(sorted(e.allowed_methods))
        response = error_response(ApiError("method_not_allowed", f"{request.method} is not "
                                           f"allowed on {request.path} (allowed: {allowed})"))
        response.headers["Allow"] = allowed
        return response
    except Exception as e:
        request.app[CTX].lines.unexpected(f"unhandled error on {request.method} "
                                          f"{printable(signed.redact(request.path))}", e)
        return error_response(ApiError("internal"))


async def authorise(request: web.Request, scope: str) -> ApiKey:
    """The request's key, if it may do `scope` (post, read, resolve, users, topics)."""
    key = await api_key(request)
    check_scope(key, scope)
    return key


async def authorise_every_kind(request: web.Request, scope: str, what: str) -> ApiKey:
    """The request's key, if it is for every kind and may do `scope`: a call that reaches
    beyond any kind's notifications (`what`, named in the refusal), such as a person's
    contacts or a topic's members, is not for a key limited to some kinds."""
    key = await api_key(request)
    if key.kinds:
        raise not_every_kind(key, what)
    check_scope(key, scope)
    return key


async def api_key(request: web.Request) -> ApiKey:
    """The request's key, whatever it may do."""
    key = await request.app[CTX].keys.find(request.headers.get("Authorization"))
    if key is None:
        raise ApiError("unauthorized")
    return key


def check_scope(key: ApiKey, scope: str) -> None:
    if not key.may(scope):
        raise ApiError("scope_not_allowed", f"this API key may not {scope} (its scopes: "
                       f"{', '.join(sorted(usable_scopes(key.kinds, key.scopes))) or 'none'})")


def not_every_kind(key: ApiKey, what: str) -> ApiError:
    return ApiError("kind_not_allowed", f"this API key may act only on the kinds "
                    f"{', '.join(key.kinds)}; {what} covers every kind (use a key for every "
                    "kind)")


class ClientGone(Exception):  # noqa: N818 - a fact about the client, not an error of ours
    """The client closed its connection before its request's body had arrived."""


async def bounded(request: web.Request, read: Callable[[], Awaitable[T]]) -> T:
    """What `read` takes of the request's body, within server.body_timeout_sec: the one way
    every handler reads a body, so a client dribbling one holds nothing long, and one that
    leaves midway is ClientGone (a debug line), not an error of ours. A body that has all
    arrived (most do, with their request's head) is read without a timer: nothing can wait."""
    if request.content.is_eof():
        return await read()
    try:
        async with asyncio.timeout(request.app[CTX].cfg.server.body_timeout_sec):
            return await read()
    except TimeoutError:
        raise ApiError("request_timeout") from None
    except ConnectionResetError:  # aiohttp's own when the connection is lost mid-body
        raise ClientGone from None


async def read_body(request: web.Request) -> bytes:
    """The body's bytes, within the body timeout."""
    return await bounded(request, request.read)


async def read_form(request: web.Request) -> MultiDictProxy[str | bytes | bytearray | FileField]:
    """A form post's fields, within the body timeout."""
    return await bounded(request, request.post)


async def read_as(request: web.Request, shape: type[T]) -> T:
    """The body decoded as `shape`; none at all is an empty object (a call whose every field
    may be left out)."""
    return decode(await read_body(request) or b"{}", shape)


def resolved(ctx: Context, r: ResolveResult) -> None:
    """After a resolution's commit: its metrics, and open inbox streams told of the item it
    marked read (a kind with read_on_resolve)."""
    if r.changed:
        ctx.metrics.resolved(r.kind, r.depth, r.cancelled_steps)
    if r.read is not None:
        ctx.hub.publish(r.read.tenant, r.read.user_id, Event("read", {"id": r.notification_id}),
                        Event("badge", {"unread": r.read.unread}))


def no_notification(ref: Ref) -> ApiError:
    """Not found, in the words of how it was named."""
    if ref.notification_id is not None:
        return ApiError("not_found", f"no notification {ref.notification_id!r}", "id")
    return ApiError("not_found", f"no notification for user {ref.user_id!r} with dedup key "
                    f"{ref.dedup_key!r}", "dedup_key")


def user_id_of(request: web.Request) -> str:
    """The path's user id, held to the same limits as a body's."""
    return str(convert(request.match_info["user_id"], Id, "user_id"))


