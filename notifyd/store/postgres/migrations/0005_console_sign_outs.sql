-- Console sessions signed out before their expiry (`until`, epoch ms): the cookie would still
-- verify, so the session's nonce is kept here until then, and every process refuses it, across
-- restarts. Rows past `until` go as new ones come. (IF NOT EXISTS: a database whose later
-- migrations are run again, as an upgrade test does, takes it as it is.)
CREATE TABLE IF NOT EXISTS console_sign_outs (
    nonce text PRIMARY KEY,
    until bigint NOT NULL
);
CREATE INDEX IF NOT EXISTS console_sign_outs_until ON console_sign_outs (until);
