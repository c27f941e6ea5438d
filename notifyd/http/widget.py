"""What a product's own pages embed, and the person's pages notifyd serves itself: the inbox
widget (/inbox.js, one script), its demo page (/demo/inbox, off unless console.demo_inbox), and
the preference centre (/preferences), reached from a signed link in an email or from the widget.

The preference centre is one page for both ways in: from an email's link (/preferences/{link},
signed with the preference links' key, until it expires) notifyd mints a short-lived user token
for the person that reaches their preferences only, never their inbox, and puts it in the page;
from the widget the token comes in the URL's fragment, which never reaches a server. Either way
the page reads and saves through the preferences API with the version it read, so two open tabs
never overwrite each other.
"""

from __future__ import annotations

from aiohttp import web

from notifyd.domain import signed
from notifyd.http.console.pages import render, static_response
from notifyd.http.kit import CTX, Handler
from notifyd.http.people import TOKEN_TTL_DEFAULT


async def get_inbox_js(request: web.Request) -> web.Response:
    response = static_response("inbox.js")
    response.headers["Access-Control-Allow-Origin"] = "*"  # a script any page may load
    return response


async def get_demo_inbox(request: web.Request) -> web.Response:
    if not request.app[CTX].cfg.console.demo_inbox:
        raise web.HTTPNotFound()
    return render("demo_inbox.html.j2")


async def get_preferences_page(request: web.Request) -> web.Response:
    """The centre opened from the widget: the token and user id are in the fragment."""
    return render("preferences.html.j2", user_id="", token="", private=True, expired=False)


async def get_preferences_link(request: web.Request) -> web.Response:
    """The centre opened from an email's link: a user token for its person's preferences only,
    minted now; an expired link (or one of an earlier version, or made with a key a rotation
    ended) shows that it does not work."""
    ctx = request.app[CTX]
    now = ctx.clock.now_ms() // 1000
    try:
        link = signed.read_preferences_link(request.match_info["token"],
                                            await ctx.keys.link_keys(), now,
                                            ctx.cfg.tokens.preferences_link_ttl_sec)
    except signed.BadToken:
        return render("preferences.html.j2", 404, user_id="", token="", private=True,
                      expired=True)
    secret = await ctx.store.signing_key(signed.tenant_key_name(link.tenant))
    expires = now + min(TOKEN_TTL_DEFAULT, ctx.cfg.tokens.max_ttl_sec)
    token = signed.make_user_token(secret, link.tenant, link.user_id, expires, issued_at=now,
                                   scope=signed.PREFERENCES_ONLY)
    return render("preferences.html.j2", user_id=link.user_id, token=token, private=True,
                  expired=False)


ROUTES: list[tuple[str, str, Handler]] = [
    ("GET", "/inbox.js", get_inbox_js),
    ("GET", "/demo/inbox", get_demo_inbox),
    ("GET", "/preferences", get_preferences_page),
    ("GET", "/preferences/{token}", get_preferences_link),
]
