"""APNs on 127.0.0.1, as Apple's provider API speaks: HTTP/2 (h2 on a real socket) over TLS,
ALPN h2 and nothing else, a self-signed certificate the client trusts through SSL_CERT_FILE.

It checks what APNs checks: POST /3/device/<hex token>; `authorization: bearer <JWT>` verified
with PyJWT against the team's public key (ES256, kid = the Key ID, iss = the Team ID, iat at most
an hour old, else 403 ExpiredProviderToken; a bad signature 403 InvalidProviderToken); a token
different from the last one the team used, within 20 minutes of it, 429
TooManyProviderTokenUpdates; apns-topic, apns-push-type, apns-priority, apns-expiration,
apns-collapse-id (at most 64 bytes) and apns-id (a canonical UUID) as Apple's table says; a JSON
body of at most 4096 bytes with an "aps" dictionary. It answers 200 with apns-id, or what a test
set for a device token ({"reason", "timestamp"?} bodies), holds the answer until the client gives
up, or ends the connection with a GOAWAY after reading the request. Nothing here imports the
adapter.

Sources: developer.apple.com/documentation/usernotifications: "Sending notification requests to
APNs", "Handling notification responses from APNs", "Establishing a token-based connection to
APNs".
"""

from __future__ import annotations

import asyncio
import json
import re
import ssl
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import h2.config
import h2.connection
import h2.events
import jwt
from cryptography.hazmat.primitives.asymmetric import ec

HOUR = 3600
MIN_UPDATE_SEC = 20 * 60
UUID_RE = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
PATH_RE = re.compile(r"/3/device/([0-9a-fA-F]+)")


@dataclass
class Seen:
    """One request as the stand-in read it."""

    path: str
    headers: dict[str, str]
    body: bytes
    alpn: str | None

    @property
    def token(self) -> str:
        return self.path.rsplit("/", 1)[-1]

    @property
    def json(self) -> Any:
        return json.loads(self.body)


@dataclass(frozen=True)
class Reply:
    status: int = 200
    reason: str | None = None  # APNs' reason string, in a {"reason"} body
    timestamp: int | None = None  # 410's "last time APNs confirmed the token was not valid"
    headers: dict[str, str] = field(default_factory=dict)
    hang: bool = False  # never answer
    goaway: bool = False  # read the request, then GOAWAY and close


Handler = Callable[[Seen], Awaitable[Reply]]


class FakeApns:
    def __init__(self, team_id: str, key_id: str, public_key: ec.EllipticCurvePublicKey,
                 topic: str, cert: Path, key: Path) -> None:
        self.team_id, self.key_id, self.public_key, self.topic = team_id, key_id, public_key, topic
        self.cert, self.key = cert, key
        self.now: Callable[[], float] = time.time  # what iat is judged against
        self.replies: dict[str, Reply] = {}  # by device token; default 200
        self.seen: list[Seen] = []
        self.problems: list[str] = []  # what a request got wrong; tests assert it stays empty
        self.tokens: list[str] = []  # each distinct provider token, in the order first used
        self.last_update = -float("inf")  # when the current provider token was first used
        self.connections = 0
        self.port = 0
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._writers: set[asyncio.StreamWriter] = set()

    @property
    def base_url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    async def start(self) -> FakeApns:
        tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        tls.load_cert_chain(self.cert, self.key)
        tls.set_alpn_protocols(["h2"])  # APNs speaks HTTP/2 only
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0, ssl=tls)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
        for writer in list(self._writers):
            writer.close()
        for task in list(self._tasks):
            task.cancel()

    async def __aenter__(self) -> FakeApns:
        return await self.start()

    async def __aexit__(self, *_: object) -> None:
        await self.stop()

    # --- HTTP/2 ---

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        self._writers.add(writer)
        alpn = writer.get_extra_info("ssl_object").selected_alpn_protocol()
        conn = h2.connection.H2Connection(h2.config.H2Configuration(
            client_side=False, header_encoding="utf-8"))
        conn.initiate_connection()
        writer.write(conn.data_to_send())
        streams: dict[int, tuple[dict[str, str], bytearray]] = {}
        try:
            while data := await reader.read(65536):
                for event in conn.receive_data(data):
                    if isinstance(event, h2.events.RequestReceived):
                        streams[event.stream_id] = (dict(event.headers), bytearray())
                    elif isinstance(event, h2.events.DataReceived):
                        streams[event.stream_id][1].extend(event.data)
                        conn.acknowledge_received_data(event.flow_controlled_length,
                                                       event.stream_id)
                    elif isinstance(event, h2.events.StreamEnded):
                        headers, body = streams.pop(event.stream_id)
                        task = asyncio.create_task(self._answer(
                            conn, writer, event.stream_id, headers, bytes(body), alpn))
                        self._tasks.add(task)
                        task.add_done_callback(self._tasks.discard)
                writer.write(conn.data_to_send())
        except (ConnectionError, ssl.SSLError):
            pass
        finally:
            self._writers.discard(writer)
            writer.close()

    async def _answer(self, conn: h2.connection.H2Connection, writer: asyncio.StreamWriter,
                      stream_id: int, headers: dict[str, str], body: bytes,
                      alpn: str | None) -> None:
        seen = Seen(headers.get(":path", ""), headers, body, alpn)
        reply = self._judge(seen)
        if reply.hang:
            await asyncio.Event().wait()
        if reply.goaway:
            conn.close_connection(last_stream_id=0)  # "not processed": yet it was sent
            writer.write(conn.data_to_send())
            writer.close()
            return
        out = [(":status", str(reply.status)), ("apns-id", headers.get("apns-id") or str(
            uuid.uuid4())), *reply.headers.items()]
        payload = b""
        if reply.status != 200:
            doc: dict[str, Any] = {"reason": reply.reason or "InternalServerError"}
            if reply.timestamp is not None:
                doc["timestamp"] = reply.timestamp
            payload = json.dumps(doc).encode()
            out.append(("content-type", "application/json"))
        conn.send_headers(stream_id, out, end_stream=not payload)
        if payload:
            conn.send_data(stream_id, payload, end_stream=True)
        writer.write(conn.data_to_send())

    # --- what APNs checks ---

    def _judge(self, seen: Seen) -> Reply:
        if seen.alpn != "h2":
            self.problems.append(f"ALPN {seen.alpn!r}, not h2")
        problem = self._request_problem(seen)
        if problem is not None:
            self.problems.append(problem.reason or "")
            return problem
        credential = self._token_problem(seen.headers.get("authorization", ""))
        if credential is not None:
            return credential
        self.seen.append(seen)
        return self.replies.get(seen.token, Reply())

    def _request_problem(self, seen: Seen) -> Reply | None:  # noqa: C901 - Apple's table
        h = seen.headers
        if h.get(":method") != "POST":
            return Reply(405, "MethodNotAllowed")
        if not PATH_RE.fullmatch(seen.path):
            return Reply(404, "BadPath")
        if h.get("apns-topic") != self.topic:
            return Reply(400, "BadTopic" if h.get("apns-topic") else "MissingTopic")
        if h.get("apns-push-type") not in ("alert", "background"):
            return Reply(400, "InvalidPushType")
        if h.get("apns-priority", "10") not in ("10", "5", "1"):
            return Reply(400, "BadPriority")
        if not h.get("apns-expiration", "0").isdigit():
            return Reply(400, "BadExpirationDate")
        if len(h.get("apns-collapse-id", "").encode()) > 64:
            return Reply(400, "BadCollapseId")
        if "apns-id" in h and not UUID_RE.fullmatch(h["apns-id"]):
            return Reply(400, "BadMessageId")
        if len(seen.body) > 4096:
            return Reply(413, "PayloadTooLarge")
        try:
            aps = json.loads(seen.body)["aps"]
        except (ValueError, KeyError, TypeError):
            aps = None
        if not isinstance(aps, dict) or not aps:
            return Reply(400, "PayloadEmpty")
        return None

    def _token_problem(self, authorization: str) -> Reply | None:
        if not authorization.startswith("bearer "):
            return Reply(403, "MissingProviderToken")
        token = authorization.removeprefix("bearer ")
        try:
            header = jwt.get_unverified_header(token)
            claims = jwt.decode(token, self.public_key, algorithms=["ES256"],
                                options={"require": ["iss", "iat"], "verify_iat": False})
        except jwt.PyJWTError:
            return Reply(403, "InvalidProviderToken")
        if header.get("kid") != self.key_id or claims.get("iss") != self.team_id:
            return Reply(403, "InvalidProviderToken")
        now = self.now()
        if now - claims["iat"] > HOUR:
            return Reply(403, "ExpiredProviderToken")
        if token not in self.tokens:
            if now - self.last_update < MIN_UPDATE_SEC:
                self.problems.append("a new provider token within 20 minutes of the last")
                return Reply(429, "TooManyProviderTokenUpdates")
            self.tokens.append(token)
            self.last_update = now
        return None
