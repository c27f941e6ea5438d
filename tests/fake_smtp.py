"""A real SMTP server on 127.0.0.1 (aiosmtpd, in the test's own event loop) for the smtp
channel's tests: it records every connection and message and answers as a test tells it to
(a refusal at MAIL, RCPT or DATA, a connection dropped at MAIL or instead of DATA's reply, a
reply held back, AUTH, STARTTLS or TLS with a self-signed certificate)."""

from __future__ import annotations

import asyncio
import datetime
import ipaddress
import socket
import ssl
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aiosmtpd.smtp import SMTP, AuthResult, Envelope, LoginPassword, Session


@dataclass
class Received:
    connection: int  # which connection (1, 2, ...) carried it
    mail_from: str
    mail_options: list[str]
    rcpt_tos: list[str]
    data: bytes
    tls: bool


class FakeSmtp:
    """The aiosmtpd handler, and the server around it."""

    def __init__(self) -> None:
        self.received: list[Received] = []
        self.connections = 0
        self.quits = 0
        self.auth_seen: list[tuple[bytes, bytes]] = []
        self.mail_answers: deque[str] = deque()  # the next MAIL FROM replies; empty: 250
        self.rcpt_answer: str | None = None  # every RCPT TO gets this; None: 250
        self.data_answer: str | None = None  # the final reply to DATA; None: 250 queued as Q<n>
        self.drop_at: str | None = None  # "MAIL" (on a session that already sent a message) or
        # "DATA" (instead of the final reply): close the connection without answering
        self.hold: asyncio.Event | None = None  # set: DATA's reply waits for it
        self.hold_rcpt: asyncio.Event | None = None
        self.sessions: list[SMTP] = []
        self.server: asyncio.Server | None = None
        self.port = 0
        self._held: socket.socket | None = None  # the port kept refusing while down

    async def start(self, *, tls: ssl.SSLContext | None = None,
                    starttls: ssl.SSLContext | None = None,
                    credentials: tuple[bytes, bytes] | None = None,
                    port: int = 0) -> FakeSmtp:
        """Listen on 127.0.0.1:`port` (0: any free one); after stop(), start(port=self.port)
        brings the same server back where its clients expect it."""
        loop = asyncio.get_running_loop()
        kwargs: dict[str, Any] = {"hostname": "fake.test", "loop": loop}
        if starttls is not None:
            kwargs.update(tls_context=starttls, require_starttls=True)
        if credentials is not None:
            # AUTH offered over plain text too (loopback): not required, so that aiosmtpd
            # does not warn; the client logs in because it is configured to.
            kwargs.update(authenticator=self._authenticator(credentials),
                          auth_require_tls=False)
        self._release()
        self.server = await loop.create_server(lambda: _Session(self, **kwargs), "127.0.0.1",
                                               port, ssl=tls)
        self.port = self.server.sockets[0].getsockname()[1]
        return self

    async def stop(self, *, keep_port: bool = False) -> None:
        """Close the server. With `keep_port`, its port stays bound (not listening) until
        start() brings it back: connections are refused, and no other server on this machine
        (another test, in this process or another) can take the port meanwhile."""
        for event in (self.hold, self.hold_rcpt):
            if event is not None:
                event.set()
        self.drop_connections()
        if self.server is not None:
            self.server.close()
            await self.server.wait_closed()
        self._release()
        if keep_port:
            held = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            held.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            held.bind(("127.0.0.1", self.port))
            self._held = held

    def _release(self) -> None:
        if self._held is not None:
            self._held.close()
            self._held = None

    def drop_connections(self) -> None:
        """The server closes every open session, as one does after its idle timeout."""
        for s in self.sessions:
            if s.transport is not None:
                s.transport.close()

    def _authenticator(self, credentials: tuple[bytes, bytes]) -> Any:
        def check(server: SMTP, session: Session, envelope: Envelope, mechanism: str,
                  data: Any) -> AuthResult:
            ok = isinstance(data, LoginPassword) and (data.login, data.password) == credentials
            if isinstance(data, LoginPassword):
                self.auth_seen.append((data.login, data.password))
            return AuthResult(success=ok, handled=False)  # handled=False: aiosmtpd says 535
        return check

    # aiosmtpd handler hooks: a hook that answers itself also records the envelope itself.

    async def handle_MAIL(self, server: SMTP, session: Session, envelope: Envelope,
                          address: str, options: list[str]) -> str:
        if self.drop_at == "MAIL" and getattr(session, "messages", 0) > 0:
            assert server.transport is not None
            server.transport.close()
            return "421 4.4.2 closing"  # never written: the connection is gone
        if self.mail_answers:
            answer = self.mail_answers.popleft()
            if answer:
                return answer
        envelope.mail_from = address
        envelope.mail_options.extend(options)
        return "250 2.1.0 Ok"

    async def handle_RCPT(self, server: SMTP, session: Session, envelope: Envelope,
                          address: str, options: list[str]) -> str:
        if self.hold_rcpt is not None:
            await self.hold_rcpt.wait()
        if self.rcpt_answer is not None:
            return self.rcpt_answer
        envelope.rcpt_tos.append(address)
        return "250 2.1.5 Ok"

    async def handle_DATA(self, server: SMTP, session: Session, envelope: Envelope) -> str:
        number = getattr(session, "number", 0)
        assert envelope.mail_from is not None and envelope.original_content is not None
        self.received.append(Received(number, envelope.mail_from, list(envelope.mail_options),
                                      list(envelope.rcpt_tos), envelope.original_content,
                                      session.ssl is not None))
        session.messages = getattr(session, "messages", 0) + 1  # type: ignore[attr-defined]
        if self.drop_at == "DATA":
            assert server.transport is not None
            server.transport.close()
            return "250 never written"
        if self.hold is not None:
            await self.hold.wait()
        return self.data_answer or f"250 2.0.0 Ok: queued as Q{len(self.received):06d}"

    async def handle_QUIT(self, server: SMTP, session: Session, envelope: Envelope) -> str:
        self.quits += 1
        return "221 2.0.0 Bye"


class _Session(SMTP):
    def __init__(self, fake: FakeSmtp, **kwargs: Any) -> None:
        super().__init__(fake, **kwargs)
        self.fake = fake

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        upgrade = self.transport is not None  # STARTTLS calls this again with the TLS transport
        super().connection_made(transport)
        if not upgrade:
            self.fake.connections += 1
            self.fake.sessions.append(self)
        assert self.session is not None
        self.session.number = self.fake.connections  # type: ignore[attr-defined]


def self_signed(folder: Path, *names: str) -> tuple[Path, Path]:
    """A certificate for 127.0.0.1 (and the host `names`) and its key, as PEM files: the
    server's and the client's CA file at once."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(days=1))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName(
                [x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
                 *(x509.DNSName(n) for n in names)]), critical=False)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256()))
    cert_path, key_path = folder / "cert.pem", folder / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                           serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return cert_path, key_path


def server_context(cert: Path, key: Path) -> ssl.SSLContext:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert, key)
    return ctx
