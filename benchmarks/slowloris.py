"""A slowloris of 2,000 sockets against notifyd, with a healthy client's latency beside it.

Run:   /work/main/.venv/bin/python benchmarks/slowloris.py [--sockets 2000] [--attack 30]
Quick: /work/main/.venv/bin/python benchmarks/slowloris.py --quick

1. Baseline: a healthy client for --baseline seconds: one keep-alive connection sending GET
   /healthz and POST /v1/notifications (with a key) in turn, back to back (closed loop), and a
   probe opening a fresh connection for one GET /healthz --probe-rate times a second.
2. Attack: --sockets connections that each send a request line and a Host header, then one more
   header byte every --dribble seconds (jittered), never the blank line that ends the headers. A
   socket the daemon closes (EOF or reset) is noted with when and after how long, and opened
   again at its next tick, as a real slowloris keeps its count (--no-reopen: one wave only). Once
   the first wave is connected, the healthy client runs again for --attack seconds.
3. The daemon's VmRSS before the attack, at its peak and --settle seconds after the attack's
   sockets are closed, and its open files (/proc/PID/fd) at peak; both sampled every 100 ms on a
   thread.

notifyd runs this checkout's code from a scratch folder (see benchmarks/overload.py), with its
defaults (server.max_connections 1000, server.header_timeout_sec 10) unless --max-connections or
--header-timeout. notifyd raises its own open-files soft limit to the hard one at start; this
process raises its own too, so that the 2,000 client sockets fit. Client and daemon share the
machine's cores. The scratch folder is removed and the daemon stopped (SIGTERM) at the end, even
on errors; every wait is bounded.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import random
import sys
import time
from dataclasses import dataclass, field
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

    def report(self, name: str) -> list[str]:
        done = sum(len(v) for k, v in self.latency.items() if not k.startswith("fresh"))
        rows = [f"{name}: {done / max(self.seconds, 1e-9):.0f} requests/s on the keep-alive "
                f"connection over {self.seconds:.1f} s; failures: "
                f"{dict(self.failures) if self.failures else 'none'}"]
        for kind in ("GET /healthz", "POST /v1/notifications", "fresh connection + GET /healthz"):
            got = self.latency.get(kind, [])
            rows.append(f"  {kind + ':':<33} {len(got):6} answered  {describe(got)}")
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


async def healthy(port: int, key: str, seconds: float, probe_rate: float) -> Healthy:
    loop = asyncio.get_running_loop()
    seen = Healthy()
    began = loop.time()
    until = began + seconds
    client = asyncio.create_task(keepalive(port, key, until, seen))
    probes: set[asyncio.Task[None]] = set()
    while loop.time() < until and probe_rate > 0:
        probe = asyncio.create_task(fresh(port, seen))
        probes.add(probe)
        probe.add_done_callback(probes.discard)
        await asyncio.sleep(1 / probe_rate)
    await asyncio.wait({client, *probes}, timeout=max(0.0, until - loop.time()) + 10)
    seen.seconds = loop.time() - began
    return seen


# ---------------------------------------------------------------- the slowloris


@dataclass
class Closed:
    at: float  # seconds since the attack began
    lived: float  # seconds since that socket connected
    how: str


class Slowloris:
    def __init__(self, port: int, sockets: int, dribble: float, reopen: bool) -> None:
        self.port, self.sockets, self.dribble, self.reopen = port, sockets, dribble, reopen
        self.began = 0.0
        self.open_now = self.opened = self.connect_failed = 0
        self.first_wave_at: float | None = None  # seconds until all sockets were first open
        self.closed: list[Closed] = []
        self.open_samples: list[tuple[float, int]] = []
        self.tasks: list[asyncio.Task[None]] = []

    def start(self) -> None:
        loop = asyncio.get_running_loop()
        self.began = loop.time()
        gate = asyncio.Semaphore(256)  # connects in flight at once
        self.tasks = [loop.create_task(self.slot(gate)) for _ in range(self.sockets)]

    async def stop(self) -> None:
        for task in self.tasks:
            task.cancel()
        await asyncio.wait(self.tasks, timeout=10)

    async def count(self, until: float) -> None:
        """Sample how many sockets are open (as this side sees them) every 100 ms."""
        loop = asyncio.get_running_loop()
        while loop.time() < until:
            self.open_samples.append((loop.time() - self.began, self.open_now))
            await asyncio.sleep(0.1)

    async def slot(self, gate: asyncio.Semaphore) -> None:
        loop = asyncio.get_running_loop()
        while True:
            async with gate:
                try:
                    reader, writer = await asyncio.wait_for(
                        asyncio.open_connection("127.0.0.1", self.port), 5)
                except (TimeoutError, OSError):
                    self.connect_failed += 1
                    await asyncio.sleep(self.dribble)
                    continue
            opened = loop.time()
            self.open_now += 1
            self.opened += 1
            if self.opened == self.sockets:
                self.first_wave_at = opened - self.began
            try:
                how = await self.hold(reader, writer)
            finally:
                self.open_now -= 1
                writer.close()
            now = loop.time()
            self.closed.append(Closed(now - self.began, now - opened, how))
            if not self.reopen:
                return
            await asyncio.sleep(self.dribble * random.uniform(0.5, 1.5))

    async def hold(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> str:
        """Dribble until the daemon closes the socket; how it did."""
        answered = ""
        writer.write(HEAD)
        for i in range(1 << 30):
            try:
                data = await asyncio.wait_for(reader.read(4096),
                                              self.dribble * random.uniform(0.5, 1.5))
            except TimeoutError:
                writer.write(DRIBBLE[i % len(DRIBBLE):][:1])
                continue
            except CONN_ERRORS:
                return f"reset{answered}"
            if not data:
                return f"EOF{answered}"
            answered = answered or f" after an answer {data[9:12].decode(errors='replace')}"
        return "never"


# ---------------------------------------------------------------- the report


def lifetimes(closed: list[Closed], header_timeout: float) -> list[str]:
    """How long the sockets the daemon closed had lived, in bands around the header timeout."""
    bands = [(0, 1, "under 1 s (evicted as new connections came)"),
             (1, header_timeout - 0.5, f"1 s to {header_timeout - 0.5:g} s"),
             (header_timeout - 0.5, header_timeout + 1.5,
              f"{header_timeout - 0.5:g}-{header_timeout + 1.5:g} s (the header timeout)"),
             (header_timeout + 1.5, float("inf"), f"over {header_timeout + 1.5:g} s (too long)")]
    rows = []
    for lo, hi, name in bands:
        n = sum(lo <= c.lived < hi for c in closed)
        rows.append(f"    lived {name}: {n}")
    return rows


def timeline(attack: Slowloris, sampler: Sampler, mono_offset: float, span: float,
             step: float) -> list[str]:
    rows = ["  attack s   closed/s   open (min-max, client view)   daemon fds   daemon RSS"]
    t = 0.0
    while t < span:
        closed = sum(t <= c.at < t + step for c in attack.closed)
        open_n = [n for at, n in attack.open_samples if t <= at < t + step]
        rss, fds = sampler.peak(attack.began + t + mono_offset, attack.began + t + step + mono_offset)
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
    header(f"slowloris: {args.sockets} sockets, a byte every {args.dribble:g} s, "
           f"{'reopened when closed' if args.reopen else 'one wave'}")
    server = []
    if args.max_connections:
        server.append(f"max_connections = {args.max_connections}")
    if args.header_timeout:
        server.append(f"header_timeout_sec = {args.header_timeout}")
    if files < args.sockets + 100:
        raise SystemExit(f"this process may open {files} files: too few for {args.sockets} sockets")
    with Daemon(server_toml="\n".join(server)) as d:
        run(args, d, files)


def run(args: argparse.Namespace, d: Daemon, files: int) -> None:
    print(f"notifyd pid {d.pid}: server.max_connections {args.max_connections or 'default (1000)'}"
          f", header_timeout_sec {args.header_timeout or 'default (10)'}; its open-files limit "
          f"{daemon_nofile(d.pid)}; this process may open {files}")
    with sampling(d.pid, fds=True) as sampler:
        base = asyncio.run(healthy(d.port, d.key, args.baseline, args.probe_rate))
        print("\n".join(base.report("healthy client alone")), flush=True)
        before, fds_before = proc_status(d.pid, "VmRSS"), fd_count(d.pid)
        attack, mono_offset, during, ended = asyncio.run(under_attack(args, d))
        time.sleep(max(0.0, ended + args.settle - time.monotonic()))
        after, after_at = proc_status(d.pid, "VmRSS"), time.monotonic() - ended
        fds_after, hwm = fd_count(d.pid), proc_status(d.pid, "VmHWM")
        peak, fds_peak = sampler.peak(attack.began + mono_offset, ended)
        span = ended - attack.began - mono_offset
        rows = timeline(attack, sampler, mono_offset, span, 1.0 if span <= 12 else 3.0)
    load_end = load_now()
    code = d.stop()
    header_timeout = args.header_timeout or 10.0
    first = f"{attack.first_wave_at:.1f} s" if attack.first_wave_at is not None else "never"
    print(f"slowloris: {attack.sockets} sockets, all first open after {first}; "
          f"{attack.opened} connections opened in all, {attack.connect_failed} connects failed")
    print("\n".join(during.report("healthy client beside the slowloris")))
    print("\n".join(rows))
    print("summary")
    print(f"  healthy keep-alive client: {ratio(base, during)}")
    print(f"  slowloris sockets the daemon closed: {len(attack.closed)} "
          f"({dict(collections.Counter(c.how for c in attack.closed))})")
    lived = [c.lived * 1000 for c in attack.closed]
    print(f"    their lifetimes: {describe(lived)}")
    print("\n".join(lifetimes(attack.closed, header_timeout)))
    first_closes = sorted(c.at for c in attack.closed)[:1]
    print(f"    first close {first_closes[0] if first_closes else float('nan'):.1f} s into the "
          f"attack; still open when it ended: {attack.open_samples[-1][1] if attack.open_samples else '?'}")
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


async def under_attack(args: argparse.Namespace,
                       d: Daemon) -> tuple[Slowloris, float, Healthy, float]:
    """The slowloris, and the healthy client beside it once the first wave is open; the offset
    from this loop's clock to time.monotonic() and when (monotonic) the attack's sockets closed."""
    loop = asyncio.get_running_loop()
    offset = time.monotonic() - loop.time()
    attack = Slowloris(d.port, args.sockets, args.dribble, args.reopen)
    attack.start()
    counter = asyncio.create_task(attack.count(loop.time() + 60 + args.attack))
    try:
        deadline = loop.time() + 30
        while attack.first_wave_at is None and loop.time() < deadline:
            if not args.reopen and attack.opened + attack.connect_failed >= args.sockets:
                break
            await asyncio.sleep(0.05)
        during = await healthy(d.port, d.key, args.attack, args.probe_rate)
    finally:
        counter.cancel()
        await attack.stop()
    return attack, offset, during, time.monotonic()


if __name__ == "__main__":
    main()
