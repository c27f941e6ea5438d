"""The recovery experiment, played through notifyd's own parts: its store, ingest, claim
policy, preferences, resend adapter, webhook path and inbox, over private SQLite files.

A report finishes. Ada gets an email and an inbox item; Bo starts with email disabled; Cy opts
out after routing. A fake email provider with its own SQLite file and its own idempotency
records accepts Ada's email and loses the reply, so notifyd records the send as unknown. Both
are closed and reopened, as after a restart; the retry goes under the same key and the provider
answers with its first record; its signed delivery callback comes in through the real webhook
path. Every line printed is read back from notifyd's rows or the provider's, so a broken part
changes the output. notifyd's side is read through its store interface, as any backend's would
be; the fake provider's own file is read with SQL, being the provider's.

With timeout_before_accept the provider times out before it accepts; Ada then turns email off,
and the retry still goes under the decision that let the first call go (the intent was in
flight), while Cy's intent, never tried, is suppressed.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import json
import logging
import secrets
import sqlite3
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import aiohttp
import tomli_w
from aiohttp import web

from notifyd.channels.base import Message
from notifyd.config import Config, load_config
from notifyd.core.clock import FakeClock
from notifyd.core.records import Notification, Step
from notifyd.engine.ingest import Ingest, IngestStore
from notifyd.engine.render import load_templates
from notifyd.engine.scanner import Scanner, Wakeups
from notifyd.engine.sender import SenderPool, build_adapters
from notifyd.http.app import make_app
from notifyd.http.auth import KeyCache, hash_key, new_key
from notifyd.http.kit import Context
from notifyd.store import InboxStore, LookupStore, OperationsStore, ProfileStore, open_store

TIMEOUT_SEC = 0.5  # the email channel's call timeout: the provider's lost reply outlasts it
WHSEC = "whsec_" + base64.b64encode(b"recovery-experiment-secret-0001").decode()
USERS = {"ada": "ada@example.org", "bo": "bo@example.org", "cy": "cy@example.org"}
CONFIG: dict[str, Any] = {
    "store": {"url": "notifyd.db", "sqlite": {"synchronous": "FULL", "check_at_start": False}},
    "templates": {"folder": "templates"},
    "channels": {"email": {"type": "resend", "api_key": "re_experiment", "timeout_sec": TIMEOUT_SEC,
                           "from_address": "Reports <reports@example.org>",
                           "backoff_base_sec": 1.0, "max_attempts": 5}},
    # One report event: Ada follows it in the app and by email; Bo and Cy by email only.
    "kinds": {"report": {"category": "reports", "inbox": True, "ladder": [{"channel": "email"}]},
              "report_email": {"category": "reports", "ladder": [{"channel": "email"}]}},
    "webhooks": {"resend": {"secret": WHSEC}},
}
TEMPLATES = {"email.subject.j2": "Report {{ report }} is ready",
             "email.text.j2": "Your report {{ report }} is ready.\n",
             "inbox.title.j2": "Report {{ report }} is ready"}


# --- the fake provider, with its own file and idempotency records -----------------------------


class Provider:
    """Resend's POST /emails as far as the experiment needs: an Idempotency-Key's first request
    is kept with its body's hash; the same key and body later gets the first answer; the same key
    with another body is refused (409 invalid_idempotent_request). The first call accepts and
    then loses its reply, or (timeout_before_accept) times out before accepting."""

    def __init__(self, path: Path, timeout_before_accept: bool) -> None:
        self.path, self.timeout_before_accept = path, timeout_before_accept
        self.db: sqlite3.Connection | None = None
        self._runner: web.AppRunner | None = None
        self.url = ""

    def open(self) -> None:
        self.db = sqlite3.connect(self.path, isolation_level=None)
        self.db.executescript("""
            CREATE TABLE IF NOT EXISTS calls (n INTEGER PRIMARY KEY, idempotency_key TEXT);
            CREATE TABLE IF NOT EXISTS messages (id TEXT PRIMARY KEY,
                idempotency_key TEXT UNIQUE, body_sha256 TEXT, state TEXT);
            CREATE TABLE IF NOT EXISTS refusals (idempotency_key TEXT, reason TEXT);""")

    def close(self) -> None:
        if self.db is not None:
            self.db.close()
            self.db = None

    def one(self, sql: str, *args: Any) -> Any:
        assert self.db is not None
        return self.db.execute(sql, args).fetchone()[0]

    async def start(self) -> None:
        app = web.Application()
        app.router.add_post("/emails", self._emails)
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.1)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.url = f"http://127.0.0.1:{self._runner.addresses[0][1]}"

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    async def _emails(self, request: web.Request) -> web.Response:
        assert self.db is not None
        body = await request.read()
        key = request.headers.get("Idempotency-Key", "")
        digest = hashlib.sha256(body).hexdigest()
        first = self.one("SELECT count(*) FROM calls") == 0
        self.db.execute("INSERT INTO calls (idempotency_key) VALUES (?)", (key,))
        row = self.db.execute("SELECT id, body_sha256 FROM messages WHERE idempotency_key = ?",
                              (key,)).fetchone()
        if row is not None:
            if row[1] != digest:
                self.db.execute("INSERT INTO refusals VALUES (?, ?)",
                                (key, "changed provider payload"))
                return web.json_response({"name": "invalid_idempotent_request", "statusCode": 409,
                                          "message": "changed payload"}, status=409)
            return web.json_response({"id": row[0]})  # the first answer, again
        if first and self.timeout_before_accept:
            await asyncio.sleep(TIMEOUT_SEC * 3)  # the caller has given up: nothing is kept
            return web.json_response({"name": "timeout"}, status=504)
        message_id = f"msg_{secrets.token_hex(8)}"
        self.db.execute("INSERT INTO messages VALUES (?, ?, ?, 'accepted')",
                        (message_id, key, digest))
        if first:
            await asyncio.sleep(TIMEOUT_SEC * 3)  # accepted, and the reply is lost
        return web.json_response({"id": message_id})

    def delivery_callback(self, message_id: str, event_id: str) -> tuple[bytes, dict[str, str]]:
        """Its email.delivered webhook, signed as Resend (Svix) signs."""
        assert self.db is not None
        self.db.execute("UPDATE messages SET state = 'delivered' WHERE id = ?", (message_id,))
        body = json.dumps({"type": "email.delivered", "created_at": "2026-01-01T00:00:00Z",
                           "data": {"email_id": message_id, "to": [USERS["ada"]]}}).encode()
        stamp = str(int(time.time()))
        key = base64.b64decode(WHSEC.removeprefix("whsec_"))
        mac = hmac.new(key, f"{event_id}.{stamp}.".encode() + body, hashlib.sha256).digest()
        return body, {"svix-id": event_id, "svix-timestamp": stamp,
                      "svix-signature": "v1," + base64.b64encode(mac).decode(),
                      "Content-Type": "application/json"}


# --- notifyd, one process life over the files --------------------------------------------------


class ReadBack(LookupStore, InboxStore, ProfileStore, OperationsStore, Protocol):
    """What the experiment reads back of notifyd's side (and closes at the end)."""


@dataclass
class Notifyd:
    cfg: Config
    store: ReadBack
    pool: SenderPool
    scanner: Scanner
    ingest: Ingest[IngestStore]
    runner: web.AppRunner
    url: str
    key: str

    @classmethod
    async def open(cls, cfg: Config, clock: FakeClock, key: str | None) -> Notifyd:
        templates, problems = load_templates(cfg)
        assert not problems, problems
        store = await open_store(cfg.store.url, clock, sqlite=cfg.store.sqlite,
                                 postgres=cfg.store.postgres)
        wakeups = Wakeups()
        pool = SenderPool(cfg, store, clock, build_adapters(cfg), templates=templates,
                          on_free=wakeups.freed)
        scanner = Scanner(cfg, store, pool, clock, wakeups)
        ingest = Ingest(cfg, store, clock, templates=templates)
        if key is None:
            key = new_key()
            await store.create_key(hash_key(key), "producer", "default", (),
                                   frozenset({"post", "read", "resolve", "users"}))
        runner = web.AppRunner(make_app(Context(cfg, ingest, KeyCache(store, clock), clock)),
                               access_log=None, shutdown_timeout=0.5)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        return cls(cfg, store, pool, scanner, ingest, runner,
                   f"http://127.0.0.1:{runner.addresses[0][1]}", key)

    async def close(self) -> None:
        await self.runner.cleanup()
        while self.pool.tasks:
            await asyncio.gather(*list(self.pool.tasks))
        await self.pool.close()
        await self.store.close()

    async def cycle(self, now: int) -> None:
        await self.scanner.run_once(now)
        while self.pool.tasks:
            await asyncio.gather(*list(self.pool.tasks))

    async def report(self, user: str) -> Notification:
        """The user's report notification, as the store reads it."""
        nid = await self.store.find_by_dedup("default", user, "report-42")
        found = await self.store.get_notification(nid) if nid else None
        assert found is not None, user
        return found


async def call(n: Notifyd, method: str, path: str, body: Any) -> tuple[int, Any]:
    async with aiohttp.ClientSession() as http, http.request(
            method, n.url + path, json=body,
            headers={"Authorization": f"Bearer {n.key}"}) as r:
        return r.status, await r.json()


async def email_step(n: Notifyd, user: str) -> Step:
    return next(s for s in (await n.report(user)).steps if s.channel == "email")


async def email_state(n: Notifyd, user: str) -> str:
    return str((await email_step(n, user)).state)


async def final_state(n: Notifyd, user: str) -> str:
    """Delivered once a receipt proved it; else the step's state."""
    step = await email_step(n, user)
    return "delivered" if step.evidence in ("delivered", "shown", "opened") else str(step.state)


async def in_app(n: Notifyd, user: str) -> bool:
    """Whether the user's inbox shows the report (not archived)."""
    return bool(await n.store.inbox_page("default", user, None, 50))


# --- the run ------------------------------------------------------------------------------------


async def run(folder: Path, timeout_before_accept: bool = False) -> list[str]:
    """The experiment in `folder`; the lines it prints."""
    out: list[str] = []
    for kind in CONFIG["kinds"]:
        for name, text in TEMPLATES.items():
            if name.startswith("inbox.") and kind != "report":
                continue
            path = folder / "templates" / kind / "en" / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
    provider = Provider(folder / "provider.db", timeout_before_accept)
    provider.open()
    await provider.start()
    config = json.loads(json.dumps(CONFIG))
    config["channels"]["email"]["base_url"] = provider.url
    (folder / "notifyd.toml").write_text(tomli_w.dumps(config))
    cfg = load_config(folder / "notifyd.toml")
    clock = FakeClock(int(time.time() * 1000))
    n = await Notifyd.open(cfg, clock, None)
    try:
        for user, address in USERS.items():
            await call(n, "PUT", f"/v1/users/{user}", {"email": address})
            await call(n, "PUT", f"/v1/users/{user}/preferences", {"categories": {
                "reports": {"email": user != "bo"}}})  # Bo starts with email disabled
        event = {"user_id": "ada", "kind": "report", "dedup_key": "report-42",
                 "params": {"report": "Q3"}}
        out.append(f"route new event: {(await call(n, 'POST', '/v1/notifications', event))[1]['created']}")
        out.append(f"route duplicate: {(await call(n, 'POST', '/v1/notifications', event))[1]['created']}")
        for user in ("bo", "cy"):
            await call(n, "POST", "/v1/notifications", {
                "user_id": user, "kind": "report_email", "dedup_key": "report-42",
                "params": {"report": "Q3"}})
        steps = [len((await n.report(user)).steps) for user in USERS]
        out.append(f"retained intents: {sum(steps) + await in_app(n, 'ada')}")
        await call(n, "PUT", "/v1/users/cy/preferences", {"categories": {  # after routing
            "reports": {"email": False}}})
        await n.cycle(clock.now_ms())
        out.append(f"Bo email: {await email_state(n, 'bo')}")
        out.append(f"Cy email: {await email_state(n, 'cy')}")
        visible = await in_app(n, "ada")
        out.append(f"Ada in-app: {'visible' if visible else 'missing'}")
        out.append(f"Ada email: {await email_state(n, 'ada')}")
        out.append(f"fake state after timeout: accepted="
                   f"{provider.one('SELECT count(*) FROM messages')}, delivered="
                   f"{provider.one('SELECT count(*) FROM messages WHERE state = ?', 'delivered')}")
        if timeout_before_accept:  # Ada turns email off while her intent is in flight
            await call(n, "PUT", "/v1/users/ada/preferences", {"categories": {
                "reports": {"email": False}}})
        key = n.key
    finally:
        await n.close()
        provider.close()

    provider.open()  # both reopened, as after a restart
    n = await Notifyd.open(cfg, clock, key)
    try:
        for _ in range(10):  # the unknown send is retried under its key once its time comes
            clock.advance(10)
            await n.cycle(clock.now_ms())
            if await email_state(n, "ada") not in ("unknown", "pending", "sending"):
                break
        state = await email_state(n, "ada")
        out.append(f"Ada email after reopen: {'accepted' if state == 'sent' else state}")
        out.append(f"provider calls={provider.one('SELECT count(*) FROM calls')}, accepted "
                   f"records={provider.one('SELECT count(*) FROM messages')}")
        ada = await email_step(n, "ada")
        for label in ("delivery callback", "duplicate callback"):
            before = len((await n.report("ada")).proofs)
            body, headers = provider.delivery_callback(str(ada.provider_ref), "evt_delivered_1")
            async with aiohttp.ClientSession() as http, http.post(
                    n.url + "/v1/webhooks/resend", data=body, headers=headers) as r:
                assert r.status == 200, await r.text()
            out.append(f"{label}: {len((await n.report('ada')).proofs) > before}")
        sent = json.loads(ada.payload or "{}")  # the frozen message, changed
        adapter = n.pool.channels["email"].adapter
        await adapter.send(Message(f"{ada.notification_id}:{ada.step_no}", str(ada.destination),
                                   {**sent, "subject": sent["subject"] + " (edited)"}))
        refusal = provider.db.execute("SELECT reason FROM refusals").fetchone() \
            if provider.db else None
        out.append(f"changed retry: {refusal[0] if refusal else 'accepted'}")
        out.append("user | channel | final state | preference version")
        person = await n.store.get_recipient("default", "ada")
        out.append(f"Ada | email | {await final_state(n, 'ada')} | "
                   f"{(await email_step(n, 'ada')).pref_version}")
        out.append(f"Ada | in-app | {'visible' if visible else 'missing'} | "
                   f"{person.pref_version if person else 0}")
        for user in ("bo", "cy"):
            out.append(f"{user.capitalize()} | email | {await final_state(n, user)} | "
                       f"{(await email_step(n, user)).pref_version}")
    finally:
        await n.close()
        provider.close()
        await provider.stop()
    return out


def main(timeout_before_accept: bool = False) -> list[str]:
    """Run it in a temporary folder, quietly: the lines are the output (the engine's own log
    lines, such as the unknown send's warning, would interleave with them)."""
    quiet = logging.getLogger("notifyd")
    level = quiet.level
    quiet.setLevel(logging.CRITICAL + 1)
    try:
        with tempfile.TemporaryDirectory(prefix="notifyd-recovery-") as folder:
            return asyncio.run(run(Path(folder), timeout_before_accept))
    finally:
        quiet.setLevel(level)
