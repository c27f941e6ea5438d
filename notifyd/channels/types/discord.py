"""The discord channel's declaration: the channel's incoming webhook and how a message looks
(the adapter: channels/discord.py)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import urlsplit

from notifyd.channels.base import Adapter, ChannelType
from notifyd.channels.types.checks import url_problem
from notifyd.core.fields import Checked, doc, sensitive

# https://discord.com/api/webhooks/{webhook.id}/{webhook.token} (optionally /api/v10/...)
PATH_RE = re.compile(r"/api(?:/v[0-9]{1,2})?/webhooks/([0-9]{1,20})/[A-Za-z0-9_-]{1,100}")
STYLES = ("embed", "content")


def webhook_id(url: str) -> str:
    """The webhook's id (not a secret: the token after it is), or ''."""
    m = PATH_RE.fullmatch(urlsplit(url).path)
    return m[1] if m else ""


def _url_problem(url: str) -> str | None:
    if not url:
        return None  # nonempty says so
    if url_problem(url) is not None or not webhook_id(url):
        return ("must be the webhook's URL as Discord shows it: "
                "https://discord.com/api/webhooks/ID/TOKEN")
    return None


@dataclass(frozen=True)
class DiscordSettings(Checked):
    webhook_url: str = sensitive("The channel's incoming webhook (Server Settings > Integrations "
                                 "> Webhooks > Copy Webhook URL); a secret: its token posts as "
                                 "the webhook.", "", nonempty=True, check=_url_problem)
    style: str = doc('"embed" posts the text as an embed\'s description under the chat.title '
                     'template (if the kind has one); "content" posts it as a plain message.',
                     "embed", choices=STYLES)
    username: str = doc("The name the message is posted under (empty: the webhook's own).", "",
                        pattern=re.compile(r"[^@#:`]{1,80}"),
                        says="must be 1-80 characters without @ # : or `")


TYPE = ChannelType("discord", "posts to a Discord channel through its incoming webhook",
                   DiscordSettings, None, Adapter("notifyd.channels.discord"), medium="chat")
