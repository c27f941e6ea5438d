"""The composition root: builds the store, ingest and web app, runs them as peers, shuts down in order.

Shutdown order: stop accepting HTTP, stop claiming, let in-flight sends finish within the grace
period, close the store. A second SIGTERM or SIGINT exits at once.

Reload (SIGHUP): the config file and the templates are read again off the event loop and
checked whole, as a start checks them (reload.py); a bad one is one log line, and the running
config stays. A good one becomes a new generation of the peers a config makes (generation.py):
the HTTP context switches to its ingest and health, the old scanner and digester stop claiming,
the new ones start (first ending steps on channels the config dropped), and the old pool's sends
in flight finish on their adapters in the background before those are closed. A channel the
reload left unchanged keeps its sender, rate limit and breaker included. The store, its lock,
the socket, the HTTP server, the metrics and the scanner's wake-ups stay; keys only a restart
can change (reload.RESTART_ONLY) keep their running values, each named in a log line. Reloads
asked during one make one more after it; SIGHUP while stopping is ignored; a stop during a
reload abandons it.
"""

from __future__ import annotations

import asyncio
import errno
import gc
import logging
import os
import signal
import socket
import sys
import time
from collections.abc import Callable
from pathlib import Path

from aiohttp import web

from notifyd import __version__
from notifyd.config import Config, load_config
from notifyd.core.clock import Clock, SystemClock
from notifyd.daemon.files import Budget, budget, open_files
from notifyd.daemon.generation import Generation, Shared, build, close_adapters
from notifyd.daemon.reload import Refused, reread, templates_problem
from notifyd.domain import signed
from notifyd.engine import evidence
from notifyd.engine.metrics import Metrics
from notifyd.engine.render import load_templates
from notifyd.engine.scanner import Wakeups
from notifyd.engine.stream import Hub
from notifyd.engine.templates import Templates
from notifyd.http.app import make_app
from notifyd.http.auth import KeyCache
from notifyd.http.guard import ConnectionGuard
from notifyd.http.kit import Context
from notifyd.http.listener import BACKLOG, GuardedSite
from notifyd.http.serverlog import AccessLog, ServerLog
from notifyd.http.vouch import vouched
from notifyd.store import Held, Store, StoreUnavailable, hold, open_store

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


class StartError(Exception):
    """The daemon cannot start; the message names the problem and the fix."""


def bind(host: str, port: int, backlog: int) -> socket.socket:
    """The listening socket, bound before any file is touched, so that a port in use or a host
    that does not resolve leaves nothing behind."""
    try:
        family, kind, proto, _, addr = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0]
    except socket.gaierror as e:
        raise StartError(f"cannot listen on host {host!r}: {e.strerror}; set server.host or "
                         "--host to an address of this machine") from None
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(addr)
        sock.listen(backlog)
    except OSError as e:
        sock.close()
        if e.errno == errno.EADDRINUSE:
            raise StartError(f"port {port} on {host} is in use (another notifyd, or another "
                             "program); choose another with --port or server.port") from None
        raise StartError(f"cannot listen on {host}:{port}: {e.strerror}") from None
    sock.setblocking(False)
    return sock


class Daemon:
    def __init__(self, cfg: Config, clock: Clock | None = None, config_path: str | None = None,
                 access_log: bool = False, load: Callable[[], Config] | None = None) -> None:
        self.cfg = cfg
        self.clock = clock or SystemClock()
        self.config_path = config_path
        self.access_log = access_log
        # A reload's config: the file read again, with the command line's overrides (the CLI's);
        # with no file, the running config, so that a reload reads the templates only.
        self.load = load or (lambda: load_config(config_path) if config_path else self.cfg)
        self.port: int | None = None  # the bound port, once listening
        self.files = 1024  # the open-files limit, read at start
        self.templates: Templates | None = None
        self._stopping_at = time.monotonic()
        self._reload_asked = asyncio.Event()
        self._reloading = False
        self._retiring: dict[Generation, asyncio.Task[None]] = {}  # old pools finishing sends

    async def _start(self) -> tuple[Store, socket.socket, Held | None]:
        """Check the templates; take the database (one daemon per SQLite file), the port and
        the store, in that order; on failure undo what this start created (a lock file, the
        socket) and raise StartError."""
        cfg = self.cfg
        self.templates, problems = load_templates(cfg)
        if problems:
            raise StartError(templates_problem(problems))
        try:
            held = hold(cfg.store.url)
        except StoreUnavailable as e:
            raise StartError(str(e)) from None
        sock = None
        self.files = open_files()
        try:
            sock = bind(cfg.server.host, cfg.server.port, BACKLOG)
            store = await open_store(cfg.store.url, self.clock, sqlite=cfg.store.sqlite,
                                     postgres=cfg.store.postgres,
                                     max_pending_writes=cfg.store.max_pending_writes,
                                     check=cfg.store.sqlite.check_at_start)
        except BaseException as e:
            if sock is not None:
                sock.close()
            if held is not None:
                held.release(undo=True)
            if isinstance(e, StoreUnavailable):
                raise StartError(str(e)) from None
            raise
        return store, sock, held

    async def run(self, stop: asyncio.Event) -> None:
        """Run the HTTP server, the scanner and the digester as peers until `stop`, reloading
        when asked (ask_reload), then shut down in order."""
        cfg = self.cfg
        store, sock, held = await self._start()
        took = await store.tune_space()
        if took is not None:
            log.info("the database now gives space back to the file system as rows age out "
                     "(converted once to incremental auto-vacuum, in %.1f s)", took)
        metrics = Metrics()
        fit = self._fit(cfg)
        shared = Shared(store, self.clock, metrics, Wakeups(),
                        await store.signing_key(signed.LINKS_KEY),
                        Hub(fit.streams, cfg.server.max_streams_per_user, metrics,
                            shared=store.shared, share=cfg.quotas.stream_share))
        self.gen = build(cfg, self.templates, shared)
        self.guard = ConnectionGuard(self.clock, fit.connections, cfg.server, vouched, metrics)
        self.ctx = Context(cfg, self.gen.ingest, KeyCache(store, self.clock), self.clock,
                           self.gen.health, link_key=shared.link_key, guard=self.guard)
        stop_claiming = asyncio.Event()
        try:
            async with asyncio.TaskGroup() as peers:
                peers.create_task(self._serve_http(self.ctx, store.url, sock, self.guard,
                                                   stop, stop_claiming), name="http")
                peers.create_task(self.guard.run(stop_claiming), name="connection-guard")
                peers.create_task(shared.loop.run(stop_claiming), name="loop-lag")
                peers.create_task(store.watch(shared.wakeups.signal, shared.hub.poke,
                                              stop_claiming), name="signals")
                peers.create_task(self._engine(peers, shared, stop, stop_claiming),
                                  name="engine")
        finally:
            retiring = list(self._retiring)
            for task in self._retiring.values():  # they only wait for sends: drained below
                task.cancel()
            await asyncio.gather(*self._retiring.values(), return_exceptions=True)
            gens = [self.gen, *retiring]
            # One grace period in all: what the HTTP drain used is not given again here.
            left = cfg.daemon.grace_sec - (time.monotonic() - self._stopping_at)
            await asyncio.gather(*(g.pool.drain(max(0.0, left)) for g in gens))
            await close_adapters(gens)
            await self.ctx.fetch.close()
            await self.ctx.keys.settle()
            await store.close()
            if held is not None:
                held.release()
        log.info("stopped cleanly")

    def _fit(self, cfg: Config) -> Budget:
        """The config's connections and streams within the open-files limit, said in the log."""
        fit = budget(cfg, self.files)
        for line in fit.lowered:
            log.warning("%s", line)
        log.info("%s", fit.describe())
        return fit

    def ask_reload(self) -> None:
        """Reload the config and templates (SIGHUP). Asked while a reload runs, one more runs
        after it (the file may have changed after it was read); asked again before that one
        starts, nothing more."""
        if self._reload_asked.is_set():
            log.info("a reload is already waiting to run")
        elif self._reloading:
            log.info("a reload is running; another follows it")
        self._reload_asked.set()

    async def _engine(self, peers: asyncio.TaskGroup, shared: Shared, stop: asyncio.Event,
                      stop_claiming: asyncio.Event) -> None:
        """The generation's scanner and digester, a new generation at each reload, until
        `stop_claiming`."""
        self.gen.start(peers)
        while True:
            await first_of(stop_claiming, self._reload_asked)
            if stop_claiming.is_set():
                break
            self._reload_asked.clear()
            self._reloading = True
            try:
                await self._reload(peers, shared, stop)
            finally:
                self._reloading = False
                if not stop.is_set():
                    sd_notify("READY=1")
        await self.gen.stop()

    async def _reload(self, peers: asyncio.TaskGroup, shared: Shared,
                      stop: asyncio.Event) -> None:
        """Read and check the new config whole; then replace the generation, keeping what
        only a restart can change, or keep the running one and say why."""
        if self.config_path:
            log.info("reloading config from %s", Path(self.config_path).resolve())
        else:
            log.info("reloading templates (the config is built in: no file to read again)")
        sd_notify(f"RELOADING=1\nMONOTONIC_USEC={time.monotonic_ns() // 1000}")
        old = self.gen
        try:
            new = await asyncio.to_thread(reread, self.load, old.cfg, old.templates)
            gen = build(new.cfg, new.templates, shared, before=old)
        except Refused as e:
            log.error("reload refused: %s; keeping the running config", e)
            return
        except Exception as e:  # noqa: BLE001 - a reload must never end the daemon
            # The type only: an adapter's error text can hold a secret from its settings.
            log.error("reload refused: %s while making the new config's peers; keeping the "
                      "running config", type(e).__name__)
            return
        if stop.is_set():
            log.info("reload abandoned: notifyd is stopping")
            await close_adapters([gen], [old])
            return
        for key in new.waiting:
            log.warning("%s changed; takes effect at the next restart", key)
        self.ctx.use(gen.cfg, gen.ingest, gen.health)  # requests from here on
        fit = self._fit(gen.cfg)
        self.guard.resize(fit.connections, gen.cfg.server)
        self.ctx.hub.resize(fit.streams, gen.cfg.server.max_streams_per_user,
                            gen.cfg.quotas.stream_share)
        await old.stop()  # it claims no more; its sends go on
        self.gen, self.cfg, self.templates = gen, gen.cfg, gen.templates
        gen.start(peers, reloaded=True)
        self._retiring[old] = asyncio.create_task(self._retire(old), name="retire")
        log.info("reloaded: %s", new.summary())

    async def _retire(self, old: Generation) -> None:
        """After a reload: the old generation's sends finish on the adapters they started
        with; then the adapters no other generation sends on are closed, and a step one of
        those sends left open on a channel the new config does not have ends as at start."""
        try:
            while old.pool.tasks:
                await asyncio.wait(set(old.pool.tasks))
            await close_adapters([old], [self.gen, *(g for g in self._retiring if g is not old)])
            if set(old.cfg.channels) - set(self.gen.cfg.channels):
                await self.gen.scanner.end_unconfigured()
        except Exception as e:  # noqa: BLE001 - a task of its own: said here or never
            log.warning("after a reload: closing the old config's senders failed (%s)",
                        type(e).__name__)
        finally:
            self._retiring.pop(old, None)

    async def _serve_http(self, ctx: Context, database: str, sock: socket.socket,
                          guard: ConnectionGuard, stop: asyncio.Event,
                          stop_claiming: asyncio.Event) -> None:
        """Serve until `stop`; then refuse new requests, stop the scanner claiming, and let the
        requests already running finish."""
        cfg = self.cfg
        access = logging.getLogger("notifyd.access") if self.access_log else None
        runner = web.AppRunner(make_app(ctx, [guard.middleware]), access_log=access,
                               access_log_class=AccessLog, handle_signals=False,
                               shutdown_timeout=cfg.daemon.grace_sec,
                               logger=ServerLog(self.clock))
        await runner.setup()
        try:
            await GuardedSite(runner, sock, guard, self.clock).start()
            self.port = sock.getsockname()[1]
            self._started(database)
            # Start-up's objects (modules, config, templates) never become garbage: out of the
            # collector's sight, a full collection walks what requests make, not all of them
            # (measured: 25-36 ms gen-2 pauses in the loop down to ~2 ms; benchmarks/channels.py).
            gc.collect()
            gc.freeze()
            sd_notify("READY=1")
            await stop.wait()
            log.info("stopping: no new requests or claims; finishing in-flight sends")
            sd_notify("STOPPING=1")
        finally:
            self._stopping_at = time.monotonic()
            ctx.draining = True
            ctx.closing.set()  # open inbox streams end; their pages reconnect elsewhere
            ctx.hub.close_all()
            stop_claiming.set()  # what is accepted from here on waits, durable, for the next start
            await runner.cleanup()

    def _started(self, database: str) -> None:
        cfg = self.cfg
        config = str(Path(self.config_path).resolve()) if self.config_path else "built-in"
        loop = type(asyncio.get_running_loop()).__module__.split(".")[0]
        hooks = [name for name in evidence.PROVIDERS if cfg.webhook(name) is not None]
        log.info("notifyd %s listening on http://%s:%s; database %s; config %s; channels %s; "
                 "kinds %s; receipt webhooks %s; event loop %s", __version__, cfg.server.host,
                 self.port, database, config,
                 ", ".join(f"{n} ({c.type})" for n, c in sorted(cfg.channels.items())),
                 ", ".join(sorted(cfg.kinds)), ", ".join(hooks) or "none", loop)


def serve(cfg: Config, config_path: str | None = None, access_log: bool = False,
          load: Callable[[], Config] | None = None) -> None:
    """Run the daemon until SIGTERM or SIGINT (a second signal exits at once); SIGHUP reloads
    the config (`load`, default: the file read again) and the templates."""

    async def main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        daemon = Daemon(cfg, config_path=config_path, access_log=access_log, load=load)

        def on_signal(signum: int) -> None:
            if stop.is_set():
                log.warning("second signal: exiting at once")
                os._exit(128 + signum)
            log.info("received %s", signal.Signals(signum).name)
            stop.set()

        def on_hangup() -> None:
            if stop.is_set():
                log.info("received SIGHUP while stopping; ignored")
                return
            log.info("received SIGHUP")
            daemon.ask_reload()

        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, on_signal, sig)
        loop.add_signal_handler(signal.SIGHUP, on_hangup)
        await daemon.run(stop)

    # The writer thread drops the GIL on every SQLite step and must win it back from the event
    # loop; the default 5 ms switch interval leaves it waiting, and accepts with it. 1 ms
    # measured about 20% more accepts/s (benchmarks/accept.py).
    sys.setswitchinterval(0.001)
    with asyncio.Runner(loop_factory=loop_factory(cfg.daemon.event_loop)) as runner:
        runner.run(main())


def loop_factory(choice: str) -> Callable[[], asyncio.AbstractEventLoop] | None:
    """The event loop to run on: uvloop's (a drop-in on libuv, cheaper per callback and per
    socket event) when asked for or, with "auto", when installed; else the standard one."""
    if choice == "asyncio":
        return None
    try:
        import uvloop
    except ImportError:
        if choice == "uvloop":
            raise StartError("daemon.event_loop is uvloop, but uvloop is not installed "
                             "(pip install uvloop)") from None
        return None
    return uvloop.new_event_loop


async def first_of(*events: asyncio.Event) -> None:
    """Wait until any of `events` is set."""
    waiters = [asyncio.ensure_future(e.wait()) for e in events]
    try:
        await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for w in waiters:
            w.cancel()
