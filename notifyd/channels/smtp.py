"""The smtp channel: email through an SMTP server (a local relay or a provider's submission host).

render() freezes the whole message (addresses, subject, bodies, Message-ID, Date, headers); send()
builds the same MIME bytes from it every time and runs one transaction on a pooled connection.
Wire facts relied on:

- RFC 5321, https://www.rfc-editor.org/rfc/rfc5321: 2yz done, 4yz transient, 5yz permanent
  (4.2.1); 421 may answer any command as the server closes (3.8); a 552 to RCPT is to be taken
  as temporary (4.5.3.1.10); RSET aborts a transaction (4.1.1.5); per-command timeouts
  (4.5.3.2); a timeout waiting for DATA's final reply may duplicate a message the server took
  (4.5.3.2.6, 6.1): unknown, never failed.
- RFC 3463 enhanced codes (https://www.rfc-editor.org/rfc/rfc3463), "class.subject.detail" at the
  start of the text: subject 1 addressing, 2 mailbox (2.2 full: persistent transient), 3 mail
  system, 6 content, 7 security or policy. RFC 4954 6: 530 5.7.0, 534 5.7.9, 535 5.7.8 and
  538 5.7.11 are AUTH faults: ours.
- The message's MIME bytes: channels/mime.py (shared with ses's raw content).
- RFC 2369 and RFC 8058 (https://www.rfc-editor.org/rfc/rfc8058): List-Unsubscribe: <URI>, and
  List-Unsubscribe-Post: List-Unsubscribe=One-Click beside an HTTPS URI only. RFC 3834 3.1.7:
  Auto-Submitted: auto-generated keeps auto-responders quiet.
- aiosmtplib (smtp.py, protocol.py, errors.py): mail(), rcpt() and data() raise
  SMTPSenderRefused, SMTPRecipientRefused and SMTPDataError with .code; a lost connection is
  SMTPServerDisconnected, a slow reply SMTPReadTimeoutError; a 421 reply closes the client.

Outcomes: 250 to DATA Sent (provider_ref: the Message-ID; detail: the server's queue id). A 5yz
to RCPT or DATA Rejected, unless it is about us or the message rather than the address (x.7.x,
530/534/535/538, 552 to RCPT, x.2.2, x.3.x, x.6.x): Failed. Any 4yz, a refused MAIL FROM (our
sender), a refused or slow connect, TLS and AUTH failures, anything before DATA: Failed. A lost
connection or a timeout once DATA started: Unknown. Reasons hold the codes, never the server's
text (it echoes addresses).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
import ssl
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import format_datetime
from typing import Any
from urllib.parse import urlsplit

import aiosmtplib

from notifyd.channels.base import (
    Failed,
    Limits,
    Message,
    Outcome,
    Rejected,
    Rendered,
    RenderError,
    RenderInput,
    Sent,
    Unknown,
)
from notifyd.channels.mime import build_message
from notifyd.channels.types.smtp import (
    DOT_ATOM,
    LINE_BREAKS,
    SmtpSettings,
    mailbox,
    parse_sender,
)
from notifyd.channels.types.smtp import (
    TYPE as TYPE,
)

MAX_URL = 900  # List-Unsubscribe is written unfolded: keep it well under the 998-octet line
QUIT_TIMEOUT_SEC = 2.0

URL_BAD = re.compile(r'[\x00-\x20\x7f<>"\\^`{|}]')
ENHANCED = re.compile(r"^([245])\.(\d{1,3})\.(\d{1,3})(?![\d.])")
QUEUE_ID = (re.compile(r"\bqueued as ([A-Za-z0-9._-]{1,64})", re.I),  # Postfix, SendGrid
            re.compile(r"\bid=([A-Za-z0-9._-]{1,64})"),  # Exim
            re.compile(r"^(?:2\.\d+\.\d+ )?Ok:? ([0-9a-f][0-9a-f-]{15,80})$", re.I))  # SES
AUTH_CODES = frozenset({530, 534, 535, 538})


def header_safe(what: str, value: str) -> str:
    if LINE_BREAKS.search(value):
        raise RenderError(what, ValueError("a line break or control character in a header"))
    return value


# The header each relay turns into metadata its event webhooks send back, with the step key in
# it (receipts/<relay>.py reads it there): SendGrid unique_args, Mailgun user variables,
# Postmark metadata, SES message tags (whose values allow no ':'). One for each of RELAYS.
RELAY_HEADER: dict[str, Callable[[str], tuple[str, str]]] = {
    "sendgrid": lambda key: ("X-SMTPAPI", json.dumps({"unique_args": {"notifyd_key": key}})),
    "mailgun": lambda key: ("X-Mailgun-Variables", json.dumps({"notifyd_key": key})),
    "postmark": lambda key: ("X-PM-Metadata-notifyd_key", key),
    "ses": lambda key: ("X-SES-MESSAGE-TAGS", f"notifyd_key={key.replace(':', '-')}"),
}
PROTOCOL_CODES = frozenset({500, 501, 502, 503, 504})  # syntax, parameters, sequence


def enhanced(text: str) -> str:
    m = ENHANCED.match(text.strip())
    return m.group(0) if m else ""


def reply_reason(code: int, text: str, stage: str) -> str:
    code_ext = enhanced(text)
    return f"SMTP {code}{' ' + code_ext if code_ext else ''} at {stage}"


def classify(code: int, text: str, stage: str) -> Outcome:
    """A refusal to RCPT TO or DATA: Rejected when it is about the address, else Failed."""
    reason = reply_reason(code, text, stage)
    if not 500 <= code < 600:
        return Failed(reason)  # 4yz, or something that is no reply at all
    ext = enhanced(text).split(".")
    subject = ext[1] if len(ext) == 3 else ""
    if code in AUTH_CODES or subject == "7":
        return Failed(f"{reason}: refused by policy or for our credentials, not the address")
    if stage == "RCPT TO" and code == 552:
        return Failed(f"{reason}: too many recipients, which RFC 5321 makes temporary")
    if ext[1:] == ["2", "2"]:
        return Failed(f"{reason}: mailbox full")
    if subject in ("3", "6"):
        return Failed(f"{reason}: the server refused the message, not the address")
    if subject == "5" or code in PROTOCOL_CODES:  # RFC 3463 x.5.x; RFC 5321 500-504
        return Failed(f"{reason}: the server did not take our command, which is about us, not "
                      "the address", final=True)
    return Rejected(reason)


def queue_id(text: str) -> str | None:
    for pattern in QUEUE_ID:
        m = pattern.search(text.strip())
        if m:
            return m.group(1)
    return None


@dataclass
class Conn:
    smtp: aiosmtplib.SMTP
    last_used: float = 0.0
    sent: int = 0
    dirty: bool = False  # a refused transaction left server state: RSET before the next


class Stale(Exception):
    """A pooled connection that the server had closed: nothing was sent, reconnect."""


@dataclass
class Progress:
    stage: str = "connect"
    reused: bool = False

    def lost(self) -> Outcome:
        if self.stage == "DATA":
            return Unknown("connection lost after DATA: the server may have the message")
        return Failed(f"connection lost at {self.stage}: nothing was sent")

    def timed_out(self) -> Outcome:
        if self.stage == "DATA":
            return Unknown("no reply after DATA: the server may have the message")
        if self.stage == "connect":
            return Failed("connect timed out")
        return Failed(f"timeout at {self.stage}: nothing was sent")


class SmtpChannel:
    def __init__(self, name: str, settings: SmtpSettings, limits: Limits) -> None:
        self.name = name
        self.settings = settings
        self.timeout = limits.timeout_sec
        # A pool, not one connection behind a lock: a send that queued for the connection would
        # spend its timeout waiting and end as a false unknown, and one connection caps the
        # channel at one message per four round trips. The pool opens a connection only when
        # no idle one is free, so a channel sending one message at a time holds exactly one;
        # the sender never runs more than max_connections sends, and at most that many idle
        # connections are kept.
        self.max_idle = max(1, limits.max_connections)
        sender = parse_sender(settings.from_address)
        self.from_header = str(sender)
        self.envelope_from = (parse_sender(settings.envelope_from).addr_spec
                              if settings.envelope_from else sender.addr_spec)
        self.reply_to = str(parse_sender(settings.reply_to)) if settings.reply_to else ""
        self.id_domain = settings.message_id_domain or sender.domain
        self.relay = settings.relay
        self._helo = settings.helo_name or None
        self._tls: ssl.SSLContext | None = None
        self._idle: list[Conn] = []
        self._closing: set[asyncio.Task[None]] = set()
        self._closed = False

    # -- render: everything the message needs, frozen before the first call --

    def render(self, step: RenderInput) -> Rendered:
        if not step.address:
            raise RenderError("address", ValueError("no email address for this recipient"))
        try:
            to = mailbox(step.address)
        except ValueError as e:
            raise RenderError("address", e) from None
        content = step.content
        for part in ("subject", "text"):
            if not isinstance(content.get(part), str):
                raise RenderError(f"email.{part}", KeyError(part))
        subject = header_safe("email.subject", content["subject"])
        key = header_safe("notification_id", f"{step.notification_id}:{step.step_no}")
        if not key.isascii():
            raise RenderError("notification_id", ValueError("not ASCII"))
        local = f"{step.notification_id}.{step.step_no}"
        if not DOT_ATOM.match(local):  # ids are atext today; a hash keeps it valid if not
            local = f"{hashlib.sha256(local.encode()).hexdigest()[:32]}.{step.step_no}"
        headers = [["Auto-Submitted", "auto-generated"], ["X-Auto-Response-Suppress", "All"]]
        if self.reply_to:
            headers.append(["Reply-To", self.reply_to])
        if not step.transactional and step.unsubscribe_url:
            url = unsubscribe_url(step.unsubscribe_url)
            headers.append(["List-Unsubscribe", f"<{url}>"])
            if url.startswith("https://"):  # RFC 8058 one-click needs an HTTPS URI
                headers.append(["List-Unsubscribe-Post", "List-Unsubscribe=One-Click"])
        headers.append(["X-Notifyd-Key", key])  # relays' receipts carry it back
        if self.relay:
            headers.append(list(RELAY_HEADER[self.relay](key)))
        when = datetime.fromtimestamp((step.now or step.created_at) / 1000, tz=UTC)
        payload: dict[str, Any] = {
            "from": self.from_header, "envelope_from": self.envelope_from, "to": to,
            "subject": subject, "text": content["text"],
            "message_id": f"<{local}@{self.id_domain}>", "date": format_datetime(when),
            "headers": headers,
        }
        if isinstance(content.get("html"), str) and content["html"]:
            payload["html"] = content["html"]
        return Rendered(to, payload)

    # -- send: one transaction over a pooled connection --

    async def send(self, message: Message) -> Outcome:
        p = message.payload
        data = build_message(p)
        progress = Progress()
        try:
            async with asyncio.timeout(self.timeout):
                try:
                    return await self._send_once(progress, p["envelope_from"],
                                                 message.destination, data, p["message_id"])
                except Stale:  # the server closed an idle connection: once more, on a new one
                    progress = Progress()
                    return await self._send_once(progress, p["envelope_from"],
                                                 message.destination, data, p["message_id"],
                                                 fresh=True)
        except TimeoutError:  # ours, or aiosmtplib's read timeout (a TimeoutError too)
            return progress.timed_out()
        except aiosmtplib.SMTPServerDisconnected:
            return progress.lost()
        except aiosmtplib.SMTPException as e:
            return failure(progress, e)
        except OSError as e:  # TLS (ssl.SSLError) or socket trouble that aiosmtplib left bare
            if progress.stage == "DATA":
                return progress.lost()
            return Failed(f"{progress.stage} failed: {type(e).__name__}")

    async def _send_once(self, progress: Progress, sender: str, rcpt: str, data: bytes,
                         message_id: str, fresh: bool = False) -> Outcome:
        conn = await self._checkout(progress, fresh)
        keep = False
        try:
            outcome = await self._transact(conn, progress, sender, rcpt, data)
            keep = True
        except aiosmtplib.SMTPException as e:
            # Before MAIL FROM was answered nothing of this message was sent: a pooled
            # connection that the server dropped (EOF, 421 "closing", a failed RSET) is stale.
            closed = (progress.stage == "RSET" or isinstance(e, aiosmtplib.SMTPServerDisconnected)
                      or getattr(e, "code", 0) == 421)
            if progress.reused and closed and progress.stage in ("RSET", "MAIL FROM"):
                raise Stale() from None
            raise
        finally:
            self._checkin(conn, keep)
        if isinstance(outcome, Sent):
            return Sent(message_id.strip("<>"), outcome.detail)
        return outcome

    async def _transact(self, conn: Conn, progress: Progress, sender: str, rcpt: str,
                        data: bytes) -> Outcome:
        smtp = conn.smtp
        if conn.dirty:
            progress.stage = "RSET"
            await smtp.rset()
        progress.stage = "MAIL FROM"
        conn.dirty = True  # until a transaction ends in DATA's final reply
        options = [f"SIZE={len(data)}"] if smtp.supports_extension("size") else []
        try:
            await smtp.mail(sender, options=options)
        except aiosmtplib.SMTPSenderRefused as e:
            if e.code == 421:
                raise  # the server is closing the session: maybe stale, else failed
            reason = reply_reason(e.code, e.message, "MAIL FROM")
            return Failed(f"{reason}: the server refused our sender" if e.code >= 500 else reason)
        progress.stage = "RCPT TO"
        try:
            await smtp.rcpt(rcpt)
        except aiosmtplib.SMTPRecipientRefused as e:
            return classify(e.code, e.message, "RCPT TO")
        progress.stage = "DATA"
        try:
            reply = await smtp.data(data)
        except aiosmtplib.SMTPDataError as e:
            return classify(e.code, e.message, "DATA")
        conn.dirty = False
        conn.sent += 1
        ref = queue_id(reply.message)
        return Sent(None, f"queued as {ref}" if ref else None)

    # -- the pool --

    async def _checkout(self, progress: Progress, fresh: bool) -> Conn:
        now = time.monotonic()
        while self._idle and not fresh:
            conn = self._idle.pop()  # the most recently used: the likeliest to be alive
            if conn.smtp.is_connected and now - conn.last_used < self.settings.idle_timeout_sec:
                progress.reused = True
                return conn
            self._retire(conn)
        return Conn(await self._connect(progress))

    def _checkin(self, conn: Conn, keep: bool) -> None:
        limit = self.settings.max_messages_per_connection
        if not keep or not conn.smtp.is_connected or self._closed:
            conn.smtp.close()  # its state is unknown (a timeout, a cancel): never reuse it
        elif len(self._idle) >= self.max_idle or (limit and conn.sent >= limit):
            self._retire(conn)
        else:
            conn.last_used = time.monotonic()
            self._idle.append(conn)

    def _retire(self, conn: Conn) -> None:
        if not conn.smtp.is_connected:
            conn.smtp.close()
            return
        task = asyncio.create_task(quit_politely(conn.smtp))
        self._closing.add(task)
        task.add_done_callback(self._closing.discard)

    async def _connect(self, progress: Progress) -> aiosmtplib.SMTP:
        """A connection ready for MAIL FROM: greeted, upgraded to TLS, logged in. Each step
        names itself in progress, so a refusal says where it happened."""
        s = self.settings
        tls = None if s.tls == "none" else await self._tls_context()
        smtp = aiosmtplib.SMTP(hostname=s.host, port=s.port, local_hostname=self._helo,
                               timeout=self.timeout, use_tls=s.tls == "tls", start_tls=False,
                               tls_context=tls)
        try:
            async with asyncio.timeout(min(s.connect_timeout_sec, self.timeout)):
                progress.stage = "connect"
                await smtp.connect()
                await ehlo(smtp, progress)
                if s.tls == "starttls":  # required: never carry on in clear when it is missing
                    progress.stage = "STARTTLS"
                    await smtp.starttls()
                    await ehlo(smtp, progress)  # RFC 3207 4.2: forget what was said in clear
                if s.username:
                    progress.stage = "AUTH"
                    await smtp.login(s.username, s.password)
        except BaseException:
            smtp.close()
            raise
        self._helo = smtp.local_hostname  # resolve this host's name once, not per connection
        return smtp

    async def _tls_context(self) -> ssl.SSLContext:
        if self._tls is None:  # reads CA files: off the loop, once
            self._tls = await asyncio.to_thread(
                tls_context, self.settings.tls_verify, self.settings.ca_file)
        return self._tls

    async def close(self) -> None:
        self._closed = True  # a send still in flight closes its connection when it ends
        idle, self._idle = self._idle, []
        for conn in idle:
            self._retire(conn)
        if self._closing:
            await asyncio.gather(*self._closing, return_exceptions=True)


async def ehlo(smtp: aiosmtplib.SMTP, progress: Progress) -> None:
    progress.stage = "EHLO"
    try:
        await smtp.ehlo()
    except aiosmtplib.SMTPHeloError:
        await smtp.helo()  # an old server without ESMTP


def failure(progress: Progress, e: aiosmtplib.SMTPException) -> Outcome:
    """An SMTP error that the transaction did not map itself: connect, EHLO, STARTTLS, AUTH."""
    stage = progress.stage
    if stage == "DATA":
        return Unknown(f"{type(e).__name__} after DATA: the server may have the message")
    if isinstance(e, aiosmtplib.SMTPAuthenticationError):
        return Failed(f"{reply_reason(e.code, e.message, 'AUTH')}: the server refused our "
                      "credentials")
    if isinstance(e, aiosmtplib.SMTPResponseException) and e.code > 0:
        return Failed(reply_reason(e.code, e.message, stage))  # a 554 greeting, a 454 STARTTLS
    if isinstance(e, aiosmtplib.SMTPConnectError):
        cause = e.__cause__ or e
        return Failed(f"connect failed: {type(cause).__name__}")
    if type(e) is aiosmtplib.SMTPException and stage in ("STARTTLS", "AUTH"):
        return Failed(f"{stage}: the server offers none that we can use")
    return Failed(f"{stage} failed: {type(e).__name__}")


def unsubscribe_url(url: str) -> str:
    try:
        parts = urlsplit(url)
        ok = (len(url) <= MAX_URL and url.isascii() and not URL_BAD.search(url)
              and parts.scheme in ("https", "http") and bool(parts.netloc))
    except ValueError:
        ok = False
    if not ok:
        raise RenderError("unsubscribe_url", ValueError("not an http(s) URL fit for a header"))
    return url


def tls_context(verify: bool, ca_file: str) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=ca_file or None)
    if not verify:
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    return ctx


async def quit_politely(smtp: aiosmtplib.SMTP) -> None:
    try:
        async with asyncio.timeout(QUIT_TIMEOUT_SEC):
            await smtp.quit()
    except (aiosmtplib.SMTPException, OSError, TimeoutError):
        pass
    finally:
        smtp.close()


def build(name: str, settings: SmtpSettings, limits: Limits) -> SmtpChannel:
    return SmtpChannel(name, settings, limits)

