"""The listening socket under abuse: a slowloris of half-open sockets cannot keep a healthy client
out, dribbled headers and bodies time out, malformed requests get the API's error shape, and
running out of file descriptors is one log line, not a traceback a second. The real daemon, in a
subprocess; every wait is bounded."""

from __future__ import annotations

import contextlib
import itertools
import json
import resource
import socket
import sqlite3
import time
import urllib.error
import urllib.request
from datetime import datetime
from pathlib import Path

import pytest
from engine_support import Daemon, create_key

CONFIG = """
[daemon]
event_loop = "{loop}"
[server]
max_connections = {max_connections}
header_timeout_sec = {header}
body_timeout_sec = {body}
"""


def _config(tmp_path: Path, max_connections: int = 50, header: float = 30.0,
            body: float = 30.0, loop: str = "auto") -> Path:
    path = tmp_path / "n.toml"
    path.write_text(CONFIG.format(max_connections=max_connections, header=header, body=body,
                                  loop=loop))
    return path


def _port(d: Daemon) -> int:
    return int(d.url.rsplit(":", 1)[1])


def _healthy(d: Daemon, tries: int = 1) -> int:
    """GET /healthz; a connection closed at once is tried again, as clients do, `tries` times."""
    for i in range(tries):
        try:
            with urllib.request.urlopen(f"{d.url}/healthz", timeout=10) as resp:
                return resp.status
        except (ConnectionResetError, urllib.error.URLError):
            if i == tries - 1:
                raise
            time.sleep(0.05 * (i + 1))
    raise AssertionError("unreachable")


def _half_open(port: int, n: int) -> list[socket.socket]:
    out = []
    for _ in range(n):
        s = socket.create_connection(("127.0.0.1", port), timeout=10)
        s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: ")  # never finished
        out.append(s)
    return out


def test_a_slowloris_cannot_keep_a_healthy_client_out(tmp_path: Path) -> None:
    d = Daemon(tmp_path / "n.db", config=_config(tmp_path, max_connections=50))
    sockets: list[socket.socket] = []
    try:
        for _ in range(6):  # 300 half-open sockets, six times the connection limit
            sockets += _half_open(_port(d), 50)
            # Newcomers wait in the listen queue; sockets that have not sent a whole request
            # give their places to them, a quarter of a second after they opened.
            assert _healthy(d, tries=20) == 200
    finally:
        for s in sockets:
            s.close()
        assert d.stop() == 0, d.stderr()
    assert "Traceback" not in d.stderr()


def _ask(s: socket.socket, path: str = "/healthz", key: str = "") -> bytes:
    """One request on a keep-alive connection (with the API key, if one is given); the
    answer's head and body."""
    auth = f"Authorization: Bearer {key}\r\n" if key else ""
    s.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\n{auth}\r\n".encode())
    return _answer(s)


def _answer(s: socket.socket) -> bytes:
    answer = b""
    while b"\r\n\r\n" not in answer:
        chunk = s.recv(4096)
        assert chunk, f"closed by the daemon after {answer!r}"
        answer += chunk
    head, _, body = answer.partition(b"\r\n\r\n")
    length = int(next(line.split(b":")[1] for line in head.split(b"\r\n")
                      if line.lower().startswith(b"content-length:")))
    while len(body) < length:
        body += s.recv(4096)
    return head + b"\r\n\r\n" + body


def test_a_connection_that_made_a_request_keeps_its_place_and_a_newcomer_waits(
        tmp_path: Path) -> None:
    """At server.max_connections, connections that made requests are never closed for a
    newcomer (their next request may be on its way): newcomers wait in the backlog until a
    place frees, and one whose client left while it waited is not run. The clients are a
    producer's (they present its key): strangers could hold only their share of the places."""
    key = create_key(tmp_path / "n.db", _config(tmp_path, max_connections=4))
    d = Daemon(tmp_path / "n.db", config=_config(tmp_path, max_connections=4))
    clients = [socket.create_connection(("127.0.0.1", _port(d)), timeout=10) for _ in range(4)]
    try:
        for s in clients:
            assert _ask(s, key=key).startswith(b"HTTP/1.1 200")
        body = json.dumps({"user_id": "u1", "kind": "demo", "params": {},
                           "dedup_key": "gone"}).encode()
        with socket.create_connection(("127.0.0.1", _port(d)), timeout=10) as gone:
            gone.sendall(b"POST /v1/notifications HTTP/1.1\r\nHost: x\r\nAuthorization: "
                         b"Bearer " + key.encode() + b"\r\nContent-Type: application/json\r\n"
                         b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
        late = socket.create_connection(("127.0.0.1", _port(d)), timeout=10)
        late.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        for s in clients:  # every one still open and served
            assert _ask(s, key=key).startswith(b"HTTP/1.1 200")
        clients.pop().close()  # a place frees: the newcomers are taken in turn
        clients.append(late)
        assert _answer(late).startswith(b"HTTP/1.1 200")
    finally:
        for s in clients:
            s.close()
        assert d.stop() == 0, d.stderr()
    assert "Traceback" not in d.stderr()
    with contextlib.closing(sqlite3.connect(tmp_path / "n.db")) as db:
        assert db.execute("SELECT count(*) FROM notifications WHERE dedup_key = 'gone'"
                          ).fetchone() == (0,)


def test_dribbled_headers_are_cut_off_and_a_slow_body_is_a_408(tmp_path: Path) -> None:
    key = create_key(tmp_path / "n.db", _config(tmp_path, header=1.0, body=1.0))
    d = Daemon(tmp_path / "n.db", config=_config(tmp_path, header=1.0, body=1.0))
    try:
        [slow] = _half_open(_port(d), 1)
        started = time.monotonic()
        assert slow.recv(100) == b""  # closed by the daemon (bounded by the socket timeout)
        assert time.monotonic() - started < 9
        with socket.create_connection(("127.0.0.1", _port(d)), timeout=10) as s:
            s.sendall(b"PUT /v1/users/u1 HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "
                      + key.encode() + b"\r\nContent-Type: application/json\r\n"
                      b"Content-Length: 100\r\n\r\n{\"a\"")  # and no more
            answer = b""
            while chunk := s.recv(4096):
                answer += chunk
        head, _, body = answer.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 408"), head
        assert json.loads(body)["error"]["code"] == "request_timeout"
    finally:
        assert d.stop() == 0, d.stderr()


def test_a_malformed_request_gets_the_documented_error_shape(tmp_path: Path) -> None:
    d = Daemon(tmp_path / "n.db")
    try:
        with socket.create_connection(("127.0.0.1", _port(d)), timeout=10) as s:
            s.sendall(b"GET /\xff HTTP/1.1\r\nHost: x\r\n\r\n")
            answer = b""
            while chunk := s.recv(4096):
                answer += chunk
        head, _, body = answer.partition(b"\r\n\r\n")
        assert head.split(b" ")[1] == b"400"
        assert b"application/json" in head
        assert json.loads(body) == {"error": {
            "code": "invalid_request", "message": "the request could not be parsed as HTTP",
            "field": None}}
    finally:
        assert d.stop() == 0
    assert "Traceback" not in d.stderr()


@pytest.mark.parametrize("loop", ["asyncio", "uvloop"])
def test_out_of_file_descriptors_is_one_line_a_while_and_the_daemon_recovers(
        tmp_path: Path, loop: str) -> None:
    def few_files() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (26, 26))

    d = Daemon(tmp_path / "n.db", preexec=few_files,
               config=_config(tmp_path, max_connections=1000, loop=loop))
    sockets: list[socket.socket] = []
    try:
        for _ in range(60):  # until the kernel stops queueing what accept() cannot take
            s = socket.socket()
            s.settimeout(1)
            sockets.append(s)
            try:
                s.connect(("127.0.0.1", _port(d)))
            except OSError:
                break
        deadline = time.monotonic() + 20
        while "out of file descriptors" not in d.stderr():
            assert time.monotonic() < deadline, d.stderr()
            time.sleep(0.05)
    finally:
        for s in sockets:
            s.close()
    deadline = time.monotonic() + 30
    while True:  # sockets gone: it serves again
        try:
            assert _healthy(d) == 200
            break
        except OSError:
            assert time.monotonic() < deadline, d.stderr()
            time.sleep(0.1)
    assert d.stop() == 0
    log = d.stderr()
    assert "Traceback" not in log, log
    assert "serving at most" in log  # 1,000 connections do not fit in 26 files
    stamps = [datetime.strptime(line[:23], "%Y-%m-%d %H:%M:%S,%f")
              for line in log.splitlines() if "out of file descriptors" in line]
    assert all((b - a).total_seconds() >= 9.5 for a, b in itertools.pairwise(stamps)), stamps


def test_inbox_streams_leave_the_connection_count_and_are_bounded(tmp_path: Path) -> None:
    """A page's live inbox stays open for hours: ten of them beside a limit of four connections
    still let a client in, and server.max_streams bounds them instead."""
    config = tmp_path / "n.toml"
    config.write_text("[server]\nmax_connections = 4\nmax_streams = 10\n")
    key = create_key(tmp_path / "n.db", config)
    d = Daemon(tmp_path / "n.db", config=config)
    streams: list[socket.socket] = []
    try:
        for i in range(11):
            s = socket.create_connection(("127.0.0.1", _port(d)), timeout=10)
            s.sendall(f"GET /v1/users/u{i}/inbox/stream HTTP/1.1\r\nHost: x\r\n"
                      f"Authorization: Bearer {key}\r\n\r\n".encode())
            head = b""
            while b"\r\n\r\n" not in head:
                head += s.recv(4096)
            streams.append(s)
            status = head.split(b" ")[1]
            if i < 10:
                assert status == b"200", head
            else:  # the eleventh is over server.max_streams
                assert status == b"503", head
        with urllib.request.urlopen(f"{d.url}/healthz", timeout=10) as resp:
            assert resp.status == 200  # streams are not connections the guard counts
    finally:
        for s in streams:
            s.close()
        assert d.stop() == 0, d.stderr()
    assert "Traceback" not in d.stderr()


def test_a_stream_whose_page_left_frees_its_place_at_once(tmp_path: Path) -> None:
    """server.max_streams counts open pages: one that went away leaves at once, not at its
    next keepalive."""
    config = tmp_path / "n.toml"
    config.write_text("[server]\nmax_streams = 2\n")
    key = create_key(tmp_path / "n.db", config)
    d = Daemon(tmp_path / "n.db", config=config)

    def open_stream(user: str) -> tuple[socket.socket, bytes]:
        s = socket.create_connection(("127.0.0.1", _port(d)), timeout=10)
        s.sendall(f"GET /v1/users/{user}/inbox/stream HTTP/1.1\r\nHost: x\r\n"
                  f"Authorization: Bearer {key}\r\n\r\n".encode())
        head = b""
        while b"\r\n\r\n" not in head:
            head += s.recv(4096)
        return s, head.split(b" ")[1]

    try:
        first = [open_stream(f"u{i}") for i in range(2)]
        assert [status for _, status in first] == [b"200", b"200"]
        for s, _ in first:
            s.close()
        deadline = time.monotonic() + 5  # bounded: the daemon hears the close at once
        while True:
            s, status = open_stream("u9")
            s.close()
            if status == b"200" or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        assert status == b"200"
    finally:
        assert d.stop() == 0, d.stderr()
    assert "Traceback" not in d.stderr()


@pytest.mark.parametrize("loop", ["asyncio", "uvloop"])
def test_the_daemon_runs_on_either_event_loop(tmp_path: Path, loop: str) -> None:
    """daemon.event_loop = "uvloop" (the default where installed) or "asyncio": the same API, the
    same guard (a slowloris beside a healthy client), on either loop's transports."""
    config = tmp_path / "n.toml"
    config.write_text(f"[server]\nmax_connections = 20\n[daemon]\nevent_loop = \"{loop}\"\n")
    key = create_key(tmp_path / "n.db", config)
    d = Daemon(tmp_path / "n.db", config=config)
    sockets: list[socket.socket] = []
    try:
        assert f"event loop {loop}" in d.stderr()
        request = urllib.request.Request(
            f"{d.url}/v1/notifications", method="POST",
            data=json.dumps({"user_id": "u1", "kind": "demo", "params": {}}).encode(),
            headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=10) as resp:
            assert resp.status == 202
        sockets += _half_open(_port(d), 40)
        assert _healthy(d, tries=20) == 200
    finally:
        for s in sockets:
            s.close()
        assert d.stop() == 0, d.stderr()
    assert "Traceback" not in d.stderr()
