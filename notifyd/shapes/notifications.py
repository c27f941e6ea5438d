"""Notifications and their resolutions: what POST /v1/notifications (and its batch), the
resolutions and the status document take and answer, and a decision on the decisions stream."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from msgspec import Meta, Raw

from notifyd.core.models import StepState
from notifyd.shapes.common import (
    ITEMS,
    MAX_TTL_SEC,
    Answer,
    Body,
    Id,
    SendAt,
    Time,
    ref,
)

RESOLUTION_MAX = 200
STATE_DOC = ("delivered (proved by a receipt) or resolved; <channel>_pending, <channel>_sending "
             "or <channel>_unknown for the first open step; or how the ladder ended: sent, "
             "presumed_delivered (sent, unproven, past the time to live), held (waiting for a "
             "digest; a new notification of a kind that always digests is held from its "
             "accept), digested (a digest carried it: its step's digest says whether that went "
             "out), expired, opted_out (nothing went: every step was suppressed, at least one by "
             "the person's preferences), undeliverable (nothing went: failed, rejected or "
             "suppressed)")
STATE_PATTERN = (r"^(resolved|delivered|sent|presumed_delivered|held|digested|expired|opted_out"
                 r"|undeliverable|.+_(pending|sending|unknown))$")
State = Annotated[str, Meta(description=STATE_DOC, pattern=STATE_PATTERN)]
SEND_AT_DOC = ("RFC 3339 (2026-09-21T14:13:20Z): the ladder starts then instead of at accept; "
               "every step's time, quiet hours and the time to live count from it. A time "
               "already past is now; at most server.max_schedule_sec (31 days) ahead; refused "
               "for a kind with an inbox. Compared, like the other fields, when a dedup key is "
               "used again.")
Resolution = Annotated[str, Meta(min_length=1, max_length=RESOLUTION_MAX)]
Evidence = Literal["accepted", "delivered", "shown", "opened"] | None


# --- what a producer sends ---------------------------------------------------------------------


class ChainStep(Body, kw_only=True):
    """One step of a ladder in a fallback_chain: a channel, and how long before the next."""

    channel: str  # the OpenAPI document lists the configured channels
    timeout_sec: Annotated[float, Meta(ge=0, le=MAX_TTL_SEC, extra={
        "shape": f"a number 0..{MAX_TTL_SEC} or null"})] | None = None


class NotificationOptions(Body, kw_only=True):
    """What a notification may carry beside its user, kind and params."""

    dedup_key: Id | None = None
    fallback_chain: Annotated[list[ChainStep], Meta(
        min_length=1, max_length=16, extra={"noun": "steps"})] | None = None
    max_ttl_sec: Annotated[int, Meta(ge=1, le=MAX_TTL_SEC)] | None = None
    send_at: Annotated[SendAt, Meta(description=SEND_AT_DOC)] | None = None


class AcceptRequest(NotificationOptions, kw_only=True):
    """POST /v1/notifications: tell this user this kind of thing, once."""

    user_id: Id
    kind: Id  # the OpenAPI document lists the configured kinds
    params: dict[str, Any] = {}


class ResolveRequest(Body, kw_only=True):
    """POST /v1/notifications/{id}/resolve: why it needs no more delivering (default: api)."""

    resolution: Resolution | None = None


class ResolutionRequest(Body, kw_only=True):
    """POST /v1/resolutions: the notification named by its user and dedup key."""

    user_id: Id
    dedup_key: Id
    resolution: Resolution | None = None


class AcceptBatch(Body, kw_only=True):
    """Up to 1,000 notifications in one write. Its items are not held to AcceptRequest here:
    each is checked on its own and answered in its place, so a bad one is a 200, not a
    refusal."""

    items: Annotated[list[Annotated[Raw, Meta(description=(
        "the body of POST /v1/notifications (AcceptRequest); one that is not gets the error "
        "that call would answer, in its place"))]], ITEMS]


class ResolutionBatch(Body, kw_only=True):
    """Up to 1,000 resolutions by user and dedup key in one write; each item is checked on its
    own and answered in its place."""

    items: Annotated[list[Annotated[Raw, Meta(description=(
        "the body of POST /v1/resolutions (ResolutionRequest); one that is not gets the error "
        "that call would answer, in its place"))]], ITEMS]


# --- what notifyd answers ----------------------------------------------------------------------


class Accepted(Answer, kw_only=True):
    """An accept: the notification's id and state, and whether this request made it."""

    notification_id: str
    state: State
    created: bool


class AcceptedItem(Accepted, kw_only=True):
    status: Literal[200, 202]


class Resolved(Answer, kw_only=True):
    """A resolution: the one that won (this, or an earlier one)."""

    notification_id: str
    resolution: str
    resolved_at: Time
    changed: bool
    cancelled_steps: int


class ResolvedItem(Resolved, kw_only=True):
    status: Literal[200]


Results = Annotated[list[Any], Meta(description="one per item, in order")]


class AcceptResults(Answer, kw_only=True):
    """A batch's answers: one per item, in order, each the single call's status beside its
    body (AcceptedItem) or its error (Refused)."""

    results: Annotated[Results, Meta(extra_json_schema={"items": {"anyOf": [
        ref("AcceptedItem"), ref("Refused")]}})]


class ResolutionResults(Answer, kw_only=True):
    """A batch's answers: one per item, in order (ResolvedItem or Refused)."""

    results: Annotated[Results, Meta(extra_json_schema={"items": {"anyOf": [
        ref("ResolvedItem"), ref("Refused")]}})]


class ResolutionView(Answer, kw_only=True):
    resolution: str | None
    resolved_at: Time
    resolved_by: str | None


class ReceiptView(Answer, kw_only=True):
    provider: str
    event: str
    occurred_at: Time
    received_at: Time
    detail: str | None


class AttemptView(Answer, kw_only=True):
    attempt: int
    started_at: Time
    ended_at: Time
    outcome: str | None
    reason: str | None
    provider_ref: str | None


class DigestView(Answer, kw_only=True):
    """The digest that carried a step: its id and whether it went out."""

    notification_id: str
    current_state: Annotated[Annotated[str, Meta(pattern=STATE_PATTERN)] | None, Meta(
        description="the digest's own state; null once it is no longer on record")]
    sent_via: Annotated[list[str], Meta(description="the channels it went out on")]


class Step(Answer, kw_only=True):
    """One step of the ladder, its attempts and its evidence."""

    step_no: int
    channel: str
    status: StepState
    send_after: Time
    attempts: int
    reason: str | None
    note: str | None
    provider_ref: str | None
    template: str | None
    pref_version: int | None
    evidence: Evidence
    timed_out: bool
    digest: Annotated[DigestView | None, Meta(description=(
        "the digest that carried it (status digested), and whether that went out"))]
    receipts: list[ReceiptView]
    updated_at: Time
    attempt_log: list[AttemptView]


class Status(Answer, kw_only=True):
    """GET /v1/notifications/{id}: the notification with every step, from the rows alone."""

    notification_id: str
    user_id: str
    kind: str
    dedup_key: str | None
    created_at: Time
    send_at: Annotated[Time, Meta(description="a scheduled one: when its ladder started (or "
                                              "starts); null for one sent at once")]
    expires_at: Time
    current_state: State
    delivered_via: Annotated[str | None, Meta(description=(
        "the channel a receipt proved delivery on; null while nothing proves it"))]
    sent_via: Annotated[list[str], Meta(description=(
        "the channels of the steps a provider took, in ladder order, proved or not"))]
    resolution: ResolutionView | None
    steps: list[Step]
    total_time_ms: int | None
    pruned_at: Annotated[Time, Meta(description=(
        "When retention pruned its history: steps is then empty and current_state is how it "
        "ended."))]
    event_id: Annotated[str | None, Meta(description=(
        "the event it was made for (POST /v1/events); null for one posted on its own"))]


class Decision(Answer, kw_only=True):
    """The data of a decision event on GET /v1/decisions/stream."""

    at: Time
    decision: Annotated[str, Meta(description=(
        "accepted, sending, sent, failed/unknown with its retry time, rejected, dead, "
        "cancelled, postponed, expired, suppressed, held for a digest"))]
    notification_id: str
    step_no: int | None
    channel: str | None
    kind: str
    user_id: str
    reason: str | None


class Ready(Answer, kw_only=True):
    """GET /readyz: each check of the daemon itself, and the sum of them."""

    status: Literal["ready", "not_ready"]
    checks: dict[str, str]


class Health(Answer, kw_only=True):
    """GET /healthz: the process answers."""

    status: Literal["ok", "draining"]

