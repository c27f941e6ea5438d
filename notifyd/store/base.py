"""The store interface, by role, and what each operation needs of its backend.

Every backend is `store.core.CoreStore` over a dialect (store/sqlite/, ...) and passes the one
contract suite (tests/contract/test_store_contract.py), whose concurrency section races two
store instances over one database. The store holds no policy: the rules come in as `Rules`
(the compiled catalog and the domain's pure decisions) and the ladder as a `PlanFn`.

Callers hold roles: each module above the store names the narrowest role it calls (or a
combination of roles, declared as a Protocol where it is used), so mypy proves it needs no more
and a test's stand-in need only be that role. `Store`, every role at once, is held by the
composition root alone (tests/unit/test_store_roles.py keeps it so).

Isolation, in the words each method uses:
- *one write*: the method is one transaction; it commits whole or not at all, and it answers
  only after its commit is durable.
- *serialized with X*: of two such transactions on the same rows, one sees everything the
  other committed; neither reads a state the other is halfway through. SQLite gets this from
  its single writer (BEGIN IMMEDIATE); a backend with concurrent writers must lock the rows it
  reads before deciding (for example SELECT ... FOR UPDATE on the notification).
- *times*: every time a write records is its transaction's own (`tx.now`), so rows' times
  agree with their commit order.
Reads are single statements that see every commit that answered before they began, unless said.
Times are epoch milliseconds.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from notifyd.core.events import (
    Backlog,
    Counts,
    EventAccepted,
    EventInput,
    EventRecord,
    Following,
    KindRoute,
    Member,
    MembersChanged,
    Routed,
    Topic,
    TopicGone,
)
from notifyd.core.models import (
    SCOPES,
    AcceptInput,
    AcceptResult,
    ApiKey,
    Budget,
    Claim,
    Claimed,
    Completion,
    Decided,
    DecideFn,
    Device,
    Due,
    DueTimes,
    Freeze,
    FreezeFn,
    Leases,
    Nonce,
    PlanFn,
    PreferencesEdit,
    Receipt,
    Recipient,
    RecipientEdit,
    Recorded,
    ResolveResult,
    Route,
    Rules,
    Want,
)
from notifyd.core.records import (
    Acceptance,
    Aged,
    Cursor,
    DeadLetter,
    DeadMatch,
    DeadStep,
    DigestDue,
    DigestMember,
    Erased,
    Hours,
    InboxChange,
    InboxEntry,
    InboxItem,
    KeyRecord,
    Listed,
    Notification,
    Pruned,
    SigningKey,
    Storage,
    Stuck,
    Suppression,
    TenantRecord,
)
from notifyd.core.steps import StepKey


class StoreClosed(Exception):
    pass


class StoreUnavailable(Exception):
    """The store cannot be opened; the message names the file or URL and what to do."""


class StoreMissing(StoreUnavailable):
    """Opened without create, and there is no database there."""


class StoreLocked(StoreUnavailable):
    """Another daemon holds this database, and the backend allows only one."""


class StorageError(Exception):
    """The storage cannot take writes now (disk full, I/O error, read-only, the file gone); the
    message says which. Nothing was written; the caller may retry later."""


class Overloaded(Exception):
    """Too many writes are waiting; this one was refused rather than queued. Retry shortly."""


Inbox = InboxEntry | None  # what the inbox item says, for a kind with an inbox


class KeyStore(Protocol):
    """Tenants, API keys (stored as hashes), the keys that sign links and user tokens, and the
    console sessions signed out before their expiry."""

    async def create_tenant(self, name: str) -> bool:
        """One write: the tenant made; False if it was there. Nothing else makes one."""
        ...

    async def tenants(self) -> list[TenantRecord]:
        """Every tenant, by name."""
        ...

    async def find_tenant(self, name: str) -> TenantRecord | None: ...

    async def create_key(self, key_hash: str, name: str, tenant: str, kinds: tuple[str, ...],
                         scopes: frozenset[str] = SCOPES) -> None:
        """One write; a name or hash already taken fails it."""
        ...

    async def find_key(self, key_hash: str) -> ApiKey | None:
        """The key if it exists and is not revoked."""
        ...

    async def list_keys(self) -> list[KeyRecord]: ...

    async def find_key_named(self, name: str) -> KeyRecord | None:
        """The key of that name, revoked or not."""
        ...

    async def revoke_key(self, name: str) -> bool:
        """One write; False if there was no such key, or it was revoked already."""
        ...

    async def mark_key_used(self, key_hash: str) -> None:
        """One write: the key was used now (the transaction's time); a daemon calls it at
        most once a minute per key."""
        ...

    async def signing_key(self, name: str) -> bytes:
        """One write: the named key (the one that signs now), made (32 random bytes) the first
        time; two processes asking at once get the same key."""
        ...

    async def find_signing_key(self, name: str) -> SigningKey | None:
        """The named key if it was made, with the one a rotation replaced; never makes one."""
        ...

    async def rotate_signing_key(self, name: str, overlap_ms: int) -> SigningKey:
        """One write: a new key (32 random bytes) signs from now; the one it replaces still
        verifies for `overlap_ms` after this write's time, and one replaced before it is gone
        at once. A key never made is just made."""
        ...

    async def end_session(self, nonce: str, until: int) -> None:
        """One write: the console session of this nonce is over (signed out) although its
        cookie verifies until `until` (epoch ms); those past their `until` go."""
        ...

    async def session_ended(self, nonce: str) -> bool:
        """Whether the console session of this nonce was ended (end_session); read by every
        process, so a sign-out holds in all of them at once."""
        ...


class ProfileStore(Protocol):
    """A person's profile as the engine reads it: to plan a ladder, render in their locale, make
    a digest or warn of a replay the claim will suppress."""

    async def get_recipient(self, tenant: str, user_id: str) -> Recipient | None:
        """The profile, its disabled contacts and devices; None if the user has none of them."""
        ...

    async def locale_of(self, tenant: str, user_id: str) -> str | None: ...


class RecipientStore(ProfileStore, Protocol):
    """People: profiles, devices and preferences written, and erasing a person."""

    async def erase_user(self, tenant: str, user_id: str, by: str) -> Erased:
        """One write, serialized with claim_due and with every write of the person's rows:
        their profile, contacts, preferences, devices, inbox items and badge deleted; their
        notifications still open resolved "erased" by `by` (pending steps and items held for
        a digest cancelled), so a claim after it never sends; every notification of theirs
        keeps its identity but loses its params, its steps' destinations and frozen messages
        (a step in flight keeps '{}', so no freeze fills it again) and its receipts' addresses.
        A suppression of one of their addresses is kept as its hashed_address unless another
        person of the tenant ('*': of any tenant) still has the address; a profile naming the
        address again (put_recipient, edit_recipient) turns it back in its own write. The time
        is kept for erased_at. Erasing again does it again (counting what was left)."""
        ...

    async def erased_at(self, tenant: str, user_id: str) -> int | None:
        """When the person was last erased, if ever: user tokens made before it are refused."""
        ...

    async def put_recipient(self, r: Recipient) -> None:
        """One write: the profile replaced. A disabled address stays disabled and counts again
        only if the person's address goes back to it (one an erasure hashed included)."""
        ...

    async def edit_recipient(self, tenant: str, user_id: str, edit: RecipientEdit) -> None:
        """One write: `edit` gets the profile as this write reads it (None: none yet), and the
        profile it returns replaces it, so two edits at once both hold. A DomainError `edit`
        raises writes nothing and is raised here."""
        ...

    async def put_device(self, tenant: str, user_id: str, device: Device) -> None:
        """One write: registered (again: the same endpoint is the same device, live once more)."""
        ...

    async def delete_device(self, tenant: str, user_id: str, device_id: str) -> bool: ...

    async def put_preferences(self, tenant: str, user_id: str, preferences: dict[str, Any],
                              version: int | None = None, hours: Hours | None = None
                              ) -> int | None:
        """One write, serialized with claim_due: the new preference version. A claim that
        commits after it reads the new preferences; one before it records the old version.
        With `version`, written only over that version (0: none chosen yet), else None and
        nothing written: two pages saving what each showed never overwrite each other. With
        `hours`, the time zone and quiet hours change in the same write."""
        ...

    async def edit_preferences(self, tenant: str, user_id: str, edit: PreferencesEdit,
                               if_match: frozenset[int] | None = None,
                               hours: Hours | None = None) -> tuple[int, bool]:
        """One write, as put_preferences: `edit` gets the person as this write reads them and
        returns their new preferences, written as a new version; with `if_match`, only if the
        version it reads is one of those (else nothing is written); with `hours`, the time
        zone and quiet hours too. (The version now, whether this wrote it.) A DomainError
        `edit` raises writes nothing and is raised here."""
        ...


class IntakeStore(Protocol):
    """The write path in: a notification accepted with its whole ladder, alone or in a batch."""

    async def accept(self, inp: AcceptInput, notification_id: str, plan: PlanFn, ttl_sec: int,
                     inbox_item: Inbox = None) -> AcceptResult:
        """One write: the dedup key claimed and the notification written with its whole ladder
        (and its inbox item and badge), or what already holds the key. `plan` runs inside, on
        the recipient as this transaction reads it, at its time. Two accepts of one key make
        one notification (a unique index decides). The inbox item's seq grows in commit order:
        an item committed later has a larger seq, so a stream resuming after a seq misses none.
        A request's send_at later than this time starts the ladder and the time to live then.
        May raise Overloaded before anything is written."""
        ...

    async def accept_many(self, items: list[Acceptance]) -> list[AcceptResult]:
        """One write holding every item, each exactly as `accept` alone (in order: a dedup key
        twice in `items` makes one notification, the second a retry or a conflict); an answer
        per item, all after the one commit. May raise Overloaded before anything is written:
        the batch waits as one write."""
        ...


class ClaimStore(Protocol):
    """What the scanner does to due steps: claim them under a lease, take over lapsed leases, end
    those of a channel gone, and learn when to look again."""

    async def claim_due(self, wants: list[Want], lease_ms: int, rules: Rules,
                        budget: Budget | None = None, freeze: FreezeFn | None = None
                        ) -> Claimed:
        """One write, serialized with every other write to the steps it reads: lapsed leases
        become unknown, then up to `n` due steps per (channel, lane), within the shared budget,
        are each judged by `rules.decide` on what this transaction reads (the resolution, the
        recipient, its preferences and suppressions, a sibling in flight, the sends that count
        against a limit) and leased when it says send; every other decision is applied here too
        and returned. Two claimers never lease one step twice nor two steps of one notification
        at once (promise 4), and sends counted against a limit include those claimed by any
        transaction that committed before. A claimed step never frozen that `freeze` renders
        is frozen in this transaction too (its claim returned with the message)."""
        ...

    async def lapse_leases(self) -> int:
        """One write: sending steps whose lease has ended become unknown (retried under the same
        key); a step within its lease is left alone, another process may be sending it."""
        ...

    async def leased(self) -> Leases:
        """How many steps are in flight under a lease, and when the last lease ends."""
        ...

    async def end_unconfigured(self, channels: list[str], decide: DecideFn) -> list[Decided]:
        """One write: open steps on channels not in `channels`, judged by `decide` as such."""
        ...

    def on_due(self, listener: Callable[[list[Due]], None] | None) -> None:
        """Tell `listener` (None: nobody) the due times each committed write made: a step
        created, retried, postponed, pulled forward, its window restarted, replayed, or its
        lease taken over, as (send_after, channel, lane); called on the event loop once per
        commit, before the writes in it are answered. Only this process's writes."""
        ...

    async def due_times(self, routes: list[Route], limit: int) -> DueTimes:
        """One consistent read: each route's earliest `limit` distinct send_after among its
        open steps (pending or unknown), and the first lease end of a step in flight."""
        ...


class SendStore(Protocol):
    """What the sender pool does to a claimed step: freeze its message, then complete it."""

    async def freeze(self, frozen: list[Freeze]) -> list[bool]:
        """One write: each message fixed on its step while its claim token is still the
        step's; True for each fixed. Nothing frozen is ever changed."""
        ...

    async def complete(self, claim: Claim, done: Completion, rules: Rules) -> bool:
        """One write: the attempt recorded, and `done` applied only while the claim token is
        the step's (False otherwise: a lease taken over). A sent step restarts the windows of
        the steps after it (`rules.windows`); receipts that arrived before this answer named
        its message are applied now."""
        ...


class LookupStore(Protocol):
    """Notifications found: by id or dedup key, read whole, or a person's listed."""

    async def find_by_dedup(self, tenant: str, user_id: str, dedup_key: str) -> str | None: ...

    async def get_notification(self, notification_id: str) -> Notification | None:
        """The notification with its steps, attempts, moves and receipts, read in one snapshot
        so that they agree."""
        ...

    async def notifications_of(self, tenant: str, user_id: str, limit: int) -> list[Listed]:
        """Up to `limit` of the person's notifications, newest first (pruned ones too): one
        read."""
        ...


class ResolveStore(Protocol):
    """Resolutions written from outside: a notification no longer needs delivering."""

    async def resolve(self, notification_id: str, resolution: str, by: str,
                      tenant: str | None = None, kinds: tuple[str, ...] = (),
                      read_kinds: frozenset[str] = frozenset()) -> ResolveResult | None:
        """One write, serialized with claim_due on the notification: the first resolution wins
        (later calls report it unchanged) and cancels the open steps. A claim that commits
        after it never sends (promise 3). With `tenant` (and `kinds`), a notification outside
        them is not found (None) and nothing is written. A notification of a kind in
        `read_kinds` has its inbox item marked read (and the badge moved) in the same write."""
        ...

    async def resolve_keys(self, tenant: str, keys: list[tuple[str, str, str]], by: str,
                           kinds: tuple[str, ...] = (),
                           read_kinds: frozenset[str] = frozenset()
                           ) -> list[ResolveResult | None]:
        """One write: each (user_id, dedup_key, resolution) of `tenant` found and resolved as
        `resolve` does, in order, the lookup inside the write; None for a key that names
        nothing the tenant (and `kinds`) holds."""
        ...


class ReplayStore(Protocol):
    """Dead or unknown steps put back to pending under their key."""

    async def replay(self, notification_id: str, step_no: int | None,
                     by: str | None = None) -> int:
        """One write: dead or unknown steps (`step_no` None: all of them) back to pending under
        their original key and frozen payload, each move recorded naming `by` (who asked);
        how many."""
        ...

    async def replay_steps(self, steps: list[StepKey], by: str | None = None) -> int:
        """One write: each of `steps` that is dead or unknown back to pending, as `replay` puts
        one; how many. A bulk replay calls it once per short batch: the write holds the
        writer (and, on SQLite, the database) while it runs."""
        ...


class DeliveryStore(IntakeStore, ClaimStore, SendStore, LookupStore, ResolveStore, ReplayStore,
                    Protocol):
    """A notification's life: accepted, claimed, frozen, completed, resolved, replayed; each
    caller holds the one of these roles it uses."""


class DeadLetterStore(Protocol):
    """Steps that ended dead or unknown, as an operator reads them and a bulk replay pages
    them."""

    async def dead_letters(self, limit: int) -> list[DeadLetter]: ...

    async def dead_count(self, match: DeadMatch | None = None) -> int:
        """How many steps are dead (that `match`, when given)."""
        ...

    async def dead_steps(self, match: DeadMatch, after: DeadStep | None,
                         limit: int) -> list[DeadStep]:
        """Up to `limit` dead steps that `match`, in the order they died, then by key, after
        `after` (None: from the first): one read. Paging on while the steps of earlier pages
        are replayed neither skips nor repeats one."""
        ...

    async def stuck_steps(self, tenant: str, state: str, limit: int) -> list[Stuck]:
        """Up to `limit` of the tenant's steps in `state` ("dead" or "unknown"), the latest
        to get there first: one read."""
        ...


class ReceiptStore(Protocol):
    """Provider evidence, stored and applied before the provider is answered."""

    async def record_receipts(self, receipts: list[Receipt], rules: Rules,
                              once: Nonce | None = None) -> list[Recorded]:
        """One write, before the provider is answered, serialized with claim_due and complete:
        each receipt stored once ('duplicate' if its (provider, event_id) was), matched to its
        step (one of its tenant's, when it names one) and applied as `rules.judge` says
        ('applied'), or kept until its send's answer names it ('orphan'). A delivery that
        resolves a stop = "delivered" kind beats a later claim; a claim that committed first is
        answered by resolving what is left. With `once`, the request's one-time token is kept
        until its `until` in the same write; a token kept already (by any process, before any
        restart) makes it [REPLAYED] and stores nothing."""
        ...


class SuppressionStore(Protocol):
    """The suppression list: addresses that must not be sent to."""

    async def suppress(self, tenant: str, channel_type: str, address: str, reason: str,
                       source: str) -> bool:
        """One write: the address on the tenant's list ('push': the device dead); False if it
        was there."""
        ...

    async def unsuppress(self, tenant: str, channel_type: str, address: str) -> bool:
        """One write: the address off the tenant's list, in its plain and its hashed form."""
        ...

    async def suppressions(self, tenant: str, address: str | None = None,
                           limit: int = 1000) -> list[Suppression]:
        """The tenant's list with the account-wide one, newest first; with `address`, its
        entries (one an erasure keeps hashed too, shown as its hashed_address)."""
        ...


class InboxStore(Protocol):
    """The person's inbox and its unread badge."""

    async def inbox_page(self, tenant: str, user_id: str, before: Cursor | None,
                         limit: int, archived: bool = False,
                         kinds: tuple[str, ...] = ()) -> list[InboxItem]:
        """Newest first, strictly before the cursor. `kinds`, here and below: only items of
        these kinds are seen or changed (none named: every kind)."""
        ...

    async def inbox_since(self, tenant: str, user_id: str, seq: int,
                          limit: int) -> list[InboxItem]:
        """Items after `seq`, in seq order: what a resuming stream missed."""
        ...

    async def badge(self, tenant: str, user_id: str, kinds: tuple[str, ...] = ()) -> int: ...

    async def read_item(self, tenant: str, user_id: str, item_id: str,
                        stop_on_read: frozenset[str],
                        kinds: tuple[str, ...] = ()) -> InboxChange | None:
        """One write: the item read, the badge moved, and a kind that stops when read resolved
        (serialized with claim_due, as resolve). None: no such item of this person's."""
        ...

    async def read_all(self, tenant: str, user_id: str, stop_on_read: frozenset[str],
                       kinds: tuple[str, ...] = ()) -> InboxChange: ...

    async def archive_item(self, tenant: str, user_id: str, item_id: str,
                           kinds: tuple[str, ...] = ()) -> InboxChange | None: ...

    async def rebuild_badges(self) -> int:
        """One write: every badge recounted from the items; how many had drifted."""
        ...


class DigestStore(Protocol):
    """Items held back for a person's digest, and the digests made of them."""

    async def due_digests(self, now: int, limit: int) -> list[DigestDue]: ...

    async def digest_members(self, due: DigestDue) -> list[DigestMember]: ...

    async def make_digest(self, due: DigestDue, inp: AcceptInput, notification_id: str,
                          plan: PlanFn, ttl_sec: int, inbox_item: Inbox,
                          members: list[StepKey], rollover: int) -> AcceptResult:
        """One write: the digest accepted as any notification and `members` marked carried by
        it, so a rebuild can never notify them again; items held for the same window since
        `members` were read move to the window ending at `rollover`."""
        ...

    async def next_digest_at(self) -> int | None: ...


class OperationsStore(Protocol):
    """Lifecycle: opened, closed, backed up, and the other processes' signals heard."""

    url: str  # where it keeps its data, for log lines (never holding a secret)

    async def open(self, create: bool = True, check: bool = False) -> None:
        """Open (creating unless create=False); with check=True, a damaged store is refused."""
        ...

    async def close(self) -> None: ...

    async def backup(self, dest: str) -> None:
        """A consistent copy at `dest`, made beside the running daemon."""
        ...

    @property
    def shared(self) -> bool:
        """Other processes may write the same database (PostgreSQL): what they commit reaches
        this one only through `watch` and the rows."""
        ...

    async def watch(self, due: Callable[[int], None], inbox: Callable[[str, str], None],
                    stop: asyncio.Event) -> None:
        """Until `stop`: call `due(at)` when another process accepts a step due at `at`, and
        `inbox(tenant, user_id)` when it commits an item to that person's inbox. Returns at
        once where no other process writes (SQLite); a lost signal is found by the poll."""
        ...


class MonitorStore(Protocol):
    """What health and metrics read: whether the store takes writes, what went wrong with the
    storage, and the backlogs (due steps, orphan receipts, events routing)."""

    async def ping(self) -> None:
        """Return once the store has committed a write: it can take writes now."""
        ...

    @property
    def fault(self) -> str | None:
        """What recently went wrong with the storage (disk full, file gone), if anything."""
        ...

    async def oldest_due(self, routes: list[Route]) -> dict[Route, int]:
        """The earliest send_after among open steps, per route that has any."""
        ...

    async def orphan_count(self) -> int: ...

    async def routing_backlog(self) -> Backlog: ...


class RetentionStore(Protocol):
    """What ages out, and the space it leaves. Each prune is one short write of at most `limit`
    rows of one class, its window measured back from that write's own time; it decides on what
    it reads inside the write, so a notification with anything open (a step pending, in flight
    or unknown, an item held for a digest) keeps its history, and a claim, replay or digest that
    commits before the prune keeps it too."""

    async def prune(self, what: Aged, window_ms: int, after: str, limit: int) -> Pruned:
        """Remove up to `limit` of `what` older than `window_ms`, walking oldest first from
        `after` ("" for the start): a notification's history leaves its identity (id, tenant,
        user, dedup key, request hash, final state); identities, receipts and inbox items go
        whole (an unread inbox item's badge count with it)."""
        ...

    async def prunable(self, what: Aged, window_ms: int) -> int:
        """How many of `what` a prune would remove now (a read)."""
        ...

    async def storage(self, count: bool = True) -> Storage:
        """Bytes, free bytes, and rows and the oldest row per class (a read that counts every
        row); with count=False the sizes alone (rows and oldest empty), cheap at any size."""
        ...

    async def reclaim(self, max_bytes: int) -> int:
        """Give up to `max_bytes` of free space back to the file system; the bytes given."""
        ...

    async def compact(self) -> None:
        """Rebuild the whole database; only where no daemon uses it (it holds the database)."""
        ...

    async def tune_space(self) -> float | None:
        """Make the database give space back as rows go, once; seconds taken, or None."""
        ...


class TopicStore(Protocol):
    """Named audiences per tenant, their membership versioned: each change that adds or removes
    anyone is one write and one new version."""

    async def put_topic(self, tenant: str, name: str,
                        self_service: bool | None = None) -> tuple[Topic, bool]:
        """One write: the topic made (True) or its settings changed; `self_service` None keeps
        them (a new one: not self-service). A deleted topic made again keeps counting its
        versions on."""
        ...

    async def get_topic(self, tenant: str, name: str) -> Topic | None: ...

    async def delete_topic(self, tenant: str, name: str) -> TopicGone:
        """One write: only a topic with no members goes."""
        ...

    async def change_members(self, tenant: str, name: str, add: tuple[str, ...],
                             remove: tuple[str, ...],
                             only_self_service: bool = False) -> MembersChanged | None:
        """One write, serialized with accept_event: a new version if anyone was added or
        removed (a re-add after a removal is a membership of its own); None if there is no
        such topic; refused with `only_self_service` unless the topic is self-service, as this
        transaction reads it."""
        ...

    async def topic_members(self, tenant: str, name: str, after: str,
                            limit: int) -> list[Member]:
        """Members now, by user_id, after `after` (a cursor: the last user_id of a page)."""
        ...

    async def following(self, tenant: str, user_id: str) -> list[Following]:
        """The topics the person is a member of now, by name."""
        ...


class EventStore(Protocol):
    """Events and their fan-out: an event is accepted with its routing job in one write, then
    routed a chunk per write."""

    async def accept_event(self, inp: EventInput, most: int | None = None) -> EventAccepted:
        """One write, serialized with change_members: the event with its audience frozen (a
        topic's version as this transaction reads it; everyone: the recipients this
        transaction sees, by a cutoff at its own time; or the list) and its cursor, or what
        already holds its id; nothing if its topic does not exist, or if its audience is
        larger than `most` (its tenant's quota: EventAccepted.over)."""
        ...

    async def get_event(self, tenant: str, event_id: str) -> EventRecord | None: ...

    async def routing_events(self, limit: int) -> list[EventRecord]:
        """Up to `limit` events still routing, in acceptance order."""
        ...

    async def route_chunk(self, tenant: str, event_id: str, routes: Mapping[str, KindRoute],
                          limit: int) -> Routed:
        """One write: the next `limit` recipients after the cursor under the frozen audience,
        for each a notification of each kind in `routes` accepted as `accept` writes one (its
        dedup key derived from the event, its ladder planned on the recipient as this
        transaction reads it), and the cursor moved past them; the event is routed once the
        audience is exhausted. Run again after a crash, a chunk creates nothing twice."""
        ...

    async def event_counts(self, tenant: str, event_id: str) -> Counts:
        """The event's notifications by how each stands (state, and for one whose every step
        was suppressed the reason class), read in one statement."""
        ...

    async def event_notifications(self, tenant: str, event_id: str, after: tuple[str, str],
                                  limit: int) -> list[Notification]:
        """The event's notifications with their steps, by (user_id, id) after `after`."""
        ...


class Store(KeyStore, RecipientStore, DeliveryStore, DeadLetterStore, ReceiptStore,
            SuppressionStore, InboxStore, DigestStore, RetentionStore, OperationsStore,
            MonitorStore, TopicStore, EventStore, Protocol):
    """Everything a daemon needs of its database. Only the composition root (daemon/), the
    command line's store for one command (cli/base.with_store) and the store itself hold it
    whole; everything else holds the roles it uses (tests/unit/test_store_roles.py)."""
