"""The README's examples do what it says: every shell block runs as written against a running
daemon (or says, in a comment just above it, why it cannot be run as it is: it installs a
system service, it runs until stopped, it needs its section's config); the user-token recipes
make tokens notifyd accepts (Python always, JavaScript where node is installed); the batch and
client examples, run against the daemon, print what their comments say; the browser snippet, in
node, reads an inbox and hears a new item on its stream; the events and topics commands run
against a daemon with their section's config."""

from __future__ import annotations

import base64
import json
import os
import re
import secrets
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from engine_support import Daemon, clean_env, create_key, inbox_config

from notifyd.domain import signed

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()
TOKENS = README[README.index("**User tokens.**"):]
BATCHES = README[README.index("**Batches.**"):]
CLIENTS = README[README.index("## Clients"):]
# A shell block, and the comment above it that says why the tests cannot run it, if one does.
SH = re.compile(r"(?:<!-- not run as is: (?P<why>[^\n]*?) -->\n)?```sh\n(?P<code>.*?)```", re.S)
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
    names = _run_against_a_daemon(code.group(1), tmp_path)
    assert capsys.readouterr().out.splitlines() == said
    assert names["results"][0]["state"] == "log_pending"


# --- the shell blocks --------------------------------------------------------------------------


def sh_blocks() -> list[tuple[int, str | None, str]]:
    """(line, why it is not run or None, the code) of every ```sh block."""
    return [(README.count("\n", 0, m.start("code")), m.group("why"), m.group("code"))
            for m in SH.finditer(README)]


def _lines_of(heading: str) -> range:
    """The README lines of the section under `heading`, up to the next one."""
    start = README.index(f"\n{heading}\n")
    end = README.find("\n## ", start + 1)
    return range(README.count("\n", 0, start), README.count("\n", 0, end if end >= 0 else None))


# The first walkthrough starts from `notifyd init` in a folder of its own (a test below runs it
# in order); every other block runs beside a daemon on a plain config, built-in kinds and all.
WALKTHROUGH = [n for heading in ("## Start it", "## Post a notification and watch it")
               for n in _lines_of(heading)]
WALK = [(line, why, code) for line, why, code in sh_blocks() if line in WALKTHROUGH]
RUN = [(line, code) for line, why, code in sh_blocks() if why is None and line not in WALKTHROUGH]


def test_every_shell_block_runs_or_says_why_it_cannot() -> None:
    blocks = sh_blocks()
    assert len(blocks) == README.count("```sh")
    assert all(why is None or len(why) > 10 for _, why, _ in blocks)
    # the ones that stopped being runnable say so, with a reason
    assert len(RUN) >= 3 and len([why for _, why, _ in WALK if why is None]) >= 3


def _reader_folder(folder: Path, curl: str) -> str:
    """`.venv/bin/notifyd` in `folder`, as README's reader has it, and a bin/ with `notifyd`,
    `python` and `curl` (which fails on an error status, as the examples' reader would notice
    one); the PATH that puts that bin/ first."""
    notifyd = f"{sys.executable} -m notifyd"
    _shim(folder / ".venv" / "bin" / "notifyd", notifyd)
    _shim(folder / "bin" / "notifyd", notifyd)
    _shim(folder / "bin" / "python", sys.executable)
    _shim(folder / "bin" / "curl", f"{curl} --fail-with-body --silent --show-error")
    return f"{folder / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}"


@pytest.mark.skipif(shutil.which("curl") is None, reason="curl is not installed here")
def test_the_first_walkthrough_runs_from_init_to_resolve(tmp_path: Path) -> None:
    """Start it and Post a notification, in order, in an empty folder: the init block, the
    serve block as written (in the background), then the second terminal's blocks in one
    shell, as the reader types them. Only the port differs (any free one, for the daemon
    and the commands alike); the config is the one init wrote, found as the README says."""
    curl = shutil.which("curl")
    assert curl is not None
    port = _free_port()
    env = clean_env(NOTIFYD_SERVER_PORT=str(port), PATH=_reader_folder(tmp_path, curl))
    [serve] = [code for _, why, code in WALK if why is not None and code.strip().endswith(" serve")]
    init, *second_terminal = [code for _, why, code in WALK if why is None]
    assert "notifyd init" in init

    def run(script: str) -> str:
        done = subprocess.run(["bash", "-e", "-o", "pipefail", "-c",
                               script.replace(":7726", f":{port}")], capture_output=True,
                              text=True, env=env, cwd=tmp_path, timeout=300, check=False)
        assert done.returncode == 0, f"{script}\n{done.stdout}\n{done.stderr}"
        return done.stdout

    run(init)
    daemon = Daemon(tmp_path / "notifyd.db", env=env, argv=["bash", "-c", "exec " + serve.strip()])
    try:
        out = run("\n".join(second_terminal))
        assert "payment_failed: email ok" in out  # templates check names the kind
        assert "step 1 log: cancelled: resolved: paid" in out  # the reminder, never sent
        assert "already accepted (the same dedup key)" in out  # notifyd send's retry
        # the log channel wrote each message in the starter's words, as the README shows
        [sent] = daemon.wait_for_line('subject="Payment failed: invoice 1009"')
        assert "user=u_42" in sent and "we could not collect 9.90 EUR for invoice 1009" in sent
        assert "Reference: payment_failed n_" in sent
        [again] = daemon.wait_for_line('subject="Payment failed: invoice 1010"')
        assert "user=u_7" in again and "https://example.com/i/1010" in again
    finally:
        assert daemon.stop() == 0, daemon.stderr()


@dataclass
class Playground:
    """A folder with a plain config (no kinds: the built-in `demo`), README's reader's
    `.venv/bin/notifyd`, `examples/`, and a daemon running on the config's port."""

    folder: Path
    port: int
    env: dict[str, str]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _shim(path: Path, command: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"#!/bin/sh\nexec {command} \"$@\"\n")
    path.chmod(0o755)


@pytest.fixture(scope="module")
def playground(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Playground]:
    curl = shutil.which("curl")
    if curl is None:
        pytest.skip("curl is not installed here")
    folder = tmp_path_factory.mktemp("readme")
    port = _free_port()
    config = folder / "notifyd.toml"
    config.write_text(f'[server]\nport = {port}\n\n[store]\nurl = "notifyd.db"\n')
    path = _reader_folder(folder, curl)
    (folder / "examples").symlink_to(ROOT / "examples")
    key = create_key(folder / "notifyd.db", config)
    env = clean_env(NOTIFYD_CONFIG=str(config), KEY=key, PATH=path)
    daemon = Daemon(folder / "notifyd.db", config, port=None)
    try:
        yield Playground(folder, port, env)
    finally:
        assert daemon.stop() == 0, daemon.stderr()


@pytest.mark.parametrize(("line", "code"), RUN, ids=[f"line {line}" for line, _ in RUN])
def test_a_shell_block_runs_as_written(playground: Playground, line: int, code: str) -> None:
    script = code.replace(":7726", f":{playground.port}")
    done = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", script], capture_output=True,
                          text=True, env=playground.env, cwd=playground.folder, timeout=300,
                          check=False)
    assert done.returncode == 0, f"README.md line {line}:\n{code}\n{done.stdout}\n{done.stderr}"


# --- the clients -------------------------------------------------------------------------------


def test_the_python_client_example_prints_what_its_comments_say(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = re.search(r"```python\n(.*?)```", CLIENTS, re.S)
    assert code is not None
    said = re.findall(r"^\s*print\(.*\)  # (.*)$", code.group(1), re.M)
    assert len(said) == 3
    _run_against_a_daemon(code.group(1), tmp_path)
    assert capsys.readouterr().out.splitlines() == said


def _run_against_a_daemon(code: str, tmp_path: Path) -> dict[str, Any]:
    """An example run with KEY set, against a daemon of the built-in config; its names."""
    db = tmp_path / "n.db"
    names: dict[str, Any] = {"KEY": create_key(db)}
    daemon = Daemon(db)
    try:
        exec(code.replace("http://127.0.0.1:7726", daemon.url), names)  # noqa: S102
    finally:
        assert daemon.stop() == 0, daemon.stderr()
    return names


# What the page would do with what openInbox hands it; the token comes from "the backend".
HARNESS = """
const realFetch = globalThis.fetch;
globalThis.fetch = (url, init) => url === "/api/notifyd-token"
  ? Promise.resolve(new Response(JSON.stringify({ token: TOKEN })))
  : realFetch(url, init);
const show = {
  items: (items) => console.log(`items ${items.length}`),
  badge: (unread) => console.log(`badge ${unread}`),
  item: (item) => { console.log(`item ${item.title}`); process.exit(0); },
};
openInbox("ada", show).then((s) => s.addEventListener("open", () => console.log("open")));
setTimeout(() => process.exit(3), 30000);
"""


def _node_has_event_source() -> bool:
    node = shutil.which("node")
    if node is None:
        return False
    done = subprocess.run([node, "--experimental-eventsource", "-e",
                           "process.exit(typeof EventSource === 'function' ? 0 : 1)"],
                          capture_output=True, timeout=60, check=False)
    return done.returncode == 0


@pytest.mark.skipif(not _node_has_event_source(), reason="no node with EventSource here")
def test_the_browser_snippet_reads_the_inbox_and_hears_a_new_item(tmp_path: Path) -> None:
    blocks = re.findall(r"```js\n(.*?)```", CLIENTS, re.S)
    assert len(blocks) == 1
    config = inbox_config(tmp_path, "Note {{ n }}")
    db = tmp_path / "n.db"
    key = create_key(db, config)
    daemon = Daemon(db, config)
    node = None
    try:
        token = _call(daemon.url, key, "/v1/users/ada/tokens", {})["token"]
        _call(daemon.url, key, "/v1/notifications", {"user_id": "ada", "kind": "note",
                                                     "params": {"n": 1}})
        program = (blocks[0].replace("https://notifyd.example.com", daemon.url)
                   + f"const TOKEN = {json.dumps(token)};\n" + HARNESS)
        node = subprocess.Popen(["node", "--experimental-eventsource", "--no-warnings", "-e",
                                 program], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True)
        assert node.stdout is not None
        heard = [node.stdout.readline().strip() for _ in range(3)]
        assert sorted(heard) == ["badge 1", "items 1", "open"]
        _call(daemon.url, key, "/v1/notifications", {"user_id": "ada", "kind": "note",
                                                     "params": {"n": 2}})
        out, err = node.communicate(timeout=60)
        assert node.returncode == 0, err
        assert out.strip() == "item Note 2"
    finally:
        if node is not None and node.poll() is None:
            node.kill()
        assert daemon.stop() == 0, daemon.stderr()


def _call(url: str, key: str, path: str, body: dict[str, Any]) -> Any:
    request = urllib.request.Request(url + path, data=json.dumps(body).encode(), headers={
        "Authorization": f"Bearer {key}", "Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as answer:
        return json.load(answer)


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
