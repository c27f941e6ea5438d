"""The store on SQLite beside PostgreSQL, in one process, without HTTP: what one statement costs
inside a write script, and accepts/s through store.accept (64 at once, group commit on both).

Run: .venv/bin/python benchmarks/store_backends.py [--n 5000]
PostgreSQL: a fresh database on NOTIFYD_TEST_PG's server (the local one), dropped at the end.
Prints, per backend: microseconds per statement (SELECT 1, 2,000 in one script) and per indexed
read by key, and accepts/s with the process's CPU per accept.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import secrets
import sys
import tempfile
import time
from pathlib import Path

import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from store_support import accept, inp, plan  # noqa: E402

from notifyd.core.clock import SystemClock  # noqa: E402
from notifyd.store import open_store  # noqa: E402

SERVER = os.environ.get("NOTIFYD_TEST_PG", "postgresql://root@127.0.0.1:5432/postgres")


async def measure(url: str, n: int) -> str:
    store = await open_store(url, SystemClock())
    try:
        backend = store.backend  # type: ignore[attr-defined]
        await accept(store, "n_probe", "a")
        reps = 2000
        t = time.perf_counter()
        await backend.write(lambda tx: [tx.value("SELECT 1") for _ in range(reps)])
        per_stmt = (time.perf_counter() - t) / reps * 1e6
        t = time.perf_counter()
        await backend.write(lambda tx: [tx.one(tx.q.SELECT_NOTIFICATION, ("n_probe",))
                                        for _ in range(reps)])
        per_read = (time.perf_counter() - t) / reps * 1e6
        todo = iter(range(n))
        cpu, t = time.process_time(), time.perf_counter()

        async def worker() -> None:
            for i in todo:
                r = await store.accept(inp(f"u{i % 500}", f"d{i}"), f"n_{i:08d}",
                                       plan("a", "a", "a", gap=3_600_000), 3600)
                assert r.created

        await asyncio.gather(*(worker() for _ in range(64)))
        wall, cpu = time.perf_counter() - t, time.process_time() - cpu
        return (f"{per_stmt:6.1f} us/statement  {per_read:6.1f} us/read by key  "
                f"{n / wall:7.0f} accepts/s  {1000 * cpu / n:.2f} ms CPU/accept (this process)")
    finally:
        await store.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=5000)
    n = ap.parse_args().n
    with tempfile.TemporaryDirectory() as folder:
        print("sqlite     ", asyncio.run(measure(f"sqlite:///{folder}/n.db", n)))
    name = f"notifyd_bench_{secrets.token_hex(4)}"
    with psycopg.connect(SERVER, autocommit=True) as admin:
        admin.execute(f"CREATE DATABASE {name}")
    try:
        print("postgresql ", asyncio.run(measure(SERVER.rsplit("/", 1)[0] + "/" + name, n)))
    finally:
        with psycopg.connect(SERVER, autocommit=True) as admin:
            admin.execute(f"DROP DATABASE {name} WITH (FORCE)")


if __name__ == "__main__":
    main()
