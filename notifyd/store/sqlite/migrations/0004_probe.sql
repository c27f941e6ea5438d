-- One row that readiness rewrites: an empty transaction writes nothing, so only a real write
-- shows that the disk can take one (a full disk, a read-only file).
CREATE TABLE probe (id INTEGER PRIMARY KEY CHECK (id = 1), at INTEGER NOT NULL);
