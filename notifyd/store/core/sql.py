"""The store's statements, in one place: what each must do (`Queries`, and the features' below),
and the words of every statement the dialects say the same way. A dialect is a module of constants
with these names (store/sqlite/queries.py, store/postgres/queries.py): it starts from the shared
ones here and writes only what it says its own way: its locks, upserts, ties, casts. The core's
scripts use them through `tx.q` and never write SQL. Times are epoch milliseconds; arguments are
positional, in the order each line gives.

Adding a statement: its name and contract in `Queries` (or a feature's protocol), and its words
below where the dialects agree, or in each dialect's module where they do not.

What only some dialects can do is a feature, named in `Features` with the statements it needs:
a dialect without it writes none of them, and a script reaches them only through the flag.

The shared words are written in SQLite's, which PostgreSQL's module adapts at import as it does
its own: `?` placeholders numbered to `$n`, and index hints (`INDEXED BY name`) dropped, its
planner picking the index itself. A fragment whose value is its own name in braces (below) is the
dialect's to supply: `fill` puts the dialect's words in its place in every statement.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


class Queries(Protocol):
    # --- tenants, keys and signing keys
    INSERT_TENANT: str  # (name, created_at); nothing if it exists
    SELECT_TENANTS: str  # () -> name, created_at, by name
    SELECT_TENANT: str  # (name) -> name, created_at
    INSERT_KEY: str  # (key_hash, name, tenant, kinds, created_at, scopes)
    SELECT_KEY: str  # (key_hash) -> name, tenant, kinds, key_hash, scopes; not revoked
    SELECT_KEYS: str  # () -> name, tenant, kinds, created_at, revoked_at, scopes, last_used_at,
    #                  by name
    SELECT_KEY_NAMED: str  # (name) -> name, tenant, kinds, created_at, revoked_at, scopes,
    #                        last_used_at
    REVOKE_KEY: str  # (revoked_at, name); only one not yet revoked
    MARK_KEY_USED: str  # (last_used_at, key_hash)
    INSERT_SIGNING_KEY: str  # (name, secret, created_at); nothing if it exists
    SELECT_SIGNING_KEY: str  # (name) -> secret, previous, previous_until
    ROTATE_SIGNING_KEY: str  # (secret, previous_until, created_at, name): the key it had becomes
    #                           the previous one, verifying until previous_until
    INSERT_SIGN_OUT: str  # (nonce, until); nothing if it is there
    DELETE_SIGN_OUTS_PAST: str  # (now): those whose session has expired anyway
    SELECT_SIGN_OUT: str  # (nonce) -> 1 if its session was ended

    # --- recipients, devices, preferences
    UPSERT_RECIPIENT: str  # (tenant, user_id, timezone, locale, quiet_start, quiet_end, contacts, at);
    #                        a new row is made (created_at) at `at`
    SELECT_RECIPIENT: str  # (tenant, user_id) -> the profile with preferences, pref_version
    SELECT_LOCALE: str  # (tenant, user_id) -> locale
    PUT_PREFERENCES: str  # {tenant, user_id, at, preferences, version, hours, timezone,
    #                        quiet_start, quiet_end} -> pref_version, bumped by one; nothing
    #                        unless version is NULL or the one held (0: none yet); the time
    #                        zone and quiet hours only when hours is true; a new row is made
    #                        (created_at) at `at`
    SELECT_SUPPRESSED: str  # (tenant, addresses as a JSON list) -> channel_type, address, reason
    SELECT_LISTED: str  # (tenant, addresses as a JSON list) -> tenant, channel_type, address,
    #                     reason, source, evidence, created_at: their suppressions, tenant or '*'
    SELECT_DEVICES: str  # (tenant, user_id) -> device_id, kind, endpoint, p256dh, auth, state, reason
    UPSERT_DEVICE: str  # (tenant, user_id, device_id, kind, endpoint, p256dh, auth, at, at): live
    DELETE_DEVICE: str  # (tenant, user_id, device_id)
    KILL_DEVICE: str  # (reason, at, device_id, notification_id): the notification's user's device
    KILL_TENANT_DEVICE: str  # (reason, at, tenant, device_id)
    REVIVE_DEVICE: str  # (at, tenant, device_id)

    # --- a person erased: what goes, what is scrubbed, what stays one-way
    ADDRESS_HELD: str  # {tenant ('*': any), address, own_tenant, user_id} -> whether another
    #                    person's profile (of the tenant) holds the address
    DELETE_RECIPIENT: str  # (tenant, user_id) -> pref_version of the profile deleted
    DELETE_DEVICES: str  # (tenant, user_id)
    DELETE_INBOX: str  # (tenant, user_id)
    DELETE_BADGE: str  # (tenant, user_id)
    SELECT_OPEN_OF_USER: str  # (tenant, user_id) -> id of each unresolved notification with a
    #                           step open or an item still held for a digest
    CANCEL_HELD: str  # (reason, at, notification_id): its steps held for a digest not yet made
    DELETE_HELD: str  # (tenant, user_id): the person's items held for a digest not yet made
    SCRUB_PARAMS: str  # (tenant, user_id): every notification's params emptied
    SCRUB_PAYLOADS: str  # (tenant, user_id): every step's destination and frozen message
    #                      cleared; one in flight keeps '{}', so no freeze can fill it again
    SCRUB_RECEIPTS: str  # (tenant, user_id): the addresses and details of their receipts
    SCRUB_ORPHAN_RECEIPTS: str  # (addresses JSON): unmatched receipts' addresses and details
    SELECT_MEMBERSHIPS: str  # (tenant, user_id): topics they are a member of now
    DELETE_MEMBERSHIPS: str  # (tenant, user_id): every membership row of theirs
    SELECT_EVENTS_NAMING: str  # (tenant, like, like): events whose params or subject match
    SET_EVENT_TEXT: str  # (params, subject, seq)
    SELECT_EVENT_MADE: str  # (tenant, event_id): its notifications' ids and params
    SET_PARAMS: str  # (params, id)
    SELECT_DONE_PAYLOADS: str  # (notification_id): frozen messages of steps that are done
    SET_PAYLOAD: str  # (payload, notification_id, step_no)
    SELECT_ITEM_TEXT: str  # (notification_id): its inbox item's seq, title and body
    SET_ITEM_TEXT: str  # (title, body, seq)
    RECORD_ERASURE: str  # (tenant, user_id, at)
    SELECT_ERASED: str  # (tenant, user_id) -> erased_at

    # --- accept, read, resolve
    SELECT_DEDUP: str  # (tenant, user_id, dedup_key) -> id, request_hash, kind, outcome
    INSERT_NOTIFICATION: str  # (id, tenant, user_id, kind, dedup_key, request_hash, params,
    #                             key_name, created_at, expires_at, send_at); nothing on a taken
    #                             dedup key
    INSERT_STEP: str  # (notification_id, step_no, channel, lane, send_after, state, reason,
    #                     note, updated_at, planned_at, cause, plan_note)
    SELECT_NOTIFICATION: str  # (id) -> every column
    SELECT_STEP_STATES: str  # (notification_id) -> channel, state, reason, by step
    SELECT_STEPS: str  # (notification_id) -> every column, and digest_id and held_at of its
    #                   digest item, by step
    SELECT_ATTEMPTS: str  # (notification_id) -> every column, by step and attempt
    SELECT_EVENTS: str  # (notification_id) -> step_no, at, what, in the order written
    INSERT_EVENT: str  # (notification_id, step_no, at, what)
    RESOLVE: str  # (resolved_at, resolution, resolved_by, id); only one not yet resolved
    SELECT_RESOLUTION: str  # (id) -> resolved_at, resolution, tenant, kind
    SELECT_DEPTH: str  # (notification_id) -> steps that had gone out
    CANCEL_PENDING: str  # (reason, at, notification_id): its pending and unknown steps

    # --- the delivery engine
    SELECT_LAPSED: str  # (now) -> notification_id, step_no of sending steps whose lease ended
    MARK_UNKNOWN: str  # (reason, send_after, at, notification_id, step_no); only if sending
    CLOSE_OPEN_ATTEMPTS: str  # (at, reason, notification_id, step_no) as unknown
    SELECT_DUE: str  # (channel, lane, now, limit) -> a due step with its notification, profile,
    #                  has_disabled and has_devices; none of whose siblings is sending
    END_STEP: str  # (state, reason, at, pref_version, notification_id, step_no)
    HOLD_ITEM: str  # (notification_id, step_no, tenant, user_id, digest_kind, window_end, at)
    COUNT_SENDS: str  # (since, tenant, user_id, kinds JSON, kinds JSON, channels JSON,
    #                    channels JSON) -> first attempts to the person since then ([]: any)
    POSTPONE_STEP: str  # (send_after, reason, at, notification_id, step_no)
    CLAIM_STEP: str  # (attempts, claim_token, lease_until, at, pref_version, notification_id,
    #                   step_no): sending; pref_version only if none yet
    FREEZE_STEP: str  # (destination, payload, template, at, notification_id, step_no,
    #                    claim_token); only while claimed by that token and never frozen
    INSERT_ATTEMPT: str  # (notification_id, step_no, attempt_no, claim_token, started_at)
    END_ATTEMPT: str  # (ended_at, outcome, reason, provider_ref, notification_id, step_no,
    #                   attempt_no)
    COMPLETE_STEP: str  # (state, reason, provider_ref, send_after, at, notification_id, step_no,
    #                      claim_token); only while claimed by that token
    SUPPRESS_SENT: str  # (channel_type, address, reason, evidence, at, notification_id): in the
    #                      notification's tenant; nothing if listed
    PULL_NEXT: str  # (at, note, updated_at, notification_id, at, notification_id, step_no) ->
    #                  step_no of the next pending step after step_no, moved to `at` if later
    SELECT_LATER_PENDING: str  # (notification_id, step_no) -> step_no, send_after, cause
    DELAY_STEP: str  # (send_after, note, at, notification_id, step_no)
    SELECT_NEXT_DUE: str  # (channel, lane) -> the earliest send_after of its open steps
    SELECT_LEASED: str  # () -> how many steps are sending, and the last lease end
    SELECT_DUE_TIMES: str  # (channel, lane, limit) -> its earliest distinct send_after, in order
    SELECT_FIRST_LEASE_END: str  # () -> the first lease end of a sending step
    SELECT_OPEN_DUE: str  # (notification_id) -> send_after, channel, lane of its open steps
    REPLAY_STEPS: str  # (at, reason, at, notification_id, step_no, step_no) -> step_no of each
    #                     dead or unknown step (step_no NULL: all) put back to pending
    SELECT_UNCONFIGURED: str  # (channels JSON) -> open steps on channels not in it
    WRITE_PROBE: str  # (at): rewrite one row

    # --- provider evidence and the suppression list
    INSERT_RECEIPT: str  # (provider, event_id, event, occurred_at, received_at, provider_ref,
    #                       step_key, message_id, address, channel_type, detail, nid, step,
    #                       tenant); nothing for a (provider, event_id) seen before
    PRUNE_WEBHOOK_TOKENS: str  # (provider, now, limit): up to limit of its tokens kept until
    #                             before now
    CLAIM_WEBHOOK_TOKEN: str  # (provider, token, seen_at, until, edge): 1 row changed if the
    #                            token is new, or was kept only until before edge; else 0
    STEP_BY_REF: str  # (provider_ref) -> notification_id, step_no
    SELECT_RECEIPT_STEP: str  # (notification_id, step_no) -> state, evidence, channel,
    #                            destination, kind, tenant, resolved_at
    MATCH_RECEIPT: str  # (notification_id, step_no, provider, event_id)
    SET_EVIDENCE: str  # (evidence, notification_id, step_no)
    SELECT_ORPHANS: str  # (provider_ref, notification_id) -> unmatched receipts that name it
    #                       and may match that notification's tenant
    SELECT_RECEIPTS: str  # (notification_id) -> step_no, provider, event, occurred_at,
    #                        received_at, detail
    COUNT_ORPHANS: str
    SUPPRESS: str  # (tenant, channel_type, address, reason, source, evidence, at); nothing if
    #                 listed
    UNSUPPRESS: str  # (tenant, channel_type, address)
    SELECT_SUPPRESSIONS: str  # {tenant, address, hashed, limit} -> the list (an address, or its
    #                           hashed form), with dead devices as push
    SELECT_DEAD_COUNT: str
    SELECT_DEAD: str  # (limit) -> dead steps, newest first
    SELECT_DEAD_MATCHING: str  # {since, until, channel, kind, tenant, at, nid, step, limit} ->
    #   notification_id, step_no, updated_at, expires_at of dead steps that ended in [since,
    #   until), on the channel and of the kind (NULL: any), after (at, nid, step) in
    #   (updated_at, notification_id, step_no) order
    COUNT_DEAD_MATCHING: str  # {since, until, channel, kind, tenant} -> how many of those
    #   (tenant NULL: any, as above)
    SELECT_DEAD_OF: str  # {tenant, limit} -> notification_id, step_no, channel, kind, user_id,
    #                      state, attempts, reason, updated_at of the tenant's dead steps, newest
    #                      first
    SELECT_UNKNOWN_OF: str  # {tenant, limit} -> the same of its unknown steps
    SELECT_NOTIFICATIONS_OF: str  # {tenant, user_id, limit} -> id, kind, dedup_key, created_at,
    #                               resolution, resolved_at, pruned_at, newest first

    # --- the inbox
    INSERT_INBOX: str  # (tenant, user_id, notification_id, kind, title, body, at) -> seq,
    #                     growing in commit order
    BUMP_BADGE: str  # (tenant, user_id, by, by) -> unread, never below zero
    SELECT_BADGE: str  # (tenant, user_id) -> unread
    COUNT_UNREAD: str  # (tenant, user_id) -> unread items counted from the rows
    # "kinds" below is two arguments: every kind (a bool), else the kinds as a JSON list
    COUNT_UNREAD_OF_KINDS: str  # (tenant, user_id, kinds) -> as COUNT_UNREAD, of those kinds
    SET_BADGE: str  # (tenant, user_id, unread)
    DRIFTED_BADGES: str  # () -> tenant, user_id, kept, actual for every person with items
    SELECT_INBOX_PAGE: str  # (tenant, user_id, created_at, id, archived too, kinds, limit),
    #                         newest first
    SELECT_INBOX_SINCE: str  # (tenant, user_id, seq, limit), by seq
    SELECT_INBOX_ITEM: str  # (tenant, user_id, notification_id)
    READ_ITEM: str  # (at, tenant, user_id, id) -> whether it counted in the badge; if unread
    READ_ITEM_OF: str  # (at, notification_id) -> tenant, user_id, counted (in the badge); if
    #                    unread
    ARCHIVE_ITEM: str  # (at, tenant, user_id, id) -> whether it was unread; if not archived
    READ_ALL: str  # (at, tenant, user_id, kinds) -> notification_id, kind, counted (in the badge:
    #                not archived) of each item it read

    # --- digests
    SELECT_DUE_DIGESTS: str  # (now, limit) -> tenant, user_id, digest_kind, window_end, count
    SELECT_DIGEST_MEMBERS: str  # (tenant, user_id, digest_kind, window_end) -> the held items
    MARK_DIGESTED_ITEM: str  # (digest_id, notification_id, step_no)
    MARK_DIGESTED_STEP: str  # (at, notification_id, step_no): a held step carried
    ROLL_DIGEST: str  # (new window_end, tenant, user_id, digest_kind, window_end)
    NEXT_DIGEST: str  # () -> the earliest window_end of items still held

    # --- retention: what ages out, oldest first, a batch at a time
    SELECT_AGED_LIVE: str  # (after id, before id, limit) -> id, resolved_at, resolution,
    #                         expires_at, open (its open steps), held (its items still held for
    #                         a digest), of notifications whose history is kept, by id
    SELECT_OPEN_OF: str  # (ids JSON) -> id of each with a step open or an item held
    SELECT_STEPS_OF: str  # (ids as a JSON list) -> notification_id, channel, state, evidence,
    # reason
    DELETE_ATTEMPTS: str  # (notification_id)
    DELETE_EVENTS: str  # (notification_id)
    DELETE_DIGEST_ITEMS: str  # (notification_id)
    DELETE_STEPS: str  # (notification_id)
    BLANK_RECEIPTS: str  # (notification_id): the receipts' addresses and details cleared
    KEEP_IDENTITY: str  # (pruned_at, outcome, id): params cleared, the identity kept
    SELECT_AGED_IDS: str  # (after id, before id, limit) -> id, pruned_at, by id
    DELETE_IDENTITY: str  # (id); only one whose history was pruned
    DELETE_AGED_RECEIPTS: str  # (before, limit): the oldest received, at most limit
    SELECT_AGED_DONE_INBOX: str  # (before, limit) -> seq of items read or archived before
    SELECT_OLDEST_INBOX: str  # (limit) -> seq, tenant, user_id, created_at, unread, by seq
    DELETE_INBOX_ITEM: str  # (seq)
    COUNT_AGED_LIVE: str  # (before id) -> notifications whose history could go now
    COUNT_AGED_IDS: str  # (before id) -> identities that could go now
    COUNT_AGED_RECEIPTS: str  # (before)
    COUNT_AGED_DONE_INBOX: str  # (before)
    COUNT_OLD_INBOX: str  # (before created_at)
    COUNT_ROWS: str  # () -> class, rows, oldest (epoch ms, or an id to read the time from)

    # --- events and their fan-out (an event's row is its routing job: audience and cursor)
    INSERT_FANOUT_EVENT: str  # (tenant, event_id, type, subject, params, kinds, request_hash,
    #   key_name, audience, topic, version, cutoff, users, size, accepted_at, send_at): cursor '', routed
    #   0; nothing if (tenant, event_id) is taken
    SELECT_FANOUT_EVENT: str  # (tenant, event_id) -> every column; locks it (in a script)
    GET_FANOUT_EVENT: str  # the same read without the lock, for a status read
    SELECT_ROUTING: str  # (limit) -> every column but users of events still routing, in
    #                      acceptance order
    SELECT_BACKLOG: str  # () -> events still routing, the earliest accepted_at of them
    ADVANCE_EVENT: str  # (cursor, recipients, routed_at or NULL, tenant, event_id); only while
    #                     routing
    COUNT_EVERYONE: str  # (tenant, at) -> recipients made before `at`
    SELECT_MADE_AT: str  # (tenant, at) -> user_id of the recipients made at `at`
    SELECT_EVERYONE: str  # (tenant, after, cutoff, cutoff, users JSON, limit) -> user_id of
    #   recipients made before the cutoff or listed, after `after`, by user_id
    SELECT_TOPIC_AUDIENCE: str  # (tenant, topic, after, version, version, limit) -> user_id of
    #   the topic's members at that version after `after`, by user_id
    MARK_EVENT: str  # (event_id, ids JSON): the notifications made for the event
    COUNT_EVENT_STATES: str  # (tenant, event_id) -> state, reason (suppressed: the reason
    #   class of its steps), n: the event's notifications by how they stand
    SELECT_EVENT_PAGE: str  # (tenant, event_id, user_id, id, limit) -> every column of the
    #   event's notifications after (user_id, id), in that order
    SELECT_STEPS_OF_MANY: str  # (ids JSON) -> what SELECT_STEPS reads, of their steps, by id
    #                           and step

    # --- topics: membership rows open from added_version until removed_version
    SELECT_TOPIC: str  # (tenant, name) -> every column
    INSERT_TOPIC: str  # (tenant, name, self_service, at, at): version 0, no members
    UPDATE_TOPIC: str  # (self_service, at, at, tenant, name): a deleted one made again
    SET_TOPIC_VERSION: str  # (version, members added, at, tenant, name)
    DELETE_TOPIC: str  # (at, at, tenant, name); only one with no members, not yet deleted
    ADD_MEMBER: str  # (tenant, topic, user_id, version, at); nothing if a member now
    REMOVE_MEMBER: str  # (version, at, tenant, topic, user_id): the open row closed, if any
    SELECT_MEMBERS: str  # (tenant, topic, after, limit) -> user_id, added_at of members now
    SELECT_FOLLOWING: str  # (tenant, user_id) -> topic, self_service, added_at of each topic the
    #   person is a member of now

    # --- retention of events and memberships
    SELECT_AGED_EVENTS: str  # (before, limit) -> seq of routed events accepted before
    DELETE_FANOUT_EVENT: str  # (seq)
    COUNT_AGED_EVENTS: str  # (before)
    SELECT_AGED_MEMBERS: str  # (before, limit) -> tenant, topic, user_id, added_version of rows
    #   closed before `before` that no event still routing needs, oldest first
    DELETE_MEMBER_ROW: str  # (tenant, topic, user_id, added_version)
    COUNT_AGED_MEMBERS: str  # (before)


class RowLocks(Protocol):
    """Writers of several processes run at once: each lock is held until the commit of the
    transaction that took it."""

    LOCK_NOTIFICATION: str  # (notification_id): its row, as a claim, a resolution or a
    #   receipt locks it, taken before a script that may wait for it reads its time
    LOCK_REF: str  # (provider_ref): a provider's message id, taken by the send's answer that
    #   names it and by a receipt about it before either reads, so one always sees the other
    LOCK_PERSON: str  # (tenant, user_id) -> false if another transaction holds the person:
    #   a send limit's count is read after it, so two claims never both take the last send
    LOCK_PROFILE: str  # (tenant, user_id): the person's profile, taken before a change reads
    #   it (a patch, preferences under If-Match, an erasure), so two changes never lose one
    LOCK_UNREAD: str  # (tenant, user_id, kinds, stop kinds): the open notifications of the
    #   person's unread items of the kinds (OF_KINDS) that stop when read (a JSON list), taken
    #   before reading them all reads its time
    LOCK_INBOX: str  # (tenant, user_id): the person's inbox sequence, taken before an item's
    #   seq, so a person's seqs grow in commit order (a stream resuming after one skips none)


class SharedBuckets(Protocol):
    """A channel's rate is the deployment's: one bucket row, shared by every process."""

    TAKE_TOKENS: str  # (channel, rate_per_sec, burst, now) -> tokens (refilled since last, the
    #   bucket locked until the commit; NULL while another transaction holds it), kept (there
    #   is a bucket)
    MAKE_BUCKET: str  # (channel, burst, now) -> tokens of the new, full bucket; NULL: made
    #   by another meanwhile
    SPEND_TOKENS: str  # (n, channel) -> tokens left after n were taken


class Notifies(Protocol):
    """Signals to the other processes on the database, sent at commit."""

    NOTIFY_DUE: str  # (at): a step is due at `at` (an accept): another process's scanner wakes
    NOTIFY_INBOX: str  # (tenant, user_id, seq): an inbox item was committed: streams read it


class JoinedWrites(Protocol):
    """One statement changes the rows of two tables (a data-modifying WITH): on the claim's and
    the completion's paths, a statement fewer for the server and the writer."""

    CLAIM_ATTEMPT: str  # (attempts, claim_token, lease_until, at, pref_version, notification_id,
    #   step_no): CLAIM_STEP and INSERT_ATTEMPT of that attempt (attempt_no = attempts, started
    #   at `at`), in one
    COMPLETE_ATTEMPT: str  # {at, outcome, state, reason, ref, retry_at, nid, no, attempt, token}:
    #   END_ATTEMPT (ended_at, outcome, reason, provider_ref, attempt_no) and COMPLETE_STEP
    #   (state, reason, provider_ref, send_after, updated_at, claim_token), in one; the count
    #   is COMPLETE_STEP's


@dataclass(frozen=True)
class Features:
    """What a dialect can do beyond what every dialect does, as Django's backends declare it:
    each flag is the feature's statements where the dialect has it, None where it has not, so a
    script tests the flag before it reaches them (mypy sees to it), and a dialect without the
    feature writes none of them."""

    row_locks: RowLocks | None = None  # writers of several processes run at once
    shared_buckets: SharedBuckets | None = None  # one rate bucket per channel for them all
    notifies: Notifies | None = None  # other processes hear an accept when it commits
    joined_writes: JoinedWrites | None = None  # one statement writes two tables


# === the shared words ==========================================================================


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
