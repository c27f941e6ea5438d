"""Helpers for the delivery-engine tests: a real HTTP provider on 127.0.0.1 and the engine in-process.

`Provider` is an aiohttp server standing in for a webhook vendor: it records every request (the
Idempotency-Key header and the exact body bytes) and answers with whatever the test's `reply`
function says (an answer, a held answer released by an event, a dropped connection). `Engine` is
the real Scanner, SenderPool and store over a SQLite file in tmp_path, driven by a FakeClock with
`tick()` (one `scanner.run_once(now)`) and `settle()` (await every send task). Nothing is mocked.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import queue
import random
import re
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager, closing, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer
from role_support import narrowed
from store_support import BACKENDS

from notifyd.channels import TYPES
from notifyd.channels.base import (
    ChannelType,
    Failed,
    Message,
    Outcome,
    Rejected,
    Rendered,
    RenderError,
    RenderInput,
    standard_payload,
)
from notifyd.channels.webhook import WebhookChannel, WebhookSettings
from notifyd.config import (
    PROXY_VARIABLES,
    ChannelConfig,
    Config,
    KindConfig,
    LadderStep,
    ScannerConfig,
    ServerConfig,
    StoreConfig,
    load_config,
    validate,
)
from notifyd.core.clock import FakeClock
from notifyd.core.contacts import EMAIL
from notifyd.core.models import ApiKey, Claim, Lane, Want
from notifyd.domain import signed
from notifyd.domain.views import status_view
from notifyd.engine.digests import carriers
from notifyd.engine.ingest import Ingest
from notifyd.engine.render import load_templates
from notifyd.engine.scanner import Scanner, Wakeups
from notifyd.engine.sender import SenderPool, build_adapters
from notifyd.engine.templates import Templates
from notifyd.http.app import make_app
from notifyd.http.auth import KeyCache, hash_key, new_key
from notifyd.http.kit import Context
from notifyd.store import ClaimStore, Notification, SendStore, open_store
from notifyd.store.core.store import CoreStore
from notifyd.store.sqlite.settings import SqliteSettings

START_MS = 1_790_000_000_000
KEY = ApiKey("k", "default", (), "h")
FINAL_STATES = frozenset({"sent", "delivered", "rejected", "suppressed", "cancelled", "expired",
                          "dead"})
OPEN_STATES = ("pending", "sending", "unknown")


# --- the provider ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Seen:
    """One request as the provider read it."""

    key: str | None
    body: bytes
    path: str
    headers: dict[str, str]

    @property
    def json(self) -> Any:
        return json.loads(self.body)


Reply = Callable[[Seen], Awaitable[web.StreamResponse | None]]


def answer(status: int = 202, body: Any = None, headers: dict[str, str] | None = None) -> Reply:
    """A reply that answers at once; `body` a dict is sent as JSON, a str as text."""

    async def reply(_: Seen) -> web.StreamResponse:
        if isinstance(body, dict):
            return web.json_response(body, status=status, headers=headers)
        return web.Response(status=status, text=body or "", headers=headers)

    return reply


def accepted() -> Reply:
    """A 202 whose body names a provider id derived from the key, so refs are checkable."""

    async def reply(seen: Seen) -> web.StreamResponse:
        return web.json_response({"id": f"prov-{seen.key}"}, status=202)

    return reply


DROP = object()  # a reply returning this closes the connection without an answer


def drop() -> Reply:
    async def reply(_: Seen) -> Any:
        return DROP

    return reply


def hold(gate: asyncio.Event, then: Reply) -> Reply:
    """Answer with `then` only once `gate` is set: a send the test keeps in flight."""

    async def reply(seen: Seen) -> web.StreamResponse | None:
        await gate.wait()
        return await then(seen)

    return reply


class Provider:
    """A webhook vendor on 127.0.0.1:<free port>, recording every request it reads."""

    def __init__(self, reply: Reply | None = None) -> None:
        self.reply: Reply = reply or accepted()
        self.seen: list[Seen] = []
        self.in_progress = 0
        self.arrived = asyncio.Event()  # set on every request; tests clear it to wait for the next
        self.gates: list[asyncio.Event] = []  # set at stop, so no handler outlives the test
        self._runner: web.AppRunner | None = None
        self.port = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hook"

    def gate(self) -> asyncio.Event:
        g = asyncio.Event()
        self.gates.append(g)
        return g

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        body = await request.read()
        seen = Seen(request.headers.get("Idempotency-Key"), body, request.path,
                    dict(request.headers))
        self.seen.append(seen)
        self.arrived.set()
        self.in_progress += 1
        try:
            out = await self.reply(seen)
        finally:
            self.in_progress -= 1
        if out is DROP or out is None:
            assert request.transport is not None
            request.transport.abort()  # the request was read; the answer never comes
            raise asyncio.CancelledError
        assert isinstance(out, web.StreamResponse)
        return out

    async def start(self) -> Provider:
        app = web.Application()
        app.router.add_route("POST", "/{tail:.*}", self._handle)
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=1.0,
                                     handle_signals=False)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.port = self._runner.addresses[0][1]
        return self

    async def stop(self) -> None:
        for g in self.gates:
            g.set()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    # --- what it saw ---

    def keys_seen(self) -> list[str | None]:
        return [s.key for s in self.seen]

    def bodies_by_key(self) -> dict[str | None, list[bytes]]:
        out: dict[str | None, list[bytes]] = {}
        for s in self.seen:
            out.setdefault(s.key, []).append(s.body)
        return out

    def repeated_keys(self) -> int:
        return sum(1 for n in Counter(self.keys_seen()).values() if n > 1)

    async def next_request(self, timeout: float = 10.0) -> None:
        """Wait (bounded) for the next request after the last `arrived.clear()`."""
        await asyncio.wait_for(self.arrived.wait(), timeout)


@asynccontextmanager
async def provider(reply: Reply | None = None) -> AsyncIterator[Provider]:
    p = await Provider(reply).start()
    try:
        yield p
    finally:
        await p.stop()


class ThreadedProvider:
    """A Provider on its own event loop in a thread, for tests whose daemon is a subprocess.

    `delay` (seconds, changeable at any time) is how long each answer takes; while `gate` is
    clear, answers wait for it. The answer is 202.
    """

    def __init__(self, delay: float = 0.0) -> None:
        self.delay = delay
        self.gate = threading.Event()
        self.gate.set()
        self.loop = asyncio.new_event_loop()
        self.provider = Provider(self._reply)
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)

    async def _reply(self, seen: Seen) -> web.StreamResponse:
        if self.delay:
            await asyncio.sleep(self.delay)
        if not self.gate.is_set():
            await asyncio.to_thread(self.gate.wait)
        return web.json_response({"id": f"prov-{seen.key}"}, status=202)

    def __enter__(self) -> ThreadedProvider:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self.provider.start(), self.loop).result(timeout=30)
        return self

    def __exit__(self, *exc: object) -> None:
        self.delay = 0.0
        self.gate.set()
        asyncio.run_coroutine_threadsafe(self.provider.stop(), self.loop).result(timeout=30)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout=30)
        self.loop.close()

    @property
    def url(self) -> str:
        return self.provider.url

    def snapshot(self) -> list[Seen]:
        return list(self.provider.seen)  # list() of a list appended to by one thread is safe

    def wait_for_requests(self, n: int, timeout: float = 30.0) -> None:
        """Poll, bounded, until the provider has read at least `n` requests."""
        deadline = time.monotonic() + timeout
        while len(self.provider.seen) < n:
            if time.monotonic() > deadline:
                raise AssertionError(f"the provider saw {len(self.provider.seen)} of {n} requests")
            time.sleep(0.02)


# --- a channel to a person's address ---------------------------------------------------------


@dataclass(frozen=True)
class MailerSettings:
    url: str = ""


class Mailer:
    """A test channel type to a person's email address, over HTTP to a Provider: it POSTs
    {to, payload} with the key, like the webhook, but its 4xx (other than 401, 403 and 429) is
    Rejected: the address is dead. It stands in for a real email provider in engine tests."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.hook = WebhookChannel("mailer", url, 10.0)

    def render(self, step: RenderInput) -> Rendered:
        if not step.address:
            raise RenderError("mailer", ValueError("no address"))
        return Rendered(step.address, standard_payload(step))

    async def send(self, message: Message) -> Outcome:
        body = {"to": message.destination, **message.payload}
        answer = await self.hook.send(Message(message.idempotency_key, self.url, body))
        if isinstance(answer, Failed) and re.match(r"HTTP 4(?!01|03|29)", answer.reason):
            return Rejected(answer.reason.split(":")[0])
        return answer

    async def close(self) -> None:
        await self.hook.close()


MAILER = ChannelType("mailer", "test: email over HTTP to a Provider", MailerSettings, EMAIL,
                     lambda name, settings, limits: Mailer(settings.url), medium=None)


@contextmanager
def registered(ctype: ChannelType) -> Iterator[None]:
    """A test channel type in the registry, as a real one is listed there, for a while."""
    TYPES[ctype.name] = ctype
    try:
        yield
    finally:
        del TYPES[ctype.name]


def mailer(url: str, **kw: Any) -> ChannelConfig:
    """A channel to the user's email address through a Provider, limits out of the way."""
    return dataclasses.replace(webhook(url, **kw), type="mailer", settings=MailerSettings(url))


# --- configs ---------------------------------------------------------------------------------


def webhook(url: str, **kw: Any) -> ChannelConfig:
    """A webhook channel with limits out of the way unless a test sets them."""
    base: dict[str, Any] = {"type": "webhook", "settings": WebhookSettings(url),
                            "timeout_sec": 10.0,
                            "rate_per_sec": 1_000_000.0, "burst": 1_000_000,
                            "urgent_concurrency": 64, "bulk_concurrency": 64,
                            "backoff_base_sec": 1.0, "backoff_max_sec": 60.0,
                            "breaker_min_calls": 1_000_000}
    base.update(kw)
    return ChannelConfig(**base)


def two_step(channel: str = "hook", window_sec: float = 60, second: str | None = None,
             **kw: Any) -> KindConfig:
    """Step 0 on `channel`, step 1 (on `second`, default the same) due `window_sec` later."""
    return KindConfig(ladder=(LadderStep(channel, timeout_sec=window_sec),
                              LadderStep(second or channel)), **kw)


# The store backend the engine runs on (tests/engine/conftest.py sets it for each test).
BACKEND = "sqlite"


def store_url(folder: Path, name: str = "n.db") -> str:
    """A database of that name on the engine's backend."""
    return BACKENDS[BACKEND](folder, name)


def engine_config(db: Path, channels: dict[str, ChannelConfig], kinds: dict[str, KindConfig],
                  scanner: ScannerConfig | None = None) -> Config:
    return validate(Config(server=ServerConfig(port=0),
                           store=StoreConfig(url=store_url(db.parent, db.name),
                                             sqlite=SqliteSettings(synchronous="NORMAL")),
                           scanner=scanner or ScannerConfig(claim_batch=1024),
                           channels=channels, kinds=kinds))


# --- the engine in-process -------------------------------------------------------------------


@dataclass
class Engine:
    cfg: Config
    store: CoreStore
    clock: FakeClock
    pool: SenderPool
    scanner: Scanner
    ingest: Ingest
    url: str  # the store's, for the CLI's --db
    seq: int = field(default=0)
    ids: list[str] = field(default_factory=list)  # what accept() made, in order

    @property
    def now(self) -> int:
        return self.clock.now_ms()

    async def accept(self, kind: str = "k", user: str | None = None,
                     params: dict[str, Any] | None = None, keyed: bool = False) -> str:
        """Accept one (with a dedup key of its own when `keyed`); its id, kept in `ids`."""
        self.seq += 1
        body = {"user_id": user or f"u{self.seq}", "kind": kind, "params": params or {"n": self.seq}}
        if keyed:
            body["dedup_key"] = f"d{self.seq}"
        result = await self.ingest.accept(self.ingest.parse(json.dumps(body).encode(), KEY, None))
        assert result.created
        self.ids.append(result.notification_id)
        return result.notification_id

    async def accept_many(self, n: int, kind: str = "k", chunk: int = 1000,
                          keyed: bool = False) -> list[str]:
        """Many accepts gathered, so group commit writes each chunk in one transaction."""
        ids: list[str] = []
        while len(ids) < n:
            batch = min(chunk, n - len(ids))
            ids += await asyncio.gather(*(self.accept(kind, keyed=keyed) for _ in range(batch)))
        return ids

    async def tick(self, now: int | None = None) -> int:
        """One due scan at `now` (default the clock): claims and dispatches; returns the count."""
        return await self.scanner.run_once(self.now if now is None else now)

    async def settle(self) -> None:
        """Await every send task, including any started while waiting."""
        while self.pool.tasks:
            await asyncio.gather(*list(self.pool.tasks))

    async def wait_tasks_left(self, n: int, timeout: float = 30.0) -> None:
        """Await send tasks as they finish until at most `n` remain (the ones a test holds)."""
        async with asyncio.timeout(timeout):
            while len(self.pool.tasks) > n:
                await asyncio.wait(set(self.pool.tasks), return_when=asyncio.FIRST_COMPLETED)

    async def cycle(self, now: int | None = None) -> int:
        claimed = await self.tick(now)
        await self.settle()
        return claimed

    async def run_dry(self, rounds: int = 100) -> None:
        """Scan and send until a scan at the current time claims nothing."""
        for _ in range(rounds):
            if not await self.cycle():
                return
        raise AssertionError(f"still claiming after {rounds} rounds")

    async def claim(self, channel: str = "hook", lane: str = "bulk", n: int = 1) -> list[Claim]:
        """Claim like the scanner does, rendering and freezing, without dispatching: a sender
        that never reports back."""
        claimed = await self.store.claim_due([Want(channel, Lane(lane), n)],
                                             self.scanner.lease_ms, self.scanner.rules)
        return await self.pool.prepare(claimed.claims, self.now)

    async def notification(self, nid: str) -> dict[str, Any]:
        """The notification record as plain dicts (steps, and each step's attempt_log)."""
        return plain(await self.record(nid))

    async def record(self, nid: str) -> Notification:
        n = await self.store.get_notification(nid)
        assert n is not None
        return n

    async def status(self, nid: str) -> dict[str, Any]:
        """The status document GET /v1/notifications/{id} answers, as plain dicts."""
        n = await self.record(nid)
        doc: dict[str, Any] = msgspec.to_builtins(
            status_view(n, self.now, await carriers(self.store, n)))
        return doc

    async def step(self, nid: str, no: int) -> dict[str, Any]:
        return dict((await self.notification(nid))["steps"][no])

    async def suppressed(self, tenant: str = "default") -> list[tuple[str, str, str, str, str]]:
        """The tenant's suppression list (with '*' entries and dead devices), newest first:
        (tenant, channel type, address, reason, source)."""
        return [(s.tenant, s.channel_type, s.address, s.reason, s.source)
                for s in await self.store.suppressions(tenant)]

    async def receipts_stored(self) -> int:
        """Receipts stored once each: matched to a step of what accept() made, or orphans."""
        matched = 0
        for nid in self.ids:
            matched += len((await self.record(nid)).proofs)
        return matched + await self.store.orphan_count()

    async def state_counts(self) -> dict[str, int]:
        """Steps by state, over every notification accept() made, read through the store."""
        counts: Counter[str] = Counter()
        for nid in self.ids:
            counts.update(s.state.value for s in (await self.record(nid)).steps)
        return dict(counts)


@asynccontextmanager
async def engine(tmp_path: Path, channels: dict[str, ChannelConfig],
                 kinds: dict[str, KindConfig], *, seed: int = 1,
                 scanner: ScannerConfig | None = None, name: str = "n.db",
                 clock: FakeClock | None = None) -> AsyncIterator[Engine]:
    with registered(MAILER):  # engine tests may use it, as a configured type
        cfg = engine_config(tmp_path / name, channels, kinds, scanner)
        async with engine_for(cfg, seed=seed, clock=clock) as eng:
            yield eng


class OverHttp:
    """A test that drives the engine over the HTTP API with a key, on the fake clock: its
    calls, a notification's status document and step states, and time moved on by hand (each
    move followed by scans run to completion). A stack dataclass gives `e`, `client`, `key`."""

    e: Engine
    client: TestClient[Any, Any]
    key: str

    @property
    def auth(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.key}"}

    async def call(self, method: str, path: str, body: Any = None, status: int = 200) -> Any:
        r = await self.client.request(method, path, json=body, headers=self.auth)
        assert r.status == status, f"{method} {path}: {r.status} {await r.text()}"
        return await r.json() if r.content_type == "application/json" else None

    async def status(self, nid: str) -> dict[str, Any]:
        return await self.e.status(nid)

    async def states(self, nid: str) -> list[str]:
        return [s["status"] for s in (await self.status(nid))["steps"]]

    async def advance(self, seconds: float) -> int:
        self.e.clock.advance(seconds)
        return await self.e.cycle()


@asynccontextmanager
async def engine_for(cfg: Config, *, seed: int = 1, clock: FakeClock | None = None,
                     templates: Templates | None = None) -> AsyncIterator[Engine]:
    """The engine over a whole config (one loaded from a file: webhooks, templates), wired as
    the daemon wires it: receipts' rules, the link key and the scanner's wake-ups included."""
    clock = clock or FakeClock(START_MS)
    store = await open_store(cfg.store.url, clock, sqlite=cfg.store.sqlite)
    assert isinstance(store, CoreStore)
    wakeups = Wakeups()
    # The sender pool and the scanner get the roles they hold, and nothing else of the store:
    # every engine test shows, on every backend, that those are all they need.
    pool = SenderPool(cfg, narrowed(store, SendStore), clock, build_adapters(cfg),
                      rng=random.Random(seed), templates=templates,
                      link_key=await store.signing_key(signed.LINKS_KEY), on_free=wakeups.freed,
                      signing_key=store.signing_key)
    scan = Scanner(cfg, narrowed(store, ClaimStore), pool, clock, wakeups)
    eng = Engine(cfg, store, clock, pool, scan, Ingest(cfg, store, clock, templates=templates),
                 cfg.store.url)
    try:
        yield eng
    finally:
        try:
            await asyncio.wait_for(eng.settle(), 30)
        finally:
            await pool.close()
            await store.close()


@asynccontextmanager
async def served(config: Path, scopes: frozenset[str]) -> AsyncIterator[
        tuple[Engine, Context, TestClient[Any, Any], str]]:
    """The engine of the config file (its templates checked) on a fake clock that starts at the
    wall clock, since providers sign with the time and are judged by it (and judge ours); the
    app over it in a test client, and a key of tenant default with `scopes`."""
    cfg = load_config(config)
    templates, problems = load_templates(cfg)
    assert problems == []
    async with engine_for(cfg, templates=templates,
                          clock=FakeClock(int(time.time() * 1000))) as e:
        ctx = Context(cfg, e.ingest, KeyCache(e.store, e.clock), e.clock,
                      link_key=e.pool.renderer.link_key)
        fetcher = ctx.fetch  # a test may answer the certificate fetch itself
        async with TestClient(TestServer(make_app(ctx))) as client:
            key = new_key()
            await e.store.create_key(hash_key(key), "t", "default", (), scopes)
            yield e, ctx, client, key
        await fetcher.close()


def plain(obj: Any) -> Any:
    """A record as dicts and lists, the shape the tests read rows in."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: plain(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, tuple | list):
        return [plain(x) for x in obj]
    return obj


def query(db: str | Path, sql: str, *args: Any) -> list[tuple[Any, ...]]:
    with closing(sqlite3.connect(db, timeout=30)) as conn:
        return conn.execute(sql, args).fetchall()


def execute(db: str | Path, sql: str, *args: Any) -> int:
    """One write committed on a connection of our own, as another writer would; rows changed."""
    with closing(sqlite3.connect(db, timeout=30)) as conn, conn:
        return conn.execute(sql, args).rowcount


def body_of(payload: dict[str, Any] | str) -> bytes:
    """The exact bytes the webhook adapter sends for a frozen payload."""
    if isinstance(payload, str):
        payload = json.loads(payload)
    return json.dumps(payload, sort_keys=True).encode()


# --- the daemon in a subprocess --------------------------------------------------------------

LISTENING = re.compile(r"listening on http://([\d.]+):(\d+)")


ENV_PREFIXES = ("NOTIFYD_", "NOTIFY_SOCKET")


def clean_env(**extra: str) -> dict[str, str]:
    """The environment for a notifyd process: the shell's, without notifyd's variables or
    proxies (the config would take them)."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(ENV_PREFIXES) and k.lower() not in PROXY_VARIABLES}
    env.update(extra)
    return env


def notifyd_cmd(db: Path, *args: str, config: Path | None = None) -> list[str]:
    head = [sys.executable, "-m", "notifyd"]
    if config is not None:
        head += ["--config", str(config)]
    return [*head, "--db", str(db), *args]


def inbox_config(folder: Path, title: str, extra: str = "") -> Path:
    """`folder`/n.toml with a kind `note` whose inbox item's title is `title` (a template) and
    which sends once on the log channel, plus `extra`; the templates folder beside it."""
    path = folder / "templates" / "note" / "en" / "inbox.title.j2"
    path.parent.mkdir(parents=True)
    path.write_text(title)
    config = folder / "n.toml"
    config.write_text('[templates]\nfolder = "templates"\n\n[kinds.note]\ninbox = true\n'
                      'ladder = [{ channel = "log" }]\n' + extra)
    return config


def create_key(db: Path, config: Path | None = None) -> str:
    done = subprocess.run(notifyd_cmd(db, "keys", "create", "--name", "t", config=config),
                          capture_output=True, text=True, env=clean_env(), cwd=db.parent,
                          timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


class Daemon:
    """`notifyd serve --port 0`, its stderr read line by line on a thread. Every one started is
    in STARTED, so conftest kills what a failed test left running."""

    STARTED: list[Daemon] = []

    def __init__(self, db: Path, config: Path | None = None, env: dict[str, str] | None = None,
                 start_timeout: float = 30.0, preexec: Callable[[], None] | None = None,
                 port: int | None = 0, argv: list[str] | None = None,
                 serve_args: tuple[str, ...] = ()) -> None:
        """`port` None: no --port, so the config's server.port is the one served; `serve_args`
        go after `serve` (--log-level debug, say). `argv`: this command line instead (run in
        `db`'s folder), as a container image gives it."""
        args = ("serve", *serve_args) if port is None else (
            "serve", "--port", str(port), *serve_args)
        self.proc = subprocess.Popen(argv or notifyd_cmd(db, *args, config=config),
                                     env=env or clean_env(), cwd=db.parent,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                                     preexec_fn=preexec)
        Daemon.STARTED.append(self)
        self.lines: list[str] = []
        self._queue: queue.Queue[str | None] = queue.Queue()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        self.url = f"http://127.0.0.1:{self._wait_for_port(start_timeout)}"

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.lines.append(line)
            self._queue.put(line)
        self._queue.put(None)

    def _wait_for_port(self, timeout: float) -> int:
        deadline = time.monotonic() + timeout
        while (left := deadline - time.monotonic()) > 0:
            try:
                line = self._queue.get(timeout=left)
            except queue.Empty:
                break
            if line is None:
                break
            if m := LISTENING.search(line):
                return int(m.group(2))
        self.proc.kill()
        raise AssertionError("daemon did not report its port:\n" + self.stderr())

    def signal(self, sig: signal.Signals) -> None:
        self.proc.send_signal(sig)

    def stop(self, sig: int = 15) -> int:  # SIGTERM; the method `signal` hides the module here
        self.signal(signal.Signals(sig))
        return self.wait()

    def wait(self, timeout: float = 30.0) -> int:
        rc = self.proc.wait(timeout=timeout)
        self._reader.join(timeout=10)
        return rc

    def stderr(self) -> str:
        return "".join(self.lines)

    def wait_for_line(self, text: str, count: int = 1, timeout: float = 30.0) -> list[str]:
        """Poll, bounded, until `count` lines hold `text`; those lines."""
        deadline = time.monotonic() + timeout
        while len(found := [ln for ln in list(self.lines) if text in ln]) < count:
            if time.monotonic() > deadline or self.proc.poll() is not None:
                raise AssertionError(f"{count} lines with {text!r} expected:\n" + self.stderr())
            time.sleep(0.02)
        return found


@contextmanager
def notify_socket() -> Iterator[tuple[socket.socket, str]]:
    """A datagram socket standing in for systemd's; under /tmp, as a unix path is short."""
    with tempfile.TemporaryDirectory(prefix="nd-", dir="/tmp") as d:
        path = f"{d}/notify"
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
            sock.bind(path)
            yield sock, path


def receive(sock: socket.socket, wanted: str, timeout: float = 30.0) -> list[str]:
    """Every message up to and including `wanted`; fails at the deadline."""
    got: list[str] = []
    deadline = time.monotonic() + timeout
    while wanted not in got:
        sock.settimeout(max(0.01, deadline - time.monotonic()))
        try:
            got.append(sock.recv(4096).decode())
        except TimeoutError:
            raise AssertionError(f"no {wanted} within {timeout}s; got {got}") from None
    return got


@contextmanager
def reaped(daemons: list[Daemon]) -> Iterator[list[Daemon]]:
    """Kill at exit any daemon a test left running."""
    try:
        yield daemons
    finally:
        for d in daemons:
            if d.proc.poll() is None:
                d.proc.kill()
                d.proc.wait(timeout=30)
