"""A reload in-process: the daemon's peers rebuilt from a new config while sends are in flight.

A channel the reload left unchanged keeps its sender (adapter, token bucket, breaker); a send in
flight finishes on the adapter it started with and is recorded; a step on a channel the new
config dropped ends as at start; reloads asked during a reload coalesce; a stop during a reload
still shuts down in order. The daemon is the real one (`notifyd.daemon.Daemon`) on port 0.
"""

from __future__ import annotations

import asyncio
import dataclasses
import gc
import json
import logging
import threading
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from engine_support import (
    KEY,
    accepted,
    answer,
    engine_config,
    hold,
    provider,
    webhook,
)

from notifyd.channels.egress import Proxy
from notifyd.channels.webhook import WebhookChannel
from notifyd.config import Config, EgressConfig, KindConfig, LadderStep
from notifyd.core.clock import FakeClock
from notifyd.core.models import Lane, StepState
from notifyd.daemon import Daemon
from notifyd.daemon.generation import Shared, build, close_adapters
from notifyd.domain import signed
from notifyd.engine.metrics import Metrics
from notifyd.engine.scanner import Wakeups
from notifyd.engine.stream import Hub
from notifyd.store import Notification, open_store

TIMEOUT = 30.0


async def until(check: Callable[[], object], what: str) -> None:
    """Poll `check` (bounded) until it is true."""
    try:
        async with asyncio.timeout(TIMEOUT):
            while not check():
                await asyncio.sleep(0.01)
    except TimeoutError:
        raise AssertionError(f"no {what} within {TIMEOUT} s") from None


@asynccontextmanager
async def running(cfg: Config, load: Callable[[], Config]) -> AsyncIterator[Daemon]:
    """The daemon serving `cfg` on port 0 until the block ends (then stopped, as SIGTERM does)."""
    d = Daemon(cfg, load=load)
    stop = asyncio.Event()
    task = asyncio.create_task(d.run(stop))
    try:
        async with asyncio.timeout(TIMEOUT):
            while d.port is None:
                assert not task.done(), task.exception()
                await asyncio.sleep(0.01)
        yield d
    finally:
        stop.set()
        await asyncio.wait_for(task, TIMEOUT)
        gc.unfreeze()  # the daemon froze what the test process held at its start


async def accept(d: Daemon, kind: str = "k", user: str = "ada") -> str:
    ingest = d.ctx.ingest  # as a request reads it
    body = json.dumps({"user_id": user, "kind": kind}).encode()
    result = await ingest.accept(ingest.parse(body, KEY, None))
    return result.notification_id


async def record(d: Daemon, nid: str) -> Notification:
    n = await d.ctx.store.get_notification(nid)
    assert n is not None
    return n


async def step_state(d: Daemon, nid: str, no: int) -> StepState:
    return (await record(d, nid)).steps[no].state


async def wait_state(d: Daemon, nid: str, no: int, state: StepState) -> None:
    async with asyncio.timeout(TIMEOUT):
        while await step_state(d, nid, no) != state:
            await asyncio.sleep(0.01)


def reloaded(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.getMessage().startswith("reload")]


async def test_a_send_in_flight_finishes_on_its_adapter_and_a_dropped_channel_ends(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    gate = asyncio.Event()
    async with provider(hold(gate, accepted())) as prov:
        before = engine_config(tmp_path / "n.db", {
            "hook": webhook(prov.url, timeout_sec=50.0), "extra": webhook(prov.url)},
            {"k": KindConfig(ladder=(LadderStep("hook", timeout_sec=3600),
                                     LadderStep("extra")))})
        after = dataclasses.replace(before, channels={
            "hook": webhook(prov.url, timeout_sec=40.0), "log": before.channels["log"]},
            kinds={"k": KindConfig(ladder=(LadderStep("hook"),))})
        config = [before]
        async with running(before, lambda: config[0]) as d:
            nid = await accept(d)
            await prov.next_request()  # step 0 is at the provider, its answer held
            old = d.gen
            config[0] = after
            d.ask_reload()
            await until(lambda: d.gen is not old, "the new generation")

            # The channel changed: a new adapter for new sends; the old one is still open.
            assert d.gen.pool.channels["hook"].adapter is not old.pool.channels["hook"].adapter
            await wait_state(d, nid, 1, StepState.DEAD)  # on "extra", which is gone
            step = (await record(d, nid)).steps[1]
            assert step.reason == "channel extra is not configured any more"
            assert await step_state(d, nid, 0) == StepState.SENDING

            gate.set()  # the provider answers the send that began before the reload
            await wait_state(d, nid, 0, StepState.SENT)
            [attempt] = (await record(d, nid)).steps[0].attempt_log
            assert attempt.outcome == "sent" and attempt.provider_ref == f"prov-{nid}:0"
            await until(lambda: not d._retiring, "the old generation retired")

            again = await accept(d, user="bo")  # after the reload: one step, the new adapter
            await wait_state(d, again, 0, StepState.SENT)
            assert len((await record(d, again)).steps) == 1
        assert prov.keys_seen() == [f"{nid}:0", f"{again}:0"]
    assert [m for m in reloaded(caplog) if m.startswith("reloaded")] == [
        "reloaded: 3 changes (channels: extra removed, hook changed; kinds: k changed)"]
    assert "stopped cleanly" in caplog.text


async def test_a_reload_keeps_an_unchanged_channels_bucket_and_breaker(tmp_path: Path) -> None:
    clock = FakeClock()
    limited = {"rate_per_sec": 1.0, "burst": 2, "breaker_min_calls": 1}
    url = "http://127.0.0.1:9/hook"  # never called: the test reads the senders' state
    cfg = engine_config(tmp_path / "n.db", {
        "same": webhook(url, vendor="acme", **limited),
        "sibling": webhook(url, vendor="acme", **limited),
        "fresh": webhook(url, **limited)}, {"k": KindConfig(ladder=(LadderStep("same"),))})
    store = await open_store(cfg.store.url, clock, sqlite=cfg.store.sqlite)
    shared = Shared(store, clock, Metrics(), Wakeups(),
                    await store.signing_key(signed.LINKS_KEY), Hub())
    first = build(cfg, None, shared)
    now = clock.now_ms()
    for ch in first.pool.channels.values():
        ch.bucket.available(now)
        ch.bucket.take(2)  # every bucket spent
    first.pool.channels["same"].breaker.record(False, now, probe=False)  # acme's opens
    assert [w for w in first.pool.wants(now) if w.channel != "log"] == []

    changed = {**cfg.channels, "sibling": webhook(url, vendor="acme", timeout_sec=20.0,
                                                  **limited),
               "fresh": webhook(url, timeout_sec=20.0, **limited)}
    second = build(dataclasses.replace(cfg, channels=changed), None, shared, before=first)
    kept, new = first.pool.channels, second.pool.channels
    assert new["same"] is kept["same"]  # adapter, bucket, breaker and lanes, as they were
    assert new["sibling"].adapter is not kept["sibling"].adapter
    assert new["sibling"].breaker is kept["same"].breaker  # one vendor, one breaker: still open
    assert new["fresh"].bucket.available(now) == 2 and new["fresh"].breaker.state == "closed"
    assert {(w.channel, w.lane) for w in second.pool.wants(now) if w.channel != "log"} == {
        ("fresh", Lane.URGENT), ("fresh", Lane.BULK), ("fresh", Lane.BROADCAST)}
    await close_adapters([first, second])
    await store.close()


async def test_a_reload_that_changes_the_egress_proxy_rebuilds_the_http_adapters(
        tmp_path: Path) -> None:
    clock = FakeClock()
    cfg = engine_config(tmp_path / "n.db", {"hook": webhook("http://hooks.example.com/h")},
                        {"k": KindConfig(ladder=(LadderStep("hook"),))})
    store = await open_store(cfg.store.url, clock, sqlite=cfg.store.sqlite)
    shared = Shared(store, clock, Metrics(), Wakeups(),
                    await store.signing_key(signed.LINKS_KEY), Hub())
    first = build(cfg, None, shared)
    proxied = dataclasses.replace(cfg, egress=EgressConfig(http_proxy="http://proxy.internal:3128"))
    second = build(proxied, None, shared, before=first)
    third = build(proxied, None, shared, before=second)
    adapters = [g.pool.channels["hook"].adapter for g in (first, second, third)]
    assert isinstance(adapters[1], WebhookChannel)
    assert adapters[1] is not adapters[0] and adapters[2] is adapters[1]
    assert adapters[1].http.egress.route(False, "hooks.example.com") == Proxy("proxy.internal",
                                                                              3128)
    await close_adapters([first, second, third])
    await store.close()


def blocking_load(cfg: Config) -> tuple[Callable[[], Config], threading.Event, threading.Event,
                                        list[int]]:
    """A load that says it was entered, then waits to be let go: a reload held mid-read."""
    entered, release, calls = threading.Event(), threading.Event(), []

    def load() -> Config:
        calls.append(1)
        entered.set()
        release.wait(TIMEOUT)
        return cfg

    return load, entered, release, calls


async def test_reloads_asked_during_a_reload_make_one_more(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    async with provider(answer()) as prov:
        cfg = engine_config(tmp_path / "n.db", {"hook": webhook(prov.url)},
                            {"k": KindConfig(ladder=(LadderStep("hook"),))})
        load, entered, release, calls = blocking_load(cfg)
        async with running(cfg, load) as d:
            d.ask_reload()
            await asyncio.to_thread(entered.wait, TIMEOUT)
            d.ask_reload()
            d.ask_reload()
            release.set()
            await until(lambda: len([m for m in reloaded(caplog)
                                     if m.startswith("reloaded")]) == 2, "two reloads")
            nid = await accept(d)  # still serving, on the same config
            await wait_state(d, nid, 0, StepState.SENT)
    assert len(calls) == 2
    assert "a reload is running; another follows it" in caplog.text
    assert "a reload is already waiting to run" in caplog.text
    assert [m for m in reloaded(caplog) if m.startswith("reloaded")] == [
        "reloaded: no changes", "reloaded: no changes"]


async def test_a_stop_during_a_reload_abandons_it_and_shuts_down_in_order(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    cfg = engine_config(tmp_path / "n.db", {"hook": webhook("http://127.0.0.1:9/hook")},
                        {"k": KindConfig(ladder=(LadderStep("hook"),))})
    other = dataclasses.replace(cfg, kinds={"k2": KindConfig(ladder=(LadderStep("hook"),))})
    load, entered, release, _ = blocking_load(other)
    d = Daemon(cfg, load=load)
    stop = asyncio.Event()
    task = asyncio.create_task(d.run(stop))
    try:
        await until(lambda: d.port is not None, "listening")
        d.ask_reload()
        await asyncio.to_thread(entered.wait, TIMEOUT)
        stop.set()  # SIGTERM while the new config is being read
        await until(lambda: d.ctx.draining, "stopping")
        release.set()
        await asyncio.wait_for(task, TIMEOUT)
    finally:
        release.set()
        gc.unfreeze()
    assert "reload abandoned: notifyd is stopping" in caplog.text
    assert d.cfg is cfg  # the running config stayed to the end
    lines = [r.getMessage() for r in caplog.records if r.name == "notifyd"]
    assert lines.index("reload abandoned: notifyd is stopping") < lines.index("stopped cleanly")
