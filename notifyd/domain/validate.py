"""Request-body checks every endpoint shares; each failure is an DomainError naming the field."""

from __future__ import annotations

from typing import Any

import orjson

from notifyd.core.bounded import MAX_DEPTH, deeper_than
from notifyd.core.errors import DomainError

MAX_ID_LEN = 256


def parse_object(body: bytes) -> dict[str, Any]:
    try:
        data = orjson.loads(body)  # also refuses NaN, absurd nesting and >64-bit integers
    except orjson.JSONDecodeError:
        raise DomainError("invalid_json", "the request body is not valid JSON") from None
    if not isinstance(data, dict):
        raise DomainError("body_not_object", "the request body must be a JSON object")
    return data


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
