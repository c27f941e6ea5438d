-- notifyd schema, version 1: keys, recipients, notifications with their whole ladder, attempts.
-- Times are epoch milliseconds (INTEGER). JSON is stored as TEXT.

CREATE TABLE api_keys (
    key_hash    TEXT PRIMARY KEY,          -- sha256 of the key; the key itself is never stored
    name        TEXT NOT NULL UNIQUE,
    tenant      TEXT NOT NULL,
    kinds       TEXT NOT NULL,             -- comma-separated allowed kinds; empty = all
    created_at  INTEGER NOT NULL,
    revoked_at  INTEGER
);

CREATE TABLE recipients (
    tenant      TEXT NOT NULL,
    user_id     TEXT NOT NULL,
    timezone    TEXT,
    locale      TEXT,
    quiet_start TEXT,                      -- HH:MM local
    quiet_end   TEXT,
    contacts    TEXT NOT NULL,             -- JSON {email, phone, chat: {name: id}}
    updated_at  INTEGER NOT NULL,
    PRIMARY KEY (tenant, user_id)
) WITHOUT ROWID;

-- A contact proven dead (a permanent rejection): no future ladder schedules it.
CREATE TABLE disabled_contacts (
    tenant      TEXT NOT NULL,
    user_id     TEXT NOT NULL,
    contact     TEXT NOT NULL,             -- contact kind, e.g. email or channel:webhook
    address     TEXT NOT NULL,             -- the address that failed; '' for per-channel contacts
    reason      TEXT NOT NULL,
    disabled_at INTEGER NOT NULL,
    PRIMARY KEY (tenant, user_id, contact, address)
) WITHOUT ROWID;

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
) WITHOUT ROWID;
CREATE UNIQUE INDEX notifications_dedup ON notifications (tenant, user_id, dedup_key);

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
    updated_at   INTEGER NOT NULL,
    PRIMARY KEY (notification_id, step_no)
) WITHOUT ROWID;
-- The due scan reads only this index, whatever the size of the history.
CREATE INDEX steps_due ON steps (channel, lane, send_after) WHERE state IN ('pending', 'unknown');
CREATE INDEX steps_inflight ON steps (lease_until) WHERE state = 'sending';
CREATE INDEX steps_dead ON steps (updated_at) WHERE state = 'dead';

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
