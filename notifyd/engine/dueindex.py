"""The scanner's due index: when each route (a channel's lane) next has a step due.

Every commit that creates or moves a due time tells it (store.on_due: an accept's steps, a retry,
a postponement, a step pulled forward or its window restarted, a replay, a lease taken over), so
the scanner sleeps until the earliest and claims only the routes it names, instead of asking the
database when to look. It is read again from the rows (`rebuild`: store.due_times) at start,
after a reload, every scanner.sweep_sec, and when time passes the last due time a read brought
back whole. `EVERY` stands for every route: another process's signal (PostgreSQL), a lease's end.

A time here only says when to look: the claim reads each step again in its transaction and
decides there (a resolution, the stop condition, a sibling in flight), so a stale time costs one
claim that finds nothing, and a time never told waits for the next read of the rows at most.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable

from notifyd.core.models import Due, DueTimes

Key = tuple[str, str] | None  # (channel, lane), or EVERY
EVERY: Key = None


class DueIndex:
    def __init__(self) -> None:
        self._heaps: dict[Key, list[int]] = {}  # each key's distinct due times, earliest first
        self._marks: dict[Key, dict[int, int]] = {}  # key -> time -> the mark that last told it
        self.seq = 0  # marks told so far: a claim settles only what was told before it read

    def add(self, key: Key, at: int) -> None:
        self.seq += 1
        marks = self._marks.get(key)
        if marks is None:
            marks = self._marks[key] = {}
            self._heaps[key] = []
        if at not in marks:
            heapq.heappush(self._heaps[key], at)
        marks[at] = self.seq

    def add_dues(self, dues: Iterable[Due]) -> int | None:
        """What a commit made due; the earliest of it."""
        first = None
        for at, channel, lane in dues:
            self.add((channel, lane), at)
            first = at if first is None or at < first else first
        return first

    def add_read(self, read: DueTimes) -> None:
        """The rows' due times, as a rebuild read them (added: a mark told since stays)."""
        for route, times in read.times.items():
            for at in times:
                self.add((route.channel, str(route.lane)), at)
        if read.first_lease_end is not None:
            self.add(EVERY, read.first_lease_end)

    def first(self, key: Key) -> int | None:
        heap = self._heaps.get(key)
        return heap[0] if heap else None

    def keys(self) -> list[Key]:
        return [k for k, heap in self._heaps.items() if heap]

    def due(self, now: int) -> list[Key]:
        """The keys with a time at or before `now`."""
        return [k for k, heap in self._heaps.items() if heap and heap[0] <= now]

    def settle(self, key: Key, now: int, upto: int) -> None:
        """A claim read every step of `key` due by `now`: its times up to `now` go, but for
        those told after mark `upto` (a commit the claim may not have seen)."""
        heap, marks = self._heaps.get(key), self._marks.get(key)
        if not heap or marks is None:
            return
        kept = []
        while heap and heap[0] <= now:
            at = heapq.heappop(heap)
            if marks[at] > upto:
                kept.append(at)
            else:
                del marks[at]
        for at in kept:
            heapq.heappush(heap, at)

    def __len__(self) -> int:
        return sum(len(h) for h in self._heaps.values())
