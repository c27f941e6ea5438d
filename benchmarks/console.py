"""The console's pages over a million notifications, and the inbox widget's speed in chromium.

Run: .venv/bin/python benchmarks/console.py [--notifications 1000000] [--requests 200]
It makes a database with the daemon's own schema (`notifyd keys create`), fills it straight with
SQL (each notification with its 2 steps and an attempt, 10,000 people, 1,000 dead steps), starts
`notifyd serve` on it as a subprocess, signs in to the console and times each page (the search
for a user id, a search by id, a notification's timeline page, the dead letters, the overview)
over keep-alive connections: p50 and p99 in ms. Then, with /usr/bin/chromium and Playwright, the
widget's first paint (mount to the live badge) and the time from a POST to the item shown in an
open widget, a median and the worst of `--widget` rounds.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sqlite3
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from tempfile import TemporaryDirectory

PEOPLE = 10_000
DEAD = 1_000
ENV = {k: v for k, v in os.environ.items() if not k.startswith("NOTIFYD_")}


def notifyd(db: Path, config: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "notifyd", "--config", str(config), "--db", str(db), *args]


def fill(db: Path, total: int) -> None:
    """`total` notifications of the demo kind (2 steps each, the first sent with its attempt,
    the second cancelled by a resolution), the last DEAD of them dead instead."""
    start = int(time.time() * 1000) - total * 10
    conn = sqlite3.connect(db)
    conn.execute("PRAGMA synchronous = OFF")

    def nid(i: int) -> str:
        return f"n_{i:018d}"

    def notes() -> object:
        for i in range(total):
            at = start + i * 10
            yield (nid(i), "default", f"u{i % PEOPLE}", "demo", f"d{i}", "h", "{}", "bench",
                   at, at + 3_600_000, at + 5_000, "resolved", "key:bench")

    def steps() -> object:
        for i in range(total):
            at = start + i * 10
            dead = i >= total - DEAD
            yield (nid(i), 0, "log", "bulk", at, "dead" if dead else "sent", 1,
                   "HTTP 500" if dead else None, at + 20, at)
            yield (nid(i), 1, "log", "bulk", at + 30_000, "cancelled", 0, "resolved", at + 5_000,
                   at + 30_000)

    def attempts() -> object:
        for i in range(total):
            at = start + i * 10
            yield (nid(i), 0, 1, "t", at, at + 20, "failed" if i >= total - DEAD else "sent")

    with conn:
        conn.executemany("""INSERT INTO notifications (id, tenant, user_id, kind, dedup_key,
            request_hash, params, key_name, created_at, expires_at, resolved_at, resolution,
            resolved_by) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)""", notes())
        conn.executemany("""INSERT INTO steps (notification_id, step_no, channel, lane,
            send_after, state, attempts, reason, updated_at, planned_at)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)""", steps())
        conn.executemany("""INSERT INTO attempts (notification_id, step_no, attempt_no,
            claim_token, started_at, ended_at, outcome) VALUES (?, ?, ?, ?, ?, ?, ?)""",
                         attempts())
    conn.execute("ANALYZE")
    conn.close()


class Console:
    """A signed-in operator's connection: keep-alive, the session cookie sent by hand."""

    def __init__(self, url: str, key: str) -> None:
        import http.client
        host, port = url.removeprefix("http://").split(":")
        self.conn = http.client.HTTPConnection(host, int(port), timeout=60)
        self.conn.request("POST", "/console/sign-in", body=f"credential={key}&next=/console",
                          headers={"Content-Type": "application/x-www-form-urlencoded"})
        answer = self.conn.getresponse()
        answer.read()
        found = re.search(r"notifyd_console=([^;]+)", answer.getheader("Set-Cookie") or "")
        assert answer.status == 303 and found, answer.status
        self.cookie = f"notifyd_console={found.group(1)}"

    def get(self, path: str) -> tuple[int, float]:
        started = time.perf_counter()
        self.conn.request("GET", path, headers={"Cookie": self.cookie})
        answer = self.conn.getresponse()
        answer.read()
        return answer.status, (time.perf_counter() - started) * 1000


def pages(url: str, key: str, total: int, requests: int) -> None:
    console = Console(url, key)
    middle = f"n_{total // 2:018d}"
    for name, path, status in (
            ("search by user id", "/console/search?q=u4242", 200),
            ("search by id", f"/console/search?q={middle}", 303),
            ("notification page", f"/console/notifications/{middle}", 200),
            ("dead letters", "/console/dead", 200),
            ("overview", "/console", 200)):
        times = []
        for i in range(requests):
            got, ms = console.get(path.replace("u4242", f"u{i * 37 % PEOPLE}"))
            assert got == status, (path, got)
            times.append(ms)
        times.sort()
        print(f"  {name:<20} p50 {statistics.median(times):7.2f} ms   "
              f"p99 {times[int(len(times) * 0.99) - 1]:7.2f} ms")


def widget(url: str, key: str, rounds: int) -> None:
    from playwright.sync_api import sync_playwright

    def api(path: str, body: object) -> dict[str, object]:
        request = urllib.request.Request(f"{url}{path}", data=json.dumps(body).encode(),
                                         headers={"Authorization": f"Bearer {key}",
                                                  "Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=30) as r:
            return dict(json.loads(r.read()))

    paints, shown = [], []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=["--no-sandbox"])
        page = browser.new_page()
        for i in range(rounds):
            user = f"w{i}"
            token = api(f"/v1/users/{user}/tokens", {})["token"]
            page.goto(f"{url}/demo/inbox")
            paints.append(page.evaluate("""async ([user, token]) => {
                const t0 = performance.now();
                NotifydInbox.mount("#bell", {userId: user, token});
                const host = document.getElementById("bell");
                while (host.dataset.live !== "yes") await new Promise(r => setTimeout(r, 1));
                await new Promise(r => requestAnimationFrame(r));
                return performance.now() - t0; }""", [user, token]))
            page.evaluate("""() => { window.seen = new Promise(done => new MutationObserver(
                (_, o) => { o.disconnect(); done(performance.now()); }).observe(
                document.getElementById("bell").shadowRoot.querySelector("ul"),
                {childList: true})); }""")
            before = page.evaluate("performance.now()")
            api("/v1/notifications", {"user_id": user, "kind": "inboxed", "params": {}})
            shown.append(page.evaluate("window.seen") - before)
        browser.close()
    for name, values in (("widget first paint", paints), ("POST to item shown", shown)):
        print(f"  {name:<20} median {statistics.median(values):7.1f} ms   "
              f"worst {max(values):7.1f} ms  ({rounds} rounds)")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--notifications", type=int, default=1_000_000)
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--widget", type=int, default=20)
    args = parser.parse_args()
    with TemporaryDirectory() as tmp:
        folder = Path(tmp)
        (folder / "templates" / "inboxed" / "en").mkdir(parents=True)
        (folder / "templates" / "inboxed" / "en" / "inbox.title.j2").write_text("Hello")
        config = folder / "notifyd.toml"
        config.write_text('[console]\ndemo_inbox = true\n[templates]\nfolder = "templates"\n'
                          '[kinds.demo]\nladder = [{channel = "log", timeout_sec = 30}, '
                          '{channel = "log"}]\n[kinds.inboxed]\ninbox = true\n'
                          'ladder = [{channel = "log"}]\n')
        db = folder / "notifyd.db"
        key = subprocess.run(notifyd(db, config, "keys", "create", "--name", "bench",
                                     "--scopes", "admin,post,read,resolve,users"),
                             capture_output=True, text=True, env=ENV, check=True).stdout.strip()
        started = time.perf_counter()
        fill(db, args.notifications)
        print(f"{args.notifications:,} notifications written in "
              f"{time.perf_counter() - started:.0f} s "
              f"({db.stat().st_size / 2**20:.0f} MiB)")
        daemon = subprocess.Popen(notifyd(db, config, "serve", "--port", "0"), env=ENV,
                                  stderr=subprocess.PIPE, text=True)
        try:
            assert daemon.stderr is not None
            for line in daemon.stderr:
                if m := re.search(r"listening on http://([0-9.]+):([0-9]+)", line):
                    url = f"http://{m.group(1)}:{m.group(2)}"
                    break
            print("console pages (one signed-in operator, keep-alive):")
            pages(url, key, args.notifications, args.requests)
            if Path("/usr/bin/chromium").exists():
                print("inbox widget (chromium):")
                widget(url, key, args.widget)
        finally:
            daemon.terminate()
            daemon.wait(timeout=60)


if __name__ == "__main__":
    main()
