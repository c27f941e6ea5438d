"""Due times a script creates or moves, told to the engine's due index after the commit.

A script marks each step it makes due (an accept's steps, a retry, a postponement, a step pulled
forward or its window restarted, a replay, a lease taken over) on `tx.dues`; the writer hands a
committed batch's marks to `Writer.on_due` on the event loop. A mark only says when to look: the
claim reads every step again in its own transaction, so a mark too many costs one claim that
finds nothing, and one missed waits for the index's next read of the database.
"""

from __future__ import annotations

from notifyd.store.core.tx import Tx


def mark(tx: Tx, at: int, channel: str, lane: str) -> None:
    tx.dues.append((at, channel, str(lane)))


def mark_open(tx: Tx, nid: str) -> None:
    """Every open step of the notification, as this transaction leaves it (a step waiting on
    a sibling in flight falls due to the index again when that sibling's send ends)."""
    tx.due_rows(tx.q.SELECT_OPEN_DUE, (nid,))
