-- When each API key was last used, to the minute (the daemon writes it at most once a minute per
-- key), so `notifyd keys list` tells a key in use from one to revoke. NULL: not used since.
ALTER TABLE api_keys ADD COLUMN last_used_at bigint;
