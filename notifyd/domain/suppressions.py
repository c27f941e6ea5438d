"""The suppression list as the API and the CLI see it: one entry per address notifyd will not
send to (a bounce, a complaint, an unsubscribe, an SMS STOP, a rejection, a dead push device,
or an operator's word), scoped by tenant; '*' entries (an SMS STOP to a shared number) hold for
every tenant and only an operator lifts them."""

from __future__ import annotations

from typing import Any

from notifyd.core.contacts import BY_SUPPRESSION, DEVICE_ID, SUPPRESSION_TYPES, normal_address
from notifyd.core.errors import DomainError
from notifyd.core.records import Suppression
from notifyd.core.text import iso
from notifyd.domain.validate import check_fields, get_str

FIELDS = frozenset({"channel_type", "address", "reason"})


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


def parse(data: dict[str, Any]) -> tuple[str, str, str]:
    """(channel_type, address, reason) from a POST body."""
    check_fields(data, FIELDS)
    channel_type = get_str(data, "channel_type")
    address = get_str(data, "address", max_len=320)
    assert channel_type is not None and address is not None
    reason = get_str(data, "reason", required=False, max_len=200) or "added by the API"
    return channel_type, check_address(channel_type, address), reason


def view(s: Suppression) -> dict[str, Any]:
    return {"channel_type": s.channel_type, "address": s.address, "reason": s.reason,
            "source": s.source, "evidence": s.evidence, "created_at": iso(s.created_at),
            "scope": "all tenants" if s.tenant == "*" else "tenant"}
