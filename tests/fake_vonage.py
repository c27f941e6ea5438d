"""Vonage's Messages API on 127.0.0.1 (POST /v1/messages), and its signed status webhooks.

The API checks what Vonage checks: `Authorization: Bearer <JWT>` verified with PyJWT against the
application's public key (RS256; application_id, iat, exp, jti), a JSON body for an SMS
(message_type text, channel sms, to and from as digits without +, text up to 1000 characters,
client_ref up to 100) and answers 202 {"message_uuid"}, or an RFC 7807 problem body {type,
title, detail, instance, invalid_parameters?} as Vonage's errors are: an invalid `to` (the
numbers of INVALID) 422 naming it, a bad token 401, throttling 429, an outage 500/503, or what a
test sets. Status webhooks are made as Vonage signs them: a JWT (HS256, the signature secret) in
the Authorization header with the body's SHA-256 as payload_hash, signed with PyJWT (Vonage's
own verifier is PyJWT).

Sources: https://developer.vonage.com/en/api/messages, https://developer.vonage.com/en/api-errors
and .../api-errors/messages, https://developer.vonage.com/en/messages/concepts/signed-webhooks,
https://developer.vonage.com/en/messages/concepts/messages-status-callbacks.
"""

from __future__ import annotations

import hashlib
import json
import re
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

import jwt
from aiohttp import web
from channel_support import AppPeer
from cryptography.hazmat.primitives.asymmetric import rsa

ERRORS = "https://developer.vonage.com/api-errors"
INVALID = {"15550000001"}  # numbers Vonage refuses as `to`
DIGITS_RE = re.compile(r"[1-9][0-9]{6,14}")


def problem(status: int, code: str, title: str, detail: str,
            invalid: list[dict[str, str]] | None = None,
            headers: dict[str, str] | None = None) -> web.Response:
    kind = f"{ERRORS}/messages#{code}" if code.isdigit() else f"{ERRORS}#{code}"
    body: dict[str, Any] = {"type": kind, "title": title, "detail": detail,
                            "instance": uuid.uuid4().hex}
    if invalid:
        body["invalid_parameters"] = invalid
    return web.json_response(body, status=status, headers=headers,
                             content_type="application/problem+json")


@dataclass
class FakeVonage(AppPeer):
    application_id: str
    public_key: rsa.RSAPublicKey
    now: Any = time.time  # what iat and exp are judged against
    sent: list[dict[str, Any]] = field(default_factory=list)  # each accepted body
    tokens: list[str] = field(default_factory=list)  # each bearer token seen
    problems: list[str] = field(default_factory=list)
    canned: web.Response | None = None  # answers every request this way

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def _messages(self, request: web.Request) -> web.StreamResponse:
        token = request.headers.get("Authorization", "").removeprefix("Bearer ")
        self.tokens.append(token)
        try:
            # Times are judged against the stand-in's clock (the test's), not PyJWT's.
            claims = jwt.decode(token, self.public_key, algorithms=["RS256"], options={
                "require": ["iat", "exp", "jti", "application_id"], "verify_exp": False,
                "verify_iat": False})
        except jwt.PyJWTError:
            return problem(401, "unauthorized", "Unauthorized",
                           "You did not provide correct credentials.")
        if claims["application_id"] != self.application_id:
            return problem(401, "unauthorized", "Unauthorized", "Invalid Token")
        if not claims["iat"] - 60 <= self.now() < claims["exp"]:
            return problem(401, "jwt-expired", "Unauthorized", "The JWT provided has expired")
        if self.canned is not None:
            return self.canned
        try:
            body = json.loads(await request.read())
        except ValueError:
            return problem(422, "1020", "Invalid params", "The request body is not JSON.")
        wrong = self._check(body)
        if wrong:
            self.problems.append(wrong)
            return problem(422, "1020", "Invalid params", wrong)
        if body["to"] in INVALID:
            return problem(422, "1020", "Invalid params",
                           "The value of one or more parameters is invalid.",
                           [{"name": "to", "reason": f"{body['to']} is not a valid number"}])
        self.sent.append(body)
        return web.json_response({"message_uuid": str(uuid.uuid4())}, status=202)

    def _check(self, body: Any) -> str | None:
        if not isinstance(body, dict):
            return "the body is not an object"
        if (body.get("message_type"), body.get("channel")) != ("text", "sms"):
            return "message_type and channel must be text and sms"
        if not DIGITS_RE.fullmatch(str(body.get("to"))):
            return "to must be E.164 digits without a leading +"
        text = body.get("text")
        if not isinstance(text, str) or not 0 < len(text) <= 1000:
            return "text must be 1-1000 characters"
        if len(str(body.get("client_ref", ""))) > 100:
            return "client_ref is over 100 characters"
        if "ttl" in body and not isinstance(body["ttl"], int):
            return "ttl must be an integer"
        return None

    def routes(self, app: web.Application) -> None:
        app.router.add_post("/v1/messages", self._messages)


def status_body(message_uuid: str, status: str, to: str, client_ref: str | None = None,
                error: str | None = None) -> bytes:
    """A Messages API status webhook's body, as Vonage sends it for an SMS."""
    doc: dict[str, Any] = {"message_uuid": message_uuid, "to": to.removeprefix("+"),
                           "from": "15005550006", "timestamp": "2026-09-21T14:00:00.000Z",
                           "status": status, "channel": "sms",
                           "usage": {"currency": "EUR", "price": "0.0333"}}
    if client_ref is not None:
        doc["client_ref"] = client_ref
    if error is not None:
        doc["error"] = {"type": f"{ERRORS}/messages#{error}", "title": error,
                        "detail": f"Message was rejected for {to}"}
    return json.dumps(doc, separators=(",", ":")).encode()


def signed(body: bytes, secret: str, iat: int, api_key: str = "abcd1234",
           **claims: Any) -> dict[str, str]:
    """The Authorization header Vonage sends with `body`: HS256 over its claims, signed here
    with PyJWT as Vonage's SDKs verify it."""
    token = jwt.encode({"iat": iat, "jti": str(uuid.uuid4()), "iss": "Vonage",
                        "payload_hash": hashlib.sha256(body).hexdigest(), "api_key": api_key,
                        "application_id": "6f1c2d3e-4a5b-4c6d-8e7f-0a1b2c3d4e5f", **claims},
                       secret, algorithm="HS256")
    return {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
