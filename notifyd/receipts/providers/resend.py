"""Resend's webhook as declared: its signing secret (the parser: receipts/resend.py)."""

from __future__ import annotations

from dataclasses import dataclass

from notifyd.channels.types.webhook import whsec_problem
from notifyd.core.fields import Checked, sensitive
from notifyd.receipts.base import ReceiptProvider

NAME = "resend"


@dataclass(frozen=True)
class Settings(Checked):
    secret: str = sensitive("The Resend webhook's signing secret, whsec_ and base64, shown with "
                            "the webhook in Resend's dashboard (a secret). Empty: the webhook "
                            "is off.", "", check=whsec_problem)

    def enabled(self) -> bool:
        return bool(self.secret)


PROVIDER = ReceiptProvider(NAME, "Resend email events (Svix / Standard Webhooks signed)",
                           Settings, "notifyd.receipts.resend")
