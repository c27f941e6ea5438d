"""A notifyd app answering requests that need no API key, for tests that throw anything at it: the
real app over a real SQLite file on a fake clock, every provider's webhook on, one tenant with a
CORS origin and a person (ada) with a user token, and signers that sign a body as each provider
does, so that a fuzzed body reaches the parser behind the signature.

The app runs on an event loop of its own: hypothesis calls a plain function per example, and
`Site.call` runs one request on that loop.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import json
import secrets
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, NamedTuple
from urllib.parse import quote

import tomli_w
from aiohttp.test_utils import TestClient, TestServer
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa
from cryptography.x509.oid import NameOID
from twilio.request_validator import RequestValidator
from yarl import URL

from notifyd.channels.webhook import sign as sign_standard
from notifyd.channels.webhook import signing_key
from notifyd.config import load_config
from notifyd.core.clock import FakeClock
from notifyd.domain import signed
from notifyd.engine.ingest import Ingest
from notifyd.http.app import make_app
from notifyd.http.auth import KeyCache, hash_key, new_key
from notifyd.http.errors import CATALOG
from notifyd.http.kit import Context
from notifyd.store import open_store

START = datetime(2026, 9, 21, 14, 13, 20, tzinfo=UTC)
TENANT, USER, ORIGIN = "default", "ada", "https://app.example.com"
PUBLIC = "https://notify.example.com"
TWILIO_TOKEN = "f" * 32
MAILGUN_KEY = "key-" + "5f" * 16
POSTMARK = ("hook", "s3cretpassw0rd")
WHSEC = "whsec_" + base64.b64encode(b"0123456789abcdef0123456789abcdef").decode()
TOPIC = "arn:aws:sns:us-east-1:123456789012:ses-events"
CERT_URL = "https://sns.us-east-1.amazonaws.com/SimpleNotificationService-0123.pem"
SENDGRID = ec.generate_private_key(ec.SECP256R1())
SNS = rsa.generate_private_key(public_exponent=65537, key_size=2048)


def _pem() -> bytes:
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "sns.amazonaws.com")])
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
            .public_key(SNS.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(START - timedelta(days=30)).not_valid_after(START + timedelta(days=30))
            .sign(SNS, hashes.SHA256()))
    return cert.public_bytes(serialization.Encoding.PEM)


PEM = _pem()


def config(folder: Path) -> dict[str, Any]:
    der = SENDGRID.public_key().public_bytes(serialization.Encoding.DER,
                                             serialization.PublicFormat.SubjectPublicKeyInfo)
    return {
        "server": {"public_url": PUBLIC},
        "store": {"url": str(folder / "notifyd.db"), "sqlite": {"synchronous": "NORMAL"}},
        "channels": {"log": {"type": "log"}},
        "kinds": {"news": {"category": "news", "transactional": False, "inbox": True,
                           "ladder": [{"channel": "log"}]}},
        "tenants": {TENANT: {"cors_origins": [ORIGIN]}},
        "webhooks": {
            "twilio": {"auth_token": TWILIO_TOKEN},
            "sendgrid": {"public_key": base64.b64encode(der).decode()},
            "mailgun": {"signing_key": MAILGUN_KEY},
            "postmark": {"username": POSTMARK[0], "password": POSTMARK[1]},
            "resend": {"secret": WHSEC},
            "ses": {"topic_arns": [TOPIC]},
            "delivery-receipt": {"secret": WHSEC},
        },
    }


class Answer(NamedTuple):
    status: int
    content_type: str
    body: bytes


def check(answer: Answer, *normal: str) -> None:
    """Never a 5xx; a refusal in the API's error shape with a catalog code, or else one of the
    content types the route answers with."""
    assert answer.status < 500, answer
    if answer.content_type == "application/json" and answer.status >= 400:
        doc = json.loads(answer.body)
        assert set(doc) == {"error"} and set(doc["error"]) == {"code", "message", "field"}, doc
        code = doc["error"]["code"]
        assert code in CATALOG, doc
        # A webhook refusal takes the status its provider reads right (Mailgun's 406, ...).
        assert CATALOG[code].status == answer.status or code in ("bad_signature",
                                                                  "bad_receipt"), answer
    else:
        assert answer.content_type in normal, answer


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def segment(text: str) -> str:
    """A path segment, every byte outside the unreserved set percent-encoded."""
    return quote(text, safe="")


@dataclass
class Site:
    loop: asyncio.AbstractEventLoop
    client: TestClient[Any, Any]
    ctx: Context
    clock: FakeClock
    token: str = ""  # ada's user token
    link: str = ""  # ada's unsubscribe link for "news"
    key: str = ""  # a producer's API key with the users scope
    keys: dict[str, bytes] = field(default_factory=dict)  # token prefix -> its signing key
    closers: list[Callable[[], Any]] = field(default_factory=list)

    def call(self, method: str, target: str, headers: dict[str, str] | None = None,
             body: bytes | None = None) -> Answer:
        """One request; `target` is the path and query exactly as sent (already encoded)."""
        return self.loop.run_until_complete(self._call(method, target, headers or {}, body))

    async def _call(self, method: str, target: str, headers: dict[str, str],
                    body: bytes | None) -> Answer:
        async with self.client.request(method, URL(target, encoded=True), headers=headers,
                                       data=body) as r:
            return Answer(r.status, r.content_type, await r.read())

    def signed(self, prefix: str, body: Any) -> str:
        """A token of this kind around any JSON payload, signed with the site's own key."""
        payload = b64url(json.dumps(body).encode())
        sig = hmac.new(self.keys[prefix], f"{prefix}{payload}".encode(), hashlib.sha256).digest()
        return f"{prefix}{payload}.{b64url(sig)}"

    def now_sec(self) -> int:
        return self.clock.now_ms() // 1000

    # --- bodies signed as each provider signs them ----------------------------------------

    def webhook(self, provider: str, body: bytes, query: str = "") -> Answer:
        """POST body to the provider's webhook, signed as that provider signs it."""
        path = f"/v1/webhooks/{provider}" + (f"?{query}" if query else "")
        headers = SIGNERS[provider](self, f"{PUBLIC}{path}", body)
        return self.call("POST", path, headers, body)


def _standard(site: Site, url: str, body: bytes) -> dict[str, str]:
    key = signing_key(WHSEC)
    assert key is not None
    msg_id, now = f"msg_{secrets.token_hex(8)}", site.now_sec()
    return {"webhook-id": msg_id, "webhook-timestamp": str(now),
            "webhook-signature": sign_standard([key], msg_id, now, body)}


def _sendgrid(site: Site, url: str, body: bytes) -> dict[str, str]:
    stamp = str(site.now_sec())
    der = SENDGRID.sign(stamp.encode() + body, ec.ECDSA(hashes.SHA256()))
    return {"X-Twilio-Email-Event-Webhook-Signature": base64.b64encode(der).decode(),
            "X-Twilio-Email-Event-Webhook-Timestamp": stamp}


def _twilio(site: Site, url: str, body: bytes) -> dict[str, str]:
    """A JSON body, as Twilio signs one: bodySHA256 in the URL, the URL signed."""
    assert "bodySHA256=" + hashlib.sha256(body).hexdigest() in url, "use twilio_json()"
    return {"X-Twilio-Signature": RequestValidator(TWILIO_TOKEN).compute_signature(url, {}),
            "Content-Type": "application/json"}


def _postmark(site: Site, url: str, body: bytes) -> dict[str, str]:
    return {"Authorization": "Basic " + base64.b64encode(":".join(POSTMARK).encode()).decode()}


def _unsigned(site: Site, url: str, body: bytes) -> dict[str, str]:
    return {}  # mailgun and ses carry their signature inside the body


SIGNERS: dict[str, Callable[[Site, str, bytes], dict[str, str]]] = {
    "delivery-receipt": _standard, "resend": _standard, "sendgrid": _sendgrid,
    "twilio": _twilio, "postmark": _postmark, "mailgun": _unsigned, "ses": _unsigned}


def twilio_query(body: bytes) -> str:
    return "bodySHA256=" + hashlib.sha256(body).hexdigest()


def mailgun_body(site: Site, event_data: Any) -> bytes:
    """A body whose signature block verifies (a fresh token each time), around any event-data."""
    token, stamp = secrets.token_hex(25), str(site.now_sec())
    digest = hmac.new(MAILGUN_KEY.encode(), (stamp + token).encode(), hashlib.sha256).hexdigest()
    return json.dumps({"signature": {"token": token, "timestamp": stamp, "signature": digest},
                       "event-data": event_data}).encode()


def ses_body(site: Site, message: str) -> bytes:
    """An SNS notification signed with the test certificate, carrying any Message text."""
    env = {"Type": "Notification", "MessageId": secrets.token_hex(8), "TopicArn": TOPIC,
           "Message": message, "SignatureVersion": "2", "SigningCertURL": CERT_URL,
           "Timestamp": datetime.fromtimestamp(site.now_sec(), UTC).isoformat().replace(
               "+00:00", "Z")}
    text = "".join(f"{name}\n{env[name]}\n" for name in ("Message", "MessageId", "Timestamp",
                                                         "TopicArn", "Type"))
    sig = SNS.sign(text.encode(), padding.PKCS1v15(), hashes.SHA256())
    return json.dumps({**env, "Signature": base64.b64encode(sig).decode()}).encode()


SES_HEADERS = {"x-amz-sns-message-type": "Notification"}


async def _open(folder: Path, loop: asyncio.AbstractEventLoop) -> Site:
    path = folder / "notifyd.toml"
    path.write_text(tomli_w.dumps(config(folder)))
    cfg = load_config(path)
    clock = FakeClock(int(START.timestamp() * 1000))
    store = await open_store(cfg.store.url, clock, sqlite=cfg.store.sqlite)
    link_key = await store.signing_key(signed.LINKS_KEY)
    token_key = await store.signing_key(signed.tenant_key_name(TENANT))
    ctx = Context(cfg, Ingest(cfg, store, clock), KeyCache(store, clock), clock,
                  link_key=link_key)

    async def fetch(url: str) -> bytes:
        assert url == CERT_URL, url
        return PEM

    ctx.fetch = fetch  # type: ignore[assignment]  # the SNS certificate, served here
    client: TestClient[Any, Any] = TestClient(TestServer(make_app(ctx)))
    await client.start_server()
    site = Site(loop, client, ctx, clock, closers=[client.close, store.close])
    site.token = signed.make_user_token(token_key, TENANT, USER, site.now_sec() + 86400)
    site.link = signed.make_unsubscribe(link_key, TENANT, USER, "news")
    site.keys = {signed.USER_TOKEN: token_key, signed.LINK: link_key}
    site.key = new_key()
    await store.create_key(hash_key(site.key), "k", TENANT, (), frozenset({"users"}))
    return site


@contextmanager
def running(folder: Path) -> Iterator[Site]:
    loop = asyncio.new_event_loop()
    site = loop.run_until_complete(_open(folder, loop))
    try:
        yield site
    finally:
        for close in site.closers:
            loop.run_until_complete(close())
        loop.close()
