"""The log channel: writes that a message was sent, for development and dry runs.

By default it logs ids and parameter names, never parameter values: those may be one-time codes.
With a `medium` it stands in for a channel of that medium while none is set up: it renders the
kind's templates of that medium and logs the text, which holds the values; the operator asked.
"""

from __future__ import annotations

import json
import logging

from notifyd.channels.base import (
    Limits,
    Message,
    Outcome,
    Rendered,
    RenderInput,
    Sent,
    standard_payload,
)
from notifyd.channels.types.log import TYPE as TYPE
from notifyd.channels.types.log import LogSettings

log = logging.getLogger("notifyd.channel.log")
# Parts not logged: an email's html says what its text says, at many times the length.
UNLOGGED_PARTS = frozenset({"html"})


class LogChannel:
    def __init__(self, name: str) -> None:
        self.name = name

    def render(self, step: RenderInput) -> Rendered:
        payload = standard_payload(step)
        if step.content:  # rendered from templates: only when the channel has a medium
            payload["content"] = dict(step.content)
        return Rendered(self.name, payload)

    async def send(self, message: Message) -> Outcome:
        params = sorted(message.payload.get("params", {}))
        content = message.payload.get("content", {})
        text = "".join(f" {part}={json.dumps(value, ensure_ascii=False)}"
                       for part, value in content.items() if part not in UNLOGGED_PARTS)
        log.info("%s: %s kind=%s user=%s params=%s%s", self.name, message.idempotency_key,
                 message.payload.get("kind"), message.payload.get("user_id"), params, text)
        return Sent(f"log:{message.idempotency_key}")

    async def close(self) -> None:
        return None


def build(name: str, _settings: LogSettings, _limits: Limits) -> LogChannel:
    return LogChannel(name)
