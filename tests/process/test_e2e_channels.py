"""End to end: `notifyd serve` in a subprocess, configured by a file and a templates folder only,
sends one kind's ladder push -> sms -> email to real peers speaking each provider's wire format.

The peers run in this process on one event loop of their own (a thread): the web push service of
tests/fake_push.py (checks VAPID, decrypts each body as the browser would), the Twilio Messages
API of tests/fake_twilio.py and an aiosmtpd server (tests/fake_smtp.py). Each stamps when a
message reached it, so the ladder's windows are measured where the person would feel them.

Every wait is a condition polled with a deadline (the daemon's status API, the peers' records);
nothing sleeps and hopes. The daemon runs the code of the repository this file lives in
(PYTHONPATH), which the fixture checks.
"""

from __future__ import annotations

import email
import email.policy
import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from email.message import EmailMessage
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import parse_qsl

import pytest
import tomli_w
from aiohttp import web
from aiosmtpd.smtp import SMTP, Envelope, Session
from engine_support import Daemon, clean_env, notifyd_cmd, reaped
from fake_push import FakePushService
from fake_smtp import FakeSmtp
from fake_twilio import ACCOUNT, TOKEN, FakeTwilio, twilio_app
from loop_support import LoopThread

from notifyd.channels.webpush import generate_vapid_keys

ROOT = Path(__file__).resolve().parents[2]  # the repository this file is in: its notifyd runs
WINDOW_SEC = 2.0  # each of the first two steps' timeout_sec
WAIT_SEC = 20.0  # the most any one condition may take before the test fails
PHONE, ADDRESS = "+14155550123", "ada@example.org"
FROM_NUMBER = "+15005550006"
TEMPLATES = {
    "push.title.j2": "{{ host }} is down",
    "push.body.j2": "Alert on {{ host }}: {{ what }}",
    "sms.text.j2": "ALERT {{ host }}: {{ what }}. Reply to nobody.",
    "email.subject.j2": "[alert] {{ host }} is down",
    "email.text.j2": "Hello,\n\n{{ host }} reports: {{ what }}.\n",
}

T = TypeVar("T")


# --- the peers, on an event loop of their own ------------------------------------------------------


class TimedPush(FakePushService):
    """The fake push service, stamping when each push reached it (path, monotonic time)."""

    def __init__(self, application_server_key: str) -> None:
        super().__init__(application_server_key)
        self.arrivals: list[tuple[str, float]] = []

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        self.arrivals.append((request.match_info["path"], time.monotonic()))
        return await super()._handle(request)


@dataclass
class TimedTwilio(FakeTwilio):
    """The fake Twilio, stamping when each request reached it."""

    arrivals: list[tuple[dict[str, str], float]] = field(default_factory=list)  # (form, when)

    async def handle(self, request: web.Request) -> web.StreamResponse:
        at = time.monotonic()
        body = await request.read()  # kept by aiohttp: the fake reads the same bytes again
        self.arrivals.append((dict(parse_qsl(body.decode())), at))
        return await super().handle(request)

    def sms(self, marker: str) -> tuple[dict[str, str], float]:
        """The one message whose text holds `marker`, and when it arrived."""
        found = [(form, at) for form, at in self.arrivals if marker in form.get("Body", "")]
        assert len(found) == 1, f"{len(found)} SMS with {marker!r}"
        return found[0]


class TimedSmtp(FakeSmtp):
    """The SMTP server, stamping when each message's data reached it."""

    def __init__(self) -> None:
        super().__init__()
        self.arrivals: list[tuple[list[str], EmailMessage, float]] = []  # (rcpt, mail, when)

    async def handle_DATA(self, server: SMTP, session: Session, envelope: Envelope) -> str:
        assert envelope.original_content is not None
        self.arrivals.append((list(envelope.rcpt_tos), parse_mail(envelope.original_content),
                              time.monotonic()))
        return await super().handle_DATA(server, session, envelope)

    def mail(self, subject: str) -> tuple[list[str], EmailMessage, float]:
        """The one message with this subject, its recipients and when it arrived."""
        found = [a for a in self.arrivals if a[1]["Subject"] == subject]
        assert len(found) == 1, f"{len(found)} emails with subject {subject!r}"
        return found[0]


def parse_mail(data: bytes) -> EmailMessage:
    msg = email.message_from_bytes(data, policy=email.policy.default)
    assert isinstance(msg, EmailMessage)
    return msg


async def start_twilio(fake: TimedTwilio) -> web.AppRunner:
    runner = web.AppRunner(twilio_app(fake), access_log=None, shutdown_timeout=0.5,
                           handle_signals=False)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    fake.port = runner.addresses[0][1]
    return runner


# --- the daemon --------------------------------------------------------------------------------------


@dataclass
class Stack:
    daemon: Daemon
    key: str
    db: Path
    config: Path
    env: dict[str, str]
    loop: LoopThread
    push: TimedPush
    twilio: TimedTwilio
    smtp: TimedSmtp

    def api(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(
            f"{self.daemon.url}{path}", data=data, method=method,
            headers={"Authorization": f"Bearer {self.key}", "Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=30) as resp:
                return resp.status, json.loads(resp.read() or b"null")
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read() or b"null")

    def ok(self, method: str, path: str, body: Any = None, status: int = 200) -> Any:
        got, answer = self.api(method, path, body)
        assert got == status, f"{method} {path}: {got} {answer}\n{self.daemon.stderr()}"
        return answer

    def status(self, nid: str) -> dict[str, Any]:
        doc: dict[str, Any] = self.ok("GET", f"/v1/notifications/{nid}")
        return doc

    def cli(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(notifyd_cmd(self.db, *args, config=self.config),
                              capture_output=True, text=True, env=self.env, cwd=self.db.parent,
                              timeout=60, check=False)

    def subscribe(self, user: str, name: str, answer: int | None = None) -> str:
        """A browser subscribes on the fake push service and registers with notifyd; the
        daemon's device id for it. `answer`: what the push service answers its pushes."""
        device = self.loop.call(_subscribe(self.push, name))
        if answer is not None:
            self.push.answer(f"wp/{name}", answer)
        made = self.ok("POST", f"/v1/users/{user}/devices", {
            "endpoint": device.endpoint, "keys": {"p256dh": device.p256dh,
                                                  "auth": device.auth}}, status=201)
        assert made["state"] == "live"
        device_id: str = made["device_id"]
        return device_id


async def _subscribe(push: FakePushService, name: str) -> Any:
    return push.subscribe(name, f"wp/{name}")


def wait_for(what: str, check: Callable[[], T | None], timeout: float = WAIT_SEC) -> T:
    """Poll `check` until it returns something other than None or False, within `timeout`."""
    deadline = time.monotonic() + timeout
    while True:
        got = check()
        if got is not None and got is not False:
            return got
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout} s: {what}")
        time.sleep(0.02)


def step_in(stack: Stack, nid: str, no: int, states: tuple[str, ...]) -> dict[str, Any] | None:
    doc = stack.status(nid)
    step: dict[str, Any] = doc["steps"][no]
    return doc if step["status"] in states else None


def write_config(folder: Path, push: TimedPush, twilio: TimedTwilio, smtp: TimedSmtp,
                 vapid_private: str) -> Path:
    for name, text in TEMPLATES.items():
        path = folder / "templates" / "alert" / "en" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    config = folder / "notifyd.toml"
    config.write_text(tomli_w.dumps({
        "store": {"path": "notifyd.db", "synchronous": "NORMAL"},
        "templates": {"folder": "templates"},
        "channels": {
            "push": {"type": "webpush", "vapid_private_key": vapid_private,
                     "vapid_subject": "mailto:ops@acme.example",
                     "allowed_hosts": ["127.0.0.1"], "http_hosts": ["127.0.0.1"]},
            "sms": {"type": "twilio", "account_sid": ACCOUNT, "auth_token": TOKEN,
                    "from_number": FROM_NUMBER, "base_url": f"http://127.0.0.1:{twilio.port}"},
            "email": {"type": "smtp", "host": "127.0.0.1", "port": smtp.port, "tls": "none",
                      "from_address": "Acme Alerts <alerts@acme.example>",
                      "helo_name": "notifyd.test"},
        },
        "kinds": {"alert": {"ladder": [{"channel": "push", "timeout_sec": WINDOW_SEC},
                                       {"channel": "sms", "timeout_sec": WINDOW_SEC},
                                       {"channel": "email"}]}},
    }))
    return config


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    folder = tmp_path_factory.mktemp("e2e")
    vapid_private, vapid_public = generate_vapid_keys()
    loop = LoopThread()
    push, twilio, smtp = TimedPush(vapid_public), TimedTwilio(), TimedSmtp()
    runner = None
    try:
        loop.call(push.start())
        runner = loop.call(start_twilio(twilio))
        loop.call(smtp.start())
        config = write_config(folder, push, twilio, smtp, vapid_private)
        db = folder / "notifyd.db"
        env = clean_env(PYTHONPATH=os.pathsep.join(
            [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]))
        where = subprocess.run([sys.executable, "-c", "import notifyd; print(notifyd.__file__)"],
                               capture_output=True, text=True, env=env, cwd=folder, timeout=60,
                               check=True)
        assert Path(where.stdout.strip()).is_relative_to(ROOT), where.stdout  # this tree's code
        made = subprocess.run(notifyd_cmd(db, "keys", "create", "--name", "e2e", config=config),
                              capture_output=True, text=True, env=env, cwd=folder, timeout=60,
                              check=False)
        assert made.returncode == 0, made.stderr
        with reaped([]) as daemons:
            daemons.append(daemon := Daemon(db, config, env=env))
            yield Stack(daemon, made.stdout.strip(), db, config, env, loop, push, twilio, smtp)
            assert daemon.stop() == 0, daemon.stderr()
    finally:
        loop.call(push.close())
        if runner is not None:
            loop.call(runner.cleanup())
        loop.call(smtp.stop())
        loop.close()


# --- the ladder, escalating ----------------------------------------------------------------------


def test_an_unresolved_alert_climbs_push_then_sms_then_email(stack: Stack) -> None:
    stack.ok("PUT", "/v1/users/u1", {"phone": PHONE, "email": ADDRESS})
    gone = stack.subscribe("u1", "gone", answer=410)
    live = stack.subscribe("u1", "live")
    posted_at = time.monotonic()
    nid = stack.ok("POST", "/v1/notifications", {
        "user_id": "u1", "kind": "alert", "dedup_key": "e2e-escalate",
        "params": {"host": "web-1", "what": "disk full"}}, status=202)["notification_id"]

    # Step 0: web push to both browsers; one subscription is gone (410), the other takes it.
    doc = wait_for("step 0 push sent", lambda: step_in(stack, nid, 0, ("sent",)))
    mine = [p for p in stack.push.pushes if p.payload and p.payload["notification_id"] == nid]
    assert sorted((p.path, p.status) for p in mine) == [("wp/gone", 410), ("wp/live", 201)]
    assert stack.push.problems == []  # VAPID, headers and encryption as a push service wants
    for p, device in zip(sorted(mine, key=lambda p: p.path), (gone, live), strict=True):
        assert p.payload["title"] == "web-1 is down"
        assert p.payload["body"] == "Alert on web-1: disk full"
        assert p.payload["key"] == f"{nid}:0:{device}"
    assert doc["steps"][0]["provider_ref"].startswith(stack.push.origin + "/m/")
    pushed_at = min(at for path, at in stack.push.arrivals if path in ("wp/gone", "wp/live"))

    # The 410 subscription is dead now; the other is not.
    devices = {d["device_id"]: d for d in stack.ok("GET", "/v1/users/u1/devices")["devices"]}
    assert devices[gone]["state"] == "dead" and devices[gone]["reason"]
    assert devices[live]["state"] == "live"

    # Step 1: the SMS, once step 0's window has ended unresolved.
    wait_for("step 1 sms sent", lambda: step_in(stack, nid, 1, ("sent",)))
    form, sms_at = stack.twilio.sms("web-1")
    short = []  # each window cut short, asserted last so that everything else is checked too
    if sms_at - pushed_at < WINDOW_SEC:
        short.append(f"the SMS went {sms_at - pushed_at:.3f} s after the push reached the push "
                     f"service ({sms_at - posted_at:.3f} s after the accept, the push "
                     f"{pushed_at - posted_at:.3f} s): step 0's {WINDOW_SEC:g} s window was cut "
                     "short")
    assert form["Body"] == "ALERT web-1: disk full. Reply to nobody."
    assert (form["To"], form["From"]) == (PHONE, FROM_NUMBER)
    assert "StatusCallback" not in form  # no server.public_url: nowhere to call back

    # Step 2: the email, once step 1's window has ended unresolved too.
    doc = wait_for("step 2 email sent", lambda: step_in(stack, nid, 2, ("sent",)))
    rcpt_tos, mail, mail_at = stack.smtp.mail("[alert] web-1 is down")
    if mail_at - sms_at < WINDOW_SEC:
        short.append(f"the email went {mail_at - sms_at:.3f} s after the SMS reached Twilio "
                     f"({mail_at - posted_at:.3f} s after the accept): step 1's {WINDOW_SEC:g} s "
                     "window was cut short")
    assert rcpt_tos == [ADDRESS] and mail["To"] == ADDRESS
    assert mail["Message-ID"] == f"<{nid}.2@acme.example>"  # the step key, stable per retry
    assert mail["X-Notifyd-Key"] == f"{nid}:2"
    assert mail.get_content().splitlines() == ["Hello,", "", "web-1 reports: disk full."]
    assert doc["current_state"] == "sent" and doc["delivered_via"] is None  # nothing proved it
    assert doc["sent_via"] == ["push", "sms", "email"]
    assert [s["status"] for s in doc["steps"]] == ["sent", "sent", "sent"]

    # inspect, beside the running daemon, explains every step from the rows alone.
    shown = stack.cli("inspect", nid)
    assert shown.returncode == 0, shown.stderr
    out = shown.stdout
    lines = out.splitlines()

    def line(*parts: str) -> str:
        found = [x for x in lines if all(p in x for p in parts)]
        assert len(found) == 1, f"one line with {parts} in:\n{out}"
        return found[0]

    assert lines[0].startswith(f"{nid}  ") and "kind=alert" in lines[0]
    line("step 0 push: attempt 1 started; message from template alert/en/push@")
    sent0 = line("step 0 push: attempt 1 sent: ")
    assert f"{gone}: rejected HTTP 410" in sent0 and f"{live}: sent" in sent0
    line("step 1 sms: attempt 1 started (step 0's 2 s window ended unresolved); "
         "message from template alert/en/sms@")
    assert " ref=SM" in line("step 1 sms: attempt 1 sent")
    line("step 2 email: attempt 1 started (step 1's 2 s window ended unresolved); "
         "message from template alert/en/email@")
    assert f" ref={nid}.2@acme.example" in line("step 2 email: attempt 1 sent")
    assert lines[-1] == "  state now: sent"

    # Each step after the first went only once the window before it had run its full length,
    # counted from when the earlier message reached its provider.
    assert not short, "\n".join(short)


# --- the ladder, resolved in time ----------------------------------------------------------------


def test_an_alert_resolved_within_the_window_never_reaches_sms_or_email(stack: Stack) -> None:
    stack.ok("PUT", "/v1/users/u2", {"phone": "+14155550199", "email": "bob@example.org"})
    stack.subscribe("u2", "bob")

    def post(dedup_key: str, host: str) -> tuple[str, float]:
        at = time.monotonic()
        nid: str = stack.ok("POST", "/v1/notifications", {
            "user_id": "u2", "kind": "alert", "dedup_key": dedup_key,
            "params": {"host": host, "what": "load high"}}, status=202)["notification_id"]
        return nid, at

    nid, posted_at = post("e2e-resolved", "db-1")
    # A witness of the same kind accepted after it: when the witness's email arrives, every
    # step of the resolved one has long been due (its ladder is dated from an earlier accept).
    witness, _ = post("e2e-witness", "db-2")

    wait_for("step 0 push sent", lambda: step_in(stack, nid, 0, ("sent",)))
    stack.ok("POST", f"/v1/notifications/{nid}/resolve", {"resolution": "acknowledged"})
    resolved_in = time.monotonic() - posted_at
    assert resolved_in < WINDOW_SEC, f"resolved only {resolved_in:.2f} s after the accept"
    doc = stack.status(nid)
    assert doc["current_state"] == "resolved"
    assert doc["resolution"]["resolution"] == "acknowledged"
    assert [s["status"] for s in doc["steps"]] == ["sent", "cancelled", "cancelled"]

    wait_for("the witness's email", lambda: step_in(stack, witness, 2, ("sent",)))
    doc = stack.status(nid)
    assert [s["status"] for s in doc["steps"]] == ["sent", "cancelled", "cancelled"]
    assert [len(s["attempt_log"]) for s in doc["steps"]] == [1, 0, 0]
    texts = [form["Body"] for form, _ in stack.twilio.arrivals]
    assert any("db-2" in t for t in texts) and not any("db-1" in t for t in texts)
    subjects = [mail["Subject"] for _, mail, _ in stack.smtp.arrivals]
    assert "[alert] db-2 is down" in subjects and "[alert] db-1 is down" not in subjects

    shown = stack.cli("inspect", nid)
    assert shown.returncode == 0, shown.stderr
    assert "resolved 'acknowledged'" in shown.stdout
    assert "step 1 sms: cancelled" in shown.stdout and "step 2 email: cancelled" in shown.stdout
    assert "step 1 sms: attempt" not in shown.stdout
    assert shown.stdout.splitlines()[-1] == "  state now: resolved"
