"""Liveness, readiness and the gauges read at scrape time.

/healthz is liveness: the process answers, nothing is touched. /readyz is readiness, and answers
for the daemon itself: the store takes a write, the scanner is looping, and the event loop runs
its timers within daemon.ready_max_loop_lag_sec of when they were due (`LoopLag`). Nothing a
provider does enters it: a provider that is down leaves its steps due and waiting, which shows in
the due lag per channel and lane and the breakers' states on /metrics, not in whether a load
balancer should send this daemon traffic. /metrics refreshes the gauges the rows answer (due lag,
dead letters) and the breakers' states, then renders every metric.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from typing import Protocol

from notifyd.config import Config
from notifyd.core.clock import Clock, MonotonicClock
from notifyd.engine.metrics import Metrics
from notifyd.engine.scanner import Scanner
from notifyd.engine.sender import SenderPool
from notifyd.store import DeadLetterStore, MonitorStore, StorageError

PING_TIMEOUT_SEC = 2.0
LAG_EVERY_MS = 500  # how often the loop's lateness is measured
LAG_WINDOW_MS = 10_000  # /readyz reads the worst lateness of this long: a probe's period


class HealthStore(MonitorStore, DeadLetterStore, Protocol):
    """What health reads: the monitor's figures, and how many steps are dead."""


class LoopLag:
    """How late the event loop runs a timer: a small task asks to wake every `every_ms` and
    notes how much later than asked it woke (a blocking call, a starved CPU, more work than the
    loop can turn). The daemon's lag is the worst of the last `window_ms`, or the lateness of a
    wake still awaited, so a loop stuck right now counts before the task gets to say so."""

    def __init__(self, clock: Clock, every_ms: int = LAG_EVERY_MS,
                 window_ms: int = LAG_WINDOW_MS) -> None:
        self.clock, self.every_ms, self.window_ms = clock, every_ms, window_ms
        self.expected: int | None = None  # when the task asked to wake next; None: not running
        self.samples: deque[tuple[int, int]] = deque()  # (when it woke, how late), oldest first

    def asleep(self, now: int) -> None:
        self.expected = now + self.every_ms

    def woke(self, now: int) -> None:
        if self.expected is not None:
            self.samples.append((now, max(0, now - self.expected)))
        self.expected = None
        self._forget(now)

    def lag_ms(self, now: int) -> int:
        self._forget(now)
        waiting = 0 if self.expected is None else now - self.expected
        return max(0, waiting, *(late for _, late in self.samples))

    def _forget(self, now: int) -> None:
        while self.samples and self.samples[0][0] < now - self.window_ms:
            self.samples.popleft()

    async def run(self, stop: asyncio.Event) -> None:
        """Measure until `stop`."""
        while not stop.is_set():
            self.asleep(self.clock.now_ms())
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.every_ms / 1000):
                    await stop.wait()
            self.woke(self.clock.now_ms())


class Health:
    def __init__(self, cfg: Config, store: HealthStore, pool: SenderPool, scanner: Scanner,
                 clock: Clock, loop: LoopLag | None = None) -> None:
        self.cfg, self.store, self.pool, self.scanner, self.clock = cfg, store, pool, scanner, clock
        self.metrics: Metrics = pool.metrics
        # Measured on a clock that only goes forward: a wall clock stepped by NTP is not lag.
        self.loop = loop or LoopLag(MonotonicClock())

    async def due_lag_ms(self) -> dict[tuple[str, str], int]:
        now = self.clock.now_ms()
        oldest = await self.store.oldest_due(self.pool.routes())
        return {(r.channel, str(r.lane)): max(0, now - oldest[r]) if r in oldest else 0
                for r in self.pool.routes()}

    async def ready(self) -> dict[str, str]:
        """Each check's verdict: 'ok', or what is wrong with the daemon itself."""
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
        lag = self.loop.lag_ms(self.loop.clock.now_ms())
        bound = self.cfg.daemon.ready_max_loop_lag_sec
        checks["loop"] = "ok" if lag <= bound * 1000 else (
            f"timers run {lag / 1000:.1f} s late (bound {bound:g} s)")
        return checks

    async def scrape(self) -> bytes:
        m = self.metrics
        for (ch, lane), lag in (await self.due_lag_ms()).items():
            m.due_lag.labels(ch, lane).set(lag / 1000)
        m.dead_letters.set(await self.store.dead_count())
        m.orphans.set(await self.store.orphan_count())
        m.age_rows(self.clock.now_ms())
        m.routing(await self.store.routing_backlog(), self.clock.now_ms())
        for name, sender in self.pool.channels.items():
            m.breaker_state(name, sender.breaker.state)
        return m.text()
