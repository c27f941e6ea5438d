"""Request-body checks every endpoint shares; each failure is an DomainError naming the field."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Any

import orjson

from notifyd.core.bounded import MAX_DEPTH, deeper_than
from notifyd.core.errors import DomainError

MAX_ID_LEN = 256
# RFC 3339's date-time, as the API writes its times: 2026-09-21T14:13:20.000Z, or with an offset.
RFC3339 = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}[Tt][0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]{1,9})?"
                     r"([Zz]|[+-][0-9]{2}:[0-9]{2})")
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def parse_object(body: bytes) -> dict[str, Any]:
    try:
        data = orjson.loads(body)  # also refuses NaN, absurd nesting and >64-bit integers
    except orjson.JSONDecodeError:
        raise DomainError("invalid_json", "the request body is not valid JSON") from None
    if not isinstance(data, dict):
        raise DomainError("body_not_object", "the request body must be a JSON object")
    return data


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


def header_value(value: str | None, name: str, max_len: int = MAX_ID_LEN) -> str | None:
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


def check_fields(data: dict[str, Any], allowed: frozenset[str]) -> None:
    for name in data:
        if name not in allowed:
            raise DomainError("unknown_field", f"unknown field {name!r}; known: "
                           f"{', '.join(sorted(allowed))}", name)


def get_str(data: dict[str, Any], name: str, required: bool = True,
            max_len: int = MAX_ID_LEN) -> str | None:
    value = data.get(name)
    if value is None:
        if required:
            raise DomainError("missing_field", f"{name} is required", name)
        return None
    if not isinstance(value, str) or not value or len(value) > max_len:
        raise DomainError("invalid_field", f"{name} must be a non-empty string of at most "
                       f"{max_len} characters", name)
    return value


def get_time(data: dict[str, Any], name: str) -> int | None:
    """An optional RFC 3339 date-time with its offset (2026-09-21T14:13:20Z) as epoch ms."""
    value = data.get(name)
    if value is None:
        return None
    shape = (f"{name} must be an RFC 3339 date-time with its offset, such as "
             "2026-09-21T14:13:20Z")
    if not isinstance(value, str) or not RFC3339.fullmatch(value):
        raise DomainError("invalid_field", shape, name)
    text = value.upper().replace("Z", "+00:00")
    whole, dot, rest = text.partition(".")
    if dot:  # datetime reads at most microseconds
        digits = rest[:-6]
        text = f"{whole}.{digits[:6].ljust(6, '0')}{rest[-6:]}"
    try:
        return (datetime.fromisoformat(text) - EPOCH) // timedelta(milliseconds=1)
    except (ValueError, OverflowError):  # a 30 February, an hour 24, a leap second
        raise DomainError("invalid_field", f"{shape}; {value!r} is no such time", name) from None


def parse_items(body: bytes, most: int) -> list[Any]:
    """A batch's envelope, {"items": [...]} with 1..`most` items; each item is checked on its
    own by the call it stands for."""
    data = parse_object(body)
    check_fields(data, frozenset({"items"}))
    items = data.get("items")
    if items is None:
        raise DomainError("missing_field", 'items is required: {"items": [...]}', "items")
    if not isinstance(items, list) or not 1 <= len(items) <= most:
        raise DomainError("invalid_field", f"items must be a list of 1..{most} items", "items")
    return items
