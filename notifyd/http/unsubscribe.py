"""One-click unsubscribe (RFC 8058): the page a link in a message opens, and the POST that turns
the link's category off for its person. The page names the category as the person reads it
(its title and description in their locale), never by its identifier."""

from __future__ import annotations

import logging

from aiohttp import web

from notifyd.core.names import Name
from notifyd.domain import preferences, signed
from notifyd.http.console.pages import render
from notifyd.http.kit import CTX, Handler, read_body
from notifyd.http.names import names_of

log = logging.getLogger("notifyd.people")
EVERY_MEDIUM = ("email", "SMS", "push", "chat")
SPOKEN = {"sms": "SMS"}  # how a medium is written in a sentence


def _page(state: str, status: int = 200, name: Name | None = None,
          media: str = "") -> web.Response:
    """The page in one of its states (confirm, done, always, broken, unchanged), with the
    headers every page of notifyd's has (no framing: a page that turns a category off must not
    be clickjacked), kept out of search engines and referrers."""
    response = render("unsubscribe.html.j2", status, private=True, state=state, called=name,
                      media=media)
    response.headers["X-Robots-Tag"] = "noindex"
    return response


def _link(request: web.Request) -> signed.Unsubscribe | None:
    key = request.app[CTX].link_key
    if key is None:
        return None
    try:
        return signed.read_unsubscribe(request.match_info["token"], key)
    except signed.BadToken:
        return None


async def _named(request: web.Request, link: signed.Unsubscribe) -> Name:
    """The link's category as its person reads it, in their locale."""
    ctx = request.app[CTX]
    return names_of(ctx).category(link.category,
                                  await ctx.store.locale_of(link.tenant, link.user_id))


def _media(request: web.Request, category: str) -> str:
    """'email or SMS': what the category's kinds send by (every medium when none is known)."""
    media = request.app[CTX].cfg.catalog.category(category).media
    words = [SPOKEN.get(m, m) for m in media] or list(EVERY_MEDIUM)
    return words[0] if len(words) == 1 else f"{', '.join(words[:-1])} or {words[-1]}"


async def get_unsubscribe(request: web.Request) -> web.Response:
    """The confirmation page: a mail client's link preview or a scanner fetching it changes
    nothing; the button (or the mail client's one-click POST) does."""
    link = _link(request)
    if link is None:
        return _page("broken", 404)
    return _page("confirm", name=await _named(request, link),
                 media=_media(request, link.category))


async def post_unsubscribe(request: web.Request) -> web.Response:
    """RFC 8058 one-click: the category is off for this person at once (a new preference
    version, which every claim from now reads)."""
    ctx = request.app[CTX]
    await read_body(request)  # List-Unsubscribe=One-Click, or the page's form: either works
    link = _link(request)
    if link is None:
        return _page("unchanged", 404)
    name = await _named(request, link)
    if not ctx.cfg.catalog.category(link.category).optional:
        return _page("always", 400, name)
    await ctx.store.edit_preferences(link.tenant, link.user_id,
                                     lambda r: preferences.unsubscribed(r, link.category))
    log.info("unsubscribed %s/%s from %s by one-click link", link.tenant, link.user_id,
             link.category)
    return _page("done", name=name)


ROUTES: list[tuple[str, str, Handler]] = [
    ("GET", "/v1/unsubscribe/{token}", get_unsubscribe),
    ("POST", "/v1/unsubscribe/{token}", post_unsubscribe),
]
