-- Tenants are made on purpose (notifyd tenants create), never by naming one; the config's
-- [tenants.NAME] tables hold their settings. The default tenant is there from the start, and
-- so is every tenant this database already names.
CREATE TABLE tenants (
    name       TEXT PRIMARY KEY,
    created_at INTEGER NOT NULL
) WITHOUT ROWID;
INSERT OR IGNORE INTO tenants (name, created_at)
SELECT tenant, min(created_at) FROM api_keys GROUP BY tenant;
INSERT OR IGNORE INTO tenants (name, created_at)
SELECT substr(name, 8), created_at FROM signing_keys WHERE name LIKE 'tokens:%';
INSERT OR IGNORE INTO tenants (name, created_at)
SELECT tenant, min(updated_at) FROM recipients GROUP BY tenant;
INSERT OR IGNORE INTO tenants (name, created_at)
SELECT tenant, min(created_at) FROM suppressions WHERE tenant != '*' GROUP BY tenant;
INSERT OR IGNORE INTO tenants (name, created_at)
VALUES ('default', CAST(strftime('%s', 'now') AS INTEGER) * 1000);
-- A person erased (DELETE /v1/users/{id}, notifyd users delete): user tokens made for them
-- before this time are refused, though they are signed and within their time.
CREATE TABLE erasures (
    tenant    TEXT NOT NULL,
    user_id   TEXT NOT NULL,
    erased_at INTEGER NOT NULL,
    PRIMARY KEY (tenant, user_id)
) WITHOUT ROWID;
