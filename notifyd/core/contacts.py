"""The kinds of contact a person has, in one place: what a channel sends to, how an address is
checked and written, and which suppression list it goes on when it dies.

A contact is an `Address` kept in the person's profile under its field (`email`, `phone`, ...)
or the person's registered `Devices` of one kind (web push subscriptions, FCM and APNs tokens).
A channel type names the contact it sends to (channels/types/<type>.py); a channel that sends to
no address of the person's (a producer's webhook, the log, a Discord or Teams channel's webhook)
names none. Adding a contact kind is one entry here (and `ADDRESSES`) and the channel module that
sends to it.
"""

from __future__ import annotations

import hashlib
import hmac
import re
from dataclasses import dataclass

E164 = re.compile(r"^\+[1-9][0-9]{6,14}$")
EMAIL_RE = re.compile(r"^[^@\s<>()\[\],;:\\\"]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}$")
DEVICE_ID = re.compile(r"^d_[0-9a-f]{16}$")


@dataclass(frozen=True, slots=True)
class Address:
    """An address in the person's profile: `field` is its key there and in PUT /v1/users."""

    field: str
    suppression: str  # the suppression list's channel type for it: email, sms, ...
    pattern: re.Pattern[str] | None = None  # what a valid one looks like (None: any text)
    shape: str = "non-empty"  # how an error names what is expected
    lower: bool = False  # compared and kept lower-cased (email: providers report it so)

    def normal(self, address: str) -> str:
        """The address as it is kept and as the suppression list keys it: trimmed, and
        lower-cased where the kind is case-blind."""
        address = address.strip()
        return address.lower() if self.lower else address

    def valid(self, address: str) -> bool:
        return bool(address) and (self.pattern is None or bool(self.pattern.match(address)))

    def __str__(self) -> str:
        return self.field


@dataclass(frozen=True, slots=True)
class Devices:
    """The person's registered push devices of one kind, each disabled on its own."""

    kind: str  # webpush | fcm | apns: Device.kind
    suppression: str = "push"  # dead devices are listed as push suppressions by device id

    def __str__(self) -> str:
        return f"live {self.kind} device"


Contact = Address | Devices

EMAIL = Address("email", "email", EMAIL_RE, "an email address like name@example.com",
                lower=True)
PHONE = Address("phone", "sms", E164, "an E.164 phone number (+ and the country code, digits "
                "only, e.g. +14155550123)")
TELEGRAM = Address("telegram_chat_id", "telegram")
SLACK = Address("slack_user_id", "slack")
# A number on WhatsApp: a number of its own beside `phone`, with a suppression list of its own,
# because being on WhatsApp (and having opted in to the business) says nothing of taking SMS, and
# an SMS STOP nothing of WhatsApp; the same number may be given for both.
WHATSAPP = Address("whatsapp", "whatsapp", E164, "an E.164 phone number on WhatsApp (+ and the "
                   "country code, digits only, e.g. +14155550123)")
WEBPUSH = Devices("webpush")
FCM = Devices("fcm")
APNS = Devices("apns")

ADDRESSES: tuple[Address, ...] = (EMAIL, PHONE, TELEGRAM, SLACK, WHATSAPP)
DEVICES: tuple[Devices, ...] = (WEBPUSH, FCM, APNS)
BY_FIELD = {a.field: a for a in ADDRESSES}
BY_SUPPRESSION = {a.suppression: a for a in ADDRESSES}
# The suppression list's channel types: one per address kind, and push (a device id).
SUPPRESSION_TYPES: tuple[str, ...] = (*BY_SUPPRESSION, "push")


HASHED = "hmac:"  # an erased person's suppressed address, kept one-way
UNKEYED = "sha256:"  # the form kept before the installation's key: rewritten by a migration
SUPPRESSION_KEY = "suppressions"  # the signing_keys row holding the installation's key


def hashed_address(address: str, key: bytes) -> str:
    """The one-way form a suppression keeps once the person whose address it is was erased:
    the address is gone, and the same address given again still finds it. Keyed with the
    installation's own key (an HMAC), so a list that leaks cannot be turned back into phone
    numbers by trying them all; of the address's SHA-256, so a hash kept before the key
    (UNKEYED) becomes this one without the address (rehashed)."""
    return rehashed(UNKEYED + hashlib.sha256(address.encode()).hexdigest(), key)


def rehashed(unkeyed: str, key: bytes) -> str:
    """`sha256:<hex>` as the keyed form hashed_address gives the same address."""
    digest = bytes.fromhex(unkeyed.removeprefix(UNKEYED))
    return HASHED + hmac.new(key, digest, hashlib.sha256).hexdigest()


def normal_address(suppression: str | None, address: str) -> str:
    """An address as the suppression list of that type keys it."""
    kind = BY_SUPPRESSION.get(suppression or "")
    return kind.normal(address) if kind is not None else address.strip()
