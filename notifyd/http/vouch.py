"""Who vouches for a connection: an API key the daemon knows, or a live console session, makes it
a producer's, outside the strangers' share of the places (http/share.py)."""

from __future__ import annotations

from aiohttp import web

from notifyd.core.errors import DomainError
from notifyd.http.auth import KEY_PREFIX
from notifyd.http.console import session
from notifyd.http.kit import CTX
from notifyd.store import StorageError


async def vouched(request: web.Request) -> bool:
    """Whether the request carries an API key the daemon knows or a live console session.
    Whether that key may make this call is the handler's to say; a user token (a person's
    page) or anything else vouches for nothing, and costs no look-up."""
    ctx = request.app[CTX]
    header = request.headers.get("Authorization", "")
    try:
        key = header[:7].lower() == "bearer " and header[7:].strip().startswith(KEY_PREFIX)
        if key and await ctx.keys.find(header) is not None:
            return True
        return session.COOKIE in request.cookies and await session.current(request) is not None
    except (DomainError, StorageError):  # no signing key, or the database is down: unproven
        return False
