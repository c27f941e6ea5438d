"""Request-body checks every endpoint shares; each failure is an ApiError naming the field."""

from __future__ import annotations

from typing import Any

import orjson

from notifyd.errors import ApiError

MAX_ID_LEN = 256


def parse_object(body: bytes) -> dict[str, Any]:
    try:
        data = orjson.loads(body)  # also refuses NaN, absurd nesting and >64-bit integers
    except orjson.JSONDecodeError:
        raise ApiError("invalid_json") from None
    if not isinstance(data, dict):
        raise ApiError("body_not_object")
    return data


def check_fields(data: dict[str, Any], allowed: frozenset[str]) -> None:
    for name in data:
        if name not in allowed:
            raise ApiError("unknown_field", f"unknown field {name!r}; known: "
                           f"{', '.join(sorted(allowed))}", name)


def get_str(data: dict[str, Any], name: str, required: bool = True,
            max_len: int = MAX_ID_LEN) -> str | None:
    value = data.get(name)
    if value is None:
        if required:
            raise ApiError("missing_field", f"{name} is required", name)
        return None
    if not isinstance(value, str) or not value or len(value) > max_len:
        raise ApiError("invalid_field", f"{name} must be a non-empty string of at most "
                       f"{max_len} characters", name)
    return value
