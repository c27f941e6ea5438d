"""A person's side: the profile, push devices, user tokens, preferences, the inbox and the
suppression list. The profile's contact fields come from core/contacts.ADDRESSES and the
switches from core/catalog.MEDIUMS, so a new contact kind or medium changes these shapes (and the
document, and the client) with no edit here."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, Literal, cast

import msgspec
from msgspec import UNSET, Meta, UnsetType

from notifyd.core.catalog import MEDIUMS
from notifyd.core.contacts import ADDRESSES, DEVICES, SUPPRESSION_TYPES, Address
from notifyd.shapes.common import ID_MAX, Answer, Body, Count, Time

MAX_ENDPOINT = 2048
APNS_TOKEN_MAX = 400  # 32 bytes (64 hex digits) today; Apple says not to count on the length
HEX_EVEN = r"^(?:[0-9a-fA-F]{2})+$"
TOKEN_TTL_MIN = 60
B64URL = r"^[A-Za-z0-9_-]+={0,2}$"
HHMM = Annotated[str, Meta(pattern=r"^[0-9]{2}:[0-9]{2}$")]
Timezone = Annotated[str, Meta(min_length=1, max_length=64,
                               description="an IANA zone, e.g. Europe/Paris")]
Locale = Annotated[str, Meta(min_length=1, max_length=35)]
QUIET = "{start: 'HH:MM', end: 'HH:MM'} or null"
DeviceKind = Annotated[str, Meta(extra_json_schema={"enum": [d.kind for d in DEVICES]})]
DeviceState = Literal["live", "dead"]


def _address(a: Address) -> Any:
    """A contact field of the profile, checked as its kind says (core/contacts.py)."""
    return Annotated[str, Meta(min_length=1, max_length=ID_MAX, description=a.shape,
                               pattern=a.pattern.pattern if a.pattern else None,
                               extra={"shape": a.shape} if a.pattern else None)]


def _with_addresses(name: str, base: type[Any], kind: Any, default: Any, doc: str) -> Any:
    """`base` with a field per contact kind of the profile."""
    return msgspec.defstruct(name, [(a.field, kind(a), default) for a in ADDRESSES],
                             bases=(base,), kw_only=True, module=__name__,
                             namespace={"__doc__": doc})


# --- the profile ------------------------------------------------------------------------------


class QuietHours(Body, kw_only=True):
    start: HHMM
    end: HHMM


class QuietHoursPatch(Body, kw_only=True):
    start: HHMM | None | UnsetType = UNSET
    end: HHMM | None | UnsetType = UNSET


Quiet = Annotated[QuietHours, Meta(extra={"shape": QUIET, "whole": True})]


class ProfileFields(Body, kw_only=True):
    timezone: Timezone | None = None
    locale: Locale | None = None
    quiet_hours: Quiet | None = None


class ProfilePatchFields(Body, kw_only=True):
    timezone: Timezone | None | UnsetType = UNSET
    locale: Locale | None | UnsetType = UNSET
    quiet_hours: Annotated[QuietHoursPatch, Meta(
        description="merged into the current quiet hours: both ends must hold after it",
        extra={"shape": QUIET, "whole": True})] | None | UnsetType = UNSET


User = cast(type[ProfileFields], _with_addresses(
    "User", ProfileFields, lambda a: _address(a) | None, None,
    "PUT /v1/users/{user_id}: the whole profile (a field left out is cleared)."))
UserPatch = cast(type[ProfilePatchFields], _with_addresses(
    "UserPatch", ProfilePatchFields, lambda a: _address(a) | None | UnsetType, UNSET,
    "a JSON merge patch (RFC 7396) of the profile: the fields it names change, null clears "
    "one, the rest stay"))


class Device(Answer, kw_only=True):
    """A device as the API shows it: never its keys, and a web push endpoint's host only."""

    device_id: str
    type: DeviceKind
    host: str | None
    state: DeviceState
    reason: str | None


class Devices(Answer, kw_only=True):
    devices: list[Device]


class UserViewFields(Answer, kw_only=True):
    user_id: str
    timezone: str | None
    locale: str | None
    quiet_hours: QuietHours | None
    disabled_contacts: dict[str, str]
    devices: list[Device]


UserView = cast(type[UserViewFields], _with_addresses(
    "UserView", UserViewFields, lambda a: str | UnsetType, UNSET,
    "The profile as it is, with the contacts disabled now (and why) and the devices."))


class Removed(Answer, kw_only=True):
    profile: bool
    preferences: bool
    devices: Count
    inbox_items: Count
    memberships: Count


class Cancelled(Answer, kw_only=True):
    notifications: Count
    steps: Count


class Scrubbed(Answer, kw_only=True):
    params: Count
    payloads: Count
    receipts: Count
    events: Count


class KeptSuppressions(Answer, kw_only=True):
    hashed: Count
    kept: Count


class Erased(Answer, kw_only=True):
    """What erasing a person did (DELETE /v1/users/{user_id})."""

    user_id: str
    erased_at: Time
    removed: Removed
    cancelled: Cancelled
    scrubbed: Scrubbed
    suppressions: KeptSuppressions


# --- push devices -----------------------------------------------------------------------------


class PushKeys(Body, kw_only=True):
    p256dh: Annotated[str, Meta(min_length=1, max_length=256, pattern=B64URL)]
    auth: Annotated[str, Meta(min_length=1, max_length=256, pattern=B64URL)]


class DeviceType(msgspec.Struct):
    """Which device a POST names: its type, web push when it names none."""

    type: Literal["webpush", "fcm", "apns"] = "webpush"


class WebPushDevice(Body, kw_only=True):
    """A browser's PushSubscription.toJSON()."""

    type: Literal["webpush"] = "webpush"
    endpoint: Annotated[str, Meta(min_length=1, max_length=MAX_ENDPOINT,
                                  extra_json_schema={"format": "uri"})]
    expirationTime: Annotated[float, Meta(extra={"shape": "a number or null"})] | None = None
    keys: Annotated[PushKeys, Meta(extra={
        "shape": "{p256dh, auth} from the subscription, each base64url", "whole": True})]


class FcmDevice(Body, kw_only=True):
    """An FCM registration token."""

    type: Literal["fcm"]
    token: Annotated[str, Meta(min_length=1, max_length=4096)]


class ApnsDevice(Body, kw_only=True):
    """An APNs device token, as the app's didRegisterForRemoteNotificationsWithDeviceToken gives
    it, in hex."""

    type: Literal["apns"]
    token: Annotated[str, Meta(min_length=32, max_length=APNS_TOKEN_MAX, pattern=HEX_EVEN,
                               extra={"shape": "the device token in hex (an even number of "
                                               "0-9 a-f, 64 today)"})]


DEVICES_BY_TYPE: dict[str, type[WebPushDevice | FcmDevice | ApnsDevice]] = {
    "webpush": WebPushDevice, "fcm": FcmDevice, "apns": ApnsDevice}


# --- user tokens ------------------------------------------------------------------------------


class TokenRequest(Body, kw_only=True):
    ttl_sec: Annotated[int, Meta(ge=TOKEN_TTL_MIN, description="at most tokens.max_ttl_sec")] \
        | UnsetType = UNSET


class Token(Answer, kw_only=True):
    token: str
    user_id: str
    expires_at: Time


# --- preferences ------------------------------------------------------------------------------

MEDIA = ", ".join(MEDIUMS)
Medium = Annotated[str, Meta(extra_json_schema={"enum": list(MEDIUMS)})]
TITLE = ("the name a person reads, in their locale (else its language, else the templates' "
         "default locale; else the identifier made readable)")
if TYPE_CHECKING:  # made from MEDIUMS below: a medium is a field of each

    class Switches(Body):
        pass

    class SwitchesPatch(Body):
        pass

    class CategoryView(Answer):
        optional: bool
        title: str
        description: str | None
        media: list[str]
else:
    Switches = msgspec.defstruct(
        "Switches", [(m, bool | UnsetType, UNSET) for m in MEDIUMS], bases=(Body,),
        kw_only=True, module=__name__)
    SwitchesPatch = msgspec.defstruct(
        "SwitchesPatch", [(m, bool | None | UnsetType, UNSET) for m in MEDIUMS], bases=(Body,),
        kw_only=True, module=__name__)
    CategoryView = msgspec.defstruct(
        "CategoryView", [("optional", bool), *((m, bool) for m in MEDIUMS),
                         ("title", Annotated[str, Meta(description=TITLE)]),
                         ("description", str | None),
                         ("media", Annotated[list[Medium], Meta(description=(
                             "the media its kinds' ladders can send by: the switches a page "
                             "shows"))])], bases=(Answer,), kw_only=True, module=__name__)


class PreferencesRequest(Body, kw_only=True):
    """PUT .../preferences: the whole document, and the time zone and quiet hours if named."""

    version: Annotated[int, Meta(ge=0, lt=2**62, description=(
        "the version the page read: if another change came since, 412 precondition_failed "
        "and nothing is written. Left out: written over any version"), extra={
        "shape": "the version the page read (a whole number), or left out"})] | None = None
    opt_out: bool = False
    categories: Annotated[dict[str, Annotated[Switches, Meta(extra={
        "shape": f"a map of mediums ({MEDIA}) to true or false", "whole": True})]], Meta(extra={
            "shape": "an object: {category: {medium: true|false}}"})] = {}
    timezone: Annotated[Timezone, Meta(description="left out: as it is")] | None | \
        UnsetType = UNSET
    quiet_hours: Annotated[Quiet, Meta(description="left out: as they are")] | None | \
        UnsetType = UNSET


class PreferencesPatch(Body, kw_only=True):
    """A JSON merge patch (RFC 7396) of what the person chose: null puts a switch, or a whole
    category, back to its default."""

    opt_out: bool | None | UnsetType = UNSET
    categories: Annotated[dict[str, Annotated[SwitchesPatch, Meta(extra={
        "shape": f"a map of mediums ({MEDIA}) to true, false or null", "whole": True})] | None],
        Meta(extra={"shape": "an object: {category: {medium: true|false|null}}"})] | None | \
        UnsetType = UNSET


class Preferences(Answer, kw_only=True):
    """What holds now: the person's switches over each category's defaults, and the version
    (also the ETag)."""

    version: Annotated[int, Meta(description="bumped by every change; each claim records the "
                                             "version it read")]
    opt_out: bool
    categories: dict[str, CategoryView]
    timezone: str | None
    quiet_hours: QuietHours | None


class Name(Answer, kw_only=True):
    title: Annotated[str, Meta(description=TITLE)]
    description: str | None


class Names(Answer, kw_only=True):
    """The names a person reads for every kind and category, in their locale."""

    locale: Annotated[str | None, Meta(description="the person's locale they were chosen for")]
    kinds: dict[str, Name]
    categories: dict[str, Name]


# --- the inbox --------------------------------------------------------------------------------


class InboxItem(Answer, kw_only=True):
    id: str
    kind: str
    title: str
    body: str | None
    created_at: Time
    read: bool
    read_at: Time
    archived: bool


class InboxPage(Answer, kw_only=True):
    items: list[InboxItem]
    next: Annotated[str | None, Meta(description="the before= of the next page")]


class Badge(Answer, kw_only=True):
    unread: Count


class InboxChange(Answer, kw_only=True):
    """A read or an archive: the item (if one), the badge now, and what a read resolved (one:
    whether; read-all: how many)."""

    id: str | UnsetType = UNSET
    read: bool | UnsetType = UNSET
    archived: bool | UnsetType = UNSET
    unread: Count
    resolved: bool | int | UnsetType = UNSET


# --- the suppression list ---------------------------------------------------------------------

ChannelType = Annotated[str, Meta(extra_json_schema={"enum": list(SUPPRESSION_TYPES)})]


class SuppressionRequest(Body, kw_only=True):
    channel_type: Annotated[ChannelType, Meta(min_length=1, max_length=ID_MAX)]
    address: Annotated[str, Meta(min_length=1, max_length=320, description=(
        "email address, E.164 number, chat id, or a push device id (d_...)"))]
    reason: Annotated[str, Meta(min_length=1, max_length=200)] | None = None


class Suppression(Answer, kw_only=True):
    channel_type: ChannelType
    address: str
    reason: str
    source: str
    evidence: str | None
    created_at: Time
    scope: Literal["tenant", "all tenants"]
    created: bool | UnsetType = UNSET  # POST's answer: whether this call added it


class Suppressions(Answer, kw_only=True):
    suppressions: list[Suppression]
