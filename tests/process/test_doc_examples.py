"""The docs' examples do what they say: every shell block of the reference pages runs as written
against a running daemon (or says, in a comment just above it, why it cannot be run as it is:
it installs a system service, it runs until stopped, it needs its section's config; README and
Getting started run in order, in tests/process/test_five_minutes.py); the user-token recipes
make tokens notifyd accepts (Python always, JavaScript where node is installed); the batch and
client examples, run against the daemon, print what their comments say; the browser snippet, in
node, reads an inbox and hears a new item on its stream; the events and topics commands run
against a daemon with their section's config; the recovery experiment's pages show what it
prints."""

from __future__ import annotations

import base64
import json
import re
import secrets
import shutil
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from docs_support import ROOT, WALKTHROUGH_PAGES, Block, all_blocks, example, free_port, named, reader_folder
from engine_support import Daemon, clean_env, create_key, inbox_config

from notifyd.domain import signed
from notifyd.experiment import main as experiment

KEY = secrets.token_bytes(32)
SECRET = base64.urlsafe_b64encode(KEY).decode().rstrip("=")
MAX_TTL_SEC = 86400  # tokens.max_ttl_sec's default


def test_the_python_recipe_makes_a_token_notifyd_accepts() -> None:
    names: dict[str, Any] = {}
    exec(example("user token in python").code, names)  # noqa: S102 - our own docs' example
    token = names["user_token"](SECRET, "acme", "ada", 600)
    now = int(time.time())
    who = signed.read_user_token(token, [KEY], now, MAX_TTL_SEC)
    assert (who.tenant, who.user_id, who.key_name) == ("acme", "ada", None)
    assert now < who.expires_at <= now + 600


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed here")
def test_the_javascript_recipe_makes_a_token_notifyd_accepts() -> None:
    program = example("user token in javascript").code.replace('import { createHmac } from "node:crypto";',
                                    'const { createHmac } = require("node:crypto");')
    program += f'\nconsole.log(userToken("{SECRET}", "acme", "ada"));\n'
    done = subprocess.run(["node", "-e", program], capture_output=True, text=True, timeout=60,
                          check=True)
    who = signed.read_user_token(done.stdout.strip(), [KEY], int(time.time()), MAX_TTL_SEC)
    assert (who.tenant, who.user_id) == ("acme", "ada")


def test_the_batch_example_prints_what_its_comments_say(tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    code = example("batches").code
    said = re.findall(r"^print\(.*?\)  # (\[[^]]*\])", code, re.M)
    assert len(said) == 2
    names = _run_against_a_daemon(code, tmp_path)
    assert capsys.readouterr().out.splitlines() == said
    assert names["results"][0]["state"] == "log_pending"


# --- the shell blocks --------------------------------------------------------------------------


# README and Getting started run in order from `notifyd init` (tests/process/test_five_minutes.py);
# every other page's shell blocks run beside a daemon on a plain config, built-in kinds and all.
RUN = [b for b in all_blocks() if b.lang == "sh" and b.why is None and named(b) is None
       and b.page not in WALKTHROUGH_PAGES]


def test_there_are_shell_blocks_to_run() -> None:
    assert len(RUN) >= 3 and {b.page for b in RUN} >= {"docs/people.md", "docs/operations.md"}


@dataclass
class Playground:
    """A folder with a plain config (no kinds: the built-in `demo`), the docs' reader's
    `.venv/bin/notifyd`, `examples/`, and a daemon running on the config's port."""

    folder: Path
    port: int
    env: dict[str, str]


@pytest.fixture(scope="module")
def playground(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Playground]:
    curl = shutil.which("curl")
    if curl is None:
        pytest.skip("curl is not installed here")
    folder = tmp_path_factory.mktemp("docs")
    port = free_port()
    config = folder / "notifyd.toml"
    config.write_text(f'[server]\nport = {port}\n\n[store]\nurl = "notifyd.db"\n')
    path = reader_folder(folder, curl)
    (folder / "examples").symlink_to(ROOT / "examples")
    key = create_key(folder / "notifyd.db", config)
    env = clean_env(NOTIFYD_CONFIG=str(config), KEY=key, PATH=path)
    daemon = Daemon(folder / "notifyd.db", config, port=None)
    try:
        yield Playground(folder, port, env)
    finally:
        assert daemon.stop() == 0, daemon.stderr()


@pytest.mark.parametrize("block", RUN, ids=str)
def test_a_shell_block_runs_as_written(playground: Playground, block: Block) -> None:
    script = block.code.replace(":7726", f":{playground.port}")
    done = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", script], capture_output=True,
                          text=True, env=playground.env, cwd=playground.folder, timeout=300,
                          check=False)
    assert done.returncode == 0, f"{block}:\n{block.code}\n{done.stdout}\n{done.stderr}"


# --- the clients -------------------------------------------------------------------------------


def test_the_python_client_example_prints_what_its_comments_say(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = example("python client").code
    said = re.findall(r"^\s*print\(.*\)  # (.*)$", code, re.M)
    assert len(said) == 3
    _run_against_a_daemon(code, tmp_path)
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
    browser = example("browser").code
    config = inbox_config(tmp_path, "Note {{ n }}")
    db = tmp_path / "n.db"
    key = create_key(db, config)
    daemon = Daemon(db, config)
    node = None
    try:
        token = _call(daemon.url, key, "/v1/users/ada/tokens", {})["token"]
        _call(daemon.url, key, "/v1/notifications", {"user_id": "ada", "kind": "note",
                                                     "params": {"n": 1}})
        program = (browser.replace("https://notifyd.example.com", daemon.url)
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


@pytest.mark.skipif(shutil.which("curl") is None, reason="curl is not installed here")
def test_the_events_and_topics_examples_run_against_the_daemon(tmp_path: Path) -> None:
    """The page's config and commands, as a reader runs them beside `notifyd serve`: the
    daemon on a free port, the docs' notifyd on this checkout; every call must succeed."""
    config, db = tmp_path / "notifyd.toml", tmp_path / "notifyd.db"
    config.write_text(example("events config").code)
    daemon = Daemon(db, config)
    try:
        notifyd = f"{sys.executable} -m notifyd --config {config} --db {db}"
        commands = (example("events commands").code.replace("http://127.0.0.1:7726", daemon.url)
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


# --- the recovery experiment -------------------------------------------------------------------


def test_the_recovery_experiments_page_shows_what_it_prints() -> None:
    """Its whole output, and the lines that differ with a timeout before accept."""
    printed = list(experiment())
    assert example("recovery output").code.splitlines() == printed
    differ = [line for line in experiment(timeout_before_accept=True) if line not in printed]
    assert example("recovery output, timeout before accept").code.splitlines() == differ
