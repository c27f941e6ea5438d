"""What a notification looks like to people: the API's status shape and `inspect`'s timeline.

Both are derived from the rows alone, so support can answer "why did this person get this, or
not?" without logs. Pure functions over the store's records.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import cast

from msgspec.structs import asdict

from notifyd.core.models import OPEN_STEP_STATES, AcceptResult, ResolveResult, StepState
from notifyd.core.records import Event, InboxItem, Notification, Step
from notifyd.core.steps import Cause, is_window_move
from notifyd.core.text import iso, plural
from notifyd.shapes import notifications as shapes
from notifyd.shapes.people import InboxItem as InboxItemView

PROVEN = ("delivered", "shown", "opened")
WENT_OUT = ("sent", "delivered", "presumed_delivered")  # how a ladder that went out ended
# The digests that carried a notification's steps, by id, as the caller read them (None: not
# on record any more): what became of each is part of the item's story.
Digests = Mapping[str, Notification | None]


def delivered_via(n: Notification) -> str | None:
    """The channel a receipt proved delivery on; None while nothing proves it (a provider
    taking a message is not the person getting it: sent_via says where it went)."""
    return next((s.channel for s in n.steps if s.evidence in PROVEN), None)


def sent_via(n: Notification) -> list[str]:
    """The channels of the steps a provider took, in ladder order (proved or not)."""
    return [s.channel for s in n.steps if s.state in (StepState.SENT, StepState.DELIVERED)]


def timed_out(n: Notification, s: Step) -> bool:
    """A step that went out but proved nothing before the ladder moved past it (its window,
    timeout_sec, ended): a later step was tried. The last step sent is not timed out: it is sent,
    and presumed delivered at the time to live unless a receipt says otherwise."""
    if s.state is not StepState.SENT or s.evidence in PROVEN:
        return False
    return any(t.attempts for t in n.steps if t.step_no > s.step_no)


def total_time_ms(n: Notification) -> int | None:
    """From accept to resolution, or to the last step's end; None while the ladder is open."""
    if n.resolved_at is not None:
        return n.resolved_at - n.created_at
    if not n.steps or any(s.state in OPEN_STEP_STATES for s in n.steps):
        return None  # open, or its history pruned
    return max(s.updated_at for s in n.steps) - n.created_at


def accepted_view(r: AcceptResult) -> shapes.Accepted:
    """What an accept answers: the notification's id and state, and whether this made it."""
    return shapes.Accepted(notification_id=r.notification_id, state=r.state, created=r.created)


def accepted_item(r: AcceptResult) -> shapes.AcceptedItem:
    """A batch's answer for an accepted item: the single call's, with its status."""
    return shapes.AcceptedItem(status=202 if r.created else 200, **asdict(accepted_view(r)))


def resolved_view(r: ResolveResult) -> shapes.Resolved:
    """What a resolution answers: the one that won (this, or an earlier one)."""
    return shapes.Resolved(notification_id=r.notification_id, resolution=r.resolution,
                           resolved_at=iso(r.resolved_at), changed=r.changed,
                           cancelled_steps=r.cancelled_steps)


def resolved_item(r: ResolveResult) -> shapes.ResolvedItem:
    return shapes.ResolvedItem(status=200, **asdict(resolved_view(r)))


def carried_by(n: Notification) -> list[str]:
    """The ids of the digests that carried n's steps, each once: what the views want read."""
    return list(dict.fromkeys(s.digest_id for s in n.steps if s.digest_id))


def digest_view(digest_id: str, d: Notification | None, now: int) -> shapes.DigestView:
    """The digest that carried a step, as its status document shows it: whether it went out."""
    return shapes.DigestView(notification_id=digest_id,
                             current_state=None if d is None else d.state_at(now),
                             sent_via=[] if d is None else sent_via(d))


def carried(digest_id: str, d: Notification | None, now: int) -> str:
    """What became of the digest that carried an item, in words: went out, not yet, or not."""
    if d is None:
        return f"carried in digest {digest_id}, which is no longer on record"
    state, via = d.state_at(now), sent_via(d)
    if via:
        return f"went out in digest {digest_id} by {', '.join(via)} ({state})"
    if d.pruned_at is not None and state in WENT_OUT:  # its history aged out: how it ended
        return f"went out in digest {digest_id} ({state})"
    if any(s.state in OPEN_STEP_STATES for s in d.steps):
        return f"carried in digest {digest_id}, not sent yet ({state})"
    return f"carried in digest {digest_id}, which did not go out ({state})"


def said(state: str, reason: str | None) -> str:
    """A step's state and its reason, the state said once ("held for the daily digest ...",
    not "held: held for ..."; "dead: HTTP 500")."""
    if not reason:
        return state
    rest = unsaid(state, reason)
    return f"{state} {rest}" if rest != reason else f"{state}: {reason}"


def unsaid(state: str, reason: str) -> str:
    """The reason without the state it starts with, if it does: "for the daily digest ..." of
    held "held for the daily digest ..."."""
    first, _, rest = reason.partition(" ")
    return rest if first == state and rest else reason


def step_ends(s: Step, digests: Digests, now: int) -> list[tuple[int, str]]:
    """When and how a step ended, in words: one end, or a hold and then its digest's carry; none
    while it is open."""
    if s.state in OPEN_STEP_STATES:
        return []
    if s.state is StepState.DIGESTED and s.digest_id is not None:
        held = s.held_at if s.held_at is not None else s.updated_at
        return [(held, said(StepState.HELD, s.reason)),
                (s.updated_at, f"digested: {carried(s.digest_id, digests.get(s.digest_id), now)}")]
    return [(s.updated_at, said(s.state, s.reason))]


def status_view(n: Notification, now: int = 0, digests: Digests | None = None) -> shapes.Status:
    """The API's status shape (GET /v1/notifications/{id}), with every step, its attempts and
    its evidence, and the digest that carried a step (`digests`: read by the caller)."""
    resolution = None
    if n.resolved_at is not None:
        resolution = shapes.ResolutionView(resolution=n.resolution,
                                           resolved_at=iso(n.resolved_at),
                                           resolved_by=n.resolved_by)
    return shapes.Status(
        notification_id=n.id,
        user_id=n.user_id,
        kind=n.kind,
        dedup_key=n.dedup_key,
        created_at=iso(n.created_at),
        send_at=iso(n.send_at),
        expires_at=iso(n.expires_at),
        current_state=n.state_at(now),
        delivered_via=delivered_via(n),
        sent_via=sent_via(n),
        resolution=resolution,
        steps=[_step_view(n, s, digests or {}, now) for s in n.steps],
        total_time_ms=total_time_ms(n),
        pruned_at=iso(n.pruned_at),
        event_id=n.event_id,
    )


def _step_view(n: Notification, s: Step, digests: Digests, now: int) -> shapes.Step:
    return shapes.Step(
        step_no=s.step_no,
        channel=s.channel,
        status=s.state,
        send_after=iso(s.send_after),
        attempts=s.attempts,
        reason=s.reason,
        note=s.note,
        provider_ref=s.provider_ref,
        template=s.template,
        pref_version=s.pref_version,
        evidence=cast(shapes.Evidence, s.evidence),
        timed_out=timed_out(n, s),
        digest=None if s.digest_id is None else digest_view(
            s.digest_id, digests.get(s.digest_id), now),
        receipts=[shapes.ReceiptView(provider=p.provider, event=p.event,
                                     occurred_at=iso(p.occurred_at),
                                     received_at=iso(p.received_at), detail=p.detail)
                  for p in n.proofs if p.step_no == s.step_no],
        updated_at=iso(s.updated_at),
        attempt_log=[shapes.AttemptView(
            attempt=a.attempt_no, started_at=iso(a.started_at), ended_at=iso(a.ended_at),
            outcome=a.outcome, reason=a.reason, provider_ref=a.provider_ref)
            for a in s.attempt_log],
    )


def item_view(item: InboxItem) -> InboxItemView:
    """An inbox item as a page, and a stream's item event, show it."""
    return InboxItemView(id=item.notification_id, kind=item.kind, title=item.title,
                         body=item.body, created_at=iso(item.created_at),
                         read=item.read_at is not None, read_at=iso(item.read_at),
                         archived=item.archived_at is not None)


def timeline(n: Notification, now: int = 0, digests: Digests | None = None) -> list[str]:
    """Every decision on the notification, in the order it happened, each dated by the row
    written at the time: the plan at accept, each move of a step as it happened (events), each
    attempt, each step's end (a held one's digest too: `digests`, read by the caller); every
    escalation names its cause."""
    # (when, step or -1, order within the step, text): what shares a millisecond reads in the
    # order it happened, a step's end before the pull it causes in the step after it.
    ladder = "its steps pruned" if n.pruned_at is not None else plural(len(n.steps), "step")
    scheduled = "" if n.send_at is None else f", scheduled: the ladder starts {iso(n.send_at)}"
    events: list[tuple[int, int, int, str]] = [(n.created_at, -1, 0, (
        f"accepted from key {n.key_name!r}: kind {n.kind}, {ladder}{scheduled}, "
        f"expires {iso(n.expires_at)}"))]
    if n.pruned_at is not None:
        events.append((n.pruned_at, -1, 2, (
            f"history pruned (retention): its steps, attempts, payloads and params are gone; "
            f"kept: its id, tenant, user, dedup key, request hash and how it ended "
            f"({n.outcome})")))
    for s in n.steps:
        moves = [e for e in n.events if e.step_no == s.step_no]
        events += [(at, s.step_no, order, text)
                   for at, order, text in _step_events(n, s, moves, digests or {}, now)]
    if n.resolved_at is not None:
        events.append((n.resolved_at, -1, 1, f"resolved {n.resolution!r} by {n.resolved_by}"))
    for p in n.proofs:  # evidence, dated when it reached notifyd (the provider's time beside it)
        said = f" (at the provider {iso(p.occurred_at)})" if p.occurred_at else ""
        detail = f" {p.detail}" if p.detail else ""
        events.append((p.received_at, p.step_no, 3, f"step {p.step_no}: {p.provider} says "
                       f"{p.event}{detail}{said}"))
    events.sort(key=lambda e: e[:3])
    head = (f"{n.id}  tenant={n.tenant} user={n.user_id} kind={n.kind} "
            f"dedup_key={n.dedup_key}") + (f" event={n.event_id}" if n.event_id else "")
    lines = [head] + [f"  {iso(at)}  {text}" for at, _, _, text in events]
    for s in n.steps:
        if timed_out(n, s):
            lines.append(f"  step {s.step_no} {s.channel}: timed out (sent; no receipt proved "
                         "delivery before the next step was tried)")
    lines.append(f"  state now: {n.state_at(now)}")
    return lines


def due_because(cause: Cause, happened: bool, start: str = "accept") -> str:
    """A step's planned cause in words: 'when step 0's 30 s window ends' (planned) or
    'step 0's 30 s window ended unresolved' (when it went). `start` names what the ladder
    counts from: accept, or a scheduled notification's send_at."""
    if cause.after_sec is not None:
        return f"{cause.after_sec:g} s after {start}" + (", unresolved" if happened else "")
    if cause.window_of is not None:
        step, sec = cause.window_of, cause.window_sec
        if sec == 0:
            return f"step {step} ended unresolved" if happened else f"when step {step} ends"
        return (f"step {step}'s {sec:g} s window ended unresolved" if happened
                else f"when step {step}'s {sec:g} s window ends")
    return f"at {start}"


def _step_events(n: Notification, s: Step, moves: list[Event], digests: Digests,
                 now: int) -> list[tuple[int, int, str]]:
    tag = f"step {s.step_no} {s.channel}"
    start = "accept" if n.send_at is None else "send_at"
    planned = f"{tag}: planned for {iso(s.send_after if s.planned_at is None else s.planned_at)}"
    planned += f" ({due_because(s.cause, False, start)})"
    if s.plan_note:
        planned += f"; {s.plan_note}"
    events = [(n.created_at, 1, planned)]
    events += [(e.at, 1, f"{tag}: {e.what}") for e in moves]
    for a in s.attempt_log:
        started = f"{tag}: attempt {a.attempt_no} started"
        if a.attempt_no == 1 and s.step_no > 0:  # an escalation: say what brought it on
            before = [e.what for e in moves if e.at <= a.started_at]
            moved = before[-1] if before and not is_window_move(before[-1]) else None
            started += f" ({moved or due_because(s.cause, True, start)})"
        if a.attempt_no == 1 and s.template:
            started += f"; message from template {s.template}"
        if a.attempt_no == 1 and s.pref_version is not None:
            started += f"; preferences v{s.pref_version}"
        events.append((a.started_at, 2, started))
        if a.ended_at is not None:
            ref = f" ref={a.provider_ref}" if a.provider_ref else ""
            why = f": {a.reason}" if a.reason else ""
            events.append((a.ended_at, 3, f"{tag}: attempt {a.attempt_no} {a.outcome}{why}{ref}"))
    events += [(at, 4 + i, f"{tag}: {text}") for i, (at, text) in enumerate(
        step_ends(s, digests, now))]
    if s.state in OPEN_STEP_STATES and s.reason and (not moves or s.updated_at > moves[-1].at):
        # open: why it waits now
        events.append((s.updated_at, 4, f"{tag}: {said(s.state, s.reason)}, due "
                                        f"{iso(s.send_after)}"))
    return events
