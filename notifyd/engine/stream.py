"""Open inbox streams (Server-Sent Events), by recipient. Writers publish after their commit: a new
item (its seq is the event id, so a page that reconnects with Last-Event-ID resumes after it)
and the badge after each change. Publishing never waits: a stream that falls too far behind is
closed at once (it leaves the hub then, not when its handler next runs) and, reconnecting,
catches up from the rows, so a slow page never holds memory or the writers.

Bounds: at most `max_open` streams in all, and `per_person` for one person (tenant, user), a new
one beyond that closing the person's oldest: one person's pages, whatever tokens opened them,
cannot take the places (and file descriptors) of everyone else's. Between tenants the places
are shared, not split: while places are free any tenant takes one, so a daemon with one tenant
uses them all; once every place is taken, a tenant holding less than `share` of `max_open`
(quotas.stream_share) takes the oldest stream of a tenant over its share (that page reconnects
and resumes from the rows), and a tenant at or over its share, beside other tenants, is refused
with OverQuota (429 too_many_streams). So one tenant's people cannot keep another tenant's
people out.

One process: a stream hears of what its own process wrote. Several processes on one database
(PostgreSQL, `shared`): an item committed by any of them reaches a stream as CATCH_UP (the
store's `watch` for the others' items), and the stream reads the rows after the last item it
sent. A person's seqs grow in their commit order there, so that read never skips one that
committed late; read and archive events from another process are not carried (the badge is,
after each catch-up).
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import msgspec

from notifyd.core.errors import OverQuota
from notifyd.engine.metrics import Metrics

QUEUE_MAX = 256  # events a stream may lag behind before it is closed to catch up from the rows
PER_PERSON = 8  # server.max_streams_per_user's default
MAX_OPEN = 10_000  # server.max_streams, when nothing sized it to the open-files limit
SHARE = 0.5  # quotas.stream_share's default
RETRY_SEC = 10  # a tenant at its share: when its page may try again
ENCODE = msgspec.json.Encoder().encode


@dataclass(frozen=True)
class Event:
    name: str  # "item" or "badge"
    data: Mapping[str, Any] | msgspec.Struct  # an item: shapes.people.InboxItem
    id: int | None = None  # an item's seq

    @functools.cached_property
    def wire(self) -> bytes:
        """As a stream sends it: encoded once, whichever streams it goes to."""
        head = f"id: {self.id}\n" if self.id is not None else ""
        return f"{head}event: {self.name}\ndata: ".encode() + ENCODE(self.data) + b"\n\n"


CLOSE = Event("close", {})  # the last event of a stream the hub closed: it ends, the page returns
CATCH_UP = Event("catch-up", {})  # items were committed: read them from the rows


@dataclass(eq=False)
class Stream:
    """One open page: its events, and why the hub closed it (None while it is open)."""

    tenant: str
    user_id: str
    queue: asyncio.Queue[Event] = field(default_factory=lambda: asyncio.Queue(QUEUE_MAX))
    closed: str | None = None  # "displaced" (the person opened one more), "behind", "stopping",
    #                            "erased"
    # Called when the hub closes it: its handler may be waiting for the page to read, and is
    # then ended by its connection closing rather than by CLOSE.
    end: Callable[[], None] = lambda: None


class Hub:
    def __init__(self, max_open: int = MAX_OPEN, per_person: int = PER_PERSON,
                 metrics: Metrics | None = None, shared: bool = False,
                 share: float = SHARE) -> None:
        self.max_open, self.per_person, self.share = max_open, per_person, share
        self.shared = shared  # other processes write the database: items come from the rows
        self.metrics = metrics or Metrics()
        # Each person's streams, oldest first (a dict keeps the order a set would not).
        self._streams: dict[tuple[str, str], dict[Stream, None]] = {}
        self._open = 0
        self._tenants: dict[str, int] = {}  # open streams by tenant

    def resize(self, max_open: int, per_person: int, share: float = SHARE) -> None:
        """New bounds (a reload's): streams over them stay until they end or, for a person,
        until that person opens another."""
        self.max_open, self.per_person, self.share = max_open, per_person, share

    def tenant_most(self) -> int:
        """The most streams one tenant may hold."""
        return max(1, int(self.max_open * self.share))

    def subscribe(self, tenant: str, user_id: str) -> Stream | None:
        """A new stream for the person, closing their oldest past per_person; None when
        max_open are open (and none of them is this person's to give up); OverQuota when the
        tenant holds its share."""
        mine = self._streams.get((tenant, user_id), {})
        while mine and len(mine) >= self.per_person:
            self.close(next(iter(mine)), "displaced")
        if self._open >= self.max_open and not self._make_room(tenant):
            return None
        stream = Stream(tenant, user_id)
        self._streams.setdefault((tenant, user_id), {})[stream] = None
        self._tenants[tenant] = self._tenants.get(tenant, 0) + 1
        self._open += 1
        self.metrics.streams_open.set(self._open)
        return stream

    def _make_room(self, tenant: str) -> bool:
        """Every place is taken: a tenant under its share takes the oldest stream of a tenant
        over it (True); a tenant at its share, beside others, is refused; otherwise False
        (overloaded: a tenant alone holding every place is simply at the daemon's bound)."""
        most = self.tenant_most()
        if most >= self.max_open:  # no share (1.0): the places are first come, first served
            return False
        if self._tenants.get(tenant, 0) >= most:
            if len(self._tenants) == 1:
                return False
            raise OverQuota("too_many_streams", f"every inbox stream's place is taken and this "
                            f"tenant holds {self._tenants[tenant]}, over its share of "
                            f"server.max_streams ({most}, quotas.stream_share)", RETRY_SEC)
        for (holder, _), streams in self._streams.items():  # oldest person first
            if self._tenants.get(holder, 0) > most:
                self.close(next(iter(streams)), "displaced")
                return True
        return False

    def unsubscribe(self, stream: Stream) -> None:
        """The stream's handler ended (the page left, or the hub closed it)."""
        mine = self._streams.get((stream.tenant, stream.user_id))
        if mine is None or stream not in mine:
            return  # already gone: the hub closed it
        del mine[stream]
        if not mine:
            del self._streams[(stream.tenant, stream.user_id)]
        held = self._tenants[stream.tenant] - 1
        if held:
            self._tenants[stream.tenant] = held
        else:
            del self._tenants[stream.tenant]
        self._open -= 1
        self.metrics.streams_open.set(self._open)

    def close(self, stream: Stream, why: str | None) -> None:
        """End the stream now: it leaves the hub, and its queue holds CLOSE alone. `why` is
        counted; None: its page left."""
        self.unsubscribe(stream)
        while not stream.queue.empty():
            stream.queue.get_nowait()
        stream.queue.put_nowait(CLOSE)
        if why is not None:
            stream.closed = why
            self.metrics.streams_closed.labels(why).inc()
            stream.end()

    def poke(self, tenant: str, user_id: str) -> None:
        """Another process committed an item for this person."""
        self.publish(tenant, user_id, CATCH_UP)

    def publish(self, tenant: str, user_id: str, *events: Event) -> None:
        if self.shared:
            events = tuple(CATCH_UP if e.name == "item" else e for e in events)
        for stream in list(self._streams.get((tenant, user_id), ())):
            if stream.queue.qsize() + len(events) > QUEUE_MAX - 1:
                self.close(stream, "behind")
                continue
            for event in events:
                stream.queue.put_nowait(event)

    def close_person(self, tenant: str, user_id: str, why: str) -> None:
        """Every stream of the person ends now (they were erased)."""
        for stream in list(self._streams.get((tenant, user_id), ())):
            self.close(stream, why)

    def close_all(self) -> None:
        """Shutting down: every stream ends now (its page reconnects, to another instance)."""
        for mine in list(self._streams.values()):
            for stream in list(mine):
                self.close(stream, "stopping")

    def holds(self, tenant: str, user_id: str) -> int:
        return len(self._streams.get((tenant, user_id), ()))

    @property
    def open(self) -> int:
        return self._open
