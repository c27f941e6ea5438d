"""Inbox figures: a page of 50 for a user with 100,000 items (target p99 <= 5 ms), badge reads
per second (target >= 5,000/s), and 1,000 open inbox streams (Server-Sent Events) that each hear
of a new item within 1 s, with the daemon's memory.

Run:   /work/main/.venv/bin/python benchmarks/inbox.py            (full: about 5 minutes)
Quick: /work/main/.venv/bin/python benchmarks/inbox.py --quick    (10,000 items, 200 streams)
Parts: --only pages,badge,streams (default all three; badge and streams fill a small inbox when
pages is left out).

Processes. This script is the orchestrator. The daemon is `python -m notifyd --config CFG serve
--port 0` (benchmarks/receipts.py's Daemon: cwd and PYTHONPATH this tree, the port read from its
"listening on" line; the header prints the notifyd/__init__.py it imports). Every timed load runs
in subprocesses of this file (`--gen MODE SPEC`): each prepares its requests, prints "ready",
starts on "go" from its stdin and writes its records to a JSON file. Times are
time.perf_counter() (CLOCK_MONOTONIC), one clock for every process on the machine, so a stream
process's arrival times and the burst process's start can be subtracted.

Set-up (untimed, through the API). A kind `bench` with `inbox = true` whose ladder is one `log`
step due a day later, so nothing is sent during the run; templates bench/en/inbox.title.j2 and
inbox.body.j2. One user ("heavy") gets --items items (100,000) and 20 others --others items
each (5,000), shuffled together so the heavy user's rows lie among its neighbours', POSTed by
64 keep-alive clients. A first full walk of the heavy inbox (1 client, every `next` cursor)
checks the pages: every item once, newest first by (created_at, id), `next` null at the end; and
the badge equals the item count.

1. pages: GET /v1/users/heavy/inbox?limit=50, closed loop for --seconds (10) each, with 1
   client and with 8: `first` (no cursor), `walk` (each client follows `next` from its own place
   in the history, back to the first page at the end) and `random` (a cursor drawn from the
   deeper half of the first walk's). p50/p99/max per variant, the daemon's CPU, and for
   comparison the page query alone on a read-only connection to the file (its EXPLAIN QUERY
   PLAN, and its time for the first and for deep cursors), which separates SQLite's share of a
   page from the HTTP handler's.
2. badge: GET /v1/users/{u}/inbox/badge over the 21 users, 64 keep-alive clients in
   --badge-procs processes (1), closed loop, --seconds: once with the producer's API key, once
   with each user's own user token (?token=). reads/s, p50/p99.
3. streams: --streams (1,000) users of the tenant, each with a user token (POST
   /v1/users/{u}/tokens), each open one stream (GET .../inbox/stream?token=) from
   --stream-procs processes (2); once every stream has its initial `badge` event, the daemon's
   RSS and open files are printed. Then one process POSTs one item to each of the users as fast
   as it can (64 connections): per stream, the time from the burst's start to its `item` event,
   p50/p99/max and how many within 1 s; each stream must get exactly its own item, with the
   badge after it at 1. Then the streams close. Variant "tabs": --streams streams of ONE user,
   a single item POSTed: the time until every stream has it (server.max_streams_per_user is
   raised for it: its default, 8, would close all but the last 8). RSS before the streams, with
   them open and after they close. Beside the figures: the resume query (Last-Event-ID on the heavy
   user, if part 1 ran) timed over HTTP, and a check on a second small daemon
   (server.max_streams = 20) of whether streams whose client went away still count as open.

A summary against the targets ends the output. Every child is stopped and the scratch folder
removed at the end (--keep keeps it), also on errors; every wait is bounded. The machine is small
and shared (figures drift by +-25%): the load average is printed at the start and end of each
part.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import os
import random
import re
import resource
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from queue import Empty, Queue
from typing import Any

import aiosqlite
import msgspec
import orjson

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from channels import ROOT, child_env, die_with_parent, stop_proc, thread_cpu  # noqa: E402
from httpload import Conn, closed_loop, percentile, post  # noqa: E402
from receipts import STARTED, Daemon, cpu_wait, loadavg, notifyd_cli  # noqa: E402

import notifyd  # noqa: E402
from notifyd.http.kit import ENCODE  # noqa: E402
from notifyd.http.people import item_view  # noqa: E402
from notifyd.shapes.people import InboxPage  # noqa: E402
from notifyd.store import InboxItem  # noqa: E402
from notifyd.store.sqlite.queries import SELECT_BADGE, SELECT_INBOX_PAGE, SELECT_INBOX_SINCE  # noqa: E402

HOST = "127.0.0.1"
TENANT = "default"
HEAVY = "heavy"
PAGE = 50
TARGET_PAGE_P99_MS = 5.0
TARGET_BADGE_PER_SEC = 5000.0
TARGET_FANOUT_SEC = 1.0
NEXT = re.compile(rb'"next": (?:"([^"]+)"|null)')

CONFIG = """
[server]
max_streams = {max_streams}
max_streams_per_user = 100000
[store]
path = "{db}"
synchronous = "{sync}"
[templates]
folder = "{templates}"
[channels.log]
type = "log"
rate_per_sec = 1000000.0
burst = 1000000
[kinds.bench]
ttl_sec = 172800
inbox = true
ladder = [ {{ channel = "log", after_sec = 86400 }} ]
"""
TEMPLATES = {
    "bench/en/inbox.title.j2": "Invoice {{ invoice }} was paid\n",
    "bench/en/inbox.body.j2": "We received {{ amount }} for invoice {{ invoice }}. Thank you.\n",
}


# --- small helpers ------------------------------------------------------------------------------


def item_body(user: str, i: int) -> bytes:
    return json.dumps({"user_id": user, "kind": "bench",
                       "params": {"amount": "12.00", "invoice": i}}).encode()


def get(path: str, headers: dict[str, str] | None = None) -> bytes:
    head = f"GET {path} HTTP/1.1\r\nHost: bench\r\n"
    head += "".join(f"{k}: {v}\r\n" for k, v in (headers or {}).items())
    return (head + "\r\n").encode()


def memory(pid: int) -> dict[str, float]:
    """The process's resident memory now and at its peak (MB), open files and threads."""
    status = Path(f"/proc/{pid}/status").read_text()
    kb = {k: int(v.split()[0]) for k, v in (ln.split(":", 1) for ln in status.splitlines())
          if k in ("VmRSS", "VmHWM")}
    return {"rss": kb["VmRSS"] / 1024, "hwm": kb["VmHWM"] / 1024,
            "fds": len(os.listdir(f"/proc/{pid}/fd")),
            "threads": len(os.listdir(f"/proc/{pid}/task"))}


def mem_line(label: str, m: dict[str, float]) -> str:
    return (f"  daemon memory {label}: RSS {m['rss']:.1f} MB (peak {m['hwm']:.1f} MB), "
            f"{m['fds']:.0f} open files, {m['threads']:.0f} threads")


def stats(values: list[float]) -> str:
    if not values:
        return "none"
    return (f"p50 {percentile(values, 50):6.2f}  p99 {percentile(values, 99):6.2f}  "
            f"max {max(values):7.2f} ms")


def raise_nofile() -> None:
    """The open-files soft limit up to the hard one: a process with 1,000+ sockets needs it."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard if hard != resource.RLIM_INFINITY
                                                    else 1 << 20, hard))


def cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


async def wait_go() -> None:
    print("ready", flush=True)
    if await asyncio.to_thread(sys.stdin.readline) != "go\n":
        raise SystemExit("the orchestrator went away before the start")


# --- load generators (--gen MODE SPEC), each its own process ---------------------------------


async def gen_loop(spec: dict[str, Any]) -> dict[str, Any]:
    """Closed loop: spec["clients"] keep-alive connections, each sending its next request as its
    last answer arrives, for spec["seconds"]; latencies in ms. Modes: pages (first, walk,
    random) and badge (each client cycles through spec["targets"], [path, headers])."""
    port, clients = spec["port"], spec["clients"]
    conns = [await Conn.open(HOST, port) for _ in range(clients)]
    rng = random.Random(spec.get("seed", 1))
    make = request_maker(spec, rng)
    lat: list[float] = []
    status: Counter[int] = Counter()
    state: list[bytes | None] = [None] * clients
    stop_at = [time.perf_counter() + spec.get("warmup", 0.5)]

    async def client(c: int, conn: Conn, record: bool) -> None:
        while time.perf_counter() < stop_at[0]:
            raw = make(c, state[c])
            began = time.perf_counter()
            code, body = await conn.request(raw)
            if record:
                lat.append((time.perf_counter() - began) * 1000)
                status[code] += 1
            state[c] = body if code == 200 else None

    await asyncio.gather(*(client(c, conn, False) for c, conn in enumerate(conns)))  # warm-up
    await wait_go()
    cpu0, t0 = cpu_s(), time.perf_counter()
    stop_at[0] = t0 + spec["seconds"]
    await asyncio.gather(*(client(c, conn, True) for c, conn in enumerate(conns)))
    wall = time.perf_counter() - t0
    for conn in conns:
        conn.close()
    return {"lat": lat, "status": dict(status), "wall": wall, "cpu": cpu_s() - cpu0}


def request_maker(spec: dict[str, Any], rng: random.Random) -> Callable[[int, bytes | None], bytes]:
    """A function (client, its last 200 body or None) -> the client's next request."""
    if spec["mode"] == "badge":
        targets = [get(path, headers) for path, headers in spec["targets"]]
        turn = [rng.randrange(len(targets)) for _ in range(spec["clients"])]

        def badge(c: int, _: bytes | None) -> bytes:
            turn[c] = (turn[c] + 1) % len(targets)
            return targets[turn[c]]

        return badge
    base, headers = f"/v1/users/{spec['user']}/inbox?limit={PAGE}", spec["headers"]
    first = get(base, headers)
    cursors = spec["cursors"]
    if spec["variant"] == "first":
        return lambda c, _: first
    if spec["variant"] == "random":
        return lambda c, _: get(f"{base}&before={rng.choice(cursors)}", headers)
    starts = [cursors[c * len(cursors) // spec["clients"]] for c in range(spec["clients"])]

    def walk(c: int, last: bytes | None) -> bytes:
        if last is None:  # its own starting place the first time, the first page after an error
            cursor, starts[c] = starts[c], ""
            return get(f"{base}&before={cursor}", headers) if cursor else first
        m = NEXT.search(last, max(0, len(last) - 200))
        return get(f"{base}&before={m.group(1).decode()}", headers) if m and m.group(1) else first

    return walk


async def gen_burst(spec: dict[str, Any]) -> dict[str, Any]:
    """One POST per user in spec["users"], all at once over spec["pool"] connections."""
    headers = {"Authorization": f"Bearer {spec['api_key']}"}
    reqs = [post("/v1/notifications", item_body(u, i), headers) for i, u in enumerate(spec["users"])]
    free: asyncio.Queue[Conn] = asyncio.Queue()
    for _ in range(min(spec["pool"], len(reqs))):
        free.put_nowait(await Conn.open(HOST, spec["port"]))
    n = len(reqs)
    answered, status, ids = [float("nan")] * n, [-1] * n, [""] * n
    await wait_go()
    t0 = time.perf_counter()

    async def one(i: int) -> None:
        conn = await free.get()
        status[i], body = await conn.request(reqs[i])
        answered[i] = (time.perf_counter() - t0) * 1000
        if status[i] == 202:
            ids[i] = json.loads(body)["notification_id"]
        free.put_nowait(conn)

    tasks = [asyncio.create_task(one(i)) for i in range(n)]
    _, late = await asyncio.wait(tasks, timeout=60)
    for t in late:
        t.cancel()
    while not free.empty():
        free.get_nowait().close()
    return {"t0": t0, "answered": [None if a != a else a for a in answered], "status": status,
            "ids": ids}


class Stream(asyncio.Protocol):
    """One inbox stream: the HTTP head, the chunked body, the events with their arrival times."""

    def __init__(self, user: str) -> None:
        self.user = user
        self.opened: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.transport: asyncio.Transport | None = None
        self.raw = bytearray()
        self.sse = bytearray()
        self.head_done, self.chunked, self.status = False, False, 0
        self.error = ""
        self.badges: list[tuple[float, int]] = []
        self.items: list[tuple[float, int, str]] = []  # arrival, event id (seq), notification id
        self.comments = 0
        self.lost: float | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        now = time.perf_counter()
        self.raw += data
        if not self.head_done:
            end = self.raw.find(b"\r\n\r\n")
            if end < 0:
                return
            head = bytes(self.raw[:end]).lower()
            del self.raw[:end + 4]
            self.head_done, self.status = True, int(head[9:12])
            self.chunked = b"transfer-encoding: chunked" in head
        if self.status != 200:
            self.error = bytes(self.raw[:300]).decode(errors="replace")
            self._settle()
            return
        self._dechunk()
        while (k := self.sse.find(b"\n\n")) >= 0:
            block = bytes(self.sse[:k])
            del self.sse[:k + 2]
            self._event(now, block)

    def _dechunk(self) -> None:
        if not self.chunked:
            self.sse += self.raw
            self.raw.clear()
            return
        while (j := self.raw.find(b"\r\n")) >= 0:
            size = int(bytes(self.raw[:j]).split(b";")[0] or b"0", 16)
            if size == 0 or len(self.raw) < j + 2 + size + 2:
                return
            self.sse += self.raw[j + 2:j + 2 + size]
            del self.raw[:j + 2 + size + 2]

    def _event(self, now: float, block: bytes) -> None:
        fields: dict[str, str] = {}
        for line in block.decode().split("\n"):
            if line.startswith(":"):
                self.comments += 1
                continue
            name, _, value = line.partition(":")
            fields[name] = value.removeprefix(" ")
        if fields.get("event") == "badge":
            self.badges.append((now, int(json.loads(fields["data"])["unread"])))
            self._settle()
        elif fields.get("event") == "item":
            self.items.append((now, int(fields.get("id", "-1")), json.loads(fields["data"])["id"]))

    def _settle(self) -> None:
        if not self.opened.done():
            self.opened.set_result(None)

    def settled(self, want: int) -> bool:
        """Has `want` items and a badge event after the last (the daemon writes the badge
        after the item, sometimes in a later packet)."""
        return len(self.items) >= want and bool(self.badges) \
            and self.badges[-1][0] >= self.items[-1][0]

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = time.perf_counter()
        self._settle()

    def record(self) -> dict[str, Any]:
        return {"user": self.user, "status": self.status, "error": self.error,
                "badges": self.badges, "items": self.items, "comments": self.comments,
                "lost": self.lost}


async def open_stream(port: int, user: str, token: str, sem: asyncio.Semaphore,
                      opens: list[float]) -> Stream | None:
    loop = asyncio.get_running_loop()
    async with sem:
        began = time.perf_counter()
        try:
            _, stream = await asyncio.wait_for(loop.create_connection(
                lambda: Stream(user), HOST, port), 10)
        except (OSError, TimeoutError):
            return None
        assert stream.transport is not None
        stream.transport.write(get(f"/v1/users/{user}/inbox/stream?token={token}",
                                   {"Accept": "text/event-stream"}))
        try:
            await asyncio.wait_for(asyncio.shield(stream.opened), 30)
        except TimeoutError:
            stream.error = "no badge event within 30 s"
        if stream.badges:
            opens.append((time.perf_counter() - began) * 1000)
        return stream


async def gen_streams(spec: dict[str, Any]) -> None:
    """Open one stream per [user, token] in spec["targets"]; print 'ready' once each has its
    initial badge event; then on 'collect S N' wait (at most S s) until each has N items and a
    badge after them, and write the records; on 'close' close them all."""
    sem = asyncio.Semaphore(spec["concurrency"])
    opens: list[float] = []
    began = time.perf_counter()
    made = await asyncio.gather(*(open_stream(spec["port"], u, t, sem, opens)
                                  for u, t in spec["targets"]))
    streams = [s for s in made if s is not None]
    live = [s for s in streams if s.badges and s.lost is None]
    failed = Counter(f"{s.status} {s.error[:120]}" for s in streams if s not in live)
    print("opened " + json.dumps({"live": len(live), "connect_failed": len(made) - len(streams),
                                  "failed": dict(failed), "open_ms": opens,
                                  "wall_s": time.perf_counter() - began}), flush=True)
    while True:
        line = await asyncio.to_thread(sys.stdin.readline)
        if line.startswith("collect"):
            deadline = time.perf_counter() + float(line.split()[1])
            want = int(line.split()[2])
            while time.perf_counter() < deadline and any(
                    not s.settled(want) and s.lost is None for s in live):
                await asyncio.sleep(0.01)
            Path(spec["out"]).write_text(json.dumps([s.record() for s in live]))
            print("collected", flush=True)
        else:  # "close", or the orchestrator is gone
            for s in streams:
                if s.transport is not None:
                    s.transport.close()
            await asyncio.sleep(0.2)
            return


def run_generator(mode: str, spec_path: Path) -> None:
    raise_nofile()
    spec = json.loads(spec_path.read_text())
    if mode == "streams":
        asyncio.run(gen_streams(spec))
        return
    result = asyncio.run(gen_burst(spec) if mode == "burst" else gen_loop(spec))  # pages, badge
    tmp = Path(spec["out"]).with_suffix(".tmp")
    tmp.write_text(json.dumps(result))
    tmp.rename(spec["out"])


# --- the orchestrator's side of a generator --------------------------------------------------


class Child:
    """A generator subprocess of this file: lines from its stdout, commands to its stdin."""

    count = 0

    def __init__(self, mode: str, spec: dict[str, Any], work: Path) -> None:
        Child.count += 1
        self.what = f"{mode}-{Child.count}"
        self.out = work / f"{self.what}.json"
        path = work / f"{self.what}-spec.json"
        path.write_text(json.dumps({**spec, "mode": mode, "out": str(self.out)}))
        self.proc = subprocess.Popen(
            [sys.executable, str(Path(__file__).resolve()), "--gen", mode, str(path)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=None, cwd=ROOT,
            env=child_env(), preexec_fn=die_with_parent)
        STARTED.append(self.proc)
        self.lines: Queue[bytes] = Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line)
        self.lines.put(b"")

    def expect(self, word: str, limit: float) -> str:
        """The rest of the next line, which must start with `word`; bounded."""
        try:
            line = self.lines.get(timeout=limit).decode()
        except Empty:
            raise SystemExit(f"{self.what}: no '{word}' within {limit:.0f} s") from None
        if not line.startswith(word):
            raise SystemExit(f"{self.what} failed (said {line.strip()[:200]!r}, not {word!r})")
        return line[len(word):].strip()

    def send(self, line: str) -> None:
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write(line.encode() + b"\n")
            self.proc.stdin.flush()
        except BrokenPipeError:
            raise SystemExit(f"{self.what} exited early") from None

    def result(self, limit: float) -> Any:
        try:
            self.proc.wait(limit)
        except subprocess.TimeoutExpired:
            raise SystemExit(f"{self.what} did not end within {limit:.0f} s") from None
        if self.proc.returncode != 0 or not self.out.exists():
            raise SystemExit(f"{self.what} exited with {self.proc.returncode}")
        return json.loads(self.out.read_text())


class Bench:
    """The run's scratch folder, config, daemon and key; figures for the summary."""

    def __init__(self, args: argparse.Namespace, work: Path) -> None:
        self.args, self.work = args, work
        self.figures: dict[str, Any] = {}
        self.cursors: list[str] = []
        self.users: list[str] = []  # users with items (the heavy one first)
        self.daemon: Daemon | None = None
        self.api_key = ""

    def start(self, name: str = "main", max_streams: int = 10000) -> tuple[Daemon, str]:
        folder = self.work / name
        folder.mkdir()
        for rel, text in TEMPLATES.items():
            (folder / "templates" / rel).parent.mkdir(parents=True, exist_ok=True)
            (folder / "templates" / rel).write_text(text)
        cfg = folder / "notifyd.toml"
        cfg.write_text(CONFIG.format(max_streams=max_streams, db=folder / "notifyd.db",
                                     sync=self.args.synchronous, templates=folder / "templates"))
        key = notifyd_cli(cfg, "keys", "create", "--name", "bench").split()[0]
        return Daemon(cfg, folder), key

    @property
    def auth(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.api_key}"}

    @property
    def port(self) -> int:
        assert self.daemon is not None
        return self.daemon.port

    @property
    def pid(self) -> int:
        assert self.daemon is not None
        return self.daemon.pid

    @property
    def db(self) -> Path:
        return self.work / "main" / "notifyd.db"

    def timed(self, mode: str, spec: dict[str, Any], procs: int = 1) -> dict[str, Any]:
        """Closed-loop generators; their latencies merged, with reads/s and both sides' CPU."""
        kids = [Child(mode, {**spec, "port": self.port, "seed": k}, self.work)
                for k in range(procs)]
        for kid in kids:
            kid.expect("ready", 60)
        cpu0, wait0, t0 = thread_cpu(self.pid), cpu_wait(self.pid), time.perf_counter()
        for kid in kids:
            kid.send("go")
        results = [kid.result(spec["seconds"] + 60) for kid in kids]
        cpu1, wall = thread_cpu(self.pid), time.perf_counter() - t0
        waited = cpu_wait(self.pid) - wait0
        lat = [x for r in results for x in r["lat"]]
        bad = Counter()
        for r in results:
            bad.update({int(k): v for k, v in r["status"].items() if int(k) != 200})
        loop, rest = (b - a for a, b in zip(cpu0, cpu1, strict=True))
        seconds = max(r["wall"] for r in results)
        return {"lat": lat, "rate": len(lat) / seconds, "bad": dict(bad),
                "loop": loop / wall, "rest": rest / wall, "waited": waited / wall,
                "per": (loop + rest) / max(len(lat), 1) * 1e6,
                "client": sum(r["cpu"] for r in results) / seconds}


def cpu_text(r: dict[str, Any]) -> str:
    """The daemon's CPU (its event loop thread, its other threads), per request, and the time
    its threads were runnable but waited for a CPU; the load generators' CPU."""
    return (f"daemon CPU loop {r['loop']:.0%} + others {r['rest']:.0%} ({r['per']:.0f} us a "
            f"request), waited for a CPU {r['waited']:.0%}; clients {r['client']:.0%}")


# --- set-up: items through the API ------------------------------------------------------------


def fill(b: Bench, heavy: int, others: int, per_other: int) -> None:
    users = [HEAVY] * heavy + [f"o{k}" for k in range(others) for _ in range(per_other)]
    random.Random(7).shuffle(users)
    began = time.perf_counter()
    rps, results = asyncio.run(closed_loop(
        HOST, b.port, 64, len(users),
        lambda i: post("/v1/notifications", item_body(users[i], i), b.auth)))
    bad = Counter(status for status, _ in results if status != 202)
    if bad:
        raise SystemExit(f"set-up: some items were refused: {dict(bad)}")
    b.users = [HEAVY] + [f"o{k}" for k in range(others)]
    print(f"set-up: {len(users)} items ({heavy} for {HEAVY}, {others} x {per_other} for others) "
          f"POSTed in {time.perf_counter() - began:.0f} s, {rps:.0f}/s (64 clients, closed loop)")


async def walk_all(port: int, auth: dict[str, str], user: str) -> dict[str, Any]:
    """Every page of the user's inbox, following `next`: the cursors, and what is wrong."""
    conn = await Conn.open(HOST, port)
    cursors: list[str] = []
    seen: set[str] = set()
    last: tuple[str, str] | None = None
    problems: list[str] = []
    count = 0
    try:
        while True:
            path = f"/v1/users/{user}/inbox?limit={PAGE}" + (
                f"&before={cursors[-1]}" if cursors else "")
            status, body = await conn.request(get(path, auth))
            if status != 200:
                problems.append(f"page {len(cursors)}: {status}")
                break
            page = json.loads(body)
            for item in page["items"]:
                key = (item["created_at"], item["id"])
                if item["id"] in seen:
                    problems.append(f"{item['id']} twice")
                if last is not None and key >= last:
                    problems.append(f"{item['id']} out of order")
                seen.add(item["id"])
                last = key
            count += len(page["items"])
            if page["next"] is None:
                break
            if len(page["items"]) != PAGE:
                problems.append(f"page {len(cursors)} has {len(page['items'])} items and a next")
            cursors.append(page["next"])
    finally:
        conn.close()
    return {"cursors": cursors, "count": count, "problems": problems}


def badge_of(port: int, auth: dict[str, str], user: str) -> int:
    async def one() -> int:
        conn = await Conn.open(HOST, port)
        try:
            status, body = await conn.request(get(f"/v1/users/{user}/inbox/badge", auth))
        finally:
            conn.close()
        return int(json.loads(body)["unread"]) if status == 200 else -status

    return asyncio.run(one())


def check_history(b: Bench, heavy: int) -> None:
    began = time.perf_counter()
    w = asyncio.run(walk_all(b.port, b.auth, HEAVY))
    b.cursors = w["cursors"]
    badge = badge_of(b.port, b.auth, HEAVY)
    ok = w["count"] == heavy and not w["problems"] and badge == heavy
    b.figures["history_ok"] = ok
    print(f"set-up: a full walk of {HEAVY}'s inbox: {len(w['cursors']) + 1} pages, {w['count']} "
          f"items of {heavy} in {time.perf_counter() - began:.1f} s; badge {badge}; "
          + ("OK (each item once, newest first, next null at the end)" if ok else
             f"WRONG: {w['problems'][:5]}"))


# --- part 1: pages ---------------------------------------------------------------------------


def decode_cursor(text: str) -> tuple[int, str]:
    at, _, nid = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)).decode().partition(".")
    return int(at), nid


def sql_alone(b: Bench) -> None:
    """The page query (and the stream's resume query) on a read-only connection to the file,
    with the daemon idle: SQLite's share of a page, apart from HTTP and the handler."""
    conn = sqlite3.connect(f"file:{b.db}?mode=ro", uri=True, timeout=10)
    try:
        args = (TENANT, HEAVY, 2**62, "", False, PAGE + 1)
        plan = " / ".join(r[3] for r in conn.execute("EXPLAIN QUERY PLAN " + SELECT_INBOX_PAGE, args))
        print(f"  page query plan (notifyd/store/sql.py SELECT_INBOX_PAGE): {plan}")
        deep = b.cursors[len(b.cursors) // 2:] or [""]
        for name, picks in (("first page", [None]), ("deep cursors", deep)):
            times = []
            rng = random.Random(3)
            for _ in range(2000):
                pick = rng.choice(picks)
                at, nid = decode_cursor(pick) if pick else (2**62, "")
                t = time.perf_counter()
                conn.execute(SELECT_INBOX_PAGE, (TENANT, HEAVY, at, nid, False, PAGE + 1)).fetchall()
                times.append((time.perf_counter() - t) * 1000)
            print(f"  the page query alone, {name:12}: {stats(times)} (2000 runs, 51 rows)")
        top = conn.execute("SELECT max(seq) FROM inbox_items WHERE user_id = ?", (HEAVY,)).fetchone()[0]
        plan = " / ".join(r[3] for r in conn.execute(
            "EXPLAIN QUERY PLAN " + SELECT_INBOX_SINCE, (TENANT, HEAVY, top - 1, 500)))
        times = []
        for _ in range(20):
            t = time.perf_counter()
            conn.execute(SELECT_INBOX_SINCE, (TENANT, HEAVY, top - 1, 500)).fetchall()
            times.append((time.perf_counter() - t) * 1000)
        b.figures["resume_sql"] = percentile(times, 50)
        print(f"  the stream's resume query (SELECT_INBOX_SINCE, Last-Event-ID = the newest item "
              f"but one, 1 row back): {stats(times)}; plan: {plan}")
        plan = " / ".join(r[3] for r in conn.execute("EXPLAIN QUERY PLAN " + SELECT_BADGE,
                                                     (TENANT, HEAVY)))
        print(f"  badge query plan: {plan}")
    finally:
        conn.close()


def us_per(fn: Callable[[], Any], n: int = 300) -> float:
    """Median microseconds of one call of fn, over n calls."""
    times = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t) * 1e6)
    return percentile(times, 50)


async def aiosqlite_us(db: Path, args: tuple[Any, ...], n: int = 300) -> float:
    """The page query as the daemon's store runs it (aiosqlite: execute, fetchall and close,
    each a hop to its thread and back; notifyd/store/sqlite/backend.py fetch), median us."""
    conn = await aiosqlite.connect(f"file:{db}?mode=ro", uri=True)
    conn.row_factory = aiosqlite.Row
    times = []
    try:
        for _ in range(n):
            t = time.perf_counter()
            async with conn.execute(SELECT_INBOX_PAGE, args) as cur:
                list(await cur.fetchall())
            times.append((time.perf_counter() - t) * 1e6)
    finally:
        await conn.close()
    return percentile(times, 50)


def page_cpu(b: Bench) -> None:
    """Where a page's CPU goes, stage by stage, with notifyd's own functions in this process:
    the query, the rows into InboxItems, item_view (two iso() datetimes an item), the JSON
    body as the handler makes it (msgspec, from the answer's Struct), the stdlib's json and
    orjson for comparison."""
    conn = sqlite3.connect(f"file:{b.db}?mode=ro", uri=True, timeout=10)
    conn.row_factory = sqlite3.Row
    args = (TENANT, HEAVY, 2**62, "", False, PAGE + 1)
    try:
        rows = conn.execute(SELECT_INBOX_PAGE, args).fetchall()
        sql = us_per(lambda: conn.execute(SELECT_INBOX_PAGE, args).fetchall())
    finally:
        conn.close()
    items = [InboxItem(*r) for r in rows]
    page = InboxPage(items=[item_view(i) for i in items[:PAGE]], next="x" * 40)
    plain = msgspec.to_builtins(page)
    parts = {"query (sqlite3, sync)": sql,
             "query through aiosqlite": asyncio.run(aiosqlite_us(b.db, args)),
             "rows -> InboxItem": us_per(lambda: [InboxItem(*r) for r in rows]),
             "item_view x 50": us_per(lambda: [item_view(i) for i in items[:PAGE]]),
             "msgspec (the answer)": us_per(lambda: ENCODE(page)),
             "json.dumps instead": us_per(lambda: json.dumps(plain).encode()),
             "orjson.dumps instead": us_per(lambda: orjson.dumps(plain))}
    print("  where a first page's CPU goes, notifyd's functions timed in this process (median "
          "us): " + ", ".join(f"{k} {v:.0f}" for k, v in parts.items())
          + f"; the body is {len(ENCODE(page))} bytes")


def part_pages(b: Bench) -> None:
    print(f"\n== 1. pages of {PAGE} for a user with {b.args.items} items (load average "
          f"{loadavg()}) ==")
    seconds = b.args.seconds
    deep = b.cursors[len(b.cursors) // 2:]
    for clients in (1, 8):
        for variant in ("first", "walk", "random"):
            r = b.timed("pages", {"variant": variant, "clients": clients, "seconds": seconds,
                                  "user": HEAVY, "headers": b.auth,
                                  "cursors": deep if variant == "random" else b.cursors})
            b.figures[f"page {variant} {clients}"] = r
            print(f"  {variant:6} {clients} client{'s' if clients > 1 else ' '}: {len(r['lat']):6d} "
                  f"pages, {r['rate']:5.0f}/s, {stats(r['lat'])}"
                  + (f", non-200 {r['bad']}" if r["bad"] else "") + f"; {cpu_text(r)}")
    sql_alone(b)
    page_cpu(b)
    print(mem_line("after the pages", memory(b.pid)))
    print(f"  (load average {loadavg()} at the end of part 1)")


# --- part 2: badge ---------------------------------------------------------------------------


def mint_tokens(b: Bench, users: list[str]) -> dict[str, str]:
    """A user token per user (POST /v1/users/{u}/tokens with the producer's key)."""
    body = json.dumps({"ttl_sec": 3600}).encode()
    rps, results = asyncio.run(closed_loop(
        HOST, b.port, 32, len(users),
        lambda i: post(f"/v1/users/{users[i]}/tokens", body, b.auth)))
    bad = Counter(status for status, _ in results if status != 201)
    if bad:
        raise SystemExit(f"minting user tokens: {dict(bad)}")
    by_user = {d["user_id"]: d["token"] for d in (json.loads(body) for _, body in results)}
    print(f"  {len(users)} user tokens minted at {rps:.0f}/s")
    return by_user


def part_badge(b: Bench) -> None:
    print(f"\n== 2. badge reads, 64 clients in {b.args.badge_procs} process(es), closed loop "
          f"(load average {loadavg()}) ==")
    tokens = mint_tokens(b, b.users)
    per = max(1, 64 // b.args.badge_procs)
    for how in ("API key", "user token"):
        targets = [[f"/v1/users/{u}/inbox/badge", b.auth] if how == "API key" else
                   [f"/v1/users/{u}/inbox/badge?token={tokens[u]}", {}] for u in b.users]
        r = b.timed("badge", {"clients": per, "seconds": b.args.seconds,
                            "targets": targets}, b.args.badge_procs)
        b.figures[f"badge {how}"] = r
        print(f"  {how:10}: {r['rate']:6.0f} reads/s, {stats(r['lat'])}"
              + (f", non-200 {r['bad']}" if r["bad"] else "") + f"; {cpu_text(r)}")
    print(f"  (load average {loadavg()} at the end of part 2)")


# --- part 3: streams -------------------------------------------------------------------------


def open_streams(b: Bench, targets: list[list[str]], label: str) -> tuple[list[Child], int]:
    procs = min(b.args.stream_procs, len(targets))
    kids = [Child("streams", {"port": b.port, "targets": targets[k::procs], "concurrency": 32},
                  b.work) for k in range(procs)]
    infos = [json.loads(kid.expect("opened", 180)) for kid in kids]
    live = sum(i["live"] for i in infos)
    failed: Counter[str] = Counter()
    for i in infos:
        failed.update(i["failed"])
    lost = sum(i["connect_failed"] for i in infos)
    print(f"  {label}: {live} of {len(targets)} streams open with their initial badge in "
          f"{max(i['wall_s'] for i in infos):.1f} s ({procs} processes, 32 opening at a time "
          f"each); connect to badge event {stats([x for i in infos for x in i['open_ms']])}"
          + (f"; refused: {dict(failed)}" if failed else "")
          + (f"; {lost} could not connect" if lost else ""))
    return kids, live


def close_streams(kids: list[Child]) -> None:
    for kid in kids:
        kid.send("close")
    for kid in kids:
        try:
            kid.proc.wait(30)
        except subprocess.TimeoutExpired:
            stop_proc(kid.proc, 5)


def burst(b: Bench, users: list[str], kids: list[Child], want: int) -> tuple[dict[str, Any],
                                                                             list[dict[str, Any]]]:
    """POST one item per entry of `users` from a process of its own, all at once; the streams'
    records once each has `want` items (at most 15 s)."""
    poster = Child("burst", {"port": b.port, "api_key": b.api_key, "users": users, "pool": 64},
                   b.work)
    poster.expect("ready", 60)
    for kid in kids:
        kid.send(f"collect 15 {want}")
    poster.send("go")
    sent = poster.result(90)
    records = []
    for kid in kids:
        kid.expect("collected", 45)
        records += json.loads(kid.out.read_text())
    bad = Counter(s for s in sent["status"] if s != 202)
    answers = [a for a in sent["answered"] if a is not None]
    print(f"  the burst: {len(users)} POST(s) from 64 connections, the last 202 at "
          f"{max(answers, default=0) / 1000:.2f} s; POST to 202 {stats(answers)}"
          + (f"; non-202 {dict(bad)}" if bad else ""))
    return sent, records


def fanout_users(b: Bench, n: int, tokens: dict[str, str]) -> dict[str, Any]:
    """One stream per user, one item per user: each stream must get its own, within 1 s."""
    users = [f"s{i}" for i in range(n)]
    before = memory(b.pid)
    print(mem_line("before the streams", before))
    kids, live = open_streams(b, [[u, tokens[u]] for u in users], "one stream per user")
    with_streams = memory(b.pid)
    print(mem_line(f"with {live} streams open", with_streams)
          + f"; {(with_streams['rss'] - before['rss']) * 1024 / max(live, 1):.1f} KB per stream")
    try:
        sent, records = burst(b, users, kids, 1)
    finally:
        close_streams(kids)
    time.sleep(1)
    after = memory(b.pid)
    print(mem_line("1 s after the streams closed", after) + " (their handlers still wait in the "
          "daemon until their next event or 25 s keepalive: see the check below)")
    expected = dict(zip(users, sent["ids"], strict=True))
    lat, wrong = [], Counter()
    for r in records:
        items = r["items"]
        if not items:
            wrong["no item"] += 1
            continue
        lat.append((items[0][0] - sent["t0"]) * 1000)
        if len(items) != 1:
            wrong[f"{len(items)} items"] += 1
        if items[0][2] != expected[r["user"]]:
            wrong["another user's item"] += 1
        if not r["badges"] or r["badges"][-1][1] != 1 or r["badges"][-1][0] < items[0][0]:
            wrong["no badge 1 after the item"] += 1
    within = sum(1 for x in lat if x <= TARGET_FANOUT_SEC * 1000)
    print(f"  burst start to each stream's item: {stats(lat)}; {within} of {n} streams within "
          f"{TARGET_FANOUT_SEC:.0f} s, {len(records)} were open"
          + (f"; WRONG: {dict(wrong)}" if wrong else "; each got exactly its own item, then "
             "badge 1"))
    return {"lat": lat, "within": within, "n": n, "wrong": dict(wrong), "before": before,
            "with": with_streams, "after": after, "live": live}


def fanout_tabs(b: Bench, n: int, token: str) -> dict[str, Any]:
    """`n` streams of one user (tabs), one item: the time until every one has it."""
    kids, live = open_streams(b, [["tabs", token]] * n, "one user's tabs")
    with_streams = memory(b.pid)
    print(mem_line(f"with {live} tabs open", with_streams))
    try:
        sent, records = burst(b, ["tabs"], kids, 1)
    finally:
        close_streams(kids)
    time.sleep(1)
    after = memory(b.pid)
    print(mem_line("1 s after the tabs closed", after))
    lat = [(r["items"][0][0] - sent["t0"]) * 1000 for r in records if r["items"]]
    wrong = sum(1 for r in records if [i[2] for i in r["items"]] != sent["ids"])
    within = sum(1 for x in lat if x <= TARGET_FANOUT_SEC * 1000)
    print(f"  POST start to each tab's item: {stats(lat)}; every tab had it after "
          f"{max(lat, default=float('nan')):.1f} ms; {within} of {n} within "
          f"{TARGET_FANOUT_SEC:.0f} s" + (f"; WRONG: {wrong} tabs did not get exactly the item"
                                          if wrong else ""))
    return {"lat": lat, "within": within, "n": n, "wrong": wrong, "with": with_streams,
            "after": after, "live": live}


async def first_event(port: int, path: str, headers: dict[str, str]) -> tuple[
        int, float, asyncio.StreamReader, asyncio.StreamWriter]:
    """Open a stream: its status and the ms to its first badge event (or to the error answer)."""
    began = time.perf_counter()
    reader, writer = await asyncio.open_connection(HOST, port)
    writer.write(get(path, headers))
    data = b""
    async with asyncio.timeout(10):
        while b"\r\n\r\n" not in data or (data[9:12] == b"200" and b"event: badge" not in data):
            chunk = await reader.read(65536)
            if not chunk:
                break
            data += chunk
    return int(data[9:12] or b"0"), (time.perf_counter() - began) * 1000, reader, writer


async def resumes(b: Bench, user: str, last_id: int, n: int) -> list[float]:
    times = []
    for _ in range(n):
        status, ms, _, writer = await first_event(b.port, f"/v1/users/{user}/inbox/stream",
                                                  {**b.auth, "Last-Event-ID": str(last_id)})
        writer.close()
        if status == 200:
            times.append(ms)
    return times


def resume_check(b: Bench) -> None:
    """Reopening a stream with Last-Event-ID (a page that reconnects) runs SELECT_INBOX_SINCE."""
    conn = sqlite3.connect(f"file:{b.db}?mode=ro", uri=True, timeout=10)
    try:
        seqs = {u: conn.execute("SELECT max(seq), count(*) FROM inbox_items WHERE user_id = ?",
                                (u,)).fetchone() for u in (HEAVY, "s0")}
    finally:
        conn.close()
    for user, (top, count) in seqs.items():
        if top is None:
            continue
        times = asyncio.run(resumes(b, user, top - 1, 10))
        b.figures[f"resume {user}"] = percentile(times, 50) if times else float("nan")
        print(f"  a stream reopened with Last-Event-ID (1 item to resend) for a user with {count} "
              f"items: connect to its badge event {stats(times)} (10 times, one after another)")


async def until_eof(reader: asyncio.StreamReader, began: float, limit: float) -> float:
    """Seconds from `began` until the stream's end (nan if it did not end within `limit`)."""
    try:
        async with asyncio.timeout(limit):
            while await reader.read(65536):
                pass
    except TimeoutError:
        return float("nan")
    except OSError:
        pass
    return time.perf_counter() - began


async def stale_rounds(daemon: Daemon, auth: dict[str, str], n: int) -> dict[str, Any]:
    """Three rounds of n streams: the first closed by the client; the second at once after it;
    after one new item to each user (which wakes the closed streams' handlers), the third, left
    open while the daemon gets SIGTERM."""
    users = [f"t{i}" for i in range(n)]
    rounds: list[Counter[int]] = []
    for step in range(3):
        got = await asyncio.gather(*(first_event(daemon.port, f"/v1/users/{u}/inbox/stream",
                                                 auth) for u in users))
        rounds.append(Counter(status for status, *_ in got))
        if step == 2:
            break
        for *_, writer in got:
            writer.close()
        await asyncio.sleep(0.5)
        if step == 1:  # each closed stream's handler wakes, writes, fails and unsubscribes
            body = [post("/v1/notifications", item_body(u, i), auth) for i, u in enumerate(users)]
            await closed_loop(HOST, daemon.port, 8, n, body.__getitem__)
            await asyncio.sleep(0.5)
    began = time.perf_counter()
    stopping = asyncio.create_task(asyncio.to_thread(daemon.stop))
    ends = await asyncio.gather(*(until_eof(reader, began, 60) for _, _, reader, _ in got))
    warnings = await stopping
    return {"rounds": rounds, "ends": ends, "stop_s": time.perf_counter() - began,
            "warnings": warnings}


def stale_check(b: Bench) -> bool:
    """A second daemon with server.max_streams = 20: 20 streams opened and closed by their
    client, then 20 again at once: are the closed ones still counted? Then SIGTERM with 20
    streams open: how soon do they end, and the daemon?"""
    n = 20
    daemon, key = b.start("stale", max_streams=n)
    try:
        r = asyncio.run(stale_rounds(daemon, {"Authorization": f"Bearer {key}"}, n))
    finally:
        daemon.stop()
    rounds = r["rounds"]
    held = rounds[1].get(200, 0) < n
    print(f"  closed streams still counted? (second daemon, server.max_streams = {n}): "
          f"{n} opened {dict(rounds[0])}, closed by the client; 0.5 s later {n} more "
          f"{dict(rounds[1])}; after one new item to each of those users, {n} more "
          f"{dict(rounds[2])}" + ("  -> YES: a stream whose client left stays open in the "
                                  "daemon until its next event or keepalive" if held else ""))
    ends = [x for x in r["ends"] if x == x]
    print(f"  SIGTERM with {n} streams open: they ended after {min(ends, default=float('nan')):.1f}"
          f" to {max(ends, default=float('nan')):.1f} s ({len(r['ends']) - len(ends)} not within 60"
          f" s); the daemon exited after {r['stop_s']:.1f} s (daemon.grace_sec 10)")
    log_summary("the second daemon", r["warnings"])
    b.figures["stop_with_streams"] = r["stop_s"]
    return held


LOG_LINE = re.compile(r"^\S+ \S+ (WARNING|ERROR) (\S+): (.*)$")


def log_summary(label: str, lines: list[str]) -> None:
    """The daemon's warning and error log lines, counted by message (users' ids folded)."""
    kinds = Counter(re.sub(r"/v1/users/[^/ ]+", "/v1/users/{u}", " ".join(m.groups()))
                    for m in map(LOG_LINE.match, lines) if m)
    if kinds:
        print(f"  ! {label} logged: " + "; ".join(f"{n} x {text[:110]}"
                                                  for text, n in kinds.most_common(4)))


def part_streams(b: Bench) -> None:
    n = b.args.streams
    print(f"\n== 3. inbox streams: {n} open, a new item to each (load average {loadavg()}) ==")
    tokens = mint_tokens(b, [f"s{i}" for i in range(n)] + ["tabs"])
    b.figures["users"] = fanout_users(b, n, tokens)
    b.figures["tabs"] = fanout_tabs(b, n, tokens["tabs"])
    if b.cursors:
        resume_check(b)
    b.figures["stale"] = stale_check(b)
    print(f"  (load average {loadavg()} at the end of part 3)")


# --- summary and main --------------------------------------------------------------------------


def verdict(ok: bool) -> str:
    return "meets " if ok else "MISSES"


def summary(b: Bench) -> None:
    f = b.figures
    print(f"\n== summary (load average {loadavg()}) ==")
    for clients in (1, 8):
        for variant in ("first", "walk", "random"):
            r = f.get(f"page {variant} {clients}")
            if r:
                p99 = percentile(r["lat"], 99)
                note = "" if clients == 1 else "  (for comparison: the target is one client's)"
                print(f"  {verdict(p99 <= TARGET_PAGE_P99_MS)} page of {PAGE}, {variant:6}, "
                      f"{clients} client(s): p99 {p99:.2f} ms (target <= {TARGET_PAGE_P99_MS:.0f}"
                      f" ms), p50 {percentile(r['lat'], 50):.2f} ms{note}")
    for how in ("API key", "user token"):
        r = f.get(f"badge {how}")
        if r:
            print(f"  {verdict(r['rate'] >= TARGET_BADGE_PER_SEC)} badge reads ({how}): "
                  f"{r['rate']:.0f}/s (target >= {TARGET_BADGE_PER_SEC:.0f}/s), p99 "
                  f"{percentile(r['lat'], 99):.2f} ms")
    for name, label in (("users", "one stream per user, an item to each"),
                        ("tabs", "one user's tabs, one item")):
        r = f.get(name)
        if r:
            ok = r["within"] == r["n"] and not r["wrong"]
            print(f"  {verdict(ok)} {r['n']} streams ({label}): {r['within']} of {r['n']} within "
                  f"{TARGET_FANOUT_SEC:.0f} s, the last after {max(r['lat'], default=float('nan')):.0f}"
                  f" ms" + (f"; wrong: {r['wrong']}" if r["wrong"] else ""))
    r = f.get("users")
    if r:
        print(f"  daemon RSS: {r['before']['rss']:.1f} MB before the streams, {r['with']['rss']:.1f}"
              f" MB with {r['live']} open, {r['after']['rss']:.1f} MB after they closed; "
              f"{f['tabs']['with']['rss']:.1f} MB with {f['tabs']['live']} tabs of one user, "
              f"{f['tabs']['after']['rss']:.1f} MB after; peak {f['tabs']['after']['hwm']:.1f} MB")
    if "history_ok" in f:
        print(f"  history walk: {'OK' if f['history_ok'] else 'WRONG'}")
    if f.get("stale"):
        print("  ! closed streams stay counted against server.max_streams until their next "
              "event or keepalive (see part 3)")


def header(args: argparse.Namespace) -> None:
    from importlib.metadata import version

    daemon_imports = subprocess.run(
        [sys.executable, "-c", "import notifyd; print(notifyd.__file__)"], cwd=ROOT,
        env=child_env(), capture_output=True, text=True, timeout=30).stdout.strip()
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, text=True,
                            capture_output=True, timeout=10).stdout.strip()
    print(f"machine: {os.cpu_count()} cores, load average {loadavg()} at start; python "
          f"{sys.version.split()[0]}, sqlite {sqlite3.sqlite_version}, aiohttp {version('aiohttp')}")
    print(f"notifyd {notifyd.__version__} at {commit or '?'}: this script imports "
          f"{notifyd.__file__}, the daemon (cwd and PYTHONPATH {ROOT}) {daemon_imports}")
    print(f"run: {args.items} items for {HEAVY}, {args.others} x {args.per_other} for others; "
          f"{args.seconds:.0f} s per timed variant; {args.streams} streams; "
          f"synchronous={args.synchronous}; parts {','.join(args.only)}")


def run(b: Bench) -> None:
    args = b.args
    b.daemon, b.api_key = b.start()
    print(mem_line("at start", memory(b.pid)))
    try:
        if "pages" in args.only:
            fill(b, args.items, args.others, args.per_other)
            check_history(b, args.items)
            print(mem_line("after the set-up", memory(b.pid)))
            part_pages(b)
        elif "badge" in args.only:
            fill(b, 1000, args.others, 50)
        if "badge" in args.only:
            part_badge(b)
        if "streams" in args.only:
            part_streams(b)
        print(mem_line("at the end", memory(b.pid)))
    finally:
        began = time.perf_counter()
        warnings = b.daemon.stop()
        print(f"\nthe daemon stopped (SIGTERM to exit) in {time.perf_counter() - began:.1f} s")
        log_summary("the daemon", warnings)


def parse_args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--quick", action="store_true",
                    help="10,000 items, 20 x 500 others, 200 streams, 3 s per variant")
    ap.add_argument("--items", type=int, help="items of the heavy user (100,000)")
    ap.add_argument("--others", type=int, default=20, help="other users with items (20)")
    ap.add_argument("--per-other", type=int, help="items of each other user (5,000)")
    ap.add_argument("--streams", type=int, help="streams open at once (1,000)")
    ap.add_argument("--seconds", type=float, help="seconds per timed variant (10)")
    ap.add_argument("--stream-procs", type=int, default=2, help="processes holding the streams")
    ap.add_argument("--badge-procs", type=int, default=1, help="processes for the badge load")
    ap.add_argument("--synchronous", default="FULL", choices=("FULL", "NORMAL", "EXTRA"))
    ap.add_argument("--only", default="pages,badge,streams",
                    help="comma-separated parts: pages, badge, streams")
    ap.add_argument("--keep", action="store_true", help="keep the scratch folder")
    ap.add_argument("--gen", nargs=2, metavar=("MODE", "SPEC"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    quick = args.quick
    args.items = args.items or (10_000 if quick else 100_000)
    args.per_other = args.per_other or (500 if quick else 5_000)
    args.streams = args.streams or (200 if quick else 1_000)
    args.seconds = args.seconds or (3.0 if quick else 10.0)
    args.only = [p.strip() for p in args.only.split(",") if p.strip()]
    unknown = set(args.only) - {"pages", "badge", "streams"}
    if unknown:
        ap.error(f"unknown part(s) {sorted(unknown)}")
    return args


def main() -> None:
    args = parse_args()
    if args.gen:
        run_generator(args.gen[0], Path(args.gen[1]))
        return
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # so the finally below runs
    raise_nofile()
    header(args)
    work = Path(tempfile.mkdtemp(prefix="notifyd-inbox-"))
    started = time.monotonic()
    b = Bench(args, work)
    try:
        run(b)
        summary(b)
    finally:
        for proc in reversed(STARTED):
            stop_proc(proc, 15)
        if args.keep:
            print(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
        print(f"took {time.monotonic() - started:.0f} s")


if __name__ == "__main__":
    main()
