"""The contract every provider's webhook parser keeps: verify the raw request, then say what it
reports, as Receipts.

A parser gets the request exactly as received (the raw body bytes, the headers, the public URL
the provider signed) and either raises BadSignature (nothing is stored; the handler answers 401
and logs one line without the body), raises BadReceipt (a verified request notifyd cannot read:
400), or returns the receipts it carries (a batch for SendGrid, one for most). It never touches
the store; receipts/__init__.py lists the providers; the web handler stores what it returns
before answering 2xx, and the store matches each receipt to its step.

A provider is declared in receipts/providers/<provider>.py (its settings, the answers it wants,
the module of its parser), which the config reads without importing the parser:
receipts/<provider>.py is imported at the first request its webhook takes.
"""

from __future__ import annotations

import importlib
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol, cast

from notifyd.core.bounded import TooDeep, load_json
from notifyd.core.models import Evidence, Nonce, Receipt, message_key

__all__ = ["BadReceipt", "BadSignature", "ChallengeOf", "Event", "Evidence", "Fetch", "Nonce",
           "NonceOf", "Parser", "RawRequest", "Receipt", "ReceiptProvider", "Reply", "json_of",
           "message_key"]


Event = Evidence  # what a receipt says happened: notifyd.models.Evidence


class BadSignature(Exception):
    """The request is not provably from the provider: missing, wrong, stale or replayed."""


class BadReceipt(Exception):
    """Verified, but not something notifyd can read (a shape it does not know)."""


def json_of(data: bytes | str, refuse: type[Exception], what: str = "the body") -> Any:
    """The JSON value of a body (or of a field in it) within the API's limits (core/bounded.py):
    anyone can post anything here. `refuse` is BadSignature before verification, BadReceipt
    after; its message says what was wrong."""
    try:
        return load_json(data)
    except TooDeep as e:
        raise refuse(f"{what} {e}") from None
    except ValueError:
        raise refuse(f"{what} is not JSON") from None


@dataclass(frozen=True, slots=True)
class RawRequest:
    method: str
    url: str  # the public URL the provider called (server.public_url + path + query)
    headers: Mapping[str, str]  # case-insensitive lookups: use .get with the exact header name
    body: bytes
    query: Mapping[str, str]
    # The tenant the URL names (POST /v1/webhooks/NAME/{tenant}, for a provider with
    # per_tenant): its parser verifies with that tenant's secret alone.
    tenant: str | None = None


# Fetches a URL's body (the SES certificate); given to parsers that need the network, so tests
# can serve their own certificate. It must refuse any URL the parser did not vet.
Fetch = Callable[[str], Awaitable[bytes]]


class Parser(Protocol):
    """One provider: `settings` is its config table (secrets among them); `now` in epoch ms."""

    async def __call__(self, request: RawRequest, settings: Any, now: int,
                       fetch: Fetch) -> list[Receipt]: ...


# The one-time token of a request its parser has verified, for a scheme whose signature leaves
# the event unsigned (Mailgun's): the store keeps it and refuses it a second time.
NonceOf = Callable[[RawRequest, Any], Nonce]
# The answer to a provider's subscription check (a GET to the webhook's URL: Meta's hub.challenge),
# or BadSignature when it does not prove it knows our token.
ChallengeOf = Callable[[RawRequest, Any], bytes]


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
    # A frozen dataclass of this provider's keys (core/fields.Checked), each declared with
    # fields.doc() and its bounds (its secret among them); enabled() says whether it is
    # configured; rules() for checks across its keys.
    settings: type[Any]
    # Its parser's module, notifyd.receipts.<provider>: its `parse` (and `nonce`, if it keeps
    # one-time tokens), imported at the first request.
    adapter: str
    reply: Reply = Reply()
    # What to answer a request that fails verification, and one that is verified but unreadable:
    # the status that makes this provider stop or keep retrying as its docs say (Mailgun stops
    # on 406; Postmark retries a 401 and stops on 403).
    bad_signature_status: int = 401
    bad_receipt_status: int = 400
    one_time_tokens: bool = False  # its scheme leaves the event unsigned: the adapter's nonce
    handshake: bool = False  # it checks the URL with a GET first: the adapter's challenge
    per_tenant: bool = False  # it also takes POST /v1/webhooks/NAME/{tenant} (RawRequest.tenant)

    @property
    def parse(self) -> Parser:
        return cast(Parser, importlib.import_module(self.adapter).parse)

    @property
    def challenge(self) -> ChallengeOf | None:
        """The answer to a subscription check (GET), for a provider that makes one."""
        if not self.handshake:
            return None
        return cast(ChallengeOf, importlib.import_module(self.adapter).challenge)

    @property
    def nonce(self) -> NonceOf | None:
        """The one-time token of a verified request, for a scheme that needs one kept."""
        if not self.one_time_tokens:
            return None
        return cast(NonceOf, importlib.import_module(self.adapter).nonce)
