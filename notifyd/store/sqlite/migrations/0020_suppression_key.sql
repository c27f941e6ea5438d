-- The installation's own key for the suppressions an erasure keeps one-way (core/contacts.
-- hashed_address: an HMAC of the address's SHA-256 under it), made once, so every process and
-- command of the installation hashes alike, and each hash kept before it (sha256:<hex>) rewritten
-- under it, without the address. Both are done by migrate.py's step for this migration
-- (key_suppressions), in this migration's transaction: SQL has no HMAC.
SELECT 1;
