"""The listening socket's accept loop: a connection is accepted only while the guard has a place
for it. At server.max_connections newcomers wait in the kernel's backlog, costing nothing (no
file descriptor, no event-loop work) until a place frees; while one waits, a connection that has
not sent a request head since it opened, a quarter of a second ago or more, gives way
(http/guard.py). Accepting and then refusing them
instead cost a descriptor and a turn of the loop each, again and again, for every client that
retries (measured: benchmarks/overload.py --connections 3000).

accept() running out of file descriptors is one rate-limited line, and accepting pauses a
second, as asyncio's own server does.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import select
import socket
from typing import Any

from aiohttp import web

from notifyd.core.clock import Clock
from notifyd.core.logs import RateLimit
from notifyd.http.guard import ConnectionGuard

log = logging.getLogger("notifyd.http")
BACKLOG = 1024  # connections the kernel holds while none is accepted (somaxconn may cap it)
RETRY_SEC = 1.0  # accepting pauses this long after running out of file descriptors
LOOK_SEC = 0.02  # while full, how often a waiting newcomer looks for a place to be made
OUT_OF_FILES = (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM)


class Listener(asyncio.AbstractServer):
    """Accepts while the guard has room; closing it stops accepting and closes the socket."""

    def __init__(self, sock: socket.socket, guard: ConnectionGuard, server: web.Server,
                 clock: Clock) -> None:
        self.sock, self.guard, self.server = sock, guard, server
        self.limit = RateLimit(clock, 10_000)
        self.loop = asyncio.get_running_loop()
        self.waiting = select.poll()  # whether a connection waits in the backlog
        self.waiting.register(sock, select.POLLIN)
        self.connecting: set[asyncio.Task[Any]] = set()
        self.closed = False
        self.task = self.loop.create_task(self._run(), name="accept")

    def close(self) -> None:
        self.closed = True
        self.task.cancel()
        self.sock.close()

    async def wait_closed(self) -> None:
        with contextlib.suppress(asyncio.CancelledError):
            await self.task

    def is_serving(self) -> bool:
        return not self.task.done()

    def get_loop(self) -> asyncio.AbstractEventLoop:
        return self.loop

    async def start_serving(self) -> None:
        """Serving from the start."""

    async def serve_forever(self) -> None:
        await self.task

    async def _run(self) -> None:
        while not self.closed:  # checked too: a cancel can be lost to a wait that just ended
            await self._room()
            try:
                conn, _ = await self.loop.sock_accept(self.sock)
            except OSError as e:
                await self._failed(e)
                continue
            self._admit(conn)
            while not self.guard.full():  # what else is waiting, without a turn of the loop
                try:
                    conn, _ = self.sock.accept()
                except BlockingIOError:
                    break
                except OSError as e:
                    await self._failed(e)
                    break
                self._admit(conn)

    def _admit(self, conn: socket.socket) -> None:
        conn.setblocking(False)
        self.guard.arriving += 1
        task = self.loop.create_task(self._connect(conn))
        self.connecting.add(task)
        task.add_done_callback(self.connecting.discard)

    async def _connect(self, conn: socket.socket) -> None:
        try:
            await self.loop.connect_accepted_socket(
                lambda: self.guard.protocol(self.server), conn)
        except OSError:
            self.guard.arriving -= 1
            conn.close()

    async def _room(self) -> None:
        """Until the guard has a place: one frees, or a newcomer waits and a connection that
        has not sent a request gives way to it."""
        while self.guard.full():
            if self.waiting.poll(0) and self.guard.make_room():
                await asyncio.sleep(0)  # the closed one's descriptor goes before another comes
                return
            self.guard.freed.clear()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(LOOK_SEC):
                    await self.guard.freed.wait()

    async def _failed(self, e: OSError) -> None:
        if e.errno not in OUT_OF_FILES:  # the peer gave up before accept(), or we closed
            await asyncio.sleep(0)
            return
        held = self.limit.allow()
        if held is not None:
            log.warning("out of file descriptors: new connections wait (%d more times since "
                        "the last line); raise LimitNOFILE or lower server.max_connections",
                        held)
        await asyncio.sleep(RETRY_SEC)


class GuardedSite(web.SockSite):
    """A SockSite whose connections go through the guard, accepted only while it has room."""

    def __init__(self, runner: web.BaseRunner, sock: socket.socket, guard: ConnectionGuard,
                 clock: Clock) -> None:
        super().__init__(runner, sock, backlog=BACKLOG)
        self.guard, self.clock = guard, clock

    async def start(self) -> None:
        await web.BaseSite.start(self)  # registers the site with its runner
        server = self._runner.server
        assert server is not None
        self._server = Listener(self._sock, self.guard, server, self.clock)
