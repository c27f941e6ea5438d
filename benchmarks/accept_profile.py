"""Where a request's CPU goes on the accept path: py-spy over a daemon under benchmarks/accept.py's
closed-loop load (single POSTs, or POST /v1/resolutions with --resolve), its samples of the
thread holding the GIL sorted into the parts of the path, one column per tree.

Run: .venv/bin/python benchmarks/accept_profile.py /tmp/before . [--resolve] [--seconds 20]
Needs py-spy beside the interpreter (copy it into the venv's bin). Each tree is a folder holding
a `notifyd/` package, run as accept_ab.py runs it. A sample goes to the innermost part its stack
names; py-spy cuts some coroutine stacks short, so read the parts against each other, tree
against tree, not as exact shares.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter
from functools import partial
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from accept import CONFIG, body, free_port, start  # noqa: E402
from accept_ab import resolution  # noqa: E402
from httpload import closed_loop, post  # noqa: E402

THREADS = ("Writer._serve", "_connection_worker_thread")  # the store's own threads
PARTS = (  # innermost first match, leaf to root
    ("metrics", ("prometheus_client/", "Context.accepted")),
    ("fair.Turns", ("Turns.", "_AsyncGeneratorContextManager", "asynccontextmanager")),
    ("quotas", ("Quotas.",)),
    ("params check, inbox render", ("Ingest.prepare", "ParamCheck.", "Ingest.inbox_item")),
    ("ladder planner", ("Ingest.planner", "Ingest._planner")),
    ("after the commit (settle, announce)", ("Ingest.settle", "Ingest.announce")),
    ("new ids", ("new_id",)),
    ("parse and validate", ("Ingest.parse",)),
    ("auth (KeyCache)", ("KeyCache.", "authorise", "api_key (")),
    ("body read", ("bounded (", "read_body", "read_as", "BaseRequest.read", "asyncio/timeouts")),
    ("store calls on the loop (hand-off, answer)", ("notifyd/store/", "engine/resolution.py")),
    ("answer (Response, encode)", ("Response.__init__", "answer (", "_view (", "_resolved (")),
    ("aiohttp prepare and headers", ("StreamResponse.prepare", "_prepare_headers", "._start (",
                                     "_write_headers")),
    ("socket send", ("_writelines", "write_eof")),
    ("handlers' own lines", ("post_notification", "post_resolution", "resolve_notification")),
    ("middlewares (guard, share, API)", ("ConnectionGuard.", "Share.", "_middleware",
                                         "answered (", "with_cors")),
    ("aiohttp server (parse, request, task)", ("aiohttp/", "Guarded.")),
)


def part_of(frames: list[str]) -> str:
    if any(t in f for f in frames for t in THREADS):
        return "store threads (SQLite)"
    for frame in reversed(frames):
        for name, marks in PARTS:
            if any(m in frame for m in marks):
                return name
    return "event loop, other"


def profile(tree: str, scratch: Path, resolve: bool, seconds: int) -> Counter[str]:
    py = sys.executable
    db = scratch / f"{len(list(scratch.iterdir()))}.db"
    env = {**os.environ, "PYTHONPATH": tree, "NOTIFYD_DB": str(db),
           "NOTIFYD_CONFIG": str(scratch / "p.toml")}
    key = subprocess.run([py, "-m", "notifyd", "keys", "create", "--name", "p"], env=env,
                         cwd=scratch, capture_output=True, text=True, check=True).stdout.strip()
    headers = {"Authorization": f"Bearer {key}"}
    port = free_port()
    proc = start([py, "-m", "notifyd", "serve", "--port", str(port)], port, env=env,
                 cwd=str(scratch))
    out = scratch / f"{db.stem}.folded"
    try:
        def make(i: int) -> bytes:
            return post("/v1/notifications", body(i), headers)

        def timed(i: int, offset: int) -> bytes:  # each notification once over the rounds
            i += offset
            return resolution(i, headers) if resolve else make(i + 10_000_000)

        asyncio.run(closed_loop("127.0.0.1", port, 16, 60_000 if resolve else 2000, make))
        spy = subprocess.Popen([str(Path(py).parent / "py-spy"), "record", "--pid", str(proc.pid),
                                "--duration", str(seconds), "--rate", "250", "--nonblocking",
                                "--gil", "--format", "raw", "--output", str(out)],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        began, done = time.monotonic(), 0
        while time.monotonic() - began < seconds:
            asyncio.run(closed_loop("127.0.0.1", port, 16, 5000, partial(timed, offset=done)))
            done += 5000
        spy.wait(60)
    finally:
        proc.terminate()
        proc.wait()
    parts: Counter[str] = Counter()
    for line in out.read_text(errors="replace").splitlines():
        stack, _, count = line.rpartition(" ")
        if count.isdigit():
            parts[part_of(stack.split(";"))] += int(count)
    return parts


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("trees", nargs="+")
    ap.add_argument("--resolve", action="store_true", help="POST /v1/resolutions, one each")
    ap.add_argument("--seconds", type=int, default=20)
    args = ap.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="notifyd-profile-"))
    (scratch / "p.toml").write_text(CONFIG)
    found = [profile(str(Path(t).resolve()), scratch, args.resolve, args.seconds)
             for t in args.trees]
    totals = [sum(c.values()) or 1 for c in found]
    print(f"{'share of GIL-holding samples':44s}" + "".join(
        f"{Path(t).resolve().name[:12]:>14s}" for t in args.trees))
    for name, _ in (found[0] + found[-1]).most_common():
        print(f"{name:44s}" + "".join(f"{100 * c[name] / n:13.1f}%"
                                      for c, n in zip(found, totals, strict=True)))
    print(f"{'samples':44s}" + "".join(f"{n:14d}" for n in totals))


if __name__ == "__main__":
    main()
