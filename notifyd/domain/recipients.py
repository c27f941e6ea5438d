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
from collections.abc import Mapping
from typing import Any, cast

import msgspec
from yarl import URL

from notifyd.core.contacts import ADDRESSES, BY_FIELD, Address, Contact, Devices
from notifyd.core.errors import DomainError
from notifyd.core.models import Device, Recipient
from notifyd.core.records import Erased
from notifyd.core.text import iso
from notifyd.domain.ladder import parse_hhmm, valid_timezone
from notifyd.domain.validate import merge_patch
from notifyd.shapes import people as shapes
from notifyd.shapes.decode import convert

USER_FIELDS = frozenset(f.encode_name for f in msgspec.structs.fields(shapes.User))


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


def parse_recipient(tenant: str, user_id: str, data: shapes.ProfileFields) -> Recipient:
    """A profile from a PUT body (its shape checked by shapes.people.User); a DomainError names
    the first field that is wrong."""
    contacts: dict[str, Any] = {}
    for kind in ADDRESSES:
        value = getattr(data, kind.field)
        if value is not None:
            contacts[kind.field] = kind.normal(value) if kind.lower else value
    tz = parse_timezone(data.timezone)
    start, end = parse_quiet_hours(data.quiet_hours)
    return Recipient(tenant, user_id, tz, data.locale, start, end, contacts)


def parse_timezone(tz: str | None) -> str | None:
    """An IANA time zone name, or None."""
    if tz is not None and not valid_timezone(tz):
        raise DomainError("invalid_field", f"unknown timezone {tz!r} (use an IANA name such as "
                          "Europe/Paris)", "timezone")
    return tz


def profile(r: Recipient | None) -> dict[str, Any]:
    """The profile as a PUT body would set it: what a merge patch (PATCH) applies to."""
    if r is None:
        return {}
    quiet = {"start": r.quiet_start, "end": r.quiet_end} if r.quiet_start else None
    doc = {**r.contacts, "timezone": r.timezone, "locale": r.locale, "quiet_hours": quiet}
    return {name: value for name, value in doc.items() if value is not None}


def patch_recipient(tenant: str, user_id: str, current: Recipient | None,
                    patch: shapes.ProfilePatchFields) -> Recipient:
    """The profile with a JSON merge patch applied (RFC 7396: a field the patch leaves out is
    kept, null clears it), checked as a PUT body is. A name a PUT does not take is refused even
    as null (by shapes.people.UserPatch): misspelt, it would change nothing, silently."""
    merged = merge_patch(profile(current), msgspec.to_builtins(patch))
    return parse_recipient(tenant, user_id, convert(merged, shapes.User))


def parse_quiet_hours(quiet: shapes.QuietHours | None) -> tuple[str | None, str | None]:
    """{start: "HH:MM", end: "HH:MM"} as (start, end), or null as (None, None)."""
    if quiet is None:
        return None, None
    try:
        parse_hhmm(quiet.start)
        parse_hhmm(quiet.end)
    except ValueError as e:
        raise DomainError("invalid_field", f"quiet_hours: {e}", "quiet_hours") from None
    return quiet.start, quiet.end


def parse_device(data: shapes.WebPushDevice | shapes.FcmDevice | shapes.ApnsDevice) -> Device:
    """A device from a POST body: a browser's PushSubscription JSON ({endpoint, keys: {p256dh,
    auth}}, with type "webpush" or no type), {type: "fcm", token} or {type: "apns", token}
    (hex, kept lower-case). Its id is derived from the endpoint or token, so registering it
    again is the same device (and brings a dead one back to life)."""
    if isinstance(data, shapes.FcmDevice):
        return Device(_device_id("fcm", data.token), "fcm", data.token)
    if isinstance(data, shapes.ApnsDevice):
        token = data.token.lower()
        return Device(_device_id("apns", token), "apns", token)
    try:
        url = URL(data.endpoint)
    except ValueError:
        url = URL()
    if url.scheme not in ("https", "http") or not url.host:
        raise DomainError("invalid_field", "endpoint must be the subscription's http(s) URL",
                          "endpoint")
    return Device(_device_id("webpush", data.endpoint), "webpush", data.endpoint,
                  data.keys.p256dh, data.keys.auth)


def _device_id(kind: str, endpoint: str) -> str:
    return "d_" + hashlib.sha256(f"{kind}\n{endpoint}".encode()).hexdigest()[:16]


def device_view(d: Device) -> shapes.Device:
    """A device as the API shows it: never its keys, and the endpoint's host only."""
    where = URL(d.endpoint).host if d.kind == "webpush" else None
    return shapes.Device(device_id=d.device_id, type=d.kind, host=where,
                         state=cast(shapes.DeviceState, d.state), reason=d.reason)


def erased_view(user_id: str, e: Erased) -> shapes.Erased:
    """What erasing a person did, as DELETE /v1/users/{user_id} answers it."""
    return shapes.Erased(
        user_id=user_id, erased_at=iso(e.erased_at),
        removed=shapes.Removed(profile=e.profile, preferences=e.preferences,
                               devices=e.devices, inbox_items=e.inbox_items,
                               memberships=e.memberships),
        cancelled=shapes.Cancelled(notifications=e.cancelled, steps=e.cancelled_steps),
        scrubbed=shapes.Scrubbed(params=e.params, payloads=e.payloads, receipts=e.receipts,
                                 events=e.events),
        suppressions=shapes.KeptSuppressions(hashed=e.hashed, kept=e.kept))


def recipient_view(r: Recipient) -> shapes.UserViewFields:
    """The profile as the API shows it, with the contacts that are disabled now and why."""
    quiet = shapes.QuietHours(start=r.quiet_start, end=r.quiet_end) \
        if r.quiet_start is not None and r.quiet_end is not None else None
    contacts = {name: value for name, value in r.contacts.items() if name in BY_FIELD}
    return shapes.UserView(user_id=r.user_id, **contacts, timezone=r.timezone,
                           locale=r.locale, quiet_hours=quiet,
                           disabled_contacts=dead_contacts(r),
                           devices=[device_view(d) for d in r.devices])
