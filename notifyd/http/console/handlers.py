"""The console's pages and forms. Each form goes through the calls the API and the command line
make (store.replay, engine/replay, engine/resolution, store.suppress), names the operator in
the rows (console:NAME), and acts only on the signed-in tenant's own things: another tenant's
are simply not found."""

from __future__ import annotations

import logging
from urllib.parse import urlencode

from aiohttp import web
from msgspec import to_builtins

from notifyd.config import NAME_RE
from notifyd.core.contacts import SUPPRESSION_TYPES
from notifyd.core.errors import DomainError
from notifyd.core.logs import printable
from notifyd.core.models import OPEN_STEP_STATES, StepState
from notifyd.core.text import plural, whole_number
from notifyd.domain import events, preferences, suppressions
from notifyd.domain.recipients import recipient_view
from notifyd.domain.views import status_view, timeline
from notifyd.engine import replay, resolution
from notifyd.engine.digests import carriers
from notifyd.http.console import session, signin
from notifyd.http.console.axis import axis
from notifyd.http.console.overview import find_event
from notifyd.http.console.pages import page, render
from notifyd.http.console.session import Operator
from notifyd.http.console.signins import SignInRefused
from notifyd.http.errors import ApiError
from notifyd.http.kit import CTX, no_notification, read_form
from notifyd.http.names import names_of
from notifyd.shapes.decode import convert
from notifyd.shapes.people import SuppressionRequest
from notifyd.store import DeadMatch, Notification

log = logging.getLogger("notifyd.console")
LIST_MAX = 100
HOUR_SEC = 3600
SINCE = {"": 0, "1h": HOUR_SEC, "24h": 24 * HOUR_SEC, "7d": 7 * 24 * HOUR_SEC}
REPLAYABLE = (StepState.DEAD, StepState.UNKNOWN)


def _back(path: str, said: str) -> web.HTTPSeeOther:
    """Back to the page, which says what was done (its text is escaped like any other)."""
    return web.HTTPSeeOther(f"{path}?{urlencode({'said': said})}")


# --- signing in and out -----------------------------------------------------------------------


@page
async def get_sign_in(request: web.Request) -> web.StreamResponse:
    if await session.current(request) is not None:
        raise web.HTTPSeeOther("/console")
    return _sign_in_page(request, 200, None, _next(request.query.get("next")))


def _sign_in_page(request: web.Request, status: int, error: str | None,
                  goto: str) -> web.Response:
    """The form, with its token bound to this browser's sign-in cookie."""
    token, fresh = signin.form_token(request)
    response = render("sign_in.html.j2", status, operator=None, error=error, next=goto,
                      password=bool(request.app[CTX].cfg.console.password), csrf=token)
    if fresh is not None:
        signin.set_form_cookie(request, response, fresh)
    return response


def _next(path: str | None) -> str:
    """Where to go after signing in: a console page of this daemon, nothing else."""
    ok = path and path.startswith("/console") and not path.startswith("//")
    return path if ok and path is not None else "/console"


@page
async def post_sign_in(request: web.Request) -> web.StreamResponse:
    form = await read_form(request)
    given = form.get("csrf")
    signin.check_form(request, given if isinstance(given, str) else None)
    credential = session.field(form, "credential", 200)
    tenant = session.field(form, "tenant", 64) or "default"
    goto = _next(session.field(form, "next", 2000))
    if not NAME_RE.match(tenant):
        raise ApiError("invalid_field", "tenant: lower-case letters, digits, _ . -", "tenant")
    try:
        s, device = await signin.sign_in(request, credential, tenant)
    except SignInRefused as e:
        page = _sign_in_page(request, 429, e.message, goto)
        page.headers["Retry-After"] = str(e.retry_after)
        return page
    except DomainError as e:
        return _sign_in_page(request, 401, e.message, goto)
    log.info("console: %s signed in for tenant %s", s.operator, s.tenant)
    response = web.HTTPSeeOther(goto)
    session.set_cookie(request, response, s)
    signin.set_device_cookie(request, response, device)
    raise response


@page
async def post_sign_out(request: web.Request) -> web.StreamResponse:
    """The session ends for good, not only in this browser: a copy of its cookie is refused."""
    s = await session.required(request)
    given = (await read_form(request)).get("csrf")
    session.check_csrf(request, s, given if isinstance(given, str) else None)
    await session.sign_out(request, s)
    response = web.HTTPSeeOther(session.SIGN_IN)
    session.clear_cookie(request, response)
    raise response


# --- finding a notification -------------------------------------------------------------------


@page
async def get_search(request: web.Request) -> web.StreamResponse:
    """A notification id, user_id:dedup_key, an event id or a user id: one match opens it."""
    _, op = await session.operator(request)
    ctx = request.app[CTX]
    q = request.query.get("q", "").strip()[:400]
    if not q:
        raise web.HTTPSeeOther("/console")
    if resolution.ID_RE.fullmatch(q):
        n = await ctx.store.get_notification(q)
        if n is not None and n.tenant == op.tenant:
            raise web.HTTPSeeOther(f"/console/notifications/{q}")
    event = await find_event(ctx, op.tenant, q)
    if event is not None:
        raise web.HTTPSeeOther(event)
    user_id, sep, dedup_key = q.rpartition(":")
    if sep and user_id and dedup_key:
        nid = await ctx.store.find_by_dedup(op.tenant, user_id, dedup_key)
        if nid is not None:
            raise web.HTTPSeeOther(f"/console/notifications/{nid}")
    found = await ctx.store.notifications_of(op.tenant, q, LIST_MAX)
    return render("search.html.j2", operator=op, q=q, found=found,
                  person=bool(found) or await ctx.store.get_recipient(op.tenant, q) is not None)


async def _notification(request: web.Request, op: Operator) -> Notification:
    nid = request.match_info["id"]
    n = await request.app[CTX].store.get_notification(nid)
    if n is None or n.tenant != op.tenant:
        raise no_notification(resolution.Ref(notification_id=nid))
    return n


@page
async def get_notification(request: web.Request) -> web.StreamResponse:
    _, op = await session.operator(request)
    ctx = request.app[CTX]
    n = await _notification(request, op)
    now = ctx.clock.now_ms()
    digests = await carriers(ctx.store, n)
    return render("notification.html.j2", operator=op, n=n,
                  status=status_view(n, now, digests), axis=axis(n, now, digests),
                  lines=timeline(n, now, digests)[1:], said=request.query.get("said"),
                  replayable=[s.step_no for s in n.steps if s.state in REPLAYABLE],
                  open=any(s.state in OPEN_STEP_STATES for s in n.steps),
                  warnings=await replay.blocked(ctx.store, n.id, ctx.cfg.catalog))


@page
async def post_replay(request: web.Request) -> web.StreamResponse:
    """One step (step_no) or every dead and unknown step of the notification."""
    op, form = await session.form(request)
    n = await _notification(request, op)
    text = session.field(form, "step_no", 10)
    step = whole_number(text) if text else None  # ASCII digits only: not '²', not '٣'
    if text and step is None:
        raise ApiError("invalid_field", "step_no must be a step's number", "step_no")
    count = await request.app[CTX].store.replay(n.id, step, op.by)
    log.info("console: %s replayed %s of %s", op.by, plural(count, "step"), n.id)
    raise _back(f"/console/notifications/{n.id}", f"replayed {plural(count, 'step')}")


@page
async def post_resolve(request: web.Request) -> web.StreamResponse:
    op, form = await session.form(request)
    n = await _notification(request, op)
    what = session.field(form, "resolution", 200) or resolution.DEFAULT_RESOLUTION
    ctx = request.app[CTX]
    r = await resolution.resolve(ctx.store, resolution.Ref(notification_id=n.id), what, op.by,
                                 op.tenant)
    if r is not None and r.changed:
        ctx.metrics.resolved(r.kind, r.depth, r.cancelled_steps)
    said = (f"resolved {what!r}; cancelled {plural(r.cancelled_steps, 'step')}"
            if r is not None and r.changed else "it was resolved already")
    raise _back(f"/console/notifications/{n.id}", said)


# --- what needs a hand: dead and unknown steps ------------------------------------------------


@page
async def get_dead(request: web.Request) -> web.StreamResponse:
    _, op = await session.operator(request)
    ctx = request.app[CTX]
    dead = await ctx.store.stuck_steps(op.tenant, "dead", LIST_MAX)
    unknown = await ctx.store.stuck_steps(op.tenant, "unknown", LIST_MAX)
    return render("dead.html.j2", operator=op, dead=dead, unknown=unknown,
                  total=await ctx.store.dead_count(DeadMatch(2**62, tenant=op.tenant)),
                  channels=sorted(ctx.cfg.channels), kinds=sorted(ctx.cfg.kinds),
                  since=list(SINCE), said=request.query.get("said"))


@page
async def post_dead_replay(request: web.Request) -> web.StreamResponse:
    """Every dead step of the tenant's that the filter picks, as `notifyd replay --dead`."""
    op, form = await session.form(request)
    ctx = request.app[CTX]
    channel, kind, since = session.field(form, "channel", 64), session.field(form, "kind", 64), \
        session.field(form, "since", 8)
    if since not in SINCE:
        raise ApiError("invalid_field", f"since must be one of {', '.join(SINCE)}", "since")
    now = ctx.clock.now_ms()
    match = DeadMatch(now, now - SINCE[since] * 1000 if SINCE[since] else 0, channel or None,
                      kind or None, op.tenant)
    done = await replay.replay_dead(ctx.store, match, op.by)
    log.info("console: %s replayed %d dead steps (channel=%s kind=%s since=%s)", op.by,
             done.replayed, printable(channel or "any"), printable(kind or "any"),
             since or "any")
    raise _back("/console/dead", replay.replayed_said(done))


# --- the suppression list ---------------------------------------------------------------------


@page
async def get_suppressions(request: web.Request) -> web.StreamResponse:
    _, op = await session.operator(request)
    address = request.query.get("address", "").strip()[:320] or None
    found = await request.app[CTX].store.suppressions(op.tenant, address, LIST_MAX * 5)
    return render("suppressions.html.j2", operator=op, found=found, address=address or "",
                  types=SUPPRESSION_TYPES, said=request.query.get("said"))


@page
async def post_suppression(request: web.Request) -> web.StreamResponse:
    """Added as POST /v1/suppressions adds, its source naming the operator."""
    op, form = await session.form(request)
    channel_type, address, reason = suppressions.parse(convert({
        "channel_type": session.field(form, "channel_type", 32), "address": session.field(form, "address"),
        "reason": session.field(form, "reason", 200) or "added in the console"}, SuppressionRequest))
    ctx = request.app[CTX]
    created = await ctx.store.suppress(op.tenant, channel_type, address, reason, op.by)
    log.info("console: %s suppressed %s %s for tenant %s", op.by, channel_type,
             printable(address), op.tenant)
    raise _back("/console/suppressions", f"added {address}" if created
                else f"{address} was on the list already")


@page
async def post_unsuppress(request: web.Request) -> web.StreamResponse:
    """Removed as DELETE /v1/suppressions/... removes; the log names who and what."""
    op, form = await session.form(request)
    channel_type = session.field(form, "channel_type", 32)
    address = suppressions.check_address(channel_type, session.field(form, "address"))
    removed = await request.app[CTX].store.unsuppress(op.tenant, channel_type, address)
    if removed:
        log.info("console: %s removed %s %s from tenant %s's suppression list", op.by,
                 channel_type, printable(address), op.tenant)
    raise _back("/console/suppressions", f"removed {address}" if removed
                else f"{address} was not on the list")


# --- a person ---------------------------------------------------------------------------------


@page
async def get_event(request: web.Request) -> web.StreamResponse:
    """An event: its frozen audience, routing progress, its notifications by state, and the
    first of them with their ladders."""
    _, op = await session.operator(request)
    ctx = request.app[CTX]
    event_id = request.match_info["event_id"][:300]
    e = await ctx.store.get_event(op.tenant, event_id)
    if e is None:
        raise ApiError("not_found", f"no event {event_id!r} in tenant {op.tenant}", "event_id")
    now = ctx.clock.now_ms()
    counts = await ctx.store.event_counts(op.tenant, event_id)
    first = await ctx.store.event_notifications(op.tenant, event_id, ("", ""), LIST_MAX)
    return render("event.html.j2", operator=op, e=e, doc=events.event_view(e, counts, now),
                  summary=events.summary(e, counts, now), notifications=first, now=now)


@page
async def get_person(request: web.Request) -> web.StreamResponse:
    _, op = await session.operator(request)
    ctx = request.app[CTX]
    user_id = request.match_info["user_id"][:200]
    r = await ctx.store.get_recipient(op.tenant, user_id)
    sent = await ctx.store.notifications_of(op.tenant, user_id, LIST_MAX)
    if r is None and not sent:
        raise ApiError("not_found", f"no user {user_id!r} in tenant {op.tenant}", "user_id")
    profile = recipient_view(r) if r is not None else None
    shown = to_builtins(profile) if profile is not None else {}
    inbox = await ctx.store.inbox_page(op.tenant, user_id, None, 50, archived=True)
    return render("person.html.j2", operator=op, user_id=user_id, profile=profile,
                  prefs=preferences.view(ctx.cfg.catalog, r, names_of(ctx)), inbox=inbox,
                  badge=await ctx.store.badge(op.tenant, user_id), sent=sent,
                  contacts={k: v for k, v in shown.items() if k not in (
                      "user_id", "timezone", "locale", "quiet_hours", "disabled_contacts",
                      "devices")})
