"""The writer's group commit with and without its linger, interleaved in one process: open-loop
probe writes queued from the event loop at --rate per second for --seconds on a fresh SQLite file
(synchronous FULL), each round once without the linger (the batch is what waited when the last
commit ended) and once with it; prints commits per 1000 writes and the process's CPU per write.

Run: .venv/bin/python benchmarks/writer_linger.py --rate 2000 --seconds 5 --rounds 3
(the daemon at 400 notifications/s queues about 2,000 writes a second: accepts, claims, freezes,
completions, resolutions).
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path
from typing import Any

from notifyd.core.clock import SystemClock
from notifyd.store import open_store
from notifyd.store.core import writer

LINGERING = writer.Writer._take


def without_linger(self: Any, first: Any) -> tuple[list[Any], bool]:
    """The batch is what waited when the last commit ended: the writer's own drain, no naps."""
    drained: tuple[list[Any], bool] = self._drain([first])
    return drained


async def one(rate: float, seconds: float, linger: bool) -> tuple[int, int, float]:
    writer.Writer._take = LINGERING if linger else without_linger  # type: ignore[method-assign]
    with tempfile.TemporaryDirectory() as folder:
        store = await open_store(str(Path(folder) / "linger.db"), SystemClock())
        backend: Any = store.backend  # type: ignore[attr-defined]
        w, q = backend.writer, backend.q
        commits, writes, cpu = w.commits, w.writes, time.process_time()
        loop = asyncio.get_running_loop()
        start, tasks, i = loop.time(), [], 0
        while i / rate < seconds:
            wait = start + i / rate - loop.time()
            if wait > 0:
                await asyncio.sleep(wait)
            tasks.append(asyncio.ensure_future(
                backend.write(lambda tx: tx.run(q.WRITE_PROBE, (tx.now,)))))
            i += 1
        await asyncio.gather(*tasks)
        out = (w.commits - commits, w.writes - writes, time.process_time() - cpu)
        await store.close()
    return out


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rate", type=float, default=2000)
    ap.add_argument("--seconds", type=float, default=5)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    for r in range(args.rounds):
        for linger in (False, True):
            c, n, cpu = await one(args.rate, args.seconds, linger)
            print(f"round {r + 1} {args.rate:g}/s linger {'on ' if linger else 'off'}: {n} writes, "
                  f"{c} commits ({1000 * c / max(n, 1):.0f} per 1000 writes), CPU "
                  f"{1000 * cpu / max(n, 1):.3f} ms per write", flush=True)


if __name__ == "__main__":
    asyncio.run(main())
