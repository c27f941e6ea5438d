"""Liveness, readiness and metrics: /healthz touches nothing, /readyz checks the store, the scanner
and due lag, /metrics counts what happened, and `notifyd stats` prints it for a terminal."""

from __future__ import annotations

import subprocess
import urllib.request
from pathlib import Path

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

from notifyd.http.app import make_app
from notifyd.http.auth import KeyCache
from notifyd.http.health import Health
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
                "store": "ok", "scanner": "ok", "due_lag": "ok"}

            nid = await e.accept()
            await e.cycle()  # step 0 dies (one attempt), step 1 is pulled to now
            e.clock.advance(120)  # ... and waits two minutes: the scanner has not run since
            ready = await client.get("/readyz")
            body = await ready.json()
            assert ready.status == 503 and body["status"] == "not_ready"
            assert body["checks"]["scanner"] == "no scan for 120.0 s"  # the loop is not running
            assert body["checks"]["due_lag"] == (
                "oldest due step waits 120.0 s (bound 60 s)")

            metrics = await client.get("/metrics")
            assert metrics.headers["Content-Type"].startswith("text/plain; version=0.0.4")
            got = _values(await metrics.text())
            assert got[("notifyd_steps_ended_total", (("state", "dead"),
                                                      ("why", "retries_exhausted")))] == 1
            assert got[("notifyd_sends_total", (("channel", "hook"), ("outcome", "failed")))] == 1
            assert got[("notifyd_due_lag_seconds", (("channel", "hook"), ("lane", "bulk")))] == 120
            assert got[("notifyd_dead_letters", ())] == 1
            assert got[("notifyd_breaker_state", (("channel", "hook"),))] == 0
            assert nid


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
        assert "    created                          1" in shown.stdout
    finally:
        assert d.stop() == 0
    gone = subprocess.run(notifyd_cmd(db, "stats", "--url", d.url), capture_output=True,
                          text=True, env=clean_env(), cwd=tmp_path, timeout=60)
    assert gone.returncode == 1 and "cannot reach the daemon at" in gone.stderr
