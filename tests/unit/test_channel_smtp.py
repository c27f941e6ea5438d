"""The smtp channel against a real SMTP server on 127.0.0.1 (aiosmtpd, tests/fake_smtp.py):
what render freezes, the MIME that arrives, one connection reused and reopened, and every
reply mapped to an outcome."""

from __future__ import annotations

import asyncio
import dataclasses
import email
import email.policy
import json
import socket
from collections.abc import AsyncIterator, Callable
from email.message import EmailMessage
from pathlib import Path
from typing import Any

import pytest
from fake_smtp import FakeSmtp, self_signed, server_context

from notifyd.channels.base import (
    Answer,
    Failed,
    Limits,
    Message,
    Rejected,
    Rendered,
    RenderError,
    RenderInput,
    Sent,
    Unknown,
)
from notifyd.channels.smtp import TYPE, SmtpChannel, SmtpSettings, build_message

NOW_MS = 1_751_371_200_000  # 2025-07-01 12:00:00 UTC
FROM = "Acme Café <no-reply@acme.example>"
Build = Callable[..., SmtpChannel]


def settings(port: int, **kw: Any) -> SmtpSettings:
    base: dict[str, Any] = {"host": "127.0.0.1", "port": port, "tls": "none",
                            "from_address": FROM, "helo_name": "client.test"}
    return SmtpSettings(**(base | kw))


@pytest.fixture
async def fake() -> AsyncIterator[FakeSmtp]:
    server = await FakeSmtp().start()
    yield server
    await server.stop()


@pytest.fixture
async def build() -> AsyncIterator[Build]:
    """TYPE.build with test settings; every channel built is closed at the end."""
    made: list[SmtpChannel] = []

    def make(port: int, timeout: float = 2.0, max_connections: int = 8,
             **kw: Any) -> SmtpChannel:
        s = settings(port, **kw)
        assert s.problems() == []
        ch = TYPE.build("mail", s, Limits(timeout, max_connections, "https://n.example"))
        assert isinstance(ch, SmtpChannel)
        made.append(ch)
        return ch

    yield make
    for ch in made:
        await ch.close()


def step(address: str | None = "ada@example.com", *, no: int = 1, html: str | None = None,
         subject: str = "Your report is ready", text: str = "Hello Ada,\nit is ready.\n",
         **kw: Any) -> RenderInput:
    content = {"subject": subject, "text": text} | ({"html": html} if html else {})
    base: dict[str, Any] = {"now": NOW_MS, "content": content}
    return RenderInput("n_0001abcd", no, "mail", "report_ready", "u1", {}, NOW_MS - 5000,
                       NOW_MS + 3_600_000, address, "en", **(base | kw))


def frozen(r: Rendered, no: int = 1) -> Message:
    """What the sender hands send(): the payload as stored and read back."""
    return Message(f"n_0001abcd:{no}", r.destination,
                   json.loads(json.dumps(r.payload, sort_keys=True)))


def parse(data: bytes) -> EmailMessage:
    msg = email.message_from_bytes(data, policy=email.policy.default)
    assert isinstance(msg, EmailMessage)
    return msg


async def send(ch: SmtpChannel, s: RenderInput | None = None) -> Any:
    return await ch.send(frozen(ch.render(s or step())))


# -- settings --


def test_settings_problems_name_the_key_and_never_the_value() -> None:
    bad = SmtpSettings(host="", port=70000, tls="ssl", from_address="nope-secret",
                       reply_to="x@", message_id_domain="-bad-", password="hunter2",
                       connect_timeout_sec=0, idle_timeout_sec=-1,
                       max_messages_per_connection=-1, relay="sparkpost")
    problems = dict(bad.problems())
    assert set(problems) == {"host", "port", "tls", "from_address", "reply_to",
                             "message_id_domain", "password", "connect_timeout_sec",
                             "idle_timeout_sec", "max_messages_per_connection", "relay"}
    assert not any("nope-secret" in m or "hunter2" in m for m in problems.values())
    assert settings(25).problems() == []
    assert SmtpSettings(host="smtp.example.com", from_address="a@b.example").port == 587
    assert SmtpSettings(host="smtp.example.com", from_address="a@b.example").tls == "starttls"


@pytest.mark.parametrize(("relay", "header"), [
    ("sendgrid", ["X-SMTPAPI", '{"unique_args": {"notifyd_key": "n_0001abcd:1"}}']),
    ("mailgun", ["X-Mailgun-Variables", '{"notifyd_key": "n_0001abcd:1"}']),
    ("postmark", ["X-PM-Metadata-notifyd_key", "n_0001abcd:1"]),
    ("ses", ["X-SES-MESSAGE-TAGS", "notifyd_key=n_0001abcd-1"]),
])
def test_a_relay_gets_the_step_key_in_its_own_metadata_header(build: Build, relay: str,
                                                              header: list[str]) -> None:
    """So the relay's event webhook carries the key back (receipts/<relay>.py reads it)."""
    headers = build(25, relay=relay).render(step()).payload["headers"]
    assert headers[-2:] == [["X-Notifyd-Key", "n_0001abcd:1"], header]


def test_a_password_in_clear_over_the_network_is_refused() -> None:
    s = SmtpSettings(host="smtp.example.com", tls="none", username="u", password="p",
                     from_address="a@b.example")
    assert [k for k, _ in s.problems()] == ["tls"]
    assert dataclasses.replace(s, host="127.0.0.1").problems() == []  # a relay on this host


# -- render --


def test_render_freezes_the_whole_message(build: Build) -> None:
    ch = build(25, reply_to="Support <help@acme.example>")
    r = ch.render(step(html="<p>Hello</p>"))
    assert r.destination == "ada@example.com"
    assert r.payload == {
        "from": FROM, "envelope_from": "no-reply@acme.example", "to": "ada@example.com",
        "subject": "Your report is ready", "text": "Hello Ada,\nit is ready.\n",
        "html": "<p>Hello</p>", "message_id": "<n_0001abcd.1@acme.example>",
        "date": "Tue, 01 Jul 2025 12:00:00 +0000",
        "headers": [["Auto-Submitted", "auto-generated"], ["X-Auto-Response-Suppress", "All"],
                    ["Reply-To", "Support <help@acme.example>"],
                    ["X-Notifyd-Key", "n_0001abcd:1"]],
    }
    assert "html" not in ch.render(step()).payload
    # The same step renders the same message: the Message-ID is the step's, not the attempt's.
    assert ch.render(step()).payload == ch.render(step()).payload
    assert ch.render(step(no=2)).payload["message_id"] == "<n_0001abcd.2@acme.example>"


def test_envelope_sender_and_message_id_domain_are_settings(build: Build) -> None:
    p = build(25, envelope_from="bounces@mail.acme.example",
              message_id_domain="ids.acme.example").render(step()).payload
    assert p["envelope_from"] == "bounces@mail.acme.example"
    assert p["message_id"] == "<n_0001abcd.1@ids.acme.example>"


@pytest.mark.parametrize(("transactional", "url", "expected"), [
    (True, "https://acme.example/u/t0k", []),
    (False, None, []),
    (False, "https://acme.example/u/t0k", [["List-Unsubscribe", "<https://acme.example/u/t0k>"],
                                           ["List-Unsubscribe-Post",
                                            "List-Unsubscribe=One-Click"]]),
    # RFC 8058 one-click needs HTTPS; a plain link is still an RFC 2369 header.
    (False, "http://localhost:8080/u/t0k", [["List-Unsubscribe",
                                             "<http://localhost:8080/u/t0k>"]]),
])
def test_list_unsubscribe_only_on_non_transactional_kinds(
        build: Build, transactional: bool, url: str | None, expected: list[list[str]]) -> None:
    headers = build(25).render(step(transactional=transactional,
                                    unsubscribe_url=url)).payload["headers"]
    assert [h for h in headers if h[0].startswith("List-")] == expected


@pytest.mark.parametrize(("kw", "template"), [
    ({"subject": "Hi\r\nBcc: victim@example.com"}, "email.subject"),
    ({"subject": "Hi\nBcc: victim@example.com"}, "email.subject"),
    ({"subject": "Hi\u2028Bcc: victim@example.com"}, "email.subject"),  # splitlines() splits it
    ({"subject": "Hi\x00"}, "email.subject"),
    ({"address": "ada@example.com\r\nBcc: victim@example.com"}, "address"),
    ({"address": "ada@example.com>\nRCPT TO:<victim@example.com"}, "address"),
    ({"address": None}, "address"),
    ({"address": "not-an-address"}, "address"),
    ({"address": "ada@localhost"}, "address"),
    ({"address": "a b@example.com"}, "address"),
    ({"address": "\"quoted\"@example.com"}, "address"),
    ({"address": "ädä@example.com"}, "address"),  # would need SMTPUTF8
    ({"address": "ada@exa_mple.com"}, "address"),
    ({"transactional": False, "unsubscribe_url": "https://a.example/u\r\nBcc: x@y.example"},
     "unsubscribe_url"),
    ({"transactional": False, "unsubscribe_url": "javascript:alert(1)"}, "unsubscribe_url"),
    ({"transactional": False, "unsubscribe_url": "https://a.example/" + "x" * 1000},
     "unsubscribe_url"),
])
async def test_header_injection_and_bad_addresses_are_refused_before_any_connection(
        fake: FakeSmtp, build: Build, kw: dict[str, Any], template: str) -> None:
    ch = build(fake.port)
    with pytest.raises(RenderError) as e:
        ch.render(step(**kw))
    assert e.value.template == template
    assert fake.connections == 0


def test_missing_content_is_a_render_error(build: Build) -> None:
    with pytest.raises(RenderError) as e:
        build(25).render(step(content={"text": "no subject"}))
    assert e.value.template == "email.subject"


def test_an_international_domain_is_sent_as_idna(build: Build) -> None:
    assert build(25).render(step("ada@bücher.example")).destination == \
        "ada@xn--bcher-kva.example"


# -- the message on the wire --


async def test_multipart_alternative_message_as_received(fake: FakeSmtp, build: Build) -> None:
    subject = "Votre rapport est prêt — « 2025 » " + "très long sujet " * 4
    text = "Bonjour Ada,\n.\nUne ligne qui commence par un point, et de l'UTF-8 : é ✓\n"
    out = await send(build(fake.port), step(subject=subject, text=text,
                                            html="<p>Bonjour <b>Ada</b> ✓</p>",
                                            transactional=False,
                                            unsubscribe_url="https://acme.example/u/" + "t" * 120))
    assert out == Sent("n_0001abcd.1@acme.example", "queued as Q000001")
    [got] = fake.received
    assert got.mail_from == "no-reply@acme.example"
    assert got.rcpt_tos == ["ada@example.com"]
    assert any(o.startswith("SIZE=") for o in got.mail_options)
    lines = got.data.split(b"\r\n")
    assert max(map(len, lines)) <= 998 and got.data.isascii()  # 7-bit: no 8BITMIME needed
    msg = parse(got.data)
    assert msg["Subject"] == subject
    assert msg["From"].addresses[0].display_name == "Acme Café"
    assert msg["To"] == "ada@example.com"
    assert msg["Message-ID"] == "<n_0001abcd.1@acme.example>"
    assert msg["Date"] == "Tue, 01 Jul 2025 12:00:00 +0000"
    assert msg["X-Notifyd-Key"] == "n_0001abcd:1"
    assert msg["Auto-Submitted"] == "auto-generated"
    assert msg["MIME-Version"] == "1.0"
    # One long URL, never split into encoded-words (which breaks the header for every client).
    assert msg["List-Unsubscribe"] == "<https://acme.example/u/" + "t" * 120 + ">"
    assert msg["List-Unsubscribe-Post"] == "List-Unsubscribe=One-Click"
    assert msg.get_content_type() == "multipart/alternative"
    plain, html = msg.iter_parts()
    assert (plain.get_content_type(), html.get_content_type()) == ("text/plain", "text/html")
    assert plain.get_content_charset() == "utf-8" and html.get_content_charset() == "utf-8"
    assert plain.get_content().replace("\r\n", "\n") == text  # CRLF on the wire
    assert html.get_content().rstrip() == "<p>Bonjour <b>Ada</b> ✓</p>"
    assert all(len(x) <= 76 for x in lines[lines.index(b""):])  # quoted-printable lines


async def test_text_only_message_is_one_text_plain_part(fake: FakeSmtp, build: Build) -> None:
    assert isinstance(await send(build(fake.port)), Sent)
    msg = parse(fake.received[0].data)
    assert not msg.is_multipart()
    assert msg.get_content_type() == "text/plain"
    assert msg.get_content() == "Hello Ada,\r\nit is ready.\r\n"
    assert msg["Subject"] == "Your report is ready"
    assert "List-Unsubscribe" not in msg


async def test_awkward_bodies_arrive_intact(fake: FakeSmtp, build: Build) -> None:
    text = ("a = b  \nline\twith tab\t\n" + "x" * 200 + "\r\n.\n..\nFrom here\r"
            + "é" * 40 + "\n=_notifyd_ =3D\n")
    assert isinstance(await send(build(fake.port), step(text=text, html=text)), Sent)
    msg = parse(fake.received[0].data)
    normal = "\n".join(text.splitlines()) + "\n"
    for part in msg.iter_parts():
        assert part.get_content().replace("\r\n", "\n") == normal
    assert all(len(x) <= 76 for x in fake.received[0].data.split(b"\r\n\r\n", 1)[1].split(b"\r\n"))


async def test_a_retry_sends_the_same_bytes_under_the_same_message_id(
        fake: FakeSmtp, build: Build) -> None:
    ch = build(fake.port)
    message = frozen(ch.render(step(html="<p>x</p>")))
    first, second = await ch.send(message), await ch.send(message)
    assert first == Sent("n_0001abcd.1@acme.example", "queued as Q000001")
    assert second == Sent("n_0001abcd.1@acme.example", "queued as Q000002")
    assert fake.received[0].data == fake.received[1].data
    assert build_message(message.payload) == build_message(message.payload)
    # Another channel process (after a restart) builds the same bytes from the frozen payload.
    assert build_message(json.loads(json.dumps(message.payload))) == fake.received[0].data


# -- the connection --


async def test_one_connection_carries_many_messages(fake: FakeSmtp, build: Build) -> None:
    ch = build(fake.port)
    for i in range(5):
        assert isinstance(await send(ch, step(no=i + 1)), Sent)
    assert fake.connections == 1
    assert {r.connection for r in fake.received} == {1}
    await ch.close()
    assert fake.quits == 1


async def test_concurrent_sends_each_get_a_connection_and_reuse_it(
        fake: FakeSmtp, build: Build) -> None:
    ch = build(fake.port, max_connections=4)
    for round_ in range(3):
        outs = await asyncio.gather(*(send(ch, step(no=round_ * 4 + i)) for i in range(4)))
        assert all(isinstance(o, Sent) for o in outs)
    assert fake.connections == 4
    assert len(fake.received) == 12


async def test_a_connection_the_server_closed_while_idle_is_replaced(
        fake: FakeSmtp, build: Build) -> None:
    ch = build(fake.port)
    assert isinstance(await send(ch), Sent)
    fake.drop_connections()
    assert isinstance(await send(ch, step(no=2)), Sent)
    assert fake.connections == 2
    assert [r.connection for r in fake.received] == [1, 2]


async def test_a_connection_found_closed_at_mail_from_reconnects_and_sends(
        fake: FakeSmtp, build: Build) -> None:
    ch = build(fake.port)
    assert isinstance(await send(ch), Sent)
    fake.drop_at = "MAIL"  # the server closes the reused session when MAIL FROM arrives
    assert await send(ch, step(no=2)) == Sent("n_0001abcd.2@acme.example", "queued as Q000002")
    assert fake.connections == 2


async def test_a_421_to_mail_from_on_a_reused_connection_reconnects(
        fake: FakeSmtp, build: Build) -> None:
    ch = build(fake.port)
    assert isinstance(await send(ch), Sent)
    fake.mail_answers.append("421 4.4.2 fake.test idle timeout")
    assert isinstance(await send(ch, step(no=2)), Sent)
    assert fake.connections == 2


async def test_a_421_on_a_new_connection_is_failed(fake: FakeSmtp, build: Build) -> None:
    fake.mail_answers.extend(["421 4.3.2 shutting down"])
    assert await send(build(fake.port)) == Failed("SMTP 421 4.3.2 at MAIL FROM")


async def test_a_refused_recipient_leaves_the_connection_usable(
        fake: FakeSmtp, build: Build) -> None:
    ch = build(fake.port)
    fake.rcpt_answer = "550 5.1.1 <gone@example.com>: Recipient address rejected"
    assert isinstance(await send(ch, step("gone@example.com")), Rejected)
    fake.rcpt_answer = None
    assert isinstance(await send(ch, step(no=2)), Sent)  # after a RSET, on the same session
    assert fake.connections == 1


async def test_connections_are_replaced_after_max_messages(fake: FakeSmtp, build: Build) -> None:
    ch = build(fake.port, max_messages_per_connection=2)
    for i in range(5):
        assert isinstance(await send(ch, step(no=i)), Sent)
    assert [r.connection for r in fake.received] == [1, 1, 2, 2, 3]


async def test_an_idle_connection_past_idle_timeout_is_not_reused(
        fake: FakeSmtp, build: Build) -> None:
    ch = build(fake.port, idle_timeout_sec=0)
    for i in range(2):
        assert isinstance(await send(ch, step(no=i)), Sent)
    assert fake.connections == 2


# -- outcomes --


@pytest.mark.parametrize(("where", "answer", "expected"), [
    ("RCPT", "550 5.1.1 <ada@example.com>: User unknown", Rejected("SMTP 550 5.1.1 at RCPT TO")),
    ("RCPT", "550 no such user ada@example.com", Rejected("SMTP 550 at RCPT TO")),
    ("RCPT", "553 5.1.3 bad address syntax", Rejected("SMTP 553 5.1.3 at RCPT TO")),
    ("RCPT", "450 4.2.0 <ada@example.com>: greylisted", Failed("SMTP 450 4.2.0 at RCPT TO")),
    ("RCPT", "451 4.3.0 try again later", Failed("SMTP 451 4.3.0 at RCPT TO")),
    ("RCPT", "554 5.7.1 <ada@example.com>: Relay access denied",
     Failed("SMTP 554 5.7.1 at RCPT TO: refused by policy or for our credentials, "
            "not the address")),
    ("RCPT", "530 5.7.0 Authentication required",
     Failed("SMTP 530 5.7.0 at RCPT TO: refused by policy or for our credentials, "
            "not the address")),
    ("RCPT", "552 5.5.3 too many recipients",
     Failed("SMTP 552 5.5.3 at RCPT TO: too many recipients, which RFC 5321 makes temporary")),
    ("DATA", "550 5.1.1 user unknown", Rejected("SMTP 550 5.1.1 at DATA")),
    ("DATA", "554 transaction failed", Rejected("SMTP 554 at DATA")),
    ("DATA", "451 4.7.1 greylisted, come back later", Failed("SMTP 451 4.7.1 at DATA")),
    ("DATA", "452 4.3.1 insufficient system storage", Failed("SMTP 452 4.3.1 at DATA")),
    ("DATA", "552 5.3.4 message too big",
     Failed("SMTP 552 5.3.4 at DATA: the server refused the message, not the address")),
    ("DATA", "554 5.7.1 DMARC policy rejects acme.example",
     Failed("SMTP 554 5.7.1 at DATA: refused by policy or for our credentials, not the address")),
    ("DATA", "552 5.2.2 mailbox full", Failed("SMTP 552 5.2.2 at DATA: mailbox full")),
    ("MAIL", "553 5.7.1 <no-reply@acme.example>: Sender address rejected",
     Failed("SMTP 553 5.7.1 at MAIL FROM: the server refused our sender")),
    ("MAIL", "451 4.3.0 try later", Failed("SMTP 451 4.3.0 at MAIL FROM")),
])
async def test_every_reply_maps_to_an_outcome(fake: FakeSmtp, build: Build, where: str,
                                              answer: str, expected: Any) -> None:
    if where == "RCPT":
        fake.rcpt_answer = answer
    elif where == "DATA":
        fake.data_answer = answer
    else:
        fake.mail_answers.append(answer)
    out = await send(build(fake.port))
    assert out == expected
    assert "@" not in out.reason  # the server's text (with addresses) never reaches a reason


async def test_connection_lost_after_data_is_unknown(fake: FakeSmtp, build: Build) -> None:
    fake.drop_at = "DATA"
    assert await send(build(fake.port)) == Unknown(
        "connection lost after DATA: the server may have the message")
    assert len(fake.received) == 1  # it did arrive: exactly why this is unknown


async def test_no_reply_after_data_is_unknown(fake: FakeSmtp, build: Build) -> None:
    fake.hold = asyncio.Event()
    assert await send(build(fake.port, timeout=0.3)) == Unknown(
        "no reply after DATA: the server may have the message")


async def test_a_timeout_before_data_is_failed(fake: FakeSmtp, build: Build) -> None:
    fake.hold_rcpt = asyncio.Event()
    assert await send(build(fake.port, timeout=0.3)) == Failed(
        "timeout at RCPT TO: nothing was sent")


async def test_a_refused_connection_is_failed(build: Build) -> None:
    with socket.socket() as s:  # a port that nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    assert await send(build(port)) == Failed("connect failed: ConnectionRefusedError")


async def test_a_server_that_never_greets_is_a_connect_timeout(build: Build) -> None:
    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read()  # accepts the connection, never says 220
        writer.close()

    server = await asyncio.start_server(silent, "127.0.0.1", 0)
    try:
        port = server.sockets[0].getsockname()[1]
        ch = build(port, connect_timeout_sec=0.3)
        assert await send(ch) == Failed("connect timed out")
        await ch.close()
    finally:
        server.close()
        await server.wait_closed()


async def test_a_554_greeting_is_failed(build: Build) -> None:
    async def refuse(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(b"554 5.7.1 no service for you\r\n")
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(refuse, "127.0.0.1", 0)
    try:
        ch = build(server.sockets[0].getsockname()[1])
        assert await send(ch) == Failed("SMTP 554 5.7.1 at connect")
        await ch.close()
    finally:
        server.close()
        await server.wait_closed()


async def scripted(replies: dict[bytes, bytes]) -> asyncio.Server:
    """A bare SMTP peer that answers each command word from a script: for replies that
    aiosmtpd will not send (not UTF-8, malformed, multi-line)."""
    async def session(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(b"220 raw.test ESMTP\r\n")
        while line := await reader.readline():
            verb = line.split()[0].upper() if line.strip() else b""
            if verb == b"DATA":
                writer.write(b"354 go ahead\r\n")
                while (await reader.readline()) not in (b".\r\n", b""):
                    pass
                verb = b"."
            writer.write(replies.get(verb, b"250 ok\r\n"))
            await writer.drain()
            if verb == b"QUIT":
                break
        writer.close()

    return await asyncio.start_server(session, "127.0.0.1", 0)


@pytest.mark.parametrize(("replies", "expected"), [
    ({b".": b"250-2.0.0 Ok\r\n250 2.0.0 queued as \xff\xfeBAD-\xc3\r\n"}, Sent),  # not UTF-8
    ({b".": b"\xff\xfe what is this\r\n"}, Unknown),  # no reply code at all after DATA
    ({b"RCPT": b"550 5.1.1 <ada@example.com> \xff\xfe gone\r\n"}, Rejected),
    ({b"RCPT": b"garbage\r\n"}, Failed),  # before DATA: nothing was sent
    ({b"EHLO": b"250-raw.test\r\n250-SIZE 1000\r\n250 8BITMIME\r\n"}, Sent),
])
async def test_replies_that_are_not_utf8_or_not_smtp(
        build: Build, replies: dict[bytes, bytes], expected: type) -> None:
    server = await scripted(replies)
    try:
        ch = build(server.sockets[0].getsockname()[1])
        out: Answer = await send(ch)
        assert isinstance(out, expected)
        said = out.detail if isinstance(out, Sent) else out.reason
        assert said is None or (said.isascii() and "@" not in said)
        await ch.close()
    finally:
        server.close()
        await server.wait_closed()


# -- AUTH and TLS --


async def test_auth_logs_in_and_a_refusal_is_failed_without_the_secret(build: Build) -> None:
    fake = await FakeSmtp().start(credentials=(b"mailer", b"s3cret-pw"))
    try:
        assert isinstance(await send(build(fake.port, username="mailer",
                                           password="s3cret-pw")), Sent)
        assert fake.auth_seen == [(b"mailer", b"s3cret-pw")]
        out = await send(build(fake.port, username="mailer", password="wrong-pw"))
        assert out == Failed("SMTP 535 5.7.8 at AUTH: the server refused our credentials")
        assert "wrong-pw" not in out.reason and "mailer" not in out.reason
        assert len(fake.received) == 1
    finally:
        await fake.stop()


@pytest.fixture(scope="module")
def cert(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return self_signed(tmp_path_factory.mktemp("tls"))


async def test_starttls_upgrades_before_anything_is_sent(
        build: Build, cert: tuple[Path, Path]) -> None:
    fake = await FakeSmtp().start(starttls=server_context(*cert),
                                  credentials=(b"mailer", b"pw"))
    try:
        ch = build(fake.port, tls="starttls", ca_file=str(cert[0]), username="mailer",
                   password="pw")
        assert isinstance(await send(ch), Sent)
        assert isinstance(await send(ch, step(no=2)), Sent)
        assert [r.tls for r in fake.received] == [True, True]
        assert fake.connections == 1
        # Without the CA, the certificate is not trusted: nothing is sent, and it is failed.
        out = await send(build(fake.port, tls="starttls", username="mailer", password="pw"))
        assert out == Failed("STARTTLS failed: SSLCertVerificationError")
        assert len(fake.received) == 2
    finally:
        await fake.stop()


async def test_starttls_missing_is_failed_never_a_downgrade(fake: FakeSmtp, build: Build) -> None:
    out = await send(build(fake.port, tls="starttls"))
    assert out == Failed("STARTTLS: the server offers none that we can use")
    assert fake.received == []


async def test_implicit_tls(build: Build, cert: tuple[Path, Path]) -> None:
    fake = await FakeSmtp().start(tls=server_context(*cert))
    try:
        assert isinstance(await send(build(fake.port, tls="tls", ca_file=str(cert[0]))), Sent)
        out = await send(build(fake.port, tls="tls"))
        assert out == Failed("connect failed: SSLCertVerificationError")
        assert isinstance(await send(build(fake.port, tls="tls", tls_verify=False)), Sent)
    finally:
        await fake.stop()
