"""The store contract: what every backend must do, through the `Store` interface alone.

One class, run against every backend in store_support.BACKENDS; it calls every method of the
interface (a test below checks that it does), and test_store_concurrency.py races two instances.
No SQL here: a backend is correct if these pass, whatever it keeps underneath. Every recorded
time is the clock's at the write: the store takes it inside the transaction. A stand-in for one
role (tests/role_support.py) passes that role's tests too: TestKeys runs on MemoryKeys.
"""

from __future__ import annotations

import dataclasses
import inspect
import re
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from role_support import MemoryKeys, members
from store_support import (
    BACKENDS,
    LEASE,
    NOW,
    RULES,
    accept,
    claim,
    inp,
    opened,
    plan,
)

from notifyd.core.clock import FakeClock
from notifyd.core.models import (
    REPLAYED,
    ClaimContext,
    Completion,
    Decision,
    Device,
    DueTimes,
    Evidence,
    Freeze,
    Lane,
    Leases,
    Nonce,
    Outcome,
    PlannedStep,
    Receipt,
    Recipient,
    Route,
    StepState,
    Verdict,
    Want,
)
from notifyd.core.records import (
    Acceptance,
    Cursor,
    DeadMatch,
    DigestDue,
    Hours,
    InboxEntry,
    SigningKey,
)
from notifyd.core.steps import Cause, StepKey
from notifyd.core.text import iso
from notifyd.domain.policy import decide_claim
from notifyd.store import (
    KeyStore,
    Store,
    StoreMissing,
    StoreUnavailable,
    base,
    is_postgres,
    open_store,
)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(NOW)


@pytest.fixture(params=sorted(BACKENDS))
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return BACKENDS[request.param](tmp_path, "contract.db")


@pytest.fixture
async def store(url: str, clock: FakeClock) -> AsyncIterator[Store]:
    async with opened(url, clock) as s:
        yield s


def at(clock: FakeClock, ms: int) -> int:
    clock.ms = ms
    return ms


class TestKeys:
    """KeyStore's contract, on every backend and on the in-memory keys that stand in for them
    where a test needs keys alone (role_support.MemoryKeys)."""

    @pytest.fixture(params=[*sorted(BACKENDS), "memory"])
    async def store(self, request: pytest.FixtureRequest, tmp_path: Path,
                    clock: FakeClock) -> AsyncIterator[KeyStore]:
        if request.param == "memory":
            yield MemoryKeys(clock)
            return
        async with opened(BACKENDS[request.param](tmp_path, "contract.db"), clock) as s:
            yield s

    def test_the_memory_keys_are_the_whole_role(self) -> None:
        """The stand-in has every method of KeyStore, called as the role says."""
        for name in members(KeyStore):
            role, fake = getattr(KeyStore, name), getattr(MemoryKeys, name, None)
            assert fake is not None, name
            assert inspect.signature(fake) == inspect.signature(role), name

    async def test_tenants_are_made_once_and_default_is_always_there(
            self, store: KeyStore) -> None:
        assert [t.name for t in await store.tenants()] == ["default"]
        assert await store.find_tenant("acme") is None
        assert await store.create_tenant("acme")
        assert not await store.create_tenant("acme")
        found = await store.find_tenant("acme")
        assert found is not None and (found.name, found.created_at) == ("acme", NOW)
        assert [t.name for t in await store.tenants()] == ["acme", "default"]

    async def test_keys_are_found_by_hash_listed_by_name_and_revoked(
            self, store: KeyStore, clock: FakeClock) -> None:
        await store.create_key("h1", "billing", "acme", ("k",), frozenset({"post"}))
        key = await store.find_key("h1")
        assert key is not None and (key.name, key.tenant, key.kinds, key.scopes) == (
            "billing", "acme", ("k",), frozenset({"post"}))
        assert [(k.name, k.kinds, k.created_at, k.revoked_at) for k in await store.list_keys()
                ] == [("billing", ("k",), NOW, None)]
        at(clock, NOW + 1)
        assert await store.revoke_key("billing")
        assert not await store.revoke_key("billing")
        assert await store.find_key("h1") is None
        assert (await store.list_keys())[0].revoked_at == NOW + 1

    async def test_a_keys_last_use_is_kept_for_keys_list(
            self, store: KeyStore, clock: FakeClock) -> None:
        await store.create_key("h1", "billing", "acme", ())
        await store.create_key("h2", "ops", "acme", ())
        at(clock, NOW + 5_000)
        await store.mark_key_used("h2")
        await store.mark_key_used("h-none")  # no such key: nothing
        assert [(k.name, k.last_used_at) for k in await store.list_keys()] == [
            ("billing", None), ("ops", NOW + 5_000)]
        found = await store.find_key_named("ops")
        assert found is not None and found.last_used_at == NOW + 5_000

    async def test_a_signing_key_is_made_once_and_only_found_once_made(
            self, store: KeyStore) -> None:
        assert await store.find_signing_key("links") is None
        made = await store.signing_key("links")
        assert len(made) == 32 and await store.signing_key("links") == made
        assert await store.find_signing_key("links") == SigningKey(made)

    async def test_a_key_is_found_by_name_revoked_or_not(
            self, store: KeyStore, clock: FakeClock) -> None:
        assert await store.find_key_named("billing") is None
        await store.create_key("h1", "billing", "acme", (), frozenset({"users"}))
        found = await store.find_key_named("billing")
        assert found is not None and (found.tenant, found.revoked_at) == ("acme", None)
        at(clock, NOW + 7)
        await store.revoke_key("billing")
        found = await store.find_key_named("billing")
        assert found is not None and found.revoked_at == NOW + 7

    async def test_a_rotated_key_verifies_for_its_overlap_then_is_gone(
            self, store: KeyStore, clock: FakeClock) -> None:
        made = await store.rotate_signing_key("tokens:acme", 60_000)  # never made: just made
        assert made.previous is None and await store.signing_key("tokens:acme") == made.secret
        at(clock, NOW + 5)
        turned = await store.rotate_signing_key("tokens:acme", 60_000)
        assert turned == SigningKey(turned.secret, made.secret, NOW + 60_005)
        assert turned.secret != made.secret
        assert await store.signing_key("tokens:acme") == turned.secret  # new tokens: the new key
        assert await store.find_signing_key("tokens:acme") == turned
        assert turned.verifying(NOW + 60_004) == [turned.secret, made.secret]
        assert turned.verifying(NOW + 60_005) == [turned.secret]
        again = await store.rotate_signing_key("tokens:acme", 0)  # the oldest goes at once
        assert again.previous == turned.secret and again.verifying(NOW + 5) == [again.secret]

    async def test_a_session_ended_stays_ended_until_its_expiry_then_goes(
            self, store: KeyStore, clock: FakeClock) -> None:
        assert not await store.session_ended("n1")
        await store.end_session("n1", NOW + 1000)
        await store.end_session("n1", NOW + 1000)  # signing out twice: once
        assert await store.session_ended("n1") and not await store.session_ended("n2")
        at(clock, NOW + 1000)  # its cookie expires now anyway: the next sign-out sweeps it
        await store.end_session("n2", NOW + 5000)
        assert not await store.session_ended("n1") and await store.session_ended("n2")


class TestPeople:

    async def test_a_profile_and_its_disabled_contacts_round_trip(self, store: Store) -> None:
        assert await store.get_recipient("acme", "nobody") is None
        r = Recipient("acme", "u1", "Europe/Paris", "fr", "22:00", "07:00",
                      {"email": "u@x", "chat": {"tg": "42"}})
        await store.put_recipient(r)
        assert await store.get_recipient("acme", "u1") == r
        assert await store.get_recipient("other", "u1") is None
        assert await store.locale_of("acme", "u1") == "fr"
        assert await store.locale_of("acme", "nobody") is None
        assert await store.suppress("acme", "email", "U@X", "bounced", "test")
        got = await store.get_recipient("acme", "u1")
        assert got is not None and [(d.contact, d.address, d.reason) for d in got.disabled] == [
            ("email", "u@x", "bounced")]

    async def test_preferences_are_versioned_by_every_change(self, store: Store) -> None:
        assert await store.put_preferences("acme", "u1", {"opt_out": True}) == 1
        assert await store.put_preferences("acme", "u1", {"opt_out": False}) == 2
        r = await store.get_recipient("acme", "u1")
        assert r is not None and (r.preferences, r.pref_version) == ({"opt_out": False}, 2)

    async def test_preferences_written_over_a_version_refuse_a_stale_one(
            self, store: Store) -> None:
        assert await store.put_preferences("acme", "u1", {"opt_out": True}, version=3) is None
        assert await store.get_recipient("acme", "u1") is None  # nothing written
        assert await store.put_preferences("acme", "u1", {"opt_out": True}, version=0) == 1
        assert await store.put_preferences("acme", "u1", {"opt_out": False}, version=0) is None
        hours = Hours("Europe/Paris", "22:00", "07:00")
        assert await store.put_preferences("acme", "u1", {"opt_out": False}, 1, hours) == 2
        r = await store.get_recipient("acme", "u1")
        assert r is not None and (r.preferences, r.pref_version, r.timezone, r.quiet_start,
                                  r.quiet_end) == ({"opt_out": False}, 2, "Europe/Paris",
                                                   "22:00", "07:00")
        assert await store.put_preferences("acme", "u1", {}) == 3  # no hours: they stay
        r = await store.get_recipient("acme", "u1")
        assert r is not None and (r.timezone, r.quiet_start) == ("Europe/Paris", "22:00")
        await store.put_recipient(Recipient("acme", "u2", contacts={"email": "b@x"}))
        assert await store.put_preferences("acme", "u2", {}, version=0, hours=Hours()) == 1
        r = await store.get_recipient("acme", "u2")
        assert r is not None and r.contacts == {"email": "b@x"} and r.timezone is None

    async def test_a_persons_notifications_are_listed_newest_first(self, store: Store) -> None:
        for nid in ("n_1", "n_3", "n_2"):
            await accept(store, nid, "a")
        await accept(store, "n_4", "a", user="u2")
        assert [n.id for n in await store.notifications_of("acme", "u1", 2)] == ["n_3", "n_2"]
        [four] = await store.notifications_of("acme", "u2", 10)
        assert (four.id, four.kind, four.dedup_key, four.resolution) == ("n_4", "k", "n_4", None)
        assert await store.notifications_of("other", "u1", 10) == []

    async def test_devices_live_and_die_one_by_one(self, store: Store, clock: FakeClock) -> None:
        a = Device("d_a", "webpush", "https://push.example/a", "k", "s")
        b = Device("d_b", "fcm", "token-b")
        await store.put_device("acme", "u1", a)
        await store.put_device("acme", "u1", b)
        await accept(store, "n_1", "a", user="u1")
        [c] = await claim(store)
        assert c.notice is not None and c.notice.recipient is not None
        assert {d.device_id for d in c.notice.recipient.devices} == {"d_a", "d_b"}
        done = Completion(Outcome.SENT, StepState.SENT, dead_devices=(("d_a", "HTTP 410"),))
        assert await store.complete(c, done, RULES)
        r = await store.get_recipient("acme", "u1")
        assert r is not None
        assert {(d.device_id, d.state, d.reason) for d in r.devices} == {
            ("d_a", "dead", "HTTP 410"), ("d_b", "live", None)}
        assert [s.address for s in await store.suppressions("acme")] == ["d_a"]
        await store.put_device("acme", "u1", a)  # registered again: live again
        r = await store.get_recipient("acme", "u1")
        assert r is not None and {d.state for d in r.devices} == {"live"}
        assert await store.delete_device("acme", "u1", "d_b")
        assert not await store.delete_device("acme", "u1", "d_b")
        assert await store.get_recipient("other", "u1") is None


class TestAcceptAndResolve:
    async def test_accept_writes_the_ladder_once_per_dedup_key(
            self, store: Store, clock: FakeClock) -> None:
        seen: list[Recipient | None] = []
        await store.put_recipient(Recipient("acme", "u1", "UTC", "de", contacts={"b": "x"}))
        at(clock, NOW + 7)  # the accept's own time plans the ladder
        first = await store.accept(inp(), "n_1", plan("a", "b", seen=seen), 3600)
        assert (first.created, first.state, first.first_due, first.created_at) == (
            True, "a_pending", NOW + 7, NOW + 7)
        assert seen[0] is not None and seen[0].locale == "de"  # planned on the profile it read
        again = await store.accept(inp(), "n_2", plan("a"), 3600)
        assert (again.notification_id, again.created, again.conflict) == ("n_1", False, False)
        other = await store.accept(inp(digest="h2"), "n_3", plan("a"), 3600)
        assert (other.notification_id, other.conflict, other.existing_kind) == ("n_1", True, "k")
        assert await store.find_by_dedup("acme", "u1", "d1") == "n_1"
        assert await store.find_by_dedup("other", "u1", "d1") is None
        n = await store.get_notification("n_1")
        assert n is not None and (n.created_at, n.expires_at, n.params) == (
            NOW + 7, NOW + 7 + 3_600_000, {"n": 1})
        assert [(s.step_no, s.channel, s.state, s.send_after, s.planned_at) for s in n.steps] == [
            (0, "a", StepState.PENDING, NOW + 7, NOW + 7),
            (1, "b", StepState.PENDING, NOW + 60_007, NOW + 60_007)]
        assert await store.get_notification("n_404") is None

    async def test_a_send_at_starts_the_ladder_and_its_time_to_live(
            self, store: Store, clock: FakeClock) -> None:
        later = dataclasses.replace(inp(), send_at=NOW + 600_000)
        r = await store.accept(later, "n_1", plan("a", "b"), 3600)
        assert (r.created, r.state, r.first_due, r.created_at) == (
            True, "a_pending", NOW + 600_000, NOW)
        n = await store.get_notification("n_1")
        assert n is not None and (n.created_at, n.send_at, n.expires_at) == (
            NOW, NOW + 600_000, NOW + 600_000 + 3_600_000)
        assert [s.send_after for s in n.steps] == [NOW + 600_000, NOW + 660_000]
        at(clock, NOW + 5)  # a send_at already past when the accept runs starts it then
        past = dataclasses.replace(inp(dedup="d2"), send_at=NOW - 1)
        assert (await store.accept(past, "n_2", plan("a"), 3600)).first_due == NOW + 5
        n = await store.get_notification("n_2")
        assert n is not None and (n.send_at, n.expires_at) == (NOW + 5, NOW + 5 + 3_600_000)
        await accept(store, "n_3", "a")
        n = await store.get_notification("n_3")
        assert n is not None and n.send_at is None

    async def test_accept_many_writes_each_as_accept_alone_in_one_write(
            self, store: Store, clock: FakeClock) -> None:
        await accept(store, "n_0", "a", dedup="taken")
        at(clock, NOW + 3)
        results = await store.accept_many([
            Acceptance(inp(dedup="x"), "n_1", plan("a", "b"), 3600),
            Acceptance(inp(dedup="taken", digest="other"), "n_2", plan("a"), 3600),
            Acceptance(inp(dedup="x"), "n_3", plan("a", "b"), 3600),  # the same key again
            Acceptance(inp(dedup="taken"), "n_4", plan("a"), 3600),
            Acceptance(inp(user="u2", dedup="y"), "n_5", plan("a"), 3600,
                       InboxEntry("Hi", None))])
        assert [(r.notification_id, r.created, r.conflict) for r in results] == [
            ("n_1", True, False), ("n_0", False, True), ("n_1", False, False),
            ("n_0", False, False), ("n_5", True, False)]
        assert [r.created_at for r in results if r.created] == [NOW + 3, NOW + 3]
        assert results[4].inbox_seq is not None and results[4].badge == 1
        n = await store.get_notification("n_1")
        assert n is not None and [s.send_after for s in n.steps] == [NOW + 3, NOW + 60_003]
        assert await store.get_notification("n_3") is None
        page = await store.inbox_page("acme", "u2", None, 10)
        assert [i.notification_id for i in page] == ["n_5"]
        assert await store.accept_many([]) == []

    async def test_resolve_keys_resolves_each_by_its_key_in_one_write(
            self, store: Store, clock: FakeClock) -> None:
        await accept(store, "n_1", "a", "b", dedup="k1")
        await accept(store, "n_2", "a", dedup="k2", kind="other")
        at(clock, NOW + 5)
        found = await store.resolve_keys("acme", [
            ("u1", "k1", "paid"), ("u1", "nope", "x"), ("u1", "k1", "again"),
            ("u1", "k2", "y")], "key:k", ("k",))
        assert [(r.notification_id, r.resolution, r.changed, r.cancelled_steps, r.resolved_at)
                if r else None for r in found] == [
            ("n_1", "paid", True, 2, NOW + 5), None, ("n_1", "paid", False, 0, NOW + 5), None]
        assert await store.resolve_keys("other", [("u1", "k2", "z")], "key:o") == [None]
        n = await store.get_notification("n_2")
        assert n is not None and n.resolved_at is None  # out of the key's kinds: untouched
        [r] = await store.resolve_keys("acme", [("u1", "k2", "z")], "key:k")
        assert r is not None and (r.notification_id, r.changed) == ("n_2", True)

    async def test_the_first_resolution_wins_at_its_own_time(
            self, store: Store, clock: FakeClock) -> None:
        await accept(store, "n_1", "a", "b")
        at(clock, NOW + 5)
        r = await store.resolve("n_1", "paid", "key:k")
        assert r is not None and (r.changed, r.cancelled_steps, r.resolution, r.resolved_at) == (
            True, 2, "paid", NOW + 5)
        at(clock, NOW + 9)
        later = await store.resolve("n_1", "other", "cli")
        assert later is not None and (later.changed, later.resolution, later.resolved_at) == (
            False, "paid", NOW + 5)
        assert await store.resolve("n_404", "x", "cli") is None
        n = await store.get_notification("n_1")
        assert n is not None and (n.state, n.resolved_by, n.resolved_at) == (
            "resolved", "key:k", NOW + 5)
        assert {(s.state, s.reason, s.updated_at) for s in n.steps} == {
            (StepState.CANCELLED, "resolved: paid", NOW + 5)}

    async def test_a_scoped_resolution_sees_only_its_tenant_and_kinds(self, store: Store) -> None:
        await accept(store, "n_1", "a", "b")  # tenant acme, kind k
        assert await store.resolve("n_1", "x", "key:o", tenant="other") is None
        assert await store.resolve("n_1", "x", "key:o", "acme", ("other-kind",)) is None
        n = await store.get_notification("n_1")
        assert n is not None and n.resolved_at is None  # nothing written out of scope
        r = await store.resolve("n_1", "paid", "key:k", "acme", ("k",))
        assert r is not None and (r.changed, r.kind, r.depth) == (True, "k", 0)

    async def test_recorded_times_never_go_back_when_the_clock_does(
            self, store: Store, clock: FakeClock) -> None:
        at(clock, NOW + 1000)
        await accept(store, "n_1", "a")
        at(clock, NOW)  # the clock stepped back (NTP): the next commit records no earlier time
        r = await store.resolve("n_1", "done", "t")
        assert r is not None and r.resolved_at == NOW + 1000


class TestDelivery:
    async def test_the_claim_judges_each_due_step_on_what_it_read(
            self, store: Store, clock: FakeClock) -> None:
        await accept(store, "n_1", "a")
        await accept(store, "n_2", "a", user="u2")
        await store.resolve("n_2", "done", "t")
        contexts: list[ClaimContext] = []

        def decide(ctx: ClaimContext, now: int) -> Decision:
            contexts.append(ctx)
            return decide_claim(ctx, now)

        at(clock, NOW + 3)
        [c] = await claim(store, rules=dataclasses.replace(RULES, decide=decide))
        assert [(x.resolution, x.contact, x.sibling_in_flight) for x in contexts] == [
            (None, None, None)]  # n_2's step was cancelled by the resolution's sweep
        assert (c.notification_id, c.attempt_no, c.tries, c.key) == ("n_1", 1, 1, "n_1:0")
        assert c.payload is None and c.notice is not None and c.notice.params == {"n": 1}
        n = await store.get_notification("n_1")
        assert n is not None
        [attempt] = n.steps[0].attempt_log
        assert (n.steps[0].state, n.steps[0].lease_until, attempt.started_at) == (
            StepState.SENDING, NOW + 3 + LEASE, NOW + 3)
        n2 = await store.get_notification("n_2")
        assert n2 is not None and n2.steps[0].state == StepState.CANCELLED

    async def test_what_the_claim_decides_other_than_send_is_applied_and_returned(
            self, store: Store, clock: FakeClock) -> None:
        await accept(store, "n_1", "a", "a", gap=600_000)
        verdicts = iter([Decision(Verdict.POSTPONE, "later", until=NOW + 5_000),
                         Decision(Verdict.SUPPRESS, "suppression_list: x", pull_next_at=NOW + 7)])
        rules = dataclasses.replace(RULES, decide=lambda c, n: next(verdicts))
        claimed = await store.claim_due([Want("a", Lane.BULK, 10)], LEASE, rules)
        assert claimed.claims == [] and [(d.notification_id, d.step_no, d.decision.verdict)
                                         for d in claimed.decided] == [("n_1", 0, "postpone")]
        s = (await store.get_notification("n_1")).steps  # type: ignore[union-attr]
        assert (s[0].send_after, s[0].reason) == (NOW + 5_000, "later")
        at(clock, NOW + 5_000)
        assert await claim(store, rules=rules) == []
        n = await store.get_notification("n_1")
        assert n is not None
        assert (n.steps[0].state, n.steps[1].send_after, n.steps[1].note) == (
            StepState.SUPPRESSED, NOW + 7, "pulled forward: step 0 suppressed")
        assert [(e.step_no, e.at) for e in n.events][-1] == (1, NOW + 5_000)

    async def test_a_sibling_claimed_in_the_same_transaction_counts_as_in_flight(
            self, store: Store) -> None:
        await accept(store, "n_1", "a", "a", gap=0)
        [c] = await claim(store)
        assert c.step_no == 0
        s1 = (await store.get_notification("n_1")).steps[1]  # type: ignore[union-attr]
        assert s1.reason == "waiting: step 0 is in flight"

    async def test_the_store_counts_sends_against_a_limit_and_the_policy_decides(
            self, store: Store) -> None:
        await store.put_recipient(Recipient("acme", "u1", contacts={"email": "a@x"}))
        for i in range(3):
            await accept(store, f"n_{i}", "b", kind="limited")
        first = await claim(store, "b")
        assert [c.notification_id for c in first] == ["n_0"]  # 1 email an hour
        n1 = await store.get_notification("n_1")
        assert n1 is not None and (n1.steps[0].state, n1.steps[0].reason) == (
            StepState.SUPPRESSED, "rate_limited: over the limit of 1 email per 3600 s of limited")

    async def test_freeze_is_guarded_by_the_claim_and_never_changes(
            self, store: Store, clock: FakeClock) -> None:
        await accept(store, "n_1", "a")
        [c] = await claim(store)
        stale = dataclasses.replace(c, claim_token="not-ours")
        assert await store.freeze([Freeze(stale, "x", "{}", None),
                                   Freeze(c, "dest", '{"v": 1}', "k/en/email@abc")]) == [
            False, True]
        assert await store.freeze([Freeze(c, "dest2", '{"v": 2}', None)]) == [False]
        n = await store.get_notification("n_1")
        assert n is not None and n.steps[0].template == "k/en/email@abc"
        unknown = Completion(Outcome.UNKNOWN, StepState.UNKNOWN, "timeout", retry_at=NOW)
        assert await store.complete(c, unknown, RULES)
        [again] = await claim(store)
        assert (again.destination, again.payload, again.notice) == ("dest", {"v": 1}, None)
        assert (again.attempt_no, again.key) == (2, "n_1:0")

    async def test_complete_lands_only_under_the_current_claim(
            self, store: Store, clock: FakeClock) -> None:
        await accept(store, "n_1", "b", "a", user="ada")
        await store.put_recipient(Recipient("acme", "ada", contacts={"email": "a@x"}))
        [c] = await claim(store, "b")
        await store.freeze([Freeze(c, "a@x", "{}", None)])
        c = dataclasses.replace(c, destination="a@x", payload={})
        rejected = Completion(Outcome.REJECTED, StepState.REJECTED, "550 no such user",
                              disable_contact=True, pull_next=True)
        at(clock, NOW + 1)
        assert await store.complete(c, rejected, RULES)
        assert not await store.complete(c, rejected, RULES)  # the token is spent
        n = await store.get_notification("n_1")
        assert n is not None
        assert (n.steps[0].state, n.steps[0].updated_at, n.steps[1].send_after) == (
            StepState.REJECTED, NOW + 1, NOW + 1)
        assert [(a.outcome, a.ended_at) for a in n.steps[0].attempt_log] == [
            ("rejected", NOW + 1)]
        r = await store.get_recipient("acme", "ada")
        assert r is not None
        assert [(d.contact, d.address, d.reason) for d in r.disabled] == [
            ("email", "a@x", "550 no such user")]
        [listed] = await store.suppressions("acme", "a@x")
        assert (listed.source, listed.evidence, listed.created_at) == ("send", "n_1:0", NOW + 1)

    async def test_a_sent_step_starts_the_window_of_the_step_after_it(
            self, store: Store, clock: FakeClock) -> None:
        await store.accept(inp(), "n_1", _windowed(), 3600)
        [c] = await claim(store)
        at(clock, NOW + 45_000)  # sent late: the next step's 30 s run from now
        assert await store.complete(c, Completion(Outcome.SENT, StepState.SENT), RULES)
        n = await store.get_notification("n_1")
        assert n is not None and [s.send_after for s in n.steps] == [
            NOW, NOW + 75_000, NOW + 135_000]
        assert n.steps[1].cause.window_of == 0 and n.steps[1].cause.window_sec == 30
        # The rows say why each moved (the step after it moves with it), when it happened.
        moved = [(f"window restarted: step 0 was sent at {iso(NOW + 45_000)}, and its 30 s "
                  f"window counts from then; due {iso(NOW + 75_000)} instead of "
                  f"{iso(NOW + 30_000)}"),
                 (f"window restarted: step 1 moved to {iso(NOW + 75_000)}, and its 60 s "
                  f"window counts from then; due {iso(NOW + 135_000)} instead of "
                  f"{iso(NOW + 90_000)}")]
        assert [(e.step_no, e.at, e.what) for e in n.events] == [
            (1, NOW + 45_000, moved[0]), (2, NOW + 45_000, moved[1])]
        assert [s.note for s in n.steps[1:]] == moved

    async def test_a_lease_is_taken_over_only_once_it_has_run_out(
            self, store: Store, clock: FakeClock) -> None:
        await accept(store, "n_1", "a")
        [c] = await claim(store)
        at(clock, NOW + LEASE - 1)
        assert await store.lapse_leases() == 0
        assert await store.leased() == Leases(1, NOW + LEASE)
        # the scanner's next look: the lease's end, the step itself not due while it is out
        assert await store.due_times([Route("a", Lane.BULK)], 10) == DueTimes(
            {Route("a", Lane.BULK): []}, NOW + LEASE)
        at(clock, NOW + LEASE)
        assert await store.lapse_leases() == 1
        assert await store.leased() == Leases(0, None)
        s = (await store.get_notification("n_1")).steps[0]  # type: ignore[union-attr]
        assert (s.state, s.send_after) == (StepState.UNKNOWN, NOW + LEASE)
        assert s.attempt_log[0].ended_at == NOW + LEASE
        assert not await store.complete(c, Completion(Outcome.SENT, StepState.SENT), RULES)
        [stuck] = await store.stuck_steps("acme", "unknown", 10)
        assert (stuck.notification_id, stuck.step_no, stuck.state) == ("n_1", 0, "unknown")

    async def test_each_commit_tells_the_due_times_it_made(
            self, store: Store, clock: FakeClock) -> None:
        """What the scanner's due index hears: every write that creates or moves a due time
        tells it, after its commit, as (send_after, channel, lane)."""
        told: list[list[tuple[int, str, str]]] = []
        store.on_due(told.append)
        await accept(store, "n_1", "a", "b", gap=600_000)
        assert told.pop() == [(NOW, "a", "bulk"), (NOW + 600_000, "b", "bulk")]
        later = Decision(Verdict.POSTPONE, "quiet hours", until=NOW + 5_000)
        await store.claim_due([Want("a", Lane.BULK, 10)], LEASE,
                              dataclasses.replace(RULES, decide=lambda c, n: later))
        assert told.pop() == [(NOW + 5_000, "a", "bulk")]
        at(clock, NOW + 5_000)
        [c] = await claim(store)
        retry = Completion(Outcome.FAILED, StepState.PENDING, "503", retry_at=NOW + 9_000)
        assert await store.complete(c, retry, RULES)
        assert sorted(told.pop()) == [(NOW + 9_000, "a", "bulk"), (NOW + 600_000, "b", "bulk")]
        at(clock, NOW + 9_000)
        [c] = await claim(store)
        at(clock, NOW + 9_000 + LEASE)
        assert await store.lapse_leases() == 1  # taken over: due again at once
        assert sorted(told.pop()) == [(NOW + 9_000 + LEASE, "a", "bulk"),
                                      (NOW + 600_000, "b", "bulk")]
        await store.resolve("n_1", "done", "t")
        assert told == []  # a resolution makes nothing due
        store.on_due(None)
        await accept(store, "n_2", "a")
        assert told == []

    async def test_the_due_times_are_read_again_by_route_with_the_first_lease_end(
            self, store: Store, clock: FakeClock) -> None:
        await accept(store, "n_1", "a", "b", gap=600_000)
        await accept(store, "n_2", "a", "a", gap=1_000)
        await accept(store, "n_3", "b")
        routes = [Route("a", Lane.BULK), Route("b", Lane.BULK), Route("a", Lane.URGENT)]
        read = await store.due_times(routes, 10)
        assert read.times == {routes[0]: [NOW, NOW + 1_000], routes[1]: [NOW, NOW + 600_000],
                              routes[2]: []}
        assert read.first_lease_end is None
        assert (await store.due_times(routes[:1], 1)).times == {routes[0]: [NOW]}
        [c] = await claim(store, n=1)
        read = await store.due_times(routes[:1], 10)
        assert read.first_lease_end == NOW + LEASE
        await store.complete(c, Completion(Outcome.SENT, StepState.SENT), RULES)
        assert (await store.due_times(routes[:1], 10)).first_lease_end is None

    async def test_dead_steps_are_listed_and_replayed_under_their_key(
            self, store: Store, clock: FakeClock) -> None:
        await accept(store, "n_1", "a")
        [c] = await claim(store)
        dead = Completion(Outcome.FAILED, StepState.DEAD, "retry budget spent", pull_next=True)
        at(clock, NOW + 1)
        assert await store.complete(c, dead, RULES)
        assert await store.dead_count() == 1
        [letter] = await store.dead_letters(10)
        assert (letter.notification_id, letter.step_no, letter.reason, letter.updated_at) == (
            "n_1", 0, "retry budget spent", NOW + 1)
        [stuck] = await store.stuck_steps("acme", "dead", 10)
        assert (stuck.notification_id, stuck.kind, stuck.user_id, stuck.state) == (
            "n_1", "k", "u1", "dead")
        assert await store.stuck_steps("other", "dead", 10) == []
        assert await store.stuck_steps("acme", "unknown", 10) == []
        at(clock, NOW + 2)
        assert await store.replay("n_1", 0, "console:ada") == 1
        assert await store.replay("n_1", 0) == 0
        n = await store.get_notification("n_1")
        assert n is not None and n.events[-1].what == f"{REPLAYED} (console:ada)"
        [again] = await claim(store)
        assert (again.key, again.attempt_no, again.tries) == ("n_1:0", 2, 1)
        assert await store.dead_count() == 0

    async def test_dead_steps_are_picked_by_filter_page_by_page_and_replayed_in_batches(
            self, store: Store, clock: FakeClock) -> None:
        for nid, channel, kind in (("n_1", "a", "k"), ("n_2", "c", "k"), ("n_3", "a", "other"),
                                   ("n_4", "a", "k"), ("n_5", "a", "k")):
            await accept(store, nid, channel, kind=kind)
        claims = {c.notification_id: c for c in await claim(store) + await claim(store, "c")}
        for i, nid in enumerate(("n_1", "n_2", "n_3", "n_4"), start=1):
            at(clock, NOW + i)  # each dies a millisecond after the one before
            assert await store.complete(claims[nid], Completion(
                Outcome.FAILED, StepState.DEAD, "time to live ends", pull_next=True), RULES)
        assert await store.complete(claims["n_5"], Completion(Outcome.SENT, StepState.SENT),
                                    RULES)
        everything = DeadMatch(until=NOW + 10)
        assert await store.dead_count() == await store.dead_count(everything) == 4
        assert [(d.notification_id, d.step_no, d.died_at, d.expires_at)
                for d in await store.dead_steps(everything, None, 10)] == [
            (f"n_{i}", 0, NOW + i, NOW + 3_600_000) for i in (1, 2, 3, 4)]
        between = DeadMatch(until=NOW + 4, since=NOW + 2)  # [since, until)
        assert [d.notification_id for d in await store.dead_steps(between, None, 10)] == [
            "n_2", "n_3"]
        assert await store.dead_count(DeadMatch(NOW + 10, channel="c")) == 1
        assert await store.dead_count(DeadMatch(NOW + 10, tenant="acme")) == 4
        assert await store.dead_count(DeadMatch(NOW + 10, tenant="other")) == 0

        picked = DeadMatch(until=NOW + 10, channel="a", kind="k")
        assert await store.dead_count(picked) == 2
        [first] = await store.dead_steps(picked, None, 1)
        assert first.key == StepKey("n_1", 0)
        at(clock, NOW + 20)
        assert await store.replay_steps([first.key, StepKey("n_5", 0)]) == 1  # n_5 was sent
        [second] = await store.dead_steps(picked, first, 1)  # the next page, not a repeat
        assert second.key == StepKey("n_4", 0)
        assert await store.replay_steps([second.key]) == 1
        assert await store.dead_steps(picked, second, 1) == []
        assert await store.dead_count(picked) == 0 and await store.dead_count() == 2
        n = await store.get_notification("n_1")
        assert n is not None and (n.steps[0].state, n.steps[0].reason, n.steps[0].send_after) == (
            StepState.PENDING, REPLAYED, NOW + 20)
        again = {c.key: c for c in await claim(store)}
        assert (again["n_1:0"].attempt_no, again["n_1:0"].tries) == (2, 1)
        assert set(again) == {"n_1:0", "n_4:0"}

    async def test_steps_on_a_removed_channel_end_as_the_policy_says(
            self, store: Store, clock: FakeClock) -> None:
        await accept(store, "n_1", "a", "gone", "a", gap=600_000)
        at(clock, NOW + 10)
        [ended] = await store.end_unconfigured(["a"], decide_claim)
        assert (ended.notification_id, ended.step_no, ended.decision.verdict) == (
            "n_1", 1, Verdict.DEAD)
        s = (await store.get_notification("n_1")).steps  # type: ignore[union-attr]
        assert (s[1].state, s[1].reason) == (StepState.DEAD, "channel gone is not configured any "
                                             "more")
        assert s[0].send_after == NOW  # untouched
        assert s[2].send_after == NOW + 600_000  # takes the dead step's slot, not sooner

    async def test_the_oldest_due_step_per_pair(self, store: Store) -> None:
        await accept(store, "n_1", "a", "b")
        a, b = Route("a", Lane.BULK), Route("b", Lane.BULK)
        assert await store.oldest_due([a, b, Route("a", Lane.URGENT)]) == {
            a: NOW, b: NOW + 60_000}


class TestReceipts:
    async def test_a_receipt_is_stored_once_applied_and_dated_as_it_arrived(
            self, store: Store, clock: FakeClock) -> None:
        await accept(store, "n_1", "a", "a")
        [c] = await claim(store)
        await store.complete(c, Completion(Outcome.SENT, StepState.SENT, provider_ref="p1"),
                             RULES)
        at(clock, NOW + 4)
        delivered = Receipt("resend", "e1", Evidence.DELIVERED, NOW + 2, provider_ref="p1")
        assert await store.record_receipts([delivered, delivered], RULES) == [
            "applied", "duplicate"]
        n = await store.get_notification("n_1")
        assert n is not None and n.steps[0].evidence == "delivered"
        assert [(p.step_no, p.event, p.occurred_at, p.received_at) for p in n.proofs] == [
            (0, "delivered", NOW + 2, NOW + 4)]

    async def test_a_receipt_before_its_answer_waits_and_is_applied_by_it(
            self, store: Store) -> None:
        await accept(store, "n_1", "a")
        [c] = await claim(store)
        early = Receipt("resend", "e1", Evidence.DELIVERED, None, provider_ref="p1")
        assert await store.record_receipts([early], RULES) == ["orphan"]
        assert await store.orphan_count() == 1
        await store.complete(c, Completion(Outcome.SENT, StepState.SENT, provider_ref="p1"),
                             RULES)
        assert await store.orphan_count() == 0
        n = await store.get_notification("n_1")
        assert n is not None and n.steps[0].evidence == "delivered"

    async def test_an_account_wide_stop_suppresses_for_every_tenant(self, store: Store) -> None:
        stop = Receipt("twilio", "SM1", Evidence.UNSUBSCRIBED, None, address="+14155550123",
                       channel_type="sms")
        assert await store.record_receipts([stop], RULES) == ["orphan"]
        [listed] = await store.suppressions("acme")
        assert (listed.tenant, listed.channel_type, listed.reason) == ("*", "sms",
                                                                       "unsubscribed")

    async def test_a_tenants_receipt_matches_only_that_tenants_steps(
            self, store: Store) -> None:
        await accept(store, "n_1", "a")  # acme's
        [c] = await claim(store)
        other = Receipt("delivery-receipt", "other:m1", Evidence.DELIVERED, None, key="n_1:0",
                        tenant="other")
        early = Receipt("resend", "e1", Evidence.BOUNCED, None, provider_ref="p1",
                        tenant="other")
        assert await store.record_receipts([other, early], RULES) == ["orphan", "orphan"]
        await store.complete(c, Completion(Outcome.SENT, StepState.SENT, provider_ref="p1"),
                             RULES)  # the answer names p1: the other tenant's orphan stays one
        n = await store.get_notification("n_1")
        assert n is not None and n.steps[0].evidence is None and n.proofs == ()
        assert await store.orphan_count() == 2
        mine = dataclasses.replace(other, event_id="acme:m1", tenant="acme")
        assert await store.record_receipts([mine], RULES) == ["applied"]
        n = await store.get_notification("n_1")
        assert n is not None and n.steps[0].evidence == "delivered"

    async def test_a_one_time_token_is_taken_once_until_its_window_ends(
            self, store: Store, clock: FakeClock) -> None:
        token = Nonce("mailgun", "tok1", NOW + 300_000)
        first = Receipt("mailgun", "e1", Evidence.DELIVERED, None, provider_ref="p1")
        forged = Receipt("mailgun", "e2", Evidence.COMPLAINED, None, address="ada@x.io",
                         channel_type="email")
        assert await store.record_receipts([first], RULES, token) == ["orphan"]
        assert await store.record_receipts([forged], RULES, token) == ["replayed"]
        assert await store.record_receipts([], RULES, token) == ["replayed"]
        assert await store.orphan_count() == 1 and await store.suppressions("acme") == []
        other = dataclasses.replace(token, provider="another")  # each provider's own tokens
        assert await store.record_receipts([], RULES, other) == []
        at(clock, NOW + 300_001)  # let in just before its window ended, stored just after
        assert await store.record_receipts([forged], RULES, token) == ["replayed"]
        later = dataclasses.replace(token, until=NOW + 600_001)  # a new window: new again
        assert await store.record_receipts([], RULES, later) == []
        assert await store.record_receipts([], RULES, later) == ["replayed"]

    async def test_the_suppression_list_takes_and_gives_back(
            self, store: Store, clock: FakeClock) -> None:
        at(clock, NOW + 3)
        assert await store.suppress("acme", "email", "Ada@X.io ", "asked", "cli")
        assert not await store.suppress("acme", "email", "ada@x.io", "again", "cli")
        [s] = await store.suppressions("acme", "ada@x.io")
        assert (s.address, s.reason, s.source, s.created_at) == ("ada@x.io", "asked", "cli",
                                                                 NOW + 3)
        assert await store.suppressions("other") == []
        assert await store.unsuppress("acme", "email", "ADA@x.io")
        assert not await store.unsuppress("acme", "email", "ada@x.io")


class TestInboxAndDigests:
    async def test_items_page_resume_and_keep_their_badge(
            self, store: Store, clock: FakeClock) -> None:
        for i in range(3):
            at(clock, NOW + i)
            await accept(store, f"n_{i}", "a", inbox=InboxEntry(f"title {i}", None))
        page = await store.inbox_page("acme", "u1", None, 2)
        assert [i.notification_id for i in page] == ["n_2", "n_1"]
        after = await store.inbox_page("acme", "u1", Cursor(page[-1].created_at,
                                                             page[-1].notification_id), 2)
        assert [i.notification_id for i in after] == ["n_0"]
        since = await store.inbox_since("acme", "u1", page[-1].seq, 10)
        assert [i.notification_id for i in since] == ["n_2"]
        assert await store.badge("acme", "u1") == 3
        at(clock, NOW + 10)
        read = await store.read_item("acme", "u1", "n_0", frozenset())
        assert read is not None and (read.changed, read.badge) == (True, 2)
        again = await store.read_item("acme", "u1", "n_0", frozenset())
        assert again is not None and (again.changed, again.badge) == (False, 2)
        assert await store.read_item("acme", "u1", "n_404", frozenset()) is None
        archived = await store.archive_item("acme", "u1", "n_1")
        assert archived is not None and (archived.changed, archived.badge) == (True, 1)
        assert [i.notification_id for i in await store.inbox_page("acme", "u1", None, 10)] == [
            "n_2", "n_0"]
        items = await store.inbox_page("acme", "u1", None, 10, archived=True)
        assert {(i.notification_id, i.read_at, i.archived_at) for i in items} == {
            ("n_2", None, None), ("n_1", None, NOW + 10), ("n_0", NOW + 10, None)}
        everything = await store.read_all("acme", "u1", frozenset())
        assert (everything.changed, everything.badge) == (True, 0)
        assert await store.rebuild_badges() == 0

    async def test_a_caller_limited_to_some_kinds_sees_and_changes_only_those(
            self, store: Store, clock: FakeClock) -> None:
        for i, kind in enumerate(("news", "secret", "news", "secret")):
            at(clock, NOW + i)
            await accept(store, f"n_{i}", "a", kind=kind, inbox=InboxEntry(f"t{i}", None))
        news = ("news",)
        page = await store.inbox_page("acme", "u1", None, 10, kinds=news)
        assert [i.notification_id for i in page] == ["n_2", "n_0"]
        assert await store.badge("acme", "u1", news) == 2
        assert await store.read_item("acme", "u1", "n_1", frozenset(), news) is None
        assert await store.archive_item("acme", "u1", "n_3", news) is None
        read = await store.read_item("acme", "u1", "n_0", frozenset(), news)
        assert read is not None and (read.changed, read.badge) == (True, 3)
        everything = await store.read_all("acme", "u1", frozenset({"secret"}), news)
        assert (everything.changed, everything.badge, everything.resolved) == (True, 2, ())
        assert await store.badge("acme", "u1", news) == 0
        assert await store.badge("acme", "u1") == 2  # the secret items, unread
        assert await store.rebuild_badges() == 0

    async def test_reading_an_item_resolves_a_kind_that_stops_when_read(
            self, store: Store, clock: FakeClock) -> None:
        await accept(store, "n_1", "a", "a", inbox=InboxEntry("t", "b"))
        at(clock, NOW + 5)
        change = await store.read_item("acme", "u1", "n_1", frozenset({"k"}))
        assert change is not None and change.resolved == ("n_1",)
        n = await store.get_notification("n_1")
        assert n is not None and (n.resolution, n.resolved_by, n.resolved_at) == (
            "read", "inbox", NOW + 5)

    async def test_held_items_become_one_digest_that_carries_them(
            self, store: Store, clock: FakeClock) -> None:
        window = NOW + 3_600_000
        hold = Decision(Verdict.HOLD, "held", until=window, digest="daily")
        rules = dataclasses.replace(RULES, decide=lambda c, n: hold)
        for i in range(2):
            await accept(store, f"n_{i}", "a")
        assert await claim(store, rules=rules) == []
        assert await store.next_digest_at() == window
        assert await store.due_digests(window - 1, 10) == []
        [due] = await store.due_digests(window, 10)
        assert (due.tenant, due.user_id, due.digest_kind, due.count) == ("acme", "u1", "daily",
                                                                         2)
        members = await store.digest_members(due)
        assert [(m.notification_id, m.step_no, m.params) for m in members] == [
            ("n_0", 0, {"n": 1}), ("n_1", 0, {"n": 1})]
        at(clock, window)
        made = await store.make_digest(due, inp(dedup="digest:daily", kind="daily"), "n_d",
                                       plan("a"), 3600, None,
                                       [StepKey(m.notification_id, m.step_no) for m in members],
                                       window + 86_400_000)
        assert made.created and made.created_at == window
        # Each carried item says so in its own rows: its step digested, by which digest, when,
        # and still why it was held.
        for nid in ("n_0", "n_1"):
            n = await store.get_notification(nid)
            assert n is not None and n.state == "digested"
            [s] = n.steps
            assert (s.state, s.reason, s.digest_id, s.held_at, s.updated_at) == (
                StepState.DIGESTED, "held", "n_d", NOW, window)
        assert await store.due_digests(window, 10) == []
        assert await store.next_digest_at() is None
        again = DigestDue("acme", "u1", "daily", window, 2)
        assert not (await store.make_digest(again, inp(dedup="digest:daily", kind="daily"),
                                            "n_e", plan("a"), 3600, None, [], 0)).created


class TestOperations:
    async def test_it_opens_pings_backs_up_and_closes(self, url: str, tmp_path: Path,
                                                       clock: FakeClock) -> None:
        with pytest.raises(StoreMissing):
            await open_store(url.replace("contract.db", "missing.db"), clock, create=False)
        s = await open_store(url, clock)
        try:
            assert s.url.endswith("" if is_postgres(url) else "contract.db") and s.fault is None
            await s.ping()
            await accept(s, "n_1", "a")
            if is_postgres(url):  # pg_dump's, not ours
                with pytest.raises(StoreUnavailable, match="pg_dump"):
                    await s.backup(str(tmp_path / "copy.db"))
            else:
                await s.backup(str(tmp_path / "copy.db"))
                assert (tmp_path / "copy.db").stat().st_size > 0
        finally:
            await s.close()
        again = await open_store(url, clock, create=False)  # what it committed is there
        try:
            assert await again.get_notification("n_1") is not None
        finally:
            await again.close()

    async def test_a_one_time_token_outlives_a_restart_and_binds_every_instance(
            self, url: str, clock: FakeClock) -> None:
        token = Nonce("mailgun", "tok1", NOW + 300_000)
        async with opened(url, clock) as first, opened(url, clock) as second:
            assert await first.record_receipts([], RULES, token) == []
            assert await second.record_receipts([], RULES, token) == ["replayed"]
        async with opened(url, clock) as restarted:
            assert await restarted.record_receipts([], RULES, token) == ["replayed"]


def _windowed():  # noqa: ANN202 - a PlanFn: step 1 is due 30 s after step 0 goes out, step 2
    #                                   60 s after step 1
    def make(r: Recipient | None, now: int) -> tuple[list[PlannedStep], Lane]:
        return [PlannedStep(0, "a", now),
                PlannedStep(1, "a", now + 30_000, cause=Cause(window_of=0, window_sec=30)),
                PlannedStep(2, "a", now + 90_000, cause=Cause(window_of=1, window_sec=60))
                ], Lane.BULK
    return make


def test_the_suite_calls_every_method_of_the_store() -> None:
    """The contract is only as good as its reach: every method of every role is called here or
    in the concurrency suite."""
    roles = [role for role in base.Store.__bases__ if role.__module__ == base.__name__]
    assert base.DeliveryStore in roles and base.RetentionStore in roles
    methods = {name for role in roles for name, _ in inspect.getmembers(role)
               if not name.startswith("_")}
    here = "".join((Path(__file__).parent / name).read_text() for name in (
        "test_store_contract.py", "test_store_concurrency.py", "test_store_retention.py",
        "test_store_events.py", "test_store_people.py", "test_store_signals.py"))
    called = set(re.findall(r"\.(\w+)\b", here)) | {"open"}  # open_store opens it
    assert methods - called == set()

