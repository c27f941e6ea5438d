"""The teams channel's declaration: the Workflows webhook that posts to a Teams channel or chat
(the adapter: channels/teams.py)."""

from __future__ import annotations

from dataclasses import dataclass

from notifyd.channels.base import Adapter, ChannelType
from notifyd.channels.types.checks import http_url
from notifyd.core.fields import Checked, doc, sensitive

CARD_VERSIONS = ("1.2", "1.3", "1.4", "1.5")


def _url_problem(url: str) -> str | None:
    if url and not http_url(url):
        return "must be the workflow's HTTP POST URL (https://...)"
    return None


@dataclass(frozen=True)
class TeamsSettings(Checked):
    webhook_url: str = sensitive("The HTTP POST URL of a Teams workflow started by \"When a "
                                 "Teams webhook request is received\" (or a legacy incoming "
                                 "webhook's URL); a secret: its sig= posts to the channel.", "",
                                 nonempty=True, check=_url_problem)
    card_version: str = doc("The Adaptive Card schema version the card declares (Teams renders "
                            "up to 1.5 on desktop; mobile lags behind).", "1.4",
                            choices=CARD_VERSIONS)


TYPE = ChannelType("teams", "posts an Adaptive Card to Microsoft Teams through a Workflows "
                   "webhook", TeamsSettings, None, Adapter("notifyd.channels.teams"),
                   medium="chat")
