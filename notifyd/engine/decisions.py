"""The decisions feed: what the engine decides, live, for whoever follows it (GET
/v1/decisions/stream, `notifyd tail`). Ingest tells of an accept, the scanner of each claim
decision, the sender of each send and its outcome, after they commit; a follower sees those of
its key's tenant and kinds that its filter picks.

Nothing is kept: a follower sees what happens while it follows (`inspect` has the history). Each
has a bounded queue; one that falls behind loses the newest entries, counted, and is told how
many, so a slow terminal never holds memory or slows the engine. Publishing to nobody costs a
dict lookup.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass

from notifyd.core.errors import OverQuota
from notifyd.core.text import iso
from notifyd.shapes.notifications import Decision

QUEUE_MAX = 1000  # entries a follower may lag behind before it loses some
FOLLOWERS_MAX = 32  # open feeds at once, across every tenant
RETRY_SEC = 10  # a tenant at its share: when it may try again


@dataclass(frozen=True, slots=True)
class Entry:
    """One decision: what, when, about which step (step_no None: the notification)."""

    at: int
    what: str  # accepted, sending, sent, failed, unknown, rejected, dead, cancelled, ...
    notification_id: str
    step_no: int | None
    channel: str | None
    tenant: str
    user_id: str
    kind: str
    reason: str | None = None

    def view(self) -> Decision:
        return Decision(at=iso(self.at), decision=self.what,
                        notification_id=self.notification_id, step_no=self.step_no,
                        channel=self.channel, kind=self.kind, user_id=self.user_id,
                        reason=self.reason)


@dataclass(frozen=True, slots=True)
class Filter:
    """What a follower sees: its key's tenant, and of it the kinds the key may see (none: all),
    narrowed by a kind, a channel and a user if given."""

    tenant: str
    key_kinds: tuple[str, ...] = ()
    kind: str | None = None
    channel: str | None = None
    user_id: str | None = None

    def picks(self, e: Entry) -> bool:
        return (e.tenant == self.tenant and (not self.key_kinds or e.kind in self.key_kinds)
                and self.kind in (None, e.kind) and self.channel in (None, e.channel)
                and self.user_id in (None, e.user_id))


class Follower:
    def __init__(self, picks: Filter) -> None:
        self.filter = picks
        self.queue: asyncio.Queue[Entry] = asyncio.Queue(QUEUE_MAX)
        self.lost = 0  # entries dropped since the follower was last told

    def offer(self, entry: Entry) -> None:
        if not self.filter.picks(entry):
            return
        try:
            self.queue.put_nowait(entry)
        except asyncio.QueueFull:
            self.lost += 1

    async def next(self, timeout: float, *stops: asyncio.Event) -> Entry | None:
        """The next entry; None after `timeout` of quiet or once any of `stops` is set."""
        if not self.queue.empty():
            return self.queue.get_nowait()
        get = asyncio.ensure_future(self.queue.get())
        waits = {get, *(asyncio.ensure_future(s.wait()) for s in stops)}
        try:
            await asyncio.wait(waits, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for w in waits:
                w.cancel()
        if get.done() and not get.cancelled():
            return get.result()
        with contextlib.suppress(asyncio.QueueEmpty):  # taken as the wait was cancelled
            return self.queue.get_nowait()
        return None

    def take_lost(self) -> int:
        lost, self.lost = self.lost, 0
        return lost


class Feed:
    def __init__(self) -> None:
        self.followers: set[Follower] = set()

    def follow(self, picks: Filter, share: float = 1.0) -> Follower | None:
        """A new follower; None when FOLLOWERS_MAX are open; OverQuota when its tenant holds
        `share` of them (quotas.stream_share)."""
        if len(self.followers) >= FOLLOWERS_MAX:
            return None
        most = max(1, int(FOLLOWERS_MAX * share))
        if sum(f.filter.tenant == picks.tenant for f in self.followers) >= most:
            raise OverQuota("too_many_streams", f"this tenant follows {most} decision streams, "
                            f"its share of the {FOLLOWERS_MAX} (quotas.stream_share)", RETRY_SEC)
        follower = Follower(picks)
        self.followers.add(follower)
        return follower

    def leave(self, follower: Follower) -> None:
        self.followers.discard(follower)

    def publish(self, *entries: Entry) -> None:
        for follower in self.followers:
            for entry in entries:
                follower.offer(entry)
