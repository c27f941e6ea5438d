"""What the email API channels share (resend, ses, sendgrid, mailgun, postmark): the checks render
makes before an email is frozen, the List-Unsubscribe headers of mail that is not transactional,
the step key and the kind as the metadata each provider's events hand back to
receipts/<provider>.py, and the error text of a provider read (never recorded) for whether it
blames the recipient.

- RFC 2369 and RFC 8058 (https://www.rfc-editor.org/rfc/rfc8058): List-Unsubscribe: <URI>, and
  List-Unsubscribe-Post: List-Unsubscribe=One-Click beside an HTTPS URI only.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from notifyd.channels.base import RenderError, RenderInput
from notifyd.channels.egress import DIRECT, Egress
from notifyd.channels.types.checks import valid_address
from notifyd.channels.wire import Client

KEY_NAME = "notifyd_key"  # the metadata name receipts/<provider>.py reads the step key from
MAX_HEADER_VALUE = 900  # well inside every provider's limit (SES: 995) and SMTP's 998 octets


class ApiChannel:
    """What an email API channel holds: its name, settings, endpoint and one HTTP client with
    as many connections as the lanes may send at once, so no send waits for a pooled one."""

    def __init__(self, name: str, endpoint: str, timeout_sec: float, max_connections: int,
                 egress: Egress = DIRECT) -> None:
        self.name = name
        self.endpoint = endpoint
        self.http = Client(max_connections, timeout_sec, egress)

    async def close(self) -> None:
        await self.http.close()


@dataclass(frozen=True)
class Email:
    """One recipient's email as render checked it."""

    to: str
    subject: str
    text: str | None
    html: str | None
    headers: dict[str, str]  # List-Unsubscribe (and -Post) for mail that is not transactional


def email_of(step: RenderInput) -> Email:
    """The address, subject and bodies of a step, or RenderError naming what is missing or
    unusable: an email API would refuse it, or worse, take a header injection."""
    address = (step.address or "").strip()
    if not address:
        raise RenderError("address", LookupError("the recipient has no email address"))
    if not valid_address(address):
        raise RenderError("address", ValueError("not a usable email address"))
    subject = step.content.get("subject")
    if not subject:
        raise RenderError("subject", LookupError("the email has no subject"))
    if "\r" in subject or "\n" in subject:
        raise RenderError("subject", ValueError("a line break in the subject"))
    text, html = step.content.get("text") or None, step.content.get("html") or None
    if not text and not html:
        raise RenderError("text", LookupError("the email has neither text nor html"))
    return Email(address, subject, text, html, list_headers(step))


def list_headers(step: RenderInput) -> dict[str, str]:
    """List-Unsubscribe for mail that is not transactional; One-Click only for an HTTPS URI
    (RFC 8058 section 3.1). A value that could break out of its header is never sent."""
    url = step.unsubscribe_url
    if step.transactional or not url:
        return {}
    if any(c in url for c in "\r\n<> \t") or not url.isprintable():
        raise RenderError("unsubscribe_url", ValueError("not usable in a List-Unsubscribe header"))
    headers = {"List-Unsubscribe": f"<{url}>"}
    if url.lower().startswith("https://"):
        headers["List-Unsubscribe-Post"] = "List-Unsubscribe=One-Click"
    return headers


def ascii_headers(headers: dict[str, str]) -> dict[str, str]:
    """The headers, refused unless each value is printable ASCII of a usable length: what an API
    that takes headers as data (SES, Postmark) accepts and puts on the wire as they are."""
    for name, value in headers.items():
        if not (value.isascii() and value.isprintable() and len(value) <= MAX_HEADER_VALUE):
            raise RenderError("unsubscribe_url", ValueError(f"not usable in a {name} header"))
    return headers


def kind_tag(kind: str, alphabet: re.Pattern[str]) -> str | None:
    """The kind as a provider's tag or category (its analytics and its events carry it back),
    or None when the kind's name does not fit the provider's alphabet."""
    return kind if alphabet.fullmatch(kind) else None


def blames(message: object, pattern: re.Pattern[str]) -> bool:
    """Whether a provider's error message says the recipient is at fault. The message is read,
    never recorded: it may quote the address."""
    return isinstance(message, str) and bool(pattern.search(message))
