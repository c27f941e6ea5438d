"""SIGHUP reloads the config file and the templates in the running daemon: new kinds and
template texts take effect, a bad config is refused with one line and the running one stays, a
key only a restart can change is named and left as it is, and SIGTERM afterwards still stops
cleanly. The daemon is the real one, in a subprocess; every wait polls with a deadline.
"""

from __future__ import annotations

import json
import signal
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from engine_support import (
    Daemon,
    ThreadedProvider,
    clean_env,
    create_key,
    notify_socket,
    reaped,
    receive,
)

TIMEOUT = 30.0

CONFIG = """
[server]
port = {port}

[scanner]
poll_interval_sec = {poll}

[channels.hook]
type = "webhook"
url = "{url}"
timeout_sec = 30.0

[kinds.a]
inbox = true
ladder = [{{ channel = "hook" }}]
"""

KIND_B = """
[kinds.b]
inbox = true
ladder = [{ channel = "hook" }]
"""


def call(url: str, key: str, method: str = "GET", body: Any = None) -> tuple[int, Any]:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, method=method, headers={
        "Authorization": f"Bearer {key}", "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def post(d: Daemon, key: str, kind: str, user: str = "ada") -> tuple[int, Any]:
    return call(f"{d.url}/v1/notifications", key, "POST",
                {"user_id": user, "kind": kind, "params": {"name": "Ada"}})


def inbox_titles(d: Daemon, key: str, user: str = "ada") -> list[str]:
    status, body = call(f"{d.url}/v1/users/{user}/inbox", key)
    assert status == 200, body
    return [item["title"] for item in body["items"]]


def template(folder: Path, kind: str, text: str) -> None:
    path = folder / "templates" / kind / "en" / "inbox.title.j2"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def write(config: Path, url: str, *, port: int = 0, poll: float = 0.2, extra: str = "") -> None:
    config.write_text(CONFIG.format(url=url, port=port, poll=poll) + extra)


def _ends(d: Daemon, n: int) -> list[str]:
    """The lines that ended a reload ("reloaded: ..." or "reload refused: ..."), once there are
    at least `n`."""
    deadline = time.monotonic() + TIMEOUT
    while True:
        ends = [ln for ln in list(d.lines) if "reloaded: " in ln or "reload refused: " in ln]
        if len(ends) >= n:
            return ends
        if time.monotonic() > deadline or d.proc.poll() is not None:
            raise AssertionError(f"reload {n} did not end:\n{d.stderr()}")
        time.sleep(0.02)


def stops_cleanly(d: Daemon) -> None:
    assert d.stop(signal.SIGTERM) == 0, d.stderr()
    assert "stopped cleanly" in d.stderr()
    assert "Traceback" not in d.stderr()


def test_sighup_takes_a_new_kind_and_a_changed_template(tmp_path: Path) -> None:
    db, config = tmp_path / "n.db", tmp_path / "n.toml"
    with ThreadedProvider() as prov, notify_socket() as (sock, path), reaped([]) as daemons:
        write(config, prov.url)
        template(tmp_path, "a", "Hello {{ name }}")
        key = create_key(db, config)
        daemons.append(d := Daemon(db, config, env=clean_env(NOTIFY_SOCKET=path)))
        receive(sock, "READY=1")
        assert post(d, key, "a")[0] == 202
        status, body = post(d, key, "b")
        assert (status, body["error"]["code"]) == (422, "unknown_kind")
        assert call(f"{d.url}/v1/users/ada/names", key)[1]["kinds"]["a"]["title"] == "A"

        write(config, prov.url, extra=KIND_B)
        template(tmp_path, "a", "Hi {{ name }}, again")
        template(tmp_path, "b", "B for {{ name }}")
        (tmp_path / "templates" / "names").mkdir()
        (tmp_path / "templates" / "names" / "en.toml").write_text(
            '[kinds.a]\ntitle = "Greetings"\n\n[kinds.b]\ntitle = "Bees"\n')
        d.signal(signal.SIGHUP)
        told = receive(sock, "READY=1")
        assert told[0].startswith("RELOADING=1\nMONOTONIC_USEC=")
        line = _ends(d, 1)[0]
        assert "reloaded: 2 changes (kinds: b added; templates)" in line, d.stderr()
        assert f"reloading config from {config}" in d.stderr()

        assert post(d, key, "b")[0] == 202
        assert post(d, key, "a")[0] == 202
        assert inbox_titles(d, key) == ["Hi Ada, again", "B for Ada", "Hello Ada"]
        names = call(f"{d.url}/v1/users/ada/names", key)[1]["kinds"]  # the names files too
        assert (names["a"]["title"], names["b"]["title"]) == ("Greetings", "Bees")
        stops_cleanly(d)


def test_a_bad_config_or_template_is_refused_and_the_running_config_serves(
        tmp_path: Path) -> None:
    db, config = tmp_path / "n.db", tmp_path / "n.toml"
    with ThreadedProvider() as prov, reaped([]) as daemons:
        write(config, prov.url)
        template(tmp_path, "a", "Hello {{ name }}")
        key = create_key(db, config)
        daemons.append(d := Daemon(db, config))

        config.write_text(config.read_text().replace('channel = "hook"', 'channel = "nope"')
                          + KIND_B)
        d.signal(signal.SIGHUP)
        line = _ends(d, 1)[0]
        assert "reload refused: config error: kinds.a.ladder[0].channel: unknown channel " \
               "'nope'" in line
        assert line.rstrip().endswith("; keeping the running config")
        assert post(d, key, "a")[0] == 202
        assert post(d, key, "b")[0] == 422  # nothing of the refused file was taken

        write(config, prov.url)
        template(tmp_path, "a", "Hello {{ name")
        d.signal(signal.SIGHUP)
        line = _ends(d, 2)[1]
        assert "reload refused: templates: a/en/inbox.title.j2: TemplateSyntaxError" in line
        assert post(d, key, "a")[0] == 202
        assert inbox_titles(d, key) == ["Hello Ada", "Hello Ada"]  # the old templates render

        refusals = [ln for ln in d.lines if "reload refused" in ln]
        assert len(refusals) == 2  # one line each
        template(tmp_path, "a", "Fixed {{ name }}")
        d.signal(signal.SIGHUP)
        assert "reloaded: 1 change (templates)" in _ends(d, 3)[2]
        assert post(d, key, "a")[0] == 202
        assert inbox_titles(d, key)[0] == "Fixed Ada"
        stops_cleanly(d)


def test_a_changed_port_is_named_and_waits_for_a_restart(tmp_path: Path) -> None:
    db, config = tmp_path / "n.db", tmp_path / "n.toml"
    with ThreadedProvider() as prov, reaped([]) as daemons:
        write(config, prov.url)
        template(tmp_path, "a", "Hello {{ name }}")
        key = create_key(db, config)
        daemons.append(d := Daemon(db, config, port=None))  # the file's port (0: any free)

        write(config, prov.url, port=1, poll=0.5,
              extra='\n[store]\nmax_pending_writes = 7\n[daemon]\nevent_loop = "asyncio"\n')
        d.signal(signal.SIGHUP)
        line = _ends(d, 1)[0]
        assert "reloaded: 1 change (scanner.poll_interval_sec)" in line, d.stderr()
        for key_name in ("server.port", "store.max_pending_writes", "daemon.event_loop"):
            assert f"{key_name} changed; takes effect at the next restart" in d.stderr()
        assert post(d, key, "a")[0] == 202  # the old port still serves
        stops_cleanly(d)


def test_sighup_while_stopping_is_ignored_and_the_stop_completes(tmp_path: Path) -> None:
    db, config = tmp_path / "n.db", tmp_path / "n.toml"
    with ThreadedProvider() as prov, notify_socket() as (sock, path), reaped([]) as daemons:
        write(config, prov.url)
        template(tmp_path, "a", "Hello {{ name }}")
        key = create_key(db, config)
        prov.gate.clear()  # the send stays in flight, so the stop waits for it
        daemons.append(d := Daemon(db, config, env=clean_env(NOTIFY_SOCKET=path)))
        receive(sock, "READY=1")
        assert post(d, key, "a")[0] == 202
        prov.wait_for_requests(1)
        d.signal(signal.SIGTERM)
        receive(sock, "STOPPING=1")
        d.signal(signal.SIGHUP)
        d.wait_for_line("received SIGHUP while stopping; ignored")
        prov.gate.set()
        assert d.wait(TIMEOUT) == 0, d.stderr()
        assert "stopped cleanly" in d.stderr()
        assert "reloading" not in d.stderr()
