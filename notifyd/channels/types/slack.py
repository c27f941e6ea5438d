"""The slack channel's declaration: its app's bot token, API origin and message options (the
adapter: channels/slack.py)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from notifyd.channels.base import Adapter, ChannelType
from notifyd.channels.types.checks import url_problem
from notifyd.core.contacts import SLACK
from notifyd.core.fields import Checked, doc, sensitive

DEFAULT_BASE_URL = "https://slack.com"
TOKEN_RE = re.compile(r"xoxb-[A-Za-z0-9-]{10,250}")  # a bot token


@dataclass(frozen=True)
class SlackSettings(Checked):
    bot_token: str = sensitive("The app's bot token, xoxb-... (a secret; scope chat:write).",
                               nonempty=True, pattern=TOKEN_RE,
                               says="must be the app's bot token (xoxb-...)")
    base_url: str = doc("The Slack API origin (default: Slack's; tests and proxies point "
                        "elsewhere).", DEFAULT_BASE_URL, check=url_problem)
    unfurl: bool = doc("Let Slack unfurl links in the message (it fetches them: one-time links "
                       "would be spent).", False)
    metadata: bool = doc("Attach the step key as message metadata (event_type notifyd_step), to "
                         "match a posted message to its step.", True)


TYPE = ChannelType("slack", "sends direct messages from a Slack app's bot (chat.postMessage)",
                   SlackSettings, SLACK, Adapter("notifyd.channels.slack"), medium="chat")
