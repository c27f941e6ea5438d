"""Amazon SES receipts: SES event publishing (eventType) and notifications (notificationType),
delivered by Amazon SNS to an HTTP(S) subscription at POST /v1/webhooks/ses.

web -> receipts.ses.parse -> store. Every SNS message is verified (topic, age, certificate URL,
RSA signature) before anything in it is used; a SubscriptionConfirmation is then confirmed by
fetching its SubscribeURL; a Notification's Message (JSON inside the JSON) becomes Receipts.
Wire facts relied on:

- SNS message bodies and headers: https://docs.aws.amazon.com/sns/latest/dg/sns-message-and-json-formats.html
  (x-amz-sns-message-type: Notification, SubscriptionConfirmation, UnsubscribeConfirmation),
  https://docs.aws.amazon.com/sns/latest/dg/http-notification-json.html (Subject only when one was
  published; MessageId is the same on a retry: our dedupe id),
  .../http-subscription-confirmation-json.html, .../http-unsubscribe-confirmation-json.html.
- Signature: https://docs.aws.amazon.com/sns/latest/dg/sns-verify-signature-of-message.html and
  .../sns-verify-signature-of-message-verify-message-signature.html: SignatureVersion 1 is
  SHA1withRSA, 2 is SHA256withRSA, base64, over "Name\\nValue\\n" for Message, MessageId,
  Subject (if present), Timestamp, TopicArn, Type (Notification) or Message, MessageId,
  SubscribeURL, Timestamp, Token, TopicArn, Type (the confirmations); the certificate only over
  HTTPS from an SNS host; reject an unexpected TopicArn. AWS's own validators agree
  (aws/aws-php-sns-message-validator src/MessageValidator.php, aws/aws-js-sns-message-validator
  index.js): same key order, host /^sns\\.[a-zA-Z0-9\\-]{3,}\\.amazonaws\\.com(\\.cn)?$/ (we
  accept the China partition too, with a stricter region part), a path ending in .pem.
- Raw message delivery sends the published body as is, with no Signature: refused.
- Age: https://docs.aws.amazon.com/sns/latest/dg/sns-message-delivery-retries.html: "The total
  policy retry time for an HTTP/S endpoint cannot be greater than 3,600 seconds" (the default is
  3 retries 20 s apart), and Timestamp is the publish time, unchanged on retries. So the default
  tolerance is 3,600 s plus 300 s of clock skew; a Timestamp over 300 s ahead is refused too.
- SES contents: https://docs.aws.amazon.com/ses/latest/dg/event-publishing-retrieving-sns-contents.html,
  .../event-publishing-retrieving-sns-examples.html, .../notification-contents.html and
  .../notification-examples.html (awsdocs/amazon-ses-developer-guide): eventType (or
  notificationType without event publishing), mail.messageId = SES's id (returned by the send,
  and in the SMTP interface's 250 reply), the original Message-ID in mail.commonHeaders.messageId
  and mail.headers, mail.tags {name: [values]} (event publishing only), per-recipient lists in
  bounce.bouncedRecipients, complaint.complainedRecipients, delivery.recipients,
  deliveryDelay.delayedRecipients. Transient bounces are published only once SES has stopped
  retrying. Tag values allow only [A-Za-z0-9_-] (API_MessageTag), so the step key travels in
  the tag notifyd_key as "n_...-STEP" (":" also accepted); the X-Notifyd-Key header that the
  smtp channel sets is read from mail.headers as a fallback.

Mapping: Send ACCEPTED; Delivery DELIVERED (per recipient); Bounce Permanent BOUNCED, Transient
or Undetermined FAILED (SES has given up on this message; the address may still work), per
recipient; Complaint COMPLAINED per recipient (feedback type not-spam: skipped); Reject and
Rendering Failure FAILED; DeliveryDelay DEFERRED per recipient; Open OPENED; Click OPENED (a
click implies the message was opened; detail "click"); Subscription UNSUBSCRIBED when the
recipient unsubscribed from everything (topic-level changes are skipped). Other types: skipped.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, NamedTuple
from urllib.parse import parse_qs, urlsplit

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import padding, rsa

from notifyd.receipts.base import (
    BadReceipt,
    BadSignature,
    Event,
    Fetch,
    RawRequest,
    Receipt,
    json_of,
)
from notifyd.receipts.providers.ses import NAME, REGION
from notifyd.receipts.providers.ses import PROVIDER as PROVIDER
from notifyd.receipts.providers.ses import Settings as Settings

TYPE_HEADER = "x-amz-sns-message-type"
TOPIC_HEADER = "x-amz-sns-topic-arn"
FUTURE_SKEW_SEC = 300
CERT_CACHE_MAX = 32  # SNS signs with one certificate per region at a time; rotation adds one

NOTIFICATION_FIELDS = ("Message", "MessageId", "Subject", "Timestamp", "TopicArn", "Type")
CONFIRMATION_FIELDS = ("Message", "MessageId", "SubscribeURL", "Timestamp", "Token", "TopicArn",
                       "Type")
SIGNED_FIELDS = {"Notification": NOTIFICATION_FIELDS,
                 "SubscriptionConfirmation": CONFIRMATION_FIELDS,
                 "UnsubscribeConfirmation": CONFIRMATION_FIELDS}
OPTIONAL_FIELDS = frozenset({"Subject"})
HASHES: dict[str, Callable[[], hashes.HashAlgorithm]] = {"1": hashes.SHA1, "2": hashes.SHA256}

SNS_HOST = re.compile(rf"sns\.{REGION}\.amazonaws\.com(?:\.cn)?")
CERT_PATH = re.compile(r"(?:/[A-Za-z0-9_-][A-Za-z0-9._-]*)+\.pem")
URL_BAD = re.compile(r"[\x00-\x20\x7f\\]")
KEY = re.compile(r"(n_[A-Za-z0-9]{1,64})[:-](\d{1,9})")
ADDRESS = re.compile(r"[^\s@]{1,64}@[^\s@]{1,255}")
TOKEN_BAD = re.compile(r"[^A-Za-z0-9._-]+")
STATUS = re.compile(r"[245]\.\d{1,3}\.\d{1,3}")


# -- the signing certificate --

@dataclass(frozen=True)
class SigningCert:
    key: rsa.RSAPublicKey
    not_before: int  # epoch ms
    not_after: int


class CertCache:
    """Certificates by URL, in process, the oldest dropped past CERT_CACHE_MAX. Two messages
    that miss at once may both fetch; the second store wins, which is harmless."""

    def __init__(self, limit: int = CERT_CACHE_MAX) -> None:
        self.limit = limit
        self._certs: OrderedDict[str, SigningCert] = OrderedDict()

    def get(self, url: str) -> SigningCert | None:
        return self._certs.get(url)

    def put(self, url: str, cert: SigningCert) -> None:
        self._certs[url] = cert
        while len(self._certs) > self.limit:
            self._certs.popitem(last=False)

    def clear(self) -> None:
        self._certs.clear()


CERTS = CertCache()


def sns_url_problem(url: str) -> str | None:
    """Why a URL is not https://sns.<region>.amazonaws.com[.cn] (port 443, no userinfo), or
    None. Checked on the raw netloc, so "host@other" or "host.evil" cannot slip through."""
    if URL_BAD.search(url):
        return "a space, control character or backslash"
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return "unparsable"
    if parts.scheme != "https":
        return "not https"
    if "@" in parts.netloc:
        return "userinfo"
    if port not in (None, 443):
        return "a port other than 443"
    host = parts.netloc.lower().removesuffix(":443")
    if not SNS_HOST.fullmatch(host):
        return "not an SNS host"
    if parts.fragment:
        return "a fragment"
    return None


def check_cert_url(url: str) -> None:
    why = sns_url_problem(url)
    parts = urlsplit(url) if why is None else None
    if parts is not None and (parts.query or not CERT_PATH.fullmatch(parts.path)):
        why = "not a .pem path"
    if why is not None:
        raise BadSignature(f"SigningCertURL refused: {why}")


def load_cert(pem: bytes) -> SigningCert:
    try:
        cert = x509.load_pem_x509_certificate(pem)
    except (ValueError, TypeError):
        raise BadSignature("signing certificate unreadable") from None
    key = cert.public_key()
    if not isinstance(key, rsa.RSAPublicKey):
        raise BadSignature("signing certificate has no RSA key")
    return SigningCert(key, int(cert.not_valid_before_utc.timestamp() * 1000),
                       int(cert.not_valid_after_utc.timestamp() * 1000))


async def signing_key(url: str, now: int, fetch: Fetch) -> rsa.RSAPublicKey:
    check_cert_url(url)
    cert = CERTS.get(url)
    if cert is None:
        cert = load_cert(await fetch(url))  # a fetch failure propagates: a retry may succeed
        CERTS.put(url, cert)
    if not cert.not_before <= now <= cert.not_after:
        raise BadSignature("signing certificate outside its validity")
    return cert.key


# -- the SNS envelope --

def _unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out = dict(pairs)
    if len(out) != len(pairs):
        raise ValueError("duplicate key")
    return out


def read_envelope(body: bytes) -> dict[str, Any]:
    json_of(body, BadSignature, "body")  # within the API's limits first: no recursion below
    try:
        env = json.loads(body, object_pairs_hook=_unique)
    except ValueError:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        raise BadSignature("body is not one complete JSON object") from None
    if not isinstance(env, dict):
        raise BadSignature("body is not a JSON object")
    return env


def iso_ms(value: object) -> int | None:
    if not isinstance(value, str):
        return None
    try:
        when = datetime.fromisoformat(value)
    except ValueError:
        return None
    return None if when.tzinfo is None else int(when.timestamp() * 1000)


def check_envelope(request: RawRequest, env: dict[str, Any], settings: Settings,
                   now: int) -> str:
    """The checks that need no certificate; returns the message type."""
    if "Signature" not in env:
        raise BadSignature("unsigned: raw message delivery is not accepted")
    kind = env.get("Type")
    if kind not in SIGNED_FIELDS:
        raise BadSignature("unknown SNS message type")
    if request.headers.get(TYPE_HEADER) != kind:
        raise BadSignature(f"{TYPE_HEADER} missing or not the body's Type")
    topic = env.get("TopicArn")
    if topic not in settings.topic_arns:
        raise BadSignature("TopicArn not allowed")
    header_topic = request.headers.get(TOPIC_HEADER)
    if header_topic is not None and header_topic != topic:
        raise BadSignature(f"{TOPIC_HEADER} is not the body's TopicArn")
    if env.get("SignatureVersion") not in HASHES:
        raise BadSignature("unsupported SignatureVersion")
    if not isinstance(env.get("SigningCertURL"), str):
        raise BadSignature("SigningCertURL missing")
    check_age(env.get("Timestamp"), settings.tolerance_sec, now)
    return str(kind)


def check_age(timestamp: object, tolerance_sec: int, now: int) -> None:
    sent = iso_ms(timestamp)
    if sent is None:
        raise BadSignature("Timestamp missing or unreadable")
    if now - sent > tolerance_sec * 1000:
        raise BadSignature("stale Timestamp")
    if sent - now > FUTURE_SKEW_SEC * 1000:
        raise BadSignature("Timestamp in the future")


def string_to_sign(env: dict[str, Any], kind: str) -> bytes:
    parts = []
    for name in SIGNED_FIELDS[kind]:
        value = env.get(name)
        if value is None and name in OPTIONAL_FIELDS:
            continue
        if not isinstance(value, str):
            raise BadSignature(f"{name} missing or not a string")
        parts.append(f"{name}\n{value}\n")
    return "".join(parts).encode("utf-8")


def signed_bytes(env: dict[str, Any], kind: str) -> tuple[bytes, bytes]:
    """The string SNS signed and the signature, both checked before any certificate fetch."""
    data = string_to_sign(env, kind)
    sig = env.get("Signature")
    try:
        raw = base64.b64decode(sig if isinstance(sig, str) else "", validate=True)
    except (binascii.Error, ValueError):
        raise BadSignature("Signature is not base64") from None
    if not raw:
        raise BadSignature("Signature empty")
    return data, raw


def verify(key: rsa.RSAPublicKey, data: bytes, sig: bytes, version: str) -> None:
    try:
        key.verify(sig, data, padding.PKCS1v15(), HASHES[version]())
    except InvalidSignature:
        raise BadSignature("signature does not match") from None


async def confirm(env: dict[str, Any], fetch: Fetch) -> None:
    """Visit the (signed) SubscribeURL, only if it is SNS's ConfirmSubscription action."""
    url = env.get("SubscribeURL")
    why = sns_url_problem(url) if isinstance(url, str) else "missing"
    if why is None and parse_qs(urlsplit(str(url)).query).get("Action") != ["ConfirmSubscription"]:
        why = "not a ConfirmSubscription action"
    if why is not None:
        raise BadReceipt(f"SubscribeURL refused: {why}")
    await fetch(str(url))


# -- the SES record inside --

class Item(NamedTuple):
    event: Event
    address: str | None
    detail: str | None
    occurred_at: int | None


@dataclass(frozen=True)
class Mail:
    ref: str  # SES's message id
    message_id: str | None
    key: str | None
    single: str | None  # the only destination, when there is exactly one
    sent_at: int | None


def token(*values: object) -> str | None:
    """A short code from provider words: [A-Za-z0-9._-] parts joined by ":"; never free text."""
    parts = [TOKEN_BAD.sub("", v)[:40] for v in values if isinstance(v, str)]
    return ":".join(p for p in parts if p)[:80] or None


def address(value: object) -> str | None:
    if isinstance(value, str) and ADDRESS.fullmatch(value.strip()):
        return value.strip()
    return None


def header_value(mail: dict[str, Any], name: str) -> str | None:
    headers = mail.get("headers")
    for h in headers if isinstance(headers, list) else []:
        if isinstance(h, dict) and str(h.get("name", "")).lower() == name.lower():
            value = h.get("value")
            return value if isinstance(value, str) else None
    return None


def read_key(value: object) -> str | None:
    m = KEY.fullmatch(value.strip()) if isinstance(value, str) else None
    return f"{m.group(1)}:{m.group(2)}" if m else None


def read_mail(msg: dict[str, Any]) -> Mail:
    mail = msg.get("mail")
    if not isinstance(mail, dict) or not isinstance(mail.get("messageId"), str) \
            or not mail["messageId"]:
        raise BadReceipt("no mail.messageId")
    common = mail.get("commonHeaders")
    mid = common.get("messageId") if isinstance(common, dict) else None
    if not isinstance(mid, str):
        mid = header_value(mail, "Message-ID")
    mid = mid.strip().strip("<>") if isinstance(mid, str) else None
    tags = mail.get("tags")
    tag = tags.get("notifyd_key") if isinstance(tags, dict) else None
    key = read_key(tag[0] if isinstance(tag, list) and tag else tag)
    key = key or read_key(header_value(mail, "X-Notifyd-Key"))
    dest = mail.get("destination")
    single = address(dest[0]) if isinstance(dest, list) and len(dest) == 1 else None
    ok_mid = mid if mid and len(mid) <= 998 and not URL_BAD.search(mid) else None
    return Mail(mail["messageId"], ok_mid, key, single, iso_ms(mail.get("timestamp")))


def section(msg: dict[str, Any], name: str) -> dict[str, Any]:
    obj = msg.get(name)
    if not isinstance(obj, dict):
        raise BadReceipt(f"no {name} object")
    return obj


def per_recipient(event: Event, rows: object, field: str | None, mail: Mail,
                  detail: Callable[[Any], str | None], when: int | None) -> list[Item]:
    """One item per distinct listed address (rows are dicts with `field`, or plain strings when
    field is None); the message's only destination when the list is empty."""
    if rows is not None and not isinstance(rows, list):
        raise BadReceipt("a recipient list is not a list")
    items: list[Item] = []
    seen: set[str] = set()
    for row in rows or []:
        addr = address(row if field is None else row.get(field) if isinstance(row, dict) else None)
        if addr is not None and addr.lower() not in seen:
            seen.add(addr.lower())
            items.append(Item(event, addr, detail(row), when))
    return items or [Item(event, mail.single, detail(None), when)]


def on_bounce(msg: dict[str, Any], mail: Mail) -> list[Item]:
    b = section(msg, "bounce")
    kind = b.get("bounceType")
    if kind not in ("Permanent", "Transient", "Undetermined"):
        return []
    event = Event.BOUNCED if kind == "Permanent" else Event.FAILED

    def detail(row: Any) -> str | None:
        status = row.get("status") if isinstance(row, dict) else None
        return token(kind, b.get("bounceSubType"),
                     status if isinstance(status, str) and STATUS.fullmatch(status) else None)
    return per_recipient(event, b.get("bouncedRecipients"), "emailAddress", mail, detail,
                         iso_ms(b.get("timestamp")))


def on_complaint(msg: dict[str, Any], mail: Mail) -> list[Item]:
    c = section(msg, "complaint")
    feedback = c.get("complaintFeedbackType")
    if feedback == "not-spam":  # a correction by the mailbox provider, not a complaint
        return []
    code = token(feedback if isinstance(feedback, str) else c.get("complaintSubType"))
    return per_recipient(Event.COMPLAINED, c.get("complainedRecipients"), "emailAddress", mail,
                         lambda _row: code, iso_ms(c.get("timestamp")))


def on_delay(msg: dict[str, Any], mail: Mail) -> list[Item]:
    d = section(msg, "deliveryDelay")

    def detail(row: Any) -> str | None:
        status = row.get("status") if isinstance(row, dict) else None
        return token(d.get("delayType"),
                     status if isinstance(status, str) and STATUS.fullmatch(status) else None)
    return per_recipient(Event.DEFERRED, d.get("delayedRecipients"), "emailAddress", mail,
                         detail, iso_ms(d.get("timestamp")))


def on_delivery(msg: dict[str, Any], mail: Mail) -> list[Item]:
    d = section(msg, "delivery")
    return per_recipient(Event.DELIVERED, d.get("recipients"), None, mail, lambda _row: None,
                         iso_ms(d.get("timestamp")))


def on_subscription(msg: dict[str, Any], mail: Mail) -> list[Item]:
    s = section(msg, "subscription")
    prefs = s.get("newTopicPreferences")
    if not isinstance(prefs, dict) or prefs.get("unsubscribeAll") is not True:
        return []
    return [Item(Event.UNSUBSCRIBED, mail.single, token(s.get("source")),
                 iso_ms(s.get("timestamp")))]


def whole(event: Event, name: str | None, detail: str | None) -> Callable[..., list[Item]]:
    """A type that concerns the message as a whole; `name` is its object with a timestamp."""
    def handle(msg: dict[str, Any], mail: Mail) -> list[Item]:
        obj = msg.get(name) if name else None
        when = iso_ms(obj.get("timestamp")) if isinstance(obj, dict) else None
        return [Item(event, mail.single, detail, when or mail.sent_at)]
    return handle


HANDLERS: dict[str, Callable[[dict[str, Any], Mail], list[Item]]] = {
    "Send": whole(Event.ACCEPTED, None, None),
    "Delivery": on_delivery,
    "Bounce": on_bounce,
    "Complaint": on_complaint,
    "Reject": whole(Event.FAILED, None, "Reject"),
    "Rendering Failure": whole(Event.FAILED, None, "RenderingFailure"),
    "DeliveryDelay": on_delay,
    "Open": whole(Event.OPENED, "open", None),
    "Click": whole(Event.OPENED, "click", "click"),
    "Subscription": on_subscription,
}


def read_receipts(env: dict[str, Any]) -> list[Receipt]:
    msg = json_of(env["Message"], BadReceipt, "Message")
    if not isinstance(msg, dict):
        raise BadReceipt("Message is not a JSON object")
    kind = msg.get("eventType", msg.get("notificationType"))
    if not isinstance(kind, str):
        raise BadReceipt("no eventType or notificationType")
    handler = HANDLERS.get(kind)
    if handler is None:
        return []  # a type notifyd does not know (e.g. AmazonSnsSubscriptionSucceeded)
    mail = read_mail(msg)
    items = handler(msg, mail)
    sns_id = str(env["MessageId"])
    return [Receipt(provider=NAME,
                    event_id=sns_id if len(items) == 1 else f"{sns_id}:{it.address or i}",
                    event=it.event, occurred_at=it.occurred_at, provider_ref=mail.ref,
                    key=mail.key, message_id=mail.message_id, address=it.address,
                    channel_type="email", detail=it.detail)
            for i, it in enumerate(items)]


async def parse(request: RawRequest, settings: Settings, now: int, fetch: Fetch) -> list[Receipt]:
    env = read_envelope(request.body)
    kind = check_envelope(request, env, settings, now)
    data, sig = signed_bytes(env, kind)
    key = await signing_key(env["SigningCertURL"], now, fetch)
    verify(key, data, sig, env["SignatureVersion"])
    # Verified from here on.
    if kind == "SubscriptionConfirmation":
        await confirm(env, fetch)
        return []
    if kind == "UnsubscribeConfirmation":
        return []
    return read_receipts(env)

