"""The README's examples do what it says: the user-token recipes make tokens notifyd accepts
(Python always, JavaScript where node is installed); the batch example, run against the daemon,
prints what its comments say; the events and topics commands run against the daemon."""

from __future__ import annotations

import base64
import json
import re
import secrets
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from engine_support import Daemon, clean_env, create_key

from notifyd.domain import signed

README = (Path(__file__).resolve().parents[2] / "README.md").read_text()
TOKENS = README[README.index("**User tokens.**"):]
BATCHES = README[README.index("**Batches.**"):]
KEY = secrets.token_bytes(32)
SECRET = base64.urlsafe_b64encode(KEY).decode().rstrip("=")
MAX_TTL_SEC = 86400  # tokens.max_ttl_sec's default


def test_the_python_recipe_makes_a_token_notifyd_accepts() -> None:
    code = re.search(r"```python\n(.*?)```", TOKENS, re.S)
    assert code is not None
    names: dict[str, Any] = {}
    exec(code.group(1), names)  # noqa: S102 - our own README's example
    token = names["user_token"](SECRET, "acme", "ada", 600)
    now = int(time.time())
    who = signed.read_user_token(token, [KEY], now, MAX_TTL_SEC)
    assert (who.tenant, who.user_id, who.key_name) == ("acme", "ada", None)
    assert now < who.expires_at <= now + 600


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed here")
def test_the_javascript_recipe_makes_a_token_notifyd_accepts() -> None:
    code = re.search(r"```js\n(.*?)```", TOKENS, re.S)
    assert code is not None
    program = code.group(1).replace('import { createHmac } from "node:crypto";',
                                    'const { createHmac } = require("node:crypto");')
    program += f'\nconsole.log(userToken("{SECRET}", "acme", "ada"));\n'
    done = subprocess.run(["node", "-e", program], capture_output=True, text=True, timeout=60,
                          check=True)
    who = signed.read_user_token(done.stdout.strip(), [KEY], int(time.time()), MAX_TTL_SEC)
    assert (who.tenant, who.user_id) == ("acme", "ada")


def test_the_batch_example_prints_what_its_comments_say(tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    code = re.search(r"```python\n(.*?)```", BATCHES, re.S)
    assert code is not None
    said = re.findall(r"^print\(.*?\)  # (\[[^]]*\])", code.group(1), re.M)
    assert len(said) == 2
    db = tmp_path / "n.db"
    key = create_key(db)
    daemon = Daemon(db)
    try:
        names: dict[str, Any] = {"KEY": key}
        exec(code.group(1).replace("http://127.0.0.1:7726", daemon.url), names)  # noqa: S102
    finally:
        assert daemon.stop() == 0, daemon.stderr()
    assert capsys.readouterr().out.splitlines() == said
    assert names["results"][0]["state"] == "log_pending"


EVENTS = README[README.index("## Events and topics"):]
EVENTS = EVENTS[:EVENTS.index("\n## ")]


@pytest.mark.skipif(shutil.which("curl") is None, reason="curl is not installed here")
def test_the_events_and_topics_examples_run_against_the_daemon(tmp_path: Path) -> None:
    """The section's config and commands, as a reader runs them beside `notifyd serve`: the
    daemon on a free port, the README's notifyd on this checkout; every call must succeed."""
    toml = re.search(r"```toml\n(.*?)```", EVENTS, re.S)
    script = re.search(r"```sh\n(.*?)```", EVENTS, re.S)
    assert toml is not None and script is not None
    config, db = tmp_path / "notifyd.toml", tmp_path / "notifyd.db"
    config.write_text(toml.group(1))
    daemon = Daemon(db, config)
    try:
        notifyd = f"{sys.executable} -m notifyd --config {config} --db {db}"
        commands = (script.group(1).replace("http://127.0.0.1:7726", daemon.url)
                    .replace(".venv/bin/notifyd", notifyd)
                    .replace("curl -s ", "curl -sS --fail-with-body "))
        done = subprocess.run(["bash", "-euo", "pipefail", "-c", commands], capture_output=True,
                              text=True, timeout=120, env=clean_env(), cwd=tmp_path)
        assert done.returncode == 0, done.stdout + done.stderr
        out = done.stdout
        assert '"created":true' in out and '"audience_size":3' in out
        shown = json.loads(out[out.index("{\n"):out.index("\n}\n") + 2])
        assert (shown["state"], shown["routed"], shown["notifications"]["pending"]
                + shown["notifications"]["sent"]) == ("routed", 3, 3)
        assert "event reply-9001  tenant=default type=comment subject=thread:42" in out
        assert '"following":true' in out and '"topic":"release-notes"' in out
    finally:
        assert daemon.stop() == 0, daemon.stderr()
