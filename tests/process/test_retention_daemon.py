"""Retention in the real daemon: a database from before incremental auto-vacuum is converted once
at start (logged, with its time), and a finished notification's history is pruned while it runs,
its identity still answering a producer's retry."""

from __future__ import annotations

import json
import sqlite3
import time
import urllib.request
from contextlib import closing
from pathlib import Path

from engine_support import Daemon, create_key, query, reaped

from notifyd.store.sqlite.migrate import migrate

TIMEOUT = 30.0
CONFIG = """
[retention]
history_sec = 1
interval_sec = 0.2
"""


def call(url: str, key: str, path: str, body: dict[str, object]) -> tuple[int, dict[str, object]]:
    request = urllib.request.Request(f"{url}{path}", data=json.dumps(body).encode(), headers={
        "Authorization": f"Bearer {key}", "Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=TIMEOUT) as resp:
        return resp.status, json.loads(resp.read())


def test_an_old_file_is_converted_once_and_a_finished_history_is_pruned(tmp_path: Path) -> None:
    db, config = tmp_path / "n.db", tmp_path / "n.toml"
    config.write_text(CONFIG)
    with closing(sqlite3.connect(db)) as conn:  # as earlier versions made them
        migrate(conn)
    key = create_key(db, config)
    with reaped([]) as daemons:
        daemons.append(d := Daemon(db, config))
        assert "converted once to incremental auto-vacuum" in d.stderr()
        body = {"user_id": "ada", "kind": "demo", "dedup_key": "inv-1"}
        status, made = call(d.url, key, "/v1/notifications", body)
        assert status == 202
        nid = str(made["notification_id"])
        call(d.url, key, f"/v1/notifications/{nid}/resolve", {"resolution": "paid"})
        deadline = time.monotonic() + TIMEOUT
        while not query(db, "SELECT pruned_at FROM notifications WHERE id = ?", nid)[0][0]:
            assert time.monotonic() < deadline, d.stderr()
            time.sleep(0.05)
        assert query(db, "SELECT count(*) FROM steps WHERE notification_id = ?", nid) == [(0,)]
        status, again = call(d.url, key, "/v1/notifications", body)
        assert (status, again["notification_id"], again["state"]) == (200, nid,
                                                                              "resolved")
        assert d.stop() == 0, d.stderr()
    assert "retention removed 1 history" in d.stderr()
    with closing(sqlite3.connect(db)) as conn:
        assert conn.execute("PRAGMA auto_vacuum").fetchone()[0] == 2
    second = Daemon(db, config)
    try:
        assert "converted once" not in second.stderr()
    finally:
        assert second.stop() == 0
