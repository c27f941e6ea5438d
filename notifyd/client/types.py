"""The shapes the API takes and answers, as the client's methods type them (GET
/v1/openapi.json is the whole truth; these name the fields a caller reads most)."""

from __future__ import annotations

from typing import Any, NamedTuple, NotRequired, TypedDict


class Step(TypedDict):
    """One step of a ladder ({channel, timeout_sec?}) in a fallback_chain."""

    channel: str
    timeout_sec: NotRequired[float]


class NotificationOptions(TypedDict, total=False):
    """What a notification may carry beside its user, kind and params."""

    dedup_key: str
    send_at: str  # RFC 3339 with its offset: 2026-09-21T14:13:20Z
    max_ttl_sec: int
    fallback_chain: list[Step]


class NotificationIn(NotificationOptions, total=False):
    """One item of a batch: the body of POST /v1/notifications."""

    user_id: str
    kind: str
    params: dict[str, Any]


class ResolutionIn(TypedDict, total=False):
    """One item of a resolutions batch."""

    user_id: str
    dedup_key: str
    resolution: str


class Profile(TypedDict, total=False):
    """A person's profile (PUT /v1/users/{id}): their addresses and how to reach them."""

    email: str
    phone: str  # E.164
    telegram_chat_id: str
    slack_user_id: str
    timezone: str  # IANA, e.g. Europe/Paris
    locale: str
    quiet_hours: dict[str, str]  # {"start": "22:00", "end": "07:00"}


class Accepted(TypedDict):
    notification_id: str
    state: str
    created: bool


class ItemResult(TypedDict, total=False):
    """One batch item's answer: its status, and the single call's body or its error."""

    status: int
    notification_id: str
    state: str
    created: bool
    resolution: str
    resolved_at: str
    changed: bool
    cancelled_steps: int
    error: dict[str, Any]


class Resolved(TypedDict):
    notification_id: str
    resolution: str
    resolved_at: str
    changed: bool
    cancelled_steps: int


class Status(TypedDict, total=False):
    notification_id: str
    user_id: str
    kind: str
    dedup_key: str | None
    created_at: str
    expires_at: str
    send_at: str | None
    current_state: str
    delivered_via: str | None
    resolution: dict[str, Any] | None
    steps: list[dict[str, Any]]
    total_time_ms: int | None
    pruned_at: str | None


class Device(TypedDict):
    device_id: str
    type: str
    host: str | None
    state: str
    reason: str | None


class UserView(TypedDict, total=False):
    user_id: str
    email: str
    phone: str
    telegram_chat_id: str
    slack_user_id: str
    timezone: str | None
    locale: str | None
    quiet_hours: dict[str, str] | None
    disabled_contacts: dict[str, str]
    devices: list[Device]


class Preferences(TypedDict):
    version: int
    opt_out: bool
    categories: dict[str, dict[str, bool]]


class InboxItem(TypedDict):
    id: str
    kind: str
    title: str
    body: str | None
    created_at: str
    read: bool
    read_at: str | None
    archived: bool


class InboxPage(TypedDict):
    items: list[InboxItem]
    next: str | None


class InboxChange(TypedDict, total=False):
    id: str
    read: bool
    archived: bool
    unread: int
    resolved: bool | int


class Token(TypedDict):
    token: str
    user_id: str
    expires_at: str


class Event(NamedTuple):
    """One Server-Sent Event: its name ("decision", "lost"; "item", "badge", ...), its data
    read as JSON, and its id (an inbox item's seq) if it has one."""

    name: str
    data: dict[str, Any]
    id: str | None = None
