"""Signed delivery receipts in: webhook to committed resolution at --rate receipts/s (1,000),
while new notifications are accepted beside them at --accept-rate (200/s).

Run:   /work/main/.venv/bin/python benchmarks/receipts.py            (20 s timed, about 35 s)
Quick: /work/main/.venv/bin/python benchmarks/receipts.py --quick    (5 s timed)
Where the time goes: --probe (below); variants: --rate 250 / 500, --accept-rate 0.

POST /v1/webhooks/delivery-receipt verifies the Standard Webhooks signature over the raw body,
then commits the receipt and applies it (the notification resolved, its next step cancelled) in
one transaction before the 2xx (notifyd/http/app.py post_webhook, store.record_receipts). So "webhook
to committed resolution" is the time from a request's scheduled send to its 2xx at the client.

1. Set-up, untimed: a scratch folder, a config (one kind, stop = "delivered", a ladder of two
   `log` steps, the first with a 600 s window), an API key (`notifyd keys create`), and
   `notifyd serve --port 0` as a subprocess (cwd and PYTHONPATH this tree: the header prints the
   notifyd/__init__.py it imports; its port is read from its "listening on" log line). Then
   rate x duration notifications are POSTed (64 clients, closed loop) and the script waits,
   polling SQLite read-only, until each one's step 0 is `sent`.
2. Timed phase: two load generators, each a subprocess of this file (`--gen`), so the client's
   CPU is not the daemon's event loop: one posts a pre-signed receipt (`delivered` for step 0)
   per notification at --rate, the other new notifications at --accept-rate; both open loop (on a
   schedule, whatever the answers do) over a pool of keep-alive connections (64 and 16). Every
   request is built (and signed) before the start. A request's latency counts from the moment it
   was due, so waiting for a free connection is in it (no coordinated omission); the split into
   the client's own lateness, the wait for a connection and the server's answer is printed.
3. The figures: receipts/s sustained, p50/p99/max, non-2xx by status; the accept path's beside
   it; the daemon's CPU over the phase (event loop thread and its other threads); then the
   database, read after the daemon stopped: every targeted notification resolved 'delivered' by
   'receipt:delivery-receipt', its step 1 cancelled, one receipts row per receipt sent.
4. --probe: the daemon runs in a host process of this file (`--host`) that calls
   notifyd.daemon.serve() as `notifyd serve` does, with notifyd's code unchanged but timed from
   outside: each webhook handler call, each store write (queued, its batch began, committed, the
   caller resumed), the event loop's stalls and the collector's pauses. Each receipt is joined
   to its request by webhook-id, and its latency split into stages (p50, p99, the slowest 1%).
   It costs the daemon some CPU: compare its figures with a run without it.

Every child is stopped and the scratch folder removed at the end (--keep keeps it), also on
errors; every wait is bounded. The machine is small and shared (figures drift by +-25%): the
load average is printed at the start and at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextvars
import dataclasses
import gc
import hashlib
import hmac
import json
import os
import queue
import re
import resource
import secrets
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from channels import (  # noqa: E402
    ROOT,
    GcWatch,
    StallMonitor,
    child_env,
    die_with_parent,
    orphan_watch,
    stop_proc,
    thread_cpu,
)
from httpload import Conn, closed_loop, percentile, post  # noqa: E402

import notifyd  # noqa: E402

HOST = "127.0.0.1"
TARGET_P99_MS = 50.0
STARTED: list[subprocess.Popen[bytes]] = []  # every child, stopped at exit whatever happened
LISTENING = re.compile(r"listening on http://([0-9.]+):([0-9]+)")
PROVIDER = "delivery-receipt"

CONFIG = """
[store]
path = "{db}"
synchronous = "{sync}"
[channels.log]
type = "log"
rate_per_sec = 1000000.0
burst = 1000000
bulk_concurrency = 64
urgent_concurrency = 64
[kinds.rcpt]
ttl_sec = 3600
stop = "delivered"
ladder = [ {{ channel = "log", timeout_sec = 600 }}, {{ channel = "log" }} ]
[webhooks.{provider}]
secret = "{secret}"
"""


# --- the load generators (--gen receipts|accepts SPEC), each its own process ------------------


def receipt_requests(spec: dict[str, Any]) -> list[bytes]:
    """One pre-signed POST per notification: Standard Webhooks headers over the exact body."""
    key = base64.b64decode(spec["secret"].removeprefix("whsec_"))
    stamp = str(int(time.time()))  # valid 5 minutes either way: the run is far shorter
    out = []
    for n, nid in enumerate(spec["ids"]):
        body = json.dumps({"key": f"{nid}:0", "status": "delivered"}).encode()
        msg_id = f"msg_{spec['tag']}_{n}"
        mac = hmac.new(key, f"{msg_id}.{stamp}.".encode() + body, hashlib.sha256).digest()
        out.append(post(f"/v1/webhooks/{PROVIDER}", body, {
            "webhook-id": msg_id, "webhook-timestamp": stamp,
            "webhook-signature": "v1," + base64.b64encode(mac).decode()}))
    return out


def accept_body(i: int, key: str) -> bytes:
    return json.dumps({"user_id": f"u{i % 5000}", "kind": "rcpt", "dedup_key": key,
                       "params": {"amount": "12.00", "invoice": i}}).encode()


def accept_requests(spec: dict[str, Any]) -> list[bytes]:
    headers = {"Authorization": f"Bearer {spec['api_key']}"}
    return [post("/v1/notifications", accept_body(i, f"live-{i}"), headers)
            for i in range(int(spec["rate"] * spec["duration"]))]


async def open_loop(spec: dict[str, Any], reqs: list[bytes]) -> dict[str, Any]:
    """Send reqs[i] when due (start + i / rate) over a pool of keep-alive connections; per request
    (ms after the start): due, task began, written (a connection was free), answered, status
    (0: the connection failed, -1: no answer in time)."""
    port, rate = spec["port"], spec["rate"]
    free: asyncio.Queue[Conn] = asyncio.Queue()
    for _ in range(spec["pool"]):
        free.put_nowait(await Conn.open(HOST, port))
    n = len(reqs)
    began, written, answered = [float("nan")] * n, [float("nan")] * n, [float("nan")] * n
    status = [-1] * n
    gc.collect()
    gc.freeze()  # the prepared requests out of the collector's sight,
    gc.disable()  # and no collector pause in the client while it keeps the schedule
    print("ready", flush=True)
    if await asyncio.to_thread(sys.stdin.readline) != "go\n":
        raise SystemExit("the orchestrator went away before the start")
    t0 = time.perf_counter()

    async def one(i: int) -> None:
        began[i] = time.perf_counter()
        conn = await free.get()
        written[i] = time.perf_counter()
        try:
            status[i], _ = await conn.request(reqs[i])
        except (OSError, asyncio.IncompleteReadError, ValueError):
            status[i] = 0
            conn.close()
            try:
                conn = await Conn.open(HOST, port)
            except OSError:
                return  # the pool shrinks by one; the failures show in the statuses
        answered[i] = time.perf_counter()
        free.put_nowait(conn)

    tasks = []
    sched = os.open(f"/proc/self/task/{threading.get_native_id()}/schedstat", os.O_RDONLY)
    stalls: list[tuple[float, float, float]] = []  # ms late, ms this thread ran, ms it waited
    before = os.pread(sched, 128, 0).split()[:2]
    for i in range(n):
        delay = t0 + i / rate - time.perf_counter()
        await asyncio.sleep(max(delay, 0.0))  # a yield even when late, so answers are read
        tasks.append(asyncio.create_task(one(i)))
        late_ms = (time.perf_counter() - t0 - i / rate) * 1000
        now = os.pread(sched, 128, 0).split()[:2]
        if late_ms >= 10:  # the client's own loop was behind: was it waiting for a CPU?
            stalls.append((late_ms, (int(now[0]) - int(before[0])) / 1e6,
                           (int(now[1]) - int(before[1])) / 1e6))
        before = now
    os.close(sched)
    sent_by = time.perf_counter()
    _, late = await asyncio.wait(tasks, timeout=spec["answer_limit"])
    for t in late:
        t.cancel()
    gc.enable()
    while not free.empty():
        free.get_nowait().close()

    def ms(values: list[float]) -> list[float | None]:
        return [None if v != v else round((v - t0) * 1000, 3) for v in values]

    usage = resource.getrusage(resource.RUSAGE_SELF)
    return {"due": [round(i / rate * 1000, 3) for i in range(n)], "began": ms(began),
            "written": ms(written), "answered": ms(answered), "status": status,
            "sent_by_ms": (sent_by - t0) * 1000, "t0": t0,
            "cpu_s": usage.ru_utime + usage.ru_stime, "rss_mb": usage.ru_maxrss / 1024,
            "stalls": stalls}


def run_generator(what: str, spec_path: Path) -> None:
    spec = json.loads(spec_path.read_text())
    reqs = receipt_requests(spec) if what == "receipts" else accept_requests(spec)
    result = asyncio.run(open_loop(spec, reqs))
    tmp = Path(spec["out"]).with_suffix(".tmp")
    tmp.write_text(json.dumps(result))
    tmp.rename(spec["out"])


# --- the probed daemon (--probe: --host CFG OUT) ---------------------------------------------
# notifyd.daemon.serve() as `notifyd serve` runs it, in a process of this file that times, without
# editing notifyd: each webhook handler call, each store write (queued, its batch began, the
# batch committed, the caller resumed), and the event loop's stalls and GC pauses
# (benchmarks/channels.py's StallMonitor and GcWatch). Times are time.perf_counter(), one clock
# with the generators' (CLOCK_MONOTONIC), so each receipt is joined to its request by webhook-id.
# The records are tuples of numbers and strings, which the cyclic collector stops tracking, so
# the probe's own data does not lengthen the daemon's GC pauses.

REQUEST: contextvars.ContextVar[int] = contextvars.ContextVar("request", default=-1)
OP_NAME = re.compile(r"(\w+)\.<locals>")


def instrument(probe: dict[str, list[Any]]) -> None:
    from notifyd.http import app as web
    from notifyd.store.sqlite.writer import SqliteWriter as Writer

    run0, write0 = Writer._run, Writer.write
    current: list[list[float]] = [[0.0, 0.0, 0.0, 0.0]]

    def run(self: Writer, ops: list[Any]) -> Any:
        batch = [time.perf_counter(), 0.0, 0.0, float(len(ops))]  # began, ended, ops' time, size
        current[0] = batch
        try:
            return run0(self, ops)
        finally:
            batch[1] = time.perf_counter()
            probe["batches"].append(tuple(batch))  # floats only: the collector untracks it

    async def write(self: Writer, op: Any, shed: bool = False) -> Any:
        queued, mine = time.perf_counter(), [current[0], 0.0]

        def timed(conn: sqlite3.Connection) -> Any:
            mine[0], began = current[0], time.perf_counter()
            try:
                return op(conn)
            finally:
                mine[1] = time.perf_counter() - began
                mine[0][2] += mine[1]

        try:
            return await write0(self, timed, shed)
        finally:
            m = OP_NAME.search(getattr(op, "__qualname__", ""))
            probe["writes"].append((m.group(1) if m else "?", REQUEST.get(), queued, mine[0][0],
                                    mine[0][1], mine[1], time.perf_counter(), mine[0][3]))

    def timed_handler(handler: Any, name: str) -> Any:
        async def timed(request: Any) -> Any:
            began, status = time.perf_counter(), 500
            msg = request.headers.get("webhook-id", "")
            index = int(msg.rsplit("_", 1)[1]) if msg.startswith("msg_") else -1
            token = REQUEST.set(index)
            try:
                response = await handler(request)
                status = response.status
                return response
            except Exception as e:
                status = getattr(e, "status", 500)
                raise
            finally:
                REQUEST.reset(token)
                probe["handlers"].append((name, index, began, time.perf_counter(), status))
        return timed

    Writer._run, Writer.write = run, write  # type: ignore[method-assign]
    web.ROUTES[:] = [(m, p, timed_handler(h, h.__name__)
                      if h in (web.post_webhook, web.post_notification) else h)
                     for m, p, h in web.ROUTES]


def host_daemon(cfg_path: Path, out: Path) -> None:
    from notifyd.config import load_config
    from notifyd.core.logs import setup_logging
    from notifyd.daemon import Daemon, serve

    probe: dict[str, list[Any]] = {"writes": [], "batches": [], "handlers": []}
    instrument(probe)
    monitor, gc_watch = StallMonitor(), GcWatch()
    gc.callbacks.append(gc_watch)
    run0 = Daemon.run

    async def run(self: Daemon, stop: asyncio.Event) -> None:
        watch = asyncio.create_task(orphan_watch())
        watch.add_done_callback(lambda _: stop.set())
        task = asyncio.create_task(monitor.run(self))
        try:
            await run0(self, stop)
        finally:
            task.cancel()
            watch.cancel()

    Daemon.run = run  # type: ignore[method-assign]
    cfg = load_config(cfg_path)
    setup_logging("info", "text")
    try:
        serve(dataclasses.replace(cfg, server=dataclasses.replace(cfg.server, port=0)),
              config_path=str(cfg_path))
    finally:
        out.write_text(json.dumps({
            **probe, "wall_minus_perf": time.time() - time.perf_counter(),
            "stalls": monitor.stalls, "ticks": monitor.ticks, "gc": gc_watch.pauses}))


# --- the orchestrator: processes ---------------------------------------------------------------


class Daemon:
    """`python -m notifyd --config CFG serve --port 0`, its port read from its log line."""

    def __init__(self, cfg: Path, work: Path, probe: bool = False) -> None:
        self.log = work / "daemon.log"
        self.out = work / "probe.json" if probe else None
        cmd = [sys.executable, "-m", "notifyd", "--config", str(cfg), "serve", "--port", "0"]
        if self.out is not None:
            cmd = [sys.executable, str(Path(__file__).resolve()), "--host", str(cfg), str(self.out)]
        with self.log.open("ab") as err:
            self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err, cwd=ROOT,
                                         env=child_env(), preexec_fn=die_with_parent)
        STARTED.append(self.proc)
        self.pid = self.proc.pid
        self.port = self._port(30)

    def _port(self, limit: float) -> int:
        deadline = time.monotonic() + limit
        while time.monotonic() < deadline:
            m = LISTENING.search(self.log.read_text(errors="replace"))
            if m:
                return int(m.group(2))
            if self.proc.poll() is not None:
                raise SystemExit(f"notifyd exited with {self.proc.returncode}; log {self.log}")
            time.sleep(0.05)
        raise SystemExit(f"notifyd did not log 'listening on' within {limit:.0f} s")

    def stop(self) -> list[str]:
        """SIGTERM, a bounded wait for the clean exit; the log's warning and error lines."""
        stop_proc(self.proc)
        if self.proc.returncode != 0:
            print(f"  ! notifyd exited with {self.proc.returncode}; log {self.log}")
        return [ln for ln in self.log.read_text(errors="replace").splitlines()
                if " WARNING " in ln or " ERROR " in ln or "Traceback" in ln]


class Generator:
    """A load generator subprocess: it prepares, says 'ready', and starts on 'go'."""

    def __init__(self, what: str, spec: dict[str, Any], work: Path) -> None:
        self.what = what
        self.out = work / f"{what}.json"
        path = work / f"{what}-spec.json"
        path.write_text(json.dumps({**spec, "out": str(self.out)}))
        self.proc = subprocess.Popen(
            [sys.executable, str(Path(__file__).resolve()), "--gen", what, str(path)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=None, cwd=ROOT,
            env=child_env(), preexec_fn=die_with_parent)
        STARTED.append(self.proc)
        self.lines: queue.Queue[bytes] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line)
        self.lines.put(b"")

    def wait_ready(self, limit: float) -> None:
        try:
            line = self.lines.get(timeout=limit)
        except queue.Empty:
            raise SystemExit(f"the {self.what} generator was not ready within {limit:.0f} s") from None
        if line.strip() != b"ready":
            raise SystemExit(f"the {self.what} generator failed before the start ({line!r})")

    def go(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(b"go\n")
        self.proc.stdin.flush()

    def result(self, limit: float) -> dict[str, Any]:
        try:
            self.proc.wait(limit)
        except subprocess.TimeoutExpired:
            raise SystemExit(f"the {self.what} generator did not end within {limit:.0f} s") from None
        if self.proc.returncode != 0 or not self.out.exists():
            raise SystemExit(f"the {self.what} generator exited with {self.proc.returncode}")
        return dict(json.loads(self.out.read_text()))


def cpu_wait(pid: int) -> float:
    """Seconds the process's threads have spent runnable but waiting for a CPU (schedstat)."""
    total = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            total += int(Path(f"/proc/{pid}/task/{tid}/schedstat").read_text().split()[1])
        except (OSError, IndexError):  # the thread ended between listing and reading
            continue
    return total / 1e9


def notifyd_cli(cfg: Path, *args: str) -> str:
    return subprocess.run([sys.executable, "-m", "notifyd", "--config", str(cfg), *args],
                          cwd=ROOT, env=child_env(), capture_output=True, text=True, check=True,
                          timeout=60).stdout


# --- set-up ----------------------------------------------------------------------------------


def ro(db: Path) -> sqlite3.Connection:
    return sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=10)


def scalar(db: Path, sql: str, args: tuple[Any, ...] = ()) -> Any:
    conn = ro(db)
    try:
        return conn.execute(sql, args).fetchone()[0]
    finally:
        conn.close()


def preload(port: int, api_key: str, count: int) -> list[str]:
    """`count` notifications accepted through the API (64 clients); their ids."""
    headers = {"Authorization": f"Bearer {api_key}"}
    rps, results = asyncio.run(closed_loop(
        HOST, port, 64, count,
        lambda i: post("/v1/notifications", accept_body(i, f"pre-{i}"), headers)))
    bad = Counter(status for status, _ in results if status != 202)
    if bad:
        raise SystemExit(f"set-up: accepts refused: {dict(bad)}")
    print(f"set-up: {count} notifications accepted at {rps:.0f}/s (64 clients, closed loop)")
    return [json.loads(b)["notification_id"] for _, b in results]


def wait_sent(db: Path, count: int) -> None:
    """Poll the database (read-only) until `count` steps 0 are sent; bounded."""
    limit = 60 + count / 100
    began = time.monotonic()
    sql = "SELECT count(*) FROM steps WHERE step_no = 0 AND state = 'sent'"
    sent = scalar(db, sql)
    while sent < count:
        if time.monotonic() - began > limit:
            raise SystemExit(f"set-up: only {sent} of {count} steps 0 sent after {limit:.0f} s")
        time.sleep(0.25)
        sent = scalar(db, sql)
    print(f"set-up: all {count} steps 0 sent ({time.monotonic() - began:.1f} s after the last "
          "accept); each notification's step 1 waits 600 s")


# --- figures ---------------------------------------------------------------------------------


def latency_line(name: str, values: list[float]) -> str:
    if not values:
        return f"  {name}: none"
    return (f"  {name}: p50 {percentile(values, 50):7.2f}   p99 {percentile(values, 99):7.2f}   "
            f"max {max(values):7.2f} ms")


def stream_figures(label: str, r: dict[str, Any], duration: float) -> dict[str, float]:
    """Print one stream's throughput and latency; return its p50/p99 and rate."""
    ok = [i for i, s in enumerate(r["status"]) if 200 <= s < 300]
    bad = Counter(s for s in r["status"] if not 200 <= s < 300)
    lat = [r["answered"][i] - r["due"][i] for i in ok]
    in_phase = sum(1 for i in ok if r["answered"][i] <= duration * 1000)
    last = max((r["answered"][i] for i in ok), default=0.0)
    per_sec = Counter(int(r["answered"][i] // 1000) for i in ok if r["answered"][i] < duration * 1000)
    secs = [per_sec.get(s, 0) for s in range(int(duration))]
    sent = len(r["status"])
    print(f"{label}: {sent} sent at {sent / duration:.0f}/s (the last due at "
          f"{r['due'][-1] / 1000:.2f} s, sent by {r['sent_by_ms'] / 1000:.2f} s); "
          f"{len(ok)} answered 2xx, non-2xx {dict(bad) or 'none'}")
    print(f"  sustained: {in_phase / duration:.0f} 2xx/s within the {duration:.0f} s phase "
          f"({len(ok) / max(last / 1000, 1e-9):.0f}/s to the last answer at {last / 1000:.2f} s); "
          f"per second min {min(secs, default=0)} / median {sorted(secs)[len(secs) // 2] if secs else 0}"
          f" / max {max(secs, default=0)}")
    print(latency_line("latency, due to 2xx      ", lat))
    print(latency_line("  client late to send     ", [r["began"][i] - r["due"][i] for i in ok]))
    print(latency_line("  waited for a connection ", [r["written"][i] - r["began"][i] for i in ok]))
    print(latency_line("  written to answered     ", [r["answered"][i] - r["written"][i] for i in ok]))
    print(f"  generator process: CPU {r['cpu_s']:.1f} s in all (set-up included), peak memory "
          f"{r['rss_mb']:.0f} MB; {client_stalls(r['stalls'])}")
    return {"p50": percentile(lat, 50) if lat else float("nan"),
            "p99": percentile(lat, 99) if lat else float("nan"),
            "rate": in_phase / duration, "ok": len(ok), "sent": sent}


def client_stalls(stalls: list[list[float]]) -> str:
    """The generator's own send loop behind by 10+ ms: how often, and the worst, with the time
    its thread spent waiting for a CPU in that iteration (the machine busy) against running."""
    if not stalls:
        return "its send loop never fell 10 ms behind"
    worst = max(stalls, key=lambda s: s[0])
    return (f"its send loop fell 10+ ms behind {len(stalls)} time(s), at worst {worst[0]:.1f} ms "
            f"(in that gap it waited for a CPU {worst[2]:.1f} ms, ran {worst[1]:.1f} ms)")


def growth_line(r: dict[str, Any], duration: float) -> str:
    """p99 per fifth of the phase: latency that climbs through the run is a backlog building."""
    parts = []
    for k in range(5):
        lo, hi = duration * 1000 * k / 5, duration * 1000 * (k + 1) / 5
        lat = [a - d for d, a, s in zip(r["due"], r["answered"], r["status"], strict=True)
               if lo <= d < hi and 200 <= s < 300]
        parts.append(f"{percentile(lat, 99):.1f}" if lat else "-")
    return "  p99 by fifth of the phase (ms): " + " / ".join(parts)


def check_db(db: Path, ids: list[str], receipts_ok: int, accepts_ok: int) -> bool:
    """The database after the run: each targeted notification resolved by its receipt."""
    conn = ro(db)
    try:
        targets = json.dumps(ids)
        total, resolved = conn.execute(
            "SELECT count(*), coalesce(sum(resolution = 'delivered' AND resolved_by = "
            f"'receipt:{PROVIDER}' AND resolved_at IS NOT NULL), 0) FROM notifications "
            "WHERE id IN (SELECT value FROM json_each(?))", (targets,)).fetchone()
        steps = dict(conn.execute(
            "SELECT step_no || ' ' || state, count(*) FROM steps WHERE notification_id IN "
            "(SELECT value FROM json_each(?)) GROUP BY step_no, state", (targets,)).fetchall())
        rows, matched = conn.execute(
            "SELECT count(*), count(notification_id) FROM receipts WHERE provider = ?",
            (PROVIDER,)).fetchone()
        live = conn.execute("SELECT count(*) FROM notifications WHERE dedup_key LIKE 'live-%'"
                            ).fetchone()[0]
    finally:
        conn.close()
    n = len(ids)
    ok = (total == resolved == n and steps == {"0 sent": n, "1 cancelled": n}
          and rows == matched == receipts_ok == n and live == accepts_ok)
    print(f"database: {resolved} of {n} targeted notifications resolved 'delivered' by "
          f"'receipt:{PROVIDER}'; their steps: "
          + ", ".join(f"step {k} {v}" for k, v in sorted(steps.items()))
          + f"; {rows} receipts rows ({matched} matched to a step) for {n} sent, {receipts_ok} "
          f"answered 2xx; {live} notifications from the accept stream for {accepts_ok} 202s  "
          + ("OK" if ok else "MISMATCH"))
    return ok


# --- the probe's breakdown (--probe) ---------------------------------------------------------

STAGES = ("client: late, waiting for a connection", "request to the handler (wire, parse, loop)",
          "handler to the store (verify, read)", "writer queue (waits for a batch)",
          "its batch: the ops and the COMMIT", "loop resumes the handler",
          "handler returns (counts the outcome)", "2xx written and back to the client")


def stage_times(r: dict[str, Any], probe: dict[str, Any]) -> list[tuple[float, list[float]]]:
    """Per receipt answered 2xx and seen by the probe: its latency and its STAGES, in ms."""
    t0 = r["t0"]
    handlers = {h[1]: h for h in probe["handlers"] if h[0] == "post_webhook"}
    writes = {w[1]: w for w in probe["writes"] if w[0] == "record_receipts"}
    out = []
    for i, status in enumerate(r["status"]):
        if not 200 <= status < 300 or i not in handlers or i not in writes:
            continue
        due, wrote, answered = (t0 + r[k][i] / 1000 for k in ("due", "written", "answered"))
        _, _, h_began, h_ended, _ = handlers[i]
        _, _, queued, b_began, b_ended, _, resumed, _ = writes[i]
        points = [due, wrote, h_began, queued, b_began, b_ended, resumed, h_ended, answered]
        gaps = [(b - a) * 1000 for a, b in zip(points, points[1:], strict=False)]
        out.append(((answered - due) * 1000, gaps))
    return out


def print_stages(rows: list[tuple[float, list[float]]]) -> None:
    if not rows:
        print("  probe: no receipt could be joined to its handler and write")
        return
    tail = sorted(rows, key=lambda row: -row[0])[:max(1, len(rows) // 100)]
    print(f"  where a receipt's time goes ({len(rows)} joined by webhook-id), ms:   p50     p99"
          "   mean of the slowest 1%")
    for k, name in enumerate(STAGES):
        col = [g[k] for _, g in rows]
        print(f"    {name:<44} {percentile(col, 50):7.2f} {percentile(col, 99):7.2f} "
              f"{sum(g[k] for _, g in tail) / len(tail):9.2f}")
    print(f"    {'total (due to 2xx)':<44} {percentile([t for t, _ in rows], 50):7.2f} "
          f"{percentile([t for t, _ in rows], 99):7.2f} {sum(t for t, _ in tail) / len(tail):9.2f}")
    for total, g in tail[:3]:
        print(f"    slowest: {total:6.1f} ms = " + " + ".join(f"{x:.1f}" for x in g))


def print_writer(probe: dict[str, Any], lo: float, hi: float) -> None:
    batches = [b for b in probe["batches"] if lo <= b[0] <= hi and b[1] > 0]
    if not batches:
        return
    sizes = [b[3] for b in batches]
    run = [(b[1] - b[0]) * 1000 for b in batches]
    commit = [(b[1] - b[0] - b[2]) * 1000 for b in batches]
    print(f"  writer over the phase: {len(batches)} commits ({len(batches) / (hi - lo):.0f}/s), "
          f"ops per commit p50 {percentile(sizes, 50):.0f} p99 {percentile(sizes, 99):.0f} max "
          f"{max(sizes):.0f}; batch time p50 {percentile(run, 50):.2f} p99 "
          f"{percentile(run, 99):.2f} max {max(run):.1f} ms, of which BEGIN+COMMIT p50 "
          f"{percentile(commit, 50):.2f} p99 {percentile(commit, 99):.2f} max {max(commit):.1f} ms")
    mix: dict[str, list[float]] = {}
    for w in probe["writes"]:
        if lo <= w[2] <= hi:
            mix.setdefault(w[0], []).append(w[5] * 1000)
    print("  store writes in the phase (count, mean op time in the thread): " + ", ".join(
        f"{name} {len(v)} ({sum(v) / len(v):.2f} ms)" for name, v in
        sorted(mix.items(), key=lambda kv: -len(kv[1]))))


def print_loop(probe: dict[str, Any], lo: float, hi: float) -> None:
    shift = probe["wall_minus_perf"]
    stalls = [s for s in probe["stalls"] if lo + shift <= s[0] <= hi + shift]
    pauses = [p for p in probe["gc"] if lo + shift <= p[0] <= hi + shift]
    longest = max(stalls, key=lambda s: s[1], default=None)
    print(f"  event loop (1 ms sleeps beside the daemon): {len(stalls)} stalls of 5+ ms, "
          f"{sum(1 for s in stalls if s[1] > 20)} over 20 ms, "
          + (f"the longest {longest[1]:.1f} ms (the loop thread ran {longest[2]:.1f} ms of it, "
             f"waited for a CPU {longest[3]:.1f} ms)" if longest else "none")
          + f"; GC pauses of 2+ ms: {len(pauses)}" + gc_line(pauses))


def gc_line(pauses: list[list[Any]]) -> str:
    """The longest collector pause, and the most CPU one took: a long pause on little CPU is
    the collecting thread waiting for a CPU, not the collector's work."""
    if not pauses:
        return ""
    _, ms, cpu, gen, thread = max(pauses, key=lambda p: p[1])
    full = sum(1 for p in pauses if p[3] == 2)
    return (f", the longest {ms:.1f} ms (CPU {cpu:.1f} ms, generation {gen}, in {thread}); the "
            f"most CPU in one {max(p[2] for p in pauses):.1f} ms; {full} of generation 2")


def probe_report(probe: dict[str, Any], r: dict[str, Any], duration: float) -> None:
    lo, hi = r["t0"], r["t0"] + duration
    print("probe (the daemon timed from inside its process, its code unchanged; the probe "
          "costs some CPU, so read these figures beside a run without it):")
    print_stages(stage_times(r, probe))
    print_writer(probe, lo, hi)
    print_loop(probe, lo, hi)


# --- main ------------------------------------------------------------------------------------


def loadavg() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def header(args: argparse.Namespace) -> None:
    daemon_imports = subprocess.run(
        [sys.executable, "-c", "import notifyd; print(notifyd.__file__)"], cwd=ROOT,
        env=child_env(), capture_output=True, text=True, timeout=30).stdout.strip()
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, text=True,
                            capture_output=True, timeout=10).stdout.strip()
    fs = subprocess.run(["findmnt", "-no", "FSTYPE,SOURCE", "-T", tempfile.gettempdir()],
                        capture_output=True, text=True, timeout=10).stdout.split()
    print(f"machine: {os.cpu_count()} cores, load average {loadavg()} at start; python "
          f"{sys.version.split()[0]}, sqlite {sqlite3.sqlite_version}; the database on "
          f"{' '.join(fs) or '?'} ({tempfile.gettempdir()})")
    print(f"notifyd {notifyd.__version__} at {commit or '?'}: this script imports {notifyd.__file__}, "
          f"the daemon {daemon_imports}")
    print(f"run: receipts at {args.rate:.0f}/s and accepts at {args.accept_rate:.0f}/s for "
          f"{args.duration:.0f} s, open loop, pools of {args.pool} and 16 keep-alive "
          f"connections; synchronous={args.synchronous}"
          + ("; --probe: the daemon runs timed, in a host process" if args.probe else ""))


def timed_phase(args: argparse.Namespace, work: Path, daemon: Daemon, ids: list[str], api_key: str,
                secret: str) -> tuple[dict[str, Any], dict[str, Any] | None, float]:
    """Both generators' records, and the seconds the daemon's threads waited for a CPU."""
    common = {"port": daemon.port, "duration": args.duration,
              "answer_limit": 60.0}
    gens = [Generator("receipts", {**common, "rate": args.rate, "pool": args.pool, "ids": ids,
                                   "secret": secret, "tag": secrets.token_hex(4)}, work)]
    if args.accept_rate > 0:
        gens.append(Generator("accepts", {**common, "rate": args.accept_rate, "pool": 16,
                                          "api_key": api_key}, work))
    for g in gens:
        g.wait_ready(60)
    cpu0, wait0, t0 = thread_cpu(daemon.pid), cpu_wait(daemon.pid), time.perf_counter()
    for g in gens:
        g.go()
    results = [g.result(args.duration + 90) for g in gens]
    cpu1, wait1, wall = thread_cpu(daemon.pid), cpu_wait(daemon.pid), time.perf_counter() - t0
    loop, rest = (b - a for a, b in zip(cpu0, cpu1, strict=True))
    print(f"daemon CPU over the phase ({wall:.1f} s, to the last answer): event loop thread "
          f"{loop:.1f} s ({loop / wall:.0%}), other threads {rest:.1f} s ({rest / wall:.0%}); "
          f"{(loop + rest) / max(len(ids), 1) * 1e6:.0f} us per receipt, accepts' share included; "
          f"its threads waited for a CPU {wait1 - wait0:.2f} s in all (runnable, not running)")
    return results[0], (results[1] if len(results) > 1 else None), wait1 - wait0


def run(args: argparse.Namespace, work: Path) -> bool:
    db, cfg = work / "notifyd.db", work / "notifyd.toml"
    secret = "whsec_" + base64.b64encode(os.urandom(24)).decode()
    cfg.write_text(CONFIG.format(db=db, sync=args.synchronous, provider=PROVIDER, secret=secret))
    api_key = notifyd_cli(cfg, "keys", "create", "--name", "bench").split()[0]
    daemon = Daemon(cfg, work, args.probe)
    try:
        ids = preload(daemon.port, api_key, int(args.rate * args.duration))
        wait_sent(db, len(ids))
        receipts, accepts, waited = timed_phase(args, work, daemon, ids, api_key, secret)
    finally:
        warnings = daemon.stop()
    r = stream_figures("receipts", receipts, args.duration)
    print(growth_line(receipts, args.duration))
    if daemon.out is not None and daemon.out.exists():
        probe_report(json.loads(daemon.out.read_text()), receipts, args.duration)
    a = stream_figures("accepts beside them", accepts, args.duration) if accepts else None
    if warnings:
        print(f"  ! daemon logged {len(warnings)} warning/error line(s), e.g. {warnings[0][:200]}")
    ok = check_db(db, ids, r["ok"], a["ok"] if a else 0)
    met = r["p99"] <= TARGET_P99_MS and r["ok"] == r["sent"]
    print(f"summary (load average {loadavg()} at end): {r['rate']:.0f} receipts/s sustained of "
          f"{args.rate:.0f}/s asked, p50 {r['p50']:.1f} ms, p99 {r['p99']:.1f} ms"
          + (f"; accepts {a['rate']:.0f}/s p50 {a['p50']:.1f} ms p99 {a['p99']:.1f} ms" if a else
             "; no accept load") + f"; database {'OK' if ok else 'MISMATCH'}; the daemon's "
          f"threads waited {waited:.1f} s for a CPU (runnable, not running) in the phase")
    print(f"p99 <= {TARGET_P99_MS:.0f} ms: {'meets' if met else 'MISSES'}"
          + ("" if r["ok"] == r["sent"] else " (not every receipt was answered 2xx)"))
    return ok


def parse_args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--rate", type=float, default=1000.0, help="receipts per second")
    ap.add_argument("--accept-rate", type=float, default=200.0,
                    help="new notifications per second beside them (0: none)")
    ap.add_argument("--duration", type=float, help="seconds of the timed phase (20; quick 5)")
    ap.add_argument("--quick", action="store_true", help="a 5 s timed phase")
    ap.add_argument("--pool", type=int, default=64, help="keep-alive connections for receipts")
    ap.add_argument("--synchronous", default="FULL", choices=("FULL", "NORMAL", "EXTRA"))
    ap.add_argument("--keep", action="store_true", help="keep the scratch folder")
    ap.add_argument("--probe", action="store_true",
                    help="run the daemon in a host process that times its handler, writer and "
                         "loop, and print where a receipt's time goes")
    ap.add_argument("--gen", nargs=2, metavar=("WHAT", "SPEC"), help=argparse.SUPPRESS)
    ap.add_argument("--host", nargs=2, metavar=("CFG", "OUT"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.duration is None:
        args.duration = 5.0 if args.quick else 20.0
    return args


def main() -> None:
    args = parse_args()
    if args.gen:
        run_generator(args.gen[0], Path(args.gen[1]))
        return
    if args.host:
        host_daemon(Path(args.host[0]), Path(args.host[1]))
        return
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # so the finally below runs
    header(args)
    work = Path(tempfile.mkdtemp(prefix="notifyd-receipts-"))
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
        print(f"took {time.monotonic() - started:.0f} s")
    if not ok:
        sys.exit(1)


if __name__ == "__main__":
    main()
