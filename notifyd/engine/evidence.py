"""Receipts in: a provider's webhook request verified and read (receipts/), then stored and
applied (store.record_receipts) in one transaction before the provider is answered 2xx.

The web handler calls take() with the rules (domain/policy.rules) the sender also hands to
store.complete, so a receipt that arrived before its send's answer is applied the moment that
answer names the message.
"""

from __future__ import annotations

import logging
from collections import Counter

from notifyd.channels.egress import DIRECT, Egress
from notifyd.channels.wire import Client, WireError
from notifyd.core.models import Recorded, Rules
from notifyd.receipts import PROVIDERS, BadReceipt, BadSignature, RawRequest, ReceiptProvider
from notifyd.store import ReceiptStore

log = logging.getLogger("notifyd.webhooks")
FETCH_TIMEOUT_SEC = 5.0
FETCH_MAX_BYTES = 64 * 1024  # an SNS signing certificate is ~2 KiB; a confirmation reply less


class FetchFailed(Exception):
    """A file the provider's scheme needs (the SNS certificate) could not be fetched now."""


class Fetcher:
    """GETs a URL the parser has vetted (https, the provider's own host) through the client the
    HTTP channels use, so through the egress proxy too: bounded in time and size, never
    following redirects. One for the daemon's life; a reload may change its `egress`."""

    def __init__(self, egress: Egress = DIRECT, timeout_sec: float = FETCH_TIMEOUT_SEC) -> None:
        self.http = Client(max_connections=4, timeout_sec=timeout_sec, egress=egress)

    async def __call__(self, url: str) -> bytes:
        if not url.startswith("https://"):
            raise FetchFailed("only https URLs are fetched")
        try:
            answer = await self.http.get(url, {}, limit=FETCH_MAX_BYTES + 1)
        except WireError as e:
            raise FetchFailed(e.reason) from None
        except TimeoutError:
            raise FetchFailed("timed out") from None
        if answer.status != 200:
            raise FetchFailed(f"HTTP {answer.status}")
        if len(answer.body) > FETCH_MAX_BYTES:
            raise FetchFailed(f"larger than {FETCH_MAX_BYTES} bytes")
        return answer.body

    async def close(self) -> None:
        await self.http.close()


async def take(store: ReceiptStore, provider: ReceiptProvider, settings: object,
               request: RawRequest, now: int, fetch: Fetcher, rules: Rules) -> Counter[str]:
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
