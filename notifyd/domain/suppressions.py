"""The suppression list as the API and the CLI see it: one entry per address notifyd will not
send to (a bounce, a complaint, an unsubscribe, an SMS STOP, a rejection, a dead push device,
or an operator's word), scoped by tenant; '*' entries (an SMS STOP to a shared number) hold for
every tenant and only an operator lifts them."""

from __future__ import annotations

from msgspec import UNSET

from notifyd.core.contacts import BY_SUPPRESSION, DEVICE_ID, SUPPRESSION_TYPES, normal_address
from notifyd.core.errors import DomainError
from notifyd.core.records import Suppression
from notifyd.core.text import iso
from notifyd.shapes import people as shapes


def check_address(channel_type: str, address: str) -> str:
    """The address in the list's form; an DomainError naming what is wrong with it."""
    if channel_type not in SUPPRESSION_TYPES:
        raise DomainError("invalid_field", f"channel_type must be one of "
                       f"{', '.join(SUPPRESSION_TYPES)}", "channel_type")
    kind = BY_SUPPRESSION.get(channel_type)
    address = normal_address(channel_type, address)
    valid = kind.valid(address) if kind is not None else bool(DEVICE_ID.match(address))
    if not valid:
        shape = kind.shape if kind is not None else "a device id (d_ and 16 hex digits)"
        raise DomainError("invalid_field", f"address must be {shape} for channel_type "
                       f"{channel_type}", "address")
    return address


def parse(data: shapes.SuppressionRequest) -> tuple[str, str, str]:
    """(channel_type, address, reason) from a POST body (or the console's form)."""
    address = check_address(data.channel_type, data.address)
    return data.channel_type, address, data.reason or "added by the API"


def view(s: Suppression, created: bool | None = None) -> shapes.Suppression:
    """An entry as the API shows it; POST's answer says whether it `created` it."""
    return shapes.Suppression(
        channel_type=s.channel_type, address=s.address, reason=s.reason, source=s.source,
        evidence=s.evidence, created_at=iso(s.created_at),
        scope="all tenants" if s.tenant == "*" else "tenant",
        created=UNSET if created is None else created)
