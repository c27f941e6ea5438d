"""What request checks share beyond a body's shape (notifyd/shapes): a JSON merge patch, the
nesting params may have, a header as stored text, an RFC 3339 time as epoch ms, a request's
hash. Each failure is a DomainError naming the field."""

from __future__ import annotations

import hashlib
import re
from datetime import UTC, datetime, timedelta
from typing import Any

import msgspec
import orjson

from notifyd.core.bounded import MAX_DEPTH, deeper_than
from notifyd.core.errors import DomainError
from notifyd.shapes import common
from notifyd.shapes.common import ID_MAX, SEND_AT_SHAPE

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
RFC3339 = re.compile(common.RFC3339.removeprefix("^").removesuffix("$"))


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7396 JSON merge patch: an object's members merge, member by member, into the target's
    (null removes one); anything else replaces the target whole."""
    if not isinstance(patch, dict):
        return patch
    merged = dict(target) if isinstance(target, dict) else {}
    for name, value in patch.items():
        if value is None:
            merged.pop(name, None)
        else:
            merged[name] = merge_patch(merged.get(name), value)
    return merged


def check_depth(value: Any, field: str, limit: int = MAX_DEPTH) -> None:
    """Refuse JSON nested deeper than `limit` objects or arrays (a 422, never a 500)."""
    if deeper_than(value, limit):
        raise DomainError("invalid_field", f"{field} nests deeper than {limit} levels", field)


def header_value(value: str | None, name: str, max_len: int = ID_MAX) -> str | None:
    """A header as text we can store and echo: printable UTF-8 of 1..max_len characters."""
    if value is None:
        return None
    try:
        value.encode("utf-8")  # bytes that were not UTF-8 arrive as lone surrogates
    except UnicodeEncodeError:
        raise DomainError("invalid_field", f"{name} must be UTF-8 text", name) from None
    if not value or len(value) > max_len or not value.isprintable():
        raise DomainError("invalid_field", f"{name} must be 1..{max_len} printable characters",
                          name)
    return value


def time_ms(value: str | None, name: str) -> int | None:
    """An RFC 3339 date-time with its offset (2026-09-21T14:13:20Z) as epoch ms; a date no
    calendar has (30 February, hour 24, a leap second) refused."""
    if value is None:
        return None
    if not RFC3339.fullmatch(value):
        raise DomainError("invalid_field", f"{name} must be {SEND_AT_SHAPE}", name)
    text = value.upper().replace("Z", "+00:00")
    whole, dot, rest = text.partition(".")
    if dot:  # datetime reads at most microseconds
        digits = rest[:-6]
        text = f"{whole}.{digits[:6].ljust(6, '0')}{rest[-6:]}"
    try:
        return (datetime.fromisoformat(text) - EPOCH) // timedelta(milliseconds=1)
    except (ValueError, OverflowError):
        raise DomainError("invalid_field", f"{name} must be {SEND_AT_SHAPE}; {value!r} is no "
                          "such time", name) from None


def request_hash(compared: list[Any], params: int) -> tuple[Any, str]:
    """(compared[params], the sha256 of `compared` as canonical JSON): what tells a retry of a
    dedup key from other input. The params are as orjson reads JSON: an integer past 64 bits a
    float (msgspec keeps it whole), so the params and the hash are what they always were."""
    try:
        canonical = orjson.dumps(compared, option=orjson.OPT_SORT_KEYS)
    except orjson.JSONEncodeError:
        compared[params] = orjson.loads(msgspec.json.encode(compared[params]))
        canonical = orjson.dumps(compared, option=orjson.OPT_SORT_KEYS)
    return compared[params], hashlib.sha256(canonical).hexdigest()
