"""Who is at the console: signing in (an admin API key, or the console password), the session
cookie (signed, HttpOnly, SameSite=Strict, Secure behind TLS; it ends at its expiry or with its
key), the CSRF token every form carries, and the limit on failed sign-ins.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import secrets
from collections import deque
from dataclasses import dataclass

from aiohttp import web

from notifyd.core.clock import Clock
from notifyd.core.logs import printable
from notifyd.core.models import ADMIN
from notifyd.domain import signed
from notifyd.http.errors import ApiError
from notifyd.http.kit import CTX

log = logging.getLogger("notifyd.console")
COOKIE = "notifyd_console"
WINDOW_MS = 60_000  # failed sign-ins are counted over this long, per address
MAX_ADDRESSES = 10_000  # addresses remembered at once: a flood of them forgets the oldest
SIGN_IN = "/console/sign-in"


class SignIns:
    """Failed sign-ins per address within a minute; past console.max_failed_sign_ins the next
    ones are refused until the minute is over. An address's first failure of a minute is
    logged, and so is its lockout: two lines at most, however many tries."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self._failed: dict[str, deque[int]] = {}

    def _recent(self, address: str) -> deque[int]:
        now = self.clock.now_ms()
        times = self._failed.get(address, deque())
        while times and times[0] <= now - WINDOW_MS:
            times.popleft()
        return times

    def refused(self, address: str, most: int) -> bool:
        return len(self._recent(address)) >= most

    def failed(self, address: str, most: int, why: str) -> None:
        times = self._recent(address)
        if not times:
            if len(self._failed) >= MAX_ADDRESSES:
                self._failed.pop(next(iter(self._failed)))
            self._failed[address] = times
            log.warning("console: failed sign-in from %s: %s (more within a minute are "
                        "counted, not logged)", printable(address), why)
        times.append(self.clock.now_ms())
        if len(times) == most:
            log.warning("console: %d failed sign-ins from %s within a minute; its sign-ins "
                        "are refused until the minute is over", most, printable(address))


SIGN_INS: web.AppKey[SignIns] = web.AppKey("console_sign_ins", SignIns)


def _key(request: web.Request) -> bytes:
    """The daemon's link key, narrowed to sessions: a session never verifies as a link."""
    link_key = request.app[CTX].link_key
    if link_key is None:
        raise ApiError("not_found", "the console needs the daemon's signing key (notifyd serve)")
    return hmac.new(link_key, b"notifyd console sessions", hashlib.sha256).digest()


async def sign_in(request: web.Request, credential: str, tenant: str) -> signed.Session:
    """A session for an admin key (its tenant) or the console password (`tenant`); an ApiError
    says why not, and counts against the address."""
    ctx = request.app[CTX]
    cfg = ctx.cfg.console
    address = request.remote or "?"
    signins = request.app[SIGN_INS]
    if signins.refused(address, cfg.max_failed_sign_ins):
        raise ApiError("too_many_sign_ins")
    operator, key_name = None, None
    if credential.startswith("nfy_"):
        key = await ctx.keys.find(f"Bearer {credential}")
        if key is not None and key.may(ADMIN):
            operator, key_name, tenant = key.name, key.name, key.tenant
        why = ("unknown or revoked key" if key is None else "the key is limited to some "
               "kinds" if key.kinds else "the key has no admin scope")
    elif cfg.password and _same_password(credential, cfg.password):
        operator = "password"
    else:
        why = "wrong password" if cfg.password else "no console password is set"
    if operator is None:
        signins.failed(address, cfg.max_failed_sign_ins, why)
        raise ApiError("unauthorized", "that key or password does not open the console (an API "
                       "key needs the admin scope, for every kind)")
    expires = ctx.clock.now_ms() // 1000 + cfg.session_ttl_sec
    return signed.Session(tenant, operator, key_name, expires, secrets.token_urlsafe(16))


def _same_password(given: str, password: str) -> bool:
    return hmac.compare_digest(hashlib.sha256(given.encode()).digest(),
                               hashlib.sha256(password.encode()).digest())


def set_cookie(request: web.Request, response: web.StreamResponse, s: signed.Session) -> None:
    response.set_cookie(COOKIE, signed.make_session(_key(request), s), path="/console",
                        max_age=s.expires_at - request.app[CTX].clock.now_ms() // 1000,
                        httponly=True, samesite="Strict", secure=_behind_tls(request))


def clear_cookie(request: web.Request, response: web.StreamResponse) -> None:
    response.del_cookie(COOKIE, path="/console")


def _behind_tls(request: web.Request) -> bool:
    return request.secure or request.app[CTX].cfg.server.public_url.startswith("https://")


async def current(request: web.Request) -> signed.Session | None:
    """The request's session, if its cookie is one the daemon signed, unexpired, and the key it
    was opened with is live."""
    ctx = request.app[CTX]
    cookie = request.cookies.get(COOKIE)
    if not cookie:
        return None
    try:
        s = signed.read_session(cookie, _key(request), ctx.clock.now_ms() // 1000)
    except signed.BadToken:
        return None
    if s.key_name is not None and not await ctx.keys.live(s.key_name, s.tenant):
        return None
    return s


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
    return signed.csrf_token(_key(request), s)


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
