"""The console's template preview: pick a kind, a locale and a channel, type the params, and read
each part as that channel would send it. It runs engine/preview.py, the code `notifyd templates
render` runs, over the templates the daemon renders with (a reload's, once it is done), and its
problems read as the command's do. The form is a POST with the session's CSRF token, so params,
which may hold a person's data, stay out of URLs and access logs; it reads no tenant's rows and
changes nothing."""

from __future__ import annotations

from dataclasses import dataclass

from aiohttp import web

from notifyd.engine.preview import Preview, PreviewError, preview
from notifyd.http.console import session
from notifyd.http.console.pages import page, render
from notifyd.http.console.session import Operator
from notifyd.http.kit import CTX, Context
from notifyd.http.names import names_of

PARAMS_MAX = 65_536  # characters of params JSON a preview takes
INBOX = "inbox"  # no channel: the inbox item a kind with inbox = true writes
HTML_PARTS = frozenset({"html"})  # shown as a mail client shows them too, in a sandboxed frame


@dataclass(frozen=True)
class Asked:
    kind: str
    locale: str
    channel: str
    params: str


@dataclass(frozen=True)
class Choice:
    value: str
    label: str


@page
async def get_preview(request: web.Request) -> web.StreamResponse:
    _, op = await session.operator(request)
    ctx = request.app[CTX]
    kinds = sorted(ctx.cfg.kinds)
    kind = request.query.get("kind", "")
    kind = kind if kind in ctx.cfg.kinds else kinds[0] if kinds else ""
    return _page(ctx, op, Asked(kind, "", _first_channel(ctx, kind), "{}"))


@page
async def post_preview(request: web.Request) -> web.StreamResponse:
    op, form = await session.form(request)
    ctx = request.app[CTX]
    asked = Asked(session.field(form, "kind", 64), session.field(form, "locale", 35),
                  session.field(form, "channel", 64),
                  session.field(form, "params", PARAMS_MAX) or "{}")
    templates = ctx.ingest.templates
    try:
        if templates is None:
            raise PreviewError("no templates are loaded: no kind of the config sends through "
                               "them, and there is no templates folder")
        shown = preview(templates, ctx.cfg.catalog, asked.kind, asked.channel,
                        asked.locale or None, asked.params)
    except PreviewError as e:
        return _page(ctx, op, asked, error=e)
    return _page(ctx, op, asked, shown=shown)


def _page(ctx: Context, op: Operator, asked: Asked, shown: Preview | None = None,
          error: PreviewError | None = None) -> web.Response:
    names = names_of(ctx)
    kinds = [Choice(k, f"{k} · {names.kind(k, None).title}") for k in sorted(ctx.cfg.kinds)]
    channels = [Choice(name, f"{name} · {info.type}, " + (
        f"renders {info.medium}" if info.medium and info.templates else "renders no templates"))
        for name, info in sorted(ctx.cfg.catalog.channels.items())]
    channels.append(Choice(INBOX, f"{INBOX} · the item in the person's inbox"))
    templates = ctx.ingest.templates
    return render("preview.html.j2", 422 if error else 200, operator=op, asked=asked,
                  kinds=kinds, channels=channels, shown=shown, error=error,
                  locales=templates.locales(asked.kind) if templates else [],
                  params_max=PARAMS_MAX, html_parts=HTML_PARTS)


def _first_channel(ctx: Context, kind: str) -> str:
    """The kind's first rung that renders templates: what a person gets first."""
    ladder = ctx.cfg.kinds[kind].ladder if kind in ctx.cfg.kinds else ()
    for step in ladder:
        if ctx.cfg.catalog.template_medium(step.channel) is not None:
            return step.channel
    return INBOX if kind in ctx.cfg.kinds and ctx.cfg.kinds[kind].inbox else (
        ladder[0].channel if ladder else "")
