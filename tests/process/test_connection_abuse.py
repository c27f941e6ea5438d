"""Clients that hold connections without finishing with them: a body dribbled to any route, an
answer never read, strangers taking every place, a client leaving mid-body. The real daemon in a
subprocess, with small limits; every wait is bounded by a deadline, never a sleep."""

from __future__ import annotations

import json
import re
import socket
import struct
import subprocess
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from urllib.parse import urlencode

from engine_support import Daemon, clean_env, notifyd_cmd

from notifyd.http.app import EVERY_ROUTE

DEADLINE = 8.0  # far past every timeout below; far short of what a stuck connection holds
CONFIG = """
[server]
max_connections = {most}
producer_share = 0.25
header_timeout_sec = 30
body_timeout_sec = {body}
write_timeout_sec = {write}
[webhooks.resend]
secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
"""


@contextmanager
def _daemon(tmp_path: Path, most: int = 20, body: float = 30.0, write: float = 30.0,
            args: tuple[str, ...] = ()) -> Iterator[tuple[Daemon, str]]:
    """The daemon under CONFIG, and an API key of every scope (admin too)."""
    config, db = tmp_path / "n.toml", tmp_path / "n.db"
    config.write_text(CONFIG.format(most=most, body=body, write=write))
    key = subprocess.run(notifyd_cmd(db, "keys", "create", "--name", "ops", "--scopes",
                                     "post,read,resolve,users,topics,everyone,admin",
                                     config=config), capture_output=True, text=True,
                         env=clean_env(), timeout=60, check=True).stdout.strip()
    d = Daemon(db, config, serve_args=args)
    try:
        yield d, key
    finally:
        assert d.stop() == 0, d.stderr()
    assert "Traceback" not in d.stderr() and " ERROR " not in d.stderr(), d.stderr()


def _connect(d: Daemon) -> socket.socket:
    s = socket.create_connection(("127.0.0.1", int(d.url.rsplit(":", 1)[1])), timeout=DEADLINE)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s


def _head(s: socket.socket) -> bytes:
    """The answer's status line and headers (b"" if the daemon closed the connection first)."""
    got = b""
    while b"\r\n\r\n" not in got:
        chunk = s.recv(4096)
        if not chunk:
            return got
        got += chunk
    return got


def _closed(s: socket.socket) -> bytes:
    """Everything the daemon sends until it closes the connection."""
    got = b""
    while chunk := s.recv(65536):
        got += chunk
    return got


def _status(answer: bytes) -> int:
    return int(answer.split(b" ", 2)[1]) if answer.startswith(b"HTTP/1.1 ") else 0


def _request(method: str, path: str, headers: dict[str, str], body: bytes = b"",
             length: int | None = None) -> bytes:
    """A request whose Content-Length may promise more than `body` holds."""
    lines = [f"{method} {path} HTTP/1.1", "Host: x",
             f"Content-Length: {len(body) if length is None else length}",
             *(f"{k}: {v}" for k, v in headers.items())]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


def _sign_in(d: Daemon, key: str) -> str:
    """A console session cookie, signed in with the admin key through the sign-in page's own
    form (its CSRF token, bound to the cookie the page sets)."""
    with _connect(d) as s:
        s.sendall(_request("GET", "/console/sign-in", {"Connection": "close"}))
        page = _closed(s).decode()
    cookies = "; ".join(re.findall(r"Set-Cookie: ([^=]+=[^;\r\n]+)", page))
    token = re.search(r'name="csrf" value="([^"]+)"', page)
    assert token is not None and cookies, page
    with _connect(d) as s:
        form = urlencode({"credential": key, "csrf": token[1]}).encode()
        s.sendall(_request("POST", "/console/sign-in", {
            "Content-Type": "application/x-www-form-urlencoded", "Cookie": cookies}, form))
        head = _head(s).decode()
    assert _status(head.encode()) == 303, head
    return re.search(r"Set-Cookie: (notifyd_console=[^;]+)", head)[1]  # type: ignore[index]


def _path(template: str) -> str:
    """A route's path with each {name} (or {name:pattern}) filled in."""
    names = {"provider": "resend", "channel_type": "email", "address": "a@example.org"}
    return re.sub(r"\{(\w+)(:[^}]*)?\}", lambda m: names.get(m[1], "x1"), template)


def test_every_route_that_takes_a_body_holds_it_no_longer_than_the_body_timeout(
        tmp_path: Path) -> None:
    """A body that never finishes, sent to every route that takes one (with a key and a console
    session, so that each handler gets as far as reading it): the handler that reads it answers
    408 request_timeout and closes the connection, one that answers without reading it closes
    the connection after the same timeout, and none holds its connection past it (the header
    timeout is far away)."""
    with _daemon(tmp_path, body=0.3) as (d, key), ExitStack() as stack:
        cookie = _sign_in(d, key)
        sent = {}
        for method, template, _ in EVERY_ROUTE:
            if method not in ("POST", "PUT", "PATCH", "DELETE"):
                continue
            form = template.startswith("/console")
            s = stack.enter_context(_connect(d))
            s.sendall(_request(method, _path(template), {
                "Authorization": f"Bearer {key}", "Cookie": cookie,
                "Content-Type": "application/x-www-form-urlencoded" if form
                else "application/json"}, b"{\"a", length=100))
            sent[f"{method} {template}"] = s
        answers = {route: _closed(s) for route, s in sent.items()}  # bounded by DEADLINE
        unread = re.search(rb'closed_total\{why="body"\} (\d+)', _metrics(d, key))
    assert len(answers) > 30, sorted(answers)
    assert unread is not None  # the answers that were not 408 left a body to wait for, only
    assert int(unread[1]) == sum(_status(a) != 408 for a in answers.values()), answers
    assert not [r for r, a in answers.items() if not 0 < _status(a) < 500], answers
    timed_out = {r for r, a in answers.items() if _status(a) == 408}
    assert {"POST /console/sign-in", "POST /console/suppressions", "POST /v1/notifications",
            "PUT /v1/users/{user_id}", "POST /v1/webhooks/{provider}",
            "POST /v1/unsubscribe/{token}", "POST /v1/notifications/batch"} <= timed_out


def test_handlers_read_bodies_only_through_the_bounded_read() -> None:
    """A handler that read a body another way would hold its connection for as long as the
    client dribbles it: only kit.bounded reads one, under the body timeout."""
    http = Path(__file__).resolve().parents[2] / "notifyd" / "http"
    reads = re.compile(r"request\.(post|read|text|json|multipart)\(|request\.content\.read")
    found = [f"{path.relative_to(http)}:{n}" for path in sorted(http.rglob("*.py"))
             for n, line in enumerate(path.read_text().splitlines(), 1) if reads.search(line)]
    assert found == [], found


def test_a_client_that_leaves_mid_body_is_a_debug_line(tmp_path: Path) -> None:
    """Its handler was reading the body: one DEBUG line, no ERROR, nothing answered 500; nor
    for a client that leaves while its answer waits to be written."""
    with _daemon(tmp_path, args=("--log-level", "debug", "--access-log")) as (d, key):
        auth = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}
        with _connect(d) as s:  # the key is known from here on: PUT reads its body at once
            s.sendall(_request("GET", "/v1/users/u1", auth))
            assert _status(_head(s)) == 404
        form = {"Content-Type": "application/x-www-form-urlencoded"}
        for method, path, headers in (("PUT", "/v1/users/u1", auth),
                                      ("POST", "/console/sign-in", form)):
            with _connect(d) as s:
                s.sendall(_request(method, path, headers, b"credential=", length=100))
                with _connect(d) as later:  # answered after the handler above began reading
                    later.sendall(_request("GET", "/healthz", {}))
                    assert _status(_head(later)) == 200
            d.wait_for_line(f"{method} {path}: the client left before its body arrived")
        quitter = _stall(d)  # and one that leaves while its answer waits to be written
        _pipeline(quitter)
        deadline = time.monotonic() + DEADLINE
        while b"notifyd_connections_unread 1.0" not in _metrics(d, key):
            assert time.monotonic() < deadline, "the answers never filled the buffers"
            time.sleep(0.02)
        quitter.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        quitter.close()  # a reset, not a close
        while b"notifyd_connections_unread 0.0" not in _metrics(d, key):
            assert time.monotonic() < deadline, "the reset connection is still counted"
            time.sleep(0.02)
    log = d.stderr()
    assert " ERROR " not in log, log
    assert not re.search(r"(PUT|POST) /(v1/users/u1|console/sign-in) 500", log), log


def test_a_client_that_never_reads_its_answers_loses_its_place(tmp_path: Path) -> None:
    """One place only, held by a client that pipelines requests and reads no answer: once the
    answers fill the buffers it has server.write_timeout_sec to read them, then its connection
    is closed and the client waiting for the place gets in."""
    with _daemon(tmp_path, most=1, write=0.3) as (d, _):
        staller = _stall(d)
        with _connect(d) as waiting:
            waiting.sendall(_request("GET", "/healthz", {}))
            deadline = time.monotonic() + DEADLINE
            while True:  # send until the daemon closes it (the send then fails)
                assert time.monotonic() < deadline, "the client that never reads kept its place"
                try:
                    _pipeline(staller)
                except (ConnectionResetError, BrokenPipeError):
                    break
                time.sleep(0.02)
            assert _status(_head(waiting)) == 200
        staller.close()


def _metrics(d: Daemon, key: str) -> bytes:
    with _connect(d) as s:
        s.sendall(_request("GET", "/metrics", {"Authorization": f"Bearer {key}",
                                               "Connection": "close"}))
        return _closed(s)


def _stall(d: Daemon) -> socket.socket:
    """A connection that will read nothing, with a small window so its answers back up soon."""
    s = _connect(d)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.setblocking(False)
    return s


def _pipeline(s: socket.socket) -> bool:
    """More requests sent on `s`; whether the daemon took them (False: it stopped reading)."""
    try:
        s.send(_request("GET", "/v1/openapi.json", {}) * 64)
    except BlockingIOError:
        return False
    return True


def test_strangers_hold_only_their_share_and_producers_keep_theirs(tmp_path: Path) -> None:
    """Twenty places, a quarter kept for producers: strangers dribbling sign-in forms fill the
    fifteen theirs and are refused the rest, while a producer's new connection and its old
    one post as usual and a health check on a new connection is answered."""
    with _daemon(tmp_path) as (d, key), ExitStack() as stack:
        auth = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}
        note = json.dumps({"user_id": "u1", "kind": "demo", "params": {}}).encode()
        producer = stack.enter_context(_connect(d))
        producer.sendall(_request("POST", "/v1/notifications", auth, note))
        assert _status(_head(producer)) == 202  # a producer's connection from now on
        strangers = [stack.enter_context(_connect(d)) for _ in range(20)]
        for s in strangers:
            s.sendall(_request("POST", "/console/sign-in", {
                "Content-Type": "application/x-www-form-urlencoded"}, b"credential=", 1000))
        with _connect(d) as newcomer:  # waits in the listen queue until strangers are refused
            newcomer.sendall(_request("POST", "/v1/notifications", auth, note))
            assert _status(_head(newcomer)) == 202
        deadline = time.monotonic() + DEADLINE
        while len(refused := [s for s in strangers if _answered(s)]) < 5:
            assert time.monotonic() < deadline, f"{len(refused)} strangers refused, not 5"
            time.sleep(0.02)
        for s in refused:
            answer = _closed(s)
            assert _status(answer) == 503 and b"too_many_connections" in answer, answer
            assert b"Retry-After: 1" in answer
        with _connect(d) as health:  # over the share: answered, then closed
            health.sendall(_request("GET", "/healthz", {}))
            assert _status(_closed(health)) == 200
        with _connect(d) as other:
            other.sendall(_request("GET", "/v1/openapi.json", {}))
            assert _status(_closed(other)) == 503
        producer.sendall(_request("POST", "/v1/notifications", auth, note))
        assert _status(_head(producer)) == 202
        assert not [s for s in strangers if s not in refused and _answered(s)]


def _answered(s: socket.socket) -> bool:
    """Whether the daemon has sent anything on `s` (an answer, or its close), without waiting
    for what it has not sent."""
    timeout = s.gettimeout()
    s.setblocking(False)
    try:
        s.recv(1, socket.MSG_PEEK)  # b"": closed
    except BlockingIOError:
        return False
    else:
        return True
    finally:
        s.settimeout(timeout)
