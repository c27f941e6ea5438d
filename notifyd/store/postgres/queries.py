"""PostgreSQL's statements for the store core (store/core/sql.py says what each must do): the
shared ones (store/core/sql.py), and below what PostgreSQL says its own way: the locks a script
takes on what it reads before it decides, its JSON functions and casts, its upserts, and the
statements of the features (FEATURES, store/postgres/backend.py) SQLite has not got. Where
SQLite's order follows its index and then the key, these name the key: rows that tie come back
in the same order on both.

Written with SQLite's `?` placeholders and numbered into `$n` once, at import (tx.number); the
named ones (`:name`) are numbered too, and the Tx passes a dict in their order. SQLite's index
hints in the shared statements are dropped then: PostgreSQL's planner picks the index."""

import re

from notifyd.store.core.sql import *  # noqa: F403 - the shared statements; below, PostgreSQL's own
from notifyd.store.core.sql import INBOX_COLUMNS, OPEN_STATES, fill
from notifyd.store.postgres.tx import number

# --- the fragments store/core/sql.py leaves to the dialect ------------------------------------

JSON_VALUES = "SELECT jsonb_array_elements_text(?::jsonb)"
OF_KINDS = f"(?::boolean OR kind IN ({JSON_VALUES}))"
DEAD_MATCHING = """FROM steps s JOIN notifications n ON n.id = s.notification_id
WHERE s.state = 'dead' AND s.updated_at >= :since AND s.updated_at < :until
    AND (:channel::text IS NULL OR s.channel = :channel)
    AND (:kind::text IS NULL OR n.kind = :kind) AND (:tenant::text IS NULL OR n.tenant = :tenant)"""

# --- recipients, a person erased, accept and resolution ---------------------------------------

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
# Only when the erased person's address is suppressed: a scan of the tenant's profiles (every
# tenant's, for an account-wide entry), rare and short.
ADDRESS_HELD = """SELECT EXISTS (SELECT 1 FROM recipients r, jsonb_each_text(r.contacts::jsonb) j
WHERE (:tenant::text = '*' OR r.tenant = :tenant) AND j.value = :address::text
    AND NOT (r.tenant = :own_tenant::text AND r.user_id = :user_id::text))"""
SELECT_OPEN_OF_USER = """SELECT n.id FROM notifications n
WHERE n.tenant = ? AND n.user_id = ? AND n.resolved_at IS NULL
    AND (EXISTS (SELECT 1 FROM steps s WHERE s.notification_id = n.id
                 AND s.state IN ('pending', 'sending', 'unknown'))
         OR EXISTS (SELECT 1 FROM digest_items d WHERE d.notification_id = n.id
                    AND d.digest_id IS NULL))
ORDER BY n.id FOR NO KEY UPDATE OF n"""
SELECT_EVENTS = """SELECT step_no, at, what FROM events WHERE notification_id = ?
ORDER BY at, id"""
SELECT_RESOLUTION = """SELECT resolved_at, resolution, tenant, kind FROM notifications
WHERE id = ? FOR NO KEY UPDATE"""

# --- the delivery engine ----------------------------------------------------------------------

SELECT_LAPSED = """SELECT notification_id, step_no FROM steps
WHERE state = 'sending' AND lease_until <= ? ORDER BY notification_id, step_no"""
# A step leaving 'sending' changes its notification's count (the steps_sending trigger): the
# notification is locked first, as a claim, a resolution and a receipt lock it, then the step.
MARK_UNKNOWN = """WITH n AS (SELECT id FROM notifications WHERE id = $4 FOR NO KEY UPDATE)
UPDATE steps SET state = 'unknown', reason = $1, send_after = $2, claim_token = NULL,
    lease_until = NULL, updated_at = $3
WHERE notification_id = (SELECT id FROM n) AND step_no = $5 AND state = 'sending'"""
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
HOLD_ITEM = """INSERT INTO digest_items
    (notification_id, step_no, tenant, user_id, digest_kind, window_end, held_at)
VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING"""
# Completion only lands while the claim token is ours: a stale sender cannot overwrite evidence.
COMPLETE_STEP = """WITH n AS (SELECT id FROM notifications WHERE id = $6 FOR NO KEY UPDATE)
UPDATE steps SET state = $1, reason = $2, provider_ref = COALESCE($3, provider_ref),
    send_after = COALESCE($4, send_after), claim_token = NULL, lease_until = NULL, updated_at = $5
WHERE notification_id = (SELECT id FROM n) AND step_no = $7 AND claim_token = $8
    AND state = 'sending'"""
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

# --- provider evidence, dead and stuck steps --------------------------------------------------

SELECT_RECEIPT_STEP = """SELECT s.state, s.evidence, s.channel, s.destination, n.kind, n.tenant,
    n.resolved_at FROM steps s JOIN notifications n ON n.id = s.notification_id
WHERE s.notification_id = ? AND s.step_no = ? FOR NO KEY UPDATE OF n"""
SELECT_DEAD = """SELECT notification_id, step_no, channel, attempts, reason, updated_at FROM steps
WHERE state = 'dead' ORDER BY updated_at DESC, notification_id, step_no LIMIT ?"""
# The console's lists: a tenant's dead steps, newest first along steps_dead; its unknown steps
# (few: sends whose outcome a crash or a timeout left open) among the open ones of steps_due.
_STUCK = """SELECT s.notification_id, s.step_no, s.channel, n.kind, n.user_id, s.state,
    s.attempts, s.reason, s.updated_at
FROM steps s JOIN notifications n ON n.id = s.notification_id
WHERE {state} AND n.tenant = :tenant
ORDER BY s.updated_at DESC, s.notification_id, s.step_no LIMIT :limit"""
SELECT_DEAD_OF = _STUCK.format(state="s.state = 'dead'")
SELECT_UNKNOWN_OF = _STUCK.format(state="s.state = 'unknown'")

# --- the inbox, signing keys, digests ---------------------------------------------------------

INSERT_INBOX = """INSERT INTO inbox_items
    (tenant, user_id, notification_id, kind, title, body, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)
ON CONFLICT DO NOTHING RETURNING seq"""
BUMP_BADGE = """INSERT INTO inbox_badges (tenant, user_id, unread) VALUES (?, ?, greatest(0, ?))
ON CONFLICT (tenant, user_id) DO UPDATE SET unread = greatest(0, inbox_badges.unread + ?)
RETURNING unread"""
# Every badge recomputed from the rows (notifyd inbox rebuild-badges): how many were wrong.
DRIFTED_BADGES = """SELECT b.tenant, b.user_id, b.unread, (SELECT count(*) FROM inbox_items i
    WHERE i.tenant = b.tenant AND i.user_id = b.user_id AND i.read_at IS NULL
    AND i.archived_at IS NULL) AS actual FROM inbox_badges b
UNION ALL
SELECT DISTINCT i.tenant, i.user_id, NULL::bigint, (SELECT count(*) FROM inbox_items j
    WHERE j.tenant = i.tenant AND j.user_id = i.user_id AND j.read_at IS NULL
    AND j.archived_at IS NULL) FROM inbox_items i
WHERE NOT EXISTS (SELECT 1 FROM inbox_badges b WHERE b.tenant = i.tenant AND b.user_id = i.user_id)"""
SELECT_INBOX_PAGE = f"""SELECT {INBOX_COLUMNS} FROM inbox_items
WHERE tenant = ? AND user_id = ? AND (created_at, notification_id) < (?, ?)
    AND (?::boolean OR archived_at IS NULL) AND {OF_KINDS}
ORDER BY created_at DESC, notification_id DESC LIMIT ?"""
INSERT_SIGNING_KEY = """INSERT INTO signing_keys (name, secret, created_at)
VALUES (?, ?, ?) ON CONFLICT DO NOTHING"""
# Recipients with held items whose window has closed, oldest window first.
SELECT_DUE_DIGESTS = """SELECT tenant, user_id, digest_kind, window_end, count(*) AS n
FROM digest_items WHERE digest_id IS NULL AND window_end <= ?
GROUP BY tenant, user_id, digest_kind, window_end
ORDER BY window_end, tenant, user_id, digest_kind LIMIT ?"""

# --- retention, events ------------------------------------------------------------------------

SELECT_AGED_LIVE = f"""SELECT n.id, n.resolved_at, n.resolution, n.expires_at,
    EXISTS (SELECT 1 FROM steps s WHERE s.notification_id = n.id
            AND s.state IN {OPEN_STATES}) AS open,
    EXISTS (SELECT 1 FROM digest_items d WHERE d.notification_id = n.id
            AND d.digest_id IS NULL) AS held
FROM notifications n
WHERE n.pruned_at IS NULL AND n.id > ? AND n.id < ? ORDER BY n.id LIMIT ?
FOR NO KEY UPDATE OF n SKIP LOCKED"""
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
# Locked: one process routes an event's next chunk at a time; another waits, then reads the
# cursor it moved.
# In a script: the event row locked, so a concurrent accept or chunk waits for this one.
SELECT_FANOUT_EVENT = "SELECT * FROM fanout_events WHERE tenant = ? AND event_id = ? FOR UPDATE"
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
        WHEN bool_or(s.state = 'digested') THEN 'digested'
        WHEN bool_or(s.state = 'expired') THEN 'expired'
        WHEN bool_and(s.state = 'suppressed') THEN 'suppressed'
        ELSE 'undeliverable' END AS state,
        min(CASE WHEN s.state = 'suppressed'
            THEN split_part(s.reason, ':', 1) END) AS reason
    FROM notifications n
    LEFT JOIN steps s ON s.notification_id = n.id
    WHERE n.tenant = ? AND n.event_id = ? GROUP BY n.id) AS per_notification
GROUP BY 1, 2 ORDER BY 1, 2"""

# --- locks: what a script reads before it decides, held until its commit ----------------------

# A notification's row, taken first by a script that may wait for it (completion), so the
# time it records is read after the transaction that held it committed.
LOCK_NOTIFICATION = "SELECT 1 FROM notifications WHERE id = ? FOR NO KEY UPDATE"
# Reading all of a person's items may resolve several: each locked as above, in id order as
# every script that locks several notifications takes them.
LOCK_UNREAD = f"""SELECT 1 FROM notifications n JOIN inbox_items i ON i.notification_id = n.id
WHERE i.tenant = ? AND i.user_id = ? AND i.read_at IS NULL
    AND (?::boolean OR i.kind IN ({JSON_VALUES})) AND i.kind IN ({JSON_VALUES})
    AND n.resolved_at IS NULL
ORDER BY n.id FOR NO KEY UPDATE OF n"""
# A provider's message id: the send's answer naming it and a receipt about it, one at a time.
LOCK_REF = "SELECT pg_advisory_xact_lock(4, hashtext(?))"
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

# --- two tables in one statement (joined_writes) ----------------------------------------------

# The step leased and its attempt started. A data-modifying WITH runs whether or not the
# statement reads it: the attempt's row is written as INSERT_ATTEMPT alone would write it.
CLAIM_ATTEMPT = """WITH claimed AS (UPDATE steps SET state = 'sending', attempts = ?1,
    claim_token = ?2, lease_until = ?3, reason = NULL, updated_at = ?4,
    pref_version = COALESCE(pref_version, ?5)
    WHERE notification_id = ?6 AND step_no = ?7)
INSERT INTO attempts (notification_id, step_no, attempt_no, claim_token, started_at)
VALUES (?6, ?7, ?1, ?2, ?4)"""
# The attempt ended whatever the token, and the step completed only while the token is ours,
# its notification locked first (as COMPLETE_STEP); the count is the step's.
COMPLETE_ATTEMPT = """WITH n AS (SELECT id FROM notifications WHERE id = :nid FOR NO KEY UPDATE),
ended AS (UPDATE attempts SET ended_at = :at, outcome = :outcome, reason = :reason,
    provider_ref = :ref
    WHERE notification_id = :nid AND step_no = :no AND attempt_no = :attempt)
UPDATE steps SET state = :state, reason = :reason, provider_ref = COALESCE(:ref, provider_ref),
    send_after = COALESCE(:retry_at, send_after), claim_token = NULL, lease_until = NULL,
    updated_at = :at
WHERE notification_id = (SELECT id FROM n) AND step_no = :no AND claim_token = :token
    AND state = 'sending'"""

# --- signals, delivered to every listening process when the transaction commits -------------

NOTIFY_DUE = "SELECT pg_notify('notifyd_due', (?::bigint)::text)"
NOTIFY_INBOX = "SELECT pg_notify('notifyd_inbox', json_build_array(?::text, ?::text, ?::bigint)::text)"

_HINT = re.compile(r"\s+INDEXED BY\s+\w+")  # SQLite's: PostgreSQL has no index hints


def _adapt_all() -> None:
    """Every statement in PostgreSQL's words: the fragments filled in, the hints dropped, the
    placeholders numbered."""
    fill(globals())
    for name, value in list(globals().items()):
        if name.isupper() and not name.startswith("_") and isinstance(value, str):
            globals()[name] = number(_HINT.sub("", value))


_adapt_all()
