"""The store contract for a person, on every backend: a profile or preferences edited from what
the write itself reads (If-Match on the version), an inbox item read by its notification's
resolution, a person erased. (Tenants, made on purpose: test_store_contract.py, TestKeys.)"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from store_support import BACKENDS, LEASE, NOW, RULES, accept, claim, opened, plan

from notifyd.core.clock import FakeClock
from notifyd.core.contacts import SUPPRESSION_KEY, hashed_address
from notifyd.core.errors import DomainError
from notifyd.core.events import Audience, EventInput, KindRoute
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
from notifyd.store.core.store import CoreStore


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
    assert e == Erased(NOW + 5, True, True, 1, 1, 3, 3, 4, 2, 1, 1, 1, 0, 0)
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
    key = await suppression_key(store)
    assert [(s.tenant, s.channel_type, s.address, s.reason) for s in await store.suppressions(
        "acme")] == [("*", "sms", PHONE, "stop"),
                     ("acme", "email", hashed_address(EMAIL, key), "bounced")]
    assert [s.address for s in await store.suppressions("acme", EMAIL)] == [
        hashed_address(EMAIL, key)]
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


# --- what else names the person, and the suppressions' key ------------------------------------


async def suppression_key(store: Store) -> bytes:
    found = await store.find_signing_key(SUPPRESSION_KEY)
    assert found is not None  # made by the migration
    return found.secret


async def rows(store: Store, sql: str) -> list[tuple[Any, ...]]:
    assert isinstance(store, CoreStore)
    return [tuple(r) for r in await store.backend.fetch(sql)]


async def test_erasing_scrubs_events_orphan_receipts_and_memberships(store: Store) -> None:
    await person(store)
    await store.put_recipient(Recipient("acme", "u2", contacts={"email": "u2@x.example"}))
    for topic in ("t", "old"):
        await store.put_topic("acme", topic)
        await store.change_members("acme", topic, ("u1", "u2"), ())
    await store.change_members("acme", "old", (), ("u1",))  # a membership ended: its row stays
    said = {"who": EMAIL.upper(), "call": PHONE, "n": 1}  # any case of the address
    news = EventInput("acme", "e1", "news", ("k",), Audience.USERS, said, f"user:{EMAIL}",
                      "h1", "key", None, ("u2",))
    await store.accept_event(news)
    route = KindRoute(plan("a"), 3600, lambda user, nid, locale: InboxEntry(
        f"{said['who']} joined", f"call {said['call']}"))
    assert (await store.route_chunk("acme", "e1", {"k": route}, 10)).done
    assert await store.record_receipts([Receipt("resend", "r9", Evidence.BOUNCED, None,
                                                provider_ref="unknown", address=EMAIL)], RULES)

    e = await store.erase_user("acme", "u1", "cli")
    assert (e.events, e.memberships, e.receipts) == (1, 2, 1)  # t, and old (ended)
    got = await store.get_event("acme", "e1")
    assert got is not None and (got.params, got.subject) == (
        {"who": "[erased]", "call": "[erased]", "n": 1}, "user:[erased]")
    [(nid,)] = await rows(store, "SELECT id FROM notifications WHERE user_id = 'u2'")
    made = await store.get_notification(nid)
    assert made is not None and made.params == {"who": "[erased]", "call": "[erased]", "n": 1}
    [item] = await store.inbox_page("acme", "u2", None, 10)
    assert (item.title, item.body) == ("[erased] joined", "call [erased]")
    assert await rows(store, "SELECT address FROM receipts WHERE event_id = 'r9'") == [(None,)]
    assert await rows(store, "SELECT topic FROM topic_members WHERE user_id = 'u1'") == []
    t = await store.get_topic("acme", "t")
    assert t is not None and (t.members, t.version) == (1, 2)  # a change of its own
    assert await members_of(store, "t") == ["u2"]


async def members_of(store: Store, topic: str) -> list[str]:
    return [m.user_id for m in await store.topic_members("acme", topic, "", 100)]


async def test_a_suppression_is_kept_under_the_installations_key(store: Store) -> None:
    await person(store)
    assert await store.suppress("acme", "sms", PHONE, "stop", "twilio")
    await store.erase_user("acme", "u1", "cli")
    key = await suppression_key(store)
    assert len(key) == 32
    [kept] = await store.suppressions("acme")
    unkeyed = "sha256:" + hashlib.sha256(PHONE.encode()).hexdigest()
    assert kept.address == hashed_address(PHONE, key) != unkeyed
    assert kept.address.startswith("hmac:") and PHONE not in kept.address
    assert [s.address for s in await store.suppressions("acme", PHONE)] == [kept.address]
    await store.put_recipient(Recipient("acme", "u3", contacts={"phone": PHONE}))
    r = await store.get_recipient("acme", "u3")
    assert r is not None and [(d.contact, d.reason) for d in r.disabled] == [("phone", "stop")]
