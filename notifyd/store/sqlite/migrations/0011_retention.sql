-- Retention. A notification whose history has aged out keeps a minimal identity (its id, tenant,
-- user, dedup key, request hash and final state) for as long as producers may retry; the
-- partial index walks the ones whose history is still kept, oldest first (ids are time-ordered).
ALTER TABLE notifications ADD COLUMN pruned_at INTEGER;
ALTER TABLE notifications ADD COLUMN outcome TEXT;      -- its final state, kept when its history goes
CREATE INDEX notifications_live ON notifications (id) WHERE pruned_at IS NULL;
-- Receipts age out by when they came; inbox items read or archived by when that happened.
CREATE INDEX receipts_received ON receipts (received_at);
CREATE INDEX inbox_done ON inbox_items (coalesce(read_at, archived_at))
    WHERE read_at IS NOT NULL OR archived_at IS NOT NULL;
