"""Mailgun's webhooks as declared: the signing key and timestamp tolerance (the parser, with
its one-time tokens: receipts/mailgun.py)."""

from __future__ import annotations

from dataclasses import dataclass

from notifyd.core.fields import Checked, doc, sensitive
from notifyd.receipts.base import ReceiptProvider

NAME = "mailgun"
DEFAULT_TOLERANCE_SEC = 300
MAX_TOLERANCE_SEC = 86400


def _key_problem(signing_key: str) -> str | None:
    return "must be the ASCII key Mailgun shows" if not signing_key.isascii() else None


@dataclass(frozen=True)
class MailgunSettings(Checked):
    signing_key: str = sensitive("Mailgun's HTTP webhook signing key (Sending > Webhooks; not the "
                                 "API key; a secret). Empty: the webhook is off.", "",
                                 check=_key_problem)
    tolerance_sec: int = doc("How far the signed timestamp may be from our clock, either way, in "
                             "seconds; a token is refused a second time within it.",
                             DEFAULT_TOLERANCE_SEC, ge=1, le=MAX_TOLERANCE_SEC,
                             says=f"must be between 1 and {MAX_TOLERANCE_SEC}")

    def enabled(self) -> bool:
        return bool(self.signing_key)


PROVIDER = ReceiptProvider(NAME, "Mailgun webhooks (HMAC-SHA256 of timestamp + token; tokens "
                           "refused twice)", MailgunSettings, "notifyd.receipts.mailgun",
                           bad_receipt_status=406, one_time_tokens=True)
