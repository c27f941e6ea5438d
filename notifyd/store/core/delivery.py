"""The delivery engine's transactions: claim (each due step judged on what this transaction reads,
and the decision applied in it), freeze, complete under the claim token, take over lapsed leases,
replay, resolve. Every rule comes in `Rules`; these scripts only read, ask and write."""

from __future__ import annotations

import dataclasses
import json
import secrets

import orjson

from notifyd.core.catalog import KindRules, LimitRule
from notifyd.core.contacts import Address
from notifyd.core.models import (
    ENDED,
    REPLAYED,
    Budget,
    Claim,
    ClaimContext,
    Claimed,
    Completion,
    Decided,
    DecideFn,
    Decision,
    Freeze,
    FreezeFn,
    Lane,
    Notice,
    Recipient,
    ResolveResult,
    Route,
    Rules,
    StepState,
    Verdict,
    Want,
)
from notifyd.core.steps import StepKey
from notifyd.core.text import iso
from notifyd.store.core import inbox, receipts, rows
from notifyd.store.core.dues import mark, mark_open
from notifyd.store.core.moves import pull_next, start_window
from notifyd.store.core.rows import disabled, recipient
from notifyd.store.core.sql import SharedBuckets
from notifyd.store.core.tx import Row, Tx

LOOKAHEAD = 16  # due rows read beyond what is wanted, for those the policy will not send


def lapse_leases(tx: Tx) -> int:
    """Sending steps whose lease has ended become unknown, retried under the same key; one
    within its lease is left alone: another process may be sending it."""
    rows = tx.all(tx.q.SELECT_LAPSED, (tx.now,))
    for row in rows:
        mark_unknown(tx, row["notification_id"], row["step_no"],
                     "lease expired: the send may have reached the provider")
    return len(rows)


def mark_unknown(tx: Tx, nid: str, no: int, why: str) -> None:
    tx.send(tx.q.MARK_UNKNOWN, (why, tx.now, tx.now, nid, no))
    tx.send(tx.q.CLOSE_OPEN_ATTEMPTS, (tx.now, why, nid, no))
    mark_open(tx, nid)  # due now, and its siblings that waited on it


def claim_due(tx: Tx, wants: list[Want], lease_ms: int, rules: Rules, budget: Budget,
              freeze: FreezeFn | None = None) -> Claimed:
    """Up to `n` due steps per (channel, lane), within the shared budget, each judged by
    `rules.decide` on what this transaction reads and leased when it says send (promise 3: a
    resolution committed before the claim always wins). Lapsed leases become unknown first.
    A claim never frozen that `freeze` renders is frozen here, in the claim's own commit."""
    lapse_leases(tx)
    claimed = Claimed([], [])
    sending: dict[str, int] = {}  # claimed in this transaction: a sibling in flight
    waiting: list[Row] = []  # left for the next scan: their person is locked elsewhere
    buckets = tx.features.shared_buckets
    told = 0  # of `waiting`, those marked due again
    for want in wants:
        route = Route(want.channel, want.lane)
        n = budget.allow(route, want.n)
        shared = budget.rates.get(want.channel) if buckets else None
        if buckets and shared and n > 0:  # the deployment's bucket, locked until this commits
            left = _take_tokens(tx, buckets, want.channel, shared)
            if left is None:  # another process's claim holds it: nothing now
                claimed.tokens[want.channel] = 0.0
                continue
            n = min(n, int(left))
        taken = 0
        while taken < n:
            rows = tx.all(tx.q.SELECT_DUE, (want.channel, want.lane, tx.now,
                                            n - taken + LOOKAHEAD))
            for row in rows:
                if taken >= n:
                    break
                claim = _judge(tx, row, rules, sending, lease_ms, claimed.decided, waiting)
                if claim is not None:
                    claimed.claims.append(claim)
                    sending[claim.notification_id] = claim.step_no
                    taken += 1
            if len(rows) < n - taken + LOOKAHEAD or waiting:  # read again, they come again
                break
        for row in waiting[told:]:  # their person was locked elsewhere: due again at once
            mark(tx, tx.now, row["channel"], row["lane"])
        told = len(waiting)
        budget.spend(route, taken)
        if buckets and shared and n > 0:
            claimed.tokens[want.channel] = float(tx.value(buckets.SPEND_TOKENS,
                                                          (taken, want.channel)))
    if freeze is not None:
        _freeze_claimed(tx, claimed.claims, freeze)
    return claimed


def _freeze_claimed(tx: Tx, claims: list[Claim], freeze: FreezeFn) -> None:
    """The never-frozen claims `freeze` rendered, fixed in this transaction and replaced in
    `claims` by themselves with their message, as `prepare` would have made them."""
    todo = [i for i, c in enumerate(claims) if c.payload is None]
    made = freeze([claims[i] for i in todo]) if todo else []
    rendered = [(i, f) for i, f in zip(todo, made, strict=True) if f is not None]
    done = freeze_steps(tx, [f for _, f in rendered])  # their answers read at once
    assert all(done)  # leased by this very transaction
    for i, f in rendered:
        claims[i] = dataclasses.replace(f.claim, destination=f.destination,
                                        payload=json.loads(f.payload))


def _take_tokens(tx: Tx, buckets: SharedBuckets, channel: str,
                 rate: tuple[float, int]) -> float | None:
    """The tokens in the deployment's bucket of `channel` now, locked for this transaction;
    None while another holds it. Its first claim makes it, full."""
    row = tx.one(buckets.TAKE_TOKENS, (channel, *rate, tx.now))
    assert row is not None
    if row["tokens"] is not None or row["kept"]:
        return None if row["tokens"] is None else float(row["tokens"])
    made = tx.value(buckets.MAKE_BUCKET, (channel, rate[1], tx.now))
    return None if made is None else float(made)


def _judge(tx: Tx, row: Row, rules: Rules, sending: dict[str, int], lease_ms: int,
           decided: list[Decided], waiting: list[Row]) -> Claim | None:
    """Read one due row into the policy's context and apply its decision; a Claim if it sends."""
    nid, no, channel, kind = row["notification_id"], row["step_no"], row["channel"], row["kind"]
    catalog = rules.catalog
    who = _recipient(tx, row)
    kind_rules = catalog.kinds.get(kind)
    sent = _sent(tx, row, kind_rules) if kind_rules else ()
    if sent is None:
        waiting.append(row)
        return None
    ctx = ClaimContext(nid, no, channel, Lane(row["lane"]), row["send_after"],
                       row["resolution"] if row["resolved_at"] is not None else None,
                       row["expires_at"], sending.get(nid), who, catalog.contact(channel),
                       rules=kind_rules, medium=catalog.medium(channel),
                       attempts=row["attempts"] - row["retry_base"],
                       sent=sent)
    decision = rules.decide(ctx, tx.now)
    version = who.pref_version if who is not None else None
    if decision.verdict is not Verdict.SEND:
        apply(tx, row, decision, version)
        decided.append(Decided(nid, no, channel, decision, row["tenant"], row["user_id"], kind))
        return None
    attempt = row["attempts"] + 1
    token = secrets.token_hex(8)
    joined = tx.features.joined_writes
    if joined:
        tx.send(joined.CLAIM_ATTEMPT, (attempt, token, tx.now + lease_ms, tx.now, version, nid,
                                       no))
    else:
        tx.send(tx.q.CLAIM_STEP, (attempt, token, tx.now + lease_ms, tx.now, version, nid, no))
        tx.send(tx.q.INSERT_ATTEMPT, (nid, no, attempt, token, tx.now))
    frozen = row["payload"]
    notice = None if frozen is not None else Notice(
        kind, row["tenant"], row["user_id"], orjson.loads(row["params"]), row["created_at"], who)
    return Claim(nid, no, channel, ctx.lane, attempt, attempt - row["retry_base"], token,
                 row["expires_at"], ctx.contact, row["destination"],
                 None if frozen is None else json.loads(frozen), notice, row["tenant"],
                 row["user_id"], kind)


def _recipient(tx: Tx, row: Row) -> Recipient | None:
    """The due row's recipient: its profile (read with the row), disabled contacts, devices."""
    if row["contacts"] is None and not row["has_disabled"] and not row["has_devices"]:
        return None
    tenant, user_id = row["tenant"], row["user_id"]
    dead = disabled(tx, tenant, row["contacts"]) if row["has_disabled"] else []
    devices = tx.all(tx.q.SELECT_DEVICES, (tenant, user_id)) if row["has_devices"] else []
    return recipient(tenant, user_id, row if row["contacts"] is not None else None, dead,
                     devices)


def _sent(tx: Tx, row: Row, rules: KindRules) -> tuple[tuple[LimitRule, int], ...] | None:
    """For a step never tried: each limit that counts it, with the sends to the person its
    window holds (first attempts, earlier claims of this transaction included). A retry is
    never counted again: its first attempt already was. None: the person is locked by another
    transaction (a backend with concurrent writers), so the step is left for the next scan."""
    if row["attempts"] > 0:
        return ()
    out = []
    locks = tx.features.row_locks
    if locks and any(lim.covers(row["kind"], row["channel"]) for lim in rules.limits) \
            and not tx.value(locks.LOCK_PERSON, (row["tenant"], row["user_id"])):
        return None  # another process is counting this person's sends: this step waits
    for lim in rules.limits:
        if lim.covers(row["kind"], row["channel"]):
            kinds, channels = json.dumps(lim.kinds), json.dumps(lim.channels)
            out.append((lim, int(tx.value(tx.q.COUNT_SENDS, (
                tx.now - lim.window_ms, row["tenant"], row["user_id"], kinds, kinds, channels,
                channels)))))
    return tuple(out)


def apply(tx: Tx, row: Row, d: Decision, version: int | None) -> None:
    """Apply a verdict other than send: postpone the step, or end it (and pull the next), or
    hold it for its digest. A postponement is an event when its reason is new (not each second
    a sibling stays out). The preference version read is kept with the decision."""
    q, nid, no = tx.q, row["notification_id"], row["step_no"]
    if d.verdict is Verdict.POSTPONE:
        tx.send(q.POSTPONE_STEP, (d.until, d.reason, tx.now, nid, no))
        if d.reason != row["reason"]:
            tx.send(q.INSERT_EVENT, (nid, no, tx.now, f"postponed to {iso(d.until)}: {d.reason}"))
        if d.until is not None:
            mark(tx, d.until, row["channel"], row["lane"])
        return
    state = ENDED[d.verdict]
    tx.send(q.END_STEP, (state, d.reason, tx.now, version, nid, no))
    if d.verdict is Verdict.HOLD and d.digest and d.until is not None:
        tx.send(q.HOLD_ITEM, (nid, no, row["tenant"], row["user_id"], d.digest, d.until, tx.now))
    if d.pull_next_at is not None:  # the ladder moves on rather than sit out this step's window
        pull_next(tx, nid, f"step {no} {state}", no, d.pull_next_at)


def freeze_steps(tx: Tx, frozen: list[Freeze]) -> list[bool]:
    """Fix each step's rendered destination, payload and template while its claim is still
    ours; True for each that was fixed. Nothing frozen is ever changed."""
    now = tx.now
    fixed = [tx.later(tx.q.FREEZE_STEP, (f.destination, f.payload, f.template, now,
                                         f.claim.notification_id, f.claim.step_no,
                                         f.claim.claim_token)) for f in frozen]
    return [done.count() > 0 for done in fixed]


def complete(tx: Tx, claim: Claim, done: Completion, rules: Rules) -> bool:
    """Record the attempt, and apply the decision if the claim token is still ours; then apply
    receipts that arrived before this answer named its message."""
    q, nid, no = tx.q, claim.notification_id, claim.step_no
    locks = tx.features.row_locks
    if locks:  # before the time is read (tx.py): the provider's message id, so a receipt
        if done.provider_ref:  # naming it either sees this commit or is seen by it; then
            tx.send(locks.LOCK_REF, (done.provider_ref,))  # the notification
        tx.send(locks.LOCK_NOTIFICATION, (nid,))
    joined = tx.features.joined_writes
    if joined:
        step = tx.later(joined.COMPLETE_ATTEMPT, {
            "at": tx.now, "outcome": done.outcome, "state": done.state, "reason": done.reason,
            "ref": done.provider_ref, "retry_at": done.retry_at, "nid": nid, "no": no,
            "attempt": claim.attempt_no, "token": claim.claim_token})
    else:
        tx.send(q.END_ATTEMPT, (tx.now, done.outcome, done.reason, done.provider_ref, nid, no,
                                claim.attempt_no))
        step = tx.later(q.COMPLETE_STEP, (done.state, done.reason, done.provider_ref,
                                          done.retry_at, tx.now, nid, no, claim.claim_token))
    # Read with the step's answer, in case it applies: the steps after it (no step before
    # their read moves them but a pull, which reads them after itself), and the receipts
    # that named the message first (nothing here writes those).
    sent, pulls = done.state is StepState.SENT, done.pull_next
    later = tx.later(q.SELECT_LATER_PENDING, (nid, no)) if sent and not pulls else None
    orphans = tx.later(q.SELECT_ORPHANS, (done.provider_ref, nid)) if done.provider_ref else None
    applied = step.count() > 0
    if applied and done.disable_contact and isinstance(claim.contact, Address):
        tx.send(q.SUPPRESS_SENT, (claim.contact.suppression, claim.destination or "",
                                  done.reason or "rejected", claim.key, tx.now, nid))
    if applied and pulls:
        pull_next(tx, nid, f"step {no} {done.state}", no, tx.now)
    if applied and sent:
        start_window(tx, nid, no, rules, later or tx.later(q.SELECT_LATER_PENDING, (nid, no)))
    for device_id, why in done.dead_devices:  # whatever became of the step
        tx.send(q.KILL_DEVICE, (why, tx.now, device_id, nid))
    if applied and orphans is not None:
        for row in orphans.rows():
            receipts.apply(tx, rows.receipt(row), nid, no, rules)
    if applied:  # a retry, a window restarted, a step pulled, or a sibling no longer waiting
        mark_open(tx, nid)
    return applied


def replay(tx: Tx, nid: str, step_no: int | None, by: str | None = None) -> int:
    """Put dead or unknown steps back to pending under their original key and payload; the
    timeline's event names who asked (`by`: cli, console:NAME), when known."""
    rows = tx.all(tx.q.REPLAY_STEPS, (tx.now, REPLAYED, tx.now, nid, step_no, step_no))
    what = REPLAYED if by is None else f"{REPLAYED} ({by})"
    tx.many(tx.q.INSERT_EVENT, [(nid, r["step_no"], tx.now, what) for r in rows])
    if rows:
        mark_open(tx, nid)
    return len(rows)


def replay_steps(tx: Tx, steps: list[StepKey], by: str | None = None) -> int:
    """A batch of an operator's bulk replay: each step as `replay` puts one back."""
    return sum(replay(tx, s.notification_id, s.step_no, by) for s in steps)


def end_unconfigured(tx: Tx, channels: list[str], decide: DecideFn) -> list[Decided]:
    """Open steps on channels the config no longer has, judged by `decide` as such (it ends
    them, naming why)."""
    out = []
    for row in tx.all(tx.q.SELECT_UNCONFIGURED, (json.dumps(channels),)):
        ctx = ClaimContext(row["notification_id"], row["step_no"], row["channel"],
                           Lane(row["lane"]), row["send_after"], row["resolution"],
                           row["expires_at"], None, None, None, configured=False)
        decision = decide(ctx, tx.now)
        apply(tx, row, decision, None)
        out.append(Decided(row["notification_id"], row["step_no"], row["channel"], decision,
                           row["tenant"], row["user_id"], row["kind"]))
    return out


def resolve(tx: Tx, nid: str, resolution: str, by: str, tenant: str | None,
            kinds: tuple[str, ...], read_kinds: frozenset[str] = frozenset()
            ) -> ResolveResult | None:
    """Resolve once, at this transaction's time; the first resolution wins and later calls
    report it unchanged. With `tenant` (and `kinds`, empty: any), a notification outside them
    is not found and nothing is written. A kind in `read_kinds` has its inbox item read."""
    q = tx.q
    row = tx.one(q.SELECT_RESOLUTION, (nid,))
    if row is None or (tenant is not None and row["tenant"] != tenant) or (
            kinds and row["kind"] not in kinds):
        return None
    if row["resolved_at"] is not None:  # read inside the write: an earlier one won
        return ResolveResult(nid, row["resolution"], row["resolved_at"], False, 0, 0, row["kind"])
    tx.send(q.RESOLVE, (tx.now, resolution, by, nid))
    gone = tx.later(q.SELECT_DEPTH, (nid,))
    cancelling = tx.later(q.CANCEL_PENDING, (f"resolved: {resolution}", tx.now, nid))
    depth, cancelled = int(gone.rows()[0][0]), cancelling.count()
    read = inbox.read_resolved(tx, nid) if row["kind"] in read_kinds else None
    return ResolveResult(nid, resolution, tx.now, True, cancelled, depth, row["kind"], read)


def resolve_keys(tx: Tx, tenant: str, keys: list[tuple[str, str, str]], by: str,
                 kinds: tuple[str, ...], read_kinds: frozenset[str] = frozenset()
                 ) -> list[ResolveResult | None]:
    """Each (user_id, dedup_key, resolution) looked up in `tenant` and resolved, in order, in
    this one transaction; None where the key names nothing the tenant (and `kinds`) holds."""
    found: list[ResolveResult | None] = []
    for user_id, dedup_key, resolution in keys:
        hit = tx.one(tx.q.SELECT_DEDUP, (tenant, user_id, dedup_key))
        found.append(None if hit is None else resolve(tx, hit["id"], resolution, by, tenant,
                                                      kinds, read_kinds))
    return found
