"""The shapes the API takes and answers, as the client's methods type them: made from the
API's Structs (notifyd/shapes) by notifyd/shapes/typed.py; do not edit by hand. GET
/v1/openapi.json is the whole truth."""

from __future__ import annotations

from typing import Any, Literal, NotRequired, TypedDict

from notifyd.client.calls import Event  # noqa: F401 - its name here, as before


class Step(TypedDict):
    """One step of a ladder in a fallback_chain: a channel, and how long before the next."""

    channel: str
    timeout_sec: NotRequired[float | None]


class NotificationOptions(TypedDict):
    """What a notification may carry beside its user, kind and params."""

    dedup_key: NotRequired[str | None]
    fallback_chain: NotRequired[list[Step] | None]
    max_ttl_sec: NotRequired[int | None]
    send_at: NotRequired[str | None]


class NotificationIn(TypedDict):
    """POST /v1/notifications: tell this user this kind of thing, once."""

    dedup_key: NotRequired[str | None]
    fallback_chain: NotRequired[list[Step] | None]
    max_ttl_sec: NotRequired[int | None]
    send_at: NotRequired[str | None]
    user_id: str
    kind: str
    params: NotRequired[dict[str, Any]]


class ResolutionIn(TypedDict):
    """POST /v1/resolutions: the notification named by its user and dedup key."""

    user_id: str
    dedup_key: str
    resolution: NotRequired[str | None]


class Profile(TypedDict):
    """PUT /v1/users/{user_id}: the whole profile (a field left out is cleared)."""

    timezone: NotRequired[str | None]
    locale: NotRequired[str | None]
    quiet_hours: NotRequired[QuietHours | None]
    email: NotRequired[str | None]
    phone: NotRequired[str | None]
    telegram_chat_id: NotRequired[str | None]
    slack_user_id: NotRequired[str | None]
    whatsapp: NotRequired[str | None]


class Accepted(TypedDict):
    """An accept: the notification's id and state, and whether this request made it."""

    notification_id: str
    state: str
    created: bool


class ItemResult(TypedDict, total=False):
    notification_id: str
    state: str
    created: bool
    status: Literal[200, 202] | Literal[200] | int
    resolution: str
    resolved_at: str | None
    changed: bool
    cancelled_steps: int
    error: ErrorBody


class Resolved(TypedDict):
    """A resolution: the one that won (this, or an earlier one)."""

    notification_id: str
    resolution: str
    resolved_at: str | None
    changed: bool
    cancelled_steps: int


class Status(TypedDict):
    """GET /v1/notifications/{id}: the notification with every step, from the rows alone."""

    notification_id: str
    user_id: str
    kind: str
    dedup_key: str | None
    created_at: str | None
    send_at: str | None
    expires_at: str | None
    current_state: str
    delivered_via: str | None
    sent_via: list[str]
    resolution: ResolutionView | None
    steps: list[StatusStep]
    total_time_ms: int | None
    pruned_at: str | None
    event_id: str | None


class Device(TypedDict):
    """A device as the API shows it: never its keys, and a web push endpoint's host only."""

    device_id: str
    type: str
    host: str | None
    state: Literal["live", "dead"]
    reason: str | None


class UserView(TypedDict):
    """The profile as it is, with the contacts disabled now (and why) and the devices."""

    user_id: str
    timezone: str | None
    locale: str | None
    quiet_hours: QuietHours | None
    disabled_contacts: dict[str, str]
    devices: list[Device]
    email: NotRequired[str]
    phone: NotRequired[str]
    telegram_chat_id: NotRequired[str]
    slack_user_id: NotRequired[str]
    whatsapp: NotRequired[str]


class Preferences(TypedDict):
    """What holds now: the person's switches over each category's defaults, and the version (also the
    ETag)."""

    version: int
    opt_out: bool
    categories: dict[str, CategoryView]
    timezone: str | None
    quiet_hours: QuietHours | None


class Names(TypedDict):
    """The names a person reads for every kind and category, in their locale."""

    locale: str | None
    kinds: dict[str, Name]
    categories: dict[str, Name]


class InboxItem(TypedDict):
    id: str
    kind: str
    title: str
    body: str | None
    created_at: str | None
    read: bool
    read_at: str | None
    archived: bool


class InboxPage(TypedDict):
    items: list[InboxItem]
    next: str | None


class InboxChange(TypedDict):
    """A read or an archive: the item (if one), the badge now, and what a read resolved (one: whether;
    read-all: how many)."""

    id: NotRequired[str]
    read: NotRequired[bool]
    archived: NotRequired[bool]
    unread: int
    resolved: NotRequired[bool | int]


class Token(TypedDict):
    token: str
    user_id: str
    expires_at: str | None


class QuietHours(TypedDict):
    start: str
    end: str


class ErrorBody(TypedDict):
    code: str
    message: str
    field: str | None


class ResolutionView(TypedDict):
    resolution: str | None
    resolved_at: str | None
    resolved_by: str | None


class StatusStep(TypedDict):
    """One step of the ladder, its attempts and its evidence."""

    step_no: int
    channel: str
    status: str
    send_after: str | None
    attempts: int
    reason: str | None
    note: str | None
    provider_ref: str | None
    template: str | None
    pref_version: int | None
    evidence: Literal["accepted", "delivered", "shown", "opened"] | None
    timed_out: bool
    digest: DigestView | None
    receipts: list[ReceiptView]
    updated_at: str | None
    attempt_log: list[AttemptView]


class CategoryView(TypedDict):
    optional: bool
    email: bool
    sms: bool
    push: bool
    chat: bool
    title: str
    description: str | None
    media: list[str]


class Name(TypedDict):
    title: str
    description: str | None


class DigestView(TypedDict):
    """The digest that carried a step: its id and whether it went out."""

    notification_id: str
    current_state: str | None
    sent_via: list[str]


class ReceiptView(TypedDict):
    provider: str
    event: str
    occurred_at: str | None
    received_at: str | None
    detail: str | None


class AttemptView(TypedDict):
    attempt: int
    started_at: str | None
    ended_at: str | None
    outcome: str | None
    reason: str | None
    provider_ref: str | None
