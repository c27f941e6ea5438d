"""A flood of inbox streams: one user's token opens --streams streams that never read, a producer
posts to that user, and other users' accepts are timed beside it, before, during and after.

Run:   /work/main/.venv/bin/python benchmarks/streamflood.py [--streams 600] [--files 1024]
Quick: /work/main/.venv/bin/python benchmarks/streamflood.py --quick

1. before: producers alone for --seconds: POST /v1/notifications for other users at --rate a
   second, open loop over 8 keep-alive connections, latency counted from when each was due
   (waiting for a free connection counts); and --items POSTs for the user "victim", closed loop
   over 4 connections, with the time they took in all.
2. during: an attacker process (spawned: its sockets share the machine, not this event loop)
   opens --streams streams of "victim" with one user token (GET .../inbox/stream?token=), 64
   connects at a time, reads each answer's head and then nothing more, ever. Once all are open
   or answered, the same producers run again.
3. after: the attacker closes its sockets; --settle seconds later the producers run once more.

--strangers N: the stranger's case during the attack too (benchmarks/strangers.py): N more
sockets with no API key, half dribbling a sign-in form's body, half pipelining requests and
never reading an answer, each reopened as soon as the daemon ends it, so that they hold every
place a stranger may while the streams are opened and the producers post.

Each phase prints the others' accept p50/p99, the victim's POSTs (p50/p99 and the time for all),
the daemon's open files and RSS (peak in the phase, sampled every 100 ms on a thread), and the
daemon's stream counts from /metrics (open, closed by reason) where it has them. The daemon runs
this checkout's code from a scratch folder (benchmarks/overload.py's Daemon) under --files open
files (RLIMIT_NOFILE, soft and hard), with a kind `bench` that lands in the inbox and sends
nothing during the run; --per-user sets server.max_streams_per_user (for a daemon that has it).
The scratch folder is removed and every process stopped at the end, even on errors; every wait
is bounded.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import json
import multiprocessing
import socket
import sys
import time
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from multiprocessing.synchronize import Event as EventType
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from accept import body  # noqa: E402
from httpload import Conn, post  # noqa: E402
from overload import (  # noqa: E402
    CONN_ERRORS,
    Daemon,
    Sampler,
    describe,
    fd_count,
    get,
    header,
    load_now,
    mib,
    proc_status,
    raise_nofile,
    sampling,
)
from strangers import Strangers, daemon_counts  # noqa: E402

CONFIG = """
[store]
synchronous = "FULL"
[server]
{server}
[channels.log]
type = "log"
[kinds.bench]
inbox = true
ttl_sec = 86400
ladder = [{{ channel = "log", after_sec = 3600 }}]
"""
TEMPLATES = {"bench/en/inbox.title.j2": "Invoice {{ invoice }}",
             "bench/en/inbox.body.j2": "{{ amount }} is due for invoice {{ invoice }}."}


@dataclass
class Phase:
    name: str
    began: float = 0.0  # time.monotonic()
    ended: float = 0.0
    others: list[float] = field(default_factory=list)  # ms from due to 202
    victim: list[float] = field(default_factory=list)  # ms per 202
    victim_took: float = 0.0  # s for all of the victim's POSTs
    failures: collections.Counter[str] = field(default_factory=collections.Counter)
    streams: str = ""  # the daemon's stream counts at the phase's end

    def report(self, sampler: Sampler) -> list[str]:
        rss, fds = sampler.peak(self.began, self.ended)
        return [f"{self.name}:",
                f"  other users' accepts ({len(self.others)}): {describe(self.others)}",
                f"  the victim's POSTs ({len(self.victim)}): {describe(self.victim)}; all took "
                f"{self.victim_took:.1f} s",
                f"  failures: {dict(self.failures) if self.failures else 'none'}",
                f"  daemon: peak open files {fds}, peak RSS {mib(rss)}; {self.streams}"]


# ---------------------------------------------------------------- the producers


async def others(port: int, key: str, rate: float, seconds: float, phase: Phase) -> None:
    """POSTs for other users on a fixed schedule over 8 keep-alive connections."""
    loop = asyncio.get_running_loop()
    pool: asyncio.Queue[Conn | None] = asyncio.Queue()
    for _ in range(8):
        pool.put_nowait(None)
    auth = {"Authorization": f"Bearer {key}"}

    async def one(i: int, due: float) -> None:
        conn = await pool.get()
        try:
            async with asyncio.timeout(10):
                conn = conn or await Conn.open("127.0.0.1", port)
                status, _ = await conn.request(post("/v1/notifications", body(
                    i, f"{phase.name}-{i}"), auth))
            if status == 202:
                phase.others.append((loop.time() - due) * 1000)
            else:
                phase.failures[f"others: {status}"] += 1
            if conn.closing:
                conn.close()
                conn = None
        except (TimeoutError, *CONN_ERRORS) as e:
            phase.failures[f"others: {type(e).__name__}"] += 1
            if conn is not None:
                conn.close()
            conn = None
        finally:
            pool.put_nowait(conn)

    start = loop.time()
    tasks = []
    for i in range(int(rate * seconds)):
        due = start + i / rate
        await asyncio.sleep(max(0.0, due - loop.time()))
        tasks.append(asyncio.create_task(one(i, due)))
    await asyncio.wait(tasks, timeout=30)
    while not pool.empty():
        conn = pool.get_nowait()
        if conn is not None:
            conn.close()


async def victim(port: int, key: str, items: int, phase: Phase) -> None:
    """`items` POSTs for the victim, closed loop over 4 keep-alive connections."""
    loop = asyncio.get_running_loop()
    auth = {"Authorization": f"Bearer {key}"}
    counter = iter(range(items))

    async def worker() -> None:
        conn: Conn | None = None
        for i in counter:
            began = loop.time()
            try:
                async with asyncio.timeout(30):
                    conn = conn or await Conn.open("127.0.0.1", port)
                    status, _ = await conn.request(post("/v1/notifications", json.dumps({
                        "user_id": "victim", "kind": "bench", "dedup_key": f"v-{phase.name}-{i}",
                        "params": {"amount": "1.00", "invoice": i}}).encode(), auth))
            except (TimeoutError, *CONN_ERRORS) as e:
                phase.failures[f"victim: {type(e).__name__}"] += 1
                if conn is not None:
                    conn.close()
                conn = None
                continue
            if status == 202:
                phase.victim.append((loop.time() - began) * 1000)
            else:
                phase.failures[f"victim: {status}"] += 1
        if conn is not None:
            conn.close()

    began = loop.time()
    await asyncio.gather(*(worker() for _ in range(4)))
    phase.victim_took = loop.time() - began


def produce(d: Daemon, args: argparse.Namespace, phase: Phase) -> None:
    async def both() -> None:
        await asyncio.gather(others(d.port, d.key, args.rate, args.seconds, phase),
                             victim(d.port, d.key, args.items, phase))

    phase.began = time.monotonic()
    asyncio.run(both())
    phase.ended = time.monotonic()
    phase.streams = stream_counts(d)


def stream_counts(d: Daemon) -> str:
    with contextlib.suppress(Exception):
        _, metrics = asyncio.run(get("127.0.0.1", d.port, "/metrics"))
        lines = [ln for ln in metrics.decode().splitlines()
                 if ln.startswith(("notifyd_streams_open ", "notifyd_streams_closed_total"))]
        return "streams " + (", ".join(ln.replace("notifyd_streams_", "") for ln in lines)
                             or "(not counted by this daemon)")
    return "streams: /metrics did not answer"


# ---------------------------------------------------------------- the attacker


def attacker(port: int, n: int, path: str, pipe: Connection, stop: EventType,
             most: float) -> None:
    """Its own process: `n` streams opened, their heads read, then held unread until `stop`."""
    raise_nofile()
    asyncio.run(attacking(port, n, path, pipe, stop, most))


async def attacking(port: int, n: int, path: str, pipe: Connection, stop: EventType,
                    most: float) -> None:
    loop = asyncio.get_running_loop()
    held: list[socket.socket] = []
    answers: collections.Counter[str] = collections.Counter()
    gate = asyncio.Semaphore(64)
    request = f"GET {path} HTTP/1.1\r\nHost: bench\r\n\r\n".encode()

    async def one() -> None:
        s = socket.socket()
        s.setblocking(False)
        held.append(s)
        async with gate:
            try:
                async with asyncio.timeout(10):
                    await loop.sock_connect(s, ("127.0.0.1", port))
                    await loop.sock_sendall(s, request)
                    head = b""
                    while b"\r\n\r\n" not in head:  # a byte at a time: nothing after the head
                        chunk = await loop.sock_recv(s, 1)
                        if not chunk:
                            break
                        head += chunk
                answers[head[9:12].decode() if head else "closed"] += 1
            except TimeoutError:
                answers["no answer in 10 s"] += 1
            except OSError as e:
                answers[type(e).__name__] += 1

    began = time.monotonic()
    await asyncio.gather(*(one() for _ in range(n)))
    pipe.send({"answers": dict(answers), "took": time.monotonic() - began})
    deadline = loop.time() + most
    while not stop.is_set() and loop.time() < deadline:
        await asyncio.sleep(0.05)
    for s in held:
        s.close()
    pipe.send("closed")


# ---------------------------------------------------------------- main


def arguments() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0] if __doc__ else None)
    ap.add_argument("--streams", type=int, default=600, help="the attacker's streams")
    ap.add_argument("--files", type=int, default=1024, help="the daemon's open-files limit")
    ap.add_argument("--seconds", type=float, default=10.0, help="each phase's producers")
    ap.add_argument("--rate", type=float, default=100.0, help="other users' POSTs a second")
    ap.add_argument("--items", type=int, default=200, help="the victim's POSTs in each phase")
    ap.add_argument("--settle", type=float, default=5.0, help="seconds between attack and after")
    ap.add_argument("--per-user", type=int, help="server.max_streams_per_user")
    ap.add_argument("--strangers", type=int, default=0,
                    help="stranger sockets with no key during the attack (dribbled bodies, "
                         "unread pipelines)")
    ap.add_argument("--quick", action="store_true", help="a smoke test: 4 s phases, 2 s settle")
    args = ap.parse_args()
    if args.quick:
        for name, short in (("seconds", 4.0), ("settle", 2.0)):
            if getattr(args, name) == ap.get_default(name):
                setattr(args, name, short)
    return args


def main() -> None:
    args = arguments()
    raise_nofile()
    header(f"stream flood: {args.streams} streams of one user that never read, "
           f"{args.files} open files")
    server = f"max_streams_per_user = {args.per_user}" if args.per_user else ""
    with Daemon(config_toml=CONFIG.format(server=server), templates=TEMPLATES,
                files=args.files) as d:
        run(args, d)


def run(args: argparse.Namespace, d: Daemon) -> None:
    token = mint(d)
    print(f"notifyd pid {d.pid}; other users' POSTs {args.rate:g}/s for {args.seconds:g} s and "
          f"{args.items} POSTs for the victim in each phase", flush=True)
    phases = [Phase("before"), Phase("during"), Phase("after")]
    with sampling(d.pid, fds=True) as sampler:
        time.sleep(0.3)
        fds_idle, rss_idle = fd_count(d.pid), proc_status(d.pid, "VmRSS")
        produce(d, args, phases[0])
        print("\n".join(phases[0].report(sampler)), flush=True)
        ctx = multiprocessing.get_context("spawn")
        here, there = ctx.Pipe()
        stop = ctx.Event()
        child = ctx.Process(target=attacker, name="streamflood", daemon=True, args=(
            d.port, args.streams, f"/v1/users/victim/inbox/stream?token={token}", there, stop,
            args.seconds * 3 + 120))
        with contextlib.ExitStack() as strangers:
            stranger = strangers.enter_context(Strangers(d.port, args.strangers)) \
                if args.strangers else None
            child.start()
            try:
                if not here.poll(120):
                    raise SystemExit("the attacker did not open its streams within 120 s")
                opened = here.recv()
                print(f"attacker: {args.streams} streams asked in {opened['took']:.1f} s; "
                      f"answers {opened['answers']}; daemon open files now {fd_count(d.pid)}; "
                      f"{stream_counts(d)}", flush=True)
                produce(d, args, phases[1])
                print("\n".join(phases[1].report(sampler)), flush=True)
                if stranger is not None:
                    print(f"  the daemon's own counts: {daemon_counts(d.port, d.key)}")
                    print("\n".join(stranger.report().lines()), flush=True)
            finally:
                stop.set()
                if here.poll(30):
                    here.recv()
                child.join(15)
                if child.is_alive():
                    child.kill()
        time.sleep(args.settle)
        produce(d, args, phases[2])
        print("\n".join(phases[2].report(sampler)), flush=True)
        fds_end, rss_end = fd_count(d.pid), proc_status(d.pid, "VmRSS")
    print(f"summary: daemon open files idle {fds_idle}, at the end {fds_end}; RSS idle "
          f"{mib(rss_idle)}, at the end {mib(rss_end)}; load average {load_now()}")
    base = phases[0].others
    for phase in phases[1:]:
        if base and phase.others:
            ratio = sorted(phase.others)[len(phase.others) // 2] / sorted(base)[len(base) // 2]
            print(f"  other users' accept p50 {phase.name}: {ratio:.2f}x the one before")
    print(f"  notifyd exit status after SIGTERM: {d.stop()}")
    for line in d.warnings():
        print(f"  daemon log: {line}")


def mint(d: Daemon) -> str:
    async def call() -> bytes:
        conn = await Conn.open("127.0.0.1", d.port)
        try:
            _, answer = await conn.request(post("/v1/users/victim/tokens", b"{}",
                                                {"Authorization": f"Bearer {d.key}"}))
            return answer
        finally:
            conn.close()

    return str(json.loads(asyncio.run(call()))["token"])


if __name__ == "__main__":
    main()
