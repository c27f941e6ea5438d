-- One suppression list: an address that must not be sent to, with why, who said so and the
-- evidence (a rejected send's step key, a provider receipt's id). tenant '*' holds for every
-- tenant (an account-wide event, such as an inbound SMS STOP).
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
CREATE INDEX suppressions_address ON suppressions (address);
INSERT OR IGNORE INTO suppressions
SELECT tenant, CASE contact WHEN 'phone' THEN 'sms' WHEN 'telegram_chat_id' THEN 'telegram'
                            WHEN 'slack_user_id' THEN 'slack' ELSE contact END,
       address, reason, 'send', NULL, disabled_at
FROM disabled_contacts WHERE address != '';
DROP TABLE disabled_contacts;
-- Provider evidence, stored before the provider is answered. notification_id is NULL until the
-- receipt is matched to a step (it may arrive before the send's answer is saved).
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
    step_no      INTEGER,
    PRIMARY KEY (provider, event_id)
) WITHOUT ROWID;
CREATE INDEX receipts_orphans ON receipts (provider_ref) WHERE notification_id IS NULL;
CREATE INDEX receipts_step ON receipts (notification_id, step_no);
ALTER TABLE steps ADD COLUMN evidence TEXT;  -- the strongest: accepted < delivered < shown < opened
CREATE INDEX steps_provider_ref ON steps (provider_ref) WHERE provider_ref IS NOT NULL;
