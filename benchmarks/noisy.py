"""A loud tenant beside a quiet one: tenant B posts single notifications at a steady rate (open
loop, its own process) while tenant A runs batch loops of 1,000 items back to back; B's accept
p50/p99 is printed idle (A silent) and noisy (A looping), for each source tree, interleaved.

Run: .venv/bin/python benchmarks/noisy.py [--rounds 2] [--rate 50] [--seconds 10]
         [--loops 2] [--size 1000] TREE [TREE ...]

Each tree is a folder holding a `notifyd/` package (`git worktree add /tmp/before main` for the
tree before a change); each daemon is started from a scratch folder so that it imports its
tree's package (benchmarks/accept_ab.py says why). Each run: a fresh database with benchmarks/
accept.py's config (a 3-step ladder that starts an hour out, synchronous=FULL), tenants `a` and
`b` with a key each; B's generator runs in a process of its own, so A's client never delays
B's requests on the client side.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from accept import CONFIG, body, free_port, start  # noqa: E402
from httpload import Conn, open_loop, percentile, post  # noqa: E402


def _quiet(port: int, headers: dict[str, str], rate: float, seconds: float,
           out: multiprocessing.Queue) -> None:  # type: ignore[type-arg]
    tag = f"b{time.monotonic_ns()}"
    lat = asyncio.run(open_loop("127.0.0.1", port, rate, seconds,
                                lambda i: post("/v1/notifications", body(i, f"{tag}-{i}"),
                                               headers), pool=8))
    out.put(lat)


async def _loud(port: int, headers: dict[str, str], size: int, stop: asyncio.Event,
                loop_no: int) -> int:
    """One batch loop: a batch of `size` after the last one's answer, until stopped."""
    conn = await Conn.open("127.0.0.1", port)
    sent = 0
    try:
        while not stop.is_set():
            first = sent * size
            items = [json.loads(body(i, f"a{loop_no}-{time.monotonic_ns()}-{i}"))
                     for i in range(first, first + size)]
            status, _ = await conn.request(post("/v1/notifications/batch",
                                                json.dumps({"items": items}).encode(),
                                                headers))
            if status != 200:
                raise SystemExit(f"tenant a's batch answered {status}")
            sent += 1
    finally:
        conn.close()
    return sent


async def _noise(port: int, headers: dict[str, str], size: int, loops: int,
                 seconds: float) -> int:
    stop = asyncio.Event()
    tasks = [asyncio.create_task(_loud(port, headers, size, stop, n)) for n in range(loops)]
    await asyncio.sleep(seconds)
    stop.set()
    return sum(await asyncio.gather(*tasks))


def _key(env: dict[str, str], tenant: str) -> dict[str, str]:
    subprocess.run([sys.executable, "-m", "notifyd", "tenants", "create", tenant], env=env,
                   check=True, capture_output=True)
    key = subprocess.run([sys.executable, "-m", "notifyd", "keys", "create", "--name", tenant,
                          "--tenant", tenant], env=env, check=True, capture_output=True,
                         text=True).stdout.strip()
    return {"Authorization": f"Bearer {key}"}


def run(tree: str, noisy: bool, args: argparse.Namespace) -> tuple[float, float, int]:
    """B's accept p50 and p99 (ms) and A's batches answered, on a fresh daemon of `tree`."""
    scratch = Path(tempfile.mkdtemp(prefix="notifyd-noisy-"))
    (scratch / "bench.toml").write_text(CONFIG)
    env = {**os.environ, "PYTHONPATH": tree, "NOTIFYD_CONFIG": str(scratch / "bench.toml"),
           "NOTIFYD_DB": str(scratch / "bench.db")}
    a, b = _key(env, "a"), _key(env, "b")
    port = free_port()
    daemon = start([sys.executable, "-m", "notifyd", "serve", "--port", str(port)], port,
                   env=env, cwd=str(scratch))
    try:
        out: multiprocessing.Queue = multiprocessing.get_context("spawn").Queue()  # type: ignore[type-arg]
        quiet = multiprocessing.get_context("spawn").Process(
            target=_quiet, args=(port, b, args.rate, args.seconds, out))
        quiet.start()
        batches = asyncio.run(_noise(port, a, args.size, args.loops, args.seconds + 1.0)) \
            if noisy else 0
        lat = out.get(timeout=args.seconds + 60)
        quiet.join()
    finally:
        daemon.terminate()
        daemon.wait()
    warm = lat[len(lat) // 10:]  # the first tenth starts while A's loops start
    return percentile(warm, 50), percentile(warm, 99), batches


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("trees", nargs="+", help="folders that each hold a notifyd/ package")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--rate", type=float, default=50.0, help="tenant B's POSTs per second")
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--loops", type=int, default=2, help="tenant A's batch loops")
    ap.add_argument("--size", type=int, default=1000, help="items per batch of tenant A")
    args = ap.parse_args()
    trees = [str(Path(t).resolve()) for t in args.trees]
    for tree in trees:
        check = subprocess.run([sys.executable, "-c", "import notifyd; print(notifyd.__file__)"],
                               env={**os.environ, "PYTHONPATH": tree}, cwd=tempfile.gettempdir(),
                               capture_output=True, text=True, check=True).stdout.strip()
        if not check.startswith(tree):
            raise SystemExit(f"{tree} imports {check}")
    figures: dict[tuple[str, bool], list[tuple[float, float, int]]] = {}
    for r in range(args.rounds):
        for tree in trees:
            for noisy in (False, True):
                p50, p99, batches = run(tree, noisy, args)
                figures.setdefault((tree, noisy), []).append((p50, p99, batches))
                print(f"round {r + 1} {tree} {'noisy' if noisy else 'idle '}: B p50 "
                      f"{p50:7.1f} ms  p99 {p99:7.1f} ms  A batches {batches}", flush=True)
    print("medians:")
    for tree in trees:
        idle, loud = figures[(tree, False)], figures[(tree, True)]
        p99_idle = statistics.median(f[1] for f in idle)
        p99_loud = statistics.median(f[1] for f in loud)
        print(f"  {tree}: idle p50 {statistics.median(f[0] for f in idle):.1f} p99 "
              f"{p99_idle:.1f} ms; noisy p50 {statistics.median(f[0] for f in loud):.1f} p99 "
              f"{p99_loud:.1f} ms ({p99_loud / p99_idle:.1f}x); A batches "
              f"{statistics.median(f[2] for f in loud):.0f}")


if __name__ == "__main__":
    main()
