"""The smtp channel's declaration: its server, login, addresses and connection pool (the adapter:
channels/smtp.py), and the address checks both read."""

from __future__ import annotations

import re
from dataclasses import dataclass
from email.headerregistry import Address
from email.utils import parseaddr

from notifyd.channels.base import Adapter, ChannelType
from notifyd.core.contacts import EMAIL
from notifyd.core.fields import Checked, Problems, doc, sensitive

TLS_MODES = ("starttls", "tls", "none")
LOOPBACK = frozenset({"localhost", "127.0.0.1", "::1"})
# The relays whose receipts find their step by the key in their own metadata header (the
# adapter's RELAY_HEADER writes each).
RELAYS = ("sendgrid", "mailgun", "postmark", "ses")
# Header values must never break a line: CR and LF, and every other character that
# str.splitlines() (which the email package folds with) treats as a line boundary.
LINE_BREAKS = re.compile(r"[\x00-\x08\x0a-\x1f\x7f\x85\u2028\u2029]")
ATEXT = r"[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+"
DOT_ATOM = re.compile(rf"^{ATEXT}(?:\.{ATEXT})*$")
LABEL = re.compile(r"^(?!-)[A-Za-z0-9-]{1,63}(?<!-)$")
NOT_SENDER = 'must be an email address: "addr@domain" or "Name <addr@domain>"'


def mailbox(address: str) -> str:
    """An addr-spec we can send to (domain as IDNA ASCII), or ValueError. Local parts are
    dot-atoms of ASCII: a quoted or non-ASCII one would need SMTPUTF8, which we do not use."""
    if LINE_BREAKS.search(address):
        raise ValueError("a line break or control character in an address")
    local, at, domain = address.rpartition("@")
    if not at or not local or len(local) > 64 or not DOT_ATOM.match(local):
        raise ValueError("not a mailbox: local@domain")
    try:
        domain = domain.encode("idna").decode("ascii")
    except UnicodeError:
        raise ValueError("not a domain name") from None
    return f"{local}@{check_domain(domain)}"


def check_domain(domain: str) -> str:
    labels = domain.split(".")
    if len(labels) < 2 or len(domain) > 253 or not all(LABEL.match(x) for x in labels):
        raise ValueError("not a domain name")
    return domain


def parse_sender(value: str) -> Address:
    """A "Name <addr@domain>" or "addr@domain" setting as a display name and checked address."""
    if LINE_BREAKS.search(value):
        raise ValueError("a line break in an address setting")
    name, addr = parseaddr(value)
    local, _, domain = mailbox(addr).rpartition("@")
    return Address(display_name=name, username=local, domain=domain)


def _host_problem(host: str) -> str | None:
    if not host or LINE_BREAKS.search(host) or " " in host:
        return "an smtp channel needs the server's host name or address"
    return None


def _sender_problem(value: str) -> str | None:
    try:
        parse_sender(value)
    except ValueError:
        return NOT_SENDER
    return None


def _optional_sender_problem(value: str) -> str | None:
    return _sender_problem(value) if value else None


def _domain_problem(value: str) -> str | None:
    try:
        if value:
            check_domain(value)
    except ValueError:
        return "must be a domain name"
    return None


@dataclass(frozen=True)
class SmtpSettings(Checked):
    host: str = doc("The SMTP server: a local relay or a provider's submission host.", "",
                    check=_host_problem)
    port: int = doc("Its port: 587 for STARTTLS submission, 465 for implicit TLS, 25 for a relay.",
                    587, ge=1, le=65535)
    tls: str = doc('"starttls" (upgrade after connecting; a server that does not offer it is an '
                   'error, never a silent downgrade), "tls" (TLS from the first byte, usually '
                   'port 465) or "none" (a relay on this host or a trusted network).', "starttls",
                   choices=TLS_MODES)
    tls_verify: bool = doc("Check the server's certificate and name; turn off only for a relay "
                           "you trust on a private network.", True)
    ca_file: str = doc("A PEM file of CA certificates to trust instead of the system's (a "
                       "private relay's CA). Empty: the system's.", "")
    username: str = doc("SMTP AUTH user; the channel logs in only when this is set.", "")
    password: str = sensitive("SMTP AUTH password (a secret: an app password or the provider's "
                              "SMTP key).", "")
    from_address: str = doc('The From header: "Name <addr@domain>" or "addr@domain". The key is '
                            'from_address because "from" is a Python keyword.', "",
                            check=_sender_problem)
    envelope_from: str = doc("The envelope sender (MAIL FROM), where bounces go. Empty: the From "
                             "address.", "", check=_optional_sender_problem)
    reply_to: str = doc("A Reply-To header, when replies should go elsewhere than From. Empty: "
                        "none.", "", check=_optional_sender_problem)
    message_id_domain: str = doc("The domain in Message-ID headers. Empty: the From address's "
                                 "domain.", "", check=_domain_problem)
    helo_name: str = doc("The name this host gives in EHLO. Empty: its fully qualified name.", "")
    relay: str = doc('The relay behind host, if its receipts should find their step by the key '
                     'in its own metadata header: "sendgrid", "mailgun", "postmark" (which needs '
                     'it) or "ses". Empty: receipts match by Message-ID only.', "",
                     choices=("", *RELAYS))
    connect_timeout_sec: float = doc("How long connecting, TLS and login may take (within the "
                                     "channel's timeout_sec); a connect timeout is failed, "
                                     "never unknown.", 10.0, gt=0)
    idle_timeout_sec: float = doc("A pooled connection idle this long is closed rather than "
                                  "reused (servers drop idle sessions).", 60.0, ge=0)
    max_messages_per_connection: int = doc("Messages sent over one connection before it is "
                                           "replaced (some providers cap it); 0: no limit.", 0,
                                           ge=0)

    def rules(self) -> Problems:
        out = []
        if self.password and not self.username:
            out.append(("password", "is set but username is empty"))
        if self.username and self.tls == "none" and self.host not in LOOPBACK:
            out.append(("tls", "with a username, tls = none would send the password in clear "
                               "over the network: use starttls or tls"))
        return out


TYPE = ChannelType("smtp", "sends email through an SMTP server (a relay or a provider's "
                   "submission host), reusing connections", SmtpSettings, EMAIL,
                   Adapter("notifyd.channels.smtp"), medium="email")
