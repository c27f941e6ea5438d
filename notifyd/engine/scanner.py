"""The due-work scanner: claims due steps inside the stop-condition transaction, hands them to senders.

It claims from its due index (engine/dueindex.py): every write that makes a step due tells the
index as it commits (store.on_due), so the scanner sleeps until the earliest due time of a lane
that can take work, and claims on the lanes that have some, asking the database nothing else.
It wakes when a commit makes a step due before its alarm, when a sender frees a slot of a lane
that was full, when a token or a breaker's cooldown comes, or another process signals
(PostgreSQL); with nothing due it sleeps until the next read of the rows, so an idle daemon
costs next to nothing. The index is read again from the rows at start, after a reload, every
scanner.sweep_sec, and when time passes the last due time a read brought whole; the claim
re-checks every step in its own transaction, so the index only says when to look. A scan that
failed (a full disk, a database out of reach) is tried again after scanner.poll_interval_sec.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter

from notifyd.config import Config
from notifyd.core.clock import Clock
from notifyd.core.logs import step_line
from notifyd.core.models import ENDED, Claimed, Decided, Due, Verdict, Want
from notifyd.core.text import iso
from notifyd.engine.decisions import Entry
from notifyd.engine.dueindex import EVERY, DueIndex, Key
from notifyd.engine.sender import SenderPool
from notifyd.store import ClaimStore, StorageError

log = logging.getLogger("notifyd.scanner")
DUE_READ = 1000  # due times read per lane when the index is read again from the rows
# How loud each claim decision is: failures warn; normal progress is info; routine is debug.
VERDICT_LOG = {Verdict.CANCEL: (logging.DEBUG, "cancelled"),
               Verdict.POSTPONE: (logging.DEBUG, "postponed"),
               Verdict.EXPIRE: (logging.INFO, "expired"),
               Verdict.SUPPRESS: (logging.INFO, "suppressed"),
               Verdict.DEAD: (logging.WARNING, "dead"),
               Verdict.HOLD: (logging.DEBUG, "held for a digest")}


class Wakeups:
    """What wakes the scanner, made before the parts that ring it, and its due index: the
    store tells the index each commit's due times (`mark`), the sender pool of a finished send
    (`freed`), another process's signal of a step due (`signal`). Handed to each constructor, so
    nothing is patched in after it is built."""

    def __init__(self) -> None:
        self.wake = asyncio.Event()  # claim now
        self.sleep_until: int | None = None  # the scanner's alarm, while it waits for it
        self.index = DueIndex()

    def mark(self, dues: list[Due]) -> None:
        """Due times a commit made (store.on_due): into the index; asleep, wake if one is
        before the alarm (mid-scan, the scan looks at the index when it is done)."""
        first = self.index.add_dues(dues)
        if self.sleep_until is not None and first is not None and first < self.sleep_until:
            self.wake.set()

    def freed(self, was_full: bool) -> None:
        """A send ended. Its lane was full: due work may wait for that slot, so claim. Else
        nothing: what its outcome made due comes with the outcome's commit (`mark`)."""
        if was_full:
            self.wake.set()

    def signal(self, at_ms: int) -> None:
        """A step is due at `at_ms` on some lane: another process's accept (store.watch).
        Every lane is claimed then."""
        self.index.add(EVERY, at_ms)
        if self.sleep_until is not None and at_ms < self.sleep_until:
            self.wake.set()


class Scanner:
    def __init__(self, cfg: Config, store: ClaimStore, pool: SenderPool, clock: Clock,
                 wakeups: Wakeups) -> None:
        self.cfg, self.store, self.pool, self.clock = cfg, store, pool, clock
        self.wakeups = wakeups
        self.lease_ms = int(cfg.scanner.lease_sec * 1000)
        self.poll_ms = int(cfg.scanner.poll_interval_sec * 1000)
        self.rules = pool.rules  # claims go under the rules its sends complete under
        self.alive_at = clock.now_ms()  # when the loop last made progress, for /readyz
        self._full = False  # the last claim filled some lane's request: more may be due
        self.sweep_ms = int(cfg.scanner.sweep_sec * 1000)
        self._sweep_at = 0  # when the index is next read again from the rows
        store.on_due(wakeups.mark)
        self._routes = {(r.channel, r.lane.value) for r in pool.routes()}  # the index's keys

    async def run_once(self, now: int, wait: bool = True) -> int:
        """Claim what the senders can take right now on every lane, whatever the index says,
        and hand it to them; returns the count. With `wait`, return once the claimed steps are
        frozen and their sends started; the scan loop does not wait (the senders hold the
        claims' slots from the start), so the next claim goes to the writer while this one's
        freeze is written."""
        self.alive_at = now  # a scan, whatever it finds: the loop is turning (for /readyz)
        claimed, _ = await self._claim(now, self.pool.wants(now), wait)
        return len(claimed.claims) if claimed else 0

    async def _claim(self, now: int, wants: list[Want], wait: bool = False
                     ) -> tuple[Claimed | None, list[Want]]:
        """One claim transaction for `wants` (each at most claim_batch); what it claimed and
        the wants as asked. The claims go to the senders."""
        if not wants:
            return None, []
        batch = self.cfg.scanner.claim_batch
        wants = [Want(w.channel, w.lane, min(w.n, batch)) for w in wants]
        await self.pool.refresh(now)
        claimed = await self.store.claim_due(wants, self.lease_ms, self.rules,
                                             self.pool.budget(now, {w.channel for w in wants}),
                                             self.pool.freezer(now))
        taken = Counter((c.channel, c.lane) for c in claimed.claims)
        self._full = any(taken[(w.channel, w.lane)] >= w.n for w in wants)
        self._log_decided(claimed.decided)
        self.pool.share(claimed)
        started = self.pool.launch(claimed.claims, now)
        if wait and started:
            await asyncio.gather(*started)
        return claimed, wants

    async def claim_indexed(self, now: int) -> bool:
        """Claim on the lanes the index has work due on by `now` (every lane, for a time of
        EVERY); their times up to `now` go once a claim took less than it asked (it read all
        there was). True when a lane took all it asked and has room for more."""
        self.alive_at = now
        index = self.wakeups.index
        due = index.due(now)
        if not due:
            return False
        routes = self._routes
        gone = [k for k in due if k is not EVERY and k not in routes]
        for k in gone:  # a channel this config does not have: end_unconfigured ends them
            index.settle(k, now, index.seq)
        every = EVERY in due
        asked = routes if every else {k for k in due if k in routes}
        upto = index.seq
        claimed, wants = await self._claim(now, self.pool.wants(now, asked)) if asked else (None, [])
        taken = Counter() if claimed is None else Counter(
            (c.channel, c.lane) for c in claimed.claims)
        read: set[Key] = set()
        for w in wants:
            if taken[(w.channel, w.lane)] < w.n:
                read.add((w.channel, w.lane.value))
        for k in read:
            index.settle(k, now, upto)
        if every and not (claimed and claimed.claims):
            # EVERY stands for work the index knows no lane of: every lane is claimed until
            # a claim finds none; lanes that could not take work keep a time of their own.
            for k in routes - read:
                index.add(k, now)
            index.settle(EVERY, now, upto)
        return self._full and bool(self.pool.wants(self.clock.now_ms(), asked))

    def _log_decided(self, decided: list[Decided]) -> None:
        """What the claim decided other than send, once it has committed: to the log, the
        metrics and whoever follows the decisions."""
        now = self.clock.now_ms()
        for d in decided:
            level, what = VERDICT_LOG[d.decision.verdict]
            step_line(log, level, what, d.notification_id, d.step_no, d.channel,
                      d.decision.reason)
            self.pool.feed.publish(Entry(now, what, d.notification_id, d.step_no, d.channel,
                                         d.tenant, d.user_id, d.kind, d.decision.reason))
            if d.decision.verdict in ENDED:
                self.pool.metrics.step_ended(ENDED[d.decision.verdict], d.decision.why)

    async def run(self, stop: asyncio.Event, reloaded: bool = False) -> None:
        """Start-up work, then scan until `stop`. A failing store read or write (a full disk,
        no file descriptors left) waits a poll interval and tries again; it never ends the
        daemon. After a reload (`reloaded`) the start-up work is only ending the open steps
        on channels the new config no longer has: the sends in flight are this process's."""
        start_up = self.end_unconfigured if reloaded else self._start_up
        while True:
            try:
                await start_up()
                break
            except Exception as e:  # noqa: BLE001 - logged; retried after the poll interval
                self._failed(e)
                if stop.is_set():
                    return
                await self._wait(self.clock.now_ms() + self.poll_ms, stop)
        while not stop.is_set():
            self.wakeups.wake.clear()
            now = self.clock.now_ms()
            try:
                if now >= self._sweep_at:
                    await self.rebuild(now)
                if await self.claim_indexed(now):
                    continue  # a lane took all it asked for, and has room: claim again at once
                await self._sleep(now, stop)
            except Exception as e:  # noqa: BLE001 - a full disk must not become a spin
                self._failed(e)
                await self._wait(now + self.poll_ms, stop)

    async def rebuild(self, now: int) -> None:
        """Read the due times of every lane again from the rows into the index (a time told
        since stays). A lane whose read came back full is read again when time passes its
        last time; in any case after scanner.sweep_sec."""
        routes = self.pool.routes()
        read = await self.store.due_times(routes, DUE_READ)
        self.wakeups.index.add_read(read)
        self.wakeups.index.add(EVERY, now)  # and every lane claimed once
        self._sweep_at = now + self.sweep_ms
        for times in read.times.values():
            if len(times) >= DUE_READ:
                self._sweep_at = min(self._sweep_at, times[-1])

    @staticmethod
    def _failed(e: Exception) -> None:
        if isinstance(e, StorageError):  # the store logs those, once per 10 s
            return
        log.error("due scan failed (%s); retrying after the poll interval", type(e).__name__,
                  exc_info=e)

    async def _start_up(self) -> None:
        lapsed = await self.store.lapse_leases()
        if lapsed:
            log.warning("%d steps were mid-send when notifyd last stopped and their lease has "
                        "ended; retrying them as unknown under their original keys", lapsed)
        held = await self.store.leased()
        if held.count:  # not taken over early: another process may be sending them
            log.warning("%d steps were mid-send when notifyd last stopped, or are being sent "
                        "by another process; each is retried as unknown under its original key "
                        "once its lease ends (the last at %s)", held.count, iso(held.last_end))
        await self.end_unconfigured()
        self._sweep_at = 0  # read the index from the rows first

    async def end_unconfigured(self) -> None:
        """End, dead, the open steps on channels this config does not have."""
        ended = await self.store.end_unconfigured(sorted(self.cfg.channels), self.rules.decide)
        self._log_decided(ended)
        if ended:
            log.warning("%d open steps were on channels no longer configured; they end dead "
                        "(notifyd dead-letters lists them)", len(ended))

    async def _sleep(self, now: int, stop: asyncio.Event) -> None:
        """Sleep until the index's next due time on a lane that can take work now, a token, a
        breaker's cooldown end, the next read of the rows or a wake-up, whichever comes first;
        return at once if due work can be claimed now. No poll: every time the engine makes
        is told to the index by its commit or to the scanner by its event (`Wakeups`), and
        the read of the rows is the safety net for any other."""
        alarm = self._sweep_at
        index = self.wakeups.index
        held = index.keys()  # only lanes with a time can make it wake: their wants alone
        ready: list[Key] = [EVERY]
        if held and held != [EVERY]:
            ready += [(w.channel, w.lane.value) for w in self.pool.wants(
                now, None if EVERY in held else [k for k in held if k is not None])]
        firsts = [at for at in (index.first(k) for k in ready) if at is not None]
        if firsts:
            due = min(firsts)
            if due <= now:
                return
            alarm = min(alarm, due)
        refill = self.pool.ms_until_capacity(now)
        if refill is not None:
            alarm = min(alarm, now + refill)
        await self._wait(alarm, stop)

    async def _wait(self, alarm: int, stop: asyncio.Event) -> None:
        """Wait for the alarm, a wake-up or stop."""
        delay = (alarm - self.clock.now_ms()) / 1000
        if delay <= 0:
            return
        bell = self.wakeups
        waiters = {asyncio.ensure_future(bell.wake.wait()), asyncio.ensure_future(stop.wait())}
        bell.sleep_until = alarm  # only while actually waiting: mark() compares against it
        try:
            await asyncio.wait(waiters, timeout=delay, return_when=asyncio.FIRST_COMPLETED)
        finally:
            bell.sleep_until = None
            for w in waiters:
                w.cancel()
