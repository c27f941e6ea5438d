"""The ses channel's declaration: its region, AWS keys, sender, configuration set and content
(the adapter: channels/ses.py)."""

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

REGION_RE = re.compile(r"^[a-z]{2}(?:-[a-z]+)+-\d{1,2}$")
CONFIGURATION_SET_RE = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
CONTENT = ("simple", "raw")


def _optional_url_problem(value: str) -> str | None:
    return url_problem(value) if value else None


def endpoint_of(settings: SesSettings) -> str:
    """The API's base URL: the setting, else the region's own endpoint."""
    return settings.base_url or f"https://email.{settings.region}.amazonaws.com"


@dataclass(frozen=True)
class SesSettings(Checked):
    region: str = doc("The AWS region of the SES account that sends (us-east-1, eu-west-1, ...).",
                      "", nonempty=True, pattern=REGION_RE,
                      says="must be an AWS region such as us-east-1")
    access_key_id: str = sensitive("The AWS access key id (AKIA... or, with session_token, "
                                   "ASIA...) of an identity allowed ses:SendEmail.", "",
                                   check=token_problem)
    secret_access_key: str = sensitive("Its secret access key.", "", check=token_problem)
    session_token: str = sensitive("The session token of temporary credentials; empty for a "
                                   "long-term key.", "")
    from_address: str = doc("The sender: an address or domain verified in SES, optionally as "
                            "Name <address>.", "", check=sender_problem)
    reply_to: str = doc("Where replies go (an address, optionally as Name <address>); empty: "
                        "the sender.", "", check=mailbox_problem)
    configuration_set: str = doc(
        "The configuration set each email is sent with: give it an event destination that "
        "publishes to the SNS topic of [webhooks.ses], so SES's events, with the step key in "
        "their tags, reach notifyd. Empty: the identity's own notifications, matched by the "
        "message id.", "", pattern=CONFIGURATION_SET_RE,
        says="must be a configuration set name: letters, digits, _ and -, at most 64")
    content: str = doc('"simple" (SES builds the message; List-Unsubscribe travels as headers '
                       'of the request) or "raw" (notifyd builds the MIME message, as the smtp '
                       'channel does, with its own Message-ID and headers).', "simple",
                       choices=CONTENT)
    base_url: str = doc("The API's base URL. Empty: https://email.REGION.amazonaws.com (tests, "
                        "VPC endpoints and proxies point elsewhere).", "",
                        check=_optional_url_problem)


TYPE = ChannelType("ses", "sends email through Amazon SES's v2 SendEmail API, signed with "
                   "Signature Version 4", SesSettings, EMAIL, Adapter("notifyd.channels.ses"),
                   medium="email")
