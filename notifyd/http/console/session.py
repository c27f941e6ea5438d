"""Who is at the console: the session cookie (signed, HttpOnly, SameSite=Strict, Secure behind
TLS) and what ends it, and the CSRF token every form carries. Signing in, and its limits, are
http/console/signin.py's.

A session ends at its expiry, with the admin key it was opened with (revoked, or no longer one
that may sign in), with the console password it was opened with (changed or removed, a reload
included: the cookie holds a keyed mark of the password, never the password), and when its
operator signs out: the store keeps the signed-out session until its expiry, so it stays ended
across restarts and in every process.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
from dataclasses import dataclass
from typing import Any

from aiohttp import web
from multidict import MultiDictProxy

from notifyd.core.models import ADMIN
from notifyd.domain import signed
from notifyd.http.errors import ApiError
from notifyd.http.kit import CTX, read_form

log = logging.getLogger("notifyd.console")
COOKIE = "notifyd_console"
SIGN_IN = "/console/sign-in"


def key(request: web.Request) -> bytes:
    link_key = request.app[CTX].link_key
    if link_key is None:
        raise ApiError("not_found", "the console needs the daemon's signing key (notifyd serve)")
    return key_of(link_key)


def key_of(link_key: bytes) -> bytes:
    """The daemon's link key, narrowed to the console: a session (or a sign-in cookie) never
    verifies as a link."""
    return hmac.new(link_key, b"notifyd console sessions", hashlib.sha256).digest()


def password_mark(request: web.Request) -> str | None:
    """The mark of the console password as the config holds it now; None without one."""
    password = request.app[CTX].cfg.console.password
    return signed.password_mark(key(request), password) if password else None


def set_cookie(request: web.Request, response: web.StreamResponse, s: signed.Session) -> None:
    put_cookie(request, response, COOKIE, signed.make_session(key(request), s), "/console",
               s.expires_at)


def put_cookie(request: web.Request, response: web.StreamResponse, name: str, value: str,
               path: str, expires_at: int) -> None:
    """A console cookie: for its path only, never to scripts, never sent by another site."""
    response.set_cookie(name, value, path=path,
                        max_age=expires_at - request.app[CTX].clock.now_ms() // 1000,
                        httponly=True, samesite="Strict", secure=_behind_tls(request))


def clear_cookie(request: web.Request, response: web.StreamResponse) -> None:
    response.del_cookie(COOKIE, path="/console")


def _behind_tls(request: web.Request) -> bool:
    return request.secure or request.app[CTX].cfg.server.public_url.startswith("https://")


async def current(request: web.Request) -> signed.Session | None:
    """The request's session, if its cookie is one the daemon signed, unexpired, opened with a
    key that may still sign in or with the console password as it is now, and not signed out."""
    ctx = request.app[CTX]
    cookie = request.cookies.get(COOKIE)
    if not cookie:
        return None
    try:
        s = signed.read_session(cookie, key(request), ctx.clock.now_ms() // 1000)
    except signed.BadToken:
        return None
    if s.key_name is not None:
        if not await ctx.keys.live(s.key_name, s.tenant, ADMIN):
            return None
    elif not _same_password(s, password_mark(request)):
        return None
    if await ctx.store.session_ended(s.nonce):
        return None
    return s


def _same_password(s: signed.Session, now: str | None) -> bool:
    """A password session's password is the console's now (a session from before sessions
    recorded it has none: it ends)."""
    return s.password is not None and now is not None and signed.same(s.password, now)


async def sign_out(request: web.Request, s: signed.Session) -> None:
    """The session ends here and now, whoever holds its cookie."""
    await request.app[CTX].store.end_session(s.nonce, s.expires_at * 1000)
    log.info("console: %s signed out of tenant %s", s.operator, s.tenant)


async def required(request: web.Request) -> signed.Session:
    """The session; without one a page sends the browser to sign in, a form is refused."""
    s = await current(request)
    if s is not None:
        return s
    if request.method == "GET":
        raise web.HTTPSeeOther(f"{SIGN_IN}?next={request.rel_url.path_qs}" if request.path !=
                               "/console" else SIGN_IN)
    raise ApiError("unauthorized", "sign in to the console first (the session ended)")


def csrf(request: web.Request, s: signed.Session) -> str:
    return signed.csrf_token(key(request), s)


def check_csrf(request: web.Request, s: signed.Session, given: str | None) -> None:
    """A form of this session's own page, not one another site made the browser post."""
    if not given or not signed.same(given, csrf(request, s)):
        raise ApiError("csrf_failed")


@dataclass(frozen=True)
class Operator:
    """What a page shows of who is signed in."""

    tenant: str
    name: str
    csrf: str

    @property
    def by(self) -> str:
        """How the rows name what this operator did."""
        return f"console:{self.name}"


async def operator(request: web.Request) -> tuple[signed.Session, Operator]:
    """The signed-in session (required) and what a page shows of it."""
    s = await required(request)
    return s, Operator(s.tenant, s.operator, csrf(request, s))


async def form(request: web.Request) -> tuple[Operator, MultiDictProxy[str | bytes | Any]]:
    """A form post of a signed-in session's own page (its CSRF token), and who posted it."""
    s, op = await operator(request)
    posted = await read_form(request)
    given = posted.get("csrf")
    check_csrf(request, s, given if isinstance(given, str) else None)
    return op, posted


def field(posted: MultiDictProxy[Any], name: str, most: int = 320) -> str:
    """A form's text field, stripped; refused past `most` characters or when not text."""
    value = posted.get(name, "")
    if not isinstance(value, str) or len(value) > most:
        raise ApiError("invalid_field", f"{name} must be text of at most {most} characters",
                       name)
    return value.strip()
