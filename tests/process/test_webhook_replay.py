"""Mailgun's replay guard outlives the daemon: a signature block captured from one request and
replayed with forged event data after a restart is refused, because the token it carries is kept
in the database, not in the process. The daemon is the real one, stopped with SIGTERM and started
again on the same file.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
import signal
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from engine_support import Daemon
from support import count, query

SIGNING_KEY = "key-" + "3a" * 16
ADDRESS = "ada@example.org"


def event(kind: str, **extra: Any) -> dict[str, Any]:
    return {"id": secrets.token_hex(8), "event": kind, "timestamp": time.time(),
            "recipient": ADDRESS, "message": {"headers": {"message-id": "<x@example.org>"}},
            **extra}


def signature_block() -> dict[str, str]:
    """As Mailgun signs: hex HMAC-SHA256 of timestamp + token under the webhook signing key."""
    timestamp, token = str(int(time.time())), secrets.token_hex(25)
    digest = hmac.new(SIGNING_KEY.encode(), (timestamp + token).encode(), hashlib.sha256)
    return {"timestamp": timestamp, "token": token, "signature": digest.hexdigest()}


def post(d: Daemon, block: dict[str, str], data: dict[str, Any]) -> int:
    body = json.dumps({"signature": block, "event-data": data}).encode()
    request = urllib.request.Request(f"{d.url}/v1/webhooks/mailgun", data=body,
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=30) as resp:
            return int(resp.status)
    except urllib.error.HTTPError as e:
        return e.code


def test_a_token_seen_before_a_restart_is_refused_after_it(tmp_path: Path) -> None:
    db, config = tmp_path / "notifyd.db", tmp_path / "notifyd.toml"
    config.write_text(f'[webhooks.mailgun]\nsigning_key = "{SIGNING_KEY}"\n')
    block = signature_block()
    first = Daemon(db, config)
    try:
        assert post(first, block, event("delivered")) == 200
    finally:
        assert first.stop(signal.SIGTERM) == 0, first.stderr()
    again = Daemon(db, config)
    try:
        forged = event("failed", severity="permanent", reason="suppress-complaint")
        assert post(again, block, forged) == 401
        assert "token already used (a replay)" in again.wait_for_line("webhook mailgun refused")[0]
    finally:
        assert again.stop(signal.SIGTERM) == 0, again.stderr()
    assert count(db, "receipts") == 1 and count(db, "suppressions") == 0
    assert query(db, "SELECT event FROM receipts") == [("delivered",)]
