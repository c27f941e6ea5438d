"""Liveness, readiness and the gauges read at scrape time.

/healthz is liveness: the process answers, nothing is touched. /readyz is readiness: the store
takes a write, the scanner is looping, and the oldest due step is younger than
daemon.ready_max_due_lag_sec. /metrics refreshes the gauges the rows answer (due lag per channel
and lane, dead letters) and the breakers' states, then renders every metric.
"""

from __future__ import annotations

import asyncio

from notifyd.config import Config
from notifyd.core.clock import Clock
from notifyd.engine.metrics import BREAKER_STATE, Metrics
from notifyd.engine.scanner import Scanner
from notifyd.engine.sender import SenderPool
from notifyd.store import StorageError, Store

PING_TIMEOUT_SEC = 2.0


class Health:
    def __init__(self, cfg: Config, store: Store, pool: SenderPool, scanner: Scanner,
                 clock: Clock) -> None:
        self.cfg, self.store, self.pool, self.scanner, self.clock = cfg, store, pool, scanner, clock
        self.metrics: Metrics = pool.metrics

    async def due_lag_ms(self) -> dict[tuple[str, str], int]:
        now = self.clock.now_ms()
        oldest = await self.store.oldest_due(self.pool.routes())
        return {(r.channel, str(r.lane)): max(0, now - oldest[r]) if r in oldest else 0
                for r in self.pool.routes()}

    async def ready(self) -> dict[str, str]:
        """Each check's verdict: 'ok', or what is wrong."""
        checks = {}
        try:
            await asyncio.wait_for(self.store.ping(), PING_TIMEOUT_SEC)
            fault = self.store.fault
            checks["store"] = f"cannot write: {fault}" if fault else "ok"
        except StorageError as e:
            checks["store"] = f"cannot write: {e}"
        except Exception as e:  # noqa: BLE001 - any failure to write is the answer
            checks["store"] = f"cannot write: {type(e).__name__}"
        idle_ms = self.clock.now_ms() - self.scanner.alive_at
        limit_ms = 2 * self.scanner.poll_ms + 10_000
        checks["scanner"] = "ok" if idle_ms <= limit_ms else (
            f"no scan for {idle_ms / 1000:.1f} s")
        lag = max((await self.due_lag_ms()).values(), default=0)
        bound = self.cfg.daemon.ready_max_due_lag_sec
        checks["due_lag"] = "ok" if lag <= bound * 1000 else (
            f"oldest due step waits {lag / 1000:.1f} s (bound {bound:g} s)")
        return checks

    async def scrape(self) -> bytes:
        m = self.metrics
        for (ch, lane), lag in (await self.due_lag_ms()).items():
            m.due_lag.labels(ch, lane).set(lag / 1000)
        m.dead_letters.set(await self.store.dead_count())
        m.orphans.set(await self.store.orphan_count())
        m.age_rows(self.clock.now_ms())
        for name, sender in self.pool.channels.items():
            m.breaker.labels(name).set(BREAKER_STATE[sender.breaker.state])
        return m.text()
