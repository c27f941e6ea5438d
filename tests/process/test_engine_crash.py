"""Promise 7 with the real daemon: SIGKILL it while 1,000 ladders are mid-flight to a slow provider,
restart it on the same file, and every accepted notification finishes (the steps in flight once
their leases end); every key the provider saw
carried one frozen payload, byte for byte; the number of keys it saw more than once is printed.

The provider is a real HTTP server on its own thread; the daemon is `python -m notifyd serve`.
Every wait is bounded by a deadline.
"""

from __future__ import annotations

import asyncio
import signal
import time
from collections.abc import Callable
from pathlib import Path

import aiohttp
from engine_support import (
    FINAL_STATES,
    OPEN_STATES,
    Daemon,
    ThreadedProvider,
    body_of,
    create_key,
    query,
    reaped,
)

N = 1000
SLOW_SEC = 0.5  # how long the provider takes before the kill, so sends pile up in flight
DEADLINE_SEC = 120.0

CONFIG = """
[scanner]
poll_interval_sec = 0.2
claim_batch = 256
lease_sec = 8.0

[daemon]
grace_sec = 2.0

[channels.hook]
type = "webhook"
url = "{url}"
timeout_sec = 2.0
rate_per_sec = 100000.0
burst = 100000
bulk_concurrency = 200
urgent_concurrency = 16
max_attempts = 10
backoff_base_sec = 0.2
backoff_max_sec = 1.0

[kinds.k]
ladder = [{{ channel = "hook", timeout_sec = 1.0 }}, {{ channel = "hook" }}]
ttl_sec = 3600
"""


async def _post_all(url: str, key: str, n: int) -> list[str]:
    ids: list[str] = []
    todo = iter(range(n))

    async def worker(session: aiohttp.ClientSession) -> None:
        for i in todo:
            body = {"user_id": f"u{i}", "kind": "k", "dedup_key": f"d{i}"}
            async with session.post(f"{url}/v1/notifications", json=body) as resp:
                assert resp.status == 202, await resp.text()
                ids.append((await resp.json())["notification_id"])

    timeout = aiohttp.ClientTimeout(total=60)
    async with aiohttp.ClientSession(headers={"Authorization": f"Bearer {key}"},
                                     timeout=timeout) as session:
        await asyncio.gather(*(worker(session) for _ in range(32)))
    return ids


async def _until(what: str, check: Callable[[], bool], timeout: float = DEADLINE_SEC) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.05)


def _open_steps(db: Path) -> int:
    marks = ",".join("?" * len(OPEN_STATES))
    return int(query(db, f"SELECT count(*) FROM steps WHERE state IN ({marks})", *OPEN_STATES)[0][0])


async def test_sigkill_mid_flight_then_restart_finishes_every_ladder_with_frozen_payloads(
        tmp_path: Path) -> None:
    db, config = tmp_path / "notifyd.db", tmp_path / "notifyd.toml"
    with ThreadedProvider(delay=SLOW_SEC) as prov, reaped([]) as daemons:
        config.write_text(CONFIG.format(url=prov.url))
        key = await asyncio.to_thread(create_key, db, config)
        daemons.append(first := await asyncio.to_thread(Daemon, db, config))
        ids = await _post_all(first.url, key, N)
        assert len(set(ids)) == N

        await _until("sends in flight", lambda: prov.provider.in_progress >= 20, 60)
        in_flight = prov.provider.in_progress
        first.signal(signal.SIGKILL)
        assert await asyncio.to_thread(first.wait) == -signal.SIGKILL
        seen_at_kill = len(prov.snapshot())
        interrupted = int(query(db, "SELECT count(*) FROM steps WHERE state = 'sending'")[0][0])
        prov.delay = 0.0  # the provider recovers

        daemons.append(again := await asyncio.to_thread(Daemon, db, config))
        await _until("every ladder to finish", lambda: _open_steps(db) == 0)
        assert "mid-send when notifyd last stopped" in again.stderr()

        rows = query(db, "SELECT notification_id, step_no, state FROM steps")
        assert {r[0] for r in rows} == set(ids), "an accepted notification is missing"
        assert len(rows) == 2 * N
        assert {r[2] for r in rows} <= FINAL_STATES
        assert {r[2] for r in rows} == {"sent"}  # nothing could fail: the provider always said yes

        seen = prov.snapshot()
        bodies: dict[str | None, set[bytes]] = {}
        for s in seen:
            bodies.setdefault(s.key, set()).add(s.body)
        assert set(bodies) == {f"{nid}:{no}" for nid in ids for no in (0, 1)}
        assert [k for k, b in bodies.items() if len(b) != 1] == [], "a key with two payloads"
        frozen = dict(((nid, no), payload) for nid, no, payload in
                      query(db, "SELECT notification_id, step_no, payload FROM steps"))
        for k, (body,) in bodies.items():
            assert k is not None
            nid, _, no = k.partition(":")
            assert body == body_of(frozen[(nid, int(no))])

        repeated = prov.provider.repeated_keys()
        print(f"\ncrash: {in_flight} provider calls in flight and {interrupted} steps 'sending' at "
              f"SIGKILL, {seen_at_kill} requests before it, {len(seen)} in all; "
              f"{repeated} keys seen more than once (each with one payload)")
        assert interrupted > 0 and in_flight > 0, "the kill must land mid-flight"
        assert 0 < repeated <= interrupted

        again.signal(signal.SIGTERM)
        assert await asyncio.to_thread(again.wait) == 0, again.stderr()
        assert "stopped cleanly" in again.stderr()

