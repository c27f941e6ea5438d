"""The fcm channel: push to a user's Firebase Cloud Messaging registration tokens (HTTP v1 API).

One POST per device to {base_url}/v1/projects/{project_id}/messages:send with a Google OAuth 2.0
access token, which a service account's RS256-signed JWT buys from the token endpoint (RFC 7523
JWT bearer grant) and which is cached until shortly before it expires. Answers, per device:
200 Sent (provider_ref = the message "name"); UNREGISTERED, SENDER_ID_MISMATCH and an
INVALID_ARGUMENT that names the token Rejected (the device is disabled); every other answer Failed
(QUOTA_EXCEEDED, UNAVAILABLE, INTERNAL honour Retry-After; 401 also drops the cached access token);
a timeout or a connection lost after sending Unknown.

Wire facts relied on (checked with the search tool):
- Request, Message fields, AndroidConfig.ttl as "<seconds>s" (max 4 weeks), priority "normal" |
  "high", collapse_key, ApnsConfig.headers, WebpushConfig.headers, data values strings only:
  https://firebase.google.com/docs/reference/fcm/rest/v1/projects.messages and the Admin SDK's
  encoder (firebase/firebase-admin-python firebase_admin/_messaging_encoder.py sends priority as
  lower-case "high"/"normal" and ttl as "Ns").
- Error codes and their HTTP statuses, the 4096-byte payload limit, the TTL range, "retry with
  exponential backoff and a minimum initial delay of 1 minute" for QUOTA_EXCEEDED:
  https://firebase.google.com/docs/reference/fcm/rest/v1/ErrorCode ; the error body shape (an
  "error" with "status" and "details": a google.firebase.fcm.v1.FcmError with "errorCode", or a
  google.rpc.BadRequest with "fieldViolations"), both INVALID_ARGUMENT examples (a bad data value
  vs "The registration token is not a valid FCM registration token"):
  https://firebase.google.com/docs/cloud-messaging/error-codes ; THIRD_PARTY_AUTH_ERROR is 401 and
  APNS_AUTH_ERROR its older name: firebase/firebase-admin-go messaging/messaging_errors.go.
- An oversized message answers a 400 that does not name the token ("Android message is too big",
  firebase/firebase-admin-go#580): INVALID_ARGUMENT alone does not mean a dead token.
- apns-expiration is a UNIX epoch in seconds (0: do not store), apns-priority "10" | "5",
  apns-collapse-id at most 64 bytes (Apple's request headers, as quoted in docs.rs a2 options.rs).
- Token request: claims iss = client_email, scope, aud = token endpoint, iat, exp at most one hour
  later; POST grant_type=urn:ietf:params:oauth:grant-type:jwt-bearer&assertion=<jwt>:
  https://developers.google.com/identity/protocols/oauth2/service-account ; refresh margin
  3 min 45 s as google-auth's _helpers.REFRESH_THRESHOLD.
"""

from __future__ import annotations

import asyncio
import base64
import json
import re
from typing import Any
from urllib.parse import quote, urlencode

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import padding

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
from notifyd.channels.http import parse_json, parse_retry_after, post, provider_code
from notifyd.channels.types.fcm import (
    DEFAULT_TOKEN_URL,
    FcmSettings,
    KeyFileError,
    ServiceAccount,
)
from notifyd.channels.types.fcm import (
    TYPE as TYPE,
)
from notifyd.channels.wire import Client, NotSent, WireError
from notifyd.core.clock import Clock, SystemClock

SCOPE = "https://www.googleapis.com/auth/firebase.messaging"
JWT_BEARER = "urn:ietf:params:oauth:grant-type:jwt-bearer"
ASSERTION_LIFETIME_SEC = 3600  # Google accepts at most one hour
REFRESH_MARGIN_SEC = 225.0  # refresh this long before expiry (google-auth's threshold)
DEFAULT_EXPIRES_IN = 3600.0  # Google's access tokens last an hour; used if expires_in is absent
MAX_TTL_SEC = 28 * 86400  # FCM keeps a message at most 4 weeks
MAX_PAYLOAD_BYTES = 4096  # notification and data, keys and values
MAX_COLLAPSE_ID_BYTES = 64  # apns-collapse-id
MAX_TOKEN_CHARS = 4096
QUOTA_WAIT_SEC = 60.0  # QUOTA_EXCEEDED without Retry-After: FCM asks for at least a minute
# A step fans out to each of a user's devices at once; the pool allows this many per send slot,
# and a send that still waits for a connection ends as "connect timed out" (Failed, never sent).
CONNECTIONS_PER_SEND = 4
KEY_FIELD = "notifyd_key"  # data key carrying "{idempotency_key}:{device_id}" for receipts
FCM_ERROR = "type.googleapis.com/google.firebase.fcm.v1.FcmError"
BAD_REQUEST = "type.googleapis.com/google.rpc.BadRequest"
FIELD_RE = re.compile(r"^[A-Za-z0-9_.\[\]]{1,80}$")  # a field path such as message.data[0].value
HEADER_SAFE_RE = re.compile(r"^[\x21-\x7e]+$")


def assertion(account: ServiceAccount, token_url: str, now: int) -> str:
    """The signed JWT (RS256) that the token endpoint exchanges for an access token."""
    header: dict[str, str] = {"alg": "RS256", "typ": "JWT"}
    if account.private_key_id:
        header["kid"] = account.private_key_id
    claims = {"iss": account.client_email, "scope": SCOPE, "aud": token_url, "iat": now,
              "exp": now + ASSERTION_LIFETIME_SEC}
    signing_input = f"{_b64(_compact(header))}.{_b64(_compact(claims))}"
    signature = account.private_key.sign(signing_input.encode(), padding.PKCS1v15(),
                                         hashes.SHA256())
    return f"{signing_input}.{_b64(signature)}"


def _compact(obj: object) -> bytes:
    return json.dumps(obj, separators=(",", ":"), sort_keys=True).encode()


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


class TokenError(Exception):
    """No access token: the message never reached FCM, so the send is Failed."""

    def __init__(self, reason: str) -> None:
        self.reason = reason
        super().__init__(reason)


class AccessTokens:
    """One cached access token; at most one fetch at a time. Sends that queued behind a fetch
    that failed share its failure instead of each trying again in turn."""

    def __init__(self, account: ServiceAccount, token_url: str, clock: Clock) -> None:
        self.account = account
        self.token_url = token_url
        self.clock = clock
        self._finished = 0  # fetches that ended, either way
        self._lock = asyncio.Lock()
        self._token: str | None = None
        self._refresh_at = 0.0
        self._failure: str | None = None

    def _now(self) -> float:
        return self.clock.now_ms() / 1000

    def _cached(self) -> str | None:
        return self._token if self._token and self._now() < self._refresh_at else None

    async def get(self, http: Client, timeout: float) -> str:
        if token := self._cached():
            return token
        seen = self._finished
        async with self._lock:
            if token := self._cached():
                return token
            if self._finished != seen and self._failure is not None:
                raise TokenError(self._failure)  # it failed while we waited: do not pile on
            try:
                token, expires_in = await self._fetch(http, timeout)
            except TokenError as e:
                self._failure = e.reason
                raise
            finally:
                self._finished += 1
            self._failure = None
            self._token = token
            self._refresh_at = self._now() + expires_in - min(REFRESH_MARGIN_SEC, expires_in / 2)
            return token

    def drop(self, token: str) -> None:
        """FCM refused `token`: fetch a fresh one next time (unless one was fetched meanwhile)."""
        if self._token == token:
            self._token = None

    async def _fetch(self, http: Client, timeout: float) -> tuple[str, float]:
        # Signing takes about a millisecond, once an hour; a thread keeps it off the loop anyway.
        jwt = await asyncio.to_thread(assertion, self.account, self.token_url,
                                      int(self._now()))
        form = urlencode({"grant_type": JWT_BEARER, "assertion": jwt}).encode()
        try:
            answer = await http.post(self.token_url, form, {
                "Content-Type": "application/x-www-form-urlencoded"}, timeout)
        except (WireError, TimeoutError) as e:
            raise TokenError(f"access token: {_transport(e)}") from None
        status, body = answer.status, answer.body
        data = parse_json(body)
        if status != 200 or not isinstance(data, dict):
            raise TokenError(f"access token: HTTP {status}{provider_code(data, ('error',))}")
        token, expires_in = data.get("access_token"), data.get("expires_in", DEFAULT_EXPIRES_IN)
        if not isinstance(token, str) or not HEADER_SAFE_RE.match(token):
            raise TokenError("access token: HTTP 200 without a usable access_token")
        if isinstance(expires_in, bool) or not isinstance(expires_in, int | float) \
                or expires_in <= 0:
            expires_in = DEFAULT_EXPIRES_IN
        return token, float(expires_in)


def _transport(e: BaseException) -> str:
    if isinstance(e, NotSent):
        return "connect failed"
    if isinstance(e, TimeoutError):
        return "the token endpoint timed out"
    return e.reason if isinstance(e, WireError) else f"connection failed: {type(e).__name__}"


class FcmChannel:
    def __init__(self, name: str, settings: FcmSettings, limits: Limits,
                 clock: Clock | None = None) -> None:
        self.name = name
        try:
            account = ServiceAccount.load(settings.service_account_file)
        except KeyFileError as e:
            raise ValueError(f"channel {name}: service_account_file: {e}") from None
        project = settings.project_id or account.project_id
        if not project:
            raise ValueError(f"channel {name}: project_id: not set, and the key file has none")
        # Where the bearer token goes is decided by the configuration, never by stored steps.
        self.url = f"{settings.base_url.rstrip('/')}/v1/projects/{quote(project, safe=':')}" \
                   "/messages:send"
        self.tokens = AccessTokens(account, settings.token_url or account.token_uri
                                   or DEFAULT_TOKEN_URL, clock or SystemClock())
        self.timeout_sec = limits.timeout_sec
        self.max_connections = max(1, limits.max_connections) * CONNECTIONS_PER_SEND
        self.http = Client(self.max_connections, self.timeout_sec, limits.egress)

    def render(self, step: RenderInput) -> Rendered:
        title, body = (_text(step, part) for part in ("title", "body"))
        ttl = min(MAX_TTL_SEC, max(0, (step.expires_at - step.now) // 1000))
        android: dict[str, Any] = {"ttl": f"{ttl}s", "priority": "high" if step.urgent else "normal"}
        apns = {"apns-expiration": str(step.expires_at // 1000) if ttl else "0",
                "apns-priority": "10" if step.urgent else "5"}
        if step.collapse_key:
            if len(step.collapse_key.encode()) > MAX_COLLAPSE_ID_BYTES:
                raise RenderError("collapse_key", ValueError("over 64 bytes (apns-collapse-id)"))
            android["collapse_key"] = apns["apns-collapse-id"] = step.collapse_key
        message = {
            "notification": {"title": title, "body": body},
            "data": {"notifyd_kind": step.kind},
            "android": android,
            "apns": {"headers": apns},
            "webpush": {"headers": {"TTL": str(ttl),
                                    "Urgency": "high" if step.urgent else "normal"}},
        }
        devices = [{"device_id": d.device_id, "token": d.endpoint}
                   for d in step.devices if d.kind == "fcm"]
        key = f"{step.notification_id}:{step.step_no}"
        for d in devices:
            size = _payload_bytes(message, f"{key}:{d['device_id']}")
            if size > MAX_PAYLOAD_BYTES:
                raise RenderError("push", ValueError(f"{size} bytes; FCM takes {MAX_PAYLOAD_BYTES}"))
        return Rendered(self.url, {"message": message, "devices": devices})

    async def send(self, message: Message) -> Outcome:
        devices = message.payload.get("devices", [])
        deadline = asyncio.get_running_loop().time() + self.timeout_sec
        answers = await asyncio.gather(*(
            self._send_one(message.payload["message"], d.get("token"),
                           f"{message.idempotency_key}:{d['device_id']}", deadline)
            for d in devices))
        return Fanout(tuple((str(d["device_id"]), a) for d, a in zip(devices, answers,
                                                                         strict=True)))

    async def _send_one(self, base: dict[str, Any], token: object, key: str,
                        deadline: float) -> Answer:
        if not _token_ok(token):
            return Rejected("malformed registration token (never sent)")
        body = request_body(base, str(token), key)
        loop = asyncio.get_running_loop()
        try:
            access = await self.tokens.get(self.http, max(0.001, deadline - loop.time()))
        except TokenError as e:
            return Failed(e.reason)
        left = deadline - loop.time()
        if left <= 0:
            return Failed("no time left after fetching an access token (never sent)")
        headers = {"Authorization": f"Bearer {access}",
                   "Content-Type": "application/json; charset=UTF-8"}
        def read(status: int, resp_headers: Any, raw: bytes) -> Answer:
            if status == 401 and fcm_error_code(parse_json(raw)) not in THIRD_PARTY:
                self.tokens.drop(access)  # expired or revoked: the next send fetches another
            return classify(status, resp_headers, raw)

        return await post(self.http, self.url, body, headers, read, "FCM", timeout=left)

    async def close(self) -> None:
        await self.http.close()


def _text(step: RenderInput, part: str) -> str:
    value = step.content.get(part)
    if not isinstance(value, str):
        raise RenderError(f"push.{part}", KeyError(part))
    return value


def _payload_bytes(message: dict[str, Any], key: str) -> int:
    """What FCM counts against its limit: the notification's and the data's keys and values."""
    parts = {**message["notification"], **message["data"], KEY_FIELD: key}
    return sum(len(k.encode()) + len(v.encode()) for k, v in parts.items())


def _token_ok(token: object) -> bool:
    return isinstance(token, str) and 0 < len(token) <= MAX_TOKEN_CHARS \
        and bool(HEADER_SAFE_RE.match(token))


def request_body(base: dict[str, Any], token: str, key: str) -> bytes:
    """The exact bytes for one device: the same for every retry under the same key."""
    msg = {**base, "token": token, "data": {**base.get("data", {}), KEY_FIELD: key}}
    return json.dumps({"message": msg}, sort_keys=True, separators=(",", ":"),
                      ensure_ascii=False).encode()


# --- answers ---------------------------------------------------------------------------------

TOKEN_DEAD = {"UNREGISTERED": "the registration token is no longer valid"}
THIRD_PARTY = frozenset({"THIRD_PARTY_AUTH_ERROR", "APNS_AUTH_ERROR"})


def fcm_error_code(data: object) -> str | None:
    """The FcmError detail's errorCode (UNREGISTERED, ...), if the body has one."""
    for detail in _details(data):
        if detail.get("@type") == FCM_ERROR:
            code = provider_code(detail, ("errorCode",)).strip()
            if code:
                return code
    return None


def _error(data: object) -> dict[str, Any]:
    err = data.get("error") if isinstance(data, dict) else None
    return err if isinstance(err, dict) else {}


def _details(data: object) -> list[dict[str, Any]]:
    details = _error(data).get("details")
    return [d for d in details if isinstance(d, dict)] if isinstance(details, list) else []


def classify(status: int, headers: Any, body: bytes) -> Answer:  # noqa: C901 - one rule a line
    data = parse_json(body)
    if 200 <= status < 300:
        name = data.get("name") if isinstance(data, dict) else None
        return Sent(name if isinstance(name, str) else None)
    code = fcm_error_code(data)
    word = code or provider_code(_error(data), ("status",)).strip()
    reason = f"HTTP {status} {word}" if word else f"HTTP {status}"
    retry_after = parse_retry_after(headers.get("Retry-After"))
    if code in TOKEN_DEAD:
        return Rejected(f"{reason}: {TOKEN_DEAD[code]}")
    if code == "SENDER_ID_MISMATCH":  # the token is another project's, or our key file is: a
        # wrong key file would answer this for every token, so it never disables a device
        return Failed(f"{reason}: the token belongs to another Firebase project than the "
                      "service account's", final=True)
    if code in THIRD_PARTY:
        return Failed(f"{reason}: the project's APNs or web push credential is invalid or "
                      "missing", retry_after)
    if code == "QUOTA_EXCEEDED" or status == 429:
        return Failed(reason, QUOTA_WAIT_SEC if retry_after is None else retry_after)
    if code == "INVALID_ARGUMENT" or status == 400:
        return invalid_argument(reason, data)
    if status == 401:
        return Failed(f"{reason}: FCM refused our access token; the next try fetches a new one")
    if status == 403:
        return Failed(f"{reason}: the service account may not send for this project")
    if status == 404:
        return Failed(f"{reason}: no such project or endpoint; check project_id and base_url")
    if 300 <= status < 400:
        return Failed(f"{reason}: redirected; check base_url")
    return Failed(reason, retry_after)  # UNAVAILABLE, INTERNAL and anything unforeseen


def invalid_argument(reason: str, data: object) -> Answer:
    """A 400 is a dead token only when FCM says the token is what is wrong; otherwise the message
    itself was refused (too big, a bad field): our fault, never a reason to disable a device.
    Failed keeps the device; every retry resends the same bytes and meets the same answer until
    the sender gives up, while the reason names the field for whoever fixes the template."""
    violations = [v for d in _details(data) if d.get("@type") == BAD_REQUEST
                  for v in d.get("fieldViolations") or [] if isinstance(v, dict)]
    fields: list[str] = [f for v in violations if isinstance(f := v.get("field"), str)]
    text = _error(data).get("message")
    # The free text is only matched, never recorded: it is the documented invalid-token answer.
    names_token = "message.token" in fields if fields else \
        isinstance(text, str) and "registration token" in text.lower()
    if names_token:
        return Rejected(f"{reason}: the registration token is malformed")
    field = next((f for f in fields if FIELD_RE.match(f)), None)
    at = f" at {field}" if field else ""
    return Failed(f"{reason}{at}: FCM refused the message itself; the device is kept")


def build(name: str, settings: FcmSettings, limits: Limits) -> FcmChannel:
    return FcmChannel(name, settings, limits)

