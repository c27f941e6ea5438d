"""Turns at the one writer, fair between tenants. Every accept ends in the store's single writer
(store/core/writer.py), which commits whatever is queued as one group: a tenant looping
1,000-item batches kept one queued behind the one committing, and another tenant's single
accept waited behind both, or went in the same commit after a thousand items.

Above the writer, so it holds for every dialect and leaves the writer's own rules alone:

- a single write (one accept) is never held: it takes a ticket and goes to the writer at once
  (a ticket is an entry in a dict; the Event a batch waits on is made only when one waits);
- a batch takes its turn only while its tenant has fewer than `items` batch items in flight
  (admitted and not yet committed; a batch bigger than that goes alone), so one tenant queues at
  most about one batch behind the one committing;
- and, once its tenant's share allows it, only after every write of another tenant admitted
  before it has committed: they pass ahead, and never share a commit behind its items. Writes
  admitted later do not hold it up, so a steady stream of other tenants never starves it.

A batch's items still commit together, all or nothing: what it waits for is its turn, never a
part of it. One process: several processes on one database (PostgreSQL) each keep their own.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections.abc import AsyncIterator

ITEMS = 1000  # quotas.batch_items_in_flight's default


class Turns:
    def __init__(self, items: int = ITEMS) -> None:
        self.items = items
        self._tickets = itertools.count()
        self._open: dict[int, str] = {}  # writes admitted and not yet committed: ticket -> tenant
        # What a waiting batch waits on, made only for the writes a batch waits behind: a single
        # accept with no batch waiting makes no Event.
        self._done: dict[int, asyncio.Event] = {}
        self._in_flight: dict[str, int] = {}  # a tenant's batch items admitted, not committed
        self._freed = asyncio.Condition()

    def resize(self, items: int) -> None:
        """A reload's bound, for batches admitted from here on."""
        self.items = items

    def in_flight(self, tenant: str) -> int:
        return self._in_flight.get(tenant, 0)

    def enter(self, tenant: str) -> int:
        """One accept's write, admitted at once: its ticket, for `leave` once it committed."""
        ticket = next(self._tickets)
        self._open[ticket] = tenant
        return ticket

    def leave(self, ticket: int) -> None:
        """The write of `ticket` committed (or failed): a batch waiting behind it may go."""
        del self._open[ticket]
        done = self._done.pop(ticket, None)
        if done is not None:
            done.set()

    @contextlib.asynccontextmanager
    async def batch(self, tenant: str, items: int) -> AsyncIterator[None]:
        """A batch of `items`: admitted within its tenant's share, after the other tenants'
        writes admitted before it."""
        async with self._freed:
            await self._freed.wait_for(lambda: self._fits(tenant, items))
            self._in_flight[tenant] = self.in_flight(tenant) + items
        try:
            ahead = [self._done.setdefault(ticket, asyncio.Event())
                     for ticket, who in self._open.items() if who != tenant]
            for done in ahead:
                await done.wait()
            ticket = self.enter(tenant)
            try:
                yield
            finally:
                self.leave(ticket)
        finally:
            left = self.in_flight(tenant) - items
            if left > 0:
                self._in_flight[tenant] = left
            else:
                self._in_flight.pop(tenant, None)
            async with self._freed:
                self._freed.notify_all()

    def _fits(self, tenant: str, items: int) -> bool:
        held = self.in_flight(tenant)
        return held == 0 or held + items <= self.items
