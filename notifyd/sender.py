"""Per-channel senders: lanes, token buckets and breakers; the only place that decides retry vs give up.

The scanner asks `wants()` how much each (channel, lane) can take right now, claims at most that,
and hands the claims to `dispatch()`. Tokens are taken at claim time, so claimed work never waits
in memory behind a closed bucket. The urgent lane is asked first and has its own ceiling, so a bulk
backlog cannot delay it. A breaker per vendor, while open, makes the channel want nothing: work
stays pending in the store rather than failing.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections import deque
from collections.abc import Callable

from notifyd.channels.base import Channel, Failed, Message, Outcome, Rejected, Sent, Unknown
from notifyd.clock import Clock
from notifyd.config import SEND_SLACK_SEC, ChannelConfig, Config
from notifyd.models import Budget, Claim, Completion, Lane, StepState
from notifyd.store import Store

log = logging.getLogger("notifyd.sender")
LANES = (Lane.URGENT, Lane.BULK)  # urgent asked first


class TokenBucket:
    def __init__(self, rate: float, burst: int, now_ms: int) -> None:
        self.rate, self.burst = rate, float(burst)
        self.tokens, self.at = float(burst), now_ms

    def available(self, now_ms: int) -> int:
        if now_ms > self.at:  # a clock stepped back refills nothing and takes nothing
            self.tokens = min(self.burst, self.tokens + (now_ms - self.at) / 1000 * self.rate)
            self.at = now_ms
        return int(self.tokens)

    def take(self, n: int) -> None:
        self.tokens -= n

    def ms_until_token(self) -> int:
        return 0 if self.tokens >= 1 else int((1 - self.tokens) / self.rate * 1000) + 1


class Breaker:
    """Opens when the error share over a window passes a threshold; half-opens to one probe."""

    def __init__(self, cfg: ChannelConfig) -> None:
        self.rate, self.min_calls = cfg.breaker_error_rate, cfg.breaker_min_calls
        self.window_ms = int(cfg.breaker_window_sec * 1000)
        self.cooldown_ms = int(cfg.breaker_cooldown_sec * 1000)
        self.calls: deque[tuple[int, bool]] = deque()
        self.errors = 0  # failures among self.calls, kept as calls come and go
        self.opened_at: int | None = None
        self.probing = False

    @property
    def state(self) -> str:
        if self.opened_at is None:
            return "closed"
        return "half-open" if self.probing else "open"

    def allowance(self, now_ms: int) -> int | None:
        """None: no limit; else how many calls may start now (0 while open, 1 to probe)."""
        if self.opened_at is None:
            return None
        if self.probing or now_ms < self.opened_at + self.cooldown_ms:
            return 0
        return 1

    def started(self, now_ms: int) -> bool:
        """A call starts; True if it is the half-open probe whose answer decides."""
        if self.allowance(now_ms) == 1:
            self.probing = True
            return True
        return False

    def record(self, ok: bool, now_ms: int, probe: bool) -> None:
        if self.opened_at is not None:
            if probe:  # only the probe's answer closes or reopens; stragglers are ignored
                self.probing = False
                self.opened_at = None if ok else now_ms
                self.calls.clear()
                self.errors = 0
            return
        self.calls.append((now_ms, ok))
        self.errors += not ok
        while self.calls and self.calls[0][0] < now_ms - self.window_ms:
            self.errors -= not self.calls.popleft()[1]
        if len(self.calls) >= self.min_calls and self.errors / len(self.calls) >= self.rate:
            self.opened_at = now_ms
            log.warning("breaker opened: %d of %d recent calls failed", self.errors,
                        len(self.calls))


def backoff_ms(cfg: ChannelConfig, tries: int, rng: random.Random) -> int:
    """Full jitter: uniform between 0 and min(max, base * 2^(tries-1))."""
    ceiling = min(cfg.backoff_max_sec, cfg.backoff_base_sec * 2 ** max(0, tries - 1))
    return int(rng.uniform(0, ceiling) * 1000)


def decide(cfg: ChannelConfig, claim: Claim, outcome: Outcome, now: int,
           rng: random.Random) -> Completion:
    """Turn one provider outcome into the step's next state: the whole retry policy."""
    if isinstance(outcome, Sent):
        return Completion("sent", StepState.SENT, provider_ref=outcome.provider_ref)
    if isinstance(outcome, Rejected):
        return Completion("rejected", StepState.REJECTED, reason=outcome.reason,
                          disable_contact=True, pull_next=True)
    label = "failed" if isinstance(outcome, Failed) else "unknown"
    delay = backoff_ms(cfg, claim.tries, rng)
    if isinstance(outcome, Failed) and outcome.retry_after is not None:
        delay = max(delay, int(outcome.retry_after * 1000))
    retry_at = now + delay
    if claim.tries >= cfg.max_attempts or retry_at >= claim.expires_at:
        why = "retry budget spent" if claim.tries >= cfg.max_attempts else "time to live ends"
        return Completion(label, StepState.DEAD, pull_next=True, reason=(
            f"{why} after {claim.tries} attempt(s); last: {outcome.reason}"))
    state = StepState.PENDING if label == "failed" else StepState.UNKNOWN
    return Completion(label, state, reason=f"{outcome.reason}; retry {claim.tries + 1}",
                      retry_at=retry_at)


class ChannelSender:
    def __init__(self, name: str, cfg: ChannelConfig, adapter: Channel, breaker: Breaker,
                 now: int) -> None:
        self.name, self.cfg, self.adapter, self.breaker = name, cfg, adapter, breaker
        self.bucket = TokenBucket(cfg.rate_per_sec, cfg.burst, now)
        self.ceiling = {"urgent": cfg.urgent_concurrency, "bulk": cfg.bulk_concurrency}
        self.in_flight = {"urgent": 0, "bulk": 0}


class SenderPool:
    def __init__(self, cfg: Config, store: Store, clock: Clock, adapters: dict[str, Channel],
                 rng: random.Random | None = None) -> None:
        self.store, self.clock = store, clock
        self.rng = rng or random.Random()
        now = clock.now_ms()
        breakers: dict[str, Breaker] = {}
        self.channels: dict[str, ChannelSender] = {}
        for name, ch in cfg.channels.items():
            breaker = breakers.setdefault(ch.vendor or name, Breaker(ch))
            self.channels[name] = ChannelSender(name, ch, adapters[name], breaker, now)
        self.tasks: set[asyncio.Task[None]] = set()
        self.on_free: Callable[[], None] = lambda: None  # the scanner's wake-up

    def pairs(self) -> list[tuple[str, str]]:
        return [(name, lane) for lane in LANES for name in self.channels]

    def budget(self, now: int) -> Budget:
        """What the channels may start now across both lanes: each its bucket's whole tokens,
        and a half-open vendor one probe, spent by whichever of its channels claims first."""
        budget = Budget()
        for name, ch in self.channels.items():
            budget.left[f"tokens:{name}"] = ch.bucket.available(now)
            keys: tuple[str, ...] = (f"tokens:{name}",)
            allowance = ch.breaker.allowance(now)
            if allowance is not None:
                vendor = f"breaker:{id(ch.breaker)}"
                budget.left[vendor] = allowance
                keys += (vendor,)
            budget.keys[name] = keys
        return budget

    def wants(self, now: int) -> list[tuple[str, str, int]]:
        """How many steps each (channel, lane) could start now, urgent lanes first. Lanes share
        the budget: the claim spends it in this order, so urgent work takes tokens first."""
        budget = self.budget(now)
        out: list[tuple[str, str, int]] = []
        for lane in LANES:
            for name, ch in self.channels.items():
                n = budget.allow(name, ch.ceiling[lane] - ch.in_flight[lane])
                if n > 0:
                    out.append((name, lane, n))
        return out

    def ms_until_capacity(self, now: int) -> int | None:
        """When a channel with free lane slots gets a token, if that is what it waits for."""
        waits = [ch.bucket.ms_until_token() for ch in self.channels.values()
                 if ch.bucket.available(now) < 1]
        for ch in self.channels.values():  # cooling down; once half-open, due work wakes us
            b = ch.breaker
            if b.opened_at is not None and not b.probing and b.opened_at + b.cooldown_ms > now:
                waits.append(b.opened_at + b.cooldown_ms - now)
        return min(waits, default=None)

    def dispatch(self, claims: list[Claim], now: int) -> None:
        for claim in claims:
            ch = self.channels[claim.channel]
            ch.bucket.take(1)
            probe = ch.breaker.started(now)
            ch.in_flight[claim.lane] += 1
            task = asyncio.create_task(self._send(ch, claim, probe), name=f"send {claim.key}")
            self.tasks.add(task)
            task.add_done_callback(self.tasks.discard)

    async def _send(self, ch: ChannelSender, claim: Claim, probe: bool) -> None:
        try:
            message = Message(claim.key, claim.destination, claim.payload)
            try:
                outcome = await asyncio.wait_for(ch.adapter.send(message),
                                                 ch.cfg.timeout_sec + SEND_SLACK_SEC)
            except TimeoutError:
                outcome = Unknown("no answer within the send timeout")
            except Exception as e:  # noqa: BLE001 - an adapter bug must not lose the step
                # No traceback: exception texts can carry the destination URL, often a secret.
                log.error("adapter %s raised %s on %s", ch.name, type(e).__name__, claim.key)
                outcome = Unknown(f"adapter error: {type(e).__name__}")
            now = self.clock.now_ms()
            ch.breaker.record(isinstance(outcome, Sent | Rejected), now, probe)
            done = decide(ch.cfg, claim, outcome, now, self.rng)
            if not await self.store.complete(claim, done, now):
                log.warning("%s: lease was taken over; attempt %d recorded, step left alone",
                            claim.key, claim.attempt_no)
        finally:
            ch.in_flight[claim.lane] -= 1
            self.on_free()

    async def drain(self, grace_sec: float) -> None:
        """Let in-flight sends finish within the grace period; the rest become unknown later."""
        if self.tasks:
            _, pending = await asyncio.wait(set(self.tasks), timeout=grace_sec)
            for task in pending:
                task.cancel()
            if pending:
                log.warning("%d sends still in flight after the grace period; they will be "
                            "retried as unknown on the next start", len(pending))
                await asyncio.gather(*pending, return_exceptions=True)

    async def close(self) -> None:
        for ch in self.channels.values():
            await ch.adapter.close()
