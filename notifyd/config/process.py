"""The process's own tables: the HTTP server, the store, the scanner, templates, the daemon's
lifecycle, retention, the fan-out, user tokens, the console and the way out (egress). Each key
is declared once with its type, default, doc and bounds (core/fields.doc); a table's checks
across its keys are its rules()."""

from __future__ import annotations

from dataclasses import dataclass

from notifyd.channels.egress import Egress, parse_proxy
from notifyd.core.fields import MAX_SEC, Checked, Problems, doc, docf, sensitive
from notifyd.store.postgres.settings import PostgresSettings
from notifyd.store.sqlite.settings import SqliteSettings

DEFAULT_PORT = 7726
DEFAULT_DB = "notifyd.db"
EVENT_LOOPS = ("auto", "uvloop", "asyncio")
DAY_SEC = 86400
MIN_TOKEN_TTL_SEC = 60  # the shortest token POST /v1/users/{user_id}/tokens makes
FOREVER = "a year; 0 keeps them forever"


def _proxy_problem(url: str) -> str | None:
    try:
        if url:
            parse_proxy(url)
    except ValueError as e:
        return str(e)
    return None


@dataclass(frozen=True)
class ServerConfig(Checked):
    host: str = doc("Address to listen on. Keep loopback unless a proxy with TLS sits in front.",
                    "127.0.0.1")
    port: int = doc("TCP port for the HTTP API.", DEFAULT_PORT, ge=0, le=65535)
    max_body_bytes: int = doc("Largest request body accepted; larger gets 413 body_too_large.",
                              65536, ge=1024, says="must be at least 1024")
    max_batch_body_bytes: int = doc("Largest body of POST /v1/notifications/batch and POST "
                                    "/v1/resolutions/batch (up to 1000 items each); larger gets "
                                    "413 body_too_large. Every other call keeps max_body_bytes.",
                                    4 * 1024 * 1024, ge=1024, says="must be at least 1024")
    max_schedule_sec: int = doc("How far ahead a notification's send_at may be (31 days); "
                                "further gets 422 invalid_field naming send_at. A scheduled "
                                "ladder's steps and time to live count from its send_at.",
                                31 * 86400, ge=1)
    max_connections: int = doc("Most client connections at once; past it newcomers wait in the "
                               "listen queue until a place frees, and one that has not sent a "
                               "whole request within a quarter second gives its place to them. "
                               "Each needs a file descriptor: lowered to fit the open-files "
                               "limit, with a warning.", 1000, ge=1)
    producer_share: float = doc("The share of max_connections kept for connections that have "
                                "presented an API key or a console session: the others "
                                "(webhooks, unsubscribe links, a person's pages, the console's "
                                "sign-in, health checks, anyone) hold the rest at most, so "
                                "that no stranger can take every place. Past that a stranger's "
                                "request is answered 503 too_many_connections (a health check "
                                "is answered as usual) and its connection closed. 0: no "
                                "places kept.", 0.25, ge=0, le=0.9)
    header_timeout_sec: float = doc("A connection must start each request this soon after "
                                    "opening or after its last request (slow headers, idle "
                                    "keep-alive), or it is closed.", 10.0, gt=0)
    body_timeout_sec: float = doc("A request's body must arrive this soon once its handler "
                                  "reads it, or the answer is 408 request_timeout; the body of "
                                  "a request answered without reading it, this soon after the "
                                  "answer, or its connection is closed.", 10.0, gt=0)
    write_timeout_sec: float = doc("An answer the client leaves unread this long once it has "
                                   "filled the connection's buffers (a client that stops "
                                   "reading, or sends requests and never reads their answers) "
                                   "closes its connection.", 10.0, gt=0)
    max_streams: int = doc("Most inbox streams (GET .../inbox/stream) open at once; they do not "
                           "count against max_connections, but each needs a file descriptor. "
                           "0: what the open-files limit leaves beside max_connections, the "
                           "providers' sockets and the database (at most 10000); a value over "
                           "that is lowered, with a warning.", 0, ge=0)
    max_streams_per_user: int = doc("Most inbox streams one person may hold open (a page each, "
                                    "whichever token or key opened them); a new one beyond it "
                                    "closes that person's oldest, which reconnects a minute "
                                    "later.", 8, ge=1)
    public_url: str = doc("Where providers and browsers reach this daemon (behind a proxy, its "
                          "public https URL), for status callbacks and unsubscribe links. Empty: "
                          "none are sent.", "")


@dataclass(frozen=True)
class StoreConfig(Checked):
    url: str = sensitive("The database: a SQLite file's path (WAL mode, created on first "
                         "start), a URL such as sqlite:////var/lib/notifyd/notifyd.db, or a "
                         "PostgreSQL database that several notifyd processes share: "
                         "postgresql://user@host/dbname (its password, in the URL or as "
                         "?password=, is never shown: log lines, errors and commands print "
                         "***).", DEFAULT_DB, nonempty=True)
    max_pending_writes: int = doc("Accepts waiting for the writer beyond which new ones get 503 "
                                  "overloaded with Retry-After (producers retry with the same "
                                  "dedup key, so nothing is lost); bounds accept latency and "
                                  "memory under a flood. Keep it under server.max_connections, or "
                                  "the connections bound the queue first and nothing is shed.", 500,
                                  ge=1)
    sqlite: SqliteSettings = docf("A SQLite database's settings.", SqliteSettings)
    postgres: PostgresSettings = docf("A PostgreSQL database's settings.", PostgresSettings)


@dataclass(frozen=True)
class ScannerConfig(Checked):
    poll_interval_sec: float = doc("How long the scanner waits after a scan that failed (a full "
                                   "disk, the database out of reach) before it tries again. "
                                   "Between scans it sleeps until the next due time it knows "
                                   "of, or scanner.sweep_sec.", 1.0, gt=0)
    claim_batch: int = doc("Most steps claimed in one transaction.", 256, gt=0)
    sweep_sec: float = doc("How often the scanner reads every due time again from the "
                           "database. It learns of each due time from the write that makes "
                           "it, and claims only what is due; this read is the safety net for "
                           "one it was not told of (another process's retry on a shared "
                           "database, a lease that ends), which waits at most this long.",
                           10.0, gt=0, le=3600)
    lease_sec: float = doc("How long a claimed step may stay in flight before it is presumed "
                           "lost and becomes unknown, to be resent under the same key and bytes. "
                           "A process frozen (SIGSTOP) longer than this resends its in-flight "
                           "steps when it resumes: at-least-once, as designed.", 60.0, gt=0)


@dataclass(frozen=True)
class TemplatesConfig(Checked):
    folder: str = doc("The templates folder: <kind>/<locale>/<medium>.<part>.j2, and the names "
                      "a person reads for kinds and categories in names/<locale>.toml (notifyd "
                      "init writes a starter one; relative to this file's folder).", "templates")
    default_locale: str = doc("The locale used when neither the recipient's locale nor its "
                              "language has the templates (or a kind's or category's name).",
                              "en", nonempty=True)
    max_output_bytes: int = doc("Largest rendered part; a larger one ends its step dead, "
                                "never truncated.", 131072, ge=1)


@dataclass(frozen=True)
class DaemonConfig(Checked):
    grace_sec: float = doc("On SIGTERM, how long in-flight sends may finish before exit.", 10.0,
                          ge=0)
    ready_max_loop_lag_sec: float = doc(
        "GET /readyz fails while the daemon's event loop runs its timers later than this (the "
        "worst of the last 10 s): notifyd itself cannot keep up. A provider's outage never "
        "fails it; that shows as notifyd_due_lag_seconds and notifyd_breaker_state on "
        "/metrics. It was ready_max_due_lag_sec, the oldest due step's wait, which an outage "
        "pushed past any bound; a config with that name sets this.", 5.0, gt=0)
    event_loop: str = doc('"auto" (uvloop when installed, as it is with notifyd on Linux and '
                          'macOS; else the standard loop), "uvloop" (a faster drop-in on libuv) '
                          'or "asyncio" (the standard event loop).', "auto", choices=EVENT_LOOPS)


@dataclass(frozen=True)
class RetentionConfig(Checked):
    """How long each class of rows is kept; 0 keeps that class forever. Windows count from a
    notification's acceptance, a receipt's arrival, an inbox item's reading (or archiving) or
    creation. Suppressions are kept forever: they are facts about an address."""

    history_sec: int = doc("A finished notification's history (its steps with their frozen "
                           "payloads, attempts, moves, digest items, and its receipts' addresses "
                           "and details) is kept this long after acceptance (14 days); then only "
                           "its identity stays. Nothing still open (due, in flight, held for a "
                           "digest) is ever pruned. A topic membership that ended is kept as "
                           "long, unless an event still routing needs it.", 14 * DAY_SEC,
                           ge=0, le=MAX_SEC, note=FOREVER)
    identity_sec: int = doc("The identity left by a pruned history (id, tenant, user, dedup key, "
                            "request hash, final state), kept this long after acceptance (60 "
                            "days): a producer retrying within it gets the original id, never a "
                            "second notification. A routed event is kept as long, so a retry of "
                            "it is answered with it. At least history_sec.", 60 * DAY_SEC,
                            ge=0, le=MAX_SEC, note=FOREVER)
    receipts_sec: int = doc("Providers' receipts, kept this long after arrival (30 days): a "
                            "provider replaying one within it is answered as a duplicate.",
                            30 * DAY_SEC, ge=0, le=MAX_SEC, note=FOREVER)
    inbox_read_sec: int = doc("Inbox items read or archived, kept this long after that (30 "
                              "days).", 30 * DAY_SEC, ge=0, le=MAX_SEC, note=FOREVER)
    inbox_sec: int = doc("Every inbox item, read or not, kept this long after it was made (180 "
                         "days); an unread one leaves the badge with it. At least "
                         "inbox_read_sec.", 180 * DAY_SEC, ge=0, le=MAX_SEC, note=FOREVER)
    interval_sec: float = doc("How often retention looks for what has aged out.", 60.0, gt=0,
                              le=86400, says="must be 0..86400, not 0")
    batch: int = doc("Rows (a notification's history counts as one) removed per write: each "
                     "write is short, so accepts and sends never wait long behind it.", 200,
                     ge=1, le=10000)

    def rules(self) -> Problems:
        out = []
        if not (self.identity_sec == 0 or 0 < self.history_sec <= self.identity_sec):
            out.append(("identity_sec", "must be at least retention.history_sec (0: forever)"))
        if not (self.inbox_sec == 0 or 0 < self.inbox_read_sec <= self.inbox_sec):
            out.append(("inbox_sec", "must be at least retention.inbox_read_sec (0: forever)"))
        return out


@dataclass(frozen=True)
class FanoutConfig(Checked):
    chunk: int = doc("Recipients an event's fan-out routes per write: each write is short, so "
                     "accepts and sends never wait long behind a large event.", 100, ge=1,
                     le=10000)
    max_inline_users: int = doc("Most user ids an event may list inline ({\"user_ids\": "
                                "[...]}); a larger audience is a topic.", 1000, ge=1,
                                le=10000)


@dataclass(frozen=True)
class QuotasConfig(Checked):
    """What one tenant may take of what all tenants share; [tenants.NAME] may set its own."""

    accepts_per_sec: float = doc("Single notifications (POST /v1/notifications) one tenant may "
                                 "post per second, as a bucket a second deep; past it 429 "
                                 "quota_exceeded with Retry-After. 0: no quota.", 0.0, ge=0,
                                 le=1_000_000)
    batch_items_per_sec: float = doc("Items of POST /v1/notifications/batch one tenant may post "
                                     "per second, as a bucket a second deep (or a batch deep); "
                                     "a batch over what is left is refused whole, 429 "
                                     "quota_exceeded with Retry-After. 0: no quota.", 0.0, ge=0,
                                     le=1_000_000)
    event_recipients_per_day: int = doc("Recipients one tenant's events (POST /v1/events) may "
                                        "reach in a day, refilled evenly through the day; an "
                                        "event whose audience is larger than what is left is "
                                        "refused, 429 quota_exceeded with Retry-After. 0: no "
                                        "quota.", 0, ge=0, le=10_000_000_000)
    stream_share: float = doc("A tenant's share of the stream places. Inbox streams "
                              "(server.max_streams): while places are free any tenant takes "
                              "one; once all are taken, a tenant under its share takes the "
                              "oldest stream of a tenant over it, and a tenant at its share, "
                              "beside others, is answered 429 too_many_streams with "
                              "Retry-After. Decision streams "
                              "(32): one tenant holds at most its share. 1: no share, first "
                              "come, first served.", 0.5, gt=0, le=1)
    batch_items_in_flight: int = doc("Batch items one tenant may have waiting for the database "
                                     "at once (a larger batch goes alone): its next batch waits "
                                     "for its turn, and every other tenant's write that came "
                                     "before passes ahead of it, so one tenant's batches never "
                                     "hold another's accepts behind them. Not a quota: nothing "
                                     "is refused.", 1000, ge=1, le=100_000)


@dataclass(frozen=True)
class TokensConfig(Checked):
    """User tokens: what a person's page reads their own inbox and preferences with."""

    max_ttl_sec: int = doc("The longest a user token may live: one whose expiry is further "
                           "from now is refused, however it was signed (a backend's own "
                           "included, with a minute's leeway for its clock). Also the longest "
                           "POST /v1/users/{user_id}/tokens grants, and how long a rotated key "
                           "still verifies by default (notifyd tokens rotate).", DAY_SEC,
                           ge=MIN_TOKEN_TTL_SEC, le=MAX_SEC)
    preferences_link_ttl_sec: int = doc(
        "How long the link to the preference centre in a message ({{ preferences_url }}) opens "
        "it, from when the message was rendered: then it shows that the link expired, and the "
        "person uses a newer message's. Lowering it shortens the links already sent. Also how "
        "long a rotated key still verifies links by default (notifyd links rotate).",
        90 * DAY_SEC, ge=3600, le=366 * DAY_SEC, note="a year")


@dataclass(frozen=True)
class ConsoleConfig(Checked):
    """The operator console (/console), the inbox widget (/inbox.js) and the preference centre:
    pages served by the daemon itself."""

    enabled: bool = doc("Serve the operator console at /console. An operator signs in with an "
                        "API key that has the admin scope (notifyd keys create --scopes "
                        "admin,...), for that key's tenant, or with the password below.", True)
    password: str = sensitive("A console password: it signs in for the tenant named at "
                              "sign-in. Empty: only admin API keys sign in. Keep this file "
                              "readable by notifyd alone.", min_length=12,
                              says="must be at least 12 characters (or empty: admin API keys "
                                   "only)")
    session_ttl_sec: int = doc("How long a console session lasts from sign-in; then the "
                               "operator signs in again. Revoking the key ends its sessions.",
                               8 * 3600, ge=60, le=7 * DAY_SEC, note="a week")
    max_failed_sign_ins: int = doc("Failed sign-ins from one address within a minute before "
                                   "its next ones are refused until the minute is over (also "
                                   "from one browser that signed in before).", 5, ge=1)
    max_failed_sign_ins_per_tenant: int = doc(
        "Failed password sign-ins to one tenant within an hour, from any addresses, after which "
        "the tenant's next sign-in waits 1 s, and twice as long after each further failure (2 s, "
        "4 s, ... at most 15 minutes). A browser that signed in to the tenant before, with the "
        "password as it is now, is not held by this or by the limit per address.", 20,
        ge=1)
    overview_every_sec: float = doc("How often the console's overview refreshes its figures "
                                    "while open.", 2.0, ge=0.2, le=3600)
    demo_inbox: bool = doc("Serve /demo/inbox: a page showing the inbox widget for a user id "
                           "and token typed into it. Off in production.", False)


@dataclass(frozen=True)
class EgressConfig(Checked):
    """How the HTTP channels (and the SNS certificate fetch) reach providers: straight out, or
    through an HTTP proxy. SMTP never goes through it. Each key left empty is taken from the
    environment variable of its name, upper or lower case (HTTPS_PROXY, HTTP_PROXY, NO_PROXY)."""

    https_proxy: str = sensitive(
        "The proxy for https:// providers: http://[user:password@]host[:port] (port 80 if "
        "none). notifyd asks it for a tunnel (CONNECT) and speaks TLS with the provider through "
        "it, checking the provider's certificate as without one; the user and password go as "
        "Proxy-Authorization. Empty: HTTPS_PROXY; neither: straight out.",
        check=_proxy_problem)
    http_proxy: str = sensitive(
        "The proxy for http:// URLs (a webhook channel's plain URL, a local stand-in): the "
        "request is handed to it whole. Empty: HTTP_PROXY.", check=_proxy_problem)
    no_proxy: tuple[str, ...] = doc(
        "Hosts reached straight out, read as curl reads NO_PROXY: a name (with every name "
        "under it), an IP address, a CIDR block such as 10.0.0.0/8, or \"*\" for every host. "
        "Empty: NO_PROXY.", ())

    def routes(self) -> Egress:
        return Egress.of(self.https_proxy, self.http_proxy, self.no_proxy)
