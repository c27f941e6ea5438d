"""Recipients: one home for what a user is to notifyd — the profile's shape and checks, where a
channel's contact is in it, and which contacts are dead.

A contact is an address kind in the profile (`email`, `phone`, ...) or the person's devices of one
kind (core/contacts.py). A channel that sends to no address of the person's (a producer webhook,
the log) has no contact, and nothing it hears back disables anything for a user. A disabled
address counts only while it is still the user's current one, so a new address is never blocked
by an old one's bounce.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from typing import Any

from yarl import URL

from notifyd.core.contacts import ADDRESSES, BY_FIELD, DEVICES, Address, Contact, Devices
from notifyd.core.errors import DomainError
from notifyd.core.models import Device, Recipient
from notifyd.domain.ladder import parse_hhmm, valid_timezone
from notifyd.domain.validate import check_fields, get_str

USER_FIELDS = frozenset({*BY_FIELD, "timezone", "locale", "quiet_hours"})
DEVICE_KINDS = tuple(d.kind for d in DEVICES)
MAX_ENDPOINT = 2048


def live_devices(r: Recipient | None, kind: str) -> tuple[Device, ...]:
    return tuple(d for d in r.devices if d.kind == kind and d.state == "live") if r else ()


def has_contact(r: Recipient | None, contact: Contact) -> bool:
    """Whether the user has somewhere to send for this contact: an address, or a live device."""
    if isinstance(contact, Devices):
        return bool(live_devices(r, contact.kind))
    return bool(address_of(r.contacts if r else {}, contact))


def address_of(contacts: Mapping[str, Any], contact: Address) -> str:
    """The user's current address of this kind ('' when the user has none)."""
    value = contacts.get(contact.field)
    return str(value) if value is not None and not isinstance(value, dict) else ""


def dead_contacts(r: Recipient | None) -> dict[str, str]:
    """Profile field -> why it is disabled, for the contacts disabled at their current address."""
    if r is None or not r.disabled:
        return {}
    return {d.contact: d.reason for d in r.disabled
            if d.contact in BY_FIELD and d.address == address_of(r.contacts, BY_FIELD[d.contact])}


def dead_reason(r: Recipient | None, contact: Contact) -> str | None:
    """Why this contact of the user is disabled, if it is (devices die one by one: never)."""
    return dead_contacts(r).get(contact.field) if isinstance(contact, Address) else None


def parse_recipient(tenant: str, user_id: str, data: dict[str, Any]) -> Recipient:
    """A profile from a PUT body; an DomainError names the first field that is wrong."""
    check_fields(data, USER_FIELDS)
    contacts: dict[str, Any] = {}
    for kind in ADDRESSES:
        value = get_str(data, kind.field, required=False)
        if value is None:
            continue
        if not kind.valid(value):
            raise DomainError("invalid_field", f"{kind.field} must be {kind.shape}", kind.field)
        contacts[kind.field] = kind.normal(value) if kind.lower else value
    tz = parse_timezone(data.get("timezone"))
    start, end = parse_quiet_hours(data.get("quiet_hours"))
    locale = get_str(data, "locale", required=False, max_len=35)
    return Recipient(tenant, user_id, tz, locale, start, end, contacts)


def parse_timezone(value: Any) -> str | None:
    """An IANA time zone name, or None."""
    tz = get_str({"timezone": value}, "timezone", required=False, max_len=64)
    if tz is not None and not valid_timezone(tz):
        raise DomainError("invalid_field", f"unknown timezone {tz!r} (use an IANA name such as "
                          "Europe/Paris)", "timezone")
    return tz


def parse_quiet_hours(quiet: Any) -> tuple[str | None, str | None]:
    """{start: "HH:MM", end: "HH:MM"} as (start, end), or null as (None, None)."""
    if quiet is None:
        return None, None
    if not isinstance(quiet, dict) or set(quiet) != {"start", "end"}:
        raise DomainError("invalid_field", "quiet_hours must be {start: 'HH:MM', end: 'HH:MM'} "
                       "or null", "quiet_hours")
    try:
        parse_hhmm(quiet["start"])
        parse_hhmm(quiet["end"])
    except (ValueError, TypeError, AttributeError) as e:
        raise DomainError("invalid_field", f"quiet_hours: {e}", "quiet_hours") from None
    return quiet["start"], quiet["end"]


def parse_device(data: dict[str, Any]) -> Device:
    """A device from a POST body: a browser's PushSubscription JSON ({endpoint, keys: {p256dh,
    auth}}, with type "webpush" or no type), or {type: "fcm", token}. Its id is derived from
    the endpoint, so registering it again is the same device."""
    kind = data.get("type", "webpush")
    if kind not in DEVICE_KINDS:
        raise DomainError("invalid_field", f"type must be one of {', '.join(DEVICE_KINDS)}", "type")
    if kind == "fcm":
        check_fields(data, frozenset({"type", "token"}))
        token = get_str(data, "token", max_len=4096)
        assert token is not None
        return Device(_device_id("fcm", token), "fcm", token)
    check_fields(data, frozenset({"type", "endpoint", "keys", "expirationTime"}))
    expires = data.get("expirationTime")
    if expires is not None and (not isinstance(expires, int | float) or isinstance(expires, bool)):
        raise DomainError("invalid_field", "expirationTime must be a number or null",
                       "expirationTime")
    endpoint = get_str(data, "endpoint", max_len=MAX_ENDPOINT)
    assert endpoint is not None
    try:
        url = URL(endpoint)
    except ValueError:
        url = URL()
    if url.scheme not in ("https", "http") or not url.host:
        raise DomainError("invalid_field", "endpoint must be the subscription's http(s) URL",
                       "endpoint")
    keys = data.get("keys")
    if not isinstance(keys, dict):
        raise DomainError("invalid_field", "keys must be {p256dh, auth} from the subscription",
                       "keys")
    check_fields(keys, frozenset({"p256dh", "auth"}))
    p256dh, auth = get_str(keys, "p256dh", max_len=256), get_str(keys, "auth", max_len=256)
    if not (B64URL.match(p256dh or "") and B64URL.match(auth or "")):
        raise DomainError("invalid_field", "keys.p256dh and keys.auth must be base64url", "keys")
    return Device(_device_id("webpush", endpoint), "webpush", endpoint, p256dh, auth)


B64URL = re.compile(r"^[A-Za-z0-9_-]+={0,2}$")


def _device_id(kind: str, endpoint: str) -> str:
    return "d_" + hashlib.sha256(f"{kind}\n{endpoint}".encode()).hexdigest()[:16]


def device_view(d: Device) -> dict[str, Any]:
    """A device as the API shows it: never its keys, and the endpoint's host only."""
    where = URL(d.endpoint).host if d.kind == "webpush" else None
    return {"device_id": d.device_id, "type": d.kind, "host": where, "state": d.state,
            "reason": d.reason}


def recipient_view(r: Recipient) -> dict[str, Any]:
    """The profile as the API shows it, with the contacts that are disabled now and why."""
    quiet = {"start": r.quiet_start, "end": r.quiet_end} if r.quiet_start else None
    return {"user_id": r.user_id, **r.contacts, "timezone": r.timezone, "locale": r.locale,
            "quiet_hours": quiet, "disabled_contacts": dead_contacts(r),
            "devices": [device_view(d) for d in r.devices]}
