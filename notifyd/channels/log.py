"""The log channel: writes that a message was sent, for development and dry runs.

It logs ids and parameter names, never parameter values: those may be one-time codes.
"""

from __future__ import annotations

import logging

from notifyd.channels.base import Message, Outcome, Sent

log = logging.getLogger("notifyd.channel.log")


class LogChannel:
    def __init__(self, name: str) -> None:
        self.name = name

    async def send(self, message: Message) -> Outcome:
        params = sorted(message.payload.get("params", {}))
        log.info("%s: %s kind=%s user=%s params=%s", self.name, message.idempotency_key,
                 message.payload.get("kind"), message.payload.get("user_id"), params)
        return Sent(f"log:{message.idempotency_key}")

    async def close(self) -> None:
        return None
