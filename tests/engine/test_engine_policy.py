"""Retry policy against a real HTTP provider: backoff bounds, Retry-After, the TTL cap, dead letters
and replay (store and CLI), Rejected pulling the next step forward and disabling the contact, the
circuit breaker holding work pending while open.

The engine is the real Scanner/SenderPool/CoreStore on a file in tmp_path; time is a FakeClock and
the engine moves only when a test calls `tick()` / `settle()`.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import random
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from aiohttp import web
from click.testing import CliRunner, Result
from engine_support import (
    MAILER,
    Engine,
    MailerSettings,
    Provider,
    Seen,
    accepted,
    answer,
    body_of,
    engine,
    hold,
    mailer,
    plain,
    provider,
    registered,
    two_step,
    webhook,
)

from notifyd.channels.base import (
    ChannelType,
    Failed,
    Message,
    Outcome,
    Rendered,
    RenderInput,
    Unknown,
    standard_payload,
)
from notifyd.cli import main
from notifyd.config import ChannelConfig, KindConfig, LadderStep
from notifyd.core.clock import FakeClock
from notifyd.core.models import Claim, Lane, Recipient, StepState
from notifyd.core.text import iso
from notifyd.domain.views import timeline
from notifyd.engine.sender import backoff_ms, decide

HOUR = 3600
YEAR = 365 * 86400  # long enough to survive moving the fake clock up to the CLI's real clock


@pytest.fixture
async def prov() -> AsyncIterator[Provider]:
    async with provider() as p:
        yield p


@pytest.fixture
async def prov2() -> AsyncIterator[Provider]:
    async with provider() as p:
        yield p


def cli(db: str, *args: str) -> Result:
    return CliRunner().invoke(main, list(args), env={"NOTIFYD_DB": str(db), "NOTIFYD_CONFIG": None},
                              catch_exceptions=False)


async def run_cli(db: str, *args: str) -> Result:
    """The CLI runs its own asyncio.run, so it runs on a thread beside the test's loop."""
    return await asyncio.to_thread(cli, db, *args)


async def test_replay_says_when_the_claim_will_suppress_the_replayed_step(
        tmp_path: Path, prov: Provider) -> None:
    prov.reply = answer(503, "down")
    kinds = {"k": KindConfig(ladder=(LadderStep("mail"),))}
    async with engine(tmp_path, {"mail": mailer(prov.url, max_attempts=1)}, kinds) as e:
        await e.store.put_recipient(Recipient("default", "ada", contacts={"email": "a@x"}))
        nid = await e.accept(user="ada")
        await e.cycle()
        assert (await e.step(nid, 0))["state"] == "dead"
        # the address died in the meantime
        assert await e.store.suppress("default", "email", "a@x", "bounced", "ses")
    config = tmp_path / "n.toml"
    config.write_text(f'[channels.mail]\ntype = "mailer"\nurl = "{prov.url}"\n'
                      '[kinds.k]\nladder = [{ channel = "mail" }]\n')
    with registered(MAILER):
        result = await asyncio.to_thread(CliRunner().invoke, main, [
            "--config", str(config), "--db", str(e.url), "replay", nid], env={
            "NOTIFYD_DB": None, "NOTIFYD_CONFIG": None})
    assert result.exit_code == 0, result.output
    assert "warning: step 0 (mail) will be suppressed: its email is disabled (bounced)" in (
        result.stderr)


# --- backoff and the TTL cap, pure ------------------------------------------------------------


def test_backoff_stays_within_full_jitter_bounds() -> None:
    cfg = ChannelConfig(backoff_base_sec=0.5, backoff_max_sec=40.0)
    rng = random.Random(7)
    for tries in range(1, 15):
        ceiling_ms = min(40.0, 0.5 * 2 ** (tries - 1)) * 1000
        draws = [backoff_ms(cfg, tries, rng) for _ in range(2000)]
        assert all(0 <= d <= ceiling_ms for d in draws), tries
        # full jitter: the draws spread over the whole range, not bunched at the ceiling
        assert min(draws) < ceiling_ms * 0.05 and max(draws) > ceiling_ms * 0.95, tries
    assert backoff_ms(cfg, 0, rng) <= 500  # no negative exponent below the first try


def _claim(tries: int, expires_at: int) -> Claim:
    return Claim("n_x", 0, "hook", Lane.BULK, tries, tries, "tok", expires_at, "channel:hook",
                 "http://x", {})


def test_decide_never_schedules_a_retry_at_or_past_the_ttl() -> None:
    cfg = ChannelConfig(max_attempts=6, backoff_base_sec=2.0, backoff_max_sec=120.0)
    rng = random.Random(3)
    now = 1_000_000
    seen = {StepState.PENDING: 0, StepState.UNKNOWN: 0, StepState.DEAD: 0}
    for _ in range(5000):
        tries = rng.randint(1, 6)
        expires_at = now + rng.randint(1, 300_000)
        retry_after = rng.choice([None, None, rng.uniform(0, 400)])
        outcome = Failed("HTTP 503: busy", retry_after) if rng.random() < 0.7 \
            else Unknown("timeout: the provider may have the message")
        done = decide(cfg, _claim(tries, expires_at), outcome, now, rng)
        seen[done.state] += 1
        if done.state == StepState.DEAD:
            assert done.pull_next and done.retry_at is None
            assert done.reason is not None and outcome.reason in done.reason
            continue
        assert tries < cfg.max_attempts
        assert done.retry_at is not None and now <= done.retry_at < expires_at
        ceiling = min(120.0, 2.0 * 2 ** (tries - 1)) * 1000
        if isinstance(outcome, Failed) and outcome.retry_after is not None:
            assert done.retry_at >= now + int(outcome.retry_after * 1000)
            ceiling = max(ceiling, outcome.retry_after * 1000)
        assert done.retry_at - now <= ceiling
        assert done.state == (StepState.PENDING if isinstance(outcome, Failed) else StepState.UNKNOWN)
    assert min(seen.values()) > 100  # every branch was exercised


# --- Retry-After and the TTL against the real provider ---------------------------------------


async def test_429_with_retry_after_30_schedules_the_retry_at_least_30s_later(
        tmp_path: Path, prov: Provider) -> None:
    prov.reply = answer(429, "slow down", {"Retry-After": "30"})
    async with engine(tmp_path, {"hook": webhook(prov.url, backoff_base_sec=0.1)},
                      {"k": two_step()}) as e:
        nid = await e.accept()
        assert await e.cycle() == 1
        s = await e.step(nid, 0)
        assert s["state"] == "pending"
        assert s["send_after"] >= e.now + 30_000
        assert s["reason"] == "HTTP 429; retry 2"
        assert [a["outcome"] for a in s["attempt_log"]] == ["failed"]

        e.clock.advance(29.9)
        assert await e.cycle() == 0  # not before Retry-After
        prov.reply = accepted()
        e.clock.ms = s["send_after"]
        assert await e.cycle() == 1
        assert (await e.step(nid, 0))["state"] == "sent"
        assert prov.keys_seen() == [f"{nid}:0", f"{nid}:0"]


async def test_a_retry_that_would_pass_the_ttl_ends_dead_with_the_failure(
        tmp_path: Path, prov: Provider) -> None:
    prov.reply = answer(503, "maintenance", {"Retry-After": "120"})
    kinds = {"k": two_step(window_sec=30, ttl_sec=60)}
    async with engine(tmp_path, {"hook": webhook(prov.url, max_attempts=10)}, kinds) as e:
        nid = await e.accept()
        assert await e.cycle() == 1
        n = await e.notification(nid)
        s0, s1 = n["steps"]
        assert s0["state"] == "dead"
        assert s0["reason"] == "time to live ends after 1 attempt; last: HTTP 503"
        assert s0["send_after"] < n["expires_at"]  # no retry was scheduled past the TTL
        assert s1["send_after"] == e.now and s1["note"] == "pulled forward: step 0 dead"


# --- dead letters and replay ------------------------------------------------------------------


async def _fail_until_dead(e: Engine, nid: str, attempts: int) -> None:
    for i in range(1, attempts + 1):
        assert await e.cycle() == 1, f"attempt {i} was not claimed"
        s = await e.step(nid, 0)
        if i < attempts:
            assert s["state"] == "pending" and s["reason"] == f"HTTP 500; retry {i + 1}"
            ceiling_ms = min(60.0, 1.0 * 2 ** (i - 1)) * 1000
            assert e.now <= s["send_after"] <= e.now + ceiling_ms
            e.clock.ms = s["send_after"]
    assert (await e.step(nid, 0))["state"] == "dead"


async def test_dead_letter_after_the_budget_then_listed_and_replayed_under_the_same_key(
        tmp_path: Path, prov: Provider, prov2: Provider) -> None:
    prov.reply = answer(500, "down")
    channels = {"hook": webhook(prov.url, max_attempts=3), "hook2": webhook(prov2.url)}
    kinds = {"k": two_step(window_sec=HOUR, second="hook2", ttl_sec=YEAR)}
    async with engine(tmp_path, channels, kinds) as e:
        nid = await e.accept()
        await _fail_until_dead(e, nid, 3)
        s0, s1 = (await e.notification(nid))["steps"]
        assert s0["reason"] == "retry budget spent after 3 attempts; last: HTTP 500"
        assert [a["outcome"] for a in s0["attempt_log"]] == ["failed"] * 3
        assert s1["state"] == "pending" and s1["send_after"] == e.now
        assert s1["note"] == "pulled forward: step 0 dead"

        dead = plain(await e.store.dead_letters(10))
        assert [(d["notification_id"], d["step_no"], d["channel"], d["attempts"], d["reason"])
                for d in dead] == [(nid, 0, "hook", 3, s0["reason"])]
        shown = await run_cli(e.url, "dead-letters")
        assert shown.exit_code == 0, shown.output
        assert f"{nid}:0  hook  attempts=3  {s0['reason']}" in shown.output

        assert await e.cycle() == 1  # the pulled-forward step goes now, on the other channel
        assert (await e.step(nid, 1))["state"] == "sent"

        prov.reply = accepted()  # the provider recovers; an operator replays
        wrong = await run_cli(e.url, "replay", f"{nid}:1")
        assert wrong.exit_code != 0 and "no dead or unknown step" in wrong.output
        replayed = await run_cli(e.url, "replay", f"{nid}:0")
        assert replayed.exit_code == 0 and "replayed 1 step of" in replayed.output, replayed.output
        s0 = await e.step(nid, 0)
        assert (s0["state"], s0["reason"]) == ("pending", "replayed by an operator")
        assert await e.store.dead_letters(10) == []
        e.clock.ms = max(e.now, s0["send_after"])  # the CLI dated it by the real clock
        await e.run_dry()

        s0 = await e.step(nid, 0)
        assert (s0["state"], s0["provider_ref"], s0["attempts"]) == ("sent", f"prov-{nid}:0", 4)
        bodies = prov.bodies_by_key()
        assert list(bodies) == [f"{nid}:0"]
        assert len(bodies[f"{nid}:0"]) == 4
        assert set(bodies[f"{nid}:0"]) == {body_of(s0["payload"])}  # byte-identical every time


async def test_store_replay_gives_a_fresh_budget_and_resends_the_frozen_body(
        tmp_path: Path, prov: Provider) -> None:
    prov.reply = answer(500, "down")
    kinds = {"k": KindConfig(ladder=(LadderStep("hook"),), ttl_sec=YEAR)}
    async with engine(tmp_path, {"hook": webhook(prov.url, max_attempts=2)}, kinds) as e:
        nid = await e.accept()
        await _fail_until_dead(e, nid, 2)
        assert await e.store.replay(nid, None) == 1
        assert await e.store.replay(nid, None) == 0  # only dead or unknown steps
        await _fail_until_dead(e, nid, 2)  # two more tries: the budget counts from the replay
        assert (await e.step(nid, 0))["attempts"] == 4

        prov.reply = accepted()
        assert await e.store.replay(nid, 0) == 1
        await e.run_dry()
        s = await e.step(nid, 0)
        assert s["state"] == "sent"
        assert prov.keys_seen() == [f"{nid}:0"] * 5
        assert set(prov.bodies_by_key()[f"{nid}:0"]) == {body_of(s["payload"])}


# --- Rejected ---------------------------------------------------------------------------------


async def test_rejected_disables_the_address_and_pulls_the_next_step_forward(
        tmp_path: Path, prov: Provider, prov2: Provider) -> None:
    prov.reply = answer(400, "no such mailbox")
    channels = {"mail": mailer(prov.url), "hook2": webhook(prov2.url)}
    async with engine(tmp_path, channels, {"k": two_step("mail", HOUR, second="hook2")}) as e:
        await e.store.put_recipient(Recipient("default", "u-1", contacts={"email": "a@x"}))
        nid = await e.accept(user="u-1")
        assert await e.cycle() == 1
        s0, s1 = (await e.notification(nid))["steps"]
        assert (s0["state"], s0["reason"]) == ("rejected", "HTTP 400")
        assert [a["outcome"] for a in s0["attempt_log"]] == ["rejected"]
        assert (s1["state"], s1["send_after"]) == ("pending", e.now)
        assert s1["note"] == "pulled forward: step 0 rejected"
        [listed] = await e.store.suppressions("default")
        assert (listed.tenant, listed.channel_type, listed.address, listed.reason,
                listed.evidence) == ("default", "email", "a@x", "HTTP 400", f"{nid}:0")

        assert await e.cycle() == 1
        assert (await e.step(nid, 1))["state"] == "sent"
        assert prov.keys_seen() == [f"{nid}:0"]  # never retried
        assert prov2.keys_seen() == [f"{nid}:1"]

        e.clock.advance(10)
        again = await e.accept(user="u-1")
        s0, s1 = (await e.notification(again))["steps"]
        assert (s0["state"], s0["reason"]) == ("suppressed",
                                               "suppression_list: HTTP 400")
        assert (s1["state"], s1["send_after"]) == ("pending", e.now)  # its window collapsed
        await e.store.put_recipient(Recipient("default", "u-2", contacts={"email": "b@x"}))
        other = await e.accept(user="u-2")
        assert (await e.step(other, 0))["state"] == "pending"  # another user is untouched


async def test_a_user_without_the_channels_address_is_suppressed_and_the_ladder_moves_on(
        tmp_path: Path, prov: Provider, prov2: Provider) -> None:
    channels = {"mail": mailer(prov.url), "hook2": webhook(prov2.url)}
    async with engine(tmp_path, channels, {"k": two_step("mail", HOUR, second="hook2")}) as e:
        nid = await e.accept(user="no-profile")
        await e.run_dry()
        s0, s1 = (await e.notification(nid))["steps"]
        assert (s0["state"], s0["reason"]) == ("suppressed", "no_contact: the user has no email")
        assert (s1["state"], s1["send_after"]) == ("sent", e.now)
        assert prov.seen == []


LATE_FIRST = KindConfig(ladder=(LadderStep("mail", after_sec=10, timeout_sec=HOUR),
                                LadderStep("hook2")))


async def _reject_after_accept(e: Engine, prov: Provider) -> str:
    """Accept `later` (first step due in 10 s), then have another ladder's step rejected."""
    await e.store.put_recipient(Recipient("default", "u-1", contacts={"email": "a@x"}))
    later = await e.accept("late", user="u-1")
    prov.reply = answer(400, "gone")
    await e.accept(user="u-1")
    assert await e.cycle() == 1
    assert [(kind, address, reason) for _, kind, address, reason, _ in await e.suppressed()
            ] == [("email", "a@x", "HTTP 400")]
    e.clock.advance(10)
    return later


async def test_a_contact_disabled_after_accept_is_suppressed_at_claim_time(
        tmp_path: Path, prov: Provider, prov2: Provider) -> None:
    channels = {"mail": mailer(prov.url), "hook2": webhook(prov2.url)}
    kinds = {"k": two_step("mail", HOUR, second="hook2"), "late": LATE_FIRST}
    async with engine(tmp_path, channels, kinds) as e:
        later = await _reject_after_accept(e, prov)
        await e.run_dry()
        s0 = await e.step(later, 0)
        assert (s0["state"], s0["reason"]) == ("suppressed", "suppression_list: HTTP 400")
        assert s0["attempt_log"] == []
        assert f"{later}:0" not in prov.keys_seen()


async def test_a_step_suppressed_at_claim_time_pulls_the_next_step_forward(
        tmp_path: Path, prov: Provider, prov2: Provider) -> None:
    channels = {"mail": mailer(prov.url), "hook2": webhook(prov2.url)}
    kinds = {"k": two_step("mail", HOUR, second="hook2"), "late": LATE_FIRST}
    async with engine(tmp_path, channels, kinds) as e:
        later = await _reject_after_accept(e, prov)
        await e.cycle()
        assert (await e.step(later, 0))["state"] == "suppressed"
        assert (await e.step(later, 1))["send_after"] == e.now


# --- the breaker ------------------------------------------------------------------------------

BREAKER = {"breaker_min_calls": 4, "breaker_error_rate": 0.5, "breaker_window_sec": 30.0,
           "breaker_cooldown_sec": 30.0, "max_attempts": 20, "backoff_base_sec": 0.5,
           "backoff_max_sec": 1.0}
ONE_STEP = KindConfig(ladder=(LadderStep("hook"),))
ONE_STEP_URGENT = KindConfig(ladder=(LadderStep("hook"),), urgency="urgent")


async def test_breaker_opens_holds_work_pending_and_a_good_probe_closes_it(
        tmp_path: Path, prov: Provider, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, "notifyd.sender")
    prov.reply = answer(500, "down")
    async with engine(tmp_path, {"hook": webhook(prov.url, **BREAKER)}, {"k": ONE_STEP}) as e:
        breaker = e.pool.channels["hook"].breaker
        ids = await e.accept_many(6)
        assert await e.cycle() == 6
        assert breaker.state == "open"
        opened = e.now

        e.clock.advance(5)  # every retry is due, the breaker is still cooling down
        assert [w for w in e.pool.wants(e.now) if w.channel == "hook"] == []
        ids.append(await e.accept())
        assert await e.cycle() == 0
        assert (await e.state_counts()) == {"pending": 7}  # held, not failed
        assert {(await e.step(n, 0))["attempts"] for n in ids} == {0, 1}
        assert len(prov.seen) == 6

        e.clock.ms = opened + 30_000 - 1
        assert await e.cycle() == 0
        e.clock.ms = opened + 30_000
        assert {w.n for w in e.pool.wants(e.now) if w.channel == "hook"} == {1}
        assert await e.cycle() == 1  # a failing probe ...
        assert breaker.state == "open" and len(prov.seen) == 7
        e.clock.advance(29)
        assert await e.cycle() == 0  # ... opens it for another cooldown

        e.clock.advance(1)
        gate = prov.gate()
        prov.reply = hold(gate, accepted())
        assert await e.tick() == 1  # one probe; nothing else while it is out
        assert breaker.state == "half-open"
        assert await e.tick() == 0
        gate.set()
        await e.settle()
        assert breaker.state == "closed"
        assert await e.cycle() == 0  # its bucket starts empty: the rest go at its rate
        e.clock.advance(0.001)
        await e.run_dry()
        assert (await e.state_counts()) == {"sent": 7}
    said = [r.getMessage() for r in caplog.records if "breaker" in r.getMessage()]
    assert [line.split(":")[0] for line in said] == [  # each names its channel
        "breaker of hook opened", "breaker of hook half-open", "breaker of hook reopened",
        "breaker of hook half-open", "breaker of hook closed"]
    assert said[0].startswith("breaker of hook opened: 4 of 4 recent calls failed; one probe "
                              "in 30 s")


async def test_a_half_open_breaker_lets_exactly_one_probe_out(tmp_path: Path, prov: Provider) -> None:
    prov.reply = answer(500, "down")
    kinds = {"k": ONE_STEP, "u": ONE_STEP_URGENT}
    async with engine(tmp_path, {"hook": webhook(prov.url, **BREAKER)}, kinds) as e:
        for _ in range(3):
            await e.accept("k")
            await e.accept("u")
        assert await e.cycle() == 6
        assert e.pool.channels["hook"].breaker.state == "open"
        e.clock.advance(30)
        assert await e.tick() == 1


async def test_a_late_answer_from_before_the_breaker_opened_is_not_the_probe(
        tmp_path: Path, prov: Provider) -> None:
    slow = prov.gate()
    probe = prov.gate()
    failing: set[str] = set()

    async def reply(seen: Seen) -> web.StreamResponse | None:
        if seen.key in failing:
            return await answer(500, "down")(seen)
        if seen.key == slow_key:
            return await hold(slow, answer(500, "down"))(seen)
        return await hold(probe, accepted())(seen)

    prov.reply = reply
    channel = webhook(prov.url, **{**BREAKER, "max_attempts": 1})
    async with engine(tmp_path, {"hook": channel}, {"k": ONE_STEP}) as e:
        failing.update(f"{n}:0" for n in await e.accept_many(4))
        slow_key = f"{await e.accept()}:0"
        assert await e.tick() == 5
        await e.wait_tasks_left(1)  # the four fast failures come back; the slow one is out
        breaker = e.pool.channels["hook"].breaker
        assert breaker.state == "open"

        e.clock.advance(30)
        await e.accept()
        assert await e.tick() == 1  # the probe is out
        assert breaker.state == "half-open"
        slow.set()  # the call from before the breaker opened fails now
        await e.wait_tasks_left(1)
        probe.set()  # and the probe succeeds
        await e.settle()
        assert breaker.state == "closed"


async def test_a_vendor_shared_by_two_channels_probes_through_the_one_with_work(
        tmp_path: Path, prov: Provider, prov2: Provider) -> None:
    prov.reply = answer(500, "down")
    channels = {"alpha": webhook(prov2.url, vendor="acme", **BREAKER),  # the vendor's first channel
                "hook": webhook(prov.url, vendor="acme", **BREAKER)}
    async with engine(tmp_path, channels, {"k": ONE_STEP}) as e:
        breaker = e.pool.channels["hook"].breaker
        assert e.pool.channels["alpha"].breaker is breaker
        await e.accept_many(6)
        assert await e.cycle() == 6
        assert breaker.state == "open"
        e.clock.advance(30)
        prov.reply = accepted()
        assert await e.cycle() == 1  # one probe, on the channel that has due work
        assert breaker.state == "closed"
        e.clock.advance(0.001)  # both channels' buckets start empty, and fill at their rate
        await e.run_dry()
        assert (await e.state_counts()) == {"sent": 6}


# --- lanes and the token bucket ---------------------------------------------------------------


async def test_claims_only_what_the_lane_and_bucket_can_take_now(
        tmp_path: Path, prov: Provider) -> None:
    channel = webhook(prov.url, rate_per_sec=2.0, burst=3, bulk_concurrency=2)
    async with engine(tmp_path, {"hook": channel}, {"k": ONE_STEP}) as e:
        await e.accept_many(10)
        gate = prov.gate()
        prov.reply = hold(gate, accepted())
        assert await e.tick() == 2  # the lane's ceiling
        assert await e.state_counts() == {"sending": 2, "pending": 8}  # nothing claimed waits
        assert await e.tick() == 0
        gate.set()
        await e.settle()
        assert await e.cycle() == 1  # one token left of the burst of three
        assert await e.cycle() == 0
        assert e.pool.ms_until_capacity(e.now) == 501
        e.clock.advance(0.5)
        assert await e.cycle() == 1  # rate 2/s: a token every 500 ms
        e.clock.advance(10)
        assert await e.cycle() == 2
        assert (await e.state_counts()) == {"sent": 6, "pending": 4}


async def test_one_scan_never_takes_more_tokens_than_the_bucket_holds(
        tmp_path: Path, prov: Provider) -> None:
    channel = webhook(prov.url, rate_per_sec=1.0, burst=3)
    kinds = {"k": ONE_STEP, "u": ONE_STEP_URGENT}
    async with engine(tmp_path, {"hook": channel}, kinds) as e:
        for _ in range(5):
            await e.accept("k")
            await e.accept("u")
        assert await e.cycle() <= 3


async def test_a_broadcast_takes_at_most_its_share_and_codes_keep_flowing(
        tmp_path: Path, prov: Provider) -> None:
    """An announcement queued by the thousand on the same channel as one-time codes: the
    broadcast lane draws at most broadcast_share of the rate, so the codes and the normal
    kinds accepted after it still find tokens, at once, in the next scans."""
    channel = webhook(prov.url, rate_per_sec=10.0, burst=10, broadcast_share=0.3,
                      broadcast_concurrency=100, bulk_concurrency=100)
    kinds = {"news": dataclasses.replace(ONE_STEP, broadcast=True), "otp": ONE_STEP_URGENT,
             "invoice": ONE_STEP}
    async with engine(tmp_path, {"hook": channel}, kinds) as e:
        news = await e.accept_many(1000, kind="news")
        assert {s.lane for s in (await e.record(news[0])).steps} == {"broadcast"}
        assert await e.cycle() == 3  # 30% of the burst of ten
        for _ in range(5):
            e.clock.advance(1)
            assert await e.cycle() == 3  # 30% of ten a second, however long the backlog
        otp, invoice = await e.accept("otp"), await e.accept("invoice")
        assert await e.cycle() == 2  # the codes' share was there all along
        assert (await e.step(otp, 0))["state"] == (await e.step(invoice, 0))["state"] == "sent"
        assert (await e.state_counts())["sent"] == 3 * 6 + 2


# --- quiet hours at claim time ------------------------------------------------------------------


async def test_a_retry_that_falls_in_quiet_hours_waits_for_their_end(
        tmp_path: Path, prov: Provider) -> None:
    def utc(day: int, hh: int, mm: int) -> int:
        return int(datetime(2026, 10, day, hh, mm, tzinfo=UTC).timestamp() * 1000)

    prov.reply = answer(500, "down")
    clock = FakeClock(utc(1, 21, 59))
    async with engine(tmp_path, {"hook": webhook(prov.url)}, {"k": two_step(window_sec=600)},
                      clock=clock) as e:
        await e.store.put_recipient(Recipient("default", "ada", "UTC", None, "22:00", "07:00"))
        nid = await e.accept(user="ada")
        assert await e.cycle() == 1  # 21:59: sent, failed, a retry planned a few seconds on
        prov.reply = accepted()
        e.clock.ms = utc(1, 22, 1)
        assert await e.cycle() == 0  # the retry is due, but now inside quiet hours
        s0 = await e.step(nid, 0)
        assert s0["state"] == "pending" and s0["send_after"] == utc(2, 7, 0)
        assert s0["reason"] == "quiet hours 22:00-07:00 UTC: waits for the end"
        assert len(prov.seen) == 1
        e.clock.ms = utc(2, 7, 0)
        assert await e.cycle() >= 1
        assert (await e.step(nid, 0))["state"] == "sent"


async def test_inspect_says_why_an_open_step_waits(tmp_path: Path, prov: Provider) -> None:

    prov.reply = answer(500, "down")
    async with engine(tmp_path, {"hook": webhook(prov.url)}, {"k": ONE_STEP}) as e:
        nid = await e.accept()
        assert await e.cycle() == 1
        text = "\n".join(timeline(await e.record(nid)))
        s0 = await e.step(nid, 0)
        assert "step 0 hook: attempt 1 failed: HTTP 500; retry 2" in text
        assert f"step 0 hook: pending: HTTP 500; retry 2, due {iso(s0['send_after'])}" in text


async def test_the_timeline_is_what_happened_when_and_each_escalation_names_its_cause(
        tmp_path: Path, prov: Provider, prov2: Provider) -> None:
    channels = {"hook": webhook(prov.url, max_attempts=2), "hook2": webhook(prov2.url)}
    kinds = {"k": two_step(window_sec=20, second="hook2"),
             "three": KindConfig(ladder=(LadderStep("hook", timeout_sec=600),
                                         LadderStep("hook2", timeout_sec=600),
                                         LadderStep("hook2", after_sec=3600)))}
    async with engine(tmp_path, channels, kinds) as e:
        escalated = await e.accept()
        await e.cycle()
        e.clock.advance(20)
        await e.cycle()
        text = "\n".join(timeline(await e.record(escalated)))
        assert "step 1 hook2: planned for" in text and "(when step 0's 20 s window ends)" in text
        assert "step 1 hook2: attempt 1 started (step 0's 20 s window ended unresolved)" in text

        prov.reply = answer(500, "down")
        failing = await e.accept("three")
        accepted_at = e.now
        await e.cycle()
        e.clock.advance(60)
        await e.run_dry()  # step 0 dies on its second attempt and pulls step 1 to now
        lines = timeline(await e.record(failing))
        planned = next(ln for ln in lines if "step 1 hook2: planned for" in ln)
        assert iso(accepted_at + 600_000) in planned  # the plan as made, not the step's due now
        died = next(i for i, ln in enumerate(lines) if "step 0 hook: attempt 2 failed" in ln)
        pulled = next(i for i, ln in enumerate(lines) if "step 1 hook2: pulled forward" in ln)
        assert died < pulled  # in the order it happened
        assert "(pulled forward: step 0 dead; due" in "\n".join(lines)  # the cause of step 1
        assert "step 2 hook2: planned for" in "\n".join(lines) and "(3600 s after accept)" in (
            "\n".join(lines))


async def test_each_decision_a_person_wants_to_know_of_is_one_log_line_with_its_ids(
        tmp_path: Path, prov: Provider, prov2: Provider, caplog: pytest.LogCaptureFixture) -> None:
    prov.reply = answer(503, "down")
    channels = {"hook": webhook(prov.url, max_attempts=2), "mail": mailer(prov2.url)}
    kinds = {"k": two_step(window_sec=HOUR, second="mail")}
    caplog.set_level(logging.DEBUG, logger="notifyd")
    async with engine(tmp_path, channels, kinds) as e:
        nid = await e.accept(user="nobody\nFORGED")
        await e.cycle()
        e.clock.advance(60)
        await e.run_dry()
    lines = [(r.levelname, r.getMessage()) for r in caplog.records if r.name != "notifyd.policy"]
    assert any(level == "INFO" and m.startswith("step failed, retry at ") and m.endswith(
        f": {nid}:0 channel=hook reason=HTTP 503; retry 2") for level, m in lines)
    assert ("WARNING", f"step dead: {nid}:0 channel=hook reason=retry budget spent after 2 "
            "attempts; last: HTTP 503") in lines
    assert ("INFO", f"step suppressed: {nid}:1 channel=mail reason=no_contact: the user has no "
            "email") in lines
    record = next(r for r in caplog.records if "step dead" in r.getMessage())
    assert record.ids == {"notification_id": nid, "step_no": 0, "channel": "hook",  # type: ignore[attr-defined]
                          "decision": "dead"}
    assert not any("\n" in m for _, m in lines)


def test_a_final_failure_ends_the_step_now_and_disables_nothing() -> None:
    cfg = ChannelConfig(max_attempts=5)
    now = 1_790_000_000_000
    done = decide(cfg, _claim(1, now + 3_600_000), Failed("HTTP 409 x", final=True), now,
                  random.Random(1))
    assert (done.state, done.pull_next, done.disable_contact, done.retry_at) == (
        StepState.DEAD, True, False, None)
    assert done.reason == "refused for good, not retried: HTTP 409 x"


async def test_the_next_steps_window_starts_when_the_step_before_it_was_sent(
        tmp_path: Path) -> None:
    """Seed 001's 30 s: measured from the push going out, not from accept. A send held 50 s (a
    slow provider here; a rate limit or a breaker alike) does not eat the next step's window."""
    async with provider() as p:
        gate = p.gate()
        p.reply = hold(gate, accepted())
        async with engine(tmp_path, {"hook": webhook(p.url)},
                          {"k": two_step("hook", window_sec=60)}) as e:
            nid = await e.accept()
            start = e.now
            await e.tick()
            await p.next_request()
            e.clock.advance(50)
            gate.set()
            await e.settle()
            assert (await e.step(nid, 0))["state"] == "sent"
            assert (await e.step(nid, 1))["send_after"] == start + 110_000
            e.clock.advance(11)  # 61 s after accept: the planned time has passed
            assert await e.cycle() == 0
            e.clock.advance(49)
            assert await e.cycle() == 1
            assert (await e.step(nid, 1))["state"] == "sent"
            shown = "\n".join(timeline(await e.record(nid), e.now))
            assert "step 1 hook: attempt 1 started (step 0's 60 s window ended unresolved)" in shown
            assert "step 0 hook: timed out" in shown and "step 1 hook: timed out" not in shown
            # inspect draws the plan that ran: the moved time, when and why it moved
            moved = (f"window restarted: step 0 was sent at {iso(start + 50_000)}, and its 60 s "
                     f"window counts from then; due {iso(start + 110_000)} instead of "
                     f"{iso(start + 60_000)}")
            assert f"  {iso(start + 50_000)}  step 1 hook: {moved}" in shown.splitlines()
            assert (await e.step(nid, 1))["note"] == moved


# --- the sender's own deadline and a stop past the grace --------------------------------------


class Stuck:
    """An adapter that never answers and ignores its own timeout: the sender's deadline
    (timeout_sec + SEND_SLACK_SEC) is what ends the send."""

    def __init__(self) -> None:
        self.started = asyncio.Event()

    def render(self, step: RenderInput) -> Rendered:
        return Rendered("nowhere", standard_payload(step))

    async def send(self, message: Message) -> Outcome:
        self.started.set()
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    async def close(self) -> None:
        pass


STUCK = ChannelType("stuck", "test: never answers", MailerSettings, None,
                    lambda name, settings, limits: Stuck(), medium=None)


async def test_a_send_that_never_answers_ends_unknown_at_the_senders_deadline(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("notifyd.engine.sender.SEND_SLACK_SEC", 0.05)
    kinds = {"k": KindConfig(ladder=(LadderStep("hook"),))}
    with registered(STUCK):
        channel = dataclasses.replace(webhook("http://127.0.0.1:9/"), type="stuck",
                                      settings=MailerSettings(), timeout_sec=0.05)
        async with engine(tmp_path, {"hook": channel}, kinds) as e:
            nid = await e.accept()
            await e.cycle()
            step = await e.step(nid, 0)
    assert step["state"] == "unknown"
    assert "no answer within the send timeout" in step["reason"]


async def test_a_send_cancelled_past_the_grace_gives_its_lease_back(tmp_path: Path) -> None:
    kinds = {"k": KindConfig(ladder=(LadderStep("hook"),))}
    with registered(STUCK):
        channel = dataclasses.replace(webhook("http://127.0.0.1:9/"), type="stuck",
                                      settings=MailerSettings())
        async with engine(tmp_path, {"hook": channel}, kinds) as e:
            nid = await e.accept()
            await e.tick()
            stuck = e.pool.channels["hook"].adapter
            assert isinstance(stuck, Stuck)
            await asyncio.wait_for(stuck.started.wait(), 10)
            await e.pool.drain(0.01)
            step = await e.step(nid, 0)
    assert step["state"] == "unknown"
    assert step["reason"] == "interrupted: notifyd stopped during the send"
