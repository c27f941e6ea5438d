"""An event's fan-out survives SIGKILL: the real daemon routes an event to a topic of a few
thousand members, is killed mid-fan-out, and restarted on the same file resumes at the cursor.
Every member gets exactly one notification per kind; a member removed after the event was
accepted still gets theirs, and nobody added after it gets one.

The daemon is `python -m notifyd serve`; the rows are read on a connection of the test's own.
Every wait is bounded by a deadline.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aiohttp
from engine_support import Daemon, create_key, query, reaped

MEMBERS = 3000
CHUNK = 10
DEADLINE_SEC = 120.0
CONFIG = f"""
[kinds.launch_news]
ladder = [{{ channel = "log" }}]

[kinds.launch_badge]
ladder = [{{ channel = "log" }}]

[events.launch]
kinds = ["launch_news", "launch_badge"]

[fanout]
chunk = {CHUNK}
"""


def until(what: str, check: Callable[[], bool], timeout: float = DEADLINE_SEC) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.002)


def routed(db: Path) -> tuple[int, int | None]:
    found = query(db, "SELECT routed, routed_at FROM fanout_events WHERE event_id = 'v2'")
    return (found[0][0], found[0][1]) if found else (0, None)


async def call(session: aiohttp.ClientSession, method: str, url: str, body: Any) -> Any:
    async with session.request(method, url, json=body) as resp:
        assert resp.status in (200, 201, 202), await resp.text()
        return await resp.json()


async def test_sigkill_mid_fan_out_then_restart_routes_every_member_exactly_once(
        tmp_path: Path) -> None:
    db, config = tmp_path / "notifyd.db", tmp_path / "notifyd.toml"
    config.write_text(CONFIG)
    members = [f"u{i:05}" for i in range(MEMBERS)]
    with reaped([]) as daemons:
        key = create_key(db, config)
        daemons.append(first := Daemon(db, config))
        headers = {"Authorization": f"Bearer {key}"}
        async with aiohttp.ClientSession(headers=headers) as s:
            await call(s, "PUT", f"{first.url}/v1/topics/launch", {})
            for i in range(0, MEMBERS, 1000):
                await call(s, "POST", f"{first.url}/v1/topics/launch/members",
                           {"add": members[i:i + 1000]})
            accepted = await call(s, "POST", f"{first.url}/v1/events", {
                "event_id": "v2", "type": "launch", "audience": {"topic": "launch"},
                "params": {"version": "2.0"}})
            assert (accepted["created"], accepted["audience_size"]) == (True, MEMBERS)
            late = [f"late{i}" for i in range(50)]
            await call(s, "POST", f"{first.url}/v1/topics/launch/members",
                       {"add": late, "remove": members[-50:]})

        until("the fan-out under way", lambda: 0 < routed(db)[0] < MEMBERS)
        first.signal(signal.SIGKILL)
        assert first.wait() == -signal.SIGKILL
        at_kill, done_at_kill = routed(db)
        assert 0 < at_kill < MEMBERS and done_at_kill is None, "the kill must land mid-fan-out"

        daemons.append(again := Daemon(db, config))
        until("the fan-out to finish", lambda: routed(db)[1] is not None)
        counts = query(db, "SELECT user_id, kind, count(*) FROM notifications "
                           "WHERE tenant = 'default' AND event_id = 'v2' GROUP BY user_id, kind")
        assert {(u, k): n for u, k, n in counts} == {
            (u, k): 1 for u in members for k in ("launch_news", "launch_badge")}
        keyed = query(db, "SELECT count(*) FROM notifications WHERE dedup_key LIKE 'event:v2:%'")
        assert keyed[0][0] == 2 * MEMBERS  # none without its event, none for the late ones
        assert routed(db)[0] == MEMBERS
        print(f"\nevents crash: SIGKILL at {at_kill} of {MEMBERS} recipients routed; after the "
              f"restart every member had one notification per kind")
        again.signal(signal.SIGTERM)
        assert again.wait() == 0, again.stderr()
        assert "Traceback" not in first.stderr() + again.stderr()
