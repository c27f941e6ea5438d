"""An outage of the PostgreSQL server is not a crash: the real daemon, fanning an event out to a
topic, loses the server (a proxy in front of it stops) for a few seconds. Meanwhile accepts are
503 with Retry-After and /readyz says the database is down; the log says so in a few lines,
without a traceback; when the server is back, the daemon carries on by itself: the fan-out
finishes, accepts are taken, /readyz is ready.

The daemon is `python -m notifyd serve`; the rows are read on a connection of the test's own.
Every wait is bounded by a deadline.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pg_support
import psycopg
import pytest
from engine_support import Daemon, clean_env, reaped
from fake_tcp import Process

pytestmark = pytest.mark.skipif(pg_support.SERVER == "off", reason="no PostgreSQL")
MEMBERS = 400
OUTAGE_SEC = 6.0
DEADLINE_SEC = 60.0
CONFIG = """
[kinds.launch_news]
ladder = [{ channel = "log" }]

[events.launch]
kinds = ["launch_news"]

[fanout]
chunk = 5
"""


def until(what: str, check: Callable[[], bool], timeout: float = DEADLINE_SEC) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def call(method: str, url: str, key: str | None = None,
         body: Any = None) -> tuple[int, dict[str, Any], dict[str, str]]:
    req = urllib.request.Request(url, method=method, data=None if body is None else
                                 json.dumps(body).encode(), headers={
                                     "Content-Type": "application/json",
                                     **({"Authorization": f"Bearer {key}"} if key else {})})
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            return resp.status, json.loads(resp.read() or b"{}"), dict(resp.headers)
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"{}"), dict(e.headers)


def routed(url: str) -> tuple[int, int | None]:
    with psycopg.connect(url) as conn:
        row = conn.execute("SELECT routed, routed_at FROM fanout_events "
                           "WHERE event_id = 'v1'").fetchone()
    return (row[0], row[1]) if row else (0, None)


def test_the_server_gone_for_seconds_is_503_then_the_daemon_carries_on(tmp_path: Path) -> None:
    url = pg_support.migrated_url()
    server = urlsplit(pg_support.SERVER)
    config = tmp_path / "notifyd.toml"
    config.write_text(CONFIG)
    with Process((server.hostname or "127.0.0.1", server.port or 5432), 0.0) as proxy, \
            reaped([]) as daemons:
        via = proxy.url(url)
        head = [sys.executable, "-m", "notifyd", "--config", str(config), "--db", via]
        made = subprocess.run([*head, "keys", "create", "--name", "t"], capture_output=True,
                              text=True, env=clean_env(), cwd=tmp_path, timeout=60)
        assert made.returncode == 0, made.stderr
        key = made.stdout.strip()
        daemons.append(d := Daemon(tmp_path / "x", argv=[*head, "serve", "--port", "0"]))
        members = [f"u{i:04}" for i in range(MEMBERS)]
        assert call("PUT", f"{d.url}/v1/topics/launch", key, {})[0] in (200, 201)
        assert call("POST", f"{d.url}/v1/topics/launch/members", key, {"add": members})[0] == 200
        status, body, _ = call("POST", f"{d.url}/v1/events", key, {
            "event_id": "v1", "type": "launch", "audience": {"topic": "launch"},
            "params": {}})
        assert status in (200, 202), body
        until("the fan-out under way", lambda: routed(url)[0] > 0)
        logged = len(d.lines)

        proxy.pause()
        down_at = time.monotonic()
        status, body, headers = call("POST", f"{d.url}/v1/notifications", key,
                                     {"user_id": "u1", "kind": "launch_news"})
        assert (status, body["error"]["code"]) == (503, "storage_unavailable"), body
        assert "Retry-After" in headers
        status, ready, _ = call("GET", f"{d.url}/readyz")
        assert status == 503 and ready["checks"]["store"].startswith("cannot write: "), ready
        at_pause = routed(url)[0]
        assert at_pause < MEMBERS, "the outage must land mid-fan-out"
        time.sleep(max(0.0, OUTAGE_SEC - (time.monotonic() - down_at)))
        assert d.proc.poll() is None, d.stderr()
        during = d.lines[logged:]

        proxy.resume()
        until("the fan-out to finish", lambda: routed(url)[1] is not None)
        assert routed(url)[0] == MEMBERS
        until("an accept", lambda: call("POST", f"{d.url}/v1/notifications", key, {
            "user_id": "u2", "kind": "launch_news"})[0] == 202)
        until("ready", lambda: call("GET", f"{d.url}/readyz")[0] == 200)
        d.signal(signal.SIGTERM)
        assert d.wait() == 0, d.stderr()
    log = d.stderr()
    assert "Traceback" not in log, log
    assert 1 <= len(during) <= 8, "".join(during)
