"""Twilio's webhook as declared: the auth token that signs its callbacks, and the empty TwiML
an inbound message is answered with (the parser: receipts/twilio.py)."""

from __future__ import annotations

from dataclasses import dataclass

from notifyd.core.fields import Checked, Problems, sensitive
from notifyd.receipts.base import ReceiptProvider, Reply

NAME = "twilio"
EMPTY_TWIML = b'<?xml version="1.0" encoding="UTF-8"?><Response></Response>'


@dataclass(frozen=True)
class Settings(Checked):
    auth_token: str = sensitive("The account's primary Auth Token, which signs Twilio's "
                                "callbacks (X-Twilio-Signature), even when the channel sends "
                                "with an API key (a secret). Empty: the webhook is off.", "")

    def enabled(self) -> bool:
        return bool(self.auth_token)

    def rules(self) -> Problems:
        token = self.auth_token
        if token and (not token.isprintable() or any(c.isspace() for c in token)):
            return [("auth_token", "must not contain spaces, line breaks or control characters")]
        return []


PROVIDER = ReceiptProvider(NAME, "Twilio SMS status callbacks and STOP replies "
                                 "(X-Twilio-Signature)", Settings, "notifyd.receipts.twilio",
                           Reply(200, EMPTY_TWIML, "text/xml"))
