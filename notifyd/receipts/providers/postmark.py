"""Postmark's webhooks as declared: basic auth in the URL and a custom header, either or both
(the parser: receipts/postmark.py)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from notifyd.core.fields import Checked, Problems, doc, sensitive
from notifyd.receipts.base import ReceiptProvider

NAME = "postmark"
TOKEN_RE = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,64}$")  # an HTTP field name (RFC 9110)
VALUE_RE = re.compile(r"^[\x21-\x7e](?:[\x20-\x7e]*[\x21-\x7e])?$")  # visible ASCII, no edges


@dataclass(frozen=True)
class PostmarkSettings(Checked):
    username: str = doc("Basic auth user written into the webhook URL Postmark calls "
                        "(https://user:pass@host/v1/webhooks/postmark). Empty: no basic auth.", "")
    password: str = sensitive("Basic auth password for that URL (a secret: long and random; use "
                              "letters and digits so the URL needs no escaping).", "")
    header_name: str = doc("A custom header set on the Postmark webhook (HttpHeaders), e.g. "
                           "X-Webhook-Secret. Empty: none.", "")
    header_value: str = sensitive("That header's value (a secret: long and random).", "")

    def basic(self) -> bool:
        return bool(self.username and self.password)

    def header(self) -> bool:
        return bool(self.header_name and self.header_value)

    def enabled(self) -> bool:
        return self.basic() or self.header()

    def rules(self) -> Problems:
        out = []
        if bool(self.username) != bool(self.password):
            out.append(("password" if self.username else "username",
                        "basic auth needs both username and password"))
        if ":" in self.username:
            out.append(("username", "must not contain ':' (basic auth splits on it)"))
        if bool(self.header_name) != bool(self.header_value):
            out.append(("header_value" if self.header_name else "header_name",
                        "a custom header needs both its name and its value"))
        if self.header_name and not TOKEN_RE.match(self.header_name):
            out.append(("header_name", "must be an HTTP header name (letters, digits, '-')"))
        elif self.basic() and self.header_name.lower() == "authorization":
            out.append(("header_name", "basic auth already uses Authorization"))
        if self.header_value and not VALUE_RE.match(self.header_value):
            out.append(("header_value", "must be printable ASCII without surrounding spaces"))
        return out


PROVIDER = ReceiptProvider(NAME, "Postmark webhooks (basic auth in the URL and/or a secret "
                           "header; unsigned)", PostmarkSettings, "notifyd.receipts.postmark",
                           bad_receipt_status=403)
