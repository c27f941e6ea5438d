"""Small text helpers every layer shares: ASCII digits, whole numbers, counted nouns, ISO times,
and a database URL without its secrets."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from urllib.parse import unquote_plus


def is_digits(text: str) -> bool:
    """ASCII digits only: str.isdigit() also takes '²' and '٣', which int() then refuses or reads
    as numbers nobody wrote."""
    return bool(text) and text.isascii() and text.isdigit()


INT64_MAX = 2**63 - 1  # the largest integer SQLite stores


def whole_number(text: str, most: int = INT64_MAX, least: int = 0) -> int | None:
    """`text` as a whole number in least..most, or None: ASCII digits, and no more of them than a
    64-bit integer has, checked before int() reads them (it raises past 4,300 digits; SQLite
    takes nothing past INT64_MAX)."""
    if not is_digits(text) or len(text) > len(str(INT64_MAX)):
        return None
    value = int(text)
    return value if least <= value <= most else None


def plural(n: int, word: str) -> str:
    """'1 step', '2 steps'."""
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def them(n: int) -> str:
    """What stands for `n` things after a verb: 'it' for one, 'them' for more."""
    return "it" if n == 1 else "them"


def iso(ms: int | None) -> str | None:
    if ms is None:
        return None
    return datetime.fromtimestamp(ms / 1000, tz=UTC).isoformat(timespec="milliseconds")


# --- secrets in a database URL ----------------------------------------------------------------

SECRET_PARAM = re.compile(r"pass|secret|token", re.IGNORECASE)  # password, sslpassword, ...
HIDDEN = "***"


def url_secrets(url: str) -> list[str]:
    """The secrets written in a database URL: the password of user:password@ and the value of
    every password-like query parameter (password=, sslpassword=), each as written and
    percent-decoded, longest first. Read leniently, as a URL libpq may refuse: the user part
    ends at the last '@' before the query."""
    found: list[str] = []
    rest = url.split("://", 1)[1] if "://" in url else url
    head, _, query = rest.partition("?")
    if "@" in head:
        user = head[:head.rindex("@")]
        if ":" in user:
            found.append(user.split(":", 1)[1])
    for pair in query.split("&"):
        name, eq, value = pair.partition("=")
        if eq and SECRET_PARAM.search(unquote_plus(name)):
            found.append(value)
    found += [unquote_plus(s) for s in found]
    return sorted({s for s in found if s}, key=len, reverse=True)


def redact_url(url: str) -> str:
    """`url` as it may be shown (log lines, errors, a command's output): its password and
    password-like query parameters replaced by ***."""
    scheme, sep, rest = url.partition("://") if "://" in url else ("", "", url)
    head, q, query = rest.partition("?")
    if "@" in head:
        at = head.rindex("@")
        user = head[:at]
        if ":" in user:
            head = f"{user.split(':', 1)[0]}:{HIDDEN}{head[at:]}"
    pairs = []
    for pair in query.split("&") if q else []:
        name, eq, value = pair.partition("=")
        pairs.append(f"{name}={HIDDEN}" if eq and SECRET_PARAM.search(unquote_plus(name))
                     else pair)
    return f"{scheme}{sep}{head}{q}{'&'.join(pairs)}"


def redact_in(text: str, url: str) -> str:
    """`text` (a driver's error, which may quote a piece of the URL it could not read) with
    every secret of `url` replaced by ***."""
    for secret in url_secrets(url):
        text = text.replace(secret, HIDDEN)
    return text
