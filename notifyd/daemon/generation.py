"""The peers one config makes, as a generation a reload replaces: the sender pool, the scanner,
ingest, the digester, retention, the events' fan-out and health. What outlives every generation
(the store, the clock, the metrics, the scanner's wake-ups, the link key, the inbox streams, the
decisions feed) is `Shared`, handed to each.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from dataclasses import dataclass, field

from notifyd.channels.base import Channel
from notifyd.config import Config
from notifyd.core.clock import Clock, MonotonicClock
from notifyd.engine.decisions import Feed
from notifyd.engine.digests import Digester
from notifyd.engine.fair import Turns
from notifyd.engine.fanout import Fanout
from notifyd.engine.ingest import Ingest
from notifyd.engine.metrics import Metrics
from notifyd.engine.quotas import Quotas
from notifyd.engine.retention import Retention
from notifyd.engine.scanner import Scanner, Wakeups
from notifyd.engine.sender import SenderPool, build_adapters
from notifyd.engine.stream import Hub
from notifyd.engine.templates import Templates
from notifyd.http.health import Health, LoopLag
from notifyd.store import Store


@dataclass(frozen=True)
class Shared:
    store: Store
    clock: Clock
    metrics: Metrics
    wakeups: Wakeups
    link_key: bytes  # signs unsubscribe links
    hub: Hub  # open inbox streams, told of new items by every generation's ingest
    feed: Feed = field(default_factory=Feed)  # who follows the decisions (notifyd tail)
    turns: Turns = field(default_factory=Turns)  # the writer's turns, fair between tenants
    quotas: Quotas = field(default_factory=Quotas)  # each tenant's buckets, kept by a reload
    loop: LoopLag = field(default_factory=lambda: LoopLag(MonotonicClock()))  # for /readyz


@dataclass(eq=False)  # one generation is one, whatever it holds
class Generation:
    cfg: Config
    templates: Templates | None
    pool: SenderPool
    scanner: Scanner
    ingest: Ingest[Store]
    digester: Digester
    health: Health
    retention: Retention
    fanout: Fanout
    halt: asyncio.Event = field(default_factory=asyncio.Event)  # stop claiming, making digests
    tasks: list[asyncio.Task[None]] = field(default_factory=list)

    def start(self, peers: asyncio.TaskGroup, reloaded: bool = False) -> None:
        """Scan, make digests, prune and route events as peers of the daemon's other tasks
        until `halt`."""
        self.tasks = [peers.create_task(self.scanner.run(self.halt, reloaded), name="scanner"),
                      peers.create_task(self.digester.run(self.halt), name="digests"),
                      peers.create_task(self.retention.run(self.halt), name="retention"),
                      peers.create_task(self.fanout.run(self.halt), name="fanout")]

    async def stop(self) -> None:
        """Stop claiming, making digests, pruning and routing events, after the scan (or the
        batch, or the chunk) under way; the sends it started go on in the pool."""
        self.halt.set()
        if self.tasks:
            await asyncio.wait(self.tasks)


def build(cfg: Config, templates: Templates | None, shared: Shared,
          before: Generation | None = None) -> Generation:
    """The peers for `cfg`. After a reload (`before`), a channel it left unchanged keeps its
    sender (adapter, bucket, breaker, lanes in flight); the others get new adapters."""
    carry = before.pool.unchanged(cfg) if before is not None else {}
    adapters = build_adapters(cfg, [name for name in cfg.channels if name not in carry])
    pool = SenderPool(cfg, shared.store, shared.clock, adapters, metrics=shared.metrics,
                      templates=templates, link_key=shared.link_key,
                      on_free=shared.wakeups.freed, carry=carry, feed=shared.feed,
                      signing_key=shared.store.signing_key)
    scanner = Scanner(cfg, shared.store, pool, shared.clock, shared.wakeups)
    shared.turns.resize(cfg.quotas.batch_items_in_flight)  # a reload's, from here on
    ingest = Ingest(cfg, shared.store, shared.clock, templates=templates, hub=shared.hub,
                    feed=shared.feed, turns=shared.turns, quotas=shared.quotas)
    digester = Digester(cfg, shared.store, ingest, shared.clock)
    health = Health(cfg, shared.store, pool, scanner, shared.clock, shared.loop)
    retention = Retention(cfg.retention, shared.store, shared.clock, shared.metrics)
    fanout = Fanout(cfg, shared.store, ingest, shared.clock, shared.metrics,
                    shared=shared.store.shared)
    return Generation(cfg, templates, pool, scanner, ingest, digester, health, retention, fanout)


async def close_adapters(done: Iterable[Generation], live: Iterable[Generation] = ()) -> None:
    """Close, once each, the adapters of `done` that no generation in `live` still sends on."""
    in_use = {id(ch.adapter) for g in live for ch in g.pool.channels.values()}
    closing: dict[int, Channel] = {}
    for g in done:
        for ch in g.pool.channels.values():
            if id(ch.adapter) not in in_use:
                closing[id(ch.adapter)] = ch.adapter
    for adapter in closing.values():
        await adapter.close()
