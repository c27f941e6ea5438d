"""The composition root: builds the store, ingest and web app, runs them as peers, shuts down in order.

Shutdown order: stop accepting HTTP, stop claiming, let in-flight sends finish within the grace
period, close the store. A second SIGTERM or SIGINT exits at once.
"""

from __future__ import annotations

import asyncio
import fcntl
import logging
import os
import signal
import socket
import sys
import time
from typing import IO

from aiohttp import web

from notifyd.auth import KeyCache
from notifyd.clock import Clock, SystemClock
from notifyd.config import Config
from notifyd.ingest import Ingest
from notifyd.logs import ServerLog
from notifyd.scanner import Scanner
from notifyd.sender import SenderPool, build_adapters
from notifyd.store import open_store, sqlite_path
from notifyd.web import Context, make_app

log = logging.getLogger("notifyd")


def sd_notify(state: str) -> None:
    """Tell systemd (Type=notify) how we are, when NOTIFY_SOCKET says it is listening."""
    path = os.environ.get("NOTIFY_SOCKET")
    if not path:
        return
    addr = "\0" + path[1:] if path.startswith("@") else path
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        try:
            sock.connect(addr)
            sock.sendall(state.encode())
        except OSError as e:
            log.warning("sd_notify %s failed: %s", state, e)


class AlreadyRunning(Exception):
    pass


def hold_lock(db_path: str) -> IO[str]:
    """One daemon per SQLite file: a second would take the first's in-flight sends for
    interrupted ones and send them again. The kernel drops the lock when the process dies."""
    # Named after the real path, so a symlink to the same file finds the same lock.
    handle = open(f"{os.path.realpath(db_path)}.lock", "w")  # noqa: SIM115 - held while running
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.close()
        raise AlreadyRunning(f"another notifyd serve is running on {db_path}") from None
    return handle


class Daemon:
    def __init__(self, cfg: Config, clock: Clock | None = None) -> None:
        self.cfg = cfg
        self.clock = clock or SystemClock()
        self.port: int | None = None  # the bound port, once listening
        self._stopping_at = time.monotonic()

    async def run(self, stop: asyncio.Event) -> None:
        """Run the HTTP server and the scanner as peers until `stop`, then shut down in order."""
        cfg = self.cfg
        path = sqlite_path(cfg.store.path)
        lock = hold_lock(path) if path is not None else None
        try:
            store = await open_store(cfg.store.path, cfg.store.synchronous,
                                     cfg.store.busy_timeout_ms)
        except BaseException:
            if lock is not None:
                lock.close()
            raise
        pool = SenderPool(cfg, store, self.clock, build_adapters(cfg))
        scanner = Scanner(cfg, store, pool, self.clock)
        ingest = Ingest(cfg, store, self.clock, wake=scanner.wake)
        ctx = Context(cfg, ingest, KeyCache(store, self.clock), self.clock)
        stop_claiming = asyncio.Event()
        try:
            async with asyncio.TaskGroup() as peers:
                peers.create_task(self._serve_http(ctx, stop, stop_claiming), name="http")
                peers.create_task(scanner.run(stop_claiming), name="scanner")
        finally:
            # One grace period in all: what the HTTP drain used is not given again here.
            left = cfg.daemon.grace_sec - (time.monotonic() - self._stopping_at)
            await pool.drain(max(0.0, left))
            await pool.close()
            await store.close()
            if lock is not None:
                lock.close()
        log.info("stopped cleanly")

    async def _serve_http(self, ctx: Context, stop: asyncio.Event,
                          stop_claiming: asyncio.Event) -> None:
        """Serve until `stop`; then refuse new requests, stop the scanner claiming, and let the
        requests already running finish."""
        cfg = self.cfg
        runner = web.AppRunner(make_app(ctx), access_log=None, handle_signals=False,
                               shutdown_timeout=cfg.daemon.grace_sec,
                               logger=ServerLog(self.clock))
        await runner.setup()
        try:
            site = web.TCPSite(runner, cfg.server.host, cfg.server.port)
            await site.start()
            self.port = runner.addresses[0][1]
            log.info("listening on http://%s:%s (store %s)", cfg.server.host, self.port,
                     ctx.store.url)
            sd_notify("READY=1")
            await stop.wait()
            log.info("stopping: no new requests or claims; finishing in-flight sends")
            sd_notify("STOPPING=1")
        finally:
            self._stopping_at = time.monotonic()
            ctx.draining = True
            stop_claiming.set()  # what is accepted from here on waits, durable, for the next start
            await runner.cleanup()


def serve(cfg: Config) -> None:
    """Run the daemon until SIGTERM or SIGINT; a second signal exits at once."""

    async def main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()

        def on_signal(signum: int) -> None:
            if stop.is_set():
                log.warning("second signal: exiting at once")
                os._exit(128 + signum)
            log.info("received %s", signal.Signals(signum).name)
            stop.set()

        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, on_signal, sig)
        await Daemon(cfg).run(stop)

    # The writer thread drops the GIL on every SQLite step and must win it back from the event
    # loop; the default 5 ms switch interval leaves it waiting, and accepts with it. 1 ms
    # measured about 20% more accepts/s (benchmarks/accept.py).
    sys.setswitchinterval(0.001)
    asyncio.run(main())
