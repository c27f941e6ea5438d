"""An announcement drains while one-time codes keep flowing, on one channel.

Full:  .venv/bin/python benchmarks/drain.py                  (120,000 members; ~12 minutes)
Smoke: .venv/bin/python benchmarks/drain.py --members 2000 --idle-sec 10

One email channel (smtp) to a local relay (benchmarks/longrun.py's SMTP peer: aiosmtpd with
tests/fake_smtp.py's handler, in its own process, which stamps each message's arrival and reads
its step's send_after from the daemon's database), at rate_per_sec 2 x --ceiling with
broadcast_share 0.5: the broadcast lane may send --ceiling emails a second, the rest of the rate
stays for the other kinds. Two kinds on it: `announce` (broadcast = true), the event type
`launch` makes one per member of a topic; `otp` (urgency urgent), posted one by one.

1. Idle: one-time codes at --otp-rate a second for --idle-sec, nothing else.
2. Announce: one event to the whole topic (every member has an email address), the codes still
   at --otp-rate a second, until every announcement email has reached the relay.

Due lag of a code = its arrival at the relay - its step's send_after (when it was due). Printed:
fan-out time, drain time and rate of the announcement, the codes' due lag p50/p99/max idle and
during it, and the ratio of the p99s (the goal: 1.5 or less). The generator is this
process; the daemon and the relay run in their own.
"""

from __future__ import annotations

import argparse
import shutil
import sqlite3
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from announce import Api  # noqa: E402
from channels import stop_proc  # noqa: E402
from httpload import percentile  # noqa: E402
from longrun import PeerProc  # noqa: E402
from receipts import STARTED, Daemon, loadavg, notifyd_cli  # noqa: E402

TOPIC = "customers"
CONFIG = """
[store]
url = "{db}"
[store.sqlite]
synchronous = "NORMAL"
[templates]
folder = "{templates}"
[channels.email]
type = "smtp"
host = "127.0.0.1"
port = {smtp}
tls = "none"
from_address = "Drain <drain@example.com>"
helo_name = "drain.example.com"
timeout_sec = 10
rate_per_sec = {rate}
burst = {burst}
broadcast_share = 0.5
urgent_concurrency = 16
bulk_concurrency = 16
broadcast_concurrency = 32
[kinds.announce]
ttl_sec = 86400
broadcast = true
ladder = [{{ channel = "email" }}]
[kinds.otp]
urgency = "urgent"
ladder = [{{ channel = "email" }}]
[events.launch]
kinds = ["announce"]
"""
TEMPLATES = {
    "announce/en/email.subject.j2": "Version {{ version }} is out\n",
    "announce/en/email.text.j2": "Hello,\n\nversion {{ version }} is out.\n",
    "otp/en/email.subject.j2": "Your code\n",
    "otp/en/email.text.j2": "Your code is {{ code }}.\n",
}


def write_templates(folder: Path) -> None:
    for rel, text in TEMPLATES.items():
        path = folder / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


class Codes(threading.Thread):
    """One-time codes posted at a steady rate (open loop: on a schedule, not after answers)."""

    def __init__(self, api: Api, rate: float) -> None:
        super().__init__(daemon=True)
        self.api, self.gap = api, 1 / rate
        self.stop = threading.Event()
        self.ids: list[tuple[float, str]] = []  # (posted at, notification id)

    def run(self) -> None:
        due, i = time.monotonic(), 0
        while not self.stop.is_set():
            i += 1
            status, body, _ = self.api.call("POST", "/v1/notifications", {
                "user_id": f"otp{i % 50}", "kind": "otp", "params": {"code": f"{i:06}"}})
            if status != 202:
                raise SystemExit(f"a code's accept got {status}: {body}")
            self.ids.append((time.monotonic(), body["notification_id"]))
            due += self.gap
            self.stop.wait(max(0.0, due - time.monotonic()))


def arrivals(out: Path) -> dict[str, tuple[float, int]]:
    """nid -> (arrival ms since the epoch, send_after), first arrival of step 0."""
    seen: dict[str, tuple[float, int]] = {}
    if not out.exists():
        return seen
    with out.open() as f:
        for line in f:
            ns, key, send_after, *_ = line.split()
            nid, _, no = key.rpartition(":")
            if no == "0" and send_after != "-" and nid not in seen:
                seen[nid] = (int(ns) / 1e6, int(send_after))
    return seen


def lags(ids: list[str], seen: dict[str, tuple[float, int]]) -> tuple[list[float], int]:
    got = [seen[n][0] - seen[n][1] for n in ids if n in seen]
    return got, len(ids) - len(got)


def lag_line(label: str, values: list[float], missing: int) -> str:
    if not values:
        return f"  {label}: no codes arrived"
    return (f"  {label}: {len(values)} codes, due lag p50 {percentile(values, 50):.1f} ms, "
            f"p99 {percentile(values, 99):.1f} ms, max {max(values):.1f} ms"
            + (f"; {missing} not arrived" if missing else ""))


def announce_count(db: Path) -> int:
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=30) as conn:
        return int(conn.execute("SELECT count(*) FROM notifications WHERE kind = 'announce'")
                   .fetchone()[0])


def kinds_of(db: Path) -> dict[str, str]:
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=30) as conn:
        return dict(conn.execute("SELECT id, kind FROM notifications").fetchall())


def claimed_at(db: Path) -> dict[str, int]:
    """nid -> when its step 0 was first claimed (the attempt's started_at, ms since the epoch)."""
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=30) as conn:
        return dict(conn.execute("SELECT notification_id, started_at FROM attempts WHERE "
                                 "step_no = 0 AND attempt_no = 1").fetchall())


def parts_line(ids: list[str], seen: dict[str, tuple[float, int]],
               claims: dict[str, int]) -> str:
    """Where the codes' due lag went: due -> claimed (the scanner and the writer), claimed ->
    at the relay (freeze, the SMTP conversation, the relay's own queue)."""
    both = [n for n in ids if n in seen and n in claims]
    waited = [float(claims[n] - seen[n][1]) for n in both]
    sent = [seen[n][0] - claims[n] for n in both]

    def fig(v: list[float]) -> str:
        return f"p50 {percentile(v, 50):.1f}, p99 {percentile(v, 99):.1f} ms" if v else "-"
    return f"    due -> claimed {fig(waited)}; claimed -> at the relay {fig(sent)}"


def run(args: argparse.Namespace, work: Path) -> bool:
    db, cfg = work / "notifyd.db", work / "notifyd.toml"
    write_templates(work / "templates")
    relay = PeerProc("smtp", work, db)
    cfg.write_text(CONFIG.format(db=db, templates=work / "templates", smtp=relay.port,
                                 rate=float(2 * args.ceiling), burst=2 * args.ceiling))
    key = notifyd_cli(cfg, "keys", "create", "--name", "bench").strip()
    daemon = Daemon(cfg, work)
    try:
        api = Api(daemon.port, key)
        began = time.monotonic()
        for i in range(args.members):
            api.ok("PUT", f"/v1/users/m{i:07}", {"email": f"m{i:07}@example.com"})
        for i in range(50):
            api.ok("PUT", f"/v1/users/otp{i}", {"email": f"otp{i}@example.com"})
        api.ok("PUT", f"/v1/topics/{TOPIC}", {})
        for i in range(0, args.members, 1000):
            api.ok("POST", f"/v1/topics/{TOPIC}/members",
                   {"add": [f"m{j:07}" for j in range(i, min(args.members, i + 1000))]})
        print(f"set-up: {args.members:,} people with an email address in topic {TOPIC} in "
              f"{time.monotonic() - began:.0f} s; broadcast ceiling {args.ceiling}/s of a "
              f"{2 * args.ceiling}/s channel; codes at {args.otp_rate:g}/s", flush=True)

        idle = Codes(api, args.otp_rate)
        idle.start()
        time.sleep(args.idle_sec)
        idle.stop.set()
        idle.join()

        during = Codes(api, args.otp_rate)
        during.start()
        t0 = time.time() * 1000
        api.ok("POST", "/v1/events", {"event_id": "launch-2.0", "type": "launch",
                                      "audience": {"topic": TOPIC}, "params": {"version": "2.0"}})
        routed_at = None
        while True:
            time.sleep(1.0)
            doc = api.ok("GET", "/v1/events/launch-2.0")
            if routed_at is None and doc["state"] == "routed":
                routed_at = doc["fanout_lag_ms"] / 1000
                print(f"  routed {doc['routed']:,} recipients in {routed_at:.1f} s", flush=True)
            sent = doc["notifications"]["sent"] + doc["notifications"]["delivered"]
            if routed_at is not None and sent >= args.members:
                break
        during.stop.set()
        during.join()
        time.sleep(2.0)  # the last codes' answers
        relay.stop()  # its record of arrivals is written out whole when it stops

        seen, kinds = arrivals(relay.out), kinds_of(db)
        announced = sorted(at for nid, (at, _) in seen.items() if kinds.get(nid) == "announce")
        drain = (announced[-1] - t0) / 1000 if announced else float("nan")
        window = [a for a in announced if a >= announced[0] + 10_000] if announced else []
        steady = (len(window) / ((window[-1] - window[0]) / 1000)
                  if len(window) > 1 else float("nan"))
        print(f"announcement: {len(announced):,} of {args.members:,} emails at the relay; "
              f"drained {drain:.1f} s after the event was posted; "
              f"{steady:,.0f} emails/s after its first 10 s (ceiling {args.ceiling}/s)")
        idle_lags, idle_missing = lags([n for _, n in idle.ids], seen)
        during_lags, during_missing = lags([n for _, n in during.ids], seen)
        claims = claimed_at(db)
        print(lag_line("codes while idle", idle_lags, idle_missing))
        print(parts_line([n for _, n in idle.ids], seen, claims))
        print(lag_line("codes during the announcement", during_lags, during_missing))
        print(parts_line([n for _, n in during.ids], seen, claims))
        ratio = (percentile(during_lags, 99) / percentile(idle_lags, 99)
                 if idle_lags and during_lags else float("nan"))
        print(f"  p99 during / idle: {ratio:.2f} (goal: 1.5 or less)")
        print(f"load average (1, 5, 15 min): {loadavg()}")
        return len(announced) == args.members and not during_missing
    finally:
        stop_proc(daemon.proc)
        relay.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--members", type=int, default=120_000)
    parser.add_argument("--ceiling", type=int, default=200, help="broadcast emails a second")
    parser.add_argument("--otp-rate", type=float, default=10.0)
    parser.add_argument("--idle-sec", type=float, default=30.0)
    parser.add_argument("--keep", action="store_true", help="keep the scratch folder")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="drain-"))
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
