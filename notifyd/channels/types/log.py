"""The log channel's declaration: its one key, and that it stands in for a medium when given one
(the adapter: channels/log.py)."""

from __future__ import annotations

from dataclasses import dataclass

from notifyd.channels.base import Adapter, ChannelType
from notifyd.core.catalog import MEDIUMS
from notifyd.core.fields import Checked, doc


@dataclass(frozen=True)
class LogSettings(Checked):
    medium: str = doc(
        "Empty: log ids and parameter names only. email, sms, push or chat: stand in for a "
        "channel of that medium while none is set up: render the kind's templates of that "
        "medium (so they must be there, and the person's preferences and the send limits of "
        "that medium apply) and log the text (an email's subject and text). The text holds the "
        "params' values: keep kinds that carry one-time codes off it in production.", "",
        choices=("", *MEDIUMS))


def _medium(settings: LogSettings) -> str | None:
    return settings.medium or None


TYPE = ChannelType("log", "writes each message to the log (ids and parameter names; with a "
                   "medium, its text)", LogSettings, None, Adapter("notifyd.channels.log"),
                   medium_of=_medium)
