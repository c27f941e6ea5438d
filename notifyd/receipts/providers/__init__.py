"""Providers' delivery webhooks as declared, one module each: the registry the config reads.

A declaration is light: its settings (the [webhooks.NAME] table), the answers the provider
wants, and the module of its parser (receipts/<provider>.py), imported at the first request.
Adding a provider: declare it here (receipts/providers/<provider>.py) and write its parser.
"""

from __future__ import annotations

from notifyd.receipts.base import ReceiptProvider
from notifyd.receipts.providers import mailgun, postmark, receipt, resend, sendgrid, ses, twilio

PROVIDERS: dict[str, ReceiptProvider] = {p.name: p for p in (
    twilio.PROVIDER, resend.PROVIDER, sendgrid.PROVIDER, mailgun.PROVIDER, postmark.PROVIDER,
    ses.PROVIDER, receipt.PROVIDER)}

__all__ = ["PROVIDERS"]
