"""Recipients: one home for what a user is to notifyd — the profile's shape and checks, the
contact each channel sends to, and which contacts are dead.

A contact is named by its kind: `email`, `phone`, `chat:NAME`, ... A channel that sends to no
address of the person's (a producer webhook, the log) has no contact, and nothing it hears back
disables anything for a user. A disabled address counts only while it is still the user's current
one, so a new address is never blocked by an old one's bounce.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from typing import Any

from yarl import URL

from notifyd.channels import TYPES
from notifyd.config import Config
from notifyd.core.errors import ApiError
from notifyd.core.models import Device, Recipient, normal_address
from notifyd.domain.ladder import parse_hhmm, valid_timezone
from notifyd.domain.validate import check_fields, get_str

CONTACT_FIELDS = ("email", "phone", "telegram_chat_id", "slack_user_id")
USER_FIELDS = frozenset({*CONTACT_FIELDS, "timezone", "locale", "quiet_hours"})
E164 = re.compile(r"^\+[1-9][0-9]{6,14}$")
EMAIL = re.compile(r"^[^@\s<>()\[\],;:\\\"]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}$")
DEVICE_KINDS = ("webpush", "fcm")
MAX_ENDPOINT = 2048


def contact_kinds(cfg: Config) -> dict[str, str | None]:
    """Channel name -> the contact kind it sends to (None: no address of the person's)."""
    return {name: TYPES[ch.type].contact for name, ch in cfg.channels.items()}


def device_kind(contact: str | None) -> str | None:
    """'webpush' for the contact 'device:webpush': a channel that sends to the user's devices."""
    return contact[7:] if contact and contact.startswith("device:") else None


def live_devices(r: Recipient | None, kind: str) -> tuple[Device, ...]:
    return tuple(d for d in r.devices if d.kind == kind and d.state == "live") if r else ()


def has_contact(r: Recipient | None, contact: str) -> bool:
    """Whether the user has somewhere to send for this contact: an address, or a live device."""
    kind = device_kind(contact)
    if kind is not None:
        return bool(live_devices(r, kind))
    return bool(address_of(r.contacts if r else {}, contact))


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
    for name in CONTACT_FIELDS:
        value = get_str(data, name, required=False)
        if value is not None:
            contacts[name] = value
    if "email" in contacts and not EMAIL.match(contacts["email"]):
        raise ApiError("invalid_field", "email must be an address like name@example.com",
                       "email")
    if "email" in contacts:  # as the suppression list and providers' receipts have it
        contacts["email"] = normal_address("email", contacts["email"])
    if "phone" in contacts and not E164.match(contacts["phone"]):
        raise ApiError("invalid_field", "phone must be E.164: + and the country code, digits "
                       "only (e.g. +14155550123)", "phone")
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


def parse_device(data: dict[str, Any]) -> Device:
    """A device from a POST body: a browser's PushSubscription JSON ({endpoint, keys: {p256dh,
    auth}}, with type "webpush" or no type), or {type: "fcm", token}. Its id is derived from
    the endpoint, so registering it again is the same device."""
    kind = data.get("type", "webpush")
    if kind not in DEVICE_KINDS:
        raise ApiError("invalid_field", f"type must be one of {', '.join(DEVICE_KINDS)}", "type")
    if kind == "fcm":
        check_fields(data, frozenset({"type", "token"}))
        token = get_str(data, "token", max_len=4096)
        assert token is not None
        return Device(_device_id("fcm", token), "fcm", token)
    check_fields(data, frozenset({"type", "endpoint", "keys", "expirationTime"}))
    expires = data.get("expirationTime")
    if expires is not None and (not isinstance(expires, int | float) or isinstance(expires, bool)):
        raise ApiError("invalid_field", "expirationTime must be a number or null",
                       "expirationTime")
    endpoint = get_str(data, "endpoint", max_len=MAX_ENDPOINT)
    assert endpoint is not None
    try:
        url = URL(endpoint)
    except ValueError:
        url = URL()
    if url.scheme not in ("https", "http") or not url.host:
        raise ApiError("invalid_field", "endpoint must be the subscription's http(s) URL",
                       "endpoint")
    keys = data.get("keys")
    if not isinstance(keys, dict):
        raise ApiError("invalid_field", "keys must be {p256dh, auth} from the subscription",
                       "keys")
    check_fields(keys, frozenset({"p256dh", "auth"}))
    p256dh, auth = get_str(keys, "p256dh", max_len=256), get_str(keys, "auth", max_len=256)
    if not (B64URL.match(p256dh or "") and B64URL.match(auth or "")):
        raise ApiError("invalid_field", "keys.p256dh and keys.auth must be base64url", "keys")
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
