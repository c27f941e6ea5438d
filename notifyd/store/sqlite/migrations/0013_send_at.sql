-- Scheduled sends. A request's send_at, as the ladder took it: when its first step could go
-- (a time already past when it was accepted is its acceptance), NULL for one sent at once. Its
-- steps' times and expires_at are counted from it; the column lets status and inspect say so.
ALTER TABLE notifications ADD COLUMN send_at INTEGER;
