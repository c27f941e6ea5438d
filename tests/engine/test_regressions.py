"""Regression tests for bugs a review found, each failing on the code before its fix.

The scanner tests run the real `scanner.run` loop as a task over the real store, with a FakeClock
for logic time and a large poll interval, so "sent without waiting for the poll interval" is a
bounded wait (seconds) that the old code, sleeping a whole interval, could not meet. Nothing is
mocked; the lost wake-up test wraps the real store's claim_due only to run a real accept at the
one moment the race needs (just after a scan's claim commits), which loop timing alone rarely hits.
"""

from __future__ import annotations

import asyncio
import subprocess
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from engine_support import (
    Daemon,
    Engine,
    Provider,
    Seen,
    accepted,
    answer,
    clean_env,
    engine,
    hold,
    mailer,
    notifyd_cmd,
    provider,
    reaped,
    webhook,
)
from support import Api

from notifyd.config import Config, KindConfig, LadderStep, ScannerConfig, validate
from notifyd.core.errors import ConfigError
from notifyd.core.models import Claimed, DueTimes, Recipient
from notifyd.domain.policy import decide_claim
from notifyd.domain.views import timeline
from notifyd.engine.sender import TokenBucket

LONG_POLL = ScannerConfig(poll_interval_sec=60, claim_batch=1024)  # a lost wake-up costs a minute
PROMPT_SEC = 5.0  # bounded wait for a send that should go out at once; far below LONG_POLL
ONE_STEP = {"k": KindConfig(ladder=(LadderStep("hook"),))}
TENANT = "default"  # the tenant of engine_support.KEY


@pytest.fixture
async def prov() -> AsyncIterator[Provider]:
    async with provider() as p:
        yield p


async def wait_for_key(prov: Provider, key: str, timeout: float = PROMPT_SEC) -> Seen:
    """Bounded: the first request the provider read under this Idempotency-Key."""
    async with asyncio.timeout(timeout):
        while True:
            prov.arrived.clear()  # before looking, so a request read after the look sets it
            for seen in prov.seen:
                if seen.key == key:
                    return seen
            await prov.arrived.wait()


def error_of(status: int, body: Any) -> tuple[int, Any, Any]:
    """(status, error code, error field); None for the two parts of an answer that is no error."""
    err = (body.get("error") or {}) if isinstance(body, dict) else {}
    return status, err.get("code"), err.get("field")


async def stopped(task: asyncio.Task[None], stop: asyncio.Event) -> None:
    stop.set()
    await asyncio.wait_for(task, 30)


# --- 1. no busy loop while a breaker is half-open -----------------------------------------------


async def test_scanner_sleeps_while_a_half_open_breaker_has_no_due_work(
        tmp_path: Path, prov: Provider) -> None:
    prov.reply = answer(503, "down")
    hook = webhook(prov.url, breaker_min_calls=1, breaker_cooldown_sec=30, max_attempts=1)
    async with engine(tmp_path, {"hook": hook}, ONE_STEP) as e:
        nid = await e.accept()
        await e.cycle()  # the one call fails: the step is dead, the breaker opens
        assert (await e.step(nid, 0))["state"] == "dead"
        breaker = e.pool.channels["hook"].breaker
        assert breaker.state == "open"
        e.clock.advance(31)  # past the cooldown: half-open, waiting for work to probe with
        assert breaker.allowance(e.now) == 1
        assert await e.state_counts() == {"dead": 1}  # nothing pending or unknown

        before = e.store.backend.commits
        stop = asyncio.Event()
        task = asyncio.create_task(e.scanner.run(stop))
        await asyncio.sleep(0.3)  # a short real interval, only to count what the loop writes
        await stopped(task, stop)
        # Start-up writes and one scan; the old loop claimed again at once, hundreds of times here.
        assert e.store.backend.commits - before < 10


# --- 2. no lost wake-up --------------------------------------------------------------------------


async def test_an_accept_landing_right_after_a_scan_is_sent_without_waiting_for_the_poll(
        tmp_path: Path, prov: Provider) -> None:
    """Accepts that commit just after a scan's claim, as a concurrent HTTP accept may, wake the
    scanner mid-scan. N1 lands after one empty scan, N2 right after the claim that took N1
    committed (its due time told to the index while that claim's answer is on its way, at the
    same fake-clock ms, which that claim's settling of the lane must not drop). N1's send is
    held in flight throughout, so no finished send wakes the scanner for N2. An older scanner,
    after the first such wake-up, kept a stale alarm that made it drop the second, and it
    ignored work already due when it went to sleep: N2 waited a poll (60 s)."""
    gate = prov.gate()
    prov.reply = hold(gate, accepted())
    async with engine(tmp_path, {"hook": webhook(prov.url)}, ONE_STEP, scanner=LONG_POLL) as e:
        ids: list[str] = []
        first_claimed = False
        real_claim_due = e.store.claim_due

        async def claim_then_accept(*args: Any, **kw: Any) -> Claimed:
            nonlocal first_claimed
            claimed = await real_claim_due(*args, **kw)  # the real claim, committed
            claims = claimed.claims
            first_claimed |= any(c.notification_id in ids[:1] for c in claims)
            if (not claims and not ids) or (first_claimed and len(ids) == 1):
                ids.append(await e.accept())  # commits, and wakes the scanner, mid-scan
            return claimed

        e.store.claim_due = claim_then_accept  # type: ignore[method-assign]
        stop = asyncio.Event()
        task = asyncio.create_task(e.scanner.run(stop))
        try:
            await wait_for_key(prov, f"{await _first(ids)}:0", timeout=10)
            async with asyncio.timeout(10):
                while len(ids) < 2:
                    await asyncio.sleep(0.01)
            assert prov.in_progress >= 1  # the first send is still held
            await wait_for_key(prov, f"{ids[1]}:0")
            assert prov.in_progress == 2
        finally:
            gate.set()
            await stopped(task, stop)


async def _first(ids: list[str]) -> str:
    async with asyncio.timeout(10):
        while not ids:
            await asyncio.sleep(0.01)
    return ids[0]


# --- 3. a step pulled forward at claim time ------------------------------------------------------


async def test_a_step_pulled_forward_by_a_claim_time_suppression_is_sent_at_once(
        tmp_path: Path, prov: Provider) -> None:
    """N2's step 0 (channel b) waits for b's one bulk slot, held by N1; N1's answer is a 410,
    which disables the user's address. The scan that the freed slot starts suppresses N2's step 0
    and pulls step 1 (channel a) to now. That step goes out at once, not a poll interval later.
    Channel a is scanned before b, so the claim that pulls the step cannot also take it."""
    gate = prov.gate()

    async def reply(seen: Seen) -> web.StreamResponse | None:
        if seen.path == "/b":
            await gate.wait()
            return await answer(410, "gone")(seen)
        return await accepted()(seen)

    prov.reply = reply
    base = f"http://127.0.0.1:{prov.port}"
    channels = {"a": webhook(f"{base}/a"), "b": mailer(f"{base}/b", bulk_concurrency=1)}
    kinds = {"once": KindConfig(ladder=(LadderStep("b"),)),
             "k": KindConfig(ladder=(LadderStep("b", timeout_sec=600), LadderStep("a")))}
    async with engine(tmp_path, channels, kinds, scanner=LONG_POLL) as e:
        await e.store.put_recipient(Recipient(TENANT, "u", contacts={"email": "u@x"}))
        stop = asyncio.Event()
        task = asyncio.create_task(e.scanner.run(stop))
        try:
            n1 = await e.accept("once", user="u")
            await wait_for_key(prov, f"{n1}:0")  # b's only bulk slot, held; the answer: 404
            n2 = await e.accept("k", user="u")  # due now, planned while b is still enabled
            assert (await e.step(n2, 0))["state"] == "pending"
            gate.set()  # N1 rejected, b disabled for u; the freed slot wakes the scanner
            seen = await wait_for_key(prov, f"{n2}:1")
            assert seen.path == "/a"
            s0, s1 = (await e.notification(n2))["steps"]
            assert (s0["state"], s1["note"]) == ("suppressed", "pulled forward: step 0 suppressed")
            assert [s.key for s in prov.seen] == [f"{n1}:0", f"{n2}:1"]
        finally:
            await stopped(task, stop)


# --- 3b. a finished send on a lane with room costs a read, not a claim ---------------------------


async def until(condition: Callable[[], bool], timeout: float = PROMPT_SEC) -> None:
    async with asyncio.timeout(timeout):
        while not condition():
            await asyncio.sleep(0.005)


async def test_a_send_on_a_lane_with_room_costs_no_empty_claim_transaction(
        tmp_path: Path, prov: Provider) -> None:
    """Issue 14's idle cost: each finished send woke the scanner for a claim transaction that
    found nothing, and each claim that took fewer steps than it asked for was followed by
    another at once. Now the claim that took one step is the only one: the finished send's
    commit tells the due index nothing new, and the scanner reads no due time from the rows."""
    async with engine(tmp_path, {"hook": webhook(prov.url)}, ONE_STEP, scanner=LONG_POLL) as e:
        log: list[str] = []  # "claim N" per claim transaction, "read" per read of the due times
        real_claim, real_read = e.store.claim_due, e.store.due_times

        async def counting_claim(*args: Any, **kw: Any) -> Claimed:
            got = await real_claim(*args, **kw)
            log.append(f"claim {len(got.claims)}")
            return got

        async def counting_read(*args: Any, **kw: Any) -> DueTimes:
            log.append("read")
            return await real_read(*args, **kw)

        e.store.claim_due = counting_claim  # type: ignore[method-assign]
        e.store.due_times = counting_read  # type: ignore[method-assign]
        stop = asyncio.Event()
        task = asyncio.create_task(e.scanner.run(stop))
        wakeups = e.scanner.wakeups
        try:
            # the start-up scan is done and it sleeps
            await until(lambda: "claim 0" in log and wakeups.sleep_until is not None)
            log.clear()
            nid = await e.accept()
            await wait_for_key(prov, f"{nid}:0")
            # sent, its outcome committed, and asleep again
            await until(lambda: not e.pool.tasks and wakeups.sleep_until is not None)
            assert (await e.step(nid, 0))["state"] == "sent"
            assert log == ["claim 1"]
        finally:
            await stopped(task, stop)


async def test_a_step_pulled_forward_by_a_send_on_a_lane_with_room_goes_at_once(
        tmp_path: Path, prov: Provider) -> None:
    """The finished send does not claim, but its look at the next due time finds the step it
    pulled forward (the address was rejected: step 1 is due now), well before the poll."""
    prov.reply = lambda seen: (answer(404, "no such user") if seen.path == "/b"
                               else accepted())(seen)
    base = f"http://127.0.0.1:{prov.port}"
    channels = {"a": webhook(f"{base}/a"), "b": mailer(f"{base}/b")}
    kinds = {"k": KindConfig(ladder=(LadderStep("b", timeout_sec=600), LadderStep("a")))}
    async with engine(tmp_path, channels, kinds, scanner=LONG_POLL) as e:
        await e.store.put_recipient(Recipient(TENANT, "u", contacts={"email": "u@x"}))
        stop = asyncio.Event()
        task = asyncio.create_task(e.scanner.run(stop))
        try:
            nid = await e.accept("k", user="u")
            seen = await wait_for_key(prov, f"{nid}:1")
            assert seen.path == "/a"
            assert (await e.step(nid, 0))["state"] == "rejected"
        finally:
            await stopped(task, stop)


# --- 4. a key limited to some kinds sees only those ----------------------------------------------


async def test_a_key_limited_to_a_kind_does_not_find_another_kinds_notification(api: Api) -> None:
    _, body = await api.post({"user_id": "u1", "kind": "alert", "dedup_key": "d1"})
    nid = body["notification_id"]
    fixed_only = await api.new_key(kinds=("fixed",))  # same tenant, another kind
    path = f"/v1/notifications/{nid}"

    assert error_of(*await api.get(path, key=fixed_only)) == (404, "not_found", "id")
    assert error_of(*await api.call("POST", f"{path}/resolve", {}, key=fixed_only)) == (
        404, "not_found", "id")
    assert error_of(*await api.call("POST", "/v1/resolutions",
                                    {"user_id": "u1", "dedup_key": "d1"}, key=fixed_only)) == (
        404, "not_found", "dedup_key")

    status, _ = await api.get(path)  # the all-kinds key still sees it, unresolved
    assert status == 200
    n = await api.store.get_notification(nid)
    assert n is not None and n.resolved_at is None
    _, own = await api.post({"user_id": "u1", "kind": "fixed"}, key=fixed_only)
    status, _ = await api.get(f"/v1/notifications/{own['notification_id']}", key=fixed_only)
    assert status == 200  # the limited key works for its own kind


# --- 5. steps on a channel the config dropped ----------------------------------------------------


async def test_steps_on_a_channel_no_longer_configured_end_dead_when_the_scanner_starts(
        tmp_path: Path, prov: Provider) -> None:
    hook = webhook(prov.url)
    before = {"k": KindConfig(ladder=(LadderStep("sms", timeout_sec=60), LadderStep("hook")))}
    async with engine(tmp_path, {"hook": hook, "sms": webhook(prov.url)}, before) as e:
        nid = await e.accept()
        clock = e.clock
    async with engine(tmp_path, {"hook": hook}, ONE_STEP, clock=clock) as e:  # sms renamed away
        stop = asyncio.Event()
        stop.set()  # run does its start-up work, then returns at once
        await asyncio.wait_for(e.scanner.run(stop), 30)
        s0, s1 = (await e.notification(nid))["steps"]
        assert (s0["channel"], s0["state"], s0["reason"]) == (
            "sms", "dead", "channel sms is not configured any more")
        assert (s1["channel"], s1["state"]) == ("hook", "pending")  # configured: left alone
        assert (s1["send_after"], s1["note"]) == (e.now, "pulled forward: step 0 dead")
        assert [(d.notification_id, d.step_no) for d in await e.store.dead_letters(10)] == [
            (nid, 0)]
    assert prov.seen == []


# --- 6. durations too large to store -------------------------------------------------------------


@pytest.mark.parametrize("timeout_sec", [1e17, 1e300, 30 * 86400 + 1])
async def test_a_huge_fallback_timeout_is_invalid_and_writes_nothing(
        api: Api, timeout_sec: float) -> None:
    chain = [{"channel": "log", "timeout_sec": timeout_sec}, {"channel": "sms"}]
    answer_ = await api.post({"user_id": "u1", "kind": "alert", "fallback_chain": chain})
    assert error_of(*answer_) == (422, "invalid_field", "fallback_chain[0].timeout_sec")
    assert (api.count("notifications"), api.count("steps")) == (0, 0)


YEAR = 365 * 86400


@pytest.mark.parametrize(("kind", "key"), [
    (KindConfig(ttl_sec=YEAR + 1, ladder=(LadderStep("log"),)), "kinds.k.ttl_sec"),
    (KindConfig(ladder=(LadderStep("log", after_sec=YEAR + 1),)), "kinds.k.ladder[0].after_sec"),
    (KindConfig(ladder=(LadderStep("log", timeout_sec=1e17), LadderStep("log"))),
     "kinds.k.ladder[0].timeout_sec"),
])
def test_a_config_duration_over_a_year_is_an_error_naming_the_key(kind: KindConfig,
                                                                   key: str) -> None:
    with pytest.raises(ConfigError) as err:
        validate(Config(kinds={"k": kind}))
    assert str(err.value).startswith(f"{key}:")
    a_year = KindConfig(ttl_sec=YEAR, ladder=(LadderStep("log", after_sec=YEAR, timeout_sec=YEAR),
                                              LadderStep("log")))
    validate(Config(kinds={"k": a_year}))  # a year itself is allowed


# --- 7. a token bucket under a clock stepping back -----------------------------------------------


def test_a_token_bucket_neither_drains_nor_refills_while_the_clock_is_behind() -> None:
    now = 1_000_000
    bucket = TokenBucket(rate=10.0, burst=5, now_ms=now)
    assert bucket.available(now) == 5
    bucket.take(3)
    for _ in range(5):  # the clock steps back 10 s and is read again and again
        assert bucket.available(now - 10_000) == 2
    bucket.take(2)
    for _ in range(5):
        assert bucket.available(now - 10_000) == 0
    assert bucket.available(now) == 0  # back where it was: nothing refilled, nothing owed
    assert bucket.available(now + 100) == 1  # refill resumes at 10/s
    assert bucket.available(now + 10_000) == 5  # up to the burst


# --- 8. one daemon per SQLite file ---------------------------------------------------------------


def test_a_second_daemon_on_the_same_db_exits_and_the_first_stops_cleanly(tmp_path: Path) -> None:
    db = tmp_path / "notifyd.db"
    with reaped([]) as daemons:
        daemons.append(first := Daemon(db))
        second = subprocess.run(notifyd_cmd(db, "serve", "--port", "0"), capture_output=True,
                                text=True, env=clean_env(), cwd=tmp_path, timeout=30,
                                check=False)
        assert second.returncode == 1, second.stderr
        assert "another notifyd serve is running" in second.stderr
        assert first.proc.poll() is None  # the first is untouched
        assert first.stop() == 0, first.stderr()


# --- 9. which rejections disable a contact, and what enables it again ----------------------------


async def _first_attempt(e: Engine, user: str) -> str:
    nid = await e.accept("k", user=user)
    await e.cycle()
    return nid


async def _disabled(e: Engine) -> list[tuple[str, str]]:
    return sorted((kind, address) for _, kind, address, _, _ in await e.suppressed())


@pytest.mark.parametrize("status", [401, 404, 405])
async def test_a_misconfigured_webhook_is_retried_counted_and_disables_nothing(
        tmp_path: Path, prov: Provider, status: int) -> None:
    """401 (our credentials) and 404/405 (our URL) are the config's fault, not the user's: the
    step fails and retries, the breaker counts it, inspect shows why, nobody is disabled."""
    prov.reply = answer(status, "no")
    breaker = {"breaker_min_calls": 2, "breaker_error_rate": 0.5}
    async with engine(tmp_path, {"hook": webhook(prov.url, **breaker)}, ONE_STEP) as e:
        nid = await _first_attempt(e, "alice")
        step = await e.step(nid, 0)
        assert step["state"] == "pending" and step["reason"].startswith(f"HTTP {status}")
        assert await _disabled(e) == []
        again = await e.accept("k", user="alice")
        assert (await e.step(again, 0))["state"] == "pending"
        await e.cycle()
        assert e.pool.channels["hook"].breaker.state == "open"
        text = "\n".join(timeline(await e.record(nid)))
        assert f"attempt 1 failed: HTTP {status}" in text


@pytest.mark.parametrize("status", [400, 410, 422])
async def test_a_producer_webhooks_4xx_fails_and_dead_letters_and_disables_nobody(
        tmp_path: Path, prov: Provider, status: int) -> None:
    """A producer's webhook is not a person's contact: a 4xx is retried, then dead (and so in
    dead-letters, replayable), counted by the breaker; no user's channel is disabled."""
    prov.reply = answer(status, "no")
    async with engine(tmp_path, {"hook": webhook(prov.url, max_attempts=2)}, ONE_STEP) as e:
        nid = await _first_attempt(e, "alice")
        assert (await e.step(nid, 0))["state"] == "pending"
        e.clock.advance(60)
        await e.cycle()
        s0 = await e.step(nid, 0)
        assert (s0["state"], s0["reason"]) == (
            "dead", f"retry budget spent after 2 attempts; last: HTTP {status}")
        assert await _disabled(e) == []
        assert [d.notification_id for d in await e.store.dead_letters(10)] == [nid]
        planned = await e.accept("k", user="alice")
        assert (await e.step(planned, 0))["state"] == "pending"


async def test_a_rejected_address_stays_dead_and_a_new_address_is_live(
        tmp_path: Path, prov: Provider) -> None:
    prov.reply = answer(410, "gone")
    async with engine(tmp_path, {"mail": mailer(prov.url)},
                      {"k": KindConfig(ladder=(LadderStep("mail"),))}) as e:
        await e.store.put_recipient(Recipient(TENANT, "alice", contacts={"email": "a@x"}))
        nid = await _first_attempt(e, "alice")
        assert (await e.step(nid, 0))["state"] == "rejected"
        assert [(t, kind, a, source) for t, kind, a, _, source in await e.suppressed()] == [
            (TENANT, "email", "a@x", "send")]
        await e.store.put_recipient(Recipient(TENANT, "alice", contacts={"email": "a@x"}))
        suppressed = await e.accept("k", user="alice")  # saving the same address changes nothing
        assert (await e.step(suppressed, 0))["state"] == "suppressed"

        await e.store.put_recipient(Recipient(TENANT, "alice", contacts={"email": "b@x"}))
        planned = await e.accept("k", user="alice")
        assert (await e.step(planned, 0))["state"] == "pending"


# --- second review ----------------------------------------------------------------------------


async def test_a_removed_channel_step_gives_its_time_slot_to_the_next_step_not_now(
        tmp_path: Path, prov: Provider) -> None:
    hook = webhook(prov.url)
    ladder = (LadderStep("hook", after_sec=0), LadderStep("old", after_sec=600),
              LadderStep("hook", after_sec=1200))
    async with engine(tmp_path, {"hook": hook, "old": webhook(prov.url)},
                      {"k": KindConfig(ladder=ladder)}) as e:
        nid = await e.accept()
        accepted_at, clock = e.now, e.clock
    clock.advance(10)
    async with engine(tmp_path, {"hook": hook}, {"k": KindConfig(ladder=(LadderStep("hook"),))},
                      clock=clock) as e:
        await e.store.end_unconfigured(["hook"], decide_claim)
        steps = (await e.notification(nid))["steps"]
        assert [(s["state"], s["send_after"] - accepted_at) for s in steps] == [
            ("pending", 0), ("dead", 600_000), ("pending", 600_000)]


async def test_a_failing_claim_waits_the_poll_interval_instead_of_spinning(
        tmp_path: Path, prov: Provider) -> None:
    async with engine(tmp_path, {"hook": webhook(prov.url)}, {"k": KindConfig(
            ladder=(LadderStep("hook"),))}, scanner=ScannerConfig(poll_interval_sec=60)) as e:
        await e.accept()
        calls = 0

        async def full_disk(*_: Any, **__: Any) -> Claimed:
            nonlocal calls
            calls += 1
            raise OSError("database or disk is full")

        e.store.claim_due = full_disk  # type: ignore[method-assign]
        stop = asyncio.Event()
        task = asyncio.create_task(e.scanner.run(stop))
        for _ in range(1000):  # bounded: until the first claim has failed
            if calls:
                break
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.3)  # counting loop turns in this window, not timing anything
        stop.set()
        await asyncio.wait_for(task, 10)
        assert calls == 1  # the old loop retried at once, hundreds of times


async def test_one_unreadable_quiet_hours_profile_does_not_stop_other_claims(
        tmp_path: Path, prov: Provider) -> None:
    async with engine(tmp_path, {"hook": webhook(prov.url)},
                      {"k": KindConfig(ladder=(LadderStep("hook"),))}) as e:
        await e.accept(user="good")
        await e.accept(user="bad")
        await e.store.backend.write(lambda tx: tx.run(
            "INSERT INTO recipients VALUES ('default', 'bad', 'Europe/Nowhere', NULL, '22:00', "
            "'07:00', '{}', 0, NULL, 0, 0)"))
        assert await e.cycle() == 2  # the zone this host no longer knows is ignored


# --- issue 9: what a key may see and do ----------------------------------------------------------


async def test_a_409_names_the_holder_only_to_a_key_that_may_read_it(api: Api) -> None:
    _, first = await api.post({"user_id": "u1", "kind": "alert", "dedup_key": "shared"})
    fixed_only = await api.new_key(kinds=("fixed",))
    status, body = await api.post({"user_id": "u1", "kind": "fixed", "dedup_key": "shared"},
                                  key=fixed_only)
    assert (status, body["error"]["code"]) == (409, "dedup_conflict")
    assert first["notification_id"] not in body["error"]["message"]
    status, body = await api.post({"user_id": "u1", "kind": "fixed", "dedup_key": "shared"})
    assert first["notification_id"] in body["error"]["message"]  # the all-kinds key may


async def test_a_key_does_only_what_its_scopes_allow(api: Api) -> None:
    post_only = await api.new_key(scopes=frozenset({"post"}))
    status, accepted = await api.post({"user_id": "u1", "kind": "alert"}, key=post_only)
    assert status == 202
    nid = accepted["notification_id"]
    for method, path, body in (("GET", f"/v1/notifications/{nid}", None),
                               ("POST", f"/v1/notifications/{nid}/resolve", {}),
                               ("PUT", "/v1/users/u1", {"quiet_hours": {"start": "00:00",
                                                                        "end": "23:00"}}),
                               ("GET", "/v1/users/u1", None)):
        status, answer = await api.call(method, path, body, key=post_only)
        assert (status, answer["error"]["code"]) == (403, "scope_not_allowed"), path
    assert "its scopes: post" in answer["error"]["message"]
