"""Ingest: validate, claim the dedup key, write the notification and its whole ladder in one commit.

Nothing here touches HTTP; web.py hands in bytes and headers and gets back a result or an DomainError.
"""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any, Generic, Protocol, TypeVar

from notifyd.config import Config
from notifyd.core.catalog import LadderStep
from notifyd.core.clock import Clock
from notifyd.core.errors import DomainError
from notifyd.core.models import (
    AcceptInput,
    AcceptResult,
    ApiKey,
    Lane,
    PlanFn,
    PlannedStep,
    Recipient,
    StepState,
    new_id,
)
from notifyd.core.records import Acceptance, InboxEntry, InboxItem
from notifyd.domain.events import check_dedup_key
from notifyd.domain.ladder import plan_steps
from notifyd.domain.recipients import dead_contacts
from notifyd.domain.validate import check_depth, header_value, request_hash, time_ms
from notifyd.domain.views import item_view
from notifyd.engine.decisions import Entry, Feed
from notifyd.engine.fair import Turns
from notifyd.engine.paramcheck import ParamCheck
from notifyd.engine.quotas import Quotas
from notifyd.engine.stream import Event, Hub
from notifyd.engine.templates import TemplateError, Templates, why
from notifyd.shapes.decode import decode
from notifyd.shapes.notifications import AcceptRequest, ChainStep
from notifyd.store import IntakeStore, ProfileStore


class IngestStore(IntakeStore, ProfileStore, Protocol):
    """What ingest uses of the store: the accept, and the recipient's locale."""


# The store ingest was given, as its holders know it: ingest itself uses only IngestStore, and
# the HTTP face, which reaches the store through its ingest, asks for an Ingest over the roles
# it uses (http/kit.Context).
S = TypeVar("S", bound=IngestStore, covariant=True)


class Ingest(Generic[S]):
    """The write path: four things, validate, claim the key, write the rows, ack."""

    def __init__(self, cfg: Config, store: S, clock: Clock,
                 templates: Templates | None = None,
                 hub: Hub | None = None, feed: Feed | None = None,
                 turns: Turns | None = None, quotas: Quotas | None = None) -> None:
        self.cfg = cfg
        self.store = store
        self.clock = clock
        self.templates = templates  # renders inbox items at accept
        self.hub = hub or Hub()  # open inbox streams hear of each new item after its commit
        self.feed = feed or Feed()  # so do those who follow the decisions, of each accept
        self.turns = turns or Turns()  # the writer's turns, fair between tenants
        self.quotas = quotas or Quotas()  # what each tenant may post ([quotas])
        self.routing = asyncio.Event()  # set once an event is accepted: its fan-out starts
        self.params = ParamCheck(cfg, templates, store)  # the ladder's templates, at accept
        self._plans: dict[str, PlanFn] = {}  # a kind's planner, for requests that keep its ladder

    def parse(self, body: bytes, key: ApiKey, idempotency_key: str | None) -> AcceptInput:
        return self.parse_item(decode(body, AcceptRequest), key, idempotency_key)

    def parse_item(self, req: AcceptRequest, key: ApiKey,
                   idempotency_key: str | None = None) -> AcceptInput:
        """One request (a POST's body, or one item of a batch), its shape checked by its
        Struct, checked against the config and the key."""
        kind, params = req.kind, req.params
        if kind not in self.cfg.kinds:
            raise DomainError("unknown_kind", f"unknown kind {kind!r}; known: "
                              f"{', '.join(sorted(self.cfg.kinds))}", "kind")
        if not key.allows(kind):
            raise DomainError("kind_not_allowed", f"this API key may not post kind {kind!r}",
                              "kind")
        check_depth(params, "params")
        dedup_key = req.dedup_key
        idempotency_key = header_value(idempotency_key, "Idempotency-Key")
        if idempotency_key is not None:
            if dedup_key is not None and dedup_key != idempotency_key:
                raise DomainError("invalid_field", "dedup_key differs from the Idempotency-Key "
                                  "header; send one or make them equal", "dedup_key")
            dedup_key = idempotency_key
        check_dedup_key(dedup_key)  # events' notifications have keys of their own form
        chain = self._parse_chain(kind, req.fallback_chain)
        ttl = req.max_ttl_sec
        send_at = self.send_at_of(kind, req.send_at)
        compared: list[Any] = [req.user_id, kind, params, chain, ttl]
        if send_at is not None:  # appended only when given: older requests' hashes stay
            compared.append(send_at)
        params, digest = request_hash(compared, 2)
        return AcceptInput(key.tenant, req.user_id, kind, params, dedup_key, chain, ttl,
                           digest, key.name, key.kinds, send_at)

    def send_at_of(self, kind: str, text: str | None) -> int | None:
        """When the ladder starts, if the request says (a time already past: at accept); an
        event's too, checked for each kind it makes."""
        send_at = time_ms(text, "send_at")
        if send_at is None:
            return None
        if self.cfg.kinds[kind].inbox:
            raise DomainError("invalid_field", f"kind {kind!r} has an inbox, whose item shows "
                              "at accept: post it when it is due instead of with send_at",
                              "send_at")
        most = self.cfg.server.max_schedule_sec
        if send_at > self.clock.now_ms() + most * 1000:
            raise DomainError("invalid_field", f"send_at is more than {most} s ({most / 86400:g} "
                              "days) ahead; the most is server.max_schedule_sec", "send_at")
        return send_at

    def _parse_chain(self, kind: str, steps: list[ChainStep] | None
                     ) -> tuple[tuple[str, float | None], ...] | None:
        if steps is None:
            return None
        if not self.cfg.kinds[kind].allow_override:
            raise DomainError("override_not_allowed", f"kind {kind!r} does not allow "
                              "fallback_chain", "fallback_chain")
        for i, step in enumerate(steps):
            where = f"fallback_chain[{i}]"
            if step.channel not in self.cfg.channels:
                raise DomainError("unknown_channel", f"unknown channel {step.channel!r}",
                                  f"{where}.channel")
            if step.timeout_sec is None and i < len(steps) - 1:
                raise DomainError("invalid_field", f"{where}.timeout_sec is needed: a step is "
                                  "due when the one before it times out", f"{where}.timeout_sec")
        return tuple((step.channel, step.timeout_sec) for step in steps)

    def ttl_sec(self, inp: AcceptInput) -> int:
        kind_ttl = self.cfg.kinds[inp.kind].ttl_sec
        return kind_ttl if inp.max_ttl_sec is None else min(kind_ttl, inp.max_ttl_sec)

    def planner(self, inp: AcceptInput) -> PlanFn:
        """How the store plans the request's ladder; the same function for every request of a
        kind with the kind's own ladder and time to live, made once."""
        if inp.fallback_chain is not None or inp.max_ttl_sec is not None:
            return self._planner(inp)
        plan = self._plans.get(inp.kind)
        if plan is None:
            plan = self._plans[inp.kind] = self._planner(inp)
        return plan

    def _planner(self, inp: AcceptInput) -> PlanFn:
        kind = self.cfg.kinds[inp.kind]
        ladder = kind.ladder
        if inp.fallback_chain is not None:
            ladder = tuple(LadderStep(ch, timeout_sec=t) for ch, t in inp.fallback_chain)
        urgent = kind.urgency == "urgent"
        lane = Lane.URGENT if urgent else Lane.BROADCAST if kind.broadcast else Lane.BULK

        ttl_ms = self.ttl_sec(inp) * 1000

        def plan(recipient: Recipient | None, now: int) -> tuple[list[PlannedStep], Lane]:
            expires_at = now + ttl_ms
            steps = plan_steps(ladder, self.cfg.catalog, now, recipient, urgent,
                               dead_contacts(recipient))
            return [s if s.send_after < expires_at or s.state != StepState.PENDING else
                    dataclasses.replace(s, state=StepState.EXPIRED,
                                        reason="due after the time to live ends")
                    for s in steps], lane

        return plan

    async def inbox_item(self, inp: AcceptInput, notification_id: str,
                         locale: str | None = None) -> InboxEntry | None:
        """The inbox item's title and body for a kind with inbox = true, rendered now in the
        recipient's locale, so history does not change when a template does. Params the
        template cannot render are the request's fault: 422, nothing accepted."""
        if not self.cfg.kinds[inp.kind].inbox:
            return None
        if self.templates is None:
            raise DomainError("internal", "the inbox needs templates, and none are loaded")
        if locale is None:
            locale = await self.store.locale_of(inp.tenant, inp.user_id)
        try:
            done = self.templates.render(inp.kind, "inbox", locale, inp.params, extra={
                "notification_id": notification_id, "user_id": inp.user_id})
        except TemplateError as e:  # an undefined name is named; other texts may hold values
            raise DomainError("invalid_field", f"params: the inbox template {e.template} cannot "
                              f"render them ({why(e)})", "params") from None
        return InboxEntry(done.parts["title"], done.parts.get("body"))

    async def prepare(self, inp: AcceptInput, notification_id: str) -> InboxEntry | None:
        """What the accept needs before its write: the params checked against every template
        the ladder would render, and the inbox item, both in the recipient's locale."""
        kind = self.cfg.kinds[inp.kind]
        locale = await self.store.locale_of(inp.tenant, inp.user_id) if kind.inbox else \
            await self.params.locale(inp)
        self.params.check(inp, notification_id, locale)
        return await self.inbox_item(inp, notification_id, locale)

    def announce(self, inp: AcceptInput, result: AcceptResult,
                 inbox: InboxEntry | None) -> None:
        """Tell those who follow the decisions of a new notification, and open inbox streams
        of its item, once it is committed (an accept, or an event's fan-out)."""
        at = self.clock.now_ms() if result.created_at is None else result.created_at
        if self.feed.followers:  # an Entry only for someone to read it
            self.feed.publish(Entry(at, "accepted", result.notification_id, None, None,
                                    inp.tenant, inp.user_id, inp.kind))
        if inbox is None or result.inbox_seq is None:
            return
        item = item_view(InboxItem(result.inbox_seq, result.notification_id, inp.kind,
                                   inbox.title, inbox.body, at, None, None))
        self.hub.publish(inp.tenant, inp.user_id,
                         Event("item", item, result.inbox_seq),
                         Event("badge", {"unread": result.badge}))

    async def accept(self, inp: AcceptInput) -> AcceptResult:
        now = self.clock.now_ms()
        self.quotas.accepts(self.cfg, inp.tenant, now)
        nid = new_id("n_", now)
        inbox = await self.prepare(inp, nid)
        plan, ttl = self.planner(inp), self.ttl_sec(inp)
        ticket = self.turns.enter(inp.tenant)  # a single write goes at once (engine/fair.py)
        try:
            result = await self.store.accept(inp, nid, plan, ttl, inbox)
        finally:
            self.turns.leave(ticket)
        return self.settle(inp, result, inbox)

    async def accept_many(self, inps: list[AcceptInput]) -> list[AcceptResult | DomainError]:
        """Each input accepted as `accept` would, in order, all in one write (one commit, one
        trip through the writer); an answer or a refusal per input, in order. Overloaded or a
        storage fault refuses the whole batch, before anything is written."""
        if inps:
            self.quotas.batch_items(self.cfg, inps[0].tenant, len(inps), self.clock.now_ms())
        made: list[Acceptance | DomainError] = []
        for inp in inps:
            nid = new_id("n_", self.clock.now_ms())
            try:
                inbox = await self.prepare(inp, nid)
            except DomainError as e:
                made.append(e)
                continue
            made.append(Acceptance(inp, nid, self.planner(inp), self.ttl_sec(inp), inbox))
        todo = [a for a in made if isinstance(a, Acceptance)]
        done: Any = iter(())
        if todo:
            async with self.turns.batch(todo[0].inp.tenant, len(todo)):
                done = iter(await self.store.accept_many(todo))
        answers: list[AcceptResult | DomainError] = []
        for item in made:
            if isinstance(item, DomainError):
                answers.append(item)
                continue
            try:
                answers.append(self.settle(item.inp, next(done), item.inbox))
            except DomainError as e:
                answers.append(e)
        return answers

    def settle(self, inp: AcceptInput, result: AcceptResult,
               inbox: InboxEntry | None) -> AcceptResult:
        """After the commit: open streams hear of a new item (the scanner has its due times
        from the commit already); a conflict is refused."""
        if result.created:
            self.announce(inp, result, inbox)
            result = self._held(inp, result)
        if result.conflict:  # name what holds the key only to a key that may read it
            readable = not inp.key_kinds or result.existing_kind in inp.key_kinds
            by = f" by {result.notification_id}" if readable else ""
            raise DomainError("dedup_conflict", f"dedup key {inp.dedup_key!r} was already used "
                           f"with different input{by}", "dedup_key")
        return result

    def _held(self, inp: AcceptInput, result: AcceptResult) -> AcceptResult:
        """A new notification of a kind that always digests says `held`: its steps wait only
        for the claim to hold them for the person's digest (such a kind is never urgent)."""
        if self.cfg.kinds[inp.kind].always_digest and result.state.endswith("_pending"):
            return dataclasses.replace(result, state="held")
        return result
