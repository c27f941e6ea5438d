"""One contract test runs against every adapter in the registry (notifyd.channels.TYPES).

channels/base.py promises, for every channel type: render builds a JSON payload and a destination,
the same for the same input (what it randomizes on purpose it freezes, so the same frozen payload
is the same bytes on the wire); send answers with Sent, Rejected, Failed or Unknown and never
raises: nothing listening is Failed (nothing left us), a server that takes the request and never
answers is Unknown within the channel's timeout (it may have the message), a server's own error
is Failed (never Rejected: it is not the contact's fault); no reason carries the destination, a
secret setting or the message text; close() may be called twice.

The peers are generic, not provider fakes: a port nothing listens on, an HTTP server that reads
the request and never answers, an HTTP server that answers 500 with a body echoing the whole
request (as some providers echo parts of it in their error text). For smtp the peers are TCP
servers: a closed port, a server that accepts and never speaks, an SMTP server that never answers
DATA or answers it with an error. The fcm adapter first buys an access token: that one endpoint is
tests/fake_fcm.py's Google, the FCM API itself is the generic peer. apns speaks TLS only: its peers
are the same servers over TLS, their certificate trusted through SSL_CERT_FILE (no h2 offered,
the client speaks HTTP/1.1 to them: these checks are about what happened to the request, which
HTTP/2 does not change; tests/fake_apns.py speaks HTTP/2). Device types (webpush, fcm, apns)
answer with a Fanout: every device's answer is checked.

Every registered type is a parameter; a type added without an entry in SPECS fails here, it is
never skipped.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import socket
import ssl
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from channel_support import pem
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from fake_fcm import FakeGoogle
from fake_proxy import FakeProxy
from fake_smtp import FakeSmtp, self_signed, server_context

from notifyd.channels import TYPES, build_channel
from notifyd.channels.base import (
    Answer,
    Channel,
    Failed,
    Fanout,
    Limits,
    Message,
    Outcome,
    Rejected,
    RenderInput,
    Sent,
    Unknown,
)
from notifyd.channels.egress import Egress
from notifyd.channels.webpush import generate_vapid_keys
from notifyd.core.contacts import Devices
from notifyd.core.models import Device
from notifyd.engine.templates import MEDIA

ALL_TYPES = sorted(TYPES)
NOT_HTTP = {"log", "smtp"}  # every other type posts through channels/wire.py
HTTP_TYPES = [t for t in ALL_TYPES if t not in NOT_HTTP]
PROVIDER = "provider.test"  # a name only the egress proxy resolves
TIMEOUT = 0.25  # Limits.timeout_sec for every adapter here
LATE = 1.0  # how much later than the timeout an answer may come on a loaded 2-core machine
LIMITS = Limits(timeout_sec=TIMEOUT, max_connections=4)
NOW = 1_790_000_000_000
MARK = "Zq7Wx"  # in every text of the message: no reason may carry any of it
PARAMS = {"host": "web-7", "otp": "482913"}
ADDRESSES = {  # a contact kind -> an address of that kind, each distinctive
    "email": "ada.contract@example.org",
    "phone": "+14155550123",
    "telegram_chat_id": "73914562",
    "slack_user_id": "U0CONTRACT7",
    "whatsapp": "+14155550177",
}
ACCOUNT_SID = "AC" + "5e" * 16
TWILIO_TOKEN = "twiliotoken0c0ntract0secret00001"
RESEND_KEY = "re_contract_s3cret_key_0001"
TELEGRAM_TOKEN = "987654321:AAcontract-Secret_token_value_0001"
SLACK_TOKEN = "xoxb-2222222222-3333333333-ContractSecretTokenValue"
SES_KEY_ID = "ASIACONTRACTKEY00001"
SES_SECRET = "contract/Secret+Access/Key0000000000000001"
SES_TOKEN = "IQoJcontractSessionToken//////////0001"
SENDGRID_KEY = "SG.contract.s3cret-key-value-0001"
MAILGUN_KEY = "key-contract0s3cret0value0001"
POSTMARK_TOKEN = "postmark-contract-s3cret-token-0001"
SMTP_USER, SMTP_PASSWORD = "mailer", "smtp-s3cret-contract-pw"
HOOK_PATH = "hooks/T0k3nInThePath-contract"
WHSEC = "whsec_" + base64.b64encode(b"contract-signing-key-0001-abcdef").decode()
WHSEC_OLD = "whsec_" + base64.b64encode(b"contract-signing-key-0000-abcdef").decode()
VAPID_PRIVATE, _VAPID_PUBLIC = generate_vapid_keys()
FCM_EMAIL = "notifyd@contract-project.iam.gserviceaccount.com"
APNS_KEY = ec.generate_private_key(ec.SECP256R1())
VONAGE_APPLICATION = "6f1c2d3e-4a5b-4c6d-8e7f-0a1b2c3d4e5f"
WHATSAPP_TOKEN = "EAAGcontractSecretAccessToken0001"
DISCORD_PATH = "api/webhooks/112233445566778899/DiscordT0kenContract-secret"
TEAMS_SIG = "TeamsSigContractSecret0001"
TLS_ONLY = {"apns"}  # its peers speak TLS: production is TLS-only
RANDOMIZED = {"webpush": {"seed"}}  # frozen on purpose: the same frozen payload, the same bytes


# --- the peers -----------------------------------------------------------------------------------


@contextmanager
def closed_port() -> Iterator[int]:
    """A port that nothing listens on: bound and not listening for as long as the test runs,
    so connections to it are refused and no other server can take it meanwhile."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        yield s.getsockname()[1]


@dataclass
class HttpPeer:
    """An HTTP server on 127.0.0.1 that reads every request and then either never answers
    ("hang") or answers 500 with a JSON body echoing the request ("500")."""

    mode: str
    tls: ssl.SSLContext | None = None  # https, as `host`
    host: str = "127.0.0.1"
    seen: list[tuple[str, bytes]] = field(default_factory=list)  # (path, body) as read
    port: int = 0
    _release: asyncio.Event = field(default_factory=asyncio.Event)
    _runner: web.AppRunner | None = None

    @property
    def base(self) -> str:
        return f"{'https' if self.tls else 'http'}://{self.host}:{self.port}"

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        body = await request.read()
        self.seen.append((request.path, body))
        if self.mode == "hang":
            await self._release.wait()  # the client gave up long ago
            return web.Response(status=503)
        echo = (f"{request.method} {request.path_qs} {request.headers.get('Authorization', '')} "
                f"{body.decode(errors='replace')}")
        return web.json_response({k: echo for k in (
            "message", "description", "detail", "error_message", "error_description",
            "more_info")}, status=500)

    async def start(self) -> HttpPeer:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.5,
                                     handle_signals=False)
        await self._runner.setup()
        await web.TCPSite(self._runner, "127.0.0.1", 0, ssl_context=self.tls).start()
        self.port = self._runner.addresses[0][1]
        return self

    async def stop(self) -> None:
        self._release.set()
        if self._runner is not None:
            await self._runner.cleanup()


@asynccontextmanager
async def http_peer(mode: str, tls: ssl.SSLContext | None = None,
                    host: str = "127.0.0.1") -> AsyncIterator[HttpPeer]:
    peer = await HttpPeer(mode, tls, host).start()
    try:
        yield peer
    finally:
        await peer.stop()


@asynccontextmanager
async def smtp_peer(**answers: Any) -> AsyncIterator[FakeSmtp]:
    """An SMTP server (aiosmtpd) that logs the channel in and answers as told."""
    fake = await FakeSmtp().start(credentials=(SMTP_USER.encode(), SMTP_PASSWORD.encode()))
    for name, value in answers.items():
        setattr(fake, name, value)
    try:
        yield fake
    finally:
        await fake.stop()


@asynccontextmanager
async def tcp_peer(greeting: bytes | None = None,
                   reply: bytes | None = None) -> AsyncIterator[int]:
    """A bare TCP server: says `greeting` (None: nothing at all), then answers every line it
    reads with `reply` (None: never answers)."""
    async def session(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            if greeting is not None:
                writer.write(greeting)
                await writer.drain()
            while await reader.readline():
                if reply is not None:
                    writer.write(reply)
                    await writer.drain()
        except ConnectionError:
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(session, "127.0.0.1", 0)
    try:
        yield server.sockets[0].getsockname()[1]
    finally:
        server.close()
        await server.wait_closed()


# --- each type's settings, pointed at a peer -----------------------------------------------------


@dataclass
class Where:
    """Where a channel's settings point: `base` for HTTP types, `port` for smtp."""

    base: str = "http://127.0.0.1:9"
    port: int = 9


@dataclass
class Env:
    tmp_path: Path
    rsa_key: rsa.RSAPrivateKey
    google: FakeGoogle | None = None


SettingsFn = Callable[[Where, Env], tuple[dict[str, Any], list[str]]]


def _log(w: Where, env: Env) -> tuple[dict[str, Any], list[str]]:
    return {}, []


def _webhook(w: Where, env: Env) -> tuple[dict[str, Any], list[str]]:
    url = f"{w.base}/{HOOK_PATH}"
    return {"url": url, "secret": WHSEC, "previous_secret": WHSEC_OLD}, [
        url, HOOK_PATH, WHSEC, WHSEC_OLD]


def _smtp(w: Where, env: Env) -> tuple[dict[str, Any], list[str]]:
    return {"host": "127.0.0.1", "port": w.port, "tls": "none", "username": SMTP_USER,
            "password": SMTP_PASSWORD, "from_address": "Acme Alerts <alerts@acme.example>",
            "connect_timeout_sec": TIMEOUT}, [SMTP_PASSWORD]


def _resend(w: Where, env: Env) -> tuple[dict[str, Any], list[str]]:
    return {"api_key": RESEND_KEY, "from_address": "Acme <alerts@acme.example>",
            "base_url": w.base}, [RESEND_KEY]


def _twilio(w: Where, env: Env) -> tuple[dict[str, Any], list[str]]:
    basic = base64.b64encode(f"{ACCOUNT_SID}:{TWILIO_TOKEN}".encode()).decode()
    return {"account_sid": ACCOUNT_SID, "auth_token": TWILIO_TOKEN,
            "from_number": "+15005550006", "base_url": w.base}, [TWILIO_TOKEN, basic]


def _webpush(w: Where, env: Env) -> tuple[dict[str, Any], list[str]]:
    return {"vapid_private_key": VAPID_PRIVATE, "vapid_subject": "mailto:ops@acme.example",
            "allowed_hosts": ["127.0.0.1", PROVIDER], "http_hosts": ["127.0.0.1"]}, [VAPID_PRIVATE]


def _fcm(w: Where, env: Env) -> tuple[dict[str, Any], list[str]]:
    assert env.google is not None
    pem = env.rsa_key.private_bytes(serialization.Encoding.PEM,
                                    serialization.PrivateFormat.PKCS8,
                                    serialization.NoEncryption()).decode()
    key_file = env.tmp_path / "service-account.json"
    key_file.write_text(json.dumps({
        "type": "service_account", "project_id": "demo-project", "private_key_id": "kid-c1",
        "private_key": pem, "client_email": FCM_EMAIL, "token_uri": env.google.token_url}))
    pem_lines = [line for line in pem.splitlines() if "-----" not in line]
    return {"service_account_file": str(key_file), "base_url": w.base}, [
        pem_lines[1], pem_lines[-2], "ya29.fake-"]  # the key, and every access token issued


def _telegram(w: Where, env: Env) -> tuple[dict[str, Any], list[str]]:
    return {"bot_token": TELEGRAM_TOKEN, "base_url": w.base}, [
        TELEGRAM_TOKEN, TELEGRAM_TOKEN.split(":")[1]]


def _slack(w: Where, env: Env) -> tuple[dict[str, Any], list[str]]:
    return {"bot_token": SLACK_TOKEN, "base_url": w.base}, [SLACK_TOKEN, "ContractSecretToken"]


def _apns(w: Where, env: Env) -> tuple[dict[str, Any], list[str]]:
    text = pem(APNS_KEY)
    base = w.base.replace("http://", "https://", 1)  # TLS only; its peers are TLS peers
    return {"team_id": "TEAM123456", "key_id": "KEY1234567", "private_key": text,
            "topic": "com.example.contract", "base_url": base}, [
        line for line in text.splitlines() if "-----" not in line]


def _vonage(w: Where, env: Env) -> tuple[dict[str, Any], list[str]]:
    text = pem(env.rsa_key)
    return {"application_id": VONAGE_APPLICATION, "private_key": text,
            "from_number": "+15005550006", "base_url": w.base}, [
        [line for line in text.splitlines() if "-----" not in line][1]]


def _whatsapp(w: Where, env: Env) -> tuple[dict[str, Any], list[str]]:
    return {"phone_number_id": "106540352242922", "access_token": WHATSAPP_TOKEN,
            "base_url": w.base, "templates": [{"kind": "alert", "name": "disk_alert",
                                               "parameters": ["host", "otp"]}]}, [WHATSAPP_TOKEN]


def _discord(w: Where, env: Env) -> tuple[dict[str, Any], list[str]]:
    return {"webhook_url": f"{w.base}/{DISCORD_PATH}"}, [
        DISCORD_PATH, DISCORD_PATH.rsplit("/", 1)[1]]


def _teams(w: Where, env: Env) -> tuple[dict[str, Any], list[str]]:
    url = f"{w.base}/workflows/a1b2/triggers/manual/paths/invoke?api-version=1&sig={TEAMS_SIG}"
    return {"webhook_url": url}, [url, TEAMS_SIG]


def _ses(w: Where, env: Env) -> tuple[dict[str, Any], list[str]]:
    return {"region": "eu-west-1", "access_key_id": SES_KEY_ID, "secret_access_key": SES_SECRET,
            "session_token": SES_TOKEN, "from_address": "Acme <alerts@acme.example>",
            "base_url": w.base}, [SES_SECRET, SES_TOKEN]


def _sendgrid(w: Where, env: Env) -> tuple[dict[str, Any], list[str]]:
    return {"api_key": SENDGRID_KEY, "from_address": "Acme <alerts@acme.example>",
            "base_url": w.base}, [SENDGRID_KEY]


def _mailgun(w: Where, env: Env) -> tuple[dict[str, Any], list[str]]:
    basic = base64.b64encode(f"api:{MAILGUN_KEY}".encode()).decode()
    return {"api_key": MAILGUN_KEY, "domain": "mg.acme.example",
            "from_address": "Acme <alerts@mg.acme.example>", "base_url": w.base}, [
        MAILGUN_KEY, basic]


def _postmark(w: Where, env: Env) -> tuple[dict[str, Any], list[str]]:
    return {"server_token": POSTMARK_TOKEN, "from_address": "Acme <alerts@acme.example>",
            "base_url": w.base}, [POSTMARK_TOKEN]


SPECS: dict[str, SettingsFn] = {
    "log": _log, "webhook": _webhook, "smtp": _smtp, "resend": _resend, "twilio": _twilio,
    "webpush": _webpush, "fcm": _fcm, "telegram": _telegram, "slack": _slack,
    "ses": _ses, "sendgrid": _sendgrid, "mailgun": _mailgun, "postmark": _postmark,
    "apns": _apns, "vonage": _vonage, "whatsapp": _whatsapp, "discord": _discord, "teams": _teams,
}


def _value(v: Any) -> Any:
    """A TOML value as its settings field holds it: a list is a tuple (of tables, each built)."""
    if isinstance(v, list) and v and isinstance(v[0], dict):
        from notifyd.channels.types.whatsapp import WhatsAppTemplate
        return tuple(WhatsAppTemplate(**{k: _value(x) for k, x in t.items()}) for t in v)
    return tuple(v) if isinstance(v, list) else v


def settings_for(type_name: str, w: Where, env: Env) -> tuple[Any, list[str]]:
    values, secrets = SPECS[type_name](w, env)
    settings = TYPES[type_name].settings(**{k: _value(v) for k, v in values.items()})
    problems = getattr(settings, "problems", list)()
    assert problems == [], f"the contract's {type_name} settings are not valid: {problems}"
    return settings, secrets


# --- a step for any type -------------------------------------------------------------------------


def devices_for(kind: str, w: Where) -> tuple[Device, ...]:
    """Two devices of `kind` on the peer: what a user's live devices look like to render."""
    out = []
    for name in ("dev-a", "dev-b"):
        if kind == "webpush":
            browser = ec.generate_private_key(ec.SECP256R1())
            p256dh = base64.urlsafe_b64encode(browser.public_key().public_bytes(
                serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint)
            ).rstrip(b"=").decode()
            auth = base64.urlsafe_b64encode(os.urandom(16)).rstrip(b"=").decode()
            out.append(Device(name, "webpush", f"{w.base}/push/{name}-endpoint", p256dh, auth))
        elif kind == "apns":
            out.append(Device(name, "apns", (name.encode().hex() + "c0ffee") * 6))
        else:
            assert kind == "fcm", kind
            out.append(Device(name, "fcm", f"fcmTok-{name}:APA91bContractToken_x-y"))
    return tuple(out)


def step_for(type_name: str, w: Where) -> RenderInput:
    """A reasonable step for the type: its medium's content, its contact's address or two live
    devices, as the sender would hand them to render."""
    ctype = TYPES[type_name]
    content = {} if ctype.medium is None else {
        part: f"{ctype.medium} {part}: disk 91% full on web-7 {MARK}"
        for part in MEDIA[ctype.medium].required}
    contact = ctype.contact
    address, devices = None, ()
    if isinstance(contact, Devices):
        devices = devices_for(contact.kind, w)
    elif contact is not None:
        address = ADDRESSES[contact.field]
    return RenderInput("n_01k9zq3x7c2m4v6b8n", 1, "contract-channel", "alert", "u-contract",
                       dict(PARAMS), NOW, NOW + 3_600_000, address, "en", now=NOW,
                       content=content, devices=devices)


def forbidden(step: RenderInput, destination: str, secrets: list[str]) -> list[str]:
    """What no reason may ever carry."""
    out = [destination, MARK, *secrets, *PARAMS.values(), *step.content.values()]
    if step.address:
        out.append(step.address)
    for d in step.devices:
        out += [d.endpoint, *(k for k in (d.p256dh, d.auth) if k)]
        out.append(d.endpoint.rsplit("/", 1)[-1])  # the endpoint's own part, on its own
    return [x for x in out if x]


@dataclass
class Built:
    channel: Channel
    step: RenderInput
    message: Message
    forbidden: list[str]
    devices: list[str]  # the device ids a Fanout must answer for ([] for other types)


@asynccontextmanager
async def built(type_name: str, w: Where, tmp_path: Path, rsa_key: rsa.RSAPrivateKey,
                limits: Limits = LIMITS) -> AsyncIterator[Built]:
    """The type's channel, pointed at `w`, with a step rendered and frozen as the sender
    freezes it; closed twice at the end (close must be safe to repeat)."""
    env = Env(tmp_path, rsa_key)
    if type_name == "fcm":
        env.google = await FakeGoogle(rsa_key.public_key(), FCM_EMAIL).start()
    try:
        settings, secrets = settings_for(type_name, w, env)
        channel = build_channel("contract-channel", type_name, settings, limits)
        try:
            step = step_for(type_name, w)
            rendered = channel.render(step)
            # What the sender does: freeze as JSON with sorted keys, send what reads back.
            payload = json.loads(json.dumps(rendered.payload, sort_keys=True))
            message = Message(f"{step.notification_id}:{step.step_no}", rendered.destination,
                              payload)
            yield Built(channel, step, message, forbidden(step, rendered.destination, secrets),
                        [d.device_id for d in step.devices])
        finally:
            await channel.close()
            await channel.close()
    finally:
        if env.google is not None:
            await env.google.stop()
            assert not env.google.problems


@pytest.fixture(scope="module")
def rsa_key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def tls_for(type_name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
            ) -> ssl.SSLContext | None:
    """The peer's TLS for a type that speaks TLS only, its certificate trusted as a system CA
    would be (SSL_CERT_FILE); None for the others."""
    if type_name not in TLS_ONLY:
        return None
    cert, key = self_signed(tmp_path)
    monkeypatch.setenv("SSL_CERT_FILE", str(cert))
    return server_context(cert, key)


# --- checking outcomes ---------------------------------------------------------------------------


async def send(b: Built) -> tuple[list[Answer], float]:
    """Send the frozen message; every answer (one per device for a Fanout) and how long it took.
    An exception out of send breaks the contract and fails the test here."""
    started = time.monotonic()
    outcome: Outcome = await asyncio.wait_for(b.channel.send(b.message), TIMEOUT + 10)
    took = time.monotonic() - started
    if isinstance(outcome, Fanout):
        assert b.devices, "a Fanout from a type that sends to no devices"
        assert sorted(d for d, _ in outcome.results) == sorted(b.devices), outcome
        answers = [a for _, a in outcome.results]
    else:
        assert not b.devices, f"a device type answered {outcome!r}, not a Fanout"
        answers = [outcome]
    for a in answers:
        assert isinstance(a, Sent | Rejected | Failed | Unknown), a
        said = a.detail if isinstance(a, Sent) else a.reason
        for secret in b.forbidden:
            assert secret not in (said or ""), f"{a!r} carries {secret!r}"
        if isinstance(a, Sent) and a.provider_ref:
            for secret in b.forbidden:
                assert secret not in a.provider_ref, f"{a!r} carries {secret!r}"
    return answers, took


def only(answers: list[Answer], kind: type) -> None:
    wrong = [a for a in answers if not isinstance(a, kind)]
    assert not wrong, f"expected every answer {kind.__name__}, got {answers}"


# --- (a) render ------------------------------------------------------------------------------------


@pytest.mark.parametrize("type_name", ALL_TYPES)
async def test_render_gives_a_json_payload_and_a_destination_the_same_each_time(
        type_name: str, tmp_path: Path, rsa_key: rsa.RSAPrivateKey) -> None:
    async with built(type_name, Where(), tmp_path, rsa_key) as b:
        first, second = b.channel.render(b.step), b.channel.render(b.step)
        assert isinstance(first.destination, str) and first.destination
        assert first.destination == second.destination
        texts = [json.dumps(r.payload, sort_keys=True, allow_nan=False) for r in (first, second)]
        if texts[0] != texts[1]:
            randomized = RANDOMIZED.get(type_name, set())
            assert randomized, f"{type_name}: two renders of one step differ"
            a, b2 = (json.loads(t) for t in texts)
            assert {k for k in a.keys() | b2.keys() if a.get(k) != b2.get(k)} <= randomized


# --- (b) nothing listens -------------------------------------------------------------------------


@pytest.mark.parametrize("type_name", ALL_TYPES)
async def test_nothing_listening_is_failed(type_name: str, tmp_path: Path,
                                           rsa_key: rsa.RSAPrivateKey) -> None:
    with closed_port() as port:
        async with built(type_name, Where(f"http://127.0.0.1:{port}", port), tmp_path,
                         rsa_key) as b:
            answers, took = await send(b)
    if type_name == "log":
        only(answers, Sent)  # the log channel reaches no server: nothing can fail
    else:
        only(answers, Failed)
    assert took < TIMEOUT + LATE


# --- (c) no answer -------------------------------------------------------------------------------


@pytest.mark.parametrize("type_name", ALL_TYPES)
async def test_a_server_that_never_answers_is_unknown_within_the_timeout(
        type_name: str, tmp_path: Path, rsa_key: rsa.RSAPrivateKey,
        monkeypatch: pytest.MonkeyPatch) -> None:
    if type_name == "smtp":  # the request is the message: a server that never answers DATA
        hold = asyncio.Event()
        async with smtp_peer(hold=hold) as fake, \
                built(type_name, Where(port=fake.port), tmp_path, rsa_key) as b:
            answers, took = await send(b)
            hold.set()
            assert len(fake.received) == 1  # it has the message: exactly why it is unknown
    else:
        async with http_peer("hang", tls_for(type_name, tmp_path, monkeypatch)) as peer, \
                built(type_name, Where(peer.base, peer.port), tmp_path, rsa_key) as b:
            answers, took = await send(b)
            if type_name != "log":
                assert peer.seen, "the request never reached the peer"
    if type_name == "log":
        only(answers, Sent)
    else:
        only(answers, Unknown)
    assert took < TIMEOUT + LATE, f"answered after {took:.2f} s; the timeout is {TIMEOUT} s"


async def test_an_smtp_server_that_accepts_and_never_speaks_is_failed_in_time(
        tmp_path: Path, rsa_key: rsa.RSAPrivateKey) -> None:
    """Nothing of the message left us before the greeting: Failed, never Unknown."""
    async with tcp_peer() as port, built("smtp", Where(port=port), tmp_path, rsa_key) as b:
        answers, took = await send(b)
    only(answers, Failed)
    assert took < TIMEOUT + LATE


# --- (d) the server's own error --------------------------------------------------------------------


@pytest.mark.parametrize("type_name", ALL_TYPES)
async def test_a_server_error_is_failed_and_a_retry_sends_the_same_bytes(
        type_name: str, tmp_path: Path, rsa_key: rsa.RSAPrivateKey,
        monkeypatch: pytest.MonkeyPatch) -> None:
    if type_name == "smtp":  # SMTP's "internal server error": 451 local error in processing
        async with smtp_peer(data_answer="451 4.3.0 Error: local error in processing") as fake, \
                built(type_name, Where(port=fake.port), tmp_path, rsa_key) as b:
            first, _ = await send(b)
            second, _ = await send(b)
            wire = [r.data for r in fake.received]
            assert len(wire) == 2 and wire[0] == wire[1]
    else:
        async with http_peer("500", tls_for(type_name, tmp_path, monkeypatch)) as peer, \
                built(type_name, Where(peer.base, peer.port), tmp_path, rsa_key) as b:
            first, _ = await send(b)
            n = len(peer.seen)
            second, _ = await send(b)
            if type_name != "log":  # one request per device for device types, in any order
                assert n > 0 and len(peer.seen) == 2 * n
                assert sorted(peer.seen[:n]) == sorted(peer.seen[n:]), \
                    f"{type_name}: a retry of the frozen payload sent other bytes"
    for answers in (first, second):
        only(answers, Sent if type_name == "log" else Failed)


@pytest.mark.parametrize(("what", "peer"), [
    ("a 500 to every command after the greeting", {"greeting": b"220 peer.test ESMTP\r\n",
                                                   "reply": b"500 5.5.1 Command unrecognized\r\n"}),
    ("a 421 greeting", {"greeting": b"421 4.3.2 Service not available\r\n", "reply": None}),
    ("a 500 5.5.1 to DATA", {"data_answer": "500 5.5.1 Command unrecognized"}),
])
async def test_an_smtp_server_error_is_never_the_addresss_fault(
        what: str, peer: dict[str, Any], tmp_path: Path, rsa_key: rsa.RSAPrivateKey) -> None:
    """A 5.5.x reply is about the protocol exchange (RFC 3463: mail delivery protocol status),
    i.e. our command, never the recipient's address: Failed (final or not), never Rejected,
    which would disable the person's email address."""
    if "data_answer" in peer:
        async with smtp_peer(**peer) as fake, \
                built("smtp", Where(port=fake.port), tmp_path, rsa_key) as b:
            answers, _ = await send(b)
    else:
        async with tcp_peer(**peer) as port, \
                built("smtp", Where(port=port), tmp_path, rsa_key) as b:
            answers, _ = await send(b)
    only(answers, Failed)


# --- (f) the egress proxy ------------------------------------------------------------------------


@pytest.mark.parametrize("bypass", [False, True], ids=["proxied", "no_proxy"])
@pytest.mark.parametrize("type_name", HTTP_TYPES)
async def test_every_http_type_goes_through_the_egress_proxy_unless_no_proxy_says(
        type_name: str, bypass: bool, tmp_path: Path, rsa_key: rsa.RSAPrivateKey,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The provider (the 500 peer, over TLS) is PROVIDER to the channel, a name only the proxy
    resolves, as behind a mandatory egress proxy; with NO_PROXY naming it, 127.0.0.1 is reached
    straight out."""
    cert, key = self_signed(tmp_path, PROVIDER)
    monkeypatch.setattr("notifyd.channels.wire._TLS", ssl.create_default_context(cafile=str(cert)))
    monkeypatch.setenv("SSL_CERT_FILE", str(cert))  # apns: a TLS context of its own
    async with http_peer("500", server_context(cert, key),
                         "127.0.0.1" if bypass else PROVIDER) as peer, \
            FakeProxy({PROVIDER: "127.0.0.1"}, ("egress", "s3cret-pw")) as proxy:
        egress = Egress.of(proxy.url, proxy.url, ["127.0.0.1"] if bypass else [])
        limits = Limits(timeout_sec=5.0, max_connections=4, egress=egress)
        async with built(type_name, Where(peer.base, peer.port), tmp_path, rsa_key, limits) as b:
            b.forbidden.append("s3cret-pw")
            answers, _ = await send(b)
    only(answers, Failed)  # the peer's 500: the message reached it
    assert peer.seen, f"{type_name}: nothing reached the provider"
    if bypass:
        assert proxy.tunnels == [] and proxy.forwarded == []
    else:  # fcm's token endpoint is plain http: its request was handed to the proxy whole
        assert set(proxy.tunnels) == {f"{PROVIDER}:{peer.port}"}
        assert len(proxy.tunnels) <= len(peer.seen)
        assert set(proxy.authorizations) == {
            "Basic " + base64.b64encode(b"egress:s3cret-pw").decode()}


def test_the_types_the_egress_proxy_is_not_for_are_the_ones_that_do_not_speak_http() -> None:
    assert sorted(NOT_HTTP) == ["log", "smtp"]  # SMTP connects to its server itself


# --- (g) close -----------------------------------------------------------------------------------


@pytest.mark.parametrize("type_name", ALL_TYPES)
async def test_close_is_safe_twice_on_a_channel_never_used(type_name: str, tmp_path: Path,
                                                           rsa_key: rsa.RSAPrivateKey) -> None:
    env = Env(tmp_path, rsa_key)
    if type_name == "fcm":
        env.google = await FakeGoogle(rsa_key.public_key(), FCM_EMAIL).start()
    try:
        settings, _ = settings_for(type_name, Where(), env)
        channel = build_channel("contract-channel", type_name, settings, LIMITS)
        await channel.close()
        await channel.close()
    finally:
        if env.google is not None:
            await env.google.stop()


def test_every_registered_type_is_in_the_contract() -> None:
    assert set(SPECS) == set(TYPES), "add the new type's settings to SPECS: it is never skipped"
