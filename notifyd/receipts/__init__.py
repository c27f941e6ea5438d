"""Providers' delivery webhooks, one module each behind receipts.base; this list is the registry.

Adding a provider: write its module (settings, parse, PROVIDER) and add it here; its settings
become the [webhooks.NAME] table and its route POST /v1/webhooks/NAME.
"""

from __future__ import annotations

from notifyd.receipts import mailgun, postmark, receipt, resend, sendgrid, ses, twilio
from notifyd.receipts.base import (
    BadReceipt,
    BadSignature,
    Fetch,
    RawRequest,
    ReceiptProvider,
    Reply,
)

PROVIDERS: dict[str, ReceiptProvider] = {p.name: p for p in (
    twilio.PROVIDER, resend.PROVIDER, sendgrid.PROVIDER, mailgun.PROVIDER, postmark.PROVIDER,
    ses.PROVIDER, receipt.PROVIDER)}

__all__ = ["PROVIDERS", "BadReceipt", "BadSignature", "Fetch", "RawRequest", "ReceiptProvider",
           "Reply"]
