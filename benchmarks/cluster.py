"""Two `notifyd serve` processes on one PostgreSQL database, one killed with SIGKILL half-way.

Run:   .venv/bin/python benchmarks/cluster.py              (10,000 ladders, a few minutes)
Small: .venv/bin/python benchmarks/cluster.py --n 300      (the suite runs this)

A fresh database (random name) on --server, dropped at the end. A webhook provider on
127.0.0.1 (its own thread) records each request's Idempotency-Key, body and arrival time. Two
daemons share the database; --n ladders of three webhook steps (1 s apart, stop = "delivered")
are posted half to each; a random third are resolved through either daemon's API and a random
third get a "delivered" receipt (recorded by this process: a third writer); half-way through
the posts the first daemon is SIGKILLed, and started again once the posts are done. Then every
notification must finish, and, read from the rows and the provider's log:

- no step sent under two keys, nor a key with two payloads;
- no attempt started after its notification's resolution;
- none early: no step's first attempt before the time it was planned for;
- every notification finished (no step pending, sending or unknown);
- the channel's rate, for both daemons together: no second of the provider's clock holds more
  requests than rate_per_sec + burst.

Prints the figures and exits 1 on any violation.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import re
import secrets
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import aiohttp
import psycopg
from aiohttp import web

ROOT = Path(__file__).resolve().parents[1]
LISTENING = re.compile(r"listening on http://([\d.]+):(\d+)")
RATE = 200.0  # the channel's rate_per_sec: a ceiling for both daemons together
BURST = 20
CONFIG = """
[scanner]
poll_interval_sec = 0.5
claim_batch = 128
lease_sec = 8.0

[daemon]
grace_sec = 2.0

[channels.hook]
type = "webhook"
url = "{url}"
timeout_sec = 2.0
rate_per_sec = {rate}
burst = {burst}
bulk_concurrency = 64
max_attempts = 10
backoff_base_sec = 0.2
backoff_max_sec = 1.0

[kinds.k]
ladder = [{{ channel = "hook", timeout_sec = 1.0 }}, {{ channel = "hook", timeout_sec = 1.0 }},
          {{ channel = "hook" }}]
stop = "delivered"
ttl_sec = 3600
"""


class Provider:
    """Records (key, body, epoch ms) of every request; always 202."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, bytes, int]] = []
        self.loop = asyncio.new_event_loop()
        self.url = ""
        ready = threading.Event()
        threading.Thread(target=self._serve, args=(ready,), daemon=True).start()
        ready.wait(10)

    def _serve(self, ready: threading.Event) -> None:
        asyncio.set_event_loop(self.loop)

        async def hook(request: web.Request) -> web.Response:
            self.seen.append((request.headers.get("Idempotency-Key", ""), await request.read(),
                              int(time.time() * 1000)))
            return web.Response(status=202)

        async def start() -> None:
            app = web.Application()
            app.router.add_post("/hook", hook)
            runner = web.AppRunner(app, access_log=None)
            await runner.setup()
            site = web.TCPSite(runner, "127.0.0.1", 0)
            await site.start()
            port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
            self.url = f"http://127.0.0.1:{port}/hook"
            ready.set()

        self.loop.run_until_complete(start())
        self.loop.run_forever()


class Daemon:
    def __init__(self, config: Path, url: str, name: str) -> None:
        self.log = open(config.parent / f"{name}.log", "w")  # noqa: SIM115 - closed in stop()
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "notifyd", "--config", str(config), "--db", url, "serve",
             "--port", "0"], stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True, env=env)
        deadline = time.monotonic() + 30
        assert self.proc.stderr is not None
        while time.monotonic() < deadline:
            line = self.proc.stderr.readline()
            if not line:
                break
            self.log.write(line)
            if m := LISTENING.search(line):
                self.url = f"http://127.0.0.1:{m.group(2)}"
                threading.Thread(target=self._drain, daemon=True).start()
                return
        self.proc.kill()
        raise SystemExit(f"{name} did not start; see {self.log.name}")

    def _drain(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.log.write(line)

    def cpu(self) -> float:
        """CPU seconds so far (user + system), from /proc."""
        try:
            fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
            return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        except OSError:
            return 0.0

    def stop(self, sig: signal.Signals = signal.SIGTERM) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            self.proc.wait(30)
        self.log.flush()


def query(url: str, sql: str) -> list[tuple[Any, ...]]:
    with psycopg.connect(url) as conn:
        return conn.execute(sql).fetchall()


async def post_all(urls: list[str], key: str, n: int, kill_at: int,
                   kill: Any) -> tuple[list[str], float]:
    ids: list[str] = []
    todo = iter(range(n))
    began = time.monotonic()

    async def worker(session: aiohttp.ClientSession) -> None:
        for i in todo:
            if i == kill_at:
                kill()
            body = {"user_id": f"u{i % 500}", "kind": "k", "dedup_key": f"d{i}"}
            for attempt in range(50):  # the killed daemon's share goes to the other meanwhile
                url = urls[(i + attempt) % 2]
                try:
                    async with session.post(f"{url}/v1/notifications", json=body) as resp:
                        if resp.status == 202 or resp.status == 200:
                            ids.append((await resp.json())["notification_id"])
                            break
                except aiohttp.ClientError:
                    await asyncio.sleep(0.05)
            else:
                raise SystemExit(f"could not post d{i}")

    async with aiohttp.ClientSession(headers={"Authorization": f"Bearer {key}"},
                                     timeout=aiohttp.ClientTimeout(total=30)) as session:
        await asyncio.gather(*(worker(session) for _ in range(32)))
    return ids, time.monotonic() - began


async def resolve_some(urls: list[str], key: str, ids: list[str], rng: random.Random) -> int:
    picked = rng.sample(ids, len(ids) // 3)
    async with aiohttp.ClientSession(headers={"Authorization": f"Bearer {key}"}) as session:
        for i, nid in enumerate(picked):
            await asyncio.sleep(rng.random() * 0.002)
            try:
                async with session.post(f"{urls[i % 2]}/v1/notifications/{nid}/resolve",
                                        json={"resolution": "done"}) as resp:
                    await resp.read()
            except aiohttp.ClientError:
                pass
    return len(picked)


async def receipts_for_some(config: Path, url: str, ids: list[str], rng: random.Random) -> int:
    sys.path.insert(0, str(ROOT))
    from notifyd.config import load_config
    from notifyd.core.models import Evidence, Receipt
    from notifyd.domain import policy
    from notifyd.store import open_store

    rules = policy.rules(load_config(config).catalog)
    store = await open_store(url)
    picked = rng.sample(ids, len(ids) // 3)
    try:
        for nid in picked:
            await asyncio.sleep(rng.random() * 0.002)
            await store.record_receipts([Receipt("delivery-receipt", f"r-{nid}",
                                                 Evidence.DELIVERED, None, key=f"{nid}:0")], rules)
    finally:
        await store.close()
    return len(picked)


def check(url: str, prov: Provider, ids: list[str]) -> list[str]:
    bad: list[str] = []
    bodies: dict[str, set[bytes]] = {}
    for key, body, _ in prov.seen:
        bodies.setdefault(key, set()).add(body)
    two = [k for k, b in bodies.items() if len(b) > 1]
    if two:
        bad.append(f"{len(two)} keys carried two payloads, e.g. {two[:3]}")
    steps = Counter(k.rsplit(":", 1)[0] + ":" + k.rsplit(":", 1)[1] for k in bodies)
    if any(v > 1 for v in steps.values()):
        bad.append("a step sent under two keys")
    late = query(url, "SELECT a.notification_id, a.step_no FROM attempts a JOIN notifications n "
                      "ON n.id = a.notification_id WHERE a.started_at > n.resolved_at")
    if late:
        bad.append(f"{len(late)} attempts started after their resolution, e.g. {late[:3]}")
    early = query(url, "SELECT a.notification_id, a.step_no FROM attempts a JOIN steps s "
                       "USING (notification_id, step_no) WHERE a.attempt_no = 1 "
                       "AND a.started_at < s.planned_at")
    if early:
        bad.append(f"{len(early)} steps sent before their time, e.g. {early[:3]}")
    found = {r[0] for r in query(url, "SELECT id FROM notifications")}
    if found != set(ids):
        bad.append(f"{len(set(ids) - found)} accepted notifications missing")
    return bad


def finished(url: str) -> int:
    return int(query(url, "SELECT count(*) FROM steps WHERE state IN "
                          "('pending', 'sending', 'unknown')")[0][0])


def peak_per_second(prov: Provider) -> int:
    return max(Counter(at // 1000 for _, _, at in prov.seen).values(), default=0)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=10_000, help="ladders (10,000)")
    ap.add_argument("--server", default=os.environ.get(
        "NOTIFYD_TEST_PG", "postgresql://root@127.0.0.1:5432/postgres"))
    ap.add_argument("--deadline", type=float, default=600.0, help="seconds to finish in")
    args = ap.parse_args()
    rng = random.Random(7)
    name = f"notifyd_cluster_{secrets.token_hex(4)}"
    with psycopg.connect(args.server, autocommit=True) as admin:
        admin.execute(f"CREATE DATABASE {name}")
    url = args.server.rsplit("/", 1)[0] + "/" + name
    folder = Path(tempfile.mkdtemp(prefix="notifyd-cluster-"))
    prov = Provider()
    config = folder / "notifyd.toml"
    config.write_text(CONFIG.format(url=prov.url, rate=RATE, burst=BURST))
    daemons: list[Daemon] = []
    try:
        made = subprocess.run([sys.executable, "-m", "notifyd", "--config", str(config), "--db",
                               url, "keys", "create", "--name", "bench"], capture_output=True,
                              text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
        if made.returncode:
            raise SystemExit(made.stderr)
        key = next(w for w in made.stdout.split() if w.startswith("nfy_"))
        daemons += [Daemon(config, url, "a"), Daemon(config, url, "b")]
        urls = [d.url for d in daemons]
        cpu0 = [d.cpu() for d in daemons]
        began, start_wall = time.monotonic(), time.time()
        at_kill: list[float] = []

        def kill() -> None:
            at_kill.append(daemons[0].cpu())
            daemons[0].proc.kill()

        ids, took = asyncio.run(post_all(urls, key, args.n, args.n // 2, kill))
        killed_cpu = at_kill[0] - cpu0[0] if at_kill else 0.0
        daemons.append(Daemon(config, url, "a-again"))
        urls[0] = daemons[2].url

        async def settle() -> tuple[int, int]:
            return await asyncio.gather(resolve_some(urls, key, ids, rng),
                                        receipts_for_some(config, url, ids, rng))

        resolved, receipted = asyncio.run(settle())
        while finished(url) and time.monotonic() - began < args.deadline:
            time.sleep(0.5)
        wall = time.monotonic() - began
        left = finished(url)
        cpu = [daemons[1].cpu() - cpu0[1], daemons[2].cpu()]
        bad = check(url, prov, ids)
        if left:
            bad.append(f"{left} steps still open after {args.deadline:.0f} s")
        peak = peak_per_second(prov)
        if peak > RATE + BURST:
            bad.append(f"{peak} requests in one second: over rate_per_sec {RATE:.0f} + burst "
                       f"{BURST}")
        sent = int(query(url, "SELECT count(*) FROM attempts")[0][0])
        print(f"cluster: {len(ids)} ladders posted in {took:.1f} s ({len(ids) / took:.0f}/s) to "
              f"two daemons, the first SIGKILLed at {args.n // 2}; {resolved} resolved by API, "
              f"{receipted} receipts; {len(prov.seen)} provider requests, {sent} attempts; all "
              f"done in {wall:.1f} s")
        print(f"rate: at most {peak} requests in one second; rate_per_sec = {RATE:.0f} and "
              f"burst = {BURST} for the deployment")
        print(f"CPU: b {cpu[0]:.1f} s, a (restarted) {cpu[1]:.1f} s, a before the kill "
              f"{killed_cpu:.1f} s; {1000 * (cpu[0] + cpu[1]) / max(1, len(ids)):.2f} ms per "
              "notification for the two that lived")
        arrivals = sorted(at for _, _, at in prov.seen)
        if arrivals:
            span = (arrivals[-1] - arrivals[0]) / 1000
            print(f"provider: requests from {(arrivals[0] / 1000 - start_wall):.1f} s to "
                  f"{(arrivals[-1] / 1000 - start_wall):.1f} s after the first post "
                  f"({len(arrivals) / max(span, 0.001):.0f}/s on average)")
        for b in bad:
            print("VIOLATION:", b)
        print("ok" if not bad else "FAILED")
        return 1 if bad else 0
    finally:
        for d in daemons:
            d.stop()
        with psycopg.connect(args.server, autocommit=True) as admin:
            admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


if __name__ == "__main__":
    sys.exit(main())
