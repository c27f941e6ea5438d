"""An email's MIME bytes from its frozen parts, written once for the channels that hand a whole
message over: smtp (DATA) and ses with raw content (Content.Raw.Data).

- RFC 2045 6.7: quoted-printable lines are at most 76 characters and "=" is always encoded, so a
  boundary starting "=_" cannot occur in a body (RFC 2046 5.1.1). RFC 2047 2: encoded-words of
  at most 75 characters. RFC 5322 2.1.1: header lines at most 998.
- email.policy.SMTP turns a long header without spaces (a URL) into encoded-words, which breaks
  List-Unsubscribe: headers other than From, Subject and Reply-To are written as they are.
"""

from __future__ import annotations

import binascii
import email.policy
import hashlib
from collections.abc import Mapping
from typing import Any

FOLD_AT = 78
HEADERS = email.policy.SMTP  # CRLF, folding at 78, RFC 2047 encoded-words
FOLDED = frozenset({"From", "Subject", "Reply-To"})  # may need encoded-words; the rest is ASCII


def build_message(p: Mapping[str, Any]) -> bytes:
    """The MIME bytes of a frozen payload: a pure function of it, so a retry sends the same
    bytes. UTF-8 bodies in quoted-printable keep every line 7-bit and short, so no server
    needs 8BITMIME or SMTPUTF8; the multipart boundary comes from the Message-ID."""
    head = [("Date", p["date"]), ("From", p["from"]), ("To", p["to"]),
            ("Subject", p["subject"]), ("Message-ID", p["message_id"]),
            *((str(n), str(v)) for n, v in p["headers"]), ("MIME-Version", "1.0")]
    out = "".join(header_line(n, v) for n, v in head).encode("ascii")
    if p.get("html") is None:
        return out + text_part(p["text"], "plain")
    # "=_" never occurs in quoted-printable text, so this boundary cannot clash with a body.
    boundary = f"=_notifyd_{hashlib.sha256(p['message_id'].encode()).hexdigest()[:32]}"
    delimiter = f"\r\n--{boundary}\r\n".encode("ascii")
    return b"".join([
        out, f'Content-Type: multipart/alternative; boundary="{boundary}"\r\n'.encode("ascii"),
        delimiter, text_part(p["text"], "plain"), delimiter, text_part(p["html"], "html"),
        f"\r\n--{boundary}--\r\n".encode("ascii")])


def text_part(text: str, subtype: str) -> bytes:
    """A UTF-8 text/* entity in quoted-printable (binascii's encoder: lines of at most 76,
    "=", trailing blanks and 8-bit bytes encoded; the email package's is pure Python and
    made a message cost a millisecond). Line ends become CRLF, as on the wire."""
    lines = text.encode("utf-8").splitlines()  # bytes: CR, LF or CRLF only
    body = binascii.b2a_qp(b"\n".join(lines) + b"\n", istext=True).replace(b"\n", b"\r\n")
    return (f'Content-Type: text/{subtype}; charset="utf-8"\r\n'
            "Content-Transfer-Encoding: quoted-printable\r\n\r\n").encode("ascii") + body


def header_line(name: str, value: str) -> str:
    line = f"{name}: {value}"
    if name not in FOLDED or (value.isascii() and len(line) <= FOLD_AT):
        return line + "\r\n"  # ASCII that render checked: no fold needed, and none wanted
    return str(HEADERS.header_factory(name, value).fold(policy=HEADERS))
