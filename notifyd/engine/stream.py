"""Open inbox streams (Server-Sent Events), by recipient. Writers publish after their commit: a new
item (its seq is the event id, so a page that reconnects with Last-Event-ID resumes after it)
and the badge after each change. A stream that falls too far behind is closed and, reconnecting,
catches up from the rows, so a slow page never holds memory.

One process: a stream hears of what its own process wrote. Several processes on one database
(PostgreSQL) would need the database's notifications (LISTEN) to carry these too.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import orjson

QUEUE_MAX = 256  # events a stream may lag behind before it is closed to catch up from the rows


@dataclass(frozen=True)
class Event:
    name: str  # "item" or "badge"
    data: Mapping[str, Any]
    id: int | None = None  # an item's seq

    def encode(self) -> bytes:
        head = f"id: {self.id}\n" if self.id is not None else ""
        return f"{head}event: {self.name}\ndata: ".encode() + orjson.dumps(self.data) + b"\n\n"


CLOSE = Event("close", {})  # put on a stream's queue that overflowed: it ends, the page returns


class Hub:
    def __init__(self) -> None:
        self._streams: dict[tuple[str, str], set[asyncio.Queue[Event]]] = {}

    def subscribe(self, tenant: str, user_id: str) -> asyncio.Queue[Event]:
        queue: asyncio.Queue[Event] = asyncio.Queue(QUEUE_MAX)
        self._streams.setdefault((tenant, user_id), set()).add(queue)
        return queue

    def unsubscribe(self, tenant: str, user_id: str, queue: asyncio.Queue[Event]) -> None:
        streams = self._streams.get((tenant, user_id))
        if streams is not None:
            streams.discard(queue)
            if not streams:
                del self._streams[(tenant, user_id)]

    def publish(self, tenant: str, user_id: str, *events: Event) -> None:
        for queue in self._streams.get((tenant, user_id), ()):
            for event in events:
                if queue.full():  # already told to close
                    break
                if queue.qsize() >= QUEUE_MAX - 1:
                    queue.put_nowait(CLOSE)
                    break
                queue.put_nowait(event)

    def close_all(self) -> None:
        """Shutting down: every stream ends now (its page reconnects, to another instance)."""
        for streams in self._streams.values():
            for queue in streams:
                while queue.full():
                    queue.get_nowait()
                queue.put_nowait(CLOSE)

    @property
    def open(self) -> int:
        return sum(len(s) for s in self._streams.values())
