-- A replayed step gets a fresh retry budget: attempts before this count are not held against it.
ALTER TABLE steps ADD COLUMN retry_base INTEGER NOT NULL DEFAULT 0;
