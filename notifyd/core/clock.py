"""Time, injected: logic takes `now` (epoch milliseconds); only the daemon reads the real clock."""

from __future__ import annotations

import time
from typing import Protocol


class Clock(Protocol):
    def now_ms(self) -> int: ...


class SystemClock:
    def now_ms(self) -> int:
        return time.time_ns() // 1_000_000


class MonotonicClock:
    """Milliseconds that only go forward, from an arbitrary start: for how late something ran,
    never for a time a row records."""

    def now_ms(self) -> int:
        return time.monotonic_ns() // 1_000_000


class FakeClock:
    """A clock tests move by hand."""

    def __init__(self, start_ms: int = 1_790_000_000_000) -> None:
        self.ms = start_ms

    def now_ms(self) -> int:
        return self.ms

    def advance(self, seconds: float) -> None:
        # Rounded, not truncated: advance((t - now) / 1000) must land on t, and x / 1000 * 1000
        # is x less a hair for some x (a test moving to a window's end stopped 1 ms short).
        self.ms += round(seconds * 1000)
