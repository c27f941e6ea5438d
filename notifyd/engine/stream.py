"""Open inbox streams (Server-Sent Events), by recipient. Writers publish after their commit: a new
item (its seq is the event id, so a page that reconnects with Last-Event-ID resumes after it)
and the badge after each change. A stream that falls too far behind is closed and, reconnecting,
catches up from the rows, so a slow page never holds memory.

One process: a stream hears of what its own process wrote. Several processes on one database
(PostgreSQL, `shared`): an item committed by any of them reaches a stream as CATCH_UP (the
store's `watch` for the others' items), and the stream reads the rows after the last item it
sent. A person's seqs grow in their commit order there, so that read never skips one that
committed late; read and archive events from another process are not carried (the badge is,
after each catch-up).
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
CATCH_UP = Event("catch-up", {})  # items were committed: read them from the rows


class Hub:
    def __init__(self, shared: bool = False) -> None:
        self._streams: dict[tuple[str, str], set[asyncio.Queue[Event]]] = {}
        self.shared = shared  # other processes write the database: items come from the rows

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

    def poke(self, tenant: str, user_id: str) -> None:
        """Another process committed an item for this person."""
        self.publish(tenant, user_id, CATCH_UP)

    def publish(self, tenant: str, user_id: str, *events: Event) -> None:
        if self.shared:
            events = tuple(CATCH_UP if e.name == "item" else e for e in events)
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
