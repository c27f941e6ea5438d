"""Round trips to PostgreSQL per write, counted from the wire: what the writer waits for.

Run: .venv/bin/python benchmarks/pg_trips.py [--n 200]

A fresh database on NOTIFYD_TEST_PG's server (the local one), dropped at the end. libpq traces
every connection the store makes (PQtrace); from the messages this counts, per operation:

- statements: Execute and Query messages (BEGIN, COMMIT and SAVEPOINT included);
- round trips: the times the client waited for the server: a run of messages sent that ends in
  Sync, Flush or a simple Query, followed by the server's answer. A statement sent in a
  pipeline whose result is read later costs no round trip of its own.

Each operation is measured alone (one script in its batch, as a quiet daemon commits it) and
in a burst (--n at once, the batches the writer makes of them, per operation). The counts do
not depend on the machine's load: only the burst's batch sizes do, and they are printed.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import secrets
import sys
import tempfile
from pathlib import Path
from typing import Any

import psycopg
from psycopg import pq

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from store_support import RULES, inp, plan  # noqa: E402

from notifyd.core.clock import SystemClock  # noqa: E402
from notifyd.core.models import (  # noqa: E402
    Budget,
    Completion,
    Freeze,
    Lane,
    Outcome,
    Route,
    StepState,
    Want,
)
from notifyd.store import open_store  # noqa: E402
from notifyd.store.postgres import backend as pg_backend  # noqa: E402

SERVER = os.environ.get("NOTIFYD_TEST_PG", "postgresql://root@127.0.0.1:5432/postgres")
FOLDER = Path(tempfile.mkdtemp(prefix="pg-trips-"))
TRACES: list[Path] = []


def traced_connect(url: str) -> psycopg.Connection[Any]:
    """Every connection the backend makes, traced to a file of its own."""
    conn = _connect(url)
    path = FOLDER / f"conn{len(TRACES)}.trace"
    TRACES.append(path)
    f = open(path, "w")  # noqa: SIM115 - open as long as the connection
    conn.pgconn.trace(f.fileno())
    conn.pgconn.set_trace_flags(pq.Trace.SUPPRESS_TIMESTAMPS | pq.Trace.REGRESS_MODE)
    conn._trace_file = f  # type: ignore[attr-defined]
    return conn


_connect = pg_backend.connect
pg_backend.connect = traced_connect


def wire() -> tuple[int, int]:
    """(statements, round trips) in every trace so far."""
    statements = trips = 0
    for path in TRACES:
        sent: list[str] = []
        for line in path.read_text().splitlines():
            parts = line.split("\t")
            if len(parts) < 3:
                continue
            side, kind = parts[0], parts[2].split(" ")[0]
            if side == "F":
                sent.append(kind)
                statements += kind in ("Execute", "Query")
            elif sent:
                trips += any(k in ("Sync", "Flush", "Query") for k in sent)
                sent = []
    return statements, trips


class Meter:
    def __init__(self) -> None:
        self.rows: list[tuple[str, int, float, float]] = []

    async def __call__(self, name: str, n: int, work: Any, store: Any) -> Any:
        flush_traces()
        s0, t0 = wire()
        c0 = store.backend.writer.commits
        out = await work
        flush_traces()
        s1, t1 = wire()
        commits = store.backend.writer.commits - c0
        self.rows.append((f"{name} (x{n}, {commits} commits)", n, (s1 - s0) / n, (t1 - t0) / n))
        return out

    def show(self) -> None:
        print(f"{'operation':52} {'statements':>11} {'round trips':>12}")
        for name, _, s, t in self.rows:
            print(f"{name:52} {s:11.2f} {t:12.2f}")


def flush_traces() -> None:
    for conn in list(pg_backend_connections()):
        conn._trace_file.flush()


def pg_backend_connections() -> list[Any]:
    import gc

    return [o for o in gc.get_objects() if isinstance(o, psycopg.Connection)
            and hasattr(o, "_trace_file")]


BUDGET = Budget(rates={"a": (100_000.0, 100_000)})  # a shared bucket, as the daemon's
SENT = Completion(Outcome.SENT, StepState.SENT)
ROUTE = [Route("a", Lane.BULK)]


async def accepts(store: Any, prefix: str, k: int, channels: tuple[str, ...] = ("a",),
                  burst: bool = False) -> None:
    """k accepts, one after another (each its own batch), or all at once."""
    def one(i: int) -> Any:
        return store.accept(inp(f"u{i}", f"{prefix}{i}"), f"n_{prefix}{i:05d}",
                            plan(*channels, gap=3_600_000), 3600)

    if burst:
        await asyncio.gather(*(one(i) for i in range(k)))
    else:
        for i in range(k):
            await one(i)


async def claim(store: Any, n: int) -> list[Any]:
    return list((await store.claim_due([Want("a", Lane.BULK, n)], 60_000, RULES,
                                       BUDGET)).claims)


async def each(store: Any, calls: list[Any], burst: bool = False) -> None:
    if burst:
        await asyncio.gather(*calls)
    else:
        for call in calls:
            await call


async def warm(store: Any) -> None:
    """The statements used often enough that psycopg prepares them (after 5 uses)."""
    await accepts(store, "w", 12)
    for c in await claim(store, 20):
        await store.complete(c, SENT, RULES)
    for i in range(6):
        await store.resolve(f"n_w{i:05d}", "done", "bench")
    await store.get_recipient("acme", "u1")  # the reader's connection made


async def measure(url: str, n: int) -> None:
    store = await open_store(url, SystemClock())
    m = Meter()
    try:
        await warm(store)
        await m("accept alone, 1 step", 20, accepts(store, "a", 20), store)
        await m("accept alone, 3 steps", 20, accepts(store, "b", 20, ("a", "a", "a")), store)
        await m("accept, burst", n, accepts(store, "c", n, burst=True), store)
        await m("resolve alone", 20, each(store, [
            store.resolve(f"n_a{i:05d}", "done", "bench") for i in range(20)]), store)
        # the burst's n steps (due now) and the 3-step ones' first: one claim of them all
        claims = await m("claim of many steps, per step", n + 20, claim(store, n + 20), store)
        assert len(claims) == n + 20, len(claims)
        await m("freeze alone, 1 step", 20, each(store, [
            store.freeze([Freeze(c, "x", "{}", None)]) for c in claims[:20]]), store)
        await m(f"freeze, {n} steps in one", n, store.freeze(
            [Freeze(c, "x", "{}", None) for c in claims[20:]]), store)
        await m("complete alone (sent)", 20, each(store, [
            store.complete(c, SENT, RULES) for c in claims[:20]]), store)
        await m("complete, burst (sent)", n, each(store, [
            store.complete(c, SENT, RULES) for c in claims[20:]], burst=True), store)
        await accepts(store, "single", 1)
        await m("claim of one step", 1, claim(store, 5), store)
        await m("claim finding nothing", 1, claim(store, 5), store)
        await m("reader: get_recipient (no profile)", 20, each(store, [
            store.get_recipient("acme", "u1") for _ in range(20)]), store)
        await m("reader: due_times (snapshot)", 20, each(store, [
            store.due_times(ROUTE, 16) for _ in range(20)]), store)
        m.show()
    finally:
        await store.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=200)
    n = ap.parse_args().n
    name = f"notifyd_trips_{secrets.token_hex(4)}"
    with psycopg.connect(SERVER, autocommit=True) as admin:
        admin.execute(f"CREATE DATABASE {name}")
    try:
        asyncio.run(measure(SERVER.rsplit("/", 1)[0] + "/" + name, n))
    finally:
        with psycopg.connect(SERVER, autocommit=True) as admin:
            admin.execute(f"DROP DATABASE {name} WITH (FORCE)")


if __name__ == "__main__":
    main()
