"""TOML into frozen dataclasses. Every key has a default and a doc; one validation pass names the key.

`render_example()` writes the commented config from these same dataclasses, so `notifyd init`,
`notifyd.example.toml` and the code cannot drift apart (a test holds them together).
"""

from __future__ import annotations

import dataclasses
import functools
import os
import re
import tomllib
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import tomli_w

from notifyd.channels import TYPES as CHANNEL_TYPES
from notifyd.channels.egress import Egress, parse_proxy
from notifyd.core.catalog import (
    MEDIUMS,
    Catalog,
    CategoryRules,
    ChannelInfo,
    KindRules,
    LadderStep,
    LimitRule,
)
from notifyd.core.environ import LIST, Table, convert, merged, overlay, table_of
from notifyd.core.errors import ConfigError
from notifyd.core.fields import MAX_SEC, doc, docf, sensitive
from notifyd.receipts import PROVIDERS
from notifyd.store.sqlite.settings import SqliteSettings

DEFAULT_PORT = 7726
DEFAULT_DB = "notifyd.db"
SQLITE_URL = "sqlite:///"
NAME_RE = re.compile(r"^[a-z0-9][a-z0-9_.-]{0,63}$")
STOP_RULES = ("resolved", "delivered", "read")
SCHEDULE_RE = re.compile(r"^(hourly|daily ([01][0-9]|2[0-3]):[0-5][0-9]|"
                         r"weekly (mon|tue|wed|thu|fri|sat|sun) ([01][0-9]|2[0-3]):[0-5][0-9])$")
URGENCIES = ("urgent", "normal")
# Keys that moved, and where to: a config that still has one keeps working (both: an error).
MOVED = {("store", "path"): ("store", "url"),
         **{("store", key): ("store", "sqlite", key)
            for key in ("synchronous", "busy_timeout_ms", "check_at_start")},
         ("daemon", "ready_max_due_lag_sec"): ("daemon", "ready_max_loop_lag_sec")}
EVENT_LOOPS = ("auto", "uvloop", "asyncio")
PROXY_VARIABLES = ("https_proxy", "http_proxy", "no_proxy")  # [egress] keys, as the variables
ORIGIN_RE = re.compile(r"^https?://[A-Za-z0-9.-]+(:[0-9]{1,5})?$")
SEND_SLACK_SEC = 5.0  # a send gets this long beyond its channel timeout before it is unknown


@dataclass(frozen=True)
class ServerConfig:
    host: str = doc("Address to listen on. Keep loopback unless a proxy with TLS sits in front.",
                    "127.0.0.1")
    port: int = doc("TCP port for the HTTP API.", DEFAULT_PORT)
    max_body_bytes: int = doc("Largest request body accepted; larger gets 413 body_too_large.",
                              65536)
    max_batch_body_bytes: int = doc("Largest body of POST /v1/notifications/batch and POST "
                                    "/v1/resolutions/batch (up to 1000 items each); larger gets "
                                    "413 body_too_large. Every other call keeps max_body_bytes.",
                                    4 * 1024 * 1024)
    max_schedule_sec: int = doc("How far ahead a notification's send_at may be (31 days); "
                                "further gets 422 invalid_field naming send_at. A scheduled "
                                "ladder's steps and time to live count from its send_at.",
                                31 * 86400)
    max_connections: int = doc("Most client connections at once; past it newcomers wait in the "
                               "listen queue until a place frees, and one that has not sent a "
                               "whole request within a quarter second gives its place to them. "
                               "Each needs a file descriptor: lowered to fit the open-files "
                               "limit, with a warning.", 1000)
    header_timeout_sec: float = doc("A connection must start each request this soon after "
                                    "opening or after its last request (slow headers, idle "
                                    "keep-alive), or it is closed.", 10.0)
    body_timeout_sec: float = doc("A request's body must arrive this soon once its handler "
                                  "reads it, or the answer is 408 request_timeout.", 10.0)
    max_streams: int = doc("Most inbox streams (GET .../inbox/stream) open at once; they do not "
                           "count against max_connections, but each needs a file descriptor. "
                           "0: what the open-files limit leaves beside max_connections, the "
                           "providers' sockets and the database (at most 10000); a value over "
                           "that is lowered, with a warning.", 0)
    max_streams_per_user: int = doc("Most inbox streams one person may hold open (a page each, "
                                    "whichever token or key opened them); a new one beyond it "
                                    "closes that person's oldest, which reconnects a minute "
                                    "later.", 8)
    public_url: str = doc("Where providers and browsers reach this daemon (behind a proxy, its "
                          "public https URL), for status callbacks and unsubscribe links. Empty: "
                          "none are sent.", "")


@dataclass(frozen=True)
class StoreConfig:
    url: str = doc("The database: a SQLite file's path (WAL mode, created on first start), a "
                   "URL such as sqlite:////var/lib/notifyd/notifyd.db, or a PostgreSQL database "
                   "that several notifyd processes share: postgresql://user@host/dbname.",
                   DEFAULT_DB)
    max_pending_writes: int = doc("Accepts waiting for the writer beyond which new ones get 503 "
                                  "overloaded with Retry-After (producers retry with the same "
                                  "dedup key, so nothing is lost); bounds accept latency and "
                                  "memory under a flood. Keep it under server.max_connections, or "
                                  "the connections bound the queue first and nothing is shed.", 500)
    sqlite: SqliteSettings = docf("A SQLite database's settings.", SqliteSettings)


@dataclass(frozen=True)
class ScannerConfig:
    poll_interval_sec: float = doc("Longest sleep between due scans; recovers a lost wake-up.", 1.0)
    claim_batch: int = doc("Most steps claimed in one transaction.", 256)
    lease_sec: float = doc("How long a claimed step may stay in flight before it is presumed "
                           "lost and becomes unknown, to be resent under the same key and bytes. "
                           "A process frozen (SIGSTOP) longer than this resends its in-flight "
                           "steps when it resumes: at-least-once, as designed.", 60.0)


@dataclass(frozen=True)
class TemplatesConfig:
    folder: str = doc("The templates folder: <kind>/<locale>/<medium>.<part>.j2 (notifyd init "
                      "writes a starter one; relative to this file's folder).", "templates")
    default_locale: str = doc("The locale used when neither the recipient's locale nor its "
                              "language has the templates.", "en")
    max_output_bytes: int = doc("Largest rendered part; a larger one ends its step dead, "
                                "never truncated.", 131072)


@dataclass(frozen=True)
class DaemonConfig:
    grace_sec: float = doc("On SIGTERM, how long in-flight sends may finish before exit.", 10.0)
    ready_max_loop_lag_sec: float = doc(
        "GET /readyz fails while the daemon's event loop runs its timers later than this (the "
        "worst of the last 10 s): notifyd itself cannot keep up. A provider's outage never "
        "fails it; that shows as notifyd_due_lag_seconds and notifyd_breaker_state on "
        "/metrics. It was ready_max_due_lag_sec, the oldest due step's wait, which an outage "
        "pushed past any bound; a config with that name sets this.", 5.0)
    event_loop: str = doc('"auto" (uvloop when installed, as it is with notifyd on Linux and '
                          'macOS; else the standard loop), "uvloop" (a faster drop-in on libuv) '
                          'or "asyncio" (the standard event loop).', "auto")


DAY_SEC = 86400
MIN_TOKEN_TTL_SEC = 60  # the shortest token POST /v1/users/{user_id}/tokens makes


@dataclass(frozen=True)
class RetentionConfig:
    """How long each class of rows is kept; 0 keeps that class forever. Windows count from a
    notification's acceptance, a receipt's arrival, an inbox item's reading (or archiving) or
    creation. Suppressions are kept forever: they are facts about an address."""

    history_sec: int = doc("A finished notification's history (its steps with their frozen "
                           "payloads, attempts, moves, digest items, and its receipts' addresses "
                           "and details) is kept this long after acceptance (14 days); then only "
                           "its identity stays. Nothing still open (due, in flight, held for a "
                           "digest) is ever pruned. A topic membership that ended is kept as "
                           "long, unless an event still routing needs it.", 14 * DAY_SEC)
    identity_sec: int = doc("The identity left by a pruned history (id, tenant, user, dedup key, "
                            "request hash, final state), kept this long after acceptance (60 "
                            "days): a producer retrying within it gets the original id, never a "
                            "second notification. A routed event is kept as long, so a retry of "
                            "it is answered with it. At least history_sec.", 60 * DAY_SEC)
    receipts_sec: int = doc("Providers' receipts, kept this long after arrival (30 days): a "
                            "provider replaying one within it is answered as a duplicate.",
                            30 * DAY_SEC)
    inbox_read_sec: int = doc("Inbox items read or archived, kept this long after that (30 "
                              "days).", 30 * DAY_SEC)
    inbox_sec: int = doc("Every inbox item, read or not, kept this long after it was made (180 "
                         "days); an unread one leaves the badge with it. At least "
                         "inbox_read_sec.", 180 * DAY_SEC)
    interval_sec: float = doc("How often retention looks for what has aged out.", 60.0)
    batch: int = doc("Rows (a notification's history counts as one) removed per write: each "
                     "write is short, so accepts and sends never wait long behind it.", 200)


@dataclass(frozen=True)
class ChannelConfig:
    """The keys every channel has; its type adds its own (channels/<type>.py), kept in settings."""

    type: str = doc(f"Channel type: {', '.join(CHANNEL_TYPES)}. Each type's own keys are listed "
                    "at the end of this file.", "log")
    timeout_sec: float = doc("Provider call timeout; a timeout is an unknown outcome.", 10.0)
    rate_per_sec: float = doc("Token bucket refill rate for this channel.", 100.0)
    burst: int = doc("Token bucket size.", 100)
    urgent_concurrency: int = doc("Calls to the provider in flight at once in the urgent lane "
                                  "(a call's place comes back with its answer).", 16)
    bulk_concurrency: int = doc("Calls to the provider in flight at once in the bulk lane.", 8)
    broadcast_concurrency: int = doc("Calls in flight at once in the broadcast lane (kinds with "
                                     "broadcast = true: announcements to many).", 8)
    broadcast_share: float = doc("The most of rate_per_sec and burst the broadcast lane may "
                                 "use; the rest stays for the channel's other kinds, so "
                                 "one-time codes keep flowing through an announcement on the "
                                 "same provider account.", 0.5)
    max_attempts: int = doc("Most attempts per step (counted from its last replay) before it "
                            "is dead. 0: no count limit; a step that keeps failing for a "
                            "passing reason (refused connection, timeout, 5xx, 429, SMTP 4xx) is "
                            "retried until its time to live ends (the kind's ttl_sec, or a "
                            "request's shorter max_ttl_sec), as a mail relay keeps a message "
                            "queued for days, so an outage of hours ends in a send.", 0)
    backoff_base_sec: float = doc("First retry delay ceiling; doubles per attempt up to "
                                  "backoff_max_sec. Each delay is drawn at random below its "
                                  "ceiling (full jitter), so the retries of an outage do not "
                                  "arrive together.", 1.0)
    backoff_max_sec: float = doc("Largest retry delay ceiling: while a provider is down each "
                                 "step is tried again at least this often, so a provider or "
                                 "relay that comes back is used within minutes (Postfix's "
                                 "queue starts at 300 s, minimal_backoff_time). A longer "
                                 "Retry-After is honoured.", 300.0)
    vendor: str = doc("Circuit breaker key; channels naming one vendor share a breaker. Empty: "
                      "the channel name.", "")
    breaker_error_rate: float = doc("Open the breaker when this share of recent calls failed.", 0.5)
    breaker_min_calls: int = doc("Calls in the window before the breaker may open.", 20)
    breaker_window_sec: float = doc("Window over which the error rate is measured.", 30.0)
    breaker_cooldown_sec: float = doc("How long the breaker stays open before one probe.", 30.0)
    # The type's own settings dataclass; None means its defaults. Not a TOML key of its own:
    # a type's keys sit flat in the channel's table.
    settings: Any = field(default=None, metadata={"type_settings": True})

    def __post_init__(self) -> None:
        if self.settings is None and self.type in CHANNEL_TYPES:
            object.__setattr__(self, "settings", CHANNEL_TYPES[self.type].settings())


@dataclass(frozen=True)
class KindConfig:
    ladder: tuple[LadderStep, ...] = docf(
        "Ordered steps: {channel, after_sec?, timeout_sec?}. A step is due after_sec after "
        "accept, or else when the previous step's timeout_sec window ends.", tuple)
    ttl_sec: int = doc("Time to live: steps not sent by then end expired. It is also how long "
                       "a step whose provider keeps failing is retried (a day; a mail relay "
                       "keeps mail for five), and a request's max_ttl_sec may shorten it.",
                       86400)
    urgency: str = doc("urgent (bypasses quiet hours, urgent lane) or normal.", "normal")
    broadcast: bool = doc("An announcement to many (news, a status page, everyone): its steps "
                          "ride each channel's broadcast lane, at most the channel's "
                          "broadcast_share of its rate, behind the urgent and bulk lanes' "
                          "work.", False)
    stop: str = doc("What ends the ladder: resolved (written from outside: the API, the CLI), "
                    "delivered (also a provider's or the app's receipt proving delivery) or "
                    "read (also the person reading its inbox item; needs inbox = true).",
                    "resolved")
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
                        "`count`.", "")
    allow_override: bool = doc("Whether a request may replace the ladder with fallback_chain.",
                               False)
    transactional: bool = doc("One-time codes, receipts, alerts: true. News and digests: false, "
                              "and their email carries List-Unsubscribe (RFC 8058).", True)
    collapse_key: str = doc("Push: a newer notification of this kind replaces an undelivered "
                            "older one on the device (Web Push Topic, FCM collapse_key). Empty: "
                            "each is kept.", "")


@dataclass(frozen=True)
class CategoryConfig:
    """A preference category: what a person may turn off, and what is on until they choose."""

    optional: bool = doc("Whether a person may turn it off at all (one-time codes and security "
                         "alerts: false, and their preferences are ignored).", True)
    email: bool = doc("Email is on until the person chooses.", True)
    sms: bool = doc("SMS is on until the person chooses.", True)
    push: bool = doc("Push is on until the person chooses.", True)
    chat: bool = doc("Chat is on until the person chooses.", True)


@dataclass(frozen=True)
class LimitConfig:
    """At most `count` sends per `per_sec` to one person, of what the limit names."""

    count: int = doc("Sends allowed in the window.", 3)
    per_sec: float = doc("The window, sliding, in seconds.", 3600.0)
    kind: str = doc("Only this kind. Empty: any.", "")
    category: str = doc("Only this category. Empty: any.", "")
    medium: str = doc("Only this medium (email, sms, push, chat). Empty: any.", "")


@dataclass(frozen=True)
class EventTypeConfig:
    """An event type ([events.NAME]): what POST /v1/events of it makes for each recipient."""

    kinds: tuple[str, ...] = doc("The kinds ([kinds.NAME]) each recipient of an event of this "
                                 "type gets one notification of, each under its own ladder "
                                 "and preferences. A key may post the event only if it may "
                                 "post every one of them.", ())


@dataclass(frozen=True)
class FanoutConfig:
    chunk: int = doc("Recipients an event's fan-out routes per write: each write is short, so "
                     "accepts and sends never wait long behind a large event.", 100)
    max_inline_users: int = doc("Most user ids an event may list inline ({\"user_ids\": "
                                "[...]}); a larger audience is a topic.", 1000)


@dataclass(frozen=True)
class TokensConfig:
    """User tokens: what a person's page reads their own inbox and preferences with."""

    max_ttl_sec: int = doc("The longest a user token may live: one whose expiry is further "
                           "from now is refused, however it was signed (a backend's own "
                           "included, with a minute's leeway for its clock). Also the longest "
                           "POST /v1/users/{user_id}/tokens grants, and how long a rotated key "
                           "still verifies by default (notifyd tokens rotate).", DAY_SEC)


@dataclass(frozen=True)
class ConsoleConfig:
    """The operator console (/console), the inbox widget (/inbox.js) and the preference centre:
    pages served by the daemon itself."""

    enabled: bool = doc("Serve the operator console at /console. An operator signs in with an "
                        "API key that has the admin scope (notifyd keys create --scopes "
                        "admin,...), for that key's tenant, or with the password below.", True)
    password: str = sensitive("A console password: it signs in for the tenant named at "
                              "sign-in. Empty: only admin API keys sign in. Keep this file "
                              "readable by notifyd alone.")
    session_ttl_sec: int = doc("How long a console session lasts from sign-in; then the "
                               "operator signs in again. Revoking the key ends its sessions.",
                               8 * 3600)
    max_failed_sign_ins: int = doc("Failed sign-ins from one address within a minute before "
                                   "its next ones are refused until the minute is over.", 5)
    overview_every_sec: float = doc("How often the console's overview refreshes its figures "
                                    "while open.", 2.0)
    demo_inbox: bool = doc("Serve /demo/inbox: a page showing the inbox widget for a user id "
                           "and token typed into it. Off in production.", False)


@dataclass(frozen=True)
class TenantConfig:
    cors_origins: tuple[str, ...] = doc("Browser origins (https://app.example.com) whose pages "
                                        "may call the inbox, preferences and topics with a user "
                                        "token.",
                                        ())


@dataclass(frozen=True)
class EgressConfig:
    """How the HTTP channels (and the SNS certificate fetch) reach providers: straight out, or
    through an HTTP proxy. SMTP never goes through it. Each key left empty is taken from the
    environment variable of its name, upper or lower case (HTTPS_PROXY, HTTP_PROXY, NO_PROXY)."""

    https_proxy: str = sensitive(
        "The proxy for https:// providers: http://[user:password@]host[:port] (port 80 if "
        "none). notifyd asks it for a tunnel (CONNECT) and speaks TLS with the provider through "
        "it, checking the provider's certificate as without one; the user and password go as "
        "Proxy-Authorization. Empty: HTTPS_PROXY; neither: straight out.")
    http_proxy: str = sensitive(
        "The proxy for http:// URLs (a webhook channel's plain URL, a local stand-in): the "
        "request is handed to it whole. Empty: HTTP_PROXY.")
    no_proxy: tuple[str, ...] = doc(
        "Hosts reached straight out, read as curl reads NO_PROXY: a name (with every name "
        "under it), an IP address, a CIDR block such as 10.0.0.0/8, or \"*\" for every host. "
        "Empty: NO_PROXY.", ())

    def routes(self) -> Egress:
        return Egress.of(self.https_proxy, self.http_proxy, self.no_proxy)


BUILTIN_LOG = ChannelConfig(type="log", timeout_sec=1.0)
DEFAULT_CATEGORY = CategoryConfig()


def _default_channels() -> dict[str, ChannelConfig]:
    return {"log": BUILTIN_LOG}


def _default_kinds() -> dict[str, KindConfig]:
    return {"demo": KindConfig(
        ladder=(LadderStep("log", timeout_sec=30), LadderStep("log")),
        ttl_sec=3600, allow_override=True)}


@dataclass(frozen=True)
class Config:
    server: ServerConfig = docf("The HTTP API.", ServerConfig)
    store: StoreConfig = docf("The database.", StoreConfig)
    scanner: ScannerConfig = docf("The due-work scanner.", ScannerConfig)
    templates: TemplatesConfig = docf("Message templates for email, SMS, push, chat and the inbox.",
                                      TemplatesConfig)
    daemon: DaemonConfig = docf("Process lifecycle.", DaemonConfig)
    retention: RetentionConfig = docf("What ages out of the database, and when.",
                                      RetentionConfig)
    fanout: FanoutConfig = docf("Events' fan-out to their audiences (POST /v1/events).",
                                FanoutConfig)
    tokens: TokensConfig = docf("User tokens for a person's own inbox and preferences.",
                                TokensConfig)
    egress: EgressConfig = docf(
        "Outbound HTTP: the proxy the HTTP channels and the SNS certificate fetch go through "
        "(SMTP never does). A key left empty is taken from the environment variable of its "
        "name, upper or lower case (HTTPS_PROXY, HTTP_PROXY, NO_PROXY).", EgressConfig)
    console: ConsoleConfig = docf("The operator console, the inbox widget and the preference "
                                  "centre.", ConsoleConfig)
    channels: dict[str, ChannelConfig] = docf(
        "Channels by name; ladders refer to these names.", _default_channels)
    kinds: dict[str, KindConfig] = docf(
        "Notification kinds by name: each its ladder and policy.", _default_kinds)
    categories: dict[str, CategoryConfig] = docf(
        "Preference categories by name; a kind's category not listed here is optional with "
        "every medium on.", dict)
    limits: tuple[LimitConfig, ...] = docf("Send limits per person ([[limits]]).", tuple)
    tenants: dict[str, TenantConfig] = docf("Per-tenant settings by tenant name.", dict)
    events: dict[str, EventTypeConfig] = docf(
        "Event types by name: the kinds each recipient of an event gets.", dict)
    # Providers' delivery webhooks by provider name: each its receipts/<name>.py settings, on
    # when its secret is set. Built by _build_webhooks, not from a type hint.
    webhooks: dict[str, Any] = field(default_factory=dict, metadata={
        "doc": "Providers' delivery webhooks by provider name.", "webhooks": True})

    @functools.cached_property
    def catalog(self) -> Catalog:
        """This config compiled for the rest of notifyd (compile_catalog), once."""
        return compile_catalog(self)

    def webhook(self, name: str) -> Any | None:
        """The provider's settings if its webhook is on, else None."""
        settings = self.webhooks.get(name)
        return settings if settings is not None and settings.enabled() else None



# --- loading ---------------------------------------------------------------------------------


def load_config(path: str | Path | None, environ: Mapping[str, str] | None = None) -> Config:
    """The config at `path` (the built-in defaults when `path` is None) with the environment laid
    over it (`environ`, default the process's): each secret's KEY_file read, then every
    NOTIFYD_<SECTION>_<KEY> variable (core/environ.py), then HTTPS_PROXY, HTTP_PROXY and
    NO_PROXY for the [egress] keys still empty. A relative store path in a file is relative to
    that file's folder, so every command finds the same database. A ConfigError about a key a
    variable set names the variable too."""
    environ = os.environ if environ is None else environ
    folder = None if path is None else Path(path).resolve().parent
    data = {} if path is None else moved(_read(Path(path)))
    origins = overlay(data, env_table(), environ, folder)
    origins.update(_proxies(data, environ))
    try:
        cfg = validate(_build(Config, data, ""))
    except ConfigError as e:
        raise _naming(e, origins) from None
    if folder is None:
        return cfg
    return dataclasses.replace(
        cfg, store=dataclasses.replace(cfg.store, url=beside(cfg.store.url, folder)),
        templates=dataclasses.replace(cfg.templates,
                                      folder=str(folder / cfg.templates.folder)))


def _read(path: Path) -> dict[str, Any]:
    try:
        return tomllib.loads(path.read_text())
    except FileNotFoundError:
        raise ConfigError(f"config file not found: {path}") from None
    except IsADirectoryError:
        raise ConfigError(f"{path} is a folder, not a config file") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: not UTF-8 text") from None
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"{path}: not valid TOML: {e}") from None


@functools.cache
def env_table() -> Table:
    """The config's keys as the environment may set them: a channel's are its type's too."""
    shared = table_of(ChannelConfig)

    def channel(entry: Mapping[str, Any]) -> Table:
        ctype = CHANNEL_TYPES.get(str(entry.get("type", "log")))
        return merged(shared, table_of(ctype.settings)) if ctype else shared

    webhooks = Table(tables={name: table_of(p.settings) for name, p in PROVIDERS.items()})
    return table_of(Config, channels=channel, webhooks=webhooks)


def _proxies(data: dict[str, Any], environ: Mapping[str, str]) -> dict[str, str]:
    """Each [egress] key the config leaves empty, from the variable of its name (lower case
    first, as curl reads them); the key each set, to the variable."""
    egress = data.setdefault("egress", {})
    origins: dict[str, str] = {}
    if not isinstance(egress, dict):
        return origins
    for key in PROXY_VARIABLES:
        var = next((v for v in (key, key.upper()) if environ.get(v, "").strip()), None)
        if var is not None and not egress.get(key):
            egress[key] = convert(environ[var], LIST, var) if key == "no_proxy" \
                else environ[var].strip()
            origins[f"egress.{key}"] = var
    return origins


def _naming(error: ConfigError, origins: Mapping[str, str]) -> ConfigError:
    """`error`, saying which variable set the key it names, if one did."""
    message = str(error)
    for key, var in sorted(origins.items(), key=lambda item: -len(item[0])):
        if message.startswith(key) and message[len(key):len(key) + 1] in (":", ".", "["):
            return ConfigError(f"{message} (set by {var})")
    return error


def compile_catalog(cfg: Config) -> Catalog:
    """What the rest of notifyd reads of the config: each channel's type, contact and medium;
    each category's switches; each kind's category, preference defaults, limits, digest and
    stop rule. The one place that asks the channel registry what a channel sends to."""
    channels = {name: ChannelInfo(name, ch.type, CHANNEL_TYPES[ch.type].contact,
                                  CHANNEL_TYPES[ch.type].medium_for(ch.settings))
                for name, ch in cfg.channels.items()}
    named = {name: kind.category or name for name, kind in cfg.kinds.items()}
    categories = {}
    for name in sorted(set(named.values()) | set(cfg.categories)):
        cat = cfg.categories.get(name, DEFAULT_CATEGORY)
        categories[name] = CategoryRules(name, cat.optional, {m: getattr(cat, m) for m in MEDIUMS})
    kinds = {}
    for name, kind in cfg.kinds.items():
        rules = categories[named[name]]
        digest = cfg.kinds.get(kind.digest)
        kinds[name] = KindRules(rules.name, rules.optional, rules.defaults, kind.transactional,
                                _limits(cfg, name, named, channels), kind.digest,
                                digest.schedule if digest else "", kind.always_digest, kind.stop,
                                kind.read_on_resolve)
    return Catalog(channels, kinds, categories)


def _limits(cfg: Config, kind: str, named: dict[str, str],
            channels: dict[str, ChannelInfo]) -> tuple[LimitRule, ...]:
    """The send limits that count `kind`: each with every kind and channel it counts."""
    people = [c for c, info in channels.items() if info.medium is not None]
    limits = []
    for lim in cfg.limits:
        if lim.kind and lim.kind != kind or lim.category and lim.category != named[kind]:
            continue
        counted = tuple(k for k in cfg.kinds if (not lim.kind or k == lim.kind) and (
            not lim.category or named[k] == lim.category))
        counts = tuple(c for c in people if not lim.medium or channels[c].medium == lim.medium)
        of = lim.kind or lim.category
        label = f"{lim.count} {lim.medium or 'sends'} per {lim.per_sec:g} s" + (
            f" of {of}" if of else "")
        limits.append(LimitRule(lim.count, int(lim.per_sec * 1000), counted if of else (),
                                counts, label))
    return tuple(limits)


def moved(data: dict[str, Any]) -> dict[str, Any]:
    """`data` with each key of MOVED where it lives now: store.path is store.url, the SQLite
    keys that sat in [store] sit in [store.sqlite], and daemon.ready_max_due_lag_sec is
    daemon.ready_max_loop_lag_sec."""
    for old, new in MOVED.items():
        table = data.get(old[0])
        if not isinstance(table, dict) or old[1] not in table:
            continue
        parent = data
        for part in new[:-1]:
            parent = parent.setdefault(part, {})
            if not isinstance(parent, dict):
                raise ConfigError(f"{'.'.join(new[:-1])}: expected a table")
        if new[-1] in parent:
            raise ConfigError(f"{'.'.join(old)}: the old name of {'.'.join(new)}, which is set "
                              f"too; keep only {'.'.join(new)}")
        parent[new[-1]] = table.pop(old[1])
    return data


def beside(store: str, folder: Path) -> str:
    """A relative SQLite path (bare or sqlite:///rel) made absolute from `folder`."""
    prefix = SQLITE_URL if store.startswith(SQLITE_URL) else ""
    rest = store[len(prefix):]
    if "://" in store and not prefix or Path(rest).is_absolute():
        return store
    return prefix + str(folder / rest)


def _build(cls: type[Any], data: Any, where: str) -> Any:
    if not isinstance(data, dict):
        raise ConfigError(f"{where or 'config'}: expected a table")
    if cls is Config and "webhooks" in data:
        webhooks = _build_webhooks(data["webhooks"])
        return dataclasses.replace(_build(Config, {k: v for k, v in data.items()
                                                   if k != "webhooks"}, where), webhooks=webhooks)
    hints = typing.get_type_hints(cls)
    names = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(data) - names)
    if unknown:
        raise ConfigError(f"{_join(where, unknown[0])}: unknown key (known: {', '.join(sorted(names))})")
    kwargs = {k: _coerce(hints[k], v, _join(where, k)) for k, v in data.items()}
    return cls(**kwargs)


def _build_channel(data: Any, where: str) -> ChannelConfig:
    """A [channels.NAME] table: the shared keys, and the rest checked against its type's keys."""
    if not isinstance(data, dict):
        raise ConfigError(f"{where}: expected a table")
    type_name = data.get("type", "log")
    if type_name not in CHANNEL_TYPES:
        raise ConfigError(f"{where}.type: must be one of {', '.join(CHANNEL_TYPES)}")
    ctype = CHANNEL_TYPES[type_name]
    shared = {f.name for f in dataclasses.fields(ChannelConfig) if f.name != "settings"}
    own = {f.name for f in dataclasses.fields(ctype.settings)}
    unknown = sorted(set(data) - shared - own)
    if unknown:
        raise ConfigError(f"{_join(where, unknown[0])}: unknown key for a {type_name} channel "
                          f"(known: {', '.join(sorted(shared | own))})")
    settings = _build(ctype.settings, {k: v for k, v in data.items() if k in own}, where)
    common: ChannelConfig = _build(ChannelConfig, {k: v for k, v in data.items() if k in shared},
                                   where)
    return dataclasses.replace(common, settings=settings)


def _build_webhooks(data: Any) -> dict[str, Any]:
    """The [webhooks.PROVIDER] tables, each checked against that provider's keys."""
    if not isinstance(data, dict):
        raise ConfigError("webhooks: expected a table")
    out = {}
    for name, table in data.items():
        if name not in PROVIDERS:
            raise ConfigError(f"webhooks.{name}: unknown provider (known: "
                              f"{', '.join(sorted(PROVIDERS))})")
        out[name] = _build(PROVIDERS[name].settings, table, f"webhooks.{name}")
    return out


def _coerce(tp: Any, value: Any, where: str) -> Any:  # noqa: C901 - one branch per TOML shape
    origin = typing.get_origin(tp)
    if tp is ChannelConfig:
        return _build_channel(value, where)
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        return _build(tp, value, where)
    if origin is dict:
        inner = typing.get_args(tp)[1]
        if not isinstance(value, dict):
            raise ConfigError(f"{where}: expected a table")
        return {k: _coerce(inner, v, f"{where}.{k}") for k, v in value.items()}
    if origin is tuple:
        inner = typing.get_args(tp)[0]
        if not isinstance(value, list):
            raise ConfigError(f"{where}: expected an array")
        return tuple(_coerce(inner, v, f"{where}[{i}]") for i, v in enumerate(value))
    if origin in (types.UnionType, typing.Union):
        if value is None:
            return None
        return _coerce(typing.get_args(tp)[0], value, where)
    if tp is float and isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    if tp is bool and isinstance(value, bool):
        return value
    if tp in (int, str) and isinstance(value, tp) and not isinstance(value, bool):
        return value
    # The value itself is not echoed: it may be a secret in the wrong place.
    raise ConfigError(f"{where}: expected {tp.__name__}, got {type(value).__name__}")


def _join(where: str, key: str) -> str:
    return f"{where}.{key}" if where else key


def validate(cfg: Config) -> Config:  # noqa: C901 - a flat list of rules reads best
    """`cfg` checked, with the built-in `log` channel added unless a channel has that name."""

    def need(ok: bool, key: str, msg: str) -> None:
        if not ok:
            raise ConfigError(f"{key}: {msg}")

    if "log" not in cfg.channels:  # it writes a line: a second is ample, whatever the lease
        cfg = dataclasses.replace(cfg, channels={**cfg.channels, "log": BUILTIN_LOG})

    need(0 <= cfg.server.port <= 65535, "server.port", "must be 0..65535")
    need(cfg.server.max_body_bytes >= 1024, "server.max_body_bytes", "must be at least 1024")
    need(cfg.server.max_batch_body_bytes >= 1024, "server.max_batch_body_bytes",
         "must be at least 1024")
    need(cfg.server.max_schedule_sec >= 1, "server.max_schedule_sec", "must be >= 1")
    need(cfg.server.max_connections >= 1, "server.max_connections", "must be >= 1")
    need(cfg.server.max_streams >= 0, "server.max_streams", "must be >= 0")
    need(cfg.server.max_streams_per_user >= 1, "server.max_streams_per_user", "must be >= 1")
    need(cfg.server.header_timeout_sec > 0, "server.header_timeout_sec", "must be > 0")
    need(cfg.server.body_timeout_sec > 0, "server.body_timeout_sec", "must be > 0")
    for key, problem in cfg.store.sqlite.problems():
        need(False, f"store.sqlite.{key}", problem)
    need(cfg.store.url != "", "store.url", "must not be empty")
    need(cfg.store.max_pending_writes >= 1, "store.max_pending_writes", "must be >= 1")
    need(cfg.templates.max_output_bytes >= 1, "templates.max_output_bytes", "must be >= 1")
    need(bool(cfg.templates.default_locale), "templates.default_locale", "must not be empty")
    need(cfg.scanner.poll_interval_sec > 0, "scanner.poll_interval_sec", "must be > 0")
    need(cfg.scanner.claim_batch > 0, "scanner.claim_batch", "must be > 0")
    need(cfg.scanner.lease_sec > 0, "scanner.lease_sec", "must be > 0")
    need(cfg.daemon.grace_sec >= 0, "daemon.grace_sec", "must be >= 0")
    need(cfg.daemon.ready_max_loop_lag_sec > 0, "daemon.ready_max_loop_lag_sec", "must be > 0")
    need(cfg.daemon.event_loop in EVENT_LOOPS, "daemon.event_loop",
         f"must be one of {', '.join(EVENT_LOOPS)}")
    ret = cfg.retention
    for attr in ("history_sec", "identity_sec", "receipts_sec", "inbox_read_sec", "inbox_sec"):
        need(0 <= getattr(ret, attr) <= MAX_SEC, f"retention.{attr}",
             f"must be 0..{MAX_SEC} (a year; 0 keeps them forever)")
    need(ret.identity_sec == 0 or 0 < ret.history_sec <= ret.identity_sec,
         "retention.identity_sec", "must be at least retention.history_sec (0: forever)")
    need(ret.inbox_sec == 0 or 0 < ret.inbox_read_sec <= ret.inbox_sec,
         "retention.inbox_sec", "must be at least retention.inbox_read_sec (0: forever)")
    need(0 < ret.interval_sec <= 86400, "retention.interval_sec", "must be 0..86400, not 0")
    need(1 <= ret.batch <= 10000, "retention.batch", "must be 1..10000")
    need(MIN_TOKEN_TTL_SEC <= cfg.tokens.max_ttl_sec <= MAX_SEC, "tokens.max_ttl_sec",
         f"must be {MIN_TOKEN_TTL_SEC}..{MAX_SEC}")
    for key in ("https_proxy", "http_proxy"):
        bad = _proxy_problem(getattr(cfg.egress, key))
        need(bad is None, f"egress.{key}", bad or "")
    need(60 <= cfg.console.session_ttl_sec <= 7 * DAY_SEC, "console.session_ttl_sec",
         f"must be 60..{7 * DAY_SEC} (a week)")
    need(cfg.console.max_failed_sign_ins >= 1, "console.max_failed_sign_ins", "must be >= 1")
    need(0.2 <= cfg.console.overview_every_sec <= 3600, "console.overview_every_sec",
         "must be 0.2..3600")
    need(not cfg.console.password or len(cfg.console.password) >= 12, "console.password",
         "must be at least 12 characters (or empty: admin API keys only)")
    for name, ch in cfg.channels.items():
        k = f"channels.{name}"
        need(bool(NAME_RE.match(name)), k, "names are lower-case letters, digits, _ . -")
        need(ch.type in CHANNEL_TYPES, f"{k}.type", f"must be one of {', '.join(CHANNEL_TYPES)}")
        need(isinstance(ch.settings, CHANNEL_TYPES[ch.type].settings), k,
             f"settings must be {CHANNEL_TYPES[ch.type].settings.__name__}")
        for key, problem in getattr(ch.settings, "problems", list)():
            need(False, f"{k}.{key}", problem)
        for attr in ("timeout_sec", "rate_per_sec", "backoff_base_sec", "backoff_max_sec",
                     "breaker_window_sec", "breaker_cooldown_sec"):
            need(getattr(ch, attr) > 0, f"{k}.{attr}", "must be > 0")
        for attr in ("burst", "urgent_concurrency", "bulk_concurrency", "broadcast_concurrency",
                     "breaker_min_calls"):
            need(getattr(ch, attr) >= 1, f"{k}.{attr}", "must be >= 1")
        need(ch.max_attempts >= 0, f"{k}.max_attempts",
             "must be >= 0 (0: no count limit, the time to live bounds the retries)")
        need(ch.backoff_base_sec <= ch.backoff_max_sec, f"{k}.backoff_base_sec",
             "must not be over backoff_max_sec")
        need(0 < ch.breaker_error_rate <= 1, f"{k}.breaker_error_rate", "must be in (0, 1]")
        need(0 < ch.broadcast_share <= 1, f"{k}.broadcast_share", "must be in (0, 1]")
        need(ch.timeout_sec + SEND_SLACK_SEC < cfg.scanner.lease_sec, f"{k}.timeout_sec",
             f"must be under scanner.lease_sec - {SEND_SLACK_SEC:g}, or a slow send would be "
             "taken over while still in flight")
    for name in cfg.categories:
        need(bool(NAME_RE.match(name)), f"categories.{name}",
             "names are lower-case letters, digits, _ . -")
    for i, lim in enumerate(cfg.limits):
        k = f"limits[{i}]"
        need(lim.count >= 1, f"{k}.count", "must be >= 1")
        need(0 < lim.per_sec <= MAX_SEC, f"{k}.per_sec", f"must be 0..{MAX_SEC}")
        need(not lim.kind or lim.kind in cfg.kinds, f"{k}.kind", f"unknown kind {lim.kind!r}")
        need(not lim.medium or lim.medium in MEDIUMS, f"{k}.medium",
             f"must be one of {', '.join(MEDIUMS)}, or empty")
    _validate_events(cfg, need)
    for name, tenant in cfg.tenants.items():
        for origin in tenant.cors_origins:
            need(bool(ORIGIN_RE.match(origin)), f"tenants.{name}.cors_origins",
                 f"{origin!r} is not an origin (scheme://host[:port], no path)")
    for name, settings in cfg.webhooks.items():
        for key, problem in settings.problems():
            need(False, f"webhooks.{name}.{key}", problem)
    for name, kind in cfg.kinds.items():
        k = f"kinds.{name}"
        need(bool(NAME_RE.match(name)), k, "names are lower-case letters, digits, _ . -")
        need(bool(kind.ladder), f"{k}.ladder", "needs at least one step")
        need(0 < kind.ttl_sec <= MAX_SEC, f"{k}.ttl_sec", f"must be 1..{MAX_SEC} (a year)")
        need(kind.urgency in URGENCIES, f"{k}.urgency", f"must be one of {', '.join(URGENCIES)}")
        need(kind.stop in STOP_RULES, f"{k}.stop", f"must be one of {', '.join(STOP_RULES)}")
        need(not (kind.broadcast and kind.urgency == "urgent"), f"{k}.broadcast",
             "an urgent kind rides the urgent lane; a broadcast cannot be urgent")
        need(kind.stop != "read" or kind.inbox, f"{k}.stop",
             'is "read" but the kind has no inbox item to read (set inbox = true)')
        need(not kind.read_on_resolve or kind.inbox, f"{k}.read_on_resolve",
             "the kind has no inbox item to mark read (set inbox = true)")
        need(not kind.schedule or bool(SCHEDULE_RE.match(kind.schedule)), f"{k}.schedule",
             'must be "hourly", "daily HH:MM" or "weekly DAY HH:MM" (DAY: mon..sun)')
        if kind.digest:
            target = cfg.kinds.get(kind.digest)
            need(target is not None and bool(target.schedule), f"{k}.digest",
                 f"{kind.digest!r} is not a digest kind (one with a schedule)")
            need(kind.urgency != "urgent", f"{k}.digest",
                 "an urgent kind is never held for a digest: a late code is a broken login")
        need(not kind.always_digest or bool(kind.digest), f"{k}.always_digest",
             "needs digest = the digest kind that collects the items")
        need(not (kind.schedule and (kind.digest or kind.always_digest)), f"{k}.schedule",
             "a digest kind cannot itself be held for a digest")
        for i, step in enumerate(kind.ladder):
            sk = f"{k}.ladder[{i}]"
            need(step.channel in cfg.channels, f"{sk}.channel",
                 f"unknown channel {step.channel!r} (known: {', '.join(sorted(cfg.channels))})")
            for attr in ("after_sec", "timeout_sec"):
                v = getattr(step, attr)
                need(v is None or 0 <= v <= MAX_SEC, f"{sk}.{attr}", f"must be 0..{MAX_SEC}")
            if i > 0:
                need(step.after_sec is not None or kind.ladder[i - 1].timeout_sec is not None,
                     sk, "needs after_sec, or timeout_sec on the step before it")
    return cfg


def _proxy_problem(url: str) -> str | None:
    try:
        if url:
            parse_proxy(url)
    except ValueError as e:
        return str(e)
    return None


def _validate_events(cfg: Config, need: Callable[[bool, str, str], None]) -> None:
    need(1 <= cfg.fanout.chunk <= 10000, "fanout.chunk", "must be 1..10000")
    need(1 <= cfg.fanout.max_inline_users <= 10000, "fanout.max_inline_users",
         "must be 1..10000")
    for name, event in cfg.events.items():
        k = f"events.{name}"
        need(bool(NAME_RE.match(name)), k, "names are lower-case letters, digits, _ . -")
        need(bool(event.kinds), f"{k}.kinds", "needs at least one kind")
        need(len(set(event.kinds)) == len(event.kinds), f"{k}.kinds", "names a kind twice")
        for kind in event.kinds:
            need(kind in cfg.kinds, f"{k}.kinds",
                 f"unknown kind {kind!r} (known: {', '.join(sorted(cfg.kinds))})")
            need(not cfg.kinds[kind].schedule, f"{k}.kinds",
                 f"{kind!r} is a digest kind: only the digest scheduler makes those")


# --- the commented example -------------------------------------------------------------------


def render_example() -> str:
    """The commented config for `notifyd init` and notifyd.example.toml: every key, documented,
    each with its default; channels and kinds, which have no defaults to show, in comments."""
    cfg = Config()
    out = ["# notifyd configuration. Every key is optional; each shows its default. Durations are",
           "# in seconds; a relative store.url is relative to this file's folder.",
           "# Start with: notifyd --config notifyd.toml serve",
           "#",
           "# An environment variable sets any key that is not a list of tables, and wins over",
           "# this file: NOTIFYD_<TABLE>_<KEY> (NOTIFYD_SERVER_PORT=8080,",
           "# NOTIFYD_STORE_SQLITE_SYNCHRONOUS=NORMAL), and for an entry of a table of named",
           "# entries NOTIFYD_<TABLE>__<NAME>__<KEY> (NOTIFYD_CHANNELS__SMS__AUTH_TOKEN). A",
           "# secret may be read from a file instead: KEY_file = \"path\" here (relative to this",
           "# file's folder), NOTIFYD_..._KEY_FILE=path in the environment. A reload (SIGHUP)",
           "# reads the files again; the environment stays what the process started with.", ""]
    for f in dataclasses.fields(Config):
        value = getattr(cfg, f.name)
        if dataclasses.is_dataclass(value):
            out += _render_table(f.name, f.metadata["doc"], value)
    out += [
        "# Channels by name; ladders refer to these names. A channel named \"log\" (type log)",
        "# always exists unless you define one of that name. A channel table takes these keys:",
        "#",
        "# [channels.NAME]",
        *_commented(_render_fields(ChannelConfig())),
        "",
        *_render_channel_types(),
        "# Notification kinds by name: each its ladder and policy. With no [kinds] table a",
        "# built-in kind \"demo\" sends on the log channel at once and again 30 seconds later,",
        "# unless resolved first. A kind table takes these keys:",
        "#",
        "# [kinds.NAME]",
        *_commented(_render_fields(KindConfig(ladder=(LadderStep("log"),)))),
        "",
        "# Preference categories by name (a kind's `category`, else its name). A category not",
        "# listed is optional with every medium on. A category table takes these keys:",
        "#",
        "# [categories.NAME]",
        *_commented(_render_fields(CategoryConfig())),
        "",
        "# Send limits per person, as many as you like; an item over one is held for its kind's",
        "# digest (or suppressed, rate_limited, when the kind has none). Each takes these keys:",
        "#",
        "# [[limits]]",
        *_commented(_render_fields(LimitConfig())),
        "",
        "# Per-tenant settings:",
        "#",
        "# [tenants.NAME]",
        *_commented(_render_fields(TenantConfig())),
        "",
        "# Event types by name, for POST /v1/events: an event of a type reaches its audience",
        "# (a list of users, a topic, or everyone) as one notification of each of its kinds per",
        "# recipient. An event type table takes these keys:",
        "#",
        "# [events.NAME]",
        *_commented(_render_fields(EventTypeConfig(kinds=("comment_reply",)))),
        "",
        *_render_webhooks(),
        "# For example, a webhook channel and a kind that escalates from it to the log after ten",
        "# minutes unless resolved first:",
        "#",
        "# [channels.ops-hook]",
        "# type = \"webhook\"",
        "# url = \"https://hooks.example.com/notify\"",
        "#",
        "# [kinds.server_down]",
        "# urgency = \"urgent\"",
        "# ttl_sec = 7200",
        "# ladder = [",
        "#   { channel = \"ops-hook\", timeout_sec = 600 },",
        "#   { channel = \"log\" },",
        "# ]",
        "",
    ]
    return "\n".join(out)


def _commented(lines: list[str]) -> list[str]:
    """Doc lines (already '# ...') as '# # ...', keys as '# key = ...'."""
    return [f"# {part}" for line in lines for part in line.split("\n")]


def _render_channel_types() -> list[str]:
    """Each channel type's own keys, which go in a [channels.NAME] table beside `type`."""
    out = ["# Each channel type adds keys of its own to its [channels.NAME] table:"]
    for name, ctype in CHANNEL_TYPES.items():
        out.append(f"#   type = \"{name}\": {ctype.summary}")
        for line in _render_fields(ctype.settings()):
            out += [f"#     {part.removeprefix('# ')}" for part in line.split("\n")]
    return [*out, ""]


def _render_webhooks() -> list[str]:
    """Each provider's delivery webhook: POST /v1/webhooks/NAME, on when its secret is set."""
    out = ["# Delivery receipts from providers' webhooks: each provider's table turns on",
           "# POST /v1/webhooks/NAME once its secret is set. Point the provider at",
           "# server.public_url + /v1/webhooks/NAME. Providers and their keys:", "#"]
    for name, provider in PROVIDERS.items():
        out.append(f"# [webhooks.{name}]  {provider.summary}")
        for line in _render_fields(provider.settings()):
            out += [f"#   {part.removeprefix('# ')}" for part in line.split("\n")]
        for table, text, entry in _named_tables(provider.settings):
            out.append(f"# [webhooks.{name}.{table}.NAME]  {text}")
            for line in _render_fields(entry()):
                out += [f"#   {part.removeprefix('# ')}" for part in line.split("\n")]
    return [*out, ""]


def _named_tables(cls: type[Any]) -> list[tuple[str, str, type[Any]]]:
    """A settings class's tables of named entries (dict[str, a dataclass]): key, doc, entry
    class."""
    hints = typing.get_type_hints(cls)
    out = []
    for f in dataclasses.fields(cls):
        args = typing.get_args(hints[f.name]) if typing.get_origin(hints[f.name]) is dict else ()
        if len(args) == 2 and isinstance(args[1], type) and dataclasses.is_dataclass(args[1]):
            out.append((f.name, str(f.metadata["doc"]), args[1]))
    return out


def _render_table(name: str, text: str, obj: Any) -> list[str]:
    """[name] with its keys, then each table nested in it ([store.sqlite])."""
    out = [f"# {text}", f"[{name}]", *_render_fields(obj), ""]
    for f in dataclasses.fields(obj):
        value = getattr(obj, f.name)
        if dataclasses.is_dataclass(value):
            out += _render_table(f"{name}.{f.name}", f.metadata["doc"], value)
    return out


def _render_fields(obj: Any) -> list[str]:
    lines = []
    for f in dataclasses.fields(obj):
        value = getattr(obj, f.name)
        if "doc" not in f.metadata or dataclasses.is_dataclass(value) or isinstance(value, dict):
            continue  # tables: _render_table; tables of named entries: their own comment
        if isinstance(value, tuple) and value and dataclasses.is_dataclass(value[0]):
            tables = [{k: v for k, v in dataclasses.asdict(s).items() if v is not None}
                      for s in value]
            body = f"{f.name} = [\n" + "".join(
                f"  {_inline(table)},\n" for table in tables) + "]"
        else:
            body = tomli_w.dumps({f.name: list(value) if isinstance(value, tuple) else value})
            body = body.strip()
        secret = f" Or {f.name}_file: the path of a file that holds it." \
            if f.metadata.get("secret") else ""
        lines += [f"# {f.metadata['doc']}{secret}", body]
    return lines


def _inline(table: dict[str, Any]) -> str:
    return "{ " + ", ".join(tomli_w.dumps({k: v}).strip() for k, v in table.items()) + " }"
