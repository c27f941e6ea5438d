"""What a delivery receipt nobody signed costs the daemon with many tenant secrets: the daemon's
CPU per request for unsigned 64 KiB bodies posted to /v1/webhooks/delivery-receipt (and, where
the tree has it, to a tenant's own URL), each tree in turn, interleaved over rounds.

Run: .venv/bin/python benchmarks/receipt_forgery.py /tmp/before /tmp/after [--tenants 1000]
     [--requests 300] [--rounds 3]
Each tree is a folder holding a `notifyd/` package (`git worktree add /tmp/before main`). For each
round and tree: a scratch folder with a config of --tenants tenants, each with its own
delivery-receipt secret (no shared one), `python -m notifyd serve` started there with PYTHONPATH
the tree (started from a scratch folder: `python -m` puts the working directory first), then
--requests POSTs over 8 keep-alive connections, each a 64 KiB body with a fresh webhook-id, a
current webhook-timestamp and a webhook-signature that matches nothing. The figure is the
daemon's CPU (user + system, every thread, from /proc) over those requests divided by their
count; every answer must be a refusal (401), or the run stops. The machine is small and shared:
compare trees within one run, round by round.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from accept import free_port, start  # noqa: E402
from httpload import closed_loop, post  # noqa: E402

BODY = b'{"key": "n_0kx7c3v9q2m4r8t1w6:0", "status": "delivered", "pad": "' + \
    b"x" * (64 * 1024 - 80) + b'"}'


def config(tenants: int) -> str:
    lines = ['[channels.log]\ntype = "log"\n']
    for i in range(tenants):
        secret = base64.b64encode(f"tenant secret {i:06d}".encode().ljust(24, b".")).decode()
        lines.append(f'[webhooks.delivery-receipt.tenants.t{i:04d}]\nsecret = "whsec_{secret}"\n')
    return "\n".join(lines)


def cpu_sec(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def forged(path: str, i: int) -> bytes:
    return post(path, BODY, {"webhook-id": f"msg_{i}", "webhook-timestamp": str(int(time.time())),
                             "webhook-signature": "v1,bm90IGEgc2lnbmF0dXJlIGF0IGFsbA=="})


def measure(tree: Path, tenants: int, requests: int, paths: list[str]) -> dict[str, float]:
    """CPU ms per forged request on each of `paths`, for the daemon of `tree`."""
    scratch = Path(tempfile.mkdtemp(prefix="forgery-"))
    (scratch / "n.toml").write_text(config(tenants))
    port = free_port()
    env = {**os.environ, "PYTHONPATH": str(tree)}
    cmd = [sys.executable, "-m", "notifyd", "--config", str(scratch / "n.toml"), "--db",
           str(scratch / "n.db"), "serve", "--port", str(port)]
    imported = subprocess.run([sys.executable, "-c", "import notifyd; print(notifyd.__file__)"],
                              env=env, cwd=scratch, capture_output=True, text=True, check=True)
    if not Path(imported.stdout.strip()).is_relative_to(tree):
        raise SystemExit(f"{tree}: the daemon would import {imported.stdout.strip()}")
    proc = start(cmd, port, env=env, cwd=str(scratch))
    out = {}
    try:
        for path in paths:
            asyncio.run(closed_loop("127.0.0.1", port, 8, 20, lambda i, path=path: forged(path, i)))
            before = cpu_sec(proc.pid)
            _, results = asyncio.run(closed_loop("127.0.0.1", port, 8, requests,
                                                 lambda i, path=path: forged(path, i)))
            spent = cpu_sec(proc.pid) - before
            statuses = {status for status, _ in results}
            if statuses - {401, 404}:
                raise SystemExit(f"{tree} {path}: answers {sorted(statuses)}, not refusals")
            if statuses == {401}:
                out[path] = spent * 1000 / requests
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        for f in scratch.iterdir():
            f.unlink()
        scratch.rmdir()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("trees", nargs="+", type=Path)
    ap.add_argument("--tenants", type=int, default=1000)
    ap.add_argument("--requests", type=int, default=300)
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    paths = ["/v1/webhooks/delivery-receipt", "/v1/webhooks/delivery-receipt/t0500"]
    print(f"# {a.tenants} tenant secrets, {a.requests} unsigned 64 KiB requests per URL; "
          f"load {os.getloadavg()[0]:.2f}")
    seen: dict[tuple[str, str], list[float]] = {}
    for r in range(a.rounds):
        for tree in a.trees:
            for path, ms in measure(tree.resolve(), a.tenants, a.requests, paths).items():
                seen.setdefault((str(tree), path), []).append(ms)
                print(f"round {r + 1}  {tree}  {path:<40} {ms:7.2f} ms CPU per request")
    print("# medians")
    for (tree, path), values in seen.items():
        print(f"{tree}  {path:<40} {statistics.median(values):7.2f} ms CPU per request")
    print(f"# load {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
