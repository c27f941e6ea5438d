"""The README's examples do what it says: the user-token recipes make tokens notifyd accepts
(Python always, JavaScript where node is installed); the batch example, run against the daemon,
prints what its comments say."""

from __future__ import annotations

import base64
import re
import secrets
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from engine_support import Daemon, create_key

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
