"""Compare source trees on the accept load, interleaved, because this machine's speed drifts by
±25% within minutes: one tree's run against another's an hour apart says nothing.

Run: .venv/bin/python benchmarks/accept_ab.py --rounds 5 /tmp/before /tmp/after [--templates]
Each tree is a folder holding a `notifyd/` package (e.g. `git worktree add /tmp/before HEAD~1`,
or a copy with a change). Every round runs the bare aiohttp handler, then each tree, each on a
fresh database, with benchmarks/accept.py's load (64 clients, 3-step ladder, synchronous=FULL),
and prints accepts/s, the ratio to that round's bare run, the daemon's CPU per request (all
its threads) and how busy each of them was (--resolve: the same for POST /v1/resolutions).
The medians at the end are the figures to compare.

Each daemon is started from a scratch folder: `python -m` puts the working directory ahead of
PYTHONPATH, so started from a checkout every tree would run that checkout's code. The script
checks which package each tree imports before it measures.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from accept import BARE, CONFIG, body, free_port, start, templated_config  # noqa: E402
from httpload import closed_loop, post  # noqa: E402


def thread_ticks(pid: int) -> dict[str, int]:
    ticks = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        text = (task / "stat").read_text()
        fields = text.rsplit(")", 1)[1].split()
        ticks[task.name] = int(fields[11]) + int(fields[12])
    return ticks


def resolution(i: int, headers: dict[str, str]) -> bytes:
    """POST /v1/resolutions of the notification body(i) made."""
    return post("/v1/resolutions", json.dumps({"user_id": f"u{i % 5000}",
                                               "dedup_key": f"bench-{i}"}).encode(), headers)


def run(cmd: list[str], env: dict[str, str], cwd: str, headers: dict[str, str],
        total: int, resolve: bool = False) -> tuple[float, float, list[int]]:
    """Requests/s, the daemon's CPU per request (µs, all its threads), and each busy thread's
    share of the run in percent (main thread first). With `resolve`, the timed requests resolve
    notifications accepted before them, one each."""
    port = free_port()
    proc = start(cmd + [str(port)], port, env=env, cwd=cwd)
    try:
        def make(i: int) -> bytes:
            return post("/v1/notifications", body(i), headers)

        def timed(i: int) -> bytes:
            return resolution(i, headers) if resolve else make(i + 10_000_000)

        # Warm up; with `resolve`, accept what the timed requests resolve.
        asyncio.run(closed_loop("127.0.0.1", port, 64, total if resolve else 2000, make))
        before, began = thread_ticks(proc.pid), time.perf_counter()
        rps, results = asyncio.run(closed_loop("127.0.0.1", port, 64, total, timed))
        after, wall = thread_ticks(proc.pid), time.perf_counter() - began
        if any(status not in (200, 202) for status, _ in results):
            raise SystemExit(f"{cmd}: some requests failed")
    finally:
        proc.terminate()
        proc.wait()
    tick = os.sysconf("SC_CLK_TCK")
    spent = {t: after[t] - before.get(t, 0) for t in after}
    cpu_us = sum(spent.values()) / tick / total * 1e6
    busy = [round(spent[t] / tick / wall * 100) for t in sorted(after, key=int)]
    return rps, cpu_us, [b for b in busy if b > 1]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("trees", nargs="+", help="folders that each hold a notifyd/ package")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--total", type=int, default=20_000, help="requests per run")
    ap.add_argument("--templates", action="store_true",
                    help="a ladder of email and SMS steps that render templates (accept.py's "
                         "TEMPLATED_CONFIG) instead of the log channel's")
    ap.add_argument("--resolve", action="store_true",
                    help="time POST /v1/resolutions (each resolving one notification accepted "
                         "before the timed run; the bare handler's figures stay the accept's)")
    args = ap.parse_args()
    trees = [str(Path(t).resolve()) for t in args.trees]
    scratch = tempfile.mkdtemp(prefix="notifyd-ab-")
    py = sys.executable
    config = Path(scratch) / "ab.toml"
    config.write_text(templated_config(Path(scratch) / "templates") if args.templates
                      else CONFIG)
    ratios: dict[str, list[float]] = {t: [] for t in trees}
    cpus: dict[str, list[float]] = {t: [] for t in trees}
    for r in range(args.rounds):
        line = []
        bare, bare_cpu, _ = run([py, "-c", BARE], dict(os.environ), scratch,
                                {"Authorization": "Bearer nfy_unused"}, args.total)
        line.append(f"bare {bare:6.0f} {bare_cpu:4.0f}µs")
        for tree in trees:
            db = Path(scratch) / f"r{r}-{len(line)}.db"
            env = {**os.environ, "PYTHONPATH": tree, "NOTIFYD_DB": str(db),
                   "NOTIFYD_CONFIG": str(config)}
            where = subprocess.run([py, "-c", "import notifyd; print(notifyd.__file__)"],
                                   env=env, cwd=scratch, capture_output=True, text=True,
                                   check=True).stdout.strip()
            if not where.startswith(tree):
                raise SystemExit(f"{tree} imports {where}: not the tree under test")
            key = subprocess.run([py, "-m", "notifyd", "keys", "create", "--name", "ab"],
                                 env=env, cwd=scratch, capture_output=True, text=True,
                                 check=True).stdout.strip()
            rps, cpu, busy = run([py, "-m", "notifyd", "serve", "--port"], env, scratch,
                                 {"Authorization": f"Bearer {key}"}, args.total, args.resolve)
            ratios[tree].append(rps / bare)
            cpus[tree].append(cpu)
            line.append(f"{Path(tree).name} {rps:6.0f} ({rps / bare:.2f}, {cpu:4.0f}µs CPU/req, "
                        f"threads {busy}%)")
        print("  ".join(line), flush=True)
    for tree in trees:
        print(f"{tree}: median ratio to bare {statistics.median(ratios[tree]):.3f}, median CPU "
              f"per request {statistics.median(cpus[tree]):.0f} µs")


if __name__ == "__main__":
    main()
