"""Replays: dead or unknown steps back to pending under their key and frozen payload, one step,
one notification's, or every dead step a filter picks, a short write at a time. The command line
(`notifyd replay`) and the operator console both come through here; each move is recorded on
the notification's timeline with who asked.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from notifyd.core.catalog import Catalog
from notifyd.core.models import REPLAYED
from notifyd.core.text import plural, them
from notifyd.domain.recipients import dead_reason, has_contact
from notifyd.store import DeadLetterStore, DeadMatch, LookupStore, ProfileStore, ReplayStore

# Steps per write of a bulk replay: about 25 ms of the writer each (measured on 30k dead steps,
# two shared cores), so the daemon's own writes (accepts, claims) go between the batches.
BATCH = 200


class BulkReplayStore(DeadLetterStore, ReplayStore, Protocol):
    """What a bulk replay uses: the dead steps a page at a time, and the replay."""


class CheckStore(LookupStore, ProfileStore, Protocol):
    """What the check after a replay reads: the notification and its recipient."""


@dataclass(frozen=True)
class Replayed:
    matched: int  # dead steps the filter picked when the replay began
    replayed: int
    late: int  # of them, of notifications past their time to live: the claim ends them expired


async def replay_dead(store: BulkReplayStore, match: DeadMatch, by: str,
                      progress: Callable[[int], None] = lambda n: None) -> Replayed:
    """Every dead step `match` picks, back to pending a batch at a time (each its own short
    write, so a running daemon's accepts and claims go between), along a cursor: the batches
    already replayed are never read again. `progress` hears the size of each batch done."""
    total = await store.dead_count(match)
    replayed = late = 0
    after = None
    while total and (page := await store.dead_steps(match, after, BATCH)):
        replayed += await store.replay_steps([d.key for d in page], by)
        late += sum(d.expires_at <= match.until for d in page)
        progress(len(page))
        after = page[-1]
    return Replayed(total, replayed, late)


def replayed_said(done: Replayed) -> str:
    """What a bulk replay did, in one line: how many, and those that will end expired."""
    late = late_said(done)
    return f"replayed {plural(done.replayed, 'dead step')}" + (f"; {late}" if late else "")


def late_said(done: Replayed) -> str:
    """The replayed steps of notifications past their time to live, in words (the claim ends
    them expired, unsent); '' when there are none."""
    n = done.late
    if not n:
        return ""
    owner = "a notification past its" if n == 1 else "notifications past their"
    belong = "belongs" if n == 1 else "belong"
    if n >= done.replayed:
        who = "it" if n == 1 else f"all {n}"
        return f"{who} {belong} to {owner} time to live: the claim ends {them(n)} expired, unsent"
    those = "it" if n == 1 else "those"
    return (f"{n} of them {belong} to {owner} time to live: the claim ends {those} expired, "
            "unsent")


async def blocked(store: CheckStore, nid: str, catalog: Catalog) -> list[str]:
    """Replayed steps that the claim will suppress as things stand, and why: replaying does not
    bring a dead address back, and saying nothing would look like a send."""
    n = await store.get_notification(nid)
    if n is None:
        return []
    r = await store.get_recipient(n.tenant, n.user_id)
    out = []
    for s in n.steps:
        contact = catalog.contact(s.channel)
        if s.reason != REPLAYED or contact is None:
            continue
        dead = dead_reason(r, contact)
        if not has_contact(r, contact):
            out.append(f"step {s.step_no} ({s.channel}) will be suppressed: the user has no "
                       f"{contact}")
        elif dead is not None:
            out.append(f"step {s.step_no} ({s.channel}) will be suppressed: its {contact} is "
                       f"disabled ({dead}); a new address for the user makes it live")
    return out
