"""The tables of named entries and lists that say what is sent and how: channels (the keys every
channel has; its type declares its own, channels/types/), kinds, preference categories, send
limits, event types and tenants. Each key is declared once with its type, default, doc and
bounds (core/fields.doc); a table's checks across its keys are its rules(), and the rules
across tables (a ladder's channels exist, ...) are config/check.py's."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from notifyd.channels import TYPES as CHANNEL_TYPES
from notifyd.core.catalog import MEDIUMS, LadderStep
from notifyd.core.fields import MAX_SEC, Bounds, Checked, Problems, doc, docf

NAME_RE = re.compile(r"^[a-z0-9][a-z0-9_.-]{0,63}$")
NAMES = Bounds(pattern=NAME_RE, says="names are lower-case letters, digits, _ . -")
STOP_RULES = ("resolved", "delivered", "read")
SCHEDULE_RE = re.compile(r"^(hourly|daily ([01][0-9]|2[0-3]):[0-5][0-9]|"
                         r"weekly (mon|tue|wed|thu|fri|sat|sun) ([01][0-9]|2[0-3]):[0-5][0-9])$")
URGENCIES = ("urgent", "normal")
ORIGIN_RE = re.compile(r"^https?://[A-Za-z0-9.-]+(:[0-9]{1,5})?$")
SEND_SLACK_SEC = 5.0  # a send gets this long beyond its channel timeout before it is unknown


@dataclass(frozen=True)
class ChannelConfig(Checked):
    """The keys every channel has; its type adds its own (channels/types/<type>.py), kept in
    settings."""

    type: str = doc(f"Channel type: {', '.join(CHANNEL_TYPES)}. Each type's own keys are listed "
                    "at the end of this file.", "log")
    timeout_sec: float = doc("Provider call timeout; a timeout is an unknown outcome.", 10.0,
                             gt=0)
    rate_per_sec: float = doc("Token bucket refill rate for this channel.", 100.0, gt=0)
    burst: int = doc("Token bucket size.", 100, ge=1)
    urgent_concurrency: int = doc("Calls to the provider in flight at once in the urgent lane "
                                  "(a call's place comes back with its answer).", 16, ge=1)
    bulk_concurrency: int = doc("Calls to the provider in flight at once in the bulk lane.", 8,
                                ge=1)
    broadcast_concurrency: int = doc("Calls in flight at once in the broadcast lane (kinds with "
                                     "broadcast = true: announcements to many).", 8, ge=1)
    broadcast_share: float = doc("The most of rate_per_sec and burst the broadcast lane may "
                                 "use; the rest stays for the channel's other kinds, so "
                                 "one-time codes keep flowing through an announcement on the "
                                 "same provider account.", 0.5, gt=0, le=1)
    max_attempts: int = doc("Most attempts per step (counted from its last replay) before it "
                            "is dead. 0: no count limit; a step that keeps failing for a "
                            "passing reason (refused connection, timeout, 5xx, 429, SMTP 4xx) is "
                            "retried until its time to live ends (the kind's ttl_sec, or a "
                            "request's shorter max_ttl_sec), as a mail relay keeps a message "
                            "queued for days, so an outage of hours ends in a send.", 0, ge=0,
                            note="0: no count limit, the time to live bounds the retries")
    backoff_base_sec: float = doc("First retry delay ceiling; doubles per attempt up to "
                                  "backoff_max_sec. Each delay is drawn at random below its "
                                  "ceiling (full jitter), so the retries of an outage do not "
                                  "arrive together.", 1.0, gt=0)
    backoff_max_sec: float = doc("Largest retry delay ceiling: while a provider is down each "
                                 "step is tried again at least this often, so a provider or "
                                 "relay that comes back is used within minutes (Postfix's "
                                 "queue starts at 300 s, minimal_backoff_time). A longer "
                                 "Retry-After is honoured.", 300.0, gt=0)
    vendor: str = doc("Circuit breaker key; channels naming one vendor share a breaker. Empty: "
                      "the channel name.", "")
    breaker_error_rate: float = doc("Open the breaker when this share of recent calls failed.", 0.5,
                                    gt=0, le=1)
    breaker_min_calls: int = doc("Calls in the window before the breaker may open.", 20, ge=1)
    breaker_window_sec: float = doc("Window over which the error rate is measured.", 30.0, gt=0)
    breaker_cooldown_sec: float = doc("How long the breaker stays open before one probe.", 30.0,
                                      gt=0)
    # The type's own settings dataclass; None means its defaults. Not a TOML key of its own:
    # a type's keys sit flat in the channel's table.
    settings: Any = field(default=None, metadata={"type_settings": True})

    def __post_init__(self) -> None:
        if self.settings is None and self.type in CHANNEL_TYPES:
            object.__setattr__(self, "settings", CHANNEL_TYPES[self.type].settings())

    def rules(self) -> Problems:
        """A known type with its own settings (their keys are checked as this table's), and a
        backoff that grows."""
        ctype = CHANNEL_TYPES.get(self.type)
        if ctype is None:
            return [("type", f"must be one of {', '.join(CHANNEL_TYPES)}")]
        out = []
        if not isinstance(self.settings, ctype.settings):
            out.append(("", f"settings must be {ctype.settings.__name__}"))
        if self.backoff_base_sec > self.backoff_max_sec:
            out.append(("backoff_base_sec", "must not be over backoff_max_sec"))
        return out


@dataclass(frozen=True)
class KindConfig(Checked):
    ladder: tuple[LadderStep, ...] = docf(
        "Ordered steps: {channel, after_sec?, timeout_sec?}. A step is due after_sec after "
        "accept, or else when the previous step's timeout_sec window ends.", tuple,
        nonempty=True, says="needs at least one step")
    ttl_sec: int = doc("Time to live: steps not sent by then end expired. It is also how long "
                       "a step whose provider keeps failing is retried (a day; a mail relay "
                       "keeps mail for five), and a request's max_ttl_sec may shorten it.",
                       86400, ge=1, le=MAX_SEC, note="a year")
    urgency: str = doc("urgent (bypasses quiet hours, urgent lane) or normal.", "normal",
                       choices=URGENCIES)
    broadcast: bool = doc("An announcement to many (news, a status page, everyone): its steps "
                          "ride each channel's broadcast lane, at most the channel's "
                          "broadcast_share of its rate, behind the urgent and bulk lanes' "
                          "work.", False)
    stop: str = doc("What ends the ladder: resolved (written from outside: the API, the CLI), "
                    "delivered (also a provider's or the app's receipt proving delivery) or "
                    "read (also the person reading its inbox item; needs inbox = true).",
                    "resolved", choices=STOP_RULES)
    category: str = doc("Preference category ([categories.NAME]); empty means the kind's name. "
                        "People turn categories on and off per medium.", "")
    inbox: bool = doc("Whether the notification also lands in the recipient's in-app inbox "
                      "(written with it, whatever the preferences; templates KIND/LOCALE/"
                      "inbox.title.j2 and optional inbox.body.j2).", False)
    digest: str = doc("The digest kind that collects this kind's items held back by a limit "
                      "([[limits]]) or by always_digest. Empty: an item over a limit is "
                      "suppressed, reason rate_limited.", "")
    always_digest: bool = doc("Hold every item for the digest instead of sending it.", False)
    read_on_resolve: bool = doc("Mark the inbox item read when the notification is resolved "
                                "elsewhere (the API, the CLI, a receipt proving delivery), so "
                                "what was dealt with stops counting in the badge (needs "
                                "inbox = true).", False)
    schedule: str = doc('Makes this a digest kind: "hourly", "daily HH:MM" or "weekly DAY HH:MM" '
                        '(DAY: mon..sun) in the recipient\'s timezone. The digest scheduler '
                        "creates one notification of it per recipient and window, whose "
                        "templates get `items` (each held item's kind, params, created_at) and "
                        "`count`.", "", pattern=SCHEDULE_RE,
                        says='must be "hourly", "daily HH:MM" or "weekly DAY HH:MM" (DAY: mon..sun)')
    allow_override: bool = doc("Whether a request may replace the ladder with fallback_chain.",
                               False)
    transactional: bool = doc("One-time codes, receipts, alerts: true. News and digests: false, "
                              "and their email carries List-Unsubscribe (RFC 8058).", True)
    collapse_key: str = doc("Push: a newer notification of this kind replaces an undelivered "
                            "older one on the device (Web Push Topic, FCM collapse_key). Empty: "
                            "each is kept.", "")

    def rules(self) -> Problems:
        """Its keys together; the kinds and channels it names: notifyd/config/check.py."""
        out = []
        if self.broadcast and self.urgency == "urgent":
            out.append(("broadcast", "an urgent kind rides the urgent lane; a broadcast cannot be "
                                     "urgent"))
        if self.stop == "read" and not self.inbox:
            out.append(("stop", 'is "read" but the kind has no inbox item to read (set inbox = '
                                'true)'))
        if self.read_on_resolve and not self.inbox:
            out.append(("read_on_resolve", "the kind has no inbox item to mark read (set inbox = "
                                           "true)"))
        if self.digest and self.urgency == "urgent":
            out.append(("digest", "an urgent kind is never held for a digest: a late code is a "
                                  "broken login"))
        if self.always_digest and not self.digest:
            out.append(("always_digest", "needs digest = the digest kind that collects the items"))
        if self.schedule and (self.digest or self.always_digest):
            out.append(("schedule", "a digest kind cannot itself be held for a digest"))
        for i, step in enumerate(self.ladder[1:], 1):
            if step.after_sec is None and self.ladder[i - 1].timeout_sec is None:
                out.append((f"ladder[{i}]", "needs after_sec, or timeout_sec on the step before "
                                            "it"))
        return out


@dataclass(frozen=True)
class CategoryConfig(Checked):
    """A preference category: what a person may turn off, and what is on until they choose."""

    optional: bool = doc("Whether a person may turn it off at all (one-time codes and security "
                         "alerts: false, and their preferences are ignored).", True)
    email: bool = doc("Email is on until the person chooses.", True)
    sms: bool = doc("SMS is on until the person chooses.", True)
    push: bool = doc("Push is on until the person chooses.", True)
    chat: bool = doc("Chat is on until the person chooses.", True)


@dataclass(frozen=True)
class LimitConfig(Checked):
    """At most `count` sends per `per_sec` to one person, of what the limit names."""

    count: int = doc("Sends allowed in the window.", 3, ge=1)
    per_sec: float = doc("The window, sliding, in seconds.", 3600.0, gt=0, le=MAX_SEC,
                         says=f"must be 0..{MAX_SEC}")
    kind: str = doc("Only this kind. Empty: any.", "")
    category: str = doc("Only this category. Empty: any.", "")
    medium: str = doc("Only this medium (email, sms, push, chat). Empty: any.", "",
                      choices=("", *MEDIUMS))


@dataclass(frozen=True)
class EventTypeConfig(Checked):
    """An event type ([events.NAME]): what POST /v1/events of it makes for each recipient."""

    kinds: tuple[str, ...] = doc("The kinds ([kinds.NAME]) each recipient of an event of this "
                                 "type gets one notification of, each under its own ladder "
                                 "and preferences. A key may post the event only if it may "
                                 "post every one of them.", (), nonempty=True,
                                 says="needs at least one kind")

    def rules(self) -> Problems:
        if len(set(self.kinds)) != len(self.kinds):
            return [("kinds", "names a kind twice")]
        return []


@dataclass(frozen=True)
class TenantConfig(Checked):
    cors_origins: tuple[str, ...] = doc("Browser origins (https://app.example.com) whose pages "
                                        "may call the inbox, preferences and topics with a user "
                                        "token.",
                                        (), pattern=ORIGIN_RE, says="{value!r} is not an origin "
                                        "(scheme://host[:port], no path)")
    accepts_per_sec: float = doc("This tenant's quotas.accepts_per_sec (0: none); -1: the "
                                 "[quotas] value.", -1.0, ge=-1, le=1_000_000)
    batch_items_per_sec: float = doc("This tenant's quotas.batch_items_per_sec (0: none); -1: "
                                     "the [quotas] value.", -1.0, ge=-1, le=1_000_000)
    event_recipients_per_day: int = doc("This tenant's quotas.event_recipients_per_day (0: "
                                        "none); -1: the [quotas] value.", -1, ge=-1,
                                        le=10_000_000_000)


BUILTIN_LOG = ChannelConfig(type="log", timeout_sec=1.0)
DEFAULT_CATEGORY = CategoryConfig()


def default_channels() -> dict[str, ChannelConfig]:
    return {"log": BUILTIN_LOG}


def default_kinds() -> dict[str, KindConfig]:
    return {"demo": KindConfig(
        ladder=(LadderStep("log", timeout_sec=30), LadderStep("log")),
        ttl_sec=3600, allow_override=True)}
