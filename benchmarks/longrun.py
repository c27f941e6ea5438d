"""Run for months, measured: the whole daemon under an open-loop load for --minutes with retention
working all through and an SMTP relay outage in the middle; does the database file, the memory
and the due lag plateau, and did every promise hold.

Full:  .venv/bin/python benchmarks/longrun.py            (200/s for 30 min, outage 10-20; 35-45 min)
Smoke: .venv/bin/python benchmarks/longrun.py --rate 50 --minutes 2 --slice-minutes 0.5 \\
           --outage-at 0.5 --outage-minutes 0.5 --retention-scale 0.1      (about 2.5 min)
Also:  --outage-minutes 0 (no outage), --drain-minutes, --plateau-pct, --keep.

Processes (benchmarks/soak.py's layout, its pieces imported, not copied):
- the daemon, `python -m notifyd --config CFG serve --port 0` (receipts.Daemon), kind "soak" (the
  name soak.py's accept generator posts) with a three-step ladder: step 0 webhook `hook`, step 1
  email `email` (smtp, tls none) 2 s after step 0 was sent, step 2 webhook 2 s after step 1 was
  planned or sent (notifyd/domain/ladder.py: step 2 does not wait for a step 1 that is being
  retried); ttl_sec 3600, so a long outage is survivable. 5,000 users (u0..u4999, the ids the
  generator posts to) get an email address through PUT /v1/users before the start. [retention]
  is set in minutes so that it runs all through: history 300 s, identities 600 s, receipts 600 s,
  inbox 600/900 s, a pass every 30 s, each times --retention-scale;
- the accept generator and the resolver of soak.py (`soak.py --gen`): --rate accepts per second
  open loop, every even one resolved 1 s after its 202 (its email step, due 2 s after step 0,
  is then cancelled; the odd half send all three steps);
- the webhook receiver: benchmarks/provider.py's protocol in a process of this file (`--peer
  hook`), answering 200 at once;
- the SMTP relay: aiosmtpd with tests/fake_smtp.py's handler in a process of this file (`--peer
  smtp`) on a fixed port. At --outage-at minutes it is stopped (SIGTERM: it stops listening and
  closes its sessions, so connects are refused) and --outage-minutes later started again on the
  same port, appending to the same record.

Retries. The email channel sets max_attempts only if it must: left out when this tree's default
is already 0 (no count limit: retry transient failures until the step's deadline), 0 when this
tree accepts 0, else a count that outlasts the outage (the line "email retries:" says which). The
run expects: after the relay returns, every email step of an unresolved notification ends sent,
none dead, and no message reaches the relay twice (by its X-Notifyd-Key). After the last accept
the run waits, up to --drain-minutes (10), for no step to be open any more (backoff is capped
near 300 s, so the last retries can come minutes after the relay returns).

Due lag, when the rows are pruned. Each peer, when a message arrives (the webhook's first byte;
the end of SMTP DATA), stamps the wall clock and, before it answers, reads the step's row from
the daemon's database (read-only, one primary-key read, about 0.1 ms): its send_after, attempt
count, the attempt's started_at and the notification's resolved_at, and appends them with the
arrival to its record. At that moment the step is `sending` (claimed, its attempt written) and
retention never prunes a notification with a step in flight, so the row is always there; and
send_after does not change between a claim and its answer (only the completion moves it). So
due lag = arrival - send_after exactly as the daemon scheduled that send: for a retry, that
retry's due time; for an email held back while the relay was down, the time it fell due, so the
outage is all in it. The webhook-only column shows the rest of the daemon through the outage.

Every --slice-minutes (5) one row: the minute; the database file (.db + -wal, from the file
system); rows per class (the daemon's own COUNT_ROWS query, read-only); the daemon's VmRSS and
CPU (% of one core) over the slice; for the steps due in the slice, due lag p99 (all steps,
then the webhook steps alone) and how many went out on a retry (attempt 2+); accept p99 and
non-2xx for requests due in the slice; provider calls that failed in it (notifyd_sends_total,
outcome failed or unknown, from /metrics). Then: whether the file and RSS plateau (the last two
slices of the load within --plateau-pct, 10%), and the slices whose lag p99 passed 100 ms.

Correctness, each must be 0 (the script exits 1 otherwise): sends after resolution (an attempt
whose claim came after the resolution committed, as soak.py counts them, read at arrival);
repeated keys at the webhook receiver and at the relay; emails dead (the daemon's "step dead"
log lines for the email channel); unresolved notifications whose email never reached the relay
(every notification's step 0 reaches the receiver, so those are its ids, less the ones resolved
with a 2xx). Beside them: accepted notifications whose step 0 never arrived, arrivals whose row
was not found, and steps dead on any channel (notifyd_steps_ended_total).

Every child is stopped and the scratch folder removed at the end (--keep keeps it), also on
errors; every wait is bounded. The machine is small and shared: the load average is printed.
"""

from __future__ import annotations

import argparse
import asyncio
import http.client
import itertools
import json
import math
import os
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any, TextIO

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import provider  # noqa: E402
from channels import (  # noqa: E402
    HOST,
    KEY_HEADER,
    ROOT,
    TEMPLATES,
    child_env,
    die_with_parent,
    free_port,
    orphan_watch,
    stop_proc,
    wait_listening,
)
from httpload import closed_loop, percentile, post  # noqa: E402
from receipts import STARTED, Daemon, loadavg, notifyd_cli, ro  # noqa: E402
from soak import (  # noqa: E402
    KIND,
    Phase,
    Sampler,
    due_unsent,
    memory_figures,
    process_cpu,
    start_clients,
    status_kb,
)

import notifyd  # noqa: E402
from notifyd.config import load_config  # noqa: E402
from notifyd.core.errors import ConfigError  # noqa: E402
from notifyd.store.sqlite.queries import COUNT_ROWS  # noqa: E402

USERS = 5000  # soak.accept_body posts to u{i % 5000}
RETENTION = {"history_sec": 300, "identity_sec": 600, "receipts_sec": 600, "inbox_read_sec": 600,
             "inbox_sec": 900, "interval_sec": 30}
ROW_CLASSES = ("notifications", "identities", "steps", "attempts")
DEAD_LINE = re.compile(r"step (dead|expired|rejected|suppressed)[^:]*: (n_\w+):(\d+) channel=(\S+)")

CONFIG = """
[store]
path = "{db}"
[templates]
folder = "{templates}"
[retention]
{retention}
[channels.hook]
type = "webhook"
url = "http://127.0.0.1:{hook}/hook"
timeout_sec = 10
rate_per_sec = 1000000.0
burst = 1000000
urgent_concurrency = {concurrency}
bulk_concurrency = {concurrency}
[channels.email]
type = "smtp"
host = "127.0.0.1"
port = {smtp}
tls = "none"
from_address = "Longrun <longrun@example.com>"
helo_name = "longrun.example.com"
timeout_sec = 10
rate_per_sec = {smtp_rate}
burst = {smtp_burst}
urgent_concurrency = {concurrency}
bulk_concurrency = {concurrency}
{max_attempts}
[kinds.{kind}]
ttl_sec = 3600
ladder = [ {{ channel = "hook", timeout_sec = 2 }}, {{ channel = "email", timeout_sec = 2 }},
           {{ channel = "hook" }} ]
"""


# --- the peers (--peer hook|smtp PORT DB OUT), each its own process ----------------------------

LOOKUP = """SELECT s.send_after, s.attempts,
    (SELECT max(a.started_at) FROM attempts a
     WHERE a.notification_id = s.notification_id AND a.step_no = s.step_no),
    n.resolved_at
FROM steps s JOIN notifications n ON n.id = s.notification_id
WHERE s.notification_id = ? AND s.step_no = ?"""


class Recorder:
    """Appends "arrival_ns key send_after attempts claimed_at resolved_at" per message ("-" for
    none), the step's fields read from the daemon's database while the step is in flight."""

    def __init__(self, db: Path, out: Path) -> None:
        self.db = db
        self.conn: sqlite3.Connection | None = None
        self.out: TextIO = out.open("a")

    def record(self, arrival_ns: int, key: str) -> None:
        nid, _, no = key.rpartition(":")
        row: list[Any] = ["-"] * 4
        if no.isdigit():
            try:
                if self.conn is None:
                    self.conn = ro(self.db)
                found = self.conn.execute(LOOKUP, (nid, int(no))).fetchall()  # all: no open read
                if found:
                    row = ["-" if v is None else v for v in found[0]]
            except sqlite3.Error:
                pass  # counted as an arrival whose row was not found
        self.out.write(f"{arrival_ns} {key} {' '.join(map(str, row))}\n")

    def close(self) -> None:
        self.out.close()


MESSAGE_IDS = itertools.count(1)  # the peer's message ids, one per call as a provider's


class HookPeer(provider.Provider):
    """benchmarks/provider.py's receiver; each call recorded with its step's row."""

    recorder: Recorder

    def answer(self, request_line: bytes, key: str, body: bytes,  # type: ignore[override]
               started: int) -> bytes:
        if request_line.partition(b" ")[2].startswith(b"/_"):
            return provider.Provider.answer(request_line, key, body, started)
        self.recorder.record(started, key)
        return provider.sent(next(MESSAGE_IDS))


async def start_peer(kind: str, port: int, rec: Recorder) -> Any:
    """Listen on `port`; an async function that stops listening and closes every session."""
    loop = asyncio.get_running_loop()
    if kind == "hook":
        HookPeer.recorder = rec
        server = await loop.create_server(HookPeer, HOST, port, backlog=1024)

        async def close_hook() -> None:
            server.close()
        return close_hook
    sys.path.insert(0, str(ROOT / "tests"))
    from aiosmtpd.smtp import SMTP, Envelope, Session
    from fake_smtp import FakeSmtp, _Session  # type: ignore[import-not-found]

    class Relay(FakeSmtp):  # type: ignore[misc]
        async def handle_DATA(self, server: SMTP, session: Session, envelope: Envelope) -> str:
            at = time.time_ns()
            m = KEY_HEADER.search(envelope.original_content or b"")
            rec.record(at, m.group(1).decode() if m else "?")
            answer: str = await super().handle_DATA(server, session, envelope)
            self.received.clear()  # the bytes are not needed: keep memory flat
            return answer

    fake = Relay()
    fake.server = await loop.create_server(
        lambda: _Session(fake, hostname="relay.test", loop=loop), HOST, port, backlog=1024)
    fake.port = port
    return fake.stop


def run_peer(kind: str, port: int, db: Path, out: Path) -> None:
    rec = Recorder(db, out)

    async def main() -> None:
        loop = asyncio.get_running_loop()
        stop = asyncio.Event()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        close = await start_peer(kind, port, rec)
        watch = asyncio.create_task(orphan_watch())
        watch.add_done_callback(lambda _: stop.set())
        await stop.wait()
        await close()

    try:
        asyncio.run(main())
    finally:
        rec.close()


class PeerProc:
    """A peer subprocess on a fixed port; stop() and start() again for an outage."""

    def __init__(self, kind: str, work: Path, db: Path) -> None:
        self.kind, self.work, self.db = kind, work, db
        self.port = free_port()
        self.out = work / f"{kind}.txt"
        self.proc: subprocess.Popen[bytes] | None = None
        self.start()

    def start(self) -> None:
        with (self.work / f"peer-{self.kind}.log").open("ab") as log:
            self.proc = subprocess.Popen(
                [sys.executable, str(Path(__file__).resolve()), "--peer", self.kind,
                 str(self.port), str(self.db), str(self.out)],
                stdout=log, stderr=log, cwd=ROOT, env=child_env(), preexec_fn=die_with_parent)
        STARTED.append(self.proc)
        wait_listening(self.proc, self.port, f"the {self.kind} peer")

    def stop(self) -> None:
        if self.proc is not None:
            stop_proc(self.proc, 15)


# --- set-up ------------------------------------------------------------------------------------


def scaled(key: str, scale: float) -> float:
    """A [retention] value times --retention-scale; windows are whole seconds."""
    sec = RETENTION[key] * scale
    return sec if key == "interval_sec" else max(1, round(sec))


def retention_lines(scale: float) -> str:
    return "\n".join(f"{key} = {scaled(key, scale)}" for key in RETENTION)


def config_text(args: argparse.Namespace, work: Path, hook: int, smtp: int, attempts: str) -> str:
    return CONFIG.format(db=work / "notifyd.db", templates=work / "templates",
                         retention=retention_lines(args.retention_scale), hook=hook, smtp=smtp,
                         concurrency=args.concurrency, smtp_rate=float(args.smtp_rate),
                         smtp_burst=max(1, int(args.smtp_rate)), max_attempts=attempts, kind=KIND)


def retry_setting(args: argparse.Namespace, work: Path) -> tuple[str, str]:
    """The email channel's max_attempts line, and why: none when this tree's default is already
    0 (no count limit), 0 when it accepts 0, else a count that outlasts the outage: the backoff
    ceiling doubles from 1 s to its 300 s cap in 10 attempts, then full jitter averages 150 s a
    wait; one attempt per 30 s of outage makes dying before the relay returns all but
    impossible (20 draws of U(0, 300) summing under 600 s: about 4e-13)."""
    probe, default = work / "probe.toml", "?"

    def loads(line: str) -> Any:
        probe.write_text(config_text(args, work, 1, 1, line))
        return load_config(probe).channels["email"].max_attempts

    try:
        default = loads("")
        if default == 0:
            return "", "max_attempts left out (this tree's default is 0: no count limit)"
        loads("max_attempts = 0")
        return "max_attempts = 0", "max_attempts = 0 (no count limit; this tree's default is " \
                                   f"{default})"
    except ConfigError:
        count = 10 + math.ceil(args.outage_minutes * 60 / 30)
        return f"max_attempts = {count}", (
            f"max_attempts = {count} (this tree refuses 0 and its default {default} would let "
            "emails die in the first seconds of the outage, before the breaker opens)")
    finally:
        probe.unlink(missing_ok=True)


def write_templates(folder: Path) -> None:
    for rel, text in TEMPLATES.items():  # benchmarks/channels.py's email templates, kind soak
        kind, _, rest = rel.partition("/")
        if kind == "mail":
            path = folder / KIND / rest
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)


def put_users(port: int, api_key: str) -> None:
    headers = {"Authorization": f"Bearer {api_key}"}

    def put(i: int) -> bytes:
        body = json.dumps({"email": f"user{i}@example.com"}).encode()
        return b"PUT" + post(f"/v1/users/u{i}", body, headers)[4:]

    _, results = asyncio.run(closed_loop(HOST, port, 16, USERS, put))
    bad = Counter(status for status, _ in results if status != 200)
    if bad:
        raise SystemExit(f"set-up: PUT /v1/users refused: {dict(bad)}")


# --- the run: slices, the outage, the drain ----------------------------------------------------


def db_bytes(db: Path) -> int:
    return sum(p.stat().st_size for p in (db, Path(f"{db}-wal")) if p.exists())


def row_counts(db: Path) -> dict[str, int]:
    conn = ro(db)
    try:
        return {r[0]: int(r[1]) for r in conn.execute(COUNT_ROWS).fetchall()}
    finally:
        conn.close()


def metrics(port: int) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    from prometheus_client.parser import text_string_to_metric_families

    conn = http.client.HTTPConnection(HOST, port, timeout=30)
    try:
        conn.request("GET", "/metrics")
        text = conn.getresponse().read().decode()
    finally:
        conn.close()
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for f in text_string_to_metric_families(text) for s in f.samples}


def metric_sum(m: dict[tuple[str, tuple[tuple[str, str], ...]], float], name: str, label: str,
               values: tuple[str, ...]) -> float:
    """The sum of a metric's samples whose `label` is one of `values`."""
    return sum(v for (n, labels), v in m.items() if n == name and dict(labels).get(label) in values)


def snapshot(t0: float, daemon: Daemon, db: Path) -> dict[str, Any]:
    return {"t": time.monotonic() - t0, "bytes": db_bytes(db), "rows": row_counts(db),
            "rss_kb": status_kb(daemon.pid, "VmRSS"), "cpu": process_cpu(daemon.pid),
            "failed": metric_sum(metrics(daemon.port), "notifyd_sends_total", "outcome",
                                 ("failed", "unknown"))}


class Run:
    """The schedule: slice snapshots, the relay's stop and start, the end of the accepts, the
    drain; bounded throughout."""

    def __init__(self, args: argparse.Namespace, daemon: Daemon, db: Path, smtp: PeerProc) -> None:
        self.args, self.daemon, self.db, self.smtp = args, daemon, db, smtp
        self.slices: list[dict[str, Any]] = []
        self.outage: list[float] = []  # seconds after t0: stopped, started again
        self.drained_s: float | None = None

    def go(self, accepts: Any) -> None:
        a = self.args
        self.t0, self.epoch0 = time.monotonic(), time.time()
        accepts.go()
        self.slices.append(snapshot(self.t0, self.daemon, self.db))
        load_end = a.minutes * 60
        down = a.outage_at * 60 if outage_on(a) else math.inf
        up = down + a.outage_minutes * 60
        limit = max(load_end, up if up < math.inf else 0) + a.drain_minutes * 60
        k = 1
        while (now := time.monotonic() - self.t0) < limit:
            if self.daemon.proc.poll() is not None:
                raise SystemExit(f"notifyd exited with {self.daemon.proc.returncode}; log "
                                 f"{self.daemon.log}")
            if now >= down and not self.outage:
                self.smtp.stop()
                self.outage.append(time.monotonic() - self.t0)
                print(f"  {now / 60:5.2f} min: SMTP relay stopped (connections refused)",
                      flush=True)
            if now >= up and len(self.outage) == 1:
                self.smtp.start()
                self.outage.append(time.monotonic() - self.t0)
                print(f"  {now / 60:5.2f} min: SMTP relay started again", flush=True)
            if now >= k * a.slice_minutes * 60:
                self.slices.append(snapshot(self.t0, self.daemon, self.db))
                progress(self.slices[-1])
                k += 1
            if now >= load_end and (len(self.outage) != 1) and accepts.answered():
                _, sending, open_ = due_unsent(self.db)
                if sending + open_ == 0:
                    self.drained_s = now
                    break
            time.sleep(0.5)
        self.slices.append(snapshot(self.t0, self.daemon, self.db))
        progress(self.slices[-1])


def progress(s: dict[str, Any]) -> None:
    rows = ", ".join(f"{k} {s['rows'].get(k, 0)}" for k in ROW_CLASSES)
    print(f"  {s['t'] / 60:5.2f} min: db {s['bytes'] / 2**20:.1f} MiB, RSS {s['rss_kb'] / 1024:.0f}"
          f" MiB, rows {rows}; load average {loadavg()}", flush=True)


# --- figures -----------------------------------------------------------------------------------


def load_arrivals(work: Path) -> tuple[sqlite3.Connection, dict[str, int]]:
    """Both peers' records in an in-memory table, first arrival per key, with the step's fields
    read at that arrival; and the sends after resolution over every arrival."""
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE TABLE arrivals (peer TEXT, nid TEXT, step_no INTEGER, first_ns INTEGER, "
                 "calls INTEGER, send_after INTEGER, attempts INTEGER, PRIMARY KEY (peer, nid, "
                 "step_no))")
    counts = {"after": 0, "tied": 0, "no key": 0}

    def rows(peer: str) -> Any:
        path = work / f"{peer}.txt"
        if not path.exists():
            return
        with path.open() as f:
            for line in f:
                ns, key, send_after, attempts, claimed, resolved = line.split()
                nid, _, no = key.rpartition(":")
                if not no.isdigit():
                    counts["no key"] += 1
                    continue
                if resolved != "-" and claimed != "-":
                    counts["after"] += int(claimed) > int(resolved)
                    counts["tied"] += int(claimed) == int(resolved)
                yield (peer, nid, int(no), int(ns), None if send_after == "-" else int(send_after),
                       None if attempts == "-" else int(attempts))

    for peer in ("hook", "smtp"):
        conn.executemany("INSERT INTO arrivals VALUES (?, ?, ?, ?, 1, ?, ?) ON CONFLICT DO "
                         "UPDATE SET calls = calls + 1", rows(peer))
    return conn, counts


def slice_of(t_sec: float, width: float, n: int) -> int | None:
    k = math.floor(t_sec / width)
    return k if 0 <= k < n else (n - 1 if k >= n else None)


def per_slice(conn: sqlite3.Connection, run: Run, accepts: dict[str, Any]) -> list[dict[str, Any]]:
    """For each slice between snapshots: due lag of the steps due in it, retries, accepts."""
    width = run.args.slice_minutes * 60
    n = len(run.slices) - 1
    out: list[dict[str, Any]] = [{"lag": [], "hook": [], "retried": 0, "acc": [], "bad": 0}
                                 for _ in range(n)]
    for peer, send_after, lag, attempts in conn.execute(
            "SELECT peer, send_after, first_ns / 1e6 - send_after, attempts FROM arrivals "
            "WHERE send_after IS NOT NULL"):
        k = slice_of(send_after / 1000 - run.epoch0, width, n)
        if k is None:
            continue
        out[k]["lag"].append(lag)
        if peer == "hook":
            out[k]["hook"].append(lag)
        out[k]["retried"] += attempts > 1
    rate = accepts["rate"]
    for i, st in enumerate(accepts["status"]):
        k = slice_of(i / rate, width, n)
        if k is None:
            continue
        if 200 <= st < 300:
            out[k]["acc"].append(accepts["answered"][i] - i / rate * 1000)
        else:
            out[k]["bad"] += 1
    return out


def p99(values: list[float]) -> str:
    return f"{percentile(values, 99):.0f}" if values else "-"


def print_table(run: Run, figs: list[dict[str, Any]]) -> list[tuple[str, float]]:
    """One row per slice; the (label, lag p99) of each."""
    a = run.args
    print(f"\nper slice of {a.slice_minutes:g} min (lag: steps due in the slice, ms; accept: "
          "requests due in it; failed: provider calls failed or unknown in it):")
    print(f"{'minute':>9} {'db MiB':>7} {'notif':>7} {'ident':>7} {'steps':>7} {'attempts':>8} "
          f"{'RSS MiB':>7} {'CPU':>5} {'due':>7} {'lag p99':>8} {'hook p99':>8} {'retried':>7} "
          f"{'acc p99':>7} {'non2xx':>6} {'failed':>6}")
    lags = []
    for k, f in enumerate(figs):
        s0, s = run.slices[k], run.slices[k + 1]
        wall = max(s["t"] - s0["t"], 1e-9)
        label = f"{s['t'] / 60:.1f}" + ("*" if s["t"] > a.minutes * 60 + 1 else "")
        print(f"{label:>9} {s['bytes'] / 2**20:7.1f} "
              + " ".join(f"{s['rows'].get(c, 0):{w}d}" for c, w in zip(ROW_CLASSES, (7, 7, 7, 8),
                                                                         strict=True))
              + f" {s['rss_kb'] / 1024:7.0f} {(s['cpu'] - s0['cpu']) / wall:5.0%} "
              f"{len(f['lag']):7d} {p99(f['lag']):>8} {p99(f['hook']):>8} {f['retried']:7d} "
              f"{p99(f['acc']):>7} {f['bad']:6d} {s['failed'] - s0['failed']:6.0f}")
        lags.append((label, percentile(f["lag"], 99) if f["lag"] else math.nan))
    print("  (* after the last accept: the drain)")
    return lags


def plateau(name: str, a: float, b: float, unit: str, pct: float) -> bool:
    change = (b - a) / a * 100 if a else math.inf
    ok = abs(change) <= pct
    print(f"{name}: {a:.1f} -> {b:.1f} {unit} over the last two slices of the load "
          f"({change:+.1f}%): " + ("plateaus" if ok else f"does NOT plateau (more than {pct:g}%)"))
    return ok


def plateau_verdicts(run: Run) -> None:
    loaded = [s for s in run.slices if s["t"] <= run.args.minutes * 60 + 1]
    if len(loaded) < 3:
        print("plateau: fewer than two slices of load; no verdict")
        return
    s0, s1 = loaded[-2], loaded[-1]
    plateau("database file (.db + -wal)", s0["bytes"] / 2**20, s1["bytes"] / 2**20, "MiB",
            run.args.plateau_pct)
    plateau("daemon RSS", s0["rss_kb"] / 1024, s1["rss_kb"] / 1024, "MiB", run.args.plateau_pct)


def outage_lines(conn: sqlite3.Connection, run: Run) -> str:
    """When the relay was down, and when the email backlog it left was gone."""
    if len(run.outage) < 2:
        return ""
    up_ms = (run.epoch0 + run.outage[1]) * 1000
    last = conn.execute("SELECT max(first_ns) / 1e6 FROM arrivals WHERE peer = 'smtp' AND "
                        "send_after < ?", (up_ms,)).fetchone()[0]
    cleared = f"{(last - up_ms) / 1000:.0f} s after" if last else "none was left"
    return (f"outage: the relay was down from {run.outage[0] / 60:.2f} to {run.outage[1] / 60:.2f}"
            f" min; the last email due before it returned arrived {cleared}")


def lag_verdict(lags: list[tuple[str, float]], target: float, outage: str) -> None:
    missed = [(label, v) for label, v in lags if v > target]
    if not missed:
        print(f"due lag p99 <= {target:.0f} ms in every slice: yes")
    else:
        print(f"due lag p99 <= {target:.0f} ms in every slice: NO, missed in "
              + ", ".join(f"minute {label} ({v:.0f} ms)" for label, v in missed))
    if outage:
        print(f"  {outage}")


def dead_steps(log: Path) -> Counter[tuple[str, str]]:
    """(channel, what) for every step the daemon logged as dead, expired, rejected or suppressed."""
    out: Counter[tuple[str, str]] = Counter()
    for line in log.read_text(errors="replace").splitlines():
        m = DEAD_LINE.search(line)
        if m:
            out[(m.group(4), m.group(1))] += 1
    return out


def correctness(conn: sqlite3.Connection, counts: dict[str, int], resolves: dict[str, Any],
                accepted: int, ended: dict[str, Any]) -> dict[str, int]:
    conn.execute("CREATE TABLE resolved (nid TEXT PRIMARY KEY)")
    conn.executemany("INSERT OR IGNORE INTO resolved VALUES (?)",
                     [(i,) for i, st in zip(resolves["id"], resolves["status"], strict=True)
                      if 200 <= st < 300])
    rep = dict(conn.execute("SELECT peer, count(*) FROM arrivals WHERE calls > 1 GROUP BY peer"))
    never = conn.execute(
        "SELECT count(*) FROM arrivals h WHERE h.peer = 'hook' AND h.step_no = 0 AND h.nid NOT IN "
        "(SELECT nid FROM resolved) AND NOT EXISTS (SELECT 1 FROM arrivals m WHERE m.peer = "
        "'smtp' AND m.nid = h.nid AND m.step_no = 1)").fetchone()[0]
    step0, unresolved = conn.execute(
        "SELECT count(*), count(*) - count(r.nid) FROM arrivals h LEFT JOIN resolved r ON r.nid = "
        "h.nid WHERE h.peer = 'hook' AND h.step_no = 0").fetchone()
    unmatched = conn.execute("SELECT count(*) FROM arrivals WHERE send_after IS NULL").fetchone()[0]
    dead = ended["dead"]
    out = {"sends after resolution": counts["after"],
           "repeated keys at the webhook receiver": rep.get("hook", 0),
           "repeated keys at the SMTP relay": rep.get("smtp", 0),
           "emails dead": sum(v for (ch, what), v in dead.items() if ch == "email"),
           "unresolved notifications whose email never arrived": never}
    print("correctness (each must be 0):")
    for name, v in out.items():
        print(f"  {name:<56} {v}")
    print(f"  (beside them: {counts['tied']} claims in the resolution's own ms, order unknown, not "
          f"counted; {accepted} accepts answered 2xx, {step0} step 0s at the receiver "
          f"({max(0, accepted - step0)} missing), {unresolved} of them unresolved; {unmatched} "
          f"arrivals whose row was not found; {counts['no key']} without a key; steps ended "
          + (", ".join(f"{ch} {what} {v}" for (ch, what), v in sorted(dead.items())) or
             "dead/expired/rejected: none")
          + f" (log); notifyd_steps_ended_total dead: {ended['metric']:.0f})")
    return out


# --- main ----------------------------------------------------------------------------------------


def outage_on(args: argparse.Namespace) -> bool:
    return bool(args.outage_at > 0 and args.outage_minutes > 0)


def header(args: argparse.Namespace, retry_why: str) -> None:
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, text=True,
                            capture_output=True, timeout=10).stdout.strip()
    scale = args.retention_scale
    print(f"machine: {os.cpu_count()} cores, load average {loadavg()} at start; python "
          f"{sys.version.split()[0]}, sqlite {sqlite3.sqlite_version}; notifyd "
          f"{notifyd.__version__} at {commit or '?'} ({notifyd.__file__})")
    outage = (f"SMTP relay down from minute {args.outage_at:g} for {args.outage_minutes:g} min"
              if outage_on(args) else "no outage")
    print(f"run: {args.rate:g} accepts/s for {args.minutes:g} min open loop, half resolved 1 s "
          f"after the 202; ladder webhook, email (SMTP), webhook, 2 s windows; {outage}; "
          f"retention x{scale:g} (history {scaled('history_sec', scale):g} s, identities "
          f"{scaled('identity_sec', scale):g} s, a pass every {scaled('interval_sec', scale):g} s); "
          "drain up to "
          f"{args.drain_minutes:g} min")
    print(f"email retries: {retry_why}")


def report(args: argparse.Namespace, work: Path, run: Run, ph: Phase,
           ended: dict[str, Any]) -> bool:
    conn, counts = load_arrivals(work)
    try:
        figs = per_slice(conn, run, ph.accepts)
        lags = print_table(run, figs)
        print()
        memory_figures(ph)
        drain = (f"{run.drained_s / 60 - args.minutes:.2f} min after the last accept"
                 if run.drained_s is not None else "NOT within the drain limit")
        print(f"drained (no step open): {drain}")
        plateau_verdicts(run)
        lag_verdict(lags, args.lag_target, outage_lines(conn, run))
        accepted = sum(1 for s in ph.accepts["status"] if 200 <= s < 300)
        out = correctness(conn, counts, ph.resolves, accepted, ended)
    finally:
        conn.close()
    return not any(out.values())


def run(args: argparse.Namespace, work: Path) -> bool:
    db, cfg = work / "notifyd.db", work / "notifyd.toml"
    write_templates(work / "templates")
    attempts, why = retry_setting(args, work)
    header(args, why)
    hook, smtp = PeerProc("hook", work, db), PeerProc("smtp", work, db)
    cfg.write_text(config_text(args, work, hook.port, smtp.port, attempts))
    api_key = notifyd_cli(cfg, "keys", "create", "--name", "longrun").split()[0]
    daemon = Daemon(cfg, work)
    ph = Phase()
    try:
        put_users(daemon.port, api_key)
        spec = argparse.Namespace(rate=args.rate, seconds=args.minutes * 60)
        accepts, resolver = start_clients(spec, work, daemon.port, api_key)
        r = Run(args, daemon, db, smtp)
        sampler = Sampler(daemon.pid, db, time.monotonic())
        sampler.start()
        r.go(accepts)
        sampler.done.set()
        sampler.join(10)
        ph.samples, ph.hwm_kb = sampler.samples, status_kb(daemon.pid, "VmHWM")
        ph.accepts, ph.resolves = accepts.result(120), resolver.result(120)
        ended: dict[str, Any] = {"metric": metric_sum(
            metrics(daemon.port), "notifyd_steps_ended_total", "state", ("dead",))}
    finally:
        warnings = daemon.stop()
        hook.stop()
        smtp.stop()
    if warnings:
        print(f"  daemon logged {len(warnings)} warning/error line(s), e.g. {warnings[0][:160]}")
    ended["dead"] = dead_steps(daemon.log)
    return report(args, work, r, ph, ended)


def parse_args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--rate", type=float, default=200.0, help="accepts per second (200)")
    ap.add_argument("--minutes", type=float, default=30.0, help="minutes of accepts (30)")
    ap.add_argument("--slice-minutes", type=float, default=5.0, help="one row per slice (5)")
    ap.add_argument("--outage-at", type=float, default=10.0,
                    help="minute the relay stops (10; 0: no outage)")
    ap.add_argument("--outage-minutes", type=float, default=10.0,
                    help="minutes it stays down (10; 0: no outage)")
    ap.add_argument("--retention-scale", type=float, default=1.0,
                    help="times the retention windows and interval (1: history 300 s, ...)")
    ap.add_argument("--drain-minutes", type=float, default=10.0,
                    help="most minutes to wait after the last accept for no step to be open (10)")
    ap.add_argument("--plateau-pct", type=float, default=10.0,
                    help="the last two slices within this %% count as a plateau (10)")
    ap.add_argument("--lag-target", type=float, default=100.0, help="due lag p99 target, ms")
    ap.add_argument("--concurrency", type=int, default=64, help="sends in flight per lane (64)")
    ap.add_argument("--smtp-rate", type=float, default=1000.0,
                    help="the email channel's rate_per_sec and burst (1000)")
    ap.add_argument("--keep", action="store_true", help="keep the scratch folder")
    ap.add_argument("--peer", nargs=4, metavar=("KIND", "PORT", "DB", "OUT"), help=argparse.SUPPRESS)
    return ap.parse_args()


def main() -> None:
    args = parse_args()
    if args.peer:
        kind, port, db, out = args.peer
        run_peer(kind, int(port), Path(db), Path(out))
        return
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # so the finally below runs
    work = Path(tempfile.mkdtemp(prefix="notifyd-longrun-"))
    started = time.monotonic()
    ok = False
    try:
        ok = run(args, work)
    finally:
        for proc in reversed(STARTED):
            stop_proc(proc, 15)
        if args.keep:
            print(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
        print(f"took {time.monotonic() - started:.0f} s; load average {loadavg()}")
    if not ok:
        sys.exit(1)


if __name__ == "__main__":
    main()
