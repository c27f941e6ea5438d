"""Inbox streams under abuse, against the real daemon in a subprocess: one person's pages cannot
take the daemon's file descriptors (their oldest is closed), streams in all get only the files
the open-files limit leaves beside producers' connections, and a page that never reads is
closed at a bound while publishing goes on. Every wait is bounded."""

from __future__ import annotations

import json
import resource
import signal
import socket
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from engine_support import Daemon, create_key

FILES = 256  # the daemon's open-files limit in these tests (RLIMIT_NOFILE, soft and hard)
BIG = 30_000  # characters of an item's title, and again of its body

CONFIG = """
[server]
header_timeout_sec = 1.0

[daemon]
event_loop = "{loop}"

[quotas]
stream_share = 1.0  # one tenant fills every place here: the bound in all is what is tested

[kinds.big]
inbox = true
ladder = [{{ channel = "log", after_sec = 3600 }}]
"""


def few_files() -> None:
    resource.setrlimit(resource.RLIMIT_NOFILE, (FILES, FILES))


def _config(tmp_path: Path, loop: str = "asyncio") -> Path:
    for part in ("title", "body"):
        path = tmp_path / "templates" / "big" / "en" / f"inbox.{part}.j2"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("{{ text }}")
    config = tmp_path / "n.toml"
    config.write_text(CONFIG.format(loop=loop))
    return config


def call(d: Daemon, path: str, key: str, body: Any = None) -> tuple[int, Any]:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(f"{d.url}{path}", data=data, headers={
        "Authorization": f"Bearer {key}", "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=10) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def metric(d: Daemon, name: str) -> float:
    with urllib.request.urlopen(f"{d.url}/metrics", timeout=10) as resp:
        text = resp.read().decode()
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if line.startswith(name))


def open_stream(d: Daemon, path: str, auth: str = "", rcvbuf: int = 0,
                timeout: float = 5.0) -> tuple[socket.socket, bytes | None]:
    """A stream's socket and its status (None: no answer within `timeout`), its head read and
    nothing more."""
    s = socket.socket()
    if rcvbuf:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    s.settimeout(timeout)
    s.connect(("127.0.0.1", int(d.url.rsplit(":", 1)[1])))
    head = b""
    try:
        s.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\n{auth}\r\n".encode())
        while b"\r\n\r\n" not in head:
            chunk = s.recv(1)  # a byte at a time: what follows the head stays unread
            if not chunk:
                break
            head += chunk
    except (TimeoutError, ConnectionResetError):
        return s, None
    return s, head.split(b" ")[1] if head else None


def producers_served(d: Daemon, key: str) -> None:
    status, body = call(d, "/v1/notifications", key, {"user_id": "bob", "kind": "big",
                                                      "params": {"text": "hi"}})
    assert status == 202, body
    with urllib.request.urlopen(f"{d.url}/readyz", timeout=10) as resp:
        assert resp.status == 200


def test_one_persons_pages_cannot_take_the_daemons_files(tmp_path: Path) -> None:
    """A user token opening more streams than the daemon has files: each past
    server.max_streams_per_user (8) closes that person's oldest, and producers' POSTs and
    /readyz still answer."""
    config = _config(tmp_path)
    key = create_key(tmp_path / "n.db", config)
    d = Daemon(tmp_path / "n.db", config=config, preexec=few_files)
    sockets: list[socket.socket] = []
    try:
        status, body = call(d, "/v1/users/ada/tokens", key, {})
        assert status == 201, body
        for _ in range(FILES + 44):
            s, answer = open_stream(d, f"/v1/users/ada/inbox/stream?token={body['token']}")
            sockets.append(s)
            assert answer == b"200", f"stream {len(sockets)}: {answer!r}"
        producers_served(d, key)
        assert metric(d, "notifyd_streams_open") <= 8
        assert metric(d, 'notifyd_streams_closed_total{why="displaced"}') >= FILES + 44 - 8
        sockets[0].settimeout(5)
        seen = b""
        while chunk := sockets[0].recv(4096):  # the oldest was closed, told to come back later
            seen += chunk
        assert b"retry: 60000" in seen
    finally:
        for s in sockets:
            s.close()
        assert d.stop() == 0, d.stderr()
    assert "Traceback" not in d.stderr()


def test_streams_get_the_files_left_beside_producers_connections(tmp_path: Path) -> None:
    """server.max_streams unset: as many streams as the open-files limit leaves beside the
    connections, providers and database; past them a new one is 503 overloaded, and producers
    are still served."""
    config = _config(tmp_path)
    key = create_key(tmp_path / "n.db", config)
    d = Daemon(tmp_path / "n.db", config=config, preexec=few_files)
    sockets: list[socket.socket] = []
    answers: list[bytes | None] = []
    try:
        for i in range(FILES):  # one stream each for as many people as there are files
            s, answer = open_stream(d, f"/v1/users/u{i}/inbox/stream",
                                    f"Authorization: Bearer {key}\r\n")
            answers.append(answer)
            if answer == b"200":
                sockets.append(s)
            else:  # a keep-alive connection, answered: it would hold a connection's place
                s.close()
        assert None not in answers, f"unanswered from stream {answers.index(None) + 1}"
        assert answers[0] == b"200" and answers[-1] == b"503"
        producers_served(d, key)
    finally:
        for s in sockets:
            s.close()
        assert d.stop() == 0, d.stderr()
    assert f"open files {FILES}: " in d.stderr()
    assert "Traceback" not in d.stderr()


@pytest.mark.parametrize("loop", ["asyncio", "uvloop"])
def test_a_page_that_does_not_read_is_closed_and_publishing_goes_on(tmp_path: Path,
                                                                   loop: str) -> None:
    """A stream whose page never reads is closed once its unsent bytes have been past the bound
    for server.header_timeout_sec (the page would resume from the rows); every POST to its
    person is answered meanwhile."""
    config = _config(tmp_path, loop)
    key = create_key(tmp_path / "n.db", config)
    d = Daemon(tmp_path / "n.db", config=config)
    try:
        s, answer = open_stream(d, "/v1/users/ada/inbox/stream",
                                f"Authorization: Bearer {key}\r\n", rcvbuf=4096)
        assert answer == b"200"
        posted = 40
        for i in range(posted):  # 2.4 MB of events for a page that reads nothing
            status, body = call(d, "/v1/notifications", key, {
                "user_id": "ada", "kind": "big", "params": {"text": f"{i}" * BIG}})
            assert status == 202, body
        deadline = time.monotonic() + 10
        while metric(d, 'notifyd_streams_closed_total{why="slow"}') < 1:
            assert time.monotonic() < deadline, "the stream was not closed"
            time.sleep(0.05)
        got, deadline, ended = 0, time.monotonic() + 10, False
        s.settimeout(0.5)
        while time.monotonic() < deadline:  # now read: what the daemon kept for it, then its end
            try:
                chunk = s.recv(65536)
            except TimeoutError:
                continue
            except ConnectionResetError:
                ended = True
                break
            if not chunk:
                ended = True
                break
            got += len(chunk)
        s.close()
        assert ended, f"the stream is still open after {got} bytes"
        assert got < posted * 2 * BIG // 2
        assert metric(d, 'notifyd_streams_closed_total{why="slow"}') == 1
        assert metric(d, "notifyd_streams_open") == 0
    finally:
        assert d.stop() == 0, d.stderr()
    assert "Traceback" not in d.stderr()


def test_a_reload_applies_the_new_bounds(tmp_path: Path) -> None:
    """SIGHUP with lower bounds: the next stream of a person over server.max_streams_per_user
    closes their older ones, and the open files are shared out again by the new config."""
    config = _config(tmp_path)
    key = create_key(tmp_path / "n.db", config)
    d = Daemon(tmp_path / "n.db", config=config, preexec=few_files)
    sockets: list[socket.socket] = []
    try:
        auth = f"Authorization: Bearer {key}\r\n"
        for _ in range(3):
            s, answer = open_stream(d, "/v1/users/ada/inbox/stream", auth)
            sockets.append(s)
            assert answer == b"200"
        config.write_text(config.read_text().replace(
            "[server]\n", "[server]\nmax_streams_per_user = 1\nmax_connections = 20\n"))
        d.signal(signal.SIGHUP)
        d.wait_for_line("reloaded: ")
        s, answer = open_stream(d, "/v1/users/ada/inbox/stream", auth)
        sockets.append(s)
        assert answer == b"200"
        assert metric(d, 'notifyd_streams_closed_total{why="displaced"}') == 3
        assert metric(d, "notifyd_streams_open") == 1
    finally:
        for s in sockets:
            s.close()
        assert d.stop() == 0, d.stderr()
    shares = [line.split(f"open files {FILES}: ")[1].split(" inbox")[0] for line in d.lines
              if f"open files {FILES}: " in line]
    assert shares == ["84 connections, 84", "20 connections, 148"]  # 168 after the database
