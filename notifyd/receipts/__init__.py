"""Providers' delivery webhooks: each declared in receipts/providers/ (the registry,
PROVIDERS), each parser in receipts/<provider>.py behind receipts.base, imported at the first
request its webhook takes.

Adding a provider: declare it (receipts/providers/<provider>.py: settings, PROVIDER; listed in
receipts/providers/__init__.py) and write its parser (receipts/<provider>.py: parse); its
settings become the [webhooks.NAME] table and its route POST /v1/webhooks/NAME.
"""

from __future__ import annotations

from notifyd.receipts.base import (
    BadReceipt,
    BadSignature,
    Fetch,
    RawRequest,
    ReceiptProvider,
    Reply,
)
from notifyd.receipts.providers import PROVIDERS

__all__ = ["PROVIDERS", "BadReceipt", "BadSignature", "Fetch", "RawRequest", "ReceiptProvider",
           "Reply"]
