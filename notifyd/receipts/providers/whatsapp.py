"""Meta's WhatsApp webhook as declared: the app secret that signs its posts and the verify
token of its subscription check (the parser: receipts/whatsapp.py)."""

from __future__ import annotations

from dataclasses import dataclass

from notifyd.core.fields import Checked, Problems, sensitive
from notifyd.receipts.base import ReceiptProvider

NAME = "whatsapp"


@dataclass(frozen=True)
class WhatsAppSettings(Checked):
    app_secret: str = sensitive("The Meta app's App Secret (App settings > Basic), which signs "
                                "every post (X-Hub-Signature-256; a secret). Empty: the webhook "
                                "is off.", "")
    verify_token: str = sensitive("The Verify Token typed beside the callback URL in the app's "
                                  "WhatsApp > Configuration: Meta's check of the URL (a GET) "
                                  "must name it (a secret of your choosing).", "")

    def enabled(self) -> bool:
        return bool(self.app_secret)

    def rules(self) -> Problems:
        if self.app_secret and not self.verify_token:
            return [("verify_token", "set it too: Meta checks the URL with it before it posts")]
        return []


PROVIDER = ReceiptProvider(NAME, "WhatsApp Cloud API message statuses (X-Hub-Signature-256)",
                           WhatsAppSettings, "notifyd.receipts.whatsapp", handshake=True)
