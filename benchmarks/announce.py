"""Announce to a large topic: how fast an event's fan-out routes its recipients with the daemon
as a subprocess, what a single accept waits meanwhile, and whether SIGKILL during a fan-out
ever costs a recipient their notification or gives them two.

Full:  .venv/bin/python benchmarks/announce.py                 (120,000 members; a few minutes)
Smoke: .venv/bin/python benchmarks/announce.py --members 5000
Also:  --chunk N ([fanout] chunk), --kills N, --keep.

The daemon (`python -m notifyd --config CFG serve --port 0`, benchmarks/receipts.Daemon) has one
kind, `announce` (broadcast = true: its sends ride the broadcast lane), whose ladder is one step
on the built-in log channel (a line per send, to a file), due at once: the scanner sends what the
fan-out routes while it routes, as in production.
Event type `launch` makes one `announce` per recipient. The topic's members are added through
the API, 1,000 per call.

1. Rate. One event to the whole topic; its document (GET /v1/events/ID) is read until it is
   routed: recipients routed per second is audience_size / fanout_lag_ms. Meanwhile a single
   notification is posted every 200 ms: its latency is what an accept waits behind the chunks.
2. Crashes. A second event to the same topic; each time another quarter of it has been routed
   the daemon is killed (SIGKILL) and started again on the same file, --kills times; then it is
   left to finish. Recipients with no notification of that event, and with two or more, are
   counted from the rows: both must be 0 (the script exits 1 otherwise).

The machine is small and shared: the load average is printed with the figures.
"""

from __future__ import annotations

import argparse
import http.client
import json
import shutil
import sqlite3
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from channels import stop_proc  # noqa: E402
from httpload import percentile  # noqa: E402
from receipts import STARTED, Daemon, loadavg, notifyd_cli  # noqa: E402

CONFIG = """
[store]
url = "{db}"
[store.sqlite]
synchronous = "NORMAL"
[channels.log]
type = "log"
rate_per_sec = 1000000.0
burst = 1000000
bulk_concurrency = 64
[kinds.announce]
ttl_sec = 86400
broadcast = true
ladder = [{{ channel = "log" }}]
[events.launch]
kinds = ["announce"]
[fanout]
chunk = {chunk}
"""


class Api:
    def __init__(self, port: int, key: str) -> None:
        self.port, self.key = port, key

    def call(self, method: str, path: str, body: Any = None) -> tuple[int, Any, float]:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
        began = time.perf_counter()
        try:
            conn.request(method, path, body=None if body is None else json.dumps(body),
                         headers={"Authorization": f"Bearer {self.key}",
                                  "Content-Type": "application/json"})
            resp = conn.getresponse()
            data = resp.read()
        finally:
            conn.close()
        return resp.status, json.loads(data) if data else None, time.perf_counter() - began

    def ok(self, method: str, path: str, body: Any = None) -> Any:
        status, answer, _ = self.call(method, path, body)
        if status >= 300:
            raise SystemExit(f"{method} {path}: {status} {answer}")
        return answer


def routed(db: Path, event_id: str) -> tuple[int, int | None]:
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=30) as conn:
        row = conn.execute("SELECT routed, routed_at FROM fanout_events WHERE event_id = ?",
                           (event_id,)).fetchone()
    return (row[0], row[1]) if row else (0, None)


def launch(api: Api, event_id: str) -> None:
    api.ok("POST", "/v1/events", {"event_id": event_id, "type": "launch",
                                  "audience": {"topic": "everyone-who-cares"},
                                  "params": {"version": "2.0"}, "subject": "release:2.0"})


def rate_phase(api: Api, db: Path) -> dict[str, Any]:
    launch(api, "rate")
    latencies, i = [], 0
    while routed(db, "rate")[1] is None:
        i += 1
        status, _, took = api.call("POST", "/v1/notifications", {
            "user_id": f"single{i}", "kind": "announce", "params": {}})
        if status != 202:
            raise SystemExit(f"a single accept got {status} during the fan-out")
        latencies.append(took * 1000)
        time.sleep(0.2)
    return {"doc": api.ok("GET", "/v1/events/rate"), "latencies": latencies}


def crash_phase(cfg: Path, work: Path, daemon: Daemon, key: str, db: Path, size: int,
                kills: int) -> tuple[Daemon, list[int], float]:
    api = Api(daemon.port, key)
    began = time.monotonic()
    launch(api, "crash")
    at_kill: list[int] = []
    for k in range(1, kills + 1):
        target = size * k // (kills + 1)
        while (now := routed(db, "crash"))[0] < target and now[1] is None:
            time.sleep(0.005)
        if now[1] is not None:
            print(f"  ! the fan-out finished before kill {k}; fewer kills than asked")
            break
        daemon.proc.kill()
        daemon.proc.wait(30)
        at_kill.append(routed(db, "crash")[0])
        daemon = Daemon(cfg, work)
    while routed(db, "crash")[1] is None:
        time.sleep(0.05)
    return daemon, at_kill, time.monotonic() - began


def wrong(db: Path) -> tuple[int, int]:
    """Members of the topic with no notification of the crash event, and with two or more."""
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=30) as conn:
        none = conn.execute(
            "SELECT count(*) FROM topic_members m WHERE m.topic = 'everyone-who-cares' AND "
            "m.removed_version IS NULL AND NOT EXISTS (SELECT 1 FROM notifications n WHERE "
            "n.tenant = m.tenant AND n.user_id = m.user_id AND n.event_id = 'crash')").fetchone()
        many = conn.execute(
            "SELECT count(*) FROM (SELECT user_id FROM notifications WHERE event_id = 'crash' "
            "GROUP BY tenant, user_id HAVING count(*) > 1)").fetchone()
    return int(none[0]), int(many[0])


def run(args: argparse.Namespace, work: Path) -> bool:
    db, cfg = work / "notifyd.db", work / "notifyd.toml"
    cfg.write_text(CONFIG.format(db=db, chunk=args.chunk))
    key = notifyd_cli(cfg, "keys", "create", "--name", "bench").strip()
    daemon = Daemon(cfg, work)
    try:
        api = Api(daemon.port, key)
        api.ok("PUT", "/v1/topics/everyone-who-cares", {})
        began = time.monotonic()
        for i in range(0, args.members, 1000):
            api.ok("POST", "/v1/topics/everyone-who-cares/members",
                   {"add": [f"u{j:07}" for j in range(i, min(args.members, i + 1000))]})
        added = time.monotonic() - began
        print(f"topic: {args.members:,} members added through the API in {added:.1f} s "
              f"({args.members / added:,.0f}/s, 1,000 per call)")

        r = rate_phase(api, db)
        doc, lat = r["doc"], r["latencies"]
        lag = doc["fanout_lag_ms"] / 1000
        print(f"rate: {doc['audience_size']:,} recipients routed in {lag:.1f} s = "
              f"{doc['audience_size'] / lag:,.0f} recipients/s (chunk {args.chunk}; the scanner "
              f"sending them on the log channel meanwhile)")
        if lat:
            print(f"  a single accept during the fan-out: p50 {percentile(lat, 50):.1f} ms, "
                  f"p99 {percentile(lat, 99):.1f} ms, max {max(lat):.1f} ms ({len(lat)} posts)")

        daemon, at_kill, took = crash_phase(cfg, work, daemon, key, db, args.members,
                                            args.kills)
        none, many = wrong(db)
        print(f"crashes: SIGKILL at {', '.join(f'{n:,}' for n in at_kill)} of {args.members:,} "
              f"routed, restarted each time; routed whole in {took:.1f} s with the restarts")
        print(f"  recipients with no notification: {none}; with two or more: {many} "
              f"(both must be 0)")
        print(f"load average (1, 5, 15 min): {loadavg()}")
        return none == 0 and many == 0 and len(at_kill) == args.kills
    finally:
        stop_proc(daemon.proc)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--members", type=int, default=120_000)
    parser.add_argument("--chunk", type=int, default=100)
    parser.add_argument("--kills", type=int, default=3)
    parser.add_argument("--keep", action="store_true", help="keep the scratch folder")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="announce-"))
    try:
        ok = run(args, work)
    finally:
        for proc in STARTED:
            stop_proc(proc)
        if args.keep:
            print(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
