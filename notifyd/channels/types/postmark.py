"""The postmark channel's declaration: its server token, sender, message streams and API (the
adapter: channels/postmark.py)."""

from __future__ import annotations

import re
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

DEFAULT_BASE_URL = "https://api.postmarkapp.com"
STREAM_RE = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
NOT_STREAM = "must be a message stream id: letters, digits, _ and -, at most 64"


@dataclass(frozen=True)
class PostmarkSettings(Checked):
    server_token: str = sensitive("The Postmark server's API token (X-Postmark-Server-Token).",
                                  "", check=token_problem)
    from_address: str = doc("The sender: a confirmed sender signature or an address of a "
                            "verified domain, optionally as Name <address>.", "",
                            check=sender_problem)
    reply_to: str = doc("Where replies go (an address, optionally as Name <address>); empty: "
                        "the sender.", "", check=mailbox_problem)
    message_stream: str = doc("The message stream transactional mail goes through (the "
                              "server's default transactional stream is outbound).", "outbound",
                              nonempty=True, pattern=STREAM_RE, says=NOT_STREAM)
    broadcast_stream: str = doc("The broadcast stream for mail that is not transactional (a kind "
                                "a person may turn off: it carries List-Unsubscribe), as "
                                "Postmark wants such mail kept apart. Empty: message_stream.",
                                "", pattern=STREAM_RE, says=NOT_STREAM)
    base_url: str = doc("The API's base URL (default: Postmark's real API; tests and proxies "
                        "point elsewhere).", DEFAULT_BASE_URL, check=http_url_problem)


TYPE = ChannelType("postmark", "sends email through Postmark's email API, by message stream",
                   PostmarkSettings, EMAIL, Adapter("notifyd.channels.postmark"), medium="email")
