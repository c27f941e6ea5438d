"""The one contract every channel adapter keeps: send a frozen message, say what happened.

Sent: the provider took it. Rejected: a permanent refusal (bad address, revoked token) that no
retry will fix. Failed: worth retrying, maybe after the provider's Retry-After. Unknown: the request
may have reached the provider (timeout, connection lost after sending); retried under the same key.
Adapters never touch the store and never decide retry policy; sender.py does.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol


@dataclass(frozen=True)
class Message:
    idempotency_key: str  # "{notification_id}:{step_no}", never the attempt number
    destination: str
    payload: dict[str, Any]


@dataclass(frozen=True)
class Sent:
    provider_ref: str | None = None


@dataclass(frozen=True)
class Rejected:
    reason: str


@dataclass(frozen=True)
class Failed:
    reason: str
    retry_after: float | None = None  # seconds, from the provider


@dataclass(frozen=True)
class Unknown:
    reason: str


Outcome = Sent | Rejected | Failed | Unknown


class Channel(Protocol):
    async def send(self, message: Message) -> Outcome: ...

    async def close(self) -> None: ...
