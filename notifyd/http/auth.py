"""API keys: made once, shown once, stored as a hash; looked up per request through a small cache,
as are the tenants' user-token keys, the preference links' key and the keys user tokens name, so
that a revocation or a rotation reaches a running daemon within CACHE_MS. A key's use is written
at most once per USE_EVERY_MS, off the request's path, for `notifyd keys list`."""

from __future__ import annotations

import asyncio
import hashlib
import secrets
from collections.abc import Awaitable, Callable
from typing import TypeVar

from notifyd.core.clock import Clock
from notifyd.core.models import ApiKey, usable_scopes
from notifyd.core.records import KeyRecord, SigningKey
from notifyd.domain import signed
from notifyd.store import KeyStore

KEY_PREFIX = "nfy_"
CACHE_MS = 5000  # a revoked key (or a rotated one) stops working within this long in a daemon
USE_EVERY_MS = 60_000  # a key's last use is written at most this often: to the minute
T = TypeVar("T")


def new_key() -> str:
    return KEY_PREFIX + secrets.token_urlsafe(32)


def hash_key(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


class KeyCache:
    """Known keys by hash, remembered briefly so the accept path skips a read per request. Only
    what exists is remembered: a lookup for a made-up key or tenant leaves nothing behind."""

    def __init__(self, store: KeyStore, clock: Clock) -> None:
        self.store = store
        self.clock = clock
        self._hits: dict[str, tuple[int, ApiKey]] = {}
        self._named: dict[str, tuple[int, KeyRecord]] = {}
        self._signing: dict[str, tuple[int, SigningKey]] = {}
        self._used: dict[str, int] = {}  # a key's hash -> when its last use was written
        self._writes: set[asyncio.Task[None]] = set()

    async def find(self, authorization: str | None) -> ApiKey | None:
        if not authorization or authorization[:7].lower() != "bearer ":  # scheme: any case
            return None
        digest = hash_key(authorization[7:].strip())
        now = self.clock.now_ms()
        key = await self._recall(self._hits, digest, self.store.find_key, now)
        if key is not None:
            self._note_use(digest, now)
        return key

    def _note_use(self, digest: str, now: int) -> None:
        """Write that the key was used, unless that was written within USE_EVERY_MS; the
        request does not wait for it."""
        last = self._used.get(digest)
        if last is not None and last <= now < last + USE_EVERY_MS:
            return
        self._used[digest] = now
        task = asyncio.create_task(self._mark_used(digest))
        self._writes.add(task)
        task.add_done_callback(self._writes.discard)

    async def _mark_used(self, digest: str) -> None:
        try:
            await self.store.mark_key_used(digest)
        except Exception:  # noqa: BLE001 - a use not written is no reason to refuse anything
            self._used.pop(digest, None)  # the next request tries again

    async def settle(self) -> None:
        """Wait for the uses being written (before the store closes)."""
        if self._writes:
            await asyncio.gather(*self._writes, return_exceptions=True)

    async def live(self, name: str, tenant: str, scope: str | None = None) -> bool:
        """Whether the API key called `name` is the tenant's and not revoked (and may do
        `scope`, when one is named)."""
        key = await self._recall(self._named, name, self.store.find_key_named,
                                 self.clock.now_ms())
        return key is not None and key.tenant == tenant and key.revoked_at is None and (
            scope is None or scope in usable_scopes(key.kinds, key.scopes))

    async def token_keys(self, tenant: str) -> list[bytes]:
        """The keys that verify the tenant's user tokens now: its key, and the one a rotation
        replaced while the overlap lasts; none if the tenant never had user tokens."""
        name = signed.tenant_key_name(tenant)
        found = await self._recall(self._signing, name, self.store.find_signing_key,
                                   self.clock.now_ms())
        return found.verifying(self.clock.now_ms()) if found is not None else []

    async def link_keys(self) -> list[bytes]:
        """The keys that verify preference links now: the preference links' key, and the one
        a rotation replaced while the overlap lasts (notifyd links rotate)."""
        found = await self._recall(self._signing, signed.PREFERENCE_LINKS_KEY,
                                   self.store.find_signing_key, self.clock.now_ms())
        return found.verifying(self.clock.now_ms()) if found is not None else []

    async def _recall(self, table: dict[str, tuple[int, T]], name: str,
                      load: Callable[[str], Awaitable[T | None]], now: int) -> T | None:
        hit = table.get(name)
        if hit is not None and hit[0] - CACHE_MS <= now < hit[0]:  # a clock stepped back: ask
            return hit[1]
        value = await load(name)
        if value is None:
            table.pop(name, None)
            return None
        table[name] = (now + CACHE_MS, value)
        return value
