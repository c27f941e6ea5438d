"""PostgreSQL's statements for the store core (store/core/queries.py says what each must do),
with those of the features (FEATURES, store/postgres/backend.py) SQLite has not got. Where
SQLite's order follows its index and then the key, these name the key: rows that tie come back
in the same order on both.

Written with SQLite's `?` placeholders and numbered into `$n` once, at import (tx.number);
the named ones (`:name`) are numbered too, and the Tx passes a dict in their order."""

import functools

# --- tenants, keys, recipients, accept and resolution --------------------------------------

INSERT_TENANT = "INSERT INTO tenants (name, created_at) VALUES (?, ?) ON CONFLICT DO NOTHING"
SELECT_TENANTS = "SELECT name, created_at FROM tenants ORDER BY name"
SELECT_TENANT = "SELECT name, created_at FROM tenants WHERE name = ?"

INSERT_KEY = """INSERT INTO api_keys (key_hash, name, tenant, kinds, created_at, scopes)
VALUES (?, ?, ?, ?, ?, ?)"""
SELECT_KEY = "SELECT name, tenant, kinds, key_hash, scopes FROM api_keys WHERE key_hash = ? " \
             "AND revoked_at IS NULL"
SELECT_KEYS = """SELECT name, tenant, kinds, created_at, revoked_at, scopes, last_used_at
FROM api_keys ORDER BY name"""
SELECT_KEY_NAMED = """SELECT name, tenant, kinds, created_at, revoked_at, scopes, last_used_at
FROM api_keys WHERE name = ?"""
REVOKE_KEY = "UPDATE api_keys SET revoked_at = ? WHERE name = ? AND revoked_at IS NULL"
MARK_KEY_USED = "UPDATE api_keys SET last_used_at = ? WHERE key_hash = ?"

# created_at: the time of the write that made the row (?8 is `at` again; an update keeps it).
UPSERT_RECIPIENT = """INSERT INTO recipients
    (tenant, user_id, timezone, locale, quiet_start, quiet_end, contacts, updated_at, created_at)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?8)
ON CONFLICT (tenant, user_id) DO UPDATE SET timezone = excluded.timezone,
    locale = excluded.locale, quiet_start = excluded.quiet_start,
    quiet_end = excluded.quiet_end, contacts = excluded.contacts,
    updated_at = excluded.updated_at"""
SELECT_RECIPIENT = """SELECT tenant, user_id, timezone, locale, quiet_start, quiet_end, contacts,
    preferences, pref_version
FROM recipients WHERE tenant = ? AND user_id = ?"""
SELECT_LOCALE = "SELECT locale FROM recipients WHERE tenant = ? AND user_id = ?"
# Every change of preferences bumps the version the claim records with its decision.
# With :version, only over that version (0: none chosen yet): a page saving what it showed never
# overwrites a change it did not see. :hours set: the time zone and quiet hours change with them.
PUT_PREFERENCES = """INSERT INTO recipients (tenant, user_id, contacts, updated_at, preferences,
    pref_version, timezone, quiet_start, quiet_end, created_at)
SELECT :tenant::text, :user_id::text, '{}', :at::bigint, :preferences::text, 1,
    :timezone::text, :quiet_start::text, :quiet_end::text, :at::bigint
WHERE coalesce(:version::bigint, 0) = 0 OR EXISTS (
    SELECT 1 FROM recipients WHERE tenant = :tenant AND user_id = :user_id)
ON CONFLICT (tenant, user_id) DO UPDATE SET preferences = excluded.preferences,
    pref_version = recipients.pref_version + 1, updated_at = excluded.updated_at,
    timezone = CASE WHEN :hours::boolean THEN excluded.timezone ELSE recipients.timezone END,
    quiet_start = CASE WHEN :hours THEN excluded.quiet_start ELSE recipients.quiet_start END,
    quiet_end = CASE WHEN :hours THEN excluded.quiet_end ELSE recipients.quiet_end END
WHERE :version IS NULL OR recipients.pref_version = :version
RETURNING pref_version"""
# The suppressions of a user's addresses (a JSON list), in their tenant or for every tenant.
SELECT_SUPPRESSED = """SELECT channel_type, address, reason FROM suppressions
WHERE tenant IN (?, '*') AND address IN (SELECT jsonb_array_elements_text(?::jsonb))"""
SELECT_LISTED = """SELECT tenant, channel_type, address, reason, source, evidence, created_at
FROM suppressions WHERE tenant IN (?, '*')
    AND address IN (SELECT jsonb_array_elements_text(?::jsonb))"""
SELECT_DEVICES = """SELECT device_id, kind, endpoint, p256dh, auth, state, reason FROM devices
WHERE tenant = ? AND user_id = ? ORDER BY created_at, device_id"""
# Registering a device again (the same endpoint) brings it back to life with its new keys.
UPSERT_DEVICE = """INSERT INTO devices (tenant, user_id, device_id, kind, endpoint, p256dh, auth,
    state, reason, created_at, updated_at)
VALUES (?, ?, ?, ?, ?, ?, ?, 'live', NULL, ?, ?)
ON CONFLICT (tenant, user_id, device_id) DO UPDATE SET p256dh = excluded.p256dh,
    auth = excluded.auth, state = 'live', reason = NULL, updated_at = excluded.updated_at"""
DELETE_DEVICE = "DELETE FROM devices WHERE tenant = ? AND user_id = ? AND device_id = ?"
KILL_DEVICE = """UPDATE devices SET state = 'dead', reason = ?, updated_at = ?
WHERE device_id = ? AND state = 'live'
    AND (tenant, user_id) = (SELECT tenant, user_id FROM notifications WHERE id = ?)"""

# --- a person erased ---------------------------------------------------------------------------

# Only when the erased person's address is suppressed: a scan of the tenant's profiles (every
# tenant's, for an account-wide entry), rare and short.
ADDRESS_HELD = """SELECT EXISTS (SELECT 1 FROM recipients r, jsonb_each_text(r.contacts::jsonb) j
WHERE (:tenant::text = '*' OR r.tenant = :tenant) AND j.value = :address::text
    AND NOT (r.tenant = :own_tenant::text AND r.user_id = :user_id::text))"""
DELETE_RECIPIENT = """DELETE FROM recipients WHERE tenant = ? AND user_id = ?
RETURNING pref_version"""
DELETE_DEVICES = "DELETE FROM devices WHERE tenant = ? AND user_id = ?"
DELETE_INBOX = "DELETE FROM inbox_items WHERE tenant = ? AND user_id = ?"
DELETE_BADGE = "DELETE FROM inbox_badges WHERE tenant = ? AND user_id = ?"
_OF_USER = "SELECT id FROM notifications WHERE tenant = ? AND user_id = ?"
SELECT_OPEN_OF_USER = """SELECT n.id FROM notifications n
WHERE n.tenant = ? AND n.user_id = ? AND n.resolved_at IS NULL
    AND (EXISTS (SELECT 1 FROM steps s WHERE s.notification_id = n.id
                 AND s.state IN ('pending', 'sending', 'unknown'))
         OR EXISTS (SELECT 1 FROM digest_items d WHERE d.notification_id = n.id
                    AND d.digest_id IS NULL))
ORDER BY n.id"""
CANCEL_HELD = """UPDATE steps SET state = 'cancelled', reason = ?, updated_at = ?
WHERE notification_id = ? AND state = 'held' AND EXISTS (SELECT 1 FROM digest_items d
    WHERE d.notification_id = steps.notification_id AND d.step_no = steps.step_no
    AND d.digest_id IS NULL)"""
DELETE_HELD = """DELETE FROM digest_items WHERE tenant = ? AND user_id = ?
    AND digest_id IS NULL"""
SCRUB_PARAMS = """UPDATE notifications SET params = '{}'
WHERE tenant = ? AND user_id = ? AND params != '{}'"""
SCRUB_PAYLOADS = f"""UPDATE steps SET destination = NULL,
    payload = CASE WHEN state = 'sending' THEN '{{}}' END
WHERE notification_id IN ({_OF_USER})
    AND (destination IS NOT NULL OR payload IS NOT NULL OR state = 'sending')"""
SCRUB_RECEIPTS = f"""UPDATE receipts SET address = NULL, detail = NULL
WHERE notification_id IN ({_OF_USER}) AND (address IS NOT NULL OR detail IS NOT NULL)"""
RECORD_ERASURE = """INSERT INTO erasures (tenant, user_id, erased_at) VALUES (?, ?, ?)
ON CONFLICT (tenant, user_id) DO UPDATE SET erased_at = excluded.erased_at"""
SELECT_ERASED = "SELECT erased_at FROM erasures WHERE tenant = ? AND user_id = ?"

SELECT_DEDUP = """SELECT id, request_hash, kind, outcome FROM notifications
WHERE tenant = ? AND user_id = ? AND dedup_key = ?"""
# Claims the dedup key and writes the row in one statement; no row changed means a retry.
INSERT_NOTIFICATION = """INSERT INTO notifications
    (id, tenant, user_id, kind, dedup_key, request_hash, params, key_name, created_at, expires_at,
     send_at)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (tenant, user_id, dedup_key) DO NOTHING"""
INSERT_STEP = """INSERT INTO steps (notification_id, step_no, channel, lane, send_after, state,
    reason, note, updated_at, planned_at, cause, plan_note)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"""

SELECT_NOTIFICATION = "SELECT * FROM notifications WHERE id = ?"
SELECT_STEP_STATES = """SELECT channel, state, reason FROM steps WHERE notification_id = ?
ORDER BY step_no"""
SELECT_STEPS = "SELECT * FROM steps WHERE notification_id = ? ORDER BY step_no"
SELECT_ATTEMPTS = """SELECT * FROM attempts WHERE notification_id = ?
ORDER BY step_no, attempt_no"""
SELECT_EVENTS = """SELECT step_no, at, what FROM events WHERE notification_id = ?
ORDER BY at, id"""
# Every move of a step after it was planned, written when it happens: the timeline's record.
INSERT_EVENT = "INSERT INTO events (notification_id, step_no, at, what) VALUES (?, ?, ?, ?)"

RESOLVE = """UPDATE notifications SET resolved_at = ?, resolution = ?, resolved_by = ?
WHERE id = ? AND resolved_at IS NULL"""
SELECT_RESOLUTION = """SELECT resolved_at, resolution, tenant, kind FROM notifications
WHERE id = ? FOR NO KEY UPDATE"""
# The escalation depth at resolution: the last step that had gone out.
SELECT_DEPTH = """SELECT coalesce(max(step_no) + 1, 0) FROM steps
WHERE notification_id = ? AND state IN ('sent', 'delivered', 'sending', 'unknown')"""
# The sweep is an optimisation: the claim re-checks resolution whether or not this ran.
CANCEL_PENDING = """UPDATE steps SET state = 'cancelled', reason = ?, updated_at = ?
WHERE notification_id = ? AND state IN ('pending', 'unknown')"""


# --- the delivery engine's statements ---
SELECT_LAPSED = """SELECT notification_id, step_no FROM steps
WHERE state = 'sending' AND lease_until <= ? ORDER BY notification_id, step_no"""
# A step leaving 'sending' changes its notification's count (the steps_sending trigger): the
# notification is locked first, as a claim, a resolution and a receipt lock it, then the step.
MARK_UNKNOWN = """WITH n AS (SELECT id FROM notifications WHERE id = $4 FOR NO KEY UPDATE)
UPDATE steps SET state = 'unknown', reason = $1, send_after = $2, claim_token = NULL,
    lease_until = NULL, updated_at = $3
WHERE notification_id = (SELECT id FROM n) AND step_no = $5 AND state = 'sending'"""
CLOSE_OPEN_ATTEMPTS = """UPDATE attempts SET ended_at = ?, outcome = 'unknown', reason = ?
WHERE notification_id = ? AND step_no = ? AND ended_at IS NULL"""
# A due step with everything the claim policy reads about it, in one statement: the notification,
# the recipient's profile, whether the user has disabled contacts, and a sibling in flight.
# Due steps in due order, skipping those whose notification has a step in flight (promise 4):
# they keep their place, and come up again when that send completes (the scanner is woken).
SELECT_DUE = """SELECT s.notification_id, s.step_no, s.channel, s.lane, s.send_after, s.attempts,
    s.retry_base, s.destination, s.payload, s.reason, n.tenant, n.user_id, n.kind, n.params, n.created_at,
    n.expires_at, n.resolved_at, n.resolution, r.timezone, r.locale, r.quiet_start, r.quiet_end,
    r.contacts, r.preferences, r.pref_version,
    EXISTS (SELECT 1 FROM suppressions d WHERE d.tenant IN (n.tenant, '*')
            AND d.address IN (SELECT value FROM jsonb_each_text(r.contacts::jsonb))) AS has_disabled,
    EXISTS (SELECT 1 FROM devices v
            WHERE v.tenant = n.tenant AND v.user_id = n.user_id) AS has_devices
FROM steps s JOIN notifications n ON n.id = s.notification_id
LEFT JOIN recipients r ON r.tenant = n.tenant AND r.user_id = n.user_id
WHERE s.channel = ? AND s.lane = ? AND s.state IN ('pending', 'unknown') AND s.send_after <= ?
    AND n.sending = 0
ORDER BY s.send_after, s.notification_id, s.step_no LIMIT ?
FOR NO KEY UPDATE OF s, n SKIP LOCKED"""
END_STEP = """UPDATE steps SET state = ?, reason = ?, updated_at = ?, pref_version = ?
WHERE notification_id = ? AND step_no = ?"""
HOLD_ITEM = """INSERT INTO digest_items
    (notification_id, step_no, tenant, user_id, digest_kind, window_end, held_at)
VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING"""
# Sends (first attempts) to one person within a window, of the kinds and channels a limit counts.
COUNT_SENDS = """SELECT count(*) FROM notifications n
JOIN attempts a ON a.notification_id = n.id AND a.attempt_no = 1 AND a.started_at > ?
JOIN steps s ON s.notification_id = a.notification_id AND s.step_no = a.step_no
WHERE n.tenant = ? AND n.user_id = ?
    AND (? = '[]' OR n.kind IN (SELECT jsonb_array_elements_text(?::jsonb)))
    AND (? = '[]' OR s.channel IN (SELECT jsonb_array_elements_text(?::jsonb)))"""
POSTPONE_STEP = """UPDATE steps SET send_after = ?, reason = ?, updated_at = ?
WHERE notification_id = ? AND step_no = ?"""
CLAIM_STEP = """UPDATE steps SET state = 'sending', attempts = ?, claim_token = ?, lease_until = ?,
    reason = NULL, updated_at = ?, pref_version = COALESCE(pref_version, ?)
WHERE notification_id = ? AND step_no = ?"""
# Rendered after the claim, frozen before the first provider call; never changed once set.
FREEZE_STEP = """UPDATE steps SET destination = ?, payload = ?, template = ?, updated_at = ?
WHERE notification_id = ? AND step_no = ? AND claim_token = ? AND state = 'sending'
    AND payload IS NULL"""
INSERT_ATTEMPT = """INSERT INTO attempts
    (notification_id, step_no, attempt_no, claim_token, started_at) VALUES (?, ?, ?, ?, ?)"""
END_ATTEMPT = """UPDATE attempts SET ended_at = ?, outcome = ?, reason = ?, provider_ref = ?
WHERE notification_id = ? AND step_no = ? AND attempt_no = ?"""
# Completion only lands while the claim token is ours: a stale sender cannot overwrite evidence.
COMPLETE_STEP = """WITH n AS (SELECT id FROM notifications WHERE id = $6 FOR NO KEY UPDATE)
UPDATE steps SET state = $1, reason = $2, provider_ref = COALESCE($3, provider_ref),
    send_after = COALESCE($4, send_after), claim_token = NULL, lease_until = NULL, updated_at = $5
WHERE notification_id = (SELECT id FROM n) AND step_no = $7 AND claim_token = $8
    AND state = 'sending'"""
# A permanent rejection of an address puts it on the suppression list (the first reason stays).
SUPPRESS_SENT = """INSERT INTO suppressions
    (tenant, channel_type, address, reason, source, evidence, created_at)
SELECT tenant, ?, ?, ?, 'send', ?, ? FROM notifications WHERE id = ?
ON CONFLICT DO NOTHING"""
SUPPRESS = """INSERT INTO suppressions
    (tenant, channel_type, address, reason, source, evidence, created_at)
VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING"""
UNSUPPRESS = "DELETE FROM suppressions WHERE tenant = ? AND channel_type = ? AND address = ?"
# The one suppression list as people see it: addresses (tenant's own and account-wide '*'),
# and the tenant's dead push devices, whose state lives with the device.
SELECT_SUPPRESSIONS = """SELECT tenant, channel_type, address, reason, source, evidence,
    created_at FROM suppressions
WHERE tenant IN (:tenant, '*') AND (:address::text IS NULL OR address IN (:address, :hashed))
UNION ALL
SELECT tenant, 'push', device_id, coalesce(reason, 'dead'), kind, 'user ' || user_id, updated_at
FROM devices WHERE tenant = :tenant AND state = 'dead'
    AND (:address::text IS NULL OR device_id = :address)
ORDER BY created_at DESC, address LIMIT :limit"""
KILL_TENANT_DEVICE = """UPDATE devices SET state = 'dead', reason = ?, updated_at = ?
WHERE tenant = ? AND device_id = ? AND state = 'live'"""
REVIVE_DEVICE = """UPDATE devices SET state = 'live', reason = NULL, updated_at = ?
WHERE tenant = ? AND device_id = ? AND state = 'dead'"""
PULL_NEXT = """UPDATE steps SET send_after = ?, note = ?, updated_at = ?
WHERE notification_id = ? AND send_after > ? AND step_no = (
    SELECT min(step_no) FROM steps WHERE notification_id = ? AND step_no > ? AND state = 'pending')
RETURNING step_no"""
# The pending steps after a step just sent, in order, to start their windows from the send.
SELECT_LATER_PENDING = """SELECT step_no, send_after, cause FROM steps
WHERE notification_id = ? AND step_no > ? AND state = 'pending' ORDER BY step_no"""
DELAY_STEP = "UPDATE steps SET send_after = ?, updated_at = ? WHERE notification_id = ? AND step_no = ?"
SELECT_NEXT_DUE = """SELECT min(send_after) FROM steps
WHERE channel = ? AND lane = ? AND state IN ('pending', 'unknown')"""
# The earliest moment the scanner has work: a due step that may go (none of its notification's
# steps in flight) on one of the given (channel, lane) pairs, or a lease's end. One statement
# for all pairs, so a scanner about to sleep makes one read, not one per pair.
# Along steps_due in send_after order, the first whose notification has none in flight: the
# planner turns SQLite's min() over NOT EXISTS into a scan of every open step.
_NEXT_DUE_PAIR = """(SELECT s.send_after AS at FROM steps s
    JOIN notifications n ON n.id = s.notification_id
    WHERE s.channel = ? AND s.lane = ? AND s.state IN ('pending', 'unknown') AND n.sending = 0
    ORDER BY s.send_after LIMIT 1)"""
_NEXT_LAPSE = "(SELECT min(lease_until) AS at FROM steps WHERE state = 'sending')"


@functools.lru_cache(maxsize=64)
def next_due_sql(pairs: int) -> str:
    from notifyd.store.postgres.tx import number

    return number("SELECT min(at) FROM (" + " UNION ALL ".join([_NEXT_DUE_PAIR] * pairs + [
        _NEXT_LAPSE]) + ") AS due")
SELECT_LEASED = "SELECT count(*), max(lease_until) FROM steps WHERE state = 'sending'"
# The notification locked first, as retention's batch locks it: a replay never lands on a
# history being pruned.
REPLAY_STEPS = """WITH n AS (SELECT id FROM notifications WHERE id = $4 FOR NO KEY UPDATE)
UPDATE steps SET state = 'pending', send_after = $1, retry_base = attempts, reason = $2,
    updated_at = $3
WHERE notification_id = (SELECT id FROM n) AND ($5::integer IS NULL OR step_no = $6)
    AND state IN ('dead', 'unknown')
RETURNING step_no"""
SELECT_UNCONFIGURED = """SELECT s.notification_id, s.step_no, s.channel, s.lane, s.send_after,
    n.resolution, n.expires_at, n.tenant, n.user_id, n.kind
FROM steps s JOIN notifications n ON n.id = s.notification_id
WHERE s.state IN ('pending', 'unknown') AND s.channel NOT IN (SELECT jsonb_array_elements_text(?::jsonb))
ORDER BY s.notification_id, s.step_no"""
WRITE_PROBE = """INSERT INTO probe (id, at) VALUES (1, ?)
ON CONFLICT (id) DO UPDATE SET at = excluded.at"""
# --- provider evidence ---
# A redelivered event (same provider and event id) inserts nothing: harmless twice.
INSERT_RECEIPT = """INSERT INTO receipts (provider, event_id, event, occurred_at, received_at,
    provider_ref, step_key, message_id, address, channel_type, detail, notification_id, step_no,
    tenant)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING"""
# One-time tokens: those past their window go as new ones come, a few at a time; a token still
# kept is refused (no row changed), one past its window counts as new.
PRUNE_WEBHOOK_TOKENS = """DELETE FROM webhook_tokens WHERE (provider, token) IN (
    SELECT provider, token FROM webhook_tokens
    WHERE provider = ? AND until < ? ORDER BY until LIMIT ?)"""
CLAIM_WEBHOOK_TOKEN = """INSERT INTO webhook_tokens (provider, token, seen_at, until)
VALUES (?, ?, ?, ?)
ON CONFLICT (provider, token) DO UPDATE SET seen_at = excluded.seen_at, until = excluded.until
WHERE webhook_tokens.until < ?"""
STEP_BY_REF = "SELECT notification_id, step_no FROM steps WHERE provider_ref = ? LIMIT 1"
SELECT_RECEIPT_STEP = """SELECT s.state, s.evidence, s.channel, s.destination, n.kind, n.tenant,
    n.resolved_at FROM steps s JOIN notifications n ON n.id = s.notification_id
WHERE s.notification_id = ? AND s.step_no = ? FOR NO KEY UPDATE OF n"""
MATCH_RECEIPT = """UPDATE receipts SET notification_id = ?, step_no = ?
WHERE provider = ? AND event_id = ?"""
SET_EVIDENCE = "UPDATE steps SET evidence = ? WHERE notification_id = ? AND step_no = ?"
SELECT_ORPHANS = """SELECT provider, event_id, event, occurred_at, provider_ref, step_key,
    message_id, address, channel_type, detail, tenant FROM receipts
WHERE notification_id IS NULL AND provider_ref = ?
    AND (tenant IS NULL OR tenant = (SELECT tenant FROM notifications WHERE id = ?))"""
SELECT_RECEIPTS = """SELECT step_no, provider, event, occurred_at, received_at, detail
FROM receipts WHERE notification_id = ? ORDER BY received_at, provider, event_id"""
COUNT_ORPHANS = "SELECT count(*) FROM receipts WHERE notification_id IS NULL"

SELECT_DEAD_COUNT = "SELECT count(*) FROM steps WHERE state = 'dead'"
SELECT_DEAD = """SELECT notification_id, step_no, channel, attempts, reason, updated_at FROM steps
WHERE state = 'dead' ORDER BY updated_at DESC, notification_id, step_no LIMIT ?"""
# A bulk replay's selection, a page at a time along the steps_dead index (updated_at, then the
# key): the moment each step died, bounded by [since, until), on a channel and of a kind.
_DEAD_MATCHING = """FROM steps s JOIN notifications n ON n.id = s.notification_id
WHERE s.state = 'dead' AND s.updated_at >= :since AND s.updated_at < :until
    AND (:channel::text IS NULL OR s.channel = :channel)
    AND (:kind::text IS NULL OR n.kind = :kind) AND (:tenant::text IS NULL OR n.tenant = :tenant)"""
SELECT_DEAD_MATCHING = f"""SELECT s.notification_id, s.step_no, s.updated_at, n.expires_at
{_DEAD_MATCHING}
    AND (s.updated_at, s.notification_id, s.step_no) > (:at, :nid, :step)
ORDER BY s.updated_at, s.notification_id, s.step_no LIMIT :limit"""
COUNT_DEAD_MATCHING = f"SELECT count(*) {_DEAD_MATCHING}"
# The console's lists: a tenant's dead steps, newest first along steps_dead; its unknown steps
# (few: sends whose outcome a crash or a timeout left open) among the open ones of steps_due.
_STUCK = """SELECT s.notification_id, s.step_no, s.channel, n.kind, n.user_id, s.state,
    s.attempts, s.reason, s.updated_at
FROM steps s JOIN notifications n ON n.id = s.notification_id
WHERE {state} AND n.tenant = :tenant
ORDER BY s.updated_at DESC, s.notification_id, s.step_no LIMIT :limit"""
SELECT_DEAD_OF = _STUCK.format(state="s.state = 'dead'")
SELECT_UNKNOWN_OF = _STUCK.format(state="s.state = 'unknown'")
# A person's notifications, newest first (ids grow with time), along notifications_dedup.
SELECT_NOTIFICATIONS_OF = """SELECT id, kind, dedup_key, created_at, resolution, resolved_at,
    pruned_at FROM notifications WHERE tenant = :tenant AND user_id = :user_id
ORDER BY id DESC LIMIT :limit"""

# --- the inbox --------------------------------------------------------------------------------

INSERT_INBOX = """INSERT INTO inbox_items
    (tenant, user_id, notification_id, kind, title, body, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)
ON CONFLICT DO NOTHING RETURNING seq"""
BUMP_BADGE = """INSERT INTO inbox_badges (tenant, user_id, unread) VALUES (?, ?, greatest(0, ?))
ON CONFLICT (tenant, user_id) DO UPDATE SET unread = greatest(0, inbox_badges.unread + ?)
RETURNING unread"""
SELECT_BADGE = "SELECT unread FROM inbox_badges WHERE tenant = ? AND user_id = ?"
COUNT_UNREAD = """SELECT count(*) FROM inbox_items
WHERE tenant = ? AND user_id = ? AND read_at IS NULL AND archived_at IS NULL"""
SET_BADGE = """INSERT INTO inbox_badges (tenant, user_id, unread) VALUES (?, ?, ?)
ON CONFLICT (tenant, user_id) DO UPDATE SET unread = excluded.unread"""
# Every badge recomputed from the rows (notifyd inbox rebuild-badges): how many were wrong.
DRIFTED_BADGES = """SELECT b.tenant, b.user_id, b.unread, (SELECT count(*) FROM inbox_items i
    WHERE i.tenant = b.tenant AND i.user_id = b.user_id AND i.read_at IS NULL
    AND i.archived_at IS NULL) AS actual FROM inbox_badges b
UNION ALL
SELECT DISTINCT i.tenant, i.user_id, NULL::bigint, (SELECT count(*) FROM inbox_items j
    WHERE j.tenant = i.tenant AND j.user_id = i.user_id AND j.read_at IS NULL
    AND j.archived_at IS NULL) FROM inbox_items i
WHERE NOT EXISTS (SELECT 1 FROM inbox_badges b WHERE b.tenant = i.tenant AND b.user_id = i.user_id)"""
INBOX_COLUMNS = "seq, notification_id, kind, title, body, created_at, read_at, archived_at"
# A key limited to some kinds sees only those: ? is 1 for every kind, else a JSON array of them.
OF_KINDS = "(?::boolean OR kind IN (SELECT jsonb_array_elements_text(?::jsonb)))"
COUNT_UNREAD_OF_KINDS = f"{COUNT_UNREAD} AND {OF_KINDS}"
SELECT_INBOX_PAGE = f"""SELECT {INBOX_COLUMNS} FROM inbox_items
WHERE tenant = ? AND user_id = ? AND (created_at, notification_id) < (?, ?)
    AND (?::boolean OR archived_at IS NULL) AND {OF_KINDS}
ORDER BY created_at DESC, notification_id DESC LIMIT ?"""
SELECT_INBOX_SINCE = f"""SELECT {INBOX_COLUMNS} FROM inbox_items
WHERE tenant = ? AND user_id = ? AND seq > ? ORDER BY seq LIMIT ?"""
SELECT_INBOX_ITEM = f"""SELECT {INBOX_COLUMNS} FROM inbox_items
WHERE tenant = ? AND user_id = ? AND notification_id = ?"""
READ_ITEM = """UPDATE inbox_items SET read_at = ?
WHERE tenant = ? AND user_id = ? AND notification_id = ? AND read_at IS NULL
RETURNING archived_at IS NULL"""
ARCHIVE_ITEM = """UPDATE inbox_items SET archived_at = ?
WHERE tenant = ? AND user_id = ? AND notification_id = ? AND archived_at IS NULL
RETURNING read_at IS NULL"""
# A resolution marks its notification's item read (a kind with read_on_resolve).
READ_ITEM_OF = """UPDATE inbox_items SET read_at = ? WHERE notification_id = ? AND read_at IS NULL
RETURNING tenant, user_id, archived_at IS NULL AS counted"""
READ_ALL = f"""UPDATE inbox_items SET read_at = ?
WHERE tenant = ? AND user_id = ? AND read_at IS NULL AND {OF_KINDS}
RETURNING notification_id, kind, archived_at IS NULL AS counted"""

# --- keys that sign links and user tokens, made on first use ---------------------------------

INSERT_SIGNING_KEY = """INSERT INTO signing_keys (name, secret, created_at)
VALUES (?, ?, ?) ON CONFLICT DO NOTHING"""
SELECT_SIGNING_KEY = "SELECT secret, previous, previous_until FROM signing_keys WHERE name = ?"
# The key it had stays as the previous one for the overlap; one before it is gone at once.
ROTATE_SIGNING_KEY = """UPDATE signing_keys SET previous = secret, secret = ?, previous_until = ?,
    created_at = ? WHERE name = ?"""

# --- digests ----------------------------------------------------------------------------------

# Recipients with held items whose window has closed, oldest window first.
SELECT_DUE_DIGESTS = """SELECT tenant, user_id, digest_kind, window_end, count(*) AS n
FROM digest_items WHERE digest_id IS NULL AND window_end <= ?
GROUP BY tenant, user_id, digest_kind, window_end
ORDER BY window_end, tenant, user_id, digest_kind LIMIT ?"""
SELECT_DIGEST_MEMBERS = """SELECT d.notification_id, d.step_no, n.kind, n.params, n.created_at
FROM digest_items d JOIN notifications n ON n.id = d.notification_id
WHERE d.tenant = ? AND d.user_id = ? AND d.digest_kind = ? AND d.window_end = ?
    AND d.digest_id IS NULL ORDER BY n.created_at, d.notification_id"""
MARK_DIGESTED_ITEM = """UPDATE digest_items SET digest_id = ?
WHERE notification_id = ? AND step_no = ? AND digest_id IS NULL"""
# Items held for a window after its digest was read move to the next window: never dropped.
ROLL_DIGEST = """UPDATE digest_items SET window_end = ?
WHERE tenant = ? AND user_id = ? AND digest_kind = ? AND window_end = ? AND digest_id IS NULL"""
NEXT_DIGEST = "SELECT min(window_end) FROM digest_items WHERE digest_id IS NULL"

# --- retention ----------------------------------------------------------------------------------

OPEN_STATES = "('pending', 'sending', 'unknown')"
SELECT_AGED_LIVE = f"""SELECT n.id, n.resolved_at, n.resolution, n.expires_at,
    EXISTS (SELECT 1 FROM steps s WHERE s.notification_id = n.id
            AND s.state IN {OPEN_STATES}) AS open,
    EXISTS (SELECT 1 FROM digest_items d WHERE d.notification_id = n.id
            AND d.digest_id IS NULL) AS held
FROM notifications n
WHERE n.pruned_at IS NULL AND n.id > ? AND n.id < ? ORDER BY n.id LIMIT ?
FOR NO KEY UPDATE OF n SKIP LOCKED"""
# Read after SELECT_AGED_LIVE locked the rows: what a claim or a replay committed meanwhile.
SELECT_OPEN_OF = f"""SELECT n.id FROM notifications n
WHERE n.id IN (SELECT jsonb_array_elements_text(?::jsonb))
    AND (EXISTS (SELECT 1 FROM steps s WHERE s.notification_id = n.id
                 AND s.state IN {OPEN_STATES})
         OR EXISTS (SELECT 1 FROM digest_items d WHERE d.notification_id = n.id
                    AND d.digest_id IS NULL))"""
SELECT_STEPS_OF = """SELECT notification_id, channel, state, evidence, reason FROM steps
WHERE notification_id IN (SELECT jsonb_array_elements_text(?::jsonb)) ORDER BY notification_id, step_no"""
DELETE_ATTEMPTS = "DELETE FROM attempts WHERE notification_id = ?"
DELETE_EVENTS = "DELETE FROM events WHERE notification_id = ?"
DELETE_DIGEST_ITEMS = "DELETE FROM digest_items WHERE notification_id = ?"
DELETE_STEPS = "DELETE FROM steps WHERE notification_id = ?"
BLANK_RECEIPTS = """UPDATE receipts SET address = NULL, detail = NULL
WHERE notification_id = ? AND (address IS NOT NULL OR detail IS NOT NULL)"""
KEEP_IDENTITY = "UPDATE notifications SET params = '{}', pruned_at = ?, outcome = ? WHERE id = ?"
SELECT_AGED_IDS = """SELECT id, pruned_at FROM notifications WHERE id > ? AND id < ?
ORDER BY id LIMIT ?"""
DELETE_IDENTITY = "DELETE FROM notifications WHERE id = ? AND pruned_at IS NOT NULL"
DELETE_AGED_RECEIPTS = """DELETE FROM receipts WHERE (provider, event_id) IN (
    SELECT provider, event_id FROM receipts
    WHERE received_at < ? ORDER BY received_at LIMIT ?)"""
DONE_AT = "coalesce(read_at, archived_at)"
IS_DONE = "(read_at IS NOT NULL OR archived_at IS NOT NULL)"
SELECT_AGED_DONE_INBOX = f"""SELECT seq FROM inbox_items
WHERE {IS_DONE} AND {DONE_AT} < ? ORDER BY {DONE_AT} LIMIT ?"""
SELECT_OLDEST_INBOX = """SELECT seq, tenant, user_id, created_at,
    read_at IS NULL AND archived_at IS NULL AS unread
FROM inbox_items ORDER BY seq LIMIT ?"""
DELETE_INBOX_ITEM = "DELETE FROM inbox_items WHERE seq = ?"
COUNT_AGED_LIVE = f"""SELECT count(*) FROM notifications n
WHERE n.pruned_at IS NULL AND n.id < ?
    AND NOT EXISTS (SELECT 1 FROM steps s WHERE s.notification_id = n.id
                    AND s.state IN {OPEN_STATES})
    AND NOT EXISTS (SELECT 1 FROM digest_items d WHERE d.notification_id = n.id
                    AND d.digest_id IS NULL)"""
COUNT_AGED_IDS = "SELECT count(*) FROM notifications WHERE id < ? AND pruned_at IS NOT NULL"
COUNT_AGED_RECEIPTS = "SELECT count(*) FROM receipts WHERE received_at < ?"
COUNT_AGED_DONE_INBOX = f"SELECT count(*) FROM inbox_items WHERE {IS_DONE} AND {DONE_AT} < ?"
COUNT_OLD_INBOX = "SELECT count(*) FROM inbox_items WHERE created_at < ?"
# Rows per class, and the oldest of each: a notification's time is read from its id.
# Times as text, in one column with the notifications' ids (the core reads either).
COUNT_ROWS = """SELECT 'notifications' AS class,
    (SELECT count(*) FROM notifications WHERE pruned_at IS NULL) AS n,
    (SELECT min(id) FROM notifications
        WHERE pruned_at IS NULL) AS oldest
UNION ALL SELECT 'identities', (SELECT count(*) FROM notifications WHERE pruned_at IS NOT NULL),
    (SELECT min(id) FROM notifications WHERE pruned_at IS NOT NULL)
UNION ALL SELECT 'steps', (SELECT count(*) FROM steps), NULL::text
UNION ALL SELECT 'attempts', (SELECT count(*) FROM attempts), NULL::text
UNION ALL SELECT 'receipts', (SELECT count(*) FROM receipts),
    (SELECT min(received_at)::text FROM receipts)
UNION ALL SELECT 'inbox_items', (SELECT count(*) FROM inbox_items),
    (SELECT created_at::text FROM inbox_items ORDER BY seq LIMIT 1)
UNION ALL SELECT 'digest_items', (SELECT count(*) FROM digest_items),
    (SELECT min(held_at)::text FROM digest_items)
UNION ALL SELECT 'suppressions', (SELECT count(*) FROM suppressions),
    (SELECT min(created_at)::text FROM suppressions)
UNION ALL SELECT 'events', (SELECT count(*) FROM fanout_events),
    (SELECT min(accepted_at)::text FROM fanout_events)
UNION ALL SELECT 'topic_members', (SELECT count(*) FROM topic_members),
    (SELECT min(added_at)::text FROM topic_members)"""

# --- events and their fan-out ---------------------------------------------------------------

INSERT_FANOUT_EVENT = """INSERT INTO fanout_events (tenant, event_id, type, subject, params, kinds,
    request_hash, key_name, audience, topic, version, cutoff, users, size, accepted_at, send_at,
    cursor, routed)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, '', 0)
ON CONFLICT (tenant, event_id) DO NOTHING"""
# Locked: one process routes an event's next chunk at a time; another waits, then reads the
# cursor it moved.
# In a script: the event row locked, so a concurrent accept or chunk waits for this one.
SELECT_FANOUT_EVENT = "SELECT * FROM fanout_events WHERE tenant = ? AND event_id = ? FOR UPDATE"
# A status read: no lock (on the reader's REPEATABLE READ connection a locking read that
# meets a chunk's update fails to serialize).
GET_FANOUT_EVENT = "SELECT * FROM fanout_events WHERE tenant = ? AND event_id = ?"
# Not `users`: an inline list is read by its chunks alone, not with every event still routing.
SELECT_ROUTING = """SELECT tenant, event_id, type, subject, params, kinds, request_hash, key_name,
    audience, topic, version, cutoff, size, cursor, routed, accepted_at, routed_at, send_at
FROM fanout_events
WHERE routed_at IS NULL ORDER BY seq LIMIT ?"""
SELECT_BACKLOG = """SELECT count(*), min(accepted_at) FROM fanout_events WHERE routed_at IS NULL"""
ADVANCE_EVENT = """UPDATE fanout_events SET cursor = ?, routed = routed + ?, routed_at = ?
WHERE tenant = ? AND event_id = ? AND routed_at IS NULL"""
# The whole user base at an event's acceptance: the rows made before its time, and those made
# in the same millisecond by a transaction that committed before it (listed on the event).
COUNT_EVERYONE = "SELECT count(*) FROM recipients WHERE tenant = ? AND created_at < ?"
SELECT_MADE_AT = "SELECT user_id FROM recipients WHERE tenant = ? AND created_at = ?"
SELECT_EVERYONE = """SELECT user_id FROM recipients
WHERE tenant = ? AND user_id > ? AND (created_at < ? OR (created_at = ?
    AND user_id IN (SELECT jsonb_array_elements_text(?::jsonb))))
ORDER BY user_id LIMIT ?"""
# A topic's members at a version: rows open at it (added at or before, not yet removed by it).
SELECT_TOPIC_AUDIENCE = """SELECT user_id FROM topic_members
WHERE tenant = ? AND topic = ? AND user_id > ? AND added_version <= ?
    AND (removed_version IS NULL OR removed_version > ?)
ORDER BY user_id LIMIT ?"""
MARK_EVENT = """UPDATE notifications SET event_id = ?
WHERE id IN (SELECT jsonb_array_elements_text(?::jsonb))"""
# How each of an event's notifications stands (as views.current_state would say, with an
# undeliverable one whose every step was suppressed told apart), counted by state and reason.
COUNT_EVENT_STATES = """SELECT state, CASE WHEN state = 'suppressed' THEN reason END AS reason,
    count(*) AS n FROM (
    SELECT CASE
        WHEN n.outcome IS NOT NULL THEN n.outcome
        WHEN n.resolved_at IS NOT NULL THEN
            CASE WHEN n.resolution = 'delivered' THEN 'delivered' ELSE 'resolved' END
        WHEN bool_or(s.state IN ('pending', 'sending', 'unknown')) THEN 'pending'
        WHEN bool_or(s.state = 'delivered' OR s.evidence IN ('delivered', 'shown', 'opened'))
            THEN 'delivered'
        WHEN bool_or(s.state = 'sent') THEN 'sent'
        WHEN bool_or(s.state = 'held') THEN 'held'
        WHEN bool_or(s.state = 'expired') THEN 'expired'
        WHEN bool_and(s.state = 'suppressed') THEN 'suppressed'
        ELSE 'undeliverable' END AS state,
        min(CASE WHEN s.state = 'suppressed'
            THEN split_part(s.reason, ':', 1) END) AS reason
    FROM notifications n
    LEFT JOIN steps s ON s.notification_id = n.id
    WHERE n.tenant = ? AND n.event_id = ? GROUP BY n.id) AS per_notification
GROUP BY 1, 2 ORDER BY 1, 2"""
SELECT_EVENT_PAGE = """SELECT * FROM notifications
WHERE tenant = ? AND event_id = ? AND (user_id, id) > (?, ?) ORDER BY user_id, id LIMIT ?"""
SELECT_STEPS_OF_MANY = """SELECT * FROM steps
WHERE notification_id IN (SELECT jsonb_array_elements_text(?::jsonb)) ORDER BY notification_id, step_no"""

# --- topics ---------------------------------------------------------------------------------

SELECT_TOPIC = "SELECT * FROM topics WHERE tenant = ? AND name = ?"
INSERT_TOPIC = """INSERT INTO topics (tenant, name, version, members, self_service, created_at,
    updated_at) VALUES (?, ?, 0, 0, ?, ?, ?)"""
# A deleted topic made again starts anew, but its versions go on (closed rows may remain).
UPDATE_TOPIC = """UPDATE topics SET self_service = ?, updated_at = ?,
    created_at = CASE WHEN deleted_at IS NULL THEN created_at ELSE ? END, deleted_at = NULL
WHERE tenant = ? AND name = ?"""
SET_TOPIC_VERSION = """UPDATE topics SET version = ?, members = members + ?, updated_at = ?
WHERE tenant = ? AND name = ?"""
DELETE_TOPIC = """UPDATE topics SET deleted_at = ?, updated_at = ?
WHERE tenant = ? AND name = ? AND members = 0 AND deleted_at IS NULL"""
ADD_MEMBER = """INSERT INTO topic_members (tenant, topic, user_id, added_version, added_at)
VALUES (?, ?, ?, ?, ?)
ON CONFLICT (tenant, topic, user_id) WHERE removed_version IS NULL DO NOTHING"""
REMOVE_MEMBER = """UPDATE topic_members SET removed_version = ?, removed_at = ?
WHERE tenant = ? AND topic = ? AND user_id = ? AND removed_version IS NULL"""
SELECT_MEMBERS = """SELECT user_id, added_at FROM topic_members
WHERE tenant = ? AND topic = ? AND user_id > ? AND removed_version IS NULL
ORDER BY user_id LIMIT ?"""
SELECT_FOLLOWING = """SELECT m.topic, t.self_service, m.added_at
FROM topic_members m
JOIN topics t ON t.tenant = m.tenant AND t.name = m.topic
WHERE m.tenant = ? AND m.user_id = ? AND m.removed_version IS NULL ORDER BY m.topic"""

# --- events and memberships that age out ----------------------------------------------------

SELECT_AGED_EVENTS = """SELECT seq FROM fanout_events
WHERE routed_at IS NOT NULL AND accepted_at < ? ORDER BY seq LIMIT ?"""
DELETE_FANOUT_EVENT = "DELETE FROM fanout_events WHERE seq = ?"
COUNT_AGED_EVENTS = """SELECT count(*) FROM fanout_events
WHERE routed_at IS NOT NULL AND accepted_at < ?"""
# A membership open from version a until r is needed only by an event still routing that
# pinned a version in [a, r); any event accepted from now on pins r or a later one.
_CLOSED_UNPINNED = """FROM topic_members m
WHERE m.removed_version IS NOT NULL AND m.removed_at < ?
    AND NOT EXISTS (SELECT 1 FROM fanout_events e
                    WHERE e.tenant = m.tenant AND e.topic = m.topic AND e.routed_at IS NULL
                    AND e.version >= m.added_version AND e.version < m.removed_version)"""
SELECT_AGED_MEMBERS = f"""SELECT m.tenant, m.topic, m.user_id, m.added_version {_CLOSED_UNPINNED}
ORDER BY m.removed_at LIMIT ?"""
DELETE_MEMBER_ROW = """DELETE FROM topic_members
WHERE tenant = ? AND topic = ? AND user_id = ? AND added_version = ?"""
COUNT_AGED_MEMBERS = f"SELECT count(*) {_CLOSED_UNPINNED}"

# --- locks: what a script reads before it decides, held until its commit ----------------------

# A send limit's count: one claim at a time per person; a person another claim holds is skipped
# now and comes up at the next scan (false), as SKIP LOCKED skips a step.
LOCK_PERSON = "SELECT pg_try_advisory_xact_lock(1, hashtext(? || '/' || ?))"
# A change of a person's profile or preferences decided on the row it reads: one at a time.
LOCK_PROFILE = "SELECT pg_advisory_xact_lock(3, hashtext(? || '/' || ?))"
# An inbox item's seq is taken under its person's lock, so a person's seqs grow in commit order.
LOCK_INBOX = "SELECT pg_advisory_xact_lock(2, hashtext(? || '/' || ?))"

# --- a channel's bucket for the whole deployment ------------------------------------------

# Refilled to now at the rate and capped at the burst given (the config's: a reload changes
# them for what comes next), and locked until the claim commits; a bucket another process's
# claim holds is skipped (tokens NULL, kept true: nothing to take now), so a claim never waits
# on another's, nor do the accepts committed with it. No bucket yet (kept false): MAKE_BUCKET.
TAKE_TOKENS = """WITH free AS (
    SELECT channel FROM rate_budgets WHERE channel = ? FOR UPDATE SKIP LOCKED),
refilled AS (UPDATE rate_budgets b SET tokens = least(?3::float8, b.tokens
        + greatest(0, ?4 - b.at) / 1000.0 * ?2::float8), at = greatest(b.at, ?4)
    FROM free WHERE b.channel = free.channel RETURNING b.tokens)
SELECT (SELECT tokens FROM refilled) AS tokens,
    EXISTS (SELECT 1 FROM rate_budgets WHERE channel = ?1) AS kept"""
# A channel's first claim makes its bucket, full; NULL if another made it meanwhile.
MAKE_BUCKET = """INSERT INTO rate_budgets (channel, tokens, at) VALUES (?, ?, ?)
ON CONFLICT (channel) DO NOTHING RETURNING tokens"""
SPEND_TOKENS = """UPDATE rate_budgets SET tokens = tokens - ? WHERE channel = ?
RETURNING tokens"""

# --- signals, delivered to every listening process when the transaction commits -------------

NOTIFY_DUE = "SELECT pg_notify('notifyd_due', (?::bigint)::text)"
NOTIFY_INBOX = "SELECT pg_notify('notifyd_inbox', json_build_array(?::text, ?::text, ?::bigint)::text)"


def _number_all() -> None:
    from notifyd.store.postgres.tx import number

    for name, value in list(globals().items()):
        if name.isupper() and not name.startswith("_") and isinstance(value, str):
            globals()[name] = number(value)


_number_all()
