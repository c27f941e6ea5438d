"""The contract every provider's webhook parser keeps: verify the raw request, then say what it
reports, as Receipts.

A parser gets the request exactly as received (the raw body bytes, the headers, the public URL
the provider signed) and either raises BadSignature (nothing is stored; the handler answers 401
and logs one line without the body), raises BadReceipt (a verified request notifyd cannot read:
400), or returns the receipts it carries (a batch for SendGrid, one for most). It never touches
the store; receipts/__init__.py lists the providers; the web handler stores what it returns
before answering 2xx, and the store matches each receipt to its step.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Protocol


class Event(StrEnum):
    """What a receipt says happened to a message, weakest first for the happy path."""

    ACCEPTED = "accepted"  # the provider has it (queued, sent to the carrier)
    DELIVERED = "delivered"  # the recipient's server, handset or device has it
    SHOWN = "shown"  # a push client displayed it
    OPENED = "opened"  # the person opened it
    DEFERRED = "deferred"  # a temporary failure; the provider retries
    BOUNCED = "bounced"  # a permanent failure of the address: suppress it
    COMPLAINED = "complained"  # marked as spam: suppress the address
    UNSUBSCRIBED = "unsubscribed"  # the person asked to stop: suppress the address
    FAILED = "failed"  # the message failed for good (not necessarily the address's fault)
    TOKEN_DEAD = "token_dead"  # a push token or subscription is gone


@dataclass(frozen=True, slots=True)
class Receipt:
    """One provider event about one message, normalised."""

    provider: str  # twilio, resend, sendgrid, mailgun, postmark, ses, receipt (our own endpoint)
    event_id: str  # the provider's id for this event: a redelivery has the same one (dedupe)
    event: Event
    occurred_at: int | None  # epoch ms, as the provider says; None when it does not
    provider_ref: str | None = None  # the provider's message id (matches Sent.provider_ref)
    key: str | None = None  # notifyd's step key ("n_...:STEP" or "n_...:STEP:DEVICE"), if carried
    message_id: str | None = None  # the email Message-ID header notifyd set, without <>
    address: str | None = None  # the recipient address it concerns (for suppression)
    channel_type: str | None = None  # email, sms, push: what the address is for (suppression)
    detail: str | None = None  # a short provider code (bounce type, error code): never free text


class BadSignature(Exception):
    """The request is not provably from the provider: missing, wrong, stale or replayed."""


class BadReceipt(Exception):
    """Verified, but not something notifyd can read (a shape it does not know)."""


@dataclass(frozen=True, slots=True)
class RawRequest:
    method: str
    url: str  # the public URL the provider called (server.public_url + path + query)
    headers: Mapping[str, str]  # case-insensitive lookups: use .get with the exact header name
    body: bytes
    query: Mapping[str, str]


# Fetches a URL's body (the SES certificate); given to parsers that need the network, so tests
# can serve their own certificate. It must refuse any URL the parser did not vet.
Fetch = Callable[[str], Awaitable[bytes]]


class Parser(Protocol):
    """One provider: `settings` is its config table (secrets among them); `now` in epoch ms."""

    async def __call__(self, request: RawRequest, settings: Any, now: int,
                       fetch: Fetch) -> list[Receipt]: ...


@dataclass(frozen=True)
class Reply:
    """What the provider must get back besides 200 (e.g. Twilio's empty TwiML for an inbound
    message); most get an empty 200."""

    status: int = 200
    body: bytes = b""
    content_type: str = "text/plain"


@dataclass(frozen=True)
class ReceiptProvider:
    """One provider's webhook (POST /v1/webhooks/{name}), enabled by its settings' secret."""

    name: str
    summary: str  # one line, shown in the example config
    # A frozen dataclass of this provider's keys, each declared with fields.doc() (its secret
    # among them); enabled() says whether it is configured; problems() -> [(key, message)].
    settings: type[Any]
    parse: Parser
    reply: Reply = Reply()


def message_key(message_id: str | None) -> str | None:
    """The step key in a Message-ID notifyd set (<n_...{.}STEP@domain>), or None."""
    if not message_id:
        return None
    local = message_id.strip().strip("<>").partition("@")[0]
    nid, dot, step = local.rpartition(".")
    if dot and nid.startswith("n_") and step.isdigit():
        return f"{nid}:{step}"
    return None
