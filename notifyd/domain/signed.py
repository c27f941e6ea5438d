"""Signed strings notifyd hands out and later trusts: a person's user token (their own inbox and
preferences, for a while), a one-click unsubscribe link (one category, for good) and a link to
their preference centre (which opens it with a user token minted then).

Both are base64url(JSON payload) + "." + base64url(HMAC-SHA256(key, "<prefix>" + payload part)),
checked in constant time. A user token's key is its tenant's (`notifyd tokens secret` prints it,
so a producer's backend can make tokens itself: docs/people.md shows how in Python and
JavaScript); a link's key is the daemon's own. The keys live in the store (signing_keys), made on first use.

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
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypeGuard

from notifyd.core.bounded import load_json

USER_TOKEN = "nut1."  # a user token starts so
LINK = "unsub1."  # an unsubscribe link's token starts so
PREFERENCES = "prefs1."  # a preference centre link's token starts so
MAX_TOKEN_BYTES = 2048
CLOCK_LEEWAY_SEC = 60  # a backend's clock a little ahead of ours still makes a token of max TTL


class BadToken(Exception):
    """Not a token notifyd made, changed, or expired; the message says which, never the key."""


@dataclass(frozen=True)
class UserToken:
    tenant: str
    user_id: str
    expires_at: int  # epoch seconds
    key_name: str | None = None  # the API key that had it minted; None: signed by a backend
    issued_at: int = 0  # epoch seconds: its iat, or the earliest it could have been made


@dataclass(frozen=True)
class Unsubscribe:
    tenant: str
    user_id: str
    category: str


def tenant_key_name(tenant: str) -> str:
    return f"tokens:{tenant}"


LINKS_KEY = "links"


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
                    key_name: str | None = None, issued_at: int | None = None) -> str:
    """A token for one user until `expires_at` (epoch seconds), made at `issued_at`;
    `key_name`: the API key that asked for it, so that it dies with that key."""
    body: dict[str, object] = {"t": tenant, "u": user_id, "exp": expires_at}
    if issued_at is not None:
        body["iat"] = issued_at
    if key_name is not None:
        body["k"] = key_name
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
    if exp <= now_sec:
        raise BadToken("expired")
    if exp - now_sec > max_ttl_sec + CLOCK_LEEWAY_SEC:  # Python ints: 10**400 compares safely
        raise BadToken(f"expires more than {max_ttl_sec} s from now (tokens.max_ttl_sec)")
    return UserToken(tenant, user_id, exp, key_name, iat)


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


def make_preferences_link(key: bytes, tenant: str, user_id: str) -> str:
    return _make(key, PREFERENCES, {"t": tenant, "u": user_id})


def read_preferences_link(token: str, key: bytes) -> PreferencesLink:
    payload, signature, body = _open(token, PREFERENCES)
    _check(key, PREFERENCES, payload, signature)
    tenant, user_id = body.get("t"), body.get("u")
    if not (isinstance(tenant, str) and isinstance(user_id, str) and tenant and user_id):
        raise BadToken("malformed")
    return PreferencesLink(tenant, user_id)


# --- operator console sessions ----------------------------------------------------------------

SESSION = "ops1."  # a console session cookie starts so


@dataclass(frozen=True)
class Session:
    tenant: str
    operator: str  # who signed in: the API key's name, or "password"
    key_name: str | None  # the admin key it was opened with: the session dies with it
    expires_at: int  # epoch seconds
    nonce: str  # this session's own: its forms' CSRF token is derived from it


def make_session(key: bytes, s: Session) -> str:
    body: dict[str, object] = {"t": s.tenant, "o": s.operator, "exp": s.expires_at,
                               "n": s.nonce}
    if s.key_name is not None:
        body["k"] = s.key_name
    return _make(key, SESSION, body)


def read_session(token: str, key: bytes, now_sec: int) -> Session:
    """The session, if the daemon's key signed it and it has not expired."""
    payload, signature, body = _open(token, SESSION)
    _check(key, SESSION, payload, signature)
    tenant, operator, exp = body.get("t"), body.get("o"), body.get("exp")
    nonce, key_name = body.get("n"), body.get("k")
    if not (isinstance(tenant, str) and isinstance(operator, str) and isinstance(nonce, str)
            and isinstance(exp, int) and not isinstance(exp, bool)
            and (key_name is None or isinstance(key_name, str))):
        raise BadToken("malformed")
    if exp <= now_sec:
        raise BadToken("expired")
    return Session(tenant, operator, key_name, exp, nonce)


def csrf_token(key: bytes, s: Session) -> str:
    """The token every form of this session carries: only a page of this session knows it."""
    return _sign(key, "csrf1.", s.nonce)


def same(a: str, b: str) -> bool:
    """Two tokens compared in constant time."""
    return hmac.compare_digest(a.encode(), b.encode())
