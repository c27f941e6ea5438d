"""The webhook channel: POST the frozen payload as JSON with an Idempotency-Key header.

2xx Sent (provider_ref from the body's "id", else the X-Request-Id header); 408, 429 and 5xx
Failed, honouring Retry-After; 401, 403 and redirects Failed too (our configuration is at fault,
not the recipient); other 4xx Rejected. A refused connection never left us: Failed. A timeout or
a connection lost after the request was written: Unknown. Reasons keep the status and a short
provider error code, never the provider's free text.
"""

from __future__ import annotations

import email.utils
import json
import re
import time

import aiohttp

from notifyd.channels.base import Failed, Message, Outcome, Rejected, Sent, Unknown

RETRYABLE = frozenset({408, 429})
CODE_RE = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")


def parse_retry_after(value: str | None, now: float | None = None) -> float | None:
    """Retry-After as seconds: delta-seconds or an HTTP date (RFC 9110 section 10.2.3)."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


class WebhookChannel:
    def __init__(self, name: str, url: str, timeout_sec: float, max_connections: int = 100) -> None:
        self.name = name
        self.url = url
        self.timeout = aiohttp.ClientTimeout(total=timeout_sec)
        # As many connections as the lanes may send at once: a send must never wait for a
        # pooled connection, or that wait would eat its timeout and end as a false unknown.
        self.max_connections = max_connections
        self._session: aiohttp.ClientSession | None = None

    def _client(self) -> aiohttp.ClientSession:
        if self._session is None:
            self._session = aiohttp.ClientSession(
                timeout=self.timeout, connector=aiohttp.TCPConnector(limit=self.max_connections))
        return self._session

    async def send(self, message: Message) -> Outcome:
        body = json.dumps(message.payload, sort_keys=True).encode()
        headers = {"Content-Type": "application/json",
                   "Idempotency-Key": message.idempotency_key}
        try:
            async with self._client().post(message.destination, data=body, headers=headers,
                                           allow_redirects=False) as resp:
                text = await resp.text()
                return _classify(resp.status, resp.headers, text)
        except aiohttp.ClientConnectorError as e:
            return Failed(f"connect failed: {e.os_error or e}")
        except aiohttp.ConnectionTimeoutError:  # before TimeoutError: nothing was sent
            return Failed("connect timed out")
        except TimeoutError:
            return Unknown("timeout: the provider may have the message")
        except (aiohttp.ServerDisconnectedError, aiohttp.ClientOSError,
                aiohttp.ClientPayloadError) as e:
            return Unknown(f"connection lost after sending: {type(e).__name__}")

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None


def _classify(status: int, headers: aiohttp.typedefs.LooseHeaders, text: str) -> Outcome:
    get = getattr(headers, "get", lambda _k: None)
    data = _json(text)
    if 200 <= status < 300:
        ref = data.get("id") if isinstance(data, dict) else None
        return Sent(str(ref) if ref is not None else get("X-Request-Id"))
    reason = f"HTTP {status}{_provider_code(data)}"
    if 300 <= status < 400:
        return Failed(f"{reason}: the webhook URL redirects; configure where it leads")
    if status in (401, 403):  # our credentials, not the recipient's contact, are at fault
        return Failed(f"{reason}: the endpoint refused our credentials")
    if status in RETRYABLE or status >= 500:
        return Failed(reason, parse_retry_after(get("Retry-After")))
    return Rejected(reason)


def _json(text: str) -> object:
    try:
        return json.loads(text) if text else None
    except ValueError:
        return None


def _provider_code(data: object) -> str:
    """A provider's short error code, never its free text: that may echo what we sent (a
    one-time code, say) and the reason is shown to tenants and in inspect."""
    if isinstance(data, dict):
        for key in ("code", "error_code", "errorCode", "error"):
            value = data.get(key)
            if isinstance(value, str | int) and CODE_RE.match(str(value)):
                return f" {value}"
    return ""
