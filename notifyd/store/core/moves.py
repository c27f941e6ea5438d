"""A step moved after it was planned: pulled forward when the step before it ends early, or its
window restarted when the step it waits on went out; each move an event of the timeline."""

from __future__ import annotations

from notifyd.core.models import Rules
from notifyd.core.steps import Cause, window_moved
from notifyd.core.text import iso
from notifyd.store.core.dues import mark_open
from notifyd.store.core.tx import Later, Tx


def pull_next(tx: Tx, nid: str, what: str, no: int, at: int) -> None:
    """The step after `no` becomes due at `at` if it was due later, because of `what` (step 0
    dead, step 0 bounced); an event says why."""
    why = f"pulled forward: {what}"
    pulled = tx.all(tx.q.PULL_NEXT, (at, why, tx.now, nid, at, nid, no))
    for row in pulled:
        tx.send(tx.q.INSERT_EVENT, (nid, row["step_no"], tx.now, f"{why}; due {iso(at)}"))
    if pulled:
        mark_open(tx, nid)


def start_window(tx: Tx, nid: str, no: int, rules: Rules, pending: Later) -> None:
    """Step `no` went out now: the later steps whose windows run from it move as the ladder's
    rule says (rules.windows; `pending`: SELECT_LATER_PENDING of them, sent). Each keeps its
    planned cause; the move is an event, and the step's note, saying from what its time now
    counts, so the timeline draws the plan that runs and not only the one made at accept."""
    later = [(r["step_no"], r["send_after"], Cause.parse(r["cause"]))
             for r in pending.rows()]
    planned = {step_no: (at, cause) for step_no, at, cause in later}
    before, before_at = no, tx.now  # the step each moved one waits on, and its time now
    for step_no, at in rules.windows(no, tx.now, later):
        was, cause = planned[step_no]
        why = window_moved(cause, before, before_at, before == no, at, was)
        tx.send(tx.q.DELAY_STEP, (at, why, tx.now, nid, step_no))
        tx.send(tx.q.INSERT_EVENT, (nid, step_no, tx.now, why))
        before, before_at = step_no, at

