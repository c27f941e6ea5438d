"""The due-work scanner: claims due steps inside the stop-condition transaction, hands them to senders.

It wakes when an accept writes a step that is already due, when a sender frees a slot of a lane
that was full, when the next send_after arrives, and at least every poll interval so a lost
wake-up costs one interval. Any other finished send only makes it look again at when the next step
is due (one read): the send may have pulled a step forward, and otherwise nothing changed, so an
empty claim transaction per send (an idle daemon's cost) is not paid.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter

from notifyd.config import Config
from notifyd.core.clock import Clock
from notifyd.core.logs import step_line
from notifyd.core.models import ENDED, Decided, Route, Verdict, Want
from notifyd.core.text import iso
from notifyd.engine.decisions import Entry
from notifyd.engine.sender import SenderPool
from notifyd.store import ClaimStore, StorageError

log = logging.getLogger("notifyd.scanner")
# How loud each claim decision is: failures warn; normal progress is info; routine is debug.
VERDICT_LOG = {Verdict.CANCEL: (logging.DEBUG, "cancelled"),
               Verdict.POSTPONE: (logging.DEBUG, "postponed"),
               Verdict.EXPIRE: (logging.INFO, "expired"),
               Verdict.SUPPRESS: (logging.INFO, "suppressed"),
               Verdict.DEAD: (logging.WARNING, "dead"),
               Verdict.HOLD: (logging.DEBUG, "held for a digest")}


class Wakeups:
    """What wakes the scanner, made before the parts that ring it: ingest tells it of a step
    due (`due`), the sender pool of a finished send (`freed`). Handed to each constructor, so
    nothing is patched in after it is built."""

    def __init__(self) -> None:
        self.wake = asyncio.Event()  # claim now
        self.look = asyncio.Event()  # a send finished on a lane that had room: re-read next due
        self.sleep_until: int | None = None  # the scanner's alarm, while it waits for it
        self.wake_at: int | None = None  # earliest due time reported while it was scanning

    def freed(self, was_full: bool) -> None:
        """A send ended. Its lane was full: due work may wait for that slot, so claim. Else
        only look again at the next due time (the send may have pulled a step forward)."""
        (self.wake if was_full else self.look).set()

    def due(self, at_ms: int) -> None:
        """A step is due at `at_ms` (an accept). Asleep, wake if that is before the alarm;
        mid-scan, remember it for the next alarm (a scan already running may miss the step)."""
        if self.sleep_until is None:
            self.wake_at = at_ms if self.wake_at is None else min(self.wake_at, at_ms)
        elif at_ms < self.sleep_until:
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

    async def run_once(self, now: int, wait: bool = True) -> int:
        """Claim what the senders can take right now and hand it to them; returns the count.
        With `wait`, return once the claimed steps are frozen and their sends started; the
        scan loop does not wait (the senders hold the claims' slots from the start), so the
        next claim goes to the writer while this one's freeze is written."""
        self.alive_at = now  # a scan, whatever it finds: the loop is turning (for /readyz)
        wants = self.pool.wants(now)
        if not wants:
            return 0
        batch = self.cfg.scanner.claim_batch
        wants = [Want(w.channel, w.lane, min(w.n, batch)) for w in wants]
        claimed = await self.store.claim_due(wants, self.lease_ms, self.rules,
                                             self.pool.budget(now))
        taken = Counter((c.channel, c.lane) for c in claimed.claims)
        self._full = any(taken[(w.channel, w.lane)] >= w.n for w in wants)
        self._log_decided(claimed.decided)
        self.pool.share(claimed)
        started = self.pool.launch(claimed.claims, now)
        if wait and started:
            await asyncio.gather(*started)
        return len(claimed.claims)

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
                await self.run_once(now, wait=False)
                if self._full and self.pool.wants(self.clock.now_ms()):
                    continue  # a lane took all it asked for, and has room: scan again at once
                await self._sleep(now, stop)
            except Exception as e:  # noqa: BLE001 - a full disk must not become a spin
                self._failed(e)
                await self._wait(now + self.poll_ms, stop)

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

    async def end_unconfigured(self) -> None:
        """End, dead, the open steps on channels this config does not have."""
        ended = await self.store.end_unconfigured(sorted(self.cfg.channels), self.rules.decide)
        self._log_decided(ended)
        if ended:
            log.warning("%d open steps were on channels no longer configured; they end dead "
                        "(notifyd dead-letters lists them)", len(ended))

    async def _sleep(self, now: int, stop: asyncio.Event) -> None:
        """Sleep until the next due step, a token, a breaker's cooldown end, a wake-up or the
        poll interval, whichever comes first; return at once if due work can be claimed now
        (a step the last claim pulled forward, say)."""
        alarm = now + self.poll_ms
        while True:
            self.wakeups.look.clear()  # before the read: a send ending during it looks again
            # Due work on lanes that can take it now (and lease ends); lanes that cannot are
            # woken by a freed slot, a token or a breaker's cooldown, below.
            ready = [Route(w.channel, w.lane) for w in self.pool.wants(now)]
            due = await self.store.next_due(ready)
            if due is not None and due <= now:
                self.wakeups.wake_at = None  # reported during the read: the scan now sees it
                return
            if due is not None:
                alarm = min(alarm, due)
            bell = self.wakeups
            if bell.wake_at is not None:  # after the awaits above: wake-ups during them count
                alarm, bell.wake_at = min(alarm, bell.wake_at), None
            refill = self.pool.ms_until_capacity(now)
            if refill is not None:
                alarm = min(alarm, now + refill)
            if not await self._wait(alarm, stop, look=True):
                return
            now = self.clock.now_ms()

    async def _wait(self, alarm: int, stop: asyncio.Event, look: bool = False) -> bool:
        """Wait for the alarm, a wake-up or stop (and, with `look`, a finished send). True
        when only a finished send ended the wait: look at the next due time again."""
        delay = (alarm - self.clock.now_ms()) / 1000
        if delay <= 0:
            return False
        bell = self.wakeups
        waiters = {asyncio.ensure_future(bell.wake.wait()), asyncio.ensure_future(stop.wait())}
        if look:
            waiters.add(asyncio.ensure_future(bell.look.wait()))
        bell.sleep_until = alarm  # only while actually waiting: due() compares against it
        try:
            await asyncio.wait(waiters, timeout=delay, return_when=asyncio.FIRST_COMPLETED)
        finally:
            bell.sleep_until = None
            for w in waiters:
                w.cancel()
        return bell.look.is_set() and not bell.wake.is_set() and not stop.is_set() \
            and self.clock.now_ms() < alarm
