"""An open-loop soak of the whole daemon: accepts at --rate per second for --seconds, half of them
resolved a second later, each ladder three webhook steps two seconds apart; what it costs and
whether every promise held.

Run:   /work/main/.venv/bin/python benchmarks/soak.py                 (1,157/s for 600 s, ~11 min)
Quick: /work/main/.venv/bin/python benchmarks/soak.py --quick         (100/s for 10 s)
Batch: /work/main/.venv/bin/python benchmarks/soak.py --batch 100    (producers that post and
       resolve in batches; the same load, figures and checks)
Also:  --rate R --seconds S, --event-loop uvloop, --profile (py-spy over the timed phase), --keep.
PostgreSQL: --postgres N runs N daemons on one fresh database (on NOTIFYD_TEST_PG's server, the
local one by default; dropped at the end), the producers' requests and resolutions spread over
them in turn; the first daemon's CPU is shown as the daemon's, the others' as peers' ("daemon
2"), RSS for the first; the database server's CPU is the machine's.

Processes, so that no client's CPU is counted as the daemon's:
- the daemon, `python -m notifyd --config CFG serve --port 0` (cwd and PYTHONPATH this tree: the
  header prints the notifyd/__init__.py it imports; the port is read from its "listening on" log
  line), with one kind "soak" whose ladder is three steps on one `webhook` channel, a window of
  2 s after each sent step (step 0 due at accept, step 1 2 s after step 0 was sent, step 2 2 s
  after step 1), the channel's token bucket out of the way (rate_per_sec 1e6, burst 1e6) and
  --concurrency (64) sends per lane; store.sqlite.synchronous FULL (the default); daemon.event_loop
  from --event-loop;
- the receiver, benchmarks/provider.py: answers 200 at once and records each call's wall-clock
  arrival (ns) and its Idempotency-Key `{notification_id}:{step_no}`;
- the accept generator (`--gen accepts`): POST /v1/notifications open loop, request i due at
  start + i / rate whatever the answers do, over 64 keep-alive connections; latency counts from
  when the request was due (a wait for a free connection is in it: no coordinated omission). For
  each even-numbered request answered 202 it writes the id and the answer's wall-clock time down
  a pipe to
- the resolver (`--gen resolver`): POST /v1/notifications/{id}/resolve 1 s after that 202, open
  loop too (a timer per notification), over 16 keep-alive connections, latency from its due time.

--batch N (default 0: the single calls above) makes both producers post in batches instead:
- the accept generator posts N items at a time to POST /v1/notifications/batch, open loop, batch j
  (items jN to jN + N - 1) due at start + j * N / rate; latency counts per batch from its due
  time; each item's status and id come from its place in the answer's results;
- the resolver collects, every RESOLVE_EVERY_S (0.1 s), the even-numbered notifications whose
  resolve time (1 s after the 202) has come and posts them as one POST /v1/resolutions/batch (by
  user_id + dedup_key, the only way that call names a notification; at most 1,000 a request),
  open loop too: a batch's latency counts from the earliest due item in it, so the wait for the
  tick is in it. An item answered for another notification id than the accept's is counted apart.
Accept latency, the resolver's and the target's accept p99 are then per batch; every other figure
and check is per notification as in single mode.

Figures: offered and achieved accept rate, accept latency p50/p99/max and non-2xx by status (the
resolver's beside it); due lag per step (A, B, C = steps 0, 1, 2: the receiver's first arrival -
the step's send_after, epoch ms from the database read after the daemon stopped; one wall
clock), p50/p99/max, and p99 by fifth of the run; the backlog when the accept schedule ends
(steps due and not sent: pending or unknown with send_after <= now, and sending) and the drain
time until none is left (bounded); the daemon's CPU over the timed phase, in all and per thread
(/proc/PID/task/*/stat; the main thread is the event loop; thread names from `py-spy dump` when
py-spy is installed, else the kernel's comm), as ms per notification, with each thread's time
runnable but waiting for a core (/proc/.../schedstat); the receiver's and the generators' CPU
and wait beside it, and the whole machine's busy time (/proc/stat), so that what the other
processes on a shared machine took is a figure; VmRSS, the steps due and not claimed and those in
flight every 5 s, and VmHWM.

Correctness, from the receiver's records and the database, each of which must be 0 (the script
exits 1 otherwise):
- sends after resolution: attempts whose claim came after the notification's resolution
  committed. The resolve handler and the scanner each read the clock (ms) and queue their write
  on the one FIFO writer in the same event-loop step, so commit order is the order of those
  times: an attempt with started_at > resolved_at was claimed by a transaction that ran after
  the resolution's commit (promise 3 says it must have been cancelled). started_at ==
  resolved_at (the same ms, order unknown) is printed apart, not counted. A step claimed before
  the resolution may still arrive after it: that is the in-flight one, allowed;
- early claims: a step whose first arrival at the receiver (floored to the ms) is before its
  send_after;
- repeated keys: an Idempotency-Key that reached the receiver more than once;
- resolved notifications with a step 1 or 2 claimed after the resolution (those of the above on
  the ladder's later steps, counted per notification). Steps 1/2 of resolved notifications that
  went out before the resolution are printed too: the workload resolves at +1 s and step 1 is not
  due before +2 s, so they mean the resolver ran late, not a broken promise.
Beside them: sent steps that never reached the receiver, calls that match no step, and the
steps' final states (resolved: step 0 sent, 1 and 2 cancelled; others: all three sent). A
resolved notification's step 0 may end cancelled instead, when its send was so late that the
resolution came first: correct, and counted apart, since it means a due lag over 1 s.

The last line weighs the run against the target (1,157/s for 10 min, due lag p99 <= 100
ms, accept p99 <= 50 ms (per batch with --batch), correctness counts zero, RSS flat): achieved
within 1% of the offered rate, every step's p99 under 100 ms, and the last RSS sample within 10%
(+5 MiB) of the first one after the first fifth of the run.

Every child is stopped and the scratch folder removed at the end (--keep, or --profile, keeps
it), also on errors; every wait is bounded. The machine is small and shared: the load average is
printed at the start and the end, and the other processes on it move every figure.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import heapq
import http.client
import json
import math
import os
import queue
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
from array import array
from collections import Counter
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, NamedTuple

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from channels import (  # noqa: E402
    ROOT,
    child_env,
    die_with_parent,
    free_port,
    orphan_watch,
    stop_proc,
    wait_listening,
)
from httpload import Conn, percentile, post  # noqa: E402
from receipts import STARTED, Daemon, Generator, loadavg, notifyd_cli, ro  # noqa: E402

import notifyd  # noqa: E402

HOST = "127.0.0.1"
KIND = "soak"
WINDOW_SEC = 2
RESOLVE_AFTER_S = 1.0
RESOLVE_EVERY_S = 0.1  # --batch: how often the resolver posts what has come due
MAX_BATCH = 1000  # items a batch call takes
SAMPLE_EVERY_S = 5.0
ACCEPT_POOL, RESOLVE_POOL = 64, 16
TARGET = {"rate": 1157.0, "seconds": 600.0, "lag_p99": 100.0, "accept_p99": 50.0}
CLK_TCK = os.sysconf("SC_CLK_TCK")

CONFIG = """
[store]
url = "{db}"
synchronous = "FULL"
[daemon]
event_loop = "{event_loop}"
[channels.hook]
type = "webhook"
url = "http://127.0.0.1:{receiver}/hook"
timeout_sec = 10
rate_per_sec = 1000000.0
burst = 1000000
urgent_concurrency = {concurrency}
bulk_concurrency = {concurrency}
[kinds.{kind}]
ttl_sec = 3600
ladder = [ {{ channel = "hook", timeout_sec = {w} }}, {{ channel = "hook", timeout_sec = {w} }},
           {{ channel = "hook" }} ]
"""


# --- the accept generator (--gen accepts SPEC) -------------------------------------------------


def ref(i: int) -> dict[str, str]:
    """Notification i's user_id and dedup_key: what a resolution by key names it by."""
    return {"user_id": f"u{i % 5000}", "dedup_key": f"soak-{i}"}


def accept_item(i: int) -> dict[str, Any]:
    return {**ref(i), "kind": KIND, "params": {"amount": "12.00", "invoice": i}}


def accept_body(i: int) -> bytes:
    return json.dumps(accept_item(i)).encode()


def batch_results(status: int, body: bytes, size: int) -> list[dict[str, Any]]:
    """A batch answer's results, one per item; the batch's own status for each when it was not
    200 or its results do not line up with the items."""
    if status == 200:
        results = json.loads(body).get("results")
        if isinstance(results, list) and len(results) == size:
            return results
    return [{"status": status if status != 200 else -2}] * size


async def wait_go() -> None:
    print("ready", flush=True)
    if await asyncio.to_thread(sys.stdin.readline) != "go\n":
        raise SystemExit("the orchestrator went away before the start")


async def open_pool(port: int, size: int) -> asyncio.Queue[Conn]:
    free: asyncio.Queue[Conn] = asyncio.Queue()
    for _ in range(size):
        free.put_nowait(await Conn.open(HOST, port))
    return free


async def exchange(free: asyncio.Queue[Conn], port: int, raw: bytes) -> tuple[int, bytes]:
    """One request on a pooled connection; status 0 when the connection failed (it is
    replaced, or the pool shrinks by one)."""
    conn = await free.get()
    try:
        status, body = await conn.request(raw)
    except (OSError, asyncio.IncompleteReadError, ValueError):
        conn.close()
        with contextlib.suppress(OSError):
            free.put_nowait(await Conn.open(HOST, port))
        return 0, b""
    free.put_nowait(conn)
    return status, body


async def finish(tasks: set[asyncio.Task[None]], limit: float) -> int:
    """Wait (bounded) for the requests still out; cancel the rest; how many were cancelled."""
    if not tasks:
        return 0
    _, late = await asyncio.wait(tasks, timeout=limit)
    for t in late:
        t.cancel()
    return len(late)


class Pools:
    """Keep-alive connections to each daemon (--postgres N: several), the requests spread over
    them in turn."""

    def __init__(self, ports: list[int]) -> None:
        self.ports, self.turn = ports, 0
        self.free: list[asyncio.Queue[Conn]] = []

    async def open(self, size: int) -> Pools:
        self.free = [await open_pool(p, max(1, size // len(self.ports))) for p in self.ports]
        return self

    def exchange(self, raw: bytes) -> Awaitable[tuple[int, bytes]]:
        k, self.turn = self.turn % len(self.ports), self.turn + 1
        return exchange(self.free[k], self.ports[k], raw)

    def close(self) -> None:
        for free in self.free:
            while not free.empty():
                free.get_nowait().close()


async def accept_loop(spec: dict[str, Any]) -> dict[str, Any]:
    """POST request i when due (t0 + i / rate), or with --batch N batch j of items jN.. when due
    (t0 + j * N / rate); per item (ms after t0): its request began, answered, status (0:
    connection failed, -1: no answer in time, -2: a batch answer without its results), and with
    batches the same per batch. Even ones answered 202 go down the pipe to the resolver as
    "id answered_ns i"."""
    loop = asyncio.get_running_loop()
    pipe, _ = await loop.connect_write_pipe(asyncio.Protocol, os.fdopen(spec["pipe_fd"], "wb", 0))
    rate, n, size = spec["rate"], spec["count"], spec["batch"]
    headers = {"Authorization": f"Bearer {spec['api_key']}"}
    pools = await Pools(spec["ports"]).open(ACCEPT_POOL)
    began, answered = array("d", [math.nan]) * n, array("d", [math.nan]) * n
    status = array("i", [-1]) * n
    batches = math.ceil(n / size) if size else 0
    b_began, b_answered = array("d", [math.nan]) * batches, array("d", [math.nan]) * batches
    b_status = array("i", [-1]) * batches
    tasks: set[asyncio.Task[None]] = set()
    gc.collect()
    gc.freeze()
    await wait_go()
    t0, epoch0 = time.perf_counter(), time.time()

    async def one(i: int) -> None:
        began[i] = (time.perf_counter() - t0) * 1000
        st, body = await pools.exchange(post("/v1/notifications", accept_body(i), headers))
        answered[i], status[i] = (time.perf_counter() - t0) * 1000, st
        if st == 202 and i % 2 == 0:
            nid = json.loads(body)["notification_id"]
            pipe.write(f"{nid} {time.time_ns()} {i}\n".encode())

    async def batch(j: int) -> None:
        items = range(j * size, min(n, (j + 1) * size))
        b_began[j] = (time.perf_counter() - t0) * 1000
        raw = json.dumps({"items": [accept_item(i) for i in items]}).encode()
        st, body = await pools.exchange(post("/v1/notifications/batch", raw, headers))
        b_answered[j], b_status[j] = (time.perf_counter() - t0) * 1000, st
        now_ns, lines = time.time_ns(), []
        for i, r in zip(items, batch_results(st, body, len(items)), strict=True):
            began[i], answered[i], status[i] = b_began[j], b_answered[j], r["status"]
            if r["status"] == 202 and i % 2 == 0:
                lines.append(f"{r['notification_id']} {now_ns} {i}\n")
        pipe.write("".join(lines).encode())

    per = size or 1  # items per request
    for k in range(batches if size else n):
        await asyncio.sleep(max(t0 + k * per / rate - time.perf_counter(), 0.0))  # a yield when late
        task = asyncio.create_task(batch(k) if size else one(k))
        tasks.add(task)
        task.add_done_callback(tasks.discard)
    sent_by = (time.perf_counter() - t0) * 1000
    cancelled = await finish(tasks, spec["answer_limit"])
    print("answered", flush=True)  # the orchestrator's drain clock needs no more than this
    for _ in range(100):  # bounded: let the pipe's buffer reach the resolver, then close it
        if pipe.get_write_buffer_size() == 0:
            break
        await asyncio.sleep(0.05)
    pipe.close()
    pools.close()
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return {"began": list(began), "answered": list(answered), "status": list(status),
            "batch": size, "b_began": list(b_began), "b_answered": list(b_answered),
            "b_status": list(b_status), "rate": rate, "epoch0": epoch0, "sent_by_ms": sent_by,
            "cancelled": cancelled, "cpu_s": usage.ru_utime + usage.ru_stime}


# --- the resolver (--gen resolver SPEC) ----------------------------------------------------------


async def resolve_loop(spec: dict[str, Any]) -> dict[str, Any]:
    """Read "id answered_ns i" lines from the pipe; resolve each 1 s after its answer, open loop
    (with --batch, in batches: resolve_batches). Per resolve: id, due, began, answered (epoch
    ns), status."""
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=1 << 20)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader),
                                 os.fdopen(spec["pipe_fd"], "rb", 0))
    headers = {"Authorization": f"Bearer {spec['api_key']}"}
    pools = await Pools(spec["ports"]).open(RESOLVE_POOL)
    out: dict[str, list[Any]] = {k: [] for k in ("id", "due", "began", "answered", "status")}
    tasks: set[asyncio.Task[None]] = set()
    body = b'{"resolution": "soak"}'
    print("ready", flush=True)

    async def one(nid: str, due: int) -> None:
        await asyncio.sleep(max(due - time.time_ns(), 0) / 1e9)
        began = time.time_ns()
        st, _ = await pools.exchange(post(f"/v1/notifications/{nid}/resolve", body, headers))
        for k, v in (("id", nid), ("due", due), ("began", began), ("answered", time.time_ns()),
                     ("status", st)):
            out[k].append(v)

    if spec["batch"]:
        await resolve_batches(reader, pools.exchange, headers, out, tasks)
    else:
        while line := await reader.readline():  # EOF: the accept generator is done
            nid, answered_ns, _ = line.split()
            due = int(answered_ns) + int(RESOLVE_AFTER_S * 1e9)
            task = asyncio.create_task(one(nid.decode(), due))
            tasks.add(task)
            task.add_done_callback(tasks.discard)
    out["cancelled"] = [await finish(tasks, spec["answer_limit"] + RESOLVE_AFTER_S)]
    pools.close()
    usage = resource.getrusage(resource.RUSAGE_SELF)
    out["cpu_s"] = [usage.ru_utime + usage.ru_stime]
    return out


async def resolve_batches(reader: asyncio.StreamReader,
                          send: Callable[[bytes], Awaitable[tuple[int, bytes]]],
                          headers: dict[str, str], out: dict[str, list[Any]],
                          tasks: set[asyncio.Task[None]]) -> None:
    """Every RESOLVE_EVERY_S, the notifications whose resolve time has come as one POST
    /v1/resolutions/batch (at most MAX_BATCH items a request), sent without waiting for the
    ones before; until EOF on the pipe and nothing left to resolve. Per item as resolve_loop, its
    status from its result (-2: answered for another notification); per batch: its earliest
    due, began, answered (epoch ns), status and size."""
    for k in ("b_due", "b_began", "b_answered", "b_status", "b_size"):
        out[k] = []
    due: list[tuple[int, int, str]] = []  # (resolve at ns, i, id), a heap: answers come unordered

    async def read() -> None:
        while line := await reader.readline():
            nid, answered_ns, i = line.split()
            heapq.heappush(due, (int(answered_ns) + int(RESOLVE_AFTER_S * 1e9), int(i),
                                 nid.decode()))

    async def batch(items: list[tuple[int, int, str]]) -> None:
        began = time.time_ns()
        raw = json.dumps({"items": [{**ref(i), "resolution": "soak"} for _, i, _ in items]})
        st, body = await send(post("/v1/resolutions/batch", raw.encode(), headers))
        answered = time.time_ns()
        for (at, _, nid), r in zip(items, batch_results(st, body, len(items)), strict=True):
            item = r["status"] if r.get("notification_id", nid) == nid else -2
            for k, v in (("id", nid), ("due", at), ("began", began), ("answered", answered),
                         ("status", item)):
                out[k].append(v)
        for k, v in (("b_due", items[0][0]), ("b_began", began), ("b_answered", answered),
                     ("b_status", st), ("b_size", len(items))):
            out[k].append(v)

    reading = asyncio.create_task(read())
    t0, tick = time.monotonic(), 0
    while not reading.done() or due:
        tick += 1
        await asyncio.sleep(max(t0 + tick * RESOLVE_EVERY_S - time.monotonic(), 0.0))
        now, ready = time.time_ns(), []
        while due and due[0][0] <= now:
            ready.append(heapq.heappop(due))
        for first in range(0, len(ready), MAX_BATCH):  # popped in due order: [0] is the earliest
            task = asyncio.create_task(batch(ready[first:first + MAX_BATCH]))
            tasks.add(task)
            task.add_done_callback(tasks.discard)
    await reading


def run_generator(what: str, spec_path: Path) -> None:
    spec = json.loads(spec_path.read_text())

    async def main() -> dict[str, Any]:
        watch = asyncio.create_task(orphan_watch())
        work = asyncio.create_task(accept_loop(spec) if what == "accepts" else resolve_loop(spec))
        await asyncio.wait([watch, work], return_when=asyncio.FIRST_COMPLETED)
        if not work.done():
            raise SystemExit(f"{what}: the orchestrator is gone")
        watch.cancel()
        return work.result()

    result = asyncio.run(main())
    tmp = Path(spec["out"]).with_suffix(".tmp")
    tmp.write_text(json.dumps(result))
    tmp.rename(spec["out"])


class Child(Generator):
    """receipts.Generator (ready / go / result) for this file's --gen, with a pipe end passed."""

    def __init__(self, what: str, spec: dict[str, Any], work: Path, fd: int) -> None:
        self.what = what
        self.out = work / f"{what}.json"
        path = work / f"{what}-spec.json"
        path.write_text(json.dumps({**spec, "out": str(self.out), "pipe_fd": fd}))
        self.proc = subprocess.Popen(
            [sys.executable, str(Path(__file__).resolve()), "--gen", what, str(path)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=None, cwd=ROOT,
            env=child_env(), preexec_fn=die_with_parent, pass_fds=(fd,))
        STARTED.append(self.proc)
        self.lines: queue.Queue[bytes] = queue.Queue()
        self.all_answered = False
        threading.Thread(target=self._read, daemon=True).start()

    def answered(self) -> bool:
        """Whether the generator said every request was answered (or given up on)."""
        while not self.all_answered:
            try:
                line = self.lines.get_nowait()
            except queue.Empty:
                break
            self.all_answered = line in (b"answered\n", b"")
        return self.all_answered


# --- the orchestrator: processes and samples ---------------------------------------------------


class Receiver:
    """benchmarks/provider.py as a subprocess, and its control calls."""

    def __init__(self) -> None:
        self.port = free_port()
        self.proc = subprocess.Popen([sys.executable, str(HERE / "provider.py"), str(self.port)],
                                     cwd=ROOT, env=child_env(), preexec_fn=die_with_parent)
        STARTED.append(self.proc)
        wait_listening(self.proc, self.port, "receiver")

    def call(self, method: str, path: str, body: str = "") -> str:
        conn = http.client.HTTPConnection(HOST, self.port, timeout=120)
        try:
            conn.request(method, path, body=body.encode())
            return conn.getresponse().read().decode()
        finally:
            conn.close()

    def dump(self, path: Path) -> int:
        return int(self.call("POST", "/_dump", str(path)))


def threads(pid: int) -> dict[int, tuple[str, float, float, float]]:
    """Each live thread's comm, CPU seconds (user + system), of them in the kernel, and seconds
    it was runnable but waited for a core (schedstat's run delay; 0 where the kernel keeps
    none)."""
    out: dict[int, tuple[str, float, float, float]] = {}
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for tid in tids:
        try:
            stat = Path(f"/proc/{pid}/task/{tid}/stat").read_text()
        except OSError:  # the thread ended between listing and reading
            continue
        try:
            waited = int(Path(f"/proc/{pid}/task/{tid}/schedstat").read_text().split()[1]) / 1e9
        except (OSError, IndexError, ValueError):
            waited = 0.0
        comm = stat[stat.index("(") + 1:stat.rindex(")")]
        fields = stat.rsplit(")", 1)[1].split()
        out[int(tid)] = (comm, (int(fields[11]) + int(fields[12])) / CLK_TCK,
                         int(fields[12]) / CLK_TCK, waited)
    return out


def machine_cpu() -> tuple[float, float]:
    """The whole machine's CPU seconds busy (steal included) and stolen by the hypervisor, from
    /proc/stat."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    busy = sum(fields[:8]) - fields[3] - fields[4]  # all but idle and iowait
    return busy / CLK_TCK, (fields[7] if len(fields) > 7 else 0) / CLK_TCK


def process_cpu(pid: int) -> float:
    """CPU seconds of the whole process, threads that ended included."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def status_kb(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return 0


PYSPY_THREAD = re.compile(r"^Thread (?:0x[0-9a-fA-F]+ )?\(?(\d+)\)?.*?: \"(.*)\"", re.MULTILINE)


def pyspy() -> str | None:
    found = Path(sys.executable).parent / "py-spy"
    return str(found) if found.exists() else shutil.which("py-spy")


def thread_names(pid: int, blocking: bool) -> dict[int, str]:
    """Python thread names by native id, from `py-spy dump` (empty without py-spy)."""
    exe = pyspy()
    if exe is None:
        return {}
    try:
        text = subprocess.run([exe, "dump", "--pid", str(pid)]
                              + ([] if blocking else ["--nonblocking"]),
                              capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return {}
    return {int(m.group(1)): m.group(2) for m in PYSPY_THREAD.finditer(text)}


DUE_UNSENT = """SELECT
  (SELECT count(*) FROM steps WHERE state IN ('pending', 'unknown') AND send_after <= ?),
  (SELECT count(*) FROM steps WHERE state = 'sending'),
  (SELECT count(*) FROM steps WHERE state IN ('pending', 'unknown'))"""


def due_unsent(db: Path | str) -> tuple[int, int, int]:
    """(due and not claimed, in flight, open in all) now, read-only."""
    if isinstance(db, str):  # a PostgreSQL URL (--postgres)
        import psycopg

        with psycopg.connect(db) as pg:
            got = pg.execute(DUE_UNSENT.replace("?", "%s"), (time.time_ns() // 1_000_000,))
            one = got.fetchone()
        assert one is not None
        return int(one[0]), int(one[1]), int(one[2])
    conn = ro(db)
    try:
        row = conn.execute(DUE_UNSENT, (time.time_ns() // 1_000_000,)).fetchone()
    finally:
        conn.close()
    return int(row[0]), int(row[1]), int(row[2])


class Sample(NamedTuple):
    at: float  # seconds since the start
    rss_kb: int  # the daemon's VmRSS
    due: int  # steps due and not claimed
    sending: int  # steps in flight: claimed, their completion not yet committed
    busy: float  # the machine's CPU seconds busy so far (machine_cpu)
    ours: float  # the CPU seconds so far of the daemon, the receiver and the generators


class Sampler(threading.Thread):
    """A Sample every SAMPLE_EVERY_S until stopped; pids[0] is the daemon."""

    def __init__(self, pids: list[int], db: Path | str, t0: float) -> None:
        super().__init__(daemon=True)
        self.pids, self.db, self.t0 = pids, db, t0
        self.samples: list[Sample] = []
        self.done = threading.Event()

    def run(self) -> None:
        k = 0
        while not self.done.wait(max(self.t0 + k * SAMPLE_EVERY_S - time.monotonic(), 0)):
            try:
                due, sending, _ = due_unsent(self.db)
                rss = status_kb(self.pids[0], "VmRSS")
                ours = sum(process_cpu(pid) for pid in self.pids)
            except (OSError, sqlite3.Error):
                return  # the daemon (or a peer) is gone
            self.samples.append(Sample(time.monotonic() - self.t0, rss, due, sending,
                                       machine_cpu()[0], ours))
            k += 1


# --- the run -------------------------------------------------------------------------------------


class Phase:
    """What the timed phase left: the generators' records and the daemon's samples."""

    accepts: dict[str, Any]
    resolves: dict[str, Any]
    cpu: dict[str, Any]
    backlog: tuple[int, int, int]
    drain_s: float | None
    finished_s: float | None
    samples: list[Sample]
    hwm_kb: int
    load_end: str
    profile: Path | None = None


def start_clients(args: argparse.Namespace, work: Path, ports: list[int],
                  api_key: str) -> tuple[Child, Child]:
    read_fd, write_fd = os.pipe()
    common = {"ports": ports, "api_key": api_key, "answer_limit": 60.0, "batch": args.batch}
    try:
        resolver = Child("resolver", common, work, read_fd)
        accepts = Child("accepts", {**common, "rate": args.rate,
                                    "count": int(args.rate * args.seconds)}, work, write_fd)
    finally:
        os.close(read_fd)  # the children hold their ends: EOF reaches the resolver when the
        os.close(write_fd)  # accept generator exits
    resolver.wait_ready(60)
    accepts.wait_ready(120)
    return accepts, resolver


def start_profile(args: argparse.Namespace, work: Path, pid: int) -> tuple[Any, Path] | None:
    exe = pyspy() if args.profile else None
    if args.profile and exe is None:
        print("  ! --profile: py-spy not found; no profile")
    if exe is None:
        return None
    # --gil: only the thread holding the GIL is sampled, so the profile shows what the one core
    # the interpreter can use is spent on; raw (folded stacks) is what profile_summary reads.
    out = work / "profile.folded"
    proc = subprocess.Popen([exe, "record", "--pid", str(pid), "--duration", str(int(args.seconds)),
                             "--rate", "200", "--nonblocking", "--threads", "--gil", "--format",
                             "raw", "--output", str(out)],
                            stdout=subprocess.DEVNULL, stderr=(work / "py-spy.log").open("wb"))
    STARTED.append(proc)
    return proc, out


# Where a sample's stack says the GIL holder is: the first pattern found in its frames, leaf
# first, names the part of the daemon (a rough map from code to where the time goes).
PARTS = (("writer (SQLite work)", ("notifyd/store/",)),
         ("sending (adapter, aiohttp client)", ("channels/", "aiohttp/client", "aiohttp/connector")),
         ("HTTP API (aiohttp server, handlers)", ("aiohttp/web", "aiohttp/http_", "notifyd/http/",
                                                  "notifyd/engine/ingest.py")),
         ("scanner and sender pool", ("notifyd/engine/scanner.py", "notifyd/engine/sender.py")),
         ("aiosqlite reader", ("aiosqlite/",)),
         ("event loop plumbing", ("asyncio/", "uvloop/", "selectors.py")))


def profile_summary(path: Path, top: int = 25) -> None:
    """The GIL holder's samples by part of the daemon and its 25 busiest leaf functions."""
    parts: Counter[str] = Counter()
    leaves: Counter[str] = Counter()
    total = 0
    for line in path.read_text(errors="replace").splitlines():
        stack, _, count = line.rpartition(" ")
        if not count.isdigit():
            continue
        n = int(count)
        frames = stack.split(";")
        total += n
        leaves[re.sub(r"\(/\S*?/(site-packages|python3\.\d+|notifyd)/", "(", frames[-1])] += n
        part = next((name for frame in reversed(frames) for name, marks in PARTS
                     if any(m in frame for m in marks)), "other")
        parts[part] += n
    if not total:
        return
    print(f"  GIL held in {total} samples; by part (innermost match):")
    for name, n in parts.most_common():
        print(f"    {100 * n / total:5.1f}%  {name}")
    print("  busiest leaf functions:")
    for name, n in leaves.most_common(top):
        print(f"    {100 * n / total:5.1f}%  {name}")


def wait_until(limit: float, probe: Any) -> float | None:
    """Poll probe() every 0.1 s until it is true: the time.monotonic() then; None past the limit."""
    began = time.monotonic()
    while time.monotonic() - began < limit:
        if probe():
            return time.monotonic()
        time.sleep(0.1)
    return None


def sleep_through(end: float, daemon: Daemon) -> None:
    """Sleep until time.monotonic() reaches end; stop early if the daemon exits."""
    while (left := end - time.monotonic()) > 0:
        if daemon.proc.poll() is not None:
            raise SystemExit(f"notifyd exited with {daemon.proc.returncode} in the timed phase; "
                             f"log {daemon.log}")
        time.sleep(min(left, 1.0))


def cpu_snapshot(pid: int, peers: dict[str, int]) -> dict[str, Any]:
    """The daemon's threads and CPU; each peer process's (receiver, generators) CPU and wait
    for a core, summed over its threads; the machine's."""
    return {"threads": threads(pid), "total": process_cpu(pid), "at": time.monotonic(),
            "peers": {name: [sum(t[k] for t in threads(p).values()) for k in (1, 3)]
                      for name, p in peers.items()},
            "machine": machine_cpu()}


def timed_phase(args: argparse.Namespace, work: Path, daemons: list[Daemon], db: Path | str,
                api_key: str, receiver: int) -> Phase:
    ph = Phase()
    daemon = daemons[0]  # with --postgres N, the others' CPU is shown as peers'
    accepts, resolver = start_clients(args, work, [d.port for d in daemons], api_key)
    names = thread_names(daemon.pid, blocking=True)
    profile = start_profile(args, work, daemon.pid)
    peers = {"receiver": receiver, "accept generator": accepts.proc.pid,
             "resolver": resolver.proc.pid,
             **{f"daemon {i}": d.pid for i, d in enumerate(daemons[1:], 2)}}
    cpu0 = cpu_snapshot(daemon.pid, peers)
    t0 = time.monotonic()
    sampler = Sampler([daemon.pid, *peers.values()], db, t0)
    sampler.start()
    accepts.go()
    end = t0 + args.seconds
    sleep_through(end, daemon)
    cpu1 = cpu_snapshot(daemon.pid, peers)
    ph.backlog, ph.load_end = due_unsent(db), loadavg()
    names.update({t: n for t, n in thread_names(daemon.pid, blocking=False).items()
                  if t not in names})
    # drained: every accept answered (a late one adds a due step) and no step due and unsent
    drained = wait_until(120 + ph.backlog[2] / 100,
                         lambda: accepts.answered() and sum(due_unsent(db)[:2]) == 0)
    ph.drain_s = None if drained is None else drained - end
    ph.accepts = accepts.result(120)
    ph.resolves = resolver.result(120)
    done = wait_until(30 + ph.backlog[2] / 100, lambda: sum(due_unsent(db)[1:]) == 0)
    ph.finished_s = None if done is None else done - end
    cpu2 = cpu_snapshot(daemon.pid, peers)
    sampler.done.set()
    sampler.join(10)
    ph.samples, ph.hwm_kb = sampler.samples, status_kb(daemon.pid, "VmHWM")
    ph.cpu = {"before": cpu0, "phase_end": cpu1, "finished": cpu2, "names": names}
    if profile is not None:
        try:
            profile[0].wait(60)
        except subprocess.TimeoutExpired:
            print("  ! py-spy did not end within 60 s of the phase; stopped")
        ph.profile = profile[1]
    return ph


# --- figures -------------------------------------------------------------------------------------


def p50_99_max(values: list[float]) -> str:
    if not values:
        return "none"
    return (f"p50 {percentile(values, 50):7.1f}   p99 {percentile(values, 99):7.1f}   "
            f"max {max(values):7.1f} ms")


def accept_figures(args: argparse.Namespace, r: dict[str, Any]) -> dict[str, float]:
    """Items answered 2xx and the rate within the phase; latency per request: each single POST,
    or each batch (from its due time) with --batch."""
    n, rate, secs, size = len(r["status"]), r["rate"], args.seconds, r["batch"]
    ok = [i for i, s in enumerate(r["status"]) if 200 <= s < 300]
    bad = Counter(s for s in r["status"] if not 200 <= s < 300)
    in_phase = sum(1 for i in ok if r["answered"][i] <= secs * 1000)
    per, pre = (size, "b_") if size else (1, "")
    began, answered, status = r[pre + "began"], r[pre + "answered"], r[pre + "status"]
    due = [k * per / rate * 1000 for k in range(len(status))]
    answers = [k for k, s in enumerate(status) if 200 <= s < 300]
    lat = [answered[k] - due[k] for k in answers]
    late = [began[k] - due[k] for k in range(len(status)) if began[k] == began[k]]
    requests = f"{len(status)} batches of {size}" if size else f"{n} requests"
    print(f"accepts: offered {rate:.0f}/s for {secs:.0f} s ({n} notifications, {requests}, the "
          f"last sent by {r['sent_by_ms'] / 1000:.2f} s); achieved {in_phase / secs:.0f} 2xx/s "
          f"within the phase, {len(ok)} 2xx in all; non-2xx by status {dict(bad) or 'none'}"
          f" (0: connection failed, -1: no answer within 60 s"
          + ("; -2: the batch answered without a result per item)" if size else ")"))
    if size:
        print(f"  batches answered other than 200, by status: "
              f"{dict(Counter(s for s in status if s != 200)) or 'none'}")
    unit = f"per batch of {size}, from its due time" if size else "per request"
    print(f"  latency, due to answer ({unit}): {p50_99_max(lat)}")
    print(f"  of which the client was late {p50_99_max(late)}   (the generator's own lag)")
    print("  p99 by fifth of the phase (ms): " + " / ".join(fifths(
        [(due[k], answered[k] - due[k]) for k in answers], secs * 1000)))
    print(f"  accept generator CPU {r['cpu_s']:.1f} s")
    return {"rate": in_phase / secs, "p99": percentile(lat, 99) if lat else math.nan,
            "ok": float(len(ok))}


def fifths(points: list[tuple[float, float]], span: float) -> list[str]:
    """p99 of the values whose time falls in each fifth of span."""
    parts = []
    for k in range(5):
        vals = [v for t, v in points if span * k / 5 <= t < span * (k + 1) / 5]
        parts.append(f"{percentile(vals, 99):.1f}" if vals else "-")
    return parts


def resolver_figures(r: dict[str, Any]) -> None:
    ok = [i for i, s in enumerate(r["status"]) if 200 <= s < 300]
    bad = Counter(s for s in r["status"] if not 200 <= s < 300)
    if "b_due" in r:  # --batch: latency per batch, from the earliest due item in it
        n = len(r["b_due"])
        lat = [(r["b_answered"][k] - r["b_due"][k]) / 1e6 for k in range(n)
               if r["b_status"][k] == 200]
        late = [(r["b_began"][k] - r["b_due"][k]) / 1e6 for k in range(n)]
        sizes = r["b_size"]
        print(f"resolves (1 s after each even 202, collected every {RESOLVE_EVERY_S:.2f} s): "
              f"{len(r['status'])} sent in {n} batches (mean {sum(sizes) / max(n, 1):.0f} items, "
              f"max {max(sizes, default=0)}), {len(ok)} 2xx, non-2xx {dict(bad) or 'none'} (-2: "
              f"answered for another notification, or no result per item), batches answered "
              f"other than 200 {dict(Counter(s for s in r['b_status'] if s != 200)) or 'none'}, "
              f"{r['cancelled'][0]} unanswered")
        print(f"  per batch, its earliest due item to the answer {p50_99_max(lat)}; the resolver "
              f"late to send {p50_99_max(late)}; its CPU {r['cpu_s'][0]:.1f} s")
        return
    lat = [(r["answered"][i] - r["due"][i]) / 1e6 for i in ok]
    late = [(r["began"][i] - r["due"][i]) / 1e6 for i in range(len(r["status"]))]
    print(f"resolves (1 s after each even 202): {len(r['status'])} sent, {len(ok)} 2xx, non-2xx "
          f"{dict(bad) or 'none'}, {r['cancelled'][0]} unanswered; latency due to answer "
          f"{p50_99_max(lat)}; the resolver late to send {p50_99_max(late)}; its CPU "
          f"{r['cpu_s'][0]:.1f} s")


def cpu_figures(ph: Phase, seconds: float, notes: int) -> float:
    """The daemon's CPU over the timed phase, in all and per thread; ms per notification."""
    before, after, names = ph.cpu["before"], ph.cpu["phase_end"], ph.cpu["names"]
    wall = after["at"] - before["at"]
    total = after["total"] - before["total"]
    per = max(notes, 1)
    print(f"daemon CPU over the timed phase ({wall:.1f} s, {notes} notifications accepted in it): "
          f"{total:.1f} s ({total / wall:.0%} of one core), {total / per * 1000:.3f} ms per "
          "notification")
    rows = []
    for tid, (comm, secs, sys_s, waited) in after["threads"].items():
        _, secs0, sys0, waited0 = before["threads"].get(tid, (comm, 0.0, 0.0, 0.0))
        rows.append((secs - secs0, sys_s - sys0, waited - waited0, tid, names.get(tid, comm)))
    main_tid = min(after["threads"], default=0)  # the process's own id: its first thread
    for used, in_kernel, waited, tid, name in sorted(rows, reverse=True):
        if used < 0.005 and tid != main_tid:
            continue
        role = " (main: the event loop)" if tid == main_tid else ""
        print(f"  thread {tid} {name}{role}: {used:.2f} s ({in_kernel:.2f} s of it in the kernel), "
              f"{used / per * 1000:.3f} ms per notification; runnable but waiting for a core "
              f"{waited:.1f} s ({waited / wall:.0%} of the phase)")
    gone = total - sum(r[0] for r in rows)
    if gone > 0.05:
        print(f"  threads that ended in the phase: {gone:.2f} s")
    fin = ph.cpu["finished"]
    whole = fin["total"] - before["total"]
    print(f"  from the start to the last ladder finished ({fin['at'] - before['at']:.1f} s, drain "
          f"included): {whole:.1f} s, {whole / per * 1000:.3f} ms per notification")
    print("  the run's other processes over the phase: " + "; ".join(
        f"{name} {used - before['peers'][name][0]:.1f} s CPU, waited for a core "
        f"{waited - before['peers'][name][1]:.1f} s"
        for name, (used, waited) in after["peers"].items()))
    busy, stolen = (a - b for a, b in zip(after["machine"], before["machine"], strict=True))
    ours = total + sum(after["peers"][k][0] - before["peers"][k][0] for k in after["peers"])
    cores = os.cpu_count() or 1
    print(f"  the machine: {busy:.0f} s busy of {wall * cores:.0f} s on {cores} cores "
          f"({busy / (wall * cores):.0%}; stolen by the hypervisor {stolen:.0f} s), of which this "
          f"run's processes {ours:.0f} s and others {busy - ours:.0f} s")
    return float(total / per * 1000)


def memory_figures(ph: Phase) -> tuple[float, float]:
    """RSS every 5 s (at most 24 values shown) beside the backlog and the machine's load; (first,
    last) MiB after the first fifth."""
    s = ph.samples
    if not s:
        print("RSS: no samples")
        return math.nan, math.nan
    step = max(1, math.ceil(len(s) / 24))
    shown = s[::step] + ([s[-1]] if (len(s) - 1) % step else [])
    print("daemon VmRSS (MiB) at seconds since the start: " + ", ".join(
        f"{x.at:.0f}s {x.rss_kb / 1024:.0f}" for x in shown)
        + f"; VmHWM {ph.hwm_kb / 1024:.0f} MiB")
    print("  steps due and not claimed / in flight at those times: "
          + ", ".join(f"{x.due}/{x.sending}" for x in shown))
    cores = os.cpu_count() or 1
    print(f"  the machine busy / this run's processes, % of its {cores} cores, since the time "
          "before: " + ", ".join(
              f"{(b.busy - a.busy) / span:.0%}/{(b.ours - a.ours) / span:.0%}"
              for a, b in zip(shown, shown[1:], strict=False)
              if (span := (b.at - a.at) * cores) > 0))
    settled = [x.rss_kb for x in s if x.at >= s[-1].at / 5] or [s[-1].rss_kb]
    return settled[0] / 1024, s[-1].rss_kb / 1024


def backlog_figures(ph: Phase) -> None:
    due, sending, open_ = ph.backlog
    drain = f"{ph.drain_s:.2f} s" if ph.drain_s is not None else "NOT within the limit"
    fin = f"{ph.finished_s:.1f} s" if ph.finished_s is not None else "NOT within the limit"
    print(f"backlog when the accept schedule ended: {due} steps due and not claimed, {sending} in "
          f"flight ({open_} open steps in all, most not yet due); drained (none due and unsent) "
          f"{drain} after (polled every 0.1 s while steps 1 and 2 keep falling due, so a fraction "
          f"of a second is no backlog); every ladder finished {fin} after")


# --- the database and the receiver's records -----------------------------------------------------


COPIED = {"notifications": "id, kind, resolved_at",
          "steps": "notification_id, step_no, state, send_after, attempts",
          "attempts": "notification_id, step_no, attempt_no, started_at, ended_at"}


def copy_postgres(url: str, conn: sqlite3.Connection) -> None:
    """The columns read here of a PostgreSQL database, as the attached database `d`."""
    import psycopg

    conn.execute("ATTACH ':memory:' AS d")
    with psycopg.connect(url) as pg:
        for table, cols in COPIED.items():
            conn.execute(f"CREATE TABLE d.{table} ({cols})")
            rows = pg.execute(f"SELECT {cols} FROM {table}").fetchall()
            marks = ", ".join("?" * len(cols.split(",")))
            conn.executemany(f"INSERT INTO d.{table} VALUES ({marks})", rows)


def analysis_db(db: Path | str, calls: Path) -> sqlite3.Connection:
    """An in-memory database with the daemon's attached read-only and the receiver's calls as
    arrivals(nid, step_no, first_ns, calls)."""
    conn = sqlite3.connect(":memory:", uri=True)
    if isinstance(db, str):
        copy_postgres(db, conn)
    else:
        conn.execute("ATTACH ? AS d", (f"file:{db}?mode=ro",))
    conn.execute("CREATE TABLE arrivals (nid TEXT, step_no INTEGER, first_ns INTEGER, "
                 "calls INTEGER, PRIMARY KEY (nid, step_no))")

    def rows() -> Any:
        with calls.open() as f:
            for line in f:
                ns, key = line.split(" ", 1)
                nid, _, no = key.strip().rpartition(":")
                yield nid, int(no) if no.isdigit() else -1, int(ns)

    conn.executemany("INSERT INTO arrivals VALUES (?, ?, ?, 1) ON CONFLICT (nid, step_no) DO "
                     "UPDATE SET first_ns = min(first_ns, excluded.first_ns), calls = calls + 1",
                     rows())
    return conn


JOINED = """FROM arrivals a JOIN d.steps s ON s.notification_id = a.nid AND s.step_no = a.step_no
JOIN d.notifications n ON n.id = a.nid WHERE n.kind = 'soak'"""
CLAIMED_AFTER = """SELECT count(*), count(DISTINCT t.notification_id),
  count(DISTINCT CASE WHEN t.step_no > 0 THEN t.notification_id END)
FROM d.attempts t JOIN d.notifications n ON n.id = t.notification_id
WHERE n.kind = 'soak' AND n.resolved_at IS NOT NULL AND t.started_at {op} n.resolved_at"""


def lag_figures(conn: sqlite3.Connection, epoch0: float, seconds: float) -> dict[int, float]:
    rows = conn.execute(f"SELECT s.step_no, a.first_ns / 1e6 - s.send_after, s.send_after {JOINED}"
                        " AND s.state = 'sent'").fetchall()
    out = {}
    print("due lag, the receiver's first arrival - the step's send_after (ms):")
    for no, name in enumerate("ABC"):
        lags = [lag for n, lag, _ in rows if n == no]
        points = [(sa - epoch0 * 1000, lag) for n, lag, sa in rows if n == no]
        print(f"  {name} (step {no}), {len(lags):7d} sent: {p50_99_max(lags)};  p99 by fifth: "
              + " / ".join(fifths(points, seconds * 1000)))
        out[no] = percentile(lags, 99) if lags else math.nan
    return out


# Each sent step's due lag in parts, from its first attempt's times (each the time its write
# transaction ran on the writer) and the receiver's first arrival.
SEND_PARTS = (
    ("send_after to the claim (a slot, the scanner, the claim's turn on the writer)",
     "t.started_at - s.send_after"),
    ("the claim to the receiver (its commit, render, the HTTP call)",
     "a.first_ns / 1e6 - t.started_at"),
    ("the receiver to the completion (its answer read, the completion's turn on the writer)",
     "t.ended_at - a.first_ns / 1e6"),
    ("a slot held, claim to completion (the completion's commit not included)",
     "t.ended_at - t.started_at"))


def send_parts(conn: sqlite3.Connection, epoch0: float, seconds: float) -> None:
    """Where each send's due lag went: the parts of SEND_PARTS, p50/p99/max and p99 by fifth."""
    sql = (f"SELECT s.send_after, {', '.join(e for _, e in SEND_PARTS)} {JOINED} AND "
           "s.state = 'sent'").replace(
        "JOIN d.notifications n", "JOIN d.attempts t ON t.notification_id = a.nid AND "
        "t.step_no = a.step_no AND t.attempt_no = 1 JOIN d.notifications n")
    cols: list[array[float]] = [array("d") for _ in range(len(SEND_PARTS) + 1)]
    for row in conn.execute(sql):
        for col, v in zip(cols, row, strict=True):
            col.append(v)
    print("each sent step's due lag in parts (ms; times of the write transactions, one ms clock):")
    at = [t - epoch0 * 1000 for t in cols[0]]
    for (name, _), col in zip(SEND_PARTS, cols[1:], strict=True):
        values = list(col)
        print(f"  {name}: {p50_99_max(values)};  p99 by fifth: "
              + " / ".join(fifths(list(zip(at, values, strict=True)), seconds * 1000)))
    # The scanner claims, freezes, dispatches, then claims again: its pace is claims per
    # transaction times transactions per second. A claim transaction is one ms of started_at
    # (two in the same ms count as one).
    claims = conn.execute("SELECT t.started_at, count(*) FROM d.attempts t JOIN d.notifications n "
                          "ON n.id = t.notification_id WHERE n.kind = 'soak' AND "
                          "t.attempt_no = 1 GROUP BY t.started_at").fetchall()
    sizes = [float(c) for _, c in claims]
    per_fifth = []
    for k in range(5):
        lo, hi = epoch0 * 1000 + seconds * 1000 * k / 5, epoch0 * 1000 + seconds * 1000 * (k + 1) / 5
        part = [c for t, c in claims if lo <= t < hi]
        per_fifth.append(f"{len(part) / (seconds / 5):.0f}/s of {sum(part) / max(len(part), 1):.0f}")
    print(f"  claim transactions (one ms of started_at each): {len(claims)}, steps in each "
          f"{p50_99_max(sizes).replace(' ms', '')}; by fifth, transactions/s of mean steps: "
          + " / ".join(per_fifth))


def correctness(conn: sqlite3.Connection) -> dict[str, int]:
    after = conn.execute(CLAIMED_AFTER.format(op=">")).fetchone()
    tied = conn.execute(CLAIMED_AFTER.format(op="=")).fetchone()
    early = conn.execute(f"SELECT count(*) {JOINED} AND a.first_ns / 1000000 < s.send_after"
                         ).fetchone()[0]
    repeated, extra = conn.execute("SELECT count(*), coalesce(sum(calls - 1), 0) FROM arrivals "
                                   "WHERE calls > 1").fetchone()
    before = conn.execute(f"SELECT count(DISTINCT a.nid) {JOINED} AND a.step_no > 0 AND "
                          "n.resolved_at IS NOT NULL").fetchone()[0]
    counts = {"sends after resolution": after[0], "early claims": early,
              "repeated keys": repeated, "resolved notifications with step 1/2 sent after": after[2]}
    print("correctness (each must be 0):")
    for name, v in counts.items():
        print(f"  {name:<52} {v}")
    print(f"  (sends after resolution: {after[0]} attempts on {after[1]} notifications claimed "
          f"after the resolution committed; {tied[0]} claimed in the resolution's own ms, order "
          f"unknown, not counted. repeated keys: {extra} extra calls. Resolved notifications "
          f"whose step 1 or 2 reached the receiver at all: {before})")
    return counts


def completeness(conn: sqlite3.Connection, accepted: int, resolved_ok: int) -> bool:
    """Every notification in the database, its steps' final states, nothing lost or stray."""
    notes, resolved = conn.execute("SELECT count(*), count(resolved_at) FROM d.notifications "
                                   "WHERE kind = 'soak'").fetchone()
    states = conn.execute(
        "SELECT n.resolved_at IS NOT NULL, s.step_no, s.state, count(*) FROM d.steps s JOIN "
        "d.notifications n ON n.id = s.notification_id WHERE n.kind = 'soak' GROUP BY 1, 2, 3"
    ).fetchall()
    lost = conn.execute(
        "SELECT count(*) FROM d.steps s JOIN d.notifications n ON n.id = s.notification_id "
        "WHERE n.kind = 'soak' AND s.state = 'sent' AND NOT EXISTS (SELECT 1 FROM arrivals a "
        "WHERE a.nid = s.notification_id AND a.step_no = s.step_no)").fetchone()[0]
    stray = conn.execute(
        "SELECT count(*) FROM arrivals a WHERE NOT EXISTS (SELECT 1 FROM d.steps s WHERE "
        "s.notification_id = a.nid AND s.step_no = a.step_no)").fetchone()[0]
    retried = conn.execute("SELECT count(*) FROM d.steps WHERE attempts > 1").fetchone()[0]
    # A resolved notification's step 0 is cancelled, not sent, when the resolution committed
    # before it was claimed (it was more than RESOLVE_AFTER_S late): what promise 3 asks.
    expect = {(1, 0, "sent"), (1, 0, "cancelled"), (1, 1, "cancelled"), (1, 2, "cancelled"),
              (0, 0, "sent"), (0, 1, "sent"), (0, 2, "sent")}
    odd = sum(c for r, no, st, c in states if (r, no, st) not in expect)
    beaten = sum(c for r, no, st, c in states if (r, no, st) == (1, 0, "cancelled"))
    print(f"database: {notes} notifications of kind soak ({accepted} answered 2xx), {resolved} "
          f"resolved ({resolved_ok} resolves answered 2xx); steps of resolved: "
          + ", ".join(f"{no} {st} {c}" for r, no, st, c in states if r)
          + "; of the others: " + ", ".join(f"{no} {st} {c}" for r, no, st, c in states if not r))
    ok = not (lost or stray or odd) and notes == accepted
    print(f"  sent steps that never reached the receiver {lost}; calls matching no step {stray}; "
          f"steps in an unexpected final state {odd}; steps retried {retried}  "
          + ("OK" if ok else "MISMATCH"))
    if beaten:
        print(f"  step 0 cancelled by a resolution that committed before it was claimed: {beaten} "
              f"(those sends were over {RESOLVE_AFTER_S:.0f} s late; nothing was sent for them)")
    return ok


# --- main ----------------------------------------------------------------------------------------


def header(args: argparse.Namespace) -> None:
    daemon_imports = subprocess.run(
        [sys.executable, "-c", "import notifyd; print(notifyd.__file__)"], cwd=ROOT,
        env=child_env(), capture_output=True, text=True, timeout=30).stdout.strip()
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, text=True,
                            capture_output=True, timeout=10).stdout.strip()
    print(f"machine: {os.cpu_count()} cores, load average {loadavg()} at start; python "
          f"{sys.version.split()[0]}, sqlite {sqlite3.sqlite_version}; scratch under "
          f"{tempfile.gettempdir()}")
    print(f"notifyd {notifyd.__version__} at {commit or '?'}: this script imports {notifyd.__file__}, "
          f"the daemon {daemon_imports}")
    how = (f"in batches of {args.batch} (POST /v1/notifications/batch), " if args.batch
           else "")
    resolved = (f"resolved in batches every {RESOLVE_EVERY_S:.2f} s (POST /v1/resolutions/batch) "
                if args.batch else "resolved ")
    print(f"run: accepts at {args.rate:.0f}/s for {args.seconds:.0f} s {how}open loop "
          f"({ACCEPT_POOL} keep-alive connections), every even one {resolved}"
          f"{RESOLVE_AFTER_S:.0f} s after its 202 ({RESOLVE_POOL} connections); ladder of 3 webhook "
          f"steps, {WINDOW_SEC} s windows; {args.concurrency} sends per lane; synchronous FULL; "
          f"event loop {args.event_loop}")


def summary(args: argparse.Namespace, figures: dict[str, Any], counts: dict[str, int]) -> None:
    lag = figures["lag"]
    rss0, rss1 = figures["rss"]
    flat = rss1 <= rss0 * 1.1 + 5
    load_ok = args.rate >= TARGET["rate"] and args.seconds >= TARGET["seconds"]
    rate_ok = figures["accept"]["rate"] >= args.rate * 0.99
    lag_ok = max(lag.values()) <= TARGET["lag_p99"]
    acc_ok = figures["accept"]["p99"] <= TARGET["accept_p99"]
    zero = not any(counts.values())
    misses = [name for name, good in (("rate", rate_ok), ("due lag", lag_ok),
                                      ("accept p99", acc_ok), ("correctness", zero),
                                      ("RSS", flat)) if not good]
    verdict = "meets" if not misses else "MISSES " + ", ".join(misses)
    print(f"summary (load average {figures['load_end']} at the phase's end): target 1,157/s for "
          "10 min, due lag p99 <= 100 ms, accept p99 <= 50 ms, correctness counts zero, RSS flat: "
          f"{figures['accept']['rate']:.0f}/s of {args.rate:.0f} for {args.seconds:.0f} s, due lag "
          f"p99 A/B/C {lag[0]:.0f}/{lag[1]:.0f}/{lag[2]:.0f} ms, accept p99 "
          f"{figures['accept']['p99']:.1f} ms"
          + (f" per batch of {args.batch}" if args.batch else "") + ", counts "
          + "/".join(str(v) for v in counts.values())
          + f", RSS {rss0:.0f} -> {rss1:.0f} MiB: {verdict}"
          + ("" if load_ok else " (not the target's load: a shorter or lighter run)"))


def report(args: argparse.Namespace, ph: Phase, db: Path | str, work: Path,
           calls: Path) -> bool:
    a = accept_figures(args, ph.accepts)
    resolver_figures(ph.resolves)
    conn = analysis_db(db, calls)
    try:
        lag = lag_figures(conn, ph.accepts["epoch0"], args.seconds)
        send_parts(conn, ph.accepts["epoch0"], args.seconds)
        backlog_figures(ph)
        cpu_figures(ph, args.seconds, sum(1 for s in ph.accepts["status"] if 200 <= s < 300))
        rss = memory_figures(ph)
        counts = correctness(conn)
        complete = completeness(conn, int(a["ok"]), sum(1 for s in ph.resolves["status"]
                                                   if 200 <= s < 300))
    finally:
        conn.close()
    if ph.profile is not None:
        print(f"profile (py-spy --gil, folded stacks): {ph.profile}"
              + ("" if ph.profile.exists() else f" MISSING; see {work / 'py-spy.log'}"))
        if ph.profile.exists():
            profile_summary(ph.profile)
    summary(args, {"accept": a, "lag": lag, "rss": rss, "load_end": ph.load_end}, counts)
    return complete and not any(counts.values())


def run(args: argparse.Namespace, work: Path) -> bool:
    if not args.postgres:
        return run_on(args, work, work / "notifyd.db")
    import secrets

    import psycopg

    server = os.environ.get("NOTIFYD_TEST_PG", "postgresql://root@127.0.0.1:5432/postgres")
    name = f"notifyd_soak_{secrets.token_hex(4)}"
    with psycopg.connect(server, autocommit=True) as admin:
        admin.execute(f"CREATE DATABASE {name}")
    try:
        return run_on(args, work, server.rsplit("/", 1)[0] + "/" + name)
    finally:
        with psycopg.connect(server, autocommit=True) as admin:
            admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def run_on(args: argparse.Namespace, work: Path, db: Path | str) -> bool:
    cfg = work / "notifyd.toml"
    receiver = Receiver()
    cfg.write_text(CONFIG.format(db=db, event_loop=args.event_loop, receiver=receiver.port,
                                 kind=KIND, w=WINDOW_SEC, concurrency=args.concurrency))
    api_key = notifyd_cli(cfg, "keys", "create", "--name", "soak").split()[0]
    daemons = []
    for i in range(max(1, args.postgres)):
        (work / f"d{i}").mkdir(exist_ok=True)
        daemons.append(Daemon(cfg, work / f"d{i}" if args.postgres else work))
    for d in daemons:
        m = re.search(r"event loop (\w+)", d.log.read_text(errors="replace"))
        print(f"daemon pid {d.pid} on port {d.port}, event loop {m.group(1) if m else '?'}")
    try:
        ph = timed_phase(args, work, daemons, db, api_key, receiver.proc.pid)
    finally:
        warnings = [w for d in daemons for w in d.stop()]
    calls = work / "calls.txt"
    print(f"receiver: {receiver.dump(calls)} calls recorded")
    if warnings:
        print(f"  ! daemon logged {len(warnings)} warning/error line(s), e.g. {warnings[0][:200]}")
    return report(args, ph, db, work, calls)


def parse_args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--rate", type=float, help="accepts per second (1157; quick 100)")
    ap.add_argument("--seconds", type=float, help="seconds of the timed phase (600; quick 10)")
    ap.add_argument("--quick", action="store_true", help="100/s for 10 s")
    ap.add_argument("--event-loop", default="auto", choices=("asyncio", "uvloop", "auto"),
                    help="the daemon's [daemon] event_loop (auto: its default)")
    ap.add_argument("--concurrency", type=int, default=64,
                    help="the channel's sends in flight per lane (64)")
    ap.add_argument("--batch", type=int, default=0, metavar="N",
                    help="post accepts in batches of N and resolve in batches (0: single calls)")
    ap.add_argument("--keep", action="store_true", help="keep the scratch folder")
    ap.add_argument("--profile", action="store_true",
                    help="py-spy record the daemon over the timed phase (GIL holder, folded); keeps the "
                         "scratch folder")
    ap.add_argument("--postgres", type=int, default=0, metavar="N",
                    help="N daemons on one fresh PostgreSQL database instead of one on SQLite "
                         "(NOTIFYD_TEST_PG names the server; the posts split between them)")
    ap.add_argument("--gen", nargs=2, metavar=("WHAT", "SPEC"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.rate is None:
        args.rate = 100.0 if args.quick else TARGET["rate"]
    if args.seconds is None:
        args.seconds = 10.0 if args.quick else TARGET["seconds"]
    if not 0 <= args.batch <= MAX_BATCH:
        ap.error(f"--batch takes 0 (single calls) to {MAX_BATCH} items")
    return args


def main() -> None:
    args = parse_args()
    if args.gen:
        run_generator(args.gen[0], Path(args.gen[1]))
        return
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # so the finally below runs
    header(args)
    work = Path(tempfile.mkdtemp(prefix="notifyd-soak-"))
    started = time.monotonic()
    ok = False
    try:
        ok = run(args, work)
    finally:
        for proc in reversed(STARTED):
            stop_proc(proc, 15)
        if args.keep or args.profile:
            print(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
        print(f"took {time.monotonic() - started:.0f} s")
    if not ok:
        sys.exit(1)


if __name__ == "__main__":
    main()
