"""Small text helpers every layer shares: ASCII digits, counted nouns, ISO times."""

from __future__ import annotations

from datetime import UTC, datetime


def is_digits(text: str) -> bool:
    """ASCII digits only: str.isdigit() also takes '²' and '٣', which int() then refuses or reads
    as numbers nobody wrote."""
    return bool(text) and text.isascii() and text.isdigit()


def plural(n: int, word: str) -> str:
    """'1 step', '2 steps'."""
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def iso(ms: int | None) -> str | None:
    if ms is None:
        return None
    return datetime.fromtimestamp(ms / 1000, tz=UTC).isoformat(timespec="milliseconds")
