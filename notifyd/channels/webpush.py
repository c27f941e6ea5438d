"""The webpush channel: a step's title and body, encrypted for each of the user's browsers (RFC 8291
aes128gcm), signed for the push service (RFC 8292 VAPID), POSTed to each subscription endpoint.

Wire facts relied on:
- RFC 8030 §5: POST the encrypted body to the subscription's endpoint; 201 Created with a Location
  naming the push message; TTL is required (0 = deliver only if the browser is online now; §5.2);
  Urgency very-low|low|normal|high (§5.3); Topic replaces a pending undelivered message (§5.4).
  https://www.rfc-editor.org/rfc/rfc8030
- RFC 8291 §2 and §4: the sender makes an ECDH key pair and a random salt per message, one record,
  the sender key in keyid; at most 3993 octets of plaintext fit the 4096 a push service must take.
  https://rfcinfo.com/rfc-8291/4-restrictions-on-use-of-aes128gcm-content-coding
- RFC 8292: `Authorization: vapid t=<ES256 JWT>, k=<public key>`; aud is the push service's
  origin, exp at most 24 h ahead, sub a mailto: or https: contact. Apple answers 403 BadJwtToken to
  a subject it cannot use (a space, angle brackets, localhost): web-push-libs/pywebpush#175,
  matrix-org/sygnal#338.
- Mozilla autopush errors (mozilla-services/autopush-rs docs/src/errors.md): JSON bodies with an
  `errno`; 404 errno 102 and 410 errno 103/105/106 mean the subscription is gone; 413 errno 104;
  429 with Retry-After; 401 errno 109 bad VAPID; Topic only [A-Za-z0-9], at most 32 (errno 113);
  TTL at most 30 days. Apple answers `{"reason": "..."}`.
- Known push service hosts: fcm.googleapis.com and updates.push.services.mozilla.com (Chromium's
  push_messaging_constants.cc; autopush's endpoint config), *.notify.windows.com (Edge), and
  *.push.apple.com, which Apple's "Sending web push notifications in web apps and browsers" asks
  servers to allow (web.push.apple.com today).

pywebpush (2.5, read in the venv) is not used to send: webpush() blocks on requests, and
WebPusher.send_async encrypts on the event loop, reads whole bodies with resp.text() (which fails
on a non-UTF-8 body) and leaves responses unreleased. Its own building blocks are used instead:
http_ece for the encryption (in a thread) and py_vapid for the token, with notifyd.channels.wire posting.

A retry sends the same bytes: render freezes a random seed, from which each device's ECDH key pair
and salt are derived, so the ciphertext is a pure function of the frozen payload (RFC 8291 asks
for a fresh key pair and salt per message; a retry is the same message). The VAPID token is the
credential of the moment: one per push service origin, reused for half its life.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import os
import re
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import http_ece  # type: ignore[import-untyped]
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from py_vapid import Vapid02  # type: ignore[import-untyped]
from yarl import URL

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
)
from notifyd.channels.egress import DIRECT, Egress
from notifyd.channels.http import parse_json, parse_retry_after, post, provider_code
from notifyd.channels.types.webpush import (
    KNOWN_PUSH_HOSTS as KNOWN_PUSH_HOSTS,
)
from notifyd.channels.types.webpush import (
    P256_ORDER,
    WebPushSettings,
    unb64u,
    vapid_scalar,
)
from notifyd.channels.types.webpush import (
    TYPE as TYPE,
)
from notifyd.channels.wire import Client
from notifyd.core.text import iso

MAX_PLAINTEXT = 3993  # RFC 8291 §4: 4096 octets less the header, delimiter and tag
MAX_ENDPOINT_CHARS = 4096
GONE = frozenset({404, 410})  # the subscription is dead: the device is disabled
CODE_KEYS = ("reason", "errno", "error_code", "errorCode")  # Apple, autopush; never free text
TOPIC_RE = re.compile(r"^[A-Za-z0-9]{1,32}$")
SEED_BYTES = 32


def b64u(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def load_vapid_key(private_key: str) -> ec.EllipticCurvePrivateKey:
    """The VAPID private key from its base64url raw form (32 bytes, the P-256 scalar)."""
    return ec.derive_private_key(vapid_scalar(private_key), ec.SECP256R1())


def _public_raw(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.public_key().public_bytes(serialization.Encoding.X962,
                                         serialization.PublicFormat.UncompressedPoint)


def generate_vapid_keys() -> tuple[str, str]:
    """A new VAPID key pair: (private key for vapid_private_key, public key for the browsers'
    applicationServerKey), both base64url without padding: the 32-byte scalar and the 65-byte
    uncompressed point. The same format as web-push's generate-vapid-keys."""
    key = ec.generate_private_key(ec.SECP256R1())
    return b64u(key.private_numbers().private_value.to_bytes(32, "big")), b64u(_public_raw(key))


def vapid_public_key(private_key: str) -> str:
    """The applicationServerKey a web page subscribes with, for a configured private key."""
    return b64u(_public_raw(load_vapid_key(private_key)))


def host_allowed(host: str, patterns: tuple[str, ...]) -> bool:
    """Exact names, or `*.domain` for any name below domain (not domain itself)."""
    for pattern in patterns:
        p = pattern.lower()
        if host == p or (p.startswith("*.") and host.endswith(p[1:])):
            return True
    return False


def endpoint_problem(settings: WebPushSettings, endpoint: object) -> str | None:
    """Why a subscription endpoint must not be contacted under these settings, or None."""
    if not isinstance(endpoint, str) or len(endpoint) > MAX_ENDPOINT_CHARS:
        return "endpoint missing or too long"
    try:
        url = URL(endpoint)
        host = (url.host or "").lower().rstrip(".")
    except (ValueError, TypeError):
        return "endpoint is not a URL"
    if not url.absolute or not host or url.user is not None or url.password is not None:
        return "endpoint is not an absolute URL without credentials"
    if url.scheme == "http":
        return None if host in {h.lower() for h in settings.http_hosts} else \
            "endpoint is not https"
    if url.scheme != "https":
        return "endpoint is not https"
    if settings.allow_any_host or host_allowed(host, settings.allowed_hosts):
        return None
    return f"push service host {host} is not in allowed_hosts"


def registration_problem(channels: Mapping[str, WebPushSettings], endpoint: str) -> str | None:
    """Why no web push channel would ever send to this endpoint (the first channel's reason,
    with its name), or None: a device is refused at registration rather than skipped at every
    send. With no web push channel configured there is nothing to judge by yet."""
    reasons = [(name, endpoint_problem(settings, endpoint)) for name, settings in channels.items()]
    if not reasons or any(why is None for _, why in reasons):
        return None
    name, why = reasons[0]
    return f"channels.{name}: {why}; this device would never be sent to"


def topic_for(collapse_key: str | None) -> str | None:
    """The Topic header: the collapse key itself when it is 1-32 of [A-Za-z0-9] (autopush's
    rule, stricter than RFC 8030's base64url), else a stable 32-character digest of it."""
    if not collapse_key:
        return None
    if TOPIC_RE.match(collapse_key):
        return collapse_key
    return hashlib.sha256(collapse_key.encode()).hexdigest()[:32]


def encode_data(data: dict[str, Any]) -> bytes:
    """The plaintext a browser's service worker receives (event.data.json())."""
    return json.dumps(data, ensure_ascii=False, separators=(",", ":"), sort_keys=True).encode()


def fit(data: dict[str, Any], longest_key: str) -> dict[str, Any]:
    """Shorten body, then title, until the largest device's plaintext fits RFC 8291's 3993
    octets; a notification is cut on the screen anyway, and a 413 would fail every retry."""
    def over(d: dict[str, Any]) -> int:
        return len(encode_data({**d, "key": longest_key})) - MAX_PLAINTEXT

    for part in ("body", "title"):
        if over(data) <= 0:
            break
        text, lo, hi = data[part], 0, len(data[part])
        while lo < hi:  # the longest prefix that fits, with its "…"
            mid = (lo + hi + 1) // 2
            if over({**data, part: text[:mid] + "…", "truncated": True}) <= 0:
                lo = mid
            else:
                hi = mid - 1
        data = {**data, part: text[:lo] + "…" if lo else "", "truncated": True}
    if over(data) > 0:
        raise RenderError("push", ValueError("the notification does not fit a push message"))
    return data


def sender_keys(seed: bytes, device_id: str) -> tuple[bytes, ec.EllipticCurvePrivateKey]:
    """This device's salt and ECDH key pair for this message, from the step's frozen seed."""
    out = HKDF(hashes.SHA256(), 56, None, b"notifyd webpush v1\0" + device_id.encode()).derive(seed)
    scalar = int.from_bytes(out[16:], "big") % (P256_ORDER - 1) + 1  # 320 bits: no visible bias
    return out[:16], ec.derive_private_key(scalar, ec.SECP256R1())


@dataclass(frozen=True)
class Sealed:
    device_id: str
    endpoint: str = ""
    body: bytes = b""
    authorization: str = ""
    failure: Answer | None = None  # set when it must not be sent


class WebPushChannel:
    def __init__(self, name: str, settings: WebPushSettings, timeout_sec: float,
                 max_connections: int = 100, clock: Callable[[], float] = time.time,
                 egress: Egress = DIRECT) -> None:
        self.name = name
        self.settings = settings
        self.timeout_sec = timeout_sec
        self.max_connections = max(1, max_connections)
        self.clock = clock
        self._vapid = Vapid02(load_vapid_key(settings.vapid_private_key),
                              conf={"no-strict": True})  # the subject is checked in problems()
        self._tokens: dict[str, tuple[str, float]] = {}  # push service origin -> (header, renew at)
        self._lock = threading.Lock()
        # Encryption and signing run here, off the event loop; two threads are plenty (the GIL).
        self._pool = ThreadPoolExecutor(2, thread_name_prefix=f"webpush-{name}")
        # A POST starts only with a pooled connection free for it, so its timeout is all its own.
        self._slots = asyncio.Semaphore(self.max_connections)
        self.http = Client(self.max_connections, self.timeout_sec, egress)


    def endpoint_problem(self, endpoint: object) -> str | None:
        return endpoint_problem(self.settings, endpoint)

    def render(self, step: RenderInput) -> Rendered:
        devices: list[dict[str, str]] = []
        skipped: list[dict[str, str]] = []
        seen: set[str] = set()
        endpoints: set[str] = set()
        for d in step.devices:
            if d.kind != "webpush" or d.device_id in seen:
                continue
            seen.add(d.device_id)
            why = self.endpoint_problem(d.endpoint) or _keys_problem(d.p256dh, d.auth)
            if why is None and d.endpoint in endpoints:
                why = "same endpoint as another device"
            if why is not None:
                skipped.append({"id": d.device_id, "why": why})
                continue
            assert d.p256dh is not None and d.auth is not None  # _keys_problem
            endpoints.add(d.endpoint)
            devices.append({"id": d.device_id, "endpoint": d.endpoint, "p256dh": d.p256dh,
                            "auth": d.auth})
        if not devices:
            raise RenderError("devices", LookupError(
                f"no web push device can be sent to ({len(skipped)} skipped)"))
        title, body = step.content.get("title"), step.content.get("body", "")
        if not isinstance(title, str) or not title or not isinstance(body, str):
            raise RenderError("push", ValueError("a push needs a title and a text body"))
        data: dict[str, Any] = {k: v for k, v in step.content.items() if isinstance(v, str)}
        data.update(title=title, body=body, notification_id=step.notification_id,
                    step_no=step.step_no, kind=step.kind, expires_at=iso(step.expires_at))
        if step.collapse_key:
            data["tag"] = step.collapse_key  # showNotification({tag}) replaces a shown one
        key = f"{step.notification_id}:{step.step_no}"
        data = fit(data, max((f"{key}:{d['id']}" for d in devices), key=len))
        ttl = min(max(0, (step.expires_at - step.now) // 1000), self.settings.ttl_max_sec)
        payload = {"devices": devices, "skipped": skipped, "data": data, "ttl": ttl,
                   "urgency": "high" if step.urgent else "normal",
                   "topic": topic_for(step.collapse_key), "seed": b64u(os.urandom(SEED_BYTES))}
        return Rendered(",".join(d["id"] for d in devices), payload)

    async def send(self, message: Message) -> Outcome:
        """One POST per device, at once, within this channel's timeout in all; each answer
        is that device's. The key f"{idempotency_key}:{device_id}" travels inside the
        encrypted payload ("key"): the service worker can drop a repeat and name it in a
        receipt. Web push has no idempotency header."""
        p = message.payload
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.timeout_sec
        headers = {"TTL": str(int(p["ttl"])), "Urgency": str(p["urgency"]),
                   "Content-Encoding": "aes128gcm", "Content-Type": "application/octet-stream"}
        if p.get("topic"):
            headers["Topic"] = str(p["topic"])
        sealed = await loop.run_in_executor(self._pool, self._seal_all, p,
                                            message.idempotency_key)
        answers = await asyncio.gather(*(self._deliver(s, headers, deadline) for s in sealed))
        return Fanout(tuple(answers))

    def _seal_all(self, payload: dict[str, Any], key: str) -> list[Sealed]:
        seed = unb64u(payload["seed"])
        return [self._seal(d, payload["data"], seed, f"{key}:{d['id']}")
                for d in payload["devices"]]

    def _seal(self, device: dict[str, str], data: dict[str, Any], seed: bytes,
              key: str) -> Sealed:
        """Encrypt and sign for one device (in a worker thread)."""
        device_id, endpoint = str(device["id"]), device["endpoint"]
        why = self.endpoint_problem(endpoint)  # again: the settings may have changed since
        if why is not None:
            return Sealed(device_id, failure=Failed(f"not sent: {why}"))
        try:
            salt, sender = sender_keys(seed, device_id)
            body = http_ece.encrypt(encode_data({**data, "key": key}), salt=salt,
                                    private_key=sender, dh=unb64u(device["p256dh"]),
                                    auth_secret=unb64u(device["auth"]), version="aes128gcm")
            authorization = self._authorization(str(URL(endpoint).origin()))
        except Exception as e:  # noqa: BLE001 - our fault, never the device's: no Rejected
            return Sealed(device_id, failure=Failed(f"not sent: could not seal ({type(e).__name__})"))
        return Sealed(device_id, endpoint, body, authorization)

    def _authorization(self, origin: str) -> str:
        """`vapid t=..., k=...` for a push service origin, signed afresh for half its life."""
        now = self.clock()
        with self._lock:
            cached = self._tokens.get(origin)
            if cached is not None and now < cached[1]:
                return cached[0]
            life = self.settings.vapid_token_sec
            claims = {"aud": origin, "exp": int(now) + life, "sub": self.settings.vapid_subject}
            header = str(self._vapid.sign(claims)["Authorization"])
            self._tokens[origin] = (header, now + life / 2)
            return header

    async def _deliver(self, s: Sealed, headers: dict[str, str],
                       deadline: float) -> tuple[str, Answer]:
        if s.failure is not None:
            return s.device_id, s.failure
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout_at(deadline):
                await self._slots.acquire()
        except TimeoutError:
            return s.device_id, Failed("not sent: no connection free before the send's timeout")
        try:
            left = deadline - loop.time()
            if left <= 0:
                return s.device_id, Failed("not sent: no time left of the send's timeout")
            return s.device_id, await self._post(s, {**headers, "Authorization": s.authorization},
                                                 left)
        finally:
            self._slots.release()

    async def _post(self, s: Sealed, headers: dict[str, str], timeout: float) -> Answer:
        return await post(self.http, s.endpoint, s.body, headers, classify,
                          "the push service", timeout=timeout)

    async def close(self) -> None:
        await self.http.close()
        self._pool.shutdown(wait=False, cancel_futures=True)


def _keys_problem(p256dh: str | None, auth: str | None) -> str | None:
    """A subscription's keys as a browser gives them: a P-256 point and a 16-byte secret."""
    try:
        point = unb64u(p256dh or "")
        ec.EllipticCurvePublicKey.from_encoded_point(ec.SECP256R1(), point)
        if len(point) != 65 or len(unb64u(auth or "")) != 16:
            raise ValueError("wrong length")
    except ValueError:
        return "subscription keys missing or invalid"
    return None


def classify(status: int, headers: Any, body: bytes) -> Answer:
    """One push service answer for one device. Only 404 and 410 end a device: every other
    refusal is ours (VAPID, headers, size) or the service's, and must not disable a browser."""
    if 200 <= status < 300:
        return Sent(headers.get("Location"))
    reason = f"HTTP {status}{provider_code(parse_json(body), CODE_KEYS)}"
    if status in GONE:
        return Rejected(f"{reason}: the subscription is gone")
    if 300 <= status < 400:
        return Failed(f"{reason}: the push service redirects; not followed")
    if status in (401, 403):
        return Failed(f"{reason}: VAPID refused; check vapid_private_key and vapid_subject, and "
                      "the key the browser subscribed with")
    if status == 413:
        # Our message's fault, not the device's: render keeps the plaintext within RFC 8291's
        # 3993 octets, so this is a service taking less. Failed, never Rejected (that would
        # disable a live browser); the same bytes fail again until the retry budget ends.
        return Failed(f"{reason}: payload too large for this push service")
    if status == 400:
        return Failed(f"{reason}: the push service refused the request (headers, encryption "
                      "or VAPID)")
    return Failed(reason, parse_retry_after(headers.get("Retry-After")))


def build(name: str, settings: WebPushSettings, limits: Limits) -> WebPushChannel:
    return WebPushChannel(name, settings, limits.timeout_sec, limits.max_connections,
                          egress=limits.egress)

