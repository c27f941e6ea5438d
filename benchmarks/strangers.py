"""A stranger holding every connection it can: no API key, half of its sockets dribbling the body of
a console sign-in form a byte at a time, half pipelining GET /v1/openapi.json and never reading an
answer; a socket the daemon closes is opened again at once (after --reopen seconds), as an attacker
keeps its count. benchmarks/slowloris.py, overload.py and streamflood.py run it beside their
clients with --strangers N.

It runs in its own process (spawned: its sockets share the machine with the measured clients, not
their event loop) and reports back over a pipe: how many connections it opened, how the daemon
ended them and how long they had lived, and how many it held open over time. Every wait is
bounded; stopping it closes every socket.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import dataclasses
import multiprocessing
import random
import socket
import time
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from multiprocessing.synchronize import Event as EventType
from typing import Any

from overload import CONN_ERRORS, describe, get, raise_nofile

SIGN_IN = (b"POST /console/sign-in HTTP/1.1\r\nHost: bench\r\nContent-Type: "
           b"application/x-www-form-urlencoded\r\nContent-Length: 1000000\r\n\r\ncredential=")
PIPELINED = b"GET /v1/openapi.json HTTP/1.1\r\nHost: bench\r\n\r\n" * 8
KINDS = ("body", "pipeline")


@dataclass
class Report:
    """What the stranger saw (plain values: it crosses a pipe)."""

    sockets: int
    opened: dict[str, int] = field(default_factory=lambda: dict.fromkeys(KINDS, 0))
    connect_failed: int = 0
    ended: dict[str, list[tuple[str, float]]] = field(
        default_factory=lambda: {k: [] for k in KINDS})  # kind -> (how, seconds it lived)
    open_samples: list[int] = field(default_factory=list)  # sockets open, every 100 ms
    cpu: float = 0.0
    seconds: float = 0.0

    def lines(self) -> list[str]:
        held = sorted(self.open_samples)
        rows = [f"stranger: {self.sockets} sockets (half dribbling sign-in bodies, half "
                f"pipelining unread requests), {sum(self.opened.values())} connections opened "
                f"over {self.seconds:.1f} s, {self.connect_failed} connects failed; open at once "
                f"(its view): median {held[len(held) // 2] if held else 0}, least "
                f"{held[0] if held else 0}; it used {self.cpu / max(self.seconds, 1e-9) * 100:.0f}% "
                "of one core"]
        for kind in KINDS:
            ends = self.ended[kind]
            hows = collections.Counter(how for how, _ in ends)
            rows.append(f"  {kind}: {self.opened[kind]} opened, {len(ends)} ended by the daemon "
                        f"{dict(hows.most_common(4))}; lived "
                        f"{describe([lived * 1000 for _, lived in ends])}")
        return rows


class Stranger:
    """The sockets, in the stranger process's event loop."""

    def __init__(self, port: int, sockets: int, dribble: float, reopen: float) -> None:
        self.port, self.dribble, self.reopen = port, dribble, reopen
        self.out = Report(sockets)
        self.stopping = False
        self.open_now = 0

    async def slot(self, kind: str, gate: asyncio.Semaphore) -> None:
        loop = asyncio.get_running_loop()
        while not self.stopping:
            s = socket.socket()
            s.setblocking(False)
            if kind == "pipeline":  # a small window: its answers back up into the daemon
                s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            async with gate:
                try:
                    async with asyncio.timeout(5):
                        await loop.sock_connect(s, ("127.0.0.1", self.port))
                except (TimeoutError, OSError):
                    self.out.connect_failed += 1
                    s.close()
                    await asyncio.sleep(self.reopen + 0.1)
                    continue
            opened = time.monotonic()
            self.open_now += 1
            self.out.opened[kind] += 1
            try:
                how = await self.hold(s, kind)
            finally:
                self.open_now -= 1
                s.close()
            if how:
                self.out.ended[kind].append((how, time.monotonic() - opened))
            await asyncio.sleep(self.reopen)

    async def hold(self, s: socket.socket, kind: str) -> str:
        """Until the daemon ends the connection (how: EOF or reset, after which answer), or the
        stranger stops (""). A body dribbles a byte per tick and its answer is read; a pipeline
        sends more requests each tick and reads nothing."""
        answered = ""
        with contextlib.suppress(BlockingIOError):
            s.send(SIGN_IN if kind == "body" else PIPELINED)
        while not self.stopping:
            await asyncio.sleep(self.dribble * random.uniform(0.5, 1.5))
            try:
                if kind == "body":
                    data = _recv(s)
                    if data == b"":
                        return f"EOF{answered}"
                    if data and not answered:
                        answered = f" after {data[9:12].decode(errors='replace')}"
                with contextlib.suppress(BlockingIOError):
                    s.send(b"a" if kind == "body" else PIPELINED)
            except CONN_ERRORS:
                return f"reset{answered}"
        return ""

    async def count(self) -> None:
        while not self.stopping:
            self.out.open_samples.append(self.open_now)
            await asyncio.sleep(0.1)


def _recv(s: socket.socket) -> bytes | None:
    """What has arrived (b"": the daemon closed it), or None: nothing yet."""
    try:
        return s.recv(4096)
    except BlockingIOError:
        return None


def run(port: int, sockets: int, dribble: float, reopen: float, pipe: Connection,
        stop: EventType, most: float) -> None:
    """The stranger process: its sockets opened, "ready" sent, held until `stop` (at most
    `most` seconds), closed, and the Report sent."""
    raise_nofile()
    asyncio.run(_run(Stranger(port, sockets, dribble, reopen), pipe, stop, most))


async def _run(stranger: Stranger, pipe: Connection, stop: EventType, most: float) -> None:
    loop = asyncio.get_running_loop()
    cpu, began = time.process_time(), time.monotonic()
    gate = asyncio.Semaphore(128)  # connects in flight at once
    n = stranger.out.sockets
    tasks = [asyncio.create_task(stranger.slot(KINDS[i % 2], gate)) for i in range(n)]
    counter = asyncio.create_task(stranger.count())
    deadline = loop.time() + 30
    while sum(stranger.out.opened.values()) + stranger.out.connect_failed < n \
            and loop.time() < deadline:
        await asyncio.sleep(0.05)
    pipe.send("ready")
    deadline = loop.time() + most
    while not stop.is_set() and loop.time() < deadline:
        await asyncio.sleep(0.05)
    stranger.stopping = True
    for task in [*tasks, counter]:
        task.cancel()
    await asyncio.wait([*tasks, counter], timeout=10)
    stranger.out.cpu = time.process_time() - cpu
    stranger.out.seconds = time.monotonic() - began
    pipe.send(dataclasses.asdict(stranger.out))


class Strangers:
    """The stranger process, as a context manager: entered once its sockets are connected (or
    30 s have passed); report() stops it and returns what it saw."""

    def __init__(self, port: int, sockets: int, dribble: float = 1.0, reopen: float = 0.05,
                 most: float = 600.0) -> None:
        ctx = multiprocessing.get_context("spawn")
        self.here, there = ctx.Pipe()
        self.stop = ctx.Event()
        self.child = ctx.Process(target=run, name="stranger", daemon=True,
                                 args=(port, sockets, dribble, reopen, there, self.stop, most))

    def __enter__(self) -> Strangers:
        self.child.start()
        if not self.here.poll(60):
            self.__exit__()
            raise SystemExit("the stranger process did not open its sockets within 60 s")
        self.here.recv()
        return self

    def report(self) -> Report:
        self.stop.set()
        if not self.here.poll(30):
            raise SystemExit("the stranger process did not report within 30 s of being stopped")
        out: dict[str, Any] = self.here.recv()
        return Report(**{**out, "ended": {k: [tuple(e) for e in v]
                                          for k, v in out["ended"].items()}})

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.child.join(15)
        if self.child.is_alive():
            self.child.kill()
            self.child.join(5)


def daemon_counts(port: int, key: str) -> str:
    """The daemon's own connection counts from /metrics (asked with the key: a producer's
    request), those this daemon has."""
    try:
        _, text = asyncio.run(get("127.0.0.1", port, "/metrics",
                                  {"Authorization": f"Bearer {key}"}))
    except (TimeoutError, *CONN_ERRORS) as e:
        return f"/metrics did not answer ({type(e).__name__})"
    lines = [ln.replace("notifyd_connections_", "") for ln in text.decode().splitlines()
             if ln.startswith("notifyd_connections_") and "_created" not in ln]
    return ", ".join(lines) or "(none counted)"
