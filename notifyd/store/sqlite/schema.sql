-- user_version = 20
CREATE TABLE api_keys (
    key_hash    TEXT PRIMARY KEY,          -- sha256 of the key; the key itself is never stored
    name        TEXT NOT NULL UNIQUE,
    tenant      TEXT NOT NULL,
    kinds       TEXT NOT NULL,             -- comma-separated allowed kinds; empty = all
    created_at  INTEGER NOT NULL,
    revoked_at  INTEGER
, scopes TEXT NOT NULL DEFAULT 'post,read,resolve,users', last_used_at INTEGER);
CREATE TABLE attempts (
    notification_id TEXT NOT NULL,
    step_no      INTEGER NOT NULL,
    attempt_no   INTEGER NOT NULL,
    claim_token  TEXT NOT NULL,
    started_at   INTEGER NOT NULL,
    ended_at     INTEGER,
    outcome      TEXT,                     -- sent | rejected | failed | unknown
    reason       TEXT,
    provider_ref TEXT,
    PRIMARY KEY (notification_id, step_no, attempt_no)
) WITHOUT ROWID;
CREATE TABLE console_sign_outs (
    nonce TEXT PRIMARY KEY,
    until INTEGER NOT NULL
) WITHOUT ROWID;
CREATE TABLE devices (
    tenant      TEXT NOT NULL,
    user_id     TEXT NOT NULL,
    device_id   TEXT NOT NULL,             -- d_ + a hash of the endpoint: registering again is a no-op
    kind        TEXT NOT NULL,             -- webpush | fcm
    endpoint    TEXT NOT NULL,             -- the web push endpoint URL, or the FCM token
    p256dh      TEXT,
    auth        TEXT,
    state       TEXT NOT NULL,             -- live | dead
    reason      TEXT,                      -- why it is dead (the provider's answer)
    created_at  INTEGER NOT NULL,
    updated_at  INTEGER NOT NULL,
    PRIMARY KEY (tenant, user_id, device_id)
) WITHOUT ROWID;
CREATE TABLE digest_items (
    notification_id TEXT NOT NULL,
    step_no      INTEGER NOT NULL,
    tenant       TEXT NOT NULL,
    user_id      TEXT NOT NULL,
    digest_kind  TEXT NOT NULL,
    window_end   INTEGER NOT NULL,         -- when its digest is due (the recipient's schedule)
    held_at      INTEGER NOT NULL,
    digest_id    TEXT,                     -- the digest notification that carried it
    PRIMARY KEY (notification_id, step_no)
) WITHOUT ROWID;
CREATE TABLE erasures (
    tenant    TEXT NOT NULL,
    user_id   TEXT NOT NULL,
    erased_at INTEGER NOT NULL,
    PRIMARY KEY (tenant, user_id)
) WITHOUT ROWID;
CREATE TABLE events (
    notification_id TEXT NOT NULL,
    step_no      INTEGER NOT NULL,
    at           INTEGER NOT NULL,
    what         TEXT NOT NULL
);
CREATE TABLE fanout_events (
    seq          INTEGER PRIMARY KEY,
    tenant       TEXT NOT NULL,
    event_id     TEXT NOT NULL,            -- the producer's id for it
    type         TEXT NOT NULL,
    subject      TEXT,
    params       TEXT NOT NULL,
    kinds        TEXT NOT NULL,            -- comma-separated: the type's kinds at acceptance
    request_hash TEXT NOT NULL,            -- tells a retry from other input under the same id
    key_name     TEXT NOT NULL,
    audience     TEXT NOT NULL,            -- user_ids | topic | everyone
    topic        TEXT,
    version      INTEGER,                  -- topic: the membership version it pinned
    cutoff       INTEGER,                  -- everyone: recipients made before this time ...
    users        TEXT,                     -- ... and these, made at it; user_ids: the list
    size         INTEGER NOT NULL,         -- recipients, counted at acceptance
    cursor       TEXT NOT NULL,            -- the last recipient routed ('' before the first)
    routed       INTEGER NOT NULL,         -- recipients routed so far
    accepted_at  INTEGER NOT NULL,
    routed_at    INTEGER                   -- NULL while routing
, send_at INTEGER);
CREATE TABLE inbox_badges (
    tenant  TEXT NOT NULL,
    user_id TEXT NOT NULL,
    unread  INTEGER NOT NULL,
    PRIMARY KEY (tenant, user_id)
) WITHOUT ROWID;
CREATE TABLE inbox_items (
    seq             INTEGER PRIMARY KEY,
    tenant          TEXT NOT NULL,
    user_id         TEXT NOT NULL,
    notification_id TEXT NOT NULL UNIQUE,
    kind            TEXT NOT NULL,
    title           TEXT NOT NULL,
    body            TEXT,
    created_at      INTEGER NOT NULL,
    read_at         INTEGER,
    archived_at     INTEGER
);
CREATE TABLE notifications (
    id           TEXT PRIMARY KEY,
    tenant       TEXT NOT NULL,
    user_id      TEXT NOT NULL,
    kind         TEXT NOT NULL,
    dedup_key    TEXT,                     -- NULL: never deduplicated
    request_hash TEXT NOT NULL,            -- tells a retry from a different request on one key
    params       TEXT NOT NULL,
    key_name     TEXT NOT NULL,            -- which API key posted it
    created_at   INTEGER NOT NULL,
    expires_at   INTEGER NOT NULL,
    resolved_at  INTEGER,
    resolution   TEXT,
    resolved_by  TEXT
, pruned_at INTEGER, outcome TEXT, send_at INTEGER, event_id TEXT) WITHOUT ROWID;
CREATE TABLE probe (id INTEGER PRIMARY KEY CHECK (id = 1), at INTEGER NOT NULL);
CREATE TABLE receipts (
    provider     TEXT NOT NULL,
    event_id     TEXT NOT NULL,
    event        TEXT NOT NULL,            -- accepted, delivered, shown, opened, bounced, ...
    occurred_at  INTEGER,
    received_at  INTEGER NOT NULL,
    provider_ref TEXT,
    step_key     TEXT,
    message_id   TEXT,
    address      TEXT,
    channel_type TEXT,
    detail       TEXT,
    notification_id TEXT,
    step_no      INTEGER, tenant TEXT,
    PRIMARY KEY (provider, event_id)
) WITHOUT ROWID;
CREATE TABLE recipients (
    tenant      TEXT NOT NULL,
    user_id     TEXT NOT NULL,
    timezone    TEXT,
    locale      TEXT,
    quiet_start TEXT,                      -- HH:MM local
    quiet_end   TEXT,
    contacts    TEXT NOT NULL,             -- JSON {email, phone, chat: {name: id}}
    updated_at  INTEGER NOT NULL, preferences TEXT, pref_version INTEGER NOT NULL DEFAULT 0, created_at INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (tenant, user_id)
) WITHOUT ROWID;
CREATE TABLE signing_keys (
    name       TEXT PRIMARY KEY,
    secret     BLOB NOT NULL,
    created_at INTEGER NOT NULL
, previous BLOB, previous_until INTEGER) WITHOUT ROWID;
CREATE TABLE steps (
    notification_id TEXT NOT NULL REFERENCES notifications (id),
    step_no      INTEGER NOT NULL,
    channel      TEXT NOT NULL,
    lane         TEXT NOT NULL,            -- urgent | bulk
    send_after   INTEGER NOT NULL,
    state        TEXT NOT NULL,
    attempts     INTEGER NOT NULL DEFAULT 0,
    reason       TEXT,                     -- why it ended as it did, or why it waits
    note         TEXT,                     -- how send_after was decided (quiet hours, pulled forward)
    provider_ref TEXT,
    destination  TEXT,                     -- frozen before the first provider call
    payload      TEXT,                     -- frozen before the first provider call
    claim_token  TEXT,                     -- guards completion against a stale sender
    lease_until  INTEGER,
    updated_at   INTEGER NOT NULL, retry_base INTEGER NOT NULL DEFAULT 0, planned_at INTEGER, cause TEXT, template TEXT, evidence TEXT, pref_version INTEGER, plan_note TEXT,
    PRIMARY KEY (notification_id, step_no)
) WITHOUT ROWID;
CREATE TABLE suppressions (
    tenant       TEXT NOT NULL,
    channel_type TEXT NOT NULL,            -- email | sms | telegram | slack
    address      TEXT NOT NULL,
    reason       TEXT NOT NULL,
    source       TEXT NOT NULL,            -- send, a provider's name, api, cli
    evidence     TEXT,                     -- the step key or receipt that proved it
    created_at   INTEGER NOT NULL,
    PRIMARY KEY (tenant, channel_type, address)
) WITHOUT ROWID;
CREATE TABLE tenants (
    name       TEXT PRIMARY KEY,
    created_at INTEGER NOT NULL
) WITHOUT ROWID;
CREATE TABLE topic_members (
    tenant          TEXT NOT NULL,
    topic           TEXT NOT NULL,
    user_id         TEXT NOT NULL,
    added_version   INTEGER NOT NULL,
    added_at        INTEGER NOT NULL,
    removed_version INTEGER,               -- NULL: a member now
    removed_at      INTEGER,
    PRIMARY KEY (tenant, topic, user_id, added_version)
) WITHOUT ROWID;
CREATE TABLE topics (
    tenant       TEXT NOT NULL,
    name         TEXT NOT NULL,
    version      INTEGER NOT NULL,         -- bumped by each change of its membership
    members      INTEGER NOT NULL,         -- members now, kept by each change
    self_service INTEGER NOT NULL,         -- 1: a person may follow and leave it themselves
    created_at   INTEGER NOT NULL,
    updated_at   INTEGER NOT NULL,
    deleted_at   INTEGER,                  -- deleted while empty; made again, its versions go on
    PRIMARY KEY (tenant, name)
) WITHOUT ROWID;
CREATE TABLE webhook_tokens (
    provider TEXT NOT NULL,
    token    TEXT NOT NULL,
    seen_at  INTEGER NOT NULL,
    until    INTEGER NOT NULL,
    PRIMARY KEY (provider, token)
) WITHOUT ROWID;
CREATE INDEX console_sign_outs_until ON console_sign_outs (until);
CREATE INDEX digest_items_due ON digest_items (window_end) WHERE digest_id IS NULL;
CREATE INDEX events_notification ON events (notification_id, at);
CREATE UNIQUE INDEX fanout_events_id ON fanout_events (tenant, event_id);
CREATE INDEX fanout_events_pins ON fanout_events (tenant, topic, version)
    WHERE routed_at IS NULL;
CREATE INDEX fanout_events_routing ON fanout_events (seq) WHERE routed_at IS NULL;
CREATE INDEX inbox_done ON inbox_items (coalesce(read_at, archived_at))
    WHERE read_at IS NOT NULL OR archived_at IS NOT NULL;
CREATE INDEX inbox_page ON inbox_items (tenant, user_id, created_at DESC, notification_id DESC);
CREATE INDEX inbox_since ON inbox_items (tenant, user_id, seq);
CREATE INDEX inbox_unread ON inbox_items (tenant, user_id)
    WHERE read_at IS NULL AND archived_at IS NULL;
CREATE UNIQUE INDEX notifications_dedup ON notifications (tenant, user_id, dedup_key);
CREATE INDEX notifications_event ON notifications (tenant, event_id, user_id)
    WHERE event_id IS NOT NULL;
CREATE INDEX notifications_live ON notifications (id) WHERE pruned_at IS NULL;
CREATE INDEX receipts_orphans ON receipts (provider_ref) WHERE notification_id IS NULL;
CREATE INDEX receipts_received ON receipts (received_at);
CREATE INDEX receipts_step ON receipts (notification_id, step_no);
CREATE INDEX steps_dead ON steps (updated_at) WHERE state = 'dead';
CREATE INDEX steps_due ON steps (channel, lane, send_after) WHERE state IN ('pending', 'unknown');
CREATE INDEX steps_inflight ON steps (lease_until) WHERE state = 'sending';
CREATE INDEX steps_provider_ref ON steps (provider_ref) WHERE provider_ref IS NOT NULL;
CREATE INDEX suppressions_address ON suppressions (address);
CREATE INDEX topic_members_closed ON topic_members (removed_at)
    WHERE removed_version IS NOT NULL;
CREATE UNIQUE INDEX topic_members_open ON topic_members (tenant, topic, user_id)
    WHERE removed_version IS NULL;
CREATE INDEX topic_members_user ON topic_members (tenant, user_id)
    WHERE removed_version IS NULL;
CREATE INDEX webhook_tokens_until ON webhook_tokens (provider, until);
