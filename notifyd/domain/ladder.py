"""Kinds' ladders as data: turn a kind (or a request's fallback_chain) into dated steps. Pure.

Every step is planned at accept time. Quiet hours in the recipient's timezone move a non-urgent
step to the end of the quiet window, never drop it, and later steps keep their spacing; the
claim checks them again for retries and steps pulled forward. A step on a contact that is known dead is
planned as suppressed, and its window collapses so the next step takes its place in time.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from datetime import datetime, time, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from notifyd.core.catalog import Catalog, LadderStep
from notifyd.core.models import PlannedStep, Recipient, StepState
from notifyd.core.steps import Cause
from notifyd.core.text import is_digits


def parse_hhmm(text: str) -> time:
    """'22:30' -> time(22, 30); raises ValueError on anything else."""
    hh, sep, mm = text.partition(":")
    if not sep or len(hh) != 2 or len(mm) != 2 or not is_digits(hh + mm):
        raise ValueError(f"expected HH:MM, got {text!r}")
    return time(int(hh), int(mm))


def valid_timezone(name: str) -> bool:
    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError):  # OSError: 'America' is a folder
        return False
    return True


WEEKDAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")


def window_end(schedule: str, at_ms: int, timezone: str | None) -> int:
    """When the digest window holding the moment `at_ms` closes: the schedule's next boundary
    after it, on the recipient's wall clock ("daily 09:00" is 09:00 local every day, 23 or 25
    hours apart across a DST change). An unknown zone counts as UTC."""
    try:
        tz = ZoneInfo(timezone or "UTC")
    except (ZoneInfoNotFoundError, ValueError, OSError):
        tz = ZoneInfo("UTC")
    local = datetime.fromtimestamp(at_ms / 1000, tz)
    if schedule == "hourly":
        top = local.replace(minute=0, second=0, microsecond=0)
        return int((top.timestamp() + 3600) * 1000)
    words = schedule.split()
    at = parse_hhmm(words[-1])
    nxt = local.replace(hour=at.hour, minute=at.minute, second=0, microsecond=0)
    if words[0] == "weekly":
        nxt += timedelta(days=(WEEKDAYS.index(words[1]) - local.weekday()) % 7)
    step = timedelta(days=7 if words[0] == "weekly" else 1)
    while nxt.timestamp() * 1000 <= at_ms:
        nxt += step  # wall-clock arithmetic: the offset is the one of the new date
    return int(nxt.timestamp() * 1000)


def quiet_until(at_ms: int, recipient: Recipient | None) -> int | None:
    """If `at_ms` falls in the recipient's quiet hours, the end of that window; else None."""
    if recipient is None or not (recipient.quiet_start and recipient.quiet_end):
        return None
    tz = ZoneInfo(recipient.timezone or "UTC")
    start, end = parse_hhmm(recipient.quiet_start), parse_hhmm(recipient.quiet_end)
    if start == end:
        return None
    local = datetime.fromtimestamp(at_ms / 1000, tz)
    t = local.time()
    if start < end:  # same-day window, e.g. 13:00-14:00
        inside, end_day = start <= t < end, local.date()
    else:  # crosses midnight, e.g. 22:00-07:00
        inside = t >= start or t < end
        end_day = local.date() + timedelta(days=1) if t >= start else local.date()
    if not inside:
        return None
    first, second = _instants(datetime.combine(end_day, end), tz)
    ends = first if first > at_ms / 1000 else second  # in a repeated hour, the one after `at`
    return max(at_ms, int(ends * 1000))


def _instants(wall: datetime, tz: ZoneInfo) -> tuple[float, float]:
    """The instants a local wall time names: the same one twice, the two of an autumn repeat,
    or, for a time a spring change skips, the moment of the jump (twice)."""
    early = wall.replace(tzinfo=tz, fold=0).timestamp()
    late = wall.replace(tzinfo=tz, fold=1).timestamp()
    if early <= late:
        return early, late
    lo, hi = late, early  # skipped: find the first instant whose wall time reaches `wall`
    while hi - lo > 1:
        mid = (lo + hi) / 2
        if datetime.fromtimestamp(mid, tz).replace(tzinfo=None) >= wall:
            hi = mid
        else:
            lo = mid
    return hi, hi


def plan_steps(
    ladder: tuple[LadderStep, ...],
    catalog: Catalog,
    now_ms: int,
    recipient: Recipient | None,
    urgent: bool,
    disabled: Mapping[str, str],
) -> list[PlannedStep]:
    """Date every step. `disabled` maps the recipient's dead addresses' profile fields to why
    (recipients.dead_contacts)."""
    planned: list[PlannedStep] = []
    prev_at = now_ms
    prev_window: float | None = 0.0
    shift = 0  # how far quiet hours have pushed the ladder: after_sec steps keep their spacing
    quiet = not urgent and recipient is not None and bool(recipient.quiet_start)
    for no, step in enumerate(ladder):
        if step.after_sec is not None:
            at = now_ms + int(step.after_sec * 1000) + shift
        else:
            at = prev_at + int((prev_window or 0.0) * 1000)
        at = max(at, prev_at)  # never before the step ahead of it
        cause = _cause(no, step, prev_window)
        note = None
        address = catalog.address_fields.get(step.channel)
        dead = disabled.get(address) if address is not None else None
        if dead is not None:
            planned.append(PlannedStep(no, step.channel, at, StepState.SUPPRESSED,
                                       reason=f"suppression_list: {dead}", cause=cause))
            prev_at, prev_window = at, 0.0
            continue
        if quiet:
            try:
                moved = quiet_until(at, recipient)
            except (ValueError, KeyError, OSError):  # a zone this host no longer knows
                moved, quiet = None, False
            if moved is not None and recipient is not None:
                note = f"{quiet_label(recipient)}: moved from {_hhmm(at, recipient)}"
                shift += moved - at
                at = moved
        planned.append(PlannedStep(no, step.channel, at, note=note, cause=cause))
        prev_at, prev_window = at, step.timeout_sec
    return planned


def _cause(no: int, step: LadderStep, prev_window: float | None) -> Cause | None:
    """Why a step is due when it is, kept on the step for the timeline: after_sec from accept,
    when the step before it ends its window, or (None) at accept."""
    if step.after_sec is not None:
        return _after(step.after_sec)
    if no == 0:
        return None
    return _window(no - 1, prev_window or 0.0)


@functools.lru_cache(maxsize=1024)
def _after(sec: float) -> Cause:  # a ladder's causes are few: made once, not per accept
    return Cause(after_sec=sec)


@functools.lru_cache(maxsize=1024)
def _window(of: int, sec: float) -> Cause:
    return Cause(window_of=of, window_sec=sec)


def restart_windows(sent_no: int, at: int,
                    later: list[tuple[int, int, Cause]]) -> list[tuple[int, int]]:
    """Step `sent_no` went out at `at`: a window measured from it starts now, not when it was
    planned, so a send held back by a rate limit, a breaker or retries never eats the next
    channel's wait. `later` is the pending steps after it, in order, with their planned time and
    cause; each that must move, with its new time. Later steps keep their order and spacing."""
    moves = []
    prev_no, prev_at = sent_no, at
    for step_no, send_after, cause in later:
        due = prev_at + int(cause.window_sec * 1000) if cause.window_of == prev_no else prev_at
        if due <= send_after:
            break
        moves.append((step_no, due))
        prev_no, prev_at = step_no, due
    return moves


def quiet_label(r: Recipient) -> str:
    return f"quiet hours {r.quiet_start}-{r.quiet_end} {r.timezone or 'UTC'}"


def _hhmm(at_ms: int, recipient: Recipient | None) -> str:
    tz = ZoneInfo((recipient.timezone if recipient else None) or "UTC")
    return datetime.fromtimestamp(at_ms / 1000, tz).strftime("%Y-%m-%d %H:%M")
