"""The sendgrid channel's declaration: its API key, sender and API (the adapter:
channels/sendgrid.py)."""

from __future__ import annotations

from dataclasses import dataclass

from notifyd.channels.base import Adapter, ChannelType
from notifyd.channels.types.checks import (
    http_url_problem,
    mailbox_problem,
    sender_problem,
    token_problem,
)
from notifyd.core.contacts import EMAIL
from notifyd.core.fields import Checked, doc, sensitive

DEFAULT_BASE_URL = "https://api.sendgrid.com"


@dataclass(frozen=True)
class SendgridSettings(Checked):
    api_key: str = sensitive("The SendGrid API key (SG....) with the Mail Send permission.", "",
                             check=token_problem)
    from_address: str = doc("The sender: an address of a verified Sender Identity or "
                            "authenticated domain, optionally as Name <address>.", "",
                            check=sender_problem)
    reply_to: str = doc("Where replies go (an address, optionally as Name <address>); empty: "
                        "the sender.", "", check=mailbox_problem)
    base_url: str = doc("The API's base URL: https://api.sendgrid.com, or "
                        "https://api.eu.sendgrid.com for an EU regional subuser (tests and "
                        "proxies point elsewhere).", DEFAULT_BASE_URL, check=http_url_problem)


TYPE = ChannelType("sendgrid", "sends email through SendGrid's v3 Mail Send API",
                   SendgridSettings, EMAIL, Adapter("notifyd.channels.sendgrid"), medium="email")
