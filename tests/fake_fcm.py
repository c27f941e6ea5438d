"""A fake Google on 127.0.0.1: the OAuth 2.0 token endpoint and FCM HTTP v1, in their real formats.

The token endpoint checks the JWT bearer grant the way Google does: the form's grant_type, the
RS256 signature against the service account's public key, and the claims (iss, scope, aud, iat,
exp at most an hour later); it answers {access_token, expires_in, token_type} or an OAuth error.
FCM checks the bearer token (a revoked or unknown one gets 401 UNAUTHENTICATED), the content type
and the message (token, string-only data, notification, android ttl), records the exact bytes,
and answers per registration token with whatever the test set: a success body {"name": ...} by
default, or an FCM v1 error body. Nothing here imports the adapter.
"""

from __future__ import annotations

import asyncio
import base64
import json
import re
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from aiohttp import web
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import padding, rsa

SCOPE = "https://www.googleapis.com/auth/firebase.messaging"
GRANT = "urn:ietf:params:oauth:grant-type:jwt-bearer"
FCM_ERROR = "type.googleapis.com/google.firebase.fcm.v1.FcmError"
BAD_REQUEST = "type.googleapis.com/google.rpc.BadRequest"
DROP = object()  # a reply returning this closes the connection without an answer


@dataclass(frozen=True)
class Seen:
    """One FCM send as the fake read it."""

    path: str
    headers: dict[str, str]
    body: bytes

    @property
    def json(self) -> Any:
        return json.loads(self.body)

    @property
    def message(self) -> dict[str, Any]:
        msg: dict[str, Any] = self.json["message"]
        return msg


Reply = Callable[[Seen], Awaitable[Any]]


def ok() -> Reply:
    async def reply(seen: Seen) -> web.StreamResponse:
        project = seen.path.split("/")[3]
        return web.json_response({"name": f"projects/{project}/messages/0:{len(seen.body)}"})

    return reply


def answer(status: int, body: Any = None, headers: dict[str, str] | None = None,
           raw: bytes | None = None) -> Reply:
    async def reply(_: Seen) -> web.StreamResponse:
        if raw is not None:
            return web.Response(status=status, body=raw, headers=headers,
                                content_type="application/json")
        if body is None:
            return web.Response(status=status, headers=headers)
        return web.json_response(body, status=status, headers=headers)

    return reply


def fcm_error(status: int, word: str, code: str | None = None, message: str = "",
              details: tuple[dict[str, Any], ...] = (), headers: dict[str, str] | None = None
              ) -> Reply:
    """An FCM v1 error body: {"error": {code, message, status, details}}."""
    extra = [{"@type": FCM_ERROR, "errorCode": code}] if code else []
    body = {"error": {"code": status, "message": message or word, "status": word,
                      "details": [*extra, *details]}}
    return answer(status, body, headers)


def bad_request(field: str | None, description: str) -> dict[str, Any]:
    violation = {"description": description} | ({"field": field} if field else {})
    return {"@type": BAD_REQUEST, "fieldViolations": [violation]}


def drop() -> Reply:
    async def reply(_: Seen) -> Any:
        return DROP

    return reply


def hold(gate: asyncio.Event, then: Reply) -> Reply:
    async def reply(seen: Seen) -> Any:
        await gate.wait()
        return await then(seen)

    return reply


def _unb64(part: str) -> bytes:
    return base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))


class FakeGoogle:
    def __init__(self, public_key: rsa.RSAPublicKey, client_email: str,
                 project: str = "demo-project") -> None:
        self.public_key = public_key
        self.client_email = client_email
        self.project = project
        self.now: Callable[[], float] = time.time  # what iat is checked against
        self.expires_in = 3600
        self.replies: dict[str, Reply] = {}  # by registration token; default ok()
        self.token_reply: Reply | None = None  # replaces the token endpoint's answer
        self.token_requests = 0
        self.assertions: list[str] = []
        self.issued: list[str] = []
        self.valid: set[str] = set()
        self.seen: list[Seen] = []
        self.problems: list[str] = []  # what a request got wrong; tests assert it stays empty
        self.gates: list[asyncio.Event] = []
        self._runner: web.AppRunner | None = None
        self.port = 0

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def token_url(self) -> str:
        return f"{self.base_url}/token"

    def gate(self) -> asyncio.Event:
        g = asyncio.Event()
        self.gates.append(g)
        return g

    def revoke_all(self) -> None:
        self.valid.clear()

    def bodies_for(self, token: str) -> list[bytes]:
        return [s.body for s in self.seen if s.message.get("token") == token]

    # --- the token endpoint ---

    async def _token(self, request: web.Request) -> web.StreamResponse:
        self.token_requests += 1
        form = await request.post()
        if self.token_reply is not None:
            out = await self.token_reply(Seen(request.path, dict(request.headers), b""))
            return await self._finish(request, out)
        if form.get("grant_type") != GRANT:
            return self._oauth_error("unsupported_grant_type", "grant_type")
        assertion = form.get("assertion")
        problem = self._check_assertion(assertion if isinstance(assertion, str) else "")
        if problem:
            self.problems.append(problem)
            return self._oauth_error("invalid_grant", problem)
        assert isinstance(assertion, str)
        self.assertions.append(assertion)
        token = f"ya29.fake-{len(self.issued) + 1}"
        self.issued.append(token)
        self.valid.add(token)
        return web.json_response({"access_token": token, "expires_in": self.expires_in,
                                  "token_type": "Bearer"})

    def _check_assertion(self, assertion: str) -> str | None:
        parts = assertion.split(".")
        if len(parts) != 3:
            return "assertion is not a JWS compact serialization"
        header, claims = json.loads(_unb64(parts[0])), json.loads(_unb64(parts[1]))
        if header.get("alg") != "RS256" or header.get("typ") != "JWT":
            return f"bad JWT header {header}"
        try:
            self.public_key.verify(_unb64(parts[2]), f"{parts[0]}.{parts[1]}".encode(),
                                   padding.PKCS1v15(), hashes.SHA256())
        except InvalidSignature:
            return "Invalid JWT Signature."
        want = {"iss": self.client_email, "scope": SCOPE, "aud": self.token_url}
        wrong = {k: claims.get(k) for k, v in want.items() if claims.get(k) != v}
        if wrong:
            return f"wrong claims {sorted(wrong)}"
        iat, exp = claims.get("iat"), claims.get("exp")
        if not isinstance(iat, int) or not isinstance(exp, int):
            return "iat and exp must be integers"
        if abs(iat - self.now()) > 5:
            return "iat is not now"
        if not 0 < exp - iat <= 3600:
            return "exp must be within an hour of iat"
        return None

    def _oauth_error(self, error: str, description: str) -> web.StreamResponse:
        return web.json_response({"error": error, "error_description": description}, status=400)

    # --- FCM ---

    async def _send(self, request: web.Request) -> web.StreamResponse:
        body = await request.read()
        seen = Seen(request.path, dict(request.headers), body)
        auth = request.headers.get("Authorization", "")
        if not auth.startswith("Bearer ") or auth.removeprefix("Bearer ") not in self.valid:
            return await self._finish(request, await fcm_error(
                401, "UNAUTHENTICATED", message="Request had invalid authentication "
                "credentials. Expected OAuth 2 access token.")(seen))
        if request.match_info["project"] != self.project:
            return await self._finish(request, await fcm_error(
                404, "NOT_FOUND", message="Requested entity was not found.")(seen))
        problem = self._check_message(request, body)
        if problem:
            self.problems.append(problem)
            return await self._finish(request, await fcm_error(
                400, "INVALID_ARGUMENT", details=(bad_request("message", problem),))(seen))
        self.seen.append(seen)
        reply = self.replies.get(seen.message["token"], ok())
        return await self._finish(request, await reply(seen))

    def _check_message(self, request: web.Request, body: bytes) -> str | None:
        if request.content_type != "application/json":
            return f"content type {request.content_type}"
        try:
            msg = json.loads(body)["message"]
        except (ValueError, KeyError, TypeError):
            return "Invalid JSON payload received."
        if not isinstance(msg.get("token"), str):
            return "message.token"
        data = msg.get("data", {})
        if not all(isinstance(v, str) for v in data.values()):
            return "message.data values must be strings"
        note = msg.get("notification", {})
        if set(note) - {"title", "body", "image"}:
            return "message.notification has an unknown field"
        ttl = msg.get("android", {}).get("ttl", "0s")
        if not re.fullmatch(r"\d+(\.\d{1,9})?s", ttl):
            return "message.android.ttl"
        return None

    async def _finish(self, request: web.Request, out: Any) -> web.StreamResponse:
        if out is DROP or out is None:
            assert request.transport is not None
            request.transport.abort()  # the request was read; the answer never comes
            raise asyncio.CancelledError
        assert isinstance(out, web.StreamResponse)
        return out

    async def start(self) -> FakeGoogle:
        app = web.Application()
        app.router.add_post("/token", self._token)
        app.router.add_post("/v1/projects/{project}/messages:send", self._send)
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=1.0,
                                     handle_signals=False)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.port = self._runner.addresses[0][1]
        return self

    async def stop(self) -> None:
        for g in self.gates:
            g.set()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
