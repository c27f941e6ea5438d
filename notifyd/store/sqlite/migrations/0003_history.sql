-- The timeline is the record of what happened when: each step keeps the time and the cause it was
-- planned with, and every later move of a step (postponed, pulled forward, replayed) is an event
-- row written when it happened.
ALTER TABLE steps ADD COLUMN planned_at INTEGER;
ALTER TABLE steps ADD COLUMN cause TEXT;  -- why it was due then: NULL (at accept), 'after SEC', 'window STEP SEC'
CREATE TABLE events (
    notification_id TEXT NOT NULL,
    step_no      INTEGER NOT NULL,
    at           INTEGER NOT NULL,
    what         TEXT NOT NULL
);
CREATE INDEX events_notification ON events (notification_id, at);
-- A producer's webhook or the log is not a person's contact: nothing is disabled per user for it.
DELETE FROM disabled_contacts WHERE contact LIKE 'channel:%';
