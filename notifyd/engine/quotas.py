"""Per-tenant quotas ([quotas], each tenant's own in [tenants.NAME]): single accepts and batch
items per second, event recipients per day. Each is a bucket on the injected clock, full at
start, refilled evenly; what would take more than is left is refused whole with OverQuota
(429 quota_exceeded) and when enough will be back. A request larger than the bucket (a batch
bigger than a second's items) goes when the bucket is full and leaves it owing: the tenant then
waits until the debt is paid back, so over time the rate holds.

One process, in memory: a restart fills the buckets again, and several processes on one
database each count their own.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from notifyd.config import Config
from notifyd.core.errors import OverQuota

DAY_SEC = 86400


@dataclass
class Bucket:
    tokens: float
    at: int  # ms of the last refill

    def take(self, n: float, rate: float, depth: float, now: int) -> float:
        """Take `n` if the bucket holds them (or is full, for more than it holds): 0. Else
        the seconds until it would."""
        self.tokens = min(depth, self.tokens + max(0, now - self.at) / 1000 * rate)
        self.at = now
        need = min(n, depth)
        if self.tokens + 1e-9 >= need:
            self.tokens -= n
            return 0.0
        return (need - self.tokens) / rate


class Quotas:
    def __init__(self) -> None:
        self._buckets: dict[tuple[str, str], Bucket] = {}

    def accepts(self, cfg: Config, tenant: str, now: int) -> None:
        rate = cfg.quota(tenant, "accepts_per_sec")
        self._take(tenant, "accepts_per_sec", 1, rate, max(rate, 1.0),
                   "single notifications a second", now)

    def batch_items(self, cfg: Config, tenant: str, n: int, now: int) -> None:
        rate = cfg.quota(tenant, "batch_items_per_sec")
        self._take(tenant, "batch_items_per_sec", n, rate, max(rate, 1.0),
                   "batch items a second", now)

    def recipients_left(self, cfg: Config, tenant: str, now: int) -> int | None:
        """How many recipients the tenant's events may still reach now; None: no quota."""
        day = cfg.quota(tenant, "event_recipients_per_day")
        if not day:
            return None
        bucket = self._bucket(tenant, "event_recipients_per_day", day, now)
        bucket.take(0, day / DAY_SEC, day, now)
        return max(0, int(bucket.tokens))

    def spend_recipients(self, cfg: Config, tenant: str, n: int, now: int) -> None:
        day = cfg.quota(tenant, "event_recipients_per_day")
        if day:
            self._bucket(tenant, "event_recipients_per_day", day, now).tokens -= n

    def recipients_refused(self, cfg: Config, tenant: str, size: int, now: int) -> OverQuota:
        day = cfg.quota(tenant, "event_recipients_per_day")
        left = self.recipients_left(cfg, tenant, now) or 0
        if size > day:
            return OverQuota("quota_exceeded", f"the event's audience is {size} recipients, "
                             f"more than this tenant's events may reach in a whole day (quota "
                             f"event_recipients_per_day = {day:g}): it is never accepted as it "
                             "is; split the audience", DAY_SEC, "audience")
        wait = (size - left) / (day / DAY_SEC)
        return OverQuota("quota_exceeded", f"the event's audience is {size} recipients and "
                         f"this tenant's events may reach {left} more now (quota "
                         f"event_recipients_per_day = {day:g})", math.ceil(wait), "audience")

    def _bucket(self, tenant: str, what: str, depth: float, now: int) -> Bucket:
        found = self._buckets.get((tenant, what))
        if found is None:
            found = self._buckets[(tenant, what)] = Bucket(depth, now)
        return found

    def _take(self, tenant: str, what: str, n: int, rate: float, depth: float,
              says: str, now: int) -> None:
        if not rate:
            return
        wait = self._bucket(tenant, what, depth, now).take(n, rate, depth, now)
        if wait:
            raise OverQuota("quota_exceeded", f"this tenant may post {rate:g} {says} "
                            f"(quota {what}); retry after Retry-After", math.ceil(wait))
