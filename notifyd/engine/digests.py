"""The digest scheduler: a loop like the scanner's (`run_once(now)`). Items held back for a digest
wait in digest_items with the end of their window, computed in the recipient's timezone when
they were held; once a window has closed, its items become one notification of the digest kind,
made through the same write path as an accept (its dedup key names the window), with the items
marked carried in the same transaction. So a digest inherits preferences, dedupe and the audit
trail, and rebuilding it can never notify the same items twice. An item's views read the
digests that carried it (`carriers`).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
from typing import Protocol

import orjson

from notifyd.config import Config
from notifyd.core.clock import Clock
from notifyd.core.errors import DomainError
from notifyd.core.logs import Outage, RateLimit
from notifyd.core.models import AcceptInput, new_id
from notifyd.core.steps import StepKey
from notifyd.core.text import iso
from notifyd.domain.ladder import window_end
from notifyd.domain.views import carried_by
from notifyd.engine.ingest import Ingest, IngestStore
from notifyd.store import (
    DigestDue,
    DigestStore,
    LookupStore,
    Notification,
    ProfileStore,
    StorageError,
)

log = logging.getLogger("notifyd.digests")
BATCH = 100  # windows made per query
POLL_SEC = 30.0  # longest sleep: a window held by another process is found within it


class DigesterStore(DigestStore, ProfileStore, Protocol):
    """What the digester uses: the windows, and the person's locale and time zone."""


async def carriers(store: LookupStore, n: Notification) -> dict[str, Notification | None]:
    """The digests that carried n's items, read for its views (views.Digests): whether each
    went out is part of the item's story."""
    return {d: await store.get_notification(d) for d in carried_by(n)}


class Digester:
    def __init__(self, cfg: Config, store: DigesterStore, ingest: Ingest[IngestStore],
                 clock: Clock) -> None:
        self.cfg, self.store, self.ingest, self.clock = cfg, store, ingest, clock
        self._warn = RateLimit(clock, 3_600_000)

    async def run_once(self, now: int) -> int:
        """Make every digest whose window has closed by `now`; how many were made."""
        made = 0
        while True:
            due = await self.store.due_digests(now, BATCH)
            for d in due:
                made += await self._make(d, now)
            if len(due) < BATCH:
                return made

    async def _make(self, due: DigestDue, now: int) -> int:
        kind = self.cfg.kinds.get(due.digest_kind)
        if kind is None or not kind.schedule:
            if self._warn.allow() is not None:
                log.warning("held items wait for digest kind %r, which is not configured as a "
                            "digest kind any more; they stay held", due.digest_kind)
            return 0
        members = await self.store.digest_members(due)
        if not members:
            return 0
        params = {"count": len(members), "window_end": iso(due.window_end), "items": [
            {"id": m.notification_id, "kind": m.kind, "params": m.params,
             "created_at": iso(m.created_at)} for m in members]}
        body = orjson.dumps(params, option=orjson.OPT_SORT_KEYS)
        inp = AcceptInput(due.tenant, due.user_id, due.digest_kind, params,
                          f"digest:{due.digest_kind}:{due.window_end}", None, None,
                          hashlib.sha256(body).hexdigest(), "digest")
        nid = new_id("n_", now)
        recipient = await self.store.get_recipient(due.tenant, due.user_id)
        try:
            inbox = await self.ingest.inbox_item(inp, nid, recipient.locale if recipient else None)
        except DomainError as e:
            if self._warn.allow() is not None:
                log.error("digest %s for %s/%s cannot be made: %s; its items stay held",
                          due.digest_kind, due.tenant, due.user_id, e.message)
            return 0
        rollover = window_end(kind.schedule, due.window_end,
                              recipient.timezone if recipient else None)
        result = await self.store.make_digest(
            due, inp, nid, self.ingest.planner(inp), self.ingest.ttl_sec(inp), inbox,
            [StepKey(m.notification_id, m.step_no) for m in members], rollover)
        if not result.created:
            return 0
        log.info("digest %s for %s/%s: %d items of the window ending %s", nid, due.tenant,
                 due.user_id, len(members), iso(due.window_end))
        self.ingest.announce(inp, result, inbox)
        return 1

    async def run(self, stop: asyncio.Event) -> None:
        """Make digests as their windows close, until `stop`; a storage fault waits a poll."""
        outage = Outage(log, "digests")
        while not stop.is_set():
            now = self.clock.now_ms()
            try:
                await self.run_once(now)
                nxt = await self.store.next_digest_at()
                outage.goes_on()
            except StorageError as e:
                outage.waits(e)
                nxt = None
            sleep = POLL_SEC if nxt is None else min(POLL_SEC, max(0.0, (nxt - now) / 1000))
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), max(sleep, 0.05))
