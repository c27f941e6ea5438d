"""Plain data shared by every layer: states, outcomes, and the records the store hands back. No I/O."""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from notifyd.core.catalog import Catalog, KindRules, LimitRule
from notifyd.core.contacts import Contact
from notifyd.core.steps import Cause
from notifyd.core.text import is_digits

_B32 = "0123456789abcdefghjkmnpqrstvwxyz"
_B32_PAIRS = [a + b for a in _B32 for b in _B32]  # two digits per lookup: half the work


def new_id(prefix: str, now_ms: int) -> str:
    """A time-ordered id: 48 bits of milliseconds then 40 random bits, Crockford base32.
    Ids are not secrets (keys are), so the fast non-cryptographic generator is enough."""
    n = (now_ms << 40) | random.getrandbits(40)
    return prefix + "".join([_B32_PAIRS[(n >> shift) & 1023] for shift in range(80, -1, -10)])


def id_floor(prefix: str, at_ms: int) -> str:
    """The smallest id `new_id` can make at `at_ms`: every id made before it sorts below."""
    n = max(0, at_ms) << 40
    return prefix + "".join([_B32_PAIRS[(n >> shift) & 1023] for shift in range(80, -1, -10)])


def id_time(ident: str) -> int | None:
    """When `new_id` made `ident` (epoch ms), or None if it is not one of its ids."""
    digits = ident.rpartition("_")[2]
    if len(digits) != 18 or any(c not in _B32 for c in digits):
        return None
    n = 0
    for c in digits:
        n = n * 32 + _B32.index(c)
    return n >> 40





class StepState(StrEnum):
    PENDING = "pending"
    SENDING = "sending"
    UNKNOWN = "unknown"  # a provider call whose outcome we never learned; retried under the same key
    SENT = "sent"
    DELIVERED = "delivered"
    REJECTED = "rejected"
    SUPPRESSED = "suppressed"
    CANCELLED = "cancelled"
    EXPIRED = "expired"
    DEAD = "dead"
    HELD = "held"  # held back for a digest (over a limit, or a kind that always digests)
    DIGESTED = "digested"  # a held step its digest carried (digest_items.digest_id names it)


REPLAYED = "replayed by an operator"  # the reason a replayed step carries until it is claimed
OPEN_STEP_STATES = frozenset({StepState.PENDING, StepState.SENDING, StepState.UNKNOWN})


class Lane(StrEnum):
    URGENT = "urgent"  # urgent kinds: bypass quiet hours, never wait behind bulk work
    BULK = "bulk"
    BROADCAST = "broadcast"  # announcements to many: at most a share of the channel's rate


class Outcome(StrEnum):
    """What one provider call came to (an attempt's outcome)."""

    SENT = "sent"
    REJECTED = "rejected"
    FAILED = "failed"
    UNKNOWN = "unknown"


class Verdict(StrEnum):
    """What the claim policy decided about one due step."""

    SEND = "send"
    CANCEL = "cancel"  # the notification was resolved
    EXPIRE = "expire"  # its time to live passed, or will before it could go
    POSTPONE = "postpone"  # not now: a sibling in flight, quiet hours
    SUPPRESS = "suppress"  # not to this contact: it is disabled; the next step moves up
    HOLD = "hold"  # not now, not alone: it waits for the recipient's digest
    DEAD = "dead"  # it can never go (its channel is gone); the next step takes its slot


class Why(StrEnum):
    """The class of reason a step ended or waits, for metrics; the reason text says more."""

    OK = "ok"
    RESOLVED = "resolved"
    TTL = "ttl"
    QUIET_HOURS = "quiet_hours"
    SIBLING = "sibling_in_flight"
    NO_CONTACT = "no_contact"
    CONTACT_DISABLED = "suppression_list"
    PREFERENCE = "preference"
    OPTED_OUT = "opted_out"
    RATE_LIMITED = "rate_limited"
    DIGEST = "digest"
    CHANNEL_REMOVED = "channel_removed"
    REJECTED = "provider_rejected"
    RETRIES = "retries_exhausted"
    REFUSED = "refused_for_good"  # a permanent refusal of our request, not of the contact
    RENDER = "render_failed"
    RETRY = "retry"
    INTERRUPTED = "interrupted"


# What each ending verdict makes of the step.
ENDED: dict[Verdict, StepState] = {
    Verdict.CANCEL: StepState.CANCELLED, Verdict.EXPIRE: StepState.EXPIRED,
    Verdict.SUPPRESS: StepState.SUPPRESSED, Verdict.DEAD: StepState.DEAD,
    Verdict.HOLD: StepState.HELD}


def by_choice(reason: str | None) -> bool:
    """Whether a step's reason says the person's own choice skipped it: the category's switch
    for the medium (preference) or a global opt-out (domain/policy writes both so)."""
    return reason is not None and reason.startswith(("preference:", "opted_out:"))


def current_state(resolved: bool, steps: Iterable[tuple[str, str]],
                  resolution: str | None = None, proven: bool = False,
                  expired: bool = False, chosen: bool = False) -> str:
    """delivered (a receipt proved it) or resolved; <channel>_<state> of the first open step;
    or how the ladder ended: sent (a provider took a step; presumed_delivered once the time to
    live has passed with no receipt to prove it), held (waiting for a digest), digested (its
    digest carried it: the digest's own state says whether that went out), expired, opted_out
    (every step was suppressed and `chosen`: at least one by the person's own choice), or
    undeliverable (every step failed, was rejected or suppressed, none by choice)."""
    if resolved:
        return "delivered" if resolution == "delivered" else "resolved"
    states = set()
    for channel, state in steps:
        if state in OPEN_STEP_STATES:
            return f"{channel}_{state}"
        states.add(state)
    if proven or "delivered" in states:
        return "delivered"
    if "sent" in states:
        return "presumed_delivered" if expired else "sent"
    if "held" in states:
        return "held"  # an item still waits for its digest
    if "digested" in states:
        return "digested"
    if "expired" in states:
        return "expired"
    return "opted_out" if chosen and states == {"suppressed"} else "undeliverable"


# What an API key may do: post notifications, read them, resolve them, read and change users,
# manage topics and address them. A new key gets these unless it is given others.
SCOPES = frozenset({"post", "read", "resolve", "users", "topics"})
# Signs in to the operator console (/console) for the key's tenant: never granted by default.
ADMIN = "admin"
# Every scope there is: `everyone` (address the tenant's whole user base) and `admin` only when
# granted by name.
ALL_SCOPES = SCOPES | {"everyone", ADMIN}
# The scopes whose reach is every kind: people's profiles and contacts, devices, preferences,
# suppressions, user tokens and erasure (users), the console (admin). A key limited to some
# kinds acts on those kinds' notifications only, so it never holds these, whatever its row says
# (a key made with them before this rule keeps every other scope it was given).
EVERY_KIND_SCOPES = frozenset({"users", ADMIN})


def usable_scopes(kinds: tuple[str, ...], scopes: frozenset[str] | tuple[str, ...]
                  ) -> frozenset[str]:
    """What a key of `kinds` may do of the `scopes` it was given."""
    return frozenset(scopes) - EVERY_KIND_SCOPES if kinds else frozenset(scopes)


@dataclass(frozen=True)
class ApiKey:
    name: str
    tenant: str
    kinds: tuple[str, ...]  # empty: every kind
    key_hash: str
    scopes: frozenset[str] = SCOPES  # what it may do: ALL_SCOPES names them

    def allows(self, kind: str) -> bool:
        return not self.kinds or kind in self.kinds

    def may(self, scope: str) -> bool:
        return scope in self.scopes and not (self.kinds and scope in EVERY_KIND_SCOPES)


# Not frozen: one is built for every step of every accept, and a frozen dataclass's __init__
# costs four times as much.
@dataclass(slots=True)
class PlannedStep:
    step_no: int
    channel: str
    send_after: int
    state: StepState = StepState.PENDING
    reason: str | None = None
    note: str | None = None  # why send_after is what it is (quiet hours)
    cause: Cause | None = None  # why it is due then (None: at accept)


@dataclass(frozen=True)
class AcceptInput:
    """A validated request, ready for the store."""

    tenant: str
    user_id: str
    kind: str
    params: dict[str, Any]
    dedup_key: str | None
    fallback_chain: tuple[tuple[str, float | None], ...] | None
    max_ttl_sec: int | None
    request_hash: str
    key_name: str
    key_kinds: tuple[str, ...] = ()  # the posting key's kinds (empty: all), for what it may see
    send_at: int | None = None  # when the ladder starts, if not at accept (a past time: at accept)


@dataclass(frozen=True)
class AcceptResult:
    notification_id: str
    created: bool
    state: str  # current_state() of the new or the existing notification
    conflict: bool = False  # same dedup key, different input
    existing_kind: str | None = None  # a retry or conflict: the kind of what the key names
    first_due: int | None = None  # earliest pending send_after, so the scanner can wake for it
    inbox_seq: int | None = None  # its inbox item's stream position, when it wrote one
    badge: int | None = None  # the recipient's unread count after it
    created_at: int | None = None  # when it was accepted, as its row records (new ones)


class Evidence(StrEnum):
    """What a provider's receipt says happened to a message."""

    ACCEPTED = "accepted"  # the provider has it (queued, sent to the carrier)
    DELIVERED = "delivered"  # the recipient's server, handset or device has it
    SHOWN = "shown"  # a push client displayed it
    OPENED = "opened"  # the person opened it
    DEFERRED = "deferred"  # a temporary failure; the provider retries
    BOUNCED = "bounced"  # a permanent failure of the address: suppress it
    COMPLAINED = "complained"  # marked as spam: suppress the address
    UNSUBSCRIBED = "unsubscribed"  # the person asked to stop: suppress the address
    FAILED = "failed"  # the message failed for good (not necessarily the address's fault)
    TOKEN_DEAD = "token_dead"  # a push token or subscription is gone


# Evidence that the address is gone for good: it goes on the suppression list.
SUPPRESSING = frozenset({Evidence.BOUNCED, Evidence.COMPLAINED, Evidence.UNSUBSCRIBED})
def message_key(message_id: str | None) -> str | None:
    """The step key in a Message-ID notifyd set (<n_...{.}STEP@domain>), or None."""
    if not message_id:
        return None
    local = message_id.strip().strip("<>").partition("@")[0]
    nid, dot, step = local.rpartition(".")
    if dot and nid.startswith("n_") and is_digits(step):
        return f"{nid}:{step}"
    return None


# How strong each good piece of evidence is: a weaker one never replaces a stronger one.
EVIDENCE_RANK = {Evidence.ACCEPTED: 1, Evidence.DELIVERED: 2, Evidence.SHOWN: 3,
                 Evidence.OPENED: 4}


@dataclass(frozen=True, slots=True)
class Receipt:
    """One provider event about one message, normalised (receipts/ parses them)."""

    provider: str  # twilio, resend, sendgrid, mailgun, postmark, ses, delivery-receipt
    event_id: str  # the provider's id for this event: a redelivery has the same one (dedupe)
    event: Evidence
    occurred_at: int | None  # epoch ms, as the provider says; None when it does not
    provider_ref: str | None = None  # the provider's message id (matches Sent.provider_ref)
    key: str | None = None  # notifyd's step key ("n_...:STEP" or "n_...:STEP:DEVICE"), if carried
    message_id: str | None = None  # the email Message-ID header notifyd set, without <>
    address: str | None = None  # the recipient address it concerns (for suppression)
    channel_type: str | None = None  # email, sms, push: what the address is for (suppression)
    detail: str | None = None  # a short provider code (bounce type, error code): never free text
    # The tenant whose notifications it may match, when it was verified with that tenant's own
    # secret; None: a provider's account-wide webhook, which matches any tenant's.
    tenant: str | None = None


@dataclass(frozen=True, slots=True)
class Nonce:
    """A signed value a provider's scheme lets through once (Mailgun's token, which does not
    cover the event): the store keeps it until `until` (epoch ms), when the scheme's clock check
    refuses it anyway, and refuses it a second time before then."""

    provider: str
    value: str
    until: int


@dataclass(frozen=True, slots=True)
class ReceiptContext:
    """What the receipt policy reads about a receipt matched to its step."""

    event: Evidence
    stop: str  # the kind's stop rule: resolved, delivered
    resolved: bool
    step_state: StepState
    evidence: str | None  # the step's strongest evidence so far
    channel_type: str | None  # the suppression list's channel type for the step's address
    address: str | None
    device_id: str | None  # a push device the receipt names


@dataclass(frozen=True, slots=True)
class ReceiptDecision:
    evidence: Evidence | None = None  # the step's new strongest evidence (None: unchanged)
    resolve: bool = False  # resolve the notification as delivered
    suppress: str | None = None  # put the address on the suppression list, for this reason
    pull_next: bool = False  # the ladder moves on now
    kill_device: bool = False


ReceiptJudge = Callable[[ReceiptContext], ReceiptDecision]


@dataclass(frozen=True, slots=True)
class DisabledContact:
    """One of the user's addresses on the suppression list (a rejection, a bounce, a STOP)."""

    contact: str  # the profile field of the address: email, phone, telegram_chat_id, ...
    address: str
    reason: str


@dataclass(frozen=True, slots=True)
class Device:
    """One push target of a user: a web push subscription, an FCM registration token or an APNs
    device token."""

    device_id: str
    kind: str  # "webpush", "fcm" or "apns"
    endpoint: str  # the web push endpoint URL, the FCM registration token or the APNs token (hex)
    p256dh: str | None = None  # web push: the subscription's public key (base64url)
    auth: str | None = None  # web push: the subscription's auth secret (base64url)
    state: str = "live"  # live | dead
    reason: str | None = None  # why it is dead


@dataclass(frozen=True)
class Recipient:
    tenant: str
    user_id: str
    timezone: str | None = None
    locale: str | None = None
    quiet_start: str | None = None  # "HH:MM" local
    quiet_end: str | None = None
    contacts: dict[str, Any] = field(default_factory=dict)
    # The user's addresses that are on the suppression list, and why.
    disabled: tuple[DisabledContact, ...] = ()
    devices: tuple[Device, ...] = ()  # push targets, live and dead
    # {"opt_out": bool, "categories": {category: {medium: bool}}}: what the person chose
    preferences: Mapping[str, Any] = field(default_factory=dict)
    pref_version: int = 0  # bumped by every change of preferences


@dataclass(frozen=True, slots=True)
class ItemRead:
    """An inbox item its notification's resolution marked read: whose, and the badge after."""

    tenant: str
    user_id: str
    unread: int


@dataclass(frozen=True)
class ResolveResult:
    notification_id: str
    resolution: str
    resolved_at: int
    changed: bool  # False: an earlier resolution had already won
    cancelled_steps: int
    depth: int = 0  # steps that had gone out when it was resolved (the escalation depth)
    kind: str = ""
    read: ItemRead | None = None  # its inbox item, marked read by it (read_on_resolve)


@dataclass(frozen=True, slots=True)
class Notice:
    """The notification as the claim transaction read it: what rendering a step may use."""

    kind: str
    tenant: str
    user_id: str
    params: dict[str, Any]
    created_at: int
    recipient: Recipient | None


@dataclass(frozen=True, slots=True)
class Claim:
    """A step leased for one provider call. `destination` and `payload` are None until the
    sender has rendered and frozen them (the first attempt); a retry carries the frozen ones."""

    notification_id: str
    step_no: int
    channel: str
    lane: Lane
    attempt_no: int
    tries: int  # attempts since the last replay, for the retry budget
    claim_token: str
    expires_at: int
    contact: Contact | None  # what a permanent rejection disables (None: nothing)
    destination: str | None
    payload: dict[str, Any] | None
    notice: Notice | None = None  # set when nothing is frozen yet
    # Whose it is, for the decisions feed (notifyd tail) and the metrics by kind.
    tenant: str = ""
    user_id: str = ""
    kind: str = ""

    @property
    def key(self) -> str:
        """The provider idempotency key: never the attempt number."""
        return f"{self.notification_id}:{self.step_no}"


@dataclass(frozen=True, slots=True)
class ClaimContext:
    """Everything the claim policy reads about one due step, fetched in the claim transaction."""

    notification_id: str
    step_no: int
    channel: str
    lane: Lane
    send_after: int
    resolution: str | None  # set once the notification is resolved
    expires_at: int
    sibling_in_flight: int | None  # step_no of a sibling being sent right now
    recipient: Recipient | None
    contact: Contact | None  # what this channel sends to (None: no address of the person's)
    configured: bool = True  # False: the channel is no longer in the config
    rules: KindRules | None = None  # the kind's preference and attention rules
    medium: str | None = None  # what the channel sends as: email, sms, push, chat (None: no one)
    # For a step never tried: each send limit that counts it, with how many sends to the person
    # that limit's window already holds (the store counts; the policy decides). Empty for a
    # retry: its first attempt counted already.
    sent: tuple[tuple[LimitRule, int], ...] = ()
    attempts: int = 0  # calls made for this step so far: a retry goes under its first decision


@dataclass(frozen=True, slots=True)
class Decision:
    """The claim policy's verdict on one due step, applied by the store in the same transaction."""

    verdict: Verdict
    reason: str | None = None
    until: int | None = None  # POSTPONE: the new send_after
    pull_next_at: int | None = None  # SUPPRESS, DEAD: the next step becomes due no later
    why: Why = Why.OK
    digest: str | None = None  # HOLD: the digest kind that collects it


@dataclass(frozen=True)
class Completion:
    """What the sender decided about one attempt; the store applies it under the claim token."""

    outcome: Outcome
    state: StepState
    reason: str | None = None
    provider_ref: str | None = None
    retry_at: int | None = None  # for pending/unknown: when to try again
    disable_contact: bool = False
    pull_next: bool = False
    why: Why = Why.OK
    dead_devices: tuple[tuple[str, str], ...] = ()  # (device_id, why): each that refused for good


@dataclass
class Budget:
    """Limits that several (channel, lane) claims share: a channel's bucket tokens, its
    broadcast lane's share of them, a half-open vendor's single probe. Each route draws from
    every key it lists; the claim spends."""

    left: dict[str, int] = field(default_factory=dict)
    keys: dict[Route, tuple[str, ...]] = field(default_factory=dict)
    # Each channel's rate_per_sec and burst: where processes share the database, the claim
    # also draws from the deployment's bucket of the channel, kept in it.
    rates: dict[str, tuple[float, int]] = field(default_factory=dict)

    def allow(self, route: Route, n: int) -> int:
        return min([n, *(self.left[k] for k in self.keys.get(route, ()))])

    def spend(self, route: Route, n: int) -> None:
        for k in self.keys.get(route, ()):
            self.left[k] -= n


# Plans the ladder once the recipient is read, inside the accept transaction.
# Plans the ladder once the recipient is read, inside the accept transaction, at its time.
PlanFn = Callable[[Recipient | None, int], tuple[list[PlannedStep], Lane]]
# A person's profile, or preferences, made from what they are as the write reads them (None:
# no profile yet): a merge patch applied inside the write (domain/recipients, preferences).
RecipientEdit = Callable[[Recipient | None], Recipient]
PreferencesEdit = Callable[[Recipient | None], dict[str, Any]]
# The claim policy (domain/policy.decide_claim).
DecideFn = Callable[[ClaimContext, int], Decision]
# The messages of a claim's never-frozen steps, rendered inside the claim (the sender pool's,
# engine/sender): for each, the Freeze to fix on it, or None to leave it for the pool to render
# after the commit.
FreezeFn = Callable[["list[Claim]"], "list[Freeze | None]"]
# When the pending steps after a step that went out at `at` fall due now (domain/ladder
# .restart_windows): (sent step_no, at, [(step_no, send_after, cause)]) -> [(step_no, new time)].
WindowFn = Callable[[int, int, "list[tuple[int, int, Cause]]"], list[tuple[int, int]]]
# An unmatched receipt's account-wide suppression reason, or None (domain/policy.orphan_suppression)
OrphanFn = Callable[[Receipt], str | None]


@dataclass(frozen=True)
class Rules:
    """What the store applies beside the rows, handed in so that it holds no policy: the
    compiled config and the domain's pure decisions (domain/policy.rules builds it)."""

    catalog: Catalog
    decide: DecideFn  # may this due step go now
    judge: ReceiptJudge  # what a receipt matched to its step changes
    windows: WindowFn  # when later steps fall due once a step went out
    orphan: OrphanFn  # what a receipt that matches no step suppresses for every tenant


@dataclass(frozen=True, slots=True)
class Decided:
    """A claim decision other than send, as applied: for the log and the metrics."""

    notification_id: str
    step_no: int
    channel: str
    decision: Decision
    tenant: str = ""
    user_id: str = ""
    kind: str = ""


@dataclass(frozen=True, slots=True)
class Claimed:
    """What one claim transaction did: the steps leased to send, and every other decision."""

    claims: list[Claim]
    decided: list[Decided]
    # Where processes share the database: tokens left in each claimed channel's bucket for the
    # whole deployment, after this claim (the process's own bucket holds no more than that).
    tokens: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Want:
    """How many due steps a (channel, lane) can start now."""

    channel: str
    lane: Lane
    n: int


@dataclass(frozen=True, slots=True)
class Route:
    """A channel's lane: where its due steps queue."""

    channel: str
    lane: Lane


@dataclass(frozen=True, slots=True)
class Freeze:
    """A claimed step's message, fixed before its first send and resent as it is."""

    claim: Claim
    destination: str
    payload: str  # JSON text, sorted keys
    template: str | None  # kind/locale/medium@version, when templates made it


@dataclass(frozen=True, slots=True)
class Leases:
    """Steps in flight under a lease, and when the last lease ends."""

    count: int
    last_end: int | None


# A due time a write made: (send_after, channel, lane), told to the due index after its commit.
Due = tuple[int, str, str]


@dataclass(frozen=True)
class DueTimes:
    """The due index read again from the rows: each route's earliest due times, in order (at
    most the read's limit), and the first end of a lease in flight (its step falls due then)."""

    times: dict[Route, list[int]]
    first_lease_end: int | None


class Recorded(StrEnum):
    """What became of one receipt."""

    APPLIED = "applied"  # matched to its step and applied
    DUPLICATE = "duplicate"  # its (provider, event id) came before
    ORPHAN = "orphan"  # no step yet: kept, applied when its send's answer names the message
    REPLAYED = "replayed"  # the request's one-time token was seen before: nothing was stored
