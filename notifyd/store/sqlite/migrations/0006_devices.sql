-- A user's push targets, each its own contact with its own state: a web push subscription or an
-- FCM registration token. A push step goes to every live device of the user.
CREATE TABLE devices (
    tenant      TEXT NOT NULL,
    user_id     TEXT NOT NULL,
    device_id   TEXT NOT NULL,             -- d_ + a hash of the endpoint: registering again is a no-op
    kind        TEXT NOT NULL,             -- webpush | fcm
    endpoint    TEXT NOT NULL,             -- the web push endpoint URL, or the FCM token
    p256dh      TEXT,
    auth        TEXT,
    state       TEXT NOT NULL,             -- live | dead
    reason      TEXT,                      -- why it is dead (the provider's answer)
    created_at  INTEGER NOT NULL,
    updated_at  INTEGER NOT NULL,
    PRIMARY KEY (tenant, user_id, device_id)
) WITHOUT ROWID;
-- The template a step's message was rendered from: kind/locale/medium@version.
ALTER TABLE steps ADD COLUMN template TEXT;
