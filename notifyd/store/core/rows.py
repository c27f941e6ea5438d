"""Rows into the records the store hands back, and the recipient as a transaction reads it."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from notifyd.core.contacts import BY_FIELD
from notifyd.core.models import (
    Device,
    DisabledContact,
    Evidence,
    Lane,
    Outcome,
    Receipt,
    Recipient,
    StepState,
    by_choice,
)
from notifyd.core.records import Attempt, Event, Notification, Proof, Step
from notifyd.core.steps import Cause
from notifyd.store.core.tx import Row, Tx


def load_recipient(tx: Tx, tenant: str, user_id: str) -> Recipient | None:
    """The profile and its disabled contacts (no devices), inside a transaction."""
    return profile(tx, tenant, user_id, tx.one(tx.q.SELECT_RECIPIENT, (tenant, user_id)))


def profile(tx: Tx, tenant: str, user_id: str, row: Row | None) -> Recipient | None:
    """A profile row read by SELECT_RECIPIENT, with its disabled contacts read now."""
    if row is None:
        return None
    return recipient(tenant, user_id, row, disabled(tx, tenant, row["contacts"]))


def disabled(tx: Tx, tenant: str, contacts: str) -> list[Row]:
    """The suppressions of a profile's addresses (its contacts as JSON), in its tenant or '*'."""
    addresses = list(json.loads(contacts).values())
    return tx.all(tx.q.SELECT_SUPPRESSED, (tenant, json.dumps(addresses))) if addresses else []


def recipient(tenant: str, user_id: str, row: Row | None, disabled: Sequence[Row],
              devices: Sequence[Row] = ()) -> Recipient | None:
    """A Recipient from a profile row (or None), its disabled-contact rows and its devices."""
    if row is None and not devices:
        return None
    targets = tuple(Device(d["device_id"], d["kind"], d["endpoint"], d["p256dh"], d["auth"],
                           d["state"], d["reason"]) for d in devices)
    if row is None:
        return Recipient(tenant, user_id, devices=targets)
    contacts = json.loads(row["contacts"])
    listed = {(d["channel_type"], d["address"]): d["reason"] for d in disabled}
    dead = tuple(DisabledContact(field, address, listed[(BY_FIELD[field].suppression, address)])
                 for field, address in contacts.items()
                 if field in BY_FIELD and (BY_FIELD[field].suppression, address) in listed)
    prefs = row["preferences"]
    return Recipient(tenant, user_id, row["timezone"], row["locale"], row["quiet_start"],
                     row["quiet_end"], contacts, dead, targets,
                     json.loads(prefs) if prefs else {}, row["pref_version"])


def attempt(r: Row) -> Attempt:
    outcome = Outcome(r["outcome"]) if r["outcome"] is not None else None
    return Attempt(r["notification_id"], r["step_no"], r["attempt_no"], r["claim_token"],
                   r["started_at"], r["ended_at"], outcome, r["reason"], r["provider_ref"])


def step(s: Row, attempts: tuple[Attempt, ...]) -> Step:
    return Step(s["notification_id"], s["step_no"], s["channel"], Lane(s["lane"]),
                s["send_after"], StepState(s["state"]), s["attempts"], s["reason"], s["note"],
                s["provider_ref"], s["destination"], s["payload"], s["claim_token"],
                s["lease_until"], s["updated_at"], s["retry_base"], attempts, s["planned_at"],
                Cause.parse(s["cause"]), s["template"], s["evidence"], s["pref_version"],
                s["plan_note"], s["digest_id"], s["held_at"])


def notification(n: Row, steps: Sequence[Row], attempts: Sequence[Attempt],
                 events: Sequence[Row], proofs: Sequence[Row]) -> Notification:
    return Notification(
        n["id"], n["tenant"], n["user_id"], n["kind"], n["dedup_key"], n["request_hash"],
        json.loads(n["params"]), n["key_name"], n["created_at"], n["expires_at"],
        n["resolved_at"], n["resolution"], n["resolved_by"],
        tuple(step(s, tuple(a for a in attempts if a.step_no == s["step_no"])) for s in steps),
        tuple(Event(e["step_no"], e["at"], e["what"]) for e in events),
        tuple(Proof(p["step_no"], p["provider"], p["event"], p["occurred_at"], p["received_at"],
                    p["detail"]) for p in proofs),
        n["pruned_at"], n["outcome"], n["send_at"], n["event_id"])


def receipt(row: Row) -> Receipt:
    return Receipt(row["provider"], row["event_id"], Evidence(row["event"]), row["occurred_at"],
                   row["provider_ref"], row["step_key"], row["message_id"], row["address"],
                   row["channel_type"], row["detail"], row["tenant"])


def chosen(steps: Sequence[Row]) -> bool:
    """Whether the person's own choice suppressed one of these step rows (state, reason)."""
    return any(s["state"] == StepState.SUPPRESSED and by_choice(s["reason"]) for s in steps)


def split(text: str) -> tuple[str, ...]:
    """A comma-separated column (a key's kinds or scopes) as a tuple."""
    return tuple(part for part in text.split(",") if part)


def as_int(value: Any) -> int | None:
    return None if value is None else int(value)
