"""The mailgun channel's declaration: its API key, sending domain, region, sender and API (the
adapter: channels/mailgun.py)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from notifyd.channels.base import Adapter, ChannelType
from notifyd.channels.types.checks import (
    mailbox_problem,
    sender_problem,
    token_problem,
    url_problem,
)
from notifyd.core.contacts import EMAIL
from notifyd.core.fields import Checked, doc, sensitive

BASES = {"us": "https://api.mailgun.net", "eu": "https://api.eu.mailgun.net"}
DOMAIN_RE = re.compile(r"^(?=.{4,253}$)(?:(?!-)[A-Za-z0-9-]{1,63}(?<!-)\.)+[A-Za-z0-9-]{2,63}$")


def _optional_url_problem(value: str) -> str | None:
    return url_problem(value) if value else None


def base_of(settings: MailgunSettings) -> str:
    """The API's base URL: the setting, else the region's."""
    return settings.base_url or BASES[settings.region]


@dataclass(frozen=True)
class MailgunSettings(Checked):
    api_key: str = sensitive("The Mailgun API key: the account's private key or the domain's "
                             "sending key.", "", check=token_problem)
    domain: str = doc("The sending domain as set up in Mailgun (mg.example.com).", "",
                      nonempty=True, pattern=DOMAIN_RE, says="must be a domain name")
    region: str = doc('Where the domain was created: "us" (api.mailgun.net) or "eu" '
                      '(api.eu.mailgun.net); a domain lives in one region only.', "us",
                      choices=tuple(BASES))
    from_address: str = doc("The sender: an address of the sending domain, optionally as Name "
                            "<address>.", "", check=sender_problem)
    reply_to: str = doc("Where replies go (an address, optionally as Name <address>); empty: "
                        "the sender.", "", check=mailbox_problem)
    base_url: str = doc("The API's base URL. Empty: the region's (tests and proxies point "
                        "elsewhere).", "", check=_optional_url_problem)


TYPE = ChannelType("mailgun", "sends email through Mailgun's messages API (US or EU)",
                   MailgunSettings, EMAIL, Adapter("notifyd.channels.mailgun"), medium="email")
