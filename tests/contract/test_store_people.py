"""The store contract for a person, on every backend: a profile or preferences edited from what
the write itself reads (If-Match on the version), an inbox item read by its notification's
resolution, a person erased. (Tenants, made on purpose: test_store_contract.py, TestKeys.)"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from store_support import BACKENDS, LEASE, NOW, RULES, accept, claim, opened

from notifyd.core.clock import FakeClock
from notifyd.core.contacts import hashed_address
from notifyd.core.errors import DomainError
from notifyd.core.models import (
    Completion,
    Decision,
    Device,
    Evidence,
    Freeze,
    ItemRead,
    Outcome,
    Receipt,
    Recipient,
    StepState,
    Verdict,
)
from notifyd.core.records import Erased, InboxEntry
from notifyd.store import Store


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(NOW)


@pytest.fixture(params=sorted(BACKENDS))
async def store(request: pytest.FixtureRequest, tmp_path: Path,
                clock: FakeClock) -> AsyncIterator[Store]:
    async with opened(BACKENDS[request.param](tmp_path, "people.db"), clock) as s:
        yield s


async def test_an_edit_gets_the_profile_its_write_reads(store: Store) -> None:
    seen: list[Recipient | None] = []

    def edit(r: Recipient | None) -> Recipient:
        seen.append(r)
        return Recipient("acme", "u1", "Europe/Paris", contacts={"email": "u@x"})

    await store.edit_recipient("acme", "u1", edit)
    assert seen == [None]
    await store.edit_recipient("acme", "u1", lambda r: Recipient(
        "acme", "u1", "UTC", contacts=r.contacts if r else {}))
    got = await store.get_recipient("acme", "u1")
    assert got is not None and (got.timezone, got.contacts) == ("UTC", {"email": "u@x"})

    def refuse(r: Recipient | None) -> Recipient:
        raise DomainError("invalid_field", "no", "timezone")

    with pytest.raises(DomainError) as refused:
        await store.edit_recipient("acme", "u1", refuse)
    assert refused.value.field == "timezone"
    assert (await store.get_recipient("acme", "u1")) == got  # nothing written


async def test_edits_at_once_each_read_the_one_before(store: Store) -> None:
    def add(n: int):  # noqa: ANN202 - a RecipientEdit
        return lambda r: Recipient("acme", "u1", contacts={
            **(r.contacts if r else {}), f"f{n}": str(n)})

    await asyncio.gather(*(store.edit_recipient("acme", "u1", add(n)) for n in range(20)))
    got = await store.get_recipient("acme", "u1")
    assert got is not None and len(got.contacts) == 20  # none lost


async def test_preferences_edit_under_if_match(store: Store) -> None:
    assert await store.edit_preferences("acme", "u1", lambda r: {"opt_out": True},
                                        frozenset({0})) == (1, True)
    assert await store.edit_preferences("acme", "u1", lambda r: {"opt_out": False},
                                        frozenset({0})) == (1, False)  # stale: nothing
    r = await store.get_recipient("acme", "u1")
    assert r is not None and (r.preferences, r.pref_version) == ({"opt_out": True}, 1)
    assert await store.edit_preferences("acme", "u1", lambda r: {
        "opt_out": not (r and r.preferences.get("opt_out"))}) == (2, True)
    r = await store.get_recipient("acme", "u1")
    assert r is not None and r.preferences == {"opt_out": False}

    def refuse(r: Recipient | None) -> dict[str, object]:
        raise DomainError("invalid_field", "no", "categories")

    with pytest.raises(DomainError):
        await store.edit_preferences("acme", "u1", refuse, frozenset({2}))
    assert (await store.get_recipient("acme", "u1")).pref_version == 2  # type: ignore[union-attr]


async def test_a_resolution_reads_the_item_of_a_kind_that_asks(store: Store,
                                                               clock: FakeClock) -> None:
    await accept(store, "n_1", "a", inbox=InboxEntry("t", None))
    await accept(store, "n_2", "a", inbox=InboxEntry("t", None))
    await accept(store, "n_3", "a", kind="other", inbox=InboxEntry("t", None))
    clock.ms += 5
    r = await store.resolve("n_1", "paid", "test", read_kinds=frozenset({"k"}))
    assert r is not None and r.read == ItemRead("acme", "u1", 2)
    [r2] = await store.resolve_keys("acme", [("u1", "n_2", "paid")], "test",
                                    read_kinds=frozenset({"k"}))
    assert r2 is not None and r2.read == ItemRead("acme", "u1", 1)
    r3 = await store.resolve("n_3", "paid", "test", read_kinds=frozenset({"k"}))
    assert r3 is not None and r3.read is None  # not a kind that asks
    again = await store.resolve("n_1", "other", "test", read_kinds=frozenset({"k"}))
    assert again is not None and (again.changed, again.read) == (False, None)
    items = {i.notification_id: i.read_at for i in await store.inbox_page("acme", "u1",
                                                                           None, 10)}
    assert items == {"n_1": NOW + 5, "n_2": NOW + 5, "n_3": None}
    assert await store.badge("acme", "u1") == 1


EMAIL, PHONE = "u@x.example", "+14155550100"


async def person(store: Store) -> None:
    """u1 of acme with an email and a phone, preferences, a device."""
    await store.put_recipient(Recipient("acme", "u1", contacts={"email": EMAIL, "phone": PHONE}))
    await store.put_preferences("acme", "u1", {"opt_out": True})
    await store.put_device("acme", "u1", Device("d_a", "fcm", "token-a"))


async def test_erasing_a_person_removes_cancels_scrubs_and_hashes(store: Store,
                                                                  clock: FakeClock) -> None:
    await person(store)
    await store.put_recipient(Recipient("other", "u2", contacts={"phone": PHONE}))
    assert await store.suppress("acme", "email", EMAIL, "bounced", "test")
    assert await store.suppress("*", "sms", PHONE, "stop", "twilio")  # u2 has it too
    await accept(store, "n_sent", "a")
    [c] = await claim(store)
    assert await store.freeze([Freeze(c, EMAIL, '{"text": "hi"}', None)]) == [True]
    assert await store.complete(c, Completion(Outcome.SENT, StepState.SENT, provider_ref="p1"),
                                RULES)
    assert await store.record_receipts([Receipt("resend", "e1", Evidence.DELIVERED, None,
                                                key="n_sent:0", address=EMAIL)], RULES)
    await accept(store, "n_held", "a")
    hold = Decision(Verdict.HOLD, "held", until=NOW + 3_600_000, digest="daily")
    assert await claim(store, rules=dataclasses.replace(RULES, decide=lambda c, n: hold)) == []
    await accept(store, "n_fly", "a")
    [flying] = await claim(store)  # claimed, not frozen yet
    await accept(store, "n_open", "a", "a", gap=600_000, inbox=InboxEntry("t", None))
    clock.ms += 5

    e = await store.erase_user("acme", "u1", "key:k")
    assert e == Erased(NOW + 5, True, True, 1, 1, 3, 3, 4, 2, 1, 1, 1)
    assert await store.get_recipient("acme", "u1") is None
    assert await store.inbox_page("acme", "u1", None, 10) == []
    assert await store.badge("acme", "u1") == 0
    assert await store.next_digest_at() is None  # the held item is not digested
    assert await store.erased_at("acme", "u1") == NOW + 5
    assert await store.erased_at("acme", "u2") is None
    for nid in ("n_open", "n_held", "n_fly"):
        n = await store.get_notification(nid)
        assert n is not None and (n.resolution, n.resolved_by, n.params) == (
            "erased", "key:k", {})
    n = await store.get_notification("n_open")
    assert n is not None and [(s.state, s.reason) for s in n.steps] == [
        (StepState.CANCELLED, "resolved: erased")] * 2
    held = await store.get_notification("n_held")
    assert held is not None and held.steps[0].state is StepState.CANCELLED
    sent = await store.get_notification("n_sent")
    assert sent is not None and sent.resolution is None and sent.state == "delivered"
    assert (sent.params, sent.steps[0].destination, sent.steps[0].payload) == ({}, None, None)
    assert await store.freeze([Freeze(flying, EMAIL, '{"text": "hi"}', None)]) == [False]
    assert [(s.tenant, s.channel_type, s.address, s.reason) for s in await store.suppressions(
        "acme")] == [("*", "sms", PHONE, "stop"), ("acme", "email", hashed_address(EMAIL), "bounced")]
    assert [s.address for s in await store.suppressions("acme", EMAIL)] == [hashed_address(EMAIL)]
    # Nothing of theirs goes out again: what was in flight, once its lease ends, is cancelled.
    clock.ms += LEASE
    assert await claim(store) == []
    fly = await store.get_notification("n_fly")
    assert fly is not None and [(s.state, s.payload) for s in fly.steps] == [
        (StepState.CANCELLED, "{}")]


async def test_an_erased_address_stays_suppressed_for_whoever_has_it_next(
        store: Store) -> None:
    await person(store)
    assert await store.suppress("acme", "email", EMAIL, "bounced", "test")
    await store.erase_user("acme", "u1", "cli")
    await store.put_recipient(Recipient("acme", "u3", contacts={"email": EMAIL}))
    r = await store.get_recipient("acme", "u3")
    assert r is not None and [(d.contact, d.reason) for d in r.disabled] == [("email", "bounced")]
    assert [s.address for s in await store.suppressions("acme")] == [EMAIL]  # plain again
    await store.erase_user("acme", "u3", "cli")
    assert await store.unsuppress("acme", "email", EMAIL)  # its hashed form goes too
    assert await store.suppressions("acme") == []
    again = await store.erase_user("acme", "u3", "cli")  # nothing left: nothing counted
    assert (again.profile, again.params, again.hashed) == (False, 0, 0)
