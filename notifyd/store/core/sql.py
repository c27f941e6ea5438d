"""The statements every dialect says the same way, written once (store/core/queries.py says what
each must do). A dialect's module (store/sqlite/queries.py, store/postgres/queries.py) starts from
these and writes only what it says its own way: its locks, upserts, ties, casts.

Written in SQLite's words, which PostgreSQL's module adapts at import as it does its own: `?`
placeholders numbered to `$n`, and index hints (`INDEXED BY name`) dropped, its planner picking
the index itself. A fragment whose value is its own name in braces (below) is the dialect's to
supply: `fill` puts the dialect's words in its place in every statement.
"""

# --- fragments each dialect supplies ---------------------------------------------------------

# The values of a JSON list argument (?), as the rows of a subquery: `x IN ({JSON_VALUES})`.
JSON_VALUES = "{JSON_VALUES}"
# A key limited to some kinds sees only those: the first ? is true for every kind, else the
# second is a JSON list of them.
OF_KINDS = "{OF_KINDS}"
# A bulk replay's selection, a page at a time along the steps_dead index (updated_at, then the
# key): FROM and WHERE of the dead steps that ended in [:since, :until), on :channel, of :kind,
# of :tenant (each NULL: any).
DEAD_MATCHING = "{DEAD_MATCHING}"
FRAGMENTS = ("OF_KINDS", "DEAD_MATCHING", "JSON_VALUES")  # in this order: one may hold the next


def fill(names: dict[str, object]) -> None:
    """Put a dialect's fragments in the place of their markers, in every statement of `names`
    (its module's globals, once its own statements are written); none may be left unsupplied."""
    words: dict[str, str] = {}
    for fragment in FRAGMENTS:
        word = names.get(fragment)
        if not isinstance(word, str) or word == "{" + fragment + "}":
            raise TypeError(f"{names.get('__name__')} does not supply the fragment {fragment}")
        words["{" + fragment + "}"] = word
    for name, value in list(names.items()):
        if name.isupper() and isinstance(value, str):
            for marker, word in words.items():
                value = value.replace(marker, word)
            names[name] = value


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
# The suppressions of a user's addresses (a JSON list), in their tenant or for every tenant.
SELECT_SUPPRESSED = f"""SELECT channel_type, address, reason FROM suppressions
WHERE tenant IN (?, '*') AND address IN ({JSON_VALUES})"""
SELECT_LISTED = f"""SELECT tenant, channel_type, address, reason, source, evidence, created_at
FROM suppressions WHERE tenant IN (?, '*') AND address IN ({JSON_VALUES})"""
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

DELETE_RECIPIENT = """DELETE FROM recipients WHERE tenant = ? AND user_id = ?
RETURNING pref_version"""
DELETE_DEVICES = "DELETE FROM devices WHERE tenant = ? AND user_id = ?"
DELETE_INBOX = "DELETE FROM inbox_items WHERE tenant = ? AND user_id = ?"
DELETE_BADGE = "DELETE FROM inbox_badges WHERE tenant = ? AND user_id = ?"
_OF_USER = "SELECT id FROM notifications WHERE tenant = ? AND user_id = ?"
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
SCRUB_ORPHAN_RECEIPTS = f"""UPDATE receipts SET address = NULL, detail = NULL
WHERE notification_id IS NULL AND address IN ({JSON_VALUES})"""
SELECT_MEMBERSHIPS = """SELECT DISTINCT topic FROM topic_members
WHERE tenant = ? AND user_id = ? AND removed_version IS NULL"""
DELETE_MEMBERSHIPS = "DELETE FROM topic_members WHERE tenant = ? AND user_id = ?"
SELECT_EVENTS_NAMING = """SELECT seq, event_id, params, subject FROM fanout_events
WHERE tenant = ? AND (lower(params) LIKE ? ESCAPE '\\' OR lower(subject) LIKE ? ESCAPE '\\')"""
SET_EVENT_TEXT = "UPDATE fanout_events SET params = ?, subject = ? WHERE seq = ?"
SELECT_EVENT_MADE = "SELECT id, params FROM notifications WHERE tenant = ? AND event_id = ?"
SET_PARAMS = "UPDATE notifications SET params = ? WHERE id = ?"
SET_PAYLOAD = "UPDATE steps SET payload = ? WHERE notification_id = ? AND step_no = ?"
SELECT_ITEM_TEXT = "SELECT seq, title, body FROM inbox_items WHERE notification_id = ?"
SET_ITEM_TEXT = "UPDATE inbox_items SET title = ?, body = ? WHERE seq = ?"
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
# Each step with the digest that carried it and when it was held, where it was.
SELECT_STEPS = """SELECT s.*, d.digest_id, d.held_at FROM steps s
LEFT JOIN digest_items d ON d.notification_id = s.notification_id AND d.step_no = s.step_no
WHERE s.notification_id = ? ORDER BY s.step_no"""
SELECT_ATTEMPTS = """SELECT * FROM attempts WHERE notification_id = ?
ORDER BY step_no, attempt_no"""
# Every move of a step after it was planned, written when it happens: the timeline's record.
INSERT_EVENT = "INSERT INTO events (notification_id, step_no, at, what) VALUES (?, ?, ?, ?)"

RESOLVE = """UPDATE notifications SET resolved_at = ?, resolution = ?, resolved_by = ?
WHERE id = ? AND resolved_at IS NULL"""
# The escalation depth at resolution: the last step that had gone out.
SELECT_DEPTH = """SELECT coalesce(max(step_no) + 1, 0) FROM steps
WHERE notification_id = ? AND state IN ('sent', 'delivered', 'sending', 'unknown')"""
# The sweep is an optimisation: the claim re-checks resolution whether or not this ran.
CANCEL_PENDING = """UPDATE steps SET state = 'cancelled', reason = ?, updated_at = ?
WHERE notification_id = ? AND state IN ('pending', 'unknown')"""


# --- the delivery engine's statements ---
CLOSE_OPEN_ATTEMPTS = """UPDATE attempts SET ended_at = ?, outcome = 'unknown', reason = ?
WHERE notification_id = ? AND step_no = ? AND ended_at IS NULL"""
END_STEP = """UPDATE steps SET state = ?, reason = ?, updated_at = ?, pref_version = ?
WHERE notification_id = ? AND step_no = ?"""
# Sends (first attempts) to one person within a window, of the kinds and channels a limit counts.
COUNT_SENDS = f"""SELECT count(*) FROM notifications n
JOIN attempts a ON a.notification_id = n.id AND a.attempt_no = 1 AND a.started_at > ?
JOIN steps s ON s.notification_id = a.notification_id AND s.step_no = a.step_no
WHERE n.tenant = ? AND n.user_id = ?
    AND (? = '[]' OR n.kind IN ({JSON_VALUES}))
    AND (? = '[]' OR s.channel IN ({JSON_VALUES}))"""
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
# A permanent rejection of an address puts it on the suppression list (the first reason stays).
SUPPRESS_SENT = """INSERT INTO suppressions
    (tenant, channel_type, address, reason, source, evidence, created_at)
SELECT tenant, ?, ?, ?, 'send', ?, ? FROM notifications WHERE id = ?
ON CONFLICT DO NOTHING"""
SUPPRESS = """INSERT INTO suppressions
    (tenant, channel_type, address, reason, source, evidence, created_at)
VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING"""
UNSUPPRESS = "DELETE FROM suppressions WHERE tenant = ? AND channel_type = ? AND address = ?"
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
DELAY_STEP = """UPDATE steps SET send_after = ?, note = ?, updated_at = ?
WHERE notification_id = ? AND step_no = ?"""
SELECT_NEXT_DUE = """SELECT min(send_after) FROM steps
WHERE channel = ? AND lane = ? AND state IN ('pending', 'unknown')"""
SELECT_LEASED = "SELECT count(*), max(lease_until) FROM steps WHERE state = 'sending'"
# The due index read again (engine/dueindex.py): a route's earliest due times, in order.
SELECT_DUE_TIMES = """SELECT DISTINCT send_after FROM steps
WHERE channel = ? AND lane = ? AND state IN ('pending', 'unknown') ORDER BY send_after LIMIT ?"""
SELECT_FIRST_LEASE_END = "SELECT min(lease_until) FROM steps WHERE state = 'sending'"
# A notification's open steps, whose due times a commit tells the due index.
SELECT_OPEN_DUE = """SELECT send_after, channel, lane FROM steps
WHERE notification_id = ? AND state IN ('pending', 'unknown')"""
# --- provider evidence ---
# A redelivered event (same provider and event id) inserts nothing: harmless twice.
INSERT_RECEIPT = """INSERT INTO receipts (provider, event_id, event, occurred_at, received_at,
    provider_ref, step_key, message_id, address, channel_type, detail, notification_id, step_no,
    tenant)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING"""
# One-time tokens: those past their window go as new ones come, a few at a time; a token still
# kept is refused (no row changed), one past its window counts as new.
PRUNE_WEBHOOK_TOKENS = """DELETE FROM webhook_tokens WHERE (provider, token) IN (
    SELECT provider, token FROM webhook_tokens INDEXED BY webhook_tokens_until
    WHERE provider = ? AND until < ? ORDER BY until LIMIT ?)"""
CLAIM_WEBHOOK_TOKEN = """INSERT INTO webhook_tokens (provider, token, seen_at, until)
VALUES (?, ?, ?, ?)
ON CONFLICT (provider, token) DO UPDATE SET seen_at = excluded.seen_at, until = excluded.until
WHERE webhook_tokens.until < ?"""
STEP_BY_REF = "SELECT notification_id, step_no FROM steps WHERE provider_ref = ? LIMIT 1"
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
SELECT_DEAD_MATCHING = f"""SELECT s.notification_id, s.step_no, s.updated_at, n.expires_at
{DEAD_MATCHING}
    AND (s.updated_at, s.notification_id, s.step_no) > (:at, :nid, :step)
ORDER BY s.updated_at, s.notification_id, s.step_no LIMIT :limit"""
COUNT_DEAD_MATCHING = f"SELECT count(*) {DEAD_MATCHING}"
# A person's notifications, newest first (ids grow with time), along notifications_dedup.
SELECT_NOTIFICATIONS_OF = """SELECT id, kind, dedup_key, created_at, resolution, resolved_at,
    pruned_at FROM notifications WHERE tenant = :tenant AND user_id = :user_id
ORDER BY id DESC LIMIT :limit"""

# --- the inbox --------------------------------------------------------------------------------

SELECT_BADGE = "SELECT unread FROM inbox_badges WHERE tenant = ? AND user_id = ?"
COUNT_UNREAD = """SELECT count(*) FROM inbox_items INDEXED BY inbox_unread
WHERE tenant = ? AND user_id = ? AND read_at IS NULL AND archived_at IS NULL"""
SET_BADGE = """INSERT INTO inbox_badges (tenant, user_id, unread) VALUES (?, ?, ?)
ON CONFLICT (tenant, user_id) DO UPDATE SET unread = excluded.unread"""
INBOX_COLUMNS = "seq, notification_id, kind, title, body, created_at, read_at, archived_at"
COUNT_UNREAD_OF_KINDS = f"{COUNT_UNREAD} AND {OF_KINDS}"
SELECT_INBOX_SINCE = f"""SELECT {INBOX_COLUMNS} FROM inbox_items INDEXED BY inbox_since
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

SELECT_SIGNING_KEY = "SELECT secret, previous, previous_until FROM signing_keys WHERE name = ?"
# The key it had stays as the previous one for the overlap; one before it is gone at once.
ROTATE_SIGNING_KEY = """UPDATE signing_keys SET previous = secret, secret = ?, previous_until = ?,
    created_at = ? WHERE name = ?"""

# --- console sessions signed out before their expiry -------------------------------------------

INSERT_SIGN_OUT = """INSERT INTO console_sign_outs (nonce, until) VALUES (?, ?)
ON CONFLICT DO NOTHING"""
DELETE_SIGN_OUTS_PAST = "DELETE FROM console_sign_outs WHERE until <= ?"
SELECT_SIGN_OUT = "SELECT 1 FROM console_sign_outs WHERE nonce = ?"

# --- digests ----------------------------------------------------------------------------------

SELECT_DIGEST_MEMBERS = """SELECT d.notification_id, d.step_no, n.kind, n.params, n.created_at
FROM digest_items d JOIN notifications n ON n.id = d.notification_id
WHERE d.tenant = ? AND d.user_id = ? AND d.digest_kind = ? AND d.window_end = ?
    AND d.digest_id IS NULL ORDER BY n.created_at, d.notification_id"""
MARK_DIGESTED_ITEM = """UPDATE digest_items SET digest_id = ?
WHERE notification_id = ? AND step_no = ? AND digest_id IS NULL"""
# A held step its digest carried says so: its reason (why it was held) stays.
MARK_DIGESTED_STEP = """UPDATE steps SET state = 'digested', updated_at = ?
WHERE notification_id = ? AND step_no = ? AND state = 'held'"""
# Items held for a window after its digest was read move to the next window: never dropped.
ROLL_DIGEST = """UPDATE digest_items SET window_end = ?
WHERE tenant = ? AND user_id = ? AND digest_kind = ? AND window_end = ? AND digest_id IS NULL"""
NEXT_DIGEST = "SELECT min(window_end) FROM digest_items WHERE digest_id IS NULL"

# --- retention ----------------------------------------------------------------------------------

OPEN_STATES = "('pending', 'sending', 'unknown')"
# An erasure's scrub of what an event made: a step still to go keeps its frozen message.
SELECT_DONE_PAYLOADS = f"""SELECT step_no, payload FROM steps
WHERE notification_id = ? AND payload IS NOT NULL AND state NOT IN {OPEN_STATES}"""
# Read after SELECT_AGED_LIVE (which locks the rows where writers run at once): what a claim or
# a replay committed meanwhile.
SELECT_OPEN_OF = f"""SELECT n.id FROM notifications n
WHERE n.id IN ({JSON_VALUES})
    AND (EXISTS (SELECT 1 FROM steps s WHERE s.notification_id = n.id
                 AND s.state IN {OPEN_STATES})
         OR EXISTS (SELECT 1 FROM digest_items d WHERE d.notification_id = n.id
                    AND d.digest_id IS NULL))"""
SELECT_STEPS_OF = f"""SELECT notification_id, channel, state, evidence, reason FROM steps
WHERE notification_id IN ({JSON_VALUES}) ORDER BY notification_id, step_no"""
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
    SELECT provider, event_id FROM receipts INDEXED BY receipts_received
    WHERE received_at < ? ORDER BY received_at LIMIT ?)"""
DONE_AT = "coalesce(read_at, archived_at)"
IS_DONE = "(read_at IS NOT NULL OR archived_at IS NOT NULL)"
SELECT_AGED_DONE_INBOX = f"""SELECT seq FROM inbox_items INDEXED BY inbox_done
WHERE {IS_DONE} AND {DONE_AT} < ? ORDER BY {DONE_AT} LIMIT ?"""
SELECT_OLDEST_INBOX = """SELECT seq, tenant, user_id, created_at,
    read_at IS NULL AND archived_at IS NULL AS unread
FROM inbox_items ORDER BY seq LIMIT ?"""
DELETE_INBOX_ITEM = "DELETE FROM inbox_items WHERE seq = ?"
COUNT_AGED_LIVE = f"""SELECT count(*) FROM notifications n INDEXED BY notifications_live
WHERE n.pruned_at IS NULL AND n.id < ?
    AND NOT EXISTS (SELECT 1 FROM steps s WHERE s.notification_id = n.id
                    AND s.state IN {OPEN_STATES})
    AND NOT EXISTS (SELECT 1 FROM digest_items d WHERE d.notification_id = n.id
                    AND d.digest_id IS NULL)"""
COUNT_AGED_IDS = "SELECT count(*) FROM notifications WHERE id < ? AND pruned_at IS NOT NULL"
COUNT_AGED_RECEIPTS = "SELECT count(*) FROM receipts WHERE received_at < ?"
COUNT_AGED_DONE_INBOX = f"SELECT count(*) FROM inbox_items WHERE {IS_DONE} AND {DONE_AT} < ?"
COUNT_OLD_INBOX = "SELECT count(*) FROM inbox_items WHERE created_at < ?"

# --- events and their fan-out ---------------------------------------------------------------

INSERT_FANOUT_EVENT = """INSERT INTO fanout_events (tenant, event_id, type, subject, params, kinds,
    request_hash, key_name, audience, topic, version, cutoff, users, size, accepted_at, send_at,
    cursor, routed)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, '', 0)
ON CONFLICT (tenant, event_id) DO NOTHING"""
# A status read: no lock (on PostgreSQL's REPEATABLE READ reader a locking read that meets a
# chunk's update fails to serialize).
GET_FANOUT_EVENT = "SELECT * FROM fanout_events WHERE tenant = ? AND event_id = ?"
# Not `users`: an inline list is read by its chunks alone, not with every event still routing.
SELECT_ROUTING = """SELECT tenant, event_id, type, subject, params, kinds, request_hash, key_name,
    audience, topic, version, cutoff, size, cursor, routed, accepted_at, routed_at, send_at
FROM fanout_events INDEXED BY fanout_events_routing
WHERE routed_at IS NULL ORDER BY seq LIMIT ?"""
SELECT_BACKLOG = """SELECT count(*), min(accepted_at) FROM fanout_events INDEXED BY
    fanout_events_routing WHERE routed_at IS NULL"""
ADVANCE_EVENT = """UPDATE fanout_events SET cursor = ?, routed = routed + ?, routed_at = ?
WHERE tenant = ? AND event_id = ? AND routed_at IS NULL"""
# The whole user base at an event's acceptance: the rows made before its time, and those made
# in the same millisecond by a transaction that committed before it (listed on the event).
COUNT_EVERYONE = "SELECT count(*) FROM recipients WHERE tenant = ? AND created_at < ?"
SELECT_MADE_AT = "SELECT user_id FROM recipients WHERE tenant = ? AND created_at = ?"
SELECT_EVERYONE = f"""SELECT user_id FROM recipients
WHERE tenant = ? AND user_id > ? AND (created_at < ? OR (created_at = ?
    AND user_id IN ({JSON_VALUES})))
ORDER BY user_id LIMIT ?"""
# A topic's members at a version: rows open at it (added at or before, not yet removed by it).
SELECT_TOPIC_AUDIENCE = """SELECT user_id FROM topic_members
WHERE tenant = ? AND topic = ? AND user_id > ? AND added_version <= ?
    AND (removed_version IS NULL OR removed_version > ?)
ORDER BY user_id LIMIT ?"""
MARK_EVENT = f"""UPDATE notifications SET event_id = ?
WHERE id IN ({JSON_VALUES})"""
SELECT_EVENT_PAGE = """SELECT * FROM notifications INDEXED BY notifications_event
WHERE tenant = ? AND event_id = ? AND (user_id, id) > (?, ?) ORDER BY user_id, id LIMIT ?"""
SELECT_STEPS_OF_MANY = f"""SELECT s.*, d.digest_id, d.held_at FROM steps s
LEFT JOIN digest_items d ON d.notification_id = s.notification_id AND d.step_no = s.step_no
WHERE s.notification_id IN ({JSON_VALUES})
ORDER BY s.notification_id, s.step_no"""

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
SELECT_MEMBERS = """SELECT user_id, added_at FROM topic_members INDEXED BY topic_members_open
WHERE tenant = ? AND topic = ? AND user_id > ? AND removed_version IS NULL
ORDER BY user_id LIMIT ?"""
SELECT_FOLLOWING = """SELECT m.topic, t.self_service, m.added_at
FROM topic_members m INDEXED BY topic_members_user
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
_CLOSED_UNPINNED = """FROM topic_members m INDEXED BY topic_members_closed
WHERE m.removed_version IS NOT NULL AND m.removed_at < ?
    AND NOT EXISTS (SELECT 1 FROM fanout_events e INDEXED BY fanout_events_pins
                    WHERE e.tenant = m.tenant AND e.topic = m.topic AND e.routed_at IS NULL
                    AND e.version >= m.added_version AND e.version < m.removed_version)"""
SELECT_AGED_MEMBERS = f"""SELECT m.tenant, m.topic, m.user_id, m.added_version {_CLOSED_UNPINNED}
ORDER BY m.removed_at LIMIT ?"""
DELETE_MEMBER_ROW = """DELETE FROM topic_members
WHERE tenant = ? AND topic = ? AND user_id = ? AND added_version = ?"""
COUNT_AGED_MEMBERS = f"SELECT count(*) {_CLOSED_UNPINNED}"
