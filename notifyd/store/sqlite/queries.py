"""SQLite's statements for the store core (store/core/sql.py says what each must do): the
shared ones (store/core/sql.py), and below what SQLite says its own way. One writer is alone, so
nothing here locks, and SQLite has none of the features (FEATURES, store/sqlite/tx.py) that need
statements of their own."""

from notifyd.store.core.sql import *  # noqa: F403 - the shared statements; below, SQLite's own
from notifyd.store.core.sql import GET_FANOUT_EVENT, INBOX_COLUMNS, OPEN_STATES, fill

# --- the fragments store/core/sql.py leaves to the dialect ------------------------------------

JSON_VALUES = "SELECT value FROM json_each(?)"
OF_KINDS = f"(? OR kind IN ({JSON_VALUES}))"
DEAD_MATCHING = """FROM steps s JOIN notifications n ON n.id = s.notification_id
WHERE s.state = 'dead' AND s.updated_at >= :since AND s.updated_at < :until
    AND (:channel IS NULL OR s.channel = :channel) AND (:kind IS NULL OR n.kind = :kind)
    AND (:tenant IS NULL OR n.tenant = :tenant)"""

# --- recipients, a person erased, accept and resolution ---------------------------------------

# Every change of preferences bumps the version the claim records with its decision.
# With :version, only over that version (0: none chosen yet): a page saving what it showed never
# overwrites a change it did not see. :hours set: the time zone and quiet hours change with them.
PUT_PREFERENCES = """INSERT INTO recipients (tenant, user_id, contacts, updated_at, preferences,
    pref_version, timezone, quiet_start, quiet_end, created_at)
SELECT :tenant, :user_id, '{}', :at, :preferences, 1, :timezone, :quiet_start, :quiet_end, :at
WHERE coalesce(:version, 0) = 0 OR EXISTS (
    SELECT 1 FROM recipients WHERE tenant = :tenant AND user_id = :user_id)
ON CONFLICT (tenant, user_id) DO UPDATE SET preferences = excluded.preferences,
    pref_version = pref_version + 1, updated_at = excluded.updated_at,
    timezone = CASE WHEN :hours THEN excluded.timezone ELSE timezone END,
    quiet_start = CASE WHEN :hours THEN excluded.quiet_start ELSE quiet_start END,
    quiet_end = CASE WHEN :hours THEN excluded.quiet_end ELSE quiet_end END
WHERE :version IS NULL OR recipients.pref_version = :version
RETURNING pref_version"""
# Only when the erased person's address is suppressed: a scan of the tenant's profiles (every
# tenant's, for an account-wide entry), rare and short.
ADDRESS_HELD = """SELECT EXISTS (SELECT 1 FROM recipients r, json_each(r.contacts) j
WHERE (:tenant = '*' OR r.tenant = :tenant) AND j.value = :address
    AND NOT (r.tenant = :own_tenant AND r.user_id = :user_id))"""
SELECT_OPEN_OF_USER = """SELECT n.id FROM notifications n
WHERE n.tenant = ? AND n.user_id = ? AND n.resolved_at IS NULL
    AND (EXISTS (SELECT 1 FROM steps s WHERE s.notification_id = n.id
                 AND s.state IN ('pending', 'sending', 'unknown'))
         OR EXISTS (SELECT 1 FROM digest_items d WHERE d.notification_id = n.id
                    AND d.digest_id IS NULL))"""
SELECT_EVENTS = """SELECT step_no, at, what FROM events WHERE notification_id = ?
ORDER BY at, rowid"""
SELECT_RESOLUTION = """SELECT resolved_at, resolution, tenant, kind FROM notifications
WHERE id = ?"""

# --- the delivery engine ----------------------------------------------------------------------

SELECT_LAPSED = """SELECT notification_id, step_no FROM steps
WHERE state = 'sending' AND lease_until <= ?"""
MARK_UNKNOWN = """UPDATE steps SET state = 'unknown', reason = ?, send_after = ?, claim_token = NULL,
    lease_until = NULL, updated_at = ?
WHERE notification_id = ? AND step_no = ? AND state = 'sending'"""
# A due step with everything the claim policy reads about it, in one statement: the notification,
# the recipient's profile, whether the user has disabled contacts, and a sibling in flight.
# Due steps in due order, skipping those whose notification has a step in flight (promise 4):
# they keep their place, and come up again when that send completes (the scanner is woken).
SELECT_DUE = """SELECT s.notification_id, s.step_no, s.channel, s.lane, s.send_after, s.attempts,
    s.retry_base, s.destination, s.payload, s.reason, n.tenant, n.user_id, n.kind, n.params, n.created_at,
    n.expires_at, n.resolved_at, n.resolution, r.timezone, r.locale, r.quiet_start, r.quiet_end,
    r.contacts, r.preferences, r.pref_version,
    EXISTS (SELECT 1 FROM suppressions d WHERE d.tenant IN (n.tenant, '*')
            AND d.address IN (SELECT value FROM json_each(r.contacts))) AS has_disabled,
    EXISTS (SELECT 1 FROM devices v
            WHERE v.tenant = n.tenant AND v.user_id = n.user_id) AS has_devices
FROM steps s JOIN notifications n ON n.id = s.notification_id
LEFT JOIN recipients r ON r.tenant = n.tenant AND r.user_id = n.user_id
WHERE s.channel = ? AND s.lane = ? AND s.state IN ('pending', 'unknown') AND s.send_after <= ?
    AND NOT EXISTS (SELECT 1 FROM steps f
                    WHERE f.notification_id = s.notification_id AND f.state = 'sending')
ORDER BY s.send_after LIMIT ?"""
HOLD_ITEM = """INSERT OR IGNORE INTO digest_items
    (notification_id, step_no, tenant, user_id, digest_kind, window_end, held_at)
VALUES (?, ?, ?, ?, ?, ?, ?)"""
# Completion only lands while the claim token is ours: a stale sender cannot overwrite evidence.
COMPLETE_STEP = """UPDATE steps SET state = ?, reason = ?, provider_ref = COALESCE(?, provider_ref),
    send_after = COALESCE(?, send_after), claim_token = NULL, lease_until = NULL, updated_at = ?
WHERE notification_id = ? AND step_no = ? AND claim_token = ? AND state = 'sending'"""
# The one suppression list as people see it: addresses (tenant's own and account-wide '*'),
# and the tenant's dead push devices, whose state lives with the device.
SELECT_SUPPRESSIONS = """SELECT tenant, channel_type, address, reason, source, evidence,
    created_at FROM suppressions
WHERE tenant IN (:tenant, '*') AND (:address IS NULL OR address IN (:address, :hashed))
UNION ALL
SELECT tenant, 'push', device_id, coalesce(reason, 'dead'), kind, 'user ' || user_id, updated_at
FROM devices WHERE tenant = :tenant AND state = 'dead'
    AND (:address IS NULL OR device_id = :address)
ORDER BY created_at DESC, address LIMIT :limit"""
REPLAY_STEPS = """UPDATE steps SET state = 'pending', send_after = ?, retry_base = attempts,
    reason = ?, updated_at = ?
WHERE notification_id = ? AND (? IS NULL OR step_no = ?) AND state IN ('dead', 'unknown')
RETURNING step_no"""
SELECT_UNCONFIGURED = """SELECT s.notification_id, s.step_no, s.channel, s.lane, s.send_after,
    n.resolution, n.expires_at, n.tenant, n.user_id, n.kind
FROM steps s JOIN notifications n ON n.id = s.notification_id
WHERE s.state IN ('pending', 'unknown') AND s.channel NOT IN (SELECT value FROM json_each(?))"""
WRITE_PROBE = "INSERT OR REPLACE INTO probe (id, at) VALUES (1, ?)"

# --- provider evidence, dead and stuck steps --------------------------------------------------

SELECT_RECEIPT_STEP = """SELECT s.state, s.evidence, s.channel, s.destination, n.kind, n.tenant,
    n.resolved_at FROM steps s JOIN notifications n ON n.id = s.notification_id
WHERE s.notification_id = ? AND s.step_no = ?"""
SELECT_DEAD = """SELECT notification_id, step_no, channel, attempts, reason, updated_at FROM steps
WHERE state = 'dead' ORDER BY updated_at DESC LIMIT ?"""
# The console's lists: a tenant's dead steps, newest first along steps_dead; its unknown steps
# (few: sends whose outcome a crash or a timeout left open) among the open ones of steps_due.
_STUCK = """SELECT s.notification_id, s.step_no, s.channel, n.kind, n.user_id, s.state,
    s.attempts, s.reason, s.updated_at
FROM steps s INDEXED BY {index} CROSS JOIN notifications n ON n.id = s.notification_id
WHERE {state} AND n.tenant = :tenant ORDER BY s.updated_at DESC LIMIT :limit"""
SELECT_DEAD_OF = _STUCK.format(index="steps_dead", state="s.state = 'dead'")
SELECT_UNKNOWN_OF = _STUCK.format(
    index="steps_due", state="s.state = 'unknown' AND s.state IN ('pending', 'unknown')")

# --- the inbox, signing keys, digests ---------------------------------------------------------

INSERT_INBOX = """INSERT OR IGNORE INTO inbox_items
    (tenant, user_id, notification_id, kind, title, body, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)
RETURNING seq"""
BUMP_BADGE = """INSERT INTO inbox_badges (tenant, user_id, unread) VALUES (?, ?, max(0, ?))
ON CONFLICT (tenant, user_id) DO UPDATE SET unread = max(0, unread + ?)
RETURNING unread"""
# Every badge recomputed from the rows (notifyd inbox rebuild-badges): how many were wrong.
DRIFTED_BADGES = """SELECT b.tenant, b.user_id, b.unread, (SELECT count(*) FROM inbox_items i
    WHERE i.tenant = b.tenant AND i.user_id = b.user_id AND i.read_at IS NULL
    AND i.archived_at IS NULL) AS actual FROM inbox_badges b
UNION ALL
SELECT DISTINCT i.tenant, i.user_id, NULL, (SELECT count(*) FROM inbox_items j
    WHERE j.tenant = i.tenant AND j.user_id = i.user_id AND j.read_at IS NULL
    AND j.archived_at IS NULL) FROM inbox_items i
WHERE NOT EXISTS (SELECT 1 FROM inbox_badges b WHERE b.tenant = i.tenant AND b.user_id = i.user_id)"""
SELECT_INBOX_PAGE = f"""SELECT {INBOX_COLUMNS} FROM inbox_items INDEXED BY inbox_page
WHERE tenant = ? AND user_id = ? AND (created_at, notification_id) < (?, ?)
    AND (? OR archived_at IS NULL) AND {OF_KINDS}
ORDER BY created_at DESC, notification_id DESC LIMIT ?"""
INSERT_SIGNING_KEY = """INSERT OR IGNORE INTO signing_keys (name, secret, created_at)
VALUES (?, ?, ?)"""
# Recipients with held items whose window has closed, oldest window first.
SELECT_DUE_DIGESTS = """SELECT tenant, user_id, digest_kind, window_end, count(*) AS n
FROM digest_items WHERE digest_id IS NULL AND window_end <= ?
GROUP BY tenant, user_id, digest_kind, window_end ORDER BY window_end LIMIT ?"""

# --- retention, events ------------------------------------------------------------------------

SELECT_AGED_LIVE = f"""SELECT n.id, n.resolved_at, n.resolution, n.expires_at,
    EXISTS (SELECT 1 FROM steps s WHERE s.notification_id = n.id
            AND s.state IN {OPEN_STATES}) AS open,
    EXISTS (SELECT 1 FROM digest_items d WHERE d.notification_id = n.id
            AND d.digest_id IS NULL) AS held
FROM notifications n INDEXED BY notifications_live
WHERE n.pruned_at IS NULL AND n.id > ? AND n.id < ? ORDER BY n.id LIMIT ?"""
# Rows per class, and the oldest of each: a notification's time is read from its id.
COUNT_ROWS = """SELECT 'notifications' AS class, (SELECT count(*) FROM notifications
        INDEXED BY notifications_live WHERE pruned_at IS NULL) AS n,
    (SELECT min(id) FROM notifications INDEXED BY notifications_live
        WHERE pruned_at IS NULL) AS oldest
UNION ALL SELECT 'identities', (SELECT count(*) FROM notifications WHERE pruned_at IS NOT NULL),
    (SELECT min(id) FROM notifications WHERE pruned_at IS NOT NULL)
UNION ALL SELECT 'steps', (SELECT count(*) FROM steps), NULL
UNION ALL SELECT 'attempts', (SELECT count(*) FROM attempts), NULL
UNION ALL SELECT 'receipts', (SELECT count(*) FROM receipts),
    (SELECT min(received_at) FROM receipts)
UNION ALL SELECT 'inbox_items', (SELECT count(*) FROM inbox_items),
    (SELECT created_at FROM inbox_items ORDER BY seq LIMIT 1)
UNION ALL SELECT 'digest_items', (SELECT count(*) FROM digest_items),
    (SELECT min(held_at) FROM digest_items)
UNION ALL SELECT 'suppressions', (SELECT count(*) FROM suppressions),
    (SELECT min(created_at) FROM suppressions)
UNION ALL SELECT 'events', (SELECT count(*) FROM fanout_events),
    (SELECT min(accepted_at) FROM fanout_events)
UNION ALL SELECT 'topic_members', (SELECT count(*) FROM topic_members),
    (SELECT min(added_at) FROM topic_members)"""
SELECT_FANOUT_EVENT = GET_FANOUT_EVENT  # no lock: the one writer is alone
# How each of an event's notifications stands (as views.current_state would say, with an
# undeliverable one whose every step was suppressed told apart), counted by state and reason.
COUNT_EVENT_STATES = """SELECT state, CASE WHEN state = 'suppressed' THEN reason END AS reason,
    count(*) AS n FROM (
    SELECT CASE
        WHEN n.outcome IS NOT NULL THEN n.outcome
        WHEN n.resolved_at IS NOT NULL THEN
            CASE WHEN n.resolution = 'delivered' THEN 'delivered' ELSE 'resolved' END
        WHEN max(s.state IN ('pending', 'sending', 'unknown')) THEN 'pending'
        WHEN max(s.state = 'delivered' OR s.evidence IN ('delivered', 'shown', 'opened'))
            THEN 'delivered'
        WHEN max(s.state = 'sent') THEN 'sent'
        WHEN max(s.state = 'held') THEN 'held'
        WHEN max(s.state = 'digested') THEN 'digested'
        WHEN max(s.state = 'expired') THEN 'expired'
        WHEN min(s.state = 'suppressed') THEN 'suppressed'
        ELSE 'undeliverable' END AS state,
        min(CASE WHEN s.state = 'suppressed'
            THEN substr(s.reason, 1, instr(s.reason || ':', ':') - 1) END) AS reason
    FROM notifications n INDEXED BY notifications_event
    LEFT JOIN steps s ON s.notification_id = n.id
    WHERE n.tenant = ? AND n.event_id = ? GROUP BY n.id)
GROUP BY 1, 2 ORDER BY 1, 2"""

fill(globals())
