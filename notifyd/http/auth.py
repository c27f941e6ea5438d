"""API keys: made once, shown once, stored as a hash; looked up per request through a small cache."""

from __future__ import annotations

import hashlib
import secrets

from notifyd.core.clock import Clock
from notifyd.core.models import ApiKey
from notifyd.store import Store

KEY_PREFIX = "nfy_"
CACHE_MS = 5000  # a revoked key stops working within this long in a running daemon


def new_key() -> str:
    return KEY_PREFIX + secrets.token_urlsafe(32)


def hash_key(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


class KeyCache:
    """Known keys by hash, remembered briefly so the accept path skips a read per request."""

    def __init__(self, store: Store, clock: Clock) -> None:
        self.store = store
        self.clock = clock
        self._hits: dict[str, tuple[int, ApiKey]] = {}

    async def find(self, authorization: str | None) -> ApiKey | None:
        if not authorization or authorization[:7].lower() != "bearer ":  # scheme: any case
            return None
        digest = hash_key(authorization[7:].strip())
        hit = self._hits.get(digest)
        now = self.clock.now_ms()
        if hit is not None and hit[0] - CACHE_MS <= now < hit[0]:  # a clock stepped back: ask
            return hit[1]
        key = await self.store.find_key(digest)
        if key is None:
            self._hits.pop(digest, None)
            return None
        self._hits[digest] = (now + CACHE_MS, key)
        return key
