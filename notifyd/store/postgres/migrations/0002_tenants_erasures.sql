-- Tenants are made on purpose (notifyd tenants create), never by naming one; the config's
-- [tenants.NAME] tables hold their settings. The default tenant is there from the start, and
-- so is every tenant this database already names.
CREATE TABLE tenants (
    name       text PRIMARY KEY,
    created_at bigint NOT NULL
);
INSERT INTO tenants (name, created_at)
SELECT tenant, min(created_at) FROM api_keys GROUP BY tenant ON CONFLICT DO NOTHING;
INSERT INTO tenants (name, created_at)
SELECT substr(name, 8), created_at FROM signing_keys WHERE name LIKE 'tokens:%'
ON CONFLICT DO NOTHING;
INSERT INTO tenants (name, created_at)
SELECT tenant, min(updated_at) FROM recipients GROUP BY tenant ON CONFLICT DO NOTHING;
INSERT INTO tenants (name, created_at)
SELECT tenant, min(created_at) FROM suppressions WHERE tenant != '*' GROUP BY tenant
ON CONFLICT DO NOTHING;
INSERT INTO tenants (name, created_at)
VALUES ('default', (extract(epoch FROM now()) * 1000)::bigint) ON CONFLICT DO NOTHING;
-- A person erased (DELETE /v1/users/{id}, notifyd users delete): user tokens made for them
-- before this time are refused, though they are signed and within their time.
CREATE TABLE erasures (
    tenant    text NOT NULL,
    user_id   text NOT NULL,
    erased_at bigint NOT NULL,
    PRIMARY KEY (tenant, user_id)
);
