"""Small text helpers every layer shares: ASCII digits, whole numbers, counted nouns, ISO times."""

from __future__ import annotations

from datetime import UTC, datetime


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
