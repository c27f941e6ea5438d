"""What the channel types' settings checks share, light enough for the config to load: a
provider's base URL, an http(s) URL as the adapters' client reads it, JSON read leniently, an
email address an email API channel sends to or from, and an API key's shape."""

from __future__ import annotations

import json
import re
from email.utils import parseaddr
from urllib.parse import urlsplit

HTTP_URL = "must be an http(s) URL with a host"
# Pragmatic, not RFC 5322: one @, no spaces, quotes, brackets or separators in the local part, a
# dotted domain of letters, digits and hyphens (any script). What passes is sendable.
_LABEL = r"[^\W_](?:[\w-]{0,61}[^\W_])?"
ADDRESS_RE = re.compile(rf"^[^@\s<>()\[\],;:\"\\]{{1,64}}@{_LABEL}(?:\.{_LABEL})+$")


def valid_address(value: str) -> bool:
    return len(value) <= 254 and bool(ADDRESS_RE.fullmatch(value)) and "\x00" not in value


def mailbox_problem(value: str) -> str | None:
    """Why a configured "addr@host" or "Name <addr@host>" is unusable, or None (empty too)."""
    if not value:
        return None
    if "\r" in value or "\n" in value:
        return "must be on one line"
    _name, addr = parseaddr(value)
    if not valid_address(addr):
        return "must be an email address, optionally as Name <address>"
    return None


def sender_problem(value: str) -> str | None:
    """A required sender: an address, optionally as Name <address>."""
    return mailbox_problem(value) if value else "needs a sender address"


def token_problem(value: str) -> str | None:
    """A required API key or token: one word, never shown in the message."""
    if not value:
        return "is required"
    if any(c.isspace() for c in value):
        return "must not contain spaces or line breaks"
    return None


def url_problem(base_url: str) -> str | None:
    """What is wrong with a provider's base URL setting, or None: an http(s) origin, perhaps
    with a path, and nothing that would leak or be ignored (query, fragment, credentials)."""
    try:
        parts = urlsplit(base_url)
        parts.port  # noqa: B018 - raises on a port out of range
    except ValueError:
        return HTTP_URL
    if (parts.scheme not in ("http", "https") or not parts.hostname
            or any(c.isspace() or ord(c) < 32 for c in base_url)):
        return HTTP_URL
    if parts.query or parts.fragment or parts.username or parts.password:
        return "must carry no query, fragment or credentials"
    return None


def http_url(value: str) -> bool:
    """Whether `value` is an http(s) URL with a host, as yarl (which the adapters post with)
    reads it; yarl is imported here only when a config names such a URL."""
    from yarl import URL

    try:
        url = URL(value)
    except (ValueError, TypeError):
        return False
    return url.scheme in ("http", "https") and bool(url.host)


def http_url_problem(value: str) -> str | None:
    return None if http_url(value) else HTTP_URL


def parse_json(body: bytes) -> object:
    """The body as JSON, or None when it is empty, truncated, not JSON or not UTF-8."""
    try:
        return json.loads(body) if body else None
    except (ValueError, UnicodeDecodeError):
        return None
