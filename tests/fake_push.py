"""A Web Push service on 127.0.0.1 for tests, speaking RFC 8030 as the real ones do.

It holds browser-side subscriptions (an ECDH key pair and auth secret per endpoint path, made as
a browser's PushManager.subscribe() would), checks every request as a push service must (the
RFC 8292 VAPID token: ES256 over aud/exp/sub with the key in `Authorization: vapid t=..., k=...`;
TTL, Urgency and Topic; the aes128gcm body and its size), decrypts the body with the subscription's
private key (RFC 8291, via http_ece) as the browser would, and records what arrived. It answers
201 with a Location, or what a test asks for a path (404, 410, 413, 429, 500, any body), or holds
the answer until it is closed, or drops the connection. Error bodies follow Mozilla autopush:
{"code", "errno", "error", "message"}.

The VAPID check uses `cryptography` directly, not py_vapid, so that it is not the adapter's own
code checking itself.
"""

from __future__ import annotations

import asyncio
import base64
import itertools
import json
import os
import re
import time
from dataclasses import dataclass, field
from typing import Any

import http_ece  # type: ignore[import-untyped]
from aiohttp import web
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature

from notifyd.channels.base import Device

ERRNO = {400: 110, 401: 109, 403: 109, 404: 102, 410: 103, 413: 104, 429: 201, 500: 999,
         503: 201}
URGENCIES = {"very-low", "low", "normal", "high"}
TOPIC_RE = re.compile(r"^[A-Za-z0-9]{1,32}$")  # autopush's rule (errno 113)
AUTH_RE = re.compile(r"^vapid\s+(.*)$", re.IGNORECASE)
MAX_BODY = 4096  # RFC 8030 §7.2: what a push service must accept at least


def b64u(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def unb64u(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


@dataclass
class Subscription:
    """The browser's half of a push subscription."""

    path: str
    private_key: ec.EllipticCurvePrivateKey
    auth_secret: bytes

    @property
    def p256dh(self) -> str:
        return b64u(self.private_key.public_key().public_bytes(
            serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint))

    @property
    def auth(self) -> str:
        return b64u(self.auth_secret)


@dataclass(frozen=True)
class Answer:
    status: int
    body: bytes | None = None  # None: autopush's JSON error for the status
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class Push:
    """One request as the push service saw it."""

    path: str
    headers: dict[str, str]
    body: bytes
    claims: dict[str, Any] | None = None
    vapid_key: str | None = None
    payload: Any = None  # the decrypted body as JSON, as the service worker would read it
    plaintext: bytes | None = None
    status: int = 0
    problem: str | None = None  # what a real push service would have refused, if anything


class FakePushService:
    def __init__(self, application_server_key: str | None = None) -> None:
        # The VAPID public key the subscriptions were made with: a token signed by another
        # key is refused with 403, as FCM does. None accepts any key.
        self.application_server_key = application_server_key
        self.subscriptions: dict[str, Subscription] = {}
        self.answers: dict[str, Answer] = {}
        self.held: set[str] = set()
        self.dropped: set[str] = set()
        self.pushes: list[Push] = []
        self.clock = time.time
        self._ids = itertools.count(1)
        self._release = asyncio.Event()
        self._runner: web.AppRunner | None = None
        self.port = 0

    @property
    def origin(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def start(self) -> FakePushService:
        app = web.Application(client_max_size=1024 * 1024)
        app.router.add_post("/{path:.*}", self._handle)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        return self

    async def close(self) -> None:
        self._release.set()
        if self._runner is not None:
            await self._runner.cleanup()

    async def __aenter__(self) -> FakePushService:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def subscribe(self, device_id: str, path: str | None = None) -> Device:
        """A new subscription, as a browser makes one; returned as notifyd stores a device."""
        path = path or f"wp/{device_id}"
        sub = Subscription(path, ec.generate_private_key(ec.SECP256R1()), os.urandom(16))
        self.subscriptions[path] = sub
        return Device(device_id, "webpush", f"{self.origin}/{path}", sub.p256dh, sub.auth)

    def answer(self, path: str, status: int, body: bytes | None = None,
               headers: dict[str, str] | None = None) -> None:
        self.answers[path] = Answer(status, body, headers or {})

    def hold(self, path: str) -> None:
        """Never answer this path (until close): the sender's timeout decides."""
        self.held.add(path)

    def drop(self, path: str) -> None:
        """Read the request, then close the connection without answering."""
        self.dropped.add(path)

    @property
    def problems(self) -> list[str]:
        return [p.problem for p in self.pushes if p.problem]

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        path = request.match_info["path"]
        push = Push(path, dict(request.headers), await request.read())
        self.pushes.append(push)
        refusal = self._check(request, push)
        if refusal is not None:
            push.problem = f"{refusal[0]}: {refusal[1]}"
            return self._error(push, refusal[0], refusal[1])
        if path in self.dropped and request.transport is not None:
            request.transport.close()
            return web.Response(status=503)  # never reaches the client
        if path in self.held:
            await self._release.wait()  # the client has given up long before
            return web.Response(status=503)
        if path in self.answers:
            a = self.answers[path]
            push.status = a.status
            if a.body is not None:
                return web.Response(status=a.status, body=a.body, headers=a.headers)
            return self._error(push, a.status, "as the test asked", a.headers)
        push.status = 201
        return web.Response(status=201, headers={
            "Location": f"{self.origin}/m/{next(self._ids)}", "TTL": request.headers["TTL"]})

    def _error(self, push: Push, status: int, message: str,
               headers: dict[str, str] | None = None) -> web.Response:
        push.status = status
        body = {"code": status, "errno": ERRNO.get(status, 999), "error": "error",
                "message": message}
        return web.json_response(body, status=status, headers=headers)

    def _check(self, request: web.Request, push: Push) -> tuple[int, str] | None:  # noqa: C901
        """What a push service refuses, as (status, why); None when it takes the message."""
        sub = self.subscriptions.get(push.path)
        if sub is None:
            return 404, "no such subscription"
        vapid = self._check_vapid(request.headers.get("Authorization", ""), push)
        if vapid is not None:
            return vapid
        ttl = request.headers.get("TTL")
        if ttl is None or not ttl.isdigit():
            return 400, "TTL missing or not a number"
        if request.headers.get("Urgency", "normal") not in URGENCIES:
            return 400, "bad Urgency"
        topic = request.headers.get("Topic")
        if topic is not None and not TOPIC_RE.match(topic):
            return 400, "bad Topic"
        if request.headers.get("Content-Encoding") != "aes128gcm":
            return 400, "Content-Encoding must be aes128gcm"
        if len(push.body) > MAX_BODY:
            return 413, "payload too large"
        try:
            push.plaintext = http_ece.decrypt(push.body, private_key=sub.private_key,
                                              auth_secret=sub.auth_secret, version="aes128gcm")
            push.payload = json.loads(push.plaintext)
        except Exception as e:  # noqa: BLE001 - a browser would drop it; the test must see why
            return 400, f"the browser could not decrypt it: {type(e).__name__}"
        record_size = int.from_bytes(push.body[16:20], "big")
        if push.body[20] != 65 or len(push.body) - 86 > record_size:  # RFC 8291 §4
            return 400, "not one record with a 65-byte keyid"
        return None

    def _check_vapid(self, header: str, push: Push) -> tuple[int, str] | None:
        m = AUTH_RE.match(header)
        if not m:
            return 401, "no vapid Authorization"
        params = dict(p.strip().split("=", 1) for p in m.group(1).split(",") if "=" in p)
        token, key = params.get("t", ""), params.get("k", "")
        try:
            head_b64, claims_b64, sig_b64 = token.split(".")
            head = json.loads(unb64u(head_b64))
            claims = json.loads(unb64u(claims_b64))
            sig = unb64u(sig_b64)
            public = ec.EllipticCurvePublicKey.from_encoded_point(ec.SECP256R1(), unb64u(key))
            if head.get("alg") != "ES256" or len(sig) != 64:
                raise ValueError("not ES256")
            der = encode_dss_signature(int.from_bytes(sig[:32], "big"),
                                       int.from_bytes(sig[32:], "big"))
            public.verify(der, f"{head_b64}.{claims_b64}".encode(), ec.ECDSA(hashes.SHA256()))
        except (ValueError, InvalidSignature, TypeError):
            return 401, "bad VAPID token"
        push.claims, push.vapid_key = claims, key
        now = self.clock()
        if claims.get("aud") != self.origin:
            return 403, "aud is not this push service's origin"
        if not isinstance(claims.get("exp"), int) or not now < claims["exp"] <= now + 86400:
            return 403, "exp not within the next 24 hours"
        if not re.match(r"^(mailto:|https://)\S+$", str(claims.get("sub", ""))):
            return 403, "sub is not a mailto: or https: contact"
        if self.application_server_key is not None and key != self.application_server_key:
            return 403, "not the key this subscription was made with"
        return None
