"""Accept throughput and latency: notifyd against a bare aiohttp handler, on this machine.

Run: .venv/bin/python benchmarks/accept.py [--total 40000]
Prints accepted/s at 64 clients, the ratio to a bare 202 handler measured in the same run,
p50/p99 latency at 500 requests/s, and the 64-concurrent-retries check. The ladder is three steps
that start an hour out, so the figure is the accept path alone, with synchronous=FULL.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from httpload import closed_loop, open_loop, percentile, post  # noqa: E402

BARE = """
from aiohttp import web
async def h(request):
    await request.read()
    return web.json_response({"notification_id": "n_x", "state": "pending", "created": True},
                             status=202)
app = web.Application(); app.router.add_post("/v1/notifications", h)
web.run_app(app, host="127.0.0.1", port=int(__import__("sys").argv[1]), access_log=None,
            print=lambda *a: print("listening on http://127.0.0.1:0", flush=True))
"""

CONFIG = """
[store]
synchronous = "FULL"
[channels.log]
type = "log"
[kinds.bench]
ttl_sec = 86400
ladder = [
  { channel = "log", after_sec = 3600, timeout_sec = 30 },
  { channel = "log", timeout_sec = 60 },
  { channel = "log" },
]
"""
# The same load on a ladder whose steps render templates (email, then SMS, then email again):
# what the accept pays when it checks the params against every template the ladder would use.
# The providers are never called: the steps start an hour out.
TEMPLATED_CONFIG = """
[store]
synchronous = "FULL"
[templates]
folder = "FOLDER"
[channels.email]
type = "smtp"
host = "127.0.0.1"
port = 9
tls = "none"
from_address = "bench@example.com"
[channels.sms]
type = "twilio"
account_sid = "AC00000000000000000000000000000000"
auth_token = "bench"
from_number = "+15005550006"
base_url = "http://127.0.0.1:9"
[kinds.bench]
ttl_sec = 86400
ladder = [
  { channel = "email", after_sec = 3600, timeout_sec = 30 },
  { channel = "sms", timeout_sec = 60 },
  { channel = "email" },
]
"""
TEMPLATES = {
    "email.subject.j2": "Invoice {{ invoice }}: payment of {{ amount }} failed\n",
    "email.text.j2": "Hello,\n\nwe could not collect {{ amount }} for invoice {{ invoice }}.\n"
                     "Reference: {{ kind }} {{ notification_id }}\n"
                     "{% if unsubscribe_url %}Unsubscribe: {{ unsubscribe_url }}{% endif %}\n",
    "email.html.j2": "<p>We could not collect <b>{{ amount }}</b> for invoice {{ invoice }}.</p>"
                     "\n<p>{{ notification_id }}</p>\n",
    "sms.text.j2": "Payment of {{ amount }} for invoice {{ invoice }} failed.\n",
}


def templated_config(folder: Path) -> str:
    """TEMPLATED_CONFIG with its templates written under `folder`."""
    for name, text in TEMPLATES.items():
        path = folder / "bench" / "en" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return TEMPLATED_CONFIG.replace("FOLDER", str(folder))


def free_port() -> int:
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start(cmd: list[str], port: int, env: dict[str, str] | None = None,
          cwd: str | None = None) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env,
                            cwd=cwd)
    deadline = time.monotonic() + 20
    import socket
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return proc
        except OSError:
            time.sleep(0.05)
    proc.kill()
    raise SystemExit(f"server on {port} did not start: {cmd}")


def prepare(prefix: str) -> tuple[Path, dict[str, str], dict[str, str]]:
    """A fresh database in a folder of its own with CONFIG and a key: its path, the environment
    that points notifyd at both, and the headers that carry the key."""
    tmp = Path(tempfile.mkdtemp(prefix=prefix))
    cfg, db = tmp / "bench.toml", tmp / "bench.db"
    cfg.write_text(CONFIG)
    env = {**os.environ, "NOTIFYD_CONFIG": str(cfg), "NOTIFYD_DB": str(db)}
    key = subprocess.run([sys.executable, "-m", "notifyd", "keys", "create", "--name", "bench"],
                         env=env, check=True, capture_output=True, text=True).stdout.strip()
    return db, env, {"Authorization": f"Bearer {key}"}


def body(i: int, key: str | None = None) -> bytes:
    return json.dumps({"user_id": f"u{i % 5000}", "kind": "bench",
                       "params": {"amount": "12.00", "invoice": i},
                       "dedup_key": key or f"bench-{i}"}).encode()


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def measure(port: int, headers: dict[str, str], total: int, tag: str,
                  pid: int) -> dict[str, float]:
    def make(i: int) -> bytes:
        return post("/v1/notifications", body(i, f"{tag}-{i}"), headers)

    def later(offset: int) -> Callable[[int], bytes]:
        return lambda i: make(i + offset)

    await closed_loop("127.0.0.1", port, 64, 2000, make)  # warm up
    cpu = cpu_seconds(pid)
    rps, results = await closed_loop("127.0.0.1", port, 64, total, later(10_000_000))
    cpu_us = (cpu_seconds(pid) - cpu) / total * 1e6
    bad = [s for s, _ in results if s not in (200, 202)]
    if bad:
        raise SystemExit(f"{tag}: {len(bad)} requests failed, e.g. {bad[0]}")
    lat = await open_loop("127.0.0.1", port, 500, 6, later(20_000_000))
    return {"rps": rps, "p50": percentile(lat, 50), "p99": percentile(lat, 99), "cpu": cpu_us}


async def retries(port: int, headers: dict[str, str]) -> tuple[int, int]:
    same = post("/v1/notifications", body(1, "one-key-for-all"), headers)
    _, results = await closed_loop("127.0.0.1", port, 64, 64, lambda _: same)
    ids = {json.loads(b)["notification_id"] for _, b in results}
    return len(results), len(ids)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--total", type=int, default=40_000)
    args = ap.parse_args()
    db, env, headers = prepare("notifyd-bench-")
    key = headers["Authorization"].removeprefix("Bearer ")

    port = free_port()
    bare = start([sys.executable, "-c", BARE, str(port)], port)
    try:
        b = asyncio.run(measure(port, headers, args.total, "bare", bare.pid))
    finally:
        bare.terminate()
        bare.wait()

    port = free_port()
    os.environ.update(env)
    daemon = start([sys.executable, "-m", "notifyd", "serve", "--port", str(port)], port)
    try:
        n = asyncio.run(measure(port, headers, args.total, "notifyd", daemon.pid))
        answered, distinct = asyncio.run(retries(port, headers))
    finally:
        daemon.terminate()
        daemon.wait()
    with sqlite3.connect(db) as conn:
        rows = conn.execute("SELECT count(*) FROM notifications WHERE dedup_key = "
                            "'one-key-for-all'").fetchone()[0]
        steps = conn.execute("SELECT count(*) FROM steps").fetchone()[0]
        notes = conn.execute("SELECT count(*) FROM notifications").fetchone()[0]

    print(f"machine: {os.cpu_count()} cores, python {sys.version.split()[0]}, "
          f"sqlite {sqlite3.sqlite_version}, synchronous=FULL, 3-step ladder, 64 clients")
    print(f"bare aiohttp 202 handler:   {b['rps']:8.0f} req/s   p50 {b['p50']:.2f} ms  "
          f"p99 {b['p99']:.2f} ms at 500 req/s  {b['cpu']:.0f} us CPU/req")
    print(f"notifyd accept:             {n['rps']:8.0f} accepted/s  p50 {n['p50']:.2f} ms  "
          f"p99 {n['p99']:.2f} ms at 500 req/s  {n['cpu']:.0f} us CPU/req")
    print(f"ratio notifyd / bare:       {n['rps'] / b['rps']:8.2f}")
    print(f"64 concurrent retries of one key: {answered} answers, {distinct} distinct id(s), "
          f"{rows} row(s)")
    print(f"rows written: {notes} notifications, {steps} steps ({steps / max(notes, 1):.1f} "
          "per notification)")
    if not re.match(r"nfy_", key):
        raise SystemExit("unexpected key")


if __name__ == "__main__":
    main()
