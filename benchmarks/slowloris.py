"""A slowloris of 2,000 sockets against notifyd, with a healthy client's latency beside it.

Run:   /work/main/.venv/bin/python benchmarks/slowloris.py [--sockets 2000] [--attack 30]
Quick: /work/main/.venv/bin/python benchmarks/slowloris.py --quick

1. Baseline: a healthy client for --baseline seconds: one keep-alive connection sending GET
   /healthz and POST /v1/notifications (with a key) in turn, back to back (closed loop), and a
   probe opening a fresh connection for one GET /healthz --probe-rate times a second.
2. Attack: --sockets connections that each send a request line and a few headers, then one more
   header byte every --dribble seconds (jittered), never the blank line that ends the headers. A
   socket the daemon closes (EOF or reset) is noted with when and after how long, and opened
   again at its next tick, as a real slowloris keeps its count (--no-reopen: one wave only). The
   sockets live in a child process (spawned; it reports back over a pipe), so that they share the
   machine with the healthy client but not its event loop. Once the first wave is connected, the
   healthy client runs again for --attack seconds; how late its own event loop ran is printed
   beside its latencies.
3. The daemon's VmRSS before the attack, at its peak and --settle seconds after the attack's
   sockets are closed, and its open files (/proc/PID/fd) at peak; both sampled every 100 ms on a
   thread.

--strangers N: the stranger's case instead (benchmarks/strangers.py): N sockets with no API key,
half dribbling a sign-in form's body a byte every --dribble seconds, half pipelining requests and
never reading an answer, each reopened as soon as the daemon ends it, so that they hold every
place a stranger may; the same healthy client (a producer posting on its keep-alive connection, a
new connection asking /healthz --probe-rate times a second) runs beside them.

notifyd runs this checkout's code from a scratch folder (see benchmarks/overload.py), with its
defaults (server.max_connections 1000, server.header_timeout_sec 10) unless --max-connections or
--header-timeout. notifyd raises its own open-files soft limit to the hard one at start (--files
N: both are N, as under LimitNOFILE=N, and max_connections is lowered to fit); this process
raises its own too (the attacker inherits it), so that the 2,000 client sockets fit. A client
told "Connection: close" opens a new connection for its next request.
Clients and daemon share the machine's cores. The scratch folder is removed and the daemon
stopped (SIGTERM) at the end, even on errors; every wait is bounded.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import dataclasses
import multiprocessing
import random
import sys
import time
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from multiprocessing.synchronize import Event as EventType
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from accept import body  # noqa: E402
from httpload import Conn, percentile, post  # noqa: E402
from overload import (  # noqa: E402
    CONN_ERRORS,
    Daemon,
    Sampler,
    describe,
    fd_count,
    header,
    load_now,
    mib,
    proc_status,
    raise_nofile,
    sampling,
)
from strangers import Strangers, daemon_counts  # noqa: E402

HEAD = b"POST /v1/notifications HTTP/1.1\r\nHost: bench\r\nContent-Type: application/json\r\n"
DRIBBLE = b"X-Slow: o\r\n"  # sent a byte at a time: the headers never end


# ---------------------------------------------------------------- the healthy client


@dataclass
class Healthy:
    """What the healthy client saw in one phase."""

    seconds: float = 0.0
    latency: dict[str, list[float]] = field(
        default_factory=lambda: collections.defaultdict(list))  # ms, by request kind
    failures: collections.Counter[str] = field(default_factory=collections.Counter)
    lag: list[float] = field(default_factory=list)  # ms this process's own loop ran late

    def report(self, name: str) -> list[str]:
        done = sum(len(v) for k, v in self.latency.items() if not k.startswith("fresh"))
        rows = [f"{name}: {done / max(self.seconds, 1e-9):.0f} requests/s on the keep-alive "
                f"connection over {self.seconds:.1f} s; failures: "
                f"{dict(self.failures) if self.failures else 'none'}"]
        for kind in ("GET /healthz", "POST /v1/notifications", "fresh connection + GET /healthz"):
            got = self.latency.get(kind, [])
            rows.append(f"  {kind + ':':<33} {len(got):6} answered  {describe(got)}")
        rows.append(f"  this process's own event loop, late by: {describe(self.lag)} (part of "
                    "the latencies above is the client's own)")
        return rows


async def keepalive(port: int, key: str, until: float, seen: Healthy) -> None:
    """GET /healthz and a POST in turn on one connection, back to back, until `until`."""
    loop = asyncio.get_running_loop()
    headers = {"Authorization": f"Bearer {key}"}
    get = b"GET /healthz HTTP/1.1\r\nHost: bench\r\n\r\n"
    conn: Conn | None = None
    i = 0
    try:
        while loop.time() < until:
            kind = "GET /healthz" if i % 2 == 0 else "POST /v1/notifications"
            raw = get if i % 2 == 0 else post("/v1/notifications", body(i, f"healthy-{until}-{i}"),
                                              headers)
            i += 1
            began = loop.time()
            try:
                async with asyncio.timeout(5):
                    if conn is None:
                        conn = await Conn.open("127.0.0.1", port)
                    status, _ = await conn.request(raw)
            except (TimeoutError, *CONN_ERRORS) as e:
                seen.failures[f"{kind}: {type(e).__name__}"] += 1
                if conn is not None:
                    conn.close()
                    conn = None
                await asyncio.sleep(0.01)
                continue
            if status in (200, 202):
                seen.latency[kind].append((loop.time() - began) * 1000)
            else:
                seen.failures[f"{kind}: {status}"] += 1
            if conn.closing:  # told the connection ends (a 503 at the connection limit)
                conn.close()
                conn = None
    finally:
        if conn is not None:
            conn.close()


async def fresh(port: int, seen: Healthy) -> None:
    """A new connection for one GET /healthz; connect time counts."""
    loop = asyncio.get_running_loop()
    kind = "fresh connection + GET /healthz"
    began = loop.time()
    try:
        async with asyncio.timeout(5):
            conn = await Conn.open("127.0.0.1", port)
            try:
                status, _ = await conn.request(b"GET /healthz HTTP/1.1\r\nHost: bench\r\n\r\n")
            finally:
                conn.close()
    except (TimeoutError, *CONN_ERRORS) as e:
        seen.failures[f"fresh: {type(e).__name__}"] += 1
        return
    if status == 200:
        seen.latency[kind].append((loop.time() - began) * 1000)
    else:
        seen.failures[f"fresh: {status}"] += 1


async def lateness(until: float, seen: Healthy) -> None:
    """How late a 10 ms sleep wakes in this process: the client's own share of the latency."""
    loop = asyncio.get_running_loop()
    while loop.time() < until:
        began = loop.time()
        await asyncio.sleep(0.01)
        seen.lag.append(max(0.0, (loop.time() - began - 0.01) * 1000))


async def healthy(port: int, key: str, seconds: float, probe_rate: float) -> Healthy:
    loop = asyncio.get_running_loop()
    seen = Healthy()
    began = loop.time()
    until = began + seconds
    client = asyncio.create_task(keepalive(port, key, until, seen))
    watch = asyncio.create_task(lateness(until, seen))
    probes: set[asyncio.Task[None]] = set()
    while loop.time() < until and probe_rate > 0:
        probe = asyncio.create_task(fresh(port, seen))
        probes.add(probe)
        probe.add_done_callback(probes.discard)
        await asyncio.sleep(1 / probe_rate)
    await asyncio.wait({client, watch, *probes}, timeout=max(0.0, until - loop.time()) + 10)
    seen.seconds = loop.time() - began
    return seen


# ---------------------------------------------------------------- the slowloris


@dataclass
class Closed:
    at: float  # seconds since the attack began
    lived: float  # seconds since that socket connected
    how: str


@dataclass
class Attack:
    """What the attacker process reports at its end (plain values: it crosses a pipe)."""

    sockets: int
    began: float = 0.0  # time.monotonic() when the first socket was opened
    ended: float = 0.0  # time.monotonic() when it began closing its sockets
    opened: int = 0
    connect_failed: int = 0
    first_wave_at: float | None = None  # seconds until `sockets` connections had been opened
    closed: list[Closed] = field(default_factory=list)
    open_samples: list[tuple[float, int]] = field(default_factory=list)  # (s since began, open)
    cpu: float = 0.0  # the attacker's CPU seconds
    stuck: int = 0  # socket tasks that did not end when told to


class Slowloris:
    """The sockets, in the attacker process's event loop."""

    def __init__(self, port: int, sockets: int, dribble: float, reopen: bool) -> None:
        self.port, self.dribble, self.reopen = port, dribble, reopen
        self.out = Attack(sockets)
        self.open_now = 0
        self.stopping = False
        self.tasks: list[asyncio.Task[None]] = []

    def start(self) -> None:
        self.out.began = time.monotonic()
        gate = asyncio.Semaphore(256)  # connects in flight at once
        self.tasks = [asyncio.create_task(self.slot(gate)) for _ in range(self.out.sockets)]

    async def stop(self) -> None:
        self.out.ended = time.monotonic()
        self.stopping = True
        for task in self.tasks:
            task.cancel()
        _, stuck = await asyncio.wait(self.tasks, timeout=10)
        self.out.stuck = len(stuck)

    async def count(self) -> None:
        """How many sockets are open (as this side sees them), every 100 ms."""
        while not self.stopping:
            self.out.open_samples.append((time.monotonic() - self.out.began, self.open_now))
            await asyncio.sleep(0.1)

    async def slot(self, gate: asyncio.Semaphore) -> None:
        out = self.out
        while not self.stopping:
            async with gate:
                try:
                    async with asyncio.timeout(5):
                        reader, writer = await asyncio.open_connection("127.0.0.1", self.port)
                except (TimeoutError, OSError):
                    out.connect_failed += 1
                    await asyncio.sleep(self.dribble)
                    continue
            opened = time.monotonic()
            self.open_now += 1
            out.opened += 1
            if out.opened == out.sockets:
                out.first_wave_at = opened - out.began
            try:
                how = await self.hold(reader, writer)
            finally:
                self.open_now -= 1
                writer.close()
            now = time.monotonic()
            out.closed.append(Closed(now - out.began, now - opened, how))
            if not self.reopen:
                return
            await asyncio.sleep(self.dribble * random.uniform(0.5, 1.5))

    async def hold(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> str:
        """Dribble until the daemon closes the socket; how it did."""
        answered = ""
        writer.write(HEAD)
        i = 0
        while not self.stopping:
            try:
                async with asyncio.timeout(self.dribble * random.uniform(0.5, 1.5)):
                    data = await reader.read(4096)
            except TimeoutError:
                writer.write(DRIBBLE[i % len(DRIBBLE):][:1])
                i += 1
                continue
            except CONN_ERRORS:
                return f"reset{answered}"
            if not data:
                return f"EOF{answered}"
            answered = answered or f" after an answer {data[9:12].decode(errors='replace')}"
        raise asyncio.CancelledError


def attacker(port: int, sockets: int, dribble: float, reopen: bool, pipe: Connection,
             stop: EventType, most: float) -> None:
    """The attacker process: sockets open, "ready" sent, then held until `stop` (at most `most`
    seconds), then closed and the Attack sent."""
    raise_nofile()  # inherited from the parent already; said again for a reader
    asyncio.run(attacking(Slowloris(port, sockets, dribble, reopen), pipe, stop, most))


async def attacking(attack: Slowloris, pipe: Connection, stop: EventType, most: float) -> None:
    loop = asyncio.get_running_loop()
    cpu = time.process_time()
    attack.start()
    counter = asyncio.create_task(attack.count())
    deadline = loop.time() + 30
    out = attack.out
    while out.first_wave_at is None and loop.time() < deadline:
        if not attack.reopen and out.opened + out.connect_failed >= out.sockets:
            break
        await asyncio.sleep(0.05)
    pipe.send("ready")
    deadline = loop.time() + most
    while not stop.is_set() and loop.time() < deadline:
        await asyncio.sleep(0.05)
    await attack.stop()
    counter.cancel()
    out.cpu = time.process_time() - cpu
    pipe.send(dataclasses.asdict(out))


# ---------------------------------------------------------------- the report


def lifetimes(closed: list[Closed], header_timeout: float) -> list[str]:
    """How long the sockets the daemon closed had lived, in bands around the header timeout."""
    bands = [(0, 1, "under 1 s (evicted for newcomers)"),
             (1, header_timeout - 0.5, f"1 s to {header_timeout - 0.5:g} s"),
             (header_timeout - 0.5, header_timeout + 1.5,
              f"{header_timeout - 0.5:g}-{header_timeout + 1.5:g} s (the header timeout)"),
             (header_timeout + 1.5, float("inf"), f"over {header_timeout + 1.5:g} s (too long)")]
    rows = []
    for lo, hi, name in bands:
        n = sum(lo <= c.lived < hi for c in closed)
        rows.append(f"    lived {name}: {n}")
    return rows


def timeline(attack: Attack, sampler: Sampler, step: float) -> list[str]:
    rows = ["  attack s   closed/s   open (min-max, client view)   daemon fds   daemon RSS"]
    t = 0.0
    while t < attack.ended - attack.began + 0.5:
        closed = sum(t <= c.at < t + step for c in attack.closed)
        open_n = [n for at, n in attack.open_samples if t <= at < t + step]
        rss, fds = sampler.peak(attack.began + t, attack.began + t + step)
        opened = f"{min(open_n)}-{max(open_n)}" if open_n else "n/a"
        rows.append(f"  {t:4.0f}-{t + step:<4.0f} {closed / step:9.0f}   {opened:>27}   "
                    f"{fds if fds is not None else '?':>10}   {mib(rss):>10}")
        t += step
    return rows


def daemon_nofile(pid: int) -> str:
    with contextlib.suppress(OSError):
        for line in Path(f"/proc/{pid}/limits").read_text().splitlines():
            if line.startswith("Max open files"):
                soft, hard = line.split()[3:5]
                return f"soft {soft}, hard {hard}"
    return "?"


# ---------------------------------------------------------------- main


def arguments() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0] if __doc__ else None)
    ap.add_argument("--sockets", type=int, default=2000)
    ap.add_argument("--dribble", type=float, default=1.0, help="seconds between bytes")
    ap.add_argument("--baseline", type=float, default=10.0, help="healthy client alone, seconds")
    ap.add_argument("--attack", type=float, default=30.0,
                    help="healthy client beside the slowloris, seconds")
    ap.add_argument("--settle", type=float, default=10.0,
                    help="seconds after the attack that the 'after' RSS is read")
    ap.add_argument("--probe-rate", type=float, default=10.0,
                    help="fresh-connection probes per second")
    ap.add_argument("--no-reopen", dest="reopen", action="store_false",
                    help="one wave: do not reopen the sockets the daemon closes")
    ap.add_argument("--max-connections", type=int, help="server.max_connections")
    ap.add_argument("--header-timeout", type=float, help="server.header_timeout_sec")
    ap.add_argument("--files", type=int,
                    help="the daemon's open-files limit (default: this process's, raised)")
    ap.add_argument("--strangers", type=int, default=0,
                    help="the stranger's case: this many sockets with no key dribbling bodies "
                         "and pipelining unread requests, instead of the slowloris")
    ap.add_argument("--quick", action="store_true",
                    help="a smoke test: 3 s baseline, 6 s attack, 3 s settle unless given")
    args = ap.parse_args()
    if args.quick:  # shortens what was not given
        for name, short in (("baseline", 3.0), ("attack", 6.0), ("settle", 3.0)):
            if getattr(args, name) == ap.get_default(name):
                setattr(args, name, short)
    return args


def main() -> None:
    args = arguments()
    files = raise_nofile()
    header(f"strangers: {args.strangers} sockets with no key, a byte every {args.dribble:g} s"
           if args.strangers else f"slowloris: {args.sockets} sockets, a byte every "
           f"{args.dribble:g} s, {'reopened when closed' if args.reopen else 'one wave'}")
    server = []
    if args.max_connections:
        server.append(f"max_connections = {args.max_connections}")
    if args.header_timeout:
        server.append(f"header_timeout_sec = {args.header_timeout}")
    sockets = args.strangers or args.sockets
    if files < sockets + 100:
        raise SystemExit(f"this process may open {files} files: too few for {sockets} sockets")
    with Daemon(server_toml="\n".join(server), files=args.files) as d:
        (beside_strangers if args.strangers else run)(args, d, files)


def beside_strangers(args: argparse.Namespace, d: Daemon, files: int) -> None:
    """The healthy client alone, then beside the stranger's sockets."""
    print(f"notifyd pid {d.pid}: server.max_connections {args.max_connections or 'default (1000)'}"
          f"; its open-files limit {daemon_nofile(d.pid)}; this process may open {files}")
    with sampling(d.pid, fds=True) as sampler:
        base = asyncio.run(healthy(d.port, d.key, args.baseline, args.probe_rate))
        print("\n".join(base.report("healthy client alone")), flush=True)
        before, fds_before = proc_status(d.pid, "VmRSS"), fd_count(d.pid)
        with Strangers(d.port, args.strangers, args.dribble) as stranger:
            began = time.monotonic()
            during = asyncio.run(healthy(d.port, d.key, args.attack, args.probe_rate))
            counts = daemon_counts(d.port, d.key)
            cpu = sampler.cpu(began, time.monotonic())
            seen = stranger.report()
        peak, fds_peak = sampler.peak(began, time.monotonic())
    print("\n".join(seen.lines()))
    print("\n".join(during.report("healthy client beside the stranger")))
    print("summary")
    print(f"  healthy client: {ratio(base, during)}")
    print(f"  the daemon's own counts at the attack's end: {counts}")
    print(f"  CPU during the attack: {cpu}")
    print(f"  daemon RSS: before {mib(before)}, peak {mib(peak)}; open files: before "
          f"{fds_before}, peak {fds_peak}")
    print(f"  load average {load_now()} at the end; notifyd exit status after SIGTERM: "
          f"{d.stop()}")
    for line in d.warnings():
        print(f"  daemon log: {line}")


def run(args: argparse.Namespace, d: Daemon, files: int) -> None:
    print(f"notifyd pid {d.pid}: server.max_connections {args.max_connections or 'default (1000)'}"
          f", header_timeout_sec {args.header_timeout or 'default (10)'}; its open-files limit "
          f"{daemon_nofile(d.pid)}; this process (and the attacker it starts) may open {files}")
    with sampling(d.pid, fds=True) as sampler:
        base = asyncio.run(healthy(d.port, d.key, args.baseline, args.probe_rate))
        print("\n".join(base.report("healthy client alone")), flush=True)
        before, fds_before = proc_status(d.pid, "VmRSS"), fd_count(d.pid)
        attack, during = under_attack(args, d)
        time.sleep(max(0.0, attack.ended + args.settle - time.monotonic()))
        after, after_at = proc_status(d.pid, "VmRSS"), time.monotonic() - attack.ended
        fds_after, hwm = fd_count(d.pid), proc_status(d.pid, "VmHWM")
        peak, fds_peak = sampler.peak(attack.began, attack.ended + 1)
        span = attack.ended - attack.began
        rows = timeline(attack, sampler, 1.0 if span <= 12 else 3.0)
    load_end = load_now()
    code = d.stop()
    header_timeout = args.header_timeout or 10.0
    first = f"{attack.first_wave_at:.1f} s" if attack.first_wave_at is not None else "never"
    print(f"slowloris: {attack.sockets} sockets, {attack.sockets} connects done after {first}; "
          f"{attack.opened} connections opened in all, {attack.connect_failed} connects failed; "
          f"the attacker process used {attack.cpu / max(span, 1e-9) * 100:.0f}% of one core")
    print("\n".join(during.report("healthy client beside the slowloris")))
    print("\n".join(rows))
    print("summary")
    print(f"  healthy keep-alive client: {ratio(base, during)}")
    print(f"  slowloris sockets the daemon closed: {len(attack.closed)} "
          f"({dict(collections.Counter(c.how for c in attack.closed))})")
    lived = [c.lived * 1000 for c in attack.closed]
    print(f"    their lifetimes: {describe(lived)}")
    print("\n".join(lifetimes(attack.closed, header_timeout)))
    first_close = min((c.at for c in attack.closed), default=float("nan"))
    still = attack.open_samples[-1][1] if attack.open_samples else "?"
    print(f"    first close {first_close:.1f} s into the attack; open when it ended: {still}"
          + (f"; {attack.stuck} socket tasks did not stop" if attack.stuck else ""))
    print(f"  daemon RSS: before {mib(before)}, peak {mib(peak)} sampled / {mib(hwm)} VmHWM, "
          f"{after_at:.1f} s after {mib(after)}")
    print(f"  daemon open files: before {fds_before}, peak {fds_peak}, after {fds_after}")
    print(f"  load average {load_end} at the end; notifyd exit status after SIGTERM: {code}")
    for line in d.warnings():
        print(f"  daemon log: {line}")


def ratio(base: Healthy, during: Healthy) -> str:
    def p99(seen: Healthy, kind: str) -> float:
        got = seen.latency.get(kind, [])
        return percentile(got, 99) if got else float("nan")

    out = []
    for kind in ("GET /healthz", "POST /v1/notifications", "fresh connection + GET /healthz"):
        out.append(f"{kind} p99 {p99(base, kind):.1f} -> {p99(during, kind):.1f} ms")
    return "; ".join(out)


def under_attack(args: argparse.Namespace, d: Daemon) -> tuple[Attack, Healthy]:
    """The slowloris in a child process (so its 2,000 sockets do not share the healthy client's
    event loop, only the machine), and the healthy client here once the sockets are open."""
    ctx = multiprocessing.get_context("spawn")
    here, there = ctx.Pipe()
    stop = ctx.Event()
    child = ctx.Process(target=attacker, name="slowloris", daemon=True,
                        args=(d.port, args.sockets, args.dribble, args.reopen, there, stop,
                              args.attack + 120))
    child.start()
    try:
        if not here.poll(60):
            raise SystemExit("the slowloris process did not open its sockets within 60 s")
        here.recv()
        during = asyncio.run(healthy(d.port, d.key, args.attack, args.probe_rate))
        stop.set()
        if not here.poll(30):
            raise SystemExit("the slowloris process did not report within 30 s of being stopped")
        out = here.recv()
    finally:
        stop.set()
        child.join(15)
        if child.is_alive():
            child.kill()
            child.join(5)
    attack = Attack(**{**out, "closed": [Closed(**c) for c in out["closed"]]})
    return attack, during


if __name__ == "__main__":
    main()
