"""Signed strings notifyd hands out and later trusts: a person's user token (their own inbox and
preferences, for a while), a one-click unsubscribe link (one category, for good) and a link to
their preference centre (for `tokens.preferences_link_ttl_sec`; it opens the centre with a user
token minted then that reaches their preferences only).

Both are base64url(JSON payload) + "." + base64url(HMAC-SHA256(key, "<prefix>" + payload part)),
checked in constant time. A user token's key is its tenant's (`notifyd tokens secret` prints it,
so a producer's backend can make tokens itself: docs/people.md shows how in Python and
JavaScript); an unsubscribe link's key is the daemon's own (`links`), and a preference link's is
the daemon's too, of its own (`links:preferences`), rotated as a tenant's is (`notifyd links
rotate`). The keys live in the store (signing_keys), made on first use. None of them is ever
written to a log whole: `redact` cuts every signed string a text holds down to its prefix.

A user token lives at most `max_ttl_sec` (tokens.max_ttl_sec): one whose `exp` is further away
is refused, however it was signed. A token notifyd mints names the API key that asked for it
(`k`), and dies with that key; one a backend signs itself names none, and dies when its tenant's
key is rotated (`notifyd tokens rotate`) and the rotation's overlap ends. A token made before
its person was erased is refused: `iat` says when it was made (one without it is taken as made
`max_ttl_sec` before its `exp`, the earliest it could have been).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypeGuard

from notifyd.core.bounded import load_json

USER_TOKEN = "nut1."  # a user token starts so
LINK = "unsub1."  # an unsubscribe link's token starts so
PREFERENCES = "prefs2."  # a preference centre link's token starts so: it expires
# What earlier versions put in messages: signed with the links key, no expiry. Refused.
OLD_PREFERENCES = "prefs1."
MAX_TOKEN_BYTES = 2048
CLOCK_LEEWAY_SEC = 60  # a backend's clock a little ahead of ours still makes a token of max TTL
# A user token's `s`: what it reaches short of the person's whole inbox and preferences. One
# minted from a preference link reaches the preferences only.
PREFERENCES_ONLY = "preferences"
SCOPES = frozenset({PREFERENCES_ONLY})


class BadToken(Exception):
    """Not a token notifyd made, changed, or expired; the message says which, never the key."""


@dataclass(frozen=True)
class UserToken:
    tenant: str
    user_id: str
    expires_at: int  # epoch seconds
    key_name: str | None = None  # the API key that had it minted; None: signed by a backend
    issued_at: int = 0  # epoch seconds: its iat, or the earliest it could have been made
    scope: str | None = None  # None: the person's inbox and preferences; else SCOPES names it


@dataclass(frozen=True)
class Unsubscribe:
    tenant: str
    user_id: str
    category: str


def tenant_key_name(tenant: str) -> str:
    return f"tokens:{tenant}"


LINKS_KEY = "links"  # signs unsubscribe links (and, narrowed, console sessions)
PREFERENCE_LINKS_KEY = "links:preferences"  # signs preference links; rotated by notifyd links


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    try:
        return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (binascii.Error, ValueError):
        raise BadToken("not base64url") from None


def _sign(key: bytes, prefix: str, payload: str) -> str:
    return _b64(hmac.new(key, (prefix + payload).encode(), hashlib.sha256).digest())


def _make(key: bytes, prefix: str, body: dict[str, object]) -> str:
    payload = _b64(json.dumps(body, separators=(",", ":"), sort_keys=True).encode())
    return f"{prefix}{payload}.{_sign(key, prefix, payload)}"


def _open(token: str, prefix: str) -> tuple[str, str, dict[str, object]]:
    """The payload part, the signature part and the decoded payload, before any check of the
    signature: the caller needs the tenant in it to find the key."""
    if len(token) > MAX_TOKEN_BYTES or not token.startswith(prefix):
        raise BadToken("not a token of this kind")
    payload, dot, signature = token[len(prefix):].partition(".")
    if not dot or not payload or not signature:
        raise BadToken("malformed")
    try:
        body = load_json(_unb64(payload))  # the API's limits: nesting is malformed, not a 500
    except ValueError:
        raise BadToken("malformed") from None
    if not isinstance(body, dict):
        raise BadToken("malformed")
    return payload, signature, body


def _check(key: bytes, prefix: str, payload: str, signature: str) -> None:
    _check_any([key], prefix, payload, signature)


def _check_any(keys: Sequence[bytes], prefix: str, payload: str, signature: str) -> None:
    """The signature made with one of `keys` (each compared, in constant time)."""
    matched = [hmac.compare_digest(_sign(k, prefix, payload), signature) for k in keys]
    if not any(matched):
        raise BadToken("signature does not match")


# --- user tokens ------------------------------------------------------------------------------


def make_user_token(key: bytes, tenant: str, user_id: str, expires_at: int,
                    key_name: str | None = None, issued_at: int | None = None,
                    scope: str | None = None) -> str:
    """A token for one user until `expires_at` (epoch seconds), made at `issued_at`;
    `key_name`: the API key that asked for it, so that it dies with that key; `scope`: less
    than the person's inbox and preferences (PREFERENCES_ONLY)."""
    body: dict[str, object] = {"t": tenant, "u": user_id, "exp": expires_at}
    if issued_at is not None:
        body["iat"] = issued_at
    if key_name is not None:
        body["k"] = key_name
    if scope is not None:
        body["s"] = scope
    return _make(key, USER_TOKEN, body)


def token_tenant(token: str) -> str:
    """The tenant a user token claims, to find its key; nothing is trusted yet."""
    tenant = _open(token, USER_TOKEN)[2].get("t")
    if not isinstance(tenant, str) or not tenant:
        raise BadToken("malformed")
    return tenant


def read_user_token(token: str, keys: Sequence[bytes], now_sec: int,
                    max_ttl_sec: int) -> UserToken:
    """The token, if one of `keys` (its tenant's, the previous one within a rotation's overlap)
    signed it and it expires after now and at most `max_ttl_sec` from now. Whether the key it
    names is still live is the caller's to ask."""
    payload, signature, body = _open(token, USER_TOKEN)
    _check_any(keys, USER_TOKEN, payload, signature)
    tenant, user_id, exp, key_name = body.get("t"), body.get("u"), body.get("exp"), body.get("k")
    if not (isinstance(tenant, str) and isinstance(user_id, str) and _whole(exp)):
        raise BadToken("malformed")
    iat = body.get("iat", exp - max_ttl_sec - CLOCK_LEEWAY_SEC)
    if not _whole(iat):
        raise BadToken("malformed")
    if key_name is not None and not (isinstance(key_name, str) and key_name):
        raise BadToken("malformed")
    scope = body.get("s")
    if scope is not None and scope not in SCOPES:  # one it cannot read: it grants nothing
        raise BadToken("malformed")
    _unexpired(exp, now_sec, max_ttl_sec, "tokens.max_ttl_sec")
    return UserToken(tenant, user_id, exp, key_name, iat, scope)


def _unexpired(exp: int, now_sec: int, longest: int, setting: str) -> None:
    """Refuse what expired, or expires further away than `longest` (a setting lowered since
    it was made shortens it)."""
    if exp <= now_sec:
        raise BadToken("expired")
    if exp - now_sec > longest + CLOCK_LEEWAY_SEC:  # Python ints: 10**400 compares safely
        raise BadToken(f"expires more than {longest} s from now ({setting})")


def _whole(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


# --- unsubscribe links ------------------------------------------------------------------------


def make_unsubscribe(key: bytes, tenant: str, user_id: str, category: str) -> str:
    return _make(key, LINK, {"t": tenant, "u": user_id, "c": category})


def read_unsubscribe(token: str, key: bytes) -> Unsubscribe:
    payload, signature, body = _open(token, LINK)
    _check(key, LINK, payload, signature)
    tenant, user_id, category = body.get("t"), body.get("u"), body.get("c")
    if not (isinstance(tenant, str) and isinstance(user_id, str) and isinstance(category, str)):
        raise BadToken("malformed")
    return Unsubscribe(tenant, user_id, category)


# --- preference centre links ------------------------------------------------------------------


@dataclass(frozen=True)
class PreferencesLink:
    tenant: str
    user_id: str
    expires_at: int  # epoch seconds


def make_preferences_link(key: bytes, tenant: str, user_id: str, expires_at: int) -> str:
    """A link to the person's preference centre until `expires_at` (epoch seconds), signed
    with the preference links' key as it is now."""
    return _make(key, PREFERENCES, {"t": tenant, "u": user_id, "exp": expires_at})


def read_preferences_link(token: str, keys: Sequence[bytes], now_sec: int,
                          longest_sec: int) -> PreferencesLink:
    """The link, if one of `keys` (the preference links' key, and the one a rotation replaced
    while the overlap lasts) signed it and it has not expired. A link of an earlier version
    (OLD_PREFERENCES: no expiry, the links key) is refused: it was a credential for good."""
    if token.startswith(OLD_PREFERENCES):
        raise BadToken("made by an earlier version, without an expiry")
    payload, signature, body = _open(token, PREFERENCES)
    _check_any(keys, PREFERENCES, payload, signature)
    tenant, user_id, exp = body.get("t"), body.get("u"), body.get("exp")
    if not (isinstance(tenant, str) and isinstance(user_id, str) and tenant and user_id
            and _whole(exp)):
        raise BadToken("malformed")
    _unexpired(exp, now_sec, longest_sec, "tokens.preferences_link_ttl_sec")
    return PreferencesLink(tenant, user_id, exp)


# --- operator console sessions ----------------------------------------------------------------

SESSION = "ops1."  # a console session cookie starts so


DEVICE = "dev1."  # a browser that signed in to the console: its cookie starts so


@dataclass(frozen=True)
class Session:
    tenant: str
    operator: str  # who signed in: the API key's name, or "password"
    key_name: str | None  # the admin key it was opened with: the session dies with it
    expires_at: int  # epoch seconds
    nonce: str  # this session's own: its forms' CSRF token is derived from it
    password: str | None = None  # a password session's password_mark: it dies with the password


def password_mark(key: bytes, password: str) -> str:
    """What a cookie records of the console password it was made with: keyed with the
    daemon's, so its holder learns nothing of the password from it, and another password (a
    changed or removed one) no longer matches it."""
    return _sign(key, "password1.", password)


def make_session(key: bytes, s: Session) -> str:
    body: dict[str, object] = {"t": s.tenant, "o": s.operator, "exp": s.expires_at,
                               "n": s.nonce}
    if s.key_name is not None:
        body["k"] = s.key_name
    if s.password is not None:
        body["p"] = s.password
    return _make(key, SESSION, body)


def read_session(token: str, key: bytes, now_sec: int) -> Session:
    """The session, if the daemon's key signed it and it has not expired. Whether its key is
    live, its password still the console's and it was not signed out is the caller's to ask."""
    payload, signature, body = _open(token, SESSION)
    _check(key, SESSION, payload, signature)
    tenant, operator, exp = body.get("t"), body.get("o"), body.get("exp")
    nonce, key_name, password = body.get("n"), body.get("k"), body.get("p")
    if not (isinstance(tenant, str) and isinstance(operator, str) and isinstance(nonce, str)
            and _whole(exp) and _text_or_none(key_name) and _text_or_none(password)):
        raise BadToken("malformed")
    if exp <= now_sec:
        raise BadToken("expired")
    return Session(tenant, operator, key_name, exp, nonce, password)


def _text_or_none(value: object) -> TypeGuard[str | None]:
    return value is None or isinstance(value, str)


@dataclass(frozen=True)
class Device:
    """A browser that signed in to a tenant's console (OWASP's device cookie): it passes the
    limits that hold against guessing, which a guesser's browser never does."""

    tenant: str
    password: str | None  # the password_mark it signed in with; None: with an admin key
    nonce: str  # its own: its failed sign-ins are counted by it
    expires_at: int  # epoch seconds


def make_device(key: bytes, d: Device) -> str:
    body: dict[str, object] = {"t": d.tenant, "n": d.nonce, "exp": d.expires_at}
    if d.password is not None:
        body["p"] = d.password
    return _make(key, DEVICE, body)


def read_device(token: str, key: bytes, now_sec: int) -> Device:
    payload, signature, body = _open(token, DEVICE)
    _check(key, DEVICE, payload, signature)
    tenant, nonce, exp, password = body.get("t"), body.get("n"), body.get("exp"), body.get("p")
    if not (isinstance(tenant, str) and isinstance(nonce, str) and _whole(exp)
            and _text_or_none(password)):
        raise BadToken("malformed")
    if exp <= now_sec:
        raise BadToken("expired")
    return Device(tenant, password, nonce, exp)


def sign_in_csrf(key: bytes, nonce: str) -> str:
    """The token the sign-in form carries, for the nonce of the browser's sign-in cookie: a
    form another site posts has neither (login CSRF)."""
    return _sign(key, "signin1.", nonce)


def csrf_token(key: bytes, s: Session) -> str:
    """The token every form of this session carries: only a page of this session knows it."""
    return _sign(key, "csrf1.", s.nonce)


def same(a: str, b: str) -> bool:
    """Two tokens compared in constant time."""
    return hmac.compare_digest(a.encode(), b.encode())


# --- keeping them out of logs -----------------------------------------------------------------

# Every prefix above: a string that starts so and goes on in base64url is a credential.
PREFIXES = (USER_TOKEN, LINK, PREFERENCES, OLD_PREFERENCES, SESSION, DEVICE)
_SIGNED = re.compile("(" + "|".join(re.escape(p) for p in PREFIXES) + r")[A-Za-z0-9_\-.]+")


def redact(text: str) -> str:
    """`text` with every signed string in it (a link in a path, a token in a query, a rendered
    message's links) cut down to its prefix: what it was shows, what it opens does not."""
    return _SIGNED.sub(r"\1[redacted]", text) if "." in text else text
