"""Delivery figures: steps/s end to end, due lag at a steady rate with peak RSS, and due-scan time
with millions of finished steps in the table against an empty one.

Run:   .venv/bin/python benchmarks/ladder.py
Quick: .venv/bin/python benchmarks/ladder.py --n 2000 --seconds 3 --history 200000
Parts: --only throughput,lag,scan (default all three).

The real daemon runs as a subprocess (`python -m notifyd --config CFG --db DB serve --port P`)
with one webhook channel pointing at benchmarks/provider.py, a second subprocess that answers 200
at once and records, for each call, the wall-clock arrival of its first byte and its
Idempotency-Key ({notification_id}:{step_no}). The channel's token bucket is set out of the way
(rate_per_sec 1e6, burst 1e6) and both lanes get --concurrency slots (default 64), so neither is
what limits a figure. The kind has a one-step ladder due at accept.

1. Throughput: --n notifications are written through the store's own accept path before the
   daemon starts, all due at once; steps/s = n / (last provider arrival - first). Every step must
   end 'sent' and every key reach the provider. The default n (60,000, some 20 s of sending) is
   long enough for per-call work that grows with the run to show: the rates of the first and
   last quarter of the calls are printed too.
2. Due lag = provider arrival - the step's send_after (epoch ms from the DB; one wall clock).
   accept:  notifications POSTed to the daemon at a steady --rate for --seconds (after 1 s of
            warm-up), each due at accept, so the lag includes the accept commit and the wake-up.
   preload: --rate x --seconds steps written from outside while the daemon idles, due --rate
            per second from a few seconds out, so the lag is the scanner's own timing.
   Each prints p50/p99/max, the daemon's peak RSS (VmHWM) and its CPU per step while measured,
   split into the event-loop thread and the store's threads.
3. Scan: two databases with the same --pending due steps (and as many due in an hour), one
   also holding --history finished steps (sent, cancelled, dead, expired, with frozen
   payloads); the due query, the next-due and lapsed-lease queries and the whole
   CoreStore.claim_due path (the claim alone: rendering and freezing follow it in the sender) are
   timed on both, with EXPLAIN QUERY PLAN on the big one.

A summary against the targets ends the output. Loopback only; temporary files (about
2 GiB for the 5M-step database) are removed at the end unless --keep. Another busy process on
the machine moves the figures: the header prints the load average.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import http.client
import json
import os
import shutil
import signal
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))
from httpload import open_loop, percentile, post  # noqa: E402

from notifyd.config import (  # noqa: E402
    Config,
    load_config,
)
from notifyd.core.clock import FakeClock, SystemClock  # noqa: E402
from notifyd.core.models import ApiKey, Lane, PlanFn, Route, Want, new_id  # noqa: E402
from notifyd.domain import policy  # noqa: E402
from notifyd.engine.ingest import Ingest  # noqa: E402
from notifyd.store import open_store  # noqa: E402
from notifyd.store.core.store import CoreStore  # noqa: E402
from notifyd.store.sqlite.migrate import migrate  # noqa: E402
from notifyd.store.sqlite.queries import (  # noqa: E402
    SELECT_DUE,
    SELECT_LAPSED,
    SELECT_NEXT_DUE,
)

CONFIG = """
[store]
synchronous = "{sync}"
[scanner]
claim_batch = {batch}
[channels.hook]
type = "webhook"
url = "http://127.0.0.1:{provider}/hook"
timeout_sec = 10
rate_per_sec = 1000000.0
burst = 1000000
urgent_concurrency = {conc}
bulk_concurrency = {conc}
[kinds.bench]
ttl_sec = 3600
ladder = [ {{ channel = "hook" }} ]
"""
HOST = "127.0.0.1"
LANE = Lane.BULK  # the bench kind is urgency normal
STARTED: list[subprocess.Popen[bytes]] = []  # every child, stopped at exit whatever happened


# --- processes -------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


def wait_listening(proc: subprocess.Popen[bytes], port: int, what: str) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"{what} exited with {proc.returncode} before listening")
        try:
            socket.create_connection((HOST, port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.02)
    proc.kill()
    raise SystemExit(f"{what} did not listen on {port} within 30 s")


def stop_proc(proc: subprocess.Popen[bytes], grace: float = 30) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(grace)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def proc_status(pid: int, field: str) -> int:
    """A kB figure from /proc/PID/status, e.g. VmHWM (peak resident set)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return 0


def thread_cpu(pid: int) -> tuple[float, float]:
    """CPU seconds (user + system) of the process's main thread (the event loop) and of all
    its other threads (the store's writer, the aiosqlite reader) together."""
    main = rest = 0.0
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            stat = Path(f"/proc/{pid}/task/{tid}/stat").read_text()
        except OSError:  # the thread ended between listing and reading
            continue
        fields = stat.rsplit(")", 1)[1].split()
        secs = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        if int(tid) == pid:
            main += secs
        else:
            rest += secs
    return main, rest


class Provider:
    def __init__(self) -> None:
        self.port = free_port()
        self.proc = subprocess.Popen([sys.executable, str(HERE / "provider.py"), str(self.port)])
        STARTED.append(self.proc)
        wait_listening(self.proc, self.port, "provider")

    def call(self, method: str, path: str, body: str = "") -> str:
        conn = http.client.HTTPConnection(HOST, self.port, timeout=60)
        try:
            conn.request(method, path, body=body.encode())
            return conn.getresponse().read().decode()
        finally:
            conn.close()

    def count(self) -> int:
        return int(self.call("GET", "/_count"))

    def reset(self) -> None:
        self.call("POST", "/_reset")

    def dump(self, path: Path) -> list[tuple[int, str]]:
        self.call("POST", "/_dump", str(path))
        out = []
        for line in path.read_text().splitlines():
            ns, key = line.split(" ", 1)
            out.append((int(ns), key))
        return out

    def wait_for(self, expected: int, timeout: float) -> int:
        """Poll until `expected` calls arrived or `timeout` seconds pass; the count reached."""
        deadline = time.monotonic() + timeout
        seen = self.count()
        while seen < expected and time.monotonic() < deadline:
            time.sleep(0.05)
            seen = self.count()
        return seen


class Daemon:
    def __init__(self, cfg: Path, db: Path, log: Path) -> None:
        self.port = free_port()
        self.log = log
        with log.open("ab") as err:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "notifyd", "--config", str(cfg), "--db", str(db),
                 "serve", "--port", str(self.port)],
                stdout=subprocess.DEVNULL, stderr=err, cwd=HERE.parent)
        STARTED.append(self.proc)
        wait_listening(self.proc, self.port, "notifyd")
        self.pid = self.proc.pid

    def peak_rss_mib(self) -> float:
        return proc_status(self.pid, "VmHWM") / 1024

    def cpu(self) -> tuple[float, float]:
        return thread_cpu(self.pid)

    def stop(self) -> list[str]:
        """SIGTERM, wait for the clean exit; the log's warning and error lines."""
        stop_proc(self.proc)
        if self.proc.returncode != 0:
            print(f"  ! notifyd exited with {self.proc.returncode}; log {self.log}")
        return [ln for ln in self.log.read_text().splitlines()
                if " WARNING " in ln or " ERROR " in ln]


# --- shared pieces ---------------------------------------------------------------------------


def write_config(path: Path, args: argparse.Namespace, provider_port: int) -> None:
    path.write_text(CONFIG.format(sync=args.synchronous, batch=args.claim_batch,
                                  provider=provider_port, conc=args.concurrency))


def loaded_config(cfg_path: Path, db: Path) -> Config:
    cfg = load_config(cfg_path)
    return dataclasses.replace(cfg, store=dataclasses.replace(cfg.store, url=str(db)))


def body(i: int, key: str) -> bytes:
    return json.dumps({"user_id": f"u{i % 5000}", "kind": "bench",
                       "params": {"amount": "12.00", "invoice": i}, "dedup_key": key}).encode()


def planned_at(plan: PlanFn, at: int) -> PlanFn:
    """`plan`, as if the accept ran at `at` rather than at its transaction's time."""
    return lambda recipient, _: plan(recipient, at)


async def preload(cfg: Config, count: int, tag: str, due_at: Callable[[int], int] | None) -> None:
    """Write `count` notifications through the store's own accept path (the rows the daemon
    writes), each planned as if accepted at `due_at(i)`, or at once."""
    clock = SystemClock()
    store = await open_store(cfg.store.url, clock, sqlite=cfg.store.sqlite)
    ingest = Ingest(cfg, store, clock)
    key = ApiKey("bench", "default", (), "-")
    try:
        for lo in range(0, count, 512):
            jobs = []
            for i in range(lo, min(count, lo + 512)):
                inp = ingest.parse(body(i, f"{tag}-{i}"), key, None)
                plan = ingest.planner(inp)
                if due_at is not None:  # planned then, not at this transaction's time
                    plan = planned_at(plan, due_at(i))
                jobs.append(store.accept(inp, new_id("n_", clock.now_ms()), plan,
                                         ingest.ttl_sec(inp)))
            await asyncio.gather(*jobs)
    finally:
        await store.close()


def step_states(db: Path) -> dict[str, int]:
    with sqlite3.connect(db) as conn:
        return dict(conn.execute("SELECT state, count(*) FROM steps GROUP BY state").fetchall())


def send_after_by_key(db: Path, prefix: str) -> dict[str, int]:
    with sqlite3.connect(db) as conn:
        rows = conn.execute(
            "SELECT s.notification_id || ':' || s.step_no, s.send_after FROM steps s "
            "JOIN notifications n ON n.id = s.notification_id WHERE n.dedup_key LIKE ?",
            (prefix + "%",)).fetchall()
    return dict(rows)


def first_arrivals(records: list[tuple[int, str]]) -> tuple[dict[str, int], int]:
    """Each key's first arrival (ns) and how many calls repeated a key already seen."""
    first: dict[str, int] = {}
    repeats = 0
    for ns, key in records:
        if key in first:
            repeats += 1
            first[key] = min(first[key], ns)
        else:
            first[key] = ns
    return first, repeats


def states_line(states: dict[str, int]) -> str:
    return ", ".join(f"{k} {v}" for k, v in sorted(states.items()))


def cpu_line(before: tuple[float, float], after: tuple[float, float], steps: int) -> str:
    loop, rest = ((b - a) / max(steps, 1) * 1e6 for a, b in zip(before, after, strict=True))
    return f"{loop + rest:.0f} us per step (event loop {loop:.0f}, store threads {rest:.0f})"


def print_warnings(lines: list[str]) -> None:
    if lines:
        print(f"  ! daemon logged {len(lines)} warning/error line(s), e.g. {lines[0][:160]}")


# --- 1. throughput ---------------------------------------------------------------------------


def throughput(args: argparse.Namespace, prov: Provider, tmp: Path) -> dict[str, float]:
    work = tmp / "throughput"
    work.mkdir()
    cfg_path, db = work / "bench.toml", work / "bench.db"
    write_config(cfg_path, args, prov.port)
    n = args.n
    t = time.perf_counter()
    asyncio.run(preload(loaded_config(cfg_path, db), n, "tp", None))
    loaded = time.perf_counter() - t
    prov.reset()
    started = time.time_ns()
    daemon = Daemon(cfg_path, db, work / "daemon.log")
    cpu0 = daemon.cpu()
    seen = prov.wait_for(n, 60 + n / 200)
    cpu = daemon.cpu()
    rss = daemon.peak_rss_mib()
    records = prov.dump(work / "calls.txt")
    warnings = daemon.stop()
    states = step_states(db)
    first, repeats = first_arrivals(records)
    times = sorted(first.values())
    if len(times) < 2:
        raise SystemExit(f"throughput: the provider saw {len(times)} of {n} calls; log "
                         f"{work / 'daemon.log'}")
    span = (times[-1] - times[0]) / 1e9
    ok = states == {"sent": n} and len(first) == n
    print(f"throughput: {n} notifications, one step each, all due before the daemon starts "
          f"(pre-loaded in {loaded:.1f} s)")
    print(f"  steps/s sent end to end:   {n / span:8.0f}   (first to last provider call, "
          f"{span:.2f} s; target >= 2,000)")
    quarter = len(times) // 4
    if quarter > 1:
        head = (quarter - 1) / ((times[quarter - 1] - times[0]) / 1e9)
        tail = (quarter - 1) / ((times[-1] - times[-quarter]) / 1e9)
        print(f"  first / last quarter:      {head:8.0f} / {tail:.0f}   (a falling rate is work "
              "that grows with the run)")
    print(f"  from daemon start:         {n / ((times[-1] - started) / 1e9):8.0f}   "
          f"(spawn + open + scan + send)")
    print(f"  daemon CPU {cpu_line(cpu0, cpu, seen)}; peak RSS {rss:.0f} MiB")
    print(f"  provider saw {len(first)} distinct keys in {len(records)} calls ({repeats} "
          f"repeated); steps: {states_line(states)}  {'OK' if ok else 'MISMATCH'}")
    print_warnings(warnings)
    return {"steps/s": n / span, "ok": float(ok)}


# --- 2. due lag ------------------------------------------------------------------------------


def lag_report(label: str, db: Path, records: list[tuple[int, str]], prefix: str,
               expected: int, rss: float, cpu: str, extra: str) -> dict[str, float]:
    due = send_after_by_key(db, prefix)
    first, repeats = first_arrivals(records)
    lags = [first[k] / 1e6 - sa for k, sa in due.items() if k in first]
    missing = sum(1 for k in due if k not in first)
    ours = sorted(first[k] for k in due if k in first)
    rate = (len(ours) - 1) / ((ours[-1] - ours[0]) / 1e9) if len(ours) > 1 else float("nan")
    print(f"due lag, {label}: {len(lags)} of {expected} steps at {rate:.0f} steps/s at the "
          f"provider{extra}")
    if lags:
        print(f"  lag p50 {percentile(lags, 50):7.1f} ms   p99 {percentile(lags, 99):7.1f} ms   "
              f"max {max(lags):7.1f} ms   min {min(lags):6.1f} ms   (targets p50 <= 20, "
              f"p99 <= 100)")
    print(f"  daemon peak RSS (VmHWM) {rss:.0f} MiB; {missing} never reached the provider, "
          f"{repeats} repeated calls")
    print(f"  daemon CPU while measured: {cpu}")
    if not lags:
        return {"p50": float("nan"), "p99": float("nan"), "rss": rss, "ok": 0.0}
    return {"p50": percentile(lags, 50), "p99": percentile(lags, 99), "rss": rss,
            "ok": float(not missing and len(lags) == expected)}


async def drive(port: int, headers: dict[str, str], rate: float, seconds: float,
                mark: Callable[[], None]) -> tuple[list[float], float]:
    def make(tag: str) -> Callable[[int], bytes]:
        return lambda i: post("/v1/notifications", body(i, f"{tag}-{i}"), headers)

    await open_loop(HOST, port, rate, 1.0, make("warm"))
    mark()
    t = time.perf_counter()
    latencies = await open_loop(HOST, port, rate, seconds, make("lag"))
    return latencies, len(latencies) / (time.perf_counter() - t)


def lag_accept(args: argparse.Namespace, prov: Provider, tmp: Path) -> dict[str, float]:
    work = tmp / "lag-accept"
    work.mkdir()
    cfg_path, db = work / "bench.toml", work / "bench.db"
    write_config(cfg_path, args, prov.port)
    key = subprocess.run([sys.executable, "-m", "notifyd", "--config", str(cfg_path), "--db",
                          str(db), "keys", "create", "--name", "bench"], cwd=HERE.parent,
                         check=True, capture_output=True, text=True).stdout.strip()
    prov.reset()
    daemon = Daemon(cfg_path, db, work / "daemon.log")
    cpu0 = [daemon.cpu()]
    latencies, offered = asyncio.run(drive(daemon.port, {"Authorization": f"Bearer {key}"},
                                           args.rate, args.seconds,
                                           lambda: cpu0.append(daemon.cpu())))
    total = int(args.rate) + len(latencies)  # warm-up second + measured
    prov.wait_for(total, 30 + total / 200)
    cpu = cpu_line(cpu0[-1], daemon.cpu(), len(latencies))
    rss = daemon.peak_rss_mib()
    records = prov.dump(work / "calls.txt")
    warnings = daemon.stop()
    out = lag_report("accept-driven", db, records, "lag-", len(latencies), rss, cpu,
               f"; POSTed at {offered:.0f}/s, accept p50 {percentile(latencies, 50):.1f} ms "
               f"p99 {percentile(latencies, 99):.1f} ms")
    states = step_states(db)
    print(f"  steps: {states_line(states)}  {'OK' if set(states) == {'sent'} else 'MISMATCH'}")
    print_warnings(warnings)
    out["ok"] = float(out["ok"] and set(states) == {"sent"})
    return out


def lag_preload(args: argparse.Namespace, prov: Provider, tmp: Path) -> dict[str, float]:
    work = tmp / "lag-preload"
    work.mkdir()
    cfg_path, db = work / "bench.toml", work / "bench.db"
    write_config(cfg_path, args, prov.port)
    count = int(args.rate * args.seconds)
    prov.reset()
    daemon = Daemon(cfg_path, db, work / "daemon.log")
    # Written from this process while the daemon idles: it learns of them by its poll and
    # then sleeps until each next send_after, as with steps planned long ago.
    start_at = SystemClock().now_ms() + 3000 + count // 2
    t = time.perf_counter()
    asyncio.run(preload(loaded_config(cfg_path, db), count, "lag",
                        lambda i: start_at + int(i * 1000 / args.rate)))
    loaded = time.perf_counter() - t
    early = start_at - SystemClock().now_ms()
    if early < 1000:
        print(f"  ! pre-load ended only {early} ms before the first step was due")
    time.sleep(max(0.0, early / 1000))
    cpu0 = daemon.cpu()
    prov.wait_for(count, args.seconds + 30)
    cpu = cpu_line(cpu0, daemon.cpu(), count)
    rss = daemon.peak_rss_mib()
    records = prov.dump(work / "calls.txt")
    warnings = daemon.stop()
    out = lag_report("pre-loaded", db, records, "lag-", count, rss, cpu,
               f"; {count} written in {loaded:.1f} s, due "
               f"{args.rate:.0f}/s")
    states = step_states(db)
    print(f"  steps: {states_line(states)}  {'OK' if set(states) == {'sent'} else 'MISMATCH'}")
    print_warnings(warnings)
    out["ok"] = float(out["ok"] and set(states) == {"sent"})
    return out


# --- 3. due scan with history ----------------------------------------------------------------

HISTORY_NOTIFICATIONS = """
INSERT INTO notifications (id, tenant, user_id, kind, dedup_key, request_hash, params, key_name,
    created_at, expires_at, resolved_at, resolution, resolved_by)
WITH RECURSIVE c(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM c WHERE i + 1 < :count)
SELECT printf('n_h%016d', i), 'default', 'u' || (i % 50000), 'bench', 'h-' || i, :hash,
    '{"amount":"12.00","invoice":' || i || '}', 'bench', :t0 + i * :gap,
    :t0 + i * :gap + 86400000,
    CASE WHEN i % 10 < 6 THEN :t0 + i * :gap + 30000 END,
    CASE WHEN i % 10 < 6 THEN 'confirmed' END,
    CASE WHEN i % 10 < 6 THEN 'key:bench' END
FROM c
"""
# Steps in primary-key order (CROSS JOIN keeps c outermost). i % 10: 0-5 resolved after step 0
# (later steps cancelled), 6-7 all sent, 8 step 0 dead, 9 later steps expired.
HISTORY_STEPS = """
INSERT INTO steps (notification_id, step_no, channel, lane, send_after, state, attempts, reason,
    provider_ref, destination, payload, updated_at)
WITH RECURSIVE c(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM c WHERE i + 1 < :count),
    k(no) AS (SELECT 0 UNION ALL SELECT no + 1 FROM k WHERE no + 1 < :per),
    s AS (SELECT i, no, CASE
        WHEN no = 0 AND i % 10 = 8 THEN 'dead'
        WHEN no = 0 THEN 'sent'
        WHEN i % 10 < 6 THEN 'cancelled'
        WHEN i % 10 = 9 THEN 'expired'
        ELSE 'sent' END AS state FROM c CROSS JOIN k)
SELECT printf('n_h%016d', i), no, 'hook', 'bulk', :t0 + i * :gap + no * 60000, state,
    CASE state WHEN 'sent' THEN 1 WHEN 'dead' THEN 5 ELSE 0 END,
    CASE state WHEN 'dead' THEN 'retry budget spent after 5 attempt(s); last: HTTP 503'
        WHEN 'cancelled' THEN 'resolved: confirmed'
        WHEN 'expired' THEN 'time to live passed before it could be sent' END,
    CASE state WHEN 'sent' THEN 'prov-' || i END,
    CASE WHEN state IN ('sent', 'dead') THEN :url END,
    CASE WHEN state IN ('sent', 'dead') THEN printf('{"channel": "hook", "created_at": '
        || '"2026-05-01T10:00:00.000+00:00", "expires_at": "2026-05-02T10:00:00.000+00:00", '
        || '"kind": "bench", "notification_id": "n_h%016d", "params": {"amount": "12.00", '
        || '"invoice": %d}, "step_no": %d, "user_id": "u%d"}', i, i, no, i % 50000) END,
    :t0 + i * :gap + no * 60000 + 100
FROM s
"""
PENDING_NOTIFICATIONS = """
INSERT INTO notifications (id, tenant, user_id, kind, dedup_key, request_hash, params, key_name,
    created_at, expires_at)
WITH RECURSIVE c(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM c WHERE i + 1 < :count)
SELECT printf('n_p%016d', i), 'default', 'p' || (i % 5000), 'bench', 'p-' || i, :hash,
    '{"amount":"12.00","invoice":' || i || '}', 'bench', :now - 60000, :now + 3600000
FROM c
"""
# Half due within the last minute, half due in an hour (the index must skip those cheaply).
PENDING_STEPS = """
INSERT INTO steps (notification_id, step_no, channel, lane, send_after, state, updated_at)
WITH RECURSIVE c(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM c WHERE i + 1 < :count)
SELECT printf('n_p%016d', i), 0, 'hook', 'bulk',
    CASE WHEN i % 2 = 0 THEN :now - 60000 + i % 50000 ELSE :now + 3600000 + i END,
    'pending', :now - 60000
FROM c
"""
RESET_PENDING = """UPDATE steps SET state = 'pending', attempts = 0, claim_token = NULL,
    lease_until = NULL, destination = NULL, payload = NULL, reason = NULL
WHERE notification_id >= 'n_p' AND notification_id < 'n_q'"""
DELETE_PENDING_ATTEMPTS = "DELETE FROM attempts WHERE notification_id >= 'n_p' " \
                          "AND notification_id < 'n_q'"


def build_db(path: Path, history: int, per: int, pending: int, now: int, url: str) -> float:
    """A migrated database with `history` finished steps and the pending set; seconds taken."""
    t = time.perf_counter()
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute("PRAGMA journal_mode = OFF")  # a throwaway build: no journal, no fsync
        conn.execute("PRAGMA synchronous = OFF")
        conn.execute("PRAGMA cache_size = -262144")
        migrate(conn)
        req_hash = "5f" * 32
        notes = -(-history // per)
        conn.execute("BEGIN")
        if notes:
            span = 30 * 86400 * 1000
            params = {"count": notes, "hash": req_hash, "t0": now - span - 86400000,
                      "gap": max(1, span // notes), "per": per, "url": url}
            conn.execute(HISTORY_NOTIFICATIONS, params)
            conn.execute(HISTORY_STEPS, params)
        conn.execute(PENDING_NOTIFICATIONS, {"count": pending, "hash": req_hash, "now": now})
        conn.execute(PENDING_STEPS, {"count": pending, "now": now})
        conn.execute("COMMIT")
        conn.execute("PRAGMA journal_mode = WAL")
    finally:
        conn.close()
    return time.perf_counter() - t


def timed(conn: sqlite3.Connection, sql: str, args: tuple[Any, ...], reps: int) -> list[float]:
    """Microseconds per execution (fetching every row), after a warm-up."""
    for _ in range(min(50, reps)):
        conn.execute(sql, args).fetchall()
    out = []
    for _ in range(reps):
        t = time.perf_counter()
        conn.execute(sql, args).fetchall()
        out.append((time.perf_counter() - t) * 1e6)
    return out


def query_plan(conn: sqlite3.Connection, sql: str, args: tuple[Any, ...]) -> str:
    rows = conn.execute("EXPLAIN QUERY PLAN " + sql, args).fetchall()
    return "; ".join(r[3] for r in rows)


async def time_claims(db: Path, cfg: Config, now: int, batch: int, rounds: int,
                      reps: int) -> dict[str, list[float]]:
    """CoreStore.claim_due as the scanner calls it: every due pending step claimed in batches
    (us per claimed step, rows reset between rounds, untimed), then a claim with nothing due
    (us per call: the idle scan)."""
    store = await open_store(str(db), FakeClock(now), sqlite=cfg.store.sqlite)
    assert isinstance(store, CoreStore)
    rules = policy.rules(cfg.catalog)

    per_step: list[float] = []
    per_call: list[float] = []
    idle: list[float] = []
    try:
        for _ in range(rounds):
            await store.backend.write(lambda tx: (tx.run(RESET_PENDING), tx.run(
                DELETE_PENDING_ATTEMPTS)))
            for _ in range(10_000):  # bounded; ends when nothing due is left
                t = time.perf_counter()
                claims = (await store.claim_due([Want("hook", LANE, batch)], 60_000,
                                                rules)).claims
                dt = (time.perf_counter() - t) * 1e6
                if not claims:
                    break
                per_call.append(dt)
                per_step.append(dt / len(claims))
        for _ in range(reps):
            t = time.perf_counter()
            claims = (await store.claim_due([Want("hook", LANE, batch)], 60_000, rules)).claims
            idle.append((time.perf_counter() - t) * 1e6)
            assert not claims
        due_times = []
        for _ in range(reps):
            t = time.perf_counter()
            await store.due_times([Route("hook", Lane.URGENT), Route("hook", LANE)], 1000)
            due_times.append((time.perf_counter() - t) * 1e6)
    finally:
        await store.close()
    return {"claim_step": per_step, "claim_call": per_call, "idle": idle, "due_times": due_times}


def scan(args: argparse.Namespace, tmp: Path) -> dict[str, float]:
    work = tmp / "scan"
    work.mkdir()
    cfg_path = work / "bench.toml"
    write_config(cfg_path, args, 9)  # the URL is only frozen into payloads, never called
    now = SystemClock().now_ms()
    url = f"http://{HOST}:9/hook"
    dbs = {"empty": work / "empty.db", "big": work / "big.db"}
    built = {name: build_db(path, args.history if name == "big" else 0, args.steps_per,
                            args.pending, now, url) for name, path in dbs.items()}
    size = sum(p.stat().st_size for p in work.glob("big.db*")) / 2**20
    print(f"due scan: {args.history:,} finished steps ({args.steps_per} per notification, "
          f"frozen payloads) built in {built['big']:.1f} s, {size:,.0f} MiB; both databases hold "
          f"{args.pending} pending steps, half due")
    due_args = ("hook", LANE, now, args.claim_batch + 16)
    queries = [("SELECT_DUE (bulk, due)", SELECT_DUE, due_args),
               ("SELECT_DUE (urgent, none)", SELECT_DUE, ("hook", "urgent", now, 272)),
               ("SELECT_NEXT_DUE", SELECT_NEXT_DUE, ("hook", LANE)),
               ("SELECT_LAPSED", SELECT_LAPSED, (now,))]
    results: dict[str, dict[str, list[float]]] = {}
    for name, path in dbs.items():
        conn = sqlite3.connect(path)
        with conn:
            with sqlite3.connect(path) as check:
                counts = dict(check.execute("SELECT state, count(*) FROM steps GROUP BY state")
                              .fetchall())
            if name == "big":
                print(f"  big table: {states_line(counts)}")
                for qname, sql, qargs in queries:
                    print(f"  plan {qname:26s} {query_plan(conn, sql, qargs)}")
            results[name] = {q: timed(conn, sql, qargs, args.reps) for q, sql, qargs in queries}
        conn.close()
        results[name].update(asyncio.run(time_claims(
            path, loaded_config(cfg_path, path), now, args.claim_batch, args.rounds,
            args.reps // 10)))
    print(f"  {'':34s} {'empty table':>12s} {'with history':>13s} {'ratio':>6s}   "
          f"(medians, us; target ratio <= 2)")
    rows = [(q, q) for q, _, _ in queries] + [
        (f"claim_due, per claimed step (x{args.claim_batch})", "claim_step"),
        (f"claim_due, per call of {args.claim_batch}", "claim_call"),
        ("claim_due, nothing due (idle scan)", "idle"),
        ("store.due_times (the scanner's sweep)", "due_times")]
    ratios = {}
    for label, key in rows:
        a = statistics.median(results["empty"][key])
        b = statistics.median(results["big"][key])
        ratios[key] = b / a
        print(f"  {label:34s} {a:12.1f} {b:13.1f} {b / a:6.2f}")
    uses_index = "steps_due" in query_plan_of(dbs["big"], SELECT_DUE, due_args)
    return {"select": ratios[queries[0][0]], "claim": ratios["claim_step"],
            "ok": float(uses_index)}


def query_plan_of(db: Path, sql: str, args: tuple[Any, ...]) -> str:
    conn = sqlite3.connect(db)
    try:
        return query_plan(conn, sql, args)
    finally:
        conn.close()


# --- main ------------------------------------------------------------------------------------


def summary(figures: dict[str, dict[str, float]], args: argparse.Namespace) -> None:
    def mark(good: bool, checked: float) -> str:
        return ("meets" if good else "MISSES") + ("" if checked else " (a check FAILED above)")

    print("summary against the targets:")
    if "throughput" in figures:
        f = figures["throughput"]
        print(f"  steps/s end to end     {f['steps/s']:7.0f}            target >= 2,000   "
              f"{mark(f['steps/s'] >= 2000, f['ok'])}")
    for name in ("lag-accept", "lag-preload"):
        if name in figures:
            f = figures[name]
            print(f"  due lag, {name[4:]:8s}      p50 {f['p50']:5.1f} ms p99 {f['p99']:5.1f} ms at "
                  f"{args.rate:.0f}/s   targets 20 / 100 ms   "
                  f"{mark(f['p50'] <= 20 and f['p99'] <= 100, f['ok'])}; peak RSS "
                  f"{f['rss']:.0f} MiB")
    if "scan" in figures:
        f = figures["scan"]
        worst = max(f["select"], f["claim"])
        print(f"  scan, {args.history:,} finished vs none: due query x{f['select']:.2f}, "
              f"claim x{f['claim']:.2f}   target <= 2x   {mark(worst <= 2, f['ok'])}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", default="throughput,lag,scan",
                    help="comma-separated parts: throughput, lag, lag-accept, lag-preload, scan")
    ap.add_argument("--n", type=int, default=60_000, help="throughput: notifications")
    ap.add_argument("--rate", type=float, default=1000.0, help="due lag: steps per second")
    ap.add_argument("--seconds", type=float, default=10.0, help="due lag: seconds at --rate")
    ap.add_argument("--history", type=int, default=5_000_000, help="scan: finished steps")
    ap.add_argument("--steps-per", type=int, default=2, help="scan: steps per notification")
    ap.add_argument("--pending", type=int, default=4096, help="scan: pending steps")
    ap.add_argument("--reps", type=int, default=2000, help="scan: timed repetitions per query")
    ap.add_argument("--rounds", type=int, default=5, help="scan: claim-everything rounds")
    ap.add_argument("--concurrency", type=int, default=64, help="sends in flight per lane")
    ap.add_argument("--claim-batch", type=int, default=256, help="scanner.claim_batch")
    ap.add_argument("--synchronous", default="FULL", choices=("FULL", "NORMAL", "EXTRA"))
    ap.add_argument("--keep", action="store_true", help="keep the temporary directory")
    args = ap.parse_args()
    parts = set(args.only.split(","))
    if "lag" in parts:
        parts |= {"lag-accept", "lag-preload"}

    import aiohttp
    load = os.getloadavg()
    print(f"machine: {os.cpu_count()} cores, load average {load[0]:.2f} {load[1]:.2f} "
          f"{load[2]:.2f}; python {sys.version.split()[0]}, sqlite {sqlite3.sqlite_version}, "
          f"aiohttp {aiohttp.__version__}")
    print(f"daemon: synchronous={args.synchronous}, webhook channel rate_per_sec=1e6 "
          f"burst=1e6, {args.concurrency} sends per lane, claim_batch {args.claim_batch}; "
          "provider answers 200 at once (benchmarks/provider.py)")
    tmp = Path(tempfile.mkdtemp(prefix="notifyd-ladder-"))
    prov = Provider() if parts & {"throughput", "lag-accept", "lag-preload"} else None
    figures: dict[str, dict[str, float]] = {}
    try:
        if prov and "throughput" in parts:
            figures["throughput"] = throughput(args, prov, tmp)
        if prov and "lag-accept" in parts:
            figures["lag-accept"] = lag_accept(args, prov, tmp)
        if prov and "lag-preload" in parts:
            figures["lag-preload"] = lag_preload(args, prov, tmp)
        if "scan" in parts:
            figures["scan"] = scan(args, tmp)
        summary(figures, args)
    finally:
        for proc in STARTED:
            stop_proc(proc, 10)
        if args.keep:
            print(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
