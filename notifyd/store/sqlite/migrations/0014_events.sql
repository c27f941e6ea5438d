-- Events and topics. A topic is a named audience of a tenant whose membership is versioned: each
-- change bumps the version, a membership is a row open from the version that added it until the
-- one that removed it (a re-add is a new row), so an event pins its audience by a version.
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
-- One open membership per person and topic; a person's topics; closed rows, for retention.
CREATE UNIQUE INDEX topic_members_open ON topic_members (tenant, topic, user_id)
    WHERE removed_version IS NULL;
CREATE INDEX topic_members_user ON topic_members (tenant, user_id)
    WHERE removed_version IS NULL;
CREATE INDEX topic_members_closed ON topic_members (removed_at)
    WHERE removed_version IS NOT NULL;

-- An event and its routing job, written in one transaction: its input, its audience frozen at
-- acceptance (a topic's version, a cutoff time, or the list itself) and the cursor its fan-out
-- advances with each chunk's notifications. seq is the acceptance order.
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
);
CREATE UNIQUE INDEX fanout_events_id ON fanout_events (tenant, event_id);
CREATE INDEX fanout_events_routing ON fanout_events (seq) WHERE routed_at IS NULL;
CREATE INDEX fanout_events_pins ON fanout_events (tenant, topic, version)
    WHERE routed_at IS NULL;

-- The event a notification was made for (NULL: posted on its own), for support to go from an
-- event to its notifications.
ALTER TABLE notifications ADD COLUMN event_id TEXT;
CREATE INDEX notifications_event ON notifications (tenant, event_id, user_id)
    WHERE event_id IS NOT NULL;
-- When a person's row was first written: an event to everyone reaches those made before it.
-- Rows from before this migration count as made at the beginning of time.
ALTER TABLE recipients ADD COLUMN created_at INTEGER NOT NULL DEFAULT 0;
