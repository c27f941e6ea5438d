"""What the running daemon tells an operator follows the conventions: the start line names the
receipt webhooks that are on; --log-level debug is notifyd's own lines, not a line per SQL
statement of its libraries; JSON lines carry an ISO 8601 time with its zone, and the access log
its parts as fields, never a user token from a query string."""

from __future__ import annotations

import base64
import json
import urllib.error
import urllib.request
from datetime import datetime
from pathlib import Path

from engine_support import Daemon, create_key

SECRET = "whsec_" + base64.b64encode(b"0123456789abcdef0123").decode()


def _get(url: str, key: str | None = None) -> int:
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {key}"} if key else {})
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            return int(answer.status)
    except urllib.error.HTTPError as e:
        return e.code


def test_debug_json_logs_are_notifyds_own_lines_with_zoned_times_and_fields(
        tmp_path: Path) -> None:
    config = tmp_path / "notifyd.toml"
    config.write_text(f'[webhooks.resend]\nsecret = "{SECRET}"\n')
    db = tmp_path / "n.db"
    key = create_key(db, config)
    d = Daemon(db, config, serve_args=("--log-level", "debug", "--log-format", "json",
                                       "--access-log"))
    try:
        assert _get(f"{d.url}/healthz") == 200
        assert _get(f"{d.url}/v1/users/ada/inbox?token=nut1.not-a-real-one") == 401
        request = urllib.request.Request(
            f"{d.url}/v1/notifications", data=b'{"user_id": "ada", "kind": "demo"}',
            headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=30) as answer:
            assert answer.status == 202
        d.wait_for_line("step sent")  # a DEBUG line of notifyd's own
    finally:
        assert d.stop() == 0, d.stderr()
    lines = [json.loads(line) for line in d.lines]
    assert all(datetime.fromisoformat(line["time"]).tzinfo is not None for line in lines)
    assert {line["logger"].split(".")[0] for line in lines} == {"notifyd"}, d.stderr()
    [start] = [line["message"] for line in lines if "listening on" in line["message"]]
    assert "receipt webhooks resend;" in start
    access = [line for line in lines if line["logger"] == "notifyd.access"]
    assert [(a["method"], a["path"], a["status"]) for a in access] == [
        ("GET", "/healthz", 200), ("GET", "/v1/users/ada/inbox", 401),
        ("POST", "/v1/notifications", 202)]
    assert "not-a-real-one" not in d.stderr()


def test_the_start_line_says_when_no_receipt_webhook_is_on(tmp_path: Path) -> None:
    d = Daemon(tmp_path / "n.db")
    try:
        [start] = [line for line in d.lines if "listening on" in line]
    finally:
        assert d.stop() == 0
    assert "; receipt webhooks none;" in start
