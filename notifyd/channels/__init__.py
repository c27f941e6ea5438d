"""Channel types, one module each behind channels.base; this list is the registry.

Adding a channel type: write its module (settings, contact, adapter, TYPE) and add it here.
"""

from __future__ import annotations

from notifyd.channels import fcm, log, resend, slack, smtp, telegram, twilio, webhook, webpush
from notifyd.channels.base import Channel, ChannelType, Limits

TYPES: dict[str, ChannelType] = {t.name: t for t in (
    log.TYPE, webhook.TYPE, smtp.TYPE, resend.TYPE, twilio.TYPE, webpush.TYPE, fcm.TYPE,
    telegram.TYPE, slack.TYPE)}


def build_channel(name: str, type_name: str, settings: object, limits: Limits) -> Channel:
    return TYPES[type_name].build(name, settings, limits)


__all__ = ["TYPES", "Channel", "ChannelType", "Limits", "build_channel"]
