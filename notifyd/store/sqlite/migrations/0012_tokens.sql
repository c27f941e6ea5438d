-- A signing key rotates: the key it replaced still verifies until previous_until, then is gone.
ALTER TABLE signing_keys ADD COLUMN previous BLOB;
ALTER TABLE signing_keys ADD COLUMN previous_until INTEGER;
-- A receipt verified with one tenant's secret matches only that tenant's notifications; NULL:
-- a provider's account-wide webhook, which matches any.
ALTER TABLE receipts ADD COLUMN tenant TEXT;
-- Tokens a provider's scheme lets through once (Mailgun's), kept until their signed time leaves
-- the tolerance window, after which the clock refuses them anyway.
CREATE TABLE webhook_tokens (
    provider TEXT NOT NULL,
    token    TEXT NOT NULL,
    seen_at  INTEGER NOT NULL,
    until    INTEGER NOT NULL,
    PRIMARY KEY (provider, token)
) WITHOUT ROWID;
CREATE INDEX webhook_tokens_until ON webhook_tokens (provider, until);
