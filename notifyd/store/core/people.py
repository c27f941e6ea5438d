"""A person's profile and preferences changed from what the write itself reads: a merge patch
(or a page's whole document, under If-Match) decided on the row as it is inside the write, so
two changes at once never lose one of them. A profile naming an address an erased person's
suppression keeps one-way gets the suppression back in the same write."""

from __future__ import annotations

import json

from notifyd.core.errors import DomainError
from notifyd.core.models import PreferencesEdit, RecipientEdit
from notifyd.core.records import Hours
from notifyd.store.core.erasure import restore_hashed
from notifyd.store.core.rows import load_recipient
from notifyd.store.core.tx import Tx


def edit_recipient(tx: Tx, tenant: str, user_id: str,
                   edit: RecipientEdit) -> DomainError | None:
    """The profile `edit` makes of the one this write reads, written; what it refuses (a
    DomainError) is returned, and nothing is written."""
    lock_profile(tx, tenant, user_id)
    try:
        r = edit(load_recipient(tx, tenant, user_id))
    except DomainError as e:
        return e
    tx.run(tx.q.UPSERT_RECIPIENT, (
        tenant, user_id, r.timezone, r.locale, r.quiet_start, r.quiet_end,
        json.dumps(r.contacts, sort_keys=True), tx.now))
    restore_hashed(tx, tenant, r.contacts)  # before any claim reads the profile
    return None


def edit_preferences(tx: Tx, tenant: str, user_id: str, edit: PreferencesEdit,
                     if_match: frozenset[int] | None,
                     hours: Hours | None = None) -> tuple[int, bool] | DomainError:
    """The preferences `edit` makes of those this write reads, written as a new version unless
    `if_match` names versions and the current one is not among them: (the version now, whether
    it was written). What `edit` refuses is returned, and nothing is written."""
    lock_profile(tx, tenant, user_id)
    current = load_recipient(tx, tenant, user_id)
    version = current.pref_version if current is not None else 0
    if if_match is not None and version not in if_match:
        return version, False
    try:
        preferences = edit(current)
    except DomainError as e:
        return e
    text = json.dumps(preferences, sort_keys=True)
    return int(tx.value(tx.q.PUT_PREFERENCES, {
        "tenant": tenant, "user_id": user_id, "at": tx.now, "preferences": text,
        "version": None, "hours": hours is not None, "timezone": hours and hours.timezone,
        "quiet_start": hours and hours.quiet_start,
        "quiet_end": hours and hours.quiet_end})), True


def lock_profile(tx: Tx, tenant: str, user_id: str) -> None:
    """Where writers run at once, the person's profile is held from here to the commit: what
    the change reads next is what it changes."""
    locks = tx.features.row_locks
    if locks:
        tx.value(locks.LOCK_PROFILE, (tenant, user_id))
