"""A notification's ladder on a time axis, for its console page: one row per step, each mark
placed by its time between the accept and the last thing that happened (or now, while open).
Pure, over the rows `inspect` reads; the page draws the marks with CSS."""

from __future__ import annotations

from dataclasses import dataclass

from notifyd.core.models import OPEN_STEP_STATES
from notifyd.core.records import Notification, Step
from notifyd.core.text import iso
from notifyd.domain.views import Digests, step_ends


@dataclass(frozen=True)
class Mark:
    at: int
    what: str  # planned, moved, attempt, receipt, end, resolved
    label: str
    left: float = 0.0  # percent of the axis
    width: float = 0.0  # percent: an attempt's span


@dataclass(frozen=True)
class Row:
    step_no: int
    channel: str
    state: str
    reason: str | None
    evidence: str | None
    pref_version: int | None
    marks: tuple[Mark, ...]


@dataclass(frozen=True)
class Axis:
    start: int
    end: int
    rows: tuple[Row, ...]
    resolved: Mark | None
    ticks: tuple[Mark, ...]


def axis(n: Notification, now: int, digests: Digests | None = None) -> Axis:
    """Every step's marks on one axis from the accept to the last mark (now, while open); a
    held step's digest (`digests`, as views.timeline reads them) among them."""
    rows = [(s, _marks(n, s, digests or {}, now)) for s in n.steps]
    times = [n.created_at, *(m.at for _, marks in rows for m in marks)]
    if n.resolved_at is not None:
        times.append(n.resolved_at)
    if any(s.state in OPEN_STEP_STATES for s in n.steps):
        times.append(now)
    start, end = n.created_at, max(times)
    span = max(end - start, 1)

    def place(m: Mark) -> Mark:
        return Mark(m.at, m.what, m.label, round(100 * (m.at - start) / span, 2),
                    round(100 * m.width / span, 2))

    placed = tuple(Row(s.step_no, s.channel, str(s.state), s.reason, s.evidence, s.pref_version,
                       tuple(place(m) for m in marks)) for s, marks in rows)
    resolved = None if n.resolved_at is None else place(Mark(
        n.resolved_at, "resolved", f"resolved {n.resolution!r} by {n.resolved_by}"))
    ticks = tuple(place(Mark(start + span * i // 4, "tick", iso(start + span * i // 4) or ""))
                  for i in range(5))
    return Axis(start, end, placed, resolved, ticks)


def _marks(n: Notification, s: Step, digests: Digests, now: int) -> list[Mark]:
    planned = s.send_after if s.planned_at is None else s.planned_at
    marks = [Mark(planned, "planned", f"planned for {iso(planned)}"
                  + (f"; {s.plan_note}" if s.plan_note else ""))]
    marks += [Mark(e.at, "moved", e.what) for e in n.events if e.step_no == s.step_no]
    for a in s.attempt_log:
        end = a.ended_at if a.ended_at is not None else a.started_at
        said = f"attempt {a.attempt_no}: {a.outcome or 'in flight'}" + (
            f" ({a.reason})" if a.reason else "")
        marks.append(Mark(a.started_at, "attempt", said, width=end - a.started_at))
    marks += [Mark(p.received_at, "receipt", f"{p.provider} says {p.event}"
                   + (f" {p.detail}" if p.detail else "")) for p in n.proofs
              if p.step_no == s.step_no]
    marks += [Mark(at, "end", text) for at, text in step_ends(s, digests, now)]
    return marks
