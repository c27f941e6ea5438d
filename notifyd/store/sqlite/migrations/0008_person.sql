-- The person's side: preferences read at the claim, items held for digests, the in-app inbox
-- with its badge, and the keys that sign unsubscribe links and user tokens.

-- {"opt_out": bool, "categories": {category: {medium: bool}}}; every change bumps the version.
ALTER TABLE recipients ADD COLUMN preferences TEXT;
ALTER TABLE recipients ADD COLUMN pref_version INTEGER NOT NULL DEFAULT 0;
-- The preference version the claim read when it decided to send or suppress the step.
ALTER TABLE steps ADD COLUMN pref_version INTEGER;

-- A step held back (over a limit, or a kind that always digests) waits here for its digest;
-- digest_id is set in the transaction that creates the digest, so a rebuild never repeats it.
CREATE TABLE digest_items (
    notification_id TEXT NOT NULL,
    step_no      INTEGER NOT NULL,
    tenant       TEXT NOT NULL,
    user_id      TEXT NOT NULL,
    digest_kind  TEXT NOT NULL,
    window_end   INTEGER NOT NULL,         -- when its digest is due (the recipient's schedule)
    held_at      INTEGER NOT NULL,
    digest_id    TEXT,                     -- the digest notification that carried it
    PRIMARY KEY (notification_id, step_no)
) WITHOUT ROWID;
CREATE INDEX digest_items_due ON digest_items (window_end) WHERE digest_id IS NULL;

-- One row per inbox notification, written in its accept transaction; seq orders the stream.
CREATE TABLE inbox_items (
    seq             INTEGER PRIMARY KEY,
    tenant          TEXT NOT NULL,
    user_id         TEXT NOT NULL,
    notification_id TEXT NOT NULL UNIQUE,
    kind            TEXT NOT NULL,
    title           TEXT NOT NULL,
    body            TEXT,
    created_at      INTEGER NOT NULL,
    read_at         INTEGER,
    archived_at     INTEGER
);
CREATE INDEX inbox_page ON inbox_items (tenant, user_id, created_at DESC, notification_id DESC);
CREATE INDEX inbox_unread ON inbox_items (tenant, user_id)
    WHERE read_at IS NULL AND archived_at IS NULL;
-- The unread count, kept with every write; rebuilt from the rows when it drifts.
CREATE TABLE inbox_badges (
    tenant  TEXT NOT NULL,
    user_id TEXT NOT NULL,
    unread  INTEGER NOT NULL,
    PRIMARY KEY (tenant, user_id)
) WITHOUT ROWID;

-- Keys made on first use: 'links' signs unsubscribe links, 'tokens:<tenant>' user tokens.
CREATE TABLE signing_keys (
    name       TEXT PRIMARY KEY,
    secret     BLOB NOT NULL,
    created_at INTEGER NOT NULL
) WITHOUT ROWID;
