"""Recipients: one home for what a user is to notifyd — the profile's shape and checks, the
contact each channel sends to, and which contacts are dead.

A contact is named by its kind: `email`, `phone`, `chat:NAME`, ... A channel that sends to no
address of the person's (a producer webhook, the log) has no contact, and nothing it hears back
disables anything for a user. A disabled address counts only while it is still the user's current
one, so a new address is never blocked by an old one's bounce.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from notifyd.channels import TYPES
from notifyd.config import Config
from notifyd.errors import ApiError
from notifyd.ladder import parse_hhmm, valid_timezone
from notifyd.models import Recipient
from notifyd.validate import check_fields, get_str

USER_FIELDS = frozenset({"email", "phone", "chat", "timezone", "locale", "quiet_hours"})


def contact_kinds(cfg: Config) -> dict[str, str | None]:
    """Channel name -> the contact kind it sends to (None: no address of the person's)."""
    return {name: TYPES[ch.type].contact for name, ch in cfg.channels.items()}


def address_of(contacts: Mapping[str, Any], contact: str) -> str:
    """The user's current address for a contact kind ('' when the user has none)."""
    kind, _, sub = contact.partition(":")
    value = contacts.get(kind)
    if isinstance(value, dict):
        value = value.get(sub)
    return str(value) if value is not None and not isinstance(value, dict) else ""


def dead_contacts(r: Recipient | None) -> dict[str, str]:
    """Contact kind -> why it is disabled, for the contacts disabled at their current address."""
    if r is None or not r.disabled:
        return {}
    return {d.contact: d.reason for d in r.disabled
            if d.address == address_of(r.contacts, d.contact)}


def parse_recipient(tenant: str, user_id: str, data: dict[str, Any]) -> Recipient:
    """A profile from a PUT body; an ApiError names the first field that is wrong."""
    check_fields(data, USER_FIELDS)
    contacts: dict[str, Any] = {}
    for name in ("email", "phone"):
        value = get_str(data, name, required=False)
        if value is not None:
            contacts[name] = value
    chat = data.get("chat")
    if chat is not None:
        if not isinstance(chat, dict) or not all(
                isinstance(k, str) and isinstance(v, str) and v for k, v in chat.items()):
            raise ApiError("invalid_field", "chat must map a chat service to an id", "chat")
        contacts["chat"] = chat
    tz = get_str(data, "timezone", required=False, max_len=64)
    if tz is not None and not valid_timezone(tz):
        raise ApiError("invalid_field", f"unknown timezone {tz!r} (use an IANA name such as "
                       "Europe/Paris)", "timezone")
    start, end = _quiet_hours(data.get("quiet_hours"))
    locale = get_str(data, "locale", required=False, max_len=35)
    return Recipient(tenant, user_id, tz, locale, start, end, contacts)


def _quiet_hours(quiet: Any) -> tuple[str | None, str | None]:
    if quiet is None:
        return None, None
    if not isinstance(quiet, dict) or set(quiet) != {"start", "end"}:
        raise ApiError("invalid_field", "quiet_hours must be {start: 'HH:MM', end: 'HH:MM'} "
                       "or null", "quiet_hours")
    try:
        parse_hhmm(quiet["start"])
        parse_hhmm(quiet["end"])
    except (ValueError, TypeError, AttributeError) as e:
        raise ApiError("invalid_field", f"quiet_hours: {e}", "quiet_hours") from None
    return quiet["start"], quiet["end"]


def recipient_view(r: Recipient) -> dict[str, Any]:
    """The profile as the API shows it, with the contacts that are disabled now and why."""
    quiet = {"start": r.quiet_start, "end": r.quiet_end} if r.quiet_start else None
    return {"user_id": r.user_id, **r.contacts, "timezone": r.timezone, "locale": r.locale,
            "quiet_hours": quiet, "disabled_contacts": dead_contacts(r)}
