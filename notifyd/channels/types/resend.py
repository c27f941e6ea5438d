"""The resend channel's declaration: its API key, sender and API (the adapter:
channels/resend.py), and what an address it sends to or from must look like."""

from __future__ import annotations

import re
from dataclasses import dataclass
from email.utils import parseaddr

from notifyd.channels.base import Adapter, ChannelType
from notifyd.channels.types.checks import http_url_problem
from notifyd.core.contacts import EMAIL
from notifyd.core.fields import Checked, doc, sensitive

DEFAULT_BASE_URL = "https://api.resend.com"
# Pragmatic, not RFC 5322: one @, no spaces, quotes, brackets or separators in the local part, a
# dotted domain of letters, digits and hyphens (any script). What passes is sendable.
_LABEL = r"[^\W_](?:[\w-]{0,61}[^\W_])?"
ADDRESS_RE = re.compile(rf"^[^@\s<>()\[\],;:\"\\]{{1,64}}@{_LABEL}(?:\.{_LABEL})+$")


def valid_address(value: str) -> bool:
    return len(value) <= 254 and bool(ADDRESS_RE.fullmatch(value)) and "\x00" not in value


def _mailbox_problem(value: str) -> str | None:
    """Why a configured "addr@host" or "Name <addr@host>" is unusable, or None (empty too)."""
    if not value:
        return None
    if "\r" in value or "\n" in value:
        return "must be on one line"
    _name, addr = parseaddr(value)
    if not valid_address(addr):
        return "must be an email address, optionally as Name <address>"
    return None


def _api_key_problem(api_key: str) -> str | None:
    if not api_key:
        return "a resend channel needs an API key"
    if any(c.isspace() for c in api_key):
        return "must not contain spaces or line breaks"
    return None


def _sender_problem(value: str) -> str | None:
    return _mailbox_problem(value) if value else "a resend channel needs a sender address"


@dataclass(frozen=True)
class ResendSettings(Checked):
    api_key: str = sensitive("The Resend API key (re_...); a sending-only key is enough.", "",
                             check=_api_key_problem)
    from_address: str = doc("The sender: an address on a domain verified in Resend, optionally "
                            "as Name <address>.", "", check=_sender_problem)
    reply_to: str = doc("Where replies go (an address, optionally as Name <address>); empty: "
                        "the sender.", "", check=_mailbox_problem)
    base_url: str = doc("The API's base URL (default: Resend's real API; tests and proxies "
                        "point elsewhere).", DEFAULT_BASE_URL, check=http_url_problem)


TYPE = ChannelType("resend", "sends email through Resend's HTTP API", ResendSettings, EMAIL,
                   Adapter("notifyd.channels.resend"), medium="email")
