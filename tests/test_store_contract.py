"""The store contract: what every backend must do, through the `Store` interface alone.

One class, run against every backend in BACKENDS (SQLite today; PostgreSQL joins by adding its URL
factory). No SQL here: a backend is correct if these pass, whatever it keeps underneath.
"""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from notifyd.core.catalog import Catalog, ChannelInfo
from notifyd.core.contacts import EMAIL
from notifyd.core.models import (
    AcceptInput,
    Claim,
    ClaimContext,
    Completion,
    Decision,
    Device,
    Lane,
    Outcome,
    PlannedStep,
    Recipient,
    StepState,
    Verdict,
)
from notifyd.domain.policy import decide_claim
from notifyd.store import Store, open_store

BACKENDS: dict[str, Callable[[Path], str]] = {
    "sqlite": lambda tmp: f"sqlite:///{tmp / 'contract.db'}",
}
NOW = 1_790_000_000_000
CONTACTS = Catalog({"a": ChannelInfo("a", "log", None, None),  # a: no person's address
                    "b": ChannelInfo("b", "smtp", EMAIL, "email")})
LEASE = 60_000


@pytest.fixture(params=sorted(BACKENDS))
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    s = await open_store(BACKENDS[request.param](tmp_path))
    try:
        yield s
    finally:
        await s.close()


def _inp(user: str = "u1", dedup: str | None = "d1", digest: str = "h1",
         tenant: str = "acme") -> AcceptInput:
    return AcceptInput(tenant, user, "k", {"n": 1}, dedup, None, None, digest, "key")


def _plan(*channels: str, gap: int = 60_000, seen: list[Recipient | None] | None = None):  # noqa: ANN202
    def plan(r: Recipient | None) -> tuple[list[PlannedStep], Lane]:
        if seen is not None:
            seen.append(r)
        return [PlannedStep(i, ch, NOW + i * gap) for i, ch in enumerate(channels)], Lane.BULK
    return plan


async def _accept(store: Store, nid: str, *channels: str, user: str = "u1",
                  dedup: str | None = None, gap: int = 60_000) -> str:
    r = await store.accept(_inp(user, dedup or nid), nid, _plan(*channels, gap=gap), 3600, NOW)
    assert r.created
    return nid


async def _claim(store: Store, channel: str = "a", n: int = 10, now: int = NOW,
                 decide: Callable[[ClaimContext, int], Decision] = decide_claim) -> list[Claim]:
    return await store.claim_due(now, [(channel, Lane.BULK, n)], LEASE, CONTACTS, decide)


class TestStoreContract:
    async def test_keys_are_found_by_hash_listed_by_name_and_revoked(self, store: Store) -> None:
        await store.create_key("h1", "billing", "acme", ("k",), NOW)
        key = await store.find_key("h1")
        assert key is not None and (key.name, key.tenant, key.kinds) == ("billing", "acme", ("k",))
        assert [(k.name, k.kinds, k.revoked_at) for k in await store.list_keys()] == [
            ("billing", ("k",), None)]
        assert await store.revoke_key("billing", NOW + 1)
        assert not await store.revoke_key("billing", NOW + 2)
        assert await store.find_key("h1") is None
        assert (await store.list_keys())[0].revoked_at == NOW + 1

    async def test_accept_writes_the_ladder_once_per_dedup_key(self, store: Store) -> None:
        seen: list[Recipient | None] = []
        await store.put_recipient(Recipient("acme", "u1", "UTC", "de", contacts={"b": "x"}), NOW)
        first = await store.accept(_inp(), "n_1", _plan("a", "b", seen=seen), 3600, NOW)
        assert (first.created, first.state, first.first_due) == (True, "a_pending", NOW)
        assert seen[0] is not None and seen[0].locale == "de"  # planned on the profile it read
        again = await store.accept(_inp(), "n_2", _plan("a"), 3600, NOW)
        assert (again.notification_id, again.created, again.conflict) == ("n_1", False, False)
        other = await store.accept(_inp(digest="h2"), "n_3", _plan("a"), 3600, NOW)
        assert (other.notification_id, other.conflict) == ("n_1", True)
        assert await store.find_by_dedup("acme", "u1", "d1") == "n_1"
        assert await store.find_by_dedup("other", "u1", "d1") is None
        n = await store.get_notification("n_1")
        assert n is not None and n.expires_at == NOW + 3_600_000 and n.params == {"n": 1}
        assert [(s.step_no, s.channel, s.state, s.send_after) for s in n.steps] == [
            (0, "a", StepState.PENDING, NOW), (1, "b", StepState.PENDING, NOW + 60_000)]
        assert await store.get_notification("n_404") is None

    async def test_the_first_resolution_wins_and_cancels_open_steps(self, store: Store) -> None:
        await _accept(store, "n_1", "a", "b")
        r = await store.resolve("n_1", "paid", "key:k", NOW + 5)
        assert r is not None and (r.changed, r.cancelled_steps, r.resolution) == (True, 2, "paid")
        later = await store.resolve("n_1", "other", "cli", NOW + 9)
        assert later is not None and (later.changed, later.resolution) == (False, "paid")
        assert await store.resolve("n_404", "x", "cli", NOW) is None
        n = await store.get_notification("n_1")
        assert n is not None and n.state == "resolved" and n.resolved_by == "key:k"

    async def test_a_scoped_resolution_sees_only_its_tenant_and_kinds(self, store: Store) -> None:
        await _accept(store, "n_1", "a", "b")  # tenant acme, kind k
        assert await store.resolve("n_1", "x", "key:o", NOW, tenant="other") is None
        assert await store.resolve("n_1", "x", "key:o", NOW, "acme", ("other-kind",)) is None
        n = await store.get_notification("n_1")
        assert n is not None and n.resolved_at is None  # nothing written out of scope
        r = await store.resolve("n_1", "paid", "key:k", NOW + 5, "acme", ("k",))
        assert r is not None and (r.changed, r.kind, r.resolved_at, r.depth) == (
            True, "k", NOW + 5, 0)

    async def test_the_claim_judges_each_due_step_on_what_it_read(self, store: Store) -> None:
        await _accept(store, "n_1", "a")
        await _accept(store, "n_2", "a", user="u2")
        await store.resolve("n_2", "done", "t", NOW)
        contexts: list[ClaimContext] = []

        def decide(ctx: ClaimContext, now: int) -> Decision:
            contexts.append(ctx)
            return decide_claim(ctx, now)

        [claim] = await _claim(store, decide=decide)
        assert [(c.resolution, c.contact, c.sibling_in_flight) for c in contexts] == [
            (None, None, None)]  # n_2's step was cancelled by the resolution's sweep
        assert (claim.notification_id, claim.attempt_no, claim.tries) == ("n_1", 1, 1)
        assert claim.payload is None and claim.notice is not None  # never frozen: to render
        assert claim.notice.params == {"n": 1}
        n2 = await store.get_notification("n_2")
        assert n2 is not None and n2.steps[0].state == StepState.CANCELLED

    async def test_a_postponed_or_ended_step_is_applied_as_decided(self, store: Store) -> None:
        await _accept(store, "n_1", "a", "a", gap=600_000)
        verdicts = iter([Decision(Verdict.POSTPONE, "later", until=NOW + 5_000),
                         Decision(Verdict.SUPPRESS, "suppression_list: x", pull_next_at=NOW + 7)])
        assert await _claim(store, decide=lambda c, n: next(verdicts)) == []
        s = (await store.get_notification("n_1")).steps  # type: ignore[union-attr]
        assert (s[0].send_after, s[0].reason) == (NOW + 5_000, "later")
        assert await _claim(store, now=NOW + 5_000, decide=lambda c, n: next(verdicts)) == []
        s = (await store.get_notification("n_1")).steps  # type: ignore[union-attr]
        assert (s[0].state, s[1].send_after, s[1].note) == (
            StepState.SUPPRESSED, NOW + 7, "pulled forward: step 0 suppressed")

    async def test_a_sibling_claimed_in_the_same_transaction_counts_as_in_flight(
            self, store: Store) -> None:
        await _accept(store, "n_1", "a", "a", gap=0)
        [claim] = await _claim(store)
        assert claim.step_no == 0
        s1 = (await store.get_notification("n_1")).steps[1]  # type: ignore[union-attr]
        assert s1.reason == "waiting: step 0 is in flight"

    async def test_freeze_is_guarded_by_the_claim_and_never_changes(self, store: Store) -> None:
        await _accept(store, "n_1", "a")
        [claim] = await _claim(store)
        stale = dataclasses.replace(claim, claim_token="not-ours")
        assert await store.freeze([(stale, "x", "{}", None),
                                   (claim, "dest", '{"v": 1}', "k/en/email@abc")], NOW) == [
            False, True]
        assert await store.freeze([(claim, "dest2", '{"v": 2}', None)], NOW) == [False]
        n = await store.get_notification("n_1")
        assert n is not None and n.steps[0].template == "k/en/email@abc"
        unknown = Completion(Outcome.UNKNOWN, StepState.UNKNOWN, "timeout", retry_at=NOW)
        assert await store.complete(claim, unknown, NOW)
        [again] = await _claim(store)
        assert (again.destination, again.payload, again.notice) == ("dest", {"v": 1}, None)
        assert (again.attempt_no, again.key) == (2, "n_1:0")

    async def test_complete_lands_only_under_the_current_claim(self, store: Store) -> None:
        await _accept(store, "n_1", "b", "a", user="ada")
        await store.put_recipient(Recipient("acme", "ada", contacts={"email": "a@x"}), NOW)
        [claim] = await _claim(store, "b")
        await store.freeze([(claim, "a@x", "{}", None)], NOW)
        claim = dataclasses.replace(claim, destination="a@x", payload={})
        rejected = Completion(Outcome.REJECTED, StepState.REJECTED, "550 no such user",
                              disable_contact=True, pull_next=True)
        assert await store.complete(claim, rejected, NOW + 1)
        assert not await store.complete(claim, rejected, NOW + 2)  # the token is spent
        n = await store.get_notification("n_1")
        assert n is not None
        assert (n.steps[0].state, n.steps[1].send_after) == (StepState.REJECTED, NOW + 1)
        assert [a.outcome for a in n.steps[0].attempt_log] == ["rejected"]
        r = await store.get_recipient("acme", "ada")
        assert r is not None
        assert [(d.contact, d.address, d.reason) for d in r.disabled] == [
            ("email", "a@x", "550 no such user")]

    async def test_a_lease_is_taken_over_only_once_it_has_run_out(self, store: Store) -> None:
        await _accept(store, "n_1", "a")
        [claim] = await _claim(store)
        assert await store.lapse_leases(NOW + LEASE - 1) == 0
        assert await store.leased() == (1, NOW + LEASE)
        assert await store.next_due([("a", Lane.BULK)]) == NOW + LEASE
        assert await store.lapse_leases(NOW + LEASE) == 1
        assert await store.leased() == (0, None)
        s = (await store.get_notification("n_1")).steps[0]  # type: ignore[union-attr]
        assert (s.state, s.send_after) == (StepState.UNKNOWN, NOW + LEASE)
        late = Completion(Outcome.SENT, StepState.SENT)
        assert not await store.complete(claim, late, NOW + LEASE + 1)

    async def test_dead_steps_are_listed_and_replayed_under_their_key(self, store: Store) -> None:
        await _accept(store, "n_1", "a")
        [claim] = await _claim(store)
        dead = Completion(Outcome.FAILED, StepState.DEAD, "retry budget spent", pull_next=True)
        assert await store.complete(claim, dead, NOW + 1)
        [letter] = await store.dead_letters(10)
        assert (letter.notification_id, letter.step_no, letter.reason) == (
            "n_1", 0, "retry budget spent")
        assert await store.replay("n_1", 0, NOW + 2) == 1
        assert await store.replay("n_1", 0, NOW + 2) == 0
        [again] = await _claim(store, now=NOW + 2)
        assert (again.key, again.attempt_no, again.tries) == ("n_1:0", 2, 1)

    async def test_steps_on_a_removed_channel_end_as_the_policy_says(self, store: Store) -> None:
        await _accept(store, "n_1", "a", "gone", "a", gap=600_000)
        assert await store.end_unconfigured(["a"], decide_claim, NOW + 10) == 1
        s = (await store.get_notification("n_1")).steps  # type: ignore[union-attr]
        assert (s[1].state, s[1].reason) == (StepState.DEAD, "channel gone is not configured any "
                                             "more")
        assert s[0].send_after == NOW  # untouched
        assert s[2].send_after == NOW + 600_000  # takes the dead step's slot, not sooner

    async def test_a_profile_and_its_disabled_contacts_round_trip(self, store: Store) -> None:
        assert await store.get_recipient("acme", "nobody") is None
        r = Recipient("acme", "u1", "Europe/Paris", "fr", "22:00", "07:00",
                      {"email": "u@x", "chat": {"tg": "42"}})
        await store.put_recipient(r, NOW)
        assert await store.get_recipient("acme", "u1") == r
        assert await store.get_recipient("other", "u1") is None

    async def test_devices_live_and_die_one_by_one(self, store: Store) -> None:
        a = Device("d_a", "webpush", "https://push.example/a", "k", "s")
        b = Device("d_b", "fcm", "token-b")
        await store.put_device("acme", "u1", a, NOW)
        await store.put_device("acme", "u1", b, NOW)
        await _accept(store, "n_1", "a", user="u1")
        [claim] = await _claim(store)
        assert claim.notice is not None and claim.notice.recipient is not None
        assert {d.device_id for d in claim.notice.recipient.devices} == {"d_a", "d_b"}
        done = Completion(Outcome.SENT, StepState.SENT, dead_devices=(("d_a", "HTTP 410"),))
        assert await store.complete(claim, done, NOW + 1)
        r = await store.get_recipient("acme", "u1")
        assert r is not None
        assert {(d.device_id, d.state, d.reason) for d in r.devices} == {
            ("d_a", "dead", "HTTP 410"), ("d_b", "live", None)}
        await store.put_device("acme", "u1", a, NOW + 2)  # registered again: live again
        r = await store.get_recipient("acme", "u1")
        assert r is not None and {d.state for d in r.devices} == {"live"}
        assert await store.delete_device("acme", "u1", "d_b")
        assert not await store.delete_device("acme", "u1", "d_b")
        assert await store.get_recipient("other", "u1") is None
