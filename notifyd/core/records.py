"""What the store hands back: a notification with its steps, attempts, moves and receipts, and
the other rows people read (keys, inbox items, digests, suppressions, dead letters). Plain,
frozen records; the store builds them, everything else reads them. Times are epoch ms."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from notifyd.core.models import (
    AcceptInput,
    Lane,
    Outcome,
    PlanFn,
    StepState,
    by_choice,
    current_state,
)
from notifyd.core.steps import AT_ACCEPT, Cause, StepKey


@dataclass(frozen=True, slots=True)
class Attempt:
    notification_id: str
    step_no: int
    attempt_no: int
    claim_token: str
    started_at: int
    ended_at: int | None
    outcome: Outcome | None  # once ended
    reason: str | None
    provider_ref: str | None


@dataclass(frozen=True, slots=True)
class Step:
    notification_id: str
    step_no: int
    channel: str
    lane: Lane
    send_after: int
    state: StepState
    attempts: int
    reason: str | None  # why it ended as it did, or why it waits
    note: str | None  # how send_after was decided (quiet hours, pulled forward)
    provider_ref: str | None
    destination: str | None  # frozen before the first provider call
    payload: str | None  # frozen before the first provider call (JSON text)
    claim_token: str | None
    lease_until: int | None
    updated_at: int
    retry_base: int
    attempt_log: tuple[Attempt, ...] = ()
    planned_at: int | None = None  # send_after as planned at accept (None: before migration 3)
    cause: Cause = AT_ACCEPT  # why it was planned due then
    template: str | None = None  # kind/locale/medium@version its message was rendered from
    evidence: str | None = None  # the strongest good evidence: accepted < delivered < shown < opened
    pref_version: int | None = None  # the preference version the claim read when it decided
    plan_note: str | None = None  # what planning said of its time (quiet hours), never rewritten
    digest_id: str | None = None  # the digest notification that carried it (state digested)
    held_at: int | None = None  # when it was held for a digest, if it was


@dataclass(frozen=True, slots=True)
class Event:
    """A move of a step after it was planned (postponed, pulled forward, replayed), as it
    happened."""

    step_no: int
    at: int
    what: str


@dataclass(frozen=True, slots=True)
class Proof:
    """A provider's receipt about one of the notification's steps, as stored."""

    step_no: int
    provider: str
    event: str
    occurred_at: int | None
    received_at: int
    detail: str | None


@dataclass(frozen=True, slots=True)
class Notification:
    id: str
    tenant: str
    user_id: str
    kind: str
    dedup_key: str | None
    request_hash: str
    params: dict[str, Any]
    key_name: str
    created_at: int
    expires_at: int
    resolved_at: int | None
    resolution: str | None
    resolved_by: str | None
    steps: tuple[Step, ...] = ()
    events: tuple[Event, ...] = ()
    proofs: tuple[Proof, ...] = ()  # provider evidence, as it came
    pruned_at: int | None = None  # when its history aged out: its identity is what is left
    outcome: str | None = None  # the state it ended in, kept when its history went
    send_at: int | None = None  # a scheduled one: when its ladder started (or starts)
    event_id: str | None = None  # the event it was made for (POST /v1/events), if any

    @property
    def state(self) -> str:
        return self.state_at(0)

    def state_at(self, now: int) -> str:
        """current_state at `now`: past the time to live, an unproven send is presumed. Once
        its history has been pruned, the state it ended in."""
        if self.outcome is not None:
            return self.outcome
        proven = any(s.evidence in ("delivered", "shown", "opened") for s in self.steps)
        chosen = any(s.state is StepState.SUPPRESSED and by_choice(s.reason) for s in self.steps)
        return current_state(self.resolved_at is not None,
                             ((s.channel, s.state) for s in self.steps), self.resolution,
                             proven, expired=now >= self.expires_at > 0 and now > 0,
                             chosen=chosen)


@dataclass(frozen=True, slots=True)
class Erased:
    """What erasing a person removed, cancelled, scrubbed and kept one-way (store.erase_user)."""

    erased_at: int
    profile: bool  # their profile (contacts, timezone, locale, quiet hours) was there
    preferences: bool  # they had chosen preferences
    devices: int
    inbox_items: int
    cancelled: int  # notifications still open, resolved "erased"
    cancelled_steps: int  # their steps that had not gone, and items held for a digest
    params: int  # notifications whose params were emptied
    payloads: int  # steps whose destination and frozen message were cleared
    receipts: int  # receipts whose address and detail were cleared
    hashed: int  # suppressions of their addresses now kept only as a one-way hash
    kept: int  # suppressions left as they were: another person of the tenant has the address
    events: int = 0  # events whose params or subject named their email or phone, scrubbed
    memberships: int = 0  # topic membership rows of theirs, removed


@dataclass(frozen=True, slots=True)
class TenantRecord:
    name: str
    created_at: int


@dataclass(frozen=True, slots=True)
class KeyRecord:
    name: str
    tenant: str
    kinds: tuple[str, ...]
    created_at: int
    revoked_at: int | None
    scopes: tuple[str, ...] = ()
    last_used_at: int | None = None  # to the minute: a daemon records a use once a minute


@dataclass(frozen=True, slots=True)
class SigningKey:
    """A named signing key: the one that signs now, and while a rotation's overlap lasts, the
    one it replaced, which still verifies until `previous_until` (epoch ms)."""

    secret: bytes
    previous: bytes | None = None
    previous_until: int | None = None

    def verifying(self, now: int) -> list[bytes]:
        """The keys that verify at `now`: the current one, and the previous within its overlap."""
        kept = self.previous is not None and self.previous_until is not None \
            and now < self.previous_until
        return [self.secret, self.previous] if kept and self.previous else [self.secret]


@dataclass(frozen=True, slots=True)
class InboxEntry:
    """What an inbox item says, rendered at accept."""

    title: str
    body: str | None


@dataclass(frozen=True, slots=True)
class Acceptance:
    """One accept of a batch: what store.accept takes for one notification."""

    inp: AcceptInput
    notification_id: str
    plan: PlanFn
    ttl_sec: int
    inbox: InboxEntry | None = None


@dataclass(frozen=True, slots=True)
class Cursor:
    """A place in a person's inbox, newest first: the (created_at, id) of the last item seen."""

    created_at: int
    notification_id: str


@dataclass(frozen=True, slots=True)
class InboxItem:
    seq: int  # the stream's event id: grows with every item written
    notification_id: str  # the item's id too
    kind: str
    title: str
    body: str | None
    created_at: int
    read_at: int | None
    archived_at: int | None


@dataclass(frozen=True, slots=True)
class InboxChange:
    """What a read or an archive did: whether the item changed, the badge after it, and the
    notification it resolved (a kind with stop = "read"), if any."""

    changed: bool
    badge: int
    resolved: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class DigestDue:
    """A recipient's held items whose digest window has closed."""

    tenant: str
    user_id: str
    digest_kind: str
    window_end: int
    count: int


@dataclass(frozen=True, slots=True)
class DigestMember:
    """One held item, as the digest's templates get it."""

    notification_id: str
    step_no: int
    kind: str
    params: dict[str, Any]
    created_at: int


@dataclass(frozen=True, slots=True)
class Suppression:
    tenant: str  # '*': every tenant
    channel_type: str
    address: str
    reason: str
    source: str
    evidence: str | None
    created_at: int


@dataclass(frozen=True, slots=True)
class DeadLetter:
    notification_id: str
    step_no: int
    channel: str
    attempts: int
    reason: str | None
    updated_at: int


class Aged(StrEnum):
    """What ages out, each class by its own window (config [retention])."""

    HISTORY = "history"  # a finished notification's steps, payloads, attempts, moves: an identity stays
    IDENTITIES = "identities"  # the identities left by HISTORY, once producers no longer retry
    RECEIPTS = "receipts"  # providers' receipts, once their replay window has passed
    INBOX_DONE = "inbox_done"  # inbox items read or archived
    INBOX_OLD = "inbox_old"  # inbox items, read or not
    EVENTS = "events"  # routed events, once a producer's retry of one would be answered anew
    MEMBERS = "topic_members"  # topic memberships that ended, once no routing event needs them


@dataclass(frozen=True, slots=True)
class Pruned:
    """One batch of a class pruned: how many went, and where the next batch starts ("" once
    the walk has reached rows too young to go)."""

    removed: int
    after: str


@dataclass(frozen=True, slots=True)
class Storage:
    """The database's size and what it holds: bytes in use (the file and its journal), bytes
    free inside the file, and per class its rows and the oldest one's time (None: no rows)."""

    bytes: int
    free_bytes: int
    rows: dict[str, int]
    oldest: dict[str, int | None]


@dataclass(frozen=True, slots=True)
class DeadMatch:
    """The dead steps an operator replays in bulk: those that ended dead at or after `since`
    and before `until` (the moment the replay began, so a step that dies again while it runs is
    not taken twice), on `channel` and of `kind` when given. Times are epoch ms."""

    until: int
    since: int = 0
    channel: str | None = None
    kind: str | None = None
    tenant: str | None = None  # None: every tenant (the command line); the console: its own


@dataclass(frozen=True, slots=True)
class Listed:
    """A notification as a list shows it (a person's, newest first): no steps."""

    id: str
    kind: str
    dedup_key: str | None
    created_at: int
    resolution: str | None
    resolved_at: int | None
    pruned_at: int | None


@dataclass(frozen=True, slots=True)
class Stuck:
    """A dead or unknown step of a tenant's, for the console's list of what needs a hand."""

    notification_id: str
    step_no: int
    channel: str
    kind: str
    user_id: str
    state: str
    attempts: int
    reason: str | None
    updated_at: int


@dataclass(frozen=True, slots=True)
class Hours:
    """When a person may be disturbed: their time zone and quiet hours ("HH:MM" local, both or
    neither), set with their preferences."""

    timezone: str | None = None
    quiet_start: str | None = None
    quiet_end: str | None = None


@dataclass(frozen=True, slots=True)
class DeadStep:
    """One dead step a bulk replay pages through, in the order they died, then by key; the
    last of a page is where the next page starts."""

    notification_id: str
    step_no: int
    died_at: int
    expires_at: int  # its notification's deadline: a replay after it ends expired, unsent

    @property
    def key(self) -> StepKey:
        return StepKey(self.notification_id, self.step_no)
