"""One daemon on SQLite, one on PostgreSQL, two on PostgreSQL: accepts/s, steps/s, due lag and CPU
per notification per process, in one run on this machine.

Run: .venv/bin/python benchmarks/scale.py [--seconds 10] [--rate 150]

For each set-up (a fresh SQLite file or PostgreSQL database; `notifyd serve` processes sharing
it; one webhook provider on 127.0.0.1 answering 202 at once), three phases, posts split evenly
between the processes by 32 closed-loop clients (this process, on the same two cores):

1. accepts/s: --seconds of POSTs whose one step is due in an hour (the accept path alone).
2. steps/s: --n POSTs whose step is due at once, as fast as they go; from the first post to the
   provider's last request (every step sent).
3. due lag: --rate notifications/s for --seconds, open loop; each step's first attempt minus
   the time it was due (the claim's lag), p50 and p99, read from the rows.

CPU per notification is each daemon's user + system CPU over phases 1-3 divided by the
notifications it accepted, and the PostgreSQL server's (all its processes on this machine) over
all of them. This machine has two cores: two processes do not double anything
here; the CPU per notification says what more cores or hosts would carry.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import secrets
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import aiohttp
import psycopg

sys.path.insert(0, str(Path(__file__).parent))
from cluster import ROOT, Daemon, Provider  # noqa: E402

CONFIG = """
[scanner]
poll_interval_sec = 0.5
claim_batch = 256
lease_sec = 30.0

[channels.hook]
type = "webhook"
url = "{url}"
timeout_sec = 5.0
rate_per_sec = 100000.0
burst = 100000
bulk_concurrency = 256

[kinds.later]
ladder = [{{ channel = "hook", after_sec = 3600 }}]
ttl_sec = 7200

[kinds.now]
ladder = [{{ channel = "hook" }}]
ttl_sec = 7200
"""


async def closed(urls: list[str], key: str, kind: str, prefix: str, n: int | None,
                 seconds: float | None) -> int:
    """POST as fast as 32 clients go, alternating daemons: n of them, or for `seconds`."""
    done = 0
    stop_at = time.monotonic() + (seconds or 1e9)
    counter = iter(range(n if n is not None else 10**9))

    async def worker(session: aiohttp.ClientSession) -> None:
        nonlocal done
        for i in counter:
            if time.monotonic() > stop_at:
                return
            body = {"user_id": f"u{i % 1000}", "kind": kind, "dedup_key": f"{prefix}{i}"}
            async with session.post(f"{urls[i % len(urls)]}/v1/notifications", json=body) as r:
                await r.read()
                done += r.status == 202

    async with aiohttp.ClientSession(headers={"Authorization": f"Bearer {key}"}) as session:
        await asyncio.gather(*(worker(session) for _ in range(32)))
    return done


async def open_loop(urls: list[str], key: str, rate: float, seconds: float) -> int:
    """`rate` POSTs a second on a schedule, whatever the answers do."""
    sent = 0
    async with aiohttp.ClientSession(headers={"Authorization": f"Bearer {key}"}) as session:
        async def one(i: int) -> None:
            body = {"user_id": f"u{i % 1000}", "kind": "now", "dedup_key": f"lag{i}"}
            async with session.post(f"{urls[i % len(urls)]}/v1/notifications", json=body) as r:
                await r.read()

        tasks = []
        began = time.monotonic()
        for i in range(int(rate * seconds)):
            await asyncio.sleep(max(0.0, began + i / rate - time.monotonic()))
            tasks.append(asyncio.create_task(one(i)))
            sent += 1
        await asyncio.gather(*tasks)
    return sent


def server_cpu() -> float:
    """CPU seconds of every PostgreSQL server process on this machine (0 without one)."""
    total = 0.0
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:
            continue
        if "(postgres)" in text:
            fields = text.rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return total


def rows(url: str, sql: str) -> list[tuple[int, ...]]:
    if url.startswith("sqlite:///"):
        import sqlite3

        with sqlite3.connect(url[len("sqlite:///"):]) as conn:
            return conn.execute(sql).fetchall()
    with psycopg.connect(url) as conn:
        return conn.execute(sql).fetchall()  # type: ignore[return-value]


def pct(values: list[int], p: float) -> int:
    values = sorted(values)
    return values[min(len(values) - 1, int(p * len(values)))] if values else 0


def run(label: str, url: str, processes: int, args: argparse.Namespace, folder: Path) -> None:
    prov = Provider()
    config = folder / f"{label}.toml"
    config.write_text(CONFIG.format(url=prov.url))
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    made = subprocess.run([sys.executable, "-m", "notifyd", "--config", str(config), "--db",
                           url, "keys", "create", "--name", "bench"], capture_output=True,
                          text=True, env=env)
    key = next(w for w in made.stdout.split() if w.startswith("nfy_"))
    daemons = [Daemon(config, url, f"{label}-{i}") for i in range(processes)]
    try:
        urls = [d.url for d in daemons]
        cpu0, server0 = [d.cpu() for d in daemons], server_cpu()
        t = time.monotonic()
        accepted = asyncio.run(closed(urls, key, "later", "a", None, args.seconds))
        accepts = accepted / (time.monotonic() - t)
        t, wall = time.monotonic(), time.time()
        asyncio.run(closed(urls, key, "now", "s", args.n, None))
        while len(prov.seen) < args.n and time.monotonic() - t < 120:
            time.sleep(0.05)
        steps = len(prov.seen) / (max(at for _, _, at in prov.seen) / 1000 - wall)
        lagged = asyncio.run(open_loop(urls, key, args.rate, args.seconds))
        deadline = time.monotonic() + 60
        while len(prov.seen) < args.n + lagged and time.monotonic() < deadline:
            time.sleep(0.05)
        cpu = [d.cpu() - c for d, c in zip(daemons, cpu0, strict=True)]
        server = server_cpu() - server0 if url.startswith("postgresql") else 0.0
        lags = [r[0] for r in rows(url, "SELECT a.started_at - s.send_after FROM attempts a "
                                        "JOIN steps s USING (notification_id, step_no) "
                                        "JOIN notifications n ON n.id = s.notification_id "
                                        "WHERE n.dedup_key LIKE 'lag%' AND a.attempt_no = 1")]
        total = accepted + args.n + lagged
        per = " + ".join(f"{1000 * c / (total / processes):.2f}" for c in cpu)
        print(f"{label:<14} {accepts:7.0f} accepts/s  {steps:7.0f} steps/s  due lag at "
              f"{args.rate:.0f}/s: p50 {pct(lags, 0.5):4d} ms p99 {pct(lags, 0.99):5d} ms "
              f"({len(lags)} of {lagged})  CPU ms/notification per process: {per}"
              + (f", the database server's {1000 * server / total:.2f}" if server else ""))
    finally:
        for d in daemons:
            d.stop()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--n", type=int, default=3000, help="steps/s: notifications")
    ap.add_argument("--rate", type=float, default=150.0, help="due lag: notifications/s")
    ap.add_argument("--server", default=os.environ.get(
        "NOTIFYD_TEST_PG", "postgresql://root@127.0.0.1:5432/postgres"))
    args = ap.parse_args()
    print(f"load average at start: {os.getloadavg()[0]:.2f}")
    with tempfile.TemporaryDirectory(prefix="notifyd-scale-") as tmp:
        folder = Path(tmp)
        run("sqlite x1", f"sqlite:///{folder}/n.db", 1, args, folder)
        for n in (1, 2):
            name = f"notifyd_scale_{secrets.token_hex(4)}"
            with psycopg.connect(args.server, autocommit=True) as admin:
                admin.execute(f"CREATE DATABASE {name}")
            try:
                run(f"postgresql x{n}", args.server.rsplit("/", 1)[0] + "/" + name, n, args,
                    folder)
            finally:
                with psycopg.connect(args.server, autocommit=True) as admin:
                    admin.execute(f"DROP DATABASE {name} WITH (FORCE)")
    print(f"load average at end: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
