"""The person's side of the API: their preferences, the names of kinds and categories in their
locale, their inbox (pages, reads, archives, the badge, a live stream), the user tokens a
producer's backend mints for their pages, and CORS for those pages (one-click unsubscribe links:
http/unsubscribe.py).

A request acts for one person: either a producer's API key with the `users` scope (any user of
its tenant; a key limited to some kinds: only its kinds' inbox items, with `read` and
`resolve`), or a user token, checked on every request, for exactly the user in the path.
"""

from __future__ import annotations

import asyncio
import base64
import logging
from typing import Any

import msgspec
from aiohttp import web

from notifyd.core.models import Recipient
from notifyd.core.records import Cursor, InboxItem
from notifyd.core.text import iso, whole_number
from notifyd.domain import preferences, signed
from notifyd.domain.views import item_view
from notifyd.engine.stream import CATCH_UP, CLOSE, Event, Stream
from notifyd.http.errors import ApiError
from notifyd.http.kit import (
    CTX,
    Handler,
    answer,
    answered,
    api_key,
    authorise_every_kind,
    check_scope,
    error_response,
    not_every_kind,
    read_as,
    read_body,
    user_id_of,
)
from notifyd.http.names import names_of
from notifyd.shapes import people as shapes
from notifyd.shapes.decode import decode

log = logging.getLogger("notifyd.people")
PAGE_MAX = 100
PAGE_DEFAULT = 50
TOKEN_TTL_DEFAULT = 3600
KEEPALIVE_SEC = 25.0  # a comment on an idle stream, so proxies keep it open
BACKLOG_PAGE = 500  # items read at a time for a stream that resumes with Last-Event-ID
KEEPALIVE = b": keepalive\n\n"
RETRY_SOON = b"retry: 3000\n\n"  # a page that lost its stream reconnects after 3 s
RETRY_LATER = b"retry: 60000\n\n"  # one displaced by the person's newer page, after a minute
CORS_HEADERS = "Authorization, Content-Type, Last-Event-ID, If-Match"
TENANT: web.RequestKey[str] = web.RequestKey("tenant", str)  # whose person the request is for
# The kinds of inbox item the request may see and change: a key's kinds (none: every kind).
KINDS: web.RequestKey[tuple[str, ...]] = web.RequestKey("kinds", tuple)


# --- who the request acts for -----------------------------------------------------------------


async def person(request: web.Request, every_kind: bool = False,
                 limited: str = "read", reach: str | None = None) -> tuple[str, str]:
    """(tenant, user_id) of the path's user, if the request may act for them: their own user
    token, or a producer's key with the `users` scope. A key limited to some kinds holds no
    `users` scope: it reaches only its kinds' inbox items (request[KINDS]), as their
    notifications, with the scope `limited` names (read, or resolve for a change); a route that
    covers every kind (`every_kind`: preferences, the stream) refuses it. A user token with a
    scope (one a preference link minted) is taken only where `reach` names that scope."""
    user_id = user_id_of(request)
    header = request.headers.get("Authorization", "")
    token = header[7:].strip() if header[:7].lower() == "bearer " else ""
    token = token or request.query.get("token", "")  # EventSource cannot send headers
    if token.startswith(signed.USER_TOKEN):
        who = await _user_token(request, token)
        if who.user_id != user_id:
            raise ApiError("wrong_user", "this user token is for another user")
        if who.scope is not None and who.scope != reach:
            raise ApiError("scope_not_allowed", f"this user token reaches the person's "
                           f"{who.scope} only (it was opened from a link in a message)")
        tenant = who.tenant
        request[KINDS] = ()  # the person's own: every kind
    else:
        key = await api_key(request)
        if key.kinds and every_kind:
            raise not_every_kind(key, "this call")
        check_scope(key, limited if key.kinds else "users")
        tenant = key.tenant
        request[KINDS] = key.kinds
    request[TENANT] = tenant  # CORS answers by the tenant's origins
    return tenant, user_id


def _kinds(request: web.Request) -> tuple[str, ...]:
    return request[KINDS]  # set by person()


async def _user_token(request: web.Request, token: str) -> signed.UserToken:
    """The token, if its tenant's key (or the one a rotation replaced, within the overlap)
    signed it, it is within tokens.max_ttl_sec, the API key it names is live, and it was made
    after its person was last erased."""
    ctx = request.app[CTX]
    try:
        tenant = signed.token_tenant(token)
        keys = await ctx.keys.token_keys(tenant)
        if not keys:
            raise signed.BadToken("no such tenant has user tokens")
        who = signed.read_user_token(token, keys, ctx.clock.now_ms() // 1000,
                                     ctx.cfg.tokens.max_ttl_sec)
        if who.key_name is not None and not await ctx.keys.live(who.key_name, tenant):
            raise signed.BadToken("the API key that made it was revoked")
        erased = await ctx.store.erased_at(tenant, who.user_id)
        if erased is not None and who.issued_at * 1000 <= erased:
            raise signed.BadToken("it was made before its user was erased")
        return who
    except signed.BadToken as e:
        raise ApiError("unauthorized", f"user token: {e}") from None


async def post_token(request: web.Request) -> web.Response:
    """A short-lived token for one user's own inbox and preferences, minted for a producer's
    page; only a producer's key may ask, and the token dies with that key."""
    ctx = request.app[CTX]
    # The token opens the person's whole inbox and preferences.
    key = await authorise_every_kind(request, "users", "a user token")
    user_id = user_id_of(request)
    ttl = (await read_as(request, shapes.TokenRequest)).ttl_sec
    longest = ctx.cfg.tokens.max_ttl_sec
    if ttl is msgspec.UNSET:
        ttl = min(TOKEN_TTL_DEFAULT, longest)
    elif ttl > longest:
        raise ApiError("invalid_field", f"ttl_sec must be an integer "
                       f"{shapes.TOKEN_TTL_MIN}..{longest} (tokens.max_ttl_sec)", "ttl_sec")
    secret = await ctx.store.signing_key(signed.tenant_key_name(key.tenant))
    now = ctx.clock.now_ms() // 1000
    expires = now + ttl
    return answer(shapes.Token(token=signed.make_user_token(secret, key.tenant, user_id,
                                                            expires, key.name, now),
                               user_id=user_id, expires_at=iso(expires * 1000)), status=201)


# --- preferences ------------------------------------------------------------------------------


async def get_preferences(request: web.Request) -> web.Response:
    tenant, user_id = await person(request, every_kind=True, reach=signed.PREFERENCES_ONLY)
    return await _preferences(request, tenant, user_id)


async def _preferences(request: web.Request, tenant: str, user_id: str) -> web.Response:
    """The preferences as they hold now, with their version as the ETag."""
    ctx = request.app[CTX]
    shown = preferences.view(ctx.cfg.catalog, await ctx.store.get_recipient(tenant, user_id),
                             names_of(ctx))
    response = answer(shown)
    response.headers["ETag"] = preferences.etag(shown.version)
    return response


async def put_preferences(request: web.Request) -> web.Response:
    """The whole document replaced: what a page shows, saved."""
    return await _change_preferences(request, patch=False)


async def patch_preferences(request: web.Request) -> web.Response:
    """A JSON merge patch (RFC 7396) of what the person chose, applied to the preferences as
    its own write reads them."""
    return await _change_preferences(request, patch=True)


async def _change_preferences(request: web.Request, patch: bool) -> web.Response:
    """A new version of the preferences, unless If-Match names another than the current one:
    412, and nothing changes (two pages editing at once conflict, never overwrite)."""
    ctx = request.app[CTX]
    tenant, user_id = await person(request, every_kind=True, reach=signed.PREFERENCES_ONLY)
    body = await read_body(request)
    if not body:
        raise ApiError("body_not_object", "send the preferences as a JSON object")
    catalog = ctx.cfg.catalog
    wanted = preferences.if_match(request.headers.get("If-Match"))
    hours = None
    if patch:  # its shape too: a bad body is a 422, whatever If-Match says
        doc = msgspec.to_builtins(decode(body, shapes.PreferencesPatch))
        preferences.check_patch(catalog, doc)
        whole = None
    else:  # a page may name the version it showed, and set the time zone and quiet hours
        change = preferences.parse_change(catalog, decode(body, shapes.PreferencesRequest),
                                          await ctx.store.get_recipient(tenant, user_id))
        whole, hours = change.document, change.hours
        if wanted is None and change.version is not None:
            wanted = frozenset({change.version})

    def edit(r: Recipient | None) -> dict[str, Any]:  # a patch is applied inside the write
        return preferences.patched(catalog, r, doc) if whole is None else whole

    version, written = await ctx.store.edit_preferences(tenant, user_id, edit, wanted, hours)
    if not written:
        raise ApiError("precondition_failed", f"the preferences changed since the version this "
                       f"change was made over (now version {version}, ETag "
                       f"{preferences.etag(version)}): read them again and redo the change",
                       "If-Match" if request.headers.get("If-Match") else "version")
    return await _preferences(request, tenant, user_id)


async def get_names(request: web.Request) -> web.Response:
    """Every kind's and category's name in the person's locale: what a page shows in place of
    an identifier (the inbox widget labels each item with its kind's)."""
    ctx = request.app[CTX]
    tenant, user_id = await person(request, every_kind=True, reach=signed.PREFERENCES_ONLY)
    return answer(preferences.names_view(ctx.cfg.catalog, names_of(ctx),
                                         await ctx.store.locale_of(tenant, user_id)))


# --- the inbox --------------------------------------------------------------------------------


def _cursor(item: InboxItem) -> str:
    return base64.urlsafe_b64encode(f"{item.created_at}.{item.notification_id}".encode()
                                    ).decode().rstrip("=")


def _read_cursor(text: str) -> Cursor:
    try:
        raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)).decode()
    except ValueError:  # binascii.Error and UnicodeDecodeError are ValueErrors
        raw = ""
    at, _, nid = raw.partition(".")
    created_at = whole_number(at)  # int() and SQLite refuse a number of any length
    if created_at is None:
        raise ApiError("invalid_field", "before must be a cursor from a previous page's "
                       "next", "before")
    return Cursor(created_at, nid)


def _query(request: web.Request, known: frozenset[str]) -> None:
    unknown = sorted(set(request.query) - known - {"token"})
    if unknown:
        raise ApiError("unknown_field", f"unknown query parameter {unknown[0]!r} (known: "
                       f"{', '.join(sorted(known))})", unknown[0])


async def get_inbox(request: web.Request) -> web.Response:
    """A page, newest first, by a stable (created_at, id) cursor: `next` is the `before` of
    the page after it (null on the last)."""
    ctx = request.app[CTX]
    tenant, user_id = await person(request)
    _query(request, frozenset({"before", "limit", "archived"}))
    limit = whole_number(request.query.get("limit", str(PAGE_DEFAULT)), PAGE_MAX, 1)
    if limit is None:
        raise ApiError("invalid_field", f"limit must be 1..{PAGE_MAX}", "limit")
    archived = request.query.get("archived", "false")
    if archived not in ("true", "false"):
        raise ApiError("invalid_field", "archived must be true or false", "archived")
    before = request.query.get("before")
    items = await ctx.store.inbox_page(tenant, user_id, _read_cursor(before) if before else None,
                                       limit + 1, archived == "true", _kinds(request))
    more = len(items) > limit
    items = items[:limit]
    return answer(shapes.InboxPage(items=[item_view(i) for i in items],
                                   next=_cursor(items[-1]) if more else None))


async def get_badge(request: web.Request) -> web.Response:
    ctx = request.app[CTX]
    tenant, user_id = await person(request)
    return answer(shapes.Badge(unread=await ctx.store.badge(tenant, user_id, _kinds(request))))


async def _unread(request: web.Request, badge: int) -> int:
    """The badge as the request may see it: of its kinds only, for a key limited to some."""
    kinds = _kinds(request)
    if not kinds:
        return badge
    tenant, user_id = request[TENANT], user_id_of(request)
    return await request.app[CTX].store.badge(tenant, user_id, kinds)


def _stops_on_read(request: web.Request) -> frozenset[str]:
    kinds = request.app[CTX].cfg.kinds
    return frozenset(name for name, kind in kinds.items() if kind.stop == "read")


async def post_read(request: web.Request) -> web.Response:
    """Mark an item read; a kind with stop = "read" is resolved by it, ending its ladder."""
    ctx = request.app[CTX]
    tenant, user_id = await person(request, limited="resolve")
    item_id = request.match_info["item_id"]
    change = await ctx.store.read_item(tenant, user_id, item_id, _stops_on_read(request),
                                       _kinds(request))
    if change is None:
        raise ApiError("not_found", f"no inbox item {item_id!r}", "item_id")
    if change.changed:
        ctx.hub.publish(tenant, user_id, Event("read", {"id": item_id}),
                        Event("badge", {"unread": change.badge}))
    return answer(shapes.InboxChange(id=item_id, read=True,
                                     unread=await _unread(request, change.badge),
                                     resolved=bool(change.resolved)))


async def post_read_all(request: web.Request) -> web.Response:
    ctx = request.app[CTX]
    tenant, user_id = await person(request, limited="resolve")
    change = await ctx.store.read_all(tenant, user_id, _stops_on_read(request), _kinds(request))
    ctx.hub.publish(tenant, user_id, Event("badge", {"unread": change.badge}))
    return answer(shapes.InboxChange(unread=await _unread(request, change.badge),
                                     resolved=len(change.resolved)))


async def post_archive(request: web.Request) -> web.Response:
    ctx = request.app[CTX]
    tenant, user_id = await person(request, limited="resolve")
    item_id = request.match_info["item_id"]
    change = await ctx.store.archive_item(tenant, user_id, item_id, _kinds(request))
    if change is None:
        raise ApiError("not_found", f"no inbox item {item_id!r}", "item_id")
    if change.changed:
        ctx.hub.publish(tenant, user_id, Event("archived", {"id": item_id}),
                        Event("badge", {"unread": change.badge}))
    return answer(shapes.InboxChange(id=item_id, archived=True,
                                     unread=await _unread(request, change.badge)))


async def get_stream(request: web.Request) -> web.StreamResponse:
    """Server-Sent Events: `item` for each new item (its id resumes the stream: Last-Event-ID),
    `badge` after each change, `read` and `archived`. An idle stream costs a task and a queue;
    it does not count against server.max_connections, but against server.max_streams, and the
    person's against server.max_streams_per_user (a new one closes their oldest)."""
    ctx = request.app[CTX]
    tenant, user_id = await person(request, every_kind=True)
    _query(request, frozenset({"last_event_id"}))
    last_text = request.headers.get("Last-Event-ID") or request.query.get("last_event_id")
    if last_text is not None and whole_number(last_text) is None:
        raise ApiError("invalid_field", "Last-Event-ID must be an event id from this stream",
                       "Last-Event-ID")
    stream = ctx.hub.subscribe(tenant, user_id)
    if stream is None:
        raise ApiError("overloaded", f"{ctx.hub.open} inbox streams are open "
                       "(server.max_streams)")
    try:
        return await _serve_stream(request, stream, last_text)
    finally:
        ctx.hub.unsubscribe(stream)


async def _serve_stream(request: web.Request, stream: Stream,
                        last_text: str | None) -> web.StreamResponse:
    ctx = request.app[CTX]
    tenant, user_id = stream.tenant, stream.user_id
    transport = request.transport
    if ctx.guard is not None and transport is not None:  # the page's leaving ends it
        ctx.guard.release(transport, lambda: ctx.hub.close(stream, None))
    stream.end = lambda: _abort_unread(transport)
    response = web.StreamResponse(headers={
        "Content-Type": "text/event-stream", "Cache-Control": "no-cache",
        "X-Accel-Buffering": "no"})
    response.force_close()  # a stream's connection ends with it, never back to keep-alive
    _cors_headers(request, response)
    try:
        await response.prepare(request)
        await response.write(RETRY_SOON)
        sent = await _resume(request, response, stream, last_text)
        await response.write(Event("badge", {"unread": await ctx.store.badge(
            tenant, user_id)}).wire)
        await _live(request, response, stream, sent)
        _abort_unread(transport)
    except ConnectionResetError:  # the page went away, or stopped reading: nothing to answer
        pass
    except Exception as e:  # noqa: BLE001 - the head is sent: an error page would corrupt it
        log.warning("inbox stream of %s/%s ended: %s", tenant, user_id, type(e).__name__)
    return response


def _abort_unread(transport: asyncio.Transport | None) -> None:
    """A stream ended with bytes its page has not read: closed now, not waited for."""
    if transport is not None and transport.get_write_buffer_size():
        transport.abort()


async def _resume(request: web.Request, response: web.StreamResponse, stream: Stream,
                  last_text: str | None) -> int:
    """What the page missed after Last-Event-ID, page by page; the last seq sent."""
    sent = int(last_text) if last_text is not None else 0
    return sent if last_text is None else await _rows_after(request, response, stream, sent)


async def _rows_after(request: web.Request, response: web.StreamResponse, stream: Stream,
                      sent: int) -> int:
    """The person's items after seq `sent`, from the rows, page by page; the last seq sent."""
    store = request.app[CTX].store
    while True:
        missed = await store.inbox_since(stream.tenant, stream.user_id, sent, BACKLOG_PAGE)
        if missed:
            await response.write(b"".join(
                Event("item", item_view(item), item.seq).wire for item in missed))
            sent = missed[-1].seq
        if len(missed) < BACKLOG_PAGE:
            return sent


async def _live(request: web.Request, response: web.StreamResponse, stream: Stream,
                sent: int) -> None:
    """Events as the hub has them, what is waiting written at once, until the hub closes the
    stream or the daemon stops."""
    closing = request.app[CTX].closing
    while not closing.is_set():
        events = await _next_events(stream.queue)
        if not events:
            await response.write(KEEPALIVE)
            continue
        if CATCH_UP in events:  # items committed here or by another process: from the rows
            sent = await _rows_after(request, response, stream, sent)
            events = [e for e in events if e is not CATCH_UP and e.name != "badge"]
            events.insert(0, Event("badge", {"unread": await request.app[CTX].store.badge(
                stream.tenant, stream.user_id)}))
        chunk = b"".join(e.wire for e in events  # not what resuming sent from the rows
                         if e is not CLOSE and (e.id is None or e.id > sent))
        sent = max([sent, *(e.id for e in events if e.id is not None)])
        if events[-1] is CLOSE and stream.closed == "displaced":
            chunk += RETRY_LATER  # the person's newer page has its place
        if chunk:
            await response.write(chunk)
        if events[-1] is CLOSE:
            return


async def _next_events(queue: asyncio.Queue[Event]) -> list[Event]:
    """What the queue holds, at least one event (CLOSE last, if there), written together; none
    after KEEPALIVE_SEC of quiet."""
    try:
        async with asyncio.timeout(KEEPALIVE_SEC):
            events = [await queue.get()]
    except TimeoutError:
        return []
    while events[-1] is not CLOSE and not queue.empty():
        events.append(queue.get_nowait())
    return events


# --- CORS for a person's pages ----------------------------------------------------------------


def _person_path(path: str) -> bool:
    return path.startswith("/v1/users/") and any(
        part in path for part in ("/inbox", "/preferences", "/names", "/topics"))


def _cors_headers(request: web.Request, response: web.StreamResponse) -> None:
    """The answer names the origin if the token's tenant lists it; a refusal made before the
    tenant was known (an expired token: 401) names it if any tenant does, as the preflight
    does, so that the page can tell it must fetch a new token."""
    origin = request.headers.get("Origin")
    tenant = request.get(TENANT)
    if origin is None:
        return
    tenants = request.app[CTX].cfg.tenants
    if tenant is None:
        listed = response.status >= 400 and any(
            origin in t.cors_origins for t in tenants.values())
    else:
        allowed = tenants.get(tenant)
        listed = allowed is not None and origin in allowed.cors_origins
    if listed:
        response.headers["Access-Control-Allow-Origin"] = origin
        response.headers["Access-Control-Expose-Headers"] = "ETag"  # for If-Match
        response.headers["Vary"] = "Origin"


def cross_origin(request: web.Request) -> bool:
    """Whether the request is a browser page's call of a person's own paths (with_cors)."""
    return "Origin" in request.headers and _person_path(request.path)


async def with_cors(request: web.Request, handler: Handler) -> web.StreamResponse:
    """A browser page of a tenant's origin may call a person's inbox and preferences with a
    user token: the preflight is answered for an origin some tenant lists (it carries no
    token), and each answer names the origin only if the token's tenant lists it."""
    if request.method == "OPTIONS":
        origin = request.headers["Origin"]
        if not any(origin in t.cors_origins for t in request.app[CTX].cfg.tenants.values()):
            return error_response(ApiError("origin_not_allowed"))
        return web.Response(status=204, headers={
            "Access-Control-Allow-Origin": origin, "Vary": "Origin",
            "Access-Control-Allow-Methods": "GET, PUT, PATCH, POST, DELETE",
            "Access-Control-Allow-Headers": CORS_HEADERS, "Access-Control-Max-Age": "600"})
    response = await answered(request, handler)
    if not response.prepared:
        _cors_headers(request, response)
    return response


ROUTES: list[tuple[str, str, Handler]] = [
    ("POST", "/v1/users/{user_id}/tokens", post_token),
    ("GET", "/v1/users/{user_id}/preferences", get_preferences),
    ("PUT", "/v1/users/{user_id}/preferences", put_preferences),
    ("PATCH", "/v1/users/{user_id}/preferences", patch_preferences),
    ("GET", "/v1/users/{user_id}/names", get_names),
    ("GET", "/v1/users/{user_id}/inbox", get_inbox),
    ("GET", "/v1/users/{user_id}/inbox/badge", get_badge),
    ("GET", "/v1/users/{user_id}/inbox/stream", get_stream),
    ("POST", "/v1/users/{user_id}/inbox/read-all", post_read_all),
    ("POST", "/v1/users/{user_id}/inbox/{item_id}/read", post_read),
    ("POST", "/v1/users/{user_id}/inbox/{item_id}/archive", post_archive),
]
