"""The telegram channel's declaration: its bot, Bot API server and message options (the
adapter: channels/telegram.py)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from notifyd.channels.base import Adapter, ChannelType
from notifyd.channels.types.checks import url_problem
from notifyd.core.contacts import TELEGRAM
from notifyd.core.fields import Checked, doc, sensitive

DEFAULT_BASE_URL = "https://api.telegram.org"
TOKEN_RE = re.compile(r"[0-9]{1,20}:[A-Za-z0-9_-]{20,100}")  # BotFather's "123456:ABC-..."
PARSE_MODES = ("", "HTML")


@dataclass(frozen=True)
class TelegramSettings(Checked):
    bot_token: str = sensitive("The bot's token from @BotFather (a secret: it is part of every "
                               "request's URL).", nonempty=True, pattern=TOKEN_RE,
                               says="must be the token @BotFather gave the bot (digits:letters)")
    base_url: str = doc("The Bot API server (default: Telegram's; tests and local Bot API "
                        "servers point elsewhere).", DEFAULT_BASE_URL, check=url_problem)
    parse_mode: str = doc('"" sends plain text; "HTML" lets templates use Telegram\'s HTML tags '
                          "(the renderer must escape parameters).", "", choices=PARSE_MODES,
                          says='must be "" (plain text) or "HTML"')
    disable_link_preview: bool = doc("Send without a link preview, so Telegram never fetches a "
                                     "link in the message (one-time links stay unused).", True)


TYPE = ChannelType("telegram", "sends chat messages from a Telegram bot (Bot API sendMessage)",
                   TelegramSettings, TELEGRAM, Adapter("notifyd.channels.telegram"),
                   medium="chat")
