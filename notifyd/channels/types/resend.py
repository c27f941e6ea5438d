"""The resend channel's declaration: its API key, sender and API (the adapter:
channels/resend.py). What an address it sends to or from must look like is
channels/types/checks.py's, shared with the other email API types."""

from __future__ import annotations

from dataclasses import dataclass

from notifyd.channels.base import Adapter, ChannelType
from notifyd.channels.types.checks import http_url_problem, mailbox_problem, valid_address
from notifyd.core.contacts import EMAIL
from notifyd.core.fields import Checked, doc, sensitive

DEFAULT_BASE_URL = "https://api.resend.com"
__all__ = ["TYPE", "ResendSettings", "valid_address"]


def _api_key_problem(api_key: str) -> str | None:
    if not api_key:
        return "a resend channel needs an API key"
    if any(c.isspace() for c in api_key):
        return "must not contain spaces or line breaks"
    return None


def _sender_problem(value: str) -> str | None:
    return mailbox_problem(value) if value else "a resend channel needs a sender address"


@dataclass(frozen=True)
class ResendSettings(Checked):
    api_key: str = sensitive("The Resend API key (re_...); a sending-only key is enough.", "",
                             check=_api_key_problem)
    from_address: str = doc("The sender: an address on a domain verified in Resend, optionally "
                            "as Name <address>.", "", check=_sender_problem)
    reply_to: str = doc("Where replies go (an address, optionally as Name <address>); empty: "
                        "the sender.", "", check=mailbox_problem)
    base_url: str = doc("The API's base URL (default: Resend's real API; tests and proxies "
                        "point elsewhere).", DEFAULT_BASE_URL, check=http_url_problem)


TYPE = ChannelType("resend", "sends email through Resend's HTTP API", ResendSettings, EMAIL,
                   Adapter("notifyd.channels.resend"), medium="email")
