"""Provider evidence in: each receipt stored once, matched to its step, judged by the rules and
applied, in the transaction that answers the provider; a request's one-time token (Mailgun's)
claimed in that same transaction, so a replay stores nothing, whichever process took the first."""

from __future__ import annotations

from collections.abc import Iterator

from notifyd.core.contacts import Address, normal_address
from notifyd.core.models import (
    Nonce,
    Receipt,
    ReceiptContext,
    Recorded,
    Rules,
    StepState,
    message_key,
)
from notifyd.core.steps import StepKey
from notifyd.store.core import inbox
from notifyd.store.core.moves import pull_next
from notifyd.store.core.tx import Tx

PRUNE_BATCH = 100  # expired tokens removed per token claimed: more go than come


def record_all(tx: Tx, found: list[Receipt], rules: Rules, once: Nonce | None) -> list[Recorded]:
    """The request's token claimed (a replay: [REPLAYED], nothing stored), then each receipt
    recorded. Where writers run at once, the provider's message ids and the steps they name
    are locked first, before the time is read (tx.py): a receipt and the send's answer that
    names its message id commit one after the other, so one of them always finds the other."""
    locks = tx.features.row_locks
    if locks:  # each message id (as complete takes it), then each step, in that order
        for ref in sorted({r.provider_ref for r in found if r.provider_ref}):
            tx.send(locks.LOCK_REF, (ref,))
        for r in found:
            match(tx, r)
    if once is not None and not claim(tx, once):
        return [Recorded.REPLAYED]
    return [record(tx, r, rules) for r in found]


def claim(tx: Tx, once: Nonce) -> bool:
    """Keep the token until its window ends; False if it is kept already. Tokens whose window
    has ended go first, a batch at a time. The edge is never past the token's own window: the
    parser let it in before then, so a replay of it is still refused however late this runs."""
    edge = min(tx.now, once.until)
    tx.send(tx.q.PRUNE_WEBHOOK_TOKENS, (once.provider, edge, PRUNE_BATCH))
    return tx.run(tx.q.CLAIM_WEBHOOK_TOKEN, (once.provider, once.value, tx.now, once.until,
                                              edge)) > 0


def record(tx: Tx, r: Receipt, rules: Rules) -> Recorded:
    """Store one receipt: 'duplicate' (seen before), 'applied' to its step, or 'orphan' (kept,
    and applied when its send's answer names the message)."""
    q = tx.q
    if not tx.run(q.INSERT_RECEIPT, (
            r.provider, r.event_id, r.event, r.occurred_at, tx.now, r.provider_ref, r.key,
            r.message_id, r.address, r.channel_type, r.detail, None, None, r.tenant)):
        return Recorded.DUPLICATE
    step = match(tx, r)
    if step is None:
        reason = rules.orphan(r)
        if reason is not None and r.address and r.channel_type:  # every tenant's (a STOP)
            tx.send(q.SUPPRESS, (r.tenant or "*", r.channel_type,
                                 normal_address(r.channel_type, r.address), reason, r.provider,
                                 f"{r.provider}:{r.event_id}", tx.now))
        return Recorded.ORPHAN
    apply(tx, r, step.notification_id, step.step_no, rules)
    return Recorded.APPLIED


def match(tx: Tx, r: Receipt) -> StepKey | None:
    """The step a receipt is about: by the step key it carries, the provider's message id, or
    the Message-ID notifyd set; only a step of the receipt's tenant, when it has one."""
    for key in _named(tx, r):
        step = tx.one(tx.q.SELECT_RECEIPT_STEP, (key.notification_id, key.step_no))
        if step is not None and r.tenant in (None, step["tenant"]):
            return key
    return None


def _named(tx: Tx, r: Receipt) -> Iterator[StepKey]:
    for key in (StepKey.parse(r.key), StepKey.parse(message_key(r.message_id))):
        if key is not None:
            yield key
    if r.provider_ref:
        row = tx.one(tx.q.STEP_BY_REF, (r.provider_ref,))
        if row is not None:
            yield StepKey(row["notification_id"], row["step_no"])


def apply(tx: Tx, r: Receipt, nid: str, no: int, rules: Rules) -> None:
    """Judge the receipt on its step as this transaction reads it; apply what the rules say."""
    q = tx.q
    tx.send(q.MATCH_RECEIPT, (nid, no, r.provider, r.event_id))
    row = tx.one(q.SELECT_RECEIPT_STEP, (nid, no))
    assert row is not None
    contact = rules.catalog.contact(row["channel"])
    address = contact if isinstance(contact, Address) else None
    channel_type = address.suppression if address is not None else r.channel_type
    key = StepKey.parse(r.key)
    device = key.device_id if key is not None else None
    d = rules.judge(ReceiptContext(
        r.event, rules.catalog.stop(row["kind"]), row["resolved_at"] is not None,
        StepState(row["state"]), row["evidence"], channel_type,
        r.address or (row["destination"] if address is not None else None), device))
    if d.evidence is not None:
        tx.send(q.SET_EVIDENCE, (d.evidence, nid, no))
    if d.resolve and tx.run(q.RESOLVE, (tx.now, "delivered", f"receipt:{r.provider}", nid)):
        tx.send(q.CANCEL_PENDING, ("resolved: delivered", tx.now, nid))
        if row["kind"] in rules.catalog.read_on_resolve:
            inbox.read_resolved(tx, nid)
    if d.suppress and channel_type:
        tx.send(q.SUPPRESS, (row["tenant"], channel_type,
                             normal_address(channel_type, r.address or row["destination"] or ""),
                             d.suppress, r.provider, f"{r.provider}:{r.event_id}", tx.now))
    if d.pull_next:
        pull_next(tx, nid, f"step {no} {r.event}", no, tx.now)
    if d.kill_device and device:
        tx.send(q.KILL_DEVICE, (f"{r.provider}: {r.event}", tx.now, device, nid))

