"""Postmark's webhook parser. Postmark signs nothing: it calls a URL carrying basic auth
credentials (https://user:pass@host/...) and/or sends custom headers set on the webhook. The
Authorization header here is built the way an HTTP client builds it from such a URL
(aiohttp.BasicAuth.from_url), not by the parser's code; bodies are the samples of Postmark's webhook
pages (bounce, delivery, open, spam complaint, subscription change, click).
"""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
from aiohttp import BasicAuth
from multidict import CIMultiDict
from yarl import URL

from notifyd.receipts.base import BadReceipt, BadSignature, Event, RawRequest, Receipt
from notifyd.receipts.postmark import PROVIDER, PostmarkSettings, parse

NOW = 1_790_000_000_000
USER = "postmark"
PASSWORD = "Zq7v3Lx9Tn2Wb6Kd4Hs8Mp1R"
SECRET_HEADER = "X-Webhook-Secret"
SECRET = "9f8e7d6c5b4a39281706f5e4d3c2b1a0"
BASIC = PostmarkSettings(username=USER, password=PASSWORD)
HEADER = PostmarkSettings(header_name=SECRET_HEADER, header_value=SECRET)
BOTH = PostmarkSettings(username=USER, password=PASSWORD, header_name=SECRET_HEADER,
                        header_value=SECRET)
ADDRESS = "john@example.com"
MESSAGE_ID = "883953f4-6105-42a2-a16a-77a8eac79483"
KEY = "n_01k9zq3x7c2m4v6b8n:2"
WEBHOOK_URL = f"https://{USER}:{PASSWORD}@notify.acme.test/v1/webhooks/postmark"


def authorization(url: str = WEBHOOK_URL) -> str:
    auth = BasicAuth.from_url(URL(url))
    assert auth is not None
    return auth.encode()


def request(record: Any, *, basic: str | None = None, secret: str | None = SECRET,
            body: bytes | None = None) -> RawRequest:
    headers = CIMultiDict({"Content-Type": "application/json",
                           "Authorization": basic if basic is not None else authorization()})
    if secret is not None:
        headers[SECRET_HEADER.lower()] = secret
    if body is None:
        body = json.dumps(record, indent=2).encode()
    return RawRequest("POST", "https://notify.acme.test/v1/webhooks/postmark", headers, body, {})


async def no_fetch(url: str) -> bytes:
    raise AssertionError("the postmark parser fetches nothing")


async def parse_ok(record: Any, settings: PostmarkSettings = BOTH) -> list[Receipt]:
    return await parse(request(record), settings, NOW, no_fetch)


def bounce(bounce_type: str, type_code: int = 1, **extra: Any) -> dict[str, Any]:
    record = {"RecordType": "Bounce", "MessageStream": "outbound", "ID": 4323372036854775807,
              "Type": bounce_type, "TypeCode": type_code, "Name": "Hard bounce",
              "Tag": "Invitation", "MessageID": MESSAGE_ID,
              "Metadata": {"a_key": "a_value"}, "ServerID": 23,
              "Description": "The server was unable to deliver your message.",
              "Details": f"smtp;550 5.1.1 <{ADDRESS}>: Recipient address rejected",
              "Email": ADDRESS, "From": "sender@example.com",
              "BouncedAt": "2019-11-05T16:33:54.9070259Z", "DumpAvailable": True,
              "Inactive": True, "CanActivate": True, "Subject": "Test subject"}
    record.update(extra)
    return record


DELIVERY = {"RecordType": "Delivery", "ServerID": 23, "MessageStream": "outbound",
            "MessageID": MESSAGE_ID, "Recipient": ADDRESS, "Tag": "welcome-email",
            "DeliveredAt": "2021-02-21T16:34:52Z", "Details": "Test delivery webhook details",
            "Metadata": {"notifyd_key": KEY, "example": "value"}}
OPEN = {"RecordType": "Open", "MessageStream": "outbound", "FirstOpen": True,
        "Client": {"Name": "Chrome 35.0.1916.153", "Company": "Google", "Family": "Chrome"},
        "OS": {"Name": "OS X 10.7 Lion", "Company": "Apple Computer, Inc.", "Family": "OS X 10"},
        "Platform": "WebMail", "UserAgent": "Mozilla/5.0", "ReadSeconds": 5,
        "Geo": {"CountryISOCode": "RS", "Country": "Serbia", "IP": "188.2.95.4"},
        "MessageID": MESSAGE_ID, "Metadata": {}, "ReceivedAt": "2019-11-05T16:33:54.9070259Z",
        "Tag": "welcome-email", "Recipient": ADDRESS}
SPAM = {"RecordType": "SpamComplaint", "MessageStream": "outbound", "ID": 42,
        "Type": "SpamComplaint", "TypeCode": 100001, "Name": "Spam complaint", "Tag": "Test",
        "MessageID": MESSAGE_ID, "Metadata": {}, "ServerID": 1234, "Description": "",
        "Details": "Test spam complaint details", "Email": ADDRESS, "From": "sender@example.com",
        "BouncedAt": "2019-11-05T16:33:54.9070259Z", "DumpAvailable": True, "Inactive": True,
        "CanActivate": False, "Subject": "Test subject"}


def subscription(suppress: bool, reason: str = "ManualSuppression",
                 origin: str = "Recipient") -> dict[str, Any]:
    return {"RecordType": "SubscriptionChange", "MessageID": MESSAGE_ID, "ServerID": 23,
            "MessageStream": "outbound", "ChangedAt": "2020-02-01T10:53:34.416071Z",
            "Recipient": ADDRESS, "Origin": origin, "SuppressSending": suppress,
            "SuppressionReason": reason, "Tag": "my-tag", "Metadata": {}}


CLICK = {"RecordType": "Click", "MessageStream": "outbound", "ClickLocation": "HTML",
         "Platform": "Desktop", "UserAgent": "Mozilla/5.0", "OriginalLink": "https://example.com",
         "MessageID": MESSAGE_ID, "Metadata": {}, "ReceivedAt": "2017-10-25T15:21:11.0000000Z",
         "Tag": "welcome-email", "Recipient": ADDRESS}

# -- valid requests: the mapping, table-driven --

MAPPING = [
    (DELIVERY, Event.DELIVERED, None),
    (OPEN, Event.OPENED, None),
    (SPAM, Event.COMPLAINED, "SpamComplaint"),
    (bounce("HardBounce"), Event.BOUNCED, "HardBounce"),
    (bounce("BadEmailAddress", 100000), Event.BOUNCED, "BadEmailAddress"),
    (bounce("Unsubscribe", 16), Event.UNSUBSCRIBED, "Unsubscribe"),
    (bounce("SpamComplaint", 100001), Event.COMPLAINED, "SpamComplaint"),
    (bounce("Transient", 2), Event.DEFERRED, "Transient"),
    (bounce("DnsError", 256), Event.DEFERRED, "DnsError"),
    (bounce("SoftBounce", 4096), Event.FAILED, "SoftBounce"),
    (bounce("SpamNotification", 512), Event.FAILED, "SpamNotification"),
    (bounce("Blocked", 100006), Event.FAILED, "Blocked"),
    (bounce("DMARCPolicy", 100009), Event.FAILED, "DMARCPolicy"),
    (bounce("VirusNotification", 8192), Event.FAILED, "VirusNotification"),
    (bounce("ManuallyDeactivated", 100002), Event.FAILED, "ManuallyDeactivated"),
    (bounce("Unconfirmed", 100003), Event.FAILED, "Unconfirmed"),
    (bounce("SMTPApiError", 100007), Event.FAILED, "SMTPApiError"),
    (bounce("TemplateRenderingFailed", 100010), Event.FAILED, "TemplateRenderingFailed"),
    (bounce("Unknown", 2048), Event.FAILED, "Unknown"),
    (subscription(True, "ManualSuppression"), Event.UNSUBSCRIBED, "ManualSuppression"),
    (subscription(True, "ManualSuppression", "Customer"), Event.UNSUBSCRIBED, "ManualSuppression"),
    (subscription(True, "HardBounce"), Event.BOUNCED, "HardBounce"),
    (subscription(True, "SpamComplaint"), Event.COMPLAINED, "SpamComplaint"),
]


@pytest.mark.parametrize(("record", "expected", "detail"), MAPPING,
                         ids=[f"{m[0]['RecordType']}-{m[2]}-{i}" for i, m in enumerate(MAPPING)])
async def test_each_record_maps(record: dict[str, Any], expected: Event, detail: str | None) -> None:
    [receipt] = await parse_ok(record)
    assert receipt.event is expected
    assert receipt.detail == detail
    assert receipt.provider == "postmark" and receipt.channel_type == "email"
    assert receipt.provider_ref == MESSAGE_ID and receipt.address == ADDRESS
    assert receipt.message_id is None


SKIPPED = [CLICK, subscription(False), bounce("AutoResponder", 64), bounce("AddressChange", 128),
           bounce("Subscribe", 32), bounce("ChallengeVerification", 16384),
           bounce("OpenRelayTest", 1024), bounce("InboundError", 100008),
           bounce("SomethingNew", 999999), {"RecordType": "Inbound", "From": ADDRESS},
           {"RecordType": "SomeFutureRecord"}]


@pytest.mark.parametrize("record", SKIPPED, ids=[f"skip-{i}" for i in range(len(SKIPPED))])
async def test_skipped_records(record: dict[str, Any]) -> None:
    assert await parse_ok(record) == []


async def test_fields_of_a_delivery() -> None:
    [r] = await parse_ok(DELIVERY)
    assert r.occurred_at == 1613925292000
    assert r.key == KEY
    assert r.event_id.startswith(f"Delivery:{MESSAGE_ID}:")
    assert ADDRESS not in r.event_id


async def test_bounce_ids_and_times() -> None:
    [r] = await parse_ok(bounce("HardBounce", Metadata={"notifyd_key": KEY}))
    assert r.event_id == "Bounce:4323372036854775807"
    assert r.occurred_at == 1572971634907
    assert r.key == KEY
    [s] = await parse_ok(SPAM)
    assert s.event_id == "SpamComplaint:42"


async def test_event_ids_repeat_on_a_retry_and_differ_per_event() -> None:
    reordered = dict(reversed(list(OPEN.items())))
    [first] = await parse_ok(OPEN)
    [retry] = await parse(request(None, body=json.dumps(reordered).encode()), BOTH, NOW, no_fetch)
    assert first.event_id == retry.event_id
    [second_open] = await parse_ok({**OPEN, "FirstOpen": False,
                                    "ReceivedAt": "2019-11-05T17:00:00.0000000Z"})
    [other_recipient] = await parse_ok({**OPEN, "Recipient": "jane@example.com"})
    assert len({first.event_id, second_open.event_id, other_recipient.event_id}) == 3
    [suppressed] = await parse_ok(subscription(True))
    assert suppressed.event_id.startswith(f"SubscriptionChange:{MESSAGE_ID}:")


async def test_manual_suppression_without_message_id() -> None:
    record = {**subscription(True, origin="Customer"), "MessageID": None}
    [r] = await parse_ok(record)
    assert r.provider_ref is None and r.event_id.startswith("SubscriptionChange:-:")


async def test_odd_fields_are_none() -> None:
    record = {"RecordType": "Delivery", "MessageID": "  ", "Recipient": "nobody",
              "DeliveredAt": "yesterday", "Metadata": {"notifyd_key": "has space"}}
    [r] = await parse_ok(record)
    assert (r.provider_ref, r.address, r.occurred_at, r.key) == (None, None, None, None)


async def test_a_naive_timestamp_is_utc() -> None:
    [r] = await parse_ok({**DELIVERY, "DeliveredAt": "2021-02-21T16:34:52"})
    assert r.occurred_at == 1613925292000


@pytest.mark.parametrize("settings", [BASIC, HEADER, BOTH], ids=["basic", "header", "both"])
async def test_each_way_of_authenticating(settings: PostmarkSettings) -> None:
    assert len(await parse(request(DELIVERY), settings, NOW, no_fetch)) == 1


async def test_no_body_integrity_a_reserialised_body_is_accepted() -> None:
    # Nothing signs the body: what arrives over TLS with the right credentials is taken as is.
    compact = json.dumps(DELIVERY, separators=(",", ":")).encode()
    assert len(await parse(request(None, body=compact), BOTH, NOW, no_fetch)) == 1


# -- refused: BadSignature --


async def refused(req: RawRequest, settings: PostmarkSettings = BOTH) -> None:
    with pytest.raises(BadSignature) as info:
        await parse(req, settings, NOW, no_fetch)
    message = str(info.value)
    for secret in (PASSWORD, SECRET, ADDRESS, authorization().split()[1]):
        assert secret not in message


@pytest.mark.parametrize("url", [
    f"https://{USER}:wrong-password@h/p", f"https://someone:{PASSWORD}@h/p",
    f"https://{USER}:{PASSWORD}x@h/p", f"https://{USER}:{PASSWORD[:-1]}@h/p",
    f"https://{USER}@h/p"])
async def test_wrong_credentials(url: str) -> None:
    await refused(request(DELIVERY, basic=authorization(url)), BASIC)


@pytest.mark.parametrize("header", [
    "", "Basic", "Basic !!!", "Bearer " + PASSWORD,
    "Basic " + base64.b64encode(f"{USER}{PASSWORD}".encode()).decode(),  # no colon
    "Digest " + base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode(),
    "Basic " + "ü" * 8])
async def test_malformed_authorization(header: str) -> None:
    await refused(request(DELIVERY, basic=header), BASIC)


async def test_the_basic_scheme_is_case_insensitive() -> None:
    header = authorization().replace("Basic", "basic")
    assert len(await parse(request(DELIVERY, basic=header), BASIC, NOW, no_fetch)) == 1


@pytest.mark.parametrize("secret", [None, "", "wrong", SECRET[:-1], SECRET + "0", SECRET.upper()])
async def test_wrong_or_missing_secret_header(secret: str | None) -> None:
    await refused(request(DELIVERY, secret=secret), HEADER)


async def test_both_configured_both_required() -> None:
    await refused(request(DELIVERY, secret=None), BOTH)
    await refused(request(DELIVERY, basic=""), BOTH)


async def test_not_configured() -> None:
    await refused(request(DELIVERY), PostmarkSettings())
    await refused(request(DELIVERY), PostmarkSettings(username=USER))  # half a pair is not auth


async def test_credentials_are_checked_before_the_body_is_read() -> None:
    await refused(request(None, secret="wrong", body=b"{not json"), HEADER)


# -- authenticated but unreadable: BadReceipt --


@pytest.mark.parametrize("body", [b"", b"{not json", json.dumps(DELIVERY).encode()[:40],
                                  b"[]", b'{"MessageID": "x"}', b'{"RecordType": 7}'])
async def test_authenticated_but_unreadable(body: bytes) -> None:
    with pytest.raises(BadReceipt):
        await parse(request(None, body=body), BOTH, NOW, no_fetch)


# -- settings --


def test_settings() -> None:
    assert not PostmarkSettings().enabled()
    for good in (BASIC, HEADER, BOTH):
        assert good.enabled() and good.problems() == []
    cases = {
        PostmarkSettings(username=USER): ["password"],
        PostmarkSettings(password=PASSWORD): ["username"],
        PostmarkSettings(username="a:b", password=PASSWORD): ["username"],
        PostmarkSettings(header_name=SECRET_HEADER): ["header_value"],
        PostmarkSettings(header_value=SECRET): ["header_name"],
        PostmarkSettings(header_name="X Secret", header_value=SECRET): ["header_name"],
        PostmarkSettings(username=USER, password=PASSWORD, header_name="Authorization",
                         header_value=SECRET): ["header_name"],
        PostmarkSettings(header_name=SECRET_HEADER, header_value=" padded"): ["header_value"],
        PostmarkSettings(header_name=SECRET_HEADER, header_value="line\nbreak"): ["header_value"],
    }
    for settings, keys in cases.items():
        problems = settings.problems()
        assert [k for k, _ in problems] == keys, settings
        assert not any(PASSWORD in m or SECRET in m for _, m in problems)
    assert PROVIDER.name == "postmark" and PROVIDER.settings is PostmarkSettings
