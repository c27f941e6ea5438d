"""The claim policy: whether a due step may go out now. Pure: plain records in, a verdict out.

The store reads a `ClaimContext` for each due step inside the claim transaction and applies the
`Decision` in that same transaction, so a resolution committed before the claim always wins
(promise 3). Every rule that can stop or delay a send is an input here, in this order: resolved,
expired, channel gone, a sibling in flight (promise 4), quiet hours, no address for the channel's
contact, a dead contact.
"""

from __future__ import annotations

import logging

from notifyd.core.catalog import Catalog
from notifyd.core.models import (
    EVIDENCE_RANK,
    SUPPRESSING,
    ClaimContext,
    Decision,
    Evidence,
    Lane,
    Receipt,
    ReceiptContext,
    ReceiptDecision,
    Rules,
    StepState,
    Verdict,
    Why,
)
from notifyd.core.text import iso
from notifyd.domain.ladder import quiet_label, quiet_until, restart_windows, window_end
from notifyd.domain.recipients import dead_reason, has_contact

log = logging.getLogger("notifyd.policy")
SIBLING_WAIT_MS = 1000  # a step whose sibling is in flight looks again this much later
SEND = Decision(Verdict.SEND)


def decide_claim(ctx: ClaimContext, now: int) -> Decision:
    if ctx.resolution is not None:
        return Decision(Verdict.CANCEL, f"resolved: {ctx.resolution}", why=Why.RESOLVED)
    if now >= ctx.expires_at:
        return Decision(Verdict.EXPIRE, "time to live passed before it could be sent",
                        why=Why.TTL)
    if not ctx.configured:  # the next step keeps its own time: it is not pulled sooner
        return Decision(Verdict.DEAD, f"channel {ctx.channel} is not configured any more",
                        pull_next_at=max(now, ctx.send_after), why=Why.CHANNEL_REMOVED)
    if ctx.sibling_in_flight is not None:
        return Decision(Verdict.POSTPONE, f"waiting: step {ctx.sibling_in_flight} is in flight",
                        until=now + SIBLING_WAIT_MS, why=Why.SIBLING)
    preference = _preference(ctx, now)
    if preference is not None:
        return preference
    if ctx.lane is not Lane.URGENT:  # again at claim: a retry or a pulled step may land in them
        quiet = _quiet(ctx, now)
        if quiet is not None:
            return quiet
    if ctx.contact is not None:  # the ladder moves on now rather than sit out this step's window
        if not has_contact(ctx.recipient, ctx.contact):
            return Decision(Verdict.SUPPRESS, f"no_contact: the user has no {ctx.contact}",
                            pull_next_at=now, why=Why.NO_CONTACT)
        dead = dead_reason(ctx.recipient, ctx.contact)
        if dead is not None:
            return Decision(Verdict.SUPPRESS, f"suppression_list: {dead}", pull_next_at=now,
                            why=Why.CONTACT_DISABLED)
    return _attention(ctx, now)


def _preference(ctx: ClaimContext, now: int) -> Decision | None:
    """What the person chose, read at the last moment: a global opt-out (never for a
    transactional kind), then the category's switch for this medium. A category that may not
    be turned off (one-time codes, security alerts) ignores both. A retry goes under the
    decision of the step's first claim (docs/recovery.md): its earlier call may already have
    reached the provider, and the key makes the retry the same message, so an opt-out since
    then does not withdraw it; a step not yet tried reads the preferences as they are now."""
    rules, who = ctx.rules, ctx.recipient
    if rules is None or ctx.medium is None or not rules.optional or ctx.attempts > 0:
        return None
    prefs = who.preferences if who is not None else {}
    version = f"(preferences v{who.pref_version if who is not None else 0})"
    if prefs.get("opt_out") and not rules.transactional:
        return Decision(Verdict.SUPPRESS, f"opted_out: the person opted out of everything "
                        f"{version}", pull_next_at=now, why=Why.OPTED_OUT)
    chosen = (prefs.get("categories") or {}).get(rules.category, {})
    on = chosen.get(ctx.medium, rules.defaults.get(ctx.medium, True))
    if not on:
        return Decision(Verdict.SUPPRESS, f"preference: {rules.category} by {ctx.medium} is off "
                        f"{version}", pull_next_at=now, why=Why.PREFERENCE)
    return None


def _attention(ctx: ClaimContext, now: int) -> Decision:
    """Send, unless the kind always digests or this send would pass a limit: then the item is
    held for the recipient's digest (recorded, so a retry cannot spend another allowance), or
    suppressed when the kind has no digest. Urgent work is never held."""
    rules = ctx.rules
    if rules is None or ctx.lane is Lane.URGENT:
        return SEND
    over_limit = next((lim.label for lim, sent in ctx.sent if sent >= lim.count), None)
    if not rules.always_digest and over_limit is None:
        return SEND
    if rules.digest:
        who = ctx.recipient
        until = window_end(rules.digest_schedule, now, who.timezone if who else None)
        why = "this kind always arrives in a digest" if rules.always_digest else \
            f"over the limit of {over_limit}"
        return Decision(Verdict.HOLD, f"held for the {rules.digest} digest of {iso(until)}: "
                        f"{why}", until=until, why=Why.DIGEST, digest=rules.digest)
    return Decision(Verdict.SUPPRESS, f"rate_limited: over the limit of {over_limit}",
                    why=Why.RATE_LIMITED)


def _quiet(ctx: ClaimContext, now: int) -> Decision | None:
    who = ctx.recipient
    if who is None or not who.quiet_start:
        return None
    try:
        until = quiet_until(now, who)
    except (ValueError, KeyError, OSError) as e:  # one bad profile must not stop every claim
        log.warning("quiet hours of %s/%s unreadable (%s): ignored", who.tenant, who.user_id,
                    type(e).__name__)
        return None
    if until is None:
        return None
    if until >= ctx.expires_at:
        return Decision(Verdict.EXPIRE, f"{quiet_label(who)} last past the time to live",
                        why=Why.TTL)
    return Decision(Verdict.POSTPONE, f"{quiet_label(who)}: waits for the end", until=until,
                    why=Why.QUIET_HOURS)


# Evidence that the person got it (a stop = "delivered" kind ends there), and evidence that the
# address is gone for good (it goes on the suppression list).
DELIVERED = frozenset({Evidence.DELIVERED, Evidence.SHOWN, Evidence.OPENED})
HOPELESS = frozenset({Evidence.BOUNCED, Evidence.FAILED, Evidence.TOKEN_DEAD})


def judge_receipt(ctx: ReceiptContext) -> ReceiptDecision:
    """What a receipt matched to its step changes. Evidence only ever grows (delivered is never
    replaced by accepted). Delivery ends a stop = "delivered" kind; it races the claim of the
    next step in the one writer, and whichever commits first wins: a claim after this resolution
    cancels, a receipt after that claim resolves what is left. A message proven lost moves the
    ladder on now, and a dead address is suppressed."""
    event = ctx.event
    had = _rank(ctx.evidence)
    stronger = event if _rank(event) > had else None
    went = ctx.step_state in (StepState.SENT, StepState.DELIVERED)
    return ReceiptDecision(
        evidence=stronger,
        resolve=ctx.stop == "delivered" and event in DELIVERED and not ctx.resolved,
        suppress=f"{event}" if event in SUPPRESSING and ctx.address and ctx.channel_type
        else None,
        pull_next=event in HOPELESS and went and not ctx.resolved
        and had < EVIDENCE_RANK[Evidence.DELIVERED],
        kill_device=event is Evidence.TOKEN_DEAD and ctx.device_id is not None)


def _rank(evidence: str | None) -> int:
    return EVIDENCE_RANK[Evidence(evidence)] if evidence in EVIDENCE_RANK else 0


def orphan_suppression(r: Receipt) -> str | None:
    """A receipt that matches no step and names no message at all, only an address, is about
    the address itself (an SMS STOP to a shared number): it suppresses that address for every
    tenant, for this reason. Any other unmatched receipt waits as an orphan."""
    if r.key is None and r.provider_ref is None and r.message_id is None and r.address \
            and r.channel_type and r.event in SUPPRESSING:
        return str(r.event)
    return None


def rules(catalog: Catalog) -> Rules:
    """What the store applies beside the rows: this config's catalog and these rules."""
    return Rules(catalog, decide_claim, judge_receipt, restart_windows, orphan_suppression)
