"""JSON from outside, read within the limits the producers' API keeps: orjson's parser (no Python
recursion; it refuses NaN, invalid UTF-8 and nesting past 1,024 levels), then at most MAX_DEPTH
levels of objects and arrays. Every parser of input that arrives without a key reads through here
(user tokens, unsubscribe links, providers' webhook bodies): nesting is a refusal, never a
RecursionError. The size is bounded before: server.max_body_bytes, a token's own limit.
"""

from __future__ import annotations

from typing import Any

import orjson

MAX_DEPTH = 32  # params nest at most this deep (orjson parses 1024 levels but writes 254)


class TooDeep(ValueError):
    """Valid JSON, nested past the limit."""


def deeper_than(value: Any, limit: int = MAX_DEPTH) -> bool:
    """Whether objects and arrays nest more than `limit` levels in `value` (one level: {} or [])."""
    level: list[Any] = [value] if isinstance(value, dict | list) else []
    for _ in range(limit):
        level = [v for item in level for v in (item.values() if isinstance(item, dict) else item)
                 if isinstance(v, dict | list)]
        if not level:
            return False
    return True


def load_json(data: bytes | str, limit: int = MAX_DEPTH) -> Any:
    """The JSON value of `data`; ValueError if it is not JSON (orjson.JSONDecodeError is one),
    TooDeep if it nests past `limit`."""
    value = orjson.loads(data)
    if deeper_than(value, limit):
        raise TooDeep(f"nests deeper than {limit} levels")
    return value
