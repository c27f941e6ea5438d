"""Issue 7's seams: the claim policy judges each due step on what the claim transaction read;
rendering happens between claim and send, so one bad message ends its own step and nothing else.

Test channel types are registered the way a new channel type would be (channels.TYPES), with a
recorder adapter that keeps what it was asked to send.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from engine_support import engine, webhook

from notifyd.channels import TYPES
from notifyd.channels.base import (
    ChannelType,
    Limits,
    Message,
    Outcome,
    Rendered,
    RenderError,
    RenderInput,
    Sent,
    standard_payload,
)
from notifyd.config import ChannelConfig, KindConfig, LadderStep
from notifyd.core.contacts import EMAIL
from notifyd.core.models import ClaimContext, Lane, Recipient, Verdict, Want
from notifyd.domain.policy import decide_claim


@dataclass(frozen=True)
class RecorderSettings:
    pass


class Recorder:
    """Sends to the recipient's address of the channel's contact; refuses to render a message
    whose params say poison, as a template with an undefined variable would."""

    sent: list[tuple[str, str]] = []  # (idempotency key, destination), over every instance

    def render(self, step: RenderInput) -> Rendered:
        if step.params.get("poison"):
            raise RenderError("alert/email/en.txt", NameError("undefined variable 'amount'"))
        return Rendered(step.address or "", standard_payload(step))

    async def send(self, message: Message) -> Outcome:
        Recorder.sent.append((message.idempotency_key, message.destination))
        return Sent(f"rec:{message.idempotency_key}")

    async def close(self) -> None:
        return None


def _build(name: str, settings: Any, limits: Limits) -> Recorder:
    return Recorder()


@pytest.fixture
def mail() -> Iterator[None]:
    """Channel types `mail`, to the recipient's email address, and `rec`, to no address."""
    TYPES["mail"] = ChannelType("mail", "test recorder", RecorderSettings, EMAIL, _build)
    TYPES["rec"] = ChannelType("rec", "test recorder", RecorderSettings, None, _build)
    Recorder.sent = []
    try:
        yield
    finally:
        del TYPES["mail"], TYPES["rec"]


def mail_channel(type_name: str = "mail", **kw: Any) -> ChannelConfig:
    base: dict[str, Any] = {"type": type_name, "rate_per_sec": 1e6, "burst": 1_000_000,
                            "urgent_concurrency": 512, "bulk_concurrency": 512}
    return ChannelConfig(**{**base, **kw})


ESCALATE = KindConfig(ladder=(LadderStep("mail", timeout_sec=60), LadderStep("mail")))


async def test_one_poisoned_render_among_a_thousand_ends_alone_and_the_rest_go_out_on_time(
        tmp_path: Path, mail: None) -> None:
    async with engine(tmp_path, {"mail": mail_channel("rec")}, {"k": ESCALATE}) as e:
        good = [await e.accept(user=f"u{i}") for i in range(500)]
        bad = await e.accept(user="poisoned", params={"poison": True})
        good += [await e.accept(user=f"v{i}") for i in range(500)]
        accepted_at = e.now
        await e.run_dry()  # every scan at the accept instant: nothing waits for a later one
        assert e.now == accepted_at
        assert {k for k, _ in Recorder.sent} >= {f"{nid}:0" for nid in good}
        s0, s1 = (await e.notification(bad))["steps"]
        assert (s0["state"], s0["reason"]) == (
            "dead", "render failed: alert/email/en.txt: NameError")
        assert [a["outcome"] for a in s0["attempt_log"]] == ["failed"]
        assert s0["payload"] is None  # nothing was frozen, nothing was sent
        assert f"{bad}:0" not in {k for k, _ in Recorder.sent}
        # the ladder moved on: step 1 was pulled to now, and it failed to render the same way
        assert s1["note"] == "pulled forward: step 0 dead"
        assert s1["state"] == "dead"
        states = await e.state_counts()
        assert states.get("sent") == 1000 and states.get("dead") == 2


async def test_a_claim_checks_the_contacts_current_address_not_an_old_ones_bounce(
        tmp_path: Path, mail: None) -> None:
    async with engine(tmp_path, {"mail": mail_channel()}, {"k": ESCALATE}) as e:
        await e.store.put_recipient(Recipient("default", "ada", contacts={"email": "new@x"}))
        assert await e.store.suppress("default", "email", "old@x", "550 no such user", "send")
        moved = await e.accept(user="ada")
        await e.run_dry()
        assert (await e.step(moved, 0))["state"] == "sent"  # the old address's bounce is not hers
        assert Recorder.sent == [(f"{moved}:0", "new@x")]

        assert await e.store.suppress("default", "email", "new@x", "550 mailbox full for good",
                                      "send")
        dead_now = await e.accept(user="ada")  # planned suppressed at accept ...
        assert (await e.step(dead_now, 0))["state"] == "suppressed"
        e.clock.advance(61)  # ... and the earlier notification's step 1 suppressed at claim
        await e.run_dry()
        s1 = await e.step(moved, 1)
        assert (s1["state"], s1["reason"]) == ("suppressed", "suppression_list: 550 mailbox full "
                                               "for good")


def test_the_policy_reads_plain_records_and_answers_in_its_order() -> None:
    r = Recipient("t", "u", "UTC", None, "00:00", "23:59", {"email": "a@x"})
    ctx = ClaimContext("n_1", 0, "mail", Lane.BULK, 0, None, 10_000_000_000_000, None, r,
                       EMAIL)
    assert decide_claim(ctx, 1_000).verdict is Verdict.POSTPONE  # quiet hours
    assert decide_claim(dataclasses.replace(ctx, lane=Lane.URGENT), 1_000).verdict is Verdict.SEND
    assert decide_claim(dataclasses.replace(ctx, sibling_in_flight=1), 1_000).until == 2_000
    assert decide_claim(dataclasses.replace(ctx, resolution="paid"), 1_000).reason == (
        "resolved: paid")
    gone = decide_claim(dataclasses.replace(ctx, configured=False, send_after=5_000), 1_000)
    assert (gone.verdict, gone.pull_next_at) == (Verdict.DEAD, 5_000)
    expired = decide_claim(dataclasses.replace(ctx, expires_at=1_000, resolution=None), 1_000)
    assert expired.verdict is Verdict.EXPIRE


async def test_a_webhook_answer_is_read_up_to_a_bound_never_whole(tmp_path: Path) -> None:
    """A provider that answers 200 and then streams without end: the send is Sent at once."""
    from aiohttp import web

    async def endless(request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse(status=200, headers={"X-Request-Id": "r-1"})
        await resp.prepare(request)
        chunk = b"x" * 65536
        for _ in range(100_000):  # 6.5 GB if read whole; bounded so the handler ends
            await resp.write(chunk)
        return resp

    app = web.Application()
    app.router.add_post("/hook", endless)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    try:
        kinds = {"k": KindConfig(ladder=(LadderStep("hook"),))}
        async with engine(tmp_path, {"hook": webhook(f"http://127.0.0.1:{port}/hook",
                                                     timeout_sec=10.0)}, kinds) as e:
            nid = await e.accept()
            await e.cycle()
            s = await e.step(nid, 0)
            assert (s["state"], s["provider_ref"]) == ("sent", "r-1")
    finally:
        await runner.cleanup()


async def test_a_claims_slots_and_tokens_are_held_from_its_commit_not_from_its_freeze(
        tmp_path: Path, mail: None) -> None:
    """The scan loop claims again while the last claim's freeze is written: what that claim
    took is spent the moment it is handed over, so the next claim cannot take it twice."""
    channel = mail_channel("rec", bulk_concurrency=3, rate_per_sec=1.0, burst=5)
    async with engine(tmp_path, {"mail": channel}, {"k": KindConfig(
            ladder=(LadderStep("mail"),))}) as e:
        await e.accept_many(10)
        claimed = await e.store.claim_due([Want("mail", Lane.BULK, 3)], e.scanner.lease_ms,
                                          e.scanner.rules)
        assert len(claimed.claims) == 3
        started = e.pool.launch(claimed.claims, e.now)
        assert len(started) == 1 and not started[0].done()  # nothing frozen yet
        sender = e.pool.channels["mail"]
        assert sender.in_flight[Lane.BULK] == 3
        assert sender.bucket.available(e.now) == 2
        wants = {w.lane: w.n for w in e.pool.wants(e.now) if w.channel == "mail"}
        assert Lane.BULK not in wants  # its three slots are taken
        assert max(wants.values()) == 2  # the other lanes: the two tokens left
        await e.settle()
        assert sender.in_flight[Lane.BULK] == 0
        assert len(Recorder.sent) == 3


async def test_a_probe_whose_render_fails_is_given_back_and_the_next_step_probes(
        tmp_path: Path, mail: None) -> None:
    async with engine(tmp_path, {"mail": mail_channel("rec")}, {"k": KindConfig(
            ladder=(LadderStep("mail"),))}) as e:
        breaker = e.pool.channels["mail"].breaker
        breaker.opened_at = e.now - breaker.cooldown_ms  # cooled down: half-open, one probe
        bad = await e.accept(user="poisoned", params={"poison": True})
        assert await e.cycle() == 1  # the probe: its render fails, nothing is sent
        assert (await e.step(bad, 0))["state"] == "dead"
        assert breaker.state == "open" and breaker.allowance(e.now) == 1
        assert sender_idle(e)
        good = await e.accept(user="fine")
        assert await e.cycle() == 1  # the next step is the probe; it closes the breaker
        assert breaker.state == "closed"
        assert Recorder.sent == [(f"{good}:0", "")]


async def test_a_small_claim_freezes_its_messages_in_its_own_commit(
        tmp_path: Path, mail: None) -> None:
    """A quiet daemon's step costs two commits, the claim and the completion: the claim of one
    step renders and freezes its message in its own transaction. A poisoned one in such a claim
    is left unfrozen and ends dead after the commit, as a larger claim's does."""
    async with engine(tmp_path, {"mail": mail_channel("rec")}, {"k": KindConfig(
            ladder=(LadderStep("mail"),))}) as e:
        nid = await e.accept()
        before = e.store.backend.commits
        claimed = await e.store.claim_due([Want("mail", Lane.BULK, 5)], e.scanner.lease_ms,
                                          e.scanner.rules, None, e.pool.freezer(e.now))
        [claim] = claimed.claims
        assert claim.payload is not None and e.store.backend.commits - before == 1
        step = await e.step(nid, 0)
        assert step["state"] == "sending" and json.loads(step["payload"]) == claim.payload
        assert e.pool.launch(claimed.claims, e.now) == []  # nothing left to prepare
        await e.settle()
        assert e.store.backend.commits - before == 2  # the claim's, the completion's
        assert Recorder.sent == [(f"{nid}:0", "")]
        bad = await e.accept(user="poisoned", params={"poison": True})
        assert await e.cycle() == 1
        s = await e.step(bad, 0)
        assert (s["state"], s["payload"]) == ("dead", None)
        await e.accept(user="u2")  # the scanner's claim freezes as well
        before = e.store.backend.commits
        assert await e.cycle() == 1
        assert e.store.backend.commits - before == 2


def sender_idle(e: Any) -> bool:
    return all(n == 0 for ch in e.pool.channels.values() for n in ch.in_flight.values())


async def test_a_long_batch_of_renders_lets_the_event_loop_turn(
        tmp_path: Path, mail: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """A broadcast claims hundreds of steps at a time; rendering them all in one turn of the
    event loop would hold up every accept and every code meanwhile."""
    slow = Recorder.render
    rendered: list[str] = []

    def render(self: Recorder, step: RenderInput) -> Rendered:
        time.sleep(0.003)  # longer than a slice: the loop turns after each
        rendered.append(step.notification_id)
        return slow(self, step)

    monkeypatch.setattr(Recorder, "render", render)
    async with engine(tmp_path, {"mail": mail_channel("rec")}, {"k": KindConfig(
            ladder=(LadderStep("mail"),))}) as e:
        await e.accept_many(20)
        claimed = await e.store.claim_due([Want("mail", Lane.BULK, 20)], e.scanner.lease_ms,
                                          e.scanner.rules)
        renders_seen: list[int] = []

        async def meanwhile() -> None:
            renders_seen.append(len(rendered))

        prepared = asyncio.ensure_future(e.pool.prepare(claimed.claims, e.now))
        await asyncio.sleep(0)  # prepare starts its first render
        other = asyncio.ensure_future(meanwhile())
        ready = await prepared
        await other
        assert len(ready) == 20
        assert len(rendered) == 20
        assert 0 < renders_seen[0] < 20  # it ran between two renders, not after all twenty


async def test_an_urgent_step_claimed_beside_a_long_bulk_batch_goes_before_their_renders_end(
        tmp_path: Path, mail: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """One claim holds a code and twenty slow-to-render bulk steps: each lane is prepared apart,
    so the code is frozen and sent while the bulk renders are still going."""
    slow = Recorder.render
    rendered: list[str] = []
    at_urgent_send: list[int] = []

    def render(self: Recorder, step: RenderInput) -> Rendered:
        if step.kind == "news":
            time.sleep(0.003)
            rendered.append(step.notification_id)
        return slow(self, step)

    sent = Recorder.send

    async def send(self: Recorder, message: Message) -> Outcome:
        if message.idempotency_key.startswith(code):
            at_urgent_send.append(len(rendered))
        return await sent(self, message)

    monkeypatch.setattr(Recorder, "render", render)
    monkeypatch.setattr(Recorder, "send", send)
    one = (LadderStep("mail"),)
    async with engine(tmp_path, {"mail": mail_channel("rec")}, {
            "news": KindConfig(ladder=one),
            "code": KindConfig(ladder=one, urgency="urgent")}) as e:
        await e.accept_many(20, kind="news")
        code = await e.accept(kind="code")
        assert await e.cycle() == 21
        assert len(rendered) == 20 and len(at_urgent_send) == 1
        assert at_urgent_send[0] < 20  # sent before the last bulk render, not after them all
