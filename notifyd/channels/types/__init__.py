"""Channel types as declared, one module each: the registry the config and the catalog read.

A declaration is light: its settings, contact, medium and the module of its adapter, which is
imported only when the daemon builds a channel of the type (channels/base.Adapter). Adding a
channel type: declare it here (channels/types/<type>.py) and write its adapter
(channels/<type>.py).
"""

from __future__ import annotations

from notifyd.channels.base import ChannelType
from notifyd.channels.types import (
    fcm,
    log,
    mailgun,
    postmark,
    resend,
    sendgrid,
    ses,
    slack,
    smtp,
    telegram,
    twilio,
    webhook,
    webpush,
)

TYPES: dict[str, ChannelType] = {t.name: t for t in (
    log.TYPE, webhook.TYPE, smtp.TYPE, resend.TYPE,
    ses.TYPE, sendgrid.TYPE, mailgun.TYPE, postmark.TYPE,
    twilio.TYPE, webpush.TYPE, fcm.TYPE,
    telegram.TYPE, slack.TYPE)}

__all__ = ["TYPES"]
