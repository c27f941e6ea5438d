"""The statements every dialect names, and what each must do. A dialect is a module of constants
with these names: the shared ones written once (store/core/sql.py), and its own where it says
them its own way (store/sqlite/queries.py, store/postgres/queries.py); the core's scripts use
them through `tx.q` and never write SQL. Times are epoch milliseconds; arguments are
positional, in the order each line gives.

What only some dialects can do is a feature, named in `Features` with the statements it needs:
a dialect without it writes none of them, and a script reaches them only through the flag.
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

    def next_due_sql(self, pairs: int) -> str:
        """(channel, lane) * pairs -> the earliest time the scanner has work: a due step of
        those pairs none of whose siblings is sending, or a lease's end."""
        ...

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


@dataclass(frozen=True)
class Features:
    """What a dialect can do beyond what every dialect does, as Django's backends declare it:
    each flag is the feature's statements where the dialect has it, None where it has not, so a
    script tests the flag before it reaches them (mypy sees to it), and a dialect without the
    feature writes none of them."""

    row_locks: RowLocks | None = None  # writers of several processes run at once
    shared_buckets: SharedBuckets | None = None  # one rate bucket per channel for them all
    notifies: Notifies | None = None  # other processes hear an accept when it commits
