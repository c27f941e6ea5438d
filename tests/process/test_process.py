"""The real daemon in a subprocess: serve, post, inspect beside it, SIGTERM; SIGKILL under load.

Waits are bounded: the daemon is polled for its "listening on" line with a deadline, and every
wait on a process has a timeout, so a hang fails the test instead of stalling the suite.
"""

from __future__ import annotations

import asyncio
import json
import re
import signal
import subprocess
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from engine_support import Daemon, clean_env, create_key, notifyd_cmd
from support import query

DEMO_STEPS = 2  # the built-in config's demo kind: the daemon runs here with no config file


def cli(db: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(notifyd_cmd(db, *args), capture_output=True, text=True,
                          env=clean_env(), cwd=db.parent, timeout=60, check=False)


@pytest.fixture
def daemons() -> Iterator[list[Daemon]]:
    """Every daemon a test starts, killed at teardown if the test left it running."""
    started: list[Daemon] = []
    yield started
    for d in started:
        if d.proc.poll() is None:
            d.proc.kill()
            d.proc.wait(timeout=30)


def post(url: str, key: str, body: dict[str, Any]) -> tuple[int, Any]:
    request = urllib.request.Request(f"{url}/v1/notifications", data=json.dumps(body).encode(),
                                     headers={"Authorization": f"Bearer {key}",
                                              "Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as resp:
        return resp.status, json.loads(resp.read())


def test_serve_post_inspect_and_stop_cleanly(tmp_path: Path, daemons: list[Daemon]) -> None:
    db = tmp_path / "notifyd.db"
    key = create_key(db)
    daemons.append(d := Daemon(db))
    status, body = post(d.url, key, {"user_id": "u1", "kind": "demo", "dedup_key": "inv-1"})
    assert status == 202 and body["created"] is True
    nid = body["notification_id"]

    shown = cli(db, "inspect", nid)  # a second process on the same file, beside the daemon
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.startswith(nid)
    assert "step 1 log: planned for" in shown.stdout
    assert shown.stdout.splitlines()[-1] == "  state now: log_pending"

    resolved = cli(db, "resolve", "u1:inv-1", "--resolution", "done")
    assert resolved.returncode == 0, resolved.stderr
    status, body = post(d.url, key, {"user_id": "u1", "kind": "demo", "dedup_key": "inv-1"})
    assert (status, body["state"]) == (200, "resolved")  # the daemon sees the CLI's write

    assert d.stop(signal.SIGTERM) == 0, d.stderr()
    assert "stopped cleanly" in d.stderr()


async def test_sigkill_under_load_loses_no_accepted_notification(
        tmp_path: Path, daemons: list[Daemon]) -> None:
    db = tmp_path / "notifyd.db"
    key = create_key(db)
    daemons.append(d := Daemon(db))
    accepted: list[str] = []
    errors: list[str] = []
    inflight = {"n": 0}
    killed = asyncio.Event()
    enough = asyncio.Event()

    async def client(session: aiohttp.ClientSession, worker: int) -> None:
        i = 0
        while True:
            i += 1
            body = {"user_id": f"u{worker}", "kind": "demo", "dedup_key": f"{worker}-{i}"}
            inflight["n"] += 1
            try:
                async with session.post(f"{d.url}/v1/notifications", json=body) as resp:
                    answer = await resp.json()
                    if resp.status == 202:
                        accepted.append(answer["notification_id"])
                    elif not killed.is_set():
                        errors.append(f"{resp.status} {answer}")
            except (TimeoutError, aiohttp.ClientError) as e:
                if not killed.is_set():
                    errors.append(repr(e))
                return
            finally:
                inflight["n"] -= 1
            if len(accepted) >= 500:
                enough.set()

    timeout = aiohttp.ClientTimeout(total=30)
    async with aiohttp.ClientSession(headers={"Authorization": f"Bearer {key}"},
                                     timeout=timeout) as session:
        tasks = [asyncio.create_task(client(session, w)) for w in range(16)]
        await asyncio.wait_for(enough.wait(), timeout=60)
        in_flight_at_kill, answered_before_kill = inflight["n"], len(accepted)
        killed.set()
        d.proc.send_signal(signal.SIGKILL)
        assert d.proc.wait(timeout=30) == -signal.SIGKILL
        await asyncio.wait_for(asyncio.gather(*tasks), timeout=60)

    assert errors == [], "requests failed before the kill"
    assert in_flight_at_kill > 0, "the kill must land while requests are in flight"
    daemons.append(again := Daemon(db))  # restarts on the same file: WAL recovery
    steps = dict(query(db, "SELECT n.id, count(s.step_no) FROM notifications n "
                           "LEFT JOIN steps s ON s.notification_id = n.id GROUP BY n.id"))
    missing = [nid for nid in accepted if nid not in steps]
    assert missing == [], f"{len(missing)} accepted notifications lost"
    assert {steps[nid] for nid in accepted} == {DEMO_STEPS}
    assert set(steps.values()) == {DEMO_STEPS}, "a notification without its whole ladder"
    assert query(db, "PRAGMA integrity_check") == [("ok",)]
    print(f"\nSIGKILL: {in_flight_at_kill} requests in flight, {answered_before_kill} 202s "
          f"before the kill, {len(accepted) - answered_before_kill} read after it, "
          f"{len(steps) - len(accepted)} committed but never answered")
    status, body = post(again.url, key, {"user_id": "u0", "kind": "demo", "dedup_key": "0-1"})
    assert (status, body["created"]) == (200, False)  # the restarted daemon knows it
    assert again.stop() == 0, again.stderr()


def _raw(url: str, request: bytes) -> bytes:
    """Send `request` as is on a fresh connection; the first bytes of the answer."""
    import socket

    host, port = url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        sock.sendall(request)
        return sock.recv(4096)


MALFORMED = [
    b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Long: " + b"a" * 20_000 + b"\r\n\r\n",
    b"POST /v1/notifications HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n"
    b"Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
    b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03 not HTTP at all\r\n\r\n",
]


def test_malformed_http_is_a_400_and_one_warning_line_without_a_traceback(
        tmp_path: Path, daemons: list[Daemon]) -> None:
    daemons.append(d := Daemon(tmp_path / "notifyd.db"))
    for request in MALFORMED * 20:  # 60 bad requests in a burst
        assert _raw(d.url, request)[:13] in (b"HTTP/1.1 400 ", b"HTTP/1.0 400 ")
    with urllib.request.urlopen(f"{d.url}/healthz", timeout=30) as resp:  # still serving
        assert resp.status == 200
    assert d.stop() == 0
    lines = [ln for ln in d.lines if "malformed HTTP request" in ln]
    assert len(lines) == 1, d.stderr()  # rate-limited: one line for the whole burst
    assert " WARNING " in lines[0] and "answered 400" in lines[0]
    assert "Traceback" not in d.stderr()


def _serve_fails(tmp_path: Path, db: Path, *args: str) -> str:
    """`notifyd --db DB serve ARGS` must exit non-zero at once with one line, no traceback."""
    done = subprocess.run(notifyd_cmd(db, "serve", *args), capture_output=True, text=True,
                          env=clean_env(), cwd=tmp_path, timeout=60, check=False)
    assert done.returncode in (1, 2), done.stderr  # 2: click's usage errors
    assert "Traceback" not in done.stderr
    [line] = [ln for ln in done.stderr.splitlines() if ln.startswith("Error: ")]
    return line


def test_ordinary_start_mistakes_are_one_line_and_leave_nothing_behind(
        tmp_path: Path, daemons: list[Daemon]) -> None:
    work = tmp_path / "work"
    work.mkdir()
    db = work / "n.db"
    daemons.append(d := Daemon(tmp_path / "running.db"))
    port = d.url.rsplit(":", 1)[1]
    assert f"port {port} on 127.0.0.1 is in use" in _serve_fails(work, db, "--port", port)
    assert "cannot listen on host 'no-such-host.invalid'" in _serve_fails(
        work, db, "--host", "no-such-host.invalid", "--port", "0")
    assert "does not exist" in _serve_fails(work, work / "missing" / "n.db", "--port", "0")
    bad = _serve_fails(work, db, "--port", "99999")
    assert "99999 is not in the range 0<=x<=65535" in bad
    assert list(work.iterdir()) == []  # no stray database or lock file
    (work / "notes.txt").write_text("just some text, not a database " * 64)
    assert "is not a notifyd database" in _serve_fails(work, work / "notes.txt", "--port", "0")
    assert sorted(p.name for p in work.iterdir()) == ["notes.txt"]


def test_the_start_line_names_version_database_config_channels_and_kinds(
        tmp_path: Path, daemons: list[Daemon]) -> None:
    daemons.append(d := Daemon(tmp_path / "n.db"))
    [line] = [ln for ln in d.lines if "listening on" in ln]
    assert f"database sqlite:///{tmp_path / 'n.db'}" in line
    assert "config built-in; channels log (log); kinds demo" in line
    assert re.search(r"notifyd \d+\.\d+\.\d+ listening", line)
    assert d.stop() == 0
