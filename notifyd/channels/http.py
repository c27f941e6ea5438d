"""What every HTTP provider adapter shares: one POST with its transport failures mapped one way,
bounded reads, Retry-After, short provider codes.

Provider bodies are bytes: an adapter parses what it needs and never fails on what it does not.
"""

from __future__ import annotations

import base64
import email.utils
import re
import time
from collections.abc import Callable
from typing import Any, TypeVar

from notifyd.channels.base import Failed, Outcome, Unknown
from notifyd.channels.types.checks import parse_json, url_problem
from notifyd.channels.wire import Client, Lost, NotSent

__all__ = ["MAX_BODY_BYTES", "basic_auth", "parse_json", "parse_retry_after", "post",
           "provider_code", "url_problem"]

MAX_BODY_BYTES = 64 * 1024  # a provider answer is read up to this, never whole
CODE_RE = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")


A = TypeVar("A", bound=Outcome)


async def post(client: Client, url: str, body: bytes, headers: dict[str, str],
               classify: Callable[[int, Any, bytes], A], who: str = "the provider",
               timeout: float | None = None) -> A | Failed | Unknown:
    """POST `body` and classify (status, headers, body) into the provider's answer. Nothing left
    us (refused, DNS, TLS, a connect timeout, a bad URL): Failed. It may have arrived (a
    timeout, the connection lost after sending): Unknown, retried under the same key. Reasons
    name the error's class, never its text, which carries the host and port of a URL that may
    hold a secret."""
    try:
        answer = await client.post(url, body, headers, timeout, MAX_BODY_BYTES)
    except NotSent as e:
        return Failed(e.reason)
    except Lost as e:
        return Unknown(e.reason)
    except TimeoutError:
        return Unknown(f"timeout: {who} may have the message")
    return classify(answer.status, answer.headers, answer.body)


def parse_retry_after(value: str | None, now: float | None = None) -> float | None:
    """Retry-After as seconds: delta-seconds or an HTTP date (RFC 9110 section 10.2.3)."""
    if not value:
        return None
    value = value.strip()
    if value.isascii() and value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


def provider_code(data: object, keys: tuple[str, ...] = ("code", "error_code", "errorCode",
                                                          "error")) -> str:
    """A provider's short error code (" CODE"), never its free text: that may echo what we sent
    (a one-time code, say), and the reason is shown to tenants and in inspect."""
    if isinstance(data, dict):
        for key in keys:
            value = data.get(key)
            if isinstance(value, str | int) and CODE_RE.match(str(value)):
                return f" {value}"
    return ""


def basic_auth(user: str, password: str) -> str:
    """RFC 7617 credentials for the Authorization header."""
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode("ascii")
