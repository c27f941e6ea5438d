"""Receipts in: a provider's webhook request verified and read (receipts/), then stored and
applied (store.record_receipts) in one transaction before the provider is answered 2xx.

The web handler calls take() with the rules (domain/policy.rules) the sender also hands to
store.complete, so a receipt that arrived before its send's answer is applied the moment that
answer names the message.
"""

from __future__ import annotations

import logging
from collections import Counter

import aiohttp

from notifyd.core.models import Recorded, Rules
from notifyd.receipts import PROVIDERS, BadReceipt, BadSignature, RawRequest, ReceiptProvider
from notifyd.store import Store

log = logging.getLogger("notifyd.webhooks")
FETCH_TIMEOUT_SEC = 5.0
FETCH_MAX_BYTES = 64 * 1024  # an SNS signing certificate is ~2 KiB; a confirmation reply less


class FetchFailed(Exception):
    """A file the provider's scheme needs (the SNS certificate) could not be fetched now."""


class Fetcher:
    """GETs a URL the parser has vetted (https, the provider's own host): bounded in time and
    size, never following redirects. One session for the daemon's life."""

    def __init__(self, timeout_sec: float = FETCH_TIMEOUT_SEC) -> None:
        self.timeout = aiohttp.ClientTimeout(total=timeout_sec)
        self._session: aiohttp.ClientSession | None = None

    async def __call__(self, url: str) -> bytes:
        if not url.startswith("https://"):
            raise FetchFailed("only https URLs are fetched")
        if self._session is None:
            self._session = aiohttp.ClientSession(timeout=self.timeout)
        try:
            async with self._session.get(url, allow_redirects=False) as r:
                if r.status != 200:
                    raise FetchFailed(f"HTTP {r.status}")
                body = await r.content.read(FETCH_MAX_BYTES + 1)
        except (aiohttp.ClientError, TimeoutError) as e:
            raise FetchFailed(type(e).__name__) from None
        if len(body) > FETCH_MAX_BYTES:
            raise FetchFailed(f"larger than {FETCH_MAX_BYTES} bytes")
        return body

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None


async def take(store: Store, provider: ReceiptProvider, settings: object, request: RawRequest,
               now: int, fetch: Fetcher, rules: Rules) -> Counter[str]:
    """Verify and read the request, then store and apply what it reports, with its one-time
    token where the provider's scheme has one; how many receipts were applied, duplicates or
    orphans. A token seen before is a replay (BadSignature). BadSignature and BadReceipt
    (nothing stored) and
    FetchFailed pass to the caller; so does a storage fault, and the provider, answered 5xx,
    sends it again."""
    receipts = await provider.parse(request, settings, now, fetch)
    once = provider.nonce(request, settings) if provider.nonce is not None else None
    if not receipts and once is None:
        return Counter()
    recorded = await store.record_receipts(receipts, rules, once)
    if Recorded.REPLAYED in recorded:
        raise BadSignature(f"{provider.name}: token already used (a replay)")
    return Counter(recorded)


__all__ = ["PROVIDERS", "BadReceipt", "BadSignature", "FetchFailed", "Fetcher", "RawRequest",
           "take"]
