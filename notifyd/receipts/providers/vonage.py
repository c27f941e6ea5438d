"""Vonage's Messages API status webhook as declared: the signature secret its JWTs are signed
with, the API key they name and their age (the parser: receipts/vonage.py)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from notifyd.core.fields import Checked, doc, sensitive
from notifyd.receipts.base import ReceiptProvider

NAME = "vonage"
DEFAULT_TOLERANCE_SEC = 300
MAX_TOLERANCE_SEC = 86400


@dataclass(frozen=True)
class VonageSettings(Checked):
    signature_secret: str = sensitive(
        "The account's signature secret (Dashboard > API Settings), which signs the status "
        "webhooks' JWTs (HS256; a secret). Empty: the webhook is off.", "")
    api_key: str = sensitive("The account's API key (kept out of logs like a secret): a JWT "
                             "naming another account's is refused. Empty: not checked.", "",
                             pattern=re.compile(r"[A-Za-z0-9]{1,40}"),
                             says="must be the API key (letters and digits)")
    tolerance_sec: int = doc("How old a status's JWT (its iat) may be, or how far ahead, in "
                             "seconds.", DEFAULT_TOLERANCE_SEC, ge=1, le=MAX_TOLERANCE_SEC,
                             says=f"must be between 1 and {MAX_TOLERANCE_SEC}")

    def enabled(self) -> bool:
        return bool(self.signature_secret)


# Vonage may send an unsigned status after an error of its own and signs it when it tries
# again, which a 5xx asks for (Messages API "Signed webhooks"): a request that fails
# verification is answered 503.
PROVIDER = ReceiptProvider(NAME, "Vonage Messages API status webhooks (a JWT signed with the "
                                 "signature secret, the body's SHA-256 in it)", VonageSettings,
                           "notifyd.receipts.vonage", bad_signature_status=503)
