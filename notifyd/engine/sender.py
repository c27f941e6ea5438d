"""Per-channel senders: lanes, token buckets and breakers; the only place that decides retry vs give up.

The scanner asks `wants()` how much each (channel, lane) can take right now, claims at most that,
and hands the claims to `launch()`. Slots and tokens are taken as the claim commits, so claimed
work never waits in memory behind a closed bucket. The urgent lane is asked first and has its own
ceiling, so a bulk backlog cannot delay it. A breaker per vendor, while open, makes the channel
want nothing: work stays pending in the store rather than failing, its attempts unspent; when a
probe closes it, the channels behind it start with empty buckets, so what it held goes out at
their rate.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import random
import time
from collections import deque
from collections.abc import Awaitable, Callable, Collection, Mapping

from notifyd.channels import build_channel
from notifyd.channels.base import (
    Answer,
    Channel,
    Failed,
    Fanout,
    Limits,
    Message,
    Rejected,
    RenderError,
    Sent,
    Unknown,
)
from notifyd.config import SEND_SLACK_SEC, ChannelConfig, Config
from notifyd.core.clock import Clock
from notifyd.core.contacts import Devices
from notifyd.core.logs import step_line
from notifyd.core.models import (
    Budget,
    Claim,
    Claimed,
    Completion,
    Freeze,
    FreezeFn,
    Lane,
    Outcome,
    Route,
    Rules,
    StepState,
    Want,
    Why,
)
from notifyd.core.text import iso, plural
from notifyd.domain import policy
from notifyd.engine.decisions import Entry, Feed
from notifyd.engine.metrics import Metrics
from notifyd.engine.render import Renderer
from notifyd.engine.templates import Templates, why
from notifyd.store import SendStore, StorageError

log = logging.getLogger("notifyd.sender")
LANES = (Lane.URGENT, Lane.BULK, Lane.BROADCAST)  # asked in this order
RENDER_SLICE_SEC = 0.002  # renders in one turn of the event loop, at most about this long
# A claim with at most this many never-frozen steps (a quiet daemon's) renders and freezes them
# inside its own transaction, instead of a write of their own after it; a larger one renders on
# the loop, its freeze sharing the writer's batch with what else is queued (a busy daemon's),
# and the writer never holds a long render.
FREEZE_IN_CLAIM = 2


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

    def empty(self, now_ms: int) -> None:
        """No tokens left: from now the bucket fills at its rate, starting from nothing."""
        self.tokens, self.at = 0.0, max(self.at, now_ms)

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

    def record(self, ok: bool, now_ms: int, probe: bool) -> str | None:
        """Count a call's answer; what it changed: "opened", "closed", "reopened" or None."""
        if self.opened_at is not None:
            if not probe:  # only the probe's answer closes or reopens; stragglers are ignored
                return None
            self.probing = False
            self.opened_at = None if ok else now_ms
            self.calls.clear()
            self.errors = 0
            return "closed" if ok else "reopened"
        self.calls.append((now_ms, ok))
        self.errors += not ok
        while self.calls and self.calls[0][0] < now_ms - self.window_ms:
            self.errors -= not self.calls.popleft()[1]
        if len(self.calls) >= self.min_calls and self.errors / len(self.calls) >= self.rate:
            self.opened_at = now_ms
            return "opened"
        return None

    def why_open(self) -> str:
        return (f"{self.errors} of {len(self.calls)} recent calls failed; one probe in "
                f"{self.cooldown_ms / 1000:g} s")


def backoff_ms(cfg: ChannelConfig, tries: int, rng: random.Random) -> int:
    """Full jitter: uniform between 0 and min(max, base * 2^(tries-1))."""
    ceiling = min(cfg.backoff_max_sec, cfg.backoff_base_sec * 2 ** max(0, tries - 1))
    return int(rng.uniform(0, ceiling) * 1000)


def build_adapters(cfg: Config, only: Collection[str] | None = None) -> dict[str, Channel]:
    """One adapter per configured channel (or per channel in `only`), built by its type from
    its own settings."""
    return {name: build_channel(name, ch.type, ch.settings, adapter_limits(cfg, ch))
            for name, ch in cfg.channels.items() if only is None or name in only}


def adapter_limits(cfg: Config, ch: ChannelConfig) -> Limits:
    """What an adapter is built with beside its settings. A type whose provider's webhook is
    on ([webhooks.twilio]) learns the public URL, so it asks the provider for status callbacks
    there. Every HTTP type's calls go through the egress proxy ([egress])."""
    return Limits(ch.timeout_sec,
                  ch.urgent_concurrency + ch.bulk_concurrency + ch.broadcast_concurrency,
                  cfg.server.public_url if cfg.webhook(ch.type) is not None else "",
                  cfg.egress.routes())


def aggregate(fanout: Fanout) -> Answer:
    """One answer for a step sent to several devices: Sent if any took it, Rejected only if
    every one refused, else Unknown if any may have it, else Failed (after the longest
    Retry-After). The reason names each device's answer, for inspect."""
    answers = [a for _, a in fanout.results]
    each = "; ".join(f"{device}: {_said(a)}" for device, a in fanout.results)
    if any(isinstance(a, Sent) for a in answers):
        refs = [a.provider_ref for a in answers if isinstance(a, Sent) and a.provider_ref]
        return Sent(",".join(refs) or None, each)
    if answers and all(isinstance(a, Rejected) for a in answers):
        return Rejected(each)
    if not answers:
        return Rejected("no live device to send to")
    if any(isinstance(a, Unknown) for a in answers):
        return Unknown(each)
    waits = [a.retry_after for a in answers if isinstance(a, Failed) and a.retry_after]
    return Failed(each, max(waits, default=None))


def _said(a: Answer) -> str:
    if isinstance(a, Sent):
        return "sent"
    return f"{type(a).__name__.lower()} {a.reason}"


def decide(cfg: ChannelConfig, claim: Claim, outcome: Answer, now: int,
           rng: random.Random) -> Completion:
    """Turn one provider outcome into the step's next state: the whole retry policy.

    A transient failure (Failed not final, Unknown) is tried again after a full-jitter backoff,
    no sooner than the provider's Retry-After, for as long as the retry still falls before the
    step's deadline (the notification's expires_at): time bounds the retries, as a mail relay's
    queue lifetime does, so an outage of hours ends in a send. `max_attempts`, when set, also
    caps them by count."""
    if isinstance(outcome, Sent):
        return Completion(Outcome.SENT, StepState.SENT, provider_ref=outcome.provider_ref,
                          reason=outcome.detail)
    if isinstance(outcome, Rejected):
        return Completion(Outcome.REJECTED, StepState.REJECTED, reason=outcome.reason,
                          disable_contact=True, pull_next=True, why=Why.REJECTED)
    if isinstance(outcome, Failed) and outcome.final:
        return Completion(Outcome.FAILED, StepState.DEAD, pull_next=True, why=Why.REFUSED,
                          reason=f"refused for good, not retried: {outcome.reason}")
    label = Outcome.FAILED if isinstance(outcome, Failed) else Outcome.UNKNOWN
    delay = backoff_ms(cfg, claim.tries, rng)
    if isinstance(outcome, Failed) and outcome.retry_after is not None:
        delay = max(delay, int(outcome.retry_after * 1000))
    retry_at = now + delay
    spent = 0 < cfg.max_attempts <= claim.tries
    if spent or retry_at >= claim.expires_at:
        why = "retry budget spent" if spent else "time to live ends"
        return Completion(label, StepState.DEAD, pull_next=True, reason=(
            f"{why} after {plural(claim.tries, 'attempt')}; last: {outcome.reason}"),
            why=Why.RETRIES if spent else Why.TTL)
    state = StepState.PENDING if label is Outcome.FAILED else StepState.UNKNOWN
    return Completion(label, state, why=Why.RETRY,
                      reason=f"{outcome.reason}; retry {claim.tries + 1}",
                      retry_at=retry_at)


class ChannelSender:
    def __init__(self, name: str, cfg: ChannelConfig, adapter: Channel, breaker: Breaker,
                 now: int) -> None:
        self.name, self.cfg, self.adapter, self.breaker = name, cfg, adapter, breaker
        self.bucket = TokenBucket(cfg.rate_per_sec, cfg.burst, now)
        # The broadcast lane draws from both: the channel's bucket and its own share of it.
        self.broadcast = TokenBucket(cfg.rate_per_sec * cfg.broadcast_share,
                                     max(1, int(cfg.burst * cfg.broadcast_share)), now)
        self.ceiling = {Lane.URGENT: cfg.urgent_concurrency, Lane.BULK: cfg.bulk_concurrency,
                        Lane.BROADCAST: cfg.broadcast_concurrency}
        self.in_flight = dict.fromkeys(LANES, 0)


class SenderPool:
    """The channels' senders for one config. `carry` (a reload's: the pool before it, asked
    `unchanged(cfg)`) are senders kept as they are, with their adapter, token bucket, breaker
    and the sends they have in flight, so a reload resets no rate limit and no breaker of a
    channel it did not change; `adapters` are for the other channels."""

    def __init__(self, cfg: Config, store: SendStore, clock: Clock, adapters: dict[str, Channel],
                 rng: random.Random | None = None, metrics: Metrics | None = None,
                 templates: Templates | None = None, rules: Rules | None = None,
                 link_key: bytes | None = None,
                 on_free: Callable[[bool], None] | None = None,
                 carry: Mapping[str, ChannelSender] | None = None,
                 feed: Feed | None = None,
                 signing_key: Callable[[str], Awaitable[bytes]] | None = None) -> None:
        self.cfg, self.store, self.clock = cfg, store, clock
        self.feed = feed or Feed()  # who follows the decisions (notifyd tail)
        # What the store applies beside the rows: a sent step's windows, receipts that arrived
        # before a send's answer named its message (the scanner claims under the same rules).
        self.rules = rules or policy.rules(cfg.catalog)
        # signing_key: KeyStore's, for the preference links' key (the pool holds no more of it)
        self.renderer = Renderer(cfg, templates, link_key, signing_key)
        self.metrics = metrics or Metrics()
        self.rng = rng or random.Random()
        now = clock.now_ms()
        carry = carry or {}
        # A vendor's breaker is one, whichever of its channels a reload changed.
        breakers = {ch.cfg.vendor or name: ch.breaker for name, ch in carry.items()}
        self.channels: dict[str, ChannelSender] = {}
        for name, ch in cfg.channels.items():
            if name in carry:
                self.channels[name] = carry[name]
                continue
            breaker = breakers.setdefault(ch.vendor or name, Breaker(ch))
            self.channels[name] = ChannelSender(name, ch, adapters[name], breaker, now)
        self.tasks: set[asyncio.Task[None]] = set()
        # The scanner's wake-up (scanner.Wakeups.freed): True when the lane had no free slot
        # before this one.
        self.on_free: Callable[[bool], None] = on_free or (lambda was_full: None)

    def unchanged(self, cfg: Config) -> dict[str, ChannelSender]:
        """The senders whose channel `cfg` has as this pool's config has it: the same
        settings, and the same adapter limits (a changed public URL or egress proxy rebuilds the
        adapter)."""
        return {name: ch for name, ch in self.channels.items()
                if cfg.channels.get(name) == ch.cfg
                and adapter_limits(cfg, ch.cfg) == adapter_limits(self.cfg, ch.cfg)}

    def routes(self) -> list[Route]:
        return [Route(name, lane) for lane in LANES for name in self.channels]

    def budget(self, now: int, only: Collection[str] | None = None) -> Budget:
        """What the channels (those in `only`, if given) may start now across both lanes: each
        its bucket's whole tokens, and a half-open vendor one probe, spent by whichever of its
        channels claims first; with each channel's rate, for a store that keeps the
        deployment's bucket."""
        budget = Budget()
        for name, ch in self.channels.items():
            if only is not None and name not in only:
                continue
            budget.rates[name] = (ch.cfg.rate_per_sec, ch.cfg.burst)
            budget.left[f"tokens:{name}"] = ch.bucket.available(now)
            budget.left[f"broadcast:{name}"] = ch.broadcast.available(now)
            keys: tuple[str, ...] = (f"tokens:{name}",)
            allowance = ch.breaker.allowance(now)
            if allowance is not None:
                vendor = f"breaker:{id(ch.breaker)}"
                budget.left[vendor] = allowance
                keys += (vendor,)
            for lane in LANES:
                budget.keys[Route(name, lane)] = keys + (
                    (f"broadcast:{name}",) if lane is Lane.BROADCAST else ())
        return budget

    def wants(self, now: int, only: Collection[tuple[str, str]] | None = None) -> list[Want]:
        """How many steps each (channel, lane) could start now, urgent lanes first; with
        `only`, those (channel, lane) alone (the due index's), the budget read for their
        channels alone. Lanes share the budget: the claim spends it in this order, so urgent
        work takes tokens first."""
        budget = self.budget(now, None if only is None else {c for c, _ in only})
        out: list[Want] = []
        for lane in LANES:
            for name, ch in self.channels.items():
                if only is not None and (name, lane.value) not in only:
                    continue
                n = budget.allow(Route(name, lane), ch.ceiling[lane] - ch.in_flight[lane])
                if n > 0:
                    out.append(Want(name, lane, n))
        return out

    def ms_until_capacity(self, now: int) -> int | None:
        """When a channel with free lane slots gets a token, if that is what it waits for."""
        waits = [b.ms_until_token() for ch in self.channels.values()
                 for b in (ch.bucket, ch.broadcast) if b.available(now) < 1]
        for ch in self.channels.values():  # cooling down; once half-open, due work wakes us
            b = ch.breaker
            if b.opened_at is not None and not b.probing and b.opened_at + b.cooldown_ms > now:
                waits.append(b.opened_at + b.cooldown_ms - now)
        return min(waits, default=None)

    def freezer(self, now: int) -> FreezeFn:
        """What a claim's transaction renders and freezes (store.claim_due's `freeze`): its
        never-frozen steps when there are at most FREEZE_IN_CLAIM, so each costs two commits
        (the claim, the completion) and not three; it runs on the writer's thread, inside that
        transaction. A step left out, or whose render raised, is rendered after the commit by
        `prepare`, where a bad template ends its own step as always. Call `refresh` first: the
        preference links are signed with the key it read."""
        def freeze(claims: list[Claim]) -> list[Freeze | None]:
            if len(claims) > FREEZE_IN_CLAIM:
                return [None] * len(claims)
            return [self._render(claim, now) for claim in claims]

        return freeze

    def _render(self, claim: Claim, now: int) -> Freeze | None:
        ch = self.channels.get(claim.channel)
        if ch is None:
            return None
        try:
            return self.renderer.freeze(claim, ch.adapter, now)
        except Exception:  # noqa: BLE001 - prepare renders it again and ends it dead
            return None

    async def refresh(self, now: int) -> None:
        """Before a claim that may render (`freezer`): the preference links' key, read again
        when it is due."""
        await self.renderer.refresh(now)

    async def prepare(self, claims: list[Claim], now: int) -> list[Claim]:
        """Render what has never been frozen and freeze it, all in one write, before any of it
        is sent; claims already frozen pass as they are. A render that raises ends that one
        step dead (the ladder moves on); it never holds up the others."""
        ready: list[Claim | None] = list(claims)
        todo: list[tuple[int, Claim, Freeze]] = []
        failed: list[tuple[Claim, Completion]] = []
        if any(claim.payload is None for claim in claims):
            await self.renderer.refresh(now)  # the key preference links are signed with now
        turn = time.perf_counter()
        for i, claim in enumerate(claims):
            if claim.payload is not None:
                continue
            if time.perf_counter() - turn > RENDER_SLICE_SEC:  # let an accept or a code in
                await asyncio.sleep(0)
                turn = time.perf_counter()
            ready[i] = None
            try:
                f = self.renderer.freeze(claim, self.channels[claim.channel].adapter, now)
            except Exception as e:  # noqa: BLE001 - a bad template ends its own step only
                failed.append((claim, _render_failed(claim, e)))
                continue
            # The payload read back from the text it is frozen as: the first call sends what
            # a retry, reading the row, will.
            todo.append((i, dataclasses.replace(claim, destination=f.destination,
                                                payload=json.loads(f.payload)), f))
        if not todo and not failed:
            return claims
        # Queued together, so the writer commits the freezes and the failures as one batch.
        ended = [asyncio.ensure_future(self.store.complete(c, done, self.rules))
                 for c, done in failed]
        for claim, done in failed:
            self.metrics.step_ended(done.state, done.why)
            self.feed.publish(_entry(claim, now, "dead", done.reason))
        frozen = await self.store.freeze([f for _, _, f in todo]) if todo else []
        await asyncio.gather(*ended)
        for (i, claim, _), ok in zip(todo, frozen, strict=True):
            if ok:
                ready[i] = claim
            else:
                log.warning("%s: lease was taken over before the first send; left alone",
                            claim.key)
        return [c for c in ready if c is not None]

    def share(self, claimed: Claimed) -> None:
        """Where the deployment's bucket of a channel held fewer tokens than this process's,
        this one's is lowered to it (before launch takes this claim's): the scanner then
        waits for a token as it does for its own."""
        for name, left in claimed.tokens.items():
            ch = self.channels.get(name)
            if ch is not None:
                taken = sum(c.channel == name for c in claimed.claims)
                ch.bucket.tokens = min(ch.bucket.tokens, left + taken)

    def launch(self, claims: list[Claim], now: int) -> list[asyncio.Task[None]]:
        """Hand a committed claim to the senders: its slots, tokens and breaker probe are
        taken now, before the scanner claims again, so the next claim sees them spent; the
        render, the freeze and the sends go on in a task per lane while the scanner scans on
        (the freezes' commit then shares the writer's batch with the next claim), so an
        urgent step's freeze never waits for a broadcast's renders. Returns those tasks;
        drain() waits for them as for sends. A lane whose claims all came frozen (the claim
        froze them, or a retry) starts its sends at once, with no task to prepare them."""
        probes = self._hold(claims, now)
        tasks = []
        for lane in LANES:
            mine = [c for c in claims if c.lane is lane]
            if mine and all(c.payload is not None for c in mine):
                self._go(mine, probes, now)
            elif mine:
                task = asyncio.create_task(self._start(mine, probes, now),
                                           name=f"prepare {lane} claims")
                self.tasks.add(task)
                task.add_done_callback(self.tasks.discard)
                tasks.append(task)
        return tasks

    def _hold(self, claims: list[Claim], now: int) -> set[str]:
        """Take each claim's lane slot and tokens; the keys of the breakers' probe calls."""
        probes: set[str] = set()
        for claim in claims:
            ch = self.channels[claim.channel]
            ch.bucket.take(1)
            if claim.lane is Lane.BROADCAST:
                ch.broadcast.take(1)
            if ch.breaker.started(now):
                probes.add(claim.key)
                log.info("breaker of %s half-open: one probe call goes (%s)",
                         self._sharing(ch.breaker), claim.key)
            ch.in_flight[claim.lane] += 1
        return probes

    async def _start(self, claims: list[Claim], probes: set[str], now: int) -> None:
        """Prepare the held claims, start a send for each one frozen, and give back the slot
        of each one that will not be sent (a render that failed, a lease taken over, a freeze
        that could not be written: that lease lapses and the step is retried)."""
        ready: list[Claim] = []
        try:
            ready = await self.prepare(claims, now)
        except StorageError:  # logged by the store
            pass
        except Exception as e:  # noqa: BLE001 - the leases lapse; the steps are retried
            log.error("preparing %d claimed steps failed (%s); they are retried when their "
                      "leases end", len(claims), type(e).__name__, exc_info=e)
        finally:
            sent = {c.key for c in ready}
            for claim in claims:
                if claim.key not in sent:
                    self._free(self.channels[claim.channel], claim, claim.key in probes)
        self._go(ready, probes, now)

    def _go(self, ready: list[Claim], probes: set[str], now: int) -> None:
        """A send task for each held, frozen claim."""
        for claim in ready:
            ch = self.channels[claim.channel]
            if claim.attempt_no == 1 and claim.step_no > 0:
                self.metrics.escalations.labels(claim.kind).inc()
            self.feed.publish(_entry(claim, now, "sending", f"attempt {claim.attempt_no}"))
            task = asyncio.create_task(self._send(ch, claim, claim.key in probes),
                                       name=f"send {claim.key}")
            self.tasks.add(task)
            task.add_done_callback(self.tasks.discard)

    def _free(self, ch: ChannelSender, claim: Claim, probe: bool = False,
              look: bool = True) -> None:
        """A held slot comes back, and the scanner hears of it: to claim if the lane was full
        (due work may wait for this slot), else, with `look`, to read the next due time again.
        A probe that was never sent lets the next one go."""
        if probe:
            ch.breaker.probing = False
        was_full = ch.in_flight[claim.lane] >= ch.ceiling[claim.lane]
        ch.in_flight[claim.lane] -= 1
        if was_full or look:
            self.on_free(was_full)

    async def _send(self, ch: ChannelSender, claim: Claim, probe: bool) -> None:
        """One provider call and its completion. The lane's slot is the provider call's: it
        comes back when the answer does, so the next send starts while this one's outcome is
        written (the step stays leased, `sending`, until that commit)."""
        held = True
        try:
            assert claim.destination is not None and claim.payload is not None  # prepare()d
            message = Message(claim.key, claim.destination, claim.payload)
            started = time.perf_counter()
            try:
                # asyncio.timeout, not wait_for: on 3.11 wait_for wraps the send in one more
                # task, a cost on every send (measured in benchmarks/soak.py).
                async with asyncio.timeout(ch.cfg.timeout_sec + SEND_SLACK_SEC):
                    outcome = await ch.adapter.send(message)
            except TimeoutError:
                outcome = Unknown("no answer within the send timeout")
            except asyncio.CancelledError:  # stopping past the grace: give the lease back
                await self._give_back(claim)
                raise
            except Exception as e:  # noqa: BLE001 - an adapter bug must not lose the step
                # No traceback: exception texts can carry the destination URL, often a secret.
                log.error("adapter %s raised %s on %s", ch.name, type(e).__name__, claim.key)
                outcome = Unknown(f"adapter error: {type(e).__name__}")
            dead: tuple[tuple[str, str], ...] = ()
            if isinstance(outcome, Fanout):  # devices that refused for good die one by one
                dead = tuple((d, a.reason) for d, a in outcome.results if isinstance(a, Rejected))
                outcome = aggregate(outcome)
            self.metrics.provider_seconds.labels(ch.name).observe(time.perf_counter() - started)
            held = False  # the slot is free; the scanner looks again once the outcome commits
            self._free(ch, claim, look=False)
            now = self.clock.now_ms()
            self._breaker(ch.breaker, ch.breaker.record(isinstance(outcome, Sent | Rejected),
                                                        now, probe), now)
            done = decide(ch.cfg, claim, outcome, now, self.rng)
            if isinstance(claim.contact, Devices):  # devices are disabled one by one, never all at once
                done = dataclasses.replace(done, disable_contact=False, dead_devices=dead)
            self.metrics.sends.labels(ch.name, done.outcome).inc()
            try:
                applied = await self.store.complete(claim, done, self.rules)
            except StorageError:  # logged by the store; the lease lapses and it is retried
                return
            if not applied:
                log.warning("%s: lease was taken over; attempt %d recorded, step left alone",
                            claim.key, claim.attempt_no)
            else:
                level, what = _said_of(done)
                step_line(log, level, what, claim.notification_id, claim.step_no,
                          claim.channel, done.reason)
                self.feed.publish(_entry(claim, now, what, done.reason))
                self.metrics.step_ended(done.state, done.why)
        finally:
            if held:
                self._free(ch, claim)
            else:  # the outcome may have pulled a step forward: look at the next due time
                self.on_free(False)

    def _sharing(self, breaker: Breaker) -> str:
        """The channels a (vendor's) breaker holds, as a log line names them."""
        return ", ".join(name for name, ch in self.channels.items() if ch.breaker is breaker)

    def _breaker(self, breaker: Breaker, change: str | None, now: int) -> None:
        """Say what a call's answer did to its breaker. A good probe closed it: its steps have
        waited, pending and due, and their channels' buckets filled while it was open; they
        start empty instead, so the held steps go in due order at each channel's rate, not as
        one burst at a provider just back."""
        if change == "opened":
            log.warning("breaker of %s opened: %s; its steps wait, pending",
                        self._sharing(breaker), breaker.why_open())
        elif change == "reopened":
            log.warning("breaker of %s reopened: the probe failed; the next in %g s",
                        self._sharing(breaker), breaker.cooldown_ms / 1000)
        elif change == "closed":
            for ch in self.channels.values():
                if ch.breaker is breaker:
                    ch.bucket.empty(now)
                    ch.broadcast.empty(now)
            log.info("breaker of %s closed: a probe went through; held steps go at the "
                     "channel's rate", self._sharing(breaker))

    async def _give_back(self, claim: Claim) -> None:
        """This process stops mid-send: the step becomes unknown now, under its claim token,
        and the next start retries it under the same key instead of waiting out the lease."""
        now = self.clock.now_ms()
        why = "interrupted: notifyd stopped during the send"
        try:
            await self.store.complete(claim, Completion(
                Outcome.UNKNOWN, StepState.UNKNOWN, reason=why, retry_at=now,
                why=Why.INTERRUPTED), self.rules)
        except Exception as e:  # noqa: BLE001 - the lease then lapses on its own
            log.warning("%s: could not record the interrupted send (%s); its lease will lapse",
                        claim.key, type(e).__name__)

    async def drain(self, grace_sec: float) -> None:
        """Let in-flight sends finish within the grace period; the rest become unknown. Claims
        still being prepared start their sends meanwhile: those are waited for too."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + grace_sec
        while self.tasks and loop.time() < deadline:
            await asyncio.wait(set(self.tasks), timeout=deadline - loop.time())
        pending = set(self.tasks)
        if pending:
            for task in pending:
                task.cancel()
            log.warning("%d sends still in flight after the grace period; they become "
                        "unknown and are retried on the next start", len(pending))
            await asyncio.gather(*pending, return_exceptions=True)

    async def close(self) -> None:
        for ch in self.channels.values():
            await ch.adapter.close()


def _said_of(done: Completion) -> tuple[int, str]:
    """How loud a step's outcome is, and its words: failures at WARNING, a retry at INFO, a
    send at DEBUG (the status API and inspect have every one)."""
    if done.state is StepState.SENT:
        return logging.DEBUG, "sent"
    if done.state in (StepState.PENDING, StepState.UNKNOWN):
        level = logging.INFO if done.state is StepState.PENDING else logging.WARNING
        return level, f"{done.outcome}, retry at {iso(done.retry_at)}"
    return logging.WARNING, str(done.state)


def _entry(claim: Claim, now: int, what: str, reason: str | None) -> Entry:
    return Entry(now, what, claim.notification_id, claim.step_no, claim.channel, claim.tenant,
                 claim.user_id, claim.kind, reason)


def _render_failed(claim: Claim, e: Exception) -> Completion:
    what = f"{e.template}: {why(e)}" if isinstance(e, RenderError) else type(e).__name__
    step_line(log, logging.WARNING, "dead, render failed", claim.notification_id,
              claim.step_no, claim.channel, what)
    return Completion(Outcome.FAILED, StepState.DEAD, reason=f"render failed: {what}",
                      pull_next=True, why=Why.RENDER)
