"""A flood: notifyd offered 3x its measured capacity for 30 s, open loop.

Run:   /work/main/.venv/bin/python benchmarks/overload.py [--seconds 30] [--factor 3]
Quick: /work/main/.venv/bin/python benchmarks/overload.py --quick

1. Capacity: 64 keep-alive clients, closed loop (each sends its next POST when the last is
   answered), for --capacity-seconds after a second of warm-up, as benchmarks/accept.py does.
2. Flood: --factor x that rate (or --rate) of POST /v1/notifications, each due on a fixed
   schedule whatever became of the ones before (open loop), sent by --connections workers of one
   keep-alive connection each (default 1000, the daemon's own server.max_connections, so that it
   admits them all): a free worker takes the next request due and sends it at once if it is late.
   Latency is counted both from when a request was due (so waiting for a free worker counts,
   without coordinated omission) and from when it was sent (the daemon's own time). A request that
   waited --client-timeout for a worker is given up unsent; one unanswered --client-timeout after
   it was sent is given up and its connection closed; resets are counted by kind; an answer
   with "Connection: close" makes the worker open a new connection for its next request. More
   connections than the daemon admits (--connections 3000) test what it does with the rest.
3. Memory and files: the daemon's VmRSS and open files (/proc/PID/fd) before the flood, their
   peak (sampled every 100 ms on a thread; and the kernel's VmHWM), and --settle seconds after
   the flood's last request was due.
--strangers N: the stranger's case beside the flood (benchmarks/strangers.py): N sockets with no
   API key, half dribbling a sign-in form's body, half pipelining requests and never reading an
   answer, each reopened as soon as the daemon ends it, hold every place a stranger may while
   the flood's producers post; what the stranger saw and the daemon's own counts are printed.
   The flood's --connections then share max_connections with them: give it fewer (200).
4. Nothing lost: after the daemon stops, every notification_id answered 202 must be a row in the
   SQLite file, read directly; and the other way, the share of the flood's rows (committed
   notifications) whose 202 reached the client, beside the 202s a second as a share of the
   measured capacity.

The daemon runs the worktree's code (PYTHONPATH = this checkout, cwd = a scratch folder, checked
before it starts), with synchronous=FULL, a three-step ladder an hour out (the accept path alone),
and the default store.max_pending_writes and server.max_connections unless --max-pending or
--max-connections; --files N runs it under an open-files limit of N. The load generator is this
process,
on the same machine: it and the daemon share its cores, which the header says. The scratch folder
is removed and the daemon stopped (SIGTERM, then SIGKILL after 30 s) at the end, even on errors.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import json
import os
import platform
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent  # the checkout whose notifyd is measured
sys.path.insert(0, str(HERE))
from accept import body, free_port  # noqa: E402
from httpload import Conn, percentile, post  # noqa: E402

CONFIG = """
[store]
synchronous = "FULL"
{store}
[server]
{server}
[channels.log]
type = "log"
[kinds.bench]
ttl_sec = 86400
ladder = [
  {{ channel = "log", after_sec = 3600, timeout_sec = 30 }},
  {{ channel = "log", timeout_sec = 60 }},
  {{ channel = "log" }},
]
"""
GAVE_UP, EXPIRED, RESET, REFUSED = -1, -2, -3, -4  # outcomes that are not an HTTP status
OUTCOME = {GAVE_UP: "gave up, sent", EXPIRED: "gave up, never sent", RESET: "conn reset/closed",
           REFUSED: "connect failed"}
CONN_ERRORS = (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError)


# ---------------------------------------------------------------- the daemon, and what it uses


def proc_status(pid: int, field_name: str) -> int | None:
    """A kB figure from /proc/PID/status (VmRSS, VmHWM), or None once the process is gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(field_name + ":"):
                return int(line.split()[1])
    except OSError:
        return None
    return None


def fd_count(pid: int) -> int | None:
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return None


def thread_seconds(pid: int) -> dict[int, float]:
    """CPU seconds of each of the process's threads, by thread id."""
    out = {}
    with contextlib.suppress(OSError):
        for task in Path(f"/proc/{pid}/task").iterdir():
            with contextlib.suppress(OSError):
                out[int(task.name)] = cpu_seconds(pid, task.name)
    return out


def busy(before: dict[int, float], after: dict[int, float], pid: int, wall: float) -> str:
    """'main N%, other threads [a, b]%' over `wall` seconds."""
    share = {t: (after[t] - before.get(t, 0.0)) / wall * 100 for t in after}
    others = sorted((round(v) for t, v in share.items() if t != pid and v >= 1), reverse=True)
    return f"main thread {share.get(pid, 0.0):.0f}%, other threads {others}%"


def cpu_seconds(pid: int, tid: str | None = None) -> float:
    try:
        stat = Path(f"/proc/{pid}/task/{tid}/stat" if tid else f"/proc/{pid}/stat")
        fields = stat.read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def mib(kib: int | None) -> str:
    return "?" if kib is None else f"{kib / 1024:.1f} MiB"


class Sample(NamedTuple):
    at: float  # time.monotonic()
    rss: int  # kB
    fds: int  # open files, or -1 when not sampled
    cpu: float  # the daemon's CPU seconds so far
    own_cpu: float  # this process's CPU seconds so far
    threads: dict[int, float]  # the daemon's CPU seconds so far, by thread


class Sampler(threading.Thread):
    """The daemon's VmRSS and CPU (and, if asked, its open files) every `every` seconds, on a
    thread so a busy event loop in this process does not delay the samples."""

    def __init__(self, pid: int, every: float = 0.1, fds: bool = False) -> None:
        super().__init__(daemon=True, name="rss-sampler")
        self.pid, self.every, self.fds = pid, every, fds
        self.samples: list[Sample] = []
        self.halt = threading.Event()

    def run(self) -> None:
        while not self.halt.is_set():
            rss = proc_status(self.pid, "VmRSS")
            if rss is not None:
                fds = (fd_count(self.pid) or -1) if self.fds else -1
                self.samples.append(Sample(time.monotonic(), rss, fds, cpu_seconds(self.pid),
                                           time.process_time(), thread_seconds(self.pid)))
            self.halt.wait(self.every)

    def stop(self) -> None:
        self.halt.set()
        self.join(timeout=5)

    def window(self, since: float, until: float) -> list[Sample]:
        return [s for s in list(self.samples) if since <= s.at <= until]

    def peak(self, since: float = 0.0, until: float = float("inf")) -> tuple[int | None, int | None]:
        """The highest RSS (kB) and the highest open-files count between two monotonic times."""
        window = self.window(since, until)
        if not window:
            return None, None
        fds = max(s.fds for s in window)
        return max(s.rss for s in window), (fds if fds >= 0 else None)

    def cpu(self, since: float, until: float) -> str:
        """The CPU the daemon (by thread) and this process used between two monotonic times."""
        window = self.window(since, until)
        if len(window) < 2:
            return "n/a"
        first, last = window[0], window[-1]
        wall = max(last.at - first.at, 1e-9)
        return (f"daemon {(last.cpu - first.cpu) / wall * 100:.0f}% of one core "
                f"({busy(first.threads, last.threads, self.pid, wall)}), load generator "
                f"{(last.own_cpu - first.own_cpu) / wall * 100:.0f}% of one core")


@dataclass
class Daemon:
    """notifyd serve from a scratch folder, running this checkout's code; a context manager that
    stops it (SIGTERM, bounded) and removes the folder on the way out, whatever happened."""

    store_toml: str = ""
    server_toml: str = ""
    files: int | None = None  # the daemon's open-files limit (soft and hard); None: inherited
    config_toml: str | None = None  # the whole config instead of CONFIG
    templates: dict[str, str] = field(default_factory=dict)  # path under templates/ -> text
    scratch: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="notifyd-bench-")))
    proc: subprocess.Popen[bytes] | None = None
    port: int = 0
    key: str = ""
    imported: str = ""

    @property
    def db(self) -> Path:
        return self.scratch / "bench.db"

    @property
    def log(self) -> Path:
        return self.scratch / "daemon.log"

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def env(self) -> dict[str, str]:
        return {**os.environ, "PYTHONPATH": str(ROOT), "NOTIFYD_DB": str(self.db),
                "NOTIFYD_CONFIG": str(self.scratch / "bench.toml")}

    def cli(self, *args: str) -> str:
        return subprocess.run([sys.executable, *args], env=self.env(), cwd=self.scratch,
                              capture_output=True, text=True, check=True, timeout=60).stdout.strip()

    def __enter__(self) -> Daemon:
        try:
            self.start()
        except BaseException:
            self.__exit__()
            raise
        return self

    def start(self) -> None:
        (self.scratch / "bench.toml").write_text(self.config_toml or
                                                 CONFIG.format(store=self.store_toml,
                                                               server=self.server_toml))
        for rel, text in self.templates.items():
            path = self.scratch / "templates" / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
        self.imported = self.cli("-c", "import notifyd; print(notifyd.__file__)")
        if not self.imported.startswith(str(ROOT) + os.sep):
            raise SystemExit(f"the daemon would import {self.imported}, not {ROOT}")
        self.key = self.cli("-m", "notifyd", "keys", "create", "--name", "bench")
        self.port = free_port()
        with self.log.open("wb") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "notifyd", "serve", "--port", str(self.port)],
                env=self.env(), cwd=self.scratch, stdout=log, stderr=subprocess.STDOUT,
                preexec_fn=None if self.files is None else self.limit_files)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and self.proc.poll() is None:
            with contextlib.suppress(OSError):
                socket.create_connection(("127.0.0.1", self.port), timeout=0.5).close()
                return
            time.sleep(0.05)
        raise SystemExit(f"notifyd did not start on port {self.port}:\n{self.log_tail()}")

    def limit_files(self) -> None:
        import resource

        assert self.files is not None
        resource.setrlimit(resource.RLIMIT_NOFILE, (self.files, self.files))

    def stop(self) -> int | None:
        """SIGTERM, then SIGKILL if it is not gone in 30 s; its exit status."""
        if self.proc is None or self.proc.poll() is not None:
            return None if self.proc is None else self.proc.returncode
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            print("notifyd did not stop within 30 s of SIGTERM: killed", flush=True)
            self.proc.kill()
            return self.proc.wait(timeout=10)

    def __exit__(self, *exc: object) -> None:
        try:
            self.stop()
        finally:
            shutil.rmtree(self.scratch, ignore_errors=True)

    def log_tail(self, lines: int = 20) -> str:
        with contextlib.suppress(OSError):
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        return ""

    def warnings(self) -> list[str]:
        """The daemon's WARNING and worse lines, each once, with how often it came."""
        seen: collections.Counter[str] = collections.Counter()
        with contextlib.suppress(OSError):
            for line in self.log.read_text(errors="replace").splitlines():
                if any(level in line for level in ("WARNING", "ERROR", "CRITICAL", "Traceback")):
                    seen[line.split(" ", 2)[-1][:200]] += 1
        return [f"{n}x {line}" if n > 1 else line for line, n in seen.most_common(12)]


def header(title: str) -> None:
    import aiohttp

    load = os.getloadavg()
    print(f"== {title} ==")
    print(f"machine: {os.cpu_count()} cores ({platform.machine()}), load average "
          f"{load[0]:.2f} {load[1]:.2f} {load[2]:.2f} at start; the load generator (this "
          f"process) and the daemon share those {os.cpu_count()} cores")
    print(f"python {platform.python_version()}, sqlite {sqlite3.sqlite_version}, "
          f"aiohttp {aiohttp.__version__}, notifyd from {ROOT}", flush=True)


def load_now() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


async def get(host: str, port: int, path: str, headers: dict[str, str] | None = None,
              timeout: float = 5.0) -> tuple[int, bytes]:
    """One GET on a fresh connection."""
    head = f"GET {path} HTTP/1.1\r\nHost: bench\r\n"
    head += "".join(f"{k}: {v}\r\n" for k, v in (headers or {}).items())
    async with asyncio.timeout(timeout):
        conn = await Conn.open(host, port)
        try:
            return await conn.request((head + "\r\n").encode())
        finally:
            conn.close()


def accept_counts(metrics: bytes) -> str:
    lines = [ln for ln in metrics.decode(errors="replace").splitlines()
             if ln.startswith("notifyd_accepts_total")]
    return ", ".join(ln.split("{", 1)[-1].replace("}", " =") for ln in lines) or "(none)"


# ---------------------------------------------------------------- capacity: closed loop


async def capacity(port: int, clients: int, warmup: float, seconds: float,
                   make: Callable[[int], bytes]) -> tuple[float, list[float], int]:
    """Accepted/s over `seconds` with `clients` keep-alive connections sending back to back;
    the latencies (ms) of the measured requests, and how many were not 202."""
    conns = [await asyncio.wait_for(Conn.open("127.0.0.1", port), 5) for _ in range(clients)]
    counter = iter(range(1 << 40))
    loop = asyncio.get_running_loop()
    begin = loop.time() + warmup
    end = begin + seconds
    latencies: list[float] = []
    bad = 0

    async def worker(conn: Conn) -> None:
        nonlocal bad
        while (now := loop.time()) < end:
            status, _ = await asyncio.wait_for(conn.request(make(next(counter))), 30)
            if now >= begin:
                latencies.append((loop.time() - now) * 1000)
                bad += status != 202

    try:
        await asyncio.gather(*(worker(c) for c in conns))
    finally:
        for c in conns:
            c.close()
    return (len(latencies) - bad) / seconds, latencies, bad


# ---------------------------------------------------------------- the flood: open loop


@dataclass
class Flood:
    rate: float
    seconds: float
    timeout: float
    n: int = 0
    start: float = 0.0  # loop time the first request was due
    status: list[int] = field(default_factory=list)  # per request: HTTP status or an outcome
    latency: list[float] = field(default_factory=list)  # ms from due to answer (or give-up)
    service: list[float] = field(default_factory=list)  # ms from sent to answer (-1: not sent)
    bodies: dict[int, bytes] = field(default_factory=dict)  # the answer's body, but for 503s
    codes: collections.Counter[str] = field(default_factory=collections.Counter)
    opened: int = 0  # connections opened
    late_sends: int = 0  # requests sent more than 10 ms after they were due (all workers busy)

    def due(self, i: int) -> float:
        return self.start + i / self.rate


class Worker:
    """One keep-alive connection taking the next request due (wrk2's model): with every worker
    busy, requests wait in the client and their latency, counted from when they were due, grows.
    A request that waited --client-timeout for a free worker is given up unsent; one sent (or
    connecting) and unanswered --client-timeout later is given up and its connection closed."""

    def __init__(self, flood: Flood, port: int, make: Callable[[int], bytes],
                 counter: Iterator[int]) -> None:
        self.flood, self.port, self.make, self.counter = flood, port, make, counter
        self.conn: Conn | None = None

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        flood = self.flood
        try:
            for i in self.counter:
                due = flood.due(i)
                if due > loop.time():
                    await asyncio.sleep(due - loop.time())
                elif loop.time() > due + flood.timeout:
                    flood.status[i] = EXPIRED
                    flood.latency[i] = (loop.time() - due) * 1000
                    continue
                elif loop.time() > due + 0.01:
                    flood.late_sends += 1
                await self.send(i, due)
        finally:
            if self.conn is not None:
                self.conn.close()

    async def send(self, i: int, due: float) -> None:
        loop = asyncio.get_running_loop()
        flood = self.flood
        sent = 0.0  # when the request was written; 0: not yet
        try:
            async with asyncio.timeout(flood.timeout):
                if self.conn is None:
                    try:
                        self.conn = await Conn.open("127.0.0.1", self.port)
                        flood.opened += 1
                    except OSError:
                        flood.status[i] = REFUSED
                        await asyncio.sleep(0.01)
                        return
                sent = loop.time()
                status, answer = await self.conn.request(self.make(i))
            flood.status[i] = status
            flood.service[i] = (loop.time() - sent) * 1000
            if self.conn.closing:  # answered, and told the connection ends: a new one next
                self.drop()
            if status == 503 and b'"overloaded"' in answer:
                flood.codes["overloaded"] += 1
            else:
                flood.bodies[i] = answer
        except TimeoutError:
            flood.status[i] = GAVE_UP if sent else EXPIRED
            self.drop()
        except CONN_ERRORS:
            flood.status[i] = RESET
            self.drop()
        finally:
            flood.latency[i] = (loop.time() - due) * 1000

    def drop(self) -> None:
        if self.conn is not None:
            self.conn.close()
            self.conn = None


async def flood_run(port: int, flood: Flood, connections: int,
                    make: Callable[[int], bytes]) -> None:
    """`connections` workers share one schedule; the last request due, they end (each bounded by
    the client timeout)."""
    loop = asyncio.get_running_loop()
    flood.n = int(flood.rate * flood.seconds)
    flood.status = [0] * flood.n
    flood.latency = [0.0] * flood.n
    flood.service = [-1.0] * flood.n
    flood.start = loop.time() + 0.1
    counter = iter(range(flood.n))
    tasks = [loop.create_task(Worker(flood, port, make, counter).run()) for _ in range(connections)]
    _, late = await asyncio.wait(tasks, timeout=flood.seconds + flood.timeout + 10)
    for task in late:
        task.cancel()
    if late:
        await asyncio.wait(late, timeout=5)


# ---------------------------------------------------------------- the report


def describe(values: list[float]) -> str:
    if not values:
        return "n/a"
    return (f"p50 {percentile(values, 50):.1f} ms  p99 {percentile(values, 99):.1f} ms  "
            f"max {max(values):.1f} ms")


def outcome_counts(flood: Flood) -> collections.Counter[str]:
    """Answers by status (and error code) and the other outcomes, by name."""
    counts: collections.Counter[str] = collections.Counter()
    for i, st in enumerate(flood.status):
        if st in OUTCOME:
            counts[OUTCOME[st]] += 1
        elif st == 0:
            counts["never finished"] += 1
        elif st == 503 and i not in flood.bodies:
            counts["503 overloaded"] += 1
        elif st in (200, 202):
            counts[str(st)] += 1
        else:
            with contextlib.suppress(ValueError, KeyError, TypeError):
                counts[f"{st} {json.loads(flood.bodies[i])['error']['code']}"] += 1
                continue
            counts[f"{st} (unparsed)"] += 1
    return counts


def timeline(flood: Flood, sampler: Sampler, mono_offset: float) -> list[str]:
    """Per second (5 s in a long run) of the flood and after: requests that came due, and the
    answers and give-ups that happened then, with the 202s' p99 latency and the peak RSS."""
    step = 5.0 if flood.seconds >= 20 else 1.0
    buckets = int((flood.seconds + flood.timeout) / step) + 1
    due: collections.Counter[int] = collections.Counter()
    done: dict[int, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    lat: dict[int, list[float]] = collections.defaultdict(list)
    wire: dict[int, list[float]] = collections.defaultdict(list)
    for i, st in enumerate(flood.status):
        due[int(i / flood.rate / step)] += 1
        b = int((i / flood.rate + flood.latency[i] / 1000) / step)
        kind = "202" if st == 202 else "503" if st == 503 else "other"
        done[b][kind] += 1
        if st == 202:
            lat[b].append(flood.latency[i])
            wire[b].append(flood.service[i])
    rows = ["  second     due/s   202/s   503/s other/s   202 p99 from due / on the wire   peak RSS"]
    for b in range(buckets):
        if not due[b] and not done[b]:
            continue
        rss, _ = sampler.peak(flood.start + b * step + mono_offset,
                              flood.start + (b + 1) * step + mono_offset)
        p99 = (f"{percentile(lat[b], 99):8.0f} ms / {percentile(wire[b], 99):6.0f} ms"
               if lat[b] else f"{'n/a':>8}    / {'n/a':>6}   ")
        rows.append(f"  {b * step:3.0f}-{(b + 1) * step:<3.0f} {due[b] / step:8.0f} "
                    f"{done[b]['202'] / step:7.0f} {done[b]['503'] / step:7.0f} "
                    f"{done[b]['other'] / step:7.0f}   {p99}        {mib(rss):>10}")
    return rows


def verify(db: Path, flood: Flood) -> tuple[int, int, int, int]:
    """(202 answers, of those found as rows, rows the flood wrote, rows with no 202 answer)."""
    acked: set[str] = set()
    for i, st in enumerate(flood.status):
        if st == 202:
            acked.add(json.loads(flood.bodies[i])["notification_id"])
    with contextlib.closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True)) as conn:
        rows = {r[0] for r in conn.execute(
            "SELECT id FROM notifications WHERE dedup_key LIKE 'flood-%'")}
    return len(acked), len(acked & rows), len(rows), len(rows - acked)


# ---------------------------------------------------------------- main


def arguments() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0] if __doc__ else None)
    ap.add_argument("--seconds", type=float, default=30.0, help="how long the flood lasts")
    ap.add_argument("--factor", type=float, default=3.0, help="flood rate = factor x capacity")
    ap.add_argument("--rate", type=float, help="flood rate in requests/s (overrides --factor)")
    ap.add_argument("--capacity-seconds", type=float, default=5.0)
    ap.add_argument("--clients", type=int, default=64, help="closed-loop clients for capacity")
    ap.add_argument("--connections", type=int, default=1000,
                    help="flood connections, one worker each (default: notifyd's own "
                         "server.max_connections, 1000)")
    ap.add_argument("--client-timeout", type=float, default=10.0,
                    help="seconds after it was due that a request is given up")
    ap.add_argument("--settle", type=float, default=10.0,
                    help="seconds after the flood that the 'after' RSS is read")
    ap.add_argument("--max-pending", type=int, help="store.max_pending_writes (default: notifyd's)")
    ap.add_argument("--max-connections", type=int,
                    help="server.max_connections (default: notifyd's, 1000)")
    ap.add_argument("--files", type=int,
                    help="the daemon's open-files limit (default: this process's, raised)")
    ap.add_argument("--strangers", type=int, default=0,
                    help="stranger sockets with no key beside the flood (dribbled bodies, "
                         "unread pipelines)")
    ap.add_argument("--quick", action="store_true", help="a smoke test: 5 s flood, 2 s capacity, "
                    "3 s settle and client timeout, unless given")
    args = ap.parse_args()
    if args.quick:  # shortens what was not given
        for name, short in (("seconds", 5.0), ("capacity_seconds", 2.0), ("settle", 3.0),
                            ("client_timeout", 3.0)):
            if getattr(args, name) == ap.get_default(name):
                setattr(args, name, short)
    return args


def raise_nofile() -> int:
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    with contextlib.suppress(ValueError, OSError):
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        soft = hard
    return soft


@contextlib.contextmanager
def sampling(pid: int, fds: bool = False) -> Iterator[Sampler]:
    sampler = Sampler(pid, fds=fds)
    sampler.start()
    try:
        yield sampler
    finally:
        sampler.stop()


def main() -> None:
    args = arguments()
    files = raise_nofile()
    header(f"overload: {args.factor:g}x capacity for {args.seconds:g} s, open loop"
           + (f", beside {args.strangers} stranger sockets" if args.strangers else ""))
    if args.files:
        print(f"the daemon's open-files limit: {args.files}")
    store = f"max_pending_writes = {args.max_pending}" if args.max_pending else ""
    server = f"max_connections = {args.max_connections}" if args.max_connections else ""
    with Daemon(store_toml=store, server_toml=server, files=args.files) as d:
        run(args, d, files)


def run(args: argparse.Namespace, d: Daemon, files: int) -> None:
    headers = {"Authorization": f"Bearer {d.key}"}

    def maker(prefix: str) -> Callable[[int], bytes]:
        return lambda i: post("/v1/notifications", body(i, f"{prefix}-{i}"), headers)

    pending = args.max_pending or "notifyd's default"
    conns = args.max_connections or "notifyd's default"
    print(f"notifyd pid {d.pid}, synchronous=FULL, store.max_pending_writes {pending}, "
          f"server.max_connections {conns}; this process may open {files} files")
    rps, lat, bad = asyncio.run(capacity(d.port, args.clients, 1.0, args.capacity_seconds,
                                         maker("cap")))
    if bad:
        print(f"  warning: {bad} capacity requests were not 202")
    print(f"capacity: {rps:.0f} accepted/s, closed loop, {args.clients} keep-alive clients, "
          f"{args.capacity_seconds:g} s ({describe(lat)}); load average {load_now()}", flush=True)

    rate = args.rate or args.factor * rps
    flood = Flood(rate=rate, seconds=args.seconds, timeout=args.client_timeout)
    time.sleep(1.0)
    with sampling(d.pid, fds=True) as sampler:
        time.sleep(0.3)
        before, fds_before = proc_status(d.pid, "VmRSS"), fd_count(d.pid)
        with beside(d, args.strangers) as stranger_report:
            mono_offset = asyncio.run(flood_phase(d.port, flood, args.connections, maker))
        flood_end = flood.start + flood.seconds + mono_offset  # the last request's due time
        cpu = sampler.cpu(flood.start + mono_offset, flood_end)
        at_end = proc_status(d.pid, "VmRSS")
        time.sleep(max(0.0, flood_end + args.settle - time.monotonic()))
        after, after_at = proc_status(d.pid, "VmRSS"), time.monotonic() - flood_end
        hwm, fds_after = proc_status(d.pid, "VmHWM"), fd_count(d.pid)
        peak, fds_peak = sampler.peak()
    status, metrics = asyncio.run(get("127.0.0.1", d.port, "/metrics"))
    load_end = load_now()
    code = d.stop()
    counts = outcome_counts(flood)
    acked, found, rows, unacked = verify(d.db, flood)
    ok = [flood.latency[i] for i, st in enumerate(flood.status) if st == 202]
    shed = [flood.latency[i] for i, st in enumerate(flood.status) if st == 503]
    wire = [flood.service[i] for i, st in enumerate(flood.status) if st == 202]
    wire_shed = [flood.service[i] for i, st in enumerate(flood.status) if st == 503]

    print(f"flood: {rate:.0f} requests/s offered ({rate / max(rps, 1):.2f}x capacity) for "
          f"{args.seconds:g} s = {flood.n} requests, up to {args.connections} connections, client "
          f"timeout {args.client_timeout:g} s")
    print(f"  generator: {flood.opened} connections opened for {args.connections} workers; "
          f"{flood.late_sends} requests sent over 10 ms late (every worker busy)")
    print(f"  CPU during the flood: {cpu}; load average {load_end} at the end")
    print("\n".join(timeline(flood, sampler, mono_offset)))
    span = max(i / flood.rate + flood.latency[i] / 1000 for i in range(flood.n))
    print(f"summary (rates per second of the {span:.1f} s from the first request due to the last "
          "outcome; the workers drain their backlog after the schedule ends)")
    print(f"  accepted (202):        {counts['202'] / span:8.0f}/s  ({counts['202']})")
    print(f"  503 overloaded:        {counts['503 overloaded'] / span:8.0f}/s  "
          f"({counts['503 overloaded']})")
    for name, n in sorted(counts.items()):
        if name not in ("202", "503 overloaded"):
            print(f"  {name + ':':<22} {n / span:8.0f}/s  ({n})")
    print(f"  latency of the 202s (from when due): {describe(ok)}")
    print(f"  latency of the 202s (from when sent): {describe(wire)}")
    print(f"  latency of the 503s (from when due): {describe(shed)}")
    print(f"  latency of the 503s (from when sent): {describe(wire_shed)}")
    print(f"  given up by the client (timeout {args.client_timeout:g} s): "
          f"{counts[OUTCOME[GAVE_UP]]} sent and unanswered, {counts[OUTCOME[EXPIRED]]} never sent")
    print(f"  daemon RSS: before {mib(before)}, peak {mib(peak)} sampled / {mib(hwm)} VmHWM, "
          f"at the flood's end {mib(at_end)}, {after_at:.1f} s after {mib(after)}")
    print(f"  daemon open files: before {fds_before}, peak {fds_peak}, after {fds_after}")
    print(f"  daemon's own count (/metrics {status}): {accept_counts(metrics)}")
    print(f"  nothing lost: {acked} notification ids answered 202, {found} of them in the "
          f"database, {acked - found} missing; {rows} flood rows in all, {unacked} of them "
          f"without a 202 answer (given up, reset or still queued)")
    print(f"  notifyd exit status after SIGTERM: {code}")
    for line in stranger_report:
        print(f"  {line}")
    for line in d.warnings():
        print(f"  daemon log: {line}")
    print(f"  answers delivered: {acked} of the {rows} notifications the flood committed "
          f"({acked / max(rows, 1) * 100:.1f}%); accepted {counts['202'] / span:.0f}/s = "
          f"{counts['202'] / span / max(rps, 1) * 100:.0f}% of capacity")
    if acked != found:
        raise SystemExit(f"LOST: {acked - found} accepted notifications are not in the database")


@contextlib.contextmanager
def beside(d: Daemon, strangers: int) -> Iterator[list[str]]:
    """The stranger's sockets for as long as the block runs (none if `strangers` is 0); the
    list is filled with what it saw and the daemon's own counts when the block ends."""
    out: list[str] = []
    if not strangers:
        yield out
        return
    from strangers import Strangers, daemon_counts  # it imports this module

    with Strangers(d.port, strangers) as stranger:
        yield out
        out.append(f"the daemon's own counts at the flood's end: {daemon_counts(d.port, d.key)}")
        out[:0] = stranger.report().lines()


async def flood_phase(port: int, flood: Flood, connections: int,
                      maker: Callable[[str], Callable[[int], bytes]]) -> float:
    """The flood; the offset from this loop's clock to time.monotonic()."""
    offset = time.monotonic() - asyncio.get_running_loop().time()
    await flood_run(port, flood, connections, maker("flood"))
    return offset


if __name__ == "__main__":
    main()
