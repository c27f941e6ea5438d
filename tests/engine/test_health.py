"""Liveness, readiness and metrics: /healthz touches nothing, /readyz checks the daemon itself (the
store, the scanner, the event loop's lateness) and never a provider, /metrics counts what
happened (a provider's outage too), and `notifyd stats` prints it for a terminal."""

from __future__ import annotations

import asyncio
import platform
import subprocess
import urllib.request
from pathlib import Path

from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer
from engine_support import (
    Daemon,
    answer,
    clean_env,
    engine,
    notifyd_cmd,
    provider,
    two_step,
    webhook,
)
from prometheus_client.parser import text_string_to_metric_families

from notifyd import __version__
from notifyd.core.clock import FakeClock
from notifyd.http.app import make_app
from notifyd.http.auth import KeyCache
from notifyd.http.health import Health, LoopLag
from notifyd.http.kit import Context


def _values(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for f in text_string_to_metric_families(text) for s in f.samples}


async def test_readiness_names_what_is_wrong_and_metrics_count_what_happened(
        tmp_path: Path) -> None:
    async with provider(answer(503, "down")) as prov, engine(
            tmp_path, {"hook": webhook(prov.url, max_attempts=1)},
            {"k": two_step(window_sec=60)}) as e:
        health = Health(e.cfg, e.store, e.pool, e.scanner, e.clock)
        ctx = Context(e.cfg, e.ingest, KeyCache(e.store, e.clock), e.clock, health)
        async with TestClient(TestServer(make_app(ctx))) as client:
            ready = await client.get("/readyz")
            assert ready.status == 200 and (await ready.json())["checks"] == {
                "store": "ok", "scanner": "ok", "loop": "ok"}

            nid = await e.accept()
            await e.cycle()  # step 0 dies (one attempt), step 1 is pulled to now
            e.clock.advance(120)  # ... and waits two minutes: the scanner has not run since
            ready = await client.get("/readyz")
            body = await ready.json()
            assert ready.status == 503 and body["status"] == "not_ready"
            assert body["checks"] == {"store": "ok", "scanner": "no scan for 120.0 s",
                                      "loop": "ok"}  # the scanner is not running

            metrics = await client.get("/metrics")
            assert metrics.headers["Content-Type"].startswith("text/plain; version=0.0.4")
            got = _values(await metrics.text())
            assert got[("notifyd_steps_ended_total", (("state", "dead"),
                                                      ("why", "retries_exhausted")))] == 1
            assert got[("notifyd_sends_total", (("channel", "hook"), ("outcome", "failed")))] == 1
            assert got[("notifyd_due_lag_seconds", (("channel", "hook"), ("lane", "bulk")))] == 120
            assert got[("notifyd_dead_letters", ())] == 1
            assert _breaker(got, "hook") == {"closed": 1, "open": 0, "half-open": 0}
            assert got[("notifyd_provider_call_seconds_count", (("channel", "hook"),))] == 1
            assert got[("notifyd_build_info", (("python", platform.python_version()),
                                               ("version", __version__)))] == 1
            assert ("notifyd_escalations_total", (("kind", "k"),)) not in got  # none yet
            assert nid


def _breaker(got: dict[tuple[str, tuple[tuple[str, str], ...]], float],
             channel: str) -> dict[str, float]:
    """A channel's breaker as its series say: one per state, 1 for the state it is in."""
    return {dict(labels)["state"]: v for (name, labels), v in got.items()
            if name == "notifyd_breaker_state" and dict(labels)["channel"] == channel}


def test_a_running_daemon_serves_health_readiness_metrics_and_stats(tmp_path: Path) -> None:
    db = tmp_path / "n.db"
    key = subprocess.run(notifyd_cmd(db, "keys", "create", "--name", "t"), capture_output=True,
                         text=True, env=clean_env(), cwd=tmp_path, timeout=60,
                         check=True).stdout.strip()
    d = Daemon(db)
    try:
        for path, want in (("/healthz", b'"ok"'), ("/readyz", b'"ready"')):
            with urllib.request.urlopen(d.url + path, timeout=30) as resp:
                assert resp.status == 200 and want in resp.read()
        request = urllib.request.Request(
            f"{d.url}/v1/notifications", data=b'{"user_id": "u1", "kind": "demo"}',
            headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=30) as resp:
            assert resp.status == 202
        shown = subprocess.run(notifyd_cmd(db, "stats", "--url", d.url), capture_output=True,
                               text=True, env=clean_env(), cwd=tmp_path, timeout=60)
        assert shown.returncode == 0, shown.stderr
        assert "accepts (1, mean" in shown.stdout
        assert "    created  1" in shown.stdout.splitlines()
    finally:
        assert d.stop() == 0
    gone = subprocess.run(notifyd_cmd(db, "stats", "--url", d.url), capture_output=True,
                          text=True, env=clean_env(), cwd=tmp_path, timeout=60)
    assert gone.returncode == 1 and "cannot reach the daemon at" in gone.stderr


async def _ready(client: TestClient[web.Request, web.Application]) -> tuple[int, dict[str, str]]:
    answer = await client.get("/readyz")
    return answer.status, (await answer.json())["checks"]


async def test_ready_while_a_provider_is_down_and_its_steps_wait(tmp_path: Path) -> None:
    """A load balancer must not pull a healthy daemon because a third party is down: the
    outage shows in the channel's due lag and breaker on /metrics, not in readiness."""
    breaker = {"breaker_min_calls": 4, "breaker_error_rate": 0.5, "breaker_cooldown_sec": 30.0}
    async with provider(answer(503, "down")) as prov, engine(
            tmp_path, {"hook": webhook(prov.url, **breaker)}, {"k": two_step(window_sec=600)}) as e:
        health = Health(e.cfg, e.store, e.pool, e.scanner, e.clock)
        ctx = Context(e.cfg, e.ingest, KeyCache(e.store, e.clock), e.clock, health)
        async with TestClient(TestServer(make_app(ctx))) as client:
            await e.accept_many(10)
            await e.cycle()
            assert e.pool.channels["hook"].breaker.state == "open"
            for _ in range(60):  # ten minutes of scans: due steps wait on the open breaker
                e.clock.advance(10)
                await e.cycle()
                await e.accept()
            assert await _ready(client) == (200, {"store": "ok", "scanner": "ok", "loop": "ok"})

            got = _values(await (await client.get("/metrics")).text())
            assert got[("notifyd_due_lag_seconds", (("channel", "hook"), ("lane", "bulk")))] > 300
            assert _breaker(got, "hook") == {"closed": 0, "open": 1, "half-open": 0}


async def test_not_ready_while_the_event_loop_runs_late(tmp_path: Path) -> None:
    async with engine(tmp_path, {"hook": webhook("http://127.0.0.1:9/")},
                      {"k": two_step()}) as e:
        lag = LoopLag(e.clock)  # the fake clock moving while the task sleeps: a late wake
        health = Health(e.cfg, e.store, e.pool, e.scanner, e.clock, lag)
        ctx = Context(e.cfg, e.ingest, KeyCache(e.store, e.clock), e.clock, health)
        stop = asyncio.Event()
        task = asyncio.create_task(lag.run(stop))
        try:
            async with TestClient(TestServer(make_app(ctx))) as client:
                for _ in range(100):
                    if lag.expected is not None:
                        break
                    await asyncio.sleep(0)
                await e.tick()
                assert await _ready(client) == (200, {"store": "ok", "scanner": "ok",
                                                      "loop": "ok"})
                e.clock.advance(8)  # the loop was stuck: the timer due in 0.5 s is 7.5 s late
                await e.tick()
                assert await _ready(client) == (503, {
                    "store": "ok", "scanner": "ok", "loop": "timers run 7.5 s late (bound 5 s)"})
                stop.set()
                await task  # it wakes and notes the lateness, which counts for ten seconds
                assert await _ready(client) == (503, {
                    "store": "ok", "scanner": "ok", "loop": "timers run 7.5 s late (bound 5 s)"})
                e.clock.advance(11)
                await e.tick()
                assert (await _ready(client))[0] == 200
        finally:
            stop.set()
            await task


def test_the_loop_lag_is_the_worst_of_its_window_or_a_wake_still_awaited() -> None:
    lag = LoopLag(FakeClock(), every_ms=500, window_ms=10_000)
    assert lag.lag_ms(0) == 0  # not running: nothing to say
    lag.asleep(0)
    assert lag.lag_ms(400) == 0
    assert lag.lag_ms(3_500) == 3_000  # due at 500, still not woken
    lag.woke(3_500)
    lag.asleep(3_500)
    lag.woke(4_010)
    assert lag.lag_ms(4_010) == 3_000
    assert lag.lag_ms(13_499) == 3_000
    assert lag.lag_ms(13_501) == 10  # the stall has left the window; the 10 ms one is in it
