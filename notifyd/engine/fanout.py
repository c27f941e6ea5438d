"""The fan-out: accepted events to their audiences, a chunk per write. A daemon peer of each
generation like retention (`run_once`, then `run`), woken by an accepted event; it looks again
every second only where another process may accept one (a shared database) or a chunk failed.

Events still routing are taken in acceptance order, a chunk of each in turn, so a small event is
never held behind a large one. Each chunk is one short write (store.route_chunk: the next
[fanout] chunk recipients after the event's cursor, a notification per recipient and kind, the
cursor moved on); the loop yields between chunks, so accepts and claims share the writer with
it. Each commit tells the scanner's due index its steps' due times; after it, open inbox streams
hear of the new items. A restart resumes every event at its cursor; a chunk replayed creates nothing twice.
"""

from __future__ import annotations

import asyncio
import logging

from notifyd.config import Config
from notifyd.core.clock import Clock
from notifyd.core.events import EventRecord, InboxFn, KindRoute, Routed
from notifyd.core.logs import Outage, RateLimit
from notifyd.core.models import AcceptInput
from notifyd.core.records import InboxEntry
from notifyd.engine.ingest import Ingest, IngestStore
from notifyd.engine.metrics import Metrics
from notifyd.engine.templates import TemplateError
from notifyd.store import EventStore, StorageError

log = logging.getLogger("notifyd.fanout")
POLL_SEC = 1.0  # an event another process accepted, or a chunk that failed: tried within it
SIDE_BY_SIDE = 100  # events routed in turn, a chunk each


class Fanout:
    def __init__(self, cfg: Config, store: EventStore, ingest: Ingest[IngestStore], clock: Clock,
                 metrics: Metrics | None = None, shared: bool = True) -> None:
        self.cfg, self.store, self.ingest, self.clock = cfg, store, ingest, clock
        self.metrics = metrics or Metrics()
        self.stop: asyncio.Event | None = None  # run()'s: a pass ends after the chunk under way
        # Other processes may accept events into this store: found by a poll, not an event.
        self.shared = shared
        self.left = False  # the last pass ended with events still routing (a chunk failed)
        self._warn = RateLimit(clock, 60_000)
        self._unrendered = 0  # inbox items that no template could render, since the last log

    def routes(self, e: EventRecord) -> dict[str, KindRoute]:
        """How each of the event's kinds is made now; a kind the config no longer has is left
        out (its notifications are not made) and said so."""
        out = {}
        for kind in e.kinds:
            rules = self.cfg.kinds.get(kind)
            if rules is None:
                if self._warn.allow() is not None:
                    log.warning("event %s/%s: kind %r is not configured any more; its "
                                "recipients get the event's other kinds only", e.tenant,
                                e.event_id, kind)
                continue
            one = AcceptInput(e.tenant, "", kind, e.params, None, None, None, e.request_hash,
                              e.key_name)
            out[kind] = KindRoute(self.ingest.planner(one), self.ingest.ttl_sec(one),
                                  self._inbox(kind, e) if rules.inbox else None)
        return out

    def _inbox(self, kind: str, e: EventRecord) -> InboxFn:
        """The inbox item in the recipient's locale, else the default locale's (which the
        event's acceptance rendered); none if neither renders now (templates changed since)."""
        templates, default = self.ingest.templates, self.cfg.templates.default_locale

        def render(user_id: str, notification_id: str, locale: str | None) -> InboxEntry | None:
            for choice in (locale, default):
                if templates is None:
                    break
                try:
                    done = templates.render(kind, "inbox", choice, e.params, extra={
                        "notification_id": notification_id, "user_id": user_id})
                except TemplateError:
                    continue
                return InboxEntry(done.parts["title"], done.parts.get("body"))
            self._unrendered += 1
            return None

        return render

    async def run_once(self) -> int:
        """Route every event still routing to its end (or until `stop`); recipients routed."""
        total = 0
        self.left = False
        while not self._stopping():
            routing = await self.store.routing_events(SIDE_BY_SIDE)
            self.left = bool(routing)
            moved = False
            for e in routing:
                if self._stopping():
                    break
                routed = await self._chunk(e)
                if routed is not None:
                    total += routed.recipients
                    moved = True
                await asyncio.sleep(0)  # the loop's other work, between two writes
            if not moved:  # nothing left, or every event failed: the next pass tries again
                return total
        return total

    async def _chunk(self, e: EventRecord) -> Routed | None:
        try:
            routed = await self.store.route_chunk(e.tenant, e.event_id, self.routes(e),
                                                  self.cfg.fanout.chunk)
        except StorageError:
            raise
        except Exception as err:  # noqa: BLE001 - one event must not stop every other's
            if self._warn.allow() is not None:
                log.error("event %s/%s: a chunk failed (%s); it is tried again later",
                          e.tenant, e.event_id, type(err).__name__)
            return None
        self.metrics.event_recipients.inc(routed.recipients)
        for m in routed.made:
            self.ingest.announce(m.inp, m.result, m.inbox)
        if self._unrendered and self._warn.allow() is not None:
            log.warning("event %s/%s: %d inbox items had no template that renders now; those "
                        "notifications have no inbox item", e.tenant, e.event_id,
                        self._unrendered)
            self._unrendered = 0
        if routed.done:
            log.info("event %s/%s (%s) routed to %d recipients in %.1f s", e.tenant, e.event_id,
                     e.type, e.routed + routed.recipients,
                     (self.clock.now_ms() - e.accepted_at) / 1000)
        return routed

    def _stopping(self) -> bool:
        return self.stop is not None and self.stop.is_set()

    async def run(self, stop: asyncio.Event) -> None:
        """Route as events come, until `stop`. Idle, it waits for this process's next event
        alone; a shared store, a storage fault or a chunk that failed waits a poll at most."""
        self.stop = stop
        routing = self.ingest.routing
        outage = Outage(log, "fan-out")
        while not stop.is_set():
            routing.clear()  # an event accepted from here on sets it again: not missed
            poll = self.shared
            try:
                await self.run_once()
                outage.goes_on()
                poll = poll or self.left
            except StorageError as e:
                outage.waits(e)
                poll = True
            waiters = [asyncio.ensure_future(e.wait()) for e in (stop, routing)]
            try:
                await asyncio.wait(waiters, timeout=POLL_SEC if poll else None,
                                   return_when=asyncio.FIRST_COMPLETED)
            finally:
                for w in waiters:
                    w.cancel()
