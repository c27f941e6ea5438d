"""Channel adapters, one small module per provider, all behind channels.base.Channel."""

from __future__ import annotations

from notifyd.channels.base import Channel
from notifyd.channels.log import LogChannel
from notifyd.channels.webhook import WebhookChannel
from notifyd.config import ChannelConfig


def build_channel(name: str, cfg: ChannelConfig) -> Channel:
    if cfg.type == "webhook":
        return WebhookChannel(name, cfg.url, cfg.timeout_sec,
                              cfg.urgent_concurrency + cfg.bulk_concurrency)
    return LogChannel(name)
