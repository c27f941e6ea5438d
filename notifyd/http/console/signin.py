"""Signing in to the console: with an admin API key (for its tenant) or the console password (for
a tenant there is), from the sign-in page's own form, within the limits on failed sign-ins
(http/console/signins.py).

The form carries a token bound to a cookie the page set (SameSite=Strict, this path only), so a
form another site posts signs nobody in (login CSRF). A successful sign-in also gives the browser
a device cookie: the tenant and a keyed mark of the password it used, signed, which lets it
through the limits that hold against guessers (OWASP's device cookies).
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import secrets

from aiohttp import web

from notifyd.core.models import ADMIN
from notifyd.domain import signed
from notifyd.http.console import session
from notifyd.http.console.signins import SIGN_INS
from notifyd.http.errors import ApiError
from notifyd.http.kit import CTX

log = logging.getLogger("notifyd.console")
FORM_COOKIE = "notifyd_sign_in"  # the nonce the sign-in form's token is bound to
DEVICE_COOKIE = "notifyd_device"  # a browser that signed in before
FORM_TTL_SEC = 12 * 3600  # a sign-in page left open this long is loaded again
DEVICE_TTL_SEC = 90 * 86400  # a browser that signed in is trusted this long after
REFUSED = ("that key or password does not open the console (an API key needs the admin "
           "scope, for every kind)")


def form_token(request: web.Request) -> tuple[str, str | None]:
    """The token for the sign-in form, bound to the browser's sign-in cookie; and, when it has
    none yet, the new nonce to set in one (set_form_cookie) with the page."""
    nonce = request.cookies.get(FORM_COOKIE, "")
    fresh = None if _form_nonce(nonce) else secrets.token_urlsafe(16)
    return signed.sign_in_csrf(session.key(request), fresh or nonce), fresh


def set_form_cookie(request: web.Request, response: web.StreamResponse, nonce: str) -> None:
    session.put_cookie(request, response, FORM_COOKIE, nonce, session.SIGN_IN,
                       request.app[CTX].clock.now_ms() // 1000 + FORM_TTL_SEC)


def _form_nonce(nonce: str) -> bool:
    return 16 <= len(nonce) <= 64 and nonce.isascii() and nonce.replace("-", "").replace(
        "_", "").isalnum()


def check_form(request: web.Request, given: str | None) -> None:
    """The form is the sign-in page's own, posted by the browser it was shown to."""
    nonce = request.cookies.get(FORM_COOKIE, "")
    if not (given and _form_nonce(nonce)
            and signed.same(given, signed.sign_in_csrf(session.key(request), nonce))):
        raise ApiError("csrf_failed", "the sign-in form's token is missing or not this "
                       "browser's; load the sign-in page again and sign in from it")


async def sign_in(request: web.Request, credential: str,
                  tenant: str) -> tuple[signed.Session, signed.Device]:
    """A session for an admin key (its tenant) or the console password (`tenant`), and the
    device cookie that says this browser signed in; an ApiError says why not (a refusal of
    the limits: SignInRefused), and a failure counts against the limits."""
    ctx = request.app[CTX]
    cfg = ctx.cfg.console
    address = request.remote or "?"
    limits = request.app[SIGN_INS]
    mark = session.password_mark(request)
    by_key = credential.startswith("nfy_")
    device = _device(request, None if by_key else tenant, mark)
    exists = by_key or await ctx.store.find_tenant(tenant) is not None
    guessed = tenant if not by_key and mark is not None and exists else None
    limits.check(address, guessed, device, cfg)
    operator, key_name = None, None
    if by_key:
        key = await ctx.keys.find(f"Bearer {credential}")
        if key is not None and key.may(ADMIN):
            operator, key_name, tenant, mark = key.name, key.name, key.tenant, None
        why = ("unknown or revoked key" if key is None else "the key is limited to some "
               "kinds" if key.kinds else "the key has no admin scope")
    elif cfg.password and _same_password(credential, cfg.password) and exists:
        operator = "password"
    else:
        why = ("no console password is set" if not cfg.password else "wrong password" if exists
               else f"no tenant {tenant!r}")
    if operator is None:
        limits.failed(address, guessed, device, cfg, why)
        raise ApiError("unauthorized", REFUSED)
    now = ctx.clock.now_ms() // 1000
    return (signed.Session(tenant, operator, key_name, now + cfg.session_ttl_sec,
                           secrets.token_urlsafe(16), mark),
            signed.Device(tenant, mark, secrets.token_urlsafe(16), now + DEVICE_TTL_SEC))


def _device(request: web.Request, tenant: str | None, mark: str | None) -> str | None:
    """The nonce of the browser's device cookie, if it may pass the limits for this attempt:
    for the password, one that signed in to `tenant` with the password as it is now; for an
    admin key (`tenant` None), one that signed in with a key."""
    cookie = request.cookies.get(DEVICE_COOKIE)
    if not cookie:
        return None
    try:
        d = signed.read_device(cookie, session.key(request),
                               request.app[CTX].clock.now_ms() // 1000)
    except signed.BadToken:
        return None
    if tenant is None:
        return d.nonce if d.password is None else None
    ok = d.tenant == tenant and d.password is not None and mark is not None and signed.same(
        d.password, mark)
    return d.nonce if ok else None


def _same_password(given: str, password: str) -> bool:
    return hmac.compare_digest(hashlib.sha256(given.encode()).digest(),
                               hashlib.sha256(password.encode()).digest())


def set_device_cookie(request: web.Request, response: web.StreamResponse,
                      d: signed.Device) -> None:
    session.put_cookie(request, response, DEVICE_COOKIE,
                       signed.make_device(session.key(request), d), session.SIGN_IN,
                       d.expires_at)
