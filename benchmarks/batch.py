"""Notifications/s through POST /v1/notifications/batch (batches of 100) beside single POSTs.

Run: .venv/bin/python benchmarks/batch.py [--total 20000] [--rounds 2]
Each round starts `notifyd serve` as a subprocess on a fresh database for each way of posting
(benchmarks/accept.py's load: a 3-step ladder that starts an hour out, synchronous=FULL), and this
process generates the load over keep-alive connections: single POSTs from 64 clients, then
batches of `--size` from `--batch-clients` clients, every item checked accepted and its row
counted. It prints notifications/s for each and the ratio; the machine drifts, so the rounds
interleave the two and the medians are the figures to compare.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sqlite3
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from accept import body, free_port, prepare, start  # noqa: E402
from httpload import closed_loop, post  # noqa: E402


def batch_body(first: int, size: int, tag: str) -> bytes:
    return json.dumps({"items": [json.loads(body(i, f"{tag}-{i}"))
                                 for i in range(first, first + size)]}).encode()


def run(size: int, clients: int, total: int, tag: str) -> float:
    """Notifications/s of one way of posting (size 1: single POSTs) on a fresh daemon."""
    db, env, headers = prepare("notifyd-batch-")
    port = free_port()
    daemon = start([sys.executable, "-m", "notifyd", "serve", "--port", str(port)], port, env=env)

    def make(i: int) -> bytes:
        if size == 1:
            return post("/v1/notifications", body(i, f"{tag}-{i}"), headers)
        return post("/v1/notifications/batch", batch_body(i * size, size, tag), headers)

    try:
        asyncio.run(closed_loop("127.0.0.1", port, clients, max(2000 // size, 4), make))  # warm
        requests = total // size
        began = time.perf_counter()
        _, results = asyncio.run(closed_loop("127.0.0.1", port, clients, requests,
                                             lambda i: make(i + 10_000_000 // size)))
        wall = time.perf_counter() - began
    finally:
        daemon.terminate()
        daemon.wait()
    accepted = 0
    for status, answer in results:
        if size == 1:
            accepted += status == 202
        elif status == 200:
            accepted += sum(r["status"] == 202 for r in json.loads(answer)["results"])
    if accepted != requests * size:
        raise SystemExit(f"{tag}: {requests * size - accepted} of {requests * size} not accepted")
    with sqlite3.connect(db) as conn:
        rows = conn.execute("SELECT count(*) FROM notifications").fetchone()[0]
    if rows < accepted:
        raise SystemExit(f"{tag}: {accepted} accepted but {rows} rows")
    return accepted / wall


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--total", type=int, default=20_000, help="notifications per run")
    ap.add_argument("--size", type=int, default=100, help="items per batch")
    ap.add_argument("--batch-clients", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()
    single, batched = [], []
    print(f"machine: {os.cpu_count()} cores, python {sys.version.split()[0]}, sqlite "
          f"{sqlite3.sqlite_version}, synchronous=FULL, 3-step ladder, {args.total} per run")
    for r in range(args.rounds):
        single.append(run(1, 64, args.total, f"single{r}"))
        batched.append(run(args.size, args.batch_clients, args.total, f"batch{r}"))
        print(f"round {r + 1}: single POSTs (64 clients) {single[-1]:8.0f}/s   batches of "
              f"{args.size} ({args.batch_clients} clients) {batched[-1]:8.0f}/s   ratio "
              f"{batched[-1] / single[-1]:5.1f}", flush=True)
    s, b = statistics.median(single), statistics.median(batched)
    print(f"median notifications/s: single {s:.0f}, batch {b:.0f} ({b / s:.1f}x)")


if __name__ == "__main__":
    main()
