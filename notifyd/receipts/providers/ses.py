"""Amazon SES's events through SNS as declared: the topics accepted and how old a message may
be (the parser: receipts/ses.py)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from notifyd.core.fields import Checked, doc
from notifyd.receipts.base import ReceiptProvider

NAME = "ses"
DEFAULT_TOLERANCE_SEC = 3600 + 300  # SNS's hard cap on an HTTP/S retry policy, plus clock skew
MIN_TOLERANCE_SEC = 60
MAX_TOLERANCE_SEC = 86400
REGION = r"[a-z]{2}(?:-[a-z]+)+-\d{1,2}"
TOPIC_ARN = re.compile(rf"arn:aws(?:-[a-z]+)*:sns:{REGION}:\d{{12}}:[A-Za-z0-9_-]{{1,256}}"
                       r"(?:\.fifo)?")


@dataclass(frozen=True)
class Settings(Checked):
    topic_arns: tuple[str, ...] = doc(
        "The SNS topic ARNs whose messages are accepted (arn:aws:sns:REGION:ACCOUNT:NAME): the "
        "topics SES publishes to. Empty: the ses webhook refuses everything.", (),
        pattern=TOPIC_ARN,
        says="entry {entry} is not an SNS topic ARN (arn:aws:sns:REGION:ACCOUNT:NAME)")
    tolerance_sec: int = doc(
        "How old an SNS message may be (its Timestamp, which stays the same on retries). SNS "
        "retries an HTTP(S) delivery for at most 3,600 s; the default adds 300 s of clock skew.",
        DEFAULT_TOLERANCE_SEC, ge=MIN_TOLERANCE_SEC, le=MAX_TOLERANCE_SEC,
        says=f"must be {MIN_TOLERANCE_SEC} to {MAX_TOLERANCE_SEC} seconds")

    def enabled(self) -> bool:
        return bool(self.topic_arns)


PROVIDER = ReceiptProvider(NAME, "Amazon SES events and notifications through an SNS HTTPS "
                                 "subscription", Settings, "notifyd.receipts.ses")
