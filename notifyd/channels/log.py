"""The log channel: writes that a message was sent, for development and dry runs.

It logs ids and parameter names, never parameter values: those may be one-time codes.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from notifyd.channels.base import (
    ChannelType,
    Limits,
    Message,
    Outcome,
    Rendered,
    RenderInput,
    Sent,
    standard_payload,
)

log = logging.getLogger("notifyd.channel.log")


@dataclass(frozen=True)
class LogSettings:
    """The log channel has no settings of its own."""


class LogChannel:
    def __init__(self, name: str) -> None:
        self.name = name

    def render(self, step: RenderInput) -> Rendered:
        return Rendered(self.name, standard_payload(step))

    async def send(self, message: Message) -> Outcome:
        params = sorted(message.payload.get("params", {}))
        log.info("%s: %s kind=%s user=%s params=%s", self.name, message.idempotency_key,
                 message.payload.get("kind"), message.payload.get("user_id"), params)
        return Sent(f"log:{message.idempotency_key}")

    async def close(self) -> None:
        return None


def _build(name: str, _settings: LogSettings, _limits: Limits) -> LogChannel:
    return LogChannel(name)


TYPE = ChannelType("log", "writes each message to the log (ids and parameter names only)",
                   LogSettings, None, _build)
