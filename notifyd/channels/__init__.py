"""Channel types: each declared in channels/types/ (the registry, TYPES), each adapter in
channels/<type>.py behind channels.base, imported only when a channel of its type is built.

Adding a channel type: declare it (channels/types/<type>.py, listed in channels/types/__init__.py)
and write its adapter (channels/<type>.py, with build(name, settings, limits)).
"""

from __future__ import annotations

from notifyd.channels.base import Channel, ChannelType, Limits
from notifyd.channels.types import TYPES


def build_channel(name: str, type_name: str, settings: object, limits: Limits) -> Channel:
    return TYPES[type_name].build(name, settings, limits)


__all__ = ["TYPES", "Channel", "ChannelType", "Limits", "build_channel"]
