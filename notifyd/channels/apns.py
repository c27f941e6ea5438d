"""The apns channel: push to a user's Apple devices through APNs' provider API, token-based, over
HTTP/2.

One POST per device to {origin}/3/device/{token}, on HTTP/2 over TLS, with `authorization:
bearer <provider token>`: an ES256 JWT ({alg, kid: key_id}.{iss: team_id, iat}) signed with
the .p8 key, one per (team, key) in the process, reused until it is 50 minutes old. Headers:
apns-topic (the bundle ID), apns-push-type alert, apns-priority 10 (urgent kinds) or 5,
apns-expiration (the step's deadline, epoch seconds; 0 when none is left), apns-collapse-id (the
kind's collapse_key), apns-id (a UUID made from the step key and device, the same on every
retry, so Apple's logs and ours name one notification). The body is {"aps": {"alert": {title,
body}, "sound"?}, "notifyd_key": "<step key>:<device id>"} (the app may report it to your
backend, which signs it to the delivery-receipt webhook: APNs itself sends no delivery
receipts).

Answers, per device: 200 Sent (provider_ref = apns-id). 410 (Unregistered, ExpiredToken) and 400
BadDeviceToken Rejected: the device is disabled, as web push's 404/410 are. Every other answer
Failed: 400 DeviceTokenNotForTopic final (the token is another app's, or our topic is wrong: a
wrong topic would say it of every device, so none is disabled), the other 400s and 413 final
(our request), 403 (ExpiredProviderToken drops the token, unless made in the last 20 minutes;
InvalidProviderToken and the rest: our key, team or topic), 404/405 (base_url), 429 and 5xx
retried, honouring Retry-After. Nothing left us (refused, DNS, TLS, the proxy): Failed; a timeout
or a connection lost after sending (a GOAWAY included): Unknown.

Wire facts relied on (checked with the search tool):
- https://developer.apple.com/documentation/usernotifications/sending-notification-requests-to-apns
  (HTTP/2 and TLS 1.2, api.push.apple.com / api.sandbox.push.apple.com, POST /3/device/<token>,
  the apns-* headers, apns-expiration 0 = do not store, priority 10 / 5, collapse id at most 64
  bytes, payload at most 4096 bytes; "when using an authentication token, APNs allows only one
  stream until you post a request with a valid authentication token").
- https://developer.apple.com/documentation/usernotifications/establishing-a-token-based-connection-to-apns
  (header alg ES256 and kid; claims iss = Team ID, iat; refresh "no more than once every 20
  minutes and no less than once every 60 minutes"; ExpiredProviderToken,
  TooManyProviderTokenUpdates).
- https://developer.apple.com/documentation/usernotifications/handling-notification-responses-from-apns
  (status codes, the JSON {"reason", "timestamp"} body, the reason strings; the body may come in a
  GOAWAY frame too).

HTTP/2 comes from httpx with h2 (channels/wire.py speaks HTTP/1.1 only): well kept, asyncio,
TLS with ALPN, connection pooling with many streams on one connection, and CONNECT tunnels
through the egress proxy with HTTP/2 inside them. aioapns was the other candidate: it fixes the
host (no stand-in, no gateway), speaks to no proxy and brings its own retry policy, which is the
sender's job here. TLS only: the base_url must be https; the trust store is the system's (or
SSL_CERT_FILE's), in a context of its own (httpx sets ALPN on it).
"""

from __future__ import annotations

import asyncio
import json
import re
import ssl
import uuid
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import httpx
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from notifyd.channels import jws
from notifyd.channels.base import (
    Answer,
    Failed,
    Fanout,
    Limits,
    Message,
    Outcome,
    Rejected,
    Rendered,
    RenderError,
    RenderInput,
    Sent,
    Unknown,
)
from notifyd.channels.egress import Egress
from notifyd.channels.http import MAX_BODY_BYTES, parse_json, parse_retry_after, provider_code
from notifyd.channels.types.apns import TYPE as TYPE
from notifyd.channels.types.apns import ApnsSettings, load_key
from notifyd.core.clock import Clock, SystemClock

REFRESH_SEC = 50 * 60  # a token is made again at this age; APNs refuses one over an hour old
MIN_REMAKE_SEC = 20 * 60  # never sooner than this after the last (TooManyProviderTokenUpdates)
MAX_PAYLOAD_BYTES = 4096
MAX_COLLAPSE_ID_BYTES = 64
TOKEN_RE = re.compile(r"(?:[0-9a-f]{2}){16,200}")
KEY_FIELD = "notifyd_key"  # the body key carrying "{idempotency_key}:{device_id}"
CONNECTIONS_PER_SEND = 4  # a step fans out to the user's devices at once (streams, mostly)
APNS_ID = uuid.UUID("6d0f3a6c-8a4e-4f59-9d3e-3c1f5b2a7e10")  # namespace of our apns-id UUIDs

# What each refusal says (the reason strings of Apple's table); a code not here is Failed.
DEAD = {"Unregistered": "the device token is no longer active for the topic",
        "ExpiredToken": "the device token has expired",
        "BadDeviceToken": "not a device token of this environment"}
ANSWERS_OURS = {
    "DeviceTokenNotForTopic": "the token is another app's, or topic is wrong; the device is kept",
    "TopicDisallowed": "this key may not push to the topic",
    "BadTopic": "the topic is not valid", "MissingTopic": "the topic is missing",
    "InvalidProviderToken": "APNs refused the provider token: check team_id, key_id and the key",
    "MissingProviderToken": "no provider token was sent",
    "Forbidden": "the key may not do this (environment or topic)",
}


@dataclass
class ProviderToken:
    """The provider token of one (team, key): made when none is, reused until REFRESH_SEC old,
    never made again within MIN_REMAKE_SEC of the last (APNs answers that with
    TooManyProviderTokenUpdates). Shared by every channel of the process that signs with it,
    so reloads and sandbox-and-production pairs reuse it."""

    team_id: str
    key_id: str
    key: ec.EllipticCurvePrivateKey
    token: str = ""
    made_at: float = 0.0  # epoch seconds

    def get(self, now: float) -> str:
        if not self.token or now - self.made_at >= REFRESH_SEC:
            self.token = jws.es256(self.key, {"kid": self.key_id},
                                   {"iss": self.team_id, "iat": int(now)})
            self.made_at = now
        return self.token

    def stale(self, token: str, now: float) -> bool:
        """APNs called `token` expired (our clock is behind, or it was kept too long): drop it
        so the next send makes another, unless the last was made within MIN_REMAKE_SEC."""
        if token != self.token or now - self.made_at < MIN_REMAKE_SEC:
            return False
        self.token = ""
        return True


_TOKENS: dict[tuple[str, str, bytes], ProviderToken] = {}


def provider_token(team_id: str, key_id: str, key: ec.EllipticCurvePrivateKey) -> ProviderToken:
    """The process's token for this team and key (the key itself in the lookup, so a new .p8
    under the same Key ID never reuses a token signed with the old one)."""
    public = key.public_key().public_bytes(serialization.Encoding.X962,
                                           serialization.PublicFormat.UncompressedPoint)
    return _TOKENS.setdefault((team_id, key_id, public), ProviderToken(team_id, key_id, key))


def proxy_for(egress: Egress, origin: str) -> httpx.Proxy | None:
    """The egress proxy APNs is reached through (a CONNECT tunnel, TLS and HTTP/2 inside)."""
    proxy = egress.route(True, urlsplit(origin).hostname or "")
    if proxy is None:
        return None
    host = f"[{proxy.host}]" if ":" in proxy.host else proxy.host
    headers = {"Proxy-Authorization": proxy.authorization} if proxy.authorization else None
    return httpx.Proxy(f"http://{host}:{proxy.port}", headers=headers)


class ApnsChannel:
    def __init__(self, name: str, settings: ApnsSettings, limits: Limits,
                 clock: Clock | None = None, token: ProviderToken | None = None) -> None:
        self.name = name
        self.settings = settings
        try:
            key = load_key(settings.private_key)
        except ValueError as e:
            raise ValueError(f"channel {name}: private_key {e}") from None
        self.token = token or provider_token(settings.team_id, settings.key_id, key)
        self.clock = clock or SystemClock()
        self.origin = settings.origin()
        self.timeout_sec = limits.timeout_sec
        self.max_connections = max(1, limits.max_connections) * CONNECTIONS_PER_SEND
        self.proxy = proxy_for(limits.egress, self.origin)
        # A context of its own: httpx sets ALPN (h2) on it, which the HTTP/1.1 client's must
        # never offer. Made here, off the send path: it reads the trust store.
        self.tls = ssl.create_default_context()
        self._http: httpx.AsyncClient | None = None

    def __repr__(self) -> str:
        return f"ApnsChannel({self.name!r})"

    def _client(self) -> httpx.AsyncClient:
        """The HTTP/2 client, made at the first send (and again after a close)."""
        if self._http is None:
            self._http = httpx.AsyncClient(
                http2=True, verify=self.tls, proxy=self.proxy,
                trust_env=False, follow_redirects=False, timeout=self.timeout_sec,
                limits=httpx.Limits(max_connections=self.max_connections,
                                    max_keepalive_connections=self.max_connections))
        return self._http

    def render(self, step: RenderInput) -> Rendered:
        alert = {part: _text(step, part) for part in ("title", "body")}
        aps: dict[str, Any] = {"alert": alert}
        if self.settings.sound:
            aps["sound"] = self.settings.sound
        left = (step.expires_at - step.now) // 1000
        headers = {"apns-push-type": "alert", "apns-priority": "10" if step.urgent else "5",
                   "apns-expiration": str(step.expires_at // 1000) if left > 0 else "0"}
        if step.collapse_key:
            if len(step.collapse_key.encode()) > MAX_COLLAPSE_ID_BYTES:
                raise RenderError("collapse_key", ValueError("over 64 bytes (apns-collapse-id)"))
            headers["apns-collapse-id"] = step.collapse_key
        devices = [{"device_id": d.device_id, "token": d.endpoint}
                   for d in step.devices if d.kind == "apns"]
        if not devices:
            raise RenderError("devices", LookupError("no live APNs device"))
        key = f"{step.notification_id}:{step.step_no}"
        longest = max((f"{key}:{d['device_id']}" for d in devices), key=len)
        size = len(body_of({"aps": aps}, longest))
        if size > MAX_PAYLOAD_BYTES:
            raise RenderError("push", ValueError(f"{size} bytes; APNs takes {MAX_PAYLOAD_BYTES}"))
        return Rendered(f"{self.origin}/3/device", {"aps": aps, "headers": headers,
                                                     "devices": devices})

    async def send(self, message: Message) -> Outcome:
        devices = message.payload.get("devices", [])
        deadline = asyncio.get_running_loop().time() + self.timeout_sec
        answers = await asyncio.gather(*(
            self._send_one(message.payload, d.get("token"),
                           f"{message.idempotency_key}:{d['device_id']}", deadline)
            for d in devices))
        return Fanout(tuple((str(d["device_id"]), a) for d, a in zip(devices, answers,
                                                                         strict=True)))

    async def _send_one(self, payload: dict[str, Any], token: object, key: str,
                        deadline: float) -> Answer:
        if not isinstance(token, str) or not TOKEN_RE.fullmatch(token):
            return Rejected("malformed device token (never sent)")
        bearer = self.token.get(self.clock.now_ms() / 1000)
        headers = {**payload["headers"], "authorization": f"bearer {bearer}",
                   "apns-topic": self.settings.topic,
                   "apns-id": str(uuid.uuid5(APNS_ID, key)),
                   "content-type": "application/json"}
        left = deadline - asyncio.get_running_loop().time()
        if left <= 0:
            return Failed("no time left of the send's timeout (never sent)")
        got = await post(self._client(), f"{self.origin}/3/device/{token}",
                         body_of({"aps": payload["aps"]}, key), headers, left)
        if not isinstance(got, tuple):
            return got
        status, resp_headers, raw = got
        answer = classify(status, resp_headers, raw)
        if reason_of(raw) == "ExpiredProviderToken" and \
                self.token.stale(bearer, self.clock.now_ms() / 1000):
            return Failed(f"{_reason(answer)}; the next try makes a new provider token")
        return answer

    async def close(self) -> None:
        http, self._http = self._http, None
        if http is not None:
            await http.aclose()


def _reason(answer: Answer) -> str:
    return answer.reason if isinstance(answer, Failed | Rejected | Unknown) else "sent"


def _text(step: RenderInput, part: str) -> str:
    value = step.content.get(part)
    if not isinstance(value, str):
        raise RenderError(f"push.{part}", KeyError(part))
    return value


def body_of(base: dict[str, Any], key: str) -> bytes:
    """The exact bytes for one device: the same on every retry under the same key."""
    return json.dumps({**base, KEY_FIELD: key}, sort_keys=True, separators=(",", ":"),
                      ensure_ascii=False).encode()


# --- the wire --------------------------------------------------------------------------------

NOT_SENT = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout, httpx.ProxyError,
            httpx.UnsupportedProtocol, httpx.LocalProtocolError, httpx.InvalidURL)


async def post(http: httpx.AsyncClient, url: str, body: bytes, headers: dict[str, str],
               timeout: float) -> tuple[int, httpx.Headers, bytes] | Failed | Unknown:
    """POST over HTTP/2 and read the answer up to MAX_BODY_BYTES, mapping what happened to the
    request the way channels/http.post does: nothing left us Failed, maybe arrived Unknown.
    Reasons name the error's class, never its text (it may hold the URL, and so the token)."""
    try:
        async with asyncio.timeout(timeout), http.stream(
                "POST", url, content=body, headers=headers,
                timeout=httpx.Timeout(timeout)) as resp:
            raw = bytearray()
            async for chunk in resp.aiter_bytes():
                raw += chunk[:MAX_BODY_BYTES - len(raw)]
                if len(raw) >= MAX_BODY_BYTES:
                    break
            return resp.status_code, resp.headers, bytes(raw)
    except NOT_SENT as e:
        return Failed(f"not sent: {type(e).__name__}")
    except (TimeoutError, httpx.TimeoutException):
        return Unknown("timeout: APNs may have the message")
    except httpx.HTTPError as e:  # RemoteProtocolError (a GOAWAY), ReadError, WriteError, ...
        return Unknown(f"connection lost after sending: {type(e).__name__}")


def reason_of(body: bytes) -> str:
    """APNs' reason string, when the body has a well-formed one."""
    return provider_code(parse_json(body), ("reason",)).strip()


def classify(status: int, headers: Any, body: bytes) -> Answer:  # noqa: C901 - one rule a line
    if status == 200:
        ref = headers.get("apns-id")
        return Sent(ref if isinstance(ref, str) and len(ref) <= 64 else None)
    code = reason_of(body)
    reason = f"HTTP {status} {code}".rstrip()
    retry_after = parse_retry_after(headers.get("Retry-After"))
    if code in DEAD and status in (400, 410):
        return Rejected(f"{reason}: {DEAD[code]}")
    if status == 410:
        return Rejected(f"{reason}: the device token is no longer active")
    if code in ANSWERS_OURS:
        final = status == 400
        return Failed(f"{reason}: {ANSWERS_OURS[code]}", None, final=final)
    if status == 403:
        return Failed(f"{reason}: APNs refused the provider token or the key's rights")
    if status in (400, 413):
        return Failed(f"{reason}: APNs refused the request itself", final=True)
    if status in (404, 405) or 300 <= status < 400:
        return Failed(f"{reason}: check base_url")
    return Failed(reason, retry_after)  # 429 (TooManyRequests, TooManyProviderTokenUpdates), 5xx


def build(name: str, settings: ApnsSettings, limits: Limits) -> ApnsChannel:
    return ApnsChannel(name, settings, limits)
