-- The whole schema of notifyd's SQLite migrations 1-15, in PostgreSQL's types: times are epoch
-- milliseconds (bigint), JSON is kept as text, as the store core reads and writes it.
CREATE TABLE api_keys (
    key_hash    text PRIMARY KEY,
    name        text NOT NULL UNIQUE,
    tenant      text NOT NULL,
    kinds       text NOT NULL,
    created_at  bigint NOT NULL,
    revoked_at  bigint,
    scopes      text NOT NULL DEFAULT 'post,read,resolve,users'
);
CREATE TABLE notifications (
    id           text PRIMARY KEY,
    tenant       text NOT NULL,
    user_id      text NOT NULL,
    kind         text NOT NULL,
    dedup_key    text,
    request_hash text NOT NULL,
    params       text NOT NULL,
    key_name     text NOT NULL,
    created_at   bigint NOT NULL,
    expires_at   bigint NOT NULL,
    resolved_at  bigint,
    resolution   text,
    resolved_by  text,
    pruned_at    bigint,
    outcome      text,
    send_at      bigint,
    event_id     text,
    -- Its steps in flight, kept by steps_sending: a claim locks this row, and a claim that
    -- waited reads the row as the last one committed it (one attempt in flight).
    sending      integer NOT NULL DEFAULT 0
);
CREATE TABLE steps (
    notification_id text NOT NULL REFERENCES notifications (id),
    step_no      integer NOT NULL,
    channel      text NOT NULL,
    lane         text NOT NULL,
    send_after   bigint NOT NULL,
    state        text NOT NULL,
    attempts     integer NOT NULL DEFAULT 0,
    reason       text,
    note         text,
    provider_ref text,
    destination  text,
    payload      text,
    claim_token  text,
    lease_until  bigint,
    updated_at   bigint NOT NULL,
    retry_base   integer NOT NULL DEFAULT 0,
    planned_at   bigint,
    cause        text,
    template     text,
    evidence     text,
    pref_version bigint,
    plan_note    text,
    PRIMARY KEY (notification_id, step_no)
);
CREATE FUNCTION notifyd_steps_sending() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE notifications SET sending = sending
        + (CASE WHEN NEW.state = 'sending' THEN 1 ELSE 0 END)
        - (CASE WHEN OLD.state = 'sending' THEN 1 ELSE 0 END)
    WHERE id = NEW.notification_id;
    RETURN NULL;
END $$;
CREATE TRIGGER steps_sending AFTER UPDATE OF state ON steps FOR EACH ROW
    WHEN ((OLD.state = 'sending') IS DISTINCT FROM (NEW.state = 'sending'))
    EXECUTE FUNCTION notifyd_steps_sending();
CREATE TABLE attempts (
    notification_id text NOT NULL,
    step_no      integer NOT NULL,
    attempt_no   integer NOT NULL,
    claim_token  text NOT NULL,
    started_at   bigint NOT NULL,
    ended_at     bigint,
    outcome      text,
    reason       text,
    provider_ref text,
    PRIMARY KEY (notification_id, step_no, attempt_no)
);
CREATE TABLE events (
    id           bigserial PRIMARY KEY,  -- the order written (SQLite's rowid)
    notification_id text NOT NULL,
    step_no      integer NOT NULL,
    at           bigint NOT NULL,
    what         text NOT NULL
);
CREATE TABLE recipients (
    tenant      text NOT NULL,
    user_id     text NOT NULL,
    timezone    text,
    locale      text,
    quiet_start text,
    quiet_end   text,
    contacts    text NOT NULL,
    updated_at  bigint NOT NULL,
    preferences text,
    pref_version bigint NOT NULL DEFAULT 0,
    created_at  bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (tenant, user_id)
);
CREATE TABLE devices (
    tenant      text NOT NULL,
    user_id     text NOT NULL,
    device_id   text NOT NULL,
    kind        text NOT NULL,
    endpoint    text NOT NULL,
    p256dh      text,
    auth        text,
    state       text NOT NULL,
    reason      text,
    created_at  bigint NOT NULL,
    updated_at  bigint NOT NULL,
    PRIMARY KEY (tenant, user_id, device_id)
);
CREATE TABLE digest_items (
    notification_id text NOT NULL,
    step_no      integer NOT NULL,
    tenant       text NOT NULL,
    user_id      text NOT NULL,
    digest_kind  text NOT NULL,
    window_end   bigint NOT NULL,
    held_at      bigint NOT NULL,
    digest_id    text,
    PRIMARY KEY (notification_id, step_no)
);
CREATE TABLE fanout_events (
    seq          bigserial PRIMARY KEY,
    tenant       text NOT NULL,
    event_id     text NOT NULL,
    type         text NOT NULL,
    subject      text,
    params       text NOT NULL,
    kinds        text NOT NULL,
    request_hash text NOT NULL,
    key_name     text NOT NULL,
    audience     text NOT NULL,
    topic        text,
    version      bigint,
    cutoff       bigint,
    users        text,
    size         bigint NOT NULL,
    cursor       text NOT NULL,
    routed       bigint NOT NULL,
    accepted_at  bigint NOT NULL,
    routed_at    bigint,
    send_at      bigint
);
CREATE TABLE inbox_badges (
    tenant  text NOT NULL,
    user_id text NOT NULL,
    unread  bigint NOT NULL,
    PRIMARY KEY (tenant, user_id)
);
CREATE TABLE inbox_items (
    seq             bigserial PRIMARY KEY,
    tenant          text NOT NULL,
    user_id         text NOT NULL,
    notification_id text NOT NULL UNIQUE,
    kind            text NOT NULL,
    title           text NOT NULL,
    body            text,
    created_at      bigint NOT NULL,
    read_at         bigint,
    archived_at     bigint
);
CREATE TABLE probe (id integer PRIMARY KEY CHECK (id = 1), at bigint NOT NULL);
CREATE TABLE receipts (
    provider     text NOT NULL,
    event_id     text NOT NULL,
    event        text NOT NULL,
    occurred_at  bigint,
    received_at  bigint NOT NULL,
    provider_ref text,
    step_key     text,
    message_id   text,
    address      text,
    channel_type text,
    detail       text,
    notification_id text,
    step_no      integer,
    tenant       text,
    PRIMARY KEY (provider, event_id)
);
CREATE TABLE signing_keys (
    name       text PRIMARY KEY,
    secret     bytea NOT NULL,
    created_at bigint NOT NULL,
    previous   bytea,
    previous_until bigint
);
CREATE TABLE suppressions (
    tenant       text NOT NULL,
    channel_type text NOT NULL,
    address      text NOT NULL,
    reason       text NOT NULL,
    source       text NOT NULL,
    evidence     text,
    created_at   bigint NOT NULL,
    PRIMARY KEY (tenant, channel_type, address)
);
CREATE TABLE topic_members (
    tenant          text NOT NULL,
    topic           text NOT NULL,
    user_id         text NOT NULL,
    added_version   bigint NOT NULL,
    added_at        bigint NOT NULL,
    removed_version bigint,
    removed_at      bigint,
    PRIMARY KEY (tenant, topic, user_id, added_version)
);
CREATE TABLE topics (
    tenant       text NOT NULL,
    name         text NOT NULL,
    version      bigint NOT NULL,
    members      bigint NOT NULL,
    self_service boolean NOT NULL,
    created_at   bigint NOT NULL,
    updated_at   bigint NOT NULL,
    deleted_at   bigint,
    PRIMARY KEY (tenant, name)
);
CREATE TABLE webhook_tokens (
    provider text NOT NULL,
    token    text NOT NULL,
    seen_at  bigint NOT NULL,
    until    bigint NOT NULL,
    PRIMARY KEY (provider, token)
);
-- A channel's send budget for the whole deployment: tokens refilled at its rate, taken by any
-- process's claim under the row's lock (store.claim_due).
CREATE TABLE rate_budgets (
    channel   text PRIMARY KEY,
    tokens    double precision NOT NULL,
    at        bigint NOT NULL
);
CREATE INDEX digest_items_due ON digest_items (window_end) WHERE digest_id IS NULL;
CREATE INDEX events_notification ON events (notification_id, at);
CREATE UNIQUE INDEX fanout_events_id ON fanout_events (tenant, event_id);
CREATE INDEX fanout_events_pins ON fanout_events (tenant, topic, version)
    WHERE routed_at IS NULL;
CREATE INDEX fanout_events_routing ON fanout_events (seq) WHERE routed_at IS NULL;
CREATE INDEX inbox_done ON inbox_items ((coalesce(read_at, archived_at)))
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
-- The claim's order (send_after, then the key, as SQLite's rows tie) read off the index: the
-- claim stops after the steps it wants however many are due.
CREATE INDEX steps_due ON steps (channel, lane, send_after, notification_id, step_no)
    WHERE state IN ('pending', 'unknown');
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
