"""The limits on failed console sign-ins, kept in memory (a restart forgets them; a guesser gains
one more round of the per-address limit, no more than a new address would give).

Guessing the console password is what they hold against (admin keys are 32 random bytes), so
they count three things, each in its own window:

- an address: past console.max_failed_sign_ins in a minute, its sign-ins are refused, unchecked,
  until the minute is over;
- a tenant: past console.max_failed_sign_ins_per_tenant failed passwords in an hour, each
  further one doubles the wait before the tenant's next sign-in is checked (1 s, 2 s, ... at most
  BACKOFF_MAX_MS): guessing from 200 addresses gets no further than from one;
- a browser that signed in before: it carries a device cookie (OWASP's "device cookies": the
  tenant, and which password, signed), which passes the first two, so an operator gets in while
  someone guesses from their address or from many; its own failures lock that cookie alone.

So a correct credential goes through a lockout only from a browser that proved it knew one
before; a guesser has no such cookie, and every answer to it while locked is the same refusal,
right credential or wrong: the lockout opens no way to tell them apart.
"""

from __future__ import annotations

import logging
from collections import deque

from aiohttp import web

from notifyd.config import ConsoleConfig
from notifyd.core.clock import Clock
from notifyd.core.logs import printable
from notifyd.http.errors import ApiError

log = logging.getLogger("notifyd.console")
WINDOW_MS = 60_000  # failed sign-ins of an address, or of a browser, are counted this long
TENANT_WINDOW_MS = 3_600_000  # a tenant's failed passwords are counted this long
BACKOFF_FIRST_MS = 1000  # the wait after the tenant's limit is reached, doubled per failure
BACKOFF_MAX_MS = 15 * 60_000
MAX_KEPT = 10_000  # addresses (browsers, tenants) remembered at once: a flood forgets the oldest


class SignInRefused(ApiError):
    """A sign-in refused unchecked, and when to try again (Retry-After, whole seconds)."""

    def __init__(self, message: str | None, retry_after_ms: int) -> None:
        super().__init__("too_many_sign_ins", message)
        self.retry_after = _seconds(retry_after_ms)


def _seconds(ms: int) -> int:
    return max(1, -(-ms // 1000))  # rounded up: never "try again in 0 s"


class SignIns:
    """Failed sign-ins by address, by browser (a device cookie's nonce) and by tenant. An
    address's first failure of a minute is logged, and so is its lockout, and a tenant's reaching
    its limit: a few lines, however many tries."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self._addresses: dict[str, deque[int]] = {}
        self._devices: dict[str, deque[int]] = {}
        self._tenants: dict[str, deque[int]] = {}

    def check(self, address: str, tenant: str | None, device: str | None,
              cfg: ConsoleConfig) -> None:
        """Raise SignInRefused if this attempt may not be checked now. `device`: the nonce of
        the browser's device cookie, if it is one that may pass; `tenant`: the tenant whose
        password the attempt tries (None for an admin key, or a tenant there is not)."""
        now = self.clock.now_ms()
        if device is not None:
            times = _recent(self._devices, device, now, WINDOW_MS)
            if len(times) >= cfg.max_failed_sign_ins:
                raise SignInRefused("too many failed sign-ins from this browser; wait a "
                                    "minute", times[0] + WINDOW_MS - now)
            return
        times = _recent(self._addresses, address, now, WINDOW_MS)
        if len(times) >= cfg.max_failed_sign_ins:
            raise SignInRefused(None, times[0] + WINDOW_MS - now)
        wait = self._backoff(tenant, now, cfg.max_failed_sign_ins_per_tenant)
        if wait > 0:
            raise SignInRefused(f"too many failed sign-ins to this tenant's console; try again "
                                f"in {_seconds(wait)} s", wait)

    def _backoff(self, tenant: str | None, now: int, most: int) -> int:
        """How long the tenant's next sign-in waits: from its last failure, BACKOFF_FIRST_MS
        once it has `most` within the hour, doubled for each one past it."""
        if tenant is None:
            return 0
        times = _recent(self._tenants, tenant, now, TENANT_WINDOW_MS)
        past = len(times) - most
        if past < 0:
            return 0
        return times[-1] + min(BACKOFF_MAX_MS, BACKOFF_FIRST_MS << min(past, 20)) - now

    def failed(self, address: str, tenant: str | None, device: str | None,
               cfg: ConsoleConfig, why: str) -> None:
        """Count a failure: against the browser if it came with a device cookie that may
        pass, else against the address and (a password) the tenant."""
        now = self.clock.now_ms()
        if device is not None:
            if _count(self._devices, device, now, WINDOW_MS) == cfg.max_failed_sign_ins:
                log.warning("console: %d failed sign-ins within a minute from a browser that "
                            "signed in before (%s); it waits for the minute to end",
                            cfg.max_failed_sign_ins, printable(address))
            return
        n = _count(self._addresses, address, now, WINDOW_MS)
        if n == 1:
            log.warning("console: failed sign-in from %s: %s (more within a minute are "
                        "counted, not logged)", printable(address), why)
        elif n == cfg.max_failed_sign_ins:
            log.warning("console: %d failed sign-ins from %s within a minute; its sign-ins "
                        "are refused until the minute is over", n, printable(address))
        if tenant is not None:
            most = cfg.max_failed_sign_ins_per_tenant
            if _count(self._tenants, tenant, now, TENANT_WINDOW_MS, most + 21) == most:
                log.warning("console: %d failed password sign-ins to tenant %s within an hour, "
                            "from any address; its sign-ins now wait, longer after each "
                            "failure (browsers that signed in before pass)", most, tenant)


SIGN_INS: web.AppKey[SignIns] = web.AppKey("console_sign_ins", SignIns)


def _recent(table: dict[str, deque[int]], name: str, now: int, window: int) -> deque[int]:
    """The failures of `name` within the window before `now` (a clock stepped back: all)."""
    times = table.get(name, deque())
    while times and not now - window < times[0] <= now:
        times.popleft()
    return times


def _count(table: dict[str, deque[int]], name: str, now: int, window: int,
           most: int = 1000) -> int:
    """Add a failure of `name` at `now`; how many it has within the window (at most `most`
    are kept: enough to reach any limit or wait)."""
    times = _recent(table, name, now, window)
    if name not in table:
        if len(table) >= MAX_KEPT:
            table.pop(next(iter(table)))
        table[name] = times = deque(times, maxlen=most)
    times.append(now)
    return len(times)
