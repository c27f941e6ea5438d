"""What a notification looks like to people: the API's status shape and `inspect`'s timeline.

Both are derived from the rows alone, so support can answer "why did this person get this, or
not?" without logs. Pure functions over the store's records.
"""

from __future__ import annotations

from typing import Any

from notifyd.models import OPEN_STEP_STATES, StepState, iso
from notifyd.store import Notification, Step


def delivered_via(n: Notification) -> str | None:
    for wanted in (StepState.DELIVERED, StepState.SENT):
        for s in n.steps:
            if s.state == wanted:
                return s.channel
    return None


def total_time_ms(n: Notification) -> int | None:
    """From accept to resolution, or to the last step's end; None while the ladder is open."""
    if n.resolved_at is not None:
        return n.resolved_at - n.created_at
    if any(s.state in OPEN_STEP_STATES for s in n.steps):
        return None
    return max(s.updated_at for s in n.steps) - n.created_at


def status_view(n: Notification) -> dict[str, Any]:
    """The API's status shape (seed 001), with every step and its attempts."""
    resolution = None
    if n.resolved_at is not None:
        resolution = {"resolution": n.resolution, "resolved_at": iso(n.resolved_at),
                      "resolved_by": n.resolved_by}
    return {
        "notification_id": n.id,
        "user_id": n.user_id,
        "kind": n.kind,
        "dedup_key": n.dedup_key,
        "created_at": iso(n.created_at),
        "expires_at": iso(n.expires_at),
        "current_state": n.state,
        "delivered_via": delivered_via(n),
        "resolution": resolution,
        "steps": [_step_view(s) for s in n.steps],
        "total_time_ms": total_time_ms(n),
    }


def _step_view(s: Step) -> dict[str, Any]:
    return {
        "step_no": s.step_no,
        "channel": s.channel,
        "status": s.state,
        "send_after": iso(s.send_after),
        "attempts": s.attempts,
        "reason": s.reason,
        "note": s.note,
        "provider_ref": s.provider_ref,
        "updated_at": iso(s.updated_at),
        "attempt_log": [{
            "attempt": a.attempt_no, "started_at": iso(a.started_at),
            "ended_at": iso(a.ended_at), "outcome": a.outcome, "reason": a.reason,
            "provider_ref": a.provider_ref} for a in s.attempt_log],
    }


def timeline(n: Notification) -> list[str]:
    """Every decision on the notification, in time order, with its reason."""
    events: list[tuple[int, int, str]] = [(n.created_at, 0, (
        f"accepted from key {n.key_name!r}: kind {n.kind}, {len(n.steps)} steps, "
        f"expires {iso(n.expires_at)}"))]
    for s in n.steps:
        events += _step_events(n, s)
    if n.resolved_at is not None:
        events.append((n.resolved_at, 3, f"resolved {n.resolution!r} by {n.resolved_by}"))
    events.sort(key=lambda e: (e[0], e[1]))
    head = (f"{n.id}  tenant={n.tenant} user={n.user_id} kind={n.kind} "
            f"dedup_key={n.dedup_key}")
    lines = [head] + [f"  {iso(at)}  {text}" for at, _, text in events]
    lines.append(f"  state now: {n.state}")
    return lines


def _step_events(n: Notification, s: Step) -> list[tuple[int, int, str]]:
    tag = f"step {s.step_no} {s.channel}"
    planned = f"{tag}: due {iso(s.send_after)}"
    if s.note:
        planned += f" ({s.note})"
    events = [(n.created_at, 1, planned)]
    for a in s.attempt_log:
        events.append((a.started_at, 2, f"{tag}: attempt {a.attempt_no} started"))
        if a.ended_at is not None:
            ref = f" ref={a.provider_ref}" if a.provider_ref else ""
            why = f": {a.reason}" if a.reason else ""
            events.append((a.ended_at, 3, f"{tag}: attempt {a.attempt_no} {a.outcome}{why}{ref}"))
    why = f": {s.reason}" if s.reason else ""
    if s.state not in OPEN_STEP_STATES:
        events.append((s.updated_at, 4, f"{tag}: {s.state}{why}"))
    elif s.reason:  # still open, and something decided why it waits (a retry, quiet hours, ...)
        events.append((s.updated_at, 4, f"{tag}: {s.state}{why}, due {iso(s.send_after)}"))
    return events
