"""SendGrid's Event Webhook as declared: its verification key and timestamp tolerance (the
parser: receipts/sendgrid.py), and the key read: the parser verifies with it."""

from __future__ import annotations

import base64
import binascii
import re
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING

from notifyd.core.fields import Checked, doc
from notifyd.receipts.base import ReceiptProvider

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric import ec

NAME = "sendgrid"
DEFAULT_TOLERANCE_SEC = 300
MAX_TOLERANCE_SEC = 86400
PEM_LINE_RE = re.compile(r"-----[A-Z ]+-----")


@lru_cache(maxsize=8)
def load_key(text: str) -> ec.EllipticCurvePublicKey | None:
    """The P-256 key a base64 DER setting stands for (PEM armour and line breaks tolerated)."""
    # cryptography only when a config turns this webhook on
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.hazmat.primitives.serialization import load_der_public_key

    body = "".join(PEM_LINE_RE.sub("", text).split())
    try:
        key = load_der_public_key(base64.b64decode(body, validate=True))
    except (ValueError, binascii.Error, TypeError):
        return None
    if isinstance(key, ec.EllipticCurvePublicKey) and isinstance(key.curve, ec.SECP256R1):
        return key
    return None


def _key_problem(public_key: str) -> str | None:
    if public_key and load_key(public_key) is None:
        return "must be SendGrid's base64 DER ECDSA P-256 public key"
    return None


@dataclass(frozen=True)
class SendgridSettings(Checked):
    public_key: str = doc("The Event Webhook's verification key, as SendGrid shows it under Mail "
                          "Settings > Event Webhook > Signature verification (base64 DER, an "
                          "ECDSA P-256 public key). Empty: the webhook is off.", "",
                          check=_key_problem)
    tolerance_sec: int = doc("How far the signed timestamp may be from our clock, either way, in "
                             "seconds (SendGrid documents none).", DEFAULT_TOLERANCE_SEC,
                             ge=1, le=MAX_TOLERANCE_SEC,
                             says=f"must be between 1 and {MAX_TOLERANCE_SEC}")

    def enabled(self) -> bool:
        return bool(self.public_key)


PROVIDER = ReceiptProvider(NAME, "SendGrid's signed Event Webhook (ECDSA P-256)",
                           SendgridSettings, "notifyd.receipts.sendgrid")
