"""The ses receipt parser against messages signed here exactly as SNS documents it: a
self-signed RSA certificate served through a recording fetch, "Name\\nValue\\n" strings built
plainly in this file (not with the parser's code), SHA1withRSA (v1) and SHA256withRSA (v2)."""

from __future__ import annotations

import base64
import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa
from cryptography.x509.oid import NameOID
from multidict import CIMultiDict

from notifyd.receipts import ses
from notifyd.receipts.base import BadReceipt, BadSignature, Event, RawRequest, Receipt, message_key

TOPIC = "arn:aws:sns:us-east-1:123456789012:ses-events"
OTHER_TOPIC = "arn:aws:sns:us-east-1:123456789012:someone-else"
CERT_URL = "https://sns.us-east-1.amazonaws.com/SimpleNotificationService-0123456789abcdef.pem"
SUBSCRIBE_URL = ("https://sns.us-east-1.amazonaws.com/?Action=ConfirmSubscription&TopicArn="
                 f"{TOPIC}&Token=2336412f37fb687f5d51e6e2425c464d")
NOW_DT = datetime(2024, 5, 1, 12, 0, 0, tzinfo=UTC)
NOW = int(NOW_DT.timestamp() * 1000)
SETTINGS = ses.Settings(topic_arns=(TOPIC,))
SES_ID = "0100018f2b3c4d5e-aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee-000000"
OUR_MID = "n_01hx2y3z4a5b6c7d.2@notify.example.com"
KEY = "n_01hx2y3z4a5b6c7d:2"
ALICE, BOB = "alice@example.com", "bob@example.org"


def make_cert(key: rsa.RSAPrivateKey, days: int = 365,
              start: datetime = NOW_DT - timedelta(days=30)) -> bytes:
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "sns.amazonaws.com")])
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(start).not_valid_after(start + timedelta(days=days))
            .sign(key, hashes.SHA256()))
    return cert.public_bytes(serialization.Encoding.PEM)


KEY_PAIR = rsa.generate_private_key(public_exponent=65537, key_size=2048)
OTHER_KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)
PEM = make_cert(KEY_PAIR)

# The documented orders (sns-verify-signature-of-message-verify-message-signature.html).
NOTIFICATION_ORDER = ["Message", "MessageId", "Subject", "Timestamp", "TopicArn", "Type"]
CONFIRMATION_ORDER = ["Message", "MessageId", "SubscribeURL", "Timestamp", "Token", "TopicArn",
                      "Type"]


def sign(msg: dict[str, Any], order: list[str] | None = None,
         key: rsa.RSAPrivateKey = KEY_PAIR) -> dict[str, Any]:
    """Add SNS's Signature to msg: RSA PKCS#1 v1.5 over "Name\\nValue\\n" for each field present."""
    if order is None:
        order = NOTIFICATION_ORDER if msg["Type"] == "Notification" else CONFIRMATION_ORDER
    text = "".join(f"{name}\n{msg[name]}\n" for name in order if name in msg)
    algo = hashes.SHA1() if msg["SignatureVersion"] == "1" else hashes.SHA256()
    sig = key.sign(text.encode("utf-8"), padding.PKCS1v15(), algo)
    return {**msg, "Signature": base64.b64encode(sig).decode("ascii")}


def envelope(message: dict[str, Any] | str, *, version: str = "2", msg_id: str = "sns-msg-1",
             when: datetime = NOW_DT - timedelta(seconds=5), topic: str = TOPIC,
             cert_url: str = CERT_URL, subject: str | None = None) -> dict[str, Any]:
    env: dict[str, Any] = {
        "Type": "Notification", "MessageId": msg_id, "TopicArn": topic,
        "Message": message if isinstance(message, str) else json.dumps(message),
        "Timestamp": when.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
        "SignatureVersion": version, "SigningCertURL": cert_url,
        "UnsubscribeURL": "https://sns.us-east-1.amazonaws.com/?Action=Unsubscribe&x=1",
    }
    if subject is not None:
        env["Subject"] = subject
    return env


def confirmation(kind: str = "SubscriptionConfirmation", url: str = SUBSCRIBE_URL,
                 version: str = "1") -> dict[str, Any]:
    return {
        "Type": kind, "MessageId": "sns-sub-1", "Token": "2336412f37fb687f5d51e6e2425c464d",
        "TopicArn": TOPIC, "SubscribeURL": url,
        "Message": f"You have chosen to subscribe to the topic {TOPIC}.\nTo confirm the "
                   "subscription, visit the SubscribeURL included in this message.",
        "Timestamp": "2024-05-01T11:59:58.000Z", "SignatureVersion": version,
        "SigningCertURL": CERT_URL,
    }


def request(body: dict[str, Any] | bytes, kind: str | None = "auto") -> RawRequest:
    raw = body if isinstance(body, bytes) else json.dumps(body, indent=2).encode()
    headers: CIMultiDict[str] = CIMultiDict({"Content-Type": "text/plain; charset=UTF-8"})
    if kind == "auto" and isinstance(body, dict):
        kind = body.get("Type")
    if kind:
        headers["X-Amz-Sns-Message-Type"] = kind  # SNS's case differs from the parser's lookup
    return RawRequest("POST", "https://notify.example.com/v1/webhooks/ses", headers, raw, {})


class Fetcher:
    """The fetch argument: serves the test certificate and records every URL asked for."""

    def __init__(self, pages: dict[str, bytes] | None = None) -> None:
        self.pages = {CERT_URL: PEM, SUBSCRIBE_URL: b"<ConfirmSubscriptionResponse/>",
                      **(pages or {})}
        self.urls: list[str] = []

    async def __call__(self, url: str) -> bytes:
        self.urls.append(url)
        if url not in self.pages:
            raise AssertionError(f"fetched an unexpected URL: {url}")
        return self.pages[url]


@pytest.fixture(autouse=True)
def fresh_cache() -> None:
    ses.CERTS.clear()


async def run(body: dict[str, Any] | bytes, fetch: Fetcher | None = None,
              settings: ses.Settings = SETTINGS, kind: str | None = "auto") -> list[Receipt]:
    return await ses.parse(request(body, kind), settings, NOW, fetch or Fetcher())


async def refused(body: dict[str, Any] | bytes, fetch: Fetcher | None = None,
                  exc: type[Exception] = BadSignature, **kw: Any) -> str:
    with pytest.raises(exc) as info:
        await run(body, fetch, **kw)
    text = str(info.value)
    assert "@" not in text and "2336412f" not in text  # no address, no token
    return text


# -- SES records, shaped as in the SES developer guide's examples --

def mail(destination: list[str] | None = None, tag_key: str | None = None,
         headers: bool = True) -> dict[str, Any]:
    m: dict[str, Any] = {
        "timestamp": "2024-05-01T11:58:00.000Z", "source": "notify@notify.example.com",
        "sourceArn": "arn:aws:ses:us-east-1:123456789012:identity/notify.example.com",
        "sendingAccountId": "123456789012", "messageId": SES_ID,
        "destination": destination or [ALICE], "headersTruncated": False,
        "tags": {"ses:configuration-set": ["notifyd"], "ses:from-domain": ["notify.example.com"]},
    }
    if headers:
        m["headers"] = [{"name": "From", "value": "notify@notify.example.com"},
                        {"name": "To", "value": ", ".join(destination or [ALICE])},
                        {"name": "Message-ID", "value": f"<{OUR_MID}>"},
                        {"name": "Subject", "value": "Your code"}]
        m["commonHeaders"] = {"from": ["notify@notify.example.com"], "to": destination or [ALICE],
                              "messageId": f"<{OUR_MID}>", "subject": "Your code"}
    if tag_key:
        m["tags"]["notifyd_key"] = [tag_key]
    return m


def record(kind: str, body: dict[str, Any] | None = None, *, field: str = "eventType",
           **mail_kw: Any) -> dict[str, Any]:
    obj = {field: kind, "mail": mail(**mail_kw)}
    obj.update(body or {})
    return obj


T = "2024-05-01T11:59:00.000Z"
T_MS = int(datetime(2024, 5, 1, 11, 59, tzinfo=UTC).timestamp() * 1000)
SENT_MS = int(datetime(2024, 5, 1, 11, 58, tzinfo=UTC).timestamp() * 1000)

CASES: list[tuple[str, dict[str, Any], list[tuple[Event, str | None, str | None, int]]]] = [
    ("send", record("Send", {"send": {}}), [(Event.ACCEPTED, ALICE, None, SENT_MS)]),
    ("delivery", record("Delivery", {"delivery": {
        "timestamp": T, "processingTimeMillis": 1200, "recipients": [ALICE],
        "smtpResponse": "250 2.6.0 Message received", "reportingMTA": "a8-70.smtp-out.example"}}),
     [(Event.DELIVERED, ALICE, None, T_MS)]),
    ("bounce permanent", record("Bounce", {"bounce": {
        "bounceType": "Permanent", "bounceSubType": "General", "timestamp": T,
        "feedbackId": "0100-fb", "reportingMTA": "dsn; mta.example.com",
        "bouncedRecipients": [{"emailAddress": ALICE, "action": "failed", "status": "5.1.1",
                               "diagnosticCode": f"smtp; 550 5.1.1 <{ALICE}> user unknown"}]}}),
     [(Event.BOUNCED, ALICE, "Permanent:General:5.1.1", T_MS)]),
    ("bounce transient", record("Bounce", {"bounce": {
        "bounceType": "Transient", "bounceSubType": "MailboxFull", "timestamp": T,
        "bouncedRecipients": [{"emailAddress": ALICE}]}}),
     [(Event.FAILED, ALICE, "Transient:MailboxFull", T_MS)]),
    ("bounce undetermined", record("Bounce", {"bounce": {
        "bounceType": "Undetermined", "bounceSubType": "Undetermined", "timestamp": T,
        "bouncedRecipients": [{"emailAddress": ALICE}]}}),
     [(Event.FAILED, ALICE, "Undetermined:Undetermined", T_MS)]),
    ("complaint", record("Complaint", {"complaint": {
        "complainedRecipients": [{"emailAddress": ALICE}], "timestamp": T,
        "feedbackId": "0100-fb", "userAgent": "Mozilla/5.0", "complaintFeedbackType": "abuse",
        "arrivalDate": T}}),
     [(Event.COMPLAINED, ALICE, "abuse", T_MS)]),
    ("reject", record("Reject", {"reject": {"reason": "Bad content"}}),
     [(Event.FAILED, ALICE, "Reject", SENT_MS)]),
    ("rendering failure", record("Rendering Failure", {"failure": {
        "errorMessage": "Attribute 'name' is not present in the rendering data.",
        "templateName": "MyTemplate"}}),
     [(Event.FAILED, ALICE, "RenderingFailure", SENT_MS)]),
    ("delivery delay", record("DeliveryDelay", {"deliveryDelay": {
        "timestamp": T, "delayType": "TransientCommunicationFailure",
        "expirationTime": "2024-05-01T12:59:00.000Z",
        "delayedRecipients": [{"emailAddress": ALICE, "status": "4.4.1",
                               "diagnosticCode": "smtp; 421 4.4.1 Unable to connect"}]}}),
     [(Event.DEFERRED, ALICE, "TransientCommunicationFailure:4.4.1", T_MS)]),
    ("open", record("Open", {"open": {"ipAddress": "192.0.2.1", "timestamp": T,
                                      "userAgent": "Mozilla/5.0"}}),
     [(Event.OPENED, ALICE, None, T_MS)]),
    ("click", record("Click", {"click": {"ipAddress": "192.0.2.1", "timestamp": T,
                                         "link": f"https://example.com/?u={ALICE}",
                                         "linkTags": {}, "userAgent": "Mozilla/5.0"}}),
     [(Event.OPENED, ALICE, "click", T_MS)]),
    ("subscription: unsubscribe all", record("Subscription", {"subscription": {
        "contactList": "news", "timestamp": T, "source": "UnsubscribeHeader",
        "newTopicPreferences": {"unsubscribeAll": True, "topicSubscriptionStatus": []},
        "oldTopicPreferences": {"unsubscribeAll": False, "topicSubscriptionStatus": []}}}),
     [(Event.UNSUBSCRIBED, ALICE, "UnsubscribeHeader", T_MS)]),
    # Notification publishing on the identity: notificationType, no tags.
    ("notification bounce", record("Bounce", {"bounce": {
        "bounceType": "Permanent", "bounceSubType": "NoEmail", "timestamp": T,
        "bouncedRecipients": [{"emailAddress": ALICE}]}}, field="notificationType"),
     [(Event.BOUNCED, ALICE, "Permanent:NoEmail", T_MS)]),
    ("notification complaint", record("Complaint", {"complaint": {
        "complainedRecipients": [{"emailAddress": ALICE}], "timestamp": T}},
        field="notificationType"),
     [(Event.COMPLAINED, ALICE, None, T_MS)]),
    ("notification delivery", record("Delivery", {"delivery": {
        "timestamp": T, "recipients": [ALICE]}}, field="notificationType"),
     [(Event.DELIVERED, ALICE, None, T_MS)]),
]


@pytest.mark.parametrize("version", ["1", "2"])
@pytest.mark.parametrize(("name", "rec", "expected"), CASES, ids=[c[0] for c in CASES])
async def test_each_ses_type(name: str, rec: dict[str, Any], version: str,
                             expected: list[tuple[Event, str | None, str | None, int]]) -> None:
    fetch = Fetcher()
    got = await run(sign(envelope(rec, version=version)), fetch)
    assert [(r.event, r.address, r.detail, r.occurred_at) for r in got] == expected
    for r in got:
        assert r.provider == "ses" and r.event_id == "sns-msg-1" and r.channel_type == "email"
        assert r.provider_ref == SES_ID and r.message_id == OUR_MID
        assert message_key(r.message_id) == KEY and r.key is None
    assert fetch.urls == [CERT_URL]


async def test_key_from_tag_or_header() -> None:
    got = await run(sign(envelope(record("Send", {"send": {}}, tag_key="n_01hx2y3z4a5b6c7d-2"))))
    assert got[0].key == KEY
    rec = record("Send", {"send": {}})
    rec["mail"]["headers"].append({"name": "X-Notifyd-Key", "value": KEY})
    assert (await run(sign(envelope(rec))))[0].key == KEY
    rec["mail"]["headers"][-1]["value"] = "not a key"
    assert (await run(sign(envelope(rec))))[0].key is None


async def test_message_id_from_headers_when_no_common_headers() -> None:
    rec = record("Send", {"send": {}})
    del rec["mail"]["commonHeaders"]
    assert (await run(sign(envelope(rec))))[0].message_id == OUR_MID
    assert (await run(sign(envelope(record("Send", {"send": {}}, headers=False)))))[0] \
        .message_id is None


async def test_several_recipients_get_unique_stable_ids() -> None:
    rec = record("Bounce", {"bounce": {
        "bounceType": "Permanent", "bounceSubType": "General", "timestamp": T,
        "bouncedRecipients": [{"emailAddress": ALICE}, {"emailAddress": BOB},
                              {"emailAddress": ALICE.upper()}]}}, destination=[ALICE, BOB])
    body = sign(envelope(rec))
    first, again = await run(body), await run(body)
    assert [r.address for r in first] == [ALICE, BOB]
    assert [r.event_id for r in first] == [f"sns-msg-1:{ALICE}", f"sns-msg-1:{BOB}"]
    assert [r.event_id for r in again] == [r.event_id for r in first]


async def test_skipped_types() -> None:
    not_spam = record("Complaint", {"complaint": {
        "complainedRecipients": [{"emailAddress": ALICE}], "complaintFeedbackType": "not-spam"}})
    topic_only = record("Subscription", {"subscription": {
        "newTopicPreferences": {"unsubscribeAll": False, "topicSubscriptionStatus": [
            {"topicName": "news", "subscriptionStatus": "OptOut"}]}}})
    hello = {"notificationType": "AmazonSnsSubscriptionSucceeded",
             "message": "You have successfully subscribed your Amazon SNS topic"}
    for rec in (not_spam, topic_only, hello, record("SomethingNew", {})):
        assert await run(sign(envelope(rec))) == []


async def test_subject_is_signed_when_present() -> None:
    rec = record("Send", {"send": {}})
    assert len(await run(sign(envelope(rec, subject="Amazon SES Email Event Notification")))) == 1
    # Signed without the Subject that the message carries: refused.
    no_subject = [f for f in NOTIFICATION_ORDER if f != "Subject"]
    await refused(sign(envelope(rec, subject="Amazon SES"), order=no_subject))


async def test_non_ascii_is_signed_as_utf8() -> None:
    rec = record("Send", {"send": {}})
    rec["mail"]["commonHeaders"]["subject"] = "Ihr Code: \u00fc\u2713 \U0001f510"
    env = sign(envelope(rec, subject="SES \u00e9v\u00e9nement"))
    raw = json.dumps(env, ensure_ascii=False).encode("utf-8")
    assert len(await run(raw, kind="Notification")) == 1
    assert len(await run(json.dumps(env).encode(), kind="Notification")) == 1  # \u escapes


async def test_reserialised_body_still_verifies() -> None:
    # SNS signs field values, not the body's bytes: whitespace and key order do not matter.
    env = sign(envelope(record("Send", {"send": {}})))
    compact = json.dumps(dict(reversed(list(env.items()))), separators=(",", ":")).encode()
    assert len(await run(compact, kind="Notification")) == 1


# -- subscription confirmation --

async def test_subscription_confirmed_after_verification() -> None:
    fetch = Fetcher()
    assert await run(sign(confirmation()), fetch) == []
    assert fetch.urls == [CERT_URL, SUBSCRIBE_URL]


async def test_subscription_forged_is_not_confirmed() -> None:
    fetch = Fetcher()
    await refused(sign(confirmation(), key=OTHER_KEY), fetch)
    assert SUBSCRIBE_URL not in fetch.urls
    fetch = Fetcher()
    await refused(sign(confirmation()), fetch, settings=ses.Settings(topic_arns=(OTHER_TOPIC,)))
    assert fetch.urls == []


@pytest.mark.parametrize("url", [
    "https://sns.us-east-1.amazonaws.com.evil.example/?Action=ConfirmSubscription",
    "http://sns.us-east-1.amazonaws.com/?Action=ConfirmSubscription",
    "https://evil.example@sns.us-east-1.amazonaws.com/?Action=ConfirmSubscription",
    "https://sns.us-east-1.amazonaws.com:8443/?Action=ConfirmSubscription",
    "https://sns.us-east-1.amazonaws.com/?Action=Unsubscribe",
])
async def test_subscribe_url_elsewhere_is_never_fetched(url: str) -> None:
    fetch = Fetcher()
    await refused(sign(confirmation(url=url)), fetch, exc=BadReceipt)
    assert fetch.urls == [CERT_URL]


async def test_unsubscribe_confirmation_verified_and_ignored() -> None:
    fetch = Fetcher()
    assert await run(sign(confirmation("UnsubscribeConfirmation", version="2")), fetch) == []
    assert fetch.urls == [CERT_URL]
    await refused(sign(confirmation("UnsubscribeConfirmation"), key=OTHER_KEY))


# -- the certificate --

@pytest.mark.parametrize("url", [
    "https://sns.us-east-1.amazonaws.com.evil.example/SimpleNotificationService-1.pem",
    "http://sns.us-east-1.amazonaws.com/SimpleNotificationService-1.pem",
    "https://sns.us-east-1.amazonaws.com:8443/SimpleNotificationService-1.pem",
    "https://user@sns.us-east-1.amazonaws.com/SimpleNotificationService-1.pem",
    "https://user:pw@sns.us-east-1.amazonaws.com/SimpleNotificationService-1.pem",
    "https://sns.us-east-1.amazonaws.com@evil.example/SimpleNotificationService-1.pem",
    "https://evil.example/sns.us-east-1.amazonaws.com/SimpleNotificationService-1.pem",
    "https://s3.amazonaws.com/sns.us-east-1.amazonaws.com/x.pem",
    "https://sns.us-east-1.amazonaws.com/SimpleNotificationService-1.txt",
    "https://sns.us-east-1.amazonaws.com/x.pem?y=.pem",
    "https://sns.us-east-1.amazonaws.com/../x.pem",
    "https://sns.us-east-1.amazonaws.com\\@evil.example/x.pem",
    "https://sns.us-east-1.amazonaws.com /x.pem",
    "https://snsXus-east-1.amazonaws.com/x.pem",
    "ftp://sns.us-east-1.amazonaws.com/x.pem",
])
async def test_certificate_elsewhere_is_never_fetched(url: str) -> None:
    fetch = Fetcher({url: PEM})
    await refused(sign(envelope(record("Send", {"send": {}}), cert_url=url)), fetch)
    assert fetch.urls == []


@pytest.mark.parametrize("url", [
    "https://sns.cn-north-1.amazonaws.com.cn/SimpleNotificationService-1.pem",
    "https://sns.us-gov-west-1.amazonaws.com/SimpleNotificationService-1.pem",
    "https://SNS.eu-west-1.amazonaws.com:443/SimpleNotificationService-1.pem",
])
async def test_other_partitions_and_an_explicit_443(url: str) -> None:
    fetch = Fetcher({url: PEM})
    assert len(await run(sign(envelope(record("Send", {"send": {}}), cert_url=url)), fetch)) == 1
    assert fetch.urls == [url]


async def test_certificate_fetched_once_for_many_messages() -> None:
    fetch = Fetcher()
    for i in range(5):
        await run(sign(envelope(record("Send", {"send": {}}), msg_id=f"m{i}",
                                version="12"[i % 2])), fetch)
    await run(sign(confirmation()), fetch)
    assert fetch.urls == [CERT_URL, SUBSCRIBE_URL]


async def test_cache_is_bounded() -> None:
    cache = ses.CertCache(limit=2)
    cert = ses.load_cert(PEM)
    for url in ("a", "b", "c"):
        cache.put(url, cert)
    assert cache.get("a") is None and cache.get("c") is cert


@pytest.mark.parametrize("pem", [
    b"not a certificate",
    make_cert(KEY_PAIR, days=10, start=NOW_DT - timedelta(days=40)),  # expired
    make_cert(KEY_PAIR, start=NOW_DT + timedelta(days=1)),  # not yet valid
])
async def test_unusable_certificate(pem: bytes) -> None:
    await refused(sign(envelope(record("Send", {"send": {}}))), Fetcher({CERT_URL: pem}))


async def test_certificate_without_rsa_key() -> None:
    ec_key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "x")])
    pem = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
           .public_key(ec_key.public_key()).serial_number(1)
           .not_valid_before(NOW_DT - timedelta(days=1)).not_valid_after(NOW_DT + timedelta(days=1))
           .sign(ec_key, hashes.SHA256()).public_bytes(serialization.Encoding.PEM))
    assert "RSA" in await refused(sign(envelope(record("Send", {"send": {}}))),
                                  Fetcher({CERT_URL: pem}))


# -- refused messages --

async def test_another_topic() -> None:
    fetch = Fetcher()
    await refused(sign(envelope(record("Send", {"send": {}}), topic=OTHER_TOPIC)), fetch)
    assert fetch.urls == []


async def test_no_topics_configured_refuses_all() -> None:
    empty = ses.Settings()
    assert not empty.enabled() and SETTINGS.enabled()
    await refused(sign(envelope(record("Send", {"send": {}}))), settings=empty)


async def test_topic_header_must_match_the_body() -> None:
    req = request(sign(envelope(record("Send", {"send": {}}))))
    req.headers["x-amz-sns-topic-arn"] = OTHER_TOPIC  # type: ignore[index]
    with pytest.raises(BadSignature):
        await ses.parse(req, SETTINGS, NOW, Fetcher())


@pytest.mark.parametrize("version", ["1", "2"])
async def test_forged_signature(version: str) -> None:
    await refused(sign(envelope(record("Send", {"send": {}}), version=version), key=OTHER_KEY))


async def test_signed_with_the_other_hash() -> None:
    env = sign(envelope(record("Send", {"send": {}}), version="1"))
    await refused({**env, "SignatureVersion": "2"})


async def test_tampered_after_signing() -> None:
    env = sign(envelope(record("Send", {"send": {}})))
    forged = record("Bounce", {"bounce": {"bounceType": "Permanent",
                                          "bouncedRecipients": [{"emailAddress": BOB}]}})
    for field, value in [("Message", json.dumps(forged)), ("MessageId", "sns-msg-2"),
                         ("Timestamp", "2024-05-01T11:59:59.000Z"), ("Subject", "added")]:
        await refused({**env, field: value})


@pytest.mark.parametrize("order", [
    ["Message", "MessageId", "Subject", "Type", "Timestamp", "TopicArn"],  # the prose's order
    ["Type", "TopicArn", "Timestamp", "Subject", "MessageId", "Message"],
    ["MessageId", "Message", "Subject", "Timestamp", "TopicArn", "Type"],
])
async def test_field_order_changed(order: list[str]) -> None:
    await refused(sign(envelope(record("Send", {"send": {}}), subject="s"), order=order))


async def test_confirmation_signed_in_notification_order() -> None:
    await refused(sign(confirmation(), order=NOTIFICATION_ORDER))


async def test_raw_delivery_is_refused() -> None:
    fetch = Fetcher()
    text = await refused(record("Delivery", {"delivery": {"recipients": [ALICE]}}), fetch,
                         kind="Notification")
    assert "raw" in text and fetch.urls == []


@pytest.mark.parametrize(("age", "ok"), [(3000, True), (3899, True), (3901, False),
                                          (86400, False), (-299, True), (-301, False)])
async def test_timestamp_window(age: int, ok: bool) -> None:
    body = sign(envelope(record("Send", {"send": {}}), when=NOW_DT - timedelta(seconds=age)))
    if ok:
        assert len(await run(body)) == 1
    else:
        assert "Timestamp" in await refused(body)


async def test_tolerance_is_a_setting() -> None:
    body = sign(envelope(record("Send", {"send": {}}), when=NOW_DT - timedelta(seconds=120)))
    await refused(body, settings=ses.Settings(topic_arns=(TOPIC,), tolerance_sec=60))


async def test_truncated_body() -> None:
    raw = json.dumps(sign(envelope(record("Send", {"send": {}})))).encode()
    for cut in (1, len(raw) // 2, len(raw) - 1):
        await refused(raw[:cut], kind="Notification")


@pytest.mark.parametrize("change", [
    {"SignatureVersion": "3"}, {"SignatureVersion": 2}, {"Signature": "***not base64***"},
    {"Signature": ""}, {"Type": "Other"}, {"Timestamp": "yesterday"},
    {"Timestamp": "2024-05-01T11:59:55"}, {"SigningCertURL": None}, {"MessageId": 7},
])
async def test_malformed_envelope(change: dict[str, Any]) -> None:
    fetch = Fetcher()
    env = {**sign(envelope(record("Send", {"send": {}}))), **change}
    await refused(env, fetch, kind="Notification")
    assert fetch.urls == []  # refused before any certificate is fetched


async def test_message_type_header() -> None:
    env = sign(envelope(record("Send", {"send": {}})))
    await refused(env, kind=None)
    await refused(env, kind="SubscriptionConfirmation")


async def test_duplicate_keys_refused() -> None:
    raw = json.dumps(sign(envelope(record("Send", {"send": {}})))).encode()
    await refused(raw[:-1] + b', "Type": "Notification"}', kind="Notification")


async def test_not_json_at_all() -> None:
    await refused(b"\xff\xfe garbage", kind="Notification")
    await refused(b"[1, 2]", kind="Notification")


# -- verified but unreadable --

@pytest.mark.parametrize("message", [
    "this is not JSON", "[1, 2, 3]", json.dumps({"mail": {"messageId": SES_ID}}),
    json.dumps({"eventType": "Send", "send": {}}),
    json.dumps({"eventType": "Bounce", "mail": {"messageId": SES_ID}}),
    json.dumps({"eventType": "Delivery", "mail": {"messageId": SES_ID},
                "delivery": {"recipients": ALICE}}),
])
async def test_verified_but_unreadable(message: str) -> None:
    await refused(sign(envelope(message)), exc=BadReceipt)


# -- settings --

def test_settings_problems_never_echo_values() -> None:
    assert SETTINGS.problems() == []
    bad = ses.Settings(topic_arns=(TOPIC, "arn:aws:s3:::secret-bucket-name"), tolerance_sec=5)
    problems = bad.problems()
    assert [k for k, _ in problems] == ["topic_arns", "tolerance_sec"]
    assert all("secret-bucket" not in m for _, m in problems)
    ok = ses.Settings(topic_arns=("arn:aws-cn:sns:cn-north-1:123456789012:t.fifo",
                                  "arn:aws-us-gov:sns:us-gov-west-1:123456789012:t_1"))
    assert ok.problems() == []


def test_provider_entry() -> None:
    assert ses.PROVIDER.name == "ses" and ses.PROVIDER.settings is ses.Settings
    assert ses.PROVIDER.parse is ses.parse
